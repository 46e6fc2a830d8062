/* test_cuda_matmul.c - the GPU matmul (fused, skinny, wgmma and gemv kernels and
 * the dequantize + cuBLAS path) against bfp_matmul_ref: every weight format, m in 1, 3, 16, 17, 128,
 * 300 and 4096, n and k that are not multiples of the tiles, random and
 * outlier-heavy data, bias, unaligned x; ||y - ref|| / ||ref|| < 5e-3, no NaN,
 * every output written (y is poisoned with NaN first), the workspace left
 * zeroed (a second call is as good), one workspace shared by every path in
 * turn, NaN weight blocks giving NaN columns, two products on two streams at
 * once and on two threads at once (each thread's cuBLAS handle), every path
 * under a non-default tuning, two GEMV calls chained with programmatic
 * dependent launch, the GEMV cases again with cluster plans (gemv_split = 2;
 * BFP_TEST_GEMV_ONLY=1 runs the GEMV cases alone, for the sanitizers), the wgmma kernel with 2 and 3 consumer warpgroups
 * (BFP_TEST_WGMMA_ONLY=1 runs its cases alone). The BFP_MATMUL_* variables (bench/gpu.sh) set
 * the tuning of every other case (matmul_tuning_env.h). The packed-weight API
 * and the tuning's argument checks: test_cuda_matmul_api.c. Without a GPU it
 * prints "skipped: no GPU" and passes. */
#include "bfp.h"
#include "check.h"
#include "matmul_tuning_env.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BFP_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "cuda_matmul_util.h"

#include <pthread.h>

static bfp_matmul_tuning env_tuning;
static const bfp_matmul_tuning *tun; /* the cases' tuning: NULL, or BFP_MATMUL_*'s */
static int hopper; /* compute capability 9.0: BFP_MATMUL_WGMMA runs, AUTO takes it */

/* The workspace front that the kernels at m <= 32 use and leave zero
 * (bfp.h): the most any of them needs at the default tuning, 256-aligned */
static size_t zero_front(const bfp_cuda_weight *dw)
{
    static const bfp_matmul_path small[] = {BFP_MATMUL_FUSED, BFP_MATMUL_SKINNY, BFP_MATMUL_GEMV};
    size_t most = 0;
    for (size_t m = 1; m <= 32; m++)
        for (int i = 0; i < 3; i++) {
            const size_t b = bfp_cuda_matmul_workspace_size_ex(dw, m, small[i], NULL);
            most = b > most ? b : most;
        }
    return (most + 255) / 256 * 256;
}

/* One case: returns nothing, CHECKs inside. */
static void run_case(bfp_format f, size_t m, size_t n, size_t k, int heavy, int bias_on,
                     int unaligned, bfp_matmul_path path)
{
    if (path == BFP_MATMUL_WGMMA && !hopper)
        return;
    const char *name = bfp_format_get(f)->name;
    hplanes w;
    make_weight(f, n, k, heavy, -1, &w);
    uint16_t *x = malloc((m * k + 1) * 2), *bias = malloc(n * 2), *y = malloc(m * n * 2);
    uint16_t *y2 = malloc(m * n * 2);
    float *ref = malloc(m * n * sizeof *ref);
    for (size_t i = 0; i < m * k; i++) {
        double v = gauss();
        if (heavy && (i % k) % 37 == 5)
            v *= 30.0; /* outlier channels of x */
        x[i] = bfp_f32_to_bf16((float)v);
    }
    for (size_t i = 0; i < n; i++)
        bias[i] = bfp_f32_to_bf16((float)gauss());
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    CHECK(bfp_matmul_ref(f, &cw, n, k, x, m, bias_on ? bias : NULL, ref) == BFP_OK, "ref");

    bfp_cuda_weight *dw = NULL;
    bfp_status st = bfp_cuda_weight_upload(f, &cw, n, k, &dw);
    CHECK(st == BFP_OK, "%s upload: %s", name, bfp_status_str(st));
    if (st != BFP_OK)
        goto out;
    void *dx, *dbias, *dy, *dws = NULL;
    size_t wsb = bfp_cuda_matmul_workspace_size_ex(dw, m, path, tun);
    CU(cudaMalloc(&dx, (m * k + 8) * 2));
    CU(cudaMalloc(&dbias, n * 2));
    CU(cudaMalloc(&dy, m * n * 2));
    if (wsb) {
        CU(cudaMalloc(&dws, wsb));
        CU(cudaMemset(dws, 0, wsb));
    }
    char *xp = (char *)dx + (unaligned ? 2 : 0);
    CU(cudaMemcpy(xp, x, m * k * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dbias, bias, n * 2, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 2; rep++) {
        CU(cudaMemset(dy, 0xFF, m * n * 2)); /* NaN poison: unwritten tiles show */
        st = bfp_cuda_matmul_ex(dw, xp, m, bias_on ? dbias : NULL, dy, dws, wsb, path, tun, NULL);
        CHECK(st == BFP_OK, "%s matmul: %s", name, bfp_status_str(st));
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(rep ? y2 : y, dy, m * n * 2, cudaMemcpyDeviceToHost));
    }
    /* split-K sums meet through fp32 atomics, so a second call may round
     * differently; both must be accurate and complete */
    for (int rep = 0; rep < 2; rep++) {
        double num, den;
        size_t nans = err_sums(rep ? y2 : y, ref, m * n, &num, &den);
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        CHECK(nans == 0 && rel < 5e-3,
              "%s path %d m=%zu n=%zu k=%zu heavy=%d bias=%d unaligned=%d call %d: rel err "
              "%.3g, %zu NaN",
              name, (int)path, m, n, k, heavy, bias_on, unaligned, rep + 1, rel, nans);
    }
    if (wsb) {
        /* the kernels' split-K workspace must be zero again: all of it for
         * the fused, skinny and GEMV kernels; the front that the small-m
         * kernels keep zero for the wgmma kernel, whose split slices after
         * it are scratch (bfp.h) */
        const bfp_matmul_path ran =
            path == BFP_MATMUL_AUTO ? bfp_cuda_matmul_auto_path_ex(dw, m, tun) : path;
        if (ran != BFP_MATMUL_DEQUANT_CUBLAS) {
            const size_t front = zero_front(dw);
            const size_t upto = ran == BFP_MATMUL_WGMMA && front < wsb ? front : wsb;
            size_t nz = device_nonzero_bytes(dws, upto);
            CHECK(nz == 0, "%s path %d m=%zu n=%zu k=%zu: %zu of %zu workspace bytes left nonzero",
                  name, (int)ran, m, n, k, nz, upto);
        }
        CU(cudaFree(dws));
    }
    CU(cudaFree(dx));
    CU(cudaFree(dbias));
    CU(cudaFree(dy));
    bfp_cuda_weight_free(dw);
out:
    free(x), free(bias), free(y), free(y2), free(ref);
    free_weight(&w);
}

/* A NaN in W makes its block NaN: that column of y is NaN, the others not. */
static void nan_case(bfp_format f, bfp_matmul_path path)
{
    if (path == BFP_MATMUL_WGMMA && !hopper)
        return;
    size_t m = 3, n = 40, k = 200;
    hplanes w;
    make_weight(f, n, k, 0, 17, &w);
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    uint16_t x[3 * 200], y[3 * 40];
    for (size_t i = 0; i < m * k; i++)
        x[i] = bfp_f32_to_bf16((float)gauss());
    bfp_cuda_weight *dw;
    CHECK(bfp_cuda_weight_upload(f, &cw, n, k, &dw) == BFP_OK, "upload");
    void *dx, *dy, *dws;
    size_t wsb = bfp_cuda_matmul_workspace_size_ex(dw, m, path, tun);
    CU(cudaMalloc(&dx, sizeof x));
    CU(cudaMalloc(&dy, sizeof y));
    CU(cudaMalloc(&dws, wsb + 1));
    CU(cudaMemset(dws, 0, wsb + 1));
    CU(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice));
    CHECK(bfp_cuda_matmul_ex(dw, dx, m, NULL, dy, dws, wsb, path, tun, NULL) == BFP_OK, "matmul");
    CU(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost));
    int good = 1;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            good &= (j == 17) == (isnan(bfp_bf16_to_f32(y[i * n + j])) != 0);
    CHECK(good, "%s path %d: NaN block must give a NaN column 17 and nothing else",
          bfp_format_get(f)->name, (int)path);
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(dws));
    bfp_cuda_weight_free(dw);
    free_weight(&w);
}

/* Two different products (format, shape, bias) on two streams at once, each
 * with its own workspace, calls interleaved: both must match their reference
 * (AUTO: the wgmma kernel with a K split on Hopper, else dequant + cuBLAS);
 * then the same from two host threads, through dequant + cuBLAS (each
 * thread's own cuBLAS handle). */
typedef struct {
    bfp_format f;
    size_t m, n, k;
    int bias_on;
    bfp_matmul_path path;
    hplanes w;
    uint16_t *x, *bias, *y;
    float *ref;
    bfp_cuda_weight *dw;
    void *dx, *dbias, *dy, *dws;
    size_t wsb;
    cudaStream_t s;
    bfp_status st; /* a thread's first error */
} stream_job;

static void job_setup(stream_job *b)
{
    make_weight(b->f, b->n, b->k, 1, -1, &b->w);
    b->x = malloc(b->m * b->k * 2), b->bias = malloc(b->n * 2), b->y = malloc(b->m * b->n * 2);
    b->ref = malloc(b->m * b->n * sizeof *b->ref);
    for (size_t i = 0; i < b->m * b->k; i++)
        b->x[i] = bfp_f32_to_bf16((float)gauss());
    for (size_t i = 0; i < b->n; i++)
        b->bias[i] = bfp_f32_to_bf16((float)gauss());
    bfp_const_planes cw = {b->w.codes, b->w.scales, b->w.meta, &b->w.ts};
    CHECK(bfp_matmul_ref(b->f, &cw, b->n, b->k, b->x, b->m, b->bias_on ? b->bias : NULL,
                         b->ref) == BFP_OK, "ref");
    CHECK(bfp_cuda_weight_upload(b->f, &cw, b->n, b->k, &b->dw) == BFP_OK, "upload");
    b->wsb = bfp_cuda_matmul_workspace_size_ex(b->dw, b->m, b->path, tun);
    CU(cudaMalloc(&b->dx, b->m * b->k * 2));
    CU(cudaMalloc(&b->dbias, b->n * 2));
    CU(cudaMalloc(&b->dy, b->m * b->n * 2));
    CU(cudaMalloc(&b->dws, b->wsb + 1));
    CU(cudaMemset(b->dws, 0, b->wsb + 1));
    CU(cudaMemcpy(b->dx, b->x, b->m * b->k * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(b->dbias, b->bias, b->n * 2, cudaMemcpyHostToDevice));
    CU(cudaMemset(b->dy, 0xFF, b->m * b->n * 2));
    CU(cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking));
    b->st = BFP_OK;
}

static bfp_status job_call(stream_job *b)
{
    return bfp_cuda_matmul_ex(b->dw, b->dx, b->m, b->bias_on ? b->dbias : NULL, b->dy, b->dws,
                              b->wsb, b->path, tun, b->s);
}

/* a thread's part: 4 calls, then wait for them (no CHECK: its counters
 * are the main thread's) */
static void *job_thread(void *arg)
{
    stream_job *b = arg;
    for (int rep = 0; rep < 4 && b->st == BFP_OK; rep++)
        b->st = job_call(b);
    if (b->st == BFP_OK && cudaStreamSynchronize(b->s) != cudaSuccess)
        b->st = BFP_ERR_DEVICE;
    return NULL;
}

static void job_check_free(stream_job *b, const char *what)
{
    CHECK(b->st == BFP_OK, "%s: %s", what, bfp_status_str(b->st));
    CU(cudaStreamSynchronize(b->s));
    CU(cudaMemcpy(b->y, b->dy, b->m * b->n * 2, cudaMemcpyDeviceToHost));
    double num, den;
    size_t nans = err_sums(b->y, b->ref, b->m * b->n, &num, &den);
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK(nans == 0 && rel < 5e-3, "%s, %s m=%zu: rel err %.3g, %zu NaN", what,
          bfp_format_get(b->f)->name, b->m, rel, nans);
    CU(cudaStreamDestroy(b->s));
    CU(cudaFree(b->dx));
    CU(cudaFree(b->dbias));
    CU(cudaFree(b->dy));
    CU(cudaFree(b->dws));
    bfp_cuda_weight_free(b->dw);
    free(b->x), free(b->bias), free(b->y), free(b->ref);
    free_weight(&b->w);
}

static void two_streams_case(void)
{
    stream_job jobs[2] = {{.f = BFP_MXFP4_PLUS, .m = 128, .n = 1000, .k = 2048, .bias_on = 1},
                          {.f = BFP_NVFP4, .m = 64, .n = 520, .k = 1300, .bias_on = 0}};
    for (int j = 0; j < 2; j++)
        job_setup(&jobs[j]);
    for (int rep = 0; rep < 4; rep++)
        for (int j = 0; j < 2; j++)
            if (jobs[j].st == BFP_OK)
                jobs[j].st = job_call(&jobs[j]);
    for (int j = 0; j < 2; j++)
        job_check_free(&jobs[j], "two streams");
}

static void two_threads_case(void)
{
    stream_job jobs[2] = {{.f = BFP_HIF4, .m = 300, .n = 700, .k = 1500, .bias_on = 1,
                           .path = BFP_MATMUL_DEQUANT_CUBLAS},
                          {.f = BFP_MXFP4, .m = 77, .n = 260, .k = 3000, .bias_on = 0,
                           .path = BFP_MATMUL_DEQUANT_CUBLAS}};
    pthread_t th[2];
    for (int j = 0; j < 2; j++)
        job_setup(&jobs[j]);
    for (int j = 0; j < 2; j++)
        CHECK(pthread_create(&th[j], NULL, job_thread, &jobs[j]) == 0, "pthread_create");
    for (int j = 0; j < 2; j++)
        CHECK(pthread_join(th[j], NULL) == 0, "pthread_join");
    for (int j = 0; j < 2; j++)
        job_check_free(&jobs[j], "two threads");
}

/* One workspace, zeroed once, for every path in turn (an engine's prefill
 * through dequantize + cuBLAS, then decode through the small-m kernels): the
 * dequantize path must not leave W where the kernels expect zeros, nor the
 * wgmma kernel's K split (AUTO at m = 40 and 64 on Hopper: 4 splits, its
 * counters in the zero front) anything there. */
/* AUTO's rule: the GEMV kernel for m = 9..16 on a weight of 2^22 elements
 * or more, for m = 2..8 from 2^25 and for mxfp4 at m = 1 from 2^26, the
 * skinny kernel for the rest of m = 1 from 2^27; at m = 17..32 from 2^24
 * wgmma (k >= n) or skinny (n > k); the fused one for the rest up to
 * m = 32, then wgmma or
 * dequantize + cuBLAS; and AUTO gives the path's result on the large weight
 * (at m = 2: GEMV). Its planes are random bytes (codes) under scales near
 * 1, so no reference quantize of 2^27 values is needed. */

/* from 2^27 elements with n > k: skinny at m = 1 (mxfp4: GEMV), GEMV at
 * 2..16, skinny at 17..32 */
static const bfp_matmul_path BIG_RULE[6] = {BFP_MATMUL_SKINNY, BFP_MATMUL_GEMV, BFP_MATMUL_GEMV,
                                            BFP_MATMUL_GEMV,   BFP_MATMUL_GEMV, BFP_MATMUL_SKINNY};
static const bfp_matmul_path BIG_RULE_MXFP4[6] = {BFP_MATMUL_GEMV, BFP_MATMUL_GEMV,
                                                  BFP_MATMUL_GEMV, BFP_MATMUL_GEMV,
                                                  BFP_MATMUL_GEMV, BFP_MATMUL_SKINNY};

/* AUTO's path at m = 1, 2, 8, 9, 16 and 17 is want[0..5] */
static void check_auto(const bfp_cuda_weight *w, const bfp_matmul_path want[6], const char *what)
{
    static const size_t ms[6] = {1, 2, 8, 9, 16, 17};
    int ok = 1;
    for (int i = 0; i < 6; i++)
        ok &= bfp_cuda_matmul_auto_path(w, ms[i]) == want[i];
    CHECK(ok, what);
}

/* NVFP4+ follows the same rule on large weights; only the choice is
 * checked, on random planes */
static void auto_rule_nvfp4plus(size_t n, size_t k)
{
    bfp_plane_sizes sz;
    CHECK(bfp_plane_sizes_for(BFP_NVFP4_PLUS, n, k, &sz) == BFP_OK, "nvfp4+ sizes");
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales), *meta = malloc(sz.meta);
    const float ts = 1.0f;
    for (size_t i = 0; i < sz.codes; i++)
        codes[i] = (uint8_t)(prng_next(&rng) >> 24);
    for (size_t i = 0; i < sz.scales; i++)
        scales[i] = (uint8_t)(0x30 + prng_next(&rng) % 8);
    for (size_t i = 0; i < sz.meta; i++)
        meta[i] = (uint8_t)(prng_next(&rng) >> 24);
    bfp_const_planes cw = {codes, scales, meta, &ts};
    bfp_cuda_weight *w = NULL;
    CHECK(bfp_cuda_weight_upload(BFP_NVFP4_PLUS, &cw, n, k, &w) == BFP_OK, "upload nvfp4+");
    if (w)
        check_auto(w, BIG_RULE, "AUTO's path choice, nvfp4+");
    bfp_cuda_weight_free(w);
    free(codes), free(scales), free(meta);
}

static void auto_rule_case(void)
{
    const size_t n = 16384, k = 8192, m = 2;
    bfp_plane_sizes sz;
    CHECK(bfp_plane_sizes_for(BFP_MXFP4, n, k, &sz) == BFP_OK, "sizes");
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales);
    for (size_t i = 0; i < sz.codes; i++)
        codes[i] = (uint8_t)(prng_next(&rng) >> 24);
    for (size_t i = 0; i < sz.scales; i++)
        scales[i] = (uint8_t)(124 + prng_next(&rng) % 6);
    bfp_const_planes cw = {codes, scales, NULL, NULL};
    uint16_t *x = malloc(m * k * 2), *y = malloc(m * n * 2);
    float *ref = malloc(m * n * sizeof *ref);
    for (size_t i = 0; i < m * k; i++)
        x[i] = bfp_f32_to_bf16((float)gauss());
    CHECK(bfp_matmul_ref(BFP_MXFP4, &cw, n, k, x, m, NULL, ref) == BFP_OK, "ref");
    bfp_cuda_weight *big = NULL, *small = NULL, *mid = NULL, *w22 = NULL, *w25 = NULL;
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, n, k, &big) == BFP_OK, "upload big");
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, 64, 1024, &small) == BFP_OK, "upload small");
    /* the first rows of the same planes: 8192 x 8192 (2^26), 4096 x 8192 (2^25)
     * and 512 x 8192 (2^22), the GEMV thresholds at m = 2..8 and 9..16 */
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, n / 2, k, &mid) == BFP_OK, "upload 8192^2");
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, n / 4, k, &w25) == BFP_OK, "upload 2^25");
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, n / 32, k, &w22) == BFP_OK, "upload 2^22");
    if (!big || !small || !mid || !w22 || !w25)
        goto out;
    /* above m = 32: the wgmma kernel up to 1024 on Hopper, else dequant + cuBLAS */
    const bfp_matmul_path mid_path = hopper ? BFP_MATMUL_WGMMA : BFP_MATMUL_DEQUANT_CUBLAS;
    const bfp_matmul_path F = BFP_MATMUL_FUSED, G = BFP_MATMUL_GEMV;
    /* m = 17..32 from 2^24: wgmma where k >= n (Hopper; else skinny) */
    const bfp_matmul_path W17 = hopper ? BFP_MATMUL_WGMMA : BFP_MATMUL_SKINNY;
    const bfp_matmul_path mid_rule[6] = {G, G, G, G, G, W17}, w25_rule[6] = {F, G, G, G, G, W17},
                          small_rule[6] = {F, F, F, G, G, F};
    check_auto(w25, w25_rule, "AUTO's path choice at 2^25");
    check_auto(mid, mid_rule, "AUTO's path choice at 8192 x 8192");
    check_auto(w22, small_rule, "AUTO's path choice at 2^22");
    check_auto(big, BIG_RULE_MXFP4, "AUTO's path choice at 2^27");
    CHECK(bfp_cuda_matmul_auto_path(big, 33) == mid_path &&
              bfp_cuda_matmul_auto_path(big, 256) == mid_path &&
              bfp_cuda_matmul_auto_path(big, 257) == mid_path &&
              bfp_cuda_matmul_auto_path(big, 1024) == mid_path &&
              bfp_cuda_matmul_auto_path(big, 1025) == BFP_MATMUL_DEQUANT_CUBLAS &&
              bfp_cuda_matmul_auto_path(big, 32) == BFP_MATMUL_SKINNY &&
              bfp_cuda_matmul_auto_path(mid, 32) == W17 &&
              bfp_cuda_matmul_auto_path(w25, 32) == W17 &&
              bfp_cuda_matmul_auto_path(w22, 32) == BFP_MATMUL_FUSED &&
              bfp_cuda_matmul_auto_path(small, 1) == BFP_MATMUL_FUSED &&
              bfp_cuda_matmul_auto_path(small, 32) == BFP_MATMUL_FUSED &&
              bfp_cuda_matmul_auto_path(small, 33) == mid_path &&
              bfp_cuda_matmul_auto_path(small, 1025) == BFP_MATMUL_DEQUANT_CUBLAS,
          "AUTO's path choice");
    /* above 1024: the wgmma kernel where k >= n and the plan has no K split
     * (8192^2: 64 x 5..16 CTAs), dequant + cuBLAS where n > k (16384 x 8192)
     * or the CTAs are few (64 x 1024: a split) */
    CHECK(bfp_cuda_matmul_auto_path(mid, 1025) == mid_path &&
              bfp_cuda_matmul_auto_path(mid, 4096) == mid_path &&
              bfp_cuda_matmul_auto_path(big, 4096) == BFP_MATMUL_DEQUANT_CUBLAS &&
              bfp_cuda_matmul_auto_path(small, 4096) == BFP_MATMUL_DEQUANT_CUBLAS,
          "AUTO's path choice above m = 1024");
    /* gemv_pdl = 1: the GEMV kernel at every m <= 16 on Hopper */
    const bfp_matmul_tuning pdl = {.gemv_pdl = 1};
    const bfp_matmul_path pg = hopper ? BFP_MATMUL_GEMV : BFP_MATMUL_FUSED;
    CHECK(bfp_cuda_matmul_auto_path_ex(small, 1, &pdl) == pg &&
              bfp_cuda_matmul_auto_path_ex(w25, 1, &pdl) == pg &&
              bfp_cuda_matmul_auto_path_ex(w22, 8, &pdl) == pg &&
              bfp_cuda_matmul_auto_path_ex(big, 16, &pdl) == BFP_MATMUL_GEMV &&
              bfp_cuda_matmul_auto_path_ex(big, 17, &pdl) == BFP_MATMUL_SKINNY &&
              bfp_cuda_matmul_auto_path_ex(w25, 1, NULL) == BFP_MATMUL_FUSED,
          "AUTO's path choice with gemv_pdl = 1");
    CHECK(bfp_cuda_matmul_workspace_size_ex(big, m, BFP_MATMUL_AUTO, tun) ==
              bfp_cuda_matmul_workspace_size_ex(big, m, BFP_MATMUL_GEMV, tun),
          "AUTO's workspace is the GEMV kernel's");
    size_t wsb = bfp_cuda_matmul_workspace_size_ex(big, m, BFP_MATMUL_AUTO, tun);
    void *dx, *dy, *dws = NULL;
    CU(cudaMalloc(&dx, m * k * 2));
    CU(cudaMalloc(&dy, m * n * 2));
    if (wsb) {
        CU(cudaMalloc(&dws, wsb));
        CU(cudaMemset(dws, 0, wsb));
    }
    CU(cudaMemcpy(dx, x, m * k * 2, cudaMemcpyHostToDevice));
    CU(cudaMemset(dy, 0xFF, m * n * 2)); /* NaN: unwritten outputs show */
    CHECK(bfp_cuda_matmul_ex(big, dx, m, NULL, dy, dws, wsb, BFP_MATMUL_AUTO, tun, NULL) == BFP_OK,
          "AUTO on the large weight");
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(y, dy, m * n * 2, cudaMemcpyDeviceToHost));
    double num, den;
    size_t nans = err_sums(y, ref, m * n, &num, &den);
    CHECK(nans == 0 && sqrt(num / den) < 5e-3, "AUTO large weight: rel err %.3g, %zu NaN",
          sqrt(num / den), nans);
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    if (dws)
        CU(cudaFree(dws));
out:
    bfp_cuda_weight_free(big);
    bfp_cuda_weight_free(small);
    bfp_cuda_weight_free(mid);
    bfp_cuda_weight_free(w25);
    bfp_cuda_weight_free(w22);
    free(codes), free(scales), free(x), free(y), free(ref);
    auto_rule_nvfp4plus(n, k);
}

static void shared_ws_case(bfp_format f)
{
    static const struct {
        bfp_matmul_path path;
        size_t m;
    } seq[] = {{BFP_MATMUL_DEQUANT_CUBLAS, 64}, {BFP_MATMUL_FUSED, 1},  {BFP_MATMUL_SKINNY, 16},
               {BFP_MATMUL_AUTO, 64},           {BFP_MATMUL_FUSED, 48}, {BFP_MATMUL_FUSED, 5},
               {BFP_MATMUL_DEQUANT_CUBLAS, 40}, {BFP_MATMUL_FUSED, 64}, {BFP_MATMUL_AUTO, 1},
               {BFP_MATMUL_SKINNY, 32},         {BFP_MATMUL_GEMV, 16},  {BFP_MATMUL_DEQUANT_CUBLAS, 33},
               {BFP_MATMUL_GEMV, 1},            {BFP_MATMUL_GEMV, 9},   {BFP_MATMUL_AUTO, 40},
               {BFP_MATMUL_AUTO, 64},           {BFP_MATMUL_GEMV, 16},  {BFP_MATMUL_SKINNY, 3},
               {BFP_MATMUL_FUSED, 17}};
    const size_t n = 300, k = 1000, mmax = 64, nseq = sizeof seq / sizeof seq[0];
    const char *name = bfp_format_get(f)->name;
    hplanes w;
    make_weight(f, n, k, 1, -1, &w);
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    uint16_t *x = malloc(mmax * k * 2), *y = malloc(mmax * n * 2);
    float *ref = malloc(mmax * n * sizeof *ref);
    for (size_t i = 0; i < mmax * k; i++)
        x[i] = bfp_f32_to_bf16((float)gauss());
    bfp_cuda_weight *dw = NULL;
    CHECK(bfp_cuda_weight_upload(f, &cw, n, k, &dw) == BFP_OK, "%s upload", name);
    if (!dw)
        goto out;
    size_t wsb = 0;
    for (size_t i = 0; i < nseq; i++) {
        size_t b = bfp_cuda_matmul_workspace_size_ex(dw, seq[i].m, seq[i].path, tun);
        wsb = b > wsb ? b : wsb;
    }
    void *dx, *dy, *dws;
    CU(cudaMalloc(&dx, mmax * k * 2));
    CU(cudaMalloc(&dy, mmax * n * 2));
    CU(cudaMalloc(&dws, wsb));
    CU(cudaMemset(dws, 0, wsb)); /* once */
    const size_t zf = zero_front(dw), front = zf < wsb ? zf : wsb; /* kept zero by every call */
    CU(cudaMemcpy(dx, x, mmax * k * 2, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < nseq; i++) {
        size_t m = seq[i].m; /* the first m rows of x */
        CHECK(bfp_matmul_ref(f, &cw, n, k, x, m, NULL, ref) == BFP_OK, "ref");
        CU(cudaMemset(dy, 0xFF, m * n * 2));
        bfp_status st = bfp_cuda_matmul_ex(dw, dx, m, NULL, dy, dws, wsb, seq[i].path, tun, NULL);
        CHECK(st == BFP_OK, "%s shared workspace, step %zu: %s", name, i, bfp_status_str(st));
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(y, dy, m * n * 2, cudaMemcpyDeviceToHost));
        double num, den;
        size_t nans = err_sums(y, ref, m * n, &num, &den);
        double rel = sqrt(num / den);
        CHECK(nans == 0 && rel < 5e-3,
              "%s shared workspace, step %zu (path %d, m=%zu): rel err %.3g, %zu NaN", name, i,
              (int)seq[i].path, m, rel, nans);
        CHECK(device_nonzero_bytes(dws, front) == 0, "%s shared workspace, step %zu (path %d, m=%zu): "
              "the front left nonzero", name, i, (int)seq[i].path, m);
    }
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(dws));
    bfp_cuda_weight_free(dw);
out:
    free(x), free(y), free(ref);
    free_weight(&w);
}

/* Two GEMV calls in a row, the second's x the first's y, both launched
 * with programmatic dependent launch (tuning gemv_pdl): the second reads W
 * early but must see all of the first's y (poisoned with NaN before) */
static void pdl_chain_case(bfp_format f, size_t m)
{
    const size_t n1 = 1000, k1 = 3000, n2 = 700;
    hplanes w1, w2;
    make_weight(f, n1, k1, 1, -1, &w1);
    make_weight(f, n2, n1, 0, -1, &w2);
    bfp_const_planes c1 = {w1.codes, w1.scales, w1.meta, &w1.ts};
    bfp_const_planes c2 = {w2.codes, w2.scales, w2.meta, &w2.ts};
    uint16_t *x = malloc(m * k1 * 2), *y1 = malloc(m * n1 * 2), *y2 = malloc(m * n2 * 2);
    float *ref = malloc(m * n2 * sizeof *ref);
    for (size_t i = 0; i < m * k1; i++)
        x[i] = bfp_f32_to_bf16((float)gauss());
    bfp_cuda_weight *d1 = NULL, *d2 = NULL;
    CHECK(bfp_cuda_weight_upload(f, &c1, n1, k1, &d1) == BFP_OK &&
              bfp_cuda_weight_upload(f, &c2, n2, n1, &d2) == BFP_OK,
          "pdl chain upload");
    if (d1 && d2) {
        size_t b1 = bfp_cuda_matmul_workspace_size_ex(d1, m, BFP_MATMUL_GEMV, tun);
        size_t b2 = bfp_cuda_matmul_workspace_size_ex(d2, m, BFP_MATMUL_GEMV, tun);
        size_t wsb = b1 > b2 ? b1 : b2;
        void *dx, *dy1, *dy2, *dws;
        CU(cudaMalloc(&dx, m * k1 * 2));
        CU(cudaMalloc(&dy1, m * n1 * 2));
        CU(cudaMalloc(&dy2, m * n2 * 2));
        CU(cudaMalloc(&dws, wsb + 1));
        CU(cudaMemset(dws, 0, wsb + 1));
        CU(cudaMemcpy(dx, x, m * k1 * 2, cudaMemcpyHostToDevice));
        for (int rep = 0; rep < 3; rep++) {
            CU(cudaMemset(dy1, 0xFF, m * n1 * 2));
            CU(cudaMemset(dy2, 0xFF, m * n2 * 2));
            CU(cudaDeviceSynchronize());
            CHECK(bfp_cuda_matmul_ex(d1, dx, m, NULL, dy1, dws, wsb, BFP_MATMUL_GEMV, tun,
                                     NULL) == BFP_OK &&
                      bfp_cuda_matmul_ex(d2, dy1, m, NULL, dy2, dws, wsb, BFP_MATMUL_GEMV, tun,
                                         NULL) == BFP_OK,
                  "pdl chain calls");
            CU(cudaDeviceSynchronize());
            CU(cudaMemcpy(y1, dy1, m * n1 * 2, cudaMemcpyDeviceToHost));
            CU(cudaMemcpy(y2, dy2, m * n2 * 2, cudaMemcpyDeviceToHost));
            CHECK(bfp_matmul_ref(f, &c2, n2, n1, y1, m, NULL, ref) == BFP_OK, "ref");
            double num, den;
            size_t nans = err_sums(y2, ref, m * n2, &num, &den);
            double rel = den > 0 ? sqrt(num / den) : sqrt(num);
            CHECK(nans == 0 && rel < 5e-3, "%s pdl chain m=%zu rep %d: rel err %.3g, %zu NaN",
                  bfp_format_get(f)->name, m, rep, rel, nans);
        }
        CU(cudaFree(dx));
        CU(cudaFree(dy1));
        CU(cudaFree(dy2));
        CU(cudaFree(dws));
    }
    bfp_cuda_weight_free(d1);
    bfp_cuda_weight_free(d2);
    free(x), free(y1), free(y2), free(ref);
    free_weight(&w1);
    free_weight(&w2);
}

/* The GEMV's stages hold only m rows of x; the fragments read the rest as
 * whatever an earlier call left there. An m = 8 call whose rows 1..7 are
 * NaN, then m = 1 on the same weight: y must match the reference, no NaN. */
static void stale_x_case(bfp_format f)
{
    const char *name = bfp_format_get(f)->name;
    const size_t n = 1001, k = 4168;
    hplanes w;
    make_weight(f, n, k, 0, -1, &w);
    uint16_t *x = malloc(8 * k * 2), *y = malloc(n * 2);
    float *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < 8 * k; i++)
        x[i] = i < k ? bfp_f32_to_bf16((float)gauss()) : 0x7FC0u;
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    CHECK(bfp_matmul_ref(f, &cw, n, k, x, 1, NULL, ref) == BFP_OK, "ref");
    bfp_cuda_weight *dw = NULL;
    bfp_status st = bfp_cuda_weight_upload(f, &cw, n, k, &dw);
    CHECK(st == BFP_OK, "%s upload: %s", name, bfp_status_str(st));
    if (st != BFP_OK)
        goto out;
    size_t wsb = bfp_cuda_matmul_workspace_size_ex(dw, 8, BFP_MATMUL_GEMV, tun);
    const size_t ws1 = bfp_cuda_matmul_workspace_size_ex(dw, 1, BFP_MATMUL_GEMV, tun);
    wsb = ws1 > wsb ? ws1 : wsb;
    void *dx, *dy, *dws = NULL;
    CU(cudaMalloc(&dx, 8 * k * 2));
    CU(cudaMalloc(&dy, 8 * n * 2));
    if (wsb) {
        CU(cudaMalloc(&dws, wsb));
        CU(cudaMemset(dws, 0, wsb));
    }
    CU(cudaMemcpy(dx, x, 8 * k * 2, cudaMemcpyHostToDevice));
    st = bfp_cuda_matmul_ex(dw, dx, 8, NULL, dy, dws, wsb, BFP_MATMUL_GEMV, tun, NULL);
    CHECK(st == BFP_OK, "%s m = 8 with NaN rows: %s", name, bfp_status_str(st));
    CU(cudaMemset(dy, 0xFF, n * 2));
    st = bfp_cuda_matmul_ex(dw, dx, 1, NULL, dy, dws, wsb, BFP_MATMUL_GEMV, tun, NULL);
    CHECK(st == BFP_OK, "%s m = 1 after it: %s", name, bfp_status_str(st));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(y, dy, n * 2, cudaMemcpyDeviceToHost));
    double num, den;
    size_t nans = err_sums(y, ref, n, &num, &den);
    CHECK(nans == 0 && sqrt(num / den) < 5e-3,
          "%s GEMV m = 1 after NaN rows of x: rel err %.3g, %zu NaN", name, sqrt(num / den),
          nans);
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    if (dws)
        CU(cudaFree(dws));
    bfp_cuda_weight_free(dw);
out:
    free(x), free(y), free(ref);
    free_weight(&w);
}

/* The GEMV path: m 1..16 on odd n, k % 64 != 0 (x staged) and odd k (x
 * from global memory), groups split across CTAs; unaligned x; NaN blocks;
 * runs of whole groups (k <= 512: one unit per group) and runs that end
 * inside groups after whole ones */
static void gemv_cases(bfp_format f, int quick)
{
    static const size_t gm[] = {1, 2, 3, 8, 15, 16};
    for (size_t i = 0; i < sizeof gm / sizeof gm[0]; i++) {
        run_case(f, gm[i], 1001, 4168, (int)(i % 2), (int)(i % 3 != 1), 0, BFP_MATMUL_GEMV);
        if (!quick)
            run_case(f, gm[i], 333, 777, (int)(i % 2 == 0), (int)(i % 2), 0, BFP_MATMUL_GEMV);
    }
    run_case(f, 7, 200, 1000, 1, 0, 1, BFP_MATMUL_GEMV); /* unaligned x */
    nan_case(f, BFP_MATMUL_GEMV);
    stale_x_case(f);
    if (quick)
        return;
    run_case(f, 3, 40000, 256, 0, 1, 0, BFP_MATMUL_GEMV);
    run_case(f, 16, 20000, 1024, 1, 1, 0, BFP_MATMUL_GEMV);
    run_case(f, 1, 4096, 4096, 1, 1, 1, BFP_MATMUL_GEMV);
    run_case(f, 9, 1, 1, 0, 1, 0, BFP_MATMUL_GEMV);
    run_case(f, 16, 64, 64, 1, 1, 1, BFP_MATMUL_GEMV);
}

/* The GEMV path's cluster plans (tuning gemv_split = 2): the GEMV cases,
 * then shapes whose plans (the GPU's capacity decides) take clusters of 1 to
 * 8 CTAs with one or several groups each: 1024 x 4096 (16 groups of 8
 * chunks), 6144 x 4096 and 6000 x 4000 (96 and 94 groups: 3 per cluster of
 * 8), 3000 x 1000 (2 chunks), and 20000 x 512 (one chunk: clusters of 1);
 * then two with stream-K runs (gemv_split = 1) */
static void gemv_cluster_cases(bfp_format f, int quick)
{
    bfp_matmul_tuning tc = tun ? *tun : (bfp_matmul_tuning){0};
    tc.gemv_split = 2;
    const bfp_matmul_tuning *saved = tun;
    tun = &tc;
    gemv_cases(f, quick);
    run_case(f, 1, 6144, 4096, 1, 1, 0, BFP_MATMUL_GEMV);
    if (!quick) {
        run_case(f, 1, 1024, 4096, 0, 1, 0, BFP_MATMUL_GEMV);
        run_case(f, 2, 6000, 4000, 1, 0, 1, BFP_MATMUL_GEMV);
        run_case(f, 16, 6144, 2048, 0, 1, 0, BFP_MATMUL_GEMV);
        run_case(f, 4, 3000, 1000, 1, 0, 1, BFP_MATMUL_GEMV);
        run_case(f, 9, 20000, 512, 1, 1, 0, BFP_MATMUL_GEMV);
        tc.gemv_split = 1; /* the same weights with stream-K runs, as by default */
        run_case(f, 1, 4096, 4096, 0, 1, 0, BFP_MATMUL_GEMV);
        run_case(f, 16, 6144, 2048, 1, 1, 0, BFP_MATMUL_GEMV);
    }
    tun = saved;
}

static const size_t shapes[][3] = {/* m, n, k */
    {1, 256, 4096}, {3, 100, 640}, {16, 17, 1000}, {17, 300, 333}, {128, 512, 1024},
    {1, 1, 1},      {5, 33, 65},   {300, 130, 520}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* The wgmma kernel under the cases' tuning: the shapes, unaligned x, odd k,
 * huge rows, split K, m chunks, NaN blocks; quick: the first three shapes
 * and the four edge cases */
static void wgmma_cases(bfp_format f, int quick)
{
    size_t nshapes = quick ? 3 : NSHAPES;
    for (size_t si = 0; si < nshapes; si++)
        run_case(f, shapes[si][0], shapes[si][1], shapes[si][2], (int)(si % 2), (int)(si % 3 != 2),
                 0, BFP_MATMUL_WGMMA);
    run_case(f, 7, 64, 256, 1, 0, 1, BFP_MATMUL_WGMMA);    /* unaligned x */
    run_case(f, 65, 72, 1000, 1, 1, 1, BFP_MATMUL_WGMMA);  /* unaligned, 128 rows of x */
    run_case(f, 33, 40, 2048, 2, 0, 0, BFP_MATMUL_WGMMA);  /* huge rows, split K */
    run_case(f, 64, 200, 4160, 1, 1, 0, BFP_MATMUL_WGMMA); /* m 64, split K, pad column */
    if (quick)
        return;
    nan_case(f, BFP_MATMUL_WGMMA);
    run_case(f, 4096, 96, 256, 1, 1, 0, BFP_MATMUL_WGMMA);  /* 32 m chunks */
    run_case(f, 255, 300, 4160, 1, 1, 0, BFP_MATMUL_WGMMA); /* odd m, split K */
    run_case(f, 129, 1000, 130, 0, 0, 1, BFP_MATMUL_WGMMA); /* unaligned, odd k, 2 chunks */
}

/* wgmma_cases under a variant of the cases' tuning: consumers warpgroups
 * and bn rows of x per CTA (0: the default rule). With 3 consumers (CTAs of
 * 12 row tiles) n = 100, 300, 1000 ... leave the last CTA part-empty (TMA
 * zeros, outputs masked), 200 a CTA of one row tile, n = 384 whole CTAs;
 * with 256 rows of x (two n128 products per decoded A fragment, 5 stages,
 * registers moved by setmaxnreg) m = 4096, 1000 and 300 leave the last m
 * chunk part-empty, 512 gives two whole ones, 255 and 64 one. Then the
 * serial mainloop and AUTO with the tuning. mainloop: the tuning's
 * wgmma_serial (2: one k16 step at a time; then the serial one is not run). */
static void wgmma_variant_cases(bfp_format f, int quick, int consumers, int bn, int mainloop)
{
    bfp_matmul_tuning tv = tun ? *tun : (bfp_matmul_tuning){0};
    tv.wgmma_consumers = consumers;
    tv.wgmma_bn = bn;
    if (mainloop)
        tv.wgmma_serial = mainloop;
    const bfp_matmul_tuning *saved = tun;
    tun = &tv;
    wgmma_cases(f, quick);
    run_case(f, 128, 384, 1024, 1, 1, 0, BFP_MATMUL_WGMMA); /* two whole 12-tile CTAs */
    run_case(f, 512, 256, 1024, 1, 1, 0, BFP_MATMUL_WGMMA); /* two whole 256-row chunks */
    if (!quick) {
        run_case(f, 4096, 400, 512, 0, 1, 0, BFP_MATMUL_WGMMA); /* m chunks, 3 CTAs, one part-empty */
        run_case(f, 1000, 400, 512, 0, 1, 0, BFP_MATMUL_WGMMA); /* 4 chunks, odd n */
        run_case(f, 200, 96, 700, 1, 1, 0, BFP_MATMUL_AUTO);     /* AUTO's wgmma range */
        if (mainloop == 2) {
            tun = saved;
            return;
        }
        tv.wgmma_serial = !tv.wgmma_serial;
        run_case(f, 64, 200, 4160, 1, 1, 0, BFP_MATMUL_WGMMA);
        run_case(f, 300, 200, 4160, 1, 1, 0, BFP_MATMUL_WGMMA);
        run_case(f, 300, 130, 520, 0, 0, 1, BFP_MATMUL_WGMMA);
        run_case(f, 257, 130, 520, 0, 0, 1, BFP_MATMUL_WGMMA);
    }
    tun = saved;
}

/* the wgmma kernel's variants: 3 consumer warpgroups, 256 rows of x; the
 * mainloop one k16 step at a time with the default CTAs and those */
static void wgmma_variants(bfp_format f, int quick)
{
    wgmma_variant_cases(f, quick, 3, 0, 0);
    wgmma_variant_cases(f, quick, 2, 256, 0);
    wgmma_variant_cases(f, quick, 2, 0, 2);
    if (!quick) {
        wgmma_variant_cases(f, quick, 3, 0, 2);
        wgmma_variant_cases(f, quick, 2, 256, 2);
    }
}

/* Every kernel path under a non-default tuning (each knob off its
 * default), against the reference; one workspace shared by every path too */
static void tuned_cases(void)
{
    const bfp_matmul_tuning t = {.ctas_per_sm = 64, .warps_per_sm = 4,
                                 .post_max_m = 8, .wgmma_serial = 1, .gemv_pdl = 1,
                                 .wgmma_consumers = 3, .gemv_split = 2};
    const bfp_matmul_tuning *saved = tun;
    tun = &t;
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
        bfp_format f = fmts[fi];
        run_case(f, 3, 100, 2048, 1, 1, 0, BFP_MATMUL_FUSED);
        run_case(f, 1, 72, 4160, 1, 1, 0, BFP_MATMUL_SKINNY);
        run_case(f, 8, 72, 4160, 1, 0, 1, BFP_MATMUL_SKINNY);
        run_case(f, 64, 200, 4160, 1, 1, 0, BFP_MATMUL_WGMMA);
        run_case(f, 2, 1001, 4168, 1, 1, 0, BFP_MATMUL_GEMV);
        run_case(f, 16, 300, 777, 1, 0, 1, BFP_MATMUL_GEMV);
        shared_ws_case(f);
    }
    pdl_chain_case(BFP_MXFP4_PLUS, 1);
    pdl_chain_case(BFP_NVFP4, 16);
    bfp_matmul_tuning t1 = t; /* the chain again with stream-K runs */
    t1.gemv_split = 1;
    tun = &t1;
    pdl_chain_case(BFP_MXFP4, 1);
    pdl_chain_case(BFP_HIF4, 16);
    tun = saved;
}

int main(void)
{
    int r = matmul_tuning_from_env(&env_tuning);
    if (r < 0)
        return 2;
    tun = r ? &env_tuning : NULL;
    if (!bfp_cuda_available()) {
        printf("test_cuda_matmul: skipped: no GPU\n");
        return 0;
    }
    int major = 0, minor = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    hopper = major == 9 && minor == 0;
    const char *q = getenv("BFP_TEST_QUICK");
    int quick = q && *q && *q != '0'; /* memcheck: a few shapes */
    const char *go = getenv("BFP_TEST_GEMV_ONLY"); /* the GEMV path's cases alone */
    if (go && *go && *go != '0') {
        for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
            gemv_cases(fmts[fi], quick);
            gemv_cluster_cases(fmts[fi], quick);
            if (!quick)
                shared_ws_case(fmts[fi]);
        }
        if (!quick) {
            tuned_cases();
            auto_rule_case();
        }
        return check_summary("test_cuda_matmul");
    }
    const char *wo = getenv("BFP_TEST_WGMMA_ONLY"); /* the wgmma kernel's cases alone */
    if (wo && *wo && *wo != '0') {
        for (size_t fi = 0; hopper && fi < sizeof fmts / sizeof fmts[0]; fi++) {
            wgmma_cases(fmts[fi], quick);
            wgmma_variants(fmts[fi], quick);
        }
        return check_summary("test_cuda_matmul");
    }
    size_t nshapes = quick ? 3 : NSHAPES;
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
        bfp_format f = fmts[fi];
        for (size_t si = 0; si < nshapes; si++) {
            size_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            run_case(f, m, n, k, (int)(si % 2), (int)(si % 3 == 0), 0, BFP_MATMUL_FUSED);
            run_case(f, m, n, k, 1, 1, 0, BFP_MATMUL_DEQUANT_CUBLAS);
            if (m <= 32)
                run_case(f, m, n, k, (int)(si % 2), (int)(si % 3 != 0), 0, BFP_MATMUL_SKINNY);
            if (m <= 16)
                run_case(f, m, n, k, (int)(si % 2 == 0), (int)(si % 3 != 0), 0, BFP_MATMUL_GEMV);
        }
        wgmma_cases(f, quick);
        wgmma_variants(f, quick);
        run_case(f, 7, 64, 256, 1, 0, 1, BFP_MATMUL_SKINNY);  /* unaligned x */
        run_case(f, 32, 72, 4160, 1, 1, 0, BFP_MATMUL_SKINNY); /* nt 4, split bands */
        /* MX+ at m = 1 adds the block max after the mma; bench/gpu.sh also runs
         * the quick set with BFP_MATMUL_POST_MAX_M=8: MX+ and NVFP4+ at m <= 8 */
        run_case(f, 2, 64, 250, 1, 0, 1, BFP_MATMUL_SKINNY);   /* x not staged */
        run_case(f, 4, 72, 4160, 1, 1, 0, BFP_MATMUL_SKINNY);  /* split bands, pad column */
        run_case(f, 7, 64, 256, 1, 0, 1, BFP_MATMUL_FUSED);   /* unaligned x */
        run_case(f, 3, 40, 256, 2, 0, 0, BFP_MATMUL_FUSED);   /* huge weight rows */
        gemv_cases(f, quick);
        gemv_cluster_cases(f, quick);
        if (quick)
            continue;
        run_case(f, 4096, 96, 256, 1, 1, 0, BFP_MATMUL_AUTO); /* m chunks / cuBLAS */
        run_case(f, 200, 96, 700, 1, 1, 0, BFP_MATMUL_AUTO);  /* AUTO's wgmma range */
        run_case(f, 600, 200, 700, 1, 1, 0, BFP_MATMUL_AUTO); /* its 256-row CTAs */
        run_case(f, 600, 80, 320, 0, 0, 0, BFP_MATMUL_FUSED); /* several m chunks */
        run_case(f, 600, 80, 320, 0, 1, 0, BFP_MATMUL_WGMMA); /* several m chunks */
        nan_case(f, BFP_MATMUL_FUSED);
        nan_case(f, BFP_MATMUL_SKINNY);
        run_case(f, 1, 4096, 4096, 1, 1, 0, BFP_MATMUL_SKINNY); /* warps' runs cross bands */
        shared_ws_case(f);
    }
    if (!quick)
        auto_rule_case();
    two_streams_case();
    two_threads_case();
    if (!quick)
        tuned_cases();
    return check_summary("test_cuda_matmul");
}

#else
int main(void)
{
    printf("test_cuda_matmul: skipped: no GPU (built without CUDA)\n");
    return 0;
}
#endif

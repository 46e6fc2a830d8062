/* test_cuda_matmul_api.c - the GPU matmul's API around the kernels:
 * caller-owned packed weights (bfp_cuda_weight_pack into a buffer inside a
 * larger allocation, a view of it, a view of a moved copy: the upload's y bit
 * for bit on every path; views of the wrong weight, short and misaligned
 * buffers refused), the tuning struct (NULL = {0} = the plain call, bit for
 * bit; out-of-range values refused; a tuning that needs more than the
 * default workspace front after the dequantize path left W there), the
 * packed weight decoded on the GPU (bfp_cuda_weight_unpack, the dequantize
 * path's decode) against bfp_matmul_unpack bit for bit. Without a
 * GPU it runs the argument checks that need none (BFP_ERR_ARG, or
 * BFP_ERR_DEVICE for a well-formed call, no pointer touched) and prints
 * "skipped: no GPU". */
#include "bfp.h"
#include "check.h"

#include <stdio.h>

#ifdef BFP_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "cuda_matmul_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int hopper; /* compute capability 9.0: BFP_MATMUL_WGMMA runs */

/* y of every path through a weight, to compare bit for bit: shapes whose
 * plans split no K (k <= 256, and k <= 64 for the skinny kernel), so
 * that no fp32 atomics order the sums */
static void ys_of(const bfp_cuda_weight *w, const void *dx, size_t m, size_t n, size_t k,
                  const void *dbias, void *dy, void *dws, size_t wsb, bfp_matmul_path path,
                  int how, uint16_t *y)
{
    static const bfp_matmul_tuning zero = {0};
    CU(cudaMemset(dy, 0xFF, m * n * 2));
    bfp_status st = how == 0   ? bfp_cuda_matmul(w, dx, m, dbias, dy, dws, wsb, path, NULL)
                    : how == 1 ? bfp_cuda_matmul_ex(w, dx, m, dbias, dy, dws, wsb, path, NULL,
                                                    NULL)
                               : bfp_cuda_matmul_ex(w, dx, m, dbias, dy, dws, wsb, path, &zero,
                                                    NULL);
    CHECK(st == BFP_OK, "api case path %d m=%zu k=%zu: %s", (int)path, m, k,
          bfp_status_str(st));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(y, dy, m * n * 2, cudaMemcpyDeviceToHost));
}

/* Caller-owned packed weights: bfp_cuda_weight_pack into a buffer inside a
 * larger allocation, a view of it, and a view of a moved copy (the original
 * then overwritten) give the upload's y bit for bit on every path; the plain
 * call, tuning NULL and tuning {0} give the same y; a view of the wrong
 * weight, a short or misaligned buffer is refused. */
static void api_case(bfp_format f, size_t m, size_t n, size_t k)
{
    const char *name = bfp_format_get(f)->name;
    hplanes w;
    make_weight(f, n, k, 1, -1, &w);
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    uint16_t *x = malloc(m * k * 2), *bias = malloc(n * 2);
    uint16_t *y0 = malloc(m * n * 2), *y1 = malloc(m * n * 2);
    float *ref = malloc(m * n * sizeof *ref);
    for (size_t i = 0; i < m * k; i++)
        x[i] = bfp_f32_to_bf16((float)gauss());
    for (size_t i = 0; i < n; i++)
        bias[i] = bfp_f32_to_bf16((float)gauss());
    CHECK(bfp_matmul_ref(f, &cw, n, k, x, m, bias, ref) == BFP_OK, "ref");
    size_t bytes = 0;
    CHECK(bfp_cuda_weight_packed_size(f, n, k, &bytes) == BFP_OK, "%s packed size", name);
    bfp_cuda_weight *up = NULL, *view = NULL, *moved = NULL, *bad = NULL;
    char *big, *copy;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaMalloc((void **)&big, bytes + 1024));
    CU(cudaMalloc((void **)&copy, bytes));
    char *buf = big + 512; /* cudaMalloc's 256-byte alignment kept */
    CHECK(bfp_cuda_weight_upload(f, &cw, n, k, &up) == BFP_OK, "%s upload", name);
    CHECK(bfp_cuda_weight_pack(f, &cw, n, k, buf, bytes - 1, s) == BFP_ERR_ARG, "short buffer");
    CHECK(bfp_cuda_weight_pack(f, &cw, n, k, buf + 16, bytes, s) == BFP_ERR_ARG, "misaligned");
    CHECK(bfp_cuda_weight_pack(f, &cw, n, k, buf, bytes, s) == BFP_OK, "%s pack", name);
    CHECK(bfp_cuda_weight_view(f, n, k, buf, bytes, &view) == BFP_OK, "%s view", name);
    bad = (bfp_cuda_weight *)&w;
    CHECK(bfp_cuda_weight_view(f, n, k, buf, bytes - 1, &bad) == BFP_ERR_ARG && !bad,
          "%s view of a short buffer", name);
    CHECK(bfp_cuda_weight_view(f, n + 1, k, buf, bytes * 2, &bad) == BFP_ERR_ARG &&
              bfp_cuda_weight_view(f == BFP_HIF4 ? BFP_NVFP4 : BFP_HIF4, n, k, buf, bytes * 2,
                                   &bad) == BFP_ERR_ARG &&
              bfp_cuda_weight_view(f, n, k, buf + 256, bytes, &bad) == BFP_ERR_ARG,
          "%s view of another weight's buffer", name);
    if (!up || !view)
        goto out;
    void *dx, *dbias, *dy, *dws;
    size_t wsb = 0;
    for (int p = 0; p <= BFP_MATMUL_GEMV; p++) {
        size_t b = bfp_cuda_matmul_workspace_size(up, m, (bfp_matmul_path)p);
        CHECK(b == bfp_cuda_matmul_workspace_size(view, m, (bfp_matmul_path)p),
              "%s view's workspace size, path %d", name, p);
        wsb = b > wsb ? b : wsb;
    }
    CU(cudaMalloc(&dx, m * k * 2));
    CU(cudaMalloc(&dbias, n * 2));
    CU(cudaMalloc(&dy, m * n * 2));
    CU(cudaMalloc(&dws, wsb + 1));
    CU(cudaMemset(dws, 0, wsb + 1));
    CU(cudaMemcpy(dx, x, m * k * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dbias, bias, n * 2, cudaMemcpyHostToDevice));
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* move: copy the bytes, view the copy, spoil the original */
            CU(cudaMemcpy(copy, buf, bytes, cudaMemcpyDeviceToDevice));
            CHECK(bfp_cuda_weight_view(f, n, k, copy, bytes, &moved) == BFP_OK, "%s moved", name);
            bfp_cuda_weight_free(view);
            view = NULL;
            CU(cudaMemset(buf, 0, bytes));
            if (!moved)
                break;
        }
        const bfp_cuda_weight *v = pass ? moved : view;
        for (int p = 1; p <= BFP_MATMUL_GEMV; p++) {
            const bfp_matmul_path path = (bfp_matmul_path)p;
            if (p == 4 || /* the retired mid kernel: refused (tested below) */
                (path == BFP_MATMUL_SKINNY && (m > 32 || k > 64)) ||
                (path == BFP_MATMUL_GEMV && (m > 16 || k > 512)) || /* one unit per group */
                (path == BFP_MATMUL_WGMMA && !hopper))
                continue;
            ys_of(up, dx, m, n, k, dbias, dy, dws, wsb, path, 0, y0);
            double num, den;
            size_t nans = err_sums(y0, ref, m * n, &num, &den);
            CHECK(nans == 0 && sqrt(num / den) < 5e-3, "%s path %d m=%zu: rel err %.3g", name,
                  p, m, sqrt(num / den));
            for (int how = 0; how < 3; how++) {
                ys_of(v, dx, m, n, k, dbias, dy, dws, wsb, path, how, y1);
                CHECK(memcmp(y0, y1, m * n * 2) == 0,
                      "%s path %d m=%zu k=%zu: the %s (call %d) differs from the upload's", name,
                      p, m, k, pass ? "moved view" : "view", how);
            }
        }
    }
    CU(cudaFree(dx));
    CU(cudaFree(dbias));
    CU(cudaFree(dy));
    CU(cudaFree(dws));
out:
    bfp_cuda_weight_free(up);
    bfp_cuda_weight_free(view);
    bfp_cuda_weight_free(moved);
    CU(cudaFree(big));
    CU(cudaFree(copy));
    CU(cudaStreamDestroy(s));
    free(x), free(bias), free(y0), free(y1), free(ref);
    free_weight(&w);
}

/* 1 when GPU value a and host value b are the same bits, or both NaN */
static int same_f32(float a, float b)
{
    return isnan(a) ? isnan(b) : memcmp(&a, &b, sizeof a) == 0;
}

static int same_bf16(uint16_t a, uint16_t b)
{
    return (a & 0x7FFF) > 0x7F80 ? (b & 0x7FFF) > 0x7F80 : a == b;
}

/* bfp_cuda_weight_unpack against bfp_matmul_unpack of the same prepacked
 * arrays, bit for bit (NaN for NaN): float rows (NVFP4 divided by its tensor
 * scale) and the dequantize path's bf16 rows (without it). Weights
 * quantized from data with huge rows and a NaN (heavy), or random plane
 * bytes (NaN and reserved scale codes, every block max); odd shapes leave
 * partial tiles. Also the workspace that serves AUTO at every m. */
static void unpack_case(bfp_format f, size_t n, size_t k, int random_bytes)
{
    const char *name = bfp_format_get(f)->name;
    hplanes w;
    make_weight(f, n, k, 2, (int)(n / 2), &w);
    if (random_bytes) {
        for (size_t i = 0; i < w.sz.codes; i++)
            w.codes[i] = (uint8_t)(unif() * 256);
        for (size_t i = 0; i < w.sz.scales; i++)
            w.scales[i] = (uint8_t)(unif() * 256);
        for (size_t i = 0; i < w.sz.meta; i++)
            w.meta[i] = (uint8_t)(unif() * 256);
        w.ts = 0.37f;
    }
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    bfp_packed_sizes ps;
    CHECK(bfp_matmul_packed_sizes(f, n, k, &ps) == BFP_OK, "packed sizes");
    uint8_t *pc = malloc(ps.codes), *psc = malloc(ps.scales), *pcr = malloc(ps.corr + 1);
    float *ref = malloc(n * k * sizeof *ref), *raw = malloc(n * k * sizeof *raw);
    float *got = malloc(n * k * sizeof *got);
    uint16_t *gotb = malloc(n * k * 2);
    const int has_ts = bfp_format_get(f)->has_tensor_scale;
    CHECK(bfp_matmul_prepack(f, &cw, n, k, pc, psc, ps.corr ? pcr : NULL) == BFP_OK &&
              bfp_matmul_unpack(f, pc, psc, pcr, has_ts ? w.ts : 1.0f, n, k, ref) == BFP_OK &&
              bfp_matmul_unpack(f, pc, psc, pcr, 1.0f, n, k, raw) == BFP_OK,
          "%s host prepack / unpack", name);
    bfp_cuda_weight *dw = NULL;
    CHECK(bfp_cuda_weight_upload(f, &cw, n, k, &dw) == BFP_OK, "%s upload", name);
    void *dout;
    CU(cudaMalloc(&dout, n * k * 4 + 4));
    for (int pass = 0; dw && pass < 3; pass++) {
        /* pass 2: bf16 rows at an address that is not 4-byte aligned */
        char *o = (char *)dout + (pass == 2 ? 2 : 0);
        CU(cudaMemset(dout, 0xFF, n * k * 4 + 4));
        CHECK(bfp_cuda_weight_unpack(dw, pass ? BFP_DTYPE_BF16 : BFP_DTYPE_F32, o, NULL) ==
                  BFP_OK, "%s unpack", name);
        CU(cudaDeviceSynchronize());
        size_t bad = 0, first = 0;
        if (pass == 0) {
            CU(cudaMemcpy(got, o, n * k * 4, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n * k; i++)
                if (!same_f32(got[i], ref[i]) && !bad++)
                    first = i;
        } else {
            CU(cudaMemcpy(gotb, o, n * k * 2, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n * k; i++)
                if (!same_bf16(gotb[i], bfp_f32_to_bf16(raw[i])) && !bad++)
                    first = i;
        }
        CHECK(bad == 0, "%s %zux%zu%s unpack %s: %zu values differ from bfp_matmul_unpack's, "
              "first at (%zu, %zu)", name, n, k, random_bytes ? " random bytes" : "",
              pass ? "bf16" : "f32", bad, first / k, first % k);
    }
    if (dw) {
        /* past m = 1024 AUTO takes the wgmma kernel only without a K split
         * (no workspace) and only while its grid fits (m up to about 4
         * million), else dequantize + cuBLAS, whose size does not depend on
         * m: m = 2^23 asks for that size on every weight */
        size_t most = bfp_cuda_matmul_workspace_size_max(dw), want = 0;
        for (size_t m = 1; m <= 1100; m++) {
            size_t b = bfp_cuda_matmul_workspace_size(dw, m, BFP_MATMUL_AUTO);
            want = b > want ? b : want;
        }
        size_t huge = bfp_cuda_matmul_workspace_size(dw, (size_t)1 << 23, BFP_MATMUL_AUTO);
        want = huge > want ? huge : want;
        CHECK(most == want && most > 0, "%s workspace for every m: %zu, the largest %zu", name,
              most, want);
    }
    CHECK(bfp_cuda_weight_unpack(dw, BFP_DTYPE_F16, dout, NULL) == BFP_ERR_ARG &&
              bfp_cuda_weight_unpack(NULL, BFP_DTYPE_F32, dout, NULL) == BFP_ERR_ARG,
          "unpack: f16 or NULL weight refused");
    CU(cudaFree(dout));
    bfp_cuda_weight_free(dw);
    free(pc), free(psc), free(pcr), free(ref), free(raw), free(got), free(gotb);
    free_weight(&w);
}

/* An out-of-range tuning is refused by the call and sizes no workspace */
static void tuning_refused_case(void)
{
    hplanes w;
    make_weight(BFP_MXFP4, 64, 256, 0, -1, &w);
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    bfp_cuda_weight *dw = NULL;
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, 64, 256, &dw) == BFP_OK, "upload");
    void *dx, *dy, *dws;
    CU(cudaMalloc(&dx, 4 * 256 * 2));
    CU(cudaMalloc(&dy, 4 * 64 * 2));
    CU(cudaMalloc(&dws, (size_t)64 << 20));
    CU(cudaMemset(dws, 0, (size_t)64 << 20));
    const bfp_matmul_tuning bad[] = {{.ctas_per_sm = 65}, {.warps_per_sm = -1},
                                     {.post_max_m = -2},
                                     {.wgmma_serial = 3}, {.gemv_pdl = 3}, {.gemv_pdl = -2},
                                     {.wgmma_consumers = 1}, {.wgmma_consumers = 4},
                                     {.xq_kernel = 3}, {.wgmma_bn = 96},
                                     {.wgmma_bn = 256, .wgmma_consumers = 3}};
    for (size_t i = 0; dw && i < sizeof bad / sizeof bad[0]; i++)
        for (int p = 0; p <= BFP_MATMUL_GEMV; p++) {
            CHECK(bfp_cuda_matmul_ex(dw, dx, 4, NULL, dy, dws, (size_t)64 << 20,
                                     (bfp_matmul_path)p, &bad[i], NULL) == BFP_ERR_ARG &&
                      bfp_cuda_matmul_workspace_size_ex(dw, 4, (bfp_matmul_path)p, &bad[i]) == 0,
                  "tuning %zu, path %d: refused", i, p);
        }
    /* 4 (the retired mid kernel) and paths past the last: no such path */
    static const int no_path[] = {4, BFP_MATMUL_GEMV + 1, 99, -1};
    for (size_t i = 0; dw && i < sizeof no_path / sizeof no_path[0]; i++)
        CHECK(bfp_cuda_matmul_ex(dw, dx, 4, NULL, dy, dws, (size_t)64 << 20,
                                 (bfp_matmul_path)no_path[i], NULL, NULL) == BFP_ERR_ARG &&
                  bfp_cuda_matmul_workspace_size(dw, 4, (bfp_matmul_path)no_path[i]) == 0,
              "path %d: refused, workspace 0", no_path[i]);
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(dws));
    bfp_cuda_weight_free(dw);
    free_weight(&w);
}

/* A tuning whose small-m plan needs more workspace than the default front:
 * the call must zero its region first, as the dequantize path has left W
 * there. k = 128 (2 k tiles) and sms + 1 bands of 4 row tiles: by default
 * every skinny warp takes 2 units, whole bands, so no m <= 32 splits and the
 * front is empty; with one warp per SM a warp takes 3 units and bands split. */
static void tuned_front_case(void)
{
    int sms = 0;
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t n = (size_t)64 * (size_t)(sms + 1), k = 128, mbig = 64;
    const bfp_matmul_tuning one_warp = {.warps_per_sm = 1};
    hplanes w;
    make_weight(BFP_MXFP4, n, k, 1, -1, &w);
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    uint16_t *x = malloc(mbig * k * 2), *y = malloc(mbig * n * 2);
    float *ref = malloc(mbig * n * sizeof *ref);
    for (size_t i = 0; i < mbig * k; i++)
        x[i] = bfp_f32_to_bf16((float)gauss());
    bfp_cuda_weight *dw = NULL;
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, n, k, &dw) == BFP_OK, "upload");
    if (!dw)
        goto out;
    size_t tuned = bfp_cuda_matmul_workspace_size_ex(dw, 1, BFP_MATMUL_SKINNY, &one_warp);
    size_t deq = bfp_cuda_matmul_workspace_size(dw, mbig, BFP_MATMUL_DEQUANT_CUBLAS);
    CHECK(bfp_cuda_matmul_workspace_size(dw, 1, BFP_MATMUL_SKINNY) == 0 && tuned > 0,
          "premise: the default skinny plan splits no band at m = 1, one warp per SM does");
    size_t wsb = tuned > deq ? tuned : deq;
    void *dx, *dy, *dws;
    CU(cudaMalloc(&dx, mbig * k * 2));
    CU(cudaMalloc(&dy, mbig * n * 2));
    CU(cudaMalloc(&dws, wsb));
    CU(cudaMemset(dws, 0, wsb)); /* once */
    CU(cudaMemcpy(dx, x, mbig * k * 2, cudaMemcpyHostToDevice));
    static const struct {
        bfp_matmul_path path;
        size_t m;
        int tuned;
    } seq[] = {{BFP_MATMUL_DEQUANT_CUBLAS, 64, 0}, {BFP_MATMUL_SKINNY, 1, 1},
               {BFP_MATMUL_DEQUANT_CUBLAS, 64, 0}, {BFP_MATMUL_SKINNY, 1, 0},
               {BFP_MATMUL_SKINNY, 1, 1}};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        size_t m = seq[i].m;
        CHECK(bfp_matmul_ref(BFP_MXFP4, &cw, n, k, x, m, NULL, ref) == BFP_OK, "ref");
        CU(cudaMemset(dy, 0xFF, m * n * 2));
        bfp_status st = bfp_cuda_matmul_ex(dw, dx, m, NULL, dy, dws, wsb, seq[i].path,
                                           seq[i].tuned ? &one_warp : NULL, NULL);
        CHECK(st == BFP_OK, "tuned front, step %zu: %s", i, bfp_status_str(st));
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(y, dy, m * n * 2, cudaMemcpyDeviceToHost));
        double num, den;
        size_t nans = err_sums(y, ref, m * n, &num, &den);
        CHECK(nans == 0 && sqrt(num / den) < 5e-3,
              "tuned front, step %zu (path %d, m=%zu): rel err %.3g, %zu NaN", i,
              (int)seq[i].path, m, sqrt(num / den), nans);
    }
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(dws));
out:
    bfp_cuda_weight_free(dw);
    free(x), free(y), free(ref);
    free_weight(&w);
}

/* Argument errors; they need no GPU (run before the skip). Without one, a
 * well-formed call says BFP_ERR_DEVICE and touches no pointer. */
static void errors(int gpu)
{
    hplanes w;
    make_weight(BFP_MXFP6_E2M3, 16, 64, 0, -1, &w);
    bfp_const_planes cw = {w.codes, w.scales, w.meta, &w.ts};
    bfp_cuda_weight *dw = (bfp_cuda_weight *)&w;
    CHECK(bfp_cuda_weight_upload(BFP_MXFP6_E2M3, &cw, 16, 64, &dw) == BFP_ERR_UNSUPPORTED,
          "mxfp6 weights are not supported");
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, NULL, 16, 64, &dw) == BFP_ERR_ARG, "NULL planes");
    CHECK(bfp_cuda_matmul(NULL, &w, 1, NULL, &w, NULL, 0, BFP_MATMUL_AUTO, NULL) ==
              BFP_ERR_ARG, "NULL weight");
    const bfp_matmul_tuning bad = {.ctas_per_sm = 65};
    CHECK(bfp_cuda_matmul_ex(NULL, &w, 1, NULL, &w, NULL, 0, BFP_MATMUL_AUTO, &bad, NULL) ==
              BFP_ERR_ARG && bfp_cuda_matmul_workspace_size_ex(NULL, 1, BFP_MATMUL_AUTO, NULL) == 0,
          "NULL weight, bad tuning");
    void *fake = (void *)(uintptr_t)4096; /* aligned, never dereferenced */
    size_t bytes = 0;
    CHECK(bfp_cuda_weight_packed_size(BFP_MXFP4, 16, 64, &bytes) == BFP_OK, "packed size");
    CHECK(bfp_cuda_weight_view(BFP_MXFP4, 16, 64, NULL, bytes, &dw) == BFP_ERR_ARG &&
              bfp_cuda_weight_view(BFP_MXFP4, 16, 64, (char *)fake + 16, bytes, &dw) ==
                  BFP_ERR_ARG &&
              bfp_cuda_weight_view(BFP_MXFP4, 16, 64, fake, bytes - 1, &dw) == BFP_ERR_ARG &&
              bfp_cuda_weight_view(BFP_MXFP4, 16, 64, fake, bytes, NULL) == BFP_ERR_ARG &&
              bfp_cuda_weight_view(BFP_MXFP6_E2M3, 16, 64, fake, bytes, &dw) ==
                  BFP_ERR_UNSUPPORTED,
          "view: NULL, misaligned or short buffer, NULL out, format");
    CHECK(bfp_cuda_weight_pack(BFP_MXFP4, NULL, 16, 64, fake, bytes, NULL) == BFP_ERR_ARG &&
              bfp_cuda_weight_pack(BFP_MXFP4, &cw, 16, 64, NULL, bytes, NULL) == BFP_ERR_ARG &&
              bfp_cuda_weight_pack(BFP_MXFP4, &cw, 16, 64, fake, bytes - 1, NULL) ==
                  BFP_ERR_ARG,
          "pack: NULL planes, NULL or short buffer");
    if (!gpu) {
        hplanes m4;
        make_weight(BFP_MXFP4, 16, 64, 0, -1, &m4);
        bfp_const_planes c4 = {m4.codes, m4.scales, m4.meta, &m4.ts};
        CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &c4, 16, 64, &dw) == BFP_ERR_DEVICE && !dw,
              "no GPU: upload says so");
        dw = (bfp_cuda_weight *)&w;
        CHECK(bfp_cuda_weight_view(BFP_MXFP4, 16, 64, fake, bytes, &dw) == BFP_ERR_DEVICE && !dw,
              "no GPU: view says so");
        CHECK(bfp_cuda_weight_pack(BFP_MXFP4, &c4, 16, 64, fake, bytes, NULL) == BFP_ERR_DEVICE,
              "no GPU: pack says so");
        free_weight(&m4);
    }
    free_weight(&w);
}


int main(void)
{
    const int gpu = bfp_cuda_available();
    errors(gpu);
    if (!gpu) {
        printf("test_cuda_matmul_api: skipped: no GPU (argument checks only)\n");
        return check_summary("test_cuda_matmul_api");
    }
    int major = 0, minor = 0;
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    hopper = major == 9 && minor == 0;
    api_case(BFP_MXFP4_PLUS, 3, 100, 64);
    api_case(BFP_NVFP4_PLUS, 40, 72, 256);
    api_case(BFP_HIF4, 17, 130, 64);
    api_case(BFP_NVFP4, 5, 33, 200);
    api_case(BFP_MXFP4, 64, 300, 128);
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        unpack_case(fmts[i], 37, 200, 0);
        unpack_case(fmts[i], 64, 256, 1);
        unpack_case(fmts[i], 33, 135, 1);
    }
    tuning_refused_case();
    tuned_front_case();
    return check_summary("test_cuda_matmul_api");
}

#else
int main(void)
{
    printf("test_cuda_matmul_api: skipped: no GPU (built without CUDA)\n");
    return 0;
}
#endif

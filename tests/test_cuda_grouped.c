/* test_cuda_grouped.c - the grouped (MoE) matmul on the GPU against
 * bfp_grouped_matmul_ref: every matmul format, routing random / skewed /
 * half the experts empty / one expert / the last expert only, one row, odd
 * counts, shapes off the tiles, bias; ||y - ref|| / ||ref|| < 5e-3 over
 * each expert's rows, no NaN, y poisoned with NaN before each call; a
 * second call on the used workspace, after a call with broken offsets
 * (decreasing, overlapping, the end past T); one workspace, zeroed once, serving
 * every case and kernel, all zero again after each call; argument checks (wrong buffer, short
 * workspace, NULLs). On Hopper every case runs six times: the default,
 * each kernel forced (tuning grouped_kernel = 1, 2, 3) and the wgmma
 * kernel with 256-row m tiles (wgmma_bn = 256), the GEMV kernel launched
 * without PDL (gemv_pdl = -1; its default has it), and two GEMV calls chained
 * under programmatic dependent launch (gemv_pdl = 1 and 2); elsewhere the
 * wgmma and GEMV kernels must be refused. Without a GPU: the checks that need none, then
 * "skipped: no GPU". BFP_TEST_QUICK=1 keeps the small shapes (the
 * sanitizer runs). */
#include "bfp_grouped.h"
#include "check.h"

#include <stdio.h>

#ifdef BFP_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "grouped_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static prng rng = {0x6e23};
/* the kernel under test: NULL (the default) or grouped_kernel = 1, 2 or 3 */
static const bfp_matmul_tuning *tune;
/* one workspace, zeroed once, for every case and kernel that fits it: the
 * calls must leave it zero (bfp_grouped.h) */
#define SHARED_WS_BYTES ((size_t)8 << 20)
static void *shared_ws;

/* ||y - ref|| / ||ref|| over expert e's rows (n wide) of y; adds the NaN
 * outputs there to *nan */
static double expert_rel_err(const uint16_t *y, const float *ref, const int32_t *off, size_t e,
                             size_t n, int *nan)
{
    double num = 0, den = 0;
    for (size_t i = (size_t)off[e] * n; i < (size_t)off[e + 1] * n; i++) {
        const double d = (double)bfp_bf16_to_f32(y[i]) - (double)ref[i];
        *nan += isnan(bfp_bf16_to_f32(y[i])) != 0;
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void gpu_case(bfp_format fmt, size_t e_count, size_t n, size_t k, size_t t_rows, int kind,
                     int with_bias)
{
    const char *fn = bfp_format_get(fmt)->name;
    gexperts g;
    if (!gexperts_make(&g, fmt, e_count, n, k, &rng)) {
        CHECK(0, "make experts");
        return;
    }
    int32_t *off = malloc((e_count + 1) * sizeof *off);
    route_make(kind, e_count, t_rows, &rng, off);
    uint16_t *x = malloc(t_rows * k * 2 + 2), *bias = NULL, *yb = malloc(t_rows * n * 2 + 2);
    gx_make(x, t_rows, k, &rng);
    if (with_bias) {
        bias = malloc(e_count * n * 2);
        for (size_t i = 0; i < e_count * n; i++)
            bias[i] = bfp_f32_to_bf16((float)(prng_unit(&rng) * 4.0 - 2.0));
    }
    float *ref = malloc(t_rows * n * sizeof *ref + 4);
    CHECK(bfp_grouped_matmul_ref(fmt, g.w, e_count, n, k, x, t_rows, off, bias, ref) == BFP_OK,
          "ref");

    size_t bytes;
    bfp_cuda_grouped_weight_packed_size(fmt, e_count, n, k, &bytes);
    void *dbuf, *dx, *dy, *doff, *dbias = NULL, *dws = NULL;
    CU(cudaMalloc(&dbuf, bytes));
    CU(cudaMalloc(&dx, t_rows * k * 2 + 16));
    CU(cudaMalloc(&dy, t_rows * n * 2 + 16));
    CU(cudaMalloc(&doff, (e_count + 1) * 4));
    CU(cudaMemcpy(dx, x, t_rows * k * 2, cudaMemcpyHostToDevice));
    if (bias) {
        CU(cudaMalloc(&dbias, e_count * n * 2));
        CU(cudaMemcpy(dbias, bias, e_count * n * 2, cudaMemcpyHostToDevice));
    }
    CHECK(bfp_cuda_grouped_weight_pack(fmt, g.w, e_count, n, k, dbuf, bytes, NULL) == BFP_OK,
          "pack");
    bfp_cuda_grouped_weight *w = NULL;
    CHECK(bfp_cuda_grouped_weight_view(fmt, e_count, n, k, dbuf, bytes, &w) == BFP_OK, "view");
    size_t wsb = bfp_cuda_grouped_matmul_workspace_size(w, t_rows, tune);
    if (wsb && wsb <= SHARED_WS_BYTES) {
        dws = shared_ws;
    } else if (wsb) {
        CU(cudaMalloc(&dws, wsb));
        CU(cudaMemset(dws, 0, wsb));
    }
    /* broken offsets (call 1; not checked on the host): overlapping and
     * decreasing rows, the end past T; y is unspecified, but the workspace
     * must stay zero for the valid call after it */
    int32_t *bad = malloc((e_count + 1) * sizeof *bad);
    for (size_t e = 0; e < e_count; e++)
        bad[e] = e % 2 ? (int32_t)t_rows : 0;
    bad[e_count] = (int32_t)t_rows + 1;
    for (int call = 0; call < 3; call++) {
        CU(cudaMemcpy(doff, call == 1 ? bad : off, (e_count + 1) * 4, cudaMemcpyHostToDevice));
        CU(cudaMemset(dy, 0xFF, t_rows * n * 2)); /* NaN: an unwritten row fails */
        bfp_status st = bfp_cuda_grouped_matmul(w, dx, t_rows, doff, dbias, dy, dws, wsb, tune,
                                                NULL);
        CU(cudaDeviceSynchronize());
        CHECK(st == BFP_OK, "%s call %d: %d", fn, call, st);
        if (call == 1) {
            CHECK(!wsb || device_nonzero_bytes(dws, wsb) == 0, "%s kernel %d E=%zu %zux%zu T=%zu: broken "
                  "offsets left the workspace dirty", fn, tune ? tune->grouped_kernel : 0,
                  e_count, n, k, t_rows);
            continue;
        }
        CU(cudaMemcpy(yb, dy, t_rows * n * 2, cudaMemcpyDeviceToHost));
        int nan = 0;
        for (size_t e = 0; e < e_count; e++) {
            const double rel = expert_rel_err(yb, ref, off, e, n, &nan);
            CHECK(rel < 5e-3, "%s kernel %d E=%zu %zux%zu T=%zu %s bias=%d call %d expert %zu "
                  "(%d rows): rel err %.3g",
                  fn, tune ? tune->grouped_kernel : 0, e_count, n, k, t_rows, route_names[kind],
                  with_bias, call, e,
                  off[e + 1] - off[e], rel);
        }
        CHECK(nan == 0, "%s E=%zu %zux%zu T=%zu %s: %d NaN outputs", fn, e_count, n, k, t_rows,
              route_names[kind], nan);
        CHECK(!wsb || device_nonzero_bytes(dws, wsb) == 0, "%s kernel %d E=%zu %zux%zu T=%zu %s call %d: "
              "workspace not left zero", fn, tune ? tune->grouped_kernel : 0, e_count, n, k,
              t_rows, route_names[kind], call);
    }
    if (wsb) {
        CHECK(bfp_cuda_grouped_matmul(w, dx, t_rows, doff, dbias, dy, dws, wsb - 1, tune, NULL) ==
                  BFP_ERR_ARG,
              "short workspace refused");
        CHECK(bfp_cuda_grouped_matmul(w, dx, t_rows, doff, dbias, dy, NULL, wsb, tune, NULL) ==
                  BFP_ERR_ARG,
              "NULL workspace refused");
    }
    bfp_cuda_grouped_weight_free(w);
    if (dws != shared_ws)
        CU(cudaFree(dws));
    CU(cudaFree(dbuf));
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(doff));
    CU(cudaFree(dbias));
    free(off), free(bad), free(x), free(bias), free(yb), free(ref);
    gexperts_free(&g);
}

/* views of a buffer that is not this weight are refused */
static void view_checks(void)
{
    gexperts g;
    size_t bytes, bytes2;
    gexperts_make(&g, BFP_MXFP4, 3, 32, 128, &rng);
    bfp_cuda_grouped_weight_packed_size(BFP_MXFP4, 3, 32, 128, &bytes);
    void *d;
    CU(cudaMalloc(&d, bytes + 256));
    CHECK(bfp_cuda_grouped_weight_pack(BFP_MXFP4, g.w, 3, 32, 128, d, bytes, NULL) == BFP_OK,
          "pack");
    bfp_cuda_grouped_weight *w = NULL;
    CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4, 3, 32, 128, d, bytes - 1, &w) == BFP_ERR_ARG &&
              !w,
          "short buffer refused");
    CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4, 3, 32, 128, (char *)d + 16, bytes, &w) ==
              BFP_ERR_ARG,
          "misaligned buffer refused");
    CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4_PLUS, 3, 32, 128, d, bytes, &w) == BFP_ERR_ARG,
          "another format's buffer refused");
    bfp_cuda_grouped_weight_packed_size(BFP_MXFP4, 2, 32, 64, &bytes2);
    CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4, 6, 32, 64, d, bytes, &w) == BFP_ERR_ARG,
          "another shape's buffer refused");
    CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4, 3, 32, 128, d, bytes, &w) == BFP_OK, "view");
    int32_t off[4] = {0, 0, 0, 0};
    void *doff;
    CU(cudaMalloc(&doff, sizeof off));
    CU(cudaMemcpy(doff, off, sizeof off, cudaMemcpyHostToDevice));
    CHECK(bfp_cuda_grouped_matmul(w, NULL, 0, doff, NULL, NULL, NULL, 0, NULL, NULL) == BFP_OK,
          "T = 0 is nothing to do");
    CHECK(bfp_cuda_grouped_matmul(w, d, 4, NULL, NULL, d, NULL, 0, NULL, NULL) == BFP_ERR_ARG,
          "NULL offsets refused");
    CHECK(bfp_cuda_grouped_matmul(NULL, d, 4, doff, NULL, d, NULL, 0, NULL, NULL) == BFP_ERR_ARG,
          "NULL weight refused");
    bfp_matmul_tuning bad = {0};
    bad.ctas_per_sm = 65;
    CHECK(bfp_cuda_grouped_matmul_workspace_size(w, 4, &bad) == 0, "bad tuning: no size");
    bfp_cuda_grouped_weight_free(w);
    CU(cudaFree(d));
    CU(cudaFree(doff));
    gexperts_free(&g);
}

/* Two grouped GEMV calls in a row on one stream, both launched with
 * programmatic dependent launch (gemv_pdl = level: 1, or 2, which also reads
 * the offsets and W early: the first call writes neither), the second's x
 * the first's y (poisoned with NaN before): the second starts before the
 * first ends and must still see all of its y */
static void pdl_chain_case(bfp_format fmt, size_t e_count, size_t t_rows, int level)
{
    const bfp_matmul_tuning pdl = {.gemv_pdl = level, .grouped_kernel = 3};
    const size_t k1 = 200, n1 = 96, n2 = 80; /* the second's k is n1 */
    const char *fn = bfp_format_get(fmt)->name;
    gexperts g1, g2;
    if (!gexperts_make(&g1, fmt, e_count, n1, k1, &rng) ||
        !gexperts_make(&g2, fmt, e_count, n2, n1, &rng)) {
        CHECK(0, "make experts");
        return;
    }
    int32_t *off = malloc((e_count + 1) * sizeof *off);
    route_make(ROUTE_RANDOM, e_count, t_rows, &rng, off);
    uint16_t *x = malloc(t_rows * k1 * 2), *y1 = malloc(t_rows * n1 * 2),
             *y2 = malloc(t_rows * n2 * 2);
    float *ref = malloc(t_rows * n2 * sizeof *ref);
    gx_make(x, t_rows, k1, &rng);
    size_t b1, b2;
    bfp_cuda_grouped_weight_packed_size(fmt, e_count, n1, k1, &b1);
    bfp_cuda_grouped_weight_packed_size(fmt, e_count, n2, n1, &b2);
    void *dw1, *dw2, *dx, *dy1, *dy2, *doff;
    CU(cudaMalloc(&dw1, b1));
    CU(cudaMalloc(&dw2, b2));
    CU(cudaMalloc(&dx, t_rows * k1 * 2));
    CU(cudaMalloc(&dy1, t_rows * n1 * 2));
    CU(cudaMalloc(&dy2, t_rows * n2 * 2));
    CU(cudaMalloc(&doff, (e_count + 1) * 4));
    CU(cudaMemcpy(dx, x, t_rows * k1 * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(doff, off, (e_count + 1) * 4, cudaMemcpyHostToDevice));
    bfp_cuda_grouped_weight *w1 = NULL, *w2 = NULL;
    CHECK(bfp_cuda_grouped_weight_pack(fmt, g1.w, e_count, n1, k1, dw1, b1, NULL) == BFP_OK &&
              bfp_cuda_grouped_weight_pack(fmt, g2.w, e_count, n2, n1, dw2, b2, NULL) == BFP_OK &&
              bfp_cuda_grouped_weight_view(fmt, e_count, n1, k1, dw1, b1, &w1) == BFP_OK &&
              bfp_cuda_grouped_weight_view(fmt, e_count, n2, n1, dw2, b2, &w2) == BFP_OK,
          "pdl chain pack");
    const size_t ws1 = bfp_cuda_grouped_matmul_workspace_size(w1, t_rows, &pdl),
                 ws2 = bfp_cuda_grouped_matmul_workspace_size(w2, t_rows, &pdl);
    CHECK(ws1 && ws2 && ws1 <= SHARED_WS_BYTES && ws2 <= SHARED_WS_BYTES, "pdl chain workspace");
    for (int rep = 0; w1 && w2 && rep < 3; rep++) {
        CU(cudaMemset(dy1, 0xFF, t_rows * n1 * 2));
        CU(cudaMemset(dy2, 0xFF, t_rows * n2 * 2));
        CU(cudaDeviceSynchronize());
        CHECK(bfp_cuda_grouped_matmul(w1, dx, t_rows, doff, NULL, dy1, shared_ws, ws1, &pdl,
                                      NULL) == BFP_OK &&
                  bfp_cuda_grouped_matmul(w2, dy1, t_rows, doff, NULL, dy2, shared_ws, ws2, &pdl,
                                          NULL) == BFP_OK,
              "pdl chain calls");
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(y1, dy1, t_rows * n1 * 2, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(y2, dy2, t_rows * n2 * 2, cudaMemcpyDeviceToHost));
        CHECK(bfp_grouped_matmul_ref(fmt, g2.w, e_count, n2, n1, y1, t_rows, off, NULL, ref) ==
                  BFP_OK,
              "ref");
        for (size_t e = 0; e < e_count; e++) {
            int nan = 0;
            const double rel = expert_rel_err(y2, ref, off, e, n2, &nan);
            CHECK(nan == 0 && rel < 5e-3, "%s pdl %d chain E=%zu T=%zu rep %d expert %zu: rel "
                  "err %.3g, %d NaN", fn, level, e_count, t_rows, rep, e, rel, nan);
        }
        CHECK(device_nonzero_bytes(shared_ws, ws1 > ws2 ? ws1 : ws2) == 0,
              "%s pdl chain: workspace not left zero", fn);
    }
    bfp_cuda_grouped_weight_free(w1);
    bfp_cuda_grouped_weight_free(w2);
    CU(cudaFree(dw1));
    CU(cudaFree(dw2));
    CU(cudaFree(dx));
    CU(cudaFree(dy1));
    CU(cudaFree(dy2));
    CU(cudaFree(doff));
    free(off), free(x), free(y1), free(y2), free(ref);
    gexperts_free(&g1);
    gexperts_free(&g2);
}

/* every format over the routing kinds and shapes with the kernel in tune */
static void run_cases(int quick)
{
    static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS,
                                      BFP_HIF4};
    for (int f = 0; f < 5; f++) {
        for (int kind = 0; kind < ROUTE_KINDS; kind++)
            gpu_case(fmts[f], 8, 80, 200, 37, kind, kind & 1);
        gpu_case(fmts[f], 1, 17, 65, 1, ROUTE_RANDOM, 1);    /* one expert, one row */
        gpu_case(fmts[f], 9, 33, 64, 1, ROUTE_LAST_ONLY, 0); /* one token, last expert */
        gpu_case(fmts[f], 5, 48, 130, 3, ROUTE_RANDOM, 0);   /* odd counts, K split */
        gpu_case(fmts[f], 3, 136, 72, 150, ROUTE_SKEWED, 0); /* wgmma: 2 columns, bn 64 */
        if (quick)
            continue;
        gpu_case(fmts[f], 16, 256, 512, 301, ROUTE_SKEWED, 1);  /* NT = 4 */
        gpu_case(fmts[f], 4, 256, 512, 600, ROUTE_ONE_EXPERT, 0); /* NT = 16, split K; bn 128 */
        gpu_case(fmts[f], 32, 96, 320, 2000, ROUTE_RANDOM, 1);  /* NT = 16, many chunks */
        gpu_case(fmts[f], 12, 64, 2880, 9, ROUTE_HALF_EMPTY, 0); /* gpt-oss k, deep K split */
        gpu_case(fmts[f], 6, 200, 2880, 1100, ROUTE_RANDOM, 1); /* bn 128, m tiles per expert */
    }
}

/* off Hopper the wgmma and GEMV kernels are refused, not run */
static void wgmma_refused(const bfp_matmul_tuning *wg)
{
    gexperts g;
    if (!gexperts_make(&g, BFP_MXFP4, 2, 32, 64, &rng)) {
        CHECK(0, "make experts");
        return;
    }
    size_t bytes;
    bfp_cuda_grouped_weight_packed_size(BFP_MXFP4, 2, 32, 64, &bytes);
    void *dbuf, *dx, *dy, *doff;
    const int32_t off[3] = {0, 1, 2};
    CU(cudaMalloc(&dbuf, bytes));
    CU(cudaMalloc(&dx, 2 * 64 * 2));
    CU(cudaMalloc(&dy, 2 * 32 * 2));
    CU(cudaMalloc(&doff, sizeof off));
    CU(cudaMemcpy(doff, off, sizeof off, cudaMemcpyHostToDevice));
    CHECK(bfp_cuda_grouped_weight_pack(BFP_MXFP4, g.w, 2, 32, 64, dbuf, bytes, NULL) == BFP_OK,
          "pack");
    bfp_cuda_grouped_weight *w = NULL;
    CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4, 2, 32, 64, dbuf, bytes, &w) == BFP_OK, "view");
    CHECK(bfp_cuda_grouped_matmul(w, dx, 2, doff, NULL, dy, NULL, 0, wg, NULL) ==
              BFP_ERR_UNSUPPORTED,
          "grouped_kernel %d off sm_90: BFP_ERR_UNSUPPORTED", wg->grouped_kernel);
    bfp_cuda_grouped_weight_free(w);
    CU(cudaFree(dbuf));
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(doff));
    gexperts_free(&g);
}

int main(void)
{
    if (!bfp_cuda_available()) {
        bfp_cuda_grouped_weight *w = (bfp_cuda_grouped_weight *)1;
        char buf[512];
        CHECK(bfp_cuda_grouped_weight_view(BFP_MXFP4, 2, 16, 64, buf, 0, &w) == BFP_ERR_ARG &&
                  !w,
              "short buffer refused without a GPU");
        printf("test_cuda_grouped: skipped: no GPU (argument checks only)\n");
        return check_summary("test_cuda_grouped");
    }
    const char *q = getenv("BFP_TEST_QUICK");
    const int quick = q && *q == '1';
    view_checks();
    CU(cudaMalloc(&shared_ws, SHARED_WS_BYTES));
    CU(cudaMemset(shared_ws, 0, SHARED_WS_BYTES));
    int dev = 0, major = 0, minor = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    const int hopper = major == 9 && minor == 0;
    static const bfp_matmul_tuning unit = {.grouped_kernel = 1}, wgmma = {.grouped_kernel = 2},
                                   gemv = {.grouped_kernel = 3},
                                   gemv_plain = {.gemv_pdl = -1, .grouped_kernel = 3},
                                   wgmma256 = {.grouped_kernel = 2, .wgmma_bn = 256};
    /* off Hopper the default is the unit kernel: one pass; on Hopper the
     * wgmma kernel also with 256-row m tiles (4 stages, the epilogue in
     * two halves, registers moved by setmaxnreg) */
    const bfp_matmul_tuning *passes[] = {NULL, &unit, &wgmma, &gemv, &wgmma256, &gemv_plain};
    for (int pass = 0; pass < (hopper ? 6 : 1); pass++) {
        tune = passes[pass];
        run_cases(quick);
    }
    if (hopper) { /* the GEMV kernel under programmatic dependent launch */
        for (int level = 1; level <= 2; level++) {
            pdl_chain_case(BFP_MXFP4, 8, 9, level); /* NT = 1 */
            pdl_chain_case(BFP_MXFP4_PLUS, 8, 37, level);
            pdl_chain_case(BFP_NVFP4, 4, 60, level); /* NT = 2 */
            pdl_chain_case(BFP_HIF4, 16, 1, level);
        }
    } else {
        wgmma_refused(&wgmma);
        wgmma_refused(&gemv);
    }
    CU(cudaFree(shared_ws));
    return check_summary("test_cuda_grouped");
}

#else
int main(void)
{
    printf("test_cuda_grouped: skipped: no GPU (built without CUDA)\n");
    return 0;
}
#endif

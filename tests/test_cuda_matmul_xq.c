/* test_cuda_matmul_xq.c - the quantized-x matmul on the GPU (W4A8, W4A4:
 * bfp_cuda_matmul_xq and _xq_planes) against bfp_matmul_ref_q of the same
 * planes: every supported pair, m in 1, 16, 17, 128, 300, 4096 (4096 at a
 * small n and k), odd n and k, outlier rows and channels, blocks of one row
 * 2^60 apart, all-zero blocks, a NaN block in W and in x; ||y - ref|| /
 * ||ref|| < 2e-3 over the finite outputs (on a few outputs, where bf16's own
 * rounding of ref is larger: that rounding + 1e-4), and ||y - bf16(ref)|| /
 * ||ref|| < 2e-3 everywhere, NaN exactly in the NaN block's row
 * and column, every output written (y poisoned first). The x planes the call
 * leaves in the workspace equal bfp_quantize's bit for bit. Unsupported
 * pairs and short workspaces are refused. Without a GPU it prints
 * "skipped: no GPU" and passes. BFP_TEST_QUICK=1: a few shapes (memcheck).
 * Each case runs on the default kernel (tuning NULL: mma.sync) and, for the
 * MX pairs on Hopper, on the wgmma kernel (tuning xq_kernel = 2), same
 * bounds; and, for pairs whose x format has no tensor scale, through the
 * bf16-x route on a packed weight (bfp_cuda_matmul_qx: "kernel" 3), same
 * bounds, plus W nvfp4 / hif4 with MX x; BFP_TEST_XQ_KERNEL=1, 2 or 3: only
 * that one. */
#include "bfp.h"
#include "check.h"
#include "prng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BFP_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_check.h"

static prng rng = {2121};
static double unif(void) { return prng_unit(&rng); }
static double gauss(void) { return (unif() + unif() + unif() - 1.5) * 2.0; }

typedef struct {
    bfp_plane_sizes sz;
    uint8_t *codes, *scales, *meta;
    float ts;
} hq;

static void hq_make(bfp_format f, bfp_dtype dt, const void *src, size_t rows, size_t cols,
                    hq *q)
{
    bfp_plane_sizes_for(f, rows, cols, &q->sz);
    q->codes = calloc(1, q->sz.codes);
    q->scales = calloc(1, q->sz.scales);
    q->meta = calloc(1, q->sz.meta + 1);
    q->ts = 0;
    bfp_planes p = {q->codes, q->scales, q->meta, &q->ts};
    bfp_status st = bfp_quantize(f, dt, src, rows, cols, NULL, &p, NULL);
    CHECK(st == BFP_OK, "quantize: %s", bfp_status_str(st));
}

static void hq_free(hq *q)
{
    free(q->codes);
    free(q->scales);
    free(q->meta);
}

/* W's planes copied to the device (the calls read planar W) */
static bfp_cuda_planar_weight dw_make(bfp_format f, const hq *q, size_t n, size_t k)
{
    bfp_cuda_planar_weight pw = {f, n, k, NULL, NULL, NULL, q->ts};
    void *c = NULL, *sc = NULL, *m = NULL;
    CU(cudaMalloc(&c, q->sz.codes));
    CU(cudaMalloc(&sc, q->sz.scales));
    CU(cudaMalloc(&m, q->sz.meta + 1));
    CU(cudaMemcpy(c, q->codes, q->sz.codes, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(sc, q->scales, q->sz.scales, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(m, q->meta, q->sz.meta + 1, cudaMemcpyHostToDevice));
    pw.d_codes = c, pw.d_scales = sc, pw.d_meta = m;
    return pw;
}

static void dw_free(bfp_cuda_planar_weight *pw)
{
    CU(cudaFree((void *)pw->d_codes));
    CU(cudaFree((void *)pw->d_scales));
    CU(cudaFree((void *)pw->d_meta));
}

/* row kinds: plain, outlier elements, zero blocks, blocks 2^60 apart */
static double value(size_t r, size_t c, int salt)
{
    int kind = (int)((r * 7 + (size_t)salt) % 4);
    double g = gauss();
    if (kind == 1 && unif() < 0.03)
        g *= 200.0;
    if (kind == 2 && (c / 32) % 3 == 1)
        g = 0.0;
    if (kind == 3)
        g *= (c / 32) % 2 ? 0x1p30 : 0x1p-30;
    return g;
}

static size_t al256(size_t v) { return (v + 255) & ~(size_t)255; }

/* kern: 1 = the default (tuning NULL), 2 = xq_kernel 2 (wgmma), 3 = the
 * bf16-x route (bfp_cuda_matmul_qx on the packed weight, AUTO; no planes
 * API) */
static void run_case(bfp_format wf, bfp_format xf, size_t m, size_t n, size_t k, int bias_on,
                     int planes_api, int kern)
{
    bfp_matmul_tuning tw = {0};
    tw.xq_kernel = 2;
    const bfp_matmul_tuning *tu = kern == 2 ? &tw : NULL;
    const char *xn = bfp_format_get(xf)->name;
    char wn[32]; /* W's format with the kernel */
    snprintf(wn, sizeof wn, "[k%d] %s", kern, bfp_format_get(wf)->name);
    int wnan = n > 3 ? (int)(n / 2) : -1, xnan = m > 3 ? (int)(m / 3) : -1;
    float *w = malloc(n * k * sizeof *w);
    uint16_t *x = malloc(m * k * 2), *bias = malloc(n * 2), *y = malloc(m * n * 2);
    float *ref = malloc(m * n * sizeof *ref);
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < k; c++)
            w[r * k + c] = (float)value(r, c, 0);
    for (size_t r = 0; r < m; r++)
        for (size_t c = 0; c < k; c++) {
            double v = value(r, c, 1);
            if (c % 97 == 5)
                v *= 30.0; /* outlier channels */
            x[r * k + c] = bfp_f32_to_bf16((float)v);
        }
    if (wnan >= 0)
        w[(size_t)wnan * k + k - 1] = NAN;
    if (xnan >= 0)
        x[(size_t)xnan * k] = 0x7FC0;
    for (size_t j = 0; j < n; j++)
        bias[j] = bfp_f32_to_bf16((float)gauss());
    hq qw, qx;
    hq_make(wf, BFP_DTYPE_F32, w, n, k, &qw);
    hq_make(xf, BFP_DTYPE_BF16, x, m, k, &qx);
    bfp_const_planes cw = {qw.codes, qw.scales, qw.meta, &qw.ts};
    bfp_const_planes cx = {qx.codes, qx.scales, qx.meta, &qx.ts};
    CHECK(bfp_matmul_ref_q(wf, &cw, n, k, xf, &cx, m, bias_on ? bias : NULL, ref) == BFP_OK,
          "reference");

    bfp_cuda_planar_weight dwp = dw_make(wf, &qw, n, k), *dw = &dwp;
    bfp_cuda_weight *pw = NULL; /* kern 3 */
    bfp_status st;
    if (kern == 3)
        CHECK(bfp_cuda_weight_upload(wf, &cw, n, k, &pw) == BFP_OK, "upload %s", wn);
    size_t wsb = kern == 3 ? bfp_cuda_matmul_qx_workspace_size(pw, xf, m, BFP_MATMUL_AUTO, NULL)
                           : bfp_cuda_matmul_xq_workspace_size(dw, xf, m, tu);
    CHECK(wsb > 0, "workspace size %s x %s", wn, xn);
    void *dx, *dy, *dbias, *dws;
    CU(cudaMalloc(&dx, m * k * 2));
    CU(cudaMalloc(&dy, m * n * 2));
    CU(cudaMalloc(&dbias, n * 2));
    CU(cudaMalloc(&dws, wsb));
    CU(cudaMemcpy(dx, x, m * k * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dbias, bias, n * 2, cudaMemcpyHostToDevice));
    CU(cudaMemset(dy, 0xFF, m * n * 2)); /* NaN: an unwritten output fails */
    /* no zeroing needed, but the qx route's matmul part is zeroed once */
    CU(cudaMemset(dws, kern == 3 ? 0 : 0xA5, wsb));
    void *db = bias_on ? dbias : NULL;
    uint8_t *dxc = NULL, *dxs = NULL, *dxm = NULL;
    float *dts = NULL;
    if (planes_api) {
        CU(cudaMalloc((void **)&dxc, qx.sz.codes));
        CU(cudaMalloc((void **)&dxs, qx.sz.scales));
        CU(cudaMalloc((void **)&dxm, qx.sz.meta + 1));
        CU(cudaMalloc((void **)&dts, 4));
        CU(cudaMemcpy(dxc, qx.codes, qx.sz.codes, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dxs, qx.scales, qx.sz.scales, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dxm, qx.meta, qx.sz.meta + 1, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dts, &qx.ts, 4, cudaMemcpyHostToDevice));
        bfp_const_planes dq = {dxc, dxs, dxm, dts};
        st = bfp_cuda_matmul_xq_planes(dw, xf, &dq, m, db, dy, dws, wsb, tu, NULL);
    } else if (kern == 3) {
        st = bfp_cuda_matmul_qx(pw, xf, dx, m, db, dy, dws, wsb, BFP_MATMUL_AUTO, NULL, NULL);
    } else {
        st = bfp_cuda_matmul_xq(dw, xf, dx, m, db, dy, dws, wsb, tu, NULL);
    }
    CHECK(st == BFP_OK, "%s x %s m %zu: %s", wn, xn, m, bfp_status_str(st));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(y, dy, m * n * 2, cudaMemcpyDeviceToHost));

    if (!planes_api && kern != 3) { /* the on-the-fly planes equal bfp_quantize's */
        uint8_t *buf = malloc(wsb);
        CU(cudaMemcpy(buf, dws, wsb, cudaMemcpyDeviceToHost));
        size_t o = 0;
        int same = memcmp(buf, qx.codes, qx.sz.codes) == 0;
        o += al256(qx.sz.codes);
        same &= memcmp(buf + o, qx.scales, qx.sz.scales) == 0;
        o += al256(qx.sz.scales);
        same &= qx.sz.meta == 0 || memcmp(buf + o, qx.meta, qx.sz.meta) == 0;
        o += al256(qx.sz.meta);
        same &= !qx.sz.tensor_scale || memcmp(buf + o, &qx.ts, 4) == 0;
        CHECK(same, "%s x %s m %zu k %zu: x planes differ from bfp_quantize", wn, xn, m, k);
        free(buf);
    }

    double num = 0, den = 0, num_b = 0, num_r = 0;
    size_t nan_bad = 0, nan_missing = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double v = bfp_bf16_to_f32(y[i * n + j]), r = ref[i * n + j];
            int want_nan = (int)i == xnan || (int)j == wnan;
            if (want_nan) {
                nan_missing += !isnan(v);
                continue;
            }
            if (isnan(v) || isinf(v) || isnan(r)) {
                nan_bad++;
                continue;
            }
            num += (v - r) * (v - r);
            den += r * r;
            double rb = bfp_bf16_to_f32(bfp_f32_to_bf16((float)r)); /* y's own rounding */
            num_b += (v - rb) * (v - rb);
            num_r += (rb - r) * (rb - r);
        }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK(nan_bad == 0 && nan_missing == 0,
          "%s x %s m %zu n %zu k %zu: %zu non-finite outputs, %zu NaN outputs missing", wn, xn,
          m, n, k, nan_bad, nan_missing);
    /* bf16's unit roundoff is 2^-8: on a handful of outputs y's own rounding
     * alone can exceed 2e-3, so there the bound is that rounding + 1e-4 */
    double rel_round = den > 0 ? sqrt(num_r / den) : sqrt(num_r);
    double bound = fmax(2e-3, rel_round + 1e-4);
    CHECK(rel < bound, "%s x %s m %zu n %zu k %zu%s: rel err %.3g (bound %.3g)", wn, xn, m, n, k,
          planes_api ? " (planes)" : "", rel, bound);
    /* the kernel's own error: against the reference rounded to bf16, as y is */
    double rel_b = den > 0 ? sqrt(num_b / den) : sqrt(num_b);
    CHECK(rel_b < 2e-3, "%s x %s m %zu n %zu k %zu: rel err to bf16(ref) %.3g", wn, xn, m, n,
          k, rel_b);
    if (getenv("BFP_TEST_VERBOSE"))
        printf("%s x %s m %zu n %zu k %zu: rel %.3g, bf16 rounding %.3g, to bf16(ref) %.3g\n", wn,
               xn, m, n, k, rel, rel_round, rel_b);

    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(dbias));
    CU(cudaFree(dws));
    if (planes_api) {
        CU(cudaFree(dxc));
        CU(cudaFree(dxs));
        CU(cudaFree(dxm));
        CU(cudaFree(dts));
    }
    dw_free(dw);
    bfp_cuda_weight_free(pw);
    hq_free(&qw);
    hq_free(&qx);
    free(w), free(x), free(bias), free(y), free(ref);
}

/* the device runs sm_90a code (the wgmma kernel) */
static int hopper(void)
{
    int dev = 0, major = 0, minor = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major == 9 && minor == 0;
}

static void refusals(void)
{
    float w[64 * 64];
    for (int i = 0; i < 64 * 64; i++)
        w[i] = (float)gauss();
    hq qw;
    hq_make(BFP_MXFP4, BFP_DTYPE_F32, w, 64, 64, &qw);
    bfp_cuda_planar_weight dwp = dw_make(BFP_MXFP4, &qw, 64, 64), *dw = &dwp;
    void *dx, *dy, *dws;
    CU(cudaMalloc(&dx, 64 * 64 * 2));
    CU(cudaMalloc(&dy, 64 * 64 * 2));
    CU(cudaMemset(dx, 0, 64 * 64 * 2));
    size_t wsb = bfp_cuda_matmul_xq_workspace_size(dw, BFP_MXFP8_E4M3, 64, NULL);
    CU(cudaMalloc(&dws, wsb));
    CHECK(!bfp_cuda_matmul_xq_supported(BFP_MXFP4, BFP_NVFP4) &&
              !bfp_cuda_matmul_xq_supported(BFP_HIF4, BFP_MXFP4) &&
              bfp_cuda_matmul_xq_supported(BFP_MXFP4_PLUS, BFP_MXFP8_E4M3),
          "supported pairs");
    CHECK(bfp_cuda_matmul_xq_workspace_size(dw, BFP_NVFP4, 64, NULL) == 0, "size, bad pair");
    CHECK(bfp_cuda_matmul_xq(dw, BFP_NVFP4, dx, 64, NULL, dy, dws, wsb, NULL, NULL) ==
              BFP_ERR_UNSUPPORTED, "mxfp4 W x nvfp4 x refused");
    CHECK(bfp_cuda_matmul_xq(dw, (bfp_format)77, dx, 64, NULL, dy, dws, wsb, NULL, NULL) ==
              BFP_ERR_FORMAT, "unknown x format");
    CHECK(bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dws, wsb - 1, NULL, NULL) ==
              BFP_ERR_ARG, "short workspace");
    CHECK(bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, dx, 0, NULL, dy, dws, wsb, NULL, NULL) ==
              BFP_ERR_SHAPE, "m = 0");
    CHECK(bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, NULL, 64, NULL, dy, dws, wsb, NULL, NULL) ==
              BFP_ERR_ARG, "NULL x");
    bfp_cuda_planar_weight nocodes = dwp;
    nocodes.d_codes = NULL;
    CHECK(bfp_cuda_matmul_xq(&nocodes, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dws, wsb, NULL, NULL) ==
              BFP_ERR_ARG, "W without codes");
    bfp_matmul_tuning bad = {0};
    bad.ctas_per_sm = -1;
    CHECK(bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dws, wsb, &bad, NULL) ==
              BFP_ERR_ARG, "invalid tuning");
    bfp_matmul_tuning bad_k = {0};
    bad_k.xq_kernel = 3;
    CHECK(bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dws, wsb, &bad_k, NULL) ==
                  BFP_ERR_ARG &&
              bfp_cuda_matmul_xq_workspace_size(dw, BFP_MXFP8_E4M3, 64, &bad_k) == 0,
          "xq_kernel 3 refused");
    /* the wgmma kernel: MX pairs on Hopper only */
    bfp_matmul_tuning wg = {0};
    wg.xq_kernel = 2;
    bfp_status want = hopper() ? BFP_OK : BFP_ERR_UNSUPPORTED;
    size_t wsb2 = bfp_cuda_matmul_xq_workspace_size(dw, BFP_MXFP8_E4M3, 64, &wg);
    void *dws2 = NULL;
    CU(cudaMalloc(&dws2, wsb2 ? wsb2 : 256));
    CHECK(bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dws2, wsb2, &wg, NULL) == want,
          "xq_kernel 2: %s", want == BFP_OK ? "runs on Hopper" : "refused off Hopper");
    CHECK(want != BFP_OK || bfp_cuda_matmul_xq(dw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dws2,
                                               wsb2 - 1, &wg, NULL) == BFP_ERR_ARG,
          "xq_kernel 2: short workspace");
    CU(cudaDeviceSynchronize());
    CU(cudaFree(dws2));
    hq qn;
    hq_make(BFP_NVFP4, BFP_DTYPE_F32, w, 64, 64, &qn);
    bfp_cuda_planar_weight dnp = dw_make(BFP_NVFP4, &qn, 64, 64);
    CHECK(bfp_cuda_matmul_xq(&dnp, BFP_NVFP4, dx, 64, NULL, dy, dws, wsb, &wg, NULL) ==
                  BFP_ERR_UNSUPPORTED &&
              bfp_cuda_matmul_xq_workspace_size(&dnp, BFP_NVFP4, 64, &wg) == 0,
          "xq_kernel 2: nvfp4 refused");
    dw_free(&dnp);
    hq_free(&qn);
    /* the bf16-x route: x formats with a tensor scale refused, short or
     * misaligned workspaces refused */
    bfp_cuda_weight *pw = NULL;
    bfp_const_planes cw = {qw.codes, qw.scales, qw.meta, &qw.ts};
    CHECK(bfp_cuda_weight_upload(BFP_MXFP4, &cw, 64, 64, &pw) == BFP_OK, "upload");
    size_t qb = bfp_cuda_matmul_qx_workspace_size(pw, BFP_MXFP8_E4M3, 64, BFP_MATMUL_AUTO, NULL);
    void *dq = NULL;
    CU(cudaMalloc(&dq, qb + 256));
    CU(cudaMemset(dq, 0, qb + 256));
    CHECK(bfp_matmul_qx_supported(BFP_MXFP8_E4M3) && bfp_matmul_qx_supported(BFP_HIF4) &&
              !bfp_matmul_qx_supported(BFP_NVFP4) && !bfp_matmul_qx_supported(BFP_NVFP4_PLUS) &&
              !bfp_matmul_qx_supported((bfp_format)77),
          "qx: formats with the route");
    CHECK(qb > 0 && bfp_cuda_matmul_qx_workspace_size(pw, BFP_NVFP4, 64, BFP_MATMUL_AUTO,
                                                      NULL) == 0 &&
              bfp_cuda_matmul_qx_workspace_size(pw, BFP_MXFP4, 64, BFP_MATMUL_AUTO, &bad) == 0,
          "qx: workspace sizes");
    CHECK(bfp_cuda_matmul_qx(pw, BFP_NVFP4, dx, 64, NULL, dy, dq, qb, BFP_MATMUL_AUTO, NULL,
                             NULL) == BFP_ERR_UNSUPPORTED &&
              bfp_cuda_matmul_qx(pw, (bfp_format)77, dx, 64, NULL, dy, dq, qb, BFP_MATMUL_AUTO,
                                 NULL, NULL) == BFP_ERR_FORMAT &&
              bfp_cuda_matmul_qx(pw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dq, qb - 1,
                                 BFP_MATMUL_AUTO, NULL, NULL) == BFP_ERR_ARG &&
              bfp_cuda_matmul_qx(pw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, (char *)dq + 16, qb,
                                 BFP_MATMUL_AUTO, NULL, NULL) == BFP_ERR_ARG &&
              bfp_cuda_matmul_qx(pw, BFP_MXFP8_E4M3, dx, 0, NULL, dy, dq, qb, BFP_MATMUL_AUTO,
                                 NULL, NULL) == BFP_ERR_SHAPE &&
              bfp_cuda_matmul_qx(pw, BFP_MXFP8_E4M3, NULL, 64, NULL, dy, dq, qb,
                                 BFP_MATMUL_AUTO, NULL, NULL) == BFP_ERR_ARG,
          "qx: refusals");
    CHECK(bfp_cuda_matmul_qx(pw, BFP_MXFP8_E4M3, dx, 64, NULL, dy, dq, qb, BFP_MATMUL_AUTO, NULL,
                             NULL) == BFP_OK,
          "qx: a call with the full workspace");
    CU(cudaDeviceSynchronize());
    CU(cudaFree(dq));
    bfp_cuda_weight_free(pw);
    CU(cudaFree(dx));
    CU(cudaFree(dy));
    CU(cudaFree(dws));
    dw_free(dw);
    hq_free(&qw);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed by a time limit keeps its lines */
    if (!bfp_cuda_available()) {
        printf("test_cuda_matmul_xq: skipped: no GPU\n");
        return 0;
    }
    static const bfp_format pairs[][2] = {
        {BFP_MXFP4, BFP_MXFP8_E4M3},      {BFP_MXFP4, BFP_MXFP4},
        {BFP_MXFP4, BFP_MXFP4_PLUS},      {BFP_MXFP4_PLUS, BFP_MXFP8_E4M3},
        {BFP_MXFP4_PLUS, BFP_MXFP4},      {BFP_MXFP4_PLUS, BFP_MXFP4_PLUS},
        {BFP_NVFP4, BFP_NVFP4},           {BFP_NVFP4_PLUS, BFP_NVFP4}};
    static const size_t shapes[][3] = {/* m, n, k */
        {1, 256, 4096}, {16, 100, 640}, {17, 300, 333}, {128, 512, 1024},
        {300, 130, 520}, {1, 1, 1},     {5, 33, 65},    {4096, 48, 256},
        {128, 1024, 8192}};
    const char *q = getenv("BFP_TEST_QUICK");
    int quick = q && *q && *q != '0';
    size_t nshapes = quick ? 3 : sizeof shapes / sizeof shapes[0];
    const char *ke = getenv("BFP_TEST_XQ_KERNEL");
    int only = ke && *ke ? atoi(ke) : 0, wg = hopper();
    if (only == 2 && !wg)
        printf("test_cuda_matmul_xq: BFP_TEST_XQ_KERNEL=2 but not Hopper: no wgmma runs\n");
    for (int kern = 1; kern <= 3; kern++) {
        if ((only && kern != only) || (kern == 2 && !wg))
            continue;
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            if (kern == 2 && pairs[p][0] != BFP_MXFP4 && pairs[p][0] != BFP_MXFP4_PLUS)
                continue;
            if (kern == 3 && !bfp_matmul_qx_supported(pairs[p][1]))
                continue;
            for (size_t s = 0; s < nshapes; s++) {
                size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                run_case(pairs[p][0], pairs[p][1], m, n, k, (int)(s % 2), 0, kern);
                if (s % 3 == 1) /* with bias; the planes API (the route has none) */
                    run_case(pairs[p][0], pairs[p][1], m, n, k, 1, kern != 3, kern);
            }
        }
    }
    /* the bf16-x route serves any packed W format: W nvfp4 and hif4 with MX x */
    if (!only || only == 3)
        for (size_t s = 0; s < nshapes; s++) {
            size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            run_case(BFP_NVFP4, BFP_MXFP8_E4M3, m, n, k, (int)(s % 2), 0, 3);
            run_case(BFP_HIF4, BFP_MXFP4, m, n, k, 1, 0, 3);
        }
    refusals();
    return check_summary("test_cuda_matmul_xq");
}
#else
int main(void)
{
    printf("test_cuda_matmul_xq: skipped: no GPU (built without CUDA)\n");
    return 0;
}
#endif

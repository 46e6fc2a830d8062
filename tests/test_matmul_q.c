/* test_matmul_q.c - the reference matmul with a quantized x
 * (bfp_matmul_ref_q): hand-worked W4A8 and W4A4 products (an E4M3 tie, an
 * MX+ block max), every weight format against every activation format
 * compared with an independent float64 product of bfp_dequantize's values,
 * NaN blocks of either side, argument errors. */
#include "bfp.h"
#include "check.h"
#include "prng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const bfp_format wfmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS,
                                   BFP_HIF4};
static const bfp_format xfmts[] = {BFP_MXFP8_E4M3, BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4};

static prng rng = {0x5eed21};

typedef struct {
    uint8_t *codes, *scales, *meta;
    float ts;
} qt;

static void quant(bfp_format f, const float *v, size_t rows, size_t cols, qt *q)
{
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(f, rows, cols, &sz);
    q->codes = calloc(1, sz.codes);
    q->scales = calloc(1, sz.scales);
    q->meta = calloc(1, sz.meta + 1);
    q->ts = 0;
    bfp_planes p = {q->codes, q->scales, q->meta, &q->ts};
    bfp_status st = bfp_quantize(f, BFP_DTYPE_F32, v, rows, cols, NULL, &p, NULL);
    CHECK(st == BFP_OK, "quantize %d: %s", (int)f, bfp_status_str(st));
}

static bfp_const_planes cview(const qt *q)
{
    bfp_const_planes c = {q->codes, q->scales, q->meta, &q->ts};
    return c;
}

static void qfree(qt *q)
{
    free(q->codes);
    free(q->scales);
    free(q->meta);
}

static void hand_cases(void)
{
    /* W4A8: W mxfp4 [1.5, -4, 0 ..., 1] (scale 1, exact); x mxfp8_e4m3
     * [2, 0.25, 0 ..., 100]: amax 100 gives scale 2^-2, and 100 / 2^-2 = 400
     * is a tie between 384 and 416, RNE to 384, so x[31] decodes to 96.
     * y = 2 * 1.5 + 0.25 * -4 + 96 * 1 + bias 0.5 = 98.5 */
    float w[32] = {0}, x[32] = {0};
    w[0] = 1.5f, w[1] = -4.0f, w[31] = 1.0f;
    x[0] = 2.0f, x[1] = 0.25f, x[31] = 100.0f;
    qt qw, qx;
    quant(BFP_MXFP4, w, 1, 32, &qw);
    quant(BFP_MXFP8_E4M3, x, 1, 32, &qx);
    bfp_const_planes cw = cview(&qw), cx = cview(&qx);
    uint16_t bias = bfp_f32_to_bf16(0.5f);
    float y = 0;
    bfp_status st = bfp_matmul_ref_q(BFP_MXFP4, &cw, 1, 32, BFP_MXFP8_E4M3, &cx, 1, &bias, &y);
    CHECK(st == BFP_OK && y == 98.5f, "W4A8 hand case: %s y = %g, want 98.5",
          bfp_status_str(st), y);
    qfree(&qx);

    /* W4A4 with the paper's MX+ block: x = [-0.39, -9.84, -0.20, 0.99]:
     * shared_exp 1; MXFP4+ keeps the block max as -10 (MXFP4: -8), the rest
     * decode to -0, -0, 1. W = [0, 1, 0, 2]: y = -10 + 2 = -8 (MXFP4: -6). */
    float x2[32] = {-0.39f, -9.84f, -0.20f, 0.99f}, w2[32] = {0, 1, 0, 2};
    qt qw2, qp, qm;
    quant(BFP_MXFP4, w2, 1, 32, &qw2);
    quant(BFP_MXFP4_PLUS, x2, 1, 32, &qp);
    quant(BFP_MXFP4, x2, 1, 32, &qm);
    bfp_const_planes cw2 = cview(&qw2), cp = cview(&qp), cm = cview(&qm);
    st = bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, BFP_MXFP4_PLUS, &cp, 1, NULL, &y);
    CHECK(st == BFP_OK && y == -8.0f, "W4A4 MX+ hand case: y = %g, want -8", y);
    st = bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, BFP_MXFP4, &cm, 1, NULL, &y);
    CHECK(st == BFP_OK && y == -6.0f, "W4A4 MX hand case: y = %g, want -6", y);

    /* errors */
    CHECK(bfp_matmul_ref_q((bfp_format)99, &cw2, 1, 32, BFP_MXFP4, &cm, 1, NULL, &y) ==
              BFP_ERR_FORMAT, "unknown W format");
    CHECK(bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, (bfp_format)0, &cm, 1, NULL, &y) ==
              BFP_ERR_FORMAT, "unknown x format");
    CHECK(bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, BFP_MXFP4, &cm, 0, NULL, &y) ==
              BFP_ERR_SHAPE, "m = 0");
    CHECK(bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, BFP_MXFP4, NULL, 1, NULL, &y) ==
              BFP_ERR_ARG, "NULL x");
    CHECK(bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, BFP_MXFP4, &cm, 1, NULL, NULL) ==
              BFP_ERR_ARG, "NULL y");
    bfp_const_planes nometa = cp;
    nometa.meta = NULL;
    CHECK(bfp_matmul_ref_q(BFP_MXFP4, &cw2, 1, 32, BFP_MXFP4_PLUS, &nometa, 1, NULL, &y) ==
              BFP_ERR_ARG, "MX+ x without its meta plane");
    qfree(&qw);
    qfree(&qw2);
    qfree(&qp);
    qfree(&qm);
}

static void fill(float *v, size_t rows, size_t cols, int nan_row)
{
    for (size_t r = 0; r < rows; r++) {
        int kind = (int)(prng_next(&rng) % 6);
        double s = kind == 3 ? 1e12 : kind == 4 ? 1e-12 : 1.0;
        for (size_t c = 0; c < cols; c++) {
            double g = (prng_unit(&rng) + prng_unit(&rng) - 1.0) * s;
            if (kind == 1 && prng_unit(&rng) < 0.05)
                g *= 300.0;
            if (kind == 2 && c < cols / 2)
                g = 0.0;
            v[r * cols + c] = (float)g;
        }
    }
    if (nan_row >= 0)
        v[(size_t)nan_row * cols + cols / 3] = NAN;
}

/* one pair against a float64 product of bfp_dequantize's values */
static void pair_case(bfp_format wf, bfp_format xf, size_t n, size_t k, size_t m)
{
    float *w = malloc(n * k * sizeof *w), *x = malloc(m * k * sizeof *x);
    float *wd = malloc(n * k * sizeof *wd), *xd = malloc(m * k * sizeof *xd);
    float *y = malloc(m * n * sizeof *y);
    uint16_t *bias = malloc(n * sizeof *bias);
    int wnan = n > 2 ? 1 : -1, xnan = m > 2 ? 2 : -1;
    fill(w, n, k, wnan);
    fill(x, m, k, xnan);
    for (size_t j = 0; j < n; j++)
        bias[j] = bfp_f32_to_bf16((float)(prng_unit(&rng) - 0.5));
    qt qw, qx;
    quant(wf, w, n, k, &qw);
    quant(xf, x, m, k, &qx);
    bfp_const_planes cw = cview(&qw), cx = cview(&qx);
    CHECK(bfp_dequantize(wf, &cw, n, k, BFP_DTYPE_F32, wd) == BFP_OK, "dequantize W");
    CHECK(bfp_dequantize(xf, &cx, m, k, BFP_DTYPE_F32, xd) == BFP_OK, "dequantize x");
    bfp_status st = bfp_matmul_ref_q(wf, &cw, n, k, xf, &cx, m, bias, y);
    CHECK(st == BFP_OK, "ref_q %d x %d: %s", (int)wf, (int)xf, bfp_status_str(st));
    size_t bad = 0, nans = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (size_t c = 0; c < k; c++)
                acc += (double)xd[i * k + c] * (double)wd[j * k + c];
            float want = (float)(acc + bfp_bf16_to_f32(bias[j]));
            float got = y[i * n + j];
            int row_nan = (int)i == xnan || (int)j == wnan;
            if (row_nan) {
                nans += isnan(got) != 0;
                bad += !isnan(got);
            } else if (!(got == want)) {
                bad++;
            }
        }
    CHECK(bad == 0, "W %s x %s, %zux%zu m %zu: %zu outputs differ from dequantize + sum",
          bfp_format_get(wf)->name, bfp_format_get(xf)->name, n, k, m, bad);
    CHECK((wnan < 0 && xnan < 0) || nans > 0, "NaN blocks gave no NaN output");
    qfree(&qw);
    qfree(&qx);
    free(w), free(x), free(wd), free(xd), free(y), free(bias);
}

int main(void)
{
    hand_cases();
    static const size_t shapes[][3] = {{1, 1, 1}, {5, 33, 3}, {17, 100, 4}, {8, 256, 17}};
    for (size_t a = 0; a < sizeof wfmts / sizeof wfmts[0]; a++)
        for (size_t b = 0; b < sizeof xfmts / sizeof xfmts[0]; b++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                pair_case(wfmts[a], xfmts[b], shapes[s][0], shapes[s][1], shapes[s][2]);
    return check_summary("test_matmul_q");
}

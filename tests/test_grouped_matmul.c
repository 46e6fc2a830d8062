/* test_grouped_matmul.c - the grouped (MoE) matmul's reference and packed
 * buffer on the CPU: bfp_grouped_matmul_ref against an independent sum per
 * row (the expert found by scanning the offsets, W decoded by
 * bfp_dequantize_ref) for every routing kind, empty experts, one row and odd
 * counts; rows of other experts untouched; the routing checks; the grouped
 * buffer is each expert's packed image at e times its size. */
#include "bfp_grouped.h"
#include "check.h"
#include "grouped_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static prng rng = {0x5eed23};

/* y[t] by the definition: expert of row t, its decoded W, float64 sum */
static void naive(bfp_format fmt, const gexperts *g, const uint16_t *x, size_t t_rows,
                  const int32_t *off, const uint16_t *bias, float *y)
{
    size_t n = g->n, k = g->k;
    float *wd = malloc(n * k * sizeof *wd);
    for (size_t e = 0; e < g->e_count; e++) {
        bfp_dequantize_ref(fmt, &g->w[e], n, k, BFP_DTYPE_F32, wd);
        for (size_t t = 0; t < t_rows; t++) {
            if ((int32_t)t < off[e] || (int32_t)t >= off[e + 1])
                continue;
            for (size_t j = 0; j < n; j++) {
                double acc = 0.0;
                for (size_t c = 0; c < k; c++)
                    acc += (double)bfp_bf16_to_f32(x[t * k + c]) * (double)wd[j * k + c];
                double b = bias ? bfp_bf16_to_f32(bias[e * n + j]) : 0.0;
                y[t * n + j] = (float)(acc + b);
            }
        }
    }
    free(wd);
}

static int same_bits(const float *a, const float *b, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++)
        if (memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

static void ref_case(bfp_format fmt, size_t e_count, size_t n, size_t k, size_t t_rows, int kind,
                     int with_bias)
{
    gexperts g;
    CHECK(gexperts_make(&g, fmt, e_count, n, k, &rng), "make experts");
    int32_t *off = malloc((e_count + 1) * sizeof *off);
    route_make(kind, e_count, t_rows, &rng, off);
    uint16_t *x = malloc((t_rows * k + 1) * sizeof *x);
    gx_make(x, t_rows, k, &rng);
    uint16_t *bias = NULL;
    if (with_bias) {
        bias = malloc(e_count * n * sizeof *bias);
        for (size_t i = 0; i < e_count * n; i++)
            bias[i] = bfp_f32_to_bf16((float)(prng_unit(&rng) * 4.0 - 2.0));
    }
    float *y = malloc((t_rows * n + 1) * sizeof *y), *want = malloc((t_rows * n + 1) * sizeof *y);
    naive(fmt, &g, x, t_rows, off, bias, want);
    bfp_status st = bfp_grouped_matmul_ref(fmt, g.w, e_count, n, k, x, t_rows, off, bias, y);
    CHECK(st == BFP_OK, "%s E=%zu %zux%zu T=%zu %s: status %d", bfp_format_get(fmt)->name, e_count, n,
          k, t_rows, route_names[kind], st);
    CHECK(same_bits(y, want, t_rows * n), "%s E=%zu %zux%zu T=%zu %s bias=%d: y differs",
          bfp_format_get(fmt)->name, e_count, n, k, t_rows, route_names[kind], with_bias);
    free(y), free(want), free(bias), free(x), free(off);
    gexperts_free(&g);
}

static void arg_checks(void)
{
    gexperts g;
    CHECK(gexperts_make(&g, BFP_MXFP4, 3, 16, 64, &rng), "make experts");
    uint16_t x[4 * 64] = {0};
    float y[4 * 16];
    int32_t ok[4] = {0, 1, 1, 4}, dec[4] = {0, 3, 1, 4}, start[4] = {1, 1, 2, 4},
            end[4] = {0, 1, 2, 3}, neg[4] = {0, -1, 2, 4};
    bfp_status st;
    st = bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, ok, NULL, y);
    CHECK(st == BFP_OK, "good call: %d", st);
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, dec, NULL, y) == BFP_ERR_ARG,
          "decreasing offsets refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, start, NULL, y) == BFP_ERR_ARG,
          "offsets[0] != 0 refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, end, NULL, y) == BFP_ERR_ARG,
          "offsets[E] != T refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, neg, NULL, y) == BFP_ERR_ARG,
          "negative count refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, NULL, NULL, y) == BFP_ERR_ARG,
          "NULL offsets refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, NULL, 3, 16, 64, x, 4, ok, NULL, y) == BFP_ERR_ARG,
          "NULL weights refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, NULL, 4, ok, NULL, y) == BFP_ERR_ARG,
          "NULL x refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, x, 4, ok, NULL, NULL) == BFP_ERR_ARG,
          "NULL y refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 0, 16, 64, x, 4, ok, NULL, y) == BFP_ERR_SHAPE,
          "E = 0 refused");
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 0, 64, x, 4, ok, NULL, y) == BFP_ERR_SHAPE,
          "n = 0 refused");
    CHECK(bfp_grouped_matmul_ref((bfp_format)999, g.w, 3, 16, 64, x, 4, ok, NULL, y) ==
              BFP_ERR_FORMAT,
          "unknown format refused");
    bfp_const_planes bad[3] = {g.w[0], g.w[1], g.w[2]};
    bad[0].scales = NULL; /* an expert with no rows is still checked */
    int32_t skip0[4] = {0, 0, 2, 4};
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, bad, 3, 16, 64, x, 4, skip0, NULL, y) == BFP_ERR_ARG,
          "an empty expert's NULL plane refused");
    int32_t zero[4] = {0, 0, 0, 0};
    CHECK(bfp_grouped_matmul_ref(BFP_MXFP4, g.w, 3, 16, 64, NULL, 0, zero, NULL, NULL) == BFP_OK,
          "T = 0 is nothing to do");
    CHECK(bfp_grouped_offsets_check(ok, BFP_GROUPED_MAX_EXPERTS + 1, 4) == BFP_ERR_SHAPE,
          "too many experts refused");
    size_t bytes;
    CHECK(bfp_cuda_grouped_weight_packed_size(BFP_MXFP4, 0, 16, 64, &bytes) == BFP_ERR_SHAPE,
          "packed size of E = 0 refused");
    CHECK(bfp_cuda_grouped_weight_packed_size(BFP_MXFP4, 3, 16, 64, NULL) == BFP_ERR_ARG,
          "packed size without an out pointer refused");
    CHECK(bfp_cuda_grouped_weight_packed_size(BFP_MXFP4_PP, 3, 16, 64, &bytes) != BFP_OK,
          "a format outside the matmul set refused");
    gexperts_free(&g);
}

/* the grouped image is the experts' single images back to back */
static void pack_layout(bfp_format fmt)
{
    gexperts g;
    size_t e_count = 5, n = 40, k = 100, one, total;
    CHECK(gexperts_make(&g, fmt, e_count, n, k, &rng), "make experts");
    CHECK(bfp_cuda_weight_packed_size(fmt, n, k, &one) == BFP_OK, "single size");
    CHECK(bfp_cuda_grouped_weight_packed_size(fmt, e_count, n, k, &total) == BFP_OK &&
              total == one * e_count,
          "%s grouped size %zu = %zu x %zu", bfp_format_get(fmt)->name, total, e_count, one);
    uint8_t *buf = malloc(total), *single = malloc(one);
    CHECK(bfp_cuda_grouped_weight_pack_host(fmt, g.w, e_count, n, k, buf, total - 1) ==
              BFP_ERR_ARG,
          "short buffer refused");
    CHECK(bfp_cuda_grouped_weight_pack_host(fmt, g.w, e_count, n, k, buf, total) == BFP_OK,
          "pack host");
    for (size_t e = 0; e < e_count; e++) {
        bfp_cuda_weight_pack_host(fmt, &g.w[e], n, k, single, one);
        CHECK(memcmp(buf + e * one, single, one) == 0, "%s expert %zu image",
              bfp_format_get(fmt)->name, e);
    }
    free(buf), free(single);
    gexperts_free(&g);
}

int main(void)
{
    static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS,
                                      BFP_HIF4};
    for (int f = 0; f < 5; f++) {
        for (int kind = 0; kind < ROUTE_KINDS; kind++)
            ref_case(fmts[f], 6, 24, 96, 37, kind, kind & 1);
        ref_case(fmts[f], 1, 17, 65, 1, ROUTE_RANDOM, 1);     /* one expert, one row */
        ref_case(fmts[f], 9, 33, 64, 1, ROUTE_LAST_ONLY, 0);  /* one token, last expert */
        ref_case(fmts[f], 4, 16, 200, 0, ROUTE_RANDOM, 1);    /* no rows at all */
        pack_layout(fmts[f]);
    }
    ref_case(BFP_MXFP4, 32, 48, 128, 301, ROUTE_SKEWED, 1); /* odd counts, many experts */
    arg_checks();
    return check_summary("test_grouped_matmul");
}

/* test_error_stats.c - bfp_error_stats_f32 / bfp_error_stats_quantized:
 * every value is compared or counted by reason (non-finite input, block that
 * decodes to NaN); nothing compared gives NaN measures, not "exact"; the
 * saturated count on hand-worked blocks of every family, and none where the
 * scale rule leaves no room for it (MX ceil / rceil). */
#include "check.h"
#include "prng.h"

#include "bfp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bfp_format fmt;
    size_t rows, cols;
    uint8_t *codes, *scales, *meta;
    float ts;
    float *y;
} qt;

/* Quantize x (reference) and decode it into q->y. */
static bfp_status qt_make(qt *q, bfp_format fmt, const float *x, size_t rows, size_t cols,
                          const bfp_options *o)
{
    bfp_plane_sizes sz;
    memset(q, 0, sizeof *q);
    bfp_status st = bfp_plane_sizes_for(fmt, rows, cols, &sz);
    if (st != BFP_OK)
        return st;
    q->fmt = fmt;
    q->rows = rows;
    q->cols = cols;
    q->codes = malloc(sz.codes);
    q->scales = malloc(sz.scales);
    q->meta = malloc(sz.meta ? sz.meta : 1);
    q->y = malloc(rows * cols * sizeof *q->y);
    bfp_planes out = {q->codes, q->scales, q->meta, &q->ts};
    st = bfp_quantize_ref(fmt, BFP_DTYPE_F32, x, rows, cols, o, &out, NULL);
    bfp_const_planes in = {q->codes, q->scales, q->meta, &q->ts};
    return st != BFP_OK ? st : bfp_dequantize_to_f32(fmt, &in, rows, cols, q->y);
}

static void qt_free(qt *q)
{
    free(q->codes);
    free(q->scales);
    free(q->meta);
    free(q->y);
}

static bfp_error_stats qt_stats(const qt *q, const float *x)
{
    bfp_error_stats es;
    memset(&es, 0xA5, sizeof es);
    bfp_const_planes in = {q->codes, q->scales, q->meta, &q->ts};
    bfp_status st = bfp_error_stats_quantized(q->fmt, &in, q->rows, q->cols, x, q->y, &es);
    CHECK(st == BFP_OK, "%s: error_stats_quantized %d", bfp_format_get(q->fmt)->name, st);
    return es;
}

static size_t saturated(bfp_format fmt, const float *x, size_t n, const bfp_options *o)
{
    qt q;
    CHECK(qt_make(&q, fmt, x, 1, n, o) == BFP_OK, "%s: quantize", bfp_format_get(fmt)->name);
    size_t s = qt_stats(&q, x).saturated;
    qt_free(&q);
    return s;
}

static void test_nonfinite(void)
{
    enum { N = 128 }; /* two HiF4 blocks */
    float x[N];
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        for (int k = 0; k < N; k++)
            x[k] = k % 2 ? NAN : -INFINITY;
        qt q;
        CHECK(qt_make(&q, f->id, x, 1, N, NULL) == BFP_OK, "%s: quantize", f->name);
        bfp_error_stats es = qt_stats(&q, x);
        CHECK(es.count == 0 && es.skipped_input == N && es.skipped_output == 0 &&
                  es.nonzero == 0 && es.saturated == 0,
              "%s all non-finite: count %zu, skipped %zu + %zu", f->name, es.count,
              es.skipped_input, es.skipped_output);
        CHECK(isnan(es.sqnr_db) && isnan(es.rmse) && isnan(es.max_abs_err) &&
                  isnan(es.max_rel_err) && isnan(es.mean_rel_err),
              "%s all non-finite: sqnr %g rmse %g, want NaN (nothing compared)", f->name,
              es.sqnr_db, es.rmse);
        qt_free(&q);

        /* one NaN in the first block: the rest of that block decodes to NaN */
        for (int k = 0; k < N; k++)
            x[k] = (float)(k % 7) - 3.0f;
        x[3] = NAN;
        size_t B = (size_t)f->block;
        CHECK(qt_make(&q, f->id, x, 1, N, NULL) == BFP_OK, "%s: quantize", f->name);
        es = qt_stats(&q, x);
        CHECK(es.skipped_input == 1 && es.skipped_output == B - 1 && es.count == N - B,
              "%s one NaN: count %zu, skipped %zu + %zu (block %zu)", f->name, es.count,
              es.skipped_input, es.skipped_output, B);
        CHECK(!isnan(es.sqnr_db) && isfinite(es.rmse), "%s one NaN: measures defined", f->name);
        /* same answer without the planes, saturated aside */
        bfp_error_stats e2;
        bfp_error_stats_f32(x, q.y, N, &e2);
        CHECK(e2.count == es.count && e2.skipped_input == 1 && e2.skipped_output == B - 1 &&
                  e2.saturated == 0 && e2.sqnr_db == es.sqnr_db,
              "%s: error_stats_f32 agrees", f->name);
        for (int k = 0; k < N; k++)
            x[k] = 0.0f;
        qt_free(&q);
        /* exact reconstruction: SQNR inf, every value compared */
        CHECK(qt_make(&q, f->id, x, 1, N, NULL) == BFP_OK, "%s: quantize", f->name);
        es = qt_stats(&q, x);
        CHECK(es.count == N && es.sqnr_db == INFINITY && es.rmse == 0 && es.saturated == 0,
              "%s zeros: count %zu sqnr %g", f->name, es.count, es.sqnr_db);
        qt_free(&q);
    }
    /* an impossible code (E4M3 0x7F) decodes to NaN: counted as skipped_output */
    float v[32];
    for (int k = 0; k < 32; k++)
        v[k] = (float)k;
    qt q;
    CHECK(qt_make(&q, BFP_MXFP8_E4M3, v, 1, 32, NULL) == BFP_OK, "mxfp8 quantize");
    q.codes[5] = 0x7F;
    bfp_const_planes in = {q.codes, q.scales, q.meta, &q.ts};
    bfp_dequantize_to_f32(BFP_MXFP8_E4M3, &in, 1, 32, q.y);
    bfp_error_stats es = qt_stats(&q, v);
    CHECK(es.count + es.skipped_output == 32 && es.skipped_output >= 1 && es.skipped_input == 0,
          "bad code: count %zu, skipped_output %zu", es.count, es.skipped_output);
    qt_free(&q);
}

/* Hand-worked blocks: 1.0 fill, the values named at the front. */
static size_t sat_of(bfp_format fmt, size_t n, const float *front, size_t nf,
                     const bfp_options *o)
{
    float *x = malloc(n * sizeof *x);
    for (size_t k = 0; k < n; k++)
        x[k] = k < nf ? front[k] : 1.0f;
    size_t s = saturated(fmt, x, n, o);
    free(x);
    return s;
}

static void test_saturation_hand(void)
{
    bfp_options ceil_o, nots;
    bfp_options_init(&ceil_o);
    ceil_o.scale_mode = BFP_SCALE_CEIL;
    bfp_options_init(&nots);
    nots.nvfp4_no_tensor_scale = 1;
    /* MXFP4 floor: block max 7 gives shared exponent 0, largest element 6 */
    CHECK(sat_of(BFP_MXFP4, 32, (float[]){7.0f}, 1, NULL) == 1, "mxfp4 7");
    CHECK(sat_of(BFP_MXFP4, 32, (float[]){6.0f}, 1, NULL) == 0, "mxfp4 6 fits");
    CHECK(sat_of(BFP_MXFP4, 32, (float[]){7.0f, 6.5f, -6.9f}, 3, NULL) == 3, "mxfp4 three");
    CHECK(sat_of(BFP_MXFP4, 32, (float[]){7.0f, 6.5f}, 2, &ceil_o) == 0, "mxfp4 ceil");
    /* MXFP4+: the block max reaches 7.5, the others 6 */
    CHECK(sat_of(BFP_MXFP4_PLUS, 32, (float[]){7.0f}, 1, NULL) == 0, "mxfp4+ 7");
    CHECK(sat_of(BFP_MXFP4_PLUS, 32, (float[]){7.9f, 6.9f}, 2, NULL) == 2, "mxfp4+ 7.9 6.9");
    CHECK(sat_of(BFP_MXFP4_PP, 32, (float[]){7.9f}, 1, NULL) == 1, "mxfp4++ 7.9");
    /* MXFP8 E4M3: 500 with shared exponent 0, largest element 448 */
    CHECK(sat_of(BFP_MXFP8_E4M3, 32, (float[]){500.0f}, 1, NULL) == 1, "mxfp8_e4m3 500");
    CHECK(sat_of(BFP_MXFP8_E4M3_PLUS, 32, (float[]){509.0f}, 1, NULL) == 0, "mxfp8_e4m3+ 509 (BM to 510)");
    CHECK(sat_of(BFP_MXFP8_E4M3_PLUS, 32, (float[]){511.0f}, 1, NULL) == 1, "mxfp8_e4m3+ 511");
    CHECK(sat_of(BFP_MXINT8, 32, (float[]){1.999f}, 1, NULL) == 1, "mxint8 1.999 > 127/64");
    /* NVFP4: 1344 -> s_enc 2, t 2688, block scale 448: exact, nothing clipped */
    CHECK(sat_of(BFP_NVFP4, 16, (float[]){1344.0f}, 1, NULL) == 0, "nvfp4 1344");
    CHECK(sat_of(BFP_NVFP4, 16, (float[]){1e4f}, 1, NULL) == 0, "nvfp4 1e4 tensor scale");
    /* a block whose scale underflows to zero lost its values, but not to clipping */
    float under[17] = {[16] = 3e38f};
    for (int k = 0; k < 16; k++)
        under[k] = 1.0f;
    CHECK(sat_of(BFP_NVFP4, 32, under, 17, NULL) == 0, "nvfp4 zero-scale block");
    /* without tensor scale the block scale saturates at 448: the range is 2688 */
    CHECK(sat_of(BFP_NVFP4, 16, (float[]){1e4f, -3000.0f, 2000.0f}, 3, &nots) == 2,
          "nvfp4 no tensor scale");
    CHECK(sat_of(BFP_NVFP4_PLUS, 16, (float[]){1e4f, 3000.0f}, 2, &nots) == 2,
          "nvfp4+ no tensor scale");
    /* HiF4: 3e38 comes back as 1.75 * 49152 * 4 */
    float h[64];
    for (int k = 0; k < 64; k++)
        h[k] = 1.0f;
    h[0] = 3e38f;
    qt q;
    CHECK(qt_make(&q, BFP_HIF4, h, 1, 64, NULL) == BFP_OK, "hif4 quantize");
    CHECK(q.y[0] == 344064.0f, "hif4 3e38 decodes to %g", q.y[0]);
    CHECK(qt_stats(&q, h).saturated == 1, "hif4 3e38 saturated");
    qt_free(&q);
}

/* The scale rules ceil and rceil leave no room to saturate: every MX format
 * reports 0 on any finite data; floor on the same data reports some, and
 * every saturated value came back smaller. */
static void test_saturation_rules(void)
{
    enum { R = 8, C = 96 };
    float *x = malloc(R * C * sizeof *x);
    prng p = {77};
    for (int k = 0; k < R * C; k++)
        x[k] = (float)((prng_unit(&p) - 0.5) * ldexp(1.0, prng_int(&p, -20, 20)));
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        bfp_options o;
        bfp_options_init(&o);
        qt q;
        CHECK(qt_make(&q, f->id, x, R, C, &o) == BFP_OK, "%s: quantize", f->name);
        bfp_error_stats es = qt_stats(&q, x);
        size_t smaller = 0;
        for (int k = 0; k < R * C; k++)
            smaller += fabsf(q.y[k]) < fabsf(x[k]);
        CHECK(es.saturated <= smaller, "%s: %zu saturated, only %zu came back smaller", f->name,
              es.saturated, smaller);
        if (f->family == BFP_FAMILY_MX && f->id != BFP_MXINT8) /* INT8: only [127/64, 2) */
            CHECK(es.saturated > 0, "%s floor: no saturation on random blocks", f->name);
        qt_free(&q);
        if (f->family != BFP_FAMILY_MX)
            continue;
        for (int m = 0; m < 2; m++) {
            o.scale_mode = m ? BFP_SCALE_RCEIL : BFP_SCALE_CEIL;
            CHECK(qt_make(&q, f->id, x, R, C, &o) == BFP_OK, "%s: quantize", f->name);
            es = qt_stats(&q, x);
            CHECK(es.saturated == 0, "%s scale mode %d: %zu saturated", f->name, (int)o.scale_mode,
                  es.saturated);
            qt_free(&q);
        }
    }
    free(x);
}

static void test_args(void)
{
    float x[32] = {0}, y[32] = {0};
    uint8_t codes[16] = {0}, scales[1] = {127};
    bfp_const_planes in = {codes, scales, NULL, NULL};
    bfp_error_stats es;
    CHECK(bfp_error_stats_quantized((bfp_format)0, &in, 1, 32, x, y, &es) == BFP_ERR_FORMAT,
          "format 0");
    CHECK(bfp_error_stats_quantized(BFP_MXFP4, NULL, 1, 32, x, y, &es) == BFP_ERR_ARG, "NULL q");
    CHECK(bfp_error_stats_quantized(BFP_MXFP4, &in, 1, 32, NULL, y, &es) == BFP_ERR_ARG, "NULL x");
    CHECK(bfp_error_stats_quantized(BFP_MXFP4, &in, 1, 32, x, y, NULL) == BFP_ERR_ARG, "NULL out");
    CHECK(bfp_error_stats_quantized(BFP_MXFP4_PLUS, &in, 1, 32, x, y, &es) == BFP_ERR_ARG,
          "no meta");
    CHECK(bfp_error_stats_quantized(BFP_MXFP4, &in, 0, 32, x, y, &es) == BFP_ERR_SHAPE, "0 rows");
    CHECK(bfp_error_stats_quantized(BFP_MXFP4, &in, 1, 32, x, y, &es) == BFP_OK &&
              es.count == 32 && es.saturated == 0,
          "zeros");
}

int main(void)
{
    test_nonfinite();
    test_saturation_hand();
    test_saturation_rules();
    test_args();
    return check_summary("test_error_stats");
}

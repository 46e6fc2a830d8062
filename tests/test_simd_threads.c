/* test_simd_threads.c - results do not depend on the thread count: quantize
 * with bfp_options.threads = 1, 2, 3, 7 and automatic, dequantize with
 * bfp_set_threads(1, 2, 3, 7), on a multi-MiB tensor whose rows end in partial
 * blocks; NVFP4's tensor amax (placed where only one thread sees it) and
 * the block statistics must come out as the reference's. Rows without a
 * partial block are dequantized by one kernel call per thread (long calls
 * take other paths: NVFP4 makes all its rows up front): those are compared
 * with the reference on planes of arbitrary bytes, and so are outputs of
 * 8 MiB and more (non-temporal stores, aligned or joined across cache lines
 * when the output is off alignment) at several offsets and thread counts. */
#define _POSIX_C_SOURCE 200809L
#include "test_simd_util.h"

#define ROWS 384
#define COLS 1373 /* 2 MiB of float32; 1373 = 21*64 + 29: every row ends partial */

static const int counts[] = {1, 2, 3, 7, 0};
#define NCOUNTS (sizeof counts / sizeof counts[0])

static void test_format(bfp_format fmt, bfp_dtype dt, const void *src, int with_ref)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    simd_planes q[NCOUNTS], ref;
    bfp_stats st[NCOUNTS], sref;
    for (size_t k = 0; k < NCOUNTS; k++) {
        bfp_options o;
        bfp_options_init(&o);
        o.threads = counts[k];
        simd_planes_alloc(&q[k], fmt, ROWS, COLS, k % 2, (uint8_t)k);
        CHECK(bfp_quantize(fmt, dt, src, ROWS, COLS, &o, &q[k].p, &st[k]) == BFP_OK,
              "%s quantize threads=%d", f->name, counts[k]);
        if (k > 0) {
            char what[64];
            snprintf(what, sizeof what, "%s %s threads=%d", f->name, bfp_dtype_name(dt), counts[k]);
            CHECK(simd_same_planes(&q[k], &q[0], what) && simd_same_stats(&st[k], &st[0]),
                  "%s: same planes and stats as one thread", what);
        }
    }
    if (with_ref) {
        simd_planes_alloc(&ref, fmt, ROWS, COLS, 0, 0);
        bfp_quantize_ref(fmt, dt, src, ROWS, COLS, NULL, &ref.p, &sref);
        CHECK(simd_same_planes(&q[2], &ref, f->name) && simd_same_stats(&st[2], &sref),
              "%s %s: three threads match the reference", f->name, bfp_dtype_name(dt));
        simd_planes_free(&ref);
    }
    /* dequantize: the thread count comes from bfp_set_threads() */
    size_t n = (size_t)ROWS * COLS;
    float *y[4];
    for (int k = 0; k < 4; k++) {
        CHECK(bfp_set_threads(counts[k]) == BFP_OK, "bfp_set_threads");
        y[k] = malloc(n * sizeof(float));
        bfp_const_planes in = simd_const(&q[0]);
        CHECK(bfp_dequantize(fmt, &in, ROWS, COLS, BFP_DTYPE_F32, y[k]) == BFP_OK, "dequantize");
        if (k > 0)
            CHECK(simd_diff(y[k], y[0], n * sizeof(float)) < 0,
                  "%s dequantize with %d threads matches one", f->name, counts[k]);
    }
    bfp_set_threads(0);
    for (int k = 0; k < 4; k++)
        free(y[k]);
    for (size_t k = 0; k < NCOUNTS; k++)
        simd_planes_free(&q[k]);
}

/* Random codes; scales ordinary but for about one in scale_odds (any byte);
 * meta a valid block index but for about one in meta_odds (0: never). */
static void fill_random_planes(simd_planes *q, const bfp_format_info *f, simd_rng *r,
                               uint32_t scale_odds, uint32_t meta_odds)
{
    for (size_t i = 0; i < q->sz.codes; i++)
        q->p.codes[i] = (uint8_t)rng_u64(r);
    for (size_t i = 0; i < q->sz.scales; i++)
        q->p.scales[i] = rng_below(r, scale_odds)
                             ? (uint8_t)(f->scale == BFP_SCALE_UE4M3 ? 0x20 + rng_below(r, 0x50)
                                                                     : 100 + rng_below(r, 56))
                             : (uint8_t)rng_u64(r);
    for (size_t i = 0; i < q->sz.meta; i++)
        q->p.meta[i] = !meta_odds || rng_below(r, meta_odds)
                           ? (uint8_t)rng_below(r, (uint32_t)f->block)
                           : (uint8_t)rng_u64(r);
}

#define WROWS 24
#define WCOLS 16384 /* 24K NVFP4 blocks: one call makes every row up front */

/* Planes of arbitrary bytes, rows of whole blocks, float32 and bfloat16. */
static void test_whole_rows(bfp_format fmt, simd_rng *r)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    simd_planes q;
    simd_planes_alloc(&q, fmt, WROWS, WCOLS, 0, 0);
    fill_random_planes(&q, f, r, 16, 16);
    q.ts = 8670.9677734375f;
    size_t n = (size_t)WROWS * WCOLS;
    bfp_const_planes in = simd_const(&q);
    for (int d = 0; d < 2; d++) {
        bfp_dtype dt = d ? BFP_DTYPE_BF16 : BFP_DTYPE_F32;
        size_t bytes = n * bfp_dtype_size(dt);
        unsigned char *want = malloc(bytes), *got = malloc(bytes);
        CHECK(bfp_dequantize_ref(fmt, &in, WROWS, WCOLS, dt, want) == BFP_OK, "reference");
        for (int k = 0; k < 4; k++) {
            CHECK(bfp_set_threads(counts[k]) == BFP_OK, "bfp_set_threads");
            CHECK(bfp_dequantize(fmt, &in, WROWS, WCOLS, dt, got) == BFP_OK, "dequantize");
            CHECK(simd_diff(got, want, bytes) < 0, "%s whole rows to %s, %d threads: as the reference",
                  f->name, bfp_dtype_name(dt), counts[k]);
        }
        bfp_set_threads(0);
        free(want);
        free(got);
    }
    simd_planes_free(&q);
}

#define SROWS 64
#define SCOLS 65536 /* 8 MiB of bfloat16 output: non-temporal stores */

/* Random planes of fmt decoded at byte offsets of the output and thread
 * counts; the bytes around the output stay untouched. */
static void test_streamed(bfp_format fmt, simd_rng *r)
{
    static const int offsets[] = {0, 16, 4, 60, 2};
    static const int threads[] = {1, 3, 1, 3, 1};
    const bfp_format_info *f = bfp_format_get(fmt);
    simd_planes q;
    simd_planes_alloc(&q, fmt, SROWS, SCOLS, 0, 0);
    fill_random_planes(&q, f, r, 64, 0);
    q.ts = 3.5f;
    size_t n = (size_t)SROWS * SCOLS;
    bfp_const_planes in = simd_const(&q);
    for (int d = 0; d < 2; d++) {
        bfp_dtype dt = d ? BFP_DTYPE_BF16 : BFP_DTYPE_F32;
        size_t bytes = n * bfp_dtype_size(dt);
        unsigned char *want = malloc(bytes), *buf = aligned_alloc(64, bytes + 128);
        CHECK(bfp_dequantize_ref(fmt, &in, SROWS, SCOLS, dt, want) == BFP_OK, "reference");
        for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
            CHECK(bfp_set_threads(threads[k]) == BFP_OK, "bfp_set_threads");
            memset(buf, 0xA5, bytes + 128);
            CHECK(bfp_dequantize(fmt, &in, SROWS, SCOLS, dt, buf + offsets[k]) == BFP_OK, "dequantize");
            int around = 1;
            for (size_t i = 0; i < 128; i++) /* the bytes before and after */
                around &= buf[i < (size_t)offsets[k] ? i : bytes + i] == 0xA5;
            CHECK(simd_diff(buf + offsets[k], want, bytes) < 0 && around,
                  "%s to %s at offset %d, %d threads: as the reference, nothing else written", f->name,
                  bfp_dtype_name(dt), offsets[k], threads[k]);
        }
        bfp_set_threads(0);
        free(want);
        free(buf);
    }
    simd_planes_free(&q);
}

int main(void)
{
    if (simd_isa_skip("test_simd_threads"))
        return check_summary("test_simd_threads");
    simd_rng r = {2718281828};
    size_t n = (size_t)ROWS * COLS;
    float *x = malloc(n * sizeof *x);
    simd_fill_f32(&r, x, n);
    for (size_t i = 0; i < n; i++) /* mostly finite, so NVFP4's amax matters */
        if (!(fabsf(x[i]) < 1e30f))
            x[i] = (i % 3) ? 0.5f : x[i];
    x[n - 5] = 1e20f; /* the tensor max, in the last thread's share */
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = bfp_f32_to_bf16(x[i]);
    /* every block size, code width and family; the splitting is shared */
    static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP6_E3M2, BFP_MXFP8_E4M3, BFP_MXINT8,
                                      BFP_MXINT4, BFP_NVFP4, BFP_NVFP4_PLUS, BFP_HIF4,
                                      BFP_MXFP4_PLUS, BFP_MXFP6_E2M3_PP, BFP_MXFP8_E5M2_PP};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
        test_format(fmts[i], BFP_DTYPE_F32, x, fmts[i] == BFP_NVFP4);
    test_format(BFP_NVFP4_PLUS, BFP_DTYPE_BF16, h, 1);
    test_format(BFP_HIF4, BFP_DTYPE_F16, h, 0);
    for (int i = 0; i < bfp_format_count(); i++)
        test_whole_rows(bfp_format_at(i)->id, &r);
    static const bfp_format streamed[] = {BFP_MXFP4, BFP_MXFP6_E2M3_PLUS, BFP_NVFP4_PLUS, BFP_HIF4};
    for (size_t i = 0; i < sizeof streamed / sizeof streamed[0]; i++)
        test_streamed(streamed[i], &r);
    free(h);
    free(x);
    return check_summary("test_simd_threads");
}

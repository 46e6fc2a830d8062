/* test_verify.c - bfp_verify(): reference planes verify clean in every format;
 * deliberately broken planes (a flipped bit, a scale one step off, swapped
 * nibbles, the tie rule reversed, a shifted block, a signed zero, a NaN block,
 * reversed bits) are each detected, located and named. */
#include "check.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A quantized tensor with owned planes. */
typedef struct {
    bfp_format fmt;
    size_t rows, cols;
    bfp_plane_sizes sz;
    uint8_t *codes, *scales, *meta;
    float ts;
} qt;

static void qt_alloc(qt *q, bfp_format fmt, size_t rows, size_t cols)
{
    memset(q, 0, sizeof *q);
    q->fmt = fmt;
    q->rows = rows;
    q->cols = cols;
    bfp_plane_sizes_for(fmt, rows, cols, &q->sz);
    q->codes = calloc(q->sz.codes, 1);
    q->scales = calloc(q->sz.scales, 1);
    q->meta = q->sz.meta ? calloc(q->sz.meta, 1) : NULL; /* NVFP4 writes a meta it is given */
    q->ts = 1.0f;
}

static void qt_free(qt *q)
{
    free(q->codes);
    free(q->scales);
    free(q->meta);
}

static bfp_status qt_quantize(qt *q, const float *x, const bfp_options *o)
{
    bfp_planes p = {q->codes, q->scales, q->meta, &q->ts};
    return bfp_quantize_ref(q->fmt, BFP_DTYPE_F32, x, q->rows, q->cols, o, &p, NULL);
}

static void qt_copy(qt *dst, const qt *src)
{
    qt_alloc(dst, src->fmt, src->rows, src->cols);
    memcpy(dst->codes, src->codes, src->sz.codes);
    memcpy(dst->scales, src->scales, src->sz.scales);
    if (src->sz.meta)
        memcpy(dst->meta, src->meta, src->sz.meta);
    dst->ts = src->ts;
}

static bfp_const_planes cp(const qt *q)
{
    bfp_const_planes p = {q->codes, q->scales, q->meta, &q->ts};
    return p;
}

#define MAXM 64
static bfp_verify_mismatch mm[MAXM];

static bfp_status run(const qt *ref, const qt *dut, const float *x, bfp_verify_report *rep)
{
    bfp_const_planes r = cp(ref), d = cp(dut);
    return bfp_verify(ref->fmt, ref->rows, ref->cols, BFP_DTYPE_F32, x, &r, &d, mm, MAXM, rep);
}

/* Every recorded mismatch of plane has cause c (and there is at least one). */
static int all_cause(const bfp_verify_report *rep, bfp_plane_id plane, bfp_verify_cause c)
{
    int seen = 0;
    for (size_t i = 0; i < rep->recorded; i++) {
        if (mm[i].plane != plane)
            continue;
        if (mm[i].cause != c) {
            fprintf(stderr, "  mismatch %zu (%s r%zu b%zu e%zu): cause %s, want %s\n", i,
                    bfp_plane_name(plane), mm[i].row, mm[i].block, mm[i].elem,
                    bfp_verify_cause_name(mm[i].cause), bfp_verify_cause_name(c));
            return 0;
        }
        seen = 1;
    }
    return seen;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random values over several magnitudes, some exact ties and zeros. */
static float *make_input(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        double g = (urand() - 0.5) * 4;
        x[i] = (float)(g * pow(2.0, (int)(urand() * 6) - 3));
        if (i % 17 == 5)
            x[i] = -0.0f;
        if (i % 23 == 7)
            x[i] = 0.0f;
    }
    return x;
}

/* ---- clean -------------------------------------------------------------- */

static void test_clean_every_format(void)
{
    const size_t rows = 3, cols = 70; /* partial blocks of 16, 32 and 64 */
    float *x = make_input(rows * cols);
    for (int k = 0; k < bfp_format_count(); k++) {
        const bfp_format_info *f = bfp_format_at(k);
        qt ref, dut;
        qt_alloc(&ref, f->id, rows, cols);
        CHECK(qt_quantize(&ref, x, NULL) == BFP_OK, "%s: quantize", f->name);
        qt_copy(&dut, &ref);
        bfp_verify_report rep;
        CHECK(run(&ref, &dut, x, &rep) == BFP_OK, "%s: verify", f->name);
        CHECK(rep.identical && rep.mismatches == 0 && rep.recorded == 0,
              "%s: reference planes verify clean (%zu mismatches)", f->name, rep.mismatches);
        CHECK(rep.codes_total == rows * cols && rep.scales_total == rows * ref.sz.blocks_per_row &&
                  rep.blocks_total == rep.scales_total,
              "%s: totals", f->name);
        CHECK(rep.meta_total == ((f->meta_bytes || f->family == BFP_FAMILY_HIF4) ? rep.blocks_total : 0),
              "%s: meta total", f->name);
        CHECK(rep.have_error_stats && rep.ref_error.count == rows * cols &&
                  rep.ref_error.rmse == rep.dut_error.rmse &&
                  rep.ref_error.sqnr_db == rep.dut_error.sqnr_db && rep.ref_error.sqnr_db > 5,
              "%s: error stats side by side (sqnr %g)", f->name, rep.ref_error.sqnr_db);
        /* planes from the dispatched quantizer (SIMD) verify clean too */
        bfp_planes p = {dut.codes, dut.scales, dut.meta, &dut.ts};
        CHECK(bfp_quantize(f->id, BFP_DTYPE_F32, x, rows, cols, NULL, &p, NULL) == BFP_OK &&
                  run(&ref, &dut, x, &rep) == BFP_OK && rep.identical,
              "%s: bfp_quantize planes verify clean", f->name);
        qt_free(&ref);
        qt_free(&dut);
    }
    free(x);
}

/* ---- broken planes -------------------------------------------------------- */

static void test_flipped_bit(void)
{
    const size_t rows = 2, cols = 64;
    float *x = make_input(rows * cols);
    const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP6_E2M3, BFP_MXFP8_E4M3, BFP_NVFP4, BFP_HIF4,
                               BFP_MXFP4_PLUS, BFP_MXINT8};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        const bfp_format_info *f = bfp_format_get(fmts[k]);
        qt ref, dut;
        qt_alloc(&ref, f->id, rows, cols);
        qt_quantize(&ref, x, NULL);
        qt_copy(&dut, &ref);
        /* element 37 of row 1: flip the code's second-highest bit */
        const size_t r = 1, col = 37;
        uint8_t *row = dut.codes + r * dut.sz.code_row_bytes;
        unsigned c = bfp_get_code(row, col, f->elem_bits);
        unsigned flipped = c ^ (1u << (f->elem_bits - 2));
        bfp_put_code(row, col, f->elem_bits, flipped);
        bfp_verify_report rep;
        run(&ref, &dut, x, &rep);
        CHECK(!rep.identical && rep.codes_differ == 1 && rep.scales_differ == 0 &&
                  rep.meta_differ == 0 && rep.blocks_differ == 1 && rep.recorded == 1,
              "%s: one flipped bit is one code mismatch (%zu codes)", f->name, rep.codes_differ);
        bfp_verify_mismatch *m = &mm[0];
        CHECK(m->plane == BFP_PLANE_CODES && m->row == r && m->col == col &&
                  m->block == col / (size_t)f->block && m->elem == col % (size_t)f->block &&
                  m->expected == c && m->received == flipped && m->input == x[r * cols + col],
              "%s: its coordinates and codes", f->name);
        CHECK(m->cause == BFP_CAUSE_BIT_FLIP && rep.cause_count[BFP_CAUSE_BIT_FLIP] == 1,
              "%s: named bit-flip, got %s", f->name, bfp_verify_cause_name(m->cause));
        CHECK(rep.dut_error.rmse != rep.ref_error.rmse, "%s: DUT error differs", f->name);
        qt_free(&ref);
        qt_free(&dut);
    }
    free(x);
}

static void test_scale_step(void)
{
    const size_t rows = 4, cols = 96;
    float *x = make_input(rows * cols);
    bfp_verify_report rep;
    /* A kernel that uses ceil(log2 amax) instead of floor: scales one step up,
     * every code re-encoded with that scale. */
    qt ref, dut;
    qt_alloc(&ref, BFP_MXFP4, rows, cols);
    qt_alloc(&dut, BFP_MXFP4, rows, cols);
    qt_quantize(&ref, x, NULL);
    bfp_options o;
    bfp_options_init(&o);
    o.scale_mode = BFP_SCALE_CEIL;
    qt_quantize(&dut, x, &o);
    run(&ref, &dut, x, &rep);
    CHECK(!rep.identical && rep.scales_differ > 0 && rep.codes_differ > 0,
          "ceil scales: detected (%zu scales, %zu codes)", rep.scales_differ, rep.codes_differ);
    CHECK(all_cause(&rep, BFP_PLANE_SCALES, BFP_CAUSE_SCALE_STEP) &&
              all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_SCALE_STEP) &&
              rep.cause_count[BFP_CAUSE_SCALE_STEP] == rep.mismatches,
          "ceil scales: every mismatch named scale-step");
    qt_free(&dut);

    /* The scale byte alone bumped (codes untouched). */
    const bfp_format fmts[] = {BFP_MXFP4, BFP_NVFP4, BFP_MXFP8_E5M2, BFP_HIF4};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        qt r2, d2;
        qt_alloc(&r2, fmts[k], rows, cols);
        qt_quantize(&r2, x, NULL);
        qt_copy(&d2, &r2);
        size_t g = 1 * r2.sz.blocks_per_row + 1; /* row 1, block 1 */
        d2.scales[g * (size_t)bfp_format_get(fmts[k])->scale_bytes] += 1;
        run(&r2, &d2, x, &rep);
        CHECK(rep.scales_differ == 1 && rep.codes_differ == 0 && rep.recorded >= 1 &&
                  mm[0].plane == BFP_PLANE_SCALES && mm[0].row == 1 && mm[0].block == 1 &&
                  mm[0].cause == BFP_CAUSE_SCALE_STEP && mm[0].received == mm[0].expected + 1,
              "%s: scale byte +1 found at row 1 block 1 and named scale-step (%s)",
              bfp_format_get(fmts[k])->name, bfp_verify_cause_name(mm[0].cause));
        qt_free(&r2);
        qt_free(&d2);
    }
    qt_free(&ref);
    free(x);
}

static void test_swapped_nibbles(void)
{
    const size_t rows = 2, cols = 64;
    float *x = make_input(rows * cols);
    const bfp_format fmts[] = {BFP_MXFP4, BFP_NVFP4, BFP_HIF4, BFP_MXINT4};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        const char *name = bfp_format_get(fmts[k])->name;
        qt ref, dut;
        qt_alloc(&ref, fmts[k], rows, cols);
        qt_quantize(&ref, x, NULL);
        /* the whole tensor written high nibble first */
        qt_copy(&dut, &ref);
        for (size_t i = 0; i < dut.sz.codes; i++)
            dut.codes[i] = (uint8_t)(dut.codes[i] << 4 | dut.codes[i] >> 4);
        bfp_verify_report rep;
        run(&ref, &dut, x, &rep);
        CHECK(rep.codes_differ > 0 && rep.scales_differ == 0 &&
                  all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_NIBBLE_ORDER) &&
                  rep.cause_count[BFP_CAUSE_NIBBLE_ORDER] == rep.mismatches,
              "%s: swapped nibbles named nibble-order", name);
        /* one byte swapped */
        memcpy(dut.codes, ref.codes, ref.sz.codes);
        size_t at = 0; /* two codes not one rounding step apart */
        while (at < ref.sz.codes && abs((int)(ref.codes[at] >> 4) - (int)(ref.codes[at] & 15)) < 2)
            at++;
        dut.codes[at] = (uint8_t)(ref.codes[at] << 4 | ref.codes[at] >> 4);
        run(&ref, &dut, x, &rep);
        CHECK(rep.codes_differ == 2 && all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_NIBBLE_ORDER),
              "%s: one swapped byte: two codes, nibble-order", name);
        /* ggml's order (j low, j + block/2 high) written into the planar file */
        size_t blk = (size_t)bfp_format_get(fmts[k])->block, half = blk / 2;
        for (size_t r = 0; r < rows; r++)
            for (size_t b = 0; b < cols / blk; b++)
                for (size_t j = 0; j < half; j++) {
                    const uint8_t *src = ref.codes + r * ref.sz.code_row_bytes;
                    uint8_t *dst = dut.codes + r * ref.sz.code_row_bytes;
                    bfp_put_code(dst, b * blk + 2 * j, 4, bfp_get_code(src, b * blk + j, 4));
                    bfp_put_code(dst, b * blk + 2 * j + 1, 4,
                                 bfp_get_code(src, b * blk + j + half, 4));
                }
        run(&ref, &dut, x, &rep);
        CHECK(rep.codes_differ > 0 && all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_NIBBLE_ORDER),
              "%s: ggml nibble order in a planar file named nibble-order", name);
        qt_free(&ref);
        qt_free(&dut);
    }
    free(x);
}

/* Inputs that sit exactly between two grid values of their block. */
static void tie_input(float *x, size_t n, bfp_format fmt)
{
    for (size_t i = 0; i < n; i++) {
        /* block max 6: MX scale 1 (NVFP4: t = 448 x, block scale 448), the
         * others at E2M1 midpoints (1 | 1.5, 2 | 3, 0.5 | 1, 4 | 6, ...) */
        static const float mx[] = {6.0f, 1.25f, -2.5f, 0.75f, 5.0f, -0.25f, 1.75f, 3.5f};
        /* HiF4: block max 1.75 -> E6M2 0.25, REC 4; several |x| * 4 * 2^-shift
         * land on k/4 + 1/8 (0.125 -> 0 | 0.25, 0.625 -> 0.5 | 0.75, ...) */
        static const float hf[] = {1.75f, 0.125f, -0.375f, 0.625f, 0.875f, -1.125f, 0.0625f, 1.375f};
        x[i] = fmt == BFP_HIF4 ? hf[i % 8] : mx[i % 8];
    }
}

/* Two neighbouring codes one grid step apart, swapped, with inputs exactly
 * on the grid: no rounding gives that, so it is the nibble order. */
static void test_swap_on_grid(void)
{
    float x[64];
    for (size_t i = 0; i < 64; i++)
        x[i] = (float)((int)(i % 16) - 8) / 4; /* -2 .. 1.75, on the grid of scale 2^-1 */
    qt ref, dut;
    qt_alloc(&ref, BFP_MXFP4, 1, 64);
    qt_quantize(&ref, x, NULL);
    qt_copy(&dut, &ref);
    dut.codes[3] = (uint8_t)(ref.codes[3] >> 4 | ref.codes[3] << 4); /* x[6] = -0.5, x[7] = -0.25 */
    bfp_verify_report rep;
    run(&ref, &dut, x, &rep);
    CHECK(rep.codes_differ == 2 && mm[0].col == 6 && mm[1].col == 7 &&
              all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_NIBBLE_ORDER),
          "on-grid inputs, adjacent codes swapped: nibble-order, not rounding (%s)",
          bfp_verify_cause_name(mm[0].cause));
    qt_free(&ref);
    qt_free(&dut);
}

static void test_tie_rule(void)
{
    const size_t rows = 2, cols = 64;
    float x[2 * 64];
    struct {
        bfp_format fmt;
        bfp_rounding dut_rounding;
    } cases[] = {
        {BFP_MXFP4, BFP_ROUND_NEAREST_AWAY},
        {BFP_NVFP4, BFP_ROUND_NEAREST_AWAY},
        {BFP_HIF4, BFP_ROUND_NEAREST_EVEN},
        {BFP_MXFP4_PLUS, BFP_ROUND_NEAREST_AWAY},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *name = bfp_format_get(cases[k].fmt)->name;
        tie_input(x, rows * cols, cases[k].fmt);
        qt ref, dut;
        qt_alloc(&ref, cases[k].fmt, rows, cols);
        qt_alloc(&dut, cases[k].fmt, rows, cols);
        qt_quantize(&ref, x, NULL);
        bfp_options o;
        bfp_options_init(&o);
        o.rounding = cases[k].dut_rounding;
        qt_quantize(&dut, x, &o);
        bfp_verify_report rep;
        run(&ref, &dut, x, &rep);
        CHECK(rep.codes_differ > 0 && rep.scales_differ == 0 &&
                  rep.cause_count[BFP_CAUSE_TIE] == rep.mismatches &&
                  all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_TIE),
              "%s: tie rule reversed: %zu codes differ, %zu named tie", name, rep.codes_differ,
              rep.cause_count[BFP_CAUSE_TIE]);
        /* the decoded values are equidistant from the input */
        int eq = rep.recorded > 0;
        for (size_t i = 0; i < rep.recorded; i++)
            eq &= fabs(mm[i].expected_value - mm[i].input) ==
                      fabs(mm[i].received_value - mm[i].input) ||
                  cases[k].fmt == BFP_NVFP4; /* NVFP4 decodes through 1/s_enc */
        CHECK(eq, "%s: tie mismatches decode equidistant from the input", name);
        qt_free(&ref);
        qt_free(&dut);
    }
}

static void test_rounding_mode(void)
{
    const size_t rows = 2, cols = 64;
    float *x = make_input(rows * cols);
    qt ref, dut;
    qt_alloc(&ref, BFP_MXFP8_E4M3, rows, cols);
    qt_alloc(&dut, BFP_MXFP8_E4M3, rows, cols);
    qt_quantize(&ref, x, NULL);
    bfp_options o;
    bfp_options_init(&o);
    o.rounding = BFP_ROUND_TOWARD_ZERO;
    qt_quantize(&dut, x, &o);
    bfp_verify_report rep;
    run(&ref, &dut, x, &rep);
    CHECK(rep.codes_differ > 0 &&
              rep.cause_count[BFP_CAUSE_ROUNDING] + rep.cause_count[BFP_CAUSE_TIE] == rep.mismatches &&
              rep.cause_count[BFP_CAUSE_ROUNDING] > 0,
          "truncating kernel: one-step differences named rounding (%zu of %zu)",
          rep.cause_count[BFP_CAUSE_ROUNDING], rep.mismatches);
    qt_free(&ref);
    qt_free(&dut);
    free(x);
}

static void test_block_shift(void)
{
    const size_t rows = 2, cols = 128;
    float *x = make_input(rows * cols);
    const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP6_E3M2, BFP_NVFP4_PLUS, BFP_HIF4};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        const bfp_format_info *f = bfp_format_get(fmts[k]);
        qt ref, dut;
        qt_alloc(&ref, f->id, rows, cols);
        qt_quantize(&ref, x, NULL);
        qt_copy(&dut, &ref);
        /* row 1: the DUT wrote block b+1's planes at block b (last block kept) */
        size_t bpr = ref.sz.blocks_per_row, bb = (size_t)f->block * (size_t)f->elem_bits / 8;
        uint8_t *row = dut.codes + ref.sz.code_row_bytes;
        memmove(row, row + bb, (bpr - 1) * bb);
        size_t sb = (size_t)f->scale_bytes;
        memmove(dut.scales + bpr * sb, dut.scales + (bpr + 1) * sb, (bpr - 1) * sb);
        if (f->meta_bytes)
            memmove(dut.meta + bpr, dut.meta + bpr + 1, bpr - 1);
        bfp_verify_report rep;
        run(&ref, &dut, x, &rep);
        CHECK(rep.blocks_differ > 0 && rep.blocks_differ <= bpr - 1 &&
                  rep.cause_count[BFP_CAUSE_BLOCK_SHIFT] == rep.mismatches &&
                  mm[0].row == 1,
              "%s: shifted blocks named block-shift (%zu of %zu)", f->name,
              rep.cause_count[BFP_CAUSE_BLOCK_SHIFT], rep.mismatches);
        qt_free(&ref);
        qt_free(&dut);
    }
    free(x);
}

static void test_signed_zero(void)
{
    const size_t rows = 1, cols = 32;
    float x[32];
    for (size_t i = 0; i < cols; i++)
        x[i] = (i % 4 == 1) ? -0.001f : (float)(i % 7) - 3.0f;
    qt ref, dut;
    qt_alloc(&ref, BFP_MXFP4, rows, cols);
    qt_quantize(&ref, x, NULL);
    qt_copy(&dut, &ref);
    for (size_t i = 0; i < cols; i++) /* a kernel that writes +0 for every zero */
        if (bfp_get_code(dut.codes, i, 4) == 0x8)
            bfp_put_code(dut.codes, i, 4, 0x0);
    bfp_verify_report rep;
    run(&ref, &dut, x, &rep);
    CHECK(rep.codes_differ == 8 && all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_SIGNED_ZERO) &&
              mm[0].expected == 0x8 && mm[0].received == 0x0 && mm[0].elem == 1,
          "mxfp4: -0 written as +0 named signed-zero (%zu)", rep.codes_differ);
    CHECK(rep.dut_error.rmse == rep.ref_error.rmse, "signed zero: same error");
    qt_free(&ref);
    qt_free(&dut);
    /* INT has no -0: 0x8 in MXINT4 is -2, written for a zero */
    qt_alloc(&ref, BFP_MXINT4, rows, cols);
    qt_quantize(&ref, x, NULL);
    qt_copy(&dut, &ref);
    size_t z = 0;
    while (bfp_get_code(ref.codes, z, 4) != 0)
        z++;
    bfp_put_code(dut.codes, z, 4, 0x8);
    run(&ref, &dut, x, &rep);
    CHECK(rep.codes_differ == 1 && mm[0].cause == BFP_CAUSE_SIGNED_ZERO,
          "mxint4: 0x8 for zero named signed-zero (%s)", bfp_verify_cause_name(mm[0].cause));
    qt_free(&ref);
    qt_free(&dut);
}

static void test_nan_block(void)
{
    const size_t rows = 2, cols = 64;
    float *x = make_input(rows * cols);
    x[1 * cols + 20] = NAN; /* row 1, block 1 (nvfp4: block 1 of 16) */
    const bfp_format fmts[] = {BFP_MXFP4, BFP_NVFP4, BFP_HIF4, BFP_MXFP8_E4M3_PLUS};
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        const bfp_format_info *f = bfp_format_get(fmts[k]);
        qt ref, dut;
        qt_alloc(&ref, f->id, rows, cols);
        qt_quantize(&ref, x, NULL);
        /* a kernel that treats NaN as 0 */
        float *x0 = malloc(rows * cols * sizeof *x0);
        memcpy(x0, x, rows * cols * sizeof *x0);
        x0[1 * cols + 20] = 0.0f;
        qt_alloc(&dut, f->id, rows, cols);
        qt_quantize(&dut, x0, NULL);
        bfp_verify_report rep;
        run(&ref, &dut, x, &rep);
        size_t nan_mm = rep.cause_count[BFP_CAUSE_NAN_BLOCK];
        CHECK(rep.scales_differ >= 1 && nan_mm >= 1 && rep.ref_nan_blocks == 1 &&
                  rep.dut_nan_blocks == 0,
              "%s: NaN block handled as zeros: found (%zu nan-block, %zu mismatches)", f->name,
              nan_mm, rep.mismatches);
        int ok = 1;
        for (size_t i = 0; i < rep.recorded; i++)
            if (mm[i].row == 1 && mm[i].block == 20 / (size_t)f->block)
                ok &= mm[i].cause == BFP_CAUSE_NAN_BLOCK;
        CHECK(ok, "%s: every mismatch of the NaN block named nan-block", f->name);
        CHECK(rep.ref_error.count < rows * cols && rep.ref_error.rmse == rep.ref_error.rmse,
              "%s: NaN block left out of the error stats", f->name);
        free(x0);
        qt_free(&ref);
        qt_free(&dut);
    }
    free(x);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_bit_order(void)
{
    const size_t rows = 2, cols = 128;
    float *x = make_input(rows * cols);
    bfp_verify_report rep;
    qt ref, dut;
    /* HiF4 scale words written big-endian */
    qt_alloc(&ref, BFP_HIF4, rows, cols);
    qt_quantize(&ref, x, NULL);
    qt_copy(&dut, &ref);
    for (size_t g = 0; g < rows * ref.sz.blocks_per_row; g++)
        for (int k = 0; k < 4; k++)
            dut.scales[4 * g + (size_t)k] = ref.scales[4 * g + 3 - (size_t)k];
    run(&ref, &dut, x, &rep);
    CHECK(rep.mismatches > 0 && all_cause(&rep, BFP_PLANE_SCALES, BFP_CAUSE_BIT_ORDER) &&
              rep.cause_count[BFP_CAUSE_BIT_ORDER] == rep.mismatches - rep.codes_differ,
          "hif4: byte-swapped words named bit-order");
    /* HiF4 E1_8 flags bit-reversed (bit 7 - k) */
    memcpy(dut.scales, ref.scales, ref.sz.scales);
    int changed = 0;
    for (size_t g = 0; g < rows * ref.sz.blocks_per_row; g++) {
        uint8_t eb = ref.scales[4 * g + 1], rv = 0;
        for (int k = 0; k < 8; k++)
            rv |= (uint8_t)(((eb >> k) & 1) << (7 - k));
        dut.scales[4 * g + 1] = rv;
        changed |= rv != eb;
    }
    run(&ref, &dut, x, &rep);
    CHECK(changed && rep.meta_differ > 0 && rep.scales_differ == 0 &&
              all_cause(&rep, BFP_PLANE_META, BFP_CAUSE_BIT_ORDER),
          "hif4: reversed E1_8 flags named bit-order (%zu meta)", rep.meta_differ);
    CHECK(mm[0].expected == (le32(ref.scales + 4 * mm[0].row * ref.sz.blocks_per_row +
                                  4 * mm[0].block) >> 8),
          "hif4: meta mismatch carries E1_8 | E1_16 << 8");
    qt_free(&ref);
    qt_free(&dut);
    /* MXFP8 codes with reversed bits; MXFP6 written as an MSB-first stream */
    const bfp_format fmts[] = {BFP_MXFP8_E4M3, BFP_MXFP6_E2M3};
    for (size_t k = 0; k < 2; k++) {
        qt_alloc(&ref, fmts[k], rows, cols);
        qt_quantize(&ref, x, NULL);
        qt_copy(&dut, &ref);
        for (size_t i = 0; i < ref.sz.codes; i++) {
            uint8_t b = ref.codes[i], rv = 0;
            for (int j = 0; j < 8; j++)
                rv |= (uint8_t)(((b >> j) & 1) << (7 - j));
            dut.codes[i] = rv;
        }
        run(&ref, &dut, x, &rep);
        CHECK(rep.codes_differ > 0 && all_cause(&rep, BFP_PLANE_CODES, BFP_CAUSE_BIT_ORDER),
              "%s: bit-reversed bytes named bit-order", bfp_format_get(fmts[k])->name);
        qt_free(&ref);
        qt_free(&dut);
    }
    free(x);
}

static void test_tensor_scale_and_bm_tie(void)
{
    const size_t rows = 2, cols = 32;
    float *x = make_input(rows * cols);
    bfp_verify_report rep;
    qt ref, dut;
    /* NVFP4 without a tensor scale in the DUT */
    qt_alloc(&ref, BFP_NVFP4, rows, cols);
    qt_alloc(&dut, BFP_NVFP4, rows, cols);
    qt_quantize(&ref, x, NULL);
    bfp_options o;
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = 1;
    qt_quantize(&dut, x, &o);
    run(&ref, &dut, x, &rep);
    CHECK(rep.tensor_scale_differs && mm[0].plane == BFP_PLANE_TENSOR_SCALE &&
              mm[0].received_value == 1.0 && mm[0].cause == BFP_CAUSE_SCALE &&
              rep.cause_count[BFP_CAUSE_SCALE] + rep.cause_count[BFP_CAUSE_SCALE_STEP] ==
                  rep.mismatches,
          "nvfp4: a DUT without tensor scale: first the tensor scale, every entry scale*");
    qt_free(&dut);
    qt_copy(&dut, &ref);
    uint32_t b;
    memcpy(&b, &ref.ts, 4);
    b = (b >> 24) | ((b >> 8) & 0xFF00u) | ((b << 8) & 0xFF0000u) | (b << 24);
    memcpy(&dut.ts, &b, 4);
    run(&ref, &dut, x, &rep);
    CHECK(rep.tensor_scale_differs && mm[0].cause == BFP_CAUSE_BIT_ORDER,
          "nvfp4: byte-swapped tensor scale named bit-order");
    qt_free(&ref);
    qt_free(&dut);

    /* MXFP4+: two elements tie for the block max; the DUT picked the later */
    for (size_t i = 0; i < cols; i++)
        x[i] = (float)((int)(i % 5) - 2) * 0.5f;
    x[3] = 5.0f;
    x[9] = -5.0f;
    qt_alloc(&ref, BFP_MXFP4_PLUS, 1, cols);
    qt_quantize(&ref, x, NULL);
    qt_copy(&dut, &ref);
    CHECK((ref.meta[0] & 0x1F) == 3, "mxfp4+: reference BM is the lowest index");
    /* swap the roles: element 9 becomes the BM, 3 a plain element */
    dut.meta[0] = 9;
    bfp_put_code(dut.codes, 9, 4, bfp_get_code(ref.codes, 3, 4) | 0x8);
    bfp_put_code(dut.codes, 3, 4, bfp_get_code(ref.codes, 9, 4) & 0x7);
    run(&ref, &dut, x, &rep);
    CHECK(rep.meta_differ == 1 && mm[0].plane == BFP_PLANE_META && mm[0].cause == BFP_CAUSE_TIE,
          "mxfp4+: other tied block max named tie (%s)", bfp_verify_cause_name(mm[0].cause));
    CHECK(rep.codes_differ == 2 && rep.cause_count[BFP_CAUSE_TIE] == 3,
          "mxfp4+: the two codes that follow the other block max: tie too");
    qt_free(&ref);
    qt_free(&dut);
    free(x);
}

/* HiF4: a flag decided exactly at its threshold (V8 * REC = 4) the other way,
 * as a kernel comparing with > instead of >= would; codes follow the flags. */
static void test_hif4_flag_tie(void)
{
    float x[64];
    for (size_t i = 0; i < 64; i++)
        x[i] = 0.25f;
    x[0] = 4.0f;   /* group 0: V8 = 4 */
    x[5] = 0.5f;
    x[63] = 7.0f;  /* Vmax 7: SF = BF16(7 * BF16(1/7)) = 1, E6M2 1.0, REC 1 */
    qt ref, dut;
    qt_alloc(&ref, BFP_HIF4, 1, 64);
    qt_quantize(&ref, x, NULL);
    CHECK(ref.scales[0] == 0xC0 && (ref.scales[1] & 1), "hif4 flag tie: E6M2 1.0, E1_8[0] set");
    qt_copy(&dut, &ref);
    dut.scales[1] &= 0xFE; /* E1_8[0] = 0 */
    uint32_t w = le32(dut.scales);
    for (size_t i = 0; i < 8; i++) { /* re-encode group 0 under the DUT's flags */
        int shift = (int)((w >> 8) & 1) + (int)((w >> (16 + i / 4)) & 1);
        unsigned mag = bfp_grid_round(&bfp_e1m2, ldexp(fabs((double)x[i]), -shift), 1.0,
                                      BFP_ROUND_NEAREST_AWAY, 0);
        bfp_put_code(dut.codes, i, 4, mag);
    }
    bfp_verify_report rep;
    run(&ref, &dut, x, &rep);
    CHECK(rep.meta_differ == 1 && rep.codes_differ > 0 && rep.scales_differ == 0 &&
              rep.cause_count[BFP_CAUSE_TIE] == rep.mismatches,
          "hif4: flag at its threshold and the codes that follow it named tie (%zu of %zu)",
          rep.cause_count[BFP_CAUSE_TIE], rep.mismatches);
    qt_free(&ref);
    qt_free(&dut);
}

static void test_api(void)
{
    const size_t rows = 4, cols = 64;
    float *x = make_input(rows * cols);
    qt ref, dut;
    qt_alloc(&ref, BFP_MXFP4, rows, cols);
    qt_quantize(&ref, x, NULL);
    qt_copy(&dut, &ref);
    for (size_t i = 0; i < dut.sz.codes; i++)
        dut.codes[i] ^= 0x44;
    bfp_verify_report rep;
    bfp_const_planes r = cp(&ref), d = cp(&dut);
    CHECK(bfp_verify(BFP_MXFP4, rows, cols, BFP_DTYPE_F32, x, &r, &d, mm, 5, &rep) == BFP_OK &&
              rep.recorded == 5 && rep.mismatches == rows * cols && rep.codes_differ == rows * cols,
          "at most max_mismatches recorded, all counted");
    int sorted = 1;
    for (size_t i = 1; i < rep.recorded; i++)
        sorted &= mm[i].row * cols + mm[i].col > mm[i - 1].row * cols + mm[i - 1].col;
    CHECK(sorted && mm[0].row == 0 && mm[0].col == 0, "recorded in row-major order");
    CHECK(bfp_verify(BFP_MXFP4, rows, cols, BFP_DTYPE_F32, NULL, &r, &d, NULL, 0, &rep) ==
                  BFP_OK &&
              !rep.have_error_stats && rep.recorded == 0 && rep.mismatches == rows * cols,
          "no input, no array: counts only");
    CHECK(bfp_verify(BFP_MXFP4, rows, cols, BFP_DTYPE_F32, x, &r, &d, NULL, 3, &rep) ==
              BFP_ERR_ARG,
          "max_mismatches without an array");
    CHECK(bfp_verify(BFP_MXFP4, 0, cols, BFP_DTYPE_F32, x, &r, &d, mm, 3, &rep) == BFP_ERR_SHAPE,
          "zero rows");
    CHECK(bfp_verify((bfp_format)99, rows, cols, BFP_DTYPE_F32, x, &r, &d, mm, 3, &rep) ==
              BFP_ERR_FORMAT,
          "unknown format");
    bfp_const_planes nometa = cp(&ref);
    nometa.meta = NULL;
    CHECK(bfp_verify(BFP_MXFP4_PLUS, rows, cols, BFP_DTYPE_F32, x, &nometa, &nometa, mm, 3,
                     &rep) == BFP_ERR_ARG,
          "missing meta plane");
    CHECK(bfp_verify(BFP_MXFP4, rows, cols, BFP_DTYPE_F32, x, &r, &d, mm, 3, NULL) == BFP_ERR_ARG,
          "NULL report");
    for (int c = 0; c < BFP_VERIFY_NCAUSES; c++)
        CHECK(strcmp(bfp_verify_cause_name((bfp_verify_cause)c), "?") != 0 &&
                  strlen(bfp_verify_cause_hint((bfp_verify_cause)c)) > 20,
              "cause %d has a name and a hint", c);
    CHECK(strcmp(bfp_verify_cause_name((bfp_verify_cause)99), "?") == 0 &&
              strcmp(bfp_plane_name(BFP_PLANE_TENSOR_SCALE), "tensor_scale") == 0,
          "names");
    /* padding bits of a row's last byte are no mismatch */
    qt p1, p2;
    qt_alloc(&p1, BFP_MXFP4, 2, 33);
    qt_quantize(&p1, x, NULL);
    qt_copy(&p2, &p1);
    p2.codes[p2.sz.code_row_bytes - 1] |= 0xF0;
    bfp_const_planes a = cp(&p1), bb = cp(&p2);
    bfp_verify(BFP_MXFP4, 2, 33, BFP_DTYPE_F32, x, &a, &bb, mm, 3, &rep);
    CHECK(rep.identical && rep.padding_rows_differ == 1, "padding bits reported apart");
    qt_free(&p1);
    qt_free(&p2);
    qt_free(&ref);
    qt_free(&dut);
    free(x);
}

int main(void)
{
    test_clean_every_format();
    test_flipped_bit();
    test_scale_step();
    test_swapped_nibbles();
    test_swap_on_grid();
    test_tie_rule();
    test_rounding_mode();
    test_block_shift();
    test_signed_zero();
    test_nan_block();
    test_bit_order();
    test_tensor_scale_and_bm_tie();
    test_hif4_flag_tie();
    test_api();
    return check_summary("test_verify");
}

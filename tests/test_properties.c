/* test_properties.c - property tests on random data for every format in the
 * table: nearest-grid rounding (P1), scale rules (P2, P13), special values
 * (P9) and bfp_validate on fresh planes (P11), over every generator of
 * test_properties.h and shapes with partial last blocks.
 *
 * The other properties are in test_properties_algebra.c (idempotence, MX+
 * vs MX, dtypes, partial blocks, row independence, bf16 output),
 * test_properties_rounding.c (rounding modes) and test_properties_errors.c
 * (bfp_validate on corrupted planes, bad arguments).
 *
 * The properties are checked on the reference (bfp_quantize_ref); every
 * quantization here is also run through the dispatching bfp_quantize(),
 * which must agree bit for bit. */
#include "test_properties.h"

static const size_t shape_cols[] = {1, 5, 15, 16, 17, 31, 33, 63, 65, 100};
#define NCOLS (sizeof shape_cols / sizeof shape_cols[0])

static int default_rm(const fmodel *m)
{
    return m->f->family == BFP_FAMILY_HIF4 ? RM_AWAY : RM_RNE;
}

/* The dispatching bfp_quantize() / bfp_dequantize() (SIMD kernels,
 * threads) must give the reference's planes, stats and values bit for bit
 * (bfp.h). */
static void check_dispatch(const fmodel *m, const float *x, const qplanes *q,
                           const bfp_options *o, const bfp_stats *st, const float *y)
{
    qplanes d;
    bfp_stats dst;
    qp_alloc(m, q->rows, q->cols, &d, 0x3C);
    bfp_planes out = qp_out(&d);
    bfp_status s = bfp_quantize(m->f->id, BFP_DTYPE_F32, x, q->rows, q->cols, o, &out, &dst);
    CHECK(s == BFP_OK && qp_equal(q, &d), "%s: bfp_quantize (isa %s) != bfp_quantize_ref", pctx,
          bfp_isa());
    CHECK(s != BFP_OK || (dst.blocks == st->blocks && dst.nonfinite_blocks == st->nonfinite_blocks &&
                          dst.flushed_blocks == st->flushed_blocks),
          "%s: bfp_quantize stats differ from the reference's", pctx);
    size_t n = q->rows * q->cols;
    float *y2 = malloc(n * sizeof *y2);
    bfp_const_planes in = qp_in(q);
    CHECK(bfp_dequantize_to_f32(m->f->id, &in, q->rows, q->cols, y2) == BFP_OK &&
              !memcmp(y, y2, n * sizeof *y),
          "%s: bfp_dequantize (isa %s) != bfp_dequantize_ref", pctx, bfp_isa());
    free(y2);
    qp_free(&d);
}

/* Quantize x with options o and run check_planes (and check_dispatch if
 * dispatch is set); returns the planes. */
static void run_one(const fmodel *m, const float *x, size_t rows, size_t cols,
                    const bfp_options *o, int rm, pstats *ps, qplanes *q, int dispatch)
{
    bfp_stats st;
    memset(&st, 0xA5, sizeof st);
    bfp_status s = qp_quantize(m, BFP_DTYPE_F32, x, rows, cols, o, q, &st, 0xA5);
    CHECK(s == BFP_OK, "%s: quantize returned %d", pctx, s);
    if (s == BFP_OK) {
        float *y = malloc(rows * cols * sizeof *y);
        check_planes(m, x, q, o, &st, rm, ps, y);
        if (dispatch)
            check_dispatch(m, x, q, o, &st, y);
        free(y);
    }
}

/* A larger tensor through the dispatcher with several thread counts and
 * rounding modes: same planes as the reference, which check_planes checks. */
static void test_large(const fmodel *m)
{
    prng p = {0x1A26Eull + (uint64_t)m->f->id};
    const size_t rows = 40, cols = 150;
    float *x = malloc(rows * cols * sizeof *x);
    static const int threads[] = {0, 1, 3};
    for (int g = 0; g < 3; g++) {
        static const int gens[3] = {G_NORMAL, G_MIXED, G_MID};
        gen_fill(m, gens[g], &p, x, rows, cols);
        if (g == 1)
            x[1234] = INFINITY; /* a NaN block (a NaN tile in 2-D) */
        for (int t = 0; t < 3; t++) {
            bfp_options o;
            bfp_options_init(&o);
            o.threads = threads[t];
            o.rounding = t == 2 ? BFP_ROUND_STOCHASTIC : BFP_ROUND_DEFAULT;
            o.seed = 99;
            o.nvfp4_2d = m->f->id == BFP_NVFP4 && g == 2; /* SPEC 5: no 2-D NVFP4+ */
            snprintf(pctx, sizeof pctx, "%s large %s %zux%zu threads %d", m->f->name,
                     gen_name[gens[g]], rows, cols, threads[t]);
            pstats ps = {0};
            qplanes q;
            run_one(m, x, rows, cols, &o, t == 2 ? RM_SR : default_rm(m), &ps, &q, 1);
            qp_free(&q);
        }
    }
    free(x);
}

/* P1, P2, P9 (on generated data), P11 (fresh planes) for one format. */
static void test_generators(const fmodel *m)
{
    prng p = {0x5EED0001ull * (uint64_t)m->f->id};
    pstats ps = {0}, mid = {0};
    const size_t rows = 3;
    float *x = malloc(rows * 100 * sizeof *x);
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT; g++) {
            size_t cols = shape_cols[ci];
            gen_fill(m, g, &p, x, rows, cols);
            snprintf(pctx, sizeof pctx, "%s %s %zux%zu", m->f->name, gen_name[g], rows, cols);
            qplanes q;
            run_one(m, x, rows, cols, NULL, default_rm(m), g == G_MID ? &mid : &ps, &q, 1);
            qp_free(&q);
            if (fam_is_nv(m->f)) { /* and without the tensor scale */
                bfp_options o;
                bfp_options_init(&o);
                o.nvfp4_no_tensor_scale = 1;
                snprintf(pctx, sizeof pctx, "%s %s %zux%zu no-ts", m->f->name, gen_name[g], rows,
                         cols);
                run_one(m, x, rows, cols, &o, RM_RNE, g == G_MID ? &mid : &ps, &q, 0);
                qp_free(&q);
            }
            if (m->f->family == BFP_FAMILY_MX && cols % 16 == 1) /* other exponent rules */
                for (int mode = BFP_SCALE_CEIL; mode <= BFP_SCALE_RCEIL; mode++) {
                    bfp_options o;
                    bfp_options_init(&o);
                    o.scale_mode = (bfp_scale_mode)mode;
                    snprintf(pctx, sizeof pctx, "%s %s %zux%zu scale_mode %d", m->f->name,
                             gen_name[g], rows, cols, mode);
                    run_one(m, x, rows, cols, &o, RM_RNE, &ps, &q, 0);
                    qp_free(&q);
                }
        }
    /* the midpoint generator must actually produce ties, or P1's tie rule
     * went untested */
    CHECK(mid.ties > 0, "%s: midpoint data produced no exact ties", m->f->name);
    /* and the data reached saturation, -0 and (MX+) the flush rule */
    CHECK(ps.saturated > 0 && (m->is_int || ps.negzero > 0), "%s: saturated %zu, -0 %zu", m->f->name,
          ps.saturated, ps.negzero);
    CHECK(!fam_is_plus(m->f) || ps.flushed > 0, "%s: no block flushed", m->f->name);
    printf("%-14s %6zu elements checked, %5zu exact ties (midpoint data %zu of %zu), %zu saturated, "
           "%zu -0, %zu flushed",
           m->f->name, ps.elems + mid.elems, ps.ties + mid.ties, mid.ties, mid.elems,
           ps.saturated, ps.negzero, ps.flushed);
    if (m->f->family == BFP_FAMILY_HIF4)
        printf(", %zu not nearest in the decoded domain (REC = BF16(1/E6M2))",
               ps.hif4_off + mid.hif4_off);
    printf("\n");
    free(x);
}

/* P9: NaN / +Inf / -Inf in some blocks. check_planes verifies the NaN
 * blocks; here the other blocks must be exactly those of the same tensor
 * with the non-finite values replaced by 0 (NVFP4's tensor amax is over
 * finite values only, so it is unchanged by that replacement). */
static void test_nonfinite(const fmodel *m)
{
    prng p = {0xBADF00Dull + (uint64_t)m->f->id};
    const float specials[3] = {NAN, INFINITY, -INFINITY};
    const size_t B = (size_t)m->f->block;
    for (int rep = 0; rep < 12; rep++) {
        size_t rows = (size_t)prng_int(&p, 1, 4), cols = shape_cols[prng_next(&p) % NCOLS] + B;
        size_t bpr = (cols + B - 1) / B;
        float *x = malloc(rows * cols * sizeof *x), *x0 = malloc(rows * cols * sizeof *x);
        char *hit = calloc(rows * bpr, 1);
        gen_fill(m, rep % 2 ? G_MIXED : G_NORMAL, &p, x, rows, cols);
        memcpy(x0, x, rows * cols * sizeof *x);
        int k = prng_int(&p, 1, 4);
        for (int j = 0; j < k; j++) {
            size_t at = prng_next(&p) % (rows * cols);
            x[at] = specials[prng_next(&p) % 3];
            x0[at] = 0.0f;
            hit[(at / cols) * bpr + (at % cols) / B] = 1;
        }
        size_t nhit = 0;
        for (size_t b = 0; b < rows * bpr; b++)
            nhit += (size_t)hit[b];
        snprintf(pctx, sizeof pctx, "%s nonfinite %zux%zu rep %d", m->f->name, rows, cols, rep);
        pstats ps = {0};
        qplanes q, q0;
        bfp_stats st;
        run_one(m, x, rows, cols, NULL, default_rm(m), &ps, &q, 1);
        CHECK(bfp_quantize_ref(m->f->id, BFP_DTYPE_F32, x, rows, cols, NULL,
                           &(bfp_planes){q.codes, q.scales, q.meta, q.has_ts ? &q.ts : NULL},
                           &st) == BFP_OK && st.nonfinite_blocks == nhit,
              "%s: nonfinite_blocks %zu, want %zu", pctx, st.nonfinite_blocks, nhit);
        CHECK(qp_quantize(m, BFP_DTYPE_F32, x0, rows, cols, NULL, &q0, NULL, 0) == BFP_OK,
              "%s: quantize", pctx);
        if (q.has_ts)
            CHECK(f32_same(q.ts, q0.ts), "%s: tensor scale moved %a vs %a", pctx, q.ts, q0.ts);
        size_t sb = (size_t)m->f->scale_bytes;
        for (size_t r = 0; r < rows; r++)
            for (size_t b = 0; b < bpr; b++) {
                size_t blk = r * bpr + b;
                if (hit[blk])
                    continue;
                int same = !memcmp(q.scales + blk * sb, q0.scales + blk * sb, sb) &&
                           (!q.meta || q.meta[blk] == q0.meta[blk]);
                for (size_t i = b * B; i < cols && i < (b + 1) * B; i++)
                    same &= qp_code(&q, m->f->elem_bits, r, i) == qp_code(&q0, m->f->elem_bits, r, i);
                CHECK(same, "%s: finite block %zu changed by a non-finite block", pctx, blk);
            }
        qp_free(&q);
        qp_free(&q0);
        free(x);
        free(x0);
        free(hit);
    }
}

/* P13: NVFP4 2-D tiles (check_planes verifies that every row-block of a
 * 16x16 tile carries E4M3_RNE(fp32(tile max|t| / 6)) and that elements are
 * nearest under it); shapes with partial tiles at the bottom and right. */
static void test_nvfp4_2d(const fmodel *m)
{
    static const size_t shapes[][2] = {{16, 16}, {37, 40}, {17, 100}, {5, 33}, {33, 1}, {48, 65}};
    prng p = {0x2D2D2Dull + (uint64_t)m->f->id};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int g = 0; g < G_COUNT; g++)
            for (int nts = 0; nts < 2; nts++) {
                size_t rows = shapes[s][0], cols = shapes[s][1];
                float *x = malloc(rows * cols * sizeof *x);
                gen_fill(m, g, &p, x, rows, cols);
                if (g == G_NORMAL && s == 1) /* a NaN tile: all 16 row-blocks NaN */
                    x[20 * cols + 18] = NAN;
                bfp_options o;
                bfp_options_init(&o);
                o.nvfp4_2d = 1;
                o.nvfp4_no_tensor_scale = nts;
                snprintf(pctx, sizeof pctx, "%s 2d %s %zux%zu%s", m->f->name, gen_name[g], rows,
                         cols, nts ? " no-ts" : "");
                pstats ps = {0};
                qplanes q;
                run_one(m, x, rows, cols, &o, RM_RNE, &ps, &q, g == G_MIXED);
                /* the tile's row-blocks carry one scale (also covered above) */
                size_t bpr = q.sz.blocks_per_row;
                for (size_t r = 0; r < rows; r++)
                    for (size_t b = 0; b < bpr; b++)
                        CHECK(q.scales[r * bpr + b] == q.scales[(r / 16 * 16) * bpr + b],
                              "%s: row %zu block %zu differs from its tile", pctx, r, b);
                qp_free(&q);
                free(x);
            }
}

int main(void)
{
    int nf = bfp_format_count();
    printf("CPU kernels: %s\n", bfp_isa());
    CHECK(nf >= 22, "format table has %d rows", nf);
    for (int i = 0; i < nf; i++) {
        const bfp_format_info *f = bfp_format_at(i);
        CHECK(f != NULL, "format_at(%d) is NULL", i);
        if (!f)
            continue;
        fmodel m;
        fmodel_init(&m, f);
        test_generators(&m);
        test_nonfinite(&m);
        if (f->id == BFP_NVFP4) /* NVFP4+ refuses 2-D (SPEC section 5) */
            test_nvfp4_2d(&m);
        test_large(&m);
    }
    return check_summary("test_properties");
}

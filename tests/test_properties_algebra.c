/* test_properties_algebra.c - relations between quantizations, for every
 * format on random data (generators of test_properties.h):
 *  P3  idempotence: quantize(dequantize(quantize(x))) == quantize(x) (MX, MX+)
 *  P4  MX+ (and MX++, NVFP4+) never worse than the base format on the block max
 *  P5  bf16 / f16 input == f32 input of the same values, all planes
 *  P6  a partial last block == the same row zero-padded to whole blocks
 *  P7  rows are independent; every plane byte is written
 *  P10 dequantize to bf16 == bfp_f32_to_bf16(dequantize to f32) (and f16) */
#include "test_properties.h"

static const size_t shape_cols[] = {1, 5, 15, 16, 17, 31, 33, 63, 65, 100};
#define NCOLS (sizeof shape_cols / sizeof shape_cols[0])

static void must_quantize(const fmodel *m, bfp_dtype dt, const void *x, size_t rows, size_t cols,
                          const bfp_options *o, qplanes *q)
{
    bfp_status s = qp_quantize(m, dt, x, rows, cols, o, q, NULL, 0);
    CHECK(s == BFP_OK, "%s: quantize returned %d", pctx, s);
}

/* P3. MX: the decoded block max lies in [2^emax, max_elem] * 2^se (it rounds
 * within its binade and saturates below 2^(emax+1)), so the shared exponent
 * is recomputed unchanged and every decoded value is a grid point, which
 * encodes to itself (-0 keeps its sign). MX+: the same for the BM on its
 * extended grid. Where it legitimately changes:
 *  - MX+: a non-BM element can decode to a magnitude >= the decoded BM (NBM
 *    grid is coarser: x_bm = 5.2, x_j = 5.1 in MXFP4+ give BM 5.0 but
 *    NBM 6), or equal to it at a lower index; the BM then moves. Such blocks
 *    are recognised from the first decode and only the scale is compared.
 *  - MX++: delta comes from the largest NBM, whose reconstruction can cross
 *    a power of two (e.g. rounds up to 2^k), so the NBM exponent can move.
 *  - NVFP4: s_enc = 2688 / amax is recomputed from the decoded amax (an fp32
 *    division of a rounded value) and t = fp32(x * s_enc) rounds again; the
 *    block scale E4M3(max|t|/6) then need not come back.
 *  - HiF4: E6M2 = RNE(BF16(Vmax * BF16(1/7))) of the decoded Vmax differs
 *    from that of x (Vmax rounds to k/4 * E6M2 * 2^shift), and the flags and
 *    REC = BF16(1/E6M2) != 1/E6M2 follow. */
static void test_idempotence(const fmodel *m)
{
    if (m->f->family != BFP_FAMILY_MX && m->f->family != BFP_FAMILY_MX_PLUS)
        return;
    prng p = {0x1DE0ull + (uint64_t)m->f->id};
    const size_t rows = 3, B = (size_t)m->f->block;
    float *x = malloc(rows * 100 * sizeof *x), *y = malloc(rows * 100 * sizeof *y);
    float *y2 = malloc(rows * 100 * sizeof *y);
    size_t moved = 0, blocks = 0;
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT; g++) {
            size_t cols = shape_cols[ci], bpr = (cols + B - 1) / B;
            gen_fill(m, g, &p, x, rows, cols);
            snprintf(pctx, sizeof pctx, "%s idempotence %s %zux%zu", m->f->name, gen_name[g], rows,
                     cols);
            qplanes q1, q2;
            must_quantize(m, BFP_DTYPE_F32, x, rows, cols, NULL, &q1);
            qp_dequant(m, &q1, y);
            must_quantize(m, BFP_DTYPE_F32, y, rows, cols, NULL, &q2);
            qp_dequant(m, &q2, y2);
            for (size_t r = 0; r < rows; r++)
                for (size_t b = 0; b < bpr; b++) {
                    size_t blk = r * bpr + b, n = cols - b * B < B ? cols - b * B : B;
                    const float *yb = y + r * cols + b * B;
                    blocks++;
                    CHECK(q1.scales[blk] == q2.scales[blk], "%s: block %zu scale %02x -> %02x", pctx,
                          blk, q1.scales[blk], q2.scales[blk]);
                    if (q1.meta && q1.scales[blk] != 0) {
                        size_t bm = q1.meta[blk] & 31;
                        int rival = 0;
                        for (size_t i = 0; i < n; i++)
                            rival |= i != bm && (fabsf(yb[i]) > fabsf(yb[bm]) ||
                                                 (fabsf(yb[i]) == fabsf(yb[bm]) && i < bm));
                        if (rival) {
                            moved++;
                            continue;
                        }
                        CHECK(q1.meta[blk] == q2.meta[blk], "%s: block %zu meta %02x -> %02x", pctx,
                              blk, q1.meta[blk], q2.meta[blk]);
                    }
                    int same = 1;
                    for (size_t i = b * B; i < b * B + n; i++) {
                        same &= qp_code(&q1, m->f->elem_bits, r, i) == qp_code(&q2, m->f->elem_bits, r, i);
                        same &= f32_same(y[r * cols + i], y2[r * cols + i]);
                    }
                    CHECK(same, "%s: block %zu codes or values changed", pctx, blk);
                }
            qp_free(&q1);
            qp_free(&q2);
        }
    if (m->f->family == BFP_FAMILY_MX_PLUS)
        printf("%-14s idempotence: BM moved (legitimately) in %zu of %zu blocks\n", m->f->name,
               moved, blocks);
    free(x);
    free(y);
    free(y2);
}

/* The MX format with the same element type (the base of an MX+/MX++ row). */
static const bfp_format_info *mx_base(const bfp_format_info *f)
{
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *g = bfp_format_at(i);
        if (f->family == BFP_FAMILY_NVFP4_PLUS ? g->family == BFP_FAMILY_NVFP4
                                               : g->family == BFP_FAMILY_MX && g->elem == f->elem)
            return g;
    }
    return NULL;
}

/* P4. The BM of MX+ rounds on an extended grid holding every MX grid value
 * of its binade [2^emax, 2^(emax+1)) * 2^se (and more), at the same shared
 * exponent, so it is never further from x. Flushed MX+ blocks are excluded
 * (there MX keeps a clamped exponent -127 and may do better). NVFP4+ vs
 * NVFP4: same tensor and block scales; compared in the t domain (SPEC 3),
 * as the final fp32 division by s_enc can reorder errors by an ulp. */
static void test_plus_vs_base(const fmodel *m)
{
    if (!m->has_ext)
        return;
    const bfp_format_info *bf = mx_base(m->f);
    CHECK(bf != NULL, "%s: no base format", m->f->name);
    if (!bf)
        return;
    fmodel mb;
    fmodel_init(&mb, bf);
    prng p = {0x9105ull + (uint64_t)m->f->id};
    const size_t rows = 3, B = (size_t)m->f->block;
    float *x = malloc(rows * 100 * sizeof *x), *yp = malloc(rows * 100 * sizeof *x);
    float *yb = malloc(rows * 100 * sizeof *x);
    size_t better = 0, total = 0;
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT; g++) {
            size_t cols = shape_cols[ci], bpr = (cols + B - 1) / B;
            gen_fill(m, g, &p, x, rows, cols);
            snprintf(pctx, sizeof pctx, "%s vs %s %s %zux%zu", m->f->name, bf->name, gen_name[g],
                     rows, cols);
            qplanes qp, qb;
            must_quantize(m, BFP_DTYPE_F32, x, rows, cols, NULL, &qp);
            must_quantize(&mb, BFP_DTYPE_F32, x, rows, cols, NULL, &qb);
            qp_dequant(m, &qp, yp);
            qp_dequant(&mb, &qb, yb);
            int nv = fam_is_nv(m->f);
            if (nv)
                CHECK(f32_same(qp.ts, qb.ts), "%s: tensor scales differ", pctx);
            for (size_t r = 0; r < rows; r++)
                for (size_t b = 0; b < bpr; b++) {
                    size_t blk = r * bpr + b;
                    unsigned sc = qp.scales[blk];
                    if (nv ? sc == 0x7F || sc <= 0x02 : sc == 0x00 || sc == 0xFF)
                        continue; /* NaN, flushed, or plain NVFP4 block */
                    CHECK(sc == qb.scales[blk], "%s: block %zu scale %02x vs %02x", pctx, blk, sc,
                          qb.scales[blk]);
                    size_t k = r * cols + b * B + (qp.meta[blk] & 31);
                    double ep, eb;
                    if (nv) {
                        double sbv = bfp_scale_decode(BFP_SCALE_UE4M3, sc);
                        emodel dp, db;
                        elem_model(m, &qp, x, r, k - r * cols, &dp);
                        elem_model(&mb, &qb, x, r, k - r * cols, &db);
                        ep = fabs(dp.chosen * sbv - dp.a);
                        eb = fabs(db.chosen * sbv - db.a);
                    } else {
                        ep = fabs((double)yp[k] - x[k]);
                        eb = fabs((double)yb[k] - x[k]);
                    }
                    total++;
                    better += ep < eb;
                    CHECK(ep <= eb, "%s: block %zu BM x=%a: %s error %a > %s error %a", pctx, blk,
                          x[k], m->f->name, ep, bf->name, eb);
                }
            qp_free(&qp);
            qp_free(&qb);
        }
    printf("%-14s BM error vs %s: strictly better in %zu of %zu blocks\n", m->f->name, bf->name,
           better, total);
    free(x);
    free(yp);
    free(yb);
}

/* f16 -> f32, written out here (exact). */
static float my_f16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 0x1F, s = h >> 15;
    unsigned mant = h & 0x3FF;
    double v = e == 0x1F ? (mant ? NAN : INFINITY)
               : e == 0  ? ldexp(mant, -24)
                         : ldexp(mant | 0x400, e - 25);
    return (float)(s ? -v : v);
}

/* P5. bf16 patterns are the top halves of generated floats (plus random bit
 * patterns); f16 patterns are random 16-bit words and converted generated
 * values. Both sides see the same exact values. */
static void test_dtypes(const fmodel *m)
{
    prng p = {0xD7E5ull + (uint64_t)m->f->id};
    const size_t rows = 3;
    float *x = malloc(rows * 100 * sizeof *x), *xf = malloc(rows * 100 * sizeof *x);
    uint16_t *h = malloc(rows * 100 * sizeof *h);
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT + 1; g++)
            for (int dt = 0; dt < 2; dt++) {
                size_t cols = shape_cols[ci], n = rows * cols;
                gen_fill(m, g < G_COUNT ? g : G_NORMAL, &p, x, rows, cols);
                for (size_t k = 0; k < n; k++) {
                    uint16_t w = (uint16_t)prng_next(&p); /* g == G_COUNT: raw patterns */
                    if (dt == 0) {
                        h[k] = g < G_COUNT ? (uint16_t)(f32_bits(x[k]) >> 16) : w;
                        xf[k] = f32_from_bits((uint32_t)h[k] << 16);
                    } else {
                        h[k] = g < G_COUNT ? bfp_f32_to_f16(x[k]) : w;
                        xf[k] = my_f16_to_f32(h[k]);
                        CHECK(f32_same(bfp_f16_to_f32(h[k]), xf[k]) || isnan(xf[k]),
                              "f16 %04x -> %a", h[k], bfp_f16_to_f32(h[k]));
                    }
                }
                snprintf(pctx, sizeof pctx, "%s %s %s %zux%zu", m->f->name, dt ? "f16" : "bf16",
                         g < G_COUNT ? gen_name[g] : "raw", rows, cols);
                for (int o2d = 0; o2d <= (m->f->id == BFP_NVFP4); o2d++) {
                    bfp_options o;
                    bfp_options_init(&o);
                    o.nvfp4_2d = o2d;
                    qplanes qh, qf;
                    must_quantize(m, dt ? BFP_DTYPE_F16 : BFP_DTYPE_BF16, h, rows, cols, &o, &qh);
                    must_quantize(m, BFP_DTYPE_F32, xf, rows, cols, &o, &qf);
                    CHECK(qp_equal(&qh, &qf), "%s: planes differ from f32 input%s", pctx,
                          o2d ? " (2-D)" : "");
                    qp_free(&qh);
                    qp_free(&qf);
                }
            }
    free(x);
    free(xf);
    free(h);
}

/* P6. One row of cols values vs the same row zero-padded to whole blocks:
 * same scales and meta, same codes for the real elements (SPEC 0: padding
 * never changes a scale). NVFP4: zeros do not change amax, so the tensor
 * scale is the same too; checked with and without it. */
static void test_partial(const fmodel *m)
{
    prng p = {0x9A0ull + (uint64_t)m->f->id};
    const size_t B = (size_t)m->f->block;
    float *x = malloc(128 * sizeof *x), *xp = malloc(128 * sizeof *x);
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT; g++)
            for (int nts = 0; nts <= fam_is_nv(m->f); nts++) {
                size_t cols = shape_cols[ci], padded = (cols + B - 1) / B * B;
                if (padded == cols)
                    continue;
                gen_fill(m, g, &p, x, 1, cols);
                memcpy(xp, x, cols * sizeof *x);
                for (size_t i = cols; i < padded; i++)
                    xp[i] = 0.0f;
                bfp_options o;
                bfp_options_init(&o);
                o.nvfp4_no_tensor_scale = nts;
                snprintf(pctx, sizeof pctx, "%s partial %s 1x%zu%s", m->f->name, gen_name[g], cols,
                         nts ? " no-ts" : "");
                qplanes q, qp;
                must_quantize(m, BFP_DTYPE_F32, x, 1, cols, &o, &q);
                must_quantize(m, BFP_DTYPE_F32, xp, 1, padded, &o, &qp);
                CHECK(q.sz.blocks_per_row == qp.sz.blocks_per_row, "%s: block count", pctx);
                CHECK(!memcmp(q.scales, qp.scales, q.sz.scales), "%s: scales differ", pctx);
                CHECK(!q.meta || !memcmp(q.meta, qp.meta, q.sz.meta), "%s: meta differs", pctx);
                CHECK(!q.has_ts || f32_same(q.ts, qp.ts), "%s: tensor scale differs", pctx);
                int same = 1;
                for (size_t i = 0; i < cols; i++)
                    same &= qp_code(&q, m->f->elem_bits, 0, i) == qp_code(&qp, m->f->elem_bits, 0, i);
                CHECK(same, "%s: codes differ", pctx);
                qp_free(&q);
                qp_free(&qp);
            }
    free(x);
    free(xp);
}

/* P7. A rows x cols tensor == each row quantized alone (NVFP4 without the
 * tensor scale, which couples the rows). Also: two runs into planes
 * pre-filled with 0x00 and 0xFF agree, so every plane byte is written. */
static void test_rows(const fmodel *m)
{
    prng p = {0x7055ull + (uint64_t)m->f->id};
    const size_t rows = 5;
    float *x = malloc(rows * 100 * sizeof *x);
    bfp_options o;
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = fam_is_nv(m->f);
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT; g++) {
            size_t cols = shape_cols[ci];
            gen_fill(m, g, &p, x, rows, cols);
            snprintf(pctx, sizeof pctx, "%s rows %s %zux%zu", m->f->name, gen_name[g], rows, cols);
            qplanes q, qfill;
            must_quantize(m, BFP_DTYPE_F32, x, rows, cols, &o, &q);
            CHECK(qp_quantize(m, BFP_DTYPE_F32, x, rows, cols, &o, &qfill, NULL, 0xFF) == BFP_OK &&
                      qp_equal(&q, &qfill),
                  "%s: output depends on the planes' previous bytes", pctx);
            qp_free(&qfill);
            size_t bpr = q.sz.blocks_per_row, sb = (size_t)m->f->scale_bytes;
            for (size_t r = 0; r < rows; r++) {
                qplanes q1;
                must_quantize(m, BFP_DTYPE_F32, x + r * cols, 1, cols, &o, &q1);
                CHECK(!memcmp(q1.codes, q.codes + r * q.sz.code_row_bytes, q1.sz.codes) &&
                          !memcmp(q1.scales, q.scales + r * bpr * sb, q1.sz.scales) &&
                          (!q.meta || !memcmp(q1.meta, q.meta + r * bpr, q1.sz.meta)),
                      "%s: row %zu differs when quantized alone", pctx, r);
                qp_free(&q1);
            }
            qp_free(&q);
        }
    free(x);
}

/* P10. bf16 (and f16) output == the library's own conversion of the f32
 * output, for every element, NaN blocks included; the dispatching decoder
 * gives the same bits as the reference one. */
static void test_out_dtypes(const fmodel *m)
{
    prng p = {0xB16ull + (uint64_t)m->f->id};
    const size_t rows = 3;
    float *x = malloc(rows * 100 * sizeof *x), *y = malloc(rows * 100 * sizeof *y);
    uint16_t *h = malloc(rows * 100 * sizeof *h), *h2 = malloc(rows * 100 * sizeof *h);
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int g = 0; g < G_COUNT; g++) {
            size_t cols = shape_cols[ci], n = rows * cols;
            gen_fill(m, g, &p, x, rows, cols);
            if (g == G_NORMAL)
                x[n / 2] = NAN;
            snprintf(pctx, sizeof pctx, "%s out %s %zux%zu", m->f->name, gen_name[g], rows, cols);
            qplanes q;
            must_quantize(m, BFP_DTYPE_F32, x, rows, cols, NULL, &q);
            bfp_const_planes in = qp_in(&q);
            qp_dequant(m, &q, y);
            static const bfp_dtype dts[2] = {BFP_DTYPE_BF16, BFP_DTYPE_F16};
            for (int d = 0; d < 2; d++) {
                CHECK(bfp_dequantize_ref(m->f->id, &in, rows, cols, dts[d], h) == BFP_OK &&
                          bfp_dequantize(m->f->id, &in, rows, cols, dts[d], h2) == BFP_OK,
                      "%s: dequantize to %s", pctx, bfp_dtype_name(dts[d]));
                int same = 1, same2 = 1;
                for (size_t k = 0; k < n; k++) {
                    same &= h[k] == (d ? bfp_f32_to_f16(y[k]) : bfp_f32_to_bf16(y[k]));
                    same2 &= h[k] == h2[k];
                }
                CHECK(same, "%s: %s output != conversion of the f32 output", pctx,
                      bfp_dtype_name(dts[d]));
                CHECK(same2, "%s: %s output of bfp_dequantize != bfp_dequantize_ref", pctx,
                      bfp_dtype_name(dts[d]));
            }
            CHECK(bfp_dequantize_to_bf16(m->f->id, &in, rows, cols, h2) == BFP_OK,
                  "%s: bfp_dequantize_to_bf16", pctx);
            int same = 1;
            for (size_t k = 0; k < n; k++)
                same &= h2[k] == bfp_f32_to_bf16(y[k]);
            CHECK(same, "%s: bfp_dequantize_to_bf16 != bfp_f32_to_bf16(f32 output)", pctx);
            qp_free(&q);
        }
    free(x);
    free(y);
    free(h);
    free(h2);
}

int main(void)
{
    for (int i = 0; i < bfp_format_count(); i++) {
        fmodel m;
        fmodel_init(&m, bfp_format_at(i));
        test_idempotence(&m);
        test_plus_vs_base(&m);
        test_dtypes(&m);
        test_partial(&m);
        test_rows(&m);
        test_out_dtypes(&m);
    }
    return check_summary("test_properties_algebra");
}

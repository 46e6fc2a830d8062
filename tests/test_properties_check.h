/* test_properties_check.h - the second half of test_properties.h (include
 * that one): the independent model of one element's rounding decision
 * (elem_model, decision_ok), the expected scales (MX shared exponent,
 * UE4M3 RNE, HiF4 scale word) and check_planes(), which re-derives every
 * scale, meta byte and element of a quantized tensor from SPEC.md. */
#ifndef BFP_TEST_PROPERTIES_CHECK_H
#define BFP_TEST_PROPERTIES_CHECK_H

#ifndef BFP_TEST_PROPERTIES_H
#error "include test_properties.h"
#endif

/* ---- the independent model of one element --------------------------------- */

enum { EK_OK, EK_NAN, EK_FLUSH, EK_ZERO };

/* How element (r, col) was decided: in its decision domain the input
 * magnitude a is rounded to grid[] * s; the planes chose grid value
 * `chosen`. recon is the float the decoder must return. */
typedef struct {
    int kind;        /* EK_* */
    const double *grid;
    int n;
    double s, a, chosen;
    int neg;         /* sign of the stored code / value */
    int signed_zero; /* element type keeps -0 */
    float recon;
    int is_bm;
    double xdom_scale; /* HiF4: value = chosen * xdom_scale (decoded domain) */
} emodel;

static inline float nv_t(float x, float s_enc)
{
    volatile float t = x * s_enc; /* t_i = fp32(x_i * s_enc) */
    return t;
}

/* REC = BF16_RNE(1 / E6M2) (SPEC 4 step 3). */
static inline double hif4_rec(double e6m2)
{
    return bf16_rne_d(1.0 / e6m2);
}

static inline void elem_model(const fmodel *m, const qplanes *q, const float *x, size_t r, size_t col,
                       emodel *d)
{
    const bfp_format_info *f = m->f;
    size_t B = (size_t)f->block, b = col / B, i = col % B, blk = r * q->sz.blocks_per_row + b;
    float xv = x[r * q->cols + col];
    unsigned code = qp_code(q, f->elem_bits, r, col), sbit = 1u << (f->elem_bits - 1);
    memset(d, 0, sizeof *d);
    d->kind = EK_OK;
    d->grid = m->grid;
    d->n = m->ngrid;
    d->signed_zero = !m->is_int;
    double v = m->dec[code]; /* signed grid value, bfp_elem_decode */
    d->neg = m->is_int ? v < 0 : (code & sbit) != 0;
    d->chosen = fabs(v);
    if (fam_is_mx(f)) {
        unsigned sc = q->scales[blk];
        if (sc == 0xFF) {
            d->kind = EK_NAN;
            return;
        }
        int se = (int)sc - 127, nbm = se;
        if (fam_is_plus(f)) {
            if (sc == 0x00) {
                d->kind = EK_FLUSH;
                return;
            }
            unsigned meta = q->meta[blk];
            nbm = se - (int)(meta >> 5);
            if (i == (meta & 31)) {
                d->is_bm = 1;
                d->grid = m->ext;
                d->n = m->next;
                d->neg = (code & sbit) != 0;
                d->chosen = m->ext[code & (sbit - 1)];
                v = d->neg ? -d->chosen : d->chosen;
                nbm = se;
            }
        }
        d->s = ldexp(1.0, nbm);
        d->a = fabs((double)xv);
        d->recon = (float)(v * d->s);
    } else if (fam_is_nv(f)) {
        unsigned sc = q->scales[blk];
        double sb = bfp_scale_decode(BFP_SCALE_UE4M3, sc);
        if (isnan(sb) || !(q->ts > 0) || !isfinite(q->ts)) {
            d->kind = EK_NAN;
            return;
        }
        float t = nv_t(xv, q->ts);
        if (f->family == BFP_FAMILY_NVFP4_PLUS && sc > 0x02 && i == q->meta[blk]) {
            d->is_bm = 1;
            d->grid = m->ext;
            d->n = m->next;
            d->chosen = m->ext[code & 7];
            v = d->neg ? -d->chosen : d->chosen;
        }
        d->s = sb;
        d->a = fabs((double)t);
        if (sb == 0)
            d->kind = EK_ZERO;
        volatile float qs = (float)(v * sb); /* exact */
        d->recon = qs / q->ts;
    } else { /* HiF4 */
        uint32_t w = qp_hif4_word(q, blk);
        if ((w & 0xFF) == 0xFF) {
            d->kind = EK_NAN;
            return;
        }
        double e6m2 = bfp_scale_decode(BFP_SCALE_HIF4, w & 0xFF);
        int shift = (int)((w >> (8 + i / 8)) & 1) + (int)((w >> (16 + i / 4)) & 1);
        /* decision domain: t_i / 4 = |x| * REC * 2^-shift, exact in double */
        d->s = 1.0;
        d->a = ldexp(fabs((double)xv) * hif4_rec(e6m2), -shift);
        d->xdom_scale = ldexp(e6m2, shift);
        d->recon = (float)(v * d->xdom_scale);
    }
}

enum { RM_RNE, RM_AWAY, RM_TZ, RM_SR };

/* Largest k with g[k] * s <= a (g sorted ascending), -1 if none. */
static inline int grid_floor_scaled(const double *g, int n, double s, double a)
{
    int lo = -1, hi = n; /* g[lo]*s <= a < g[hi]*s */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (g[mid] * s <= a)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static inline int grid_floor(const double *g, int n, double v)
{
    return grid_floor_scaled(g, n, 1.0, v);
}

/* Check one decision against rounding rule rm. *tie set if a was exactly
 * halfway between two grid points. Returns 1 if the decision is allowed;
 * *why says what was expected otherwise. */
static inline int decision_ok(const emodel *d, int rm, int *tie, const char **why)
{
    const double *g = d->grid;
    int n = d->n, ci = grid_floor(g, n, d->chosen);
    *tie = 0;
    if (ci < 0 || g[ci] != d->chosen) {
        *why = "stored value is not on the grid";
        return 0;
    }
    double a = d->a, top = g[n - 1] * d->s;
    if (a >= top) {
        *why = "saturate to the largest value";
        return ci == n - 1;
    }
    if (a <= g[0] * d->s) {
        *why = "lowest grid value";
        return ci == 0;
    }
    int lo = grid_floor_scaled(g, n, d->s, a);
    double vlo = g[lo] * d->s, vhi = g[lo + 1] * d->s;
    if (vlo == a) {
        *why = "exact grid value";
        return ci == lo;
    }
    double dl = a - vlo, dh = vhi - a;
    *tie = dl == dh;
    int want;
    switch (rm) {
    case RM_TZ:
        *why = "toward zero";
        want = lo;
        break;
    case RM_SR:
        *why = "stochastic: one of the two neighbours";
        return ci == lo || ci == lo + 1;
    case RM_AWAY:
        *why = "nearest, ties away";
        want = dl < dh ? lo : lo + 1;
        break;
    default:
        *why = "nearest, ties to even";
        want = dl < dh ? lo : dh < dl ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
    }
    return ci == want;
}

/* ---- expected scales ------------------------------------------------------ */

static inline int flog2f(float a) /* floor(log2 a), a > 0 finite, via frexpf */
{
    int e;
    frexpf(a, &e);
    return e - 1;
}

/* E4M3_RNE_satfinite(v) for v >= 0, by enumerating the UE4M3 decoder. */
static inline unsigned e4m3_rne_code(double v)
{
    if (v >= 448.0)
        return 0x7E;
    unsigned c = 0;
    while (c + 1 < 0x7F && bfp_scale_decode(BFP_SCALE_UE4M3, c + 1) <= v)
        c++;
    double lo = bfp_scale_decode(BFP_SCALE_UE4M3, c);
    if (lo == v)
        return c;
    double hi = bfp_scale_decode(BFP_SCALE_UE4M3, c + 1);
    if (v - lo < hi - v)
        return c;
    if (hi - v < v - lo)
        return c + 1;
    return (c & 1) ? c + 1 : c;
}

/* Expected shared exponent of an MX block (SPEC 2) under a scale mode. */
static inline int mx_expect_se(const fmodel *m, float amax, bfp_scale_mode mode)
{
    if (amax == 0)
        return -127;
    int fl = flog2f(amax), se;
    switch (mode) {
    case BFP_SCALE_CEIL:
        se = (ldexp(1.0, fl) == amax ? fl : fl + 1) - m->emax;
        break;
    case BFP_SCALE_EVEN: { /* half-up to mbits below the leading one */
        double q = ldexp(1.0, fl - m->mbits);
        double rr = floor((double)amax / q + 0.5) * q;
        int e;
        frexp(rr, &e);
        se = e - 1 - m->emax;
        break;
    }
    case BFP_SCALE_RCEIL: { /* smallest k: amax <= max_elem * 2^k */
        se = (int)ceil(log2((double)amax / gmax(m)));
        while (ldexp(gmax(m), se - 1) >= amax)
            se--;
        while (ldexp(gmax(m), se) < amax)
            se++;
        break;
    }
    default:
        se = fl - m->emax;
    }
    return se < -127 ? -127 : se > 127 ? 127 : se;
}

/* Expected HiF4 scale word of a finite block (SPEC 4 steps 1-4). */
static inline uint32_t hif4_expect_word(const float *xb, size_t n)
{
    double v16[16] = {0}, v8[8], vmax = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)xb[i]) > v16[i / 4])
            v16[i / 4] = fabs((double)xb[i]);
    for (int k = 0; k < 8; k++) {
        v8[k] = v16[2 * k] > v16[2 * k + 1] ? v16[2 * k] : v16[2 * k + 1];
        if (v8[k] > vmax)
            vmax = v8[k];
    }
    double sf = bf16_rne_d(vmax * bf16_rne_d(1.0 / 7.0)); /* product exact */
    if (sf < 0x1p-48)
        sf = 0x1p-48;
    if (sf > 49152.0)
        sf = 49152.0;
    double e6m2 = rne_sig(sf, 3, -48);
    int e = ilogb(e6m2);
    unsigned code = (unsigned)(e + 48) << 2 | (unsigned)(ldexp(e6m2, -e) * 4 - 4);
    double rec = hif4_rec(e6m2);
    uint32_t w = code;
    for (int k = 0; k < 8; k++)
        if (v8[k] * rec >= 4)
            w |= 1u << (8 + k);
    for (int j = 0; j < 16; j++)
        if (ldexp(v16[j] * rec, -(int)((w >> (8 + j / 2)) & 1)) >= 2)
            w |= 1u << (16 + j);
    return w;
}

/* ---- check_planes: every property of one quantization --------------------- */

typedef struct {
    size_t ties;      /* exact ties met */
    size_t elems;     /* finite elements checked */
    size_t hif4_off;  /* HiF4 elements not nearest in the decoded domain */
    size_t negzero;   /* negative inputs stored as -0 */
    size_t saturated; /* inputs beyond the largest grid value */
    size_t flushed;   /* MX+ / MX++ flushed blocks */
} pstats;

/* Context string for failure messages. */
static char pctx[160];

/* Checks on planes q from quantizing x (f32, rows x cols) with options o and
 * statistics st, expecting element rounding rm:
 *  P1 nearest-grid (or rm) decisions, saturation, sign and -0 rules, and the
 *     dequantized f32 == the value of the stored code times the decoded scale;
 *  P2 scales: MX shared exponent, MX+ flush rule and BM index, MX++ delta,
 *     NVFP4 tensor scale and block scale (P13 for 2-D tiles), HiF4 word;
 *  P9 non-finite blocks: NaN scale, zero codes and meta, NaN decode, count;
 *  P11 bfp_validate accepts the planes; unused code bits are zero.
 * The reference decode is left in yout (rows*cols floats) if not NULL. */
static inline void check_planes(const fmodel *m, const float *x, const qplanes *q,
                                const bfp_options *o, const bfp_stats *st, int rm, pstats *ps,
                                float *yout)
{
    const bfp_format_info *f = m->f;
    const size_t rows = q->rows, cols = q->cols, B = (size_t)f->block;
    const size_t bpr = q->sz.blocks_per_row;
    bfp_options opt;
    bfp_options_init(&opt);
    if (o)
        opt = *o;
    float *y = yout ? yout : malloc(rows * cols * sizeof *y);
    qp_dequant(m, q, y);

    /* --- tensor scale (NVFP4) --- */
    float s_enc = 1.0f;
    if (fam_is_nv(f)) {
        float amax = 0;
        for (size_t k = 0; k < rows * cols; k++)
            if (isfinite(x[k]) && fabsf(x[k]) > amax)
                amax = fabsf(x[k]);
        if (!opt.nvfp4_no_tensor_scale && amax > 0) {
            volatile float s = 2688.0f / amax;
            s_enc = s > FLT_MAX ? FLT_MAX : s;
        }
        CHECK(f32_same(q->ts, s_enc), "%s: tensor scale %a, want %a", pctx, q->ts, s_enc);
    }

    size_t nonfinite = 0, flushed = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < bpr; b++) {
            size_t n = cols - b * B < B ? cols - b * B : B, blk = r * bpr + b;
            const float *xb = x + r * cols + b * B;
            /* the NVFP4 2-D tile of this row-block: rows [r0, r1) */
            size_t r0 = r, r1 = r + 1;
            if (fam_is_nv(f) && opt.nvfp4_2d) {
                r0 = r / 16 * 16;
                r1 = r0 + 16 < rows ? r0 + 16 : rows;
            }
            int finite = 1;
            for (size_t rr = r0; rr < r1; rr++)
                for (size_t i = 0; i < n; i++)
                    finite &= isfinite(x[rr * cols + b * B + i]) != 0;
            if (!finite) { /* P9 */
                nonfinite++;
                if (f->family == BFP_FAMILY_HIF4)
                    CHECK(qp_hif4_word(q, blk) == 0xFF, "%s: block %zu word %08x, want NaN 000000ff",
                          pctx, blk, (unsigned)qp_hif4_word(q, blk));
                else
                    CHECK(q->scales[blk] == (fam_is_nv(f) ? 0x7F : 0xFF),
                          "%s: block %zu scale %02x, want the NaN code", pctx, blk, q->scales[blk]);
                if (q->meta)
                    CHECK(q->meta[blk] == 0, "%s: NaN block %zu meta %02x", pctx, blk, q->meta[blk]);
                for (size_t i = 0; i < n; i++) {
                    unsigned c = qp_code(q, f->elem_bits, r, b * B + i);
                    CHECK(c == 0, "%s: NaN block %zu code %x at %zu", pctx, blk, c, i);
                    CHECK(isnan(y[r * cols + b * B + i]), "%s: NaN block %zu elem %zu decodes to %a",
                          pctx, blk, i, y[r * cols + b * B + i]);
                }
                continue;
            }
            float amax = 0;
            size_t bm = 0;
            for (size_t i = 0; i < n; i++)
                if (fabsf(xb[i]) > amax) {
                    amax = fabsf(xb[i]);
                    bm = i;
                }
            if (f->family == BFP_FAMILY_MX) { /* P2 */
                int se = mx_expect_se(m, amax, opt.scale_mode);
                CHECK(q->scales[blk] == se + 127, "%s: block %zu amax %a scale %02x, want %02x",
                      pctx, blk, amax, q->scales[blk], se + 127);
            } else if (fam_is_plus(f)) {
                if (amax == 0 || flog2f(amax) - m->emax <= -127) {
                    flushed++;
                    ps->flushed++;
                    CHECK(q->scales[blk] == 0 && q->meta[blk] == 0,
                          "%s: block %zu amax %a not flushed (scale %02x meta %02x)", pctx, blk,
                          amax, q->scales[blk], q->meta[blk]);
                    for (size_t i = 0; i < n; i++) {
                        CHECK(qp_code(q, f->elem_bits, r, b * B + i) == 0,
                              "%s: flushed block %zu code at %zu", pctx, blk, i);
                        CHECK(f32_same(y[r * cols + b * B + i], 0.0f),
                              "%s: flushed block %zu decodes %a", pctx, blk, y[r * cols + b * B + i]);
                    }
                    continue;
                }
                int se = flog2f(amax) - m->emax;
                unsigned delta = 0;
                if (f->family == BFP_FAMILY_MX_PP) {
                    float max2 = 0;
                    for (size_t i = 0; i < n; i++)
                        if (i != bm && fabsf(xb[i]) > max2)
                            max2 = fabsf(xb[i]);
                    if (max2 > 0) {
                        int e = flog2f(max2) - m->emax + 1;
                        int ne = e < se - 7 ? se - 7 : e > se ? se : e;
                        delta = (unsigned)(se - ne);
                    }
                }
                CHECK(q->scales[blk] == se + 127, "%s: block %zu amax %a scale %02x, want %02x",
                      pctx, blk, amax, q->scales[blk], se + 127);
                CHECK(q->meta[blk] == (bm | delta << 5), "%s: block %zu meta %02x, want %02zx",
                      pctx, blk, q->meta[blk], bm | delta << 5);
            } else if (fam_is_nv(f)) { /* P2 / P13 */
                float tmax = 0;
                for (size_t rr = r0; rr < r1; rr++)
                    for (size_t i = 0; i < n; i++) {
                        float t = fabsf(nv_t(x[rr * cols + b * B + i], s_enc));
                        tmax = t > tmax ? t : tmax;
                    }
                volatile float q6 = tmax / 6.0f;
                unsigned sc = e4m3_rne_code(q6);
                CHECK(q->scales[blk] == sc, "%s: block %zu tile max|t| %a scale %02x, want %02x",
                      pctx, blk, tmax, q->scales[blk], sc);
                if (f->family == BFP_FAMILY_NVFP4_PLUS) {
                    size_t tbm = 0;
                    float tb = -1;
                    for (size_t i = 0; i < n; i++) {
                        float t = fabsf(nv_t(xb[i], s_enc));
                        if (t > tb) {
                            tb = t;
                            tbm = i;
                        }
                    }
                    unsigned want = sc > 0x02 ? (unsigned)tbm : 0;
                    CHECK(q->meta[blk] == want, "%s: block %zu meta %02x, want %02x", pctx, blk,
                          q->meta[blk], want);
                }
            } else { /* HiF4 */
                uint32_t w = hif4_expect_word(xb, n), got = qp_hif4_word(q, blk);
                CHECK(got == w, "%s: block %zu word %08x, want %08x", pctx, blk, (unsigned)got,
                      (unsigned)w);
            }

            /* P1: every element */
            for (size_t i = 0; i < n; i++) {
                size_t col = b * B + i;
                float xv = x[r * cols + col], yv = y[r * cols + col];
                emodel d;
                elem_model(m, q, x, r, col, &d);
                if (d.kind == EK_NAN || d.kind == EK_FLUSH) {
                    CHECK(0, "%s: finite block %zu decoded as NaN/flushed", pctx, blk);
                    break;
                }
                ps->elems++;
                CHECK(f32_same(yv, d.recon), "%s: (%zu,%zu) x=%a decodes %a, planes say %a", pctx,
                      r, col, xv, yv, d.recon);
                int xneg = signbit(xv) != 0;
                if (d.kind == EK_ZERO) { /* NVFP4 zero block scale: signed zeros */
                    CHECK(d.chosen == 0 && d.neg == xneg && f32_same(yv, xneg ? -0.0f : 0.0f),
                          "%s: (%zu,%zu) zero-scale block: x=%a code gives %a", pctx, r, col, xv, yv);
                    continue;
                }
                int tie;
                const char *why = "";
                int ok = decision_ok(&d, rm, &tie, &why);
                ps->ties += (size_t)tie;
                ps->saturated += d.a > d.grid[d.n - 1] * d.s;
                ps->negzero += d.chosen == 0 && d.signed_zero && xneg;
                CHECK(ok, "%s: (%zu,%zu) x=%a (a=%a, s=%a%s) stored %a: want %s", pctx, r, col, xv,
                      d.a, d.s, d.is_bm ? ", BM" : "", d.chosen, why);
                /* sign: nonzero results keep the sign; zeros too for FP */
                if (d.chosen != 0 || d.signed_zero) {
                    CHECK(d.neg == xneg, "%s: (%zu,%zu) x=%a stored sign %d", pctx, r, col, xv,
                          d.neg);
                    if (d.chosen == 0)
                        CHECK(f32_same(yv, xneg ? -0.0f : 0.0f), "%s: (%zu,%zu) x=%a decodes %a",
                              pctx, r, col, xv, yv);
                } else {
                    CHECK(f32_same(yv, 0.0f), "%s: INT zero decodes %a", pctx, yv);
                }
                if (f->family == BFP_FAMILY_HIF4 && (rm == RM_RNE || rm == RM_AWAY)) {
                    /* In the decoded domain HiF4 rounds |x| * REC, REC = BF16(1/E6M2)
                     * being off by < 2^-8 relative: nearest up to that slack. */
                    double ax = fabs((double)xv), err = fabs(d.chosen * d.xdom_scale - ax), best = err;
                    for (int k = 0; k < m->ngrid; k++) {
                        double e2 = fabs(m->grid[k] * d.xdom_scale - ax);
                        best = e2 < best ? e2 : best;
                    }
                    ps->hif4_off += err > best;
                    CHECK(err <= best + ax * 0x1p-7, "%s: (%zu,%zu) HiF4 x=%a decodes %a, far off nearest",
                          pctx, r, col, xv, yv);
                }
            }
        }
    if (st) {
        CHECK(st->blocks == rows * bpr, "%s: stats.blocks %zu", pctx, st->blocks);
        CHECK(st->nonfinite_blocks == nonfinite, "%s: stats.nonfinite_blocks %zu, want %zu", pctx,
              st->nonfinite_blocks, nonfinite);
        CHECK(st->flushed_blocks == flushed, "%s: stats.flushed_blocks %zu, want %zu", pctx,
              st->flushed_blocks, flushed);
    }
    /* P11: a fresh plane set is valid; a row's unused code bits are 0 */
    bfp_const_planes in = qp_in(q);
    size_t bad = 99, first = 0;
    bfp_status vs = bfp_validate(f->id, &in, rows, cols, &bad, &first);
    CHECK(vs == BFP_OK && bad == 0 && first == SIZE_MAX, "%s: validate %d bad %zu first %zu", pctx,
          vs, bad, first);
    size_t used = cols * (size_t)f->elem_bits;
    if (used % 8)
        for (size_t r = 0; r < rows; r++)
            CHECK((q->codes[r * q->sz.code_row_bytes + used / 8] >> (used % 8)) == 0,
                  "%s: row %zu padding bits set", pctx, r);
    if (!yout)
        free(y);
}

#endif /* BFP_TEST_PROPERTIES_CHECK_H */

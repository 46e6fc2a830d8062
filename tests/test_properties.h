/* test_properties.h - shared helpers of the property tests
 * (tests/test_properties*.c): a fixed-seed PRNG, data generators, an
 * independent model of every format built only from the public API
 * (bfp_elem_decode, bfp_scale_decode, the format table) and SPEC.md, and
 * check_planes(), which re-derives every scale, meta byte and element
 * decision of a quantized tensor and compares it with the planes.
 *
 * Nothing here calls the library's internal rounding helpers: grids are
 * enumerated from the public decoders, expectations come from SPEC rules
 * written out again here. */
#ifndef BFP_TEST_PROPERTIES_H
#define BFP_TEST_PROPERTIES_H

#include "bfp.h"
#include "check.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prng.h"

static inline double prng_normal(prng *p)
{
    double u = prng_unit(p), v = prng_unit(p);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

static inline double prng_sign(prng *p)
{
    return (prng_next(p) >> 63) ? -1.0 : 1.0;
}

/* ---- float bits --------------------------------------------------------- */

static inline uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float f32_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Same float, bit for bit (NaN == NaN only with the same bits). */
static inline int f32_same(float a, float b)
{
    return f32_bits(a) == f32_bits(b);
}

/* v rounded to nearest-even with sig significant bits, grid floored at
 * 2^(min_exp - sig + 1) (subnormals). Written here with nearbyint, which
 * rounds ties to even in the default rounding mode. v >= 0, finite. */
static inline double rne_sig(double v, int sig, int min_exp)
{
    if (v == 0)
        return 0;
    int e = ilogb(v);
    if (e < min_exp)
        e = min_exp;
    double q = ldexp(1.0, e - sig + 1);
    return nearbyint(v / q) * q;
}

static inline double bf16_rne_d(double v)
{
    return rne_sig(v, 8, -126);
}

/* ---- format model, from the public API only ----------------------------- */

typedef struct {
    const bfp_format_info *f;
    double grid[128]; /* sorted element magnitudes the encoder may write */
    int ngrid;
    double ext[128];  /* MX+/MX++/NVFP4+ block-max magnitudes, else empty */
    int next;
    int emax;         /* exponent of the largest power of two on the grid */
    int mbits;        /* log2(number of grid points in [2^emax, 2^(emax+1))) */
    int is_int;       /* INT8/INT4: two's complement, no -0 */
    int has_ext;
    double dec[256];  /* bfp_elem_decode of every code, cached */
} fmodel;

static inline int fam_is_mx(const bfp_format_info *f)
{
    return f->family == BFP_FAMILY_MX || f->family == BFP_FAMILY_MX_PLUS ||
           f->family == BFP_FAMILY_MX_PP;
}

static inline int fam_is_nv(const bfp_format_info *f)
{
    return f->family == BFP_FAMILY_NVFP4 || f->family == BFP_FAMILY_NVFP4_PLUS;
}

static inline int fam_is_plus(const bfp_format_info *f) /* MX+ or MX++ */
{
    return f->family == BFP_FAMILY_MX_PLUS || f->family == BFP_FAMILY_MX_PP;
}

static inline void fmodel_init(fmodel *m, const bfp_format_info *f)
{
    memset(m, 0, sizeof *m);
    m->f = f;
    m->is_int = f->elem == BFP_ELEM_INT8 || f->elem == BFP_ELEM_INT4;
    for (unsigned c = 0; c < (1u << f->elem_bits); c++)
        m->dec[c] = bfp_elem_decode(f->elem, c);
    /* Magnitudes: the codes with the sign bit clear. For INT this is
     * k = 0..2^(bits-1)-1, i.e. SPEC's k in [-127,127] / [-7,7] by symmetry;
     * the two's complement codes 0x80 / 0x8 (-2) are outside the spec grid. */
    unsigned half = 1u << (f->elem_bits - 1);
    for (unsigned c = 0; c < half; c++) {
        double v = bfp_elem_decode(f->elem, c);
        if (!isfinite(v))
            continue;
        int k = m->ngrid++;
        while (k > 0 && m->grid[k - 1] > v) { /* insertion sort */
            m->grid[k] = m->grid[k - 1];
            k--;
        }
        m->grid[k] = v;
    }
    int e;
    frexp(m->grid[m->ngrid - 1], &e);
    m->emax = e - 1;
    int top = 0;
    for (int i = 0; i < m->ngrid; i++)
        top += m->grid[i] >= ldexp(1.0, m->emax);
    while ((1 << m->mbits) < top)
        m->mbits++;
    m->has_ext = fam_is_plus(f) || f->family == BFP_FAMILY_NVFP4_PLUS;
    if (m->has_ext) { /* SPEC 5: +-2^emax (1 + m / 2^(bits-1)) */
        m->next = (int)half;
        for (int i = 0; i < m->next; i++)
            m->ext[i] = ldexp(1.0 + (double)i / half, m->emax);
    }
}

static inline double gmax(const fmodel *m)
{
    return m->grid[m->ngrid - 1];
}

/* ---- planes ------------------------------------------------------------- */

typedef struct {
    size_t rows, cols;
    bfp_plane_sizes sz;
    uint8_t *codes, *scales, *meta;
    float ts;
    int has_ts;
} qplanes;

static inline void qp_alloc(const fmodel *m, size_t rows, size_t cols, qplanes *q, int fill)
{
    memset(q, 0, sizeof *q);
    q->rows = rows;
    q->cols = cols;
    if (bfp_plane_sizes_for(m->f->id, rows, cols, &q->sz) != BFP_OK) {
        fprintf(stderr, "plane sizes failed\n");
        abort();
    }
    q->codes = malloc(q->sz.codes);
    q->scales = malloc(q->sz.scales);
    q->meta = q->sz.meta ? malloc(q->sz.meta) : NULL;
    memset(q->codes, fill, q->sz.codes);
    memset(q->scales, fill, q->sz.scales);
    if (q->meta)
        memset(q->meta, fill, q->sz.meta);
    q->has_ts = m->f->has_tensor_scale;
    q->ts = -1.0f;
}

static inline void qp_free(qplanes *q)
{
    free(q->codes);
    free(q->scales);
    free(q->meta);
    memset(q, 0, sizeof *q);
}

static inline bfp_planes qp_out(qplanes *q)
{
    bfp_planes p = {q->codes, q->scales, q->meta, q->has_ts ? &q->ts : NULL};
    return p;
}

static inline bfp_const_planes qp_in(const qplanes *q)
{
    bfp_const_planes p = {q->codes, q->scales, q->meta, q->has_ts ? &q->ts : NULL};
    return p;
}

/* Quantize into freshly allocated planes (pre-filled with fill) with the
 * reference quantizer, bfp_quantize_ref(): the golden model is what these
 * properties are about. (test_properties.c checks that the dispatching
 * bfp_quantize() gives the same planes.) */
static inline bfp_status qp_quantize(const fmodel *m, bfp_dtype dt, const void *src, size_t rows,
                                     size_t cols, const bfp_options *o, qplanes *q,
                                     bfp_stats *st, int fill)
{
    qp_alloc(m, rows, cols, q, fill);
    bfp_planes out = qp_out(q);
    return bfp_quantize_ref(m->f->id, dt, src, rows, cols, o, &out, st);
}

static inline int qp_equal(const qplanes *a, const qplanes *b)
{
    if (memcmp(a->codes, b->codes, a->sz.codes) || memcmp(a->scales, b->scales, a->sz.scales))
        return 0;
    if (a->meta && memcmp(a->meta, b->meta, a->sz.meta))
        return 0;
    return !a->has_ts || f32_same(a->ts, b->ts);
}

static inline void qp_dequant(const fmodel *m, const qplanes *q, float *y)
{
    bfp_const_planes in = qp_in(q);
    bfp_status st = bfp_dequantize_ref(m->f->id, &in, q->rows, q->cols, BFP_DTYPE_F32, y);
    CHECK(st == BFP_OK, "%s: dequantize returned %d", m->f->name, st);
}

/* Code of element col of row r: LSB-first bit stream (SPEC 0), read here. */
static inline unsigned qp_code(const qplanes *q, int bits, size_t r, size_t col)
{
    const uint8_t *row = q->codes + r * q->sz.code_row_bytes;
    unsigned c = 0;
    size_t bit = col * (size_t)bits;
    for (int k = 0; k < bits; k++, bit++)
        c |= (unsigned)((row[bit >> 3] >> (bit & 7)) & 1u) << k;
    return c;
}

static inline uint32_t qp_hif4_word(const qplanes *q, size_t blk)
{
    const uint8_t *p = q->scales + 4 * blk;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- generators ----------------------------------------------------------- */

enum {
    G_NORMAL,   /* normal-ish, per-block magnitude, some +-0 */
    G_OUTLIER,  /* small normal values, one big outlier per block */
    G_HUGE,     /* near FLT_MAX */
    G_TINY,     /* near / below FLT_MIN, subnormals */
    G_ZERO,     /* all +-0 */
    G_POW2,     /* exact powers of two */
    G_MID,      /* exact midpoints between grid values (format-specific) */
    G_SMALLINT, /* k/8 on a coarse lattice: many exact grid hits */
    G_MIXED,    /* each block drawn from a different generator above */
    G_COUNT
};

static const char *const gen_name[G_COUNT] = {"normal", "outlier", "huge", "tiny", "zero",
                                              "pow2",   "mid",     "smallint", "mixed"};

static inline float sprinkle_zero(prng *p, float v)
{
    unsigned r = (unsigned)(prng_next(p) % 40);
    return r == 0 ? -0.0f : r == 1 ? 0.0f : v;
}

/* Fill one block xb[0..n) with generator g (G_MID: format-specific). */
static inline void gen_block(const fmodel *m, int g, prng *p, float *xb, size_t n)
{
    switch (g) {
    case G_NORMAL: {
        double s = ldexp(1.0, prng_int(p, -12, 12));
        for (size_t i = 0; i < n; i++)
            xb[i] = sprinkle_zero(p, (float)(prng_normal(p) * s));
        break;
    }
    case G_OUTLIER: {
        double s = ldexp(1.0, prng_int(p, -8, 8));
        for (size_t i = 0; i < n; i++)
            xb[i] = sprinkle_zero(p, (float)(prng_normal(p) * s));
        xb[prng_next(p) % n] = (float)(prng_sign(p) * s * ldexp(1.0 + prng_unit(p),
                                                                prng_int(p, 8, 30)));
        break;
    }
    case G_HUGE:
        for (size_t i = 0; i < n; i++) {
            unsigned r2 = (unsigned)(prng_next(p) % 8);
            double v = r2 == 0 ? FLT_MAX
                       : r2 == 1 ? ldexp(1.0 + prng_unit(p), prng_int(p, 100, 126))
                                 : FLT_MAX * (0.25 + 0.75 * prng_unit(p));
            xb[i] = (float)(prng_sign(p) * v);
        }
        break;
    case G_TINY:
        for (size_t i = 0; i < n; i++) {
            unsigned r2 = (unsigned)(prng_next(p) % 10);
            double v = r2 == 0 ? FLT_MIN
                       : r2 == 1 ? 0x1p-149
                       : r2 == 2 ? 0.0
                                 : ldexp(1.0 + prng_unit(p), prng_int(p, -149, -110));
            xb[i] = (float)(prng_sign(p) * v); /* (float) rounds subnormals */
        }
        break;
    case G_ZERO:
        for (size_t i = 0; i < n; i++)
            xb[i] = (prng_next(p) & 1) ? -0.0f : 0.0f;
        break;
    case G_POW2: {
        int k0 = prng_int(p, -30, 30);
        for (size_t i = 0; i < n; i++)
            xb[i] = sprinkle_zero(p, (float)(prng_sign(p) * ldexp(1.0, k0 + prng_int(p, -12, 3))));
        break;
    }
    case G_SMALLINT: {
        double s = ldexp(1.0, prng_int(p, -4, 4));
        for (size_t i = 0; i < n; i++)
            xb[i] = (float)(prng_int(p, -64, 64) / 8.0 * s);
        break;
    }
    case G_MID:
        if (fam_is_mx(m->f)) {
            /* anchor 2^emax * 2^k (MX+: an extended-grid midpoint) fixes the
             * shared exponent at k; the rest are midpoints of adjacent grid
             * values at or below 2^emax, so they stay below the anchor. */
            double s = ldexp(1.0, prng_int(p, -30, 30)), top = ldexp(1.0, m->emax);
            int ntop = 0;
            while (ntop + 1 < m->ngrid && m->grid[ntop + 1] <= top)
                ntop++;
            size_t a = prng_next(p) % n;
            for (size_t i = 0; i < n; i++) {
                int j = prng_int(p, 0, ntop - 1);
                if (i == (a + 1) % n) /* MX++: keeps the other elements' delta 0 */
                    while (m->grid[j] < top / 2)
                        j++;
                xb[i] = (float)(prng_sign(p) * (m->grid[j] + m->grid[j + 1]) / 2 * s);
            }
            double av = top;
            if (m->has_ext) {
                int mm = prng_int(p, 0, m->next - 2);
                av = (m->ext[mm] + m->ext[mm + 1]) / 2;
            }
            xb[a] = (float)(prng_sign(p) * av * s);
        } else if (fam_is_nv(m->f)) {
            /* t = x * 2^-kk exactly (gen_fill puts 2688 * 2^kk in the tensor);
             * anchor 6 * sb gives the block scale sb; the rest are E2M1
             * midpoints times sb. */
            static const double mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};
            double sb = bfp_scale_decode(BFP_SCALE_UE4M3, (unsigned)prng_int(p, 0x08, 0x7E));
            size_t a = prng_next(p) % n;
            for (size_t i = 0; i < n; i++)
                xb[i] = (float)(prng_sign(p) * mids[prng_int(p, 0, 6)] * sb);
            xb[a] = (float)(prng_sign(p) * 6 * sb);
        } else {
            /* HiF4: anchor 7 * 2^e gives E6M2 = 2^e (REC = 2^-e) and sets
             * E1_8 and E1_16 of its groups; every other value is a tie
             * (k + 1/2)/4 in the REC domain at its group's shift. */
            int e = prng_int(p, -20, 14);
            size_t a = prng_next(p) % n;
            for (size_t i = 0; i < n; i++) {
                int shift = i / 8 != a / 8 ? 0 : i / 4 != a / 4 ? 1 : 2;
                double k = prng_int(p, 0, 6) + 0.5;
                xb[i] = (float)(prng_sign(p) * ldexp(k / 4, shift + e));
            }
            xb[a] = (float)(prng_sign(p) * ldexp(7.0, e));
            /* now and then a group max exactly at a flag threshold (SPEC 4
             * step 4: V8 * REC >= 4, V16 * REC * 2^-E1_8 >= 2) */
            for (size_t i = 0; i < n; i += 4)
                if (i / 8 != a / 8 && prng_int(p, 0, 5) == 0)
                    xb[i] = (float)ldexp(i % 8 ? 2.0 : 4.0, e);
        }
        break;
    }
}

/* Fill a rows x cols tensor with generator g (G_MIXED: per block). */
static inline void gen_fill(const fmodel *m, int g, prng *p, float *x, size_t rows, size_t cols)
{
    size_t B = (size_t)m->f->block;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b * B < cols; b++) {
            size_t n = cols - b * B < B ? cols - b * B : B;
            int gg = g == G_MIXED ? prng_int(p, 0, G_MIXED - 1) : g;
            if (g == G_MIXED && gg == G_MID && fam_is_nv(m->f))
                gg = G_NORMAL; /* NVFP4 midpoints need the whole tensor */
            gen_block(m, gg, p, x + r * cols + b * B, n);
        }
    if (g == G_MID && fam_is_nv(m->f)) {
        /* The NVFP4 tensor max 2688 * 2^kk makes s_enc = 2^-kk exactly, so
         * t = x * s_enc is exact and every block max is 6 * sb. */
        int kk = prng_int(p, -3, 3);
        x[0] = 2688.0f;
        for (size_t k = 0; k < rows * cols; k++)
            x[k] = (float)ldexp(x[k], kk);
    }
}

/* The model of each element and check_planes(). */
#include "test_properties_check.h"

#endif /* BFP_TEST_PROPERTIES_H */

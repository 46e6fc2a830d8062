/* verify.c - compare the planes of a device or kernel under test (DUT) with
 * the reference planes, entry by entry, and name the likely cause of each
 * difference (docs/verify.md). Pure computation, no I/O.
 *
 * The analysis works per block. First the block-level patterns, which explain
 * every difference in a block at once: a NaN block, a shifted block, 4-bit
 * codes in another order, reversed bits. Then each entry on its own: a tie,
 * one rounding step, a signed zero, a scale one step off with codes that follow
 * it, a flipped bit. Rounding questions are answered in the domain where the
 * reference decides them (|x| against grid values times the scale; NVFP4's
 * t = x * s_enc; HiF4's |x| * REC * 2^-shift against k/4), exactly. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* ---- names --------------------------------------------------------------- */

static const char *const cause_names[BFP_VERIFY_NCAUSES] = {
    "unknown",   "tie",      "rounding",   "scale-step", "scale",    "nibble-order",
    "bit-order", "block-shift", "signed-zero", "nan-block", "bit-flip",
};

static const char *const cause_hints[BFP_VERIFY_NCAUSES] = {
    "no known pattern: compare the decoded values and the block's input by hand",
    "the input lies exactly between two grid values (or two elements tie for the block "
    "max) and the DUT chose the other one: check the tie rule (RNE for every format "
    "except HiF4, ties away; block max: lowest index)",
    "code one grid step off with the input not at a tie: check the rounding mode and "
    "whether the quotient x/scale is rounded before the element rounding",
    "block scale one code step off (codes that differ follow the DUT's scale): check "
    "the scale rule (floor(log2 amax) - emax, E4M3 RNE of amax/6, UE6M2 rounding)",
    "block context (scale, tensor scale, meta, HiF4 flags) differs by more than a step "
    "and the codes follow the DUT's own context: check the scale computation",
    "4-bit codes stored in another order (pairs 2k/2k+1 swapped, or ggml's j / "
    "j+block/2): planar codes put element 2k in the low nibble",
    "bits or bytes reversed (code bits, an MSB-first bit stream, a byte-swapped HiF4 "
    "word or tensor scale, reversed E1_8/E1_16 flags): planes are LSB-first, "
    "little-endian",
    "the DUT's block holds the reference's neighbouring block: check the block "
    "index / pointer arithmetic (blocks are row-major, rows start a new block)",
    "+0 against -0: a negative input that rounds to zero keeps its sign bit (FP "
    "elements); INT elements have no -0",
    "a block holding NaN/Inf (or a NaN scale) is handled differently: such a block gets "
    "the NaN scale code and zero codes and meta",
    "one bit differs and the DUT's value is not a nearest one: a corrupted bit (memory, "
    "packing mask), not a rounding choice",
};

const char *bfp_verify_cause_name(bfp_verify_cause cause)
{
    return (unsigned)cause < BFP_VERIFY_NCAUSES ? cause_names[cause] : "?";
}

const char *bfp_verify_cause_hint(bfp_verify_cause cause)
{
    return (unsigned)cause < BFP_VERIFY_NCAUSES ? cause_hints[cause] : "?";
}

const char *bfp_plane_name(bfp_plane_id plane)
{
    switch (plane) {
    case BFP_PLANE_CODES: return "codes";
    case BFP_PLANE_SCALES: return "scales";
    case BFP_PLANE_META: return "meta";
    case BFP_PLANE_TENSOR_SCALE: return "tensor_scale";
    }
    return "?";
}

/* ---- the comparison's state -------------------------------------------------- */

typedef struct {
    const bfp_format_impl *impl;
    const bfp_format_info *f;
    bfp_plane_sizes sz;
    size_t rows, cols, block;
    int w;                            /* code width */
    const float *x;                   /* input as float32, or NULL */
    const bfp_const_planes *ref, *dut;
    const float *yref, *ydut;         /* the two reconstructions */
    bfp_verify_mismatch *out;
    size_t cap;
    bfp_verify_report *rep;
} vstate;

/* Block-level findings for one block. */
typedef struct {
    int nan;         /* NaN/Inf input, or a NaN scale on either side */
    int shift;       /* DUT block = reference block g-1 or g+1 */
    int reorder;     /* 4-bit codes permuted */
    int bitrev;      /* code bits or the block's bytes reversed */
    int scale_step;  /* scale code (HiF4: UE6M2 byte) differs by one */
    int meta_tie;    /* the meta differs by a tie (block max, HiF4 flag) */
    int codes_differ;
} bflags;

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint32_t bswap32(uint32_t w)
{
    return (w >> 24) | ((w >> 8) & 0xFF00u) | ((w << 8) & 0xFF0000u) | (w << 24);
}

static uint32_t bitrev(uint32_t v, int w)
{
    uint32_t r = 0;
    for (int k = 0; k < w; k++)
        r |= ((v >> k) & 1u) << (w - 1 - k);
    return r;
}

static int popcount32(uint32_t v)
{
    int n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
}

static size_t blen(const vstate *v, size_t b)
{
    return bfp_block_len(v->cols, v->block, b);
}

static unsigned code_at(const vstate *v, const bfp_const_planes *p, size_t r, size_t col)
{
    return bfp_get_code(p->codes + r * v->sz.code_row_bytes, col, v->w);
}

/* The scale entry of global block g: the byte, or the HiF4 word. */
static uint32_t scale_at(const vstate *v, const bfp_const_planes *p, size_t g)
{
    if (v->f->scale_bytes == 4)
        return load_le32(p->scales + 4 * g);
    return p->scales[g];
}

static uint32_t meta_at(const vstate *v, const bfp_const_planes *p, size_t g)
{
    return v->f->meta_bytes ? p->meta[g] : 0;
}

static int scale_is_nan(const vstate *v, uint32_t sc)
{
    switch (v->f->scale) {
    case BFP_SCALE_E8M0: return sc == 0xFF;
    case BFP_SCALE_UE4M3: return (sc & 0x80) || sc == 0x7F;
    case BFP_SCALE_HIF4: return (sc & 0xFF) == 0xFF;
    }
    return 0;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* ---- element context: how the format rounds one element -------------------- */

/* The rounding domain of element i of a block: the reference picks the
 * magnitude index by comparing u with grid values times s. */
typedef struct {
    int valid;                  /* 0: the block decodes to NaN or all zeros */
    int zero_only;              /* NVFP4 zero block scale: every element is +-0 */
    const bfp_elem_desc *codec; /* element codec (MX+/NVFP4+ block max: EXT) */
    double s;
    double u;                   /* |input| in that domain (0 without input) */
    int neg;                    /* input sign bit */
} ectx;

static double bf16_rne(double v)
{
    return bfp_round_sig(v, 8, -126);
}

/* HiF4's REC = BF16_RNE(1 / E6M2) for a UE6M2 code (as hif4.c). */
static double hif4_rec(unsigned code)
{
    return ldexp(bf16_rne(1.0 / (1.0 + (code & 3) / 4.0)), 48 - (int)(code >> 2));
}

static ectx elem_ctx(const vstate *v, const bfp_const_planes *p, size_t r, size_t b,
                     size_t i)
{
    const bfp_format_impl *impl = v->impl;
    size_t g = r * v->sz.blocks_per_row + b, col = b * v->block + i;
    float x = v->x ? v->x[r * v->cols + col] : 0.0f;
    ectx e = {1, 0, impl->elem, 1.0, fabs((double)x), bfp_f32_sign(x)};
    uint32_t sc = scale_at(v, p, g);
    switch (v->f->family) {
    case BFP_FAMILY_MX:
        e.valid = sc != 0xFF;
        e.s = ldexp(1.0, (int)sc - 127);
        break;
    case BFP_FAMILY_MX_PLUS:
    case BFP_FAMILY_MX_PP: {
        uint32_t meta = meta_at(v, p, g);
        e.valid = sc != 0xFF && sc != 0x00 &&
                  !impl->block_is_bad(impl, p, &v->sz, r, b, v->cols);
        int bm = (meta & 0x1F) == i;
        e.codec = bm ? impl->bm_elem : impl->elem;
        e.s = ldexp(1.0, (int)sc - 127 - (bm ? 0 : (int)(meta >> 5)));
        break;
    }
    case BFP_FAMILY_NVFP4:
    case BFP_FAMILY_NVFP4_PLUS: {
        e.valid = sc < 0x80 && sc != 0x7F &&
                  !impl->block_is_bad(impl, p, &v->sz, r, b, v->cols);
        if (!e.valid)
            break;
        float t = x * *p->tensor_scale; /* t_i = fp32(x_i * s_enc) */
        e.u = fabs((double)t);
        e.neg = bfp_f32_sign(t);
        e.s = bfp_grid_value(&bfp_e4m3, sc);
        e.zero_only = e.s == 0;
        if (impl->bm_elem && sc > 0x02 && meta_at(v, p, g) == i)
            e.codec = impl->bm_elem;
        break;
    }
    case BFP_FAMILY_HIF4: {
        unsigned shift = ((sc >> (8 + i / 8)) & 1) + ((sc >> (16 + i / 4)) & 1);
        e.valid = (sc & 0xFF) != 0xFF;
        e.u = ldexp(e.u * hif4_rec(sc & 0xFF), -(int)shift); /* exact */
        break;
    }
    }
    if (v->x && !bfp_f32_is_finite(x))
        e.valid = 0;
    return e;
}

static int same_ctx(const ectx *a, const ectx *b)
{
    return a->valid == b->valid && a->zero_only == b->zero_only &&
           a->codec == b->codec && a->s == b->s && a->u == b->u;
}

/* Magnitude index and sign of a code, or -1 for a code the encoder never
 * writes (NaN/Inf, INT -2). */
static int code_mag(const bfp_elem_desc *e, unsigned code, int *neg)
{
    unsigned sign_bit = 1u << (e->bits - 1);
    code &= (1u << e->bits) - 1;
    if (e->kind == BFP_GRID_INT) {
        if (code == sign_bit)
            return -1;
        int k = (code & sign_bit) ? (int)code - (1 << e->bits) : (int)code;
        *neg = k < 0;
        return k < 0 ? -k : k;
    }
    *neg = (code & sign_bit) != 0;
    unsigned m = code & (sign_bit - 1);
    return m > (unsigned)e->max_mag ? -1 : (int)m;
}

/* The nearest magnitude index of u: *lo, and *hi = *lo + 1 when u lies
 * exactly at the midpoint of two grid values (else *hi = *lo). */
static void nearest(const ectx *c, unsigned *lo, unsigned *hi)
{
    if (c->zero_only) {
        *lo = *hi = 0;
        return;
    }
    unsigned t = bfp_grid_round(c->codec, c->u, c->s, BFP_ROUND_TOWARD_ZERO, 0);
    if (t < (unsigned)c->codec->max_mag &&
        2 * c->u == (bfp_grid_value(c->codec, t) + bfp_grid_value(c->codec, t + 1)) * c->s) {
        *lo = t;
        *hi = t + 1;
        return;
    }
    *lo = *hi = bfp_grid_round(c->codec, c->u, c->s, BFP_ROUND_NEAREST_EVEN, 0);
}

/* 1 if code is a nearest rounding of the input in context c. */
static int consistent(const ectx *c, unsigned code)
{
    if (!c->valid)
        return code == 0; /* NaN and flushed blocks hold zero codes */
    int neg, m = code_mag(c->codec, code, &neg);
    if (m < 0)
        return 0;
    unsigned lo, hi;
    nearest(c, &lo, &hi);
    if ((unsigned)m != lo && (unsigned)m != hi)
        return 0;
    return m == 0 || neg == c->neg;
}

/* 1 if every element code of DUT block g follows the DUT's own context. */
static int block_consistent(const vstate *v, size_t r, size_t b)
{
    if (!v->x)
        return 0;
    for (size_t i = 0; i < blen(v, b); i++) {
        ectx c = elem_ctx(v, v->dut, r, b, i);
        if (!consistent(&c, code_at(v, v->dut, r, b * v->block + i)))
            return 0;
    }
    return 1;
}

/* ---- block-level patterns ------------------------------------------------- */

static int codes_equal(const vstate *v, const bfp_const_planes *a, size_t ga,
                       const bfp_const_planes *b, size_t gb)
{
    size_t bpr = v->sz.blocks_per_row;
    size_t ra = ga / bpr, ba = ga % bpr, rb = gb / bpr, bb = gb % bpr;
    size_t n = blen(v, ba);
    if (n != blen(v, bb))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (code_at(v, a, ra, ba * v->block + i) != code_at(v, b, rb, bb * v->block + i))
            return 0;
    return 1;
}

static int block_equal(const vstate *v, const bfp_const_planes *a, size_t ga,
                       const bfp_const_planes *b, size_t gb)
{
    return scale_at(v, a, ga) == scale_at(v, b, gb) && meta_at(v, a, ga) == meta_at(v, b, gb) &&
           codes_equal(v, a, ga, b, gb);
}

/* 1 if block g differs between the sides only in the sign of zero codes
 * (+0 against -0): that is signed-zero, even when the DUT block happens to
 * equal a neighbour (a -0 block beside a +0 one looks like a shift). */
static int only_zero_signs(const vstate *v, size_t g)
{
    const size_t bpr = v->sz.blocks_per_row, r = g / bpr, b = g % bpr;
    const unsigned sign_bit = 1u << (v->w - 1);
    if (scale_at(v, v->ref, g) != scale_at(v, v->dut, g) ||
        meta_at(v, v->ref, g) != meta_at(v, v->dut, g))
        return 0;
    for (size_t i = 0; i < blen(v, b); i++) {
        unsigned cr = code_at(v, v->ref, r, b * v->block + i);
        unsigned cd = code_at(v, v->dut, r, b * v->block + i);
        if (cr != cd && !((cr | cd) == sign_bit && (cr ^ cd) == sign_bit))
            return 0;
    }
    return 1;
}

/* DUT codes of a 4-bit block = reference codes under perm(i); the ggml
 * orders (kinds 1, 2) only for full blocks. */
static int permuted(const vstate *v, size_t r, size_t b, int kind)
{
    const size_t n = blen(v, b), half = v->block / 2, c0 = b * v->block;
    if (kind != 0 && n != v->block)
        return 0;
    for (size_t i = 0; i < n; i++) {
        size_t src;
        if (kind == 0)
            src = (i ^ 1u) < n ? i ^ 1u : i;               /* pairs swapped */
        else if (kind == 1)
            src = (i & 1) ? half + i / 2 : i / 2;          /* written in ggml order */
        else
            src = i < half ? 2 * i : 2 * (i - half) + 1;   /* read as ggml order */
        if (code_at(v, v->dut, r, c0 + i) != code_at(v, v->ref, r, c0 + src))
            return 0;
    }
    return 1;
}

/* DUT codes = reference codes with their bits reversed, or the block's bytes
 * with their bits reversed (an MSB-first bit stream). Full blocks only. */
static int reversed(const vstate *v, size_t r, size_t b)
{
    const size_t n = v->block, c0 = b * n;
    int all = 1;
    for (size_t i = 0; all && i < n; i++)
        all = code_at(v, v->dut, r, c0 + i) ==
              bitrev(code_at(v, v->ref, r, c0 + i), v->w);
    if (all)
        return 1;
    const size_t bytes = n * (size_t)v->w / 8, off = r * v->sz.code_row_bytes + c0 * (size_t)v->w / 8;
    for (size_t k = 0; k < bytes; k++)
        if (v->dut->codes[off + k] != bitrev(v->ref->codes[off + k], 8))
            return 0;
    return 1;
}

static bflags block_flags(const vstate *v, size_t r, size_t b)
{
    const size_t bpr = v->sz.blocks_per_row, g = r * bpr + b, n = blen(v, b);
    const size_t nblocks = v->rows * bpr;
    bflags fl = {0};
    uint32_t sr = scale_at(v, v->ref, g), sd = scale_at(v, v->dut, g);
    fl.nan = scale_is_nan(v, sr) || scale_is_nan(v, sd);
    for (size_t i = 0; v->x && i < n; i++)
        if (!bfp_f32_is_finite(v->x[r * v->cols + b * v->block + i]))
            fl.nan = 1;
    fl.codes_differ = !codes_equal(v, v->ref, g, v->dut, g);
    if (!block_equal(v, v->ref, g, v->dut, g) && !only_zero_signs(v, g))
        fl.shift = (g > 0 && block_equal(v, v->dut, g, v->ref, g - 1)) ||
                   (g + 1 < nblocks && block_equal(v, v->dut, g, v->ref, g + 1));
    if (fl.codes_differ && v->w == 4)
        fl.reorder = permuted(v, r, b, 0) || permuted(v, r, b, 1) || permuted(v, r, b, 2);
    if (fl.codes_differ && n == v->block)
        fl.bitrev = !fl.reorder && reversed(v, r, b);
    uint32_t er = sr & 0xFF, ed = sd & 0xFF; /* HiF4: the UE6M2 byte */
    fl.scale_step = er != ed && (er + 1 == ed || ed + 1 == er);
    return fl;
}

/* ---- recording ----------------------------------------------------------- */

static void record(vstate *v, bfp_plane_id plane, size_t r, size_t b, size_t i,
                   uint32_t exp, uint32_t got, double ev, double gv, bfp_verify_cause cause)
{
    bfp_verify_report *rep = v->rep;
    rep->mismatches++;
    rep->cause_count[cause]++;
    switch (plane) {
    case BFP_PLANE_CODES: rep->codes_differ++; break;
    case BFP_PLANE_SCALES: rep->scales_differ++; break;
    case BFP_PLANE_META: rep->meta_differ++; break;
    case BFP_PLANE_TENSOR_SCALE: rep->tensor_scale_differs = 1; break;
    }
    if (rep->recorded >= v->cap)
        return;
    bfp_verify_mismatch *m = &v->out[rep->recorded++];
    memset(m, 0, sizeof *m);
    m->plane = plane;
    m->row = r;
    m->block = b;
    m->elem = plane == BFP_PLANE_CODES ? i : 0;
    m->col = plane == BFP_PLANE_CODES ? b * v->block + i : 0;
    m->input = (plane == BFP_PLANE_CODES && v->x) ? v->x[r * v->cols + m->col] : bfp_f32_nan();
    m->expected = exp;
    m->received = got;
    m->expected_value = ev;
    m->received_value = gv;
    m->cause = cause;
}

/* ---- per-entry causes ---------------------------------------------------- */

static bfp_verify_cause code_cause(const vstate *v, const bflags *fl, size_t r, size_t b,
                                   size_t i)
{
    if (fl->nan)
        return BFP_CAUSE_NAN_BLOCK;
    if (fl->shift)
        return BFP_CAUSE_BLOCK_SHIFT;
    if (fl->reorder)
        return BFP_CAUSE_NIBBLE_ORDER;
    if (fl->bitrev)
        return BFP_CAUSE_BIT_ORDER;
    const size_t col = b * v->block + i, n = blen(v, b);
    const unsigned cr = code_at(v, v->ref, r, col), cd = code_at(v, v->dut, r, col);
    ectx xr = elem_ctx(v, v->ref, r, b, i), xd = elem_ctx(v, v->dut, r, b, i);
    const bfp_elem_desc *e = xr.codec;
    const unsigned sign_bit = 1u << (v->w - 1);
    int nr = 0, nd = 0, mr = code_mag(e, cr, &nr), md = code_mag(xd.codec, cd, &nd);

    /* +0 / -0: both zero magnitudes, or INT's 0 against the sign bit alone */
    if ((cr | cd) == sign_bit && (cr ^ cd) == sign_bit &&
        e->kind != BFP_GRID_EXT && xd.codec->kind != BFP_GRID_EXT)
        return BFP_CAUSE_SIGNED_ZERO;
    if (!same_ctx(&xr, &xd)) { /* the DUT's block scale, meta or flags differ */
        if (!v->x || consistent(&xd, cd))
            return fl->scale_step ? BFP_CAUSE_SCALE_STEP
                   : fl->meta_tie ? BFP_CAUSE_TIE
                                  : BFP_CAUSE_SCALE;
    } else if (xr.valid && mr >= 0 && md >= 0 && nr == nd && (mr - md == 1 || md - mr == 1)) {
        if (!v->x)
            return BFP_CAUSE_ROUNDING;
        unsigned lo, hi, lower = (unsigned)(mr < md ? mr : md);
        nearest(&xr, &lo, &hi);
        if (lo != hi && lower == lo)
            return BFP_CAUSE_TIE;
        /* the other neighbour of an input strictly between two grid values */
        unsigned tz = xr.zero_only ? 0
                                   : bfp_grid_round(xr.codec, xr.u, xr.s, BFP_ROUND_TOWARD_ZERO, 0);
        if (!xr.zero_only && lower == tz && xr.u != bfp_grid_value(xr.codec, tz) * xr.s)
            return BFP_CAUSE_ROUNDING;
    }
    if (v->w == 4 && (i ^ 1u) < n) { /* this pair exchanged (not a rounding step) */
        unsigned pr = code_at(v, v->ref, r, col ^ 1u), pd = code_at(v, v->dut, r, col ^ 1u);
        if (cd == pr && pd == cr)
            return BFP_CAUSE_NIBBLE_ORDER;
    }
    if (popcount32(cr ^ cd) == 1)
        return BFP_CAUSE_BIT_FLIP;
    return BFP_CAUSE_UNKNOWN;
}

static bfp_verify_cause scale_cause(const vstate *v, const bflags *fl, size_t r, size_t b,
                                    uint32_t sr, uint32_t sd)
{
    if (fl->nan)
        return BFP_CAUSE_NAN_BLOCK;
    if (fl->shift)
        return BFP_CAUSE_BLOCK_SHIFT;
    if (v->f->scale_bytes == 4 && sd == bswap32(sr))
        return BFP_CAUSE_BIT_ORDER;
    if (fl->scale_step)
        return BFP_CAUSE_SCALE_STEP;
    if ((sd & 0xFF) == bitrev(sr & 0xFF, 8))
        return BFP_CAUSE_BIT_ORDER;
    if (block_consistent(v, r, b))
        return BFP_CAUSE_SCALE;
    if (popcount32((sr ^ sd) & 0xFF) == 1)
        return BFP_CAUSE_BIT_FLIP;
    return BFP_CAUSE_UNKNOWN;
}

/* 1 if the two elements of a block tie for the block max (in the domain
 * where the reference picks it: |x|, NVFP4+ |x * s_enc|). */
static int bm_tie(const vstate *v, size_t r, size_t b, unsigned ia, unsigned ib)
{
    size_t n = blen(v, b);
    if (!v->x || ia >= n || ib >= n || ia == ib)
        return 0;
    const float *xb = v->x + r * v->cols + b * v->block;
    float a = xb[ia], c = xb[ib];
    if (v->f->has_tensor_scale) {
        a *= *v->ref->tensor_scale;
        c *= *v->ref->tensor_scale;
    }
    return fabsf(a) == fabsf(c);
}

/* HiF4: 1 if a differing flag was decided exactly at its threshold. */
static int hif4_flag_tie(const vstate *v, size_t r, size_t b, uint32_t wr, uint32_t wd)
{
    if (!v->x)
        return 0;
    double v16[16] = {0}, rec = hif4_rec(wr & 0xFF);
    const float *xb = v->x + r * v->cols + b * v->block;
    for (size_t i = 0; i < blen(v, b); i++)
        v16[i / 4] = fmax(v16[i / 4], fabs((double)xb[i]));
    uint32_t diff = (wr ^ wd) >> 8;
    if (!diff)
        return 0;
    for (int k = 0; k < 8; k++)
        if (((diff >> k) & 1) && fmax(v16[2 * k], v16[2 * k + 1]) * rec != 4)
            return 0;
    for (int j = 0; j < 16; j++)
        if (((diff >> (8 + j)) & 1) &&
            v16[j] * rec * (((wr >> (8 + j / 2)) & 1) ? 0.5 : 1.0) != 2)
            return 0;
    return 1;
}

static bfp_verify_cause meta_cause(const vstate *v, const bflags *fl, size_t r, size_t b,
                                   uint32_t mr, uint32_t md)
{
    const size_t g = r * v->sz.blocks_per_row + b;
    if (fl->nan)
        return BFP_CAUSE_NAN_BLOCK;
    if (fl->shift)
        return BFP_CAUSE_BLOCK_SHIFT;
    if (v->f->family == BFP_FAMILY_HIF4) {
        uint32_t wr = scale_at(v, v->ref, g), wd = scale_at(v, v->dut, g);
        uint32_t ebr = (wr >> 8) & 0xFF, ebd = (wd >> 8) & 0xFF;
        uint32_t ecr = wr >> 16, ecd = wd >> 16;
        int eb_ok = ebr == ebd || ebd == bitrev(ebr, 8);
        int ec_ok = ecr == ecd || ecd == bitrev(ecr, 16) ||
                    ecd == (((ecr & 0xFF) << 8) | (ecr >> 8)) ||
                    ecd == (bitrev(ecr & 0xFF, 8) | bitrev(ecr >> 8, 8) << 8);
        if (wd == bswap32(wr))
            return BFP_CAUSE_BIT_ORDER;
        if (fl->scale_step)
            return BFP_CAUSE_SCALE_STEP;
        if (eb_ok && ec_ok)
            return BFP_CAUSE_BIT_ORDER;
        if (hif4_flag_tie(v, r, b, wr, wd))
            return BFP_CAUSE_TIE;
        if (block_consistent(v, r, b))
            return BFP_CAUSE_SCALE;
    } else {
        unsigned mask = v->f->family == BFP_FAMILY_NVFP4_PLUS ? 0x0F : 0x1F;
        unsigned ir = mr & mask, id = md & mask;
        if (ir != id && (mr & ~mask) == (md & ~mask) && bm_tie(v, r, b, ir, id))
            return BFP_CAUSE_TIE;
        if (ir == id && v->f->family == BFP_FAMILY_MX_PP) {
            unsigned dr = mr >> 5, dd = md >> 5;
            if (dr + 1 == dd || dd + 1 == dr)
                return BFP_CAUSE_SCALE_STEP;
        }
        if (fl->scale_step)
            return BFP_CAUSE_SCALE_STEP;
        if (block_consistent(v, r, b))
            return BFP_CAUSE_SCALE;
    }
    if (popcount32(mr ^ md) == 1)
        return BFP_CAUSE_BIT_FLIP;
    return BFP_CAUSE_UNKNOWN;
}

/* ---- the comparison ------------------------------------------------------ */

static int row_padding_differs(const vstate *v, size_t r)
{
    size_t bits = v->cols * (size_t)v->w;
    if (bits % 8 == 0)
        return 0;
    size_t last = r * v->sz.code_row_bytes + v->sz.code_row_bytes - 1;
    uint8_t mask = (uint8_t)(0xFFu << (bits % 8));
    return ((v->ref->codes[last] ^ v->dut->codes[last]) & mask) != 0;
}

static void compare_block(vstate *v, size_t r, size_t b)
{
    const size_t g = r * v->sz.blocks_per_row + b;
    uint32_t sr = scale_at(v, v->ref, g), sd = scale_at(v, v->dut, g);
    uint32_t mr = meta_at(v, v->ref, g), md = meta_at(v, v->dut, g);
    int hif4 = v->f->family == BFP_FAMILY_HIF4;
    if (hif4) { /* Ea is the scale; Eb and Ec (E1_8 | E1_16 << 8) the meta */
        mr = sr >> 8;
        md = sd >> 8;
    }
    if (sr == sd && mr == md && codes_equal(v, v->ref, g, v->dut, g))
        return;
    v->rep->blocks_differ++;
    bflags fl = block_flags(v, r, b);
    if ((sr & 0xFF) != (sd & 0xFF) || (!hif4 && sr != sd)) {
        uint32_t er = hif4 ? sr & 0xFF : sr, ed = hif4 ? sd & 0xFF : sd;
        record(v, BFP_PLANE_SCALES, r, b, 0, er, ed, bfp_scale_decode(v->f->scale, er),
               bfp_scale_decode(v->f->scale, ed), scale_cause(v, &fl, r, b, sr, sd));
    }
    if (mr != md) {
        bfp_verify_cause c = meta_cause(v, &fl, r, b, mr, md);
        fl.meta_tie = c == BFP_CAUSE_TIE; /* the codes that follow it: tie too */
        record(v, BFP_PLANE_META, r, b, 0, mr, md, (double)mr, (double)md, c);
    }
    for (size_t i = 0; i < blen(v, b); i++) {
        size_t col = b * v->block + i;
        unsigned cr = code_at(v, v->ref, r, col), cd = code_at(v, v->dut, r, col);
        if (cr != cd)
            record(v, BFP_PLANE_CODES, r, b, i, cr, cd, v->yref[r * v->cols + col],
                   v->ydut[r * v->cols + col], code_cause(v, &fl, r, b, i));
    }
}

static size_t nan_blocks(const vstate *v, const float *y)
{
    size_t n = 0;
    for (size_t r = 0; r < v->rows; r++)
        for (size_t b = 0; b < v->sz.blocks_per_row; b++)
            for (size_t i = 0; i < blen(v, b); i++)
                if (isnan(y[r * v->cols + b * v->block + i])) {
                    n++;
                    break;
                }
    return n;
}

static int planes_ok(const bfp_format_info *f, const bfp_const_planes *p)
{
    return p && p->codes && p->scales && (!f->meta_bytes || p->meta) &&
           (!f->has_tensor_scale || p->tensor_scale);
}

bfp_status bfp_verify(bfp_format fmt, size_t rows, size_t cols, bfp_dtype dtype,
                      const void *input, const bfp_const_planes *ref,
                      const bfp_const_planes *dut, bfp_verify_mismatch *mismatches,
                      size_t max_mismatches, bfp_verify_report *report)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    if (!impl)
        return BFP_ERR_FORMAT;
    vstate v;
    memset(&v, 0, sizeof v);
    bfp_status st = bfp_plane_sizes_for(fmt, rows, cols, &v.sz);
    if (st != BFP_OK)
        return st;
    if (!report || !planes_ok(&impl->info, ref) || !planes_ok(&impl->info, dut) ||
        (max_mismatches && !mismatches) || (input && bfp_dtype_size(dtype) == 0))
        return BFP_ERR_ARG;
    if (rows * cols > SIZE_MAX / (3 * sizeof(float)))
        return BFP_ERR_SHAPE;
    v.impl = impl;
    v.f = &impl->info;
    v.rows = rows;
    v.cols = cols;
    v.block = (size_t)impl->info.block;
    v.w = impl->info.elem_bits;
    v.ref = ref;
    v.dut = dut;
    v.out = mismatches;
    v.cap = max_mismatches;

    const size_t n = rows * cols;
    float *x = NULL, *yref = malloc(n * sizeof *yref), *ydut = malloc(n * sizeof *ydut);
    if (input && (x = malloc(n * sizeof *x)) != NULL)
        for (size_t r = 0; r < rows; r++)
            bfp_load_row(dtype, input, cols, r, x + r * cols);
    if (!yref || !ydut || (input && !x)) {
        free(x);
        free(yref);
        free(ydut);
        return BFP_ERR_NOMEM;
    }
    st = bfp_dequantize_ref(fmt, ref, rows, cols, BFP_DTYPE_F32, yref);
    if (st == BFP_OK)
        st = bfp_dequantize_ref(fmt, dut, rows, cols, BFP_DTYPE_F32, ydut);
    if (st != BFP_OK) {
        free(x);
        free(yref);
        free(ydut);
        return st;
    }
    v.x = x;
    v.yref = yref;
    v.ydut = ydut;

    bfp_verify_report rep;
    memset(&rep, 0, sizeof rep);
    v.rep = &rep;
    rep.codes_total = n;
    rep.blocks_total = rep.scales_total = rows * v.sz.blocks_per_row;
    rep.meta_total = (impl->info.meta_bytes || impl->info.family == BFP_FAMILY_HIF4)
                         ? rep.blocks_total : 0;

    if (impl->info.has_tensor_scale) {
        float tr = *ref->tensor_scale, td = *dut->tensor_scale;
        uint32_t br = f32_bits(tr), bd = f32_bits(td);
        if (br != bd) {
            bfp_verify_cause c = bd == bswap32(br) ? BFP_CAUSE_BIT_ORDER
                                 : (br - bd == 1 || bd - br == 1) ? BFP_CAUSE_ROUNDING
                                                                  : BFP_CAUSE_SCALE;
            record(&v, BFP_PLANE_TENSOR_SCALE, 0, 0, 0, br, bd, tr, td, c);
        }
    }
    for (size_t r = 0; r < rows; r++) {
        for (size_t b = 0; b < v.sz.blocks_per_row; b++)
            compare_block(&v, r, b);
        rep.padding_rows_differ += (size_t)row_padding_differs(&v, r);
    }
    rep.identical = rep.mismatches == 0;
    rep.ref_nan_blocks = nan_blocks(&v, yref);
    rep.dut_nan_blocks = nan_blocks(&v, ydut);
    if (x) {
        rep.have_error_stats = 1;
        bfp_error_stats_f32(x, yref, n, &rep.ref_error);
        bfp_error_stats_f32(x, ydut, n, &rep.dut_error);
    }
    *report = rep;
    free(x);
    free(yref);
    free(ydut);
    return BFP_OK;
}

/* minifloat.c - element codecs (SPEC section 1) and exact grid rounding. */
#include "internal.h"

#include <math.h>

#define GRID(ELEM, NAME, XNAME) [BFP_ELEM_##ELEM] = {NAME, BFP_GRID_##ELEM},
#define EXT_GRID(ELEM, NAME, XNAME) [BFP_ELEM_##ELEM] = {XNAME, BFP_GRID_EXT(BFP_GRID_##ELEM)},
#define ELEM_IN_RANGE(ELEM, ...) \
    _Static_assert((int)BFP_ELEM_##ELEM >= 1 && (int)BFP_ELEM_##ELEM < (int)BFP_ELEM_ID_LIMIT, #ELEM);
BFP_ELEM_LIST(ELEM_IN_RANGE)

const bfp_elem_desc bfp_elem_grid[BFP_ELEM_ID_LIMIT] = {BFP_ELEM_LIST(GRID)};
const bfp_elem_desc bfp_ext_grid[BFP_ELEM_ID_LIMIT] = {BFP_ELEM_LIST(EXT_GRID)};

const bfp_elem_desc *bfp_elem_desc_for(bfp_elem_type t)
{
    if ((int)t < 1 || (int)t >= BFP_ELEM_ID_LIMIT || !bfp_elem_grid[t].name)
        return NULL;
    return &bfp_elem_grid[t];
}

double bfp_grid_value(const bfp_elem_desc *e, unsigned i)
{
    switch (e->kind) {
    case BFP_GRID_INT:
        return ldexp((double)i, -e->mbits);
    case BFP_GRID_EXT:
        return ldexp((double)((1u << e->mbits) + i), e->emax - e->mbits);
    case BFP_GRID_FLOAT:
        break;
    }
    unsigned exp = i >> e->mbits, man = i & ((1u << e->mbits) - 1);
    if (exp == 0) /* subnormal */
        return ldexp((double)man, 1 - e->bias - e->mbits);
    return ldexp((double)((1u << e->mbits) + man), (int)exp - e->bias - e->mbits);
}

unsigned bfp_grid_round(const bfp_elem_desc *e, double a, double s,
                        bfp_rounding mode, uint32_t rbits)
{
    unsigned lo = 0, hi = (unsigned)e->max_mag;
    if (!(a < bfp_grid_value(e, hi) * s))
        return hi; /* saturate */
    if (a <= bfp_grid_value(e, 0) * s)
        return 0;  /* EXT grids have no zero: clamp to the lowest value */
    /* invariant: value(lo)*s <= a < value(hi)*s */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (bfp_grid_value(e, mid) * s <= a)
            lo = mid;
        else
            hi = mid;
    }
    double vlo = bfp_grid_value(e, lo) * s, vhi = bfp_grid_value(e, hi) * s;
    if (a == vlo)
        return lo;
    switch (mode) {
    case BFP_ROUND_TOWARD_ZERO:
        return lo;
    case BFP_ROUND_STOCHASTIC:
        /* up with probability (a - vlo) / (vhi - vlo); both sides exact */
        return ldexp(a - vlo, 32) > (double)rbits * (vhi - vlo) ? hi : lo;
    case BFP_ROUND_NEAREST_AWAY:
        return 2 * a >= vlo + vhi ? hi : lo;
    default: /* nearest, ties to the even index (even mantissa / integer) */
        if (2 * a < vlo + vhi)
            return lo;
        if (2 * a > vlo + vhi)
            return hi;
        return (lo & 1) ? hi : lo;
    }
}

unsigned bfp_elem_make_code(const bfp_elem_desc *e, int negative, unsigned mag)
{
    unsigned mask = (1u << e->bits) - 1;
    if (e->kind == BFP_GRID_INT)
        return negative ? (0u - mag) & mask : mag;
    return negative ? (mag | (1u << (e->bits - 1))) : mag;
}

double bfp_elem_code_value(const bfp_elem_desc *e, unsigned code)
{
    unsigned sign_bit = 1u << (e->bits - 1);
    code &= (1u << e->bits) - 1;
    if (e->kind == BFP_GRID_INT) {
        int k = (code & sign_bit) ? (int)code - (1 << e->bits) : (int)code;
        return ldexp((double)k, -e->mbits);
    }
    unsigned mag = code & (sign_bit - 1);
    double v;
    if (mag > (unsigned)e->max_mag) /* only E4M3 and E5M2 have such codes */
        v = (e == &bfp_e5m2 && mag == 0x7C) ? INFINITY : NAN;
    else
        v = bfp_grid_value(e, mag);
    return (code & sign_bit) ? -v : v;
}

int bfp_elem_code_is_special(const bfp_elem_desc *e, unsigned code)
{
    unsigned sign_bit = 1u << (e->bits - 1);
    code &= (1u << e->bits) - 1;
    if (e->kind == BFP_GRID_INT) /* -128/64 and -8/4: OCP values outside +-max */
        return code == sign_bit;
    if (e->kind != BFP_GRID_FLOAT)
        return 0;
    return (code & (sign_bit - 1)) > (unsigned)e->max_mag;
}

int bfp_elem_has_special(const bfp_elem_desc *e)
{
    if (e->kind == BFP_GRID_INT)
        return 1;
    return e->kind == BFP_GRID_FLOAT && (unsigned)e->max_mag < (1u << (e->bits - 1)) - 1;
}

int bfp_floor_log2_f32(float a)
{
    uint32_t b;
    memcpy(&b, &a, sizeof b);
    int exp = (int)((b >> 23) & 0xFF);
    if (exp)
        return exp - 127;
    uint32_t m = b & 0x7FFFFF; /* subnormal: position of the top set bit */
    int p = -1;
    while (m) {
        m >>= 1;
        p++;
    }
    return p - 149;
}

int bfp_floor_log2(double a)
{
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    return e - 1;
}

double bfp_round_sig(double v, int sig, int min_exp)
{
    if (v == 0)
        return 0;
    int e = bfp_floor_log2(v);
    if (e < min_exp)
        e = min_exp;
    double q = ldexp(1.0, e - sig + 1);
    double n = v / q, fl = floor(n); /* exact: q is a power of two */
    double d = n - fl;
    if (d > 0.5 || (d == 0.5 && fmod(fl, 2.0) != 0))
        fl += 1;
    return fl * q;
}

/* Public single-value codecs: scale 1, RNE, saturating. */
double bfp_elem_decode(bfp_elem_type t, unsigned code)
{
    const bfp_elem_desc *e = bfp_elem_desc_for(t);
    return e ? bfp_elem_code_value(e, code) : NAN;
}

unsigned bfp_elem_encode(bfp_elem_type t, double v)
{
    const bfp_elem_desc *e = bfp_elem_desc_for(t);
    if (!e)
        return 0;
    int neg = signbit(v) != 0;
    if (isnan(v)) {
        if (e == &bfp_e4m3)
            return 0x7F | (neg ? 0x80u : 0);
        if (e == &bfp_e5m2)
            return 0x7F | (neg ? 0x80u : 0);
        return bfp_elem_make_code(e, neg, (unsigned)e->max_mag);
    }
    double a = fabs(v);
    unsigned mag = isinf(v) ? (unsigned)e->max_mag
                            : bfp_grid_round(e, a, 1.0, BFP_ROUND_NEAREST_EVEN, 0);
    return bfp_elem_make_code(e, neg, mag);
}

double bfp_scale_decode(bfp_scale_type t, unsigned code)
{
    code &= 0xFF;
    switch (t) {
    case BFP_SCALE_E8M0:
        return code == 0xFF ? NAN : ldexp(1.0, (int)code - 127);
    case BFP_SCALE_UE4M3: /* sign bit must be 0; 0x7F is NaN */
        return (code & 0x80) || code == 0x7F ? NAN : bfp_grid_value(&bfp_e4m3, code);
    case BFP_SCALE_HIF4:
        return code == 0xFF ? NAN
                            : ldexp(1.0 + (code & 3) / 4.0, (int)(code >> 2) - 48);
    }
    return NAN;
}

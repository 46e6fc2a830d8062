/* kern_scalar.h - scalar pieces every kernel set shares: bit casts, the
 * per-block scale arithmetic and exact element encoders in float32.
 *
 * Why float32 is exact here (the reference decides in float64):
 * - MX: x / 2^shared_exp is a power-of-two scaling, exact unless the result
 *   drops below 2^-126, and such an element rounds to 0 on every grid (the
 *   smallest half-step is E5M2's 2^-17). Rounding y to a FLOAT grid is then
 *   rne(y * 2^(mbits - e)) with e = max(floor(log2 y), emin), again exact.
 * - NVFP4: the midpoints times s_block have at most 7 significant bits.
 * - HiF4: |x| * REC is not exact in float32; its rounding error comes from
 *   an FMA, which decides the ties (the generic path uses float64). */
#ifndef BFP_CPU_KERN_SCALAR_H
#define BFP_CPU_KERN_SCALAR_H

#include "cpu_internal.h"

#include <string.h>

static inline uint32_t ks_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float ks_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline int ks_clz32(uint32_t v) /* v != 0 */
{
#if defined(__GNUC__)
    return __builtin_clz(v);
#else
    int n = 0;
    while (!(v & 0x80000000u)) {
        v <<= 1;
        n++;
    }
    return n;
#endif
}

static inline int ks_ctz32(uint32_t v) /* v != 0 */
{
#if defined(__GNUC__)
    return __builtin_ctz(v);
#else
    int n = 0;
    while (!(v & 1u)) {
        v >>= 1;
        n++;
    }
    return n;
#endif
}

/* floor(log2 a) from the bits of a finite float a > 0 (subnormals too). */
static inline int ks_flog2(uint32_t b)
{
    int e = (int)(b >> 23);
    return e ? e - 127 : (31 - ks_clz32(b)) - 149;
}

/* 2^k as a float for k in [-149, 127]. */
static inline float ks_pow2(int k)
{
    return k >= -126 ? ks_float((uint32_t)(k + 127) << 23) : ks_float(1u << (k + 149));
}

/* Round 0 <= v < 2^22 to the nearest integer, ties to even. */
static inline int ks_rne(float v)
{
    float t = v + 0x1p23f; /* the add rounds at the units place */
    return (int)(t - 0x1p23f);
}

/* MX FLOOR shared exponent of a finite block from its max |x| bits. */
static inline int ks_mx_shared_exp(uint32_t amax_bits, int emax)
{
    if (amax_bits == 0)
        return -127;
    int se = ks_flog2(amax_bits) - emax;
    return se < -127 ? -127 : se > 127 ? 127 : se;
}

/* Biased float32 exponent of 2^emin of a FLOAT element grid. */
static inline int ks_eminb(const bfp_elem_desc *e)
{
    return 128 - e->bias;
}

/* Magnitude index of y >= 0 on a FLOAT or INT grid, RNE, saturating; y is
 * exact and below 2^(emax+1) (true for every MX element). */
static inline unsigned ks_enc_mag(const bfp_elem_desc *e, float y)
{
    int q;
    if (e->kind == BFP_GRID_INT) {
        q = ks_rne(y * (float)(1 << e->mbits));
    } else {
        int eminb = ks_eminb(e), ee = (int)(ks_bits(y) >> 23);
        ee = ee > eminb ? ee : eminb;
        q = ((ee - eminb) << e->mbits) +
            ks_rne(y * ks_float((uint32_t)(254 + e->mbits - ee) << 23));
    }
    return q > e->max_mag ? (unsigned)e->max_mag : (unsigned)q;
}

/* Full code from sign and magnitude (INT: two's complement, no -0). */
static inline unsigned ks_make_code(const bfp_elem_desc *e, uint32_t sign, unsigned mag)
{
    if (e->kind == BFP_GRID_INT)
        return sign ? (0u - mag) & ((1u << e->bits) - 1) : mag;
    return mag | (sign ? 1u << (e->bits - 1) : 0u);
}

/* MX+ block max on its EXT grid: y = |BM| / 2^shared_exp in [2^emax, 2^(emax+1)). */
static inline unsigned ks_enc_ext(const bfp_elem_desc *e, float y)
{
    int q = ks_rne(y * ks_pow2(e->mbits - e->emax)) - (1 << e->mbits);
    return q > e->max_mag ? (unsigned)e->max_mag : q < 0 ? 0u : (unsigned)q;
}

/* MX++: the exponent of the non-max elements from their max (bits). */
static inline int ks_mxpp_nbm_exp(uint32_t max2_bits, int se, int emax)
{
    if (max2_bits == 0)
        return se;
    int ev = ks_flog2(max2_bits) - emax + 1;
    return ev < se - 7 ? se - 7 : ev > se ? se : ev;
}

/* ---- element types as compile-time constants --------------------------------- */

/* The fields of a bfp_elem_desc that kernels need, passed by value so that
 * an inlined kernel body is specialized for one element type. */
typedef struct {
    int kind, bits, mbits, bias, emax, max_mag;
} ks_elem;

/* the grids of format_defs.h */
#define KS_E2M1 ((ks_elem){BFP_GRID_E2M1})
#define KS_E2M3 ((ks_elem){BFP_GRID_E2M3})
#define KS_E3M2 ((ks_elem){BFP_GRID_E3M2})
#define KS_E4M3 ((ks_elem){BFP_GRID_E4M3})
#define KS_E5M2 ((ks_elem){BFP_GRID_E5M2})
#define KS_INT8 ((ks_elem){BFP_GRID_INT8})
#define KS_INT4 ((ks_elem){BFP_GRID_INT4})

enum { KS_ID_E2M1, KS_ID_E2M3, KS_ID_E3M2, KS_ID_E4M3, KS_ID_E5M2, KS_ID_INT8, KS_ID_INT4,
       KS_ID_NONE };

/* the constant of each id */
static const ks_elem ks_elem_of_id[KS_ID_NONE] = {KS_E2M1, KS_E2M3, KS_E3M2, KS_E4M3,
                                                  KS_E5M2, KS_INT8, KS_INT4};

static inline int ks_elem_is(const bfp_elem_desc *e, ks_elem k)
{
    return e && (int)e->kind == k.kind && e->bits == k.bits && e->mbits == k.mbits &&
           e->bias == k.bias && e->emax == k.emax && e->max_mag == k.max_mag;
}

/* Which constant an element descriptor is (KS_ID_NONE: none; the kernels
 * then leave the format to others). For MX+ the block-max codec must be
 * the matching EXT grid as well. */
static inline int ks_elem_id(const bfp_format_impl *impl)
{
    for (int id = 0; id < KS_ID_NONE; id++) {
        ks_elem k = ks_elem_of_id[id];
        if (!ks_elem_is(impl->elem, k))
            continue;
        const bfp_elem_desc *x = impl->bm_elem;
        if (x && !(x->kind == BFP_GRID_EXT && x->bits == k.bits && x->mbits == k.bits - 1 &&
                   x->emax == k.emax && x->max_mag == (1 << (k.bits - 1)) - 1))
            return KS_ID_NONE;
        return id;
    }
    return KS_ID_NONE;
}

/* ---- NVFP4 ---------------------------------------------------------------- */

/* E4M3 code of a >= 0 (finite float): RNE, saturating at 448 (0x7E). */
static inline unsigned ks_e4m3_code(float a)
{
    if (!(a < 448.0f))
        return 0x7E;
    int ee = (int)(ks_bits(a) >> 23);
    ee = ee > 121 ? ee : 121; /* emin = -6 */
    unsigned c = (unsigned)(((ee - 121) << 3) +
                            ks_rne(a * ks_float((uint32_t)(257 - ee) << 23)));
    return c > 0x7E ? 0x7E : c;
}

/* Value of a UE4M3 code 0..0x7E. */
static inline float ks_e4m3_value(unsigned c)
{
    unsigned e = c >> 3, m = c & 7;
    return e ? ks_float((e + 120) << 23 | m << 20) : (float)m * 0x1p-9f;
}

/* Block scale code of a finite NVFP4 block: E4M3(fp32(tmax / 6)). */
static inline unsigned ks_nvfp4_scale_code(float tmax)
{
    return ks_e4m3_code(tmax / 6.0f);
}

/* E2M1 midpoints (times s_block they are the decision points); odd k: a tie
 * rounds up (to the even index k+1), even k: down. */
static const float ks_e2m1_mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
/* NVFP4+ block max: 4 * (1 + i/8) * s_block, midpoints 4.25 + j/2. */
static const float ks_ext4_mid[7] = {4.25f, 4.75f, 5.25f, 5.75f, 6.25f, 6.75f, 7.25f};

/* Index on a 7-midpoint grid, ties to the even index; thr[k] = mid[k] * sb. */
static inline unsigned ks_mid_index(float a, const float *thr)
{
    return (unsigned)((a > thr[0]) + (a >= thr[1]) + (a > thr[2]) + (a >= thr[3]) +
                      (a > thr[4]) + (a >= thr[5]) + (a > thr[6]));
}

/* NVFP4+: codes at or below this scale code stay plain NVFP4. */
#define KS_NV_PLAIN_MAX 0x02u

/* ---- HiF4 ----------------------------------------------------------------- */

/* UE6M2 code from the block's max |x| (SPEC 4 step 2, in float64: exact). */
static inline unsigned ks_hif4_code(float vmax)
{
    double v = (double)vmax * 0.142578125; /* BF16_RNE(1/7), product exact */
    if (!(v >= 0x1p-48))
        return 0; /* SF clamps to 2^-48 */
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    b += ((uint64_t)1 << 44) - 1 + ((b >> 45) & 1); /* RNE to 8 bits (BF16) */
    b &= ~(((uint64_t)1 << 45) - 1);
    memcpy(&v, &b, sizeof v);
    if (v > 49152.0) {
        v = 49152.0;
        memcpy(&b, &v, sizeof b);
    }
    b += ((uint64_t)1 << 49) - 1 + ((b >> 50) & 1); /* RNE to 3 bits (E6M2) */
    int ex = (int)(b >> 52) - 1023;
    return (unsigned)(ex + 48) << 2 | (unsigned)(b >> 50 & 3);
}

/* REC = BF16_RNE(1 / E6M2) of a UE6M2 code 0..0xFE. */
static inline float ks_hif4_rec(unsigned code)
{
    static const float rec_m[4] = {1.0f, 0.80078125f, 0.66796875f, 0.5703125f};
    return rec_m[code & 3] * ks_pow2(48 - (int)(code >> 2));
}

/* Value of a UE6M2 code 0..0xFE. */
static inline float ks_hif4_scale(unsigned code)
{
    return (1.0f + (float)(code & 3) * 0.25f) * ks_pow2((int)(code >> 2) - 48);
}

static inline void ks_store_le32(uint8_t *p, uint32_t w)
{
    p[0] = (uint8_t)w;
    p[1] = (uint8_t)(w >> 8);
    p[2] = (uint8_t)(w >> 16);
    p[3] = (uint8_t)(w >> 24);
}

static inline uint32_t ks_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Code i of a block's LSB-first code stream of w-bit codes (w = 4, 6, 8),
 * reading only the block's bytes. */
static inline unsigned ks_get_code(const uint8_t *blk, unsigned i, int w)
{
    if (w == 8)
        return blk[i];
    if (w == 4)
        return (unsigned)(blk[i >> 1] >> ((i & 1) * 4)) & 0x0Fu;
    unsigned bit = 6 * i, v = blk[bit >> 3];
    if ((bit & 7) > 2) /* the code crosses into the next byte */
        v |= (unsigned)blk[(bit >> 3) + 1] << 8;
    return (v >> (bit & 7)) & 0x3Fu;
}

/* ---- conversions ---------------------------------------------------------- */

/* float16 bits to float32, exact (as bfp_f16_to_f32). */
static inline float ks_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7FFFu;
    if (em >= 0x7C00u)
        return ks_float(sign | 0x7F800000u | (em & 0x3FFu) << 13);
    return ks_float(sign | ks_bits(ks_float(em << 13) * 0x1p112f));
}

/* The amax of the finite magnitude bits of elements [i, n) of s (dtype dt)
 * and m: the scalar tail of the SIMD amax passes. */
static inline uint32_t ks_amax_tail(bfp_dtype dt, const unsigned char *s, size_t i, size_t n,
                                    uint32_t m)
{
    for (; i < n; i++) {
        uint32_t a;
        if (dt == BFP_DTYPE_F32) {
            memcpy(&a, s + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            a = dt == BFP_DTYPE_BF16 ? (uint32_t)h << 16 : ks_bits(ks_f16_to_f32(h));
        }
        a &= 0x7FFFFFFFu;
        if (a < 0x7F800000u && a > m)
            m = a;
    }
    return m;
}

/* float32 bits to bfloat16, RNE, NaN kept quiet (as bfp_f32_to_bf16). */
static inline uint16_t ks_bf16(uint32_t b)
{
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* Float32 value v in a decoder's output form: its bits, or its bfloat16 bits. */
static inline uint32_t ks_out_bits(bfp_dtype dt, float v)
{
    return dt == BFP_DTYPE_F32 ? ks_bits(v) : ks_bf16(ks_bits(v));
}

/* Result of decoding a code whose float value is v at a NaN scale: the
 * reference multiplies value * NaN, which keeps v when v is itself NaN. */
static inline float ks_nan_scaled(float v)
{
    return v != v ? v : ks_float(0x7FC00000u);
}

#endif /* BFP_CPU_KERN_SCALAR_H */

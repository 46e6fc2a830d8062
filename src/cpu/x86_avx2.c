/* x86_avx2.c - AVX2 + FMA + F16C kernels for every format (quantize from
 * f32/bf16/f16, dequantize to f32/bf16). Built with -mavx2 -mfma -mf16c
 * (tests/CMakeLists.txt sets the per-file flags); without them this file
 * provides nothing and the generic kernels stay. Decisions follow
 * kern_scalar.h exactly, eight lanes at a time; the per-block scale
 * arithmetic stays scalar. */
#include "kern_scalar.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define A2 static inline __attribute__((always_inline))

/* ---- loads, stores, reductions --------------------------------------------- */

/* 8 values of dtype as float32 bits. */
A2 __m256i ld8(bfp_dtype dt, const unsigned char *p)
{
    if (dt == BFP_DTYPE_F32)
        return _mm256_loadu_si256((const __m256i *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dt == BFP_DTYPE_BF16)
        return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    return _mm256_castps_si256(_mm256_cvtph_ps(h));
}

A2 size_t esz(bfp_dtype dt)
{
    return dt == BFP_DTYPE_F32 ? 4 : 2;
}

/* Max of the 8 lanes (signed compare; callers pass non-negative values). */
A2 uint32_t hmax(__m256i m)
{
    m = _mm256_max_epi32(m, _mm256_permute2x128_si256(m, m, 1));
    m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, 0x4E));
    m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, 0xB1));
    return (uint32_t)_mm256_cvtsi256_si32(m);
}

/* float32 to bfloat16 as bfp_f32_to_bf16 (RNE, NaN kept quiet), 8 lanes
 * to the low 16 bits of each lane. */
A2 __m256i bf16_lanes(__m256 v)
{
    __m256i b = _mm256_castps_si256(v);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)),
                                     _mm256_set1_epi32(0x7F800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, q, nan);
}

/* Store 16 float32 values (two vectors) as dtype at p; stream: p is
 * 32-byte aligned and the caller wants non-temporal stores. */
A2 void st16(bfp_dtype dt, unsigned char *p, __m256 a, __m256 b, int stream)
{
    if (dt == BFP_DTYPE_F32) {
        if (stream) {
            _mm256_stream_ps((float *)p, a);
            _mm256_stream_ps((float *)(p + 32), b);
        } else {
            _mm256_storeu_ps((float *)p, a);
            _mm256_storeu_ps((float *)(p + 32), b);
        }
        return;
    }
    __m256i h = _mm256_packus_epi32(bf16_lanes(a), bf16_lanes(b));
    h = _mm256_permute4x64_epi64(h, 0xD8);
    if (stream)
        _mm256_stream_si256((__m256i *)p, h);
    else
        _mm256_storeu_si256((__m256i *)p, h);
}

/* ---- code streams ------------------------------------------------------------ */

/* 32 codes (four vectors of dword codes 0..255) as 32 bytes in order. */
A2 __m256i codes_to_bytes(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32 code bytes packed at width w (4, 6 or 8) into out (16, 24, 32 bytes). */
A2 void store_codes(int w, __m256i b, uint8_t *out)
{
    if (w == 8) {
        _mm256_storeu_si256((__m256i *)out, b);
    } else if (w == 4) {
        __m256i p = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001)); /* c0 + 16 c1 */
        __m128i r = _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
        _mm_storeu_si128((__m128i *)out, r);
    } else {
        __m256i p = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x4001)); /* c0 + 64 c1 */
        p = _mm256_madd_epi16(p, _mm256_set1_epi32(0x10000001));        /* + 4096 (c2 + 64 c3) */
        p = _mm256_shuffle_epi8(p, _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1,
                                                    -1, -1, -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12,
                                                    13, 14, -1, -1, -1, -1));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
        _mm_storeu_si128((__m128i *)out, _mm256_castsi256_si128(p));
        _mm_storel_epi64((__m128i *)(out + 16), _mm256_extracti128_si256(p, 1));
    }
}

/* 8 4-bit codes starting at byte p (4 bytes) as dwords. */
A2 __m256i nib8(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    __m256i x = _mm256_set1_epi32((int)v);
    x = _mm256_srlv_epi32(x, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_and_si256(x, _mm256_set1_epi32(0x0F));
}

/* 8 6-bit codes from 16 loaded bytes q, starting at byte `at` (0..10). */
A2 __m256i six8(__m128i q, int at)
{
    __m256i x = _mm256_broadcastsi128_si256(q);
    const char a = (char)at;
    __m256i ctl = _mm256_setr_epi8(a, a + 1, -1, -1, a, a + 1, -1, -1, a + 1, a + 2, -1, -1,
                                   a + 2, a + 3, -1, -1, a + 3, a + 4, -1, -1, a + 3, a + 4, -1,
                                   -1, a + 4, a + 5, -1, -1, a + 5, a + 6, -1, -1);
    x = _mm256_shuffle_epi8(x, ctl);
    x = _mm256_srlv_epi32(x, _mm256_setr_epi32(0, 6, 4, 2, 0, 6, 4, 2));
    return _mm256_and_si256(x, _mm256_set1_epi32(0x3F));
}

/* Codes k*8 .. k*8+7 of a 32-code block at width w, as dwords. */
A2 __m256i codes8(int w, const uint8_t *blk, int k)
{
    if (w == 4)
        return nib8(blk + 4 * k);
    if (w == 8)
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 8 * k)));
    /* 6 bits: bytes 6k .. 6k+5; load 16 bytes that stay inside the block */
    if (k < 2)
        return six8(_mm_loadu_si128((const __m128i *)blk), 6 * k);
    return six8(_mm_loadu_si128((const __m128i *)(blk + 8)), 6 * k - 8);
}

/* ---- element encoders (kern_scalar.h's ks_enc_mag, eight lanes) -------------- */

/* Codes of 8 values: a = |x| bits, x for the sign, f = 2^-shared_exp. */
A2 __m256i enc8(const bfp_elem_desc *e, __m256i x, __m256i a, __m256 f)
{
    __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(a), f);
    __m256i q;
    if (e->kind == BFP_GRID_INT) {
        q = _mm256_cvtps_epi32(_mm256_mul_ps(y, _mm256_set1_ps((float)(1 << e->mbits))));
        q = _mm256_min_epi32(q, _mm256_set1_epi32(e->max_mag));
        __m256i neg = _mm256_srai_epi32(x, 31);
        q = _mm256_sub_epi32(_mm256_xor_si256(q, neg), neg);
        return _mm256_and_si256(q, _mm256_set1_epi32((1 << e->bits) - 1));
    }
    const __m128i m = _mm_cvtsi32_si128(e->mbits);
    const __m256i eminb = _mm256_set1_epi32(ks_eminb(e));
    __m256i ee = _mm256_max_epi32(_mm256_srli_epi32(_mm256_castps_si256(y), 23), eminb);
    __m256i mult = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254 + e->mbits), ee), 23);
    q = _mm256_cvtps_epi32(_mm256_mul_ps(y, _mm256_castsi256_ps(mult)));
    q = _mm256_add_epi32(q, _mm256_sll_epi32(_mm256_sub_epi32(ee, eminb), m));
    q = _mm256_min_epi32(q, _mm256_set1_epi32(e->max_mag));
    __m256i sign = _mm256_srli_epi32(x, 31);
    return _mm256_or_si256(q, _mm256_sll_epi32(sign, _mm_cvtsi32_si128(e->bits - 1)));
}

/* ---- MX ------------------------------------------------------------------------ */

A2 void q_mx(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
             uint8_t *scales, bfp_stats *st)
{
    const bfp_elem_desc *e = p->impl->elem;
    const int w = e->bits;
    const size_t cb = (size_t)(4 * w);
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
    const unsigned char *s = (const unsigned char *)src;
    for (size_t b = 0; b < nb; b++, codes += cb, s += 32 * esz(dt)) {
        __m256i x[4], a[4];
        for (int k = 0; k < 4; k++) {
            x[k] = ld8(dt, s + (size_t)k * 8 * esz(dt));
            a[k] = _mm256_and_si256(x[k], absm);
        }
        uint32_t amax = hmax(_mm256_max_epi32(_mm256_max_epi32(a[0], a[1]),
                                              _mm256_max_epi32(a[2], a[3])));
        if (amax >= 0x7F800000u) {
            scales[b] = 0xFF;
            memset(codes, 0, cb);
            st->nonfinite_blocks++;
            continue;
        }
        int se = ks_mx_shared_exp(amax, e->emax);
        scales[b] = (uint8_t)(se + 127);
        __m256 f = _mm256_set1_ps(ks_pow2(-se));
        __m256i c[4];
        for (int k = 0; k < 4; k++)
            c[k] = enc8(e, x[k], a[k], f);
        store_codes(w, codes_to_bytes(c[0], c[1], c[2], c[3]), codes);
    }
}

/* Signed element values of 8 codes at scale 1 (NaN codes: quiet NaN with
 * the code's sign; E5M2 0x7C: Inf). */
A2 __m256 val8(const bfp_elem_desc *e, __m256i c)
{
    if (e->kind == BFP_GRID_INT) {
        int sh = 32 - e->bits; /* sign-extend the code */
        __m256i k = _mm256_srai_epi32(_mm256_slli_epi32(c, sh), sh);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(k), _mm256_set1_ps(1.0f / (float)(1 << e->mbits)));
    }
    const int sbit = 1 << (e->bits - 1);
    __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(sbit - 1));
    /* the fields in float32 position, then 2^(127 - bias): exact, subnormals too */
    __m256 v = _mm256_castsi256_ps(_mm256_sll_epi32(mag, _mm_cvtsi32_si128(23 - e->mbits)));
    v = _mm256_mul_ps(v, _mm256_set1_ps(ks_pow2(127 - e->bias)));
    if (e->max_mag < sbit - 1) { /* E4M3, E5M2: NaN (and Inf) codes */
        __m256i special = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(e->max_mag));
        __m256i sv = _mm256_set1_epi32(0x7FC00000);
        if (e->emax == 15) /* E5M2: 0x7C is Inf */
            sv = _mm256_sub_epi32(sv, _mm256_and_si256(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7C)),
                                                       _mm256_set1_epi32(0x00400000)));
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(sv), _mm256_castsi256_ps(special));
    }
    __m256i sign = _mm256_sll_epi32(_mm256_and_si256(c, _mm256_set1_epi32(sbit)),
                                    _mm_cvtsi32_si128(32 - e->bits));
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

/* v * scale where the scale is NaN: a NaN value stays, anything else is +NaN. */
A2 __m256 nan_scaled(__m256 v)
{
    __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    return _mm256_blendv_ps(nan, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

A2 void d_mx(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes, const uint8_t *scales,
             size_t nb, void *dst)
{
    const bfp_elem_desc *e = p->impl->elem;
    const int w = e->bits;
    const size_t cb = (size_t)(4 * w), ob = 32 * esz(dt);
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    for (size_t b = 0; b < nb; b++, codes += cb, d += ob) {
        __m256 v[4];
        for (int k = 0; k < 4; k++)
            v[k] = val8(e, codes8(w, codes, k));
        if (scales[b] == 0xFF) {
            for (int k = 0; k < 4; k++)
                v[k] = nan_scaled(v[k]);
        } else {
            __m256 s = _mm256_set1_ps(ks_pow2((int)scales[b] - 127));
            for (int k = 0; k < 4; k++)
                v[k] = _mm256_mul_ps(v[k], s); /* rounds once, as the reference */
        }
        st16(dt, d, v[0], v[1], stream);
        st16(dt, d + ob / 2, v[2], v[3], stream);
    }
    if (stream)
        _mm_sfence();
}

/* ---- MX+ and MX++ --------------------------------------------------------------- */

A2 void q_mxplus(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb,
                 uint8_t *codes, uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const bfp_elem_desc *e = p->impl->elem, *ext = p->impl->bm_elem;
    const int w = e->bits, pp = p->impl->info.family == BFP_FAMILY_MX_PP;
    const size_t cb = (size_t)(4 * w);
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const unsigned char *s = (const unsigned char *)src;
    for (size_t b = 0; b < nb; b++, codes += cb, s += 32 * esz(dt)) {
        __m256i x[4], a[4];
        for (int k = 0; k < 4; k++) {
            x[k] = ld8(dt, s + (size_t)k * 8 * esz(dt));
            a[k] = _mm256_and_si256(x[k], absm);
        }
        uint32_t amax = hmax(_mm256_max_epi32(_mm256_max_epi32(a[0], a[1]),
                                              _mm256_max_epi32(a[2], a[3])));
        if (amax >= 0x7F800000u || amax == 0 || ks_flog2(amax) - e->emax <= -127) {
            int nonfinite = amax >= 0x7F800000u;
            scales[b] = nonfinite ? 0xFF : 0x00;
            meta[b] = 0;
            memset(codes, 0, cb);
            if (nonfinite)
                st->nonfinite_blocks++;
            else
                st->flushed_blocks++;
            continue;
        }
        __m256i am = _mm256_set1_epi32((int)amax);
        uint32_t eq = 0;
        for (int k = 0; k < 4; k++)
            eq |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a[k], am)))
                  << (8 * k);
        int bm = ks_ctz32(eq); /* ties go to the lowest index */
        int se = ks_flog2(amax) - e->emax, nbm = se;
        if (pp) {
            __m256i m2 = _mm256_setzero_si256(), bmv = _mm256_set1_epi32(bm);
            for (int k = 0; k < 4; k++) {
                __m256i is_bm = _mm256_cmpeq_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)), bmv);
                m2 = _mm256_max_epi32(m2, _mm256_andnot_si256(is_bm, a[k]));
            }
            nbm = ks_mxpp_nbm_exp(hmax(m2), se, e->emax);
        }
        scales[b] = (uint8_t)(se + 127);
        meta[b] = (uint8_t)(bm | (se - nbm) << 5);
        __m256i c[4];
        if (-nbm <= 127) {
            __m256 f = _mm256_set1_ps(ks_pow2(-nbm));
            for (int k = 0; k < 4; k++)
                c[k] = enc8(e, x[k], a[k], f);
        } else { /* MX++ of a tiny block: 2^-nbm needs two exact steps */
            __m256 f = _mm256_set1_ps(ks_pow2(-nbm - 64));
            for (int k = 0; k < 4; k++) {
                __m256i a64 = _mm256_castps_si256(
                    _mm256_mul_ps(_mm256_castsi256_ps(a[k]), _mm256_set1_ps(0x1p64f)));
                c[k] = enc8(e, x[k], a64, f);
            }
        }
        store_codes(w, codes_to_bytes(c[0], c[1], c[2], c[3]), codes);
        unsigned bmc = ks_enc_ext(ext, ks_float(amax) * ks_pow2(-se));
        uint32_t xbm = (uint32_t)_mm256_cvtsi256_si32(
            _mm256_permutevar8x32_epi32(x[bm >> 3], _mm256_set1_epi32(bm & 7)));
        bfp_put_code(codes, (size_t)bm, w, ks_make_code(ext, xbm >> 31, bmc));
    }
}

/* The codes an MX+ decoder rejects (bfp_elem_code_is_special), as a rule
 * the kernel can test eight lanes at a time; init checks it code by code. */
enum { SPECIAL_NONE, SPECIAL_INT_MIN, SPECIAL_ABOVE_MAX };

static int special_rule(const bfp_elem_desc *e)
{
    if (e->kind == BFP_GRID_INT)
        return SPECIAL_INT_MIN;
    return e->max_mag < (1 << (e->bits - 1)) - 1 ? SPECIAL_ABOVE_MAX : SPECIAL_NONE;
}

static int special_rule_holds(const bfp_elem_desc *e)
{
    const uint8_t *sp = bfp_cpu_elem_special(e);
    unsigned sbit = 1u << (e->bits - 1);
    for (unsigned c = 0; c < 2 * sbit; c++) {
        int rule = special_rule(e);
        int want = rule == SPECIAL_INT_MIN     ? c == sbit
                   : rule == SPECIAL_ABOVE_MAX ? (c & (sbit - 1)) > (unsigned)e->max_mag
                                               : 0;
        if (!sp || sp[c] != want)
            return 0;
    }
    return 1;
}

A2 void d_mxplus(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes,
                 const uint8_t *scales, const uint8_t *meta, size_t nb, size_t last_len,
                 void *dst)
{
    const bfp_elem_desc *e = p->impl->elem, *ext = p->impl->bm_elem;
    const int w = e->bits, plus_only = p->impl->info.family == BFP_FAMILY_MX_PLUS;
    const int sbit = 1 << (w - 1), special = special_rule(e);
    const float *xlut = bfp_cpu_elem_lut(ext);
    const size_t cb = (size_t)(4 * w), ob = 32 * esz(dt);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    for (size_t b = 0; b < nb; b++, codes += cb, d += ob) {
        size_t n = b + 1 == nb ? last_len : 32;
        unsigned sc = scales[b], m = meta[b], idx = m & 0x1F, delta = m >> 5;
        int empty = sc == 0x00 || sc == 0xFF;
        int bad = (empty && m != 0) || idx >= n || (plus_only && delta != 0);
        __m256i c[4], any = _mm256_setzero_si256(), spec = _mm256_setzero_si256();
        __m256i bmv = _mm256_set1_epi32((int)idx);
        for (int k = 0; k < 4; k++) {
            c[k] = codes8(w, codes, k);
            any = _mm256_or_si256(any, c[k]);
            if (special != SPECIAL_NONE) {
                __m256i is_bm = _mm256_cmpeq_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)), bmv);
                __m256i sp = special == SPECIAL_INT_MIN
                                 ? _mm256_cmpeq_epi32(c[k], _mm256_set1_epi32(sbit))
                                 : _mm256_cmpgt_epi32(_mm256_and_si256(c[k], _mm256_set1_epi32(sbit - 1)),
                                                      _mm256_set1_epi32(e->max_mag));
                spec = _mm256_or_si256(spec, _mm256_andnot_si256(is_bm, sp));
            }
        }
        bad |= (empty && !_mm256_testz_si256(any, any)) || !_mm256_testz_si256(spec, spec);
        __m256 v[4];
        if (sc == 0xFF || bad || sc == 0) {
            __m256 fill = _mm256_castsi256_ps(_mm256_set1_epi32(sc == 0 && !bad ? 0 : 0x7FC00000));
            v[0] = v[1] = v[2] = v[3] = fill;
        } else {
            int se = (int)sc - 127;
            __m256 s = _mm256_set1_ps(ks_pow2(se - (int)delta));
            __m256 vbm = _mm256_set1_ps(xlut[bfp_get_code(codes, idx, w)] * ks_pow2(se));
            for (int k = 0; k < 4; k++) {
                v[k] = _mm256_mul_ps(val8(e, c[k]), s);
                __m256i is_bm = _mm256_cmpeq_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)), bmv);
                v[k] = _mm256_blendv_ps(v[k], vbm, _mm256_castsi256_ps(is_bm));
            }
        }
        st16(dt, d, v[0], v[1], stream);
        st16(dt, d + ob / 2, v[2], v[3], stream);
    }
    if (stream)
        _mm_sfence();
}

/* ---- NVFP4 and NVFP4+ -------------------------------------------------------------- */

/* Magnitude index on a 7-midpoint grid (ties to even), as dwords. */
A2 __m256i mid_index8(__m256 a, const __m256 *thr)
{
    __m256i q = _mm256_setzero_si256();
    for (int k = 0; k < 7; k += 2)
        q = _mm256_sub_epi32(q, _mm256_castps_si256(_mm256_cmp_ps(a, thr[k], _CMP_GT_OQ)));
    for (int k = 1; k < 7; k += 2)
        q = _mm256_sub_epi32(q, _mm256_castps_si256(_mm256_cmp_ps(a, thr[k], _CMP_GE_OQ)));
    return q;
}

/* One NVFP4(+) block from 16 values (two vectors); its codes as dwords. */
A2 void q_nv_block(const bfp_qparams *p, __m256i x0, __m256i x1, uint8_t *scale, uint8_t *meta,
                   bfp_stats *st, __m256i *c0, __m256i *c1, int *bm_out, unsigned *bm_code)
{
    const __m256 senc = _mm256_set1_ps(p->s_enc);
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i t0 = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(x0), senc));
    __m256i t1 = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(x1), senc));
    __m256i a0 = _mm256_and_si256(t0, absm), a1 = _mm256_and_si256(t1, absm);
    uint32_t tmax = hmax(_mm256_max_epi32(a0, a1));
    *bm_out = -1;
    if (meta)
        *meta = 0;
    if (tmax >= 0x7F800000u) {
        *scale = 0x7F;
        *c0 = *c1 = _mm256_setzero_si256();
        st->nonfinite_blocks++;
        return;
    }
    unsigned sc = ks_nvfp4_scale_code(ks_float(tmax));
    *scale = (uint8_t)sc;
    __m256i s0 = _mm256_slli_epi32(_mm256_srli_epi32(t0, 31), 3);
    __m256i s1 = _mm256_slli_epi32(_mm256_srli_epi32(t1, 31), 3);
    if (sc == 0) { /* zero block scale: signed zeros */
        *c0 = s0;
        *c1 = s1;
        return;
    }
    float sb = ks_e4m3_value(sc);
    __m256 thr[7];
    for (int k = 0; k < 7; k++)
        thr[k] = _mm256_set1_ps(ks_e2m1_mid[k] * sb);
    *c0 = _mm256_or_si256(mid_index8(_mm256_castsi256_ps(a0), thr), s0);
    *c1 = _mm256_or_si256(mid_index8(_mm256_castsi256_ps(a1), thr), s1);
    if (meta && sc > KS_NV_PLAIN_MAX) {
        __m256i tm = _mm256_set1_epi32((int)tmax);
        uint32_t eq = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a0, tm))) |
                      (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a1, tm))) << 8;
        int bm = ks_ctz32(eq);
        float t[7];
        for (int k = 0; k < 7; k++)
            t[k] = ks_ext4_mid[k] * sb;
        uint32_t xb = (uint32_t)_mm256_cvtsi256_si32(
            _mm256_permutevar8x32_epi32(bm < 8 ? t0 : t1, _mm256_set1_epi32(bm & 7)));
        *bm_out = bm;
        *bm_code = ks_mid_index(ks_float(tmax), t) | (xb >> 31) << 3;
        *meta = (uint8_t)bm;
    }
}

A2 void q_nvfp4(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
                uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const int plus = p->impl->bm_elem != NULL;
    const unsigned char *s = (const unsigned char *)src;
    const size_t es = esz(dt);
    for (size_t b = 0; b < nb; b += 2, codes += 16) {
        __m256i c[4];
        int bm[2];
        unsigned bmc[2];
        size_t pair = nb - b >= 2 ? 2 : 1;
        for (size_t h = 0; h < 2; h++) {
            if (h < pair) {
                const unsigned char *q = s + (b + h) * 16 * es;
                q_nv_block(p, ld8(dt, q), ld8(dt, q + 8 * es), scales + b + h,
                           plus ? meta + b + h : NULL, st, &c[2 * h], &c[2 * h + 1], &bm[h],
                           &bmc[h]);
            } else {
                c[2 * h] = c[2 * h + 1] = _mm256_setzero_si256();
                bm[h] = -1;
            }
        }
        __m256i bytes = codes_to_bytes(c[0], c[1], c[2], c[3]);
        if (pair == 2) {
            store_codes(4, bytes, codes);
        } else {
            uint8_t tmp[16];
            store_codes(4, bytes, tmp);
            memcpy(codes, tmp, 8);
        }
        for (size_t h = 0; h < pair; h++)
            if (bm[h] >= 0)
                bfp_put_code(codes + 8 * h, (size_t)bm[h], 4, bmc[h]);
    }
}

A2 void d_nvfp4(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes, const uint8_t *scales,
                const uint8_t *meta, size_t nb, size_t last_len, void *dst)
{
    const int plus = p->impl->bm_elem != NULL;
    const float *xlut = bfp_cpu_elem_lut(&bfp_ext_e2m1);
    const __m256 mags = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256 senc = _mm256_set1_ps(p->s_enc);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const size_t ob = 16 * esz(dt);
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    for (size_t b = 0; b < nb; b++, codes += 8, d += ob) {
        size_t n = b + 1 == nb ? last_len : 16;
        unsigned sc = scales[b];
        int bad = !p->s_enc_ok || (sc & 0x80) || sc == 0x7F, bm = -1;
        if (plus && !bad) {
            unsigned m = meta[b];
            if ((m & 0xF0) || (sc <= KS_NV_PLAIN_MAX && m != 0) || m >= n)
                bad = 1;
            else if (sc > KS_NV_PLAIN_MAX)
                bm = (int)m;
        }
        __m256 v[2];
        if (bad) {
            v[0] = v[1] = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
        } else {
            float sb = ks_e4m3_value(sc);
            /* (q * sb) / s_enc for the 8 magnitudes: the same two fp32 steps */
            __m256 tab = _mm256_div_ps(_mm256_mul_ps(mags, _mm256_set1_ps(sb)), senc);
            for (int k = 0; k < 2; k++) {
                __m256i c = nib8(codes + 4 * k);
                __m256 t = _mm256_permutevar8x32_ps(tab, c);
                __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
                v[k] = _mm256_or_ps(t, _mm256_castsi256_ps(sign));
            }
            if (bm >= 0) {
                unsigned code = bfp_get_code(codes, (size_t)bm, 4);
                __m256 vb = _mm256_set1_ps((xlut[code] * sb) / p->s_enc);
                __m256i is_bm = _mm256_cmpeq_epi32(iota, _mm256_set1_epi32(bm & 7));
                v[bm >> 3] = _mm256_blendv_ps(v[bm >> 3], vb, _mm256_castsi256_ps(is_bm));
            }
        }
        st16(dt, d, v[0], v[1], stream);
    }
    if (stream)
        _mm_sfence();
}

/* ---- HiF4 ------------------------------------------------------------------------ */

/* Exactly p >= th for the product p = a * r (float32), from its rounded
 * value pr and error er = a * r - pr (FMA): pr > th, or pr == th and er >= 0. */
A2 __m256 ge_exact(__m256 pr, __m256 er, __m256 th)
{
    __m256 gt = _mm256_cmp_ps(pr, th, _CMP_GT_OQ);
    __m256 eq = _mm256_and_ps(_mm256_cmp_ps(pr, th, _CMP_EQ_OQ),
                              _mm256_cmp_ps(er, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_or_ps(gt, eq);
}

A2 void q_hif4(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
               uint8_t *scales, bfp_stats *st)
{
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f);
    const __m256 half = _mm256_set1_ps(0.5f), eight = _mm256_set1_ps(8.0f);
    const unsigned char *s = (const unsigned char *)src;
    const size_t es = esz(dt);
    for (size_t b = 0; b < nb; b++, codes += 32, s += 64 * es) {
        __m256i x[8], a[8], v16[8], v8[8], m = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            x[k] = ld8(dt, s + (size_t)k * 8 * es);
            a[k] = _mm256_and_si256(x[k], absm);
            __m256i t = _mm256_max_epi32(a[k], _mm256_shuffle_epi32(a[k], 0xB1));
            v16[k] = _mm256_max_epi32(t, _mm256_shuffle_epi32(t, 0x4E)); /* max of 4 */
            v8[k] = _mm256_max_epi32(v16[k], _mm256_permute2x128_si256(v16[k], v16[k], 1));
            m = _mm256_max_epi32(m, v8[k]);
        }
        uint32_t vmax = (uint32_t)_mm256_cvtsi256_si32(m);
        if (vmax >= 0x7F800000u) {
            ks_store_le32(scales + 4 * b, 0xFFu);
            memset(codes, 0, 32);
            st->nonfinite_blocks++;
            continue;
        }
        unsigned code = ks_hif4_code(ks_float(vmax));
        float rec = ks_hif4_rec(code);
        const __m256 r = _mm256_set1_ps(rec);
        const __m256i r4 = _mm256_set1_epi32((int)ks_bits(rec * 4.0f));
        uint32_t e1_8 = 0, e1_16 = 0;
        __m256i c[8];
        for (int k = 0; k < 8; k++) {
            __m256 f8 = _mm256_castsi256_ps(v8[k]), f16 = _mm256_castsi256_ps(v16[k]);
            __m256 p8 = _mm256_mul_ps(f8, r), p16 = _mm256_mul_ps(f16, r);
            __m256 g8 = ge_exact(p8, _mm256_fmsub_ps(f8, r, p8), four);
            __m256 g16 = ge_exact(p16, _mm256_fmsub_ps(f16, r, p16), _mm256_blendv_ps(two, four, g8));
            int m8 = _mm256_movemask_ps(g8), m16 = _mm256_movemask_ps(g16);
            e1_8 |= (uint32_t)(m8 & 1) << k;
            e1_16 |= (uint32_t)((m16 & 1) | ((m16 >> 4) & 1) << 1) << (2 * k);
            /* R' = REC * 2^(2 - E1_8 - E1_16): lower the exponent of 4*REC */
            __m256i shift = _mm256_add_epi32(_mm256_and_si256(_mm256_castps_si256(g8), _mm256_set1_epi32(1 << 23)),
                                             _mm256_and_si256(_mm256_castps_si256(g16), _mm256_set1_epi32(1 << 23)));
            __m256 rk = _mm256_castsi256_ps(_mm256_sub_epi32(r4, shift));
            __m256 af = _mm256_castsi256_ps(a[k]);
            __m256 t = _mm256_mul_ps(af, rk), err = _mm256_fmsub_ps(af, rk, t);
            /* k = floor(t + 1/2) exactly: integer part, then the half decided with err */
            __m256 tc = _mm256_min_ps(t, eight);
            __m256i n = _mm256_cvttps_epi32(tc);
            __m256 frac = _mm256_sub_ps(tc, _mm256_cvtepi32_ps(n));
            __m256 up = ge_exact(frac, err, half);
            n = _mm256_min_epi32(_mm256_sub_epi32(n, _mm256_castps_si256(up)), _mm256_set1_epi32(7));
            c[k] = _mm256_or_si256(n, _mm256_slli_epi32(_mm256_srli_epi32(x[k], 31), 3));
        }
        ks_store_le32(scales + 4 * b, code | e1_8 << 8 | e1_16 << 16);
        store_codes(4, codes_to_bytes(c[0], c[1], c[2], c[3]), codes);
        store_codes(4, codes_to_bytes(c[4], c[5], c[6], c[7]), codes + 16);
    }
}

A2 void d_hif4(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes, const uint8_t *scales,
               size_t nb, void *dst)
{
    const __m256 mags = _mm256_setr_ps(0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f);
    const size_t ob = 64 * esz(dt);
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    for (size_t b = 0; b < nb; b++, codes += 32, d += ob) {
        uint32_t w = ks_load_le32(scales + 4 * b);
        __m256 v[8];
        if ((w & 0xFF) == 0xFF) {
            for (int k = 0; k < 8; k++)
                v[k] = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
        } else {
            __m256 tab = _mm256_mul_ps(mags, _mm256_set1_ps(ks_hif4_scale(w & 0xFF)));
            __m256i wv = _mm256_set1_epi32((int)w);
            for (int k = 0; k < 8; k++) {
                __m256i c = nib8(codes + 4 * k);
                /* 2^(E1_8 + E1_16) per lane: bit 8+k, and bit 16+2k (lanes 0-3) or 17+2k */
                __m256i sh = _mm256_add_epi32(
                    _mm256_and_si256(_mm256_srli_epi32(wv, 8 + k), _mm256_set1_epi32(1)),
                    _mm256_and_si256(_mm256_srlv_epi32(wv, _mm256_setr_epi32(16 + 2 * k, 16 + 2 * k, 16 + 2 * k, 16 + 2 * k,
                                                                            17 + 2 * k, 17 + 2 * k, 17 + 2 * k, 17 + 2 * k)),
                                     _mm256_set1_epi32(1)));
                __m256 mult = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(sh, _mm256_set1_epi32(127)), 23));
                __m256 t = _mm256_mul_ps(_mm256_permutevar8x32_ps(tab, c), mult); /* exact */
                __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
                v[k] = _mm256_or_ps(t, _mm256_castsi256_ps(sign));
            }
        }
        for (int k = 0; k < 8; k += 2)
            st16(dt, d + (size_t)k * 8 * esz(dt), v[k], v[k + 1], stream);
    }
    if (stream)
        _mm_sfence();
}

/* ---- amax (NVFP4 tensor scale) -------------------------------------------------- */

A2 float amax_any(bfp_dtype dt, const void *src, size_t n)
{
    const unsigned char *s = (const unsigned char *)src;
    const size_t es = esz(dt);
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a0 = _mm256_and_si256(ld8(dt, s + i * es), absm);
        __m256i a1 = _mm256_and_si256(ld8(dt, s + (i + 8) * es), absm);
        m0 = _mm256_max_epi32(m0, _mm256_and_si256(a0, _mm256_cmpgt_epi32(inf, a0)));
        m1 = _mm256_max_epi32(m1, _mm256_and_si256(a1, _mm256_cmpgt_epi32(inf, a1)));
    }
    uint32_t m = hmax(_mm256_max_epi32(m0, m1));
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
    return ks_float(m);
}

/* ---- thin wrappers per dtype ------------------------------------------------------ */

static void q_mx_f32(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, uint8_t *sc,
                     uint8_t *m, bfp_stats *st)
{
    q_mx(p, BFP_DTYPE_F32, s, nb, c, sc, st);
}
static void q_mx_bf16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, uint8_t *sc,
                      uint8_t *m, bfp_stats *st)
{
    q_mx(p, BFP_DTYPE_BF16, s, nb, c, sc, st);
}
static void q_mx_f16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, uint8_t *sc,
                     uint8_t *m, bfp_stats *st)
{
    q_mx(p, BFP_DTYPE_F16, s, nb, c, sc, st);
}
static void q_mxplus_f32(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                         uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_mxplus(p, BFP_DTYPE_F32, s, nb, c, sc, m, st);
}
static void q_mxplus_bf16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                          uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_mxplus(p, BFP_DTYPE_BF16, s, nb, c, sc, m, st);
}
static void q_mxplus_f16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                         uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_mxplus(p, BFP_DTYPE_F16, s, nb, c, sc, m, st);
}
static void q_nvfp4_f32(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                        uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_nvfp4(p, BFP_DTYPE_F32, s, nb, c, sc, m, st);
}
static void q_nvfp4_bf16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                         uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_nvfp4(p, BFP_DTYPE_BF16, s, nb, c, sc, m, st);
}
static void q_nvfp4_f16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                        uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_nvfp4(p, BFP_DTYPE_F16, s, nb, c, sc, m, st);
}
static void q_hif4_f32(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, uint8_t *sc,
                       uint8_t *m, bfp_stats *st)
{
    q_hif4(p, BFP_DTYPE_F32, s, nb, c, sc, st);
}
static void q_hif4_bf16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c,
                        uint8_t *sc, uint8_t *m, bfp_stats *st)
{
    q_hif4(p, BFP_DTYPE_BF16, s, nb, c, sc, st);
}
static void q_hif4_f16(const bfp_qparams *p, const void *s, size_t nb, uint8_t *c, uint8_t *sc,
                       uint8_t *m, bfp_stats *st)
{
    q_hif4(p, BFP_DTYPE_F16, s, nb, c, sc, st);
}

static void d_mx_f32(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                     const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_mx(p, BFP_DTYPE_F32, c, sc, nb, d);
}
static void d_mx_bf16(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                      const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_mx(p, BFP_DTYPE_BF16, c, sc, nb, d);
}
static void d_mxplus_f32(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                         const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_mxplus(p, BFP_DTYPE_F32, c, sc, m, nb, last, d);
}
static void d_mxplus_bf16(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                          const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_mxplus(p, BFP_DTYPE_BF16, c, sc, m, nb, last, d);
}
static void d_nvfp4_f32(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                        const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_nvfp4(p, BFP_DTYPE_F32, c, sc, m, nb, last, d);
}
static void d_nvfp4_bf16(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                         const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_nvfp4(p, BFP_DTYPE_BF16, c, sc, m, nb, last, d);
}
static void d_hif4_f32(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                       const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_hif4(p, BFP_DTYPE_F32, c, sc, nb, d);
}
static void d_hif4_bf16(const bfp_dparams *p, const uint8_t *c, const uint8_t *sc,
                        const uint8_t *m, size_t nb, size_t last, void *d)
{
    d_hif4(p, BFP_DTYPE_BF16, c, sc, nb, d);
}

static float amax_f32(const void *s, size_t n) { return amax_any(BFP_DTYPE_F32, s, n); }
static float amax_bf16(const void *s, size_t n) { return amax_any(BFP_DTYPE_BF16, s, n); }
static float amax_f16(const void *s, size_t n) { return amax_any(BFP_DTYPE_F16, s, n); }

int bfp_cpu_avx2_init(bfp_kernels *k)
{
    for (int id = 1; id < BFP_CPU_NFMT; id++) {
        const bfp_format_info *f = bfp_format_get((bfp_format)id);
        if (!f)
            continue;
        bfp_qkernel *q = k->quant[id];
        bfp_dkernel *d = k->dequant[id];
        switch (f->family) {
        case BFP_FAMILY_MX:
            q[0] = q_mx_f32, q[1] = q_mx_bf16, q[2] = q_mx_f16;
            d[0] = d_mx_f32, d[1] = d_mx_bf16;
            break;
        case BFP_FAMILY_MX_PLUS:
        case BFP_FAMILY_MX_PP:
            q[0] = q_mxplus_f32, q[1] = q_mxplus_bf16, q[2] = q_mxplus_f16;
            if (special_rule_holds(bfp_impl_get((bfp_format)id)->elem))
                d[0] = d_mxplus_f32, d[1] = d_mxplus_bf16;
            break;
        case BFP_FAMILY_NVFP4:
        case BFP_FAMILY_NVFP4_PLUS:
            q[0] = q_nvfp4_f32, q[1] = q_nvfp4_bf16, q[2] = q_nvfp4_f16;
            d[0] = d_nvfp4_f32, d[1] = d_nvfp4_bf16;
            break;
        case BFP_FAMILY_HIF4:
            q[0] = q_hif4_f32, q[1] = q_hif4_bf16, q[2] = q_hif4_f16;
            d[0] = d_hif4_f32, d[1] = d_hif4_bf16;
            break;
        }
    }
    k->amax[0] = amax_f32;
    k->amax[1] = amax_bf16;
    k->amax[2] = amax_f16;
    return 1;
}

#else /* built without -mavx2 -mfma -mf16c */

int bfp_cpu_avx2_init(bfp_kernels *k)
{
    (void)k;
    return 0;
}

#endif

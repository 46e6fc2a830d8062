/* x86_avx2.c - AVX2 + FMA + F16C kernels for every format (quantize from
 * f32/bf16/f16, dequantize to f32/bf16). Built with -mavx2 -mfma -mf16c
 * (the top-level CMakeLists.txt sets the per-file flags); without them this file
 * provides nothing and the generic kernels stay.
 *
 * Decisions follow kern_scalar.h exactly, eight lanes at a time. Bodies are
 * static inline and specialized per element type (ks_elem constants) and
 * per dtype by thin wrappers; MX and NVFP4 work on groups of eight blocks
 * so that the block scales are computed eight at a time too. */
#include "kern_scalar.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "x86_avx2_inl.h"

/* ---- element codecs (kern_scalar.h's ks_enc_mag, eight lanes) ----------------- */

/* Codes of 8 values: a = |x| bits, x for the sign, f = 2^-exponent. */
A2 __m256i enc8(ks_elem e, __m256i x, __m256i a, __m256 f)
{
    __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(a), f);
    __m256i q;
    if (e.kind == BFP_GRID_INT) {
        q = _mm256_cvtps_epi32(_mm256_mul_ps(y, _mm256_set1_ps((float)(1 << e.mbits))));
        q = _mm256_min_epi32(q, _mm256_set1_epi32(e.max_mag));
        __m256i neg = _mm256_srai_epi32(x, 31);
        q = _mm256_sub_epi32(_mm256_xor_si256(q, neg), neg);
        return _mm256_and_si256(q, _mm256_set1_epi32((1 << e.bits) - 1));
    }
    const int eminb = 128 - e.bias;
    __m256i ee = _mm256_max_epi32(_mm256_srli_epi32(_mm256_castps_si256(y), 23),
                                  _mm256_set1_epi32(eminb));
    __m256i mult = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254 + e.mbits), ee), 23);
    q = _mm256_cvtps_epi32(_mm256_mul_ps(y, _mm256_castsi256_ps(mult)));
    q = _mm256_add_epi32(q, _mm256_slli_epi32(_mm256_sub_epi32(ee, _mm256_set1_epi32(eminb)), e.mbits));
    q = _mm256_min_epi32(q, _mm256_set1_epi32(e.max_mag));
    __m256i sign = _mm256_and_si256(_mm256_srai_epi32(x, 31), _mm256_set1_epi32(1 << (e.bits - 1)));
    return _mm256_or_si256(q, sign);
}

/* Signed element values of 8 codes at scale 1 (NaN codes: quiet NaN with
 * the code's sign; E5M2 0x7C: Inf). No subnormal float is ever formed. */
A2 __m256 val8(ks_elem e, __m256i c)
{
    if (e.kind == BFP_GRID_INT) {
        const int sh = 32 - e.bits; /* sign-extend the code */
        __m256i k = _mm256_srai_epi32(_mm256_slli_epi32(c, sh), sh);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(k), _mm256_set1_ps(1.0f / (float)(1 << e.mbits)));
    }
    const int sbit = 1 << (e.bits - 1);
    __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(sbit - 1));
    /* normal codes: the fields rebased into float32's exponent; subnormal
     * codes: the same with the implicit bit, minus it (exact) */
    __m256i t = _mm256_add_epi32(_mm256_slli_epi32(mag, 23 - e.mbits),
                                 _mm256_set1_epi32((127 - e.bias) << 23));
    __m256i sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(1 << e.mbits), mag);
    t = _mm256_add_epi32(t, _mm256_and_si256(sub, _mm256_set1_epi32(1 << 23)));
    __m256 v = _mm256_sub_ps(_mm256_castsi256_ps(t),
                             _mm256_and_ps(_mm256_castsi256_ps(sub), _mm256_set1_ps(ks_pow2(1 - e.bias))));
    if (e.max_mag < sbit - 1) { /* E4M3, E5M2: NaN (and Inf) codes */
        __m256i special = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(e.max_mag));
        __m256i sv = _mm256_set1_epi32(0x7FC00000);
        if (e.emax == 15) /* E5M2: 0x7C is Inf */
            sv = _mm256_sub_epi32(sv, _mm256_and_si256(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7C)),
                                                       _mm256_set1_epi32(0x00400000)));
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(sv), _mm256_castsi256_ps(special));
    }
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(sbit)), 32 - e.bits);
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

/* v * scale where the scale is NaN: a NaN value stays, anything else is +NaN. */
A2 __m256 nan_scaled(__m256 v)
{
    __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    return _mm256_blendv_ps(nan, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* 4-bit element values times s, in the output's form (out_form8): a table
 * of the 16 codes in two halves (codes 0-7, 8-15), looked up with permutes. */
typedef struct {
    __m256i lo, hi;
} tab16;

A2 tab16 tab16_scaled(ks_elem e, bfp_dtype dt, __m256 s)
{
    tab16 t;
    if (e.kind == BFP_GRID_INT) {
        t.lo = out_form8(dt, _mm256_mul_ps(_mm256_setr_ps(0, .25f, .5f, .75f, 1, 1.25f, 1.5f, 1.75f), s));
        t.hi = out_form8(dt, _mm256_mul_ps(_mm256_setr_ps(-2, -1.75f, -1.5f, -1.25f, -1, -.75f, -.5f, -.25f), s));
    } else { /* E2M1: sign-magnitude, the sign is or-ed in */
        t.lo = out_form8(dt, _mm256_mul_ps(_mm256_setr_ps(0, .5f, 1, 1.5f, 2, 3, 4, 6), s));
        t.hi = t.lo;
    }
    return t;
}

A2 __m256i look16(ks_elem e, bfp_dtype dt, tab16 t, __m256i c)
{
    __m256i lo = _mm256_permutevar8x32_epi32(t.lo, c);
    if (e.kind == BFP_GRID_INT)
        return _mm256_blendv_epi8(lo, _mm256_permutevar8x32_epi32(t.hi, c),
                                  _mm256_srai_epi32(_mm256_slli_epi32(c, 28), 31));
    __m256i sign = _mm256_and_si256(c, _mm256_set1_epi32(8));
    return _mm256_or_si256(lo, _mm256_slli_epi32(sign, dt == BFP_DTYPE_F32 ? 28 : 12));
}

/* ---- MX ------------------------------------------------------------------------ */

/* Per-lane max |x| of one 32-element block (bits; NaN above Inf). */
A2 __m256i block32_absmax(bfp_dtype dt, const unsigned char *s)
{
    const size_t es = esz(dt);
    if (dt != BFP_DTYPE_F32) { /* 16-bit magnitudes order as their values: max first */
        const __m256i abs16 = _mm256_set1_epi16(0x7FFF);
        __m256i h = _mm256_max_epu16(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)s), abs16),
                                     _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(s + 32)), abs16));
        h = _mm256_max_epu16(h, _mm256_srli_epi32(h, 16)); /* low half of each lane */
        if (dt == BFP_DTYPE_BF16)
            return _mm256_slli_epi32(h, 16);
        h = _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0xFFFF)), h), 0x08);
        return _mm256_castps_si256(_mm256_cvtph_ps(_mm256_castsi256_si128(h)));
    }
    __m256i m0 = _mm256_max_epi32(abs8(ld8(dt, s)), abs8(ld8(dt, s + 8 * es)));
    __m256i m1 = _mm256_max_epi32(abs8(ld8(dt, s + 16 * es)), abs8(ld8(dt, s + 24 * es)));
    return _mm256_max_epi32(m0, m1);
}

/* Codes of one finite 32-element block at scale factor f (= 2^-exponent). */
A2 void mx_encode(ks_elem e, bfp_dtype dt, const unsigned char *s, __m256 f, uint8_t *codes)
{
    __m256i c[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m256i x = ld8(dt, s + (size_t)k * 8 * esz(dt));
        c[k] = enc8(e, x, abs8(x), f);
    }
    store_codes(e.bits, codes_to_bytes(c[0], c[1], c[2], c[3]), codes);
}

A2 void q_mx(ks_elem e, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
             uint8_t *scales, bfp_stats *st)
{
    const size_t es = esz(dt), cb = (size_t)(4 * e.bits), sbytes = 32 * es;
    const unsigned char *s = (const unsigned char *)src;
    size_t b = 0, nonfinite = 0;
    for (; b + 8 <= nb; b += 8, s += 8 * sbytes, codes += 8 * cb) {
        /* the eight shared exponents at once */
        if (dt == BFP_DTYPE_F32)
            prefetch_span(s, 8 * sbytes);
        __m256i pm[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            pm[j] = block32_absmax(dt, s + (size_t)j * sbytes);
        __m256i amax = hmax_8x8(pm);
        __m256i nf = _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF));
        __m256i se = _mm256_sub_epi32(flog2_8(amax), _mm256_set1_epi32(e.emax));
        se = _mm256_min_epi32(_mm256_max_epi32(se, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
        store8_bytes(scales + b, _mm256_or_si256(_mm256_add_epi32(se, _mm256_set1_epi32(127)),
                                                 _mm256_and_si256(nf, _mm256_set1_epi32(0xFF))));
        float f[8];
        _mm256_storeu_ps(f, pow2neg_8(se));
        unsigned nfm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nf));
        for (int j = 0; j < 8; j++) {
            if (nfm >> j & 1) { /* NaN or Inf: NaN scale (written above), zero codes */
                memset(codes + (size_t)j * cb, 0, cb);
                nonfinite++;
            } else {
                mx_encode(e, dt, s + (size_t)j * sbytes, _mm256_set1_ps(f[j]), codes + (size_t)j * cb);
            }
        }
    }
    for (; b < nb; b++, s += sbytes, codes += cb) {
        uint32_t amax = hmax(block32_absmax(dt, s));
        if (amax >= 0x7F800000u) {
            scales[b] = 0xFF;
            memset(codes, 0, cb);
            nonfinite++;
            continue;
        }
        int se = ks_mx_shared_exp(amax, e.emax);
        scales[b] = (uint8_t)(se + 127);
        mx_encode(e, dt, s, _mm256_set1_ps(ks_pow2(-se)), codes);
    }
    st->nonfinite_blocks += nonfinite;
}

A2 void d_mx(ks_elem e, bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes,
             const uint8_t *scales, size_t nb, void *dst)
{
    const int w = e.bits;
    const size_t cb = (size_t)(4 * w), ob = 32 * esz(dt);
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    for (size_t b = 0; b < nb; b++, codes += cb, d += ob) {
        unsigned sc = scales[b];
        __m256 v[4];
        if (w == 4) { /* no NaN codes: a NaN scale makes every value +NaN */
            __m256i o[4];
            if (sc == 0xFF) {
                o[0] = o[1] = o[2] = o[3] = out_form8(dt, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
            } else {
                tab16 t = tab16_scaled(e, dt, _mm256_set1_ps(ks_pow2((int)sc - 127)));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    o[k] = look16(e, dt, t, nib8(codes + 4 * k));
            }
            st16_lanes(dt, d, o[0], o[1], stream);
            st16_lanes(dt, d + ob / 2, o[2], o[3], stream);
            continue;
        } else if (sc == 0xFF) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                v[k] = nan_scaled(val8(e, codes8(w, codes, k)));
        } else {
            __m256 s = _mm256_set1_ps(ks_pow2((int)sc - 127));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                v[k] = _mm256_mul_ps(val8(e, codes8(w, codes, k)), s); /* rounds once */
        }
        st16(dt, d, v[0], v[1], stream);
        st16(dt, d + ob / 2, v[2], v[3], stream);
    }
    if (stream)
        _mm_sfence();
}

/* ---- MX+ and MX++ --------------------------------------------------------------- */

A2 void q_mxplus(ks_elem e, bfp_dtype dt, const bfp_qparams *p, const void *src, size_t nb,
                 uint8_t *codes, uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const int pp = p->impl->info.family == BFP_FAMILY_MX_PP, xmb = e.bits - 1;
    const size_t es = esz(dt), cb = (size_t)(4 * e.bits), sbytes = 32 * es;
    const unsigned char *s = (const unsigned char *)src;
    size_t nonfinite = 0, flushed = 0;
    for (size_t b = 0; b < nb; b += 8, s += 8 * sbytes, codes += 8 * cb) {
        const size_t g = nb - b < 8 ? nb - b : 8;
        /* eight blocks' maxima, shared exponents and block-max codes at once */
        if (dt == BFP_DTYPE_F32)
            prefetch_span(s, g * sbytes);
        __m256i pm[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            pm[j] = (size_t)j < g ? block32_absmax(dt, s + (size_t)j * sbytes) : _mm256_setzero_si256();
        __m256i amax = hmax_8x8(pm);
        __m256i nf = _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF));
        __m256i se = _mm256_sub_epi32(flog2_8(amax), _mm256_set1_epi32(e.emax));
        __m256i empty = _mm256_or_si256(nf, _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), se)); /* NaN or flushed */
        se = _mm256_max_epi32(_mm256_min_epi32(se, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
        __m256i sc = _mm256_or_si256(_mm256_andnot_si256(empty, _mm256_add_epi32(se, _mm256_set1_epi32(127))),
                                     _mm256_and_si256(nf, _mm256_set1_epi32(0xFF)));
        __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(amax), pow2neg_8(se)); /* in [2^emax, 2^(emax+1)) */
        __m256i xq = _mm256_sub_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(y, _mm256_set1_ps(ks_pow2(xmb - e.emax)))),
                                      _mm256_set1_epi32(1 << xmb));
        xq = _mm256_max_epi32(_mm256_min_epi32(xq, _mm256_set1_epi32((1 << xmb) - 1)), _mm256_setzero_si256());
        int sev[8], xqv[8];
        uint32_t amv[8];
        uint8_t sc8[8];
        _mm256_storeu_si256((__m256i *)sev, se);
        _mm256_storeu_si256((__m256i *)xqv, xq);
        _mm256_storeu_si256((__m256i *)amv, amax);
        store8_bytes(sc8, sc);
        memcpy(scales + b, sc8, g);
        const unsigned emptym = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(empty));
        const unsigned nfm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nf));
        for (size_t j = 0; j < g; j++) {
            uint8_t *cj = codes + j * cb;
            if (emptym >> j & 1) { /* codes and meta 0 */
                meta[b + j] = 0;
                memset(cj, 0, cb);
                nonfinite += nfm >> j & 1;
                flushed += !(nfm >> j & 1);
                continue;
            }
            const unsigned char *sj = s + j * sbytes;
            __m256i x[4], a[4], is_max[4];
            uint32_t eq = 0, neg = 0;
            __m256i am = _mm256_set1_epi32((int)amv[j]);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                x[k] = ld8(dt, sj + (size_t)k * 8 * es);
                a[k] = abs8(x[k]);
                is_max[k] = _mm256_cmpeq_epi32(a[k], am);
                eq |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(is_max[k])) << (8 * k);
                neg |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(x[k])) << (8 * k);
            }
            int bm = ks_ctz32(eq); /* ties go to the lowest index */
            int sej = sev[j], nbm = sej;
            if (pp) { /* the others' max: the block max again if it repeats */
                uint32_t max2 = amv[j];
                if ((eq & (eq - 1)) == 0) {
                    __m256i m2 = _mm256_max_epi32(_mm256_andnot_si256(is_max[0], a[0]),
                                                  _mm256_andnot_si256(is_max[1], a[1]));
                    m2 = _mm256_max_epi32(m2, _mm256_max_epi32(_mm256_andnot_si256(is_max[2], a[2]),
                                                               _mm256_andnot_si256(is_max[3], a[3])));
                    max2 = hmax(m2);
                }
                nbm = ks_mxpp_nbm_exp(max2, sej, e.emax);
            }
            meta[b + j] = (uint8_t)(bm | (sej - nbm) << 5);
            __m256i c[4];
            if (-nbm <= 127) {
                __m256 f = _mm256_set1_ps(ks_pow2(-nbm));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    c[k] = enc8(e, x[k], a[k], f);
            } else { /* MX++ of a tiny block: 2^-nbm needs two exact steps */
                __m256 f = _mm256_set1_ps(ks_pow2(-nbm - 64));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    __m256i a64 = _mm256_castps_si256(
                        _mm256_mul_ps(_mm256_castsi256_ps(a[k]), _mm256_set1_ps(0x1p64f)));
                    c[k] = enc8(e, x[k], a64, f);
                }
            }
            /* the block max: sign and extended mantissa */
            unsigned bmc = (unsigned)xqv[j] | ((neg >> bm) & 1u) << xmb;
            if (e.bits != 4) {
                const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                const __m256i bmv = _mm256_set1_epi32(bm), bmcv = _mm256_set1_epi32((int)bmc);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    c[k] = _mm256_blendv_epi8(c[k], bmcv, _mm256_cmpeq_epi32(
                                                              _mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)), bmv));
            }
            store_codes(e.bits, codes_to_bytes(c[0], c[1], c[2], c[3]), cj);
            if (e.bits == 4)
                bfp_put_code(cj, (size_t)bm, 4, bmc);
        }
    }
    st->nonfinite_blocks += nonfinite;
    st->flushed_blocks += flushed;
}

A2 void d_mxplus(ks_elem e, bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes,
                 const uint8_t *scales, const uint8_t *meta, size_t nb, size_t last_len,
                 void *dst)
{
    const int w = e.bits, plus_only = p->impl->info.family == BFP_FAMILY_MX_PLUS;
    const int sbit = 1 << (w - 1), special = special_rule(e);
    const float *xlut = bfp_cpu_elem_lut(p->impl->bm_elem);
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
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            c[k] = codes8(w, codes, k);
            any = _mm256_or_si256(any, c[k]);
            if (special != SPECIAL_NONE) {
                __m256i is_bm = _mm256_cmpeq_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)), bmv);
                __m256i sp = special == SPECIAL_INT_MIN
                                 ? _mm256_cmpeq_epi32(c[k], _mm256_set1_epi32(sbit))
                                 : _mm256_cmpgt_epi32(_mm256_and_si256(c[k], _mm256_set1_epi32(sbit - 1)),
                                                      _mm256_set1_epi32(e.max_mag));
                spec = _mm256_or_si256(spec, _mm256_andnot_si256(is_bm, sp));
            }
        }
        bad |= (empty && !_mm256_testz_si256(any, any)) || !_mm256_testz_si256(spec, spec);
        __m256i v[4];
        if (sc == 0xFF || bad || sc == 0) {
            __m256i fill = out_form8(dt, _mm256_castsi256_ps(_mm256_set1_epi32(sc == 0 && !bad ? 0 : 0x7FC00000)));
            v[0] = v[1] = v[2] = v[3] = fill;
        } else {
            int se = (int)sc - 127;
            __m256 s = _mm256_set1_ps(ks_pow2(se - (int)delta));
            __m256i vbm = _mm256_set1_epi32(
                (int)ks_out_bits(dt, xlut[ks_get_code(codes, idx, w)] * ks_pow2(se)));
            tab16 t = tab16_scaled(e, dt, s);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                v[k] = w == 4 ? look16(e, dt, t, c[k]) : out_form8(dt, _mm256_mul_ps(val8(e, c[k]), s));
                __m256i is_bm = _mm256_cmpeq_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)), bmv);
                v[k] = _mm256_blendv_epi8(v[k], vbm, is_bm);
            }
        }
        st16_lanes(dt, d, v[0], v[1], stream);
        st16_lanes(dt, d + ob / 2, v[2], v[3], stream);
    }
    if (stream)
        _mm_sfence();
}

/* ---- NVFP4 and NVFP4+ -------------------------------------------------------------- */

/* Index on a 7-midpoint grid (ties to the even index) of a against the
 * thresholds thr[0], thr[stride], ... (broadcast). */
A2 __m256i mid_index8(__m256 a, const float *thr, int stride)
{
    __m256i q = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 7; k += 2)
        q = _mm256_sub_epi32(q, _mm256_castps_si256(
                                    _mm256_cmp_ps(a, _mm256_broadcast_ss(thr + k * stride), _CMP_GT_OQ)));
#pragma GCC unroll 3
    for (int k = 1; k < 7; k += 2)
        q = _mm256_sub_epi32(q, _mm256_castps_si256(
                                    _mm256_cmp_ps(a, _mm256_broadcast_ss(thr + k * stride), _CMP_GE_OQ)));
    return q;
}

/* Lane-wise: the same decision with a vector of thresholds per midpoint. */
A2 __m256i mid_index8v(__m256 a, const __m256 *thr)
{
    __m256i q = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 7; k += 2)
        q = _mm256_sub_epi32(q, _mm256_castps_si256(_mm256_cmp_ps(a, thr[k], _CMP_GT_OQ)));
#pragma GCC unroll 3
    for (int k = 1; k < 7; k += 2)
        q = _mm256_sub_epi32(q, _mm256_castps_si256(_mm256_cmp_ps(a, thr[k], _CMP_GE_OQ)));
    return q;
}

/* Up to eight NVFP4(+) blocks: scales computed eight at a time, codes two
 * blocks (one 16-byte store) at a time. */
A2 void nv_group(bfp_dtype dt, const bfp_qparams *p, const unsigned char *s, size_t g,
                 uint8_t *codes, uint8_t *scales, uint8_t *meta, size_t *nonfinite)
{
    const size_t es = esz(dt);
    const __m256 senc = _mm256_set1_ps(p->s_enc);
    float tb[8 * 16] __attribute__((aligned(32))), thr[7 * 8];
    if (dt == BFP_DTYPE_F32)
        prefetch_span(s, g * 16 * es);
    int scv[8], xmag[8];
    uint32_t tmv[8];
    __m256i pm[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        if ((size_t)j < g) {
            __m256 t0 = _mm256_mul_ps(_mm256_castsi256_ps(ld8(dt, s + (size_t)j * 16 * es)), senc);
            __m256 t1 = _mm256_mul_ps(_mm256_castsi256_ps(ld8(dt, s + ((size_t)j * 16 + 8) * es)), senc);
            _mm256_store_ps(tb + 16 * j, t0);
            _mm256_store_ps(tb + 16 * j + 8, t1);
            pm[j] = _mm256_max_epi32(abs8(_mm256_castps_si256(t0)), abs8(_mm256_castps_si256(t1)));
        } else {
            pm[j] = _mm256_setzero_si256();
        }
    }
    __m256i tmax = hmax_8x8(pm);
    __m256i nf = _mm256_cmpgt_epi32(tmax, _mm256_set1_epi32(0x7F7FFFFF));
    __m256i sc = e4m3_code8(_mm256_div_ps(_mm256_castsi256_ps(tmax), _mm256_set1_ps(6.0f)));
    sc = _mm256_blendv_epi8(sc, _mm256_set1_epi32(0x7F), nf);
    __m256 sb = e4m3_value8(sc);
#pragma GCC unroll 7
    for (int k = 0; k < 7; k++)
        _mm256_storeu_ps(thr + 8 * k, _mm256_mul_ps(_mm256_set1_ps(ks_e2m1_mid[k]), sb));
    _mm256_storeu_si256((__m256i *)scv, sc);
    _mm256_storeu_si256((__m256i *)tmv, tmax);
    if (meta) { /* block-max magnitudes on 4 * (1 + i/8), all eight at once */
        __m256 xt[7];
#pragma GCC unroll 7
        for (int k = 0; k < 7; k++)
            xt[k] = _mm256_mul_ps(_mm256_set1_ps(ks_ext4_mid[k]), sb);
        _mm256_storeu_si256((__m256i *)xmag, mid_index8v(_mm256_castsi256_ps(tmax), xt));
    }
    uint8_t sc8[8];
    store8_bytes(sc8, sc);
    memcpy(scales, sc8, g);
    for (size_t j = 0; j < g; j += 2) {
        __m256i c[4];
        int bm[2] = {-1, -1};
        for (size_t h = 0; h < 2; h++) {
            size_t i = j + h;
            __m256i *ci = c + 2 * h;
            if (i >= g || scv[i] == 0x7F) { /* past the end, or NaN/Inf: zero codes */
                ci[0] = ci[1] = _mm256_setzero_si256();
                *nonfinite += i < g;
                if (meta && i < g)
                    meta[i] = 0;
                continue;
            }
            __m256i t0 = _mm256_load_si256((const __m256i *)(tb + 16 * i));
            __m256i t1 = _mm256_load_si256((const __m256i *)(tb + 16 * i + 8));
            __m256i s0 = _mm256_and_si256(_mm256_srai_epi32(t0, 31), _mm256_set1_epi32(8));
            __m256i s1 = _mm256_and_si256(_mm256_srai_epi32(t1, 31), _mm256_set1_epi32(8));
            if (scv[i] == 0) { /* zero block scale: signed zeros */
                ci[0] = s0;
                ci[1] = s1;
            } else {
                __m256i a0 = abs8(t0), a1 = abs8(t1);
                ci[0] = _mm256_or_si256(mid_index8(_mm256_castsi256_ps(a0), thr + i, 8), s0);
                ci[1] = _mm256_or_si256(mid_index8(_mm256_castsi256_ps(a1), thr + i, 8), s1);
                if (meta && (unsigned)scv[i] > KS_NV_PLAIN_MAX) { /* lowest index of the max */
                    __m256i tv = _mm256_set1_epi32((int)tmv[i]);
                    uint32_t eq = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a0, tv))) |
                                  (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a1, tv))) << 8;
                    bm[h] = ks_ctz32(eq);
                }
            }
            if (meta)
                meta[i] = (uint8_t)(bm[h] < 0 ? 0 : bm[h]);
        }
        __m256i bytes = codes_to_bytes(c[0], c[1], c[2], c[3]);
        if (j + 1 < g) {
            store_codes(4, bytes, codes + 8 * j);
        } else {
            uint8_t tmp[16];
            store_codes(4, bytes, tmp);
            memcpy(codes + 8 * j, tmp, 8);
        }
        for (size_t h = 0; h < 2; h++)
            if (bm[h] >= 0) {
                size_t i = j + h;
                unsigned sign = ks_bits(tb[16 * i + (size_t)bm[h]]) >> 31;
                bfp_put_code(codes + 8 * i, (size_t)bm[h], 4, (unsigned)xmag[i] | sign << 3);
            }
    }
}

A2 void q_nvfp4(bfp_dtype dt, const bfp_qparams *p, const void *src, size_t nb, uint8_t *codes,
                uint8_t *scales, uint8_t *meta, bfp_stats *st)
{
    const int plus = p->impl->bm_elem != NULL;
    const unsigned char *s = (const unsigned char *)src;
    size_t nonfinite = 0;
    for (size_t b = 0; b < nb; b += 8) {
        size_t g = nb - b < 8 ? nb - b : 8;
        nv_group(dt, p, s + b * 16 * esz(dt), g, codes + 8 * b, scales + b, plus ? meta + b : NULL,
                 &nonfinite);
    }
    st->nonfinite_blocks += nonfinite;
}

A2 void d_nvfp4(bfp_dtype dt, const bfp_dparams *p, const uint8_t *codes, const uint8_t *scales,
                const uint8_t *meta, size_t nb, size_t last_len, void *dst)
{
    const int plus = p->impl->bm_elem != NULL;
    const int s_enc_ok = p->s_enc_ok;
    const __m256 mags = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    const __m256 xmags = _mm256_setr_ps(4.0f, 4.5f, 5.0f, 5.5f, 6.0f, 6.5f, 7.0f, 7.5f);
    const __m256 senc = _mm256_set1_ps(p->s_enc);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i qnan = out_form8(dt, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
    const int sign_shift = dt == BFP_DTYPE_F32 ? 28 : 12; /* code bit 3 to the sign */
    const size_t ob = 16 * esz(dt);
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    /* (q * sb) / s_enc for the 8 magnitudes (and the block-max ones) of each
     * scale code met: one division per scale code, not per block */
    __m256i rows[0x7F], xrows[0x7F];
    uint8_t have[0x7F];
    memset(have, 0, sizeof have);
    for (size_t b = 0; b < nb; b++, codes += 8, d += ob) {
        size_t n = b + 1 == nb ? last_len : 16;
        unsigned sc = scales[b];
        int bad = !s_enc_ok || (sc & 0x80) || sc == 0x7F, bm = -1;
        if (plus && !bad) {
            unsigned m = meta[b];
            if ((m & 0xF0) || (sc <= KS_NV_PLAIN_MAX && m != 0) || m >= n)
                bad = 1;
            else if (sc > KS_NV_PLAIN_MAX)
                bm = (int)m;
        }
        if (bad) {
            st16_lanes(dt, d, qnan, qnan, stream);
            continue;
        }
        if (!have[sc]) {
            __m256 sb = _mm256_set1_ps(ks_e4m3_value(sc));
            rows[sc] = out_form8(dt, _mm256_div_ps(_mm256_mul_ps(mags, sb), senc));
            xrows[sc] = plus ? out_form8(dt, _mm256_div_ps(_mm256_mul_ps(xmags, sb), senc)) : rows[sc];
            have[sc] = 1;
        }
        __m256i v[2];
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) {
            __m256i c = nib8(codes + 4 * k);
            __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), sign_shift);
            __m256i t = _mm256_permutevar8x32_epi32(rows[sc], c);
            if (plus) /* bm = -1 matches no lane */
                t = _mm256_blendv_epi8(t, _mm256_permutevar8x32_epi32(xrows[sc], c),
                                       _mm256_cmpeq_epi32(_mm256_add_epi32(iota, _mm256_set1_epi32(8 * k)),
                                                          _mm256_set1_epi32(bm)));
            v[k] = _mm256_or_si256(t, sign);
        }
        st16_lanes(dt, d, v[0], v[1], stream);
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

/* Bit i of m (i < 4) to bit 2i. */
static const uint8_t spread4[16] = {0x00, 0x01, 0x04, 0x05, 0x10, 0x11, 0x14, 0x15,
                                    0x40, 0x41, 0x44, 0x45, 0x50, 0x51, 0x54, 0x55};

A2 void q_hif4(const bfp_qparams *p, bfp_dtype dt, const void *src, size_t nb, uint8_t *codes,
               uint8_t *scales, bfp_stats *st)
{
    const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f);
    const __m256 half = _mm256_set1_ps(0.5f), eight = _mm256_set1_ps(8.0f);
    const unsigned char *s = (const unsigned char *)src;
    const size_t es = esz(dt);
    for (size_t b = 0; b < nb; b++, codes += 32, s += 64 * es) {
        if (dt == BFP_DTYPE_F32)
            prefetch_span(s, 64 * es);
        /* group maxima, compact: vector h holds groups 8h + {0,2,4,6 | 1,3,5,7} */
        __m256i x[8], a[8], g[8], v16[2], v8[2];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            x[k] = ld8(dt, s + (size_t)k * 8 * es);
            a[k] = abs8(x[k]);
            __m256i t = _mm256_max_epi32(a[k], _mm256_shuffle_epi32(a[k], 0xB1));
            g[k] = _mm256_max_epi32(t, _mm256_shuffle_epi32(t, 0x4E)); /* max of 4 */
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            v16[h] = _mm256_unpacklo_epi64(_mm256_unpacklo_epi32(g[4 * h], g[4 * h + 1]),
                                           _mm256_unpacklo_epi32(g[4 * h + 2], g[4 * h + 3]));
            v8[h] = _mm256_max_epi32(v16[h], _mm256_permute2x128_si256(v16[h], v16[h], 1));
        }
        uint32_t vmax = hmax(_mm256_max_epi32(v8[0], v8[1]));
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
        /* exact flags per group, and R' = 4 REC / 2^(E1_8 + E1_16) per group */
        uint32_t e1_8 = 0, e1_16 = 0;
        __m256 rtab[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256 f8 = _mm256_castsi256_ps(v8[h]), f16 = _mm256_castsi256_ps(v16[h]);
            __m256 p8 = _mm256_mul_ps(f8, r), p16 = _mm256_mul_ps(f16, r);
            __m256 g8 = ge_exact(p8, _mm256_fmsub_ps(f8, r, p8), four);
            __m256 g16 = ge_exact(p16, _mm256_fmsub_ps(f16, r, p16), _mm256_blendv_ps(two, four, g8));
            unsigned m16 = (unsigned)_mm256_movemask_ps(g16);
            e1_8 |= ((unsigned)_mm256_movemask_ps(g8) & 15u) << (4 * h);
            e1_16 |= (uint32_t)(spread4[m16 & 15] | spread4[m16 >> 4] << 1) << (8 * h);
            __m256i drop = _mm256_add_epi32(_mm256_and_si256(_mm256_castps_si256(g8), _mm256_set1_epi32(1 << 23)),
                                            _mm256_and_si256(_mm256_castps_si256(g16), _mm256_set1_epi32(1 << 23)));
            rtab[h] = _mm256_castsi256_ps(_mm256_sub_epi32(r4, drop));
        }
        ks_store_le32(scales + 4 * b, code | e1_8 << 8 | e1_16 << 16);
        __m256i c[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const int i = k % 4; /* groups 2k, 2k+1 sit in lanes i and 4 + i */
            __m256 rk = _mm256_permutevar8x32_ps(rtab[k / 4], _mm256_setr_epi32(i, i, i, i, 4 + i, 4 + i, 4 + i, 4 + i));
            __m256 af = _mm256_castsi256_ps(a[k]);
            __m256 t = _mm256_mul_ps(af, rk), err = _mm256_fmsub_ps(af, rk, t);
            /* floor(t + 1/2) exactly: integer part, then the half decided with err */
            __m256 tc = _mm256_min_ps(t, eight);
            __m256i n = _mm256_cvttps_epi32(tc);
            __m256 frac = _mm256_sub_ps(tc, _mm256_cvtepi32_ps(n));
            __m256 up = ge_exact(frac, err, half);
            n = _mm256_min_epi32(_mm256_sub_epi32(n, _mm256_castps_si256(up)), _mm256_set1_epi32(7));
            c[k] = _mm256_or_si256(n, _mm256_and_si256(_mm256_srai_epi32(x[k], 28), _mm256_set1_epi32(8)));
        }
        store_codes(4, codes_to_bytes(c[0], c[1], c[2], c[3]), codes);
        store_codes(4, codes_to_bytes(c[4], c[5], c[6], c[7]), codes + 16);
    }
}

A2 void d_hif4(const bfp_dparams *p, bfp_dtype dt, const uint8_t *codes, const uint8_t *scales,
               size_t nb, void *dst)
{
    const __m256 mags = _mm256_setr_ps(0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f);
    const size_t ob = 64 * esz(dt);
    /* the output form's exponent field and sign bit */
    const int ebit = dt == BFP_DTYPE_F32 ? 23 : 7, sbit = dt == BFP_DTYPE_F32 ? 31 : 15;
    unsigned char *d = (unsigned char *)dst;
    const int stream = p->stream && ((uintptr_t)d & 31) == 0;
    for (size_t b = 0; b < nb; b++, codes += 32, d += ob) {
        uint32_t w = ks_load_le32(scales + 4 * b);
        __m256i v[8];
        if ((w & 0xFF) == 0xFF) {
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                v[k] = out_form8(dt, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
        } else {
            /* k/4 * E6M2 for the 8 magnitudes, then times 2^(E1_8 + E1_16) per
             * lane by adding to the exponent field: exact, and the same for the
             * bfloat16 form since every value is normal (zero stays zero) */
            __m256i tab = out_form8(dt, _mm256_mul_ps(mags, _mm256_set1_ps(ks_hif4_scale(w & 0xFF))));
            __m256i wv = _mm256_set1_epi32((int)w);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                __m256i c = nib8(codes + 4 * k);
                /* E1_8 is bit 8+k; E1_16 bit 16+2k (lanes 0-3) or 17+2k (lanes 4-7) */
                __m256i sh = _mm256_add_epi32(
                    _mm256_and_si256(_mm256_srli_epi32(wv, 8 + k), _mm256_set1_epi32(1)),
                    _mm256_and_si256(_mm256_srlv_epi32(wv, _mm256_setr_epi32(16 + 2 * k, 16 + 2 * k, 16 + 2 * k, 16 + 2 * k,
                                                                            17 + 2 * k, 17 + 2 * k, 17 + 2 * k, 17 + 2 * k)),
                                     _mm256_set1_epi32(1)));
                __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(7));
                __m256i nz = _mm256_cmpgt_epi32(mag, _mm256_setzero_si256());
                __m256i t = _mm256_add_epi32(_mm256_permutevar8x32_epi32(tab, c),
                                             _mm256_and_si256(_mm256_slli_epi32(sh, ebit), nz));
                __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), sbit - 3);
                v[k] = _mm256_or_si256(t, sign);
            }
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; k += 2)
            st16_lanes(dt, d + (size_t)k * 8 * esz(dt), v[k], v[k + 1], stream);
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
        if (dt == BFP_DTYPE_F32 && i % 32 == 0)
            prefetch_span(s + i * es, 32 * es);
        __m256i a0 = _mm256_and_si256(ld8(dt, s + i * es), absm);
        __m256i a1 = _mm256_and_si256(ld8(dt, s + (i + 8) * es), absm);
        m0 = _mm256_max_epi32(m0, _mm256_and_si256(a0, _mm256_cmpgt_epi32(inf, a0)));
        m1 = _mm256_max_epi32(m1, _mm256_and_si256(a1, _mm256_cmpgt_epi32(inf, a1)));
    }
    uint32_t m = hmax(_mm256_max_epi32(m0, m1));
    return ks_float(ks_amax_tail(dt, s, i, n, m));
}

#include "x86_quant_table.h" /* the quantize wrappers and x86_set_quant */

/* ---- dequantize wrappers: one per family and dtype, a case per element type ---- */

#define DARGS const bfp_dparams *p, const uint8_t *c, const uint8_t *sc, const uint8_t *m, \
              size_t nb, size_t last, void *d

A2 void d_mx_any(bfp_dtype dt, DARGS)
{
    switch (ks_elem_id(p->impl)) {
    case KS_ID_E2M1: d_mx(KS_E2M1, dt, p, c, sc, nb, d); break;
    case KS_ID_E2M3: d_mx(KS_E2M3, dt, p, c, sc, nb, d); break;
    case KS_ID_E3M2: d_mx(KS_E3M2, dt, p, c, sc, nb, d); break;
    case KS_ID_E4M3: d_mx(KS_E4M3, dt, p, c, sc, nb, d); break;
    case KS_ID_E5M2: d_mx(KS_E5M2, dt, p, c, sc, nb, d); break;
    case KS_ID_INT8: d_mx(KS_INT8, dt, p, c, sc, nb, d); break;
    case KS_ID_INT4: d_mx(KS_INT4, dt, p, c, sc, nb, d); break;
    }
}

A2 void d_mxplus_any(bfp_dtype dt, DARGS)
{
    switch (ks_elem_id(p->impl)) {
    case KS_ID_E2M1: d_mxplus(KS_E2M1, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E2M3: d_mxplus(KS_E2M3, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E3M2: d_mxplus(KS_E3M2, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E4M3: d_mxplus(KS_E4M3, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_E5M2: d_mxplus(KS_E5M2, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_INT8: d_mxplus(KS_INT8, dt, p, c, sc, m, nb, last, d); break;
    case KS_ID_INT4: d_mxplus(KS_INT4, dt, p, c, sc, m, nb, last, d); break;
    }
}

static void d_mx_f32(DARGS) { d_mx_any(BFP_DTYPE_F32, p, c, sc, m, nb, last, d); }
static void d_mx_bf16(DARGS) { d_mx_any(BFP_DTYPE_BF16, p, c, sc, m, nb, last, d); }
static void d_mxplus_f32(DARGS) { d_mxplus_any(BFP_DTYPE_F32, p, c, sc, m, nb, last, d); }
static void d_mxplus_bf16(DARGS) { d_mxplus_any(BFP_DTYPE_BF16, p, c, sc, m, nb, last, d); }
static void d_nvfp4_f32(DARGS) { d_nvfp4(BFP_DTYPE_F32, p, c, sc, m, nb, last, d); }
static void d_nvfp4_bf16(DARGS) { d_nvfp4(BFP_DTYPE_BF16, p, c, sc, m, nb, last, d); }
static void d_hif4_f32(DARGS) { d_hif4(p, BFP_DTYPE_F32, c, sc, nb, d); }
static void d_hif4_bf16(DARGS) { d_hif4(p, BFP_DTYPE_BF16, c, sc, nb, d); }

int bfp_cpu_avx2_init(bfp_kernels *k)
{
    x86_set_quant(k);
    for (int id = 1; id < BFP_CPU_NFMT; id++) {
        const bfp_format_impl *impl = bfp_impl_get((bfp_format)id);
        if (!impl)
            continue;
        bfp_dkernel *d = k->dequant[id];
        int eid = ks_elem_id(impl);
        switch (impl->info.family) {
        case BFP_FAMILY_MX:
            if (eid != KS_ID_NONE)
                d[0] = d_mx_f32, d[1] = d_mx_bf16;
            break;
        case BFP_FAMILY_MX_PLUS:
        case BFP_FAMILY_MX_PP:
            if (eid != KS_ID_NONE && special_rule_holds(impl->elem, ks_elem_of_id[eid]))
                d[0] = d_mxplus_f32, d[1] = d_mxplus_bf16;
            break;
        case BFP_FAMILY_NVFP4:
        case BFP_FAMILY_NVFP4_PLUS:
            if (ks_elem_is(impl->elem, KS_E2M1))
                d[0] = d_nvfp4_f32, d[1] = d_nvfp4_bf16;
            break;
        case BFP_FAMILY_HIF4:
            d[0] = d_hif4_f32, d[1] = d_hif4_bf16;
            break;
        }
    }
    return 1;
}

#else /* built without -mavx2 -mfma -mf16c */

int bfp_cpu_avx2_init(bfp_kernels *k)
{
    (void)k;
    return 0;
}

#endif

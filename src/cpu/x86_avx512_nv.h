/* x86_avx512_nv.h - NVFP4's tensor amax pass. Included by x86_avx512.c
 * only (its flags, its helpers).
 *
 * The pass runs from the end of its range to the start, so that the
 * quantize pass, which runs forward over the same range right after, finds
 * the last bytes read (as much as the caches hold) still there. */
#ifndef BFP_CPU_X86_AVX512_NV_H
#define BFP_CPU_X86_AVX512_NV_H

/* ---- amax (NVFP4 tensor scale) ------------------------------------------------------- */

/* Max of the magnitude bits (sign cleared) of n values: float32 in dword
 * lanes, bf16/f16 in word lanes (their magnitudes order as their values).
 * Non-finite values are included: the caller checks the result. Four
 * independent accumulators over 256 bytes per step, walking backwards. */
A5 uint32_t amax_bits_back(bfp_dtype dt, const unsigned char *s, size_t n)
{
    const size_t es = esz(dt), per = 256 / es;
    const int w32 = dt == BFP_DTYPE_F32;
    const __m512i mask = w32 ? _mm512_set1_epi32(0x7FFFFFFF) : _mm512_set1_epi16(0x7FFF);
    __m512i m[4];
    for (int k = 0; k < 4; k++)
        m[k] = _mm512_setzero_si512();
    uint32_t r = 0;
    size_t main = n - n % per;
    for (size_t i = main; i < n; i++) { /* the end first: it is read first */
        uint32_t a;
        if (w32) {
            memcpy(&a, s + 4 * i, 4);
            a &= 0x7FFFFFFFu;
        } else {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            a = h & 0x7FFFu;
        }
        r = a > r ? a : r;
    }
    for (const unsigned char *p = s + main * es; p > s;) {
        p -= 256;
        _mm_prefetch((const char *)p - PREFETCH_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)p - PREFETCH_AHEAD + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)p - PREFETCH_AHEAD + 128, _MM_HINT_T0);
        _mm_prefetch((const char *)p - PREFETCH_AHEAD + 192, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + 64 * k), mask);
            m[k] = w32 ? _mm512_max_epu32(m[k], v) : _mm512_max_epu16(m[k], v);
        }
    }
    __m512i v = w32 ? _mm512_max_epu32(_mm512_max_epu32(m[0], m[1]), _mm512_max_epu32(m[2], m[3]))
                    : _mm512_max_epu16(_mm512_max_epu16(m[0], m[1]), _mm512_max_epu16(m[2], m[3]));
    if (!w32) /* each dword's larger word */
        v = _mm512_max_epu32(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(v, 16));
    uint32_t vm = (uint32_t)_mm512_reduce_max_epu32(v);
    return vm > r ? vm : r;
}

/* The same over finite values only, for ranges holding NaN or Inf. */
A5 float amax_finite(bfp_dtype dt, const void *src, size_t n)
{
    const unsigned char *s = (const unsigned char *)src;
    const size_t es = esz(dt);
    const __m512i inf = _mm512_set1_epi32(0x7F800000);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i a0 = abs16(ld16(dt, s + i * es)), a1 = abs16(ld16(dt, s + (i + 16) * es));
        m0 = _mm512_mask_max_epi32(m0, _mm512_cmplt_epi32_mask(a0, inf), m0, a0);
        m1 = _mm512_mask_max_epi32(m1, _mm512_cmplt_epi32_mask(a1, inf), m1, a1);
    }
    uint32_t m = (uint32_t)_mm512_reduce_max_epi32(_mm512_max_epi32(m0, m1));
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

A5 float amax_any(bfp_dtype dt, const void *src, size_t n)
{
    uint32_t m = amax_bits_back(dt, (const unsigned char *)src, n);
    if (dt == BFP_DTYPE_F32)
        return m < 0x7F800000u ? ks_float(m) : amax_finite(dt, src, n);
    if (dt == BFP_DTYPE_BF16)
        return m < 0x7F80u ? ks_float(m << 16) : amax_finite(dt, src, n);
    return m < 0x7C00u ? ks_f16_to_f32((uint16_t)m) : amax_finite(dt, src, n);
}

#endif

/* x86_avx512_nvscale.h - the NVFP4 block-scale arithmetic of the AVX-512
 * quantizer, 16 blocks per vector: fp32(tmax / 6) without a division, its
 * UE4M3 code from the bits, the code's value. Self-contained (immintrin.h
 * and the A5 macro only) so that tools/dev/nv_scale_check.c can run it over
 * every float. Included by x86_avx512_nv.h. */
#ifndef BFP_CPU_X86_AVX512_NVSCALE_H
#define BFP_CPU_X86_AVX512_NVSCALE_H

#include <immintrin.h>

#ifndef A5
#define A5 static inline __attribute__((always_inline))
#endif

/* fp32(a / 6), as the reference's division, for finite a >= 2^-125 (below
 * that it may be one ulp off: a result under 2^-127, E4M3 code 0 either
 * way): q0 = a * RN(1/6), its remainder a - 6 q0 by FMA, one correction
 * step (as the CUDA quantizer's nv_div6). Checked against the division for
 * every finite float, and the E4M3 code of the result for every one
 * (docs/cpu.md); test_simd puts block maxima around every rounding point. */
A5 __m512 nv_div6_16(__m512 a)
{
    const __m512 c = _mm512_castsi512_ps(_mm512_set1_epi32(0x3E2AAAAB)); /* RN(1/6) */
    __m512 q0 = _mm512_mul_ps(a, c);
    return _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_set1_ps(6.0f), q0, a), c, q0);
}

/* E4M3 code of finite q >= 0 from its bits (ks_e4m3_code): RNE, saturating
 * at 0x7E. q >= 2^-6: the bits from bit 20 up, rounded to nearest even as
 * an integer shift, rebased from exponent 121 - 1; the exponent carries
 * itself. q < 2^-6: RNE(q * 2^9) = bits(q + 2^14) - bits(2^14) (the ulp of
 * [2^14, 2^15) is 2^-9). */
A5 __m512i nv_e4m3_code16(__m512 q)
{
    __m512i b = _mm512_castps_si512(q);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 20), _mm512_set1_epi32(1));
    __m512i nrm = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, lsb),
                                                     _mm512_set1_epi32(0x7FFFF - (960 << 20))), 20);
    __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(q, _mm512_set1_ps(16384.0f))),
                                   _mm512_set1_epi32(0x46800000));
    __m512i c = _mm512_mask_mov_epi32(nrm, _mm512_cmplt_epu32_mask(b, _mm512_set1_epi32(121 << 23)), sub);
    return _mm512_min_epi32(c, _mm512_set1_epi32(0x7E));
}

/* Values of 16 UE4M3 codes 0..0x7E (ks_e4m3_value): the normal formula
 * on c + 8 for c < 8 gives 2^-6 + c 2^-9, minus 2^-6 exactly. */
A5 __m512 nv_e4m3_value16(__m512i c)
{
    __mmask16 s = _mm512_cmplt_epi32_mask(c, _mm512_set1_epi32(8));
    __m512i n = _mm512_mask_add_epi32(c, s, c, _mm512_set1_epi32(8));
    __m512 v = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(n, 20), _mm512_set1_epi32(120 << 23)));
    return _mm512_mask_sub_ps(v, s, v, _mm512_set1_ps(0x1p-6f));
}

/* The same for eight blocks in 256-bit lanes (float32 input's groups of 8). */
A5 __m256 nv_div6_8(__m256 a)
{
    const __m256 c = _mm256_castsi256_ps(_mm256_set1_epi32(0x3E2AAAAB)); /* RN(1/6) */
    __m256 q0 = _mm256_mul_ps(a, c);
    return _mm256_fmadd_ps(_mm256_fnmadd_ps(_mm256_set1_ps(6.0f), q0, a), c, q0);
}

A5 __m256i nv_e4m3_code8(__m256 q)
{
    __m256i b = _mm256_castps_si256(q);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 20), _mm256_set1_epi32(1));
    __m256i nrm = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, lsb),
                                                     _mm256_set1_epi32(0x7FFFF - (960 << 20))), 20);
    __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(q, _mm256_set1_ps(16384.0f))),
                                   _mm256_set1_epi32(0x46800000));
    __m256i c = _mm256_mask_mov_epi32(nrm, _mm256_cmplt_epu32_mask(b, _mm256_set1_epi32(121 << 23)), sub);
    return _mm256_min_epi32(c, _mm256_set1_epi32(0x7E));
}

A5 __m256 nv_e4m3_value8(__m256i c)
{
    __mmask8 s = _mm256_cmplt_epi32_mask(c, _mm256_set1_epi32(8));
    __m256i n = _mm256_mask_add_epi32(c, s, c, _mm256_set1_epi32(8));
    __m256 v = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(n, 20), _mm256_set1_epi32(120 << 23)));
    return _mm256_mask_sub_ps(v, s, v, _mm256_set1_ps(0x1p-6f));
}

#endif

/* nv_scale_check.c - runs the AVX-512 NVFP4 block-scale helpers
 * (src/cpu/x86_avx512_nvscale.h) over every finite float a >= 0 as the
 * block max |t| and compares, bit for bit:
 *  - nv_div6_16(a) with the division a / 6.0f (all a >= 2^-125; below,
 *    counted apart: there only the code has to agree);
 *  - nv_e4m3_code16(nv_div6_16(a)) with the reference's block scale code
 *    ks_nvfp4_scale_code(a) (kern_scalar.h), for every a;
 *  - nv_e4m3_value16(c) with ks_e4m3_value(c) for every code 0..0x7E;
 *  - the 256-bit versions (nv_div6_8, nv_e4m3_code8, nv_e4m3_value8) with
 *    the 512-bit ones, for the same inputs.
 * Not a ctest (about 2^31 scalar reference calls, seconds at -O2):
 *   cc -O2 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -Iinclude -Isrc/core -Isrc/cpu \
 *      tools/dev/nv_scale_check.c -lm -o /tmp/nv_scale_check && /tmp/nv_scale_check
 * Exits 1 on any difference that matters. */
#include "kern_scalar.h"
#include "x86_avx512_nvscale.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    unsigned long bad_q = 0, tiny_q = 0, bad_code = 0, bad_val = 0, bad_ymm = 0;
    const __m512i step = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (uint32_t b = 0; b < 0x7F800000u; b += 16) {
        __m512i bits = _mm512_add_epi32(_mm512_set1_epi32((int)b), step);
        __m512 a = _mm512_castsi512_ps(bits);
        __m512 q = nv_div6_16(a);
        __mmask16 ne = _mm512_cmpneq_epi32_mask(_mm512_castps_si512(q),
                                                _mm512_castps_si512(_mm512_div_ps(a, _mm512_set1_ps(6.0f))));
        if (ne) {
            if (b >= 0x01000000u)
                bad_q += (unsigned long)__builtin_popcount(ne);
            else
                tiny_q += (unsigned long)__builtin_popcount(ne);
        }
        uint32_t code[16], code8[16];
        _mm512_storeu_si512(code, nv_e4m3_code16(q));
        for (int h = 0; h < 2; h++) {
            __m256 a8 = h ? _mm512_extractf32x8_ps(a, 1) : _mm512_castps512_ps256(a);
            __m256 q8 = nv_div6_8(a8);
            __m256 q16 = h ? _mm512_extractf32x8_ps(q, 1) : _mm512_castps512_ps256(q);
            if (_mm256_cmpneq_epi32_mask(_mm256_castps_si256(q8), _mm256_castps_si256(q16)))
                bad_ymm++;
            _mm256_storeu_si256((__m256i *)(code8 + 8 * h), nv_e4m3_code8(q8));
        }
        if (memcmp(code, code8, sizeof code))
            bad_ymm++;
        for (int i = 0; i < 16; i++)
            if (code[i] != ks_nvfp4_scale_code(ks_float(b + (uint32_t)i)) && bad_code++ < 5)
                printf("code of %08x: %u, reference %u\n", b + i, code[i], ks_nvfp4_scale_code(ks_float(b + (uint32_t)i)));
    }
    for (int c = 0; c < 0x7F; c++) {
        float v[16];
        _mm512_storeu_ps(v, nv_e4m3_value16(_mm512_set1_epi32(c)));
        if (ks_bits(v[0]) != ks_bits(ks_e4m3_value((unsigned)c)))
            bad_val++;
        _mm256_storeu_ps(v, nv_e4m3_value8(_mm256_set1_epi32(c)));
        if (ks_bits(v[0]) != ks_bits(ks_e4m3_value((unsigned)c)))
            bad_val++;
    }
    printf("quotient differs: %lu at a >= 2^-125, %lu below; codes differ: %lu; values differ: %lu; "
           "256-bit versions differ: %lu\n", bad_q, tiny_q, bad_code, bad_val, bad_ymm);
    return bad_q || bad_code || bad_val || bad_ymm;
}

/* x86_avx2_inl.h - 256-bit helpers shared by x86_avx2.c and x86_avx512.c
 * (both are compiled with at least -mavx2 -mfma -mf16c): loads of every
 * dtype, reductions, code-stream packing and unpacking, E4M3 scale math.
 * Include only from a file built with those flags. */
#ifndef BFP_CPU_X86_AVX2_INL_H
#define BFP_CPU_X86_AVX2_INL_H

#include "kern_scalar.h"

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

A2 __m256i abs8(__m256i x)
{
    return _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
}

/* Max of the 8 lanes (signed compare; callers pass non-negative values). */
A2 uint32_t hmax(__m256i m)
{
    m = _mm256_max_epi32(m, _mm256_permute2x128_si256(m, m, 1));
    m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, 0x4E));
    m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, 0xB1));
    return (uint32_t)_mm256_cvtsi256_si32(m);
}

/* Lane j of the result = max of the lanes of v[j] (non-negative values). */
A2 __m256i hmax_8x8(const __m256i *v)
{
    __m256i q[4], h[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        q[i] = _mm256_max_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        h[i] = _mm256_max_epi32(_mm256_unpacklo_epi64(q[2 * i], q[2 * i + 1]),
                                _mm256_unpackhi_epi64(q[2 * i], q[2 * i + 1]));
    return _mm256_max_epi32(_mm256_permute2x128_si256(h[0], h[1], 0x20),
                            _mm256_permute2x128_si256(h[0], h[1], 0x31));
}

/* floor(log2 a) per lane for finite a >= 0 (bits); a = 0 gives -276. */
A2 __m256i flog2_8(__m256i a)
{
    __m256i e = _mm256_srli_epi32(a, 23);
    __m256i sub = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(a)), 23); /* exact: a < 2^23 */
    __m256i is_sub = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
    return _mm256_blendv_epi8(_mm256_sub_epi32(e, _mm256_set1_epi32(127)),
                              _mm256_sub_epi32(sub, _mm256_set1_epi32(276)), is_sub);
}

/* 2^-k as float bits per lane, k in [-127, 127]. */
A2 __m256 pow2neg_8(__m256i k)
{
    __m256i b = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), k), 23);
    __m256i k127 = _mm256_cmpeq_epi32(k, _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(b, _mm256_set1_epi32(0x00400000), k127));
}

/* The low bytes of 8 dword lanes (values 0..255), as 8 bytes in order. */
A2 void store8_bytes(uint8_t *out, __m256i v)
{
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)out, _mm_packus_epi16(w, w));
}

/* float32 to bfloat16 as bfp_f32_to_bf16 (RNE, NaN kept quiet), 8 lanes
 * to the low 16 bits of each lane. */
A2 __m256i bf16_lanes(__m256 v)
{
    __m256i b = _mm256_castps_si256(v);
    __m256i nan = _mm256_cmpgt_epi32(abs8(b), _mm256_set1_epi32(0x7F800000));
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

/* Float32 values in the output's form: float32 bits, or bfloat16 bits in
 * the low half of each lane. */
A2 __m256i out_form8(bfp_dtype dt, __m256 v)
{
    return dt == BFP_DTYPE_F32 ? _mm256_castps_si256(v) : bf16_lanes(v);
}

/* 16 output values in the output's form (two vectors) to p. */
A2 void st16_lanes(bfp_dtype dt, unsigned char *p, __m256i a, __m256i b, int stream)
{
    if (dt == BFP_DTYPE_F32) {
        st16(dt, p, _mm256_castsi256_ps(a), _mm256_castsi256_ps(b), stream);
        return;
    }
    __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    if (stream)
        _mm256_stream_si256((__m256i *)p, h);
    else
        _mm256_storeu_si256((__m256i *)p, h);
}

/* Software prefetch of the bytes a loop will read PREFETCH_AHEAD bytes from
 * now: on the VMs measured, the hardware prefetcher alone left float32
 * quantization 30-40% short of what it reaches with it (bfloat16 input,
 * half the bytes per value, did not gain). Prefetches never fault. */
#define PREFETCH_AHEAD 2048

A2 void prefetch_span(const void *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)p + PREFETCH_AHEAD + o, _MM_HINT_T0);
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

/* E4M3 codes (RNE, satfinite) of 8 finite a >= 0 (ks_e4m3_code). */
A2 __m256i e4m3_code8(__m256 a)
{
    a = _mm256_min_ps(a, _mm256_set1_ps(448.0f));
    __m256i ee = _mm256_max_epi32(_mm256_srli_epi32(_mm256_castps_si256(a), 23), _mm256_set1_epi32(121));
    __m256i mult = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(257), ee), 23);
    __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(a, _mm256_castsi256_ps(mult)));
    q = _mm256_add_epi32(q, _mm256_slli_epi32(_mm256_sub_epi32(ee, _mm256_set1_epi32(121)), 3));
    return _mm256_min_epi32(q, _mm256_set1_epi32(0x7E));
}

/* Values of 8 UE4M3 codes 0..0x7E (ks_e4m3_value). */
A2 __m256 e4m3_value8(__m256i c)
{
    __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(c, 20),
                                                         _mm256_set1_epi32(120 << 23)));
    __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(0x1p-9f));
    return _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), c)));
}

/* The codes an MX+ decoder rejects (bfp_elem_code_is_special), as a rule
 * vector lanes can test; init checks it against the core code by code. */
enum { SPECIAL_NONE, SPECIAL_INT_MIN, SPECIAL_ABOVE_MAX };

A2 int special_rule(ks_elem e)
{
    if (e.kind == BFP_GRID_INT)
        return SPECIAL_INT_MIN;
    return e.max_mag < (1 << (e.bits - 1)) - 1 ? SPECIAL_ABOVE_MAX : SPECIAL_NONE;
}

static inline int special_rule_holds(const bfp_elem_desc *d, ks_elem e)
{
    const uint8_t *sp = bfp_cpu_elem_special(d);
    unsigned sbit = 1u << (e.bits - 1);
    for (unsigned c = 0; c < 2 * sbit; c++) {
        int rule = special_rule(e);
        int want = rule == SPECIAL_INT_MIN     ? c == sbit
                   : rule == SPECIAL_ABOVE_MAX ? (c & (sbit - 1)) > (unsigned)e.max_mag
                                               : 0;
        if (!sp || sp[c] != want)
            return 0;
    }
    return 1;
}

#endif /* BFP_CPU_X86_AVX2_INL_H */

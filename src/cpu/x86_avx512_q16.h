/* x86_avx512_q16.h - bfloat16 quantization in 16-bit lanes: a 32-element
 * block is one vector of 32 words, encoded in integer arithmetic on the
 * bfloat16 bits, twice the elements per instruction of widening to float32.
 * Included by x86_avx512.c only (its flags); its helpers come from
 * x86_avx512_enc.h.
 *
 * Why it is exact: with h = |x| bits (E = h >> 7, M = h & 0x7F), the value is
 * sig * 2^(max(E,1) - 134) with sig = M plus 128 when E > 0. Dividing by the
 * block's 2^s only moves the exponent, so the code is a round-to-nearest-even
 * right shift of an integer:
 *   FLOAT grids: with B - 1 = 126 + s + emin (the bfloat16 exponent of the
 *   grid's smallest normal, less one) and e1 = max(E,1) - 1, mn1 = min(e1, B-1):
 *   v = h - 128 mn1 is sig when E < B (a subnormal of the grid: shift by
 *   k = 7 - m + (B-1 - mn1)) and sig + 128 (E - B) when E >= B (normal:
 *   k = 7 - m, the exponent difference lands in the code's exponent field,
 *   a carry moves to the next binade by itself);
 *   INT grids: code = sig >> (133 + s - m - e1), k >= 1 because |x| < 2^(s+1).
 * Where k >= 9 (then v = sig < 256) the code is 0. This needs B >= 1 for
 * FLOAT grids and 133 + s - m >= 1 for INT ones: blocks with s < Q16_MIN_S
 * (only blocks whose max is below about 2^-98) take the float32 path. */
#ifndef BFP_CPU_X86_AVX512_Q16_H
#define BFP_CPU_X86_AVX512_Q16_H

#include "x86_avx512_enc.h"

#define Q16_MIN_S (-100)

/* The per-block word the encoder needs for scale exponent s, twice (one
 * dword: a broadcast of it is a plain load). */
A5 uint32_t q16_param(ks_elem e, int s)
{
    uint32_t w = (uint32_t)(e.kind == BFP_GRID_INT ? 133 + s - e.mbits : 126 + s + (1 - e.bias));
    return w | w << 16;
}

/* FLOAT grids: the shift count's base par + 7 - m, per word like par. */
A5 uint32_t q16_park(ks_elem e, uint32_t par)
{
    return par + (uint32_t)(7 - e.mbits) * 0x00010001u;
}

/* q16_param() of eight scale exponents. */
A5 __m256i q16_param8(ks_elem e, __m256i s)
{
    __m256i w = _mm256_add_epi32(s, _mm256_set1_epi32(e.kind == BFP_GRID_INT ? 133 - e.mbits : 126 + (1 - e.bias)));
    return _mm256_or_si256(w, _mm256_slli_epi32(w, 16));
}

/* The constants of enc32w() for one element type. */
typedef struct {
    __m512i one, hmt, c7fff, mag, sgn, mask, abs;
} q16k;

A5 q16k q16k_make(ks_elem e)
{
    q16k c;
    c.one = keep512(_mm512_set1_epi16(1));
    static const uint16_t hmt[32] = { /* 2^(k-1) - 1 for k = 1..16 */
        0, 0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 1023, 2047, 4095, 8191, 16383, 32767};
    c.hmt = keep512(_mm512_loadu_si512(hmt));
    c.c7fff = keep512(_mm512_set1_epi16(0x7FFF));
    c.mag = keep512(_mm512_set1_epi16((short)e.max_mag));
    c.sgn = keep512(_mm512_set1_epi16((short)(1 << (e.bits - 1))));
    c.mask = keep512(_mm512_set1_epi16((short)((1 << e.bits) - 1)));
    c.abs = c.c7fff;
    return c;
}

/* Round-to-nearest-even v >> k per word, v < 2^15, k >= 1. From k = 16 on
 * every shift gives 0 (the table entry, read at k mod 32, is at most 2^15 - 1:
 * the sum stays below 2^16): right for v < 256 (0 from k = 9 on), which is
 * all the callers pass there. */
A5 __m512i rne_shift32(const q16k *c, __m512i v, __m512i k)
{
    __m512i lsb = _mm512_and_si512(_mm512_srlv_epi16(v, k), c->one);
    __m512i hm = _mm512_permutexvar_epi16(k, c->hmt); /* 2^(k-1) - 1 */
    return _mm512_srlv_epi16(_mm512_add_epi16(_mm512_add_epi16(v, hm), lsb), k);
}

/* Codes (one per word) of 32 bfloat16 values x, h = |x| bits, par =
 * q16_param() broadcast; the lanes of bm (MX+: at most one) get the
 * magnitude xq with the element's sign instead. */
A5 __m512i enc32w_bm(ks_elem e, const q16k *c, __m512i x, __m512i h, __m512i par, __m512i park, __mmask32 bm,
                     __m512i xq)
{
    const __m512i e1 = _mm512_subs_epu16(_mm512_srli_epi16(h, 7), c->one);
    const __mmask32 neg = _mm512_movepi16_mask(x);
    __m512i q;
    if (e.kind == BFP_GRID_INT) {
        __m512i v = _mm512_sub_epi16(h, _mm512_slli_epi16(e1, 7));
        __m512i k = _mm512_sub_epi16(par, e1);
        q = _mm512_min_epu16(rne_shift32(c, v, k), c->mag);
        q = _mm512_mask_sub_epi16(q, neg, _mm512_setzero_si512(), q);
        q = _mm512_and_si512(q, c->mask);
        /* sign-magnitude there: the two's-complement code's top bit is the
         * sign (the block max is not 0) */
        return _mm512_mask_mov_epi16(q, bm, _mm512_ternarylogic_epi32(q, c->sgn, xq, 0xEA));
    }
    __m512i mn1 = _mm512_min_epu16(e1, par);
    __m512i v = _mm512_sub_epi16(h, _mm512_slli_epi16(mn1, 7));
    __m512i k = _mm512_sub_epi16(park, mn1); /* par + 7 - m - mn1 */
    q = _mm512_mask_mov_epi16(_mm512_min_epu16(rne_shift32(c, v, k), c->mag), bm, xq);
    return _mm512_mask_add_epi16(q, neg, q, c->sgn); /* q < the sign bit: add = or */
}

A5 __m512i enc32w(ks_elem e, const q16k *c, __m512i x, __m512i h, __m512i par, __m512i park)
{
    return enc32w_bm(e, c, x, h, par, park, 0, _mm512_setzero_si512());
}

/* 32 codes (words) at width w into out (16, 24 or 32 bytes). */
A5 void store_codes32w(int w, __m512i c, __m512i madd, uint8_t *out)
{
    if (w == 4) /* c0 + 16 c1 per dword, then its low byte */
        _mm_storeu_si128((__m128i *)out, _mm512_cvtepi32_epi8(_mm512_madd_epi16(c, madd)));
    else if (w == 8)
        _mm256_storeu_si256((__m256i *)out, _mm512_cvtepi16_epi8(c));
    else
        store_codes(6, _mm512_cvtepi16_epi8(c), out);
}

/* Four blocks' 4-bit codes (words, q[i] block i) as 64 bytes: the packs
 * interleave the blocks per 128-bit lane, one dword permute restores the
 * order (cheaper than four vpmovdb). */
A5 void store_codes4x32w4(const __m512i *q, __m512i madd, uint8_t *out)
{
    __m512i w0 = _mm512_packus_epi32(_mm512_madd_epi16(q[0], madd), _mm512_madd_epi16(q[1], madd));
    __m512i w1 = _mm512_packus_epi32(_mm512_madd_epi16(q[2], madd), _mm512_madd_epi16(q[3], madd));
    /* lane l: dwords l of blocks 0, 1, 2, 3 */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_si512(out, _mm512_permutexvar_epi32(idx, _mm512_packus_epi16(w0, w1)));
}

/* Lane j of the result: the max word of h[j] (unsigned), shifted up 16 bits
 * (float32 bits of a bfloat16 maximum). A transposing reduction: words of
 * two blocks interleaved, then dwords of four, qwords of eight (each 128-bit
 * lane holds one partial max per block), then across the four lanes. */
A5 __m256i hmax8w(const __m512i *h)
{
    __m512i m[4], n[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        m[i] = _mm512_max_epu16(_mm512_unpacklo_epi16(h[2 * i], h[2 * i + 1]),
                                _mm512_unpackhi_epi16(h[2 * i], h[2 * i + 1]));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        n[i] = _mm512_max_epu16(_mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]),
                                _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
    __m512i r = _mm512_max_epu16(_mm512_unpacklo_epi64(n[0], n[1]), _mm512_unpackhi_epi64(n[0], n[1]));
    /* across the four lanes in halves: narrower operations cost less on Zen 4 */
    __m256i r2 = _mm256_max_epu16(_mm512_castsi512_si256(r), _mm512_extracti64x4_epi64(r, 1));
    __m128i r1 = _mm_max_epu16(_mm256_castsi256_si128(r2), _mm256_extracti128_si256(r2, 1));
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(r1), 16);
}

/* Top two of a multiset, kept as (largest, second) vector pairs: merging
 * (a1, a2) and (b1, b2) gives max(a1, b1) and max(min(a1, b1), a2, b2). */
A5 void top2_merge16(__m512i a1, __m512i a2, __m512i b1, __m512i b2, __m512i *m1, __m512i *m2)
{
    *m1 = _mm512_max_epu16(a1, b1);
    *m2 = _mm512_max_epu16(_mm512_min_epu16(a1, b1), _mm512_max_epu16(a2, b2));
}

/* hmax8w() and, in *second, the second largest word of each h[j] (the
 * largest again where it repeats: MX++'s max of the other elements). */
A5 __m256i hmax8w_top2(const __m512i *h, __m256i *second)
{
    __m512i m1[4], m2[4], n1[2], n2[2], r1, r2;
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512i l = _mm512_unpacklo_epi16(h[2 * i], h[2 * i + 1]), u = _mm512_unpackhi_epi16(h[2 * i], h[2 * i + 1]);
        m1[i] = _mm512_max_epu16(l, u);
        m2[i] = _mm512_min_epu16(l, u);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        top2_merge16(_mm512_unpacklo_epi32(m1[2 * i], m1[2 * i + 1]), _mm512_unpacklo_epi32(m2[2 * i], m2[2 * i + 1]),
                     _mm512_unpackhi_epi32(m1[2 * i], m1[2 * i + 1]), _mm512_unpackhi_epi32(m2[2 * i], m2[2 * i + 1]),
                     &n1[i], &n2[i]);
    top2_merge16(_mm512_unpacklo_epi64(n1[0], n1[1]), _mm512_unpacklo_epi64(n2[0], n2[1]),
                 _mm512_unpackhi_epi64(n1[0], n1[1]), _mm512_unpackhi_epi64(n2[0], n2[1]), &r1, &r2);
    /* across the four lanes in halves, as hmax8w() */
    __m256i a1 = _mm512_castsi512_si256(r1), b1 = _mm512_extracti64x4_epi64(r1, 1);
    __m256i t1 = _mm256_max_epu16(a1, b1),
            t2 = _mm256_max_epu16(_mm256_min_epu16(a1, b1),
                                  _mm256_max_epu16(_mm512_castsi512_si256(r2), _mm512_extracti64x4_epi64(r2, 1)));
    __m128i c1 = _mm256_castsi256_si128(t1), d1 = _mm256_extracti128_si256(t1, 1);
    __m128i u1 = _mm_max_epu16(c1, d1),
            u2 = _mm_max_epu16(_mm_min_epu16(c1, d1),
                               _mm_max_epu16(_mm256_castsi256_si128(t2), _mm256_extracti128_si256(t2, 1)));
    *second = _mm256_slli_epi32(_mm256_cvtepu16_epi32(u2), 16);
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(u1), 16);
}

/* MX (not MX+) blocks of bfloat16 in groups of eight, from the start;
 * returns the blocks done (the caller finishes the rest). */
A5 size_t q_mx_groups16(ks_elem e, const enck *k, const void *src, size_t nb, uint8_t *codes, uint8_t *scales,
                        size_t *nonfinite)
{
    const size_t cb = (size_t)(4 * e.bits);
    const unsigned char *s = (const unsigned char *)src;
    const q16k c = q16k_make(e);
    const __m512i madd = keep512(_mm512_set1_epi32(0x00100001));
    size_t b = 0;
    for (; b + 8 <= nb; b += 8, s += 8 * 64, codes += 8 * cb) {
        prefetch_span(s, 8 * 64);
        __m512i h[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            h[j] = _mm512_and_si512(_mm512_loadu_si512(s + 64 * j), c.abs);
        __m256i amax = hmax8w(h);
        __m256i nf = _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF));
        __m256i se = _mm256_sub_epi32(flog2_8(amax), _mm256_set1_epi32(e.emax));
        se = _mm256_min_epi32(_mm256_max_epi32(se, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
        store8_bytes(scales + b, _mm256_or_si256(_mm256_add_epi32(se, _mm256_set1_epi32(127)),
                                                 _mm256_and_si256(nf, _mm256_set1_epi32(0xFF))));
        int sev[8];
        uint32_t parv[8], parkv[8];
        _mm256_storeu_si256((__m256i *)sev, se);
        const __m256i par8 = q16_param8(e, se);
        _mm256_storeu_si256((__m256i *)parv, par8);
        _mm256_storeu_si256((__m256i *)parkv, _mm256_add_epi32(par8, _mm256_set1_epi32((int)q16_park(e, 0))));
        unsigned nfm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nf));
        unsigned zm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(amax, _mm256_setzero_si256())));
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            uint8_t *cj = codes + (size_t)j * cb;
            if (nfm >> j & 1) {
                memset(cj, 0, cb);
                (*nonfinite)++;
            } else if (zm >> j & 1) { /* every element +-0 (pruned): the code is the sign (INT: 0) */
                __m512i q = _mm512_setzero_si512();
                if (e.kind != BFP_GRID_INT)
                    q = _mm512_slli_epi16(_mm512_srli_epi16(_mm512_loadu_si512(s + 64 * j), 15), e.bits - 1);
                store_codes32w(e.bits, q, madd, cj);
            } else if (sev[j] < Q16_MIN_S) {
                mx_encode16(e, k, BFP_DTYPE_BF16, s + 64 * j, _mm512_set1_ps(ks_pow2(-sev[j])), cj);
            } else {
                __m512i x = _mm512_loadu_si512(s + 64 * j);
                __m512i par = _mm512_broadcastd_epi32(_mm_loadu_si32(parv + j));
                __m512i park = _mm512_broadcastd_epi32(_mm_loadu_si32(parkv + j));
                store_codes32w(e.bits, enc32w(e, &c, x, h[j], par, park), madd, cj);
            }
        }
    }
    return b;
}

#endif /* BFP_CPU_X86_AVX512_Q16_H */

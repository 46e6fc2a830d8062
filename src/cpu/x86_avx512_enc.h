/* x86_avx512_enc.h - the 16-lane pieces that x86_avx512.c's quantizers and
 * x86_avx512_q16.h's bfloat16 path share: loads of 16 values as float32
 * bits, absolute values, rounding, code packing, the element encoder (enck,
 * enc16, mx_encode16) and a block's absolute maximum. Included inside
 * x86_avx512.c's AVX-512 guard, under its flags. */
#ifndef BFP_CPU_X86_AVX512_ENC_H
#define BFP_CPU_X86_AVX512_ENC_H

#include "kern_scalar.h"
#include "x86_avx2_inl.h"

#define A5 static inline __attribute__((always_inline))

/* ---- loads, stores ------------------------------------------------------------- */

/* 16 values of dtype as float32 bits. */
A5 __m512i ld16(bfp_dtype dt, const unsigned char *p)
{
    if (dt == BFP_DTYPE_F32)
        return _mm512_loadu_si512(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dt == BFP_DTYPE_BF16)
        return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    return _mm512_castps_si512(_mm512_cvtph_ps(h));
}

A5 __m512i abs16(__m512i x)
{
    return _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF));
}

/* The max of a vector's two halves, as 8 lanes. */
A5 __m256i fold16(__m512i m)
{
    return _mm256_max_epi32(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
}

/* Round to the nearest integer, ties to even, whatever MXCSR says. */
A5 __m512i rne16(__m512 v)
{
    return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* ---- code streams -------------------------------------------------------------- */

/* 16 4-bit codes (dwords) as 8 bytes. */
A5 __m128i nib_bytes16(__m512i c)
{
    return _mm512_cvtepi64_epi8(_mm512_or_si512(c, _mm512_srli_epi64(c, 28)));
}

/* 64 4-bit codes (four vectors of dwords) as 32 bytes, in fewer steps than
 * four nib_bytes16: the packs leave each 128-bit lane L holding codes
 * 4L..4L+3 of c[0], c[1], c[2], c[3] in turn; a multiply-add joins the
 * pairs, and a word permutation puts the pair words in order. */
A5 __m256i nib_bytes64(const __m512i *c)
{
    __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(c[0], c[1]), _mm512_packus_epi32(c[2], c[3]));
    __m256i w = _mm512_cvtepi16_epi8(_mm512_maddubs_epi16(b, _mm512_set1_epi16(0x1001))); /* c0 + 16 c1 */
    return _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), w);
}

/* 32 codes (two vectors of dwords) at width w into out (16, 24, 32 bytes). */
A5 void store_codes32(int w, __m512i c0, __m512i c1, uint8_t *out)
{
    if (w == 4) {
        _mm_storeu_si128((__m128i *)out, _mm_unpacklo_epi64(nib_bytes16(c0), nib_bytes16(c1)));
    } else if (w == 8) {
        _mm_storeu_si128((__m128i *)out, _mm512_cvtepi32_epi8(c0));
        _mm_storeu_si128((__m128i *)(out + 16), _mm512_cvtepi32_epi8(c1));
    } else {
        store_codes(6, _mm256_set_m128i(_mm512_cvtepi32_epi8(c1), _mm512_cvtepi32_epi8(c0)), out);
    }
}

/* ---- element codecs ------------------------------------------------------------- */

/* An opaque copy of a constant: GCC otherwise rebuilds vector constants
 * from a general register (two uops, one on the shuffle port) at every use
 * inside a loop; made once per call and kept in a register it costs nothing. */
A5 __m512i keep512(__m512i v)
{
    __asm__("" : "+v"(v));
    return v;
}

/* The constants of enc16() for one element type. */
typedef struct {
    __m512i eminb, c254m, mag, sgn, mask;
    __m512 im;
} enck;

A5 enck enck_make(ks_elem e)
{
    enck k;
    k.eminb = keep512(_mm512_set1_epi32(128 - e.bias));
    k.c254m = keep512(_mm512_set1_epi32(254 + e.mbits));
    k.mag = keep512(_mm512_set1_epi32(e.max_mag));
    k.sgn = keep512(_mm512_set1_epi32(1 << (e.bits - 1)));
    k.mask = keep512(_mm512_set1_epi32((1 << e.bits) - 1));
    k.im = _mm512_castsi512_ps(keep512(_mm512_castps_si512(_mm512_set1_ps((float)(1 << e.mbits)))));
    return k;
}

/* Codes of 16 values (kern_scalar.h's ks_enc_mag): a = |x|, f = 2^-exponent. */
A5 __m512i enc16(ks_elem e, const enck *k, __m512i x, __m512i a, __m512 f)
{
    __m512 y = _mm512_mul_ps(_mm512_castsi512_ps(a), f);
    __mmask16 neg = _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512());
    __m512i q;
    if (e.kind == BFP_GRID_INT) {
        q = _mm512_min_epi32(rne16(_mm512_mul_ps(y, k->im)), k->mag);
        q = _mm512_mask_sub_epi32(q, neg, _mm512_setzero_si512(), q);
        return _mm512_and_si512(q, k->mask);
    }
    __m512i ee = _mm512_max_epi32(_mm512_srli_epi32(_mm512_castps_si512(y), 23), k->eminb);
    __m512i mult = _mm512_slli_epi32(_mm512_sub_epi32(k->c254m, ee), 23);
    q = rne16(_mm512_mul_ps(y, _mm512_castsi512_ps(mult)));
    q = _mm512_add_epi32(q, _mm512_slli_epi32(_mm512_sub_epi32(ee, k->eminb), e.mbits));
    q = _mm512_min_epi32(q, k->mag);
    return _mm512_mask_or_epi32(q, neg, q, k->sgn);
}

/* ---- MX -------------------------------------------------------------------------- */

A5 void mx_encode16(ks_elem e, const enck *k, bfp_dtype dt, const unsigned char *s, __m512 f, uint8_t *codes)
{
    __m512i x0 = ld16(dt, s), x1 = ld16(dt, s + 16 * esz(dt));
    store_codes32(e.bits, enc16(e, k, x0, abs16(x0), f), enc16(e, k, x1, abs16(x1), f), codes);
}

A5 __m512i block32_absmax16(bfp_dtype dt, const unsigned char *s)
{
    if (dt != BFP_DTYPE_F32) { /* 16-bit magnitudes order as their values: max first */
        __m512i h = _mm512_and_si512(_mm512_loadu_si512(s), _mm512_set1_epi16(0x7FFF));
        h = _mm512_max_epu16(h, _mm512_srli_epi32(h, 16)); /* low half of each lane */
        if (dt == BFP_DTYPE_BF16)
            return _mm512_slli_epi32(h, 16);
        return _mm512_castps_si512(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
    }
    return _mm512_max_epi32(abs16(ld16(dt, s)), abs16(ld16(dt, s + 16 * esz(dt))));
}

#endif

/* bfp_cuda_quant_bf16.cuh - the MX-family encoder for bfloat16 input on two
 * elements per instruction (bf16x2 arithmetic and 16x2 integer min/max,
 * sm_90), for round-to-nearest-even onto a FLOAT element grid (below; the
 * INT grids: enc2_int_bf16, with its own argument). The generic
 * encoder (enc_mag) spends about 33 instructions per element, which made the
 * quantizers issue-bound at half the copy bandwidth; this one about 8.
 *
 * Exactness, per element x of a block with shared scale 2^se:
 *  - v = |x| * 2^-se in bf16 is exact: a power-of-two scaling of an 8-bit
 *    significand, unless v falls below 2^-126, where every grid rounds it to
 *    0 (the smallest half-step is E5M2's 2^-17) whatever the low bits are.
 *  - For the grid step at v, 2^(e - m) with e = max(floor(log2 v), emin),
 *    M = 2^(e + 7 - m) has a bf16 ulp of exactly that step and v < M / 32,
 *    so r = bf16_rne(M + v) = M + step * rne(v / step) with one rounding:
 *    r - M in bf16 bits is rne(v / step), ties to even, and a round-up into
 *    the next binade carries into the index by itself.
 *  - index = rne(v / step) + ((e - emin) << m), then the grid's saturation.
 * Subnormal bf16 operands and results are kept by mul/add.rn.bf16x2 (PTX:
 * subnormals are supported for bf16 arithmetic). */
#ifndef BFP_CUDA_QUANT_BF16_CUH
#define BFP_CUDA_QUANT_BF16_CUH

#include "bfp_cuda_common.cuh"
#include "bfp_cuda_ptx.cuh"

#ifndef __CUDA_ARCH__
#include <cmath>
#include <cstring>
#endif

namespace bfpcuda {

constexpr uint32_t LANES2 = 0x00010001u; /* a 16-bit constant in both lanes */

/* 2^k in both bf16 lanes, k in [-126, 127] (a normal bf16) */
__device__ __forceinline__ uint32_t pow2_bf16x2(int k) { return (uint32_t)(k + 127) * 0x80u * LANES2; }

/* the 4 words of 8 bf16 elements as an array */
__device__ __forceinline__ void words_of(const uint4 &w, uint32_t in[4])
{
    in[0] = w.x;
    in[1] = w.y;
    in[2] = w.z;
    in[3] = w.w;
}

/* max |x| of 8 bf16 elements, as fp32 bits (NaN above +Inf, as bits) */
__device__ __forceinline__ uint32_t amax8_bf16(const uint4 &w)
{
    uint32_t m = max_u16x2(max_u16x2(w.x & 0x7FFF7FFFu, w.y & 0x7FFF7FFFu),
                           max_u16x2(w.z & 0x7FFF7FFFu, w.w & 0x7FFF7FFFu));
    return max(m & 0xFFFFu, m >> 16) << 16;
}

/* lowest j with |x_j| == am16 (a bf16 magnitude), 8 if none */
__device__ __forceinline__ int first_eq_bf16(const uint4 &w, uint32_t am16)
{
    uint32_t in[4];
    words_of(w, in);
    uint32_t hit = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t d = (in[k] & 0x7FFF7FFFu) ^ (am16 * LANES2);
        hit |= ((d & 0xFFFFu) == 0 ? 1u : 0u) << (2 * k) | ((d >> 16) == 0 ? 2u : 0u) << (2 * k);
    }
    return hit ? __ffs(hit) - 1 : 8;
}

/* Lowest j in 0..7 with |x_j| == am, for am (fp32 bits) the max |x| of the
 * 8 elements v: a lane plus 0x8000 - am16 reaches bit 15 exactly on a hit
 * (no carry out: a lane <= am16), and PRMT replicates that bit into byte i
 * of p (elements 0-3) or q (4-7). */
__device__ __forceinline__ int first_max8_bf16(const uint4 &v, uint32_t am)
{
    uint32_t h[4];
    words_of(v, h);
    const uint32_t K = (0x8000u - (am >> 16)) * LANES2;
#pragma unroll
    for (int t = 0; t < 4; t++)
        h[t] = (h[t] & 0x7FFF7FFFu) + K; /* word t: elements 2t, 2t + 1 */
    uint32_t p = prmt_sx(h[0], h[1], 0xFDB9u), q = prmt_sx(h[2], h[3], 0xFDB9u);
    return p ? (__ffs(p) - 1) >> 3 : 4 + ((__ffs(q) - 1) >> 3);
}

/* The first of the 4 groups whose max a8[k] is am (the block's max). */
__device__ __forceinline__ int first_max_group(const uint32_t a8[4], uint32_t am)
{
    return a8[0] == am ? 0 : a8[1] == am ? 1 : a8[2] == am ? 2 : 3;
}

/* Lowest j in 0..31 with |x_j| == am, for am the max |x| of the 32 elements
 * w, given the maxima a8[k] = amax8_bf16(w[k]) of the 8-element groups. */
__device__ __forceinline__ int first_max32_bf16(const uint4 w[4], const uint32_t a8[4], uint32_t am)
{
    int kb = first_max_group(a8, am);
    uint4 v = kb == 0 ? w[0] : kb == 1 ? w[1] : kb == 2 ? w[2] : w[3]; /* a copy, not an address */
    return 8 * kb + first_max8_bf16(v, am);
}

/* The operands of a block's encoder for shared exponent se: FLOAT grids,
 * f2 = 2^-se (se <= 126 for bf16 input); INT grids, f2 = 2^(c - se) and
 * m2 = 2^(7 - m + c) with c = (se > 0), both normal for se in [-127, 127]. */
template <int ELEM>
__device__ __forceinline__ void enc_args_bf16(int se, uint32_t &f2, uint32_t &m2)
{
    constexpr Grid G = grid_of(ELEM);
    int c = G.kind == GK_INT && se > 0 ? 1 : 0;
    f2 = pow2_bf16x2(c - se);
    m2 = pow2_bf16x2(7 - G.m + c);
}

/* Magnitude indices of a word of 2 elements on FLOAT grid ELEM, scaled by
 * f2, one per 16-bit lane. */
template <int ELEM>
__device__ __forceinline__ uint32_t enc2_float_idx_bf16(uint32_t x2, uint32_t f2)
{
    constexpr Grid G = grid_of(ELEM);
    constexpr uint32_t EMINB = (uint32_t)(128 - G.bias) << 7; /* 2^(1 - bias) */
    constexpr uint32_t DELTA = (uint32_t)(7 - G.m) << 7;
    uint32_t v = bf2_mul(x2 & 0x7FFF7FFFu, f2);
    uint32_t mb = max_u16x2(v & 0x7F807F80u, EMINB * LANES2);
    uint32_t M = mb + DELTA * LANES2;
    uint32_t r = bf2_add(v, M);
    /* per lane: r >= M and mb >= EMINB, so no borrow crosses lanes; the
     * shift keeps each lane's bits in its lane (they are multiples of 2^7) */
    uint32_t idx = (r - M) + ((mb - EMINB * LANES2) >> (7 - G.m));
    return min_u16x2(idx, (uint32_t)G.maxidx * LANES2);
}

/* Signed codes of a word of 2 elements on FLOAT grid ELEM, scaled by f2. */
template <int ELEM>
__device__ __forceinline__ uint32_t enc2_float_bf16(uint32_t x2, uint32_t f2)
{
    constexpr uint32_t SIGN = (1u << (grid_of(ELEM).bits - 1)) * LANES2;
    return enc2_float_idx_bf16<ELEM>(x2, f2) | ((x2 >> (16 - grid_of(ELEM).bits)) & SIGN);
}

/* Two's complement codes of a word of 2 elements on INT grid ELEM (value
 * k / 2^m): k = rne(|x| 2^(m - se)), clamped, negated for negative x.
 * Exactness: with f2, m2 of enc_args_bf16, u = |x| f2 < 2^(1 + c) <= m2
 * (|x| < 2^(se + 1) for every scale mode's se >= floor(log2 amax)); in
 * [m2, 2 m2] the bf16 ulp is 2^(c - m), one step. The FMA rounds the exact
 * u + m2 once, so r - m2 in bits is rne(|x| 2^(m - se)), ties to even, 128
 * for a round-up to 2 m2; no product is rounded, so small or subnormal x
 * need no care. The negation stays in each 16-bit lane: idx ^ neg <= 0xFF. */
template <int ELEM>
__device__ __forceinline__ uint32_t enc2_int_bf16(uint32_t x2, uint32_t f2, uint32_t m2)
{
    constexpr Grid G = grid_of(ELEM);
    constexpr uint32_t ONES = (1u << G.bits) - 1;
    uint32_t r = bf2_fma(x2 & 0x7FFF7FFFu, f2, m2);
    uint32_t idx = min_u16x2(r - m2, (uint32_t)G.maxidx * LANES2);
    uint32_t s = (x2 >> 15) & LANES2, neg = s * ONES;
    return ((idx ^ neg) + s) & (ONES * LANES2);
}

/* The 8 codes, packed as the format stores them (element j at bits W*j). */
template <int ELEM>
__device__ __forceinline__ PackT<grid_of(ELEM).bits> enc8_bf16(const uint4 &w, uint32_t f2,
                                                                uint32_t m2)
{
    constexpr int W = grid_of(ELEM).bits;
    uint32_t in[4], c[4];
    words_of(w, in);
#pragma unroll
    for (int k = 0; k < 4; k++)
        c[k] = grid_of(ELEM).kind == GK_INT ? enc2_int_bf16<ELEM>(in[k], f2, m2)
                                            : enc2_float_bf16<ELEM>(in[k], f2);
    if (W == 4) {
#pragma unroll
        for (int k = 0; k < 4; k++)
            c[k] |= c[k] >> 12; /* byte 0: lane 0 | lane 1 << 4 */
        return (PackT<W>)__byte_perm(__byte_perm(c[0], c[1], 0x0040), __byte_perm(c[2], c[3], 0x0040),
                                     0x5410);
    }
    if (W == 8) {
        uint64_t lo = __byte_perm(c[0], c[1], 0x6420), hi = __byte_perm(c[2], c[3], 0x6420);
        return (PackT<W>)(lo | hi << 32);
    }
    uint64_t p = 0; /* W == 6: 12 bits per word */
#pragma unroll
    for (int k = 0; k < 4; k++)
        p |= (uint64_t)((c[k] | c[k] >> 10) & 0xFFFu) << (12 * k);
    return (PackT<W>)p;
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_BF16_CUH */

/* bfp_cuda_qblock_mxpp.cuh - MX++ (SPEC section 5) for bf16 input with a
 * whole block per thread: the MX+ block kernel (mx_block_bf16) plus the
 * second shared exponent of the non-block-max elements (NBM).
 *
 * Decisions, as mxplus.c: the block max (BM) is the lowest index holding
 * the max magnitude am; max2 is the largest NBM magnitude, i.e. the second
 * largest |x| of the block counted with multiplicity (am again when am
 * occurs twice); nbm = clamp(floor(log2 max2) - emax + 1, se - 7, se), or
 * se when max2 = 0; meta = index | (se - nbm) << 5. Every element is
 * encoded by the bf16x2 encoder at scale 2^nbm (its magnitude part,
 * enc2_float_idx_bf16; the signs and packing here), then the BM's code is
 * replaced by its extended one (bm_mag, from the bits of am).
 *
 * Exactness of the bf16x2 encoder at scale 2^nbm (the argument at the top
 * of bfp_cuda_quant_bf16.cuh, checked for this scale):
 *  - the encoder needs 2^-nbm as a normal bf16, -nbm <= 127. MX++ allows
 *    nbm down to se - 7 = -133 (se >= -126 in an unflushed block). For
 *    -nbm > 127 the elements are first multiplied by 2^64: exact, as the
 *    block is tiny (|x| < 2^-118) and a power-of-two product of a bf16
 *    (subnormal ones included) in the normal range is exact; the encoder
 *    then scales by 2^(-nbm - 64), a normal bf16.
 *  - a product |x| 2^-nbm below 2^-126 may be rounded (or flushed) by the
 *    multiplication; its exact value is then below 2^-126, far below half
 *    the smallest step of every grid (2^-17), so the reference rounds it to
 *    0, and so does the encoder for any value below half a step (its
 *    binade is clamped to emin and r - M rounds to 0). That is a property
 *    of the grids, not of the scale: it holds for 2^-nbm as for 2^-se.
 *  - the products stay far from overflow: |x| <= am < 2^(se + emax + 1)
 *    and -nbm <= 7 - se, so |x| 2^-nbm < 2^(emax + 8); the encoder's lane
 *    index stays below 2^16 and saturates as for MX (the BM, the only
 *    element beyond the grid when nbm < se, gets its own code anyway). */
#ifndef BFP_CUDA_QBLOCK_MXPP_CUH
#define BFP_CUDA_QBLOCK_MXPP_CUH

#include "bfp_cuda_quant_mxplus.cuh"
#include "bfp_cuda_quant_rows.cuh"

namespace bfpcuda {

/* second largest of four values, with multiplicity */
__device__ __forceinline__ uint32_t second_of4(const uint32_t a[4])
{
    uint32_t h01 = max(a[0], a[1]), h23 = max(a[2], a[3]);
    return max(min(h01, h23), max(min(a[0], a[1]), min(a[2], a[3])));
}

/* the 16-bit lanes of a word swapped */
__device__ __forceinline__ uint32_t swap16(uint32_t a) { return __byte_perm(a, 0, 0x1032); }

/* Second largest |x| of 8 bf16 elements, with multiplicity: per 16-bit lane
 * the top two of its 4 elements (a min/max tournament), then across the
 * lanes max(second lo, second hi, min(top lo, top hi)). Returned as M << 16
 * | M for the bf16 magnitude M: the same floor(log2) as the fp32 bits M <<
 * 16, and the same order against fp32 bits of other bf16 magnitudes. */
__device__ __forceinline__ uint32_t second8_bf16(const uint4 &w)
{
    uint32_t a[4];
    words_of(w, a);
#pragma unroll
    for (int k = 0; k < 4; k++)
        a[k] &= 0x7FFF7FFFu;
    uint32_t h01 = max_u16x2(a[0], a[1]), h23 = max_u16x2(a[2], a[3]);
    uint32_t top = max_u16x2(h01, h23);
    uint32_t sec = max_u16x2(min_u16x2(h01, h23), max_u16x2(min_u16x2(a[0], a[1]), min_u16x2(a[2], a[3])));
    uint32_t s = max_u16x2(sec, min_u16x2(top, swap16(top)));
    return max_u16x2(s, swap16(s));
}

/* The 8 codes of w on FLOAT grid ELEM at scale f2, packed as enc8_bf16
 * packs them, in fewer instructions (its packing was about a fifth of a
 * block's SASS instructions): one PRMT with sign replication yields the signs of 4 elements
 * (the top bits of bytes 1 and 3 of two words) as byte masks, where
 * enc8_bf16 shifts and masks each word, and the fields are joined a byte
 * or a 16-bit half at a time. 4-bit: the indices (< 8) of two words go to
 * bytes 0, 2 (one word) and 1, 3 (the other, shifted by 8), the signs to
 * bit 3 of those bytes, and b + (b >> 12) moves bytes 2, 3 to the high
 * nibbles of bytes 0, 1 (no bits overlap). */
template <int ELEM>
__device__ __forceinline__ PackT<grid_of(ELEM).bits> enc8_signs_bf16(const uint4 &w, uint32_t f2)
{
    constexpr int W = grid_of(ELEM).bits;
    uint32_t in[4], c[4];
    words_of(w, in);
#pragma unroll
    for (int k = 0; k < 4; k++)
        c[k] = enc2_float_idx_bf16<ELEM>(in[k], f2);
    uint32_t q[2];
    if constexpr (W == 4) {
#pragma unroll
        for (int t = 0; t < 2; t++) { /* elements 4t..4t+3 at bytes 0, 2, 1, 3 */
            uint32_t b = c[2 * t] + (c[2 * t + 1] << 8);
            b |= prmt_sx(in[2 * t], in[2 * t + 1], 0xFBD9u) & 0x08080808u;
            q[t] = b + (b >> 12);
        }
        return (PackT<W>)__byte_perm(q[0], q[1], 0x5410);
    }
    /* 6- and 8-bit: the codes of elements 4t..4t+3 (two words) at bytes 0..3 */
    constexpr uint32_t SIGNS = (1u << (W - 1)) * 0x01010101u;
#pragma unroll
    for (int t = 0; t < 2; t++)
        q[t] = __byte_perm(c[2 * t], c[2 * t + 1], 0x6420) |
               (prmt_sx(in[2 * t], in[2 * t + 1], 0xFDB9u) & SIGNS);
    if constexpr (W == 6) {
        /* bytes 1 and 3 down 2 bits beside bytes 0 and 2 (two bits of junk
         * land in bits 14-15), then bits 16-27 down 4 beside bits 0-11 */
#pragma unroll
        for (int t = 0; t < 2; t++) {
            q[t] = (q[t] & 0x003F003Fu) | ((q[t] >> 2) & ~0x003F003Fu);
            q[t] = (q[t] & 0xFFFu) | ((q[t] >> 4) & ~0xFFFu);
        }
        return (PackT<W>)(q[0] | (uint64_t)q[1] << 24);
    }
    return (PackT<W>)(q[0] | (uint64_t)q[1] << 32);
}

/* Block b of the tensor (elements [32 b, 32 b + 32) of the flat input),
 * loaded in w (which it may scale in place) */
template <int FMT>
__device__ __forceinline__ void mxpp_block_bf16(const QParams &P, size_t b, uint4 (&w)[4])
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits, EMAX = grid_of(F.elem).emax;
    static_assert(F.fam == BFP_FAMILY_MX_PP && grid_of(F.elem).kind == GK_FLOAT,
                  "MX++ has FLOAT grids only");
    uint32_t am = 0, a8[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        a8[k] = amax8_bf16(w[k]);
        am = max(am, a8[k]);
    }
    PackT<W> packed[4] = {0, 0, 0, 0};
    uint32_t sc = 0, meta = 0; /* flushed block (am = 0 or se <= -127): all 0 */
    bool nonfinite = am >= 0x7F800000u;
    if (nonfinite) {
        sc = 0xFF;
    } else if (am != 0 && flog2_bits(am) - EMAX > -127) {
        int se = flog2_bits(am) - EMAX;
        /* the BM: lowest index holding am, in the first group kb holding it;
         * max2: the largest of the other groups' maxima (a8[kb] = am is the
         * top of a8) or the second largest of group kb */
        int kb = first_max_group(a8, am);
        uint4 v = kb == 0 ? w[0] : kb == 1 ? w[1] : kb == 2 ? w[2] : w[3];
        int cand = 8 * kb + first_max8_bf16(v, am);
        uint32_t m2 = max(second_of4(a8), second8_bf16(v));
        int e = flog2_bits(m2) - EMAX + 1; /* <= se + 1, as m2 <= am */
        int nbm = m2 != 0 ? max(min(e, se), se - 7) : se;
        sc = (uint32_t)(se + 127);
        meta = (uint32_t)cand | (uint32_t)(se - nbm) << 5;
        int k2 = -nbm; /* in [emax - 127, 133] */
        if (k2 > 127) { /* 2^k2 is no bf16: 2^64 first (exact, see the top) */
#pragma unroll
            for (int k = 0; k < 4; k++) {
                uint32_t x[4];
                words_of(w[k], x);
                const uint32_t S = pow2_bf16x2(64);
                w[k] = make_uint4(bf2_mul(x[0], S), bf2_mul(x[1], S), bf2_mul(x[2], S), bf2_mul(x[3], S));
            }
            k2 -= 64;
        }
        uint32_t f2 = pow2_bf16x2(k2);
#pragma unroll
        for (int k = 0; k < 4; k++)
            packed[k] = enc8_signs_bf16<F.elem>(w[k], f2);
        uint32_t mag = bm_mag<F.elem, RM_RNE>(am, 0u);
#pragma unroll
        for (int k = 0; k < 4; k++) /* a select per word, no dynamic index */
            packed[k] = k == kb ? bm_put<W>(packed[k], cand % 8, mag) : packed[k];
    }
    put_block_codes<W>(P, b, packed);
    put_block_scale(P, b, sc, true, meta, nonfinite);
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QBLOCK_MXPP_CUH */

/* bfp_cuda_quant_mxplus.cuh - the MX+ and MX++ quantizers at 8 elements per
 * thread (any dtype and rounding): the block max on its extended grid, the
 * other elements as MX (MX++: at the scale of the second largest). */
#ifndef BFP_CUDA_QUANT_MXPLUS_CUH
#define BFP_CUDA_QUANT_MXPLUS_CUH

#include "bfp_cuda_quant_mx.cuh"

namespace bfpcuda {

/* Magnitude index of the block max on the extended grid, from the fp32 bits
 * of |BM|, a normal number (the block is not flushed): scaled by 2^-se it is
 * 2^emax times its significand, so the index is the 23-bit fraction rounded
 * to the grid's m bits by MODE, saturated. Integer ops; the same index as
 * enc_mag<ELEM, true, MODE> of the scaled value (r: the SR bits). */
template <int ELEM, int MODE>
__device__ __forceinline__ uint32_t bm_mag(uint32_t am, uint32_t r)
{
    constexpr Grid G = ext_of(ELEM);
    constexpr int SH = 23 - G.m;
    constexpr uint32_t HALF = 1u << (SH - 1);
    uint32_t q = (am & 0x7FFFFFu) >> SH, rem = am & ((1u << SH) - 1);
    bool up = MODE == RM_RNE    ? rem > HALF || (rem == HALF && (q & 1u))
              : MODE == RM_AWAY ? rem >= HALF
              : MODE == RM_SR   ? ((uint64_t)rem << (32 - SH)) > (uint64_t)r
                                : false;
    return min(q + (up ? 1u : 0u), (uint32_t)G.maxidx);
}

/* The 8 packed codes with the BM's code at element j: magnitude bits from
 * bm_mag, sign bit kept. The element's own code there has the BM's sign in
 * its top bit: FLOAT codes always; INT codes are two's complement of an
 * index >= 2^m (the BM scales to at least 1), so negative iff the BM is. */
template <int W>
__device__ __forceinline__ PackT<W> bm_put(PackT<W> packed, int j, uint32_t mag)
{
    constexpr PackT<W> MAG = (PackT<W>)((1u << (W - 1)) - 1);
    return (packed & ~(MAG << (W * j))) | (PackT<W>)mag << (W * j);
}

template <int FMT, int MODE, bool BF>
__device__ __forceinline__ void mxplus_body(const QParams &P, size_t row, bool valid, size_t blk,
                                            int sub, size_t col0, int n, const uint32_t x[8],
                                            const uint4 &w)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8, W = grid_of(F.elem).bits;
    constexpr int EMAX = grid_of(F.elem).emax;
    static_assert(!BF || F.fam == BFP_FAMILY_MX_PLUS, "the bf16x2 path assumes nbm = se");
    uint32_t ab[8], am = 0;
    if (BF) {
        am = amax8_bf16(w);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            ab[j] = x[j] & 0x7FFFFFFFu;
            am = max(am, ab[j]);
        }
    }
    am = group_max<T>(am);
    /* block max: the lowest index holding am */
    uint32_t cand = 0xFFu;
    if (BF) {
        int j = first_eq_bf16(w, am >> 16);
        cand = j < 8 ? (uint32_t)(sub * 8 + j) : 0xFFu;
    } else {
#pragma unroll
        for (int j = 7; j >= 0; j--)
            if (ab[j] == am)
                cand = (uint32_t)(sub * 8 + j);
    }
    cand = group_min<T>(cand);
    uint32_t m2 = 0;
    if (F.fam == BFP_FAMILY_MX_PP) {
#pragma unroll
        for (int j = 0; j < 8; j++) /* (BF is never set for MX++) */
            if ((uint32_t)(sub * 8 + j) != cand)
                m2 = max(m2, ab[j]);
        m2 = group_max<T>(m2);
    }
    PackT<W> packed = 0;
    uint32_t sc = 0, meta = 0;
    bool nonfinite = am >= 0x7F800000u;
    if (nonfinite) {
        sc = 0xFF;
    } else if (am != 0 && flog2_bits(am) - EMAX > -127) { /* else flushed: all 0 */
        int se = flog2_bits(am) - EMAX;
        int nbm = se;
        if (F.fam == BFP_FAMILY_MX_PP && m2 != 0) {
            int e = flog2_bits(m2) - EMAX + 1;
            nbm = e < se - 7 ? se - 7 : e > se ? se : e;
        }
        sc = (uint32_t)(se + 127);
        meta = cand | (uint32_t)(se - nbm) << 5;
        int k = -nbm; /* NBM scaling 2^k, k in [-126, 133] */
        float f1 = k > 127 ? 18446744073709551616.0f : 1.0f;
        float f2 = pow2f(k > 127 ? k - 64 : k);
        size_t e0 = row * P.L.cols + col0;
        if (BF) { /* MX+ FLOAT only: nbm = se >= -126, so 2^k is a normal bf16 */
            uint32_t f2, m2;
            enc_args_bf16<F.elem>(se, f2, m2);
            packed = enc8_bf16<F.elem>(w, f2, m2);
        }
#pragma unroll
        for (int j = 0; j < 8 && !BF; j++) {
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + j) : 0u;
            float v = __fmul_rn(__fmul_rn(u2f(ab[j]), f1), f2);
            int mag = enc_mag<F.elem, false, MODE>(v, r, ab[j] != 0);
            pack<W>(packed, make_code<F.elem, false>(x[j], mag), j);
        }
        if (cand / 8 == (uint32_t)sub) { /* this thread holds the block max */
            int jb = (int)(cand % 8);
            uint32_t r = MODE == RM_SR ? sr_bits(P.seed, e0 + (size_t)jb) : 0u;
            packed = bm_put<W>(packed, jb, bm_mag<F.elem, MODE>(am, r));
        }
    }
    if (valid) {
        put_codes<W>(P, row, col0, n, packed);
        if (sub == 0) {
            P.scales[scale_index(P, row, blk)] = (unsigned char)sc;
            P.meta[row * P.G + blk] = (unsigned char)meta;
            if (nonfinite && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_MXPLUS_CUH */

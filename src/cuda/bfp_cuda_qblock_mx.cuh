/* bfp_cuda_qblock_mx.cuh - the MX and MX+ quantizers for bf16 input with a
 * whole block per thread, and the loop that feeds a thread its blocks. */
#ifndef BFP_CUDA_QBLOCK_MX_CUH
#define BFP_CUDA_QBLOCK_MX_CUH

#include "bfp_cuda_quant_mxplus.cuh"
#include "bfp_cuda_quant_rows.cuh"

namespace bfpcuda {

/* ---- bf16 MX / MX+ with a whole block per thread ------------------------------- *
 * The hot path of the MX family (bf16 input, RNE, rows of whole blocks, vector
 * alignment; FLOAT and INT grids, MX and MX+): a thread reads its block as
 * four 16-byte vectors, finds the max without shuffles, encodes with the
 * bf16x2 encoder and writes all its codes. With 8 elements per thread the
 * per-group work (shuffles, scale, addressing) cost as much as the encoding.
 * Same decisions as mx_body / mxplus_body. MX+: the BM's index from packed
 * compares (first_max32_bf16), its code from the bits of am (bm_mag). */
__device__ __forceinline__ void mx_block_load(const QParams &P, size_t b, uint4 (&w)[4])
{
    const uint4 *src = reinterpret_cast<const uint4 *>(P.src) + 4 * b;
#pragma unroll
    for (int k = 0; k < 4; k++)
        w[k] = __ldg(src + k);
}

template <int FMT>
__device__ __forceinline__ void mx_block_bf16(const QParams &P, size_t b, const uint4 (&w)[4])
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int W = grid_of(F.elem).bits, EMAX = grid_of(F.elem).emax;
    constexpr bool PLUS = F.fam == BFP_FAMILY_MX_PLUS;
    uint32_t am = 0, a8[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        a8[k] = amax8_bf16(w[k]);
        am = max(am, a8[k]);
    }
    PackT<W> packed[4] = {0, 0, 0, 0};
    uint32_t sc = 0, meta = 0;
    bool nonfinite = am >= 0x7F800000u;
    if (nonfinite) {
        sc = 0xFF;
    } else if (!PLUS || (am != 0 && flog2_bits(am) - EMAX > -127)) { /* MX+: else flushed */
        int se = PLUS ? flog2_bits(am) - EMAX : mx_shared_exp<F.elem>(am, P.scale_mode);
        sc = (uint32_t)(se + 127);
        uint32_t f2, m2;
        enc_args_bf16<F.elem>(se, f2, m2); /* se in [-127, 127] for bf16 input */
#pragma unroll
        for (int k = 0; k < 4; k++)
            packed[k] = enc8_bf16<F.elem>(w[k], f2, m2);
        if (PLUS) { /* the block max: lowest index holding am, on the extended grid */
            int cand = first_max32_bf16(w, a8, am);
            meta = (uint32_t)cand;
            uint32_t mag = bm_mag<F.elem, RM_RNE>(am, 0u);
#pragma unroll
            for (int k = 0; k < 4; k++) /* a select per word, no dynamic index */
                packed[k] = k == cand / 8 ? bm_put<W>(packed[k], cand % 8, mag) : packed[k];
        }
    }
    put_block_codes<W>(P, b, packed);
    put_block_scale(P, b, sc, PLUS, meta, nonfinite);
}

/* Thread i of a grid of `stride` threads over nblocks blocks: blocks i and
 * i + stride (NB = 2) are loaded before either is encoded by enc(b, w), then
 * on from i + NB * stride */
template <int NB, class Enc>
__device__ __forceinline__ void blocks_of_thread(const QParams &P, size_t i, size_t stride,
                                                 size_t nblocks, Enc enc)
{
    static_assert(NB == 1 || NB == 2, "one or two blocks per thread");
    for (size_t b = i; b < nblocks; b += NB * stride) {
        uint4 w0[4], w1[4];
        mx_block_load(P, b, w0);
        const bool two = NB == 2 && b + stride < nblocks;
        if (two)
            mx_block_load(P, b + stride, w1);
        enc(b, w0);
        if (two)
            enc(b + stride, w1);
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QBLOCK_MX_CUH */

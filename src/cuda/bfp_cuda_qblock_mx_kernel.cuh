/* bfp_cuda_qblock_mx_kernel.cuh - the block-per-thread kernel of the MX,
 * MX+ and MX++ formats (bf16, RNE) and the test of whether it applies. */
#ifndef BFP_CUDA_QBLOCK_MX_KERNEL_CUH
#define BFP_CUDA_QBLOCK_MX_KERNEL_CUH

#include "bfp_cuda_qblock_ctas.cuh"
#include "bfp_cuda_qblock_mx.cuh"
#include "bfp_cuda_qblock_mxpp.cuh"

namespace bfpcuda {

/* Block b, loaded in w, by its family's encoder: MX and MX+ here, MX++ in
 * bfp_cuda_qblock_mxpp.cuh */
template <int FMT>
__device__ __forceinline__ void block_bf16(const QParams &P, size_t b, uint4 (&w)[4])
{
    if constexpr (fmt_of(FMT).fam == BFP_FAMILY_MX_PP)
        mxpp_block_bf16<FMT>(P, b, w);
    else
        mx_block_bf16<FMT>(P, b, w);
}

/* the same, loading the block itself */
template <int FMT>
__device__ __forceinline__ void block_bf16(const QParams &P, size_t b)
{
    uint4 w[4];
    mx_block_load(P, b, w);
    block_bf16<FMT>(P, b, w);
}

/* The blocks of thread i of a grid of `stride` threads (mxq_blocks at a
 * time; the launch's grid covers nblocks / mxq_blocks threads, capped: more
 * in a loop) */
template <int FMT>
__device__ __forceinline__ void block_thread(const QParams &P, size_t i, size_t stride,
                                             size_t nblocks)
{
    blocks_of_thread<mxq_blocks<FMT>()>(P, i, stride, nblocks, [&](size_t b, uint4(&w)[4]) {
        block_bf16<FMT>(P, b, w);
    });
}

/* The block-per-thread quantizer of the MX, MX+ and MX++ formats */
template <int FMT>
__global__ void __launch_bounds__(256, qblock_min_ctas<FMT>())
    mx_block_kernel(const QParams P, size_t nblocks)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    if constexpr (mxq_blocks<FMT>() == 1) {
        /* block_thread's loop, as it was: written otherwise (or through the
         * call) mxfp6 took 48 registers instead of 40 */
        for (size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x; b < nblocks; b += stride)
            block_bf16<FMT>(P, b);
    } else {
        block_thread<FMT>(P, (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride, nblocks);
    }
}

/* Whether mx_block_kernel applies: MX, MX+ or MX++, bf16, RNE, whole blocks
 * per row (block b of the tensor is elements [32 b, 32 b + 32) of the flat
 * input and codes), 16-byte aligned input and aligned codes. */
template <int FMT>
bool mx_block_ok(const QParams &P)
{
    constexpr FmtT F = fmt_of(FMT);
    if constexpr (F.fam != BFP_FAMILY_MX && F.fam != BFP_FAMILY_MX_PLUS &&
                  F.fam != BFP_FAMILY_MX_PP)
        return false;
    return P.dt == BFP_DTYPE_BF16 && P.mode == RM_RNE && P.vec_in && P.vec_out &&
           P.L.cols % 32 == 0;
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QBLOCK_MX_KERNEL_CUH */

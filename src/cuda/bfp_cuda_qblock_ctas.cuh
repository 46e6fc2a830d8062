/* bfp_cuda_qblock_ctas.cuh - the launch shape of the block-per-thread
 * quantizers (MX, MX+, MX++ and NVFP4): blocks per thread and the CTAs per
 * SM their register count must allow, with build-time overrides for the
 * sweeps of bench/gpu.sh (PARTS=qctas). docs/gpu.md has the measurements
 * behind the defaults. */
#ifndef BFP_CUDA_QBLOCK_CTAS_CUH
#define BFP_CUDA_QBLOCK_CTAS_CUH

#include "bfp_cuda_common.cuh"

namespace bfpcuda {

/* Blocks a thread of mx_block_kernel (MX, MX+ and MX++) loads before it
 * encodes them: 1, or 2 for more bytes in flight per thread at the cost of
 * registers (CTAs per SM); 2 for the FLOAT 4- and 6-bit MX+ and MX++
 * formats, where the qctas sweep found it faster.
 * BFP_MXQ_BLOCKS_{MX,MXPLUS,MXPP} >= 1 override it at build time. */
#ifndef BFP_MXQ_BLOCKS_MX
#define BFP_MXQ_BLOCKS_MX -1
#endif
#ifndef BFP_MXQ_BLOCKS_MXPLUS
#define BFP_MXQ_BLOCKS_MXPLUS -1
#endif
#ifndef BFP_MXQ_BLOCKS_MXPP
#define BFP_MXQ_BLOCKS_MXPP -1
#endif
template <int FMT>
__host__ __device__ constexpr int mxq_blocks()
{
    constexpr int fam = fmt_of(FMT).fam;
    constexpr Grid G = grid_of(fmt_of(FMT).elem);
    constexpr int set = fam == BFP_FAMILY_MX_PLUS ? BFP_MXQ_BLOCKS_MXPLUS
                        : fam == BFP_FAMILY_MX_PP ? BFP_MXQ_BLOCKS_MXPP
                                                  : BFP_MXQ_BLOCKS_MX;
    return set >= 1                                                               ? set
           : fam != BFP_FAMILY_MX && G.kind == GK_FLOAT && G.bits <= 6 ? 2
                                                                       : 1;
}

/* CTAs of 256 threads per SM that the block-per-thread quantizers' register
 * count must allow (mx_block_kernel for MX, MX+ and MX++; nv_block_kernel;
 * 0: the compiler's choice): 6 for mxint4+ (one block per thread), else the
 * compiler's choice. BFP_QBLOCK_CTAS_{MX,MXPLUS,MXPP,NV} >= 0 override it at
 * build time. */
#ifndef BFP_QBLOCK_CTAS_MX
#define BFP_QBLOCK_CTAS_MX -1
#endif
#ifndef BFP_QBLOCK_CTAS_MXPLUS
#define BFP_QBLOCK_CTAS_MXPLUS -1
#endif
#ifndef BFP_QBLOCK_CTAS_MXPP
#define BFP_QBLOCK_CTAS_MXPP -1
#endif
#ifndef BFP_QBLOCK_CTAS_NV
#define BFP_QBLOCK_CTAS_NV -1
#endif
template <int FMT>
__host__ __device__ constexpr int qblock_min_ctas()
{
    constexpr int fam = fmt_of(FMT).fam;
    constexpr int set = fam == BFP_FAMILY_MX        ? BFP_QBLOCK_CTAS_MX
                        : fam == BFP_FAMILY_MX_PLUS ? BFP_QBLOCK_CTAS_MXPLUS
                        : fam == BFP_FAMILY_MX_PP   ? BFP_QBLOCK_CTAS_MXPP
                                                    : BFP_QBLOCK_CTAS_NV;
    return set >= 0                                                 ? set
           : mxq_blocks<FMT>() == 1 && fam == BFP_FAMILY_MX_PLUS &&
                     grid_of(fmt_of(FMT).elem).bits == 4 ? 6
                                                         : 0;
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QBLOCK_CTAS_CUH */

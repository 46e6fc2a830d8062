/* bfp_cuda_launch_dequant.cuh - the dequantize launchers: which kernel a
 * call takes and its grid. Instantiated per format in instances/dequant_*.cu;
 * declared for bfp_cuda.cu in bfp_cuda_launch.h. */
#ifndef BFP_CUDA_LAUNCH_DEQUANT_CUH
#define BFP_CUDA_LAUNCH_DEQUANT_CUH

#include "bfp_cuda_launch.h"
#include "bfp_cuda_dequant_flat.cuh"

namespace bfpcuda {

/* bf16 output, rows of whole blocks, vector-aligned codes and output (6-bit
 * codes and HiF4 scales 4-byte aligned): the flat kernel
 * (bfp_cuda_dequant_flat.cuh) on a grid of at most ctas_per_sm CTAs per SM
 * (bfp_cuda_quant_tuning; docs/gpu.md has the measurements behind the
 * default), each striding over the chunks. */
constexpr unsigned FLAT_CTAS_PER_SM = 96;

template <int FMT>
bfp_status launch_dequant_flat(const DParams &P, size_t ngroups, unsigned ctas_per_sm,
                               cudaStream_t s)
{
    static unsigned sms = 0;
    if (!sms) {
        int dev = 0, n = 0;
        CUDA_OK(cudaGetDevice(&dev));
        CUDA_OK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
        sms = n > 0 ? (unsigned)n : 1;
    }
    /* at most 2^20 per SM (bfp.h): the product stays far below 2^32 */
    size_t grid = (size_t)sms * (ctas_per_sm ? ctas_per_sm : FLAT_CTAS_PER_SM);
    constexpr size_t CTA_GROUPS = 8 * 32 * flat_fu<FMT>(); /* groups per CTA per step */
    size_t need = (ngroups + CTA_GROUPS - 1) / CTA_GROUPS;
    unsigned ctas = (unsigned)(need < grid ? need : grid);
    BFP_LAUNCH(dequant_flat_kernel<FMT>, ctas, 256, s, P, ngroups);
    CUDA_OK(cudaGetLastError());
    return BFP_OK;
}

/* Plain 8-bit MX formats keep the 8-elements-per-thread kernel: their 8-byte
 * code loads already keep enough bytes in flight (docs/gpu.md) */
template <int FMT>
__host__ __device__ constexpr bool dequant_flat_fmt()
{
    return !(fmt_of(FMT).fam == BFP_FAMILY_MX && grid_of(fmt_of(FMT).elem).bits == 8);
}

template <int FMT>
bfp_status launch_dequant(DParams P, const Tiling &t, const bfp_cuda_quant_tuning *tu,
                          cudaStream_t s)
{
    static_assert(fmt_known(FMT), "not a format with CUDA kernels (format_defs.h)");
    if (dequant_flat_fmt<FMT>() && P.dt == BFP_DTYPE_BF16 && P.vec_in && P.vec_out &&
        P.L.cols % fmt_of(FMT).block == 0 &&
        P.L.rows > 0 && P.L.cols > 0 &&
        (fmt_of(FMT).fam != BFP_FAMILY_HIF4 || (uintptr_t)P.scales % 4 == 0) &&
        (grid_of(fmt_of(FMT).elem).bits != 6 || (uintptr_t)P.codes % 4 == 0))
        return launch_dequant_flat<FMT>(P, P.L.rows * (P.L.cols / 8),
                                        tu ? tu->dequant_ctas_per_sm : 0, s);
    for (size_t r0 = 0; r0 < P.L.rows; r0 += t.rows_per_launch) {
        size_t nr = P.L.rows - r0 < t.rows_per_launch ? P.L.rows - r0 : t.rows_per_launch;
        P.L.row0 = r0;
        size_t tile_rows = (size_t)t.L.rt * (size_t)P.L.qu;
        dim3 grid(t.gx, (unsigned)((nr + tile_rows - 1) / tile_rows));
        BFP_LAUNCH(dequant_kernel<FMT>, grid, 256, s, P);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

} // namespace bfpcuda

#endif /* BFP_CUDA_LAUNCH_DEQUANT_CUH */

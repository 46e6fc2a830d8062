/* bfp_cuda_launch_quant.cuh - the quantize launchers: which kernel a call
 * takes and its grid. Instantiated per format in instances/quant_*.cu;
 * declared for bfp_cuda.cu in bfp_cuda_launch.h. */
#ifndef BFP_CUDA_LAUNCH_QUANT_CUH
#define BFP_CUDA_LAUNCH_QUANT_CUH

#include "bfp_cuda_launch.h"
#include "bfp_cuda_quant_kernel.cuh"
#include "bfp_cuda_qblock_mx_kernel.cuh"
#include "bfp_cuda_qblock_hif4.cuh"
#include "bfp_cuda_qblock_nv.cuh"

#include <limits.h>

namespace bfpcuda {

/* CTAs of a quantize launch: as many as the GPU holds at once (the kernel
 * strides over the row tiles), found once per kernel. */
template <int FMT, int DT>
bfp_status resident_ctas(unsigned *out)
{
    static unsigned cached = 0;
    if (!cached) {
        int dev = 0, sms = 0, per_sm = 0;
        CUDA_OK(cudaGetDevice(&dev));
        CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, quant_kernel<FMT, DT>, 256, 0));
        cached = (unsigned)(sms > 0 ? sms : 1) * (unsigned)(per_sm > 0 ? per_sm : 1);
    }
    *out = cached;
    return BFP_OK;
}

template <int FMT, int DT>
bfp_status launch_quant_dt(QParams P, const Tiling &t, cudaStream_t s)
{
    unsigned ctas;
    bfp_status st = resident_ctas<FMT, DT>(&ctas);
    if (st != BFP_OK)
        return st;
    for (size_t r0 = 0; r0 < P.L.rows; r0 += t.rows_per_launch) {
        size_t nr = P.L.rows - r0 < t.rows_per_launch ? P.L.rows - r0 : t.rows_per_launch;
        P.L.row0 = r0;
        size_t tile_rows = (size_t)t.L.rt * (size_t)P.L.qu;
        P.L.tiles = (nr + tile_rows - 1) / tile_rows;
        size_t gy = quant_prefetch<FMT>() ? (ctas + t.gx - 1) / t.gx : P.L.tiles;
        dim3 grid(t.gx, (unsigned)(gy < P.L.tiles ? gy : P.L.tiles));
        BFP_LAUNCH((quant_kernel<FMT, DT>), grid, 256, s, P);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

template <int FMT>
bfp_status launch_quant(QParams P, const Tiling &t, cudaStream_t s)
{
    static_assert(fmt_known(FMT), "not a format with CUDA kernels (format_defs.h)");
    if (hif4_block_ok<FMT>(P)) /* bfp_cuda_qblock_hif4.cuh */
        return launch_hif4_block<FMT>(P, s);
    if (nv_block_ok<FMT>(P)) /* bfp_cuda_qblock_nv.cuh */
        return launch_nv_block<FMT>(P, s);
    if (mx_block_ok<FMT>(P)) {
        size_t nblocks = P.L.rows * (P.L.cols / 32);
        constexpr size_t NB = mxq_blocks<FMT>();
        BFP_LAUNCH(mx_block_kernel<FMT>, stride_grid((nblocks + NB - 1) / NB), 256, s, P, nblocks);
        CUDA_OK(cudaGetLastError());
        return BFP_OK;
    }
    switch (P.dt) {
    case BFP_DTYPE_BF16: return launch_quant_dt<FMT, BFP_DTYPE_BF16>(P, t, s);
    case BFP_DTYPE_F16: return launch_quant_dt<FMT, BFP_DTYPE_F16>(P, t, s);
    default: return launch_quant_dt<FMT, BFP_DTYPE_F32>(P, t, s);
    }
}

template <int FMT>
bfp_status launch_nv2d(QParams P, cudaStream_t s)
{
    static_assert(FMT == BFP_NVFP4, "2-D tiles are NVFP4's alone (SPEC section 5)");
    size_t gx = (P.G + 7) / 8;
    if (gx > (size_t)INT_MAX)
        return BFP_ERR_SHAPE;
    const size_t rows_per_launch = (size_t)65535 * 16;
    for (size_t r0 = 0; r0 < P.L.rows; r0 += rows_per_launch) {
        size_t nr = P.L.rows - r0 < rows_per_launch ? P.L.rows - r0 : rows_per_launch;
        P.L.row0 = r0;
        dim3 grid((unsigned)gx, (unsigned)((nr + 15) / 16));
        BFP_LAUNCH(nv2d_kernel<FMT>, grid, 256, s, P);
        CUDA_OK(cudaGetLastError());
    }
    return BFP_OK;
}

} // namespace bfpcuda

#endif /* BFP_CUDA_LAUNCH_QUANT_CUH */

/* bfp_cuda_launch.h - the launchers the C API (bfp_cuda.cu) calls, as
 * declarations: their definitions are in bfp_cuda_launch_quant.cuh and
 * bfp_cuda_launch_dequant.cuh, instantiated once per format in
 * instances/quant_<format>.cu and instances/dequant_<format>.cu. */
#ifndef BFP_CUDA_LAUNCH_H
#define BFP_CUDA_LAUNCH_H

#include "bfp_cuda_params.cuh"

namespace bfpcuda {

template <int FMT>
bfp_status launch_quant(QParams P, const Tiling &t, cudaStream_t s);

/* NVFP4 / NVFP4+ with 16x16 tiles */
template <int FMT>
bfp_status launch_nv2d(QParams P, cudaStream_t s);

/* tu: the caller's quantizer tuning, or NULL for the defaults */
template <int FMT>
bfp_status launch_dequant(DParams P, const Tiling &t, const bfp_cuda_quant_tuning *tu,
                          cudaStream_t s);

} // namespace bfpcuda

#endif /* BFP_CUDA_LAUNCH_H */

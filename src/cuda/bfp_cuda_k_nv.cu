/* bfp_cuda_k_nv.cu - kernel instantiations for the NVFP4, NVFP4+ and HiF4 (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, 8)
BFP_FORMAT_LAUNCHERS(, 22)
BFP_FORMAT_LAUNCHERS(, 9)
BFP_NV2D_LAUNCHER(, 8)

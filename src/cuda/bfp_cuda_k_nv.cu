/* bfp_cuda_k_nv.cu - kernel instantiations for the NVFP4, NVFP4+ and HiF4 (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, BFP_NVFP4)
BFP_FORMAT_LAUNCHERS(, BFP_NVFP4_PLUS)
BFP_FORMAT_LAUNCHERS(, BFP_HIF4)
BFP_NV2D_LAUNCHER(, BFP_NVFP4)

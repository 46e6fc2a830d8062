/* bfp_cuda_k_mxplus.cu - kernel instantiations for the MX+ formats (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, 10)
BFP_FORMAT_LAUNCHERS(, 11)
BFP_FORMAT_LAUNCHERS(, 12)
BFP_FORMAT_LAUNCHERS(, 13)
BFP_FORMAT_LAUNCHERS(, 14)
BFP_FORMAT_LAUNCHERS(, 15)
BFP_FORMAT_LAUNCHERS(, 16)

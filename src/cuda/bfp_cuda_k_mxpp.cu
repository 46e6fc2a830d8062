/* bfp_cuda_k_mxpp.cu - kernel instantiations for the MX++ formats (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, 17)
BFP_FORMAT_LAUNCHERS(, 18)
BFP_FORMAT_LAUNCHERS(, 19)
BFP_FORMAT_LAUNCHERS(, 20)
BFP_FORMAT_LAUNCHERS(, 21)

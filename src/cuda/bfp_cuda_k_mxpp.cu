/* bfp_cuda_k_mxpp.cu - kernel instantiations for the MX++ formats (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, BFP_MXFP4_PP)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP6_E2M3_PP)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP6_E3M2_PP)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP8_E4M3_PP)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP8_E5M2_PP)

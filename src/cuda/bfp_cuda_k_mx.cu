/* bfp_cuda_k_mx.cu - kernel instantiations for the MX formats (mxfp4, mxfp6, mxfp8, mxint8, mxint4) (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, BFP_MXFP4)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP6_E2M3)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP6_E3M2)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP8_E4M3)
BFP_FORMAT_LAUNCHERS(, BFP_MXFP8_E5M2)
BFP_FORMAT_LAUNCHERS(, BFP_MXINT8)
BFP_FORMAT_LAUNCHERS(, BFP_MXINT4)

/* bfp_cuda_k_mx.cu - kernel instantiations for the MX formats (mxfp4, mxfp6, mxfp8, mxint8, mxint4) (see bfp_cuda_kernels.cuh). */
#include "bfp_cuda_kernels.cuh"

BFP_FORMAT_LAUNCHERS(, 1)
BFP_FORMAT_LAUNCHERS(, 2)
BFP_FORMAT_LAUNCHERS(, 3)
BFP_FORMAT_LAUNCHERS(, 4)
BFP_FORMAT_LAUNCHERS(, 5)
BFP_FORMAT_LAUNCHERS(, 6)
BFP_FORMAT_LAUNCHERS(, 7)

/* mxfp6_e2m3++: the quantize launcher (written by generate.py). */
#include "bfp_cuda_launch_quant.cuh"

template bfp_status bfpcuda::launch_quant<BFP_MXFP6_E2M3_PP>(bfpcuda::QParams, const bfpcuda::Tiling &,
                                                   cudaStream_t);

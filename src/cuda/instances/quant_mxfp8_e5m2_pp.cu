/* mxfp8_e5m2++: the quantize launcher (written by generate.py). */
#include "bfp_cuda_launch_quant.cuh"

template bfp_status bfpcuda::launch_quant<BFP_MXFP8_E5M2_PP>(bfpcuda::QParams, const bfpcuda::Tiling &,
                                                   cudaStream_t);

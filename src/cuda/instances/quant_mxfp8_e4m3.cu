/* mxfp8_e4m3: the quantize launcher (written by generate.py). */
#include "bfp_cuda_launch_quant.cuh"

template bfp_status bfpcuda::launch_quant<BFP_MXFP8_E4M3>(bfpcuda::QParams, const bfpcuda::Tiling &,
                                                   cudaStream_t);

/* mxfp6_e3m2+: the quantize launcher (written by generate.py). */
#include "bfp_cuda_launch_quant.cuh"

template bfp_status bfpcuda::launch_quant<BFP_MXFP6_E3M2_PLUS>(bfpcuda::QParams, const bfpcuda::Tiling &,
                                                   cudaStream_t);

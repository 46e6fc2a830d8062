/* mxint4+: the dequantize launcher (written by generate.py). */
#include "bfp_cuda_launch_dequant.cuh"

template bfp_status bfpcuda::launch_dequant<BFP_MXINT4_PLUS>(bfpcuda::DParams, const bfpcuda::Tiling &,
                                                     const bfp_cuda_quant_tuning *, cudaStream_t);

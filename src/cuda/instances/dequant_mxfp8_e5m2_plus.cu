/* mxfp8_e5m2+: the dequantize launcher (written by generate.py). */
#include "bfp_cuda_launch_dequant.cuh"

template bfp_status bfpcuda::launch_dequant<BFP_MXFP8_E5M2_PLUS>(bfpcuda::DParams, const bfpcuda::Tiling &,
                                                     const bfp_cuda_quant_tuning *, cudaStream_t);

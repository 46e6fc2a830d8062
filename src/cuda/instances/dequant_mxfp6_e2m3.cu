/* mxfp6_e2m3: the dequantize launcher (written by generate.py). */
#include "bfp_cuda_launch_dequant.cuh"

template bfp_status bfpcuda::launch_dequant<BFP_MXFP6_E2M3>(bfpcuda::DParams, const bfpcuda::Tiling &,
                                                     const bfp_cuda_quant_tuning *, cudaStream_t);

/* formats.h - the formats with GPU kernels: one X(ID) per row of
 * BFP_FORMAT_LIST (src/core/format_defs.h) whose CUDA column is 1.
 * Written by generate.py; do not edit. */
#ifndef BFP_CUDA_INSTANCE_FORMATS_H
#define BFP_CUDA_INSTANCE_FORMATS_H

#define BFP_CUDA_FORMATS(X) \
    X(MXFP4) \
    X(MXFP6_E2M3) \
    X(MXFP6_E3M2) \
    X(MXFP8_E4M3) \
    X(MXFP8_E5M2) \
    X(MXINT8) \
    X(MXINT4) \
    X(NVFP4) \
    X(HIF4) \
    X(MXFP4_PLUS) \
    X(MXFP6_E2M3_PLUS) \
    X(MXFP6_E3M2_PLUS) \
    X(MXFP8_E4M3_PLUS) \
    X(MXFP8_E5M2_PLUS) \
    X(MXINT8_PLUS) \
    X(MXINT4_PLUS) \
    X(MXFP4_PP) \
    X(MXFP6_E2M3_PP) \
    X(MXFP6_E3M2_PP) \
    X(MXFP8_E4M3_PP) \
    X(MXFP8_E5M2_PP) \
    X(NVFP4_PLUS)

#endif /* BFP_CUDA_INSTANCE_FORMATS_H */

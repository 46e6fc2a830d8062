/* matmul_image.h - the packed GPU weight buffer (bfp_cuda_weight_pack):
 * its layout and header, shared by the host packer (matmul_image.c) and the
 * view that reads it on the device side (src/cuda/gemm.cu). */
#ifndef BFP_MATMUL_IMAGE_H
#define BFP_MATMUL_IMAGE_H

#include "bfp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Header bytes; every section starts at a multiple of this (TMA wants 16). */
#define BFP_WIMG_ALIGN 256
#define BFP_WIMG_VERSION 2u /* 2: no planar planes (the dequantize path decodes
                                 the prepacked arrays, src/cuda/gemm_unpack.cu) */

/* Byte offsets of the sections of an n x k weight's buffer: the header,
 * then the prepacked codes, scales and corrections (every path reads these;
 * the dequantize + cuBLAS path decodes them to bf16 rows). */
typedef struct {
    bfp_packed_sizes ps;
    size_t codes, scales, corr;
    size_t total;
} bfp_wimg_layout;

/* BFP_OK or bfp_cuda_weight_packed_size()'s errors */
bfp_status bfp_wimg_layout_get(bfp_format fmt, size_t n, size_t k, bfp_wimg_layout *out);

/* Check a header (BFP_WIMG_ALIGN bytes) against the weight the caller names
 * and the buffer's length: BFP_OK with *mx_fold and *tensor_scale set, else
 * BFP_ERR_ARG (not this format's n x k weight, or the buffer is too short). */
bfp_status bfp_wimg_header_read(const uint8_t *hdr, bfp_format fmt, size_t n, size_t k,
                                size_t bytes, int *mx_fold, float *tensor_scale);

#ifdef __cplusplus
}
#endif
#endif

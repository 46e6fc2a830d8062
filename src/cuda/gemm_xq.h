/* gemm_xq.h - what the quantized-x matmul (gemm_xq.cu) reads of W: its
 * planar planes on the device (bfp_cuda_planar_weight) and their sizes; and
 * between gemm_xq.cu (API, x's quantization, split-K sums) and the wgmma
 * kernel (gemm_xq_wgmma.cu). */
#pragma once
#include "bfp.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace bfpgemm {

struct WeightPlanar {
    bfp_format fmt;
    size_t n, k;
    bfp_plane_sizes sz;
    const uint8_t *codes, *scales, *meta; /* device */
    float ts;                             /* NVFP4(+) s_enc, else 1 */
};

/* The wgmma kernel (bfp_matmul_tuning.xq_kernel = 2): MX weights (mxfp4,
 * mxfp4+) with x mxfp8_e4m3, mxfp4 or mxfp4+, on sm_90a. */
bool xq_wgmma_pair(bfp_format w_fmt, bfp_format x_fmt);

struct XqWgPlan {
    int bn;              /* rows of x per CTA: 8, 16, 32 or 64 */
    int tiles_k, tps;    /* k tiles (128 columns) in all and per split */
    int splits;
    dim3 grid;           /* (W bands of 128 rows, splits, x chunks of bn rows) */
    size_t kp, mp;       /* x's E4M3 copy: bytes per row; its fp32 scales: floats per block */
    size_t prep_bytes;   /* both, at the front of the kernel's workspace */
};
bool xq_wgmma_plan(const WeightPlanar &w, size_t m, int sms, XqWgPlan *P);

/* y (or, with part, the fp32 sums [m][n] the caller zeroed and finishes) of
 * W and x's planes xq (x_fmt, row pitch x_crb bytes); prep: P.prep_bytes
 * of workspace, 16-byte aligned. Launches the x pre-pass and the kernel. */
cudaError_t xq_wgmma_run(const WeightPlanar &w, bfp_format x_fmt, const bfp_const_planes &xq,
                         size_t x_crb, size_t m, const XqWgPlan &P, const void *bias, void *y,
                         void *prep, float *part, cudaStream_t s);

} // namespace bfpgemm

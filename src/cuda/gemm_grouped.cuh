/* gemm_grouped.cuh - the grouped (MoE) matmul kernel's parameters, between
 * its host side (gemm_grouped_api.cu) and the kernel (gemm_grouped.cu).
 *
 * Work unit = (expert e, CTA column of 4 row tiles of W_e, K split s, chunk
 * of MC = 8 * NT rows of e's x). The units exist only on the device: every
 * CTA of a persistent grid reads the offsets, counts each expert's units
 * (ceil(rows / MC) chunks x columns x splits; 0 for an empty expert) in
 * shared memory and walks units blockIdx.x, + gridDim.x, ... Chunks are
 * innermost, so the chunks of one slice of W run side by side (W read from
 * DRAM about once). The host picks NT and the splits from T alone. */
#pragma once
#include "gemm_fused.cuh"

#include <cuda_runtime.h>

namespace bfpgemm {

/* the packed image's header fields the kernel reads (matmul_image.c) */
constexpr int WIMG_H_FOLD = 12, WIMG_H_TS = 40;
constexpr int G_MAX_EXPERTS = 1024; /* BFP_GROUPED_MAX_EXPERTS */

struct GroupedParams {
    const uint8_t *base;         /* expert e's packed image at base + e * stride */
    size_t stride;
    size_t off_codes, off_scales, off_corr; /* sections in an image (corr: 0 = none) */
    const __nv_bfloat16 *x;      /* [t_rows][k] */
    const int *offsets;          /* [e_count + 1] */
    const __nv_bfloat16 *bias;   /* [e_count][n] or NULL */
    __nv_bfloat16 *y;            /* [t_rows][n] */
    float *ws;                   /* [t_rows][n] split-K partial sums, zeroed by the host */
    unsigned *counters;          /* one per (e, column, chunk), zeroed by the host */
    int max_tiles;               /* counters available: units beyond them are dropped
                                    (only broken offsets get there) */
    int e_count, n, k, t_rows;
    int tiles_n, tiles_k, cols;  /* cols: CTA columns, ceil(tiles_n / 4) */
    int splits, tiles_per_split, chunk_tiles, xs_ld, x_vec;
    int use_ts;                  /* NVFP4: divide by the expert's tensor scale */
};

cudaError_t launch_grouped(int fmt_kind, const GroupedParams &p, int nt, int sms,
                           cudaStream_t s);

} // namespace bfpgemm

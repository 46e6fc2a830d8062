/* bfp_grouped.h - the grouped (mixture-of-experts) matmul: E experts' 4-bit
 * weights, each [n, k], and the rows of x sorted by expert. Row t of expert
 * e (offsets[e] <= t < offsets[e+1]) gives y[t] = x[t] . W_e^T (+ b_e).
 * docs/gemm.md, "Grouped (MoE) matmul". */
#ifndef BFP_GROUPED_H
#define BFP_GROUPED_H

#include "bfp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most experts one grouped call takes (the kernel's per-CTA table). */
#define BFP_GROUPED_MAX_EXPERTS 1024

/**
 * Check a routing table: offsets[0] = 0, nondecreasing, offsets[e_count] =
 * t_rows, e_count in 1..BFP_GROUPED_MAX_EXPERTS.
 * @return BFP_OK; BFP_ERR_ARG (NULL, or offsets that break a rule);
 *         BFP_ERR_SHAPE (e_count 0 or too many, t_rows above INT32_MAX)
 */
bfp_status bfp_grouped_offsets_check(const int32_t *offsets, size_t e_count, size_t t_rows);

/**
 * Reference grouped matmul: bfp_matmul_ref() per expert over its rows (W
 * decoded by the reference decoder, float64 sums, rounded once to float).
 * @param w       e_count planes, expert e's [n, k] weight in w[e]
 * @param x_bf16  [t_rows, k], rows sorted by expert (may be NULL if t_rows = 0)
 * @param offsets e_count + 1 row offsets (bfp_grouped_offsets_check)
 * @param bias_bf16 [e_count, n] or NULL
 * @param y       [t_rows, n]
 * @return BFP_OK; BFP_ERR_FORMAT; BFP_ERR_SHAPE; BFP_ERR_ARG; BFP_ERR_NOMEM
 */
bfp_status bfp_grouped_matmul_ref(bfp_format fmt, const bfp_const_planes *w, size_t e_count,
                                  size_t n, size_t k, const uint16_t *x_bf16, size_t t_rows,
                                  const int32_t *offsets, const uint16_t *bias_bf16, float *y);

/* ---- Packed grouped weights ----------------------------------------------
 * E packed weights (bfp_cuda_weight_packed_size() bytes each, the format of
 * bfp_cuda_weight_pack) back to back in one buffer the caller owns: expert e
 * at byte e * bfp_cuda_weight_packed_size(). Each keeps its own header (MX
 * fold, NVFP4 tensor scale). */

/** Bytes of the grouped buffer: e_count times one expert's. */
bfp_status bfp_cuda_grouped_weight_packed_size(bfp_format fmt, size_t e_count, size_t n,
                                               size_t k, size_t *bytes);

/** The grouped buffer's host image (every build, no GPU). */
bfp_status bfp_cuda_grouped_weight_pack_host(bfp_format fmt, const bfp_const_planes *w,
                                             size_t e_count, size_t n, size_t k, void *buf,
                                             size_t bytes);

/** Pack into a device buffer, expert by expert (bfp_cuda_weight_pack). */
bfp_status bfp_cuda_grouped_weight_pack(bfp_format fmt, const bfp_const_planes *w,
                                        size_t e_count, size_t n, size_t k, void *d_buf,
                                        size_t bytes, void *stream);

typedef struct bfp_cuda_grouped_weight bfp_cuda_grouped_weight;

/**
 * Host-side view of a grouped buffer (device memory, 256-byte aligned):
 * reads and checks every expert's header (synchronous copy).
 * @return BFP_OK; BFP_ERR_ARG (NULL, misaligned or short buffer, a header
 *         that is not this format's n x k weight); BFP_ERR_SHAPE;
 *         BFP_ERR_DEVICE; BFP_ERR_NOMEM; BFP_ERR_UNSUPPORTED (no CUDA)
 */
bfp_status bfp_cuda_grouped_weight_view(bfp_format fmt, size_t e_count, size_t n, size_t k,
                                        const void *d_buf, size_t bytes,
                                        bfp_cuda_grouped_weight **out);

/** Free a view (NULL-safe); never the buffer. */
void bfp_cuda_grouped_weight_free(bfp_cuda_grouped_weight *w);

/** Workspace bytes for t_rows rows (0 for an invalid tuning). */
size_t bfp_cuda_grouped_matmul_workspace_size(const bfp_cuda_grouped_weight *w, size_t t_rows,
                                              const bfp_matmul_tuning *tuning);

/**
 * y = x . W_e^T (+ b_e) per expert, one kernel launch on stream. Device
 * pointers: x bf16 [t_rows, k] sorted by expert, d_offsets int32
 * [e_count + 1] (the rules of bfp_grouped_offsets_check; offsets that break
 * them leave y unwritten and the workspace as it was),
 * d_bias bf16 [e_count, n] or NULL, y bf16 [t_rows, n]. The workspace
 * must hold zeros before its first use, and every call leaves it zero (for
 * any t_rows and kernel: one workspace of the largest size serves them all;
 * a call stopped midway, by an error or a reset, may leave it dirty). No allocation,
 * no synchronization: capturable in a CUDA graph. tuning: grouped_kernel
 * (which kernel), wgmma_bn (the wgmma kernel's rows of an expert's x per
 * tile: 64, 128 or 256), ctas_per_sm (the unit kernel's split-K
 * target) and gemv_pdl (the GEMV kernel: 1, and 0, the default, launch it
 * with programmatic dependent launch, so its launch and set-up overlap the
 * previous kernel in the stream; it reads nothing, offsets and W included,
 * before that kernel has finished, so unlike the dense GEMV's this asks
 * nothing of it. -1: an ordinary launch.
 * 2: as 1, and the offsets and the first stages of W are read before the
 * previous kernel has finished: that kernel must write neither, e.g. the
 * activation between an MoE layer's gate/up and down calls), others
 * ignored; NULL = defaults. The workspace size depends on the kernel.
 * @return BFP_OK (also for t_rows = 0); BFP_ERR_ARG; BFP_ERR_SHAPE;
 *         BFP_ERR_DEVICE; BFP_ERR_UNSUPPORTED (no CUDA, or grouped_kernel
 *         = 2 or 3 off Hopper)
 */
bfp_status bfp_cuda_grouped_matmul(const bfp_cuda_grouped_weight *w, const void *d_x,
                                   size_t t_rows, const int32_t *d_offsets, const void *d_bias,
                                   void *d_y, void *d_workspace, size_t workspace_bytes,
                                   const bfp_matmul_tuning *tuning, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* BFP_GROUPED_H */

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

#include <cuda.h> /* CUtensorMap */
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
    float *ws;                   /* [t_rows][n] split-K partial sums: zero before the call,
                                    left zero by each output tile's last CTA */
    unsigned *counters;          /* one per (e, column, chunk), the same */
    int max_tiles;               /* counters available: units beyond them are dropped
                                    (only broken offsets get there) */
    int e_count, n, k, t_rows;
    int tiles_n, tiles_k, cols;  /* cols: CTA columns, ceil(tiles_n / 4) */
    int splits, tiles_per_split, chunk_tiles, xs_ld, x_vec;
    int use_ts;                  /* NVFP4: divide by the expert's tensor scale */
};

cudaError_t launch_grouped(int fmt_kind, const GroupedParams &p, int nt, int sms,
                           cudaStream_t s);

/* The Hopper grouped kernel (gemm_grouped_wgmma.cu, sm_90a): persistent CTAs
 * of the dense wgmma kernel's shape (a producer warpgroup, 2 consumer
 * warpgroups: 128 rows of W by bn = 64 or 128 rows of one expert's x), a
 * tile = (m tile of an expert, CTA column of p.cols), whole K, no split.
 * Maps: codes, scales and corr of all experts as 4-D tensors {record / 8,
 * tiles_k, tiles_n, e_count} (the expert stride p.stride) with boxes of 8
 * row tiles by one k tile; x {k, t_rows} with box {64, bn} (unused when
 * p.x_vec is 0). grid: CTAs (at most one per SM is resident). */
struct GroupedWgMaps {
    CUtensorMap codes, scales, corr, x;
};
cudaError_t launch_grouped_wgmma(int fmt_kind, const GroupedParams &p, const GroupedWgMaps &mp,
                                 int bn, unsigned grid, cudaStream_t s);

/* rows [a, b) from an expert's offsets lo, hi, clamped into [0, t_rows)
 * whatever they are */
__device__ __forceinline__ void clamp_rows(int lo, int hi, int t_rows, int *a, int *b)
{
    lo = min(max(lo, 0), t_rows);
    hi = min(max(hi, lo), t_rows);
    *a = lo, *b = hi;
}
/* expert e's rows [a, b) of offsets[e_count + 1], clamped */
__device__ __forceinline__ void expert_rows(const int *offsets, int t_rows, int e, int *a, int *b)
{
    clamp_rows(__ldg(offsets + e), __ldg(offsets + e + 1), t_rows, a, b);
}
__device__ __forceinline__ void expert_rows(const GroupedParams &p, int e, int *a, int *b)
{
    expert_rows(p.offsets, p.t_rows, e, a, b);
}

/* upre[e] = units before expert e, upre[e_count] = all units (each capped
 * at cap); an expert has ceil(rows / rows_per) * mult units (none when
 * empty). Offsets that break the rules (offsets[0] = 0, no step down,
 * offsets[e_count] = t_rows) give no units at all: the call then writes
 * nothing, so no split-K count is left short and the workspace stays zero.
 * Warp 0's 32 lanes: lane l takes a run of experts, then a shuffle scan.
 * The caller syncs after. */
__device__ __forceinline__ void count_units(const int *offsets, int e_count, int t_rows,
                                            int rows_per, long long mult, long long cap,
                                            int *upre, int lane)
{
    const int per = (e_count + 31) / 32, e0 = lane * per;
    const int e1 = min(e0 + per, e_count);
    long long mine = 0;
    bool broken = false;
    for (int e = e0; e < e1; e++) {
        const int lo = __ldg(offsets + e), hi = __ldg(offsets + e + 1);
        broken |= hi < lo || (e == 0 && lo != 0) || (e == e_count - 1 && hi != t_rows);
        int a, b;
        clamp_rows(lo, hi, t_rows, &a, &b);
        mine += (long long)((b - a + rows_per - 1) / rows_per) * mult;
    }
    if (__any_sync(0xFFFFFFFFu, broken))
        mine = 0, mult = 0; /* the second pass counts none either */
    long long incl = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        long long v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
        if (lane >= d)
            incl += v;
    }
    long long run = incl - mine;
    for (int e = e0; e < e1; e++) {
        int a, b;
        expert_rows(offsets, t_rows, e, &a, &b);
        upre[e] = (int)min(run, cap);
        run += (long long)((b - a + rows_per - 1) / rows_per) * mult;
    }
    if (lane == 31)
        upre[e_count] = (int)min(incl, cap);
}
__device__ __forceinline__ void count_units(const GroupedParams &p, int rows_per, long long mult,
                                            long long cap, int *upre, int lane)
{
    count_units(p.offsets, p.e_count, p.t_rows, rows_per, mult, cap, upre, lane);
}

/* the expert of unit u: the last e with upre[e] <= u (empty experts share it) */
__device__ __forceinline__ int expert_of(const int *upre, int e_count, int u)
{
    int lo = 0, hi = e_count;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (upre[mid] <= u)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* An expert's scales from its image header: the fold exponent its
 * operands were decoded with, the sums' undo 2^fold (NVFP4's and HiF4's
 * fixed folds, MX's from the header) and the NVFP4 tensor scale */
struct ExpertScales {
    int fold;
    float post, ts;
};

template <int F>
__device__ __forceinline__ ExpertScales expert_scales(const uint8_t *img)
{
    ExpertScales s;
    s.fold = (int)__ldg(reinterpret_cast<const unsigned *>(img + WIMG_H_FOLD));
    s.ts = __ldg(reinterpret_cast<const float *>(img + WIMG_H_TS));
    constexpr bool NVF = F == FMT_NV || F == FMT_NVPLUS;
    s.post = ldexpf(1.0f, NVF ? NV_FOLD : F == FMT_HIF4 ? HIF4_FOLD : s.fold);
    return s;
}

/* an output: the expert's tensor scale, its bias, bf16 */
__device__ __forceinline__ __nv_bfloat16 g_finish(const GroupedParams &p, float v, int e, int n,
                                                 float ts)
{
    if (p.use_ts)
        v = __fdiv_rn(v, ts);
    if (p.bias)
        v += __bfloat162float(p.bias[(size_t)e * p.n + n]);
    return __float2bfloat16_rn(v);
}

} // namespace bfpgemm

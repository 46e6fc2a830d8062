/* gemm_internal.h - between the matmul host code (gemm.cu) and the kernels'
 * launchers (gemm_fused.cu, gemm_skinny.cu, gemm_wgmma.cu, gemm_gemv.cu). */
#pragma once
#include "gemm_fused.cuh"

#include <cuda.h> /* CUtensorMap and its enums only: no libcuda symbol is linked */
#include <cuda_runtime.h>

#include <type_traits>

namespace bfpgemm {

/* fn(std::integral_constant<int, F>{}) for format kind F (FMT_*): the one
 * switch from a weight's kind to the kernel templates of every launcher */
template <class Fn>
cudaError_t with_kind(int fmt_kind, Fn &&fn)
{
    switch (fmt_kind) {
    case FMT_MX: return fn(std::integral_constant<int, FMT_MX>{});
    case FMT_MXPLUS: return fn(std::integral_constant<int, FMT_MXPLUS>{});
    case FMT_NV: return fn(std::integral_constant<int, FMT_NV>{});
    case FMT_NVPLUS: return fn(std::integral_constant<int, FMT_NVPLUS>{});
    default: return fn(std::integral_constant<int, FMT_HIF4>{});
    }
}

/* Launch the fused kernel for a format kind (FMT_*) with nt n8 tiles of x
 * per CTA on grid (CTA columns, splits, m chunks). */
cudaError_t launch_fused(int fmt_kind, const Params &p, int nt, dim3 grid, cudaStream_t s);

/* The skinny kernel (gemm_skinny.cu, m <= 32): nt = 1, 2 or 4 n8 tiles of
 * x; a unit is skinny_rows(nt) row tiles of W by one k tile. */
constexpr int skinny_rows(int nt) { return nt == 4 ? 2 : 4; }
/* bytes per tile of the scale record and of the MX+ / NVFP4+ correction
 * record (0: none) of format kind f, as prepacked (the skinny, wgmma and
 * GEMV kernels' stages and tensor maps) */
constexpr int tile_scale_bytes(int f) { return BFP_MM_SCALE_REC(f); }
constexpr int tile_corr_bytes(int f) { return BFP_MM_CORR_REC(f); }
/* The TMA tensor maps the skinny kernel copies a unit with (gemm.cu makes
 * them): codes, scales and corr as 3-D tensors {record bytes / 8, tiles_k,
 * tiles_n} of 8-byte elements with boxes {record / 8, 1, R} (R row tiles of
 * one k tile; corr unused without a correction record), x as a 2-D bf16
 * tensor {k, m} with box {64, m} and the 128-byte swizzle (unused when
 * p.x_vec is 0). */
struct SkinnyMaps {
    CUtensorMap codes, scales, corr, x;
};
/* warps of it that one SM holds at once */
int skinny_resident_warps(int fmt_kind, int nt);
/* grid: ceil(p.units / p.upw) warps; post_max_m as bfp_matmul_tuning's
 * (0: the measured default, -1: never) */
cudaError_t launch_skinny(int fmt_kind, const Params &p, const SkinnyMaps &maps, int nt,
                          int post_max_m, cudaStream_t s);

/* The Hopper kernel (gemm_wgmma.cu, sm_90a): CTAs of one producer and
 * consumers = 2 or 3 consumer warpgroups, wg_row_tiles(consumers) row tiles
 * of W (64 rows per consumer) by bn = 64 or 128 rows of x; grid (CTA
 * columns, p.splits, m chunks of bn). Its maps: codes, scales and corr with
 * boxes of wg_row_tiles(consumers) row tiles by one k tile (encode_records),
 * x with box {64, bn} (unused when p.x_vec is 0). */
__host__ __device__ constexpr int wg_row_tiles(int consumers) { return 4 * consumers; }
using WgmmaMaps = SkinnyMaps;
cudaError_t launch_wgmma(int fmt_kind, const Params &p, const WgmmaMaps &mp, int bn,
                         int consumers, dim3 grid, cudaStream_t s);

/* The GEMV kernel (gemm_gemv.cu, m <= 16): CTAs of GV_CW consumer warps
 * and a producer warp; a unit is GV_R row tiles of W (a group, 16 GV_R rows)
 * by GV_CW k tiles, copied with the maps of boxes {record / 8, GV_CW, GV_R};
 * units group-major, units = groups * chunks (chunks = ceil(tiles_k / GV_CW)),
 * each CTA of the grid an equal contiguous run. BFP_GV_R (build time, for
 * bench/gemv.sh's variants): the row tiles of a unit, 4 by default (8: x's
 * fragments and a stage's bookkeeping shared by twice the tiles, half the
 * stages) */
#ifndef BFP_GV_R
#define BFP_GV_R 4
#endif
constexpr int GV_CW = 8, GV_R = BFP_GV_R;
static_assert(GV_R == 4 || GV_R == 8, "a group of 64 or 128 rows");
struct GemvArgs {
    int units, chunks;
    /* grouped calls (gemm_grouped_api.cu, grouped_kernel = 3): the units are
     * counted on the device from the offsets, and units is the most there
     * can be (what the counters cover; more only with broken offsets, and
     * those are dropped); expert e's
     * image at base + e * stride, its rows offsets[e] .. offsets[e + 1] of
     * x and y (t_rows of them); groups = ceil(tiles_n / GV_R). The maps are
     * then 4-D, {record / 8, tiles_k, tiles_n, experts} with boxes {record /
     * 8, GV_CW, GV_R, 1}, and x's boxes are 8 nt rows. */
    const int *offsets;
    const uint8_t *base;
    size_t stride;
    int e_count, t_rows, groups;
    /* grouped calls under PDL: 1: the offsets and W's first stages are read
     * before griddepcontrol.wait (tuning gemv_pdl = 2) */
    int early;
    /* dense calls: 0 for the stream-K runs above; S >= 1 for clusters of S
     * CTAs (tuning gemv_split = 2): cluster c takes groups c, c + clusters,
     * ..., rank r of it chunks [r chunks / S, (r + 1) chunks / S) of each,
     * and the ranks add their sums in each other's shared memory (no
     * workspace); groups must be set */
    int cluster;
};
/* whether its stages carry x (then it needs the map of x) */
bool gemv_stages_x();
/* CTAs of it that one SM holds at once (nt = 1 or 2 n8 tiles of x; the
 * grouped kernel's) */
int gemv_resident_ctas(int fmt_kind, int nt, bool grouped = false);
/* clusters of size CTAs of the dense kernel that one GPU holds at once (0:
 * the runtime could not say) */
int gemv_cluster_capacity(int fmt_kind, int nt, int size);
/* pdl: launch with programmatic stream serialization (W's first stages are
 * copied before the previous kernel in the stream has finished; a grouped
 * call reads nothing before it has finished); grouped: a grouped call
 * (GemvArgs) */
cudaError_t launch_gemv(int fmt_kind, const Params &p, const SkinnyMaps &maps, const GemvArgs &a,
                        int nt, unsigned grid, int pdl, cudaStream_t s, bool grouped = false);

/* A TMA map of a 2-D tensor [rows][cols] of dt at base (rows row_bytes
 * apart, a multiple of 16) with boxes {box_cols, box_rows}; elements past
 * the tensor read as zeros. false when the driver or the map refuses. */
bool encode_2d(CUtensorMap *map, CUtensorMapDataType dt, const void *base, uint64_t cols,
               uint64_t rows, uint64_t row_bytes, uint32_t box_cols, uint32_t box_rows,
               CUtensorMapSwizzle swizzle);

/* x [m][k] bf16 as encode_2d's tensor {k, m} with boxes of one k tile (64
 * columns, zeros past k) by box_rows rows (zeros past m), 128-byte swizzled
 * (gemm_skinny.cu, x_chunk). Needs x 16-byte aligned and k % 8 == 0
 * (p.x_vec). */
bool encode_x(CUtensorMap *map, const void *x, size_t k, size_t m, size_t box_rows);

/* The current device's SM count, and whether it is compute capability 9.0
 * (the wgmma kernels' sm_90a); false when the runtime cannot say. */
bool current_device(int *sms, bool *sm90);

/* a packed weight's k (columns of x), and the front of a matmul's
 * workspace that the small-m kernels keep zero between calls (every other
 * path zeroes what it uses first, or needs no zeros: gemm.cu,
 * small_ws_bytes) */
size_t weight_k(const bfp_cuda_weight *w);
size_t weight_zero_front(const bfp_cuda_weight *w);

/* A TMA map of the rec-byte records of experts weights [tiles_n][tiles_k],
 * expert e's at base + e * expert_stride (a multiple of 16), as a 4-D
 * tensor {rec / 8, tiles_k, tiles_n, experts} of 8-byte elements with boxes
 * of r row tiles by kts k tiles of one expert (the grouped wgmma kernel's:
 * one k tile; the grouped GEMV's: GV_CW);
 * false when the driver or the map refuses. */
bool encode_expert_records(CUtensorMap *map, const void *base, size_t rec, size_t tiles_n,
                           size_t tiles_k, size_t experts, size_t expert_stride, int r,
                           int kts = 1);

/* Row tiles tile0 .. tile0 + row_tiles - 1 of a prepacked weight decoded to
 * rows [row_tiles * 16 (fewer past n)][k] at out: bf16 without NVFP4's
 * tensor scale, or (f32) float divided by ts as bfp_matmul_unpack does
 * (gemm_unpack.cu) */
cudaError_t launch_unpack(int fmt_kind, const void *codes, const void *scales, const void *corr,
                          int tiles_k, int n, int k, int tile0, int row_tiles, void *out,
                          bool f32, float ts, cudaStream_t s);

} // namespace bfpgemm

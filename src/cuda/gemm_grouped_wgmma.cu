/* gemm_grouped_wgmma.cu - the grouped (MoE) matmul on Hopper's wgmma
 * (bfp_matmul_tuning.grouped_kernel = 2): the dense wgmma kernel's producer,
 * weight traits and mainloop (gemm_wgmma_parts.cuh) in persistent CTAs
 * that walk tiles of all experts.
 *
 * A tile is (m tile j, CTA column c): m tile j is the BN rows of one
 * expert's x from its start (the last one partial), counted over the
 * experts in order (count_units on the offsets, in shared memory); c picks
 * 128 rows of W. Tiles run j-major, so the CTAs in flight at one time
 * share an expert's W (read from DRAM about once) and every CTA takes the
 * whole K (the tiles are many at the T this kernel serves; no split, no
 * workspace). The ring runs on from tile to tile (ring steps counted
 * across tiles), and the epilogue has its own tile in shared memory, so
 * the producer copies the next tile's stages while the consumers write y.
 * x rows past the expert's are copied (another expert's, or zeros past T)
 * and dropped in the epilogue. */
#include "gemm_grouped.cuh"
#include "gemm_wgmma_parts.cuh"

#include <climits>

namespace bfpgemm {
namespace gw {

using namespace wg;
constexpr int C = 2; /* consumer warpgroups */

/* The ring's stages and the epilogue tile's rows of x: at BN = 256 the
 * default 5 stages and a whole 256-row tile would not fit 227 KB, so the
 * ring has 4 and the tile 128 rows, filled and written twice per tile */
__host__ __device__ constexpr int g_stages(int bn) { return bn > 128 ? 4 : stages(bn); }
__host__ __device__ constexpr int g_epi_rows(int bn) { return bn > 128 ? 128 : bn; }
template <int F, int BN>
using GStage = Stage<F, BN, C, g_stages(BN)>;

template <int F, int BN>
constexpr int smem_bytes()
{
    return GStage<F, BN>::N * GStage<F, BN>::BYTES + g_epi_rows(BN) * tile_ld(C) * 4 + ALIGN;
}

/* the tile's rows to y: bias, tensor scale, rows of expert e below m1 */
template <int BN>
__device__ void g_epilogue(const GroupedParams &p, int e, int m0, int m1, int n0, float ts,
                           const float *tile, unsigned ctid)
{
    constexpr int NC = 128 * C, WR = wrows(C);
#pragma unroll 4
    for (unsigned i = ctid; i < BN * WR; i += NC) {
        const int n = n0 + (int)(i % WR), mm = m0 + (int)(i / WR);
        if (n < p.n && mm < m1)
            p.y[(size_t)mm * p.n + n] = g_finish(p, tile[i / WR * tile_ld(C) + i % WR], e, n, ts);
    }
}

/* Tile t of the walk: its expert, CTA column, end row and ring span
 * (steps: the ring steps of the tiles before) */
struct GTile {
    int e, col, rb;
    WgSpan sp;
};
template <int BN>
__device__ __forceinline__ GTile tile_at(const GroupedParams &p, const int *upre, long long t,
                                         int step)
{
    GTile g;
    const int j = (int)(t / p.cols);
    g.col = (int)(t % p.cols);
    g.e = expert_of(upre, p.e_count, j);
    int ra;
    expert_rows(p, g.e, &ra, &g.rb);
    g.sp = WgSpan{ra + (j - upre[g.e]) * BN, 0, p.tiles_k, step};
    return g;
}

template <int F, int BN>
__device__ __forceinline__ void produce_tile(const GroupedParams &p, const GroupedWgMaps &mp,
                                             const GTile &g, unsigned char *ring, uint32_t full,
                                             uint32_t empty, int tid)
{
    using S = GStage<F, BN>;
    const WgSrc src = {&mp.x, &mp.codes, &mp.scales, &mp.corr, p.x,
                       p.t_rows, p.k, p.x_vec, g.col * S::R, g.e};
    produce<F, BN, C, S::N>(src, g.sp, ring, full, empty, tid);
}

/* a consumer's part of tile g: the mainloop, then y through the epilogue
 * tile (twice, a half of x's rows each, when the tile is smaller) */
template <int F, int BN>
__device__ __forceinline__ void consume_tile(const GroupedParams &p, const GTile &g,
                                             unsigned char *ring, float *tile, uint32_t full,
                                             uint32_t empty, int u, int lane)
{
    using S = GStage<F, BN>;
    constexpr int ER = g_epi_rows(BN);
    const ExpertScales es = expert_scales<F>(p.base + (size_t)g.e * p.stride);
    float acc[BN / 2];
    consume<F, BN, C, S::N>(1, es.fold, g.sp, ring, full, empty, u, lane, acc);
    named_sync(2, 128 * C); /* every consumer is done with the previous tile's */
    stash_tile<BN, C, 0, ER>(acc, es.post, u, lane, tile);
    named_sync(2, 128 * C);
    g_epilogue<ER>(p, g.e, g.sp.m0, g.rb, g.col * wrows(C), es.ts, tile, threadIdx.x - 128);
    if constexpr (BN > ER) {
        named_sync(2, 128 * C);
        stash_tile<BN, C, ER, ER>(acc, es.post, u, lane, tile);
        named_sync(2, 128 * C);
        g_epilogue<ER>(p, g.e, g.sp.m0 + ER, g.rb, g.col * wrows(C), es.ts, tile,
                       threadIdx.x - 128);
    }
}

template <int F, int BN>
__global__ void __launch_bounds__(threads(C), 1)
    gemm_grouped_wgmma_kernel(const GroupedParams p, const __grid_constant__ GroupedWgMaps mp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = GStage<F, BN>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t full_bar[S::N], empty_bar[S::N];
    __shared__ int upre[G_MAX_EXPERTS + 1]; /* m tiles before expert e */
    const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = threadIdx.x & 31;
    if (threadIdx.x < 32)
        count_units(p, BN, 1, INT_MAX, upre, lane);
    if (threadIdx.x == 0)
        init_ring_barriers<C, S::N>(smem_addr(full_bar), smem_addr(empty_bar));
    __syncthreads();
    unsigned char *ring = ring_start(smem);
    float *tile = reinterpret_cast<float *>(ring + S::N * S::BYTES);
    const uint32_t full = smem_addr(full_bar), empty = smem_addr(empty_bar);
    const long long tiles = (long long)upre[p.e_count] * p.cols;
    if constexpr (moves_regs(BN, C)) {
        /* registers move: the two sides part here for good (code after a
         * join would run under the producer's count) */
        if (wgi == 0) {
            regs_dec<P_REGS>();
            for (long long t = blockIdx.x, step = 0; t < tiles; t += gridDim.x, step += p.tiles_k)
                produce_tile<F, BN>(p, mp, tile_at<BN>(p, upre, t, (int)step), ring, full,
                                    empty, tid);
            return;
        }
        regs_inc<consumer_regs(C)>();
        const int u = (wgi - 1) * 4 + (tid >> 5); /* this warp's W row tile in the CTA */
        for (long long t = blockIdx.x, step = 0; t < tiles; t += gridDim.x, step += p.tiles_k)
            consume_tile<F, BN>(p, tile_at<BN>(p, upre, t, (int)step), ring, tile, full, empty,
                                u, lane);
    } else {
        int step = 0; /* ring steps of the tiles before */
        for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
            const GTile g = tile_at<BN>(p, upre, t, step);
            step += p.tiles_k;
            if (wgi == 0) {
                produce_tile<F, BN>(p, mp, g, ring, full, empty, tid);
                continue;
            }
            const int u = (wgi - 1) * 4 + (tid >> 5); /* this warp's W row tile in the CTA */
            consume_tile<F, BN>(p, g, ring, tile, full, empty, u, lane);
        }
    }
#elif defined(__CUDA_ARCH__)
    __trap(); /* built without sm_90a: never a silent wrong answer */
#endif
}

template <int F, int BN>
cudaError_t launch_bn(const GroupedParams &p, const GroupedWgMaps &mp, unsigned grid,
                      cudaStream_t s)
{
    constexpr int smem = smem_bytes<F, BN>();
    static_assert(smem <= 227 * 1024, "the ring and the tile fit an SM's shared memory");
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_grouped_wgmma_kernel<F, BN>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    gemm_grouped_wgmma_kernel<F, BN><<<grid, threads(C), smem, s>>>(p, mp);
    return cudaGetLastError();
}

} // namespace gw

cudaError_t launch_grouped_wgmma(int fmt_kind, const GroupedParams &p, const GroupedWgMaps &mp,
                                 int bn, unsigned grid, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        constexpr int F = decltype(f)::value;
        return bn == 64    ? gw::launch_bn<F, 64>(p, mp, grid, s)
               : bn == 128 ? gw::launch_bn<F, 128>(p, mp, grid, s)
                           : gw::launch_bn<F, 256>(p, mp, grid, s);
    });
}

} // namespace bfpgemm

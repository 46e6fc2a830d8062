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

template <int F, int BN>
constexpr int smem_bytes() { return Stage<F, BN, C>::N * Stage<F, BN, C>::BYTES + BN * tile_ld(C) * 4 + ALIGN; }

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

template <int F, int BN>
__global__ void __launch_bounds__(threads(C), 1)
    gemm_grouped_wgmma_kernel(const GroupedParams p, const __grid_constant__ GroupedWgMaps mp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = Stage<F, BN, C>;
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
    int step = 0; /* ring steps of the tiles before */
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int j = (int)(t / p.cols), col = (int)(t % p.cols);
        const int e = expert_of(upre, p.e_count, j);
        int ra, rb;
        expert_rows(p, e, &ra, &rb);
        const WgSpan sp = {ra + (j - upre[e]) * BN, 0, p.tiles_k, step};
        step += p.tiles_k;
        if (wgi == 0) {
            const WgSrc src = {&mp.x, &mp.codes, &mp.scales, &mp.corr, p.x,
                               p.t_rows, p.k, p.x_vec, col * S::R, e};
            produce<F, BN, C>(src, sp, ring, full, empty, tid);
            continue;
        }
        const ExpertScales es = expert_scales<F>(p.base + (size_t)e * p.stride);
        const int u = (wgi - 1) * 4 + (tid >> 5); /* this warp's W row tile in the CTA */
        float acc[BN / 2];
        consume<F, BN, C>(1, es.fold, sp, ring, full, empty, u, lane, acc);
        named_sync(2, 128 * C); /* every consumer is done with the previous tile's */
        stash_tile<BN, C>(acc, es.post, u, lane, tile);
        named_sync(2, 128 * C);
        g_epilogue<BN>(p, e, sp.m0, rb, col * wrows(C), es.ts, tile, threadIdx.x - 128);
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
        return bn == 64 ? gw::launch_bn<F, 64>(p, mp, grid, s)
                        : gw::launch_bn<F, 128>(p, mp, grid, s);
    });
}

} // namespace bfpgemm

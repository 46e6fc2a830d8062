/* gemm_wgmma.cu - the Hopper matmul (BFP_MATMUL_WGMMA): y^T = W . x^T on
 * wgmma, W decoded in registers as the A operand, x from shared memory as
 * the B operand, fed by TMA through a ring of mbarrier-guarded stages.
 *
 * Pieces (each its own function; all but the scheduler and the epilogue's
 * second half in gemm_wgmma_parts.cuh, which the grouped kernel reuses):
 *  - weight traits: decode_tile<F> (gemm_fused.cuh) turns one prepacked
 *    16 x 64 tile into the A fragments of its four k16 steps, scales and the
 *    MX+ / NVFP4+ block-max correction applied in the operands. wgmma's
 *    register A fragment per warp is mma.m16n8k16's, so the prepacked layout
 *    serves as it is;
 *  - the tile scheduler (WgSched): blockIdx -> (W row tiles, x rows, K
 *    split);
 *  - the mainloop: warpgroup 0 is the producer (one thread issues the TMA
 *    copies of a k tile: x's 64 columns for BN rows, 128-byte swizzled, and
 *    the CTA's 4 C W tiles' codes, scale and correction records), warpgroups
 *    1..C the consumers (C = 2 or 3, bfp_matmul_tuning.wgmma_consumers), 64
 *    rows of W (4 row tiles) each by BN rows of x (BN = 64, 128, or 256
 *    with C = 2, bfp_matmul_tuning.wgmma_bn: at 256 each decoded W tile
 *    feeds twice the rows of x). With C = 3 or BN = 256 the producer hands
 *    registers to the consumers (setmaxnreg): the launch's share is fewer
 *    than a consumer's accumulators and two fragment sets take without
 *    spilling.
 *    A consumer issues k tile i's four wgmma and decodes k tile i + 1 while
 *    they run; mainloop_pipelined (the default) keeps one tile's group in
 *    flight across tiles, mainloop_serial (bfp_matmul_tuning.wgmma_serial = 1) waits for
 *    each;
 *  - the epilogue (wg_epilogue): the tile through shared memory, then bias,
 *    tensor scale and split K through per-split fp32 slices in the
 *    workspace, the last CTA of an output tile adding them in split order.
 * x that TMA cannot read (not 16-byte aligned, or k % 8 != 0) is staged by
 * the producer warpgroup's plain loads into the same swizzled layout.
 */
#include "gemm_wgmma_parts.cuh"

namespace bfpgemm {
namespace wg {

/* the ring's stages: stages(BN), or at BN <= 128 an experiment's count
 * (build knob BFP_WG_STAGES, bench/wg_trace.sh) */
__host__ __device__ constexpr int dense_stages(int bn)
{
#ifdef BFP_WG_STAGES
    return bn > 128 ? stages(bn) : BFP_WG_STAGES;
#else
    return stages(bn);
#endif
}
template <int F, int BN, int C>
using DStage = Stage<F, BN, C, dense_stages(BN)>;

template <int F, int BN, int C>
constexpr int smem_bytes() { return DStage<F, BN, C>::N * DStage<F, BN, C>::BYTES + ALIGN; }

/* Tile scheduler: the CTA's first W row tile, first x row and K range */
struct WgSched {
    int nt0, m0, kt0, nkt, split;
    __device__ WgSched(const Params &p, int bn, int row_tiles)
    {
        nt0 = blockIdx.x * row_tiles;
        m0 = blockIdx.z * bn;
        split = blockIdx.y;
        kt0 = split * p.tiles_per_split;
        nkt = min(kt0 + p.tiles_per_split, p.tiles_k) - kt0;
    }
};

/* Epilogue: acc[4q + e] is W row n = 16 u + g + 8 (e / 2) and x row
 * m0 + 8 q + 2 t + e % 2. The consumers first put the CTA's tile in shared
 * memory (tile: the ring, free once every stage is consumed) as [x row][W
 * row]; then each thread takes one W row of it (the consumers' count is a
 * multiple of the tile's W rows), so y, the split slices and the bias are
 * read and written along n, coalesced, and the bias is read once. Without
 * a split it writes y; with splits each CTA stores its partials in its
 * slice [split][m][n] of the workspace (p.ws: the slices) and the CTA that
 * completes the output tile's count adds the slices in split order, writes
 * y and zeroes the counter again (the slices need no zeroing: each split
 * writes all of its own). Consumer threads only (named barrier 2). */
template <int BN, int C>
__device__ void wg_epilogue(const Params &p, const WgSched &sc, float (&acc)[BN / 2], int u,
                            int lane, unsigned ctid, float *tile, unsigned *last)
{
    constexpr int NC = 128 * C, WR = wrows(C), LD = tile_ld(C); /* consumer threads */
    constexpr int RS = NC / WR; /* x rows apart: a thread's rows of the tile */
    static_assert(NC % WR == 0, "a thread keeps one W row");
    named_sync(2, NC); /* every consumer is done with the ring */
    stash_tile<BN, C>(acc, p.post, u, lane, tile);
    named_sync(2, NC);
    const int r0 = (int)(ctid / WR), n = sc.nt0 * 16 + (int)(ctid % WR);
    const int rows = min(BN, p.m - sc.m0);
    const bool n_in = n < p.n;
    const float b = n_in ? bias_at(p, n) : 0.0f;
    const float *own = tile + ctid % WR; /* this W row's column of the tile */
    auto at = [&](int r) { return (size_t)(sc.m0 + r) * p.n + n; };
    if (p.splits == 1) {
        if (n_in)
#pragma unroll 4
            for (int r = r0; r < rows; r += RS)
                p.y[at(r)] = finish_b(p, own[r * LD], b);
        return;
    }
    const size_t mn = (size_t)p.m * (size_t)p.n;
    if (n_in)
#pragma unroll 4
        for (int r = r0; r < rows; r += RS)
            __stcg(p.ws + sc.split * mn + at(r), own[r * LD]);
    __threadfence();
    named_sync(2, NC);
    unsigned *ctr = p.counters + (size_t)blockIdx.z * gridDim.x + blockIdx.x;
    if (ctid == 0)
        *last = atomicAdd(ctr, 1u) == (unsigned)p.splits - 1;
    named_sync(2, NC);
    if (!*last)
        return;
    __threadfence();
    /* the sum in split order whichever CTA is last (its own part from the
     * tile). RB rows per thread at a time, each split's loads of them
     * issued together before any store: one at a time, the stores (which
     * may alias the next loads) kept one load in flight per thread, and at
     * 2-4 splits this loop outlasted the mainloop. */
    constexpr int RB = 16;
    for (int r1 = r0; n_in && r1 < rows; r1 += RB * RS) {
        float tot[RB];
#pragma unroll
        for (int j = 0; j < RB; j++)
            tot[j] = 0.0f;
        for (int sp = 0; sp < p.splits; sp++) {
            float v[RB];
#pragma unroll
            for (int j = 0; j < RB; j++) {
                const int r = r1 + j * RS;
                v[j] = r >= rows        ? 0.0f
                       : sp == sc.split ? own[r * LD]
                                        : __ldcg(p.ws + sp * mn + at(r));
            }
#pragma unroll
            for (int j = 0; j < RB; j++)
                tot[j] += v[j];
        }
#pragma unroll
        for (int j = 0; j < RB; j++) {
            const int r = r1 + j * RS;
            if (r < rows)
                p.y[at(r)] = finish_b(p, tot[j], b);
        }
    }
    named_sync(2, NC);
    if (ctid == 0)
        *ctr = 0u;
}

template <int F, int BN, int C>
__global__ void __launch_bounds__(threads(C), 1)
    gemm_wgmma_kernel(const Params p, const __grid_constant__ WgmmaMaps mp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = DStage<F, BN, C>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t full_bar[S::N], empty_bar[S::N];
    __shared__ unsigned last_cta;
    const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = threadIdx.x & 31;
    /* the producer and the consumers part here for good and compute what
     * they need after the part: when registers move, a value live across it
     * would be kept in local memory (the two sides have different counts) */
    auto setup = [&](bool producer) {
        if (producer && tid == 0)
            init_ring_barriers<C, S::N>(smem_addr(full_bar), smem_addr(empty_bar));
        __syncthreads();
    };
    if (wgi == 0) {
        if constexpr (moves_regs(BN, C))
            regs_dec<P_REGS>();
        setup(true);
        const WgSched sc(p, BN, S::R);
        const WgSrc src = {&mp.x, &mp.codes, &mp.scales, &mp.corr, p.x,
                           p.m, p.k, p.x_vec, sc.nt0, -1};
        produce<F, BN, C, S::N>(src, WgSpan{sc.m0, sc.kt0, sc.nkt, 0}, ring_start(smem),
                          smem_addr(full_bar), smem_addr(empty_bar), tid);
        return;
    }
    if constexpr (moves_regs(BN, C))
        regs_inc<consumer_regs(C)>(); /* waits for the producer's release */
    setup(false);
    unsigned char *ring = ring_start(smem);
    const WgSched sc(p, BN, S::R);
    const int u = (wgi - 1) * 4 + (tid >> 5); /* this warp's W row tile in the CTA */
    /* sc.nkt >= 1: every split has k tiles (plan_wgmma) */
    float acc[BN / 2];
    consume<F, BN, C, S::N>(p.wg_pipe, p.mx_fold, WgSpan{sc.m0, sc.kt0, sc.nkt, 0}, ring,
                      smem_addr(full_bar), smem_addr(empty_bar), u, lane, acc);
    wg_epilogue<BN, C>(p, sc, acc, u, lane, threadIdx.x - 128, reinterpret_cast<float *>(ring),
                       &last_cta);
#elif defined(__CUDA_ARCH__)
    __trap(); /* built without sm_90a: never a silent wrong answer */
#endif
}

template <int F, int BN, int C>
cudaError_t launch_bn(const Params &p, const WgmmaMaps &mp, dim3 grid, cudaStream_t s)
{
    constexpr int smem = smem_bytes<F, BN, C>();
    static_assert(DStage<F, BN, C>::N * DStage<F, BN, C>::BYTES >= BN * tile_ld(C) * 4,
                  "the epilogue's tile fits the ring");
    static_assert(smem <= 227 * 1024, "the ring fits an SM's shared memory");
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_wgmma_kernel<F, BN, C>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    gemm_wgmma_kernel<F, BN, C><<<grid, threads(C), smem, s>>>(p, mp);
    return cudaGetLastError();
}

} // namespace wg

#ifdef BFP_WG_TRACE
/* the clock trace of the last dense wgmma launch (gemm_wgmma_parts.cuh):
 * dims = {CTAs, warpgroups, k tiles, points}, set whatever cap (words) is;
 * cudaErrorInvalidValue when host cannot hold the trace */
constexpr size_t WG_TR_WORDS =
    (size_t)wg::WG_TR_CTAS * wg::WG_TR_WGS * wg::WG_TR_TILES * wg::WG_TR_PTS;
extern "C" int bfp_wg_trace_read(uint32_t *host, size_t cap, int dims[4])
{
    dims[0] = wg::WG_TR_CTAS, dims[1] = wg::WG_TR_WGS, dims[2] = wg::WG_TR_TILES;
    dims[3] = wg::WG_TR_PTS;
    if (cap < WG_TR_WORDS)
        return (int)cudaErrorInvalidValue;
    return (int)cudaMemcpyFromSymbol(host, wg::wg_trace_buf, WG_TR_WORDS * 4);
}
extern "C" int bfp_wg_trace_reset(void)
{
    void *d;
    cudaError_t e = cudaGetSymbolAddress(&d, wg::wg_trace_buf);
    return (int)(e != cudaSuccess ? e : cudaMemset(d, 0, WG_TR_WORDS * 4));
}
#endif

cudaError_t launch_wgmma(int fmt_kind, const Params &p, const WgmmaMaps &mp, int bn,
                         int consumers, dim3 grid, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        constexpr int F = decltype(f)::value;
        if (consumers == 3)
            return bn == 64    ? wg::launch_bn<F, 64, 3>(p, mp, grid, s)
                   : bn == 128 ? wg::launch_bn<F, 128, 3>(p, mp, grid, s)
                               : cudaErrorInvalidValue; /* refused by the tuning check */
        return bn == 64    ? wg::launch_bn<F, 64, 2>(p, mp, grid, s)
               : bn == 128 ? wg::launch_bn<F, 128, 2>(p, mp, grid, s)
                           : wg::launch_bn<F, 256, 2>(p, mp, grid, s);
    });
}

} // namespace bfpgemm

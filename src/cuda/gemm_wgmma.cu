/* gemm_wgmma.cu - the Hopper matmul (BFP_MATMUL_WGMMA): y^T = W . x^T on
 * wgmma, W decoded in registers as the A operand, x from shared memory as
 * the B operand, fed by TMA through a ring of mbarrier-guarded stages.
 *
 * Pieces (each its own function, for the later variants to reuse):
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
 *    rows of W (4 row tiles) each by BN rows of x. With C = 3 the producer
 *    hands registers to the consumers (setmaxnreg): 512 threads get 128 each
 *    at launch, fewer than a consumer's accumulators and two fragment sets
 *    take without spilling.
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
#include "gemm_async.cuh"
#include "gemm_fused.cuh"
#include "gemm_internal.h"
#include "gemm_wgmma_mma.cuh"

namespace bfpgemm {
namespace wg {

/* C consumer warpgroups + the producer warpgroup */
constexpr int threads(int c) { return 128 * (1 + c); }
constexpr int STAGES = 6;
constexpr int ALIGN = 1024; /* the 128-byte swizzle's atom */
/* C = 3, after setmaxnreg: the producer keeps P3_REGS per thread (32 made
 * its staging of x spill), a consumer takes C3_REGS, from the 128 per thread
 * of the launch (ptxas gives a kernel with setmaxnreg its launch bound's
 * count: 65536 / 512) */
constexpr int P3_REGS = 40, C3_REGS = 152;
static_assert(128 * P3_REGS + 384 * C3_REGS <= 65536, "the CTA's registers");

template <int F, int BN, int C>
struct Stage {
    static constexpr int R = wg_row_tiles(C);
    static constexpr int SCB = tile_scale_bytes(F), CRB = tile_corr_bytes(F);
    static constexpr int X = 0;                    /* [BN][128 bytes], swizzled */
    static constexpr int CODES = BN * 128;         /* [R tiles][512] */
    static constexpr int SCALES = CODES + R * 512; /* TMA destinations: 128-byte aligned */
    static constexpr int CORR = SCALES + R * SCB;
    static constexpr int BYTES = (CORR + R * CRB + ALIGN - 1) / ALIGN * ALIGN;
    static constexpr uint32_t W_TX = R * (512 + SCB + CRB);
    static constexpr uint32_t X_TX = BN * 128;
    static_assert(SCALES % 128 == 0 && CORR % 128 == 0, "TMA destination alignment");
};

template <int F, int BN, int C>
constexpr int smem_bytes() { return STAGES * Stage<F, BN, C>::BYTES + ALIGN; }

/* named barrier id among n threads (0 is __syncthreads') */
__device__ __forceinline__ void named_sync(int id, int n)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

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

/* Producer: k tiles kt0.. into the ring. One thread with TMA when x is
 * TMA-readable; else all 128 threads of the warpgroup stage x by loads. */
template <int F, int BN, int C>
__device__ void produce(const Params &p, const WgmmaMaps &mp, const WgSched &sc,
                        unsigned char *ring, uint32_t full, uint32_t empty, int tid)
{
    using S = Stage<F, BN, C>;
    const uint32_t ring_a = smem_addr(ring);
    if (p.x_vec && tid != 0)
        return;
    for (int i = 0; i < sc.nkt; i++) {
        const int s = i % STAGES, kt = sc.kt0 + i;
        const uint32_t sb = ring_a + s * S::BYTES, fb = full + 8 * s;
        if (i >= STAGES)
            mbar_wait(empty + 8 * s, (uint32_t)(i / STAGES - 1) & 1u);
        if (p.x_vec) {
            mbar_expect(fb, S::X_TX + S::W_TX);
            tma_2d(sb + S::X, mp.x, kt * 64, sc.m0, fb);
        } else {
            /* BN rows x 8 chunks of 16 bytes; chunk c of row r at the
             * swizzled place c ^ (r & 7), as TMA puts it */
            unsigned char *st = ring + s * S::BYTES;
            const uint16_t *xs = reinterpret_cast<const uint16_t *>(p.x);
            for (int e = tid; e < BN * 8; e += 128) {
                const int r = e >> 3, c = e & 7, gm = sc.m0 + r, gk = kt * 64 + c * 8;
                uint32_t h[8];
#pragma unroll
                for (int q = 0; q < 8; q++)
                    h[q] = gm < p.m && gk + q < p.k ? __ldg(xs + (size_t)gm * p.k + gk + q) : 0u;
                *reinterpret_cast<uint4 *>(st + S::X + r * 128 + ((c ^ (r & 7)) << 4)) =
                    make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16,
                               h[6] | h[7] << 16);
            }
            /* the stores reach wgmma (the async proxy) through this fence,
             * and the consumers through the barrier's arrival */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            named_sync(1, 128);
            if (tid != 0)
                continue;
            mbar_expect(fb, S::W_TX);
        }
        tma_3d(sb + S::CODES, mp.codes, 0, kt, sc.nt0, fb);
        tma_3d(sb + S::SCALES, mp.scales, 0, kt, sc.nt0, fb);
        if (S::CRB)
            tma_3d(sb + S::CORR, mp.corr, 0, kt, sc.nt0, fb);
    }
}

/* Weight traits: the A fragments of this warp's row tile u in stage st */
template <int F, int SCB, int CRB>
__device__ __forceinline__ void decode_stage(const unsigned char *st, int codes_off, int scales_off,
                                             int corr_off, int u, int lane, int mx_fold,
                                             uint32_t (&a)[4][4])
{
    const int g = lane >> 2, t = lane & 3;
    const uint4 wc = reinterpret_cast<const uint4 *>(st + codes_off + u * 512)[lane];
    uint2 sc = make_uint2(0, 0), cr = make_uint2(0, 0);
    if (SCB == 64)
        sc = reinterpret_cast<const uint2 *>(st + scales_off + u * SCB)[g];
    else
        sc.x = reinterpret_cast<const uint32_t *>(st + scales_off + u * SCB)[g];
    if (F == FMT_MXPLUS)
        cr.x = reinterpret_cast<const uint32_t *>(st + corr_off + u * CRB)[g];
    if (F == FMT_NVPLUS)
        cr = reinterpret_cast<const uint2 *>(st + corr_off + u * CRB)[g];
    decode_tile<F>(wc, sc, cr, t, mx_fold, a);
}

/* Epilogue: acc[4q + e] is W row n = 16 u + g + 8 (e / 2) and x row
 * m0 + 8 q + 2 t + e % 2. The consumers first put the CTA's tile in shared
 * memory (tile: the ring, free once every stage is consumed) as [x row][W
 * row], so that y, the split slices and the bias are then read and written
 * along n, coalesced, by short loops (not the fragment loops, which
 * unrolled per element into a very long epilogue). Without a split
 * it writes y; with splits each CTA stores its partials in its slice
 * [split][m][n] of the workspace and the CTA that completes the output
 * tile's count adds the slices in split order, writes y and zeroes the
 * slices and the counter again. Consumer threads only (named barrier 2). */
/* W rows per CTA, and floats per tile row: 2 LD = 8 mod 32, so the fragment
 * stores hit 32 banks */
__host__ __device__ constexpr int wrows(int c) { return 16 * wg_row_tiles(c); }
__host__ __device__ constexpr int tile_ld(int c) { return wrows(c) + 4; }

template <int BN, int C>
__device__ void wg_epilogue(const Params &p, const WgSched &sc, float (&acc)[BN / 2], int u,
                            int lane, unsigned ctid, float *tile, unsigned *last)
{
    constexpr int NC = 128 * C, WR = wrows(C), TILE_LD = tile_ld(C); /* consumer threads */
    const int g = lane >> 2, t = lane & 3;
    named_sync(2, NC); /* every consumer is done with the ring */
#pragma unroll
    for (int q = 0; q < BN / 8; q++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            tile[(8 * q + 2 * t + (e & 1)) * TILE_LD + 16 * u + g + 8 * (e >> 1)] =
                acc[4 * q + e] * p.post;
    named_sync(2, NC);
    const int n0 = sc.nt0 * 16;
    /* element i of the tile: x row i / WR, W row i % WR */
    if (p.splits == 1) {
#pragma unroll 4
        for (unsigned i = ctid; i < BN * WR; i += NC) {
            const int n = n0 + (int)(i % WR), mm = sc.m0 + (int)(i / WR);
            if (n < p.n && mm < p.m)
                p.y[(size_t)mm * p.n + n] = finish(p, tile[i / WR * TILE_LD + i % WR], n);
        }
        return;
    }
    const size_t mn = (size_t)p.m * (size_t)p.n;
    float *slice = p.ws + (size_t)sc.split * mn;
#pragma unroll 4
    for (unsigned i = ctid; i < BN * WR; i += NC) {
        const int n = n0 + (int)(i % WR), mm = sc.m0 + (int)(i / WR);
        if (n < p.n && mm < p.m)
            __stcg(slice + (size_t)mm * p.n + n, tile[i / WR * TILE_LD + i % WR]);
    }
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
     * tile); several elements per thread in flight */
#pragma unroll 4
    for (unsigned i = ctid; i < BN * WR; i += NC) {
        const int n = n0 + (int)(i % WR), mm = sc.m0 + (int)(i / WR);
        if (n >= p.n || mm >= p.m)
            continue;
        const size_t off = (size_t)mm * p.n + n;
        float tot = 0.0f;
        for (int sp = 0; sp < p.splits; sp++) {
            tot += sp == sc.split ? tile[i / WR * TILE_LD + i % WR] : __ldcg(p.ws + sp * mn + off);
        }
        for (int sp = 0; sp < p.splits; sp++)
            __stcg(p.ws + sp * mn + off, 0.0f);
        p.y[off] = finish(p, tot, n);
    }
    named_sync(2, NC);
    if (ctid == 0)
        *ctr = 0u;
}

/* k tile i's four wgmma (one group) on A fragments a, x of stage base xb */
template <int BN>
__device__ __forceinline__ void issue_tile(float (&acc)[BN / 2], const uint32_t (&a)[4][4],
                                           uint32_t xb)
{
    const uint64_t d0 = desc_sw128(xb);
    wg::fence_regs(acc);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 4; j++)
        wgmma_bn<BN>(acc, a[j], d0 + (uint64_t)(2 * j)); /* + 32 j bytes */
    wgmma_commit();
}

/* The consumer mainloop that waits for each k tile's group: issue tile i,
 * decode tile i + 1 while it runs, wait for it, free its stage. */
template <int F, int BN, int C>
__device__ __forceinline__ void mainloop_serial(const Params &p, const WgSched &sc,
                                                unsigned char *ring, uint32_t full,
                                                uint32_t empty, int u, int lane,
                                                float (&acc)[BN / 2])
{
    using S = Stage<F, BN, C>;
    const uint32_t ring_a = smem_addr(ring);
    uint32_t a[4][4], an[4][4];
    mbar_wait(full, 0u);
    decode_stage<F, S::SCB, S::CRB>(ring, S::CODES, S::SCALES, S::CORR, u, lane, p.mx_fold, a);
    for (int i = 0; i < sc.nkt; i++) {
        const int s = i % STAGES;
        issue_tile<BN>(acc, a, ring_a + s * S::BYTES + S::X);
        if (i + 1 < sc.nkt) {
            const int s1 = (i + 1) % STAGES;
            mbar_wait(full + 8 * s1, (uint32_t)((i + 1) / STAGES) & 1u);
            decode_stage<F, S::SCB, S::CRB>(ring + s1 * S::BYTES, S::CODES, S::SCALES, S::CORR,
                                            u, lane, p.mx_fold, an);
        }
        wgmma_wait0();
        /* a is read by the wgmma until the wait: a use after it keeps the
         * compiler from decoding the next tile into a's registers (without
         * it the PTX reused them: a wgmma operand overwritten in flight) */
        keep_live(a);
        wg::fence_regs(acc);
        __syncwarp();
        if (lane == 0)
            mbar_arrive(empty + 8 * s);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                a[j][e] = an[j][e];
    }
}

/* The consumer mainloop with one k tile's group always in flight: issue
 * tile i, wait for tile i - 1's group (wait_group 1), free its stage, decode
 * tile i + 1 into the fragments tile i - 1 used, and so on; the two
 * fragment sets alternate by hand (a0: even tiles, a1: odd), each kept live
 * past the wait that ends its group. */
template <int F, int BN, int C>
__device__ __forceinline__ void mainloop_pipelined(const Params &p, const WgSched &sc,
                                                   unsigned char *ring, uint32_t full,
                                                   uint32_t empty, int u, int lane,
                                                   float (&acc)[BN / 2])
{
    using S = Stage<F, BN, C>;
    const uint32_t ring_a = smem_addr(ring);
    uint32_t a0[4][4], a1[4][4] = {};
    auto wait_decode = [&](int i, uint32_t (&a)[4][4]) {
        const int s = i % STAGES;
        mbar_wait(full + 8 * s, (uint32_t)(i / STAGES) & 1u);
        decode_stage<F, S::SCB, S::CRB>(ring + s * S::BYTES, S::CODES, S::SCALES, S::CORR, u,
                                        lane, p.mx_fold, a);
    };
    auto release = [&](int i) {
        __syncwarp();
        if (lane == 0)
            mbar_arrive(empty + 8 * (i % STAGES));
    };
    auto xb = [&](int i) { return ring_a + (i % STAGES) * S::BYTES + S::X; };
    wait_decode(0, a0);
    for (int i = 0; i < sc.nkt; i += 2) {
        issue_tile<BN>(acc, a0, xb(i));
        wgmma_wait1(); /* tile i - 1 (a1) done */
        keep_live(a1);
        if (i > 0)
            release(i - 1);
        if (i + 1 >= sc.nkt)
            break;
        wait_decode(i + 1, a1);
        issue_tile<BN>(acc, a1, xb(i + 1));
        wgmma_wait1(); /* tile i (a0) done */
        keep_live(a0);
        release(i);
        if (i + 2 < sc.nkt)
            wait_decode(i + 2, a0);
    }
    wgmma_wait0();
    keep_live(a0);
    keep_live(a1);
    wg::fence_regs(acc);
    release(sc.nkt - 1);
}

/* setmaxnreg: a whole warpgroup, the same count */
template <int N>
__device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }

template <int F, int BN, int C>
__global__ void __launch_bounds__(threads(C), 1)
    gemm_wgmma_kernel(const Params p, const __grid_constant__ WgmmaMaps mp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = Stage<F, BN, C>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
    __shared__ unsigned last_cta;
    const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = threadIdx.x & 31;
    /* the producer and the consumers part here for good and compute what
     * they need after the part: with C = 3 a value live across it would be
     * kept in local memory (the two sides have different register counts) */
    auto setup = [&](bool producer) {
        if (producer && tid == 0) {
            const uint32_t full = smem_addr(full_bar), empty = smem_addr(empty_bar);
            for (int s = 0; s < STAGES; s++) {
                mbar_init<1>(full + 8 * s);
                mbar_init<4 * C>(empty + 8 * s); /* one arrival per consumer warp */
            }
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncthreads();
    };
    if (wgi == 0) {
        if constexpr (C == 3)
            regs_dec<P3_REGS>();
        setup(true);
        unsigned char *ring = smem + ((ALIGN - (smem_addr(smem) & (ALIGN - 1))) & (ALIGN - 1));
        produce<F, BN, C>(p, mp, WgSched(p, BN, S::R), ring, smem_addr(full_bar),
                          smem_addr(empty_bar), tid);
        return;
    }
    if constexpr (C == 3)
        regs_inc<C3_REGS>(); /* waits for the producer's release */
    setup(false);
    unsigned char *ring = smem + ((ALIGN - (smem_addr(smem) & (ALIGN - 1))) & (ALIGN - 1));
    const uint32_t full = smem_addr(full_bar), empty = smem_addr(empty_bar);
    const WgSched sc(p, BN, S::R);

    const int u = (wgi - 1) * 4 + (tid >> 5); /* this warp's W row tile in the CTA */
    /* sc.nkt >= 1: every split has k tiles (plan_wgmma) */
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    if (p.wg_pipe)
        mainloop_pipelined<F, BN, C>(p, sc, ring, full, empty, u, lane, acc);
    else
        mainloop_serial<F, BN, C>(p, sc, ring, full, empty, u, lane, acc);
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
    static_assert(STAGES * Stage<F, BN, C>::BYTES >= BN * tile_ld(C) * 4,
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

cudaError_t launch_wgmma(int fmt_kind, const Params &p, const WgmmaMaps &mp, int bn,
                         int consumers, dim3 grid, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        constexpr int F = decltype(f)::value;
        if (consumers == 3)
            return bn == 64 ? wg::launch_bn<F, 64, 3>(p, mp, grid, s)
                            : wg::launch_bn<F, 128, 3>(p, mp, grid, s);
        return bn == 64 ? wg::launch_bn<F, 64, 2>(p, mp, grid, s)
                        : wg::launch_bn<F, 128, 2>(p, mp, grid, s);
    });
}

} // namespace bfpgemm

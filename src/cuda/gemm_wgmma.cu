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
 *    the CTA's 8 W tiles' codes, scale and correction records), warpgroups
 *    1 and 2 the consumers, 64 rows of W (4 row tiles) each by BN rows of x.
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

constexpr int CONSUMERS = 2;                   /* consumer warpgroups */
constexpr int THREADS = 128 * (1 + CONSUMERS); /* + the producer warpgroup */
constexpr int STAGES = 6;
constexpr int ALIGN = 1024; /* the 128-byte swizzle's atom */

template <int F, int BN>
struct Stage {
    static constexpr int SCB = tile_scale_bytes(F), CRB = tile_corr_bytes(F);
    static constexpr int X = 0;                    /* [BN][128 bytes], swizzled */
    static constexpr int CODES = BN * 128;         /* [8 tiles][512] */
    static constexpr int SCALES = CODES + WG_ROW_TILES * 512;
    static constexpr int CORR = SCALES + WG_ROW_TILES * SCB;
    static constexpr int BYTES = (CORR + WG_ROW_TILES * CRB + ALIGN - 1) / ALIGN * ALIGN;
    static constexpr uint32_t W_TX = WG_ROW_TILES * (512 + SCB + CRB);
    static constexpr uint32_t X_TX = BN * 128;
};

template <int F, int BN>
constexpr int smem_bytes() { return STAGES * Stage<F, BN>::BYTES + ALIGN; }
static_assert(STAGES * Stage<FMT_MX, 64>::BYTES >= 64 * (128 + 4) * 4 &&
                  STAGES * Stage<FMT_MX, 128>::BYTES >= 128 * (128 + 4) * 4,
              "the epilogue's tile fits the ring");

/* named barrier id among n threads (0 is __syncthreads') */
__device__ __forceinline__ void named_sync(int id, int n)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

/* Tile scheduler: the CTA's first W row tile, first x row and K range */
struct WgSched {
    int nt0, m0, kt0, nkt, split;
    __device__ WgSched(const Params &p, int bn)
    {
        nt0 = blockIdx.x * WG_ROW_TILES;
        m0 = blockIdx.z * bn;
        split = blockIdx.y;
        kt0 = split * p.tiles_per_split;
        nkt = min(kt0 + p.tiles_per_split, p.tiles_k) - kt0;
    }
};

/* Producer: k tiles kt0.. into the ring. One thread with TMA when x is
 * TMA-readable; else all 128 threads of the warpgroup stage x by loads. */
template <int F, int BN>
__device__ void produce(const Params &p, const WgmmaMaps &mp, const WgSched &sc,
                        unsigned char *ring, uint32_t full, uint32_t empty, int tid)
{
    using S = Stage<F, BN>;
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
constexpr int TILE_LD = 128 + 4; /* floats per tile row: fragment stores hit 32 banks */

template <int BN>
__device__ void wg_epilogue(const Params &p, const WgSched &sc, float (&acc)[BN / 2], int u,
                            int lane, int ctid, float *tile, unsigned *last)
{
    constexpr int NC = 128 * CONSUMERS; /* consumer threads */
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
    /* element i of the tile: x row i / 128, W row i % 128 */
    if (p.splits == 1) {
#pragma unroll 4
        for (int i = ctid; i < BN * 128; i += NC) {
            const int n = n0 + (i & 127), mm = sc.m0 + (i >> 7);
            if (n < p.n && mm < p.m)
                p.y[(size_t)mm * p.n + n] = finish(p, tile[(i >> 7) * TILE_LD + (i & 127)], n);
        }
        return;
    }
    const size_t mn = (size_t)p.m * (size_t)p.n;
    float *slice = p.ws + (size_t)sc.split * mn;
#pragma unroll 4
    for (int i = ctid; i < BN * 128; i += NC) {
        const int n = n0 + (i & 127), mm = sc.m0 + (i >> 7);
        if (n < p.n && mm < p.m)
            __stcg(slice + (size_t)mm * p.n + n, tile[(i >> 7) * TILE_LD + (i & 127)]);
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
    for (int i = ctid; i < BN * 128; i += NC) {
        const int n = n0 + (i & 127), mm = sc.m0 + (i >> 7);
        if (n >= p.n || mm >= p.m)
            continue;
        const size_t off = (size_t)mm * p.n + n;
        float tot = 0.0f;
        for (int sp = 0; sp < p.splits; sp++) {
            tot += sp == sc.split ? tile[(i >> 7) * TILE_LD + (i & 127)] : __ldcg(p.ws + sp * mn + off);
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
template <int F, int BN>
__device__ __forceinline__ void mainloop_serial(const Params &p, const WgSched &sc,
                                                unsigned char *ring, uint32_t full,
                                                uint32_t empty, int u, int lane,
                                                float (&acc)[BN / 2])
{
    using S = Stage<F, BN>;
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
template <int F, int BN>
__device__ __forceinline__ void mainloop_pipelined(const Params &p, const WgSched &sc,
                                                   unsigned char *ring, uint32_t full,
                                                   uint32_t empty, int u, int lane,
                                                   float (&acc)[BN / 2])
{
    using S = Stage<F, BN>;
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

template <int F, int BN>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_wgmma_kernel(const Params p, const __grid_constant__ WgmmaMaps mp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using S = Stage<F, BN>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
    __shared__ unsigned last_cta;
    unsigned char *ring = smem + ((ALIGN - (smem_addr(smem) & (ALIGN - 1))) & (ALIGN - 1));
    const uint32_t full = smem_addr(full_bar), empty = smem_addr(empty_bar);
    const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = threadIdx.x & 31;
    const WgSched sc(p, BN);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init<1>(full + 8 * s);
            mbar_init<4 * CONSUMERS>(empty + 8 * s); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wgi == 0) {
        produce<F, BN>(p, mp, sc, ring, full, empty, tid);
        return;
    }

    const int u = (wgi - 1) * 4 + (tid >> 5); /* this warp's W row tile in the CTA */
    /* sc.nkt >= 1: every split has k tiles (plan_wgmma) */
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    if (p.wg_pipe)
        mainloop_pipelined<F, BN>(p, sc, ring, full, empty, u, lane, acc);
    else
        mainloop_serial<F, BN>(p, sc, ring, full, empty, u, lane, acc);
    wg_epilogue<BN>(p, sc, acc, u, lane, threadIdx.x - 128, reinterpret_cast<float *>(ring),
                    &last_cta);
#elif defined(__CUDA_ARCH__)
    __trap(); /* built without sm_90a: never a silent wrong answer */
#endif
}

template <int F, int BN>
cudaError_t launch_bn(const Params &p, const WgmmaMaps &mp, dim3 grid, cudaStream_t s)
{
    constexpr int smem = smem_bytes<F, BN>();
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_wgmma_kernel<F, BN>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    gemm_wgmma_kernel<F, BN><<<grid, THREADS, smem, s>>>(p, mp);
    return cudaGetLastError();
}

} // namespace wg

cudaError_t launch_wgmma(int fmt_kind, const Params &p, const WgmmaMaps &mp, int bn, dim3 grid,
                         cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        constexpr int F = decltype(f)::value;
        return bn == 64 ? wg::launch_bn<F, 64>(p, mp, grid, s)
                        : wg::launch_bn<F, 128>(p, mp, grid, s);
    });
}

} // namespace bfpgemm

/* gemm_wgmma_parts.cuh - the pieces of the Hopper matmul that its variants
 * share (the dense kernel, gemm_wgmma.cu; the grouped one,
 * gemm_grouped_wgmma.cu): the stage layout of the TMA ring, the producer,
 * the weight traits (decode of a stage's W tiles), the two consumer
 * mainloops and the first half of the epilogue (the accumulators into a
 * shared tile). Ring steps are counted from a base, so a persistent CTA
 * runs tile after tile through one ring. Needs sm_90a. */
#pragma once
#include "gemm_async.cuh"
#include "gemm_fused.cuh"
#include "gemm_internal.h"
#include "gemm_wgmma_mma.cuh"

namespace bfpgemm {
namespace wg {

/* C consumer warpgroups + the producer warpgroup */
__host__ __device__ constexpr int threads(int c) { return 128 * (1 + c); }
constexpr int ALIGN = 1024; /* the 128-byte swizzle's atom */
/* stages of the ring: 6, or 5 at BN = 256, whose 38 KB stages would not
 * fit 6 times in an SM's 227 KB */
__host__ __device__ constexpr int stages(int bn) { return bn > 128 ? 5 : 6; }

/* NS: the ring's stages (the default, or fewer where something else
 * shares the SM's shared memory: the grouped kernel's epilogue tile) */
template <int F, int BN, int C, int NS = stages(BN)>
struct Stage {
    static constexpr int R = wg_row_tiles(C);
    static constexpr int SCB = tile_scale_bytes(F), CRB = tile_corr_bytes(F);
    static constexpr int X = 0;                    /* [BN][128 bytes], swizzled */
    static constexpr int CODES = BN * 128;         /* [R tiles][512] */
    static constexpr int SCALES = CODES + R * 512; /* TMA destinations: 128-byte aligned */
    static constexpr int CORR = SCALES + R * SCB;
    static constexpr int BYTES = (CORR + R * CRB + ALIGN - 1) / ALIGN * ALIGN;
    static constexpr int N = NS;
    static constexpr uint32_t W_TX = R * (512 + SCB + CRB);
    static constexpr uint32_t X_TX = BN * 128;
    static_assert(SCALES % 128 == 0 && CORR % 128 == 0, "TMA destination alignment");
};

/* W rows per CTA, and floats per row of the epilogue's tile: 2 LD = 8 mod
 * 32, so the fragment stores hit 32 banks */
__host__ __device__ constexpr int wrows(int c) { return 16 * wg_row_tiles(c); }
__host__ __device__ constexpr int tile_ld(int c) { return wrows(c) + 4; }

/* Registers moved by setmaxnreg where the launch's share is too small for a
 * consumer: C = 3 (512 threads get 128 each) and BN = 256 (384 threads get
 * 168; a consumer holds 128 accumulators and two fragment sets). The
 * producer keeps P_REGS per thread (32 made its staging of x spill), a
 * consumer takes what the producer gave up (ptxas gives a kernel with
 * setmaxnreg its launch bound's count, 65536 / threads rounded down to 8).
 * A value live across the move can end up in local memory (the dense
 * kernel's C = 3 did; the two sides have different counts): the SASS of
 * every such kernel is checked for local loads and stores. What must not
 * be joined is the two sides' code after the move: the joined part would
 * run under the producer's count (the grouped kernel's 256-row tiles
 * spilled so). */
constexpr int P_REGS = 40;
__host__ __device__ constexpr int launch_regs(int c) { return 65536 / threads(c) / 8 * 8; }
__host__ __device__ constexpr int consumer_regs(int c)
{
    return launch_regs(c) + (launch_regs(c) - P_REGS) / c / 8 * 8;
}
__host__ __device__ constexpr bool moves_regs(int bn, int c) { return c == 3 || bn == 256; }
static_assert(consumer_regs(3) == 152 && consumer_regs(2) == 232, "the CTA's registers");

/* setmaxnreg: a whole warpgroup, the same count */
template <int N>
__device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }

/* named barrier id among n threads (0 is __syncthreads') */
__device__ __forceinline__ void named_sync(int id, int n)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}

/* One CTA tile's run through the ring: x rows m0.., k tiles kt0 ..
 * kt0 + nkt - 1, in ring steps base .. base + nkt - 1 (step g in stage
 * g % N, phase g / N, N the ring's stages) */
struct WgSpan {
    int m0, kt0, nkt, base;
};

/* Where the producer copies from: x bf16 [m][k] (by TMA through map x when
 * x_vec, else by loads), W's records through the maps at row tile nt0, of
 * expert e of a grouped weight (4-D maps) or of a single weight (e < 0,
 * 3-D maps) */
struct WgSrc {
    const CUtensorMap *x, *codes, *scales, *corr;
    const __nv_bfloat16 *xp;
    int m, k, x_vec, nt0, e;
};

/* Producer: the span's k tiles into the ring. One thread with TMA when x
 * is TMA-readable; else all 128 threads of the warpgroup stage x by loads. */
template <int F, int BN, int C, int NS = stages(BN)>
__device__ void produce(const WgSrc &src, const WgSpan &sp, unsigned char *ring, uint32_t full,
                        uint32_t empty, int tid)
{
    using S = Stage<F, BN, C, NS>;
    const uint32_t ring_a = smem_addr(ring);
    if (src.x_vec && tid != 0)
        return;
    for (int i = 0; i < sp.nkt; i++) {
        const int g = sp.base + i, s = g % S::N, kt = sp.kt0 + i;
        const uint32_t sb = ring_a + s * S::BYTES, fb = full + 8 * s;
        if (g >= S::N)
            mbar_wait(empty + 8 * s, (uint32_t)(g / S::N - 1) & 1u);
        if (src.x_vec) {
            mbar_expect(fb, S::X_TX + S::W_TX);
            tma_2d(sb + S::X, *src.x, kt * 64, sp.m0, fb);
        } else {
            /* BN rows x 8 chunks of 16 bytes; chunk c of row r at the
             * swizzled place c ^ (r & 7), as TMA puts it */
            unsigned char *st = ring + s * S::BYTES;
            const uint16_t *xs = reinterpret_cast<const uint16_t *>(src.xp);
            for (int e = tid; e < BN * 8; e += 128) {
                const int r = e >> 3, c = e & 7, gm = sp.m0 + r, gk = kt * 64 + c * 8;
                uint32_t h[8];
#pragma unroll
                for (int q = 0; q < 8; q++)
                    h[q] = gm < src.m && gk + q < src.k ? __ldg(xs + (size_t)gm * src.k + gk + q)
                                                        : 0u;
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
        if (src.e < 0) {
            tma_3d(sb + S::CODES, *src.codes, 0, kt, src.nt0, fb);
            tma_3d(sb + S::SCALES, *src.scales, 0, kt, src.nt0, fb);
            if (S::CRB)
                tma_3d(sb + S::CORR, *src.corr, 0, kt, src.nt0, fb);
        } else {
            tma_4d(sb + S::CODES, *src.codes, 0, kt, src.nt0, src.e, fb);
            tma_4d(sb + S::SCALES, *src.scales, 0, kt, src.nt0, src.e, fb);
            if (S::CRB)
                tma_4d(sb + S::CORR, *src.corr, 0, kt, src.nt0, src.e, fb);
        }
    }
}

/* Weight traits: this warp's row tile u in stage st, ready to be decoded
 * one k16 step at a time (tile_step) */
template <int F, int SCB, int CRB>
__device__ __forceinline__ void stage_ops(const unsigned char *st, int codes_off, int scales_off,
                                          int corr_off, int u, int lane, int mx_fold,
                                          TileOps<F> &o)
{
    const int t = lane & 3, g = lane >> 2;
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
    tile_ops<F>(wc, sc, cr, t, mx_fold, o);
}

/* the same tile's A fragments, all four steps */
template <int F, int SCB, int CRB>
__device__ __forceinline__ void decode_stage(const unsigned char *st, int codes_off, int scales_off,
                                             int corr_off, int u, int lane, int mx_fold,
                                             uint32_t (&a)[4][4])
{
    TileOps<F> o;
    stage_ops<F, SCB, CRB>(st, codes_off, scales_off, corr_off, u, lane, mx_fold, o);
#pragma unroll
    for (int j = 0; j < 4; j++)
        tile_step<F>(o, j, a[j]);
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

#ifdef BFP_WG_TRACE
/* An experiment's clock trace (bench/wg_trace.sh; never in the library's
 * default build): for the first WG_TR_CTAS CTAs, lane 0 of each consumer
 * warpgroup's first warp records the SM clock at WG_TR_PTS points of each
 * of its first WG_TR_TILES k tiles (mainloop_pipelined says which). Each
 * translation unit that includes this has its own buffer; the dense
 * kernel's is read through gemm_wgmma.cu's bfp_wg_trace_read. */
constexpr int WG_TR_CTAS = 264, WG_TR_WGS = 3, WG_TR_TILES = 128, WG_TR_PTS = 6;
static __device__ uint32_t wg_trace_buf[WG_TR_CTAS * WG_TR_WGS * WG_TR_TILES * WG_TR_PTS];
__device__ __forceinline__ void wg_mark(int u, int lane, int tile, int pt, uint32_t c)
{
    const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (lane == 0 && (u & 3) == 0 && tile < WG_TR_TILES && cta < WG_TR_CTAS)
        wg_trace_buf[((cta * WG_TR_WGS + (u >> 2)) * WG_TR_TILES + tile) * WG_TR_PTS + pt] = c;
}
__device__ __forceinline__ uint32_t wg_clock()
{
    uint32_t c;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c)::"memory");
    return c;
}
/* the global nanosecond timer's low word: comparable between SMs */
__device__ __forceinline__ uint32_t wg_gtime()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return (uint32_t)t;
}
/* the clock once the fragments a are computed (they are its inputs) */
__device__ __forceinline__ uint32_t wg_clock_after(const uint32_t (&a)[4][4])
{
    keep_live(a);
    return wg_clock();
}
#define WG_MARK(tile, pt) wg_mark(u, lane, (tile), (pt), wg_clock())
#define WG_MARK_AFTER(tile, pt, a) wg_mark(u, lane, (tile), (pt), wg_clock_after(a))
#else
#define WG_MARK(tile, pt) ((void)0)
#define WG_MARK_AFTER(tile, pt, a) ((void)0)
#endif

/* wait until ring step g's stage is full (N stages); its index */
template <int N>
__device__ __forceinline__ int wait_full(uint32_t full, int g)
{
    const int s = g % N;
    mbar_wait(full + 8 * s, (uint32_t)(g / N) & 1u);
    return s;
}

/* The consumer mainloop that waits for each k tile's group: issue tile i,
 * decode tile i + 1 while it runs, wait for it, free its stage. */
template <int F, int BN, int C, int NS>
__device__ __forceinline__ void mainloop_serial(int mx_fold, const WgSpan &sp, unsigned char *ring,
                                                uint32_t full, uint32_t empty, int u, int lane,
                                                float (&acc)[BN / 2])
{
    using S = Stage<F, BN, C, NS>;
    const uint32_t ring_a = smem_addr(ring);
    uint32_t a[4][4], an[4][4];
    const int s0 = wait_full<S::N>(full, sp.base);
    decode_stage<F, S::SCB, S::CRB>(ring + s0 * S::BYTES, S::CODES, S::SCALES, S::CORR, u, lane,
                                    mx_fold, a);
    for (int i = 0; i < sp.nkt; i++) {
        const int s = (sp.base + i) % S::N;
        issue_tile<BN>(acc, a, ring_a + s * S::BYTES + S::X);
        if (i + 1 < sp.nkt) {
            const int s1 = wait_full<S::N>(full, sp.base + i + 1);
            decode_stage<F, S::SCB, S::CRB>(ring + s1 * S::BYTES, S::CODES, S::SCALES, S::CORR,
                                            u, lane, mx_fold, an);
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
template <int F, int BN, int C, int NS>
__device__ __forceinline__ void mainloop_pipelined(int mx_fold, const WgSpan &sp,
                                                   unsigned char *ring, uint32_t full,
                                                   uint32_t empty, int u, int lane,
                                                   float (&acc)[BN / 2])
{
    using S = Stage<F, BN, C, NS>;
    const uint32_t ring_a = smem_addr(ring);
    uint32_t a0[4][4], a1[4][4] = {};
    /* trace points of tile i (WG_MARK): 0 before its issue, 1 after it, 2
     * after the wait for tile i - 1, 3 after the wait for stage i + 1, 4
     * once tile i + 1 is decoded; point 5 of tile 0: the SM, of tiles 1 and 2:
     * the global timer (ns) at the loop's start and end */
    auto wait_decode = [&](int i, uint32_t (&a)[4][4]) {
        const int s = wait_full<S::N>(full, sp.base + i);
        WG_MARK(i - 1, 3);
        decode_stage<F, S::SCB, S::CRB>(ring + s * S::BYTES, S::CODES, S::SCALES, S::CORR, u,
                                        lane, mx_fold, a);
        WG_MARK_AFTER(i - 1, 4, a);
    };
    auto release = [&](int i) {
        __syncwarp();
        if (lane == 0)
            mbar_arrive(empty + 8 * ((sp.base + i) % S::N));
    };
    auto xb = [&](int i) { return ring_a + ((sp.base + i) % S::N) * S::BYTES + S::X; };
#ifdef BFP_WG_TRACE
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    wg_mark(u, lane, 0, 5, sm);
    wg_mark(u, lane, 1, 5, wg_gtime());
#endif
    wait_decode(0, a0);
    for (int i = 0; i < sp.nkt; i += 2) {
        WG_MARK(i, 0);
        issue_tile<BN>(acc, a0, xb(i));
        WG_MARK(i, 1);
        wgmma_wait1(); /* tile i - 1 (a1) done */
        WG_MARK(i, 2);
        keep_live(a1);
        if (i > 0)
            release(i - 1);
        if (i + 1 >= sp.nkt)
            break;
        wait_decode(i + 1, a1);
        WG_MARK(i + 1, 0);
        issue_tile<BN>(acc, a1, xb(i + 1));
        WG_MARK(i + 1, 1);
        wgmma_wait1(); /* tile i (a0) done */
        WG_MARK(i + 1, 2);
        keep_live(a0);
        release(i);
        if (i + 2 < sp.nkt)
            wait_decode(i + 2, a0);
    }
    wgmma_wait0();
    keep_live(a0);
    keep_live(a1);
    wg::fence_regs(acc);
#ifdef BFP_WG_TRACE
    wg_mark(u, lane, 2, 5, wg_gtime());
#endif
    release(sp.nkt - 1);
}

/* The consumer mainloop that commits each k16 step's wgmma alone, in the
 * order of CUTLASS's mixed-input mainloop (wgmma_serial = 2; an
 * experiment): issue step j of tile i, wait until at most three steps are
 * in flight (then the step that last read step j + 1's registers, a tile
 * ago, is done) and decode step j + 1 into them; after step 3 read the next
 * tile's stage and decode its step 0. One fragment set; a warp's decode of
 * the next step runs while its own last three steps are in flight, where
 * the tile-at-a-time mainloops overlap it with one group at most. */
template <int F, int BN, int C, int NS>
__device__ __forceinline__ void mainloop_steps(int mx_fold, const WgSpan &sp, unsigned char *ring,
                                               uint32_t full, uint32_t empty, int u, int lane,
                                               float (&acc)[BN / 2])
{
    using S = Stage<F, BN, C, NS>;
    const uint32_t ring_a = smem_addr(ring);
    uint32_t a[4][4];
    TileOps<F> o;
    auto wait_ops = [&](int i) {
        const int s = wait_full<S::N>(full, sp.base + i);
        stage_ops<F, S::SCB, S::CRB>(ring + s * S::BYTES, S::CODES, S::SCALES, S::CORR, u, lane,
                                     mx_fold, o);
    };
    auto release = [&](int i, bool go) {
        __syncwarp();
        mbar_arrive_if(empty + 8 * ((sp.base + i) % S::N), (uint32_t)(lane == 0 && go));
    };
    wait_ops(0);
    tile_step<F>(o, 0, a[0]);
    for (int i = 0; i < sp.nkt; i++) {
        const uint64_t d0 = desc_sw128(ring_a + ((sp.base + i) % S::N) * S::BYTES + S::X);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            wg::fence_regs(acc);
            wgmma_fence();
            wgmma_bn<BN>(acc, a[j], d0 + (uint64_t)(2 * j)); /* + 32 j bytes */
            wgmma_commit();
            if (j == 3 && i + 1 < sp.nkt)
                wait_ops(i + 1); /* step 3 of tile i decoded already: o is free */
            wgmma_wait<3>();
            keep_live(a[(j + 1) & 3]);
            if (j == 2) /* tile i - 1's step 3, its last, is done */
                release(i > 0 ? i - 1 : 0, i > 0);
            if (j < 3)
                tile_step<F>(o, j + 1, a[j + 1]);
            else if (i + 1 < sp.nkt)
                tile_step<F>(o, 0, a[0]);
        }
    }
    wgmma_wait0();
    keep_live(a);
    wg::fence_regs(acc);
    release(sp.nkt - 1, true);
}

/* The accumulators times post into tile [x row][W row] (row pitch
 * tile_ld(C)): acc[4q + e] is W row 16 u + g + 8 (e / 2) and x row
 * 8 q + 2 t + e % 2 of the CTA's tile; ROWS rows of x from row R0 (the
 * whole tile by default, or a part of it into a smaller tile). The caller
 * syncs the consumers before (the tile is free) and after (it is whole). */
template <int BN, int C, int R0 = 0, int ROWS = BN>
__device__ __forceinline__ void stash_tile(const float (&acc)[BN / 2], float post, int u, int lane,
                                           float *tile)
{
    static_assert(R0 % 8 == 0 && ROWS % 8 == 0 && R0 + ROWS <= BN, "whole n8 chunks");
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int q = R0 / 8; q < (R0 + ROWS) / 8; q++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            tile[(8 * q - R0 + 2 * t + (e & 1)) * tile_ld(C) + 16 * u + g + 8 * (e >> 1)] =
                acc[4 * q + e] * post;
}

/* run a consumer mainloop into acc, zeroed first: pipe 1 the pipelined
 * one, 0 the serial one, 2 the one step at a time */
template <int F, int BN, int C, int NS = stages(BN)>
__device__ __forceinline__ void consume(int pipe, int mx_fold, const WgSpan &sp,
                                        unsigned char *ring, uint32_t full, uint32_t empty, int u,
                                        int lane, float (&acc)[BN / 2])
{
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    if (pipe == 2)
        mainloop_steps<F, BN, C, NS>(mx_fold, sp, ring, full, empty, u, lane, acc);
    else if (pipe)
        mainloop_pipelined<F, BN, C, NS>(mx_fold, sp, ring, full, empty, u, lane, acc);
    else
        mainloop_serial<F, BN, C, NS>(mx_fold, sp, ring, full, empty, u, lane, acc);
}

/* the ring's barriers: full (one arrival, the producer's, plus the bytes)
 * and empty (one arrival per consumer warp), for N stages; one thread,
 * before the CTA's first __syncthreads */
template <int C, int N>
__device__ __forceinline__ void init_ring_barriers(uint32_t full, uint32_t empty)
{
    for (int s = 0; s < N; s++) {
        mbar_init<1>(full + 8 * s);
        mbar_init<4 * C>(empty + 8 * s);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* the 1024-aligned start of the ring in dynamic shared memory */
__device__ __forceinline__ unsigned char *ring_start(unsigned char *smem)
{
    return smem + ((ALIGN - (smem_addr(smem) & (ALIGN - 1))) & (ALIGN - 1));
}

} // namespace wg
} // namespace bfpgemm

/* gemm_skinny.cu - the weight-only matmul for few rows of x (m <= 32): a
 * stream-K GEMV on the tensor cores. The prepacked tiles of W are cut into
 * units of R row tiles (a band of 16 R rows of W) by one k tile, ordered
 * band-major, and each warp of a grid that is resident all at once takes an
 * equal run of consecutive units. A warp streams its run through a ring of
 * SK_STAGES units in shared memory filled by TMA tensor copies that one lane
 * starts (one mbarrier per stage): W's tiles and x's columns of the unit, so
 * every SM keeps ~100 KB on the way without registers. With the next unit in registers
 * instead, a warp had one unit in flight and the kernel reached 1.4 TB/s; the
 * old kernel (gemm_fused.cu) gives each CTA a few tiles and spends most of
 * its life on staging x and on the split-K epilogue. A warp that
 * covers a whole band writes y; otherwise its partial sums meet the band's
 * other warps' in the fp32 workspace, and the band's last warp (counted in
 * k tiles) writes y and zeroes the workspace again. */
#include "gemm_fused.cuh"
#include "gemm_async.cuh"
#include "gemm_internal.h"

#include <limits.h>

namespace bfpgemm {

/* BFP_SK_STAGES: stages per warp, a build-time knob for PARTS=skstages
 * (fewer stages, more warps per SM) */
#ifndef BFP_SK_STAGES
#define BFP_SK_STAGES 3
#endif
constexpr int SK_WARPS = 4, SK_STAGES = BFP_SK_STAGES;

constexpr int pad128(int b) { return (b + 127) & ~127; }

/* One stage (one unit) is two parts: x's 8 NT rows of the k tile, 128 bytes
 * each as the 128-byte swizzle leaves them (1024-byte aligned: the swizzle's
 * pattern repeats every 1024 bytes), and W's part at byte offsets from its
 * own start, each 128-byte aligned for TMA: R tiles of codes, R scale
 * records, R correction records. The dynamic shared memory holds the x parts
 * of every stage of every warp, then the W parts, then 1024 bytes of slack
 * to align the start. */
template <int F, int NT>
struct Stage {
    static constexpr int R = skinny_rows(NT);
    static constexpr bool WIDE = tile_scale_bytes(F) == 64;
    static constexpr int SCB = tile_scale_bytes(F); /* scale record bytes per tile */
    static constexpr int CRB = tile_corr_bytes(F); /* correction record bytes per tile */
    static constexpr int XBYTES = 8 * NT * 128;
    static constexpr int SCALES = R * 512, CORR = SCALES + pad128(R * SCB);
    static constexpr int WBYTES = CORR + pad128(R * CRB);
    /* what the copies of W's part bring: the whole boxes, also where they
     * reach past W's last row tile (zero-filled) */
    static constexpr uint32_t W_TX = R * (512 + SCB + CRB);
    static_assert(XBYTES % 1024 == 0 && SCALES % 128 == 0 && CORR % 128 == 0 &&
                      WBYTES % 128 == 0,
                  "TMA destinations: 1024-byte aligned with the 128-byte swizzle, else 128");
};

constexpr int SK_ALIGN = 1024; /* slack to align the dynamic shared memory */

template <int F, int NT>
constexpr int skinny_smem()
{
    return SK_WARPS * SK_STAGES * (Stage<F, NT>::XBYTES + Stage<F, NT>::WBYTES) + SK_ALIGN;
}

/* Byte offset of 16-byte chunk c (0..7) of staged row r of x: TMA's 128-byte
 * swizzle XORs address bits 6:4 with bits 9:7 (the row within 8 rows of 128
 * bytes; the x part is 1024-byte aligned) */
__host__ __device__ constexpr int x_chunk(int r, int c) { return r * 128 + 16 * (c ^ (r & 7)); }
/* word t of chunk 0 of row g < 8: bits 6:4 are g, so XOR with 16 c gives
 * word t of chunk c (x_chunk_checks) */
__host__ __device__ constexpr int x_lane(int g, int t) { return g * 144 + 4 * t; }

constexpr bool x_chunk_checks()
{
    for (int r = 0; r < 32; r++)
        for (int c = 0; c < 8; c++) {
            const int a = r * 128 + 16 * c; /* unswizzled */
            if (x_chunk(r, c) != (a ^ (((a >> 7) & 7) << 4)))
                return false;
        }
    /* the B fragment load of chunk i: lane (g, t) reads the word t of chunk i
     * of row 8 q + g; the 32 lanes hit 32 banks. consume() gets its address
     * as x_lane(g, t) ^ 16 i, plus 1024 q. */
    for (int q = 0; q < 4; q++)
        for (int i = 0; i < 8; i++) {
            unsigned banks = 0;
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane >> 2, t = lane & 3, a = x_chunk(8 * q + g, i) + 4 * t;
                if (a != ((x_lane(g, t) ^ 16 * i) + 1024 * q))
                    return false;
                banks |= 1u << (a / 4 % 32);
            }
            if (banks != 0xFFFFFFFFu)
                return false;
        }
    return true;
}
static_assert(x_chunk_checks(), "x_chunk is TMA's 128-byte swizzle and conflict-free");

/* CTAs per SM by shared memory: H200 (sm_90) has 228 KB per SM, 1 KB of it
 * reserved per CTA, and the mbarriers are static shared memory. With 3
 * stages, 5 CTAs (20 warps) at m <= 8 and 4 at m <= 16 in every format
 * (registers allow 5 too, except NVFP4+ after the mma: 4); with 4 stages
 * 4 and 3 (NVFP4+ 3 and 3). PARTS=skstages (docs/gemm.md) measured 3
 * stages 1-9% faster than 4 on the large weights, 2 no faster than 3. */
template <int F, int NT>
constexpr int skinny_ctas_per_sm()
{
    return 228 * 1024 / (skinny_smem<F, NT>() + 1024 + SK_WARPS * SK_STAGES * 8);
}
static_assert(SK_STAGES != 3 ||
                  (skinny_ctas_per_sm<FMT_MX, 1>() == 5 && skinny_ctas_per_sm<FMT_NVPLUS, 1>() == 5 &&
                   skinny_ctas_per_sm<FMT_MX, 2>() == 4 && skinny_ctas_per_sm<FMT_NVPLUS, 2>() == 4),
              "20 warps per SM at m <= 8, 16 at m <= 16");

__device__ __forceinline__ uint32_t lds32(uint32_t a)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}

__device__ __forceinline__ uint32_t lds16(uint32_t a)
{
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
    return v;
}

__device__ __forceinline__ void tma_prefetch(const CUtensorMap &map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
}

/* Start the copy of unit (band, kt) into the stage whose x part is at xs
 * and W part at ws, with mbarrier bar. The whole warp calls it, its reads of
 * the stage's last unit done (__syncwarp); lane 0 starts the copies: R row
 * tiles of codes, scales and corrections (zeros past W's last row tile), and
 * when x_vec, x's m rows of the k tile (zeros past k). */
template <int F, int NT>
__device__ __forceinline__ void produce(const Params &p, const SkinnyMaps &mp, int band, int kt,
                                        uint32_t xs, uint32_t ws, uint32_t bar, int lane)
{
    using S = Stage<F, NT>;
    /* the stage was last read through the generic proxy */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (lane == 0) {
        mbar_expect(bar, S::W_TX + (p.x_vec ? (uint32_t)p.m * 128u : 0u));
        const int row = band * S::R;
        tma_3d(ws, mp.codes, 0, kt, row, bar);
        tma_3d(ws + S::SCALES, mp.scales, 0, kt, row, bar);
        if (S::CRB)
            tma_3d(ws + S::CORR, mp.corr, 0, kt, row, bar);
        if (p.x_vec)
            tma_2d(xs, mp.x, kt * 64, 0, bar);
    }
}

/* MX+ / NVFP4+ at m <= post_max_m (NT = 1): W decoded as plain MX / NVFP4
 * and the block maxima's low bits added after the mma (corr_coef): 4 (MX+)
 * or 8 (NVFP4+) blocks per lane per unit, about 15 instructions each at
 * m = 1 and 4 or 5 more per further row of x. SASS at m = 1, instructions
 * between a unit's wait and its next copies: MX+ 390 against 478 with the
 * operands' correction bits (MX 317), NVFP4+ 473 against 531 (NVFP4 343).
 * Measured (PARTS=postsweep, docs/gemm.md), the time follows less: mxfp4+
 * 3-8% less at m = 1, even at m = 2, 7-13% more at m = 4; nvfp4+ 3-12% more
 * already at m = 1. So MX+ at m = 1 only; bfp_matmul_tuning's post_max_m
 * times both. */
constexpr int post_max_m(int f) { return f == FMT_MXPLUS ? 1 : 0; }
constexpr bool has_post(int f) { return f == FMT_MXPLUS || f == FMT_NVPLUS; }

/* Lane (g, t) takes the corrections of row tile t of the unit (R = 4), rows
 * g and g + 8, in cacc[row half][row of x]; post_fold() moves them into acc. */
template <int F, int NT>
__device__ __forceinline__ void post_corr(const Params &p, float (&cacc)[2][8], uint32_t xs,
                                          const unsigned char *st, int kt, int g, int t)
{
    using S = Stage<F, NT>;
    constexpr int NB = F == FMT_MXPLUS ? 2 : 4, BLK = 64 / NB; /* blocks per tile row */
    static_assert(NT == 1 && S::R == 4 && (F == FMT_MXPLUS || F == FMT_NVPLUS), "one tile per t");
    const float half = 0.5f / p.post; /* 2^-(1 + fold) */
    uint2 cw = make_uint2(0, 0), sw = make_uint2(0, 0);
    if (NB == 2) {
        cw.x = *reinterpret_cast<const uint32_t *>(st + S::CORR + t * 32 + g * 4);
        sw.x = *reinterpret_cast<const uint32_t *>(st + S::SCALES + t * 32 + g * 4);
    } else {
        cw = *reinterpret_cast<const uint2 *>(st + S::CORR + t * 64 + g * 8);
        sw = *reinterpret_cast<const uint2 *>(st + S::SCALES + t * 64 + g * 8);
    }
#pragma unroll
    for (int i = 0; i < 2 * NB; i++) { /* byte i: row half i / NB, block i % NB */
        const uint32_t cb = (i < 4 ? cw.x : cw.y) >> (8 * (i & 3)) & 0xFFu;
        const uint32_t sb = (i < 4 ? sw.x : sw.y) >> (8 * (i & 3)) & 0xFFu;
        const bool on = cb & 3u; /* else nothing to add, not even 0 * x (x may be Inf) */
        const float c = corr_coef<F>(cb, sb, half);
        const int col = (i % NB) * BLK + (int)corr_col<F>(cb);
#pragma unroll
        for (int mm = 0; mm < 8; mm++) {
            if (mm >= p.m)
                break;
            uint32_t xv;
            if (p.x_vec) /* x_chunk(mm, col / 8) + 2 (col % 8) */
                xv = lds16(xs + 128u * mm + ((2u * col) ^ (16u * mm)));
            else
                xv = kt * 64 + col < p.k ? __ldg(reinterpret_cast<const uint16_t *>(p.x) +
                                                 (size_t)mm * p.k + kt * 64 + col)
                                         : 0u;
            const float sum = fmaf(c, __uint_as_float(xv << 16), cacc[i / NB][mm]);
            cacc[i / NB][mm] = on ? sum : cacc[i / NB][mm];
        }
    }
}

/* cacc of the lanes (g, r) into acc[r] of the lanes that hold those sums
 * (flush's layout: row g + 8 (e / 2), row of x 2 t + e % 2), and zeroed */
template <int R>
__device__ __forceinline__ void post_fold(float (&acc)[R][1][4], float (&cacc)[2][8], int m,
                                          int lane)
{
    const int t = lane & 3;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int mm = 0; mm < 8; mm++) {
                if (mm >= m)
                    break;
                const float v = __shfl_sync(0xFFFFFFFFu, cacc[h][mm], (lane & ~3) | r);
                if (mm >> 1 == t)
                    acc[r][0][2 * h + (mm & 1)] += v;
            }
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int mm = 0; mm < 8; mm++)
            cacc[h][mm] = 0.0f;
}

/* Multiply the unit of k tile kt, staged with its x part at shared address
 * xs (1024-byte aligned) and its W part at st, into acc. Row tiles past W's
 * end are zeros: their rows of acc are never written out. POST: the block
 * maxima's low bits go to cacc (post_corr) instead of the operands. */
template <int F, int NT, bool POST>
__device__ __forceinline__ void consume(const Params &p, float (&acc)[Stage<F, NT>::R][NT][4],
                                        float (&cacc)[2][8], uint32_t xs, const unsigned char *st,
                                        int kt, int lane)
{
    using S = Stage<F, NT>;
    constexpr int DF = !POST ? F : F == FMT_MXPLUS ? FMT_MX : FMT_NV; /* decoded as */
    const int g = lane >> 2, t = lane & 3;
    uint32_t xb[NT][8];
    if (p.x_vec) {
        /* register i of the B fragment is chunk i, word t of row 8 q + g
         * (x_chunk); rows from m on were not copied */
        const uint32_t xl = xs + (uint32_t)x_lane(g, t);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t a = xl ^ (16u * i);
#pragma unroll
            for (int q = 0; q < NT; q++)
                xb[q][i] = q * 8 + g < p.m ? lds32(a + 1024u * q) : 0u;
        }
    } else {
        load_x<NT>(p, kt, g, t, xb);
    }
#pragma unroll
    for (int r = 0; r < S::R; r++) {
        const uint4 wc = *reinterpret_cast<const uint4 *>(st + r * 512 + lane * 16);
        uint2 sc = make_uint2(0, 0), cr = make_uint2(0, 0);
        if (S::WIDE)
            sc = *reinterpret_cast<const uint2 *>(st + S::SCALES + r * 64 + g * 8);
        else
            sc.x = *reinterpret_cast<const uint32_t *>(st + S::SCALES + r * 32 + g * 4);
        if (DF == FMT_MXPLUS)
            cr.x = *reinterpret_cast<const uint32_t *>(st + S::CORR + r * 32 + g * 4);
        if (DF == FMT_NVPLUS)
            cr = *reinterpret_cast<const uint2 *>(st + S::CORR + r * 64 + g * 8);
        uint32_t a[4][4];
        decode_tile<DF>(wc, sc, cr, t, p.mx_fold, a);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int q = 0; q < NT; q++)
                mma_bf16(acc[r][q], a[j], xb[q][2 * j], xb[q][2 * j + 1]);
    }
    if constexpr (POST)
        post_corr<F, NT>(p, cacc, xs, st, kt, g, t);
}

/* The sums of k tiles [kt0, kt1) of band `band`: written to y when they are
 * the whole row, else added to the workspace, the band's last warp writing y. */
template <int NT, int R>
__device__ __forceinline__ void flush(const Params &p, const float (&acc)[R][NT][4], int band,
                                      int kt0, int kt1, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    const bool whole = kt0 == 0 && kt1 == p.tiles_k;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int q = 0; q < NT; q++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int n = (band * R + r) * 16 + g + 8 * (e >> 1);
                const int mm = q * 8 + 2 * t + (e & 1);
                if (n >= p.n || mm >= p.m)
                    continue;
                const float v = acc[r][q][e] * p.post;
                if (whole)
                    p.y[(size_t)mm * p.n + n] = finish(p, v, n);
                else
                    atomicAdd(&p.ws[(size_t)mm * p.n + n], v);
            }
    if (whole)
        return;
    __threadfence();
    __syncwarp();
    unsigned last = 0;
    if (lane == 0)
        last = atomicAdd(&p.counters[band], (unsigned)(kt1 - kt0)) + (unsigned)(kt1 - kt0) ==
               (unsigned)p.tiles_k;
    if (!__shfl_sync(0xFFFFFFFFu, last, 0))
        return;
    __threadfence();
    const int rows = R * 16, nbase = band * rows;
    ws_flush<4>(p, rows * p.m, lane, 32, [&](int i, size_t &off, int &n) {
        n = nbase + i % rows;
        off = (size_t)(i / rows) * p.n + n;
        return n < p.n;
    });
    if (lane == 0)
        p.counters[band] = 0u;
}

/* The maps are __grid_constant__: TMA reads them at their parameter's
 * generic address. */
template <int F, int NT, bool POST>
__global__ void __launch_bounds__(SK_WARPS * 32)
    gemm_skinny_kernel(const Params p, const __grid_constant__ SkinnyMaps mp)
{
    using S = Stage<F, NT>;
    constexpr int R = S::R;
    /* 128, not 1024: that would pad the static shared memory (bars) to 1024
     * bytes; the x parts are aligned here, in the SK_ALIGN slack */
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[SK_WARPS][SK_STAGES];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int u0 = (blockIdx.x * SK_WARPS + warp) * p.upw;
    if (u0 >= p.units)
        return;
    const int u1 = min(u0 + p.upw, p.units);
    unsigned char *base = smem + ((SK_ALIGN - (smem_addr(smem) & (SK_ALIGN - 1))) & (SK_ALIGN - 1));
    unsigned char *xring = base + warp * SK_STAGES * S::XBYTES;
    unsigned char *wring = base + SK_WARPS * SK_STAGES * S::XBYTES + warp * SK_STAGES * S::WBYTES;
    const uint32_t xring_a = smem_addr(xring), wring_a = smem_addr(wring);
    const uint32_t bar_a = smem_addr(&bars[warp][0]);

    if (lane == 0) {
        tma_prefetch(mp.codes);
        tma_prefetch(mp.scales);
        if (S::CRB)
            tma_prefetch(mp.corr);
        if (p.x_vec)
            tma_prefetch(mp.x);
        for (int s = 0; s < SK_STAGES; s++)
            mbar_init<1>(bar_a + 8 * s);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    /* the next unit to copy, as (band, k tile): no division per unit */
    int pband = u0 / p.tiles_k, pkt = u0 - pband * p.tiles_k;
    for (int i = 0; i < SK_STAGES && u0 + i < u1; i++) {
        produce<F, NT>(p, mp, pband, pkt, xring_a + i * S::XBYTES, wring_a + i * S::WBYTES,
                       bar_a + 8 * i, lane);
        if (++pkt == p.tiles_k)
            pkt = 0, pband++;
    }

    float acc[R][NT][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int q = 0; q < NT; q++)
            acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;
    float cacc[2][8]; /* POST only */
#pragma unroll
    for (int mm = 0; mm < 8; mm++)
        cacc[0][mm] = cacc[1][mm] = 0.0f;

    int band = u0 / p.tiles_k;
    int kt0 = u0 - band * p.tiles_k;       /* first k tile of the band's run */
    int band_end = (band + 1) * p.tiles_k; /* its end, as a unit index */
    for (int v = u0; v < u1; v++) {
        const unsigned i = (unsigned)(v - u0), s = i % SK_STAGES;
        if (v == band_end) {
            if constexpr (POST)
                post_fold<R>(acc, cacc, p.m, lane);
            flush<NT, R>(p, acc, band, kt0, p.tiles_k, lane);
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int q = 0; q < NT; q++)
                    acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;
            band++, kt0 = 0, band_end += p.tiles_k;
        }
        mbar_wait(bar_a + 8 * s, (uint32_t)(i / SK_STAGES) & 1u);
        consume<F, NT, POST>(p, acc, cacc, xring_a + s * S::XBYTES, wring + s * S::WBYTES,
                             v - (band_end - p.tiles_k), lane);
        __syncwarp(); /* every lane is done reading stage s */
        if (v + SK_STAGES < u1) {
            produce<F, NT>(p, mp, pband, pkt, xring_a + s * S::XBYTES, wring_a + s * S::WBYTES,
                           bar_a + 8 * s, lane);
            if (++pkt == p.tiles_k)
                pkt = 0, pband++;
        }
    }
    if constexpr (POST)
        post_fold<R>(acc, cacc, p.m, lane);
    flush<NT, R>(p, acc, band, kt0, u1 - band * p.tiles_k, lane);
}

/* One kernel; with resident != NULL, how many CTAs of it an SM holds
 * instead of a launch. */
template <int F, int NT, bool POST>
static cudaError_t skinny_k(dim3 grid, const Params *p, const SkinnyMaps *mp, int *resident,
                            cudaStream_t s)
{
    constexpr int smem = skinny_smem<F, NT>();
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_skinny_kernel<F, NT, POST>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    if (resident)
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            resident, gemm_skinny_kernel<F, NT, POST>, SK_WARPS * 32, smem);
    gemm_skinny_kernel<F, NT, POST><<<grid, SK_WARPS * 32, smem, s>>>(*p, *mp);
    return cudaGetLastError();
}

/* The largest m that corrects after the mma: post_max_m(f), or the
 * tuning's (bfp_matmul_tuning.post_max_m: 0 the default, -1 never) */
static int post_limit(int f, int tuned)
{
    return tuned == 0 ? post_max_m(f) : tuned < 0 ? 0 : tuned;
}

/* The kernel for nt: MX+ / NVFP4+ at m <= post_limit correct after the mma.
 * The planner asks the other kernel how many CTAs an SM holds: the same
 * shared memory, and registers allow as many, except for NVFP4+ after the
 * mma (4 CTAs of 5; only through the knob), whose grid then runs in more
 * than one wave: slower, not wrong (no CTA waits for another). */
template <int F, int NT>
static cudaError_t skinny_nt(dim3 grid, const Params *p, const SkinnyMaps *mp, int *resident,
                             int post, cudaStream_t s)
{
    if constexpr (NT == 1 && has_post(F))
        if (p && p->m <= post_limit(F, post))
            return skinny_k<F, NT, true>(grid, p, mp, resident, s);
    return skinny_k<F, NT, false>(grid, p, mp, resident, s);
}

template <int F>
static cudaError_t skinny_f(int nt, dim3 grid, const Params *p, const SkinnyMaps *mp,
                            int *resident, int post, cudaStream_t s)
{
    return nt == 1   ? skinny_nt<F, 1>(grid, p, mp, resident, post, s)
           : nt == 2 ? skinny_nt<F, 2>(grid, p, mp, resident, post, s)
                     : skinny_nt<F, 4>(grid, p, mp, resident, post, s);
}

static cudaError_t skinny_any(int fmt_kind, int nt, dim3 grid, const Params *p,
                              const SkinnyMaps *mp, int *resident, int post, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        return skinny_f<decltype(f)::value>(nt, grid, p, mp, resident, post, s);
    });
}

int skinny_resident_warps(int fmt_kind, int nt)
{
    static int cache[5][3]; /* the same value every time: a race is harmless */
    int &c = cache[fmt_kind][nt == 1 ? 0 : nt == 2 ? 1 : 2];
    if (c == 0) {
        int blocks = 0;
        if (skinny_any(fmt_kind, nt, dim3(1), nullptr, nullptr, &blocks, 0, 0) != cudaSuccess ||
            blocks < 1)
            blocks = 1;
        c = blocks * SK_WARPS;
    }
    return c;
}

cudaError_t launch_skinny(int fmt_kind, const Params &p, const SkinnyMaps &maps, int nt,
                          int post_max_m, cudaStream_t s)
{
    unsigned warps = (unsigned)((p.units + p.upw - 1) / p.upw);
    dim3 grid((warps + SK_WARPS - 1) / SK_WARPS);
    return skinny_any(fmt_kind, nt, grid, &p, &maps, nullptr, post_max_m, s);
}

} // namespace bfpgemm

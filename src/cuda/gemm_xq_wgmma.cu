/* gemm_xq_wgmma.cu - the quantized-x matmul's Hopper kernel
 * (bfp_matmul_tuning.xq_kernel = 2): y^T = W . x^T on
 * wgmma.m64nNk32.f32.e4m3.e4m3, MX pairs (W mxfp4 / mxfp4+, x mxfp8_e4m3 /
 * mxfp4 / mxfp4+). docs/gemm.md, "The xq wgmma kernel".
 *
 *  - x pre-pass (xq_prep): x's planes -> E4M3 codes [m][kp] in the
 *    workspace, each 32-wide block's k slots permuted (xq_slot_elem) so that
 *    a lane's A fragment is 8 consecutive W elements, zeros past k; and fp32
 *    scales [block][mp] (E8M0 decoded once, NaN kept).
 *  - CTA: warpgroup 0 produces (one thread: per k tile of 128 columns, TMA
 *    copies of x's codes, BN rows, 128-byte swizzled; x's 4 scales per row;
 *    W's codes, 128 rows x 64 bytes, when its rows are 16-byte multiples),
 *    into a ring of STAGES mbarrier-guarded stages. Warpgroups 1 and 2
 *    consume, 64 rows of W each: per k tile decode W's 4 blocks into A
 *    fragments (codes from the stage or, without TMA, from global memory;
 *    scale and meta bytes from global memory, a tile ahead), then per block
 *    a wgmma with scale-d = 0 into a partial and acc += (partial * scale_w)
 *    * scale_x, gemm_xq.cu's order. Two partials alternate so that block
 *    j + 1's wgmma runs while block j is scaled.
 *  - Epilogue as gemm_xq.cu's: y = bf16(acc + bias), or with a K split
 *    atomics into the caller's fp32 sums. */
#include "gemm_async.cuh"
#include "gemm_internal.h"
#include "gemm_wgmma_e4m3.cuh"
#include "gemm_wgmma_mma.cuh"
#include "gemm_xq.h"
#include "gemm_xq_decode.cuh"

#include <cuda_bf16.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

namespace bfpgemm {
namespace xqwg {

using namespace bfpgemm::xq;
using namespace bfpgemm::wg;

constexpr int CONSUMERS = 2, THREADS = 128 * (1 + CONSUMERS), STAGES = 6;
constexpr int ROWS = 64 * CONSUMERS; /* W rows per CTA */
constexpr int KT = 128;              /* k columns per tile: 4 blocks, 128 bytes of x */
constexpr int ALIGN = 1024;          /* the 128-byte swizzle's atom */
/* CTAs an SM holds: two at N <= 16 (80 registers, no spills, and the
 * memory-bound small m wants the copies in flight), else one */
constexpr int ctas_per_sm(int bn) { return bn <= 16 ? 2 : 1; }

template <int BN>
struct Stage {
    static constexpr int XC = 0;                       /* [BN][128] x codes, swizzled */
    static constexpr int XS = BN * KT;                 /* [4][BN] x scales, fp32 */
    static constexpr int WC = (XS + 16 * BN + 127) / 128 * 128; /* [ROWS][64] W codes */
    static constexpr int BYTES = (WC + ROWS * 64 + ALIGN - 1) / ALIGN * ALIGN;
    static constexpr uint32_t X_TX = BN * KT + 16 * BN, W_TX = ROWS * 64;
};

template <int BN>
constexpr bool stage_ok()
{
    using S = Stage<BN>; /* TMA: swizzled boxes on 1024 bytes, plain ones on 128 */
    return S::XC % ALIGN == 0 && S::BYTES % ALIGN == 0 && S::XS % 128 == 0 &&
           S::WC % 128 == 0 && S::WC >= S::XS + 16 * BN &&
           ctas_per_sm(BN) * (STAGES * S::BYTES + ALIGN + 1024) <= 228 * 1024;
}
static_assert(stage_ok<8>() && stage_ok<16>() && stage_ok<32>() && stage_ok<64>(),
              "stage layout");

/* slot s of a block's k32 step holds element xq_slot_elem(s): lane t's A word
 * lo (slots 4t..4t+3) is elements 8t..8t+3 and hi (16+4t..) 8t+4..8t+7, a
 * permutation of the block */
constexpr bool slots_ok()
{
    unsigned seen = 0;
    for (int s = 0; s < 32; s++) {
        const int t = (s & 15) >> 2, hi = s >> 4, e = xq_slot_elem(s);
        if (e != 8 * t + 4 * hi + (s & 3))
            return false;
        seen |= 1u << e;
    }
    return seen == 0xFFFFFFFFu;
}
static_assert(slots_ok(), "k slot permutation");

struct Args {
    const uint8_t *wc, *wsc, *wm; /* W planar codes, scales, meta */
    size_t w_crb;
    int w_tma, w_vec;             /* W codes by TMA; else word loads allowed */
    int s_vec;                    /* scale (and meta) rows as 32-bit words */
    int n, m, k, bpr, tiles_k, tps;
    const __nv_bfloat16 *bias;
    __nv_bfloat16 *y;
    float *part;                  /* K split: fp32 [m][n] sums, or NULL */
};

struct Maps {
    CUtensorMap xc, xs, wc; /* wc unused without w_tma */
};

/* x pre-pass: one thread per (row, block, lane t of 4) */
template <int XK>
__global__ void xq_prep(const uint8_t *codes, const uint8_t *scales, const uint8_t *meta,
                        size_t crb, int m, int k, int bpr, int vec, uint8_t *out, size_t kp,
                        float *xs, size_t mp)
{
    const size_t units = (size_t)m * bpr * 4;
    for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < units;
         u += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(u & 3), b = (int)((u >> 2) % bpr), row = (int)((u >> 2) / bpr);
        uint32_t lo, hi;
        float s = xq_prep_lane<XK>(codes, scales, meta, crb, bpr, row, b, t, k, vec != 0, lo, hi);
        uint32_t *o = reinterpret_cast<uint32_t *>(out + (size_t)row * kp + (size_t)b * 32);
        o[t] = lo;
        o[4 + t] = hi;
        if (t == 0)
            xs[(size_t)b * mp + row] = s;
    }
}

/* Producer: k tiles kt0 .. kt0 + nkt - 1 into the ring (one thread) */
template <int BN>
__device__ void produce(const Args &a, const Maps &mp, unsigned char *ring, uint32_t full,
                        uint32_t empty, int n0, int m0, int kt0, int nkt)
{
    using S = Stage<BN>;
    const uint32_t ring_a = smem_addr(ring);
    for (int i = 0; i < nkt; i++) {
        const int s = i % STAGES, kt = kt0 + i;
        const uint32_t sb = ring_a + s * S::BYTES, fb = full + 8 * s;
        if (i >= STAGES)
            mbar_wait(empty + 8 * s, (uint32_t)(i / STAGES - 1) & 1u);
        mbar_expect(fb, S::X_TX + (a.w_tma ? S::W_TX : 0u));
        tma_2d(sb + S::XC, mp.xc, kt * KT, m0, fb);
        tma_2d(sb + S::XS, mp.xs, m0, kt * 4, fb);
        if (a.w_tma)
            tma_2d(sb + S::WC, mp.wc, kt * (KT / 2), n0, fb);
    }
}

/* The fallbacks, out of line to keep the mainloop short: c (0..4) bytes at
 * p as a little-endian word; W's code word from global memory (load4) */
__device__ __noinline__ uint32_t bytes_le(const uint8_t *p, int c)
{
    uint32_t v = 0;
    for (int j = 0; j < c; j++)
        v |= (uint32_t)__ldg(p + j) << (8 * j);
    return v;
}

__device__ __noinline__ uint32_t w_word_global(const uint8_t *row, int e0, int c, int vec)
{
    return load4(row, e0, c, vec != 0);
}

/* W's scale (sc) and meta (mt) bytes of k tile kt's 4 blocks for rows r[2],
 * byte j = block j; blocks past the row read 0 */
template <bool PLUS>
__device__ __forceinline__ void load_sm(const Args &a, const int (&r)[2], int kt,
                                        uint32_t (&sc)[2], uint32_t (&mt)[2])
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const size_t o = (size_t)r[h] * a.bpr + kt * 4;
        mt[h] = 0;
        if (a.s_vec) { /* bpr % 4 == 0: the tile's 4 blocks are one word */
            sc[h] = __ldg(reinterpret_cast<const uint32_t *>(a.wsc + o));
            if (PLUS)
                mt[h] = __ldg(reinterpret_cast<const uint32_t *>(a.wm + o));
        } else {
            const int c = min(a.bpr - kt * 4, 4);
            sc[h] = bytes_le(a.wsc + o, c);
            if (PLUS)
                mt[h] = bytes_le(a.wm + o, c);
        }
    }
}

/* acc += (p * sw[h]) * sx, block j of the stage's x scales xs ([4][BN]) */
template <int BN>
__device__ __forceinline__ void scale_add(float (&acc)[BN / 2], const float (&p)[BN / 2],
                                          float sw0, float sw1, const float *xs, int t)
{
#pragma unroll
    for (int q = 0; q < BN / 8; q++) {
        const float2 sx = *reinterpret_cast<const float2 *>(xs + 8 * q + 2 * t);
        acc[4 * q + 0] = fmaf(p[4 * q + 0] * sw0, sx.x, acc[4 * q + 0]);
        acc[4 * q + 1] = fmaf(p[4 * q + 1] * sw0, sx.y, acc[4 * q + 1]);
        acc[4 * q + 2] = fmaf(p[4 * q + 2] * sw1, sx.x, acc[4 * q + 2]);
        acc[4 * q + 3] = fmaf(p[4 * q + 3] * sw1, sx.y, acc[4 * q + 3]);
    }
}

/* block j's wgmma into the partial p (B: the stage's x at xb, k32 step j) */
template <int BN>
__device__ __forceinline__ void issue(float (&p)[BN / 2], const uint32_t (&a)[4], uint32_t xb,
                                      int j)
{
    fence_regs(p);
    wgmma_fence();
    wgmma_e4m3<BN>(p, a, desc_sw128(xb) + (uint64_t)(2 * j)); /* + 32 j bytes */
    wgmma_commit();
}

template <int BN, bool PLUS>
__device__ void consume(const Args &a, unsigned char *ring, uint32_t full, uint32_t empty,
                        int wrow, int lane, int kt0, int nkt, float (&acc)[BN / 2])
{
    using S = Stage<BN>;
    const int g = lane >> 2, t = lane & 3;
    const uint32_t ring_a = smem_addr(ring);
    const int lrow = wrow + g;                  /* row in the CTA's W tile */
    const int r[2] = {min(lrow + (int)blockIdx.x * ROWS, a.n - 1),
                      min(lrow + 8 + (int)blockIdx.x * ROWS, a.n - 1)};
    float p0[BN / 2], p1[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        p0[i] = p1[i] = 0.0f;
    uint32_t sc[2], mt[2];
    load_sm<PLUS>(a, r, kt0, sc, mt);
    for (int i = 0; i < nkt; i++) {
        const int s = i % STAGES, kt = kt0 + i;
        uint32_t scn[2] = {0, 0}, mtn[2] = {0, 0};
        if (i + 1 < nkt)
            load_sm<PLUS>(a, r, kt + 1, scn, mtn); /* a tile ahead */
        mbar_wait(full + 8 * s, (uint32_t)(i / STAGES) & 1u);
        const unsigned char *st = ring + s * S::BYTES;
        uint32_t af[4][4];
        float sw[2][4];
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t v;
                if (a.w_tma) {
                    v = *reinterpret_cast<const uint32_t *>(st + S::WC + (lrow + 8 * h) * 64 +
                                                            16 * j + 4 * t);
                } else {
                    const int e0 = (kt * 4 + j) * 32 + 8 * t;
                    v = w_word_global(a.wc + (size_t)r[h] * a.w_crb, e0,
                                      min(max(a.k - e0, 0), 8), a.w_vec);
                }
                const uint32_t sb = (sc[h] >> (8 * j)) & 0xFFu;
                mx4_decode<PLUS>(v, sb, (mt[h] >> (8 * j)) & 0xFFu, t, af[j][h], af[j][2 + h]);
                sw[h][j] = e8m0_f(sb);
            }
        const uint32_t xb = ring_a + s * S::BYTES + S::XC;
        const float *xs = reinterpret_cast<const float *>(st + S::XS);
        issue<BN>(p0, af[0], xb, 0);
        issue<BN>(p1, af[1], xb, 1);
        wgmma_wait1(); /* block 0 done */
        fence_regs(p0);
        scale_add<BN>(acc, p0, sw[0][0], sw[1][0], xs, t);
        issue<BN>(p0, af[2], xb, 2);
        wgmma_wait1(); /* block 1 */
        fence_regs(p1);
        scale_add<BN>(acc, p1, sw[0][1], sw[1][1], xs + BN, t);
        issue<BN>(p1, af[3], xb, 3);
        wgmma_wait1(); /* block 2 */
        fence_regs(p0);
        scale_add<BN>(acc, p0, sw[0][2], sw[1][2], xs + 2 * BN, t);
        wgmma_wait0(); /* block 3 */
        keep_live(af);
        fence_regs(p1);
        scale_add<BN>(acc, p1, sw[0][3], sw[1][3], xs + 3 * BN, t);
        __syncwarp();
        if (lane == 0)
            mbar_arrive(empty + 8 * s);
#pragma unroll
        for (int h = 0; h < 2; h++)
            sc[h] = scn[h], mt[h] = mtn[h];
    }
}

/* grid (W bands of ROWS rows, splits, x chunks of BN rows) */
template <int BN, bool PLUS>
__global__ void __launch_bounds__(THREADS, ctas_per_sm(BN)) xq_wgmma_kernel(const Args a,
                                                              const __grid_constant__ Maps mp)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
    unsigned char *ring = smem + ((ALIGN - (smem_addr(smem) & (ALIGN - 1))) & (ALIGN - 1));
    const uint32_t full = smem_addr(full_bar), empty = smem_addr(empty_bar);
    const int wgi = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = threadIdx.x & 31;
    const int n0 = blockIdx.x * ROWS, m0 = blockIdx.z * BN;
    const int kt0 = blockIdx.y * a.tps, nkt = min(kt0 + a.tps, a.tiles_k) - kt0; /* >= 1 */

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init<1>(full + 8 * s);
            mbar_init<4 * CONSUMERS>(empty + 8 * s); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (wgi == 0) {
        if (tid == 0)
            produce<BN>(a, mp, ring, full, empty, n0, m0, kt0, nkt);
        return;
    }
    const int wrow = (wgi - 1) * 64 + (tid >> 5) * 16; /* the warp's first row in the CTA */
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    consume<BN, PLUS>(a, ring, full, empty, wrow, lane, kt0, nkt, acc);

    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int q = 0; q < BN / 8; q++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int wr = n0 + wrow + g + 8 * (e >> 1), xr = m0 + 8 * q + 2 * t + (e & 1);
            if (wr >= a.n || xr >= a.m)
                continue;
            float v = acc[4 * q + e];
            const size_t o = (size_t)xr * a.n + wr;
            if (a.part) {
                atomicAdd(a.part + o, v);
            } else {
                if (a.bias)
                    v += __bfloat162float(a.bias[wr]);
                a.y[o] = __float2bfloat16_rn(v);
            }
        }
#elif defined(__CUDA_ARCH__)
    __trap(); /* built without sm_90a: never a silent wrong answer */
#endif
}

template <int BN, bool PLUS>
cudaError_t launch_kernel(const Args &a, const Maps &mp, dim3 grid, cudaStream_t s)
{
    constexpr int smem = STAGES * Stage<BN>::BYTES + ALIGN;
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(xq_wgmma_kernel<BN, PLUS>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    xq_wgmma_kernel<BN, PLUS><<<grid, THREADS, smem, s>>>(a, mp);
    return cudaGetLastError();
}

template <bool PLUS>
cudaError_t launch_bn(int bn, const Args &a, const Maps &mp, dim3 grid, cudaStream_t s)
{
    switch (bn) {
    case 8: return launch_kernel<8, PLUS>(a, mp, grid, s);
    case 16: return launch_kernel<16, PLUS>(a, mp, grid, s);
    case 32: return launch_kernel<32, PLUS>(a, mp, grid, s);
    default: return launch_kernel<64, PLUS>(a, mp, grid, s);
    }
}

size_t al256(size_t v) { return (v + 255) & ~(size_t)255; }
bool aligned(const void *p, size_t n) { return ((uintptr_t)p & (n - 1)) == 0; }

} // namespace xqwg

bool xq_wgmma_pair(bfp_format w, bfp_format x)
{
    return (w == BFP_MXFP4 || w == BFP_MXFP4_PLUS) &&
           (x == BFP_MXFP8_E4M3 || x == BFP_MXFP4 || x == BFP_MXFP4_PLUS);
}

bool xq_wgmma_plan(const WeightPlanar &w, size_t m, int sms, XqWgPlan *P)
{
    using namespace xqwg;
    const size_t bpr = (w.k + 31) / 32;
    P->bn = m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64;
    P->tiles_k = (int)((bpr + 3) / 4);
    const size_t gx = (w.n + ROWS - 1) / ROWS, gz = (m + P->bn - 1) / P->bn;
    if (gz > 65535 || gx > INT_MAX)
        return false;
    /* Without a full wave, split K (parts >= 2 k tiles, at most 4 waves)
     * where waves x k tiles per part is least; ties to fewer splits (their
     * sums cost atomics) */
    const size_t ctas = gx * gz, kt = (size_t)P->tiles_k;
    const size_t sm = (size_t)(sms > 0 ? sms : 1) * ctas_per_sm(P->bn); /* CTA slots */
    size_t splits = 1, best = SIZE_MAX;
    for (size_t sp = 1; ctas < sm && sp <= kt / 2 && ctas * sp <= 4 * sm; sp++) {
        const size_t cost = (ctas * sp + sm - 1) / sm * ((kt + sp - 1) / sp);
        if (cost < best)
            best = cost, splits = sp;
    }
    P->tps = (int)((kt + splits - 1) / splits);
    P->splits = (P->tiles_k + P->tps - 1) / P->tps;
    P->grid = dim3((unsigned)gx, (unsigned)P->splits, (unsigned)gz);
    P->kp = bpr * 32;
    P->mp = (m + 3) & ~(size_t)3;
    P->prep_bytes = al256(m * P->kp) + al256(bpr * P->mp * 4);
    return true;
}

cudaError_t xq_wgmma_run(const WeightPlanar &w, bfp_format x_fmt, const bfp_const_planes &xq,
                         size_t x_crb, size_t m, const XqWgPlan &P, const void *bias, void *y,
                         void *prep, float *part, cudaStream_t s)
{
    using namespace xqwg;
    const int bpr = (int)((w.k + 31) / 32);
    uint8_t *xc = static_cast<uint8_t *>(prep);
    float *xs = reinterpret_cast<float *>(xc + al256(m * P.kp));
    const int xal = x_fmt == BFP_MXFP8_E4M3 ? 8 : 4;
    const int xvec = x_crb % xal == 0 && aligned(xq.codes, xal);
    const size_t units = m * (size_t)bpr * 4;
    const unsigned blocks = (unsigned)((units + 255) / 256 < 8192 ? (units + 255) / 256 : 8192);
    const uint8_t *c = static_cast<const uint8_t *>(xq.codes),
                  *sc = static_cast<const uint8_t *>(xq.scales),
                  *mt = static_cast<const uint8_t *>(xq.meta);
    if (x_fmt == BFP_MXFP8_E4M3)
        xq_prep<XQ_X_E4M3><<<blocks, 256, 0, s>>>(c, sc, mt, x_crb, (int)m, (int)w.k, bpr, xvec,
                                                  xc, P.kp, xs, P.mp);
    else if (x_fmt == BFP_MXFP4)
        xq_prep<XQ_X_MX4><<<blocks, 256, 0, s>>>(c, sc, mt, x_crb, (int)m, (int)w.k, bpr, xvec,
                                                 xc, P.kp, xs, P.mp);
    else
        xq_prep<XQ_X_MX4P><<<blocks, 256, 0, s>>>(c, sc, mt, x_crb, (int)m, (int)w.k, bpr, xvec,
                                                  xc, P.kp, xs, P.mp);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;

    Args a;
    a.wc = w.codes, a.wsc = w.scales, a.wm = w.meta;
    a.w_crb = w.sz.code_row_bytes;
    a.w_tma = a.w_crb % 16 == 0 && aligned(w.codes, 16);
    a.w_vec = a.w_crb % 4 == 0 && aligned(w.codes, 4);
    a.s_vec = bpr % 4 == 0 && aligned(w.scales, 4) &&
              (w.fmt != BFP_MXFP4_PLUS || aligned(w.meta, 4));
    a.n = (int)w.n, a.m = (int)m, a.k = (int)w.k, a.bpr = bpr;
    a.tiles_k = P.tiles_k, a.tps = P.tps;
    a.bias = static_cast<const __nv_bfloat16 *>(bias);
    a.y = static_cast<__nv_bfloat16 *>(y);
    a.part = part;
    Maps mp;
    memset(&mp, 0, sizeof mp);
    if (!encode_2d(&mp.xc, CU_TENSOR_MAP_DATA_TYPE_UINT8, xc, P.kp, m, P.kp, KT,
                   (uint32_t)P.bn, CU_TENSOR_MAP_SWIZZLE_128B) ||
        !encode_2d(&mp.xs, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, xs, m, (uint64_t)bpr, P.mp * 4,
                   (uint32_t)P.bn, 4, CU_TENSOR_MAP_SWIZZLE_NONE) ||
        (a.w_tma && !encode_2d(&mp.wc, CU_TENSOR_MAP_DATA_TYPE_UINT8, w.codes, a.w_crb, w.n,
                               a.w_crb, KT / 2, ROWS, CU_TENSOR_MAP_SWIZZLE_NONE)))
        return cudaErrorInvalidValue;
    return w.fmt == BFP_MXFP4_PLUS ? launch_bn<true>(P.bn, a, mp, P.grid, s)
                                   : launch_bn<false>(P.bn, a, mp, P.grid, s);
}

} // namespace bfpgemm

/* gemm_mid.cu - the weight-only matmul for medium m (meant for 33..256; it
 * is correct for any m): BFP_MATMUL_MID.
 *
 * Why a new kernel. The fused kernel (gemm_fused.cu) gives each warp one
 * 16-row tile of W and, per k16 step, reads a B fragment of x from shared
 * memory for every n8 tile with two 32-bit loads: 256 bytes of shared memory
 * per mma (4096 MACs). At m = 128 that is 16 KB of shared-memory reads per
 * 16x64 W tile, 128 cycles of an SM's 128 B/cycle, as long as the tile's 64
 * mma take on the tensor cores; and x is staged synchronously, so loads and
 * mma do not overlap.
 *
 * Plan.
 *  - Warp tile: R = 2 row tiles of W (32 rows) x 64 rows of x (8 n8 tiles).
 *    Accumulators: 2 x 8 x 4 = 64 fp32 per lane. Per 64-column k tile the
 *    warp decodes its two W tiles (decode_tile, 32 registers of A) and, per
 *    k16 step, loads the B fragments of its 64 x rows with 4 ldmatrix.x4
 *    (16 registers); each B fragment feeds R = 2 mma, each decoded A
 *    fragment feeds 8. Shared-memory reads per W tile at m = 128: 8 KB
 *    (half the fused kernel's), in 16-byte-per-lane ldmatrix.
 *  - CTA: 8 warps, WN x WM = 4 x 2 (128 rows of W x 128 rows of x) when
 *    m > 64, 8 x 1 (256 rows of W x 64 rows of x) otherwise. The two warps
 *    of a W band in a WM = 2 CTA decode the same tiles (twice the decode,
 *    not twice the loads: W comes through shared memory once).
 *  - Pipeline: a ring of MID_STAGES = 5 stages in shared memory, one k tile
 *    per stage: x's 64 columns for the CTA's rows (128 bytes per row, 16-byte
 *    chunks XOR-swizzled by row so the 8 row addresses of an ldmatrix hit
 *    32 banks) and the CTA's W tiles (codes, scale and correction records,
 *    as prepacked). Everything comes by cp.async (16 bytes, zero fill
 *    outside the tensor), issued MID_STAGES - 1 k tiles ahead; one
 *    __syncthreads per k tile. An x that is not 16-byte aligned (or
 *    k % 8 != 0) is staged by plain loads and stores instead, through the
 *    same ring.
 *  - Decode overlap: W of k tile i + 1 is decoded in the middle of k tile
 *    i's mma (registers a and an, 64 in all), so the decode's ALU work runs
 *    beside the tensor cores instead of all warps decoding at once after the
 *    barrier. Hence the wait at k tile i is for tiles i and i + 1.
 *    (A first version without it, and with a generic per-chunk division in
 *    the copy loop, issued ~1000 instructions per warp per k tile and ran
 *    mxfp4 m = 128, 8192^2 in 148 us on the H200, against 231 us for the
 *    fused kernel; it issues ~460 now.)
 *  - Grid: (CTA columns, K splits, m chunks). The K split count is picked
 *    on the host (plan_mid in gemm.cu) so the grid fills the SMs in close to
 *    whole waves: one CTA per SM (194-197 registers x 256 threads, no
 *    spills; 74-108 KB of shared memory).
 *  - Split-K: like the fused kernel (a counter per output tile; the CTA
 *    that completes it writes bf16, adds the bias and zeroes its part of the
 *    workspace and the counter), but without atomics on the sums: each
 *    split stores its partials in its own slice [split][m][n] of the
 *    workspace and the last CTA adds the slices in split order, in its
 *    fragment layout (its own slice from registers).
 *  - Rows of x beyond m are zero (zero fill) and their sums are dropped;
 *    n8 tiles wholly beyond m skip their mma. NaN weights propagate through
 *    the mma as in the fused kernel.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 .bf16, ldmatrix .m8n8.x4 .b16),
 * g = lane / 4, t = lane % 4:
 *  - B (16 x 8, "col"): b0 = {B[2t][g], B[2t+1][g]}, b1 = the same at k + 8;
 *    here B[k][n] = x[row n][col k], so b0 = x[g][2t..2t+1] and
 *    b1 = x[g][8+2t..8+2t+1] of the k16 step.
 *  - ldmatrix.x4: lanes 8i..8i+7 give the row addresses of matrix i, and
 *    lane l receives row l/4, columns 2(l%4), +1 of each matrix. With
 *    matrix 0 = (x rows 8q.., columns 0..7 of the step), 1 = (same rows,
 *    8..15), 2 and 3 the same for rows 8(q+1).., it returns b0, b1 of n8
 *    tile q and b0, b1 of tile q + 1.
 *  - C: c0, c1 = (W row g, x rows 2t, 2t+1), c2, c3 = W row g + 8.
 */
#include "gemm_fused.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

constexpr int MID_THREADS = MID_WARPS * 32;
constexpr int MID_QT = 8;     /* n8 tiles of x per warp (64 rows) */
constexpr int MID_STAGES = 5; /* k tiles in the ring */

/* Byte layout of one stage for format F and WM warps along m */
template <int F, int WM>
struct MidStage {
    static constexpr int WN = MID_WARPS / WM;
    static constexpr int TILES = WN * MID_R; /* W row tiles per CTA */
    static constexpr bool WIDE = tile_scale_bytes(F) == 64;
    static constexpr int SCB = tile_scale_bytes(F); /* scale record bytes per tile */
    static constexpr int CRB = tile_corr_bytes(F);  /* correction record bytes per tile */
    static constexpr int XROWS = 64 * WM;
    static constexpr int X = 0;                    /* [XROWS][128 bytes], swizzled */
    static constexpr int CODES = X + XROWS * 128;  /* [TILES][32 lanes][16 bytes] */
    static constexpr int SCALES = CODES + TILES * 512;
    static constexpr int CORR = SCALES + TILES * SCB;
    static constexpr int BYTES = (CORR + TILES * CRB + 127) / 128 * 128;
};

template <int F, int WM>
constexpr int mid_smem() { return MID_STAGES * MidStage<F, WM>::BYTES; }

__device__ __forceinline__ uint32_t mid_saddr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, bypassing L1; ok == false writes zeros (the
 * source is then not read, but stays a valid address) */
__device__ __forceinline__ void cp16(uint32_t dst, const void *src, bool ok)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(ok ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &d0, uint32_t &d1, uint32_t &d2,
                                        uint32_t &d3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
                 : "r"(addr)
                 : "memory");
}

/* Byte offset of 16-byte chunk c (0..7) of staged x row r: chunks XORed
 * with the row's low 3 bits, so 8 consecutive rows at one chunk index lie
 * in 8 different 16-byte bank groups. */
__device__ __forceinline__ int xs_off(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

/* Issue the copies of k tile kt into stage base sb (a shared address):
 * x rows m0 .. m0 + XROWS - 1 and W row tiles nt0 .. nt0 + TILES - 1. Each
 * thread's share is fixed (shifts, no division): this runs every k tile on
 * every thread, beside 64 mma per warp. */
template <int F, int WM>
__device__ __forceinline__ void stage_load(const Params &p, uint32_t sb, unsigned char *sp,
                                           int kt, int m0, int nt0)
{
    using S = MidStage<F, WM>;
    const int tid = threadIdx.x;
    const int kc = kt * 64;
    /* x: XROWS rows x 8 chunks of 16 bytes; thread tid takes chunk tid % 8 of
     * rows tid / 8 + 32 i */
    constexpr int XPT = S::XROWS * 8 / MID_THREADS;
    const int c = tid & 7, gk = kc + c * 8;
    if (p.x_vec) {
#pragma unroll
        for (int i = 0; i < XPT; i++) {
            const int r = (tid >> 3) + 32 * i, gm = m0 + r;
            const bool ok = gm < p.m && gk < p.k; /* k % 8 == 0: a chunk is all in or out */
            const __nv_bfloat16 *src = ok ? p.x + (size_t)gm * p.k + gk : p.x;
            cp16(sb + S::X + xs_off(r, c), src, ok);
        }
    } else {
        /* unaligned x or k % 8 != 0: element loads, plain shared stores
         * (visible after the __syncthreads that precedes this stage's use) */
        for (int i = 0; i < XPT; i++) {
            const int r = (tid >> 3) + 32 * i, gm = m0 + r;
            uint16_t h[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                h[e] = gm < p.m && gk + e < p.k
                           ? __ldg(reinterpret_cast<const uint16_t *>(p.x) + (size_t)gm * p.k +
                                   gk + e)
                           : (uint16_t)0;
            *reinterpret_cast<uint4 *>(sp + S::X + xs_off(r, c)) =
                make_uint4(h[0] | (uint32_t)h[1] << 16, h[2] | (uint32_t)h[3] << 16,
                           h[4] | (uint32_t)h[5] << 16, h[6] | (uint32_t)h[7] << 16);
        }
    }
    /* W codes: TILES x 32 chunks; thread tid takes chunk tid % 32 of tiles
     * tid / 32 + 8 i. Row tiles past the weight are zero. */
    constexpr int CPT = S::TILES * 32 / MID_THREADS;
#pragma unroll
    for (int i = 0; i < CPT; i++) {
        const int u = (tid >> 5) + 8 * i, nt = nt0 + u;
        const bool ok = nt < p.tiles_n;
        const size_t tile = ok ? (size_t)nt * p.tiles_k + (size_t)kt : 0;
        cp16(sb + S::CODES + u * 512 + (tid & 31) * 16,
             reinterpret_cast<const unsigned char *>(p.codes) + tile * 512 + (tid & 31) * 16,
             ok);
    }
    /* scale records on threads 0.., correction records on threads 128.. */
    constexpr int SC = S::SCB / 16, CC = S::CRB / 16; /* chunks per tile */
    static_assert(S::TILES * SC <= 128 && S::TILES * CC <= 128, "record chunks");
    if (tid < S::TILES * SC) {
        const int u = tid / SC, ch = tid % SC, nt = nt0 + u;
        const bool ok = nt < p.tiles_n;
        const size_t tile = ok ? (size_t)nt * p.tiles_k + (size_t)kt : 0;
        cp16(sb + S::SCALES + u * S::SCB + ch * 16, p.scales + tile * S::SCB + ch * 16, ok);
    }
    if (CC && tid >= 128 && tid < 128 + S::TILES * CC) {
        const int v = tid - 128, u = v / (CC ? CC : 1), ch = v % (CC ? CC : 1), nt = nt0 + u;
        const bool ok = nt < p.tiles_n;
        const size_t tile = ok ? (size_t)nt * p.tiles_k + (size_t)kt : 0;
        cp16(sb + S::CORR + u * S::CRB + ch * 16, p.corr + tile * S::CRB + ch * 16, ok);
    }
}

/* Decode this warp's R row tiles of W in stage st into a. */
template <int F, int WM>
__device__ __forceinline__ void stage_decode(const unsigned char *st, int wn, int lane,
                                             int mx_fold, uint32_t (&a)[MID_R][4][4])
{
    using S = MidStage<F, WM>;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int r = 0; r < MID_R; r++) {
        const int u = wn * MID_R + r;
        const uint4 wc = reinterpret_cast<const uint4 *>(st + S::CODES + u * 512)[lane];
        uint2 sc = make_uint2(0, 0), cr = make_uint2(0, 0);
        if (S::WIDE)
            sc = reinterpret_cast<const uint2 *>(st + S::SCALES + u * S::SCB)[g];
        else
            sc.x = reinterpret_cast<const uint32_t *>(st + S::SCALES + u * S::SCB)[g];
        if (F == FMT_MXPLUS)
            cr.x = reinterpret_cast<const uint32_t *>(st + S::CORR + u * S::CRB)[g];
        if (F == FMT_NVPLUS)
            cr = reinterpret_cast<const uint2 *>(st + S::CORR + u * S::CRB)[g];
        decode_tile<F>(wc, sc, cr, t, mx_fold, a[r]);
    }
}

template <int F, int WM>
__global__ void __launch_bounds__(MID_THREADS, 1) gemm_mid_kernel(const Params p)
{
    using S = MidStage<F, WM>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ unsigned last_cta;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wn = warp / WM, wm = warp % WM;
    const int nt0 = blockIdx.x * S::TILES;          /* the CTA's first W row tile */
    const int m0 = blockIdx.z * S::XROWS;           /* the CTA's first x row */
    const int kt0 = blockIdx.y * p.tiles_per_split; /* the split's k tiles */
    const int kt1 = min(kt0 + p.tiles_per_split, p.tiles_k);
    const int nkt = kt1 - kt0;
    /* n8 tiles of this warp that hold rows of x (warp-uniform) */
    const int qn = min(MID_QT, max(0, (p.m - m0 - wm * 64 + 7) / 8));

    float acc[MID_R][MID_QT][4];
#pragma unroll
    for (int r = 0; r < MID_R; r++)
#pragma unroll
        for (int q = 0; q < MID_QT; q++)
            acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;

    const uint32_t sbase = mid_saddr(smem);
    /* this lane's ldmatrix row: matrix i = lane / 8 (rows +8 for i >= 2,
     * columns +8 for odd i), row lane % 8 of it */
    const int lm_i = lane >> 3, lm_r = lane & 7;
    const uint32_t lm_row = (uint32_t)(wm * 64 + (lm_i >> 1) * 8 + lm_r) * 128u;

    /* prologue: the first MID_STAGES - 1 k tiles; k tile 0 decoded */
#pragma unroll
    for (int s = 0; s < MID_STAGES - 1; s++) {
        if (s < nkt)
            stage_load<F, WM>(p, sbase + s * S::BYTES, smem + s * S::BYTES, kt0 + s, m0, nt0);
        cp_commit();
    }
    cp_wait<MID_STAGES - 2>();
    __syncthreads();
    uint32_t a[MID_R][4][4]; /* k tile i, decoded */
    stage_decode<F, WM>(smem, wn, lane, p.mx_fold, a);

    for (int i = 0; i < nkt; i++) {
        /* this thread's copies of k tiles i and i + 1 are done; the barrier
         * makes everyone's visible and frees stage i - 1 (its x was read in
         * iteration i - 1, its W decoded in iteration i - 2) */
        cp_wait<MID_STAGES - 3>();
        __syncthreads();
        {
            const int nx = i + MID_STAGES - 1;
            if (nx < nkt)
                stage_load<F, WM>(p, sbase + (nx % MID_STAGES) * S::BYTES,
                                  smem + (nx % MID_STAGES) * S::BYTES, kt0 + nx, m0, nt0);
            cp_commit(); /* an empty group keeps the count of wait_group right */
        }
        if (qn == 0)
            continue; /* this warp's rows of x are all beyond m */

        /* the mma of k tile i, with k tile i + 1's decode between them so
         * the ALU work overlaps the tensor cores' (one basic block: no
         * branch inside; past the split's end the decode reads a stale
         * stage and its result is not used) */
        const uint32_t xb = sbase + (i % MID_STAGES) * S::BYTES + S::X + lm_row;
        const unsigned char *nst = smem + ((i + 1) % MID_STAGES) * S::BYTES;
        uint32_t an[MID_R][4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            /* chunk of this lane's ldmatrix row: 2j, +1 for odd matrices;
             * the row's low 3 bits are lm_r */
            const uint32_t coff = (uint32_t)(((2 * j + (lm_i & 1)) ^ lm_r) << 4);
            uint32_t b[MID_QT][2];
#pragma unroll
            for (int qp = 0; qp < MID_QT / 2; qp++)
                ldsm_x4(xb + qp * 16 * 128 + coff, b[2 * qp][0], b[2 * qp][1],
                        b[2 * qp + 1][0], b[2 * qp + 1][1]);
#pragma unroll
            for (int q = 0; q < MID_QT; q++)
#pragma unroll
                for (int r = 0; r < MID_R; r++)
                    mma_bf16(acc[r][q], a[r][j], b[q][0], b[q][1]);
            if (j == 1)
                stage_decode<F, WM>(nst, wn, lane, p.mx_fold, an);
        }
#pragma unroll
        for (int r = 0; r < MID_R; r++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    a[r][j][e] = an[r][j][e];
    }
    cp_wait<0>(); /* no copy may outlive the CTA (only empty groups remain) */

    /* epilogue: acc[r][q][e] is W row n = 16 (nt0 + wn R + r) + g + 8 (e / 2),
     * x row mm = m0 + 64 wm + 8 q + 2 t + e % 2 */
    const int mq = m0 + wm * 64 + 2 * t;
    /* out(v, n, mm) for each sum v of y's range, scaled by 2^fold */
    auto each_out = [&](auto out) {
#pragma unroll
        for (int r = 0; r < MID_R; r++)
#pragma unroll
            for (int q = 0; q < MID_QT; q++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int n = (nt0 + wn * MID_R + r) * 16 + g + 8 * (e >> 1);
                    int mm = mq + q * 8 + (e & 1);
                    if (n < p.n && mm < p.m)
                        out(acc[r][q][e] * p.post, n, mm);
                }
    };
    if (p.splits == 1) {
        each_out([&](float v, int n, int mm) { p.y[(size_t)mm * p.n + n] = finish(p, v, n); });
        return;
    }

    /* split K: each CTA stores its partial sums (plain stores, no atomics:
     * fp32 atomics ran at about 23 G/s on the H200, 45 us for m = 128,
     * n = 8192 with 2 splits) into its split's slice [split][m][n] of the
     * workspace; the CTA that completes the count adds the slices in split
     * order (so the result does not depend on which CTA came last), writes
     * y and zeroes the slices again. Every CTA covers the same positions of
     * its slice: those with n < N and mm < M. */
    const size_t mn = (size_t)p.m * (size_t)p.n;
    float *slice = p.ws + (size_t)blockIdx.y * mn;
    each_out([&](float v, int n, int mm) { __stcg(slice + (size_t)mm * p.n + n, v); });
    __threadfence();
    __syncthreads();
    unsigned *ctr = p.counters + (size_t)blockIdx.z * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0)
        last_cta = atomicAdd(ctr, 1u) == (unsigned)p.splits - 1;
    __syncthreads();
    if (!last_cta)
        return;
    __threadfence();
    /* The last CTA adds the slices in its own fragment layout: per split,
     * 64 independent loads per lane are in flight at once (a loop over the
     * tile's elements with one load per split at a time waited ~1 us per
     * split per element and ran for ~100 us at m = 128). Its own slice is
     * its registers, so the sum is in split order whichever CTA is last. */
    constexpr int QS = 4; /* n8 tiles per section: 16 loads per lane in flight
                             per split, and registers for their addresses */
#pragma unroll
    for (int r = 0; r < MID_R; r++)
#pragma unroll
        for (int q0 = 0; q0 < MID_QT; q0 += QS) {
            const int nr = (nt0 + wn * MID_R + r) * 16 + g;
            float tot[QS][4];
#pragma unroll
            for (int q = 0; q < QS; q++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    tot[q][e] = 0.0f;
            for (int sp = 0; sp < p.splits; sp++) {
                const float *sl = p.ws + (size_t)sp * mn;
#pragma unroll
                for (int q = 0; q < QS; q++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int n = nr + 8 * (e >> 1), mm = mq + (q0 + q) * 8 + (e & 1);
                        float v = acc[r][q0 + q][e] * p.post;
                        if (sp != (int)blockIdx.y && n < p.n && mm < p.m)
                            v = __ldcg(sl + (size_t)mm * p.n + n);
                        tot[q][e] += v;
                    }
            }
#pragma unroll
            for (int q = 0; q < QS; q++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int n = nr + 8 * (e >> 1), mm = mq + (q0 + q) * 8 + (e & 1);
                    if (n >= p.n || mm >= p.m)
                        continue;
                    for (int sp = 0; sp < p.splits; sp++)
                        __stcg(p.ws + (size_t)sp * mn + (size_t)mm * p.n + n, 0.0f);
                    float v = tot[q][e];
                    p.y[(size_t)mm * p.n + n] = finish(p, v, n);
                }
        }
    __syncthreads(); /* every warp's reads of the workspace are done */
    if (threadIdx.x == 0)
        *ctr = 0u;
}

template <int F, int WM>
static cudaError_t launch_wm(const Params &p, dim3 grid, cudaStream_t s)
{
    constexpr int smem = mid_smem<F, WM>();
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_mid_kernel<F, WM>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    gemm_mid_kernel<F, WM><<<grid, MID_THREADS, smem, s>>>(p);
    return cudaGetLastError();
}

template <int F>
static cudaError_t launch_f(const Params &p, int wm, dim3 grid, cudaStream_t s)
{
    return wm == 2 ? launch_wm<F, 2>(p, grid, s) : launch_wm<F, 1>(p, grid, s);
}

cudaError_t launch_mid(int fmt_kind, const Params &p, int wm, dim3 grid, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) { return launch_f<decltype(f)::value>(p, wm, grid, s); });
}

} // namespace bfpgemm

/* gemm_skinny.cu - the weight-only matmul for few rows of x (m <= 32): a
 * stream-K GEMV on the tensor cores. The prepacked tiles of W are cut into
 * units of R row tiles (a band of 16 R rows of W) by one k tile, ordered
 * band-major, and each warp of a grid that is resident all at once takes an
 * equal run of consecutive units. A warp streams its run through a ring of
 * SK_STAGES units in shared memory filled by bulk copies (TMA, one mbarrier
 * per stage): W's tiles and x's columns of the unit, so every SM keeps
 * ~100 KB on the way without registers. With the next unit in registers
 * instead, a warp had one unit in flight and the kernel reached 1.4 TB/s; the
 * old kernel (gemm_fused.cu) gives each CTA a few tiles and spends most of
 * its life on staging x and on the split-K epilogue. A warp that
 * covers a whole band writes y; otherwise its partial sums meet the band's
 * other warps' in the fp32 workspace, and the band's last warp (counted in
 * k tiles) writes y and zeroes the workspace again. */
#include "gemm_fused.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

constexpr int SK_WARPS = 4, SK_STAGES = 4;
constexpr int X_PITCH = 144; /* bytes per staged row of x: 128 + 16, so the
                                8 rows of a B fragment load hit 32 banks */

/* Byte offsets of the parts of one stage (one unit) */
template <int F, int NT>
struct Stage {
    static constexpr int R = skinny_rows(NT);
    static constexpr bool WIDE = F == FMT_NV || F == FMT_NVPLUS || F == FMT_HIF4;
    static constexpr int SCB = WIDE ? 64 : 32; /* scale record bytes per tile */
    static constexpr int CRB = F == FMT_MXPLUS ? 32 : F == FMT_NVPLUS ? 64 : 0;
    static constexpr int SCALES = R * 512, CORR = SCALES + R * SCB, X = CORR + R * CRB;
    static constexpr int BYTES = X + 8 * NT * X_PITCH;
};

template <int F, int NT>
constexpr int skinny_smem() { return SK_WARPS * SK_STAGES * Stage<F, NT>::BYTES; }

/* ---- mbarrier and bulk copy (PTX ISA 8.0, sm_90) ---- */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint32_t bar)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes,
                                         uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* x's columns of k tile kt come by bulk copy when whole and 16-byte aligned;
 * else the multiply loads them itself (load_x) */
__device__ __forceinline__ bool x_staged(const Params &p, int kt)
{
    return p.x_vec && kt * 64 + 64 <= p.k;
}

/* x's B fragments for k tile kt: lane (g, t) of n8 tile q holds row
 * q * 8 + g, columns 64 kt + 16 j + 2 t + {0, 1} and {8, 9}; zero outside x */
template <int NT>
__device__ __forceinline__ void load_x(const Params &p, int kt, int g, int t,
                                       uint32_t (&xb)[NT][8])
{
    const int c0 = kt * 64 + 2 * t;
    const bool full = p.x_vec && kt * 64 + 64 <= p.k;
#pragma unroll
    for (int q = 0; q < NT; q++) {
        const int mm = q * 8 + g;
        const uint16_t *row = reinterpret_cast<const uint16_t *>(p.x) + (size_t)mm * p.k;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int c = c0 + 16 * (i >> 1) + 8 * (i & 1);
            uint32_t v = 0;
            if (mm < p.m) {
                if (full) {
                    v = __ldg(reinterpret_cast<const uint32_t *>(row + c));
                } else {
                    uint32_t lo = c < p.k ? __ldg(row + c) : 0u;
                    uint32_t hi = c + 1 < p.k ? __ldg(row + c + 1) : 0u;
                    v = lo | hi << 16;
                }
            }
            xb[q][i] = v;
        }
    }
}

/* Start the copy of unit (band, kt) into the stage at st with mbarrier bar
 * (the whole warp calls it; its reads of the stage's last unit are done). */
template <int F, int NT>
__device__ __forceinline__ void produce(const Params &p, int band, int kt, uint32_t st,
                                        uint32_t bar, int lane)
{
    using S = Stage<F, NT>;
    const int rows_ok = min(S::R, p.tiles_n - band * S::R);
    const int xrows = x_staged(p, kt) ? min(p.m, 8 * NT) : 0;
    if (lane == 0)
        mbar_expect(bar, (uint32_t)(rows_ok * (512 + S::SCB + S::CRB) + xrows * 128));
    __syncwarp();
    /* the stage was last read through the generic proxy */
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (lane < rows_ok) {
        const size_t tile = (size_t)(band * S::R + lane) * p.tiles_k + (size_t)kt;
        bulk_g2s(st + lane * 512, p.codes + tile * 32, 512, bar);
        bulk_g2s(st + S::SCALES + lane * S::SCB, p.scales + tile * S::SCB, S::SCB, bar);
        if (S::CRB)
            bulk_g2s(st + S::CORR + lane * S::CRB, p.corr + tile * S::CRB, S::CRB, bar);
    }
    if (lane < xrows)
        bulk_g2s(st + S::X + lane * X_PITCH, p.x + (size_t)lane * p.k + (size_t)kt * 64, 128, bar);
}

/* Multiply the unit of k tile kt, staged at st, into acc. Row tiles past W's
 * end hold stale bytes: their rows of acc are never written out. */
template <int F, int NT>
__device__ __forceinline__ void consume(const Params &p, float (&acc)[Stage<F, NT>::R][NT][4],
                                        const unsigned char *st, int kt, int lane)
{
    using S = Stage<F, NT>;
    const int g = lane >> 2, t = lane & 3;
    uint32_t xb[NT][8];
    if (x_staged(p, kt)) {
#pragma unroll
        for (int q = 0; q < NT; q++)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int mm = q * 8 + g;
                const int off = S::X + mm * X_PITCH + 2 * (16 * (i >> 1) + 8 * (i & 1) + 2 * t);
                xb[q][i] = mm < p.m ? *reinterpret_cast<const uint32_t *>(st + off) : 0u;
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
        if (F == FMT_MXPLUS)
            cr.x = *reinterpret_cast<const uint32_t *>(st + S::CORR + r * 32 + g * 4);
        if (F == FMT_NVPLUS)
            cr = *reinterpret_cast<const uint2 *>(st + S::CORR + r * 64 + g * 8);
        uint32_t a[4][4];
        decode_tile<F>(wc, sc, cr, t, p.mx_fold, a);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int q = 0; q < NT; q++)
                mma_bf16(acc[r][q], a[j], xb[q][2 * j], xb[q][2 * j + 1]);
    }
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
    for (int i = lane; i < rows * p.m; i += 32) {
        const int n = nbase + i % rows, mm = i / rows;
        if (n >= p.n)
            continue;
        float *wp = p.ws + (size_t)mm * p.n + n;
        const float v = __ldcg(wp);
        __stcg(wp, 0.0f);
        p.y[(size_t)mm * p.n + n] = finish(p, v, n);
    }
    if (lane == 0)
        p.counters[band] = 0u;
}

template <int F, int NT>
__global__ void __launch_bounds__(SK_WARPS * 32) gemm_skinny_kernel(const Params p)
{
    using S = Stage<F, NT>;
    constexpr int R = S::R;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) uint64_t bars[SK_WARPS][SK_STAGES];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int u0 = (blockIdx.x * SK_WARPS + warp) * p.upw;
    if (u0 >= p.units)
        return;
    const int u1 = min(u0 + p.upw, p.units);
    unsigned char *ring = smem + warp * SK_STAGES * S::BYTES;
    const uint32_t ring_a = smem_addr(ring), bar_a = smem_addr(&bars[warp][0]);

    if (lane == 0) {
        for (int s = 0; s < SK_STAGES; s++)
            mbar_init(bar_a + 8 * s);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
    /* the next unit to copy, as (band, k tile): no division per unit */
    int pband = u0 / p.tiles_k, pkt = u0 - pband * p.tiles_k;
    for (int i = 0; i < SK_STAGES && u0 + i < u1; i++) {
        produce<F, NT>(p, pband, pkt, ring_a + i * S::BYTES, bar_a + 8 * i, lane);
        if (++pkt == p.tiles_k)
            pkt = 0, pband++;
    }

    float acc[R][NT][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int q = 0; q < NT; q++)
            acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;

    int band = u0 / p.tiles_k;
    int kt0 = u0 - band * p.tiles_k;       /* first k tile of the band's run */
    int band_end = (band + 1) * p.tiles_k; /* its end, as a unit index */
    for (int v = u0; v < u1; v++) {
        const unsigned i = (unsigned)(v - u0), s = i % SK_STAGES;
        if (v == band_end) {
            flush<NT, R>(p, acc, band, kt0, p.tiles_k, lane);
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int q = 0; q < NT; q++)
                    acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;
            band++, kt0 = 0, band_end += p.tiles_k;
        }
        mbar_wait(bar_a + 8 * s, (uint32_t)(i / SK_STAGES) & 1u);
        consume<F, NT>(p, acc, ring + s * S::BYTES, v - (band_end - p.tiles_k), lane);
        __syncwarp(); /* every lane is done reading stage s */
        if (v + SK_STAGES < u1) {
            produce<F, NT>(p, pband, pkt, ring_a + s * S::BYTES, bar_a + 8 * s, lane);
            if (++pkt == p.tiles_k)
                pkt = 0, pband++;
        }
    }
    flush<NT, R>(p, acc, band, kt0, u1 - band * p.tiles_k, lane);
}

/* The kernel for nt; with resident != NULL, how many CTAs of it an SM holds
 * instead of a launch. */
template <int F, int NT>
static cudaError_t skinny_nt(dim3 grid, const Params *p, int *resident, cudaStream_t s)
{
    constexpr int smem = skinny_smem<F, NT>();
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_skinny_kernel<F, NT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    if (resident)
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(resident, gemm_skinny_kernel<F, NT>,
                                                             SK_WARPS * 32, smem);
    gemm_skinny_kernel<F, NT><<<grid, SK_WARPS * 32, smem, s>>>(*p);
    return cudaGetLastError();
}

template <int F>
static cudaError_t skinny_f(int nt, dim3 grid, const Params *p, int *resident, cudaStream_t s)
{
    return nt == 1   ? skinny_nt<F, 1>(grid, p, resident, s)
           : nt == 2 ? skinny_nt<F, 2>(grid, p, resident, s)
                     : skinny_nt<F, 4>(grid, p, resident, s);
}

static cudaError_t skinny_any(int fmt_kind, int nt, dim3 grid, const Params *p, int *resident,
                              cudaStream_t s)
{
    return with_kind(fmt_kind,
                     [&](auto f) { return skinny_f<decltype(f)::value>(nt, grid, p, resident, s); });
}

int skinny_resident_warps(int fmt_kind, int nt)
{
    static int cache[5][3]; /* the same value every time: a race is harmless */
    int &c = cache[fmt_kind][nt == 1 ? 0 : nt == 2 ? 1 : 2];
    if (c == 0) {
        int blocks = 0;
        if (skinny_any(fmt_kind, nt, dim3(1), nullptr, &blocks, 0) != cudaSuccess || blocks < 1)
            blocks = 1;
        c = blocks * SK_WARPS;
    }
    return c;
}

cudaError_t launch_skinny(int fmt_kind, const Params &p, int nt, cudaStream_t s)
{
    unsigned warps = (unsigned)((p.units + p.upw - 1) / p.upw);
    dim3 grid((warps + SK_WARPS - 1) / SK_WARPS);
    return skinny_any(fmt_kind, nt, grid, &p, nullptr, s);
}

} // namespace bfpgemm

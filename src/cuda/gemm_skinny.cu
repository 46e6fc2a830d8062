/* gemm_skinny.cu - the weight-only matmul for few rows of x (m <= 32): a
 * stream-K GEMV on the tensor cores. The prepacked tiles of W are cut into
 * units of R row tiles (a band of 16 R rows of W) by one k tile, ordered
 * band-major, and each warp of a grid that is resident all at once takes an
 * equal run of consecutive units. A warp streams its run with the loads of
 * the next D - 1 units (W, and x's fragments, which stay in L2) in flight
 * while it multiplies one, so every SM keeps tens of kilobytes of W on the
 * way; the old kernel (gemm_fused.cu) gave each CTA a few tiles and spent
 * most of its life on staging x and on the split-K epilogue. A warp that
 * covers a whole band writes y; otherwise its partial sums meet the band's
 * other warps' in the fp32 workspace, and the band's last warp (counted in
 * k tiles) writes y and zeroes the workspace again. */
#include "gemm_fused.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

constexpr int SK_WARPS = 4, SK_DEPTH = 2;

template <int NT, int R>
struct Unit {
    uint4 wc[R];
    uint2 sc[R], cr[R];
    uint32_t xb[NT][8]; /* B fragments: [n8 tile][2 j + half] */
};

/* W is read once: keep it out of L1, which holds x */
__device__ __forceinline__ uint4 ld_stream(const uint4 *p)
{
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
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

template <int F, int NT, int R>
__device__ __forceinline__ void load_unit(const Params &p, int u, int lane, Unit<NT, R> &U)
{
    constexpr bool WIDE = F == FMT_NV || F == FMT_NVPLUS || F == FMT_HIF4;
    const int band = u / p.tiles_k, kt = u - band * p.tiles_k;
    const int g = lane >> 2;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int nt = band * R + r;
        const bool ok = nt < p.tiles_n;
        const size_t tile = (size_t)nt * p.tiles_k + (size_t)kt;
        U.wc[r] = ok ? ld_stream(p.codes + tile * 32 + lane) : make_uint4(0, 0, 0, 0);
        U.sc[r] = U.cr[r] = make_uint2(0, 0);
        if (WIDE)
            U.sc[r] = ok ? __ldg(reinterpret_cast<const uint2 *>(p.scales + tile * 64) + g)
                         : make_uint2(0, 0);
        else
            U.sc[r].x =
                ok ? __ldg(reinterpret_cast<const uint32_t *>(p.scales + tile * 32) + g) : 0u;
        if (F == FMT_MXPLUS)
            U.cr[r].x =
                ok ? __ldg(reinterpret_cast<const uint32_t *>(p.corr + tile * 32) + g) : 0u;
        if (F == FMT_NVPLUS)
            U.cr[r] = ok ? __ldg(reinterpret_cast<const uint2 *>(p.corr + tile * 64) + g)
                         : make_uint2(0, 0);
    }
    load_x<NT>(p, kt, g, lane & 3, U.xb);
}

template <int F, int NT, int R>
__device__ __forceinline__ void mma_unit(float (&acc)[R][NT][4], const Unit<NT, R> &U, int t,
                                         int mx_fold)
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        uint32_t a[4][4];
        decode_tile<F>(U.wc[r], U.sc[r], U.cr[r], t, mx_fold, a);
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int q = 0; q < NT; q++)
                mma_bf16(acc[r][q], a[j], U.xb[q][2 * j], U.xb[q][2 * j + 1]);
    }
}

/* a sum (already times 2^fold) as y's bf16 */
__device__ __forceinline__ __nv_bfloat16 finish(const Params &p, float v, int n)
{
    if (p.use_ts)
        v = __fdiv_rn(v, p.ts);
    if (p.bias)
        v += __bfloat162float(p.bias[n]);
    return __float2bfloat16_rn(v);
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

template <int F, int NT, int R>
__global__ void __launch_bounds__(SK_WARPS * 32) gemm_skinny_kernel(const Params p)
{
    const int lane = threadIdx.x & 31, t = lane & 3;
    const int u0 = (blockIdx.x * SK_WARPS + (threadIdx.x >> 5)) * p.upw;
    if (u0 >= p.units)
        return;
    const int u1 = min(u0 + p.upw, p.units);

    float acc[R][NT][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int q = 0; q < NT; q++)
            acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;

    Unit<NT, R> buf[SK_DEPTH];
#pragma unroll
    for (int i = 0; i < SK_DEPTH; i++)
        if (u0 + i < u1)
            load_unit<F, NT, R>(p, u0 + i, lane, buf[i]);

    int band = u0 / p.tiles_k;
    int kt0 = u0 - band * p.tiles_k;       /* first k tile of the band's run */
    int band_end = (band + 1) * p.tiles_k; /* its end, as a unit index */
    for (int u = u0; u < u1; u += SK_DEPTH) {
#pragma unroll
        for (int i = 0; i < SK_DEPTH; i++) {
            const int v = u + i;
            if (v >= u1)
                break;
            if (v == band_end) {
                flush<NT, R>(p, acc, band, kt0, p.tiles_k, lane);
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int q = 0; q < NT; q++)
                        acc[r][q][0] = acc[r][q][1] = acc[r][q][2] = acc[r][q][3] = 0.0f;
                band++, kt0 = 0, band_end += p.tiles_k;
            }
            mma_unit<F, NT, R>(acc, buf[i], t, p.mx_fold);
            if (v + SK_DEPTH < u1)
                load_unit<F, NT, R>(p, v + SK_DEPTH, lane, buf[i]);
        }
    }
    flush<NT, R>(p, acc, band, kt0, u1 - band * p.tiles_k, lane);
}

template <int F, int NT>
static auto skinny_kernel()
{
    return gemm_skinny_kernel<F, NT, skinny_rows(NT)>;
}

template <int F>
static cudaError_t skinny_f(int nt, dim3 grid, const Params *p, int *resident,
                            cudaStream_t s)
{
    auto k = nt == 1 ? skinny_kernel<F, 1>() : nt == 2 ? skinny_kernel<F, 2>()
                                                       : skinny_kernel<F, 4>();
    if (resident)
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(resident, k, SK_WARPS * 32, 0);
    k<<<grid, SK_WARPS * 32, 0, s>>>(*p);
    return cudaGetLastError();
}

static cudaError_t skinny_any(int fmt_kind, int nt, dim3 grid, const Params *p, int *resident,
                              cudaStream_t s)
{
    switch (fmt_kind) {
    case FMT_MX: return skinny_f<FMT_MX>(nt, grid, p, resident, s);
    case FMT_MXPLUS: return skinny_f<FMT_MXPLUS>(nt, grid, p, resident, s);
    case FMT_NV: return skinny_f<FMT_NV>(nt, grid, p, resident, s);
    case FMT_NVPLUS: return skinny_f<FMT_NVPLUS>(nt, grid, p, resident, s);
    default: return skinny_f<FMT_HIF4>(nt, grid, p, resident, s);
    }
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

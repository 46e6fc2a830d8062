/* gemm_fused.cu - the fused weight-only matmul kernel (see gemm_fused.cuh)
 * and its launcher, instantiated per weight format and per number of n8
 * tiles of x (NT: 8, 16, 32, 64 or 128 rows of x per CTA). */
#include "gemm_fused.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

/* W tiles kt .. kt+3 of row tile nt (those below kt_end): codes, scale
 * record and correction record of this lane's group. */
template <int F>
__device__ __forceinline__ void load_group(const Params &p, int nt, bool tile_ok, int kt,
                                           int kt_end, int lane, uint4 (&wc)[4],
                                           uint2 (&sc)[4], uint2 (&cr)[4])
{
    constexpr bool WIDE = F == FMT_NV || F == FMT_NVPLUS || F == FMT_HIF4;
    const int g = lane >> 2;
#pragma unroll
    for (int u = 0; u < 4; u++) {
        bool ok = tile_ok && kt + u < kt_end;
        size_t tile = (size_t)nt * p.tiles_k + (size_t)(kt + u);
        wc[u] = ok ? __ldg(p.codes + tile * 32 + lane) : make_uint4(0, 0, 0, 0);
        sc[u] = make_uint2(0, 0);
        cr[u] = make_uint2(0, 0);
        if (WIDE)
            sc[u] = ok ? __ldg(reinterpret_cast<const uint2 *>(p.scales + tile * 64) + g)
                       : make_uint2(0, 0);
        else
            sc[u].x = ok ? __ldg(reinterpret_cast<const uint32_t *>(p.scales + tile * 32) + g)
                         : 0u;
        if (F == FMT_MXPLUS)
            cr[u].x = ok ? __ldg(reinterpret_cast<const uint32_t *>(p.corr + tile * 32) + g)
                         : 0u;
        if (F == FMT_NVPLUS)
            cr[u] = ok ? __ldg(reinterpret_cast<const uint2 *>(p.corr + tile * 64) + g)
                       : make_uint2(0, 0);
    }
}

template <int F, int NT>
__global__ void __launch_bounds__(WARPS * 32) gemm_fused_kernel(const Params p)
{
    constexpr int MC = 8 * NT;
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem); /* [MC][xs_ld] */
    __shared__ unsigned last_cta;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nt = blockIdx.x * WARPS + warp;
    const bool tile_ok = nt < p.tiles_n;
    const int m0 = blockIdx.z * MC;
    const int mvalid = min(MC, p.m - m0);
    const int kt0 = blockIdx.y * p.tiles_per_split;
    const int kt1 = min(kt0 + p.tiles_per_split, p.tiles_k);
    const int ld = p.xs_ld;

    float acc[NT][4];
#pragma unroll
    for (int q = 0; q < NT; q++)
        acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.0f;

    uint4 wc[4], wn[4];
    uint2 sc[4], sn[4], cr[4], rn[4];
    for (int c0 = kt0; c0 < kt1; c0 += p.chunk_tiles) {
        const int c1 = min(c0 + p.chunk_tiles, kt1);
        load_group<F>(p, nt, tile_ok, c0, c1, lane, wc, sc, cr); /* flies while x is staged */
        __syncthreads(); /* the previous chunk is done with xs */
        const int kbase = c0 * 64, ncols = (c1 - c0) * 64, vecs_per_row = ncols / 8;
        for (int v = threadIdx.x; v < MC * vecs_per_row; v += WARPS * 32) {
            int r = v / vecs_per_row, c8 = (v % vecs_per_row) * 8;
            int gm = m0 + r, gk = kbase + c8;
            uint4 val = make_uint4(0, 0, 0, 0);
            if (gm < p.m && gk < p.k) {
                const __nv_bfloat16 *src = p.x + (size_t)gm * p.k + gk;
                if (p.x_vec && gk + 8 <= p.k) {
                    val = __ldg(reinterpret_cast<const uint4 *>(src));
                } else {
                    uint16_t h[8];
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        h[e] = gk + e < p.k ? __ldg(reinterpret_cast<const uint16_t *>(src) + e)
                                            : (uint16_t)0;
                    val = make_uint4(h[0] | (uint32_t)h[1] << 16, h[2] | (uint32_t)h[3] << 16,
                                     h[4] | (uint32_t)h[5] << 16, h[6] | (uint32_t)h[7] << 16);
                }
            }
            *reinterpret_cast<uint4 *>(xs + r * ld + c8) = val;
        }
        __syncthreads();

        for (int kt = c0; kt < c1; kt += 4) {
            const bool more = kt + 4 < c1;
            if (more)
                load_group<F>(p, nt, tile_ok, kt + 4, c1, lane, wn, sn, rn);
            mma_group<F, NT>(acc, wc, sc, cr, xs, ld, (kt - c0) * 64, c1 - kt, g, t, p.mx_fold);
            if (more) {
#pragma unroll
                for (int u = 0; u < 4; u++)
                    wc[u] = wn[u], sc[u] = sn[u], cr[u] = rn[u];
            }
        }
    }

    const int n0 = nt * 16 + g;
    if (p.splits == 1) {
#pragma unroll
        for (int q = 0; q < NT; q++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int n = n0 + 8 * (e >> 1), mm = m0 + q * 8 + 2 * t + (e & 1);
                if (!tile_ok || n >= p.n || mm >= p.m)
                    continue;
                float v = acc[q][e] * p.post;
                p.y[(size_t)mm * p.n + n] = finish(p, v, n);
            }
        return;
    }

#pragma unroll
    for (int q = 0; q < NT; q++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int n = n0 + 8 * (e >> 1), mm = m0 + q * 8 + 2 * t + (e & 1);
            if (tile_ok && n < p.n && mm < p.m)
                atomicAdd(&p.ws[(size_t)mm * p.n + n], acc[q][e] * p.post);
        }
    __threadfence();
    __syncthreads();
    unsigned *ctr = p.counters + (size_t)blockIdx.z * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0)
        last_cta = atomicAdd(ctr, 1u) == (unsigned)p.splits - 1;
    __syncthreads();
    if (!last_cta)
        return;
    __threadfence();
    const int nbase = blockIdx.x * WARPS * 16;
    const int nrows = min(WARPS * 16, p.n - nbase);
    ws_flush(p, nrows * mvalid, threadIdx.x, WARPS * 32, [&](int i, size_t &off, int &n) {
        n = nbase + i % nrows;
        off = (size_t)(m0 + i / nrows) * p.n + n;
        return true;
    });
    if (threadIdx.x == 0)
        *ctr = 0u;
}

template <int F, int NT>
static cudaError_t launch_nt(const Params &p, dim3 grid, cudaStream_t s)
{
    size_t smem = (size_t)8 * NT * (size_t)p.xs_ld * 2;
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t e = cudaFuncSetAttribute(gemm_fused_kernel<F, NT>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             SMEM_X_BUDGET + 16 * 1024);
        if (e != cudaSuccess)
            return e;
        raised = true;
    }
    gemm_fused_kernel<F, NT><<<grid, WARPS * 32, smem, s>>>(p);
    return cudaGetLastError();
}

template <int F>
static cudaError_t launch_f(const Params &p, int nt, dim3 grid, cudaStream_t s)
{
    switch (nt) {
    case 1: return launch_nt<F, 1>(p, grid, s);
    case 2: return launch_nt<F, 2>(p, grid, s);
    case 4: return launch_nt<F, 4>(p, grid, s);
    case 8: return launch_nt<F, 8>(p, grid, s);
    default: return launch_nt<F, 16>(p, grid, s);
    }
}

cudaError_t launch_fused(int fmt_kind, const Params &p, int nt, dim3 grid, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) { return launch_f<decltype(f)::value>(p, nt, grid, s); });
}

} // namespace bfpgemm

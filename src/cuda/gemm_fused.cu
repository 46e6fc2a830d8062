/* gemm_fused.cu - the fused weight-only matmul kernel (see gemm_fused.cuh)
 * and its launcher, instantiated per weight format and per number of n8
 * tiles of x (NT: 8, 16, 32, 64 or 128 rows of x per CTA). */
#include "gemm_fused.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

template <int F, int NT>
__global__ void __launch_bounds__(WARPS * 32) gemm_fused_kernel(const Params p)
{
    constexpr bool HIF = F == FMT_HIF4;
    constexpr bool NVF = F == FMT_NV || F == FMT_NVPLUS;
    constexpr bool PLUS = F == FMT_MXPLUS || F == FMT_NVPLUS;
    constexpr int MC = 8 * NT;
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem);       /* [MC][XS_LD] */
    float *cs = reinterpret_cast<float *>(smem + MC * XS_LD * 2);        /* [WARPS][16][MC] */
    __shared__ unsigned last_cta;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nt = blockIdx.x * WARPS + warp;
    const bool tile_ok = nt < p.tiles_n;
    const int m0 = blockIdx.z * MC;
    const int mvalid = min(MC, p.m - m0);
    const int kt0 = blockIdx.y * p.tiles_per_split;
    const int kt1 = min(kt0 + p.tiles_per_split, p.tiles_k);
    float *csw = cs + warp * 16 * MC;

    float acc[NT][4];
#pragma unroll
    for (int q = 0; q < NT; q++)
        acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.0f;
    if (PLUS)
        for (int i = lane; i < 16 * MC; i += 32)
            csw[i] = 0.0f;

    for (int kt = kt0; kt < kt1; kt += 4) {
        /* this warp's 4 tiles of W first, so their loads fly while x is staged */
        uint4 wc[4];
        uint2 sc[4];
        uint32_t cr[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            bool ok = tile_ok && kt + u < kt1;
            size_t tile = (size_t)nt * p.tiles_k + (size_t)(kt + u);
            wc[u] = ok ? __ldg(p.codes + tile * 32 + lane) : make_uint4(0, 0, 0, 0);
            if (NVF || HIF)
                sc[u] = ok ? __ldg(reinterpret_cast<const uint2 *>(p.scales + tile * 64) + g)
                           : make_uint2(0, 0);
            else
                sc[u].x = ok ? __ldg(reinterpret_cast<const uint32_t *>(p.scales + tile * 32) + g)
                             : 0u;
            if (F == FMT_MXPLUS)
                cr[u] = ok ? p.corr[tile * 32 + lane] : 0u;
            if (F == FMT_NVPLUS)
                cr[u] = ok ? reinterpret_cast<const uint16_t *>(p.corr + tile * 64)[lane] : 0u;
        }

        __syncthreads(); /* the previous step is done with xs */
        const int kbase = kt * 64;
        for (int v = threadIdx.x; v < MC * (KC / 8); v += WARPS * 32) {
            int r = v / (KC / 8), c8 = (v % (KC / 8)) * 8;
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
            *reinterpret_cast<uint4 *>(xs + r * XS_LD + c8) = val;
        }
        __syncthreads();

#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (kt + u >= kt1)
                break;
            /* per-tile scale operands, bf16x2: [row half][block] */
            uint32_t s2[2][4];
            if (F == FMT_MX || F == FMT_MXPLUS) {
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int b = 0; b < 2; b++)
                        s2[h][b] = bf16x2_splat(e8m0_bf16((sc[u].x >> (8 * (2 * h + b))) & 0xFFu));
            } else if (NVF) {
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    s2[0][b] = bf16x2_splat(ue4m3_bf16((sc[u].x >> (8 * b)) & 0xFFu));
                    s2[1][b] = bf16x2_splat(ue4m3_bf16((sc[u].y >> (8 * b)) & 0xFFu));
                }
            }
            const uint32_t hw[2] = {sc[u].x, sc[u].y};
            const uint32_t words[4] = {wc[u].x, wc[u].y, wc[u].z, wc[u].w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint32_t a[4];
#pragma unroll
                for (int pp = 0; pp < 4; pp++) {
                    uint32_t c;
                    switch (pp) {
                    case 0: c = code_pair<0, HIF>(words[j]); break;
                    case 1: c = code_pair<1, HIF>(words[j]); break;
                    case 2: c = code_pair<2, HIF>(words[j]); break;
                    default: c = code_pair<3, HIF>(words[j]); break;
                    }
                    c = bmul2(c, K126);
                    const int h = pp & 1, kh = pp >> 1;
                    uint32_t s;
                    if (HIF) {
                        uint32_t wd = hw[h];
                        uint32_t f = ((wd >> (8 + 2 * j + kh)) & 1u) +
                                     ((wd >> (16 + 4 * j + 2 * kh + (t >> 1))) & 1u);
                        s = bf16x2_splat(ue6m2_bf16(wd & 0xFFu) + (f << 7));
                    } else if (NVF) {
                        s = s2[h][j];
                    } else {
                        s = s2[h][j >> 1];
                    }
                    a[pp] = bmul2(c, s);
                }
#pragma unroll
                for (int q = 0; q < NT; q++) {
                    const __nv_bfloat16 *xb = xs + (q * 8 + g) * XS_LD + u * 64 + 16 * j + 2 * t;
                    uint32_t b0 = *reinterpret_cast<const uint32_t *>(xb);
                    uint32_t b1 = *reinterpret_cast<const uint32_t *>(xb + 8);
                    mma_bf16(acc[q], a, b0, b1);
                }
            }
            if (PLUS) {
                /* lane i corrects the block max of row i/2, block(s) by i%2 */
                const int r = lane >> 1;
                uint32_t wx = __shfl_sync(0xFFFFFFFFu, sc[u].x, 4 * (r & 7));
                uint32_t wy = __shfl_sync(0xFFFFFFFFu, sc[u].y, 4 * (r & 7));
                const int nb = F == FMT_NVPLUS ? 2 : 1;
#pragma unroll
                for (int e = 0; e < nb; e++) {
                    uint32_t cb = (cr[u] >> (8 * e)) & 0xFFu;
                    if (!(cb & 0x60u))
                        continue;
                    float scale;
                    int kl;
                    if (F == FMT_MXPLUS) {
                        int b = lane & 1;
                        uint32_t sb = (wx >> (8 * (2 * (r >> 3) + b))) & 0xFFu;
                        scale = sb ? __uint_as_float(sb << 23) : __uint_as_float(0x00400000u);
                        kl = u * 64 + b * 32 + (int)(cb & 31u);
                    } else {
                        int b = 2 * (lane & 1) + e;
                        uint32_t sb = (((r >> 3) ? wy : wx) >> (8 * b)) & 0xFFu;
                        scale = ue4m3_f32(sb);
                        kl = u * 64 + b * 16 + (int)(cb & 15u);
                    }
                    float v = 0.5f * (float)((cb >> 5) & 3u) * scale;
                    if (cb & 0x80u)
                        v = -v;
                    for (int mm = 0; mm < mvalid; mm++)
                        atomicAdd(&csw[r * MC + mm], v * __bfloat162float(xs[mm * XS_LD + kl]));
                }
            }
        }
    }

    if (PLUS) {
        __syncwarp();
#pragma unroll
        for (int q = 0; q < NT; q++) {
            int mc = q * 8 + 2 * t;
            acc[q][0] += csw[g * MC + mc];
            acc[q][1] += csw[g * MC + mc + 1];
            acc[q][2] += csw[(g + 8) * MC + mc];
            acc[q][3] += csw[(g + 8) * MC + mc + 1];
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
                float v = acc[q][e];
                if (p.use_ts)
                    v = __fdiv_rn(v, p.ts);
                if (p.bias)
                    v += __bfloat162float(p.bias[n]);
                p.y[(size_t)mm * p.n + n] = __float2bfloat16_rn(v);
            }
        return;
    }

#pragma unroll
    for (int q = 0; q < NT; q++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int n = n0 + 8 * (e >> 1), mm = m0 + q * 8 + 2 * t + (e & 1);
            if (tile_ok && n < p.n && mm < p.m)
                atomicAdd(&p.ws[(size_t)mm * p.n + n], acc[q][e]);
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
    for (int i = threadIdx.x; i < nrows * mvalid; i += WARPS * 32) {
        int n = nbase + i % nrows, mm = m0 + i / nrows;
        float *wp = p.ws + (size_t)mm * p.n + n;
        float v = __ldcg(wp);
        __stcg(wp, 0.0f);
        if (p.use_ts)
            v = __fdiv_rn(v, p.ts);
        if (p.bias)
            v += __bfloat162float(p.bias[n]);
        p.y[(size_t)mm * p.n + n] = __float2bfloat16_rn(v);
    }
    if (threadIdx.x == 0)
        *ctr = 0u;
}

template <int F, int NT>
static cudaError_t launch_nt(const Params &p, dim3 grid, cudaStream_t s)
{
    constexpr bool PLUS = F == FMT_MXPLUS || F == FMT_NVPLUS;
    size_t smem = (size_t)8 * NT * XS_LD * 2 + (PLUS ? (size_t)WARPS * 16 * 8 * NT * 4 : 0);
    cudaError_t e = cudaFuncSetAttribute(gemm_fused_kernel<F, NT>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return e;
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
    switch (fmt_kind) {
    case FMT_MX: return launch_f<FMT_MX>(p, nt, grid, s);
    case FMT_MXPLUS: return launch_f<FMT_MXPLUS>(p, nt, grid, s);
    case FMT_NV: return launch_f<FMT_NV>(p, nt, grid, s);
    case FMT_NVPLUS: return launch_f<FMT_NVPLUS>(p, nt, grid, s);
    default: return launch_f<FMT_HIF4>(p, nt, grid, s);
    }
}

} // namespace bfpgemm

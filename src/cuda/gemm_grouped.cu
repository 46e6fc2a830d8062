/* gemm_grouped.cu - the grouped (MoE) matmul kernel (gemm_grouped.cuh):
 * one persistent launch for all experts; each unit is the fused kernel's
 * CTA (gemm_fused.cu) on one expert's weight: 4 warps, a row tile of W each,
 * decoded in registers (decode_tile) and multiplied with mma.sync against x
 * staged in shared memory; split K meets in an fp32 workspace. */
#include "gemm_grouped.cuh"
#include "gemm_internal.h"

namespace bfpgemm {

namespace {

/* tiles kt .. kt+3 of row tile nt of one expert (those below kt_end) */
template <int F>
__device__ __forceinline__ void g_load(const uint4 *codes, const uint8_t *scales,
                                       const uint8_t *corr, int tiles_k, int nt, bool tile_ok,
                                       int kt, int kt_end, int lane, uint4 (&wc)[4],
                                       uint2 (&sc)[4], uint2 (&cr)[4])
{
    constexpr bool WIDE = F == FMT_NV || F == FMT_NVPLUS || F == FMT_HIF4;
    const int g = lane >> 2;
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const bool ok = tile_ok && kt + u < kt_end;
        const size_t tile = (size_t)nt * tiles_k + (size_t)(kt + u);
        wc[u] = ok ? __ldg(codes + tile * 32 + lane) : make_uint4(0, 0, 0, 0);
        sc[u] = make_uint2(0, 0);
        cr[u] = make_uint2(0, 0);
        if (!ok)
            continue;
        if (WIDE)
            sc[u] = __ldg(reinterpret_cast<const uint2 *>(scales + tile * 64) + g);
        else
            sc[u].x = __ldg(reinterpret_cast<const uint32_t *>(scales + tile * 32) + g);
        if (F == FMT_MXPLUS)
            cr[u].x = __ldg(reinterpret_cast<const uint32_t *>(corr + tile * 32) + g);
        if (F == FMT_NVPLUS)
            cr[u] = __ldg(reinterpret_cast<const uint2 *>(corr + tile * 64) + g);
    }
}

} // namespace

template <int F, int NT>
__global__ void __launch_bounds__(WARPS * 32) gemm_grouped_kernel(const GroupedParams p)
{
    constexpr int MC = 8 * NT;
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem); /* [MC][xs_ld] */
    __shared__ int upre[G_MAX_EXPERTS + 1]; /* units before expert e */
    __shared__ unsigned last_cta;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const long long per_chunk = (long long)p.cols * p.splits;
    const long long cap = (long long)p.max_tiles * p.splits;

    if (warp == 0) /* units per expert, prefix summed */
        count_units(p, MC, per_chunk, cap, upre, lane);
    __syncthreads();
    const int total = upre[p.e_count];

    for (int u = blockIdx.x; u < total; u += gridDim.x) {
        const int e = expert_of(upre, p.e_count, u);
        int ra, rb;
        expert_rows(p, e, &ra, &rb);
        const int chunks = (rb - ra + MC - 1) / MC;
        const int local = u - upre[e];
        const int c = local % chunks, rest = local / chunks;
        const int s = rest % p.splits, col = rest / p.splits;
        const int tile_id = upre[e] / p.splits + col * chunks + c;
        if (tile_id >= p.max_tiles)
            continue; /* only broken offsets get here (the whole CTA alike) */

        const uint8_t *img = p.base + (size_t)e * p.stride;
        const uint4 *codes = reinterpret_cast<const uint4 *>(img + p.off_codes);
        const uint8_t *scales = img + p.off_scales;
        const uint8_t *corr = p.off_corr ? img + p.off_corr : nullptr;
        const ExpertScales es = expert_scales<F>(img);

        const int nt = col * WARPS + warp;
        const bool tile_ok = nt < p.tiles_n;
        const int m0 = ra + c * MC;
        const int mvalid = min(MC, rb - m0);
        const int kt0 = s * p.tiles_per_split;
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
            g_load<F>(codes, scales, corr, p.tiles_k, nt, tile_ok, c0, c1, lane, wc, sc, cr);
            __syncthreads(); /* the previous chunk (or unit) is done with xs */
            const int kbase = c0 * 64, vecs_per_row = (c1 - c0) * 8;
            for (int v = threadIdx.x; v < MC * vecs_per_row; v += WARPS * 32) {
                const int r = v / vecs_per_row, c8 = (v % vecs_per_row) * 8;
                const int gm = m0 + r, gk = kbase + c8;
                uint4 val = make_uint4(0, 0, 0, 0);
                if (r < mvalid && gk < p.k) {
                    const __nv_bfloat16 *src = p.x + (size_t)gm * p.k + gk;
                    if (p.x_vec && gk + 8 <= p.k) {
                        val = __ldg(reinterpret_cast<const uint4 *>(src));
                    } else {
                        uint16_t h[8];
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            h[i] = gk + i < p.k
                                       ? __ldg(reinterpret_cast<const uint16_t *>(src) + i)
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
                    g_load<F>(codes, scales, corr, p.tiles_k, nt, tile_ok, kt + 4, c1, lane, wn,
                              sn, rn);
                mma_group<F, NT>(acc, wc, sc, cr, xs, ld, (kt - c0) * 64, c1 - kt, g, t,
                                 es.fold);
                if (more) {
#pragma unroll
                    for (int uu = 0; uu < 4; uu++)
                        wc[uu] = wn[uu], sc[uu] = sn[uu], cr[uu] = rn[uu];
                }
            }
        }

        const int n0 = nt * 16 + g;
        if (p.splits == 1) {
#pragma unroll
            for (int q = 0; q < NT; q++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int n = n0 + 8 * (i >> 1), r = q * 8 + 2 * t + (i & 1);
                    if (tile_ok && n < p.n && r < mvalid)
                        p.y[(size_t)(m0 + r) * p.n + n] =
                            g_finish(p, acc[q][i] * es.post, e, n, es.ts);
                }
            continue; /* the next unit's first __syncthreads guards xs */
        }

#pragma unroll
        for (int q = 0; q < NT; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int n = n0 + 8 * (i >> 1), r = q * 8 + 2 * t + (i & 1);
                if (tile_ok && n < p.n && r < mvalid)
                    atomicAdd(&p.ws[(size_t)(m0 + r) * p.n + n], acc[q][i] * es.post);
            }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0)
            last_cta = atomicAdd(p.counters + tile_id, 1u) == (unsigned)p.splits - 1;
        __syncthreads();
        if (last_cta) {
            __threadfence();
            const int nbase = col * WARPS * 16;
            const int nrows = min(WARPS * 16, p.n - nbase);
            for (int i = threadIdx.x; i < nrows * mvalid; i += WARPS * 32) {
                const int n = nbase + i % nrows, r = i / nrows;
                const size_t off = (size_t)(m0 + r) * p.n + n;
                const float v = __ldcg(p.ws + off);
                __stcg(p.ws + off, 0.0f); /* the workspace is left zero */
                p.y[off] = g_finish(p, v, e, n, es.ts);
            }
            if (threadIdx.x == 0)
                p.counters[tile_id] = 0u;
        }
        __syncthreads(); /* last_cta is read before the next unit writes it */
    }
}

template <int F, int NT>
static cudaError_t launch_g(const GroupedParams &p, int sms, cudaStream_t s)
{
    const size_t smem = (size_t)8 * NT * (size_t)p.xs_ld * 2;
    static bool raised; /* the same value every time: a race is harmless */
    if (!raised) {
        cudaError_t err = cudaFuncSetAttribute(gemm_grouped_kernel<F, NT>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               SMEM_X_BUDGET + 16 * 1024);
        if (err != cudaSuccess)
            return err;
        raised = true;
    }
    /* resident CTAs per SM at this smem size: queried once (a CUDA graph
     * capture then records only the launch) */
    static int cached_per_sm, cached_smem = -1; /* a race changes only the grid size,
                                                   never the result (units are looped) */
    int per_sm = cached_per_sm;
    if (cached_smem != (int)smem) {
        cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, gemm_grouped_kernel<F, NT>, WARPS * 32, smem);
        if (err != cudaSuccess)
            return err;
        cached_per_sm = per_sm;
        cached_smem = (int)smem;
    }
    long long grid = (long long)sms * (per_sm > 0 ? per_sm : 1);
    const long long units = (long long)p.max_tiles * p.splits;
    if (grid > units)
        grid = units;
    gemm_grouped_kernel<F, NT><<<(unsigned)grid, WARPS * 32, smem, s>>>(p);
    return cudaGetLastError();
}

cudaError_t launch_grouped(int fmt_kind, const GroupedParams &p, int nt, int sms, cudaStream_t s)
{
    return with_kind(fmt_kind, [&](auto f) {
        constexpr int F = decltype(f)::value;
        switch (nt) {
        case 1: return launch_g<F, 1>(p, sms, s);
        case 4: return launch_g<F, 4>(p, sms, s);
        default: return launch_g<F, 16>(p, sms, s);
        }
    });
}

} // namespace bfpgemm

/* gemm_xq.cu - y = x . W^T (+ bias) with x quantized too (W4A8, W4A4) on
 * the FP8 tensor cores: mma.sync e4m3 x e4m3 -> f32 (sm_89+).
 *
 * W (mxfp4, mxfp4+, nvfp4, nvfp4+) is the A operand, read from the weight's
 * planar planes; x (mxfp8_e4m3, mxfp4, mxfp4+ with an MX weight, nvfp4 with
 * an NVFP4 one) is the B operand, quantized by bfp_cuda_quantize into the
 * workspace (bit for bit bfp_quantize's planes) or passed as planes.
 * Every 4-bit code becomes its E4M3 byte exactly (E2M1 and the MX+ / NVFP4+
 * block max, +-4 (1 + m/8), are all E4M3 values). One mma covers one block
 * of both operands (m16n8k32 for MX's 32, m16n8k16 for NVFP4's 16) into a
 * fresh fp32 partial, then acc += (partial * scale_w) * scale_x in fp32
 * (not scale_w * scale_x first: that overflows for two huge scales, and
 * times a zero partial would give NaN).
 * The mma's k slots are permuted the same way in A and B (lane t's slots
 * 4t..4t+3 and 16+4t..16+4t+3 hold block elements 8t..8t+7), so each lane
 * reads 8 contiguous elements of a row: one 32-bit word of 4-bit codes.
 * bfp_matmul_tuning.xq_kernel = 2 runs the Hopper kernel instead
 * (gemm_xq_wgmma.cu, MX pairs); this file keeps the API, x's quantization
 * and the K split's sums for both. */
#include "bfp.h"
#include "gemm_internal.h"
#include "gemm_xq.h"
#include "gemm_xq_decode.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

namespace {

using namespace bfpgemm::xq;

enum { WK_MX = 0, WK_MXP = 1, WK_NV = 2, WK_NVP = 3 };
enum { XK_E4M3 = 0, XK_MX4 = 1, XK_MX4P = 2, XK_NV = 3 };
constexpr int WARPS = 4, RT = 2; /* a warp: RT row tiles of 16 rows of W */

struct Args {
    const uint8_t *wc, *wsc, *wm; /* W planar codes, scales, meta */
    const uint8_t *xc, *xsc, *xm; /* x planar codes, scales, meta */
    size_t w_crb, x_crb;          /* code row bytes */
    const float *x_ts;            /* x's NVFP4 tensor scale (device) */
    float w_ts;                   /* W's NVFP4 tensor scale */
    int n, m, k, bpr;             /* blocks per row, the same for W and x */
    int vec;                      /* rows aligned for word loads */
    int bps;                      /* blocks per K split */
    const __nv_bfloat16 *bias;
    __nv_bfloat16 *y;
    float *part;                  /* K split: fp32 [m, n] sums, zeroed, or NULL */
};

__device__ __forceinline__ void mma_k32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

__device__ __forceinline__ void mma_k16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32 "
                 "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0), "f"(0.0f));
}

/* grid (W row bands of WARPS * RT * 16, x row chunks of 8 NT, K splits) */
template <int WK, int XK, int NT>
__global__ void __launch_bounds__(WARPS * 32) xq_kernel(Args a)
{
    constexpr bool NV = WK == WK_NV || WK == WK_NVP;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int w0 = (blockIdx.x * WARPS + warp) * RT * 16;
    const int x0 = blockIdx.y * 8 * NT;
    const int b0 = blockIdx.z * a.bps, b1 = min(a.bpr, b0 + a.bps);
    if (w0 >= a.n)
        return;
    const bool vec = a.vec != 0;

    int wrow[RT][2], xrow[NT], xsr[NT][2]; /* rows past the end read the last one */
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            wrow[r][h] = min(w0 + r * 16 + g + 8 * h, a.n - 1);
#pragma unroll
    for (int j = 0; j < NT; j++) {
        xrow[j] = min(x0 + j * 8 + g, a.m - 1);
        xsr[j][0] = min(x0 + j * 8 + 2 * t, a.m - 1);
        xsr[j][1] = min(x0 + j * 8 + 2 * t + 1, a.m - 1);
    }
    float acc[RT][NT][4];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[r][j][i] = 0.0f;

#pragma unroll 2
    for (int b = b0; b < b1; b++) {
        uint32_t A[RT][4];
        float sw[RT][2];
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if constexpr (NV)
                    sw[r][h] = nv_block<WK == WK_NVP>(a.wc, a.wsc, a.wm, a.w_crb, a.bpr,
                                                      wrow[r][h], b, t, a.k, A[r][h]);
                else
                    sw[r][h] = mx4_block<WK == WK_MXP>(a.wc, a.wsc, a.wm, a.w_crb, a.bpr,
                                                       wrow[r][h], b, t, a.k, vec, A[r][h],
                                                       A[r][2 + h]);
            }
#pragma unroll
        for (int j = 0; j < NT; j++) {
            uint32_t B0, B1 = 0;
            if constexpr (NV) {
                nv_block<false>(a.xc, a.xsc, a.xm, a.x_crb, a.bpr, xrow[j], b, t, a.k, B0);
            } else if constexpr (XK == XK_E4M3) {
                int e0 = b * 32 + 8 * t;
                uint2 v = load8(a.xc + (size_t)xrow[j] * a.x_crb, e0, min(max(a.k - e0, 0), 8),
                                vec);
                B0 = v.x, B1 = v.y;
            } else {
                mx4_block<XK == XK_MX4P>(a.xc, a.xsc, a.xm, a.x_crb, a.bpr, xrow[j], b, t, a.k,
                                         vec, B0, B1);
            }
            float sx0, sx1;
            if constexpr (NV) {
                sx0 = ue4m3_f(__ldg(a.xsc + (size_t)xsr[j][0] * a.bpr + b));
                sx1 = ue4m3_f(__ldg(a.xsc + (size_t)xsr[j][1] * a.bpr + b));
            } else {
                sx0 = e8m0_f(__ldg(a.xsc + (size_t)xsr[j][0] * a.bpr + b));
                sx1 = e8m0_f(__ldg(a.xsc + (size_t)xsr[j][1] * a.bpr + b));
            }
#pragma unroll
            for (int r = 0; r < RT; r++) {
                float p[4];
                if constexpr (NV)
                    mma_k16(p, A[r][0], A[r][1], B0);
                else
                    mma_k32(p, A[r], B0, B1);
                acc[r][j][0] = fmaf(p[0] * sw[r][0], sx0, acc[r][j][0]);
                acc[r][j][1] = fmaf(p[1] * sw[r][0], sx1, acc[r][j][1]);
                acc[r][j][2] = fmaf(p[2] * sw[r][1], sx0, acc[r][j][2]);
                acc[r][j][3] = fmaf(p[3] * sw[r][1], sx1, acc[r][j][3]);
            }
        }
    }

    float xts = 1.0f;
    if constexpr (NV)
        xts = *a.x_ts;
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int wr = w0 + r * 16 + g + (i >= 2 ? 8 : 0), xr = x0 + j * 8 + 2 * t + (i & 1);
                if (wr >= a.n || xr >= a.m)
                    continue;
                float v = acc[r][j][i];
                if constexpr (NV)
                    v = v / a.w_ts / xts;
                size_t o = (size_t)xr * a.n + wr;
                if (a.part) {
                    atomicAdd(a.part + o, v);
                } else {
                    if (a.bias)
                        v += __bfloat162float(a.bias[wr]);
                    a.y[o] = __float2bfloat16_rn(v);
                }
            }
}

/* the K split's last step: y = bf16(sums + bias) */
__global__ void xq_finish(const float *part, const __nv_bfloat16 *bias, __nv_bfloat16 *y,
                          size_t n, size_t total)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = part[i];
        if (bias)
            v += __bfloat162float(bias[i % n]);
        y[i] = __float2bfloat16_rn(v);
    }
}

int w_kind(bfp_format f)
{
    switch (f) {
    case BFP_MXFP4: return WK_MX;
    case BFP_MXFP4_PLUS: return WK_MXP;
    case BFP_NVFP4: return WK_NV;
    case BFP_NVFP4_PLUS: return WK_NVP;
    default: return -1;
    }
}

/* the x kind for a weight kind, or -1 for a pair without a kernel */
int x_kind(int wk, bfp_format f)
{
    if (wk == WK_MX || wk == WK_MXP) {
        if (f == BFP_MXFP8_E4M3) return XK_E4M3;
        if (f == BFP_MXFP4) return XK_MX4;
        if (f == BFP_MXFP4_PLUS) return XK_MX4P;
        return -1;
    }
    if ((wk == WK_NV || wk == WK_NVP) && f == BFP_NVFP4)
        return XK_NV;
    return -1;
}

size_t al256(size_t v) { return (v + 255) & ~(size_t)255; }

struct Plan {
    int nt, splits, bps;
    dim3 grid;
    size_t q_bytes;    /* x's planes (front of the workspace) */
    size_t prep_bytes; /* the wgmma kernel's copy of x, after them (else 0) */
    size_t part_bytes; /* K split sums, after that */
    bfp_plane_sizes xs;
    int wgmma;         /* xq_kernel = 2: the plan is wg's */
    bfpgemm::XqWgPlan wg;
};

int sm_count()
{
    int sms = 0;
    bool sm90;
    return bfpgemm::current_device(&sms, &sm90) ? sms : 0;
}

bool make_plan(const bfpgemm::WeightPlanar &w, bfp_format x_fmt, size_t m, int sms, Plan *P)
{
    if (bfp_plane_sizes_for(x_fmt, m, w.k, &P->xs) != BFP_OK)
        return false;
    P->nt = m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8;
    size_t gx = (w.n + WARPS * RT * 16 - 1) / (WARPS * RT * 16);
    size_t gy = (m + 8 * P->nt - 1) / (8 * P->nt);
    if (gy > 65535)
        return false;
    size_t bpr = P->xs.blocks_per_row, ctas = gx * gy;
    /* about 8 CTAs per SM, each split at least 8 blocks long */
    size_t want = ((size_t)(sms > 0 ? sms : 1) * 8 + ctas - 1) / ctas;
    size_t cap = bpr / 8 > 0 ? bpr / 8 : 1;
    size_t splits = want < cap ? want : cap;
    if (splits < 1)
        splits = 1;
    P->bps = (int)((bpr + splits - 1) / splits);
    P->splits = (int)((bpr + P->bps - 1) / P->bps);
    P->grid = dim3((unsigned)gx, (unsigned)gy, (unsigned)P->splits);
    P->q_bytes = al256(P->xs.codes) + al256(P->xs.scales) + al256(P->xs.meta) + 256;
    P->prep_bytes = 0;
    P->part_bytes = P->splits > 1 ? m * w.n * sizeof(float) : 0;
    P->wgmma = 0;
    return true;
}

/* the wgmma kernel's plan in P (its x planes as make_plan's) */
bool make_plan_wgmma(const bfpgemm::WeightPlanar &w, size_t m, int sms, Plan *P)
{
    if (!bfpgemm::xq_wgmma_plan(w, m, sms, &P->wg))
        return false;
    P->wgmma = 1;
    P->splits = P->wg.splits;
    P->prep_bytes = al256(P->wg.prep_bytes);
    P->part_bytes = P->splits > 1 ? m * w.n * sizeof(float) : 0;
    return true;
}

/* the current device runs sm_90a code (wgmma) */
bool hopper()
{
    int sms;
    bool sm90 = false;
    return bfpgemm::current_device(&sms, &sm90) && sm90;
}

template <int WK, int XK>
cudaError_t launch_nt(int nt, dim3 grid, const Args &a, cudaStream_t s)
{
    switch (nt) {
    case 1: xq_kernel<WK, XK, 1><<<grid, WARPS * 32, 0, s>>>(a); break;
    case 2: xq_kernel<WK, XK, 2><<<grid, WARPS * 32, 0, s>>>(a); break;
    case 4: xq_kernel<WK, XK, 4><<<grid, WARPS * 32, 0, s>>>(a); break;
    default: xq_kernel<WK, XK, 8><<<grid, WARPS * 32, 0, s>>>(a); break;
    }
    return cudaGetLastError();
}

cudaError_t launch(int wk, int xk, int nt, dim3 grid, const Args &a, cudaStream_t s)
{
    switch (wk * 4 + xk) {
    case WK_MX * 4 + XK_E4M3: return launch_nt<WK_MX, XK_E4M3>(nt, grid, a, s);
    case WK_MX * 4 + XK_MX4: return launch_nt<WK_MX, XK_MX4>(nt, grid, a, s);
    case WK_MX * 4 + XK_MX4P: return launch_nt<WK_MX, XK_MX4P>(nt, grid, a, s);
    case WK_MXP * 4 + XK_E4M3: return launch_nt<WK_MXP, XK_E4M3>(nt, grid, a, s);
    case WK_MXP * 4 + XK_MX4: return launch_nt<WK_MXP, XK_MX4>(nt, grid, a, s);
    case WK_MXP * 4 + XK_MX4P: return launch_nt<WK_MXP, XK_MX4P>(nt, grid, a, s);
    case WK_NV * 4 + XK_NV: return launch_nt<WK_NV, XK_NV>(nt, grid, a, s);
    case WK_NVP * 4 + XK_NV: return launch_nt<WK_NVP, XK_NV>(nt, grid, a, s);
    default: return cudaErrorInvalidValue;
    }
}

bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* the product from x's planes (device) into y; ws: P.prep_bytes (the wgmma
 * kernel's copy of x), then the K split's sums */
bfp_status run(const bfpgemm::WeightPlanar &w, bfp_format x_fmt, const bfp_const_planes &xq,
               size_t m, const Plan &P, const void *bias, void *y, char *ws, cudaStream_t s)
{
    char *part = ws + P.prep_bytes;
    int wk = w_kind(w.fmt), xk = x_kind(wk, x_fmt);
    Args a;
    a.wc = w.codes, a.wsc = w.scales, a.wm = w.meta;
    a.xc = xq.codes, a.xsc = xq.scales, a.xm = xq.meta;
    a.w_crb = w.sz.code_row_bytes, a.x_crb = P.xs.code_row_bytes;
    a.x_ts = xq.tensor_scale;
    a.w_ts = w.ts;
    a.n = (int)w.n, a.m = (int)m, a.k = (int)w.k, a.bpr = (int)P.xs.blocks_per_row;
    size_t xal = xk == XK_E4M3 ? 8 : 4;
    a.vec = a.w_crb % 4 == 0 && aligned(a.wc, 4) && a.x_crb % xal == 0 && aligned(a.xc, xal);
    a.bps = P.bps;
    a.bias = static_cast<const __nv_bfloat16 *>(bias);
    a.y = static_cast<__nv_bfloat16 *>(y);
    a.part = P.splits > 1 ? reinterpret_cast<float *>(part) : nullptr;
    if (a.part && cudaMemsetAsync(a.part, 0, P.part_bytes, s) != cudaSuccess)
        return BFP_ERR_DEVICE;
    cudaError_t e = P.wgmma ? bfpgemm::xq_wgmma_run(w, x_fmt, xq, P.xs.code_row_bytes, m, P.wg,
                                                    bias, y, ws, a.part, s)
                            : launch(wk, xk, P.nt, P.grid, a, s);
    if (e != cudaSuccess)
        return BFP_ERR_DEVICE;
    if (a.part) {
        size_t total = m * w.n;
        unsigned blocks = (unsigned)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
        xq_finish<<<blocks, 256, 0, s>>>(a.part, a.bias, a.y, w.n, total);
        if (cudaGetLastError() != cudaSuccess)
            return BFP_ERR_DEVICE;
    }
    return BFP_OK;
}

/* the common checks; fills w and the plan */
bfp_status prepare(const bfp_cuda_planar_weight *wv, bfp_format x_fmt, size_t m,
                   const bfp_matmul_tuning *tuning, bfpgemm::WeightPlanar *w, Plan *P)
{
    if (!wv || bfp_matmul_tuning_check(tuning) != BFP_OK)
        return BFP_ERR_ARG;
    const bfp_format_info *wf = bfp_format_get(wv->fmt);
    if (!wf)
        return BFP_ERR_FORMAT;
    if (!wv->d_codes || !wv->d_scales || (wf->meta_bytes && !wv->d_meta))
        return BFP_ERR_ARG;
    w->fmt = wv->fmt;
    w->n = wv->n;
    w->k = wv->k;
    bfp_status st = bfp_plane_sizes_for(wv->fmt, wv->n, wv->k, &w->sz);
    if (st != BFP_OK)
        return st;
    w->codes = static_cast<const uint8_t *>(wv->d_codes);
    w->scales = static_cast<const uint8_t *>(wv->d_scales);
    w->meta = static_cast<const uint8_t *>(wv->d_meta);
    w->ts = wf->has_tensor_scale ? wv->tensor_scale : 1.0f;
    if (wf->has_tensor_scale && !(w->ts > 0.0f && w->ts < INFINITY))
        return BFP_ERR_ARG;
    if (x_kind(w_kind(w->fmt), x_fmt) < 0)
        return bfp_format_get(x_fmt) ? BFP_ERR_UNSUPPORTED : BFP_ERR_FORMAT;
    if (m == 0 || m > INT_MAX || w->n > INT_MAX || w->k > INT_MAX || m > SIZE_MAX / 4 / w->n)
        return BFP_ERR_SHAPE;
    if (!make_plan(*w, x_fmt, m, sm_count(), P))
        return BFP_ERR_SHAPE;
    if (tuning && tuning->xq_kernel == 2) {
        if (!bfpgemm::xq_wgmma_pair(w->fmt, x_fmt) || !hopper())
            return BFP_ERR_UNSUPPORTED;
        if (!make_plan_wgmma(*w, m, sm_count(), P))
            return BFP_ERR_SHAPE;
    }
    return BFP_OK;
}

} // namespace

extern "C" {

int bfp_cuda_matmul_xq_supported(bfp_format w_fmt, bfp_format x_fmt)
{
    return x_kind(w_kind(w_fmt), x_fmt) >= 0;
}

size_t bfp_cuda_matmul_xq_workspace_size(const bfp_cuda_planar_weight *wv, bfp_format x_fmt,
                                         size_t m, const bfp_matmul_tuning *tuning)
{
    bfpgemm::WeightPlanar w;
    Plan P;
    if (prepare(wv, x_fmt, m, tuning, &w, &P) != BFP_OK)
        return 0;
    return P.q_bytes + P.prep_bytes + P.part_bytes;
}

bfp_status bfp_cuda_matmul_xq_planes(const bfp_cuda_planar_weight *wv, bfp_format x_fmt,
                                     const bfp_const_planes *d_x, size_t m, const void *d_bias,
                                     void *d_y, void *d_ws, size_t ws_bytes,
                                     const bfp_matmul_tuning *tuning, void *stream)
{
    bfpgemm::WeightPlanar w;
    Plan P;
    bfp_status st = prepare(wv, x_fmt, m, tuning, &w, &P);
    if (st != BFP_OK)
        return st;
    const bfp_format_info *f = bfp_format_get(x_fmt);
    if (!d_x || !d_x->codes || !d_x->scales || (f->meta_bytes && !d_x->meta) ||
        (f->has_tensor_scale && !d_x->tensor_scale) || !d_y ||
        (P.prep_bytes + P.part_bytes &&
         (!d_ws || ws_bytes < P.prep_bytes + P.part_bytes || !aligned(d_ws, 16))))
        return BFP_ERR_ARG;
    return run(w, x_fmt, *d_x, m, P, d_bias, d_y, static_cast<char *>(d_ws),
               static_cast<cudaStream_t>(stream));
}

bfp_status bfp_cuda_matmul_xq(const bfp_cuda_planar_weight *wv, bfp_format x_fmt,
                              const void *d_x_bf16, size_t m, const void *d_bias,
                              void *d_y, void *d_ws, size_t ws_bytes,
                              const bfp_matmul_tuning *tuning, void *stream)
{
    bfpgemm::WeightPlanar w;
    Plan P;
    bfp_status st = prepare(wv, x_fmt, m, tuning, &w, &P);
    if (st != BFP_OK)
        return st;
    if (!d_x_bf16 || !d_y || !d_ws || ws_bytes < P.q_bytes + P.prep_bytes + P.part_bytes ||
        !aligned(d_ws, 256))
        return BFP_ERR_ARG;
    char *b = static_cast<char *>(d_ws);
    bfp_planes q;
    q.codes = reinterpret_cast<uint8_t *>(b);
    b += al256(P.xs.codes);
    q.scales = reinterpret_cast<uint8_t *>(b);
    b += al256(P.xs.scales);
    q.meta = reinterpret_cast<uint8_t *>(b);
    b += al256(P.xs.meta);
    q.tensor_scale = reinterpret_cast<float *>(b);
    b += 256;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    st = bfp_cuda_quantize(x_fmt, BFP_DTYPE_BF16, d_x_bf16, m, w.k, NULL, 0, &q, NULL, s);
    if (st != BFP_OK)
        return st;
    bfp_const_planes cq = {q.codes, q.scales, q.meta, q.tensor_scale};
    return run(w, x_fmt, cq, m, P, d_bias, d_y, b, s);
}

} /* extern "C" */

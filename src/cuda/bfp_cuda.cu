/* bfp_cuda.cu - GPU quantize and dequantize for every bfp format (sm_90),
 * bit for bit the planes and values of the reference in src/core.
 *
 * One thread owns 8 consecutive elements of a row: it reads them as one
 * 16-byte vector (two for f32), the T = block/8 lanes of a block combine
 * their maxima with warp shuffles, and each thread writes its 8 codes as
 * one 4/6/8-byte store. Shapes or pointers that do not allow vectors take
 * the same code with byte-wise loads and stores. NVFP4's tensor scale is an
 * amax pass (atomicMax on the fp32 bits, finite values only), a one-thread
 * kernel that turns it into s_enc, then the quantize pass, all on the
 * caller's stream. No call allocates or synchronizes. */
#include "bfp_cuda_launch.h"
#include "bfp_cuda_quant_bf16.cuh" /* amax8_bf16, words_of */
#include "check_args.h"
#include "instances/formats.h"

#include <float.h>
#include <limits.h>
#include <string.h>

using namespace bfpcuda;

namespace {

/* max |x| over the finite ones of 8 bf16 elements, as fp32 bits */
__device__ __forceinline__ uint32_t amax8_finite_bf16(const uint4 &w)
{
    uint32_t m = amax8_bf16(w);
    if (m < 0x7F800000u)
        return m;
    uint32_t in[4], f = 0;
    words_of(w, in);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t lo = (in[k] & 0x7FFFu) << 16, hi = in[k] & 0x7FFF0000u;
        f = max(f, lo < 0x7F800000u ? lo : 0u);
        f = max(f, hi < 0x7F800000u ? hi : 0u);
    }
    return f;
}

/* The bf16 amax pass: 4 vectors per thread and iteration, the next 4
 * loaded before the current ones are reduced (bytes in flight). */
__device__ __forceinline__ uint32_t amax_bf16_vec(const uint4 *src, size_t ngroups)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 next[4];
#pragma unroll
    for (int u = 0; u < 4; u++)
        next[u] = g + u * stride < ngroups ? __ldg(src + g + u * stride) : make_uint4(0, 0, 0, 0);
    uint32_t m = 0;
    for (; g < ngroups; g += 4 * stride) {
        uint4 cur[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            cur[u] = next[u];
            size_t gn = g + (4 + u) * stride;
            next[u] = gn < ngroups ? __ldg(src + gn) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
            m = max(m, amax8_finite_bf16(cur[u]));
    }
    return m;
}

/* max |x| over finite values, as fp32 bits, into *out (pre-zeroed) */
__global__ void __launch_bounds__(256)
    amax_kernel(const unsigned char *src, int dt, size_t n, bool vec, unsigned int *out)
{
    uint32_t m = 0;
    size_t ngroups = (n + 7) / 8;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    if (vec && dt == BFP_DTYPE_BF16 && n % 8 == 0)
        ngroups = 0, m = amax_bf16_vec(reinterpret_cast<const uint4 *>(src), n / 8);
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < ngroups; g += 4 * stride) {
        uint32_t x[4][8];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            size_t gu = g + u * stride;
            int cnt = gu < ngroups ? (int)min(n - gu * 8, (size_t)8) : 0;
            load8(src, dt, gu * 8, cnt, vec, x[u]);
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t a = x[u][j] & 0x7FFFFFFFu;
                if (a < 0x7F800000u)
                    m = max(m, a);
            }
    }
    m = group_max<32>(m);
    if ((threadIdx.x & 31u) == 0 && m)
        atomicMax(out, m);
}

/* amax bits -> s_enc (format_defs.h) */
__global__ void tscale_kernel(float *ts)
{
    *ts = bfp_nvfp4_s_enc(u2f(f2u(*ts)));
}

__global__ void one_kernel(float *ts) { *ts = 1.0f; }

/* ---- host side ---------------------------------------------------------------------- */

bfp_status make_tiling(size_t rows, size_t cols, size_t G, int T, int qu, Tiling *t)
{
    size_t gpr = G * (size_t)T;
    t->L.rows = rows;
    t->L.cols = cols;
    t->L.row0 = 0;
    t->L.gpr = gpr;
    t->L.qu = qu;
    if (gpr >= 256) {
        size_t gx = (gpr + 255) / 256;
        if (gx > (size_t)INT_MAX)
            return BFP_ERR_SHAPE;
        t->L.ct_log2 = 8;
        t->L.rt = 1;
        t->gx = (unsigned)gx;
    } else {
        int lg = 0;
        while (((size_t)1 << lg) < gpr)
            lg++;
        t->L.ct_log2 = lg;
        t->L.rt = 256 >> lg;
        t->gx = 1;
    }
    t->rows_per_launch = (size_t)65535 * (size_t)t->L.rt * (size_t)qu;
    return BFP_OK;
}

/* The formats with GPU kernels (instances/formats.h); any other valid id
 * is BFP_ERR_UNSUPPORTED here */
bfp_status dispatch_quant(int fmt, const QParams &P, const Tiling &t, cudaStream_t s)
{
    switch (fmt) {
#define X(ID)                                                                              \
    case BFP_##ID: return launch_quant<BFP_##ID>(P, t, s);
        BFP_CUDA_FORMATS(X)
#undef X
    }
    return BFP_ERR_UNSUPPORTED;
}

bfp_status dispatch_dequant(int fmt, const DParams &P, const Tiling &t,
                            const bfp_cuda_quant_tuning *tu, cudaStream_t s)
{
    switch (fmt) {
#define X(ID)                                                                              \
    case BFP_##ID: return launch_dequant<BFP_##ID>(P, t, tu, s);
        BFP_CUDA_FORMATS(X)
#undef X
    }
    return BFP_ERR_UNSUPPORTED;
}

/* QU rows per thread pays off once the grid has many more threads than the
 * GPU runs at once (docs/gpu.md); below 2^22 threads keep one row per thread. */
#ifndef BFP_CUDA_QU_MIN_THREADS
#define BFP_CUDA_QU_MIN_THREADS ((size_t)1 << 22) /* a test build may lower it */
#endif
bool rows_per_thread_ok(size_t rows, size_t threads_per_row)
{
    return rows >= (size_t)QU && threads_per_row != 0 &&
           rows > (size_t)BFP_CUDA_QU_MIN_THREADS / threads_per_row;
}

bool aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

/* byte alignment needed for one wide store of a group of 8 W-bit codes */
size_t codes_align(int bits) { return bits == 4 ? 4 : bits == 6 ? 2 : 8; }

} // namespace

extern "C" {

int bfp_cuda_available(void)
{
    int n = 0, dev = 0, major = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError(); /* clear a "no device" error */
        return 0;
    }
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return 0;
    return major >= 9; /* the kernels are built for sm_90 */
}

bfp_status bfp_cuda_quantize(bfp_format fmt, bfp_dtype dtype, const void *d_src, size_t rows,
                             size_t cols, const bfp_options *opts, int swizzled_scales,
                             const bfp_planes *d_out, unsigned long long *d_nonfinite_blocks,
                             void *stream)
{
    bfp_plane_sizes sz;
    bfp_options o;
    bfp_status st = bfp_check_quantize_args(fmt, dtype, d_src, rows, cols, opts, d_out, &sz, &o);
    if (st != BFP_OK)
        return st;
    const bfp_format_info *f = bfp_format_get(fmt);
    if (!f->cuda || (swizzled_scales && f->scale_bytes != 1))
        return BFP_ERR_UNSUPPORTED;
    size_t swz_bytes = 0;
    if (swizzled_scales && (swz_bytes = bfp_swizzled_scales_size(rows, sz.blocks_per_row)) == 0)
        return BFP_ERR_SHAPE;

    cudaStream_t s = (cudaStream_t)stream;
    const int T = f->block / 8;
    Tiling t;
    /* QU rows per thread on the hot path (the family's default rounding) of
     * large tensors; small ones need every thread they can get */
    int qu = o.rounding == f->default_rounding && rows_per_thread_ok(rows, sz.blocks_per_row * T) ? QU : 1;
    st = make_tiling(rows, cols, sz.blocks_per_row, T, qu, &t);
    if (st != BFP_OK)
        return st;
    QParams P;
    P.L = t.L;
    P.src = (const unsigned char *)d_src;
    P.dt = (int)dtype;
    P.vec_in = aligned(d_src, 16) && cols % 8 == 0;
    P.codes = d_out->codes;
    P.crb = sz.code_row_bytes;
    size_t ca = codes_align(f->elem_bits);
    P.vec_out = aligned(d_out->codes, ca) && sz.code_row_bytes % ca == 0;
    P.G = sz.blocks_per_row;
    P.scales = d_out->scales;
    P.meta = f->meta_bytes ? d_out->meta : NULL;
    P.tscale = f->has_tensor_scale ? d_out->tensor_scale : NULL;
    P.nonfinite = d_nonfinite_blocks;
    P.seed = o.seed;
    P.mode = (int)o.rounding;
    P.scale_mode = (int)o.scale_mode;
    P.no_ts = o.nvfp4_no_tensor_scale;
    P.swz = swizzled_scales ? 1 : 0;
    P.swz_ncol = (sz.blocks_per_row + 3) / 4;

    if (swizzled_scales && (rows % 128 || sz.blocks_per_row % 4)) /* zero padding */
        CUDA_OK(cudaMemsetAsync(d_out->scales, 0, swz_bytes, s));

    if (f->has_tensor_scale) {
        unsigned int *ts = (unsigned int *)d_out->tensor_scale;
        if (o.nvfp4_no_tensor_scale) {
            BFP_LAUNCH(one_kernel, 1, 1, s, d_out->tensor_scale);
            CUDA_OK(cudaGetLastError());
        } else {
            int dev = 0, sms = 0;
            CUDA_OK(cudaGetDevice(&dev));
            CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
            size_t n = rows * cols, groups = (n + 7) / 8;
            size_t blocks = (groups + 4 * 256 - 1) / (4 * 256);
            int per_sm = 0;
            CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, amax_kernel, 256, 0));
            size_t cap = (size_t)(sms > 0 ? sms : 1) * (size_t)(per_sm > 0 ? per_sm : 1);
            if (blocks > cap)
                blocks = cap;
            CUDA_OK(cudaMemsetAsync(ts, 0, 4, s));
            BFP_LAUNCH(amax_kernel, (unsigned)blocks, 256, s, P.src, P.dt, n, aligned(d_src, 16), ts);
            CUDA_OK(cudaGetLastError());
            BFP_LAUNCH(tscale_kernel, 1, 1, s, d_out->tensor_scale);
            CUDA_OK(cudaGetLastError());
        }
        if (o.nvfp4_2d) /* NVFP4 only: bfp_check_quantize_args refuses NVFP4+ 2-D */
            return launch_nv2d<BFP_NVFP4>(P, s);
    }
    return dispatch_quant((int)fmt, P, t, s);
}

bfp_status bfp_cuda_dequantize(bfp_format fmt, const bfp_const_planes *d_in, size_t rows,
                               size_t cols, bfp_dtype dtype, void *d_dst, void *stream)
{
    return bfp_cuda_dequantize_tuned(fmt, d_in, rows, cols, dtype, d_dst, stream, NULL);
}

bfp_status bfp_cuda_dequantize_tuned(bfp_format fmt, const bfp_const_planes *d_in, size_t rows,
                                     size_t cols, bfp_dtype dtype, void *d_dst, void *stream,
                                     const bfp_cuda_tuning *tuning)
{
    bfp_plane_sizes sz;
    bfp_status st = bfp_check_dequantize_args(fmt, d_in, rows, cols, dtype, d_dst, &sz);
    if (st != BFP_OK)
        return st;
    if (tuning && tuning->quant.dequant_ctas_per_sm > (1u << 20))
        return BFP_ERR_ARG;
    const bfp_format_info *f = bfp_format_get(fmt);
    if (!f->cuda)
        return BFP_ERR_UNSUPPORTED;
    Tiling t;
    int qu = rows_per_thread_ok(rows, sz.blocks_per_row * (size_t)(f->block / 8)) ? QU : 1;
    st = make_tiling(rows, cols, sz.blocks_per_row, f->block / 8, qu, &t);
    if (st != BFP_OK)
        return st;
    DParams P;
    P.L = t.L;
    P.codes = d_in->codes;
    P.crb = sz.code_row_bytes;
    P.G = sz.blocks_per_row;
    size_t ca = codes_align(f->elem_bits);
    P.vec_in = aligned(d_in->codes, ca) && sz.code_row_bytes % ca == 0;
    P.vec_out = aligned(d_dst, 16) && cols % 8 == 0;
    P.scales = d_in->scales;
    P.meta = f->meta_bytes ? d_in->meta : NULL;
    P.tscale = f->has_tensor_scale ? d_in->tensor_scale : NULL;
    P.dst = (unsigned char *)d_dst;
    P.dt = (int)dtype;
    return dispatch_dequant((int)fmt, P, t, tuning ? &tuning->quant : NULL, (cudaStream_t)stream);
}

} /* extern "C" */

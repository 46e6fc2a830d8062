/* gemm_unpack.cu - a prepacked weight (src/core/matmul_pack.c) decoded to
 * bf16 rows, for the dequantize + cuBLAS path and bfp_cuda_weight_unpack.
 * Each value is computed exactly in float (code x scale has at most 7
 * significant bits) and rounded to bf16, which holds it exactly or
 * overflows to Inf as float does: the result equals bfp_matmul_unpack's
 * (tensor scale 1) rounded to bf16, NaN for NaN. NVFP4's tensor scale is
 * not applied to bf16 rows (the cuBLAS path's alpha divides by it); float
 * rows are divided by it as bfp_matmul_unpack does (ts: 1 for the others). */
#include "gemm_internal.h"

namespace bfpgemm {
namespace {

constexpr int UNPACK_WARPS = 4;
constexpr int SM_PITCH = 72; /* bf16 per staged row: conflict-free word writes and reads */

/* A lane's packed scale (record word sc.x / sc.y, HiF4 word) as a float, for
 * row half h (rows g, g + 8) and column col of the tile; NaN for NaN blocks */
template <int F>
__device__ __forceinline__ float scale_of(const uint2 &sc, int h, int col)
{
    if (F == FMT_MX || F == FMT_MXPLUS) {
        /* [g b0][g b1][g+8 b0][g+8 b1]: E8M0 2^(s - 127) */
        const uint32_t s = sc.x >> (8 * (2 * h + (col >> 5))) & 0xFFu;
        return s == 0xFFu ? __uint_as_float(0x7FC00000u)
                          : __uint_as_float(s ? s << 23 : 0x400000u);
    }
    if (F == FMT_NV || F == FMT_NVPLUS) {
        /* packed UE4M3 q = (E + 10) << 3 | m for 2^E (1 + m/8); 0 zero, 0xA8 NaN */
        const uint32_t q = (h ? sc.y : sc.x) >> (8 * (col >> 4)) & 0xFFu;
        return q == 0xA8u ? __uint_as_float(0x7FC00000u)
               : q == 0u  ? 0.0f
                          : __uint_as_float(q * (1u << 20) + (117u << 23));
    }
    /* HiF4: UE6M2 b in bits 31:24 = 2^((b >> 2) - 48) (1 + (b & 3) / 4), times
     * 2^(E1_8 + E1_16) of the column's 8-column group and 4-column half */
    const uint32_t w = h ? sc.y : sc.x, b = w >> 24, c = (uint32_t)col >> 3;
    if (b == 0xFFu)
        return __uint_as_float(0x7FC00000u);
    const uint32_t e = (w >> (3 * c) & 1u) + (w >> (3 * c + 1 + ((col >> 2) & 1)) & 1u);
    return __uint_as_float((((b >> 2) + 79u + e) << 23) | (b & 3u) << 21);
}

/* One warp per tile of 16 x 64: this lane's 32 values staged in shared
 * memory, then written as rows. Tiles t of [0, row_tiles * tiles_k) are row
 * tile tile0 + t / tiles_k; out holds rows from tile0 * 16 on. */
template <class T>
__device__ __forceinline__ void store2(T *p, float v0, float v1, float ts);
template <>
__device__ __forceinline__ void store2(__nv_bfloat16 *p, float v0, float v1, float)
{
    *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v0, v1);
}
template <>
__device__ __forceinline__ void store2(float *p, float v0, float v1, float ts)
{
    *reinterpret_cast<float2 *>(p) = make_float2(__fdiv_rn(v0, ts), __fdiv_rn(v1, ts));
}
template <class T> struct Pair;
template <> struct Pair<__nv_bfloat16> { using type = __nv_bfloat162; };
template <> struct Pair<float> { using type = float2; };

template <int F, class T>
__global__ void __launch_bounds__(UNPACK_WARPS * 32)
    unpack_kernel(const uint4 *codes, const uint8_t *scales, const uint8_t *corr, int tiles_k,
                  int n, int k, int tile0, size_t tiles, float ts, T *out, int pairs)
{
    using T2 = typename Pair<T>::type;
    constexpr bool WIDE = F == FMT_NV || F == FMT_NVPLUS || F == FMT_HIF4;
    __shared__ __align__(16) T sm[UNPACK_WARPS][16][SM_PITCH];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t tl = (size_t)blockIdx.x * UNPACK_WARPS + (size_t)warp;
    if (tl >= tiles)
        return; /* whole warps only: no block-wide barrier below */
    const size_t rt = tl / (size_t)tiles_k, kt = tl % (size_t)tiles_k;
    const size_t tile = ((size_t)tile0 + rt) * (size_t)tiles_k + kt;
    const uint4 wc = codes[tile * 32 + lane];
    uint2 sc = make_uint2(0, 0), cr = make_uint2(0, 0);
    if (WIDE)
        sc = reinterpret_cast<const uint2 *>(scales + tile * 64)[g];
    else
        sc.x = reinterpret_cast<const uint32_t *>(scales + tile * 32)[g];
    if (F == FMT_MXPLUS)
        cr.x = reinterpret_cast<const uint32_t *>(corr + tile * 32)[g];
    if (F == FMT_NVPLUS)
        cr = reinterpret_cast<const uint2 *>(corr + tile * 64)[g];
    /* the block maxima's low bits, as decode_tile ORs them into the operands */
    uint32_t z[2][4] = {}, z2[2][4] = {};
    tile_corr_slots<F>(cr, t, z, z2);
    const uint32_t words[4] = {wc.x, wc.y, wc.z, wc.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int pp = 0; pp < 4; pp++) {
            const int h = pp & 1, kh = pp >> 1;
            /* two codes as bf16 patterns worth code x 2^-126 (gemm_fused.cuh) */
            const uint32_t c = tile_code<F>(words, z, z2, j, pp);
            const int col = 16 * j + 2 * t + 8 * kh;
            const float s = scale_of<F>(sc, h, col);
            const float v0 = __uint_as_float(c << 16) * 0x1p126f * s;
            const float v1 = __uint_as_float(c & 0xFFFF0000u) * 0x1p126f * s;
            store2(&sm[warp][g + 8 * h][col], v0, v1, ts);
        }
    __syncwarp();
    const size_t row0 = rt * 16, col0 = kt * 64;
    const size_t rows_left = (size_t)n - ((size_t)tile0 * 16 + row0);
    const int nr = rows_left < 16 ? (int)rows_left : 16;
    const int nc = (size_t)k - col0 < 64 ? (int)((size_t)k - col0) : 64;
    for (int r = 0; r < nr; r++) {
        T *dst = out + (row0 + (size_t)r) * (size_t)k + col0;
        const int c = 2 * lane;
        if (pairs && c + 1 < nc)
            *reinterpret_cast<T2 *>(dst + c) = *reinterpret_cast<const T2 *>(&sm[warp][r][c]);
        else
            for (int i = c; i < c + 2 && i < nc; i++)
                dst[i] = sm[warp][r][i];
    }
}

} // namespace

cudaError_t launch_unpack(int fmt_kind, const void *codes, const void *scales, const void *corr,
                          int tiles_k, int n, int k, int tile0, int row_tiles, void *out,
                          bool f32, float ts, cudaStream_t s)
{
    const size_t tiles = (size_t)row_tiles * (size_t)tiles_k;
    const size_t blocks = (tiles + UNPACK_WARPS - 1) / UNPACK_WARPS;
    if (tiles == 0)
        return cudaSuccess;
    if (blocks > 0x7FFFFFFFu)
        return cudaErrorInvalidValue;
    /* pairs of values need every row's start aligned to a pair */
    const int pairs = (uintptr_t)out % (f32 ? 8 : 4) == 0 && k % 2 == 0;
    return with_kind(fmt_kind, [&](auto kind) {
        constexpr int F = decltype(kind)::value;
        const uint4 *c = static_cast<const uint4 *>(codes);
        const uint8_t *sc = static_cast<const uint8_t *>(scales);
        const uint8_t *cr = static_cast<const uint8_t *>(corr);
        if (f32)
            unpack_kernel<F, float><<<(unsigned)blocks, UNPACK_WARPS * 32, 0, s>>>(
                c, sc, cr, tiles_k, n, k, tile0, tiles, ts, static_cast<float *>(out), pairs);
        else
            unpack_kernel<F, __nv_bfloat16><<<(unsigned)blocks, UNPACK_WARPS * 32, 0, s>>>(
                c, sc, cr, tiles_k, n, k, tile0, tiles, ts, static_cast<__nv_bfloat16 *>(out),
                pairs);
        return cudaGetLastError();
    });
}

} // namespace bfpgemm

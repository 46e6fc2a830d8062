/* bfp_cuda_quant_kernel.cuh - the quantize kernel of every format at 8
 * elements per thread (any dtype and rounding; QU rows per thread on the
 * default rounding of large tensors) and NVFP4's 16x16-tile kernel. */
#ifndef BFP_CUDA_QUANT_KERNEL_CUH
#define BFP_CUDA_QUANT_KERNEL_CUH

#include "bfp_cuda_quant_mx.cuh"
#include "bfp_cuda_quant_mxplus.cuh"
#include "bfp_cuda_quant_nv.cuh"
#include "bfp_cuda_quant_hif4.cuh"
#include "bfp_cuda_quant_rows.cuh"

namespace bfpcuda {

/* Whether a format's quantizer prefetches: a CTA then strides over the
 * launch's row tiles (blockIdx.y, += gridDim.y) and loads the next tile's
 * rows before it encodes the current ones, so that a warp has loads in
 * flight while it computes: HiF4 and NVFP4(+); it cost the MX families
 * registers and time, so they keep one tile per CTA (docs/gpu.md). */
template <int FMT>
__host__ __device__ constexpr bool quant_prefetch()
{
    return fmt_of(FMT).fam == BFP_FAMILY_HIF4 || fmt_of(FMT).fam == BFP_FAMILY_NVFP4 ||
           fmt_of(FMT).fam == BFP_FAMILY_NVFP4_PLUS;
}

template <int FMT, int MODE, int NU>
__device__ __forceinline__ void quant_body(const QParams &P)
{
    constexpr FmtT F = fmt_of(FMT);
    constexpr int T = F.block / 8;
    size_t row0, g;
    layout_base(P.L, row0, g);
    const size_t tile_rows = (size_t)P.L.rt * NU;
    size_t blk = g / T;
    int sub = (int)(g % T);
    size_t col0 = blk * F.block + (size_t)sub * 8;
    int n = g < P.L.gpr && col0 < P.L.cols ? (int)min(P.L.cols - col0, (size_t)8) : 0;
    bool vec = P.vec_in && n == 8;
    /* the bf16x2 encoder, for the whole warp or not at all (the block
     * reductions are warp shuffles): every lane's group vector-loaded or empty */
    /* (not MX++: slower with it, docs/gpu.md) */
    constexpr bool MXF = (F.fam == BFP_FAMILY_MX || F.fam == BFP_FAMILY_MX_PLUS) &&
                         grid_of(F.elem).kind == GK_FLOAT && MODE == RM_RNE;
    bool bf = MXF && P.dt == BFP_DTYPE_BF16 && __all_sync(0xFFFFFFFFu, vec || n == 0);
    constexpr bool PF = quant_prefetch<FMT>();
    Raw next[PF ? NU : 1];
    if constexpr (PF)
        load_rows<NU>(P, vec, row0, col0, next);
    for (size_t ty = blockIdx.y; ty < P.L.tiles; ty += gridDim.y, row0 += gridDim.y * tile_rows) {
        Raw raw[NU];
        if constexpr (PF) {
#pragma unroll
            for (int u = 0; u < NU; u++)
                raw[u] = next[PF ? u : 0];
            if (ty + gridDim.y < P.L.tiles)
                load_rows<NU>(P, vec, row0 + gridDim.y * tile_rows, col0, next);
        } else {
            load_rows<NU>(P, vec, row0, col0, raw);
        }
#pragma unroll
        for (int u = 0; u < NU; u++) {
            size_t row = row0 + u;
            bool valid = g < P.L.gpr && row < P.L.rows; /* n may be 0: padding lane of a block */
            int nu = valid ? n : 0;
            uint32_t x[8];
            if constexpr (MXF) {
                if (bf) {
                    if constexpr (F.fam == BFP_FAMILY_MX)
                        mx_body<FMT, MODE, true>(P, row, valid, blk, sub, col0, nu, x, raw[u].a);
                    else
                        mxplus_body<FMT, MODE, true>(P, row, valid, blk, sub, col0, nu, x,
                                                     raw[u].a);
                    continue;
                }
            }
            if (vec && valid)
                unpack_vec(P.dt, raw[u], x);
            else
                load8(P.src, P.dt, row * P.L.cols + col0, nu, false, x);
            if (F.fam == BFP_FAMILY_MX)
                mx_body<FMT, MODE, false>(P, row, valid, blk, sub, col0, nu, x, raw[u].a);
            else if (F.fam == BFP_FAMILY_MX_PLUS || F.fam == BFP_FAMILY_MX_PP)
                mxplus_body<FMT, MODE, false>(P, row, valid, blk, sub, col0, nu, x, raw[u].a);
            else if (F.fam == BFP_FAMILY_HIF4)
                hif4_body<FMT, MODE>(P, row, valid, blk, sub, col0, nu, x);
            else
                nv_body<FMT, MODE>(P, row, valid, blk, sub, col0, nu, x);
        }
    }
}

template <int FMT>
__host__ __device__ constexpr int default_mode()
{
    return fmt_of(FMT).fam == BFP_FAMILY_HIF4 ? RM_AWAY : RM_RNE;
}

/* One kernel per input dtype: registers are allocated for the worst path of
 * a kernel, and f32's two vectors per group would cost bf16 occupancy. */
template <int FMT, int DT>
__global__ void __launch_bounds__(256) quant_kernel(const QParams P0)
{
    QParams P = P0;
    P.dt = DT; /* a constant from here on */
    if (P.L.qu == QU) { /* the host sets qu = QU exactly for the default mode */
        quant_body<FMT, default_mode<FMT>(), QU>(P);
        return;
    }
    switch (P.mode) {
    case RM_AWAY: quant_body<FMT, RM_AWAY, 1>(P); break;
    case RM_RZ: quant_body<FMT, RM_RZ, 1>(P); break;
    case RM_SR: quant_body<FMT, RM_SR, 1>(P); break;
    default: quant_body<FMT, RM_RNE, 1>(P); break;
    }
}

/* NVFP4 with 16x16 tiles: a warp is one tile, lane = 2 * row + half. */
template <int FMT, int MODE>
__device__ __forceinline__ void nv2d_body(const QParams &P)
{
    unsigned lane = threadIdx.x & 31u;
    size_t tile_col = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    size_t row = P.L.row0 + (size_t)blockIdx.y * 16 + (lane >> 1);
    int h = (int)(lane & 1u);
    size_t col0 = tile_col * 16 + (size_t)h * 8;
    bool valid = row < P.L.rows && tile_col < P.G;
    int n = valid && col0 < P.L.cols ? (int)min(P.L.cols - col0, (size_t)8) : 0;
    uint32_t x[8], tb[8];
    load8(P.src, P.dt, row * P.L.cols + col0, n, P.vec_in, x);
    uint32_t m = nv_scale8(x, nv_senc(P), tb);
    uint32_t tile_max = group_max<32>(m);
    uint32_t rb_max = group_max<2>(m);
    uint32_t bm = group_min<2>(nv_bm_cand(tb, rb_max, h));
    uint32_t packed;
    uint32_t sc, meta;
    nv_encode<FMT, MODE>(P, row, col0, h, tb, tile_max, bm, packed, sc, meta);
    if (valid) {
        put_codes<4>(P, row, col0, n, packed);
        if (h == 0) {
            P.scales[scale_index(P, row, tile_col)] = (unsigned char)sc;
            if (P.meta)
                P.meta[row * P.G + tile_col] = (unsigned char)meta;
            if (sc == 0x7F && P.nonfinite)
                atomicAdd(P.nonfinite, 1ull);
        }
    }
}

template <int FMT>
__global__ void __launch_bounds__(256) nv2d_kernel(const QParams P)
{
    switch (P.mode) {
    case RM_AWAY: nv2d_body<FMT, RM_AWAY>(P); break;
    case RM_RZ: nv2d_body<FMT, RM_RZ>(P); break;
    case RM_SR: nv2d_body<FMT, RM_SR>(P); break;
    default: nv2d_body<FMT, RM_RNE>(P); break;
    }
}

} // namespace bfpcuda

#endif /* BFP_CUDA_QUANT_KERNEL_CUH */

/* gemm_qx.cu - quantized x on a packed weight, the bf16-x route
 * (bfp_cuda_matmul_qx): x quantized by bfp_cuda_quantize, decoded to bf16
 * by bfp_cuda_dequantize (exact for formats without a tensor scale,
 * bfp_matmul_qx_supported), then bfp_cuda_matmul_ex on the packed weight.
 * Three calls on one stream, no kernel of its own.
 *
 * Workspace: [the matmul's part][x bf16 [m][k]][x codes][scales][meta][ts].
 * The matmul's part is what this m needs, and at least the front that the
 * small-m kernels keep zero between calls (weight_zero_front): every other
 * path zeroes first what it needs zero, so x's sections, rewritten by every call,
 * may lie anywhere past that front, whatever m the calls on one workspace
 * take. */
#include "bfp.h"
#include "gemm_internal.h"

#include <stdint.h>

namespace {

size_t al256(size_t v) { return (v + 255) & ~(size_t)255; }

struct QxLayout {
    size_t mm_bytes, xb_off, codes_off, scales_off, meta_off, ts_off, total;
    bfp_plane_sizes sz;
};

/* false for an x format without the route, an invalid tuning or a size
 * that overflows */
bool qx_layout(const bfp_cuda_weight *w, bfp_format x_fmt, size_t m, bfp_matmul_path path,
               const bfp_matmul_tuning *tuning, QxLayout *L)
{
    if (!w || m == 0 || !bfp_matmul_qx_supported(x_fmt) ||
        bfp_matmul_tuning_check(tuning) != BFP_OK)
        return false;
    const size_t k = bfpgemm::weight_k(w);
    if (m > SIZE_MAX / 2 / k || bfp_plane_sizes_for(x_fmt, m, k, &L->sz) != BFP_OK)
        return false;
    const size_t own = bfp_cuda_matmul_workspace_size_ex(w, m, path, tuning);
    const size_t front = bfpgemm::weight_zero_front(w);
    L->mm_bytes = al256(own > front ? own : front);
    L->xb_off = L->mm_bytes;
    L->codes_off = L->xb_off + al256(m * k * 2);
    L->scales_off = L->codes_off + al256(L->sz.codes);
    L->meta_off = L->scales_off + al256(L->sz.scales);
    L->ts_off = L->meta_off + al256(L->sz.meta);
    L->total = L->ts_off + 256;
    return true;
}

} // namespace

size_t bfp_cuda_matmul_qx_workspace_size(const bfp_cuda_weight *w, bfp_format x_fmt, size_t m,
                                         bfp_matmul_path path, const bfp_matmul_tuning *tuning)
{
    QxLayout L;
    return qx_layout(w, x_fmt, m, path, tuning, &L) ? L.total : 0;
}

bfp_status bfp_cuda_matmul_qx(const bfp_cuda_weight *w, bfp_format x_fmt, const void *d_x_bf16,
                              size_t m, const void *d_bias, void *d_y, void *d_workspace,
                              size_t workspace_bytes, bfp_matmul_path path,
                              const bfp_matmul_tuning *tuning, void *stream)
{
    if (!bfp_format_get(x_fmt))
        return BFP_ERR_FORMAT;
    if (!bfp_matmul_qx_supported(x_fmt))
        return BFP_ERR_UNSUPPORTED;
    if (!w || !d_x_bf16 || !d_y || !d_workspace || (uintptr_t)d_workspace % 256 != 0)
        return BFP_ERR_ARG;
    QxLayout L;
    if (!qx_layout(w, x_fmt, m, path, tuning, &L))
        return m == 0 ? BFP_ERR_SHAPE : BFP_ERR_ARG;
    if (workspace_bytes < L.total)
        return BFP_ERR_ARG;
    const size_t k = bfpgemm::weight_k(w);
    uint8_t *ws = static_cast<uint8_t *>(d_workspace);
    const bfp_planes xp = {ws + L.codes_off, ws + L.scales_off, L.sz.meta ? ws + L.meta_off : NULL,
                           reinterpret_cast<float *>(ws + L.ts_off)};
    bfp_status st = bfp_cuda_quantize(x_fmt, BFP_DTYPE_BF16, d_x_bf16, m, k, NULL, 0, &xp, NULL,
                                      stream);
    if (st != BFP_OK)
        return st;
    const bfp_const_planes xc = {xp.codes, xp.scales, xp.meta, xp.tensor_scale};
    st = bfp_cuda_dequantize(x_fmt, &xc, m, k, BFP_DTYPE_BF16, ws + L.xb_off, stream);
    if (st != BFP_OK)
        return st;
    return bfp_cuda_matmul_ex(w, ws + L.xb_off, m, d_bias, d_y, d_workspace, L.mm_bytes, path,
                              tuning, stream);
}

/* public_api.c - the public entry points that are thin forms of the CPU
 * layer's: the typed quantize / dequantize calls (dispatch.c does the work)
 * and the matmul prepack, whose bands of tiles the CPU layer's threads
 * share (core's bfp_matmul_prepack_par starts no thread). */
#include "cpu_internal.h"

bfp_status bfp_quantize_f32(bfp_format fmt, const float *src, size_t rows, size_t cols,
                            const bfp_options *opts, const bfp_planes *out,
                            bfp_stats *stats)
{
    return bfp_quantize(fmt, BFP_DTYPE_F32, src, rows, cols, opts, out, stats);
}

bfp_status bfp_quantize_bf16(bfp_format fmt, const uint16_t *src, size_t rows,
                             size_t cols, const bfp_options *opts,
                             const bfp_planes *out, bfp_stats *stats)
{
    return bfp_quantize(fmt, BFP_DTYPE_BF16, src, rows, cols, opts, out, stats);
}

bfp_status bfp_quantize_f16(bfp_format fmt, const uint16_t *src, size_t rows,
                            size_t cols, const bfp_options *opts, const bfp_planes *out,
                            bfp_stats *stats)
{
    return bfp_quantize(fmt, BFP_DTYPE_F16, src, rows, cols, opts, out, stats);
}

bfp_status bfp_dequantize_to_f32(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                                 size_t cols, float *dst)
{
    return bfp_dequantize(fmt, in, rows, cols, BFP_DTYPE_F32, dst);
}

bfp_status bfp_dequantize_to_bf16(bfp_format fmt, const bfp_const_planes *in,
                                  size_t rows, size_t cols, uint16_t *dst)
{
    return bfp_dequantize(fmt, in, rows, cols, BFP_DTYPE_BF16, dst);
}

/* bfp_set_threads() caps the count, as for bfp_dequantize */
static const bfp_parallel cpu_par = {bfp_cpu_threads_for, bfp_cpu_parallel};

bfp_status bfp_matmul_prepack(bfp_format fmt, const bfp_const_planes *w,
                              size_t n, size_t k, uint8_t *codes,
                              uint8_t *scales, uint8_t *corr)
{
    return bfp_matmul_prepack_par(fmt, w, n, k, codes, scales, corr, &cpu_par);
}

bfp_status bfp_cuda_weight_pack_host(bfp_format fmt, const bfp_const_planes *w, size_t n,
                                     size_t k, void *buf, size_t bytes)
{
    return bfp_wimg_pack(fmt, w, n, k, buf, bytes, &cpu_par);
}

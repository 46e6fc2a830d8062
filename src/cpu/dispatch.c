/* dispatch.c - public quantize/dequantize entry points. For now every call
 * goes to the reference; SIMD kernels per ISA override it here. */
#include "bfp.h"

bfp_status bfp_quantize(bfp_format fmt, bfp_dtype dtype, const void *src, size_t rows,
                        size_t cols, const bfp_options *opts, const bfp_planes *out,
                        bfp_stats *stats)
{
    return bfp_quantize_ref(fmt, dtype, src, rows, cols, opts, out, stats);
}

bfp_status bfp_dequantize(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                          size_t cols, bfp_dtype dtype, void *dst)
{
    return bfp_dequantize_ref(fmt, in, rows, cols, dtype, dst);
}

const char *bfp_isa(void)
{
    return "generic";
}

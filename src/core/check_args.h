/* check_args.h - the argument checks every quantize / dequantize path
 * applies (src/core/quantize.c): the reference, the CPU kernels and the CUDA
 * host code (C++, hence the linkage block) include this one header. */
#ifndef BFP_CHECK_ARGS_H
#define BFP_CHECK_ARGS_H

#include "bfp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check options against the format (bfp_check_options) and resolve DEFAULT
 * rounding; the one rule every path (reference, CPU kernels, CUDA) applies. */
bfp_status bfp_resolve_options(const bfp_format_info *f, const bfp_options *in,
                               bfp_options *out);

/* The argument checks of every quantize / dequantize entry point (reference,
 * CPU kernels, CUDA), in one order so all return the same status: format,
 * shape, NULL pointers and dtype, byte-size overflow, options. On BFP_OK,
 * *sz holds the plane sizes (and *resolved the options). */
bfp_status bfp_check_quantize_args(bfp_format fmt, bfp_dtype dtype, const void *src,
                                   size_t rows, size_t cols, const bfp_options *opts,
                                   const bfp_planes *out, bfp_plane_sizes *sz,
                                   bfp_options *resolved);
bfp_status bfp_check_dequantize_args(bfp_format fmt, const bfp_const_planes *in,
                                     size_t rows, size_t cols, bfp_dtype dtype,
                                     const void *dst, bfp_plane_sizes *sz);

#ifdef __cplusplus
}
#endif

#endif /* BFP_CHECK_ARGS_H */

/* cuda_stub.c - the GPU API in builds without CUDA: nothing is available. */
#include "bfp.h"

int bfp_cuda_available(void)
{
    return 0;
}

bfp_status bfp_cuda_quantize(bfp_format fmt, bfp_dtype dtype, const void *d_src,
                             size_t rows, size_t cols, const bfp_options *opts,
                             int swizzled_scales, const bfp_planes *d_out,
                             unsigned long long *d_nonfinite_blocks, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_dequantize(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                               size_t cols, bfp_dtype dtype, void *d_dst, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

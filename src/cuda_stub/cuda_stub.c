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

bfp_status bfp_cuda_stage_create(bfp_cuda_stage **out)
{
    if (out)
        *out = NULL;
    return BFP_ERR_UNSUPPORTED;
}

void bfp_cuda_stage_free(bfp_cuda_stage *s) {}

bfp_status bfp_cuda_quantize_host(bfp_cuda_stage *s, bfp_format fmt, bfp_dtype dtype,
                                  const void *src, size_t rows, size_t cols,
                                  const bfp_options *opts, const bfp_planes *out,
                                  size_t *nonfinite_blocks)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_dequantize(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                               size_t cols, bfp_dtype dtype, void *d_dst, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_dequantize_tuned(bfp_format fmt, const bfp_const_planes *in,
                                     size_t rows, size_t cols, bfp_dtype dtype, void *d_dst,
                                     void *stream, const bfp_cuda_tuning *tuning)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_weight_upload(bfp_format fmt, const bfp_const_planes *w, size_t n,
                                  size_t k, bfp_cuda_weight **out)
{
    if (out)
        *out = NULL;
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_weight_pack(bfp_format fmt, const bfp_const_planes *w, size_t n,
                                size_t k, void *d_buf, size_t bytes, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_weight_view(bfp_format fmt, size_t n, size_t k, const void *d_buf,
                                size_t bytes, bfp_cuda_weight **out)
{
    if (out)
        *out = NULL;
    return BFP_ERR_UNSUPPORTED;
}

void bfp_cuda_weight_free(bfp_cuda_weight *w) {}

size_t bfp_cuda_matmul_workspace_size(const bfp_cuda_weight *w, size_t m,
                                      bfp_matmul_path path)
{
    return 0;
}

size_t bfp_cuda_matmul_workspace_size_ex(const bfp_cuda_weight *w, size_t m,
                                         bfp_matmul_path path, const bfp_matmul_tuning *tuning)
{
    return 0;
}

size_t bfp_cuda_matmul_workspace_size_max(const bfp_cuda_weight *w)
{
    return 0;
}

bfp_status bfp_cuda_weight_unpack(const bfp_cuda_weight *w, bfp_dtype dtype, void *d_out,
                                  void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_matmul_path bfp_cuda_matmul_auto_path(const bfp_cuda_weight *w, size_t m)
{
    return BFP_MATMUL_DEQUANT_CUBLAS;
}

bfp_matmul_path bfp_cuda_matmul_auto_path_ex(const bfp_cuda_weight *w, size_t m,
                                             const bfp_matmul_tuning *tuning)
{
    return BFP_MATMUL_DEQUANT_CUBLAS;
}

bfp_status bfp_cuda_matmul(const bfp_cuda_weight *w, const void *d_x, size_t m,
                           const void *d_bias, void *d_y, void *d_workspace,
                           size_t workspace_bytes, bfp_matmul_path path, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_matmul_ex(const bfp_cuda_weight *w, const void *d_x, size_t m,
                              const void *d_bias, void *d_y, void *d_workspace,
                              size_t workspace_bytes, bfp_matmul_path path,
                              const bfp_matmul_tuning *tuning, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

int bfp_cuda_matmul_xq_supported(bfp_format w_fmt, bfp_format x_fmt)
{
    return 0;
}

size_t bfp_cuda_matmul_xq_workspace_size(const bfp_cuda_planar_weight *w, bfp_format x_fmt,
                                         size_t m, const bfp_matmul_tuning *tuning)
{
    return 0;
}

bfp_status bfp_cuda_matmul_xq(const bfp_cuda_planar_weight *w, bfp_format x_fmt,
                              const void *d_x_bf16, size_t m, const void *d_bias,
                              void *d_y, void *d_workspace, size_t workspace_bytes,
                              const bfp_matmul_tuning *tuning,
                              void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_matmul_xq_planes(const bfp_cuda_planar_weight *w, bfp_format x_fmt,
                                     const bfp_const_planes *d_x, size_t m, const void *d_bias,
                                     void *d_y, void *d_workspace, size_t workspace_bytes,
                                     const bfp_matmul_tuning *tuning, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

size_t bfp_cuda_matmul_qx_workspace_size(const bfp_cuda_weight *w, bfp_format x_fmt, size_t m,
                                         bfp_matmul_path path, const bfp_matmul_tuning *tuning)
{
    return 0;
}

bfp_status bfp_cuda_matmul_qx(const bfp_cuda_weight *w, bfp_format x_fmt, const void *d_x_bf16,
                              size_t m, const void *d_bias, void *d_y, void *d_workspace,
                              size_t workspace_bytes, bfp_matmul_path path,
                              const bfp_matmul_tuning *tuning, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

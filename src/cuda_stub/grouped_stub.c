/* grouped_stub.c - the grouped matmul's GPU API in builds without CUDA. */
#include "bfp_grouped.h"

bfp_status bfp_cuda_grouped_weight_pack(bfp_format fmt, const bfp_const_planes *w,
                                        size_t e_count, size_t n, size_t k, void *d_buf,
                                        size_t bytes, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_cuda_grouped_weight_view(bfp_format fmt, size_t e_count, size_t n, size_t k,
                                        const void *d_buf, size_t bytes,
                                        bfp_cuda_grouped_weight **out)
{
    if (out)
        *out = NULL;
    return BFP_ERR_UNSUPPORTED;
}

void bfp_cuda_grouped_weight_free(bfp_cuda_grouped_weight *w) {}

size_t bfp_cuda_grouped_matmul_workspace_size(const bfp_cuda_grouped_weight *w, size_t t_rows,
                                              const bfp_matmul_tuning *tuning)
{
    return 0;
}

bfp_status bfp_cuda_grouped_matmul(const bfp_cuda_grouped_weight *w, const void *d_x,
                                   size_t t_rows, const int32_t *d_offsets, const void *d_bias,
                                   void *d_y, void *d_workspace, size_t workspace_bytes,
                                   const bfp_matmul_tuning *tuning, void *stream)
{
    return BFP_ERR_UNSUPPORTED;
}

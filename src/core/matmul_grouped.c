/* matmul_grouped.c - the grouped (MoE) matmul's reference, its routing
 * check and the grouped buffer's size (bfp_grouped.h). Pure computation. */
#include "bfp_grouped.h"
#include "matmul_image.h"

#include <stdint.h>
#include <stdlib.h>

bfp_status bfp_grouped_offsets_check(const int32_t *offsets, size_t e_count, size_t t_rows)
{
    if (e_count == 0 || e_count > BFP_GROUPED_MAX_EXPERTS || t_rows > INT32_MAX)
        return BFP_ERR_SHAPE;
    if (!offsets || offsets[0] != 0 || (size_t)offsets[e_count] != t_rows)
        return BFP_ERR_ARG;
    for (size_t e = 0; e < e_count; e++)
        if (offsets[e + 1] < offsets[e])
            return BFP_ERR_ARG;
    return BFP_OK;
}

bfp_status bfp_grouped_matmul_ref(bfp_format fmt, const bfp_const_planes *w, size_t e_count,
                                  size_t n, size_t k, const uint16_t *x_bf16, size_t t_rows,
                                  const int32_t *offsets, const uint16_t *bias_bf16, float *y)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    if (!f)
        return BFP_ERR_FORMAT;
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, n, k, &sz);
    if (st != BFP_OK)
        return st;
    st = bfp_grouped_offsets_check(offsets, e_count, t_rows);
    if (st != BFP_OK)
        return st;
    if (!w || (t_rows && (!x_bf16 || !y)))
        return BFP_ERR_ARG;
    if (t_rows > SIZE_MAX / k || t_rows > SIZE_MAX / n)
        return BFP_ERR_SHAPE;
    for (size_t e = 0; e < e_count; e++) {
        size_t r0 = (size_t)offsets[e], m = (size_t)offsets[e + 1] - r0;
        const bfp_const_planes *we = &w[e];
        /* every expert's planes are checked, used or not */
        if (!we->codes || !we->scales || (f->meta_bytes && !we->meta) ||
            (f->has_tensor_scale && !we->tensor_scale))
            return BFP_ERR_ARG;
        if (m == 0)
            continue;
        st = bfp_matmul_ref(fmt, we, n, k, x_bf16 + r0 * k, m,
                            bias_bf16 ? bias_bf16 + e * n : NULL, y + r0 * n);
        if (st != BFP_OK)
            return st;
    }
    return BFP_OK;
}

bfp_status bfp_cuda_grouped_weight_packed_size(bfp_format fmt, size_t e_count, size_t n,
                                               size_t k, size_t *bytes)
{
    size_t one;
    bfp_status st = bfp_cuda_weight_packed_size(fmt, n, k, &one);
    if (st == BFP_OK && !bytes)
        return BFP_ERR_ARG;
    if (st != BFP_OK)
        return st;
    if (e_count == 0 || e_count > BFP_GROUPED_MAX_EXPERTS || one > SIZE_MAX / e_count)
        return BFP_ERR_SHAPE;
    *bytes = one * e_count;
    return BFP_OK;
}

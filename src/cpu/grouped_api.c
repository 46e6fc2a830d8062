/* grouped_api.c - the grouped buffer's host image: each expert's packed
 * weight (bfp_cuda_weight_pack_host, the prepack on this layer's threads)
 * at e times one expert's bytes. */
#include "bfp_grouped.h"

#include <stdint.h>

bfp_status bfp_cuda_grouped_weight_pack_host(bfp_format fmt, const bfp_const_planes *w,
                                             size_t e_count, size_t n, size_t k, void *buf,
                                             size_t bytes)
{
    size_t total, one;
    bfp_status st = bfp_cuda_grouped_weight_packed_size(fmt, e_count, n, k, &total);
    if (st != BFP_OK)
        return st;
    if (!w || !buf || bytes < total)
        return BFP_ERR_ARG;
    one = total / e_count;
    for (size_t e = 0; e < e_count; e++) {
        st = bfp_cuda_weight_pack_host(fmt, &w[e], n, k, (uint8_t *)buf + e * one, one);
        if (st != BFP_OK)
            return st;
    }
    return BFP_OK;
}

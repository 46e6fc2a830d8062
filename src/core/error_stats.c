/* error_stats.c - error statistics of a quantized tensor, with the count of
 * saturated values.
 *
 * A value saturates when its magnitude exceeds the largest one its position
 * can hold: then every rounding mode clamps it to that largest value. That
 * largest value is what the largest element code decodes to in the block's
 * context (scale, tensor scale, MX+ block-max codec, MX++ exponent, HiF4
 * flags), so one decode of the planes with every code replaced by its
 * codec's largest positive code gives it for every position at once, through
 * the reference decoder of each family: no per-family rule here. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* Index of the block-max element of block b (MX+/MX++: meta bits 4:0;
 * NVFP4+: the low nibble), or SIZE_MAX when the family has none. */
static size_t bm_index(const bfp_format_impl *impl, const bfp_const_planes *q,
                       const bfp_plane_sizes *sz, size_t r, size_t b)
{
    if (!impl->bm_elem || !q->meta)
        return SIZE_MAX;
    uint8_t meta = q->meta[r * sz->blocks_per_row + b];
    return impl->info.family == BFP_FAMILY_NVFP4_PLUS ? (size_t)(meta & 0x0F)
                                                      : (size_t)(meta & 0x1F);
}

/* Row r of q's codes with every code the largest positive one of its codec. */
static void fill_max_codes(const bfp_format_impl *impl, const bfp_const_planes *q,
                           const bfp_plane_sizes *sz, size_t r, size_t cols, uint8_t *row)
{
    const size_t block = (size_t)impl->info.block;
    const int w = impl->elem->bits;
    const unsigned top = bfp_elem_make_code(impl->elem, 0, (unsigned)impl->elem->max_mag);
    for (size_t b = 0; b < sz->blocks_per_row; b++) {
        size_t n = bfp_block_len(cols, block, b), bm = bm_index(impl, q, sz, r, b);
        for (size_t i = 0; i < n; i++)
            bfp_put_code(row, b * block + i, w,
                         i == bm ? bfp_elem_make_code(impl->bm_elem, 0,
                                                      (unsigned)impl->bm_elem->max_mag)
                                 : top);
    }
}

bfp_status bfp_error_stats_quantized(bfp_format fmt, const bfp_const_planes *q, size_t rows,
                                     size_t cols, const float *x, const float *y,
                                     bfp_error_stats *out)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    if (!impl)
        return BFP_ERR_FORMAT;
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, rows, cols, &sz);
    if (st != BFP_OK)
        return st;
    if (!q || !q->codes || !q->scales || (impl->info.meta_bytes && !q->meta) ||
        (impl->info.has_tensor_scale && !q->tensor_scale) || !x || !y || !out)
        return BFP_ERR_ARG;
    if (rows > SIZE_MAX / cols)
        return BFP_ERR_SHAPE;
    uint8_t *row_codes = calloc(sz.code_row_bytes, 1);
    float *ymax = malloc(cols * sizeof *ymax);
    if (!row_codes || !ymax) {
        free(row_codes);
        free(ymax);
        return BFP_ERR_NOMEM;
    }
    bfp_error_stats s;
    bfp_error_stats_f32(x, y, rows * cols, &s);
    for (size_t r = 0; r < rows; r++) {
        fill_max_codes(impl, q, &sz, r, cols, row_codes);
        /* row r of q as row 0 of a one-row tensor, with the new codes */
        size_t first = r * sz.blocks_per_row;
        bfp_const_planes m = *q;
        m.codes = row_codes;
        m.scales = q->scales + first * (size_t)impl->info.scale_bytes;
        m.meta = q->meta ? q->meta + first * (size_t)impl->info.meta_bytes : NULL;
        impl->dequantize_row(impl, &m, &sz, 0, cols, ymax);
        const float *xr = x + r * cols, *yr = y + r * cols;
        for (size_t c = 0; c < cols; c++)
            /* ymax > 0: flushed and zero-scale blocks underflow, not clip;
             * NaN (a NaN block) compares false */
            s.saturated += isfinite(xr[c]) && isfinite(yr[c]) && ymax[c] > 0 &&
                           fabsf(xr[c]) > ymax[c];
    }
    free(row_codes);
    free(ymax);
    *out = s;
    return BFP_OK;
}

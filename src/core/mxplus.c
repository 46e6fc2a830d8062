/* mxplus.c - MX+ and MX++ reference (SPEC section 5).
 * The block max (BM) keeps its sign and turns its exponent bits into extra
 * mantissa (its exponent is always emax); a meta byte holds its index
 * (bits 4:0) and, for MX++, the exponent drop of the other elements (7:5). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

#define META_INDEX(m) ((m) & 0x1Fu)
#define META_DELTA(m) ((unsigned)(m) >> 5)

/* Quantize one finite block of n elements at column col0 of row r. */
static void mxplus_block(const bfp_qjob *j, const bfp_format_impl *impl,
                         const float *xb, size_t n, size_t r, size_t col0,
                         uint8_t *codes, uint8_t *scale, uint8_t *meta)
{
    const bfp_elem_desc *e = impl->elem;
    size_t bm = 0;
    for (size_t i = 1; i < n; i++) /* ties go to the lowest index */
        if (fabsf(xb[i]) > fabsf(xb[bm]))
            bm = i;
    float amax = fabsf(xb[bm]);
    if (amax == 0 || bfp_floor_log2_f32(amax) - e->emax <= -127) {
        *scale = 0x00; /* flushed block: codes and meta stay 0 */
        *meta = 0;
        j->st->flushed_blocks++;
        return;
    }
    int se = bfp_floor_log2_f32(amax) - e->emax;
    int nbm_exp = se;
    if (impl->info.family == BFP_FAMILY_MX_PP) {
        float max2 = 0;
        for (size_t i = 0; i < n; i++)
            if (i != bm)
                max2 = fmaxf(max2, fabsf(xb[i]));
        if (max2 > 0) {
            int ev = bfp_floor_log2_f32(max2) - e->emax + 1;
            nbm_exp = ev < se - 7 ? se - 7 : ev > se ? se : ev;
        }
    }
    *scale = (uint8_t)(se + 127);
    *meta = (uint8_t)(bm | (unsigned)(se - nbm_exp) << 5);
    double s = ldexp(1.0, se), s_nbm = ldexp(1.0, nbm_exp);
    for (size_t i = 0; i < n; i++) {
        const bfp_elem_desc *codec = i == bm ? impl->bm_elem : e;
        uint32_t rb = bfp_sr_bits(j->o.seed, (uint64_t)(r * j->cols + col0 + i));
        unsigned mag = bfp_grid_round(codec, fabs((double)xb[i]), i == bm ? s : s_nbm,
                                      j->o.rounding, rb);
        bfp_put_code(codes, col0 + i, e->bits,
                     bfp_elem_make_code(codec, bfp_f32_sign(xb[i]), mag));
    }
}

bfp_status bfp_mxplus_quantize_ref(const bfp_qjob *j)
{
    const bfp_format_impl *impl = bfp_impl_get(j->f->id);
    const size_t block = (size_t)j->f->block, cols = j->cols;
    float *x = malloc(cols * sizeof *x);
    if (!x)
        return BFP_ERR_NOMEM;
    for (size_t r = 0; r < j->rows; r++) {
        bfp_load_row(j->dtype, j->src, cols, r, x);
        uint8_t *codes = j->out->codes + r * j->sz.code_row_bytes;
        size_t first = r * j->sz.blocks_per_row;
        for (size_t b = 0; b < j->sz.blocks_per_row; b++) {
            size_t n = bfp_block_len(cols, block, b);
            int finite = 1;
            for (size_t i = 0; i < n; i++)
                finite &= bfp_f32_is_finite(x[b * block + i]);
            if (!finite) {
                j->out->scales[first + b] = 0xFF;
                j->out->meta[first + b] = 0;
                j->st->nonfinite_blocks++;
                continue;
            }
            mxplus_block(j, impl, x + b * block, n, r, b * block, codes,
                         j->out->scales + first + b, j->out->meta + first + b);
        }
    }
    free(x);
    return BFP_OK;
}

int bfp_mxplus_block_is_bad(const bfp_format_impl *impl, const bfp_const_planes *in,
                            const bfp_plane_sizes *sz, size_t r, size_t b, size_t cols)
{
    const size_t block = (size_t)impl->info.block, n = bfp_block_len(cols, block, b);
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    uint8_t scale = in->scales[r * sz->blocks_per_row + b];
    uint8_t meta = in->meta[r * sz->blocks_per_row + b];
    int empty = scale == 0x00 || scale == 0xFF; /* flushed or NaN block */
    if (empty && meta != 0)
        return 1;
    if (META_INDEX(meta) >= n)
        return 1;
    if (impl->info.family == BFP_FAMILY_MX_PLUS && META_DELTA(meta) != 0)
        return 1;
    if (!empty && !bfp_elem_has_special(impl->elem))
        return 0; /* no code can be bad */
    for (size_t i = 0; i < n; i++) {
        unsigned code = bfp_get_code(codes, b * block + i, impl->elem->bits);
        if (empty && code != 0)
            return 1;
        if (i != META_INDEX(meta) && bfp_elem_code_is_special(impl->elem, code))
            return 1;
    }
    return 0;
}

void bfp_mxplus_dequantize_row_ref(const bfp_format_impl *impl,
                                   const bfp_const_planes *in,
                                   const bfp_plane_sizes *sz, size_t r,
                                   size_t cols, float *out)
{
    const size_t block = (size_t)impl->info.block;
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    for (size_t b = 0; b < sz->blocks_per_row; b++) {
        size_t n = bfp_block_len(cols, block, b);
        uint8_t scale = in->scales[r * sz->blocks_per_row + b];
        uint8_t meta = in->meta[r * sz->blocks_per_row + b];
        float *ob = out + b * block;
        if (scale == 0xFF || bfp_mxplus_block_is_bad(impl, in, sz, r, b, cols)) {
            for (size_t i = 0; i < n; i++)
                ob[i] = bfp_f32_nan();
            continue;
        }
        if (scale == 0x00) { /* flushed */
            for (size_t i = 0; i < n; i++)
                ob[i] = 0.0f;
            continue;
        }
        int se = (int)scale - 127;
        for (size_t i = 0; i < n; i++) {
            unsigned code = bfp_get_code(codes, b * block + i, impl->elem->bits);
            double v = i == META_INDEX(meta)
                           ? ldexp(bfp_elem_code_value(impl->bm_elem, code), se)
                           : ldexp(bfp_elem_code_value(impl->elem, code),
                                   se - (int)META_DELTA(meta));
            ob[i] = (float)v;
        }
    }
}

/* mx.c - OCP MX reference (SPEC section 2): MXFP4/6/8, MXINT8, MXINT4.
 * Block 32, one E8M0 shared exponent, elements x / 2^shared_exp. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* shared_exp of a finite block with magnitude max amax (SPEC 2, scale modes
 * after torchao), clamped to the E8M0 range [-127, 127]. */
static int mx_shared_exp(const bfp_elem_desc *e, float amax, bfp_scale_mode mode)
{
    if (amax == 0)
        return -127;
    int fl = bfp_floor_log2_f32(amax), se;
    switch (mode) {
    case BFP_SCALE_CEIL:
        se = (ldexp(1.0, fl) == amax ? fl : fl + 1) - e->emax;
        break;
    case BFP_SCALE_EVEN: {
        /* round amax half-up to the element's mantissa width, then floor */
        double q = ldexp(1.0, fl - e->mbits);
        double rounded = floor((double)amax / q + 0.5) * q;
        se = bfp_floor_log2(rounded) - e->emax;
        break;
    }
    case BFP_SCALE_RCEIL: {
        /* smallest k with amax <= max_elem * 2^k, i.e. ceil(log2(amax/max)) */
        double max_elem = bfp_grid_value(e, (unsigned)e->max_mag);
        se = fl - bfp_floor_log2(max_elem) - 1;
        while (max_elem * ldexp(1.0, se) < amax)
            se++;
        break;
    }
    default:
        se = fl - e->emax;
    }
    return se < -127 ? -127 : se > 127 ? 127 : se;
}

bfp_status bfp_mx_quantize_ref(const bfp_qjob *j)
{
    const bfp_format_impl *impl = bfp_impl_get(j->f->id);
    const bfp_elem_desc *e = impl->elem;
    const size_t block = (size_t)j->f->block, cols = j->cols;
    float *x = malloc(cols * sizeof *x);
    if (!x)
        return BFP_ERR_NOMEM;
    for (size_t r = 0; r < j->rows; r++) {
        bfp_load_row(j->dtype, j->src, cols, r, x);
        uint8_t *codes = j->out->codes + r * j->sz.code_row_bytes;
        uint8_t *scales = j->out->scales + r * j->sz.blocks_per_row;
        for (size_t b = 0; b < j->sz.blocks_per_row; b++) {
            const float *xb = x + b * block;
            size_t n = bfp_block_len(cols, block, b);
            float amax = 0;
            int finite = 1;
            for (size_t i = 0; i < n; i++) {
                finite &= bfp_f32_is_finite(xb[i]);
                amax = fmaxf(amax, fabsf(xb[i]));
            }
            if (!finite) { /* NaN scale, zero codes (the plane is pre-zeroed) */
                scales[b] = 0xFF;
                j->st->nonfinite_blocks++;
                continue;
            }
            int se = mx_shared_exp(e, amax, j->o.scale_mode);
            scales[b] = (uint8_t)(se + 127);
            double s = ldexp(1.0, se);
            for (size_t i = 0; i < n; i++) {
                size_t col = b * block + i;
                uint32_t rb = bfp_sr_bits(j->o.seed, (uint64_t)(r * cols + col));
                unsigned mag = bfp_grid_round(e, fabs((double)xb[i]), s, j->o.rounding, rb);
                bfp_put_code(codes, col, e->bits,
                             bfp_elem_make_code(e, bfp_f32_sign(xb[i]), mag));
            }
        }
    }
    free(x);
    return BFP_OK;
}

void bfp_mx_dequantize_row_ref(const bfp_format_impl *impl, const bfp_const_planes *in,
                               const bfp_plane_sizes *sz, size_t r, size_t cols,
                               float *out)
{
    const size_t block = (size_t)impl->info.block;
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    const uint8_t *scales = in->scales + r * sz->blocks_per_row;
    for (size_t col = 0; col < cols; col++) {
        double s = bfp_scale_decode(BFP_SCALE_E8M0, scales[col / block]);
        unsigned code = bfp_get_code(codes, col, impl->elem->bits);
        out[col] = (float)(bfp_elem_code_value(impl->elem, code) * s);
    }
}

int bfp_mx_block_is_bad(const bfp_format_impl *impl, const bfp_const_planes *in,
                        const bfp_plane_sizes *sz, size_t r, size_t b, size_t cols)
{
    const size_t block = (size_t)impl->info.block;
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    int nan_scale = in->scales[r * sz->blocks_per_row + b] == 0xFF;
    if (!nan_scale && !bfp_elem_has_special(impl->elem))
        return 0; /* no code can be bad */
    for (size_t i = 0; i < bfp_block_len(cols, block, b); i++) {
        unsigned code = bfp_get_code(codes, b * block + i, impl->elem->bits);
        if (bfp_elem_code_is_special(impl->elem, code) || (nan_scale && code != 0))
            return 1;
    }
    return 0;
}

/* hif4.c - HiFloat4 reference (SPEC section 4; paper Algorithm 1).
 * Block 64: a UE6M2 scale, 8 one-bit E1_8 exponents (per 8 elements), 16
 * one-bit E1_16 exponents (per 4), 64 E1M2 elements (k/4, k <= 7). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

#define HIF4_BLOCK 64
#define HIF4_NAN 0xFFu
#define BF16_SIG 8      /* significant bits of bfloat16 */
#define BF16_MIN_EXP (-126)

static double bf16_rne(double v)
{
    return bfp_round_sig(v, BF16_SIG, BF16_MIN_EXP);
}

/* REC = BF16_RNE(1 / E6M2) for the UE6M2 code. */
static double hif4_rec(unsigned code)
{
    unsigned m = code & 3;
    return ldexp(bf16_rne(1.0 / (1.0 + m / 4.0)), 48 - (int)(code >> 2));
}

static uint32_t load_word(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void store_word(uint8_t *p, uint32_t w)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(w >> (8 * k));
}

/* Quantize one finite block (n <= 64 elements, the rest count as zeros). */
static uint32_t hif4_block(const bfp_qjob *j, const float *xb, size_t n, size_t r,
                           size_t col0, uint8_t *codes)
{
    double v16[16] = {0}, v8[8], vmax = 0;
    for (size_t i = 0; i < n; i++)
        v16[i / 4] = fmax(v16[i / 4], fabs((double)xb[i]));
    for (int k = 0; k < 8; k++) {
        v8[k] = fmax(v16[2 * k], v16[2 * k + 1]);
        vmax = fmax(vmax, v8[k]);
    }
    /* SF = BF16(Vmax * BF16(1/7)), clamped, then RNE to 2 mantissa bits */
    double sf = bf16_rne(vmax * bf16_rne(1.0 / 7.0));
    sf = fmin(fmax(sf, ldexp(1.0, -48)), 49152.0);
    double e6m2 = bfp_round_sig(sf, 3, -48);
    int ex = bfp_floor_log2(e6m2);
    unsigned code = (unsigned)(ex + 48) << 2 | (unsigned)(ldexp(e6m2, -ex) * 4 - 4);
    double rec = hif4_rec(code);
    uint32_t e1_8 = 0, e1_16 = 0;
    for (int k = 0; k < 8; k++)
        if (v8[k] * rec >= 4)
            e1_8 |= 1u << k;
    for (int g = 0; g < 16; g++)
        if (v16[g] * rec * ((e1_8 >> (g / 2)) & 1 ? 0.5 : 1.0) >= 2)
            e1_16 |= 1u << g;
    for (size_t i = 0; i < n; i++) {
        int shift = (int)((e1_8 >> (i / 8)) & 1) + (int)((e1_16 >> (i / 4)) & 1);
        double a = ldexp(fabs((double)xb[i]) * rec, -shift); /* t_i / 4, exact */
        uint32_t rb = bfp_sr_bits(j->o.seed, (uint64_t)(r * j->cols + col0 + i));
        unsigned mag = bfp_grid_round(&bfp_e1m2, a, 1.0, j->o.rounding, rb);
        bfp_put_code(codes, col0 + i, 4, bfp_elem_make_code(&bfp_e1m2, bfp_f32_sign(xb[i]), mag));
    }
    return code | e1_8 << 8 | e1_16 << 16;
}

bfp_status bfp_hif4_quantize_ref(const bfp_qjob *j)
{
    const size_t cols = j->cols;
    float *x = malloc(cols * sizeof *x);
    if (!x)
        return BFP_ERR_NOMEM;
    for (size_t r = 0; r < j->rows; r++) {
        bfp_load_row(j->dtype, j->src, cols, r, x);
        uint8_t *codes = j->out->codes + r * j->sz.code_row_bytes;
        for (size_t b = 0; b < j->sz.blocks_per_row; b++) {
            size_t n = bfp_block_len(cols, HIF4_BLOCK, b);
            int finite = 1;
            for (size_t i = 0; i < n; i++)
                finite &= bfp_f32_is_finite(x[b * HIF4_BLOCK + i]);
            uint32_t word = HIF4_NAN; /* NaN block: flags and codes 0 */
            if (finite)
                word = hif4_block(j, x + b * HIF4_BLOCK, n, r, b * HIF4_BLOCK, codes);
            else
                j->st->nonfinite_blocks++;
            store_word(j->out->scales + 4 * (r * j->sz.blocks_per_row + b), word);
        }
    }
    free(x);
    return BFP_OK;
}

int bfp_hif4_block_is_bad(const bfp_format_impl *impl, const bfp_const_planes *in,
                          const bfp_plane_sizes *sz, size_t r, size_t b, size_t cols)
{
    uint32_t w = load_word(in->scales + 4 * (r * sz->blocks_per_row + b));
    if ((w & 0xFF) != HIF4_NAN)
        return 0;
    if (w != HIF4_NAN)
        return 1;
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    for (size_t i = 0; i < bfp_block_len(cols, HIF4_BLOCK, b); i++)
        if (bfp_get_code(codes, b * HIF4_BLOCK + i, 4) != 0)
            return 1;
    return 0;
}

void bfp_hif4_dequantize_row_ref(const bfp_format_impl *impl, const bfp_const_planes *in,
                                 const bfp_plane_sizes *sz, size_t r, size_t cols,
                                 float *out)
{
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    for (size_t col = 0; col < cols; col++) {
        size_t b = col / HIF4_BLOCK, i = col % HIF4_BLOCK;
        uint32_t w = load_word(in->scales + 4 * (r * sz->blocks_per_row + b));
        double s = bfp_scale_decode(BFP_SCALE_HIF4, w & 0xFF); /* NaN for 0xFF */
        int shift = (int)((w >> (8 + i / 8)) & 1) + (int)((w >> (16 + i / 4)) & 1);
        double k = bfp_elem_code_value(&bfp_e1m2, bfp_get_code(codes, col, 4));
        out[col] = (float)ldexp(k * s, shift);
    }
}

bfp_status bfp_hif4_split_scales(const uint8_t *scales, size_t nblocks, uint8_t *ea,
                                 uint8_t *eb, uint8_t *ec, uint16_t *scale_bf16)
{
    if (!scales && nblocks)
        return BFP_ERR_ARG;
    for (size_t b = 0; b < nblocks; b++) {
        uint32_t w = load_word(scales + 4 * b);
        if (ea)
            ea[b] = (uint8_t)w;
        if (eb)
            eb[b] = (uint8_t)(w >> 8);
        if (ec) {
            ec[2 * b] = (uint8_t)(w >> 16);
            ec[2 * b + 1] = (uint8_t)(w >> 24);
        }
        for (int g = 0; scale_bf16 && g < 16; g++) {
            int shift = (int)((w >> (8 + g / 2)) & 1) + (int)((w >> (16 + g)) & 1);
            float f = (w & 0xFF) == HIF4_NAN ? bfp_f32_nan()
                                              : (float)ldexp(hif4_rec(w & 0xFF), -shift);
            scale_bf16[16 * b + (size_t)g] = bfp_f32_to_bf16(f);
        }
    }
    return BFP_OK;
}

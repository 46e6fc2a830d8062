/* nvfp4.c - NVFP4 and NVFP4+ reference (SPEC sections 3 and 5).
 * Block 16, E2M1 elements, UE4M3 block scale, fp32 tensor scale s_enc.
 * All arithmetic that the spec writes in fp32 is done in float; element
 * rounding compares t with grid points times the block scale, exactly. */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define NV_BLOCK 16
#define NV_NAN_SCALE 0x7F
#define NV_PLAIN_MAX_SCALE 0x02 /* NVFP4+: scales up to this code stay plain */

static float nvfp4_tensor_scale(const bfp_qjob *j, float *row)
{
    if (j->o.nvfp4_no_tensor_scale)
        return 1.0f;
    float amax = 0; /* over finite values only */
    for (size_t r = 0; r < j->rows; r++) {
        bfp_load_row(j->dtype, j->src, j->cols, r, row);
        for (size_t i = 0; i < j->cols; i++)
            if (bfp_f32_is_finite(row[i]))
                amax = fmaxf(amax, fabsf(row[i]));
    }
    return bfp_nvfp4_s_enc(amax);
}

/* Encode one row-block of scaled values t with block scale code sc. */
static void nvfp4_block(const bfp_qjob *j, const bfp_format_impl *impl,
                        const float *t, size_t n, size_t r, size_t col0,
                        unsigned sc, uint8_t *codes, uint8_t *meta)
{
    double sb = bfp_grid_value(&bfp_e4m3, sc);
    size_t bm = SIZE_MAX;
    if (impl->bm_elem && sc > NV_PLAIN_MAX_SCALE) {
        bm = 0;
        for (size_t i = 1; i < n; i++) /* ties go to the lowest index */
            if (fabsf(t[i]) > fabsf(t[bm]))
                bm = i;
    }
    if (meta)
        *meta = bm == SIZE_MAX ? 0 : (uint8_t)bm;
    for (size_t i = 0; i < n; i++) {
        const bfp_elem_desc *codec = i == bm ? impl->bm_elem : impl->elem;
        unsigned mag = 0; /* a zero block scale leaves signed zeros */
        if (sb > 0) {
            uint32_t rb = bfp_sr_bits(j->o.seed, (uint64_t)(r * j->cols + col0 + i));
            mag = bfp_grid_round(codec, fabs((double)t[i]), sb, j->o.rounding, rb);
        }
        bfp_put_code(codes, col0 + i, 4, bfp_elem_make_code(codec, bfp_f32_sign(t[i]), mag));
    }
}

bfp_status bfp_nvfp4_quantize_ref(const bfp_qjob *j)
{
    const bfp_format_impl *impl = bfp_impl_get(j->f->id);
    const size_t cols = j->cols, bpr = j->sz.blocks_per_row;
    const size_t tile_rows = j->o.nvfp4_2d ? NV_BLOCK : 1;
    float *t = malloc(tile_rows * cols * sizeof *t);
    if (!t)
        return BFP_ERR_NOMEM;
    const float s_enc = nvfp4_tensor_scale(j, t);
    *j->out->tensor_scale = s_enc;
    for (size_t r0 = 0; r0 < j->rows; r0 += tile_rows) {
        size_t h = j->rows - r0 < tile_rows ? j->rows - r0 : tile_rows;
        for (size_t k = 0; k < h; k++) {
            float *row = t + k * cols;
            bfp_load_row(j->dtype, j->src, cols, r0 + k, row);
            for (size_t i = 0; i < cols; i++)
                row[i] = row[i] * s_enc; /* t_i = fp32(x_i * s_enc) */
        }
        for (size_t b = 0; b < bpr; b++) {
            size_t n = bfp_block_len(cols, NV_BLOCK, b);
            float tmax = 0;
            int finite = 1;
            for (size_t k = 0; k < h; k++) /* the tile: h row-blocks */
                for (size_t i = 0; i < n; i++) {
                    float v = t[k * cols + b * NV_BLOCK + i];
                    finite &= bfp_f32_is_finite(v);
                    tmax = fmaxf(tmax, fabsf(v));
                }
            unsigned sc = NV_NAN_SCALE;
            if (finite) /* E4M3 RNE satfinite of fp32(max / 6) */
                sc = bfp_grid_round(&bfp_e4m3, (double)(tmax / 6.0f), 1.0,
                                    BFP_ROUND_NEAREST_EVEN, 0);
            for (size_t k = 0; k < h; k++) {
                size_t idx = (r0 + k) * bpr + b;
                uint8_t *meta = impl->bm_elem && j->out->meta ? j->out->meta + idx : NULL;
                j->out->scales[idx] = (uint8_t)sc;
                if (!finite) {
                    if (meta)
                        *meta = 0;
                    j->st->nonfinite_blocks++;
                    continue;
                }
                nvfp4_block(j, impl, t + k * cols + b * NV_BLOCK, n, r0 + k,
                            b * NV_BLOCK, sc,
                            j->out->codes + (r0 + k) * j->sz.code_row_bytes, meta);
            }
        }
    }
    free(t);
    return BFP_OK;
}

static int nvfp4_scale_ok(unsigned sc)
{
    return sc < 0x80 && sc != NV_NAN_SCALE;
}

int bfp_nvfp4_block_is_bad(const bfp_format_impl *impl, const bfp_const_planes *in,
                           const bfp_plane_sizes *sz, size_t r, size_t b, size_t cols)
{
    size_t idx = r * sz->blocks_per_row + b, n = bfp_block_len(cols, NV_BLOCK, b);
    unsigned sc = in->scales[idx];
    float s_enc = *in->tensor_scale;
    if (!(s_enc > 0) || !bfp_f32_is_finite(s_enc) || (sc & 0x80))
        return 1;
    if (impl->bm_elem) {
        unsigned meta = in->meta[idx];
        int plain = sc <= NV_PLAIN_MAX_SCALE || sc == NV_NAN_SCALE;
        if ((meta & 0xF0) || (plain && meta != 0) || meta >= n)
            return 1;
    }
    if (sc == NV_NAN_SCALE) {
        const uint8_t *codes = in->codes + r * sz->code_row_bytes;
        for (size_t i = 0; i < n; i++)
            if (bfp_get_code(codes, b * NV_BLOCK + i, 4) != 0)
                return 1;
    }
    return 0;
}

void bfp_nvfp4_dequantize_row_ref(const bfp_format_impl *impl,
                                  const bfp_const_planes *in,
                                  const bfp_plane_sizes *sz, size_t r,
                                  size_t cols, float *out)
{
    const uint8_t *codes = in->codes + r * sz->code_row_bytes;
    const float s_enc = *in->tensor_scale;
    for (size_t b = 0; b < sz->blocks_per_row; b++) {
        size_t idx = r * sz->blocks_per_row + b, n = bfp_block_len(cols, NV_BLOCK, b);
        unsigned sc = in->scales[idx];
        int bad = !nvfp4_scale_ok(sc) || bfp_nvfp4_block_is_bad(impl, in, sz, r, b, cols);
        size_t bm = SIZE_MAX;
        if (!bad && impl->bm_elem && sc > NV_PLAIN_MAX_SCALE)
            bm = in->meta[idx];
        float sb = (float)bfp_grid_value(&bfp_e4m3, sc & 0x7F);
        for (size_t i = 0; i < n; i++) {
            unsigned code = bfp_get_code(codes, b * NV_BLOCK + i, 4);
            const bfp_elem_desc *codec = i == bm ? impl->bm_elem : impl->elem;
            float q_sb = (float)bfp_elem_code_value(codec, code) * sb; /* exact */
            out[b * NV_BLOCK + i] = bad ? bfp_f32_nan() : q_sb / s_enc;
        }
    }
}

/*
 * fuzz_dequant.c - every format's decoder on arbitrary planes: any bytes in
 * codes, scales, meta and the tensor scale. Properties: no crash or read
 * past a plane; bfp_dequantize() equals bfp_dequantize_ref() bit for bit
 * (any NaN matches any NaN); a block with a NaN scale code, or an NVFP4
 * tensor scale that is not finite and positive, decodes to NaN only;
 * bfp_validate()'s counts are consistent.
 * Input: format, rows, cols, dtype, then the plane bytes.
 */
#include "bfp.h"
#include "fuzz_util.h"

#include <math.h>

static float value_at(bfp_dtype dt, const uint8_t *buf, size_t i)
{
    uint16_t h;
    float f;
    if (dt == BFP_DTYPE_F32) {
        memcpy(&f, buf + 4 * i, 4);
        return f;
    }
    memcpy(&h, buf + 2 * i, 2);
    return dt == BFP_DTYPE_BF16 ? bfp_bf16_to_f32(h) : bfp_f16_to_f32(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    const bfp_format_info *f = bfp_format_at(fz_u8(&in) % bfp_format_count());
    size_t rows = 1 + fz_u8(&in) % 8, cols = 1 + fz_u16(&in) % 320;
    static const bfp_dtype dtypes[3] = {BFP_DTYPE_F32, BFP_DTYPE_BF16, BFP_DTYPE_F16};
    bfp_dtype dt = dtypes[fz_u8(&in) % 3];
    bfp_plane_sizes sz;
    FZ_CHECK(bfp_plane_sizes_for(f->id, rows, cols, &sz) == BFP_OK, "%s %zux%zu", f->name,
             rows, cols);

    uint8_t *codes = fz_alloc(sz.codes), *scales = fz_alloc(sz.scales);
    uint8_t *meta = sz.meta ? fz_alloc(sz.meta) : NULL;
    float ts = 1.0f;
    fz_bytes(&in, scales, sz.scales);
    if (meta)
        fz_bytes(&in, meta, sz.meta);
    if (sz.tensor_scale)
        fz_bytes(&in, &ts, 4);
    fz_bytes(&in, codes, sz.codes);
    bfp_const_planes p = {codes, scales, meta, sz.tensor_scale ? &ts : NULL};

    size_t n = rows * cols, es = bfp_dtype_size(dt);
    uint8_t *fast = fz_alloc(n * es), *ref = fz_alloc(n * es);
    FZ_CHECK(bfp_dequantize(f->id, &p, rows, cols, dt, fast) == BFP_OK, "%s", f->name);
    FZ_CHECK(bfp_dequantize_ref(f->id, &p, rows, cols, dt, ref) == BFP_OK, "%s", f->name);

    int ts_ok = !f->has_tensor_scale || (ts > 0 && ts <= 3.40282347e38f);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * cols + c, blk = r * sz.blocks_per_row + c / (size_t)f->block;
            float a = value_at(dt, fast, i), b = value_at(dt, ref, i);
            FZ_CHECK((isnan(a) && isnan(b)) || memcmp(fast + i * es, ref + i * es, es) == 0,
                     "%s %s %zux%zu: value %zu is %a (fast) vs %a (reference) [%s]", f->name,
                     bfp_dtype_name(dt), rows, cols, i, a, b, bfp_isa());
            /* HiF4's UE6M2 byte is the low byte of its little-endian word */
            unsigned scode = scales[blk * (size_t)f->scale_bytes];
            int nan_scale = isnan(bfp_scale_decode(f->scale, scode));
            FZ_CHECK(!(nan_scale || !ts_ok) || isnan(b),
                     "%s: block %zu has NaN scale code 0x%02x or tensor scale %a but "
                     "value %zu decodes to %a", f->name, blk, scode, ts, i, b);
        }

    size_t bad = 0, first = 0, nblocks = rows * sz.blocks_per_row;
    bfp_status vs = bfp_validate(f->id, &p, rows, cols, &bad, &first);
    FZ_CHECK((vs == BFP_OK && bad == 0 && first == SIZE_MAX) ||
                 (vs == BFP_ERR_DATA && bad > 0 && bad <= nblocks && first < nblocks),
             "%s: validate status %d, %zu bad blocks of %zu, first %zu", f->name, (int)vs, bad,
             nblocks, first);

    free(codes);
    free(scales);
    free(meta);
    free(fast);
    free(ref);
    return 0;
}

/*
 * fuzz_differential.c - the quantizer paths must agree bit for bit: the
 * reference and every CPU kernel set this CPU and build have (generic, AVX2,
 * AVX-512), for every format and input dtype, on inputs rich in NaN, +-Inf,
 * -0, subnormals, huge and tiny blocks, and partial blocks. Planes, tensor
 * scale and stats are compared, then the decoders of each path on the
 * reference planes.
 * Input: format, rows, cols, dtype, options, then per value a control byte
 * (a special value, or raw bits that follow).
 */
#include "bfp.h"
#include "cpu_internal.h"
#include "fuzz_util.h"

#include <math.h>

/* Values the control byte can pick (as float32; bf16/f16 round them). */
static const float specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f,
    1e-45f, -1e-45f, 1.17549421e-38f, 1.17549435e-38f, 3.40282347e38f, -3.40282347e38f,
    65504.0f, 448.0f, 6.0f, 0.5f, 0.25f, 1.5f, 5.96e-8f, 6.1e-5f, 1e30f, 1e-30f,
    3.0f, 2.5f, 0.75f, -6.0f, 7.0f, 1.75f, 2.0f, 1e-40f};
#define NSPECIAL (sizeof specials / sizeof specials[0])

static void put_value(bfp_dtype dt, uint8_t *dst, size_t i, fz_in *in, float scale)
{
    uint8_t c = fz_u8(in);
    size_t es = bfp_dtype_size(dt);
    if (c < 3 * NSPECIAL) {
        /* a special value, possibly times the block's scale: huge and tiny
         * blocks of otherwise ordinary values */
        float v = specials[c % NSPECIAL] * (c >= NSPECIAL ? scale : 1.0f);
        if (dt == BFP_DTYPE_F32) {
            memcpy(dst + 4 * i, &v, 4);
        } else {
            uint16_t h = dt == BFP_DTYPE_BF16 ? bfp_f32_to_bf16(v) : bfp_f32_to_f16(v);
            memcpy(dst + 2 * i, &h, 2);
        }
    } else {
        fz_bytes(in, dst + es * i, es); /* raw bits: any exponent, any NaN */
    }
}

typedef struct {
    uint8_t *codes, *scales, *meta;
    float ts;
    bfp_stats st;
} planes_buf;

static void planes_alloc(planes_buf *b, const bfp_plane_sizes *sz)
{
    b->codes = fz_alloc(sz->codes);
    b->scales = fz_alloc(sz->scales);
    b->meta = sz->meta ? fz_alloc(sz->meta) : NULL;
    /* same starting bytes everywhere, so row padding bits compare too */
    memset(b->codes, 0, sz->codes);
    memset(b->scales, 0, sz->scales);
    if (b->meta)
        memset(b->meta, 0, sz->meta);
    b->ts = 0.0f;
}

static void planes_free(planes_buf *b)
{
    free(b->codes);
    free(b->scales);
    free(b->meta);
}

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return SIZE_MAX;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    const bfp_format_info *f = bfp_format_at(fz_u8(&in) % bfp_format_count());
    size_t rows = 1 + fz_u8(&in) % 4, cols = 1 + fz_u16(&in) % 260;
    static const bfp_dtype dtypes[3] = {BFP_DTYPE_F32, BFP_DTYPE_BF16, BFP_DTYPE_F16};
    bfp_dtype dt = dtypes[fz_u8(&in) % 3];
    uint8_t ob = fz_u8(&in);
    bfp_options o;
    bfp_options_init(&o);
    o.threads = 1 + (ob & 1);
    if (f->has_tensor_scale)
        o.nvfp4_no_tensor_scale = (ob >> 1) & 1;
    float scale = ldexpf(1.0f, (int)fz_u8(&in) - 128);

    bfp_plane_sizes sz;
    FZ_CHECK(bfp_plane_sizes_for(f->id, rows, cols, &sz) == BFP_OK, "%s", f->name);
    size_t n = rows * cols, es = bfp_dtype_size(dt);
    uint8_t *src = fz_alloc(n * es);
    for (size_t i = 0; i < n; i++)
        put_value(dt, src, i, &in, scale);

    planes_buf ref, got;
    planes_alloc(&ref, &sz);
    bfp_planes rp = {ref.codes, ref.scales, ref.meta, &ref.ts};
    FZ_CHECK(bfp_quantize_ref(f->id, dt, src, rows, cols, &o, &rp, &ref.st) == BFP_OK, "%s",
             f->name);
    bfp_const_planes rc = {ref.codes, ref.scales, ref.meta, &ref.ts};
    uint8_t *dref = fz_alloc(n * 4), *dgot = fz_alloc(n * 4);

    for (int isa = 0; isa < BFP_ISA_COUNT; isa++) {
        const bfp_kernels *k = bfp_cpu_kernels_for(isa);
        if (!k)
            continue;
        planes_alloc(&got, &sz);
        bfp_planes gp = {got.codes, got.scales, got.meta, &got.ts};
        FZ_CHECK(bfp_cpu_quantize(k, f->id, dt, src, rows, cols, &o, &gp, &got.st) == BFP_OK,
                 "%s", f->name);
        const char *what = f->name, *dn = bfp_dtype_name(dt);
        size_t d;
        FZ_CHECK((d = first_diff(ref.codes, got.codes, sz.codes)) == SIZE_MAX,
                 "%s %s %zux%zu [%s]: codes byte %zu: 0x%02x (ref) vs 0x%02x", what, dn, rows,
                 cols, k->name, d, ref.codes[d], got.codes[d]);
        FZ_CHECK((d = first_diff(ref.scales, got.scales, sz.scales)) == SIZE_MAX,
                 "%s %s %zux%zu [%s]: scales byte %zu: 0x%02x (ref) vs 0x%02x", what, dn, rows,
                 cols, k->name, d, ref.scales[d], got.scales[d]);
        FZ_CHECK(!sz.meta || (d = first_diff(ref.meta, got.meta, sz.meta)) == SIZE_MAX,
                 "%s %s %zux%zu [%s]: meta byte %zu differs", what, dn, rows, cols, k->name, d);
        FZ_CHECK(!sz.tensor_scale || memcmp(&ref.ts, &got.ts, 4) == 0,
                 "%s [%s]: tensor scale %a (ref) vs %a", what, k->name, ref.ts, got.ts);
        FZ_CHECK(ref.st.blocks == got.st.blocks &&
                     ref.st.nonfinite_blocks == got.st.nonfinite_blocks &&
                     ref.st.flushed_blocks == got.st.flushed_blocks,
                 "%s [%s]: stats differ (nonfinite %zu vs %zu, flushed %zu vs %zu)", what,
                 k->name, ref.st.nonfinite_blocks, got.st.nonfinite_blocks,
                 ref.st.flushed_blocks, got.st.flushed_blocks);
        planes_free(&got);

        for (int od = 0; od < 2; od++) {
            bfp_dtype out = od ? BFP_DTYPE_BF16 : BFP_DTYPE_F32;
            size_t oes = bfp_dtype_size(out);
            FZ_CHECK(bfp_dequantize_ref(f->id, &rc, rows, cols, out, dref) == BFP_OK, "%s",
                     what);
            FZ_CHECK(bfp_cpu_dequantize(k, f->id, &rc, rows, cols, out, dgot) == BFP_OK, "%s",
                     what);
            FZ_CHECK((d = first_diff(dref, dgot, n * oes)) == SIZE_MAX,
                     "%s -> %s [%s]: dequantized byte %zu differs", what,
                     bfp_dtype_name(out), k->name, d);
        }
    }
    planes_free(&ref);
    free(src);
    free(dref);
    free(dgot);
    return 0;
}

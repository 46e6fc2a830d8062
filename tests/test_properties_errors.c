/* test_properties_errors.c - for every format:
 *  P11 bfp_validate reports corrupted planes (BFP_ERR_DATA, bad_blocks and
 *      first_bad exact), the corrupted block decodes to NaN and the others
 *      are unchanged: a NaN-scale block with a nonzero code, an MX+/MX++/
 *      NVFP4+ meta index beyond a partial block, an NVFP4 scale byte with
 *      the sign bit, plus codes the encoder never writes;
 *  P12 bad arguments return errors and never crash. */
#include "test_properties.h"

#include <stdint.h>

/* Quantize a 3-row tensor with a partial last block and one NaN block
 * (row 1, block 0). */
static void make_planes(const fmodel *m, prng *p, size_t *rows, size_t *cols, float **x,
                        qplanes *q)
{
    const size_t B = (size_t)m->f->block;
    *rows = 3;
    *cols = 2 * B + 5; /* last block holds 5 elements */
    *x = malloc(*rows * *cols * sizeof **x);
    gen_fill(m, G_NORMAL, p, *x, *rows, *cols);
    for (size_t k = 0; k < *rows * *cols; k++) /* no zeros: no flushed blocks */
        if ((*x)[k] == 0)
            (*x)[k] = 1.0f;
    for (size_t r = 0; r < *rows; r++) /* a clear block max per block */
        for (size_t b = 0; b * B < *cols; b++)
            (*x)[r * *cols + b * B + 1] = 1e3f;
    (*x)[1 * *cols + 3] = NAN;
    CHECK(qp_quantize(m, BFP_DTYPE_F32, *x, *rows, *cols, NULL, q, NULL, 0) == BFP_OK,
          "%s: quantize", m->f->name);
}

/* Validate after a corruption of block blk: one bad block, the right index,
 * NaN decode of that block, other blocks as before. */
static void expect_bad(const fmodel *m, const qplanes *q, size_t rows, size_t cols, size_t blk,
                       const float *y_before, const char *what)
{
    bfp_const_planes in = qp_in(q);
    size_t bad = 0, first = 0, B = (size_t)m->f->block, bpr = q->sz.blocks_per_row;
    bfp_status s = bfp_validate(m->f->id, &in, rows, cols, &bad, &first);
    CHECK(s == BFP_ERR_DATA && bad == 1 && first == blk,
          "%s %s: validate %d, bad %zu, first %zu (want block %zu)", m->f->name, what, s, bad,
          first, blk);
    float *y = malloc(rows * cols * sizeof *y);
    qp_dequant(m, q, y);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t k = r * cols + c;
            if (r * bpr + c / B == blk)
                CHECK(isnan(y[k]), "%s %s: elem (%zu,%zu) decodes %a, want NaN", m->f->name, what,
                      r, c, y[k]);
            else
                CHECK(f32_same(y[k], y_before[k]), "%s %s: elem (%zu,%zu) changed", m->f->name,
                      what, r, c);
        }
    free(y);
}

static void test_validate(const fmodel *m)
{
    prng p = {0xFA11ull + (uint64_t)m->f->id};
    size_t rows, cols;
    float *x;
    qplanes q;
    make_planes(m, &p, &rows, &cols, &x, &q);
    const size_t B = (size_t)m->f->block, bpr = q.sz.blocks_per_row, w = (size_t)m->f->elem_bits;
    float *y0 = malloc(rows * cols * sizeof *y0);
    qp_dequant(m, &q, y0);
    bfp_const_planes in = qp_in(&q);
    size_t bad = 9, first = 0;
    CHECK(bfp_validate(m->f->id, &in, rows, cols, &bad, &first) == BFP_OK && bad == 0 &&
              first == SIZE_MAX,
          "%s: fresh planes rejected", m->f->name);
    CHECK(bfp_validate(m->f->id, &in, rows, cols, NULL, NULL) == BFP_OK, "%s: NULL outputs",
          m->f->name);

    /* the NaN block (row 1, block 0) with a nonzero code byte */
    size_t nanblk = bpr, at = 1 * q.sz.code_row_bytes; /* block 0 starts the row */
    q.codes[at] ^= 0x01;
    expect_bad(m, &q, rows, cols, nanblk, y0, "NaN block with a code");
    q.codes[at] ^= 0x01;
    q.codes[at + (B * w / 8) / 2] ^= 0x10; /* mid-block */
    expect_bad(m, &q, rows, cols, nanblk, y0, "NaN block with a mid code");
    q.codes[at + (B * w / 8) / 2] ^= 0x10;
    if (q.meta) { /* and with a meta byte */
        q.meta[nanblk] = 1;
        expect_bad(m, &q, rows, cols, nanblk, y0, "NaN block with meta");
        q.meta[nanblk] = 0;
    }
    if (m->f->family == BFP_FAMILY_HIF4) { /* NaN word with exponent flags */
        q.scales[4 * nanblk + 1] = 0x01;
        expect_bad(m, &q, rows, cols, nanblk, y0, "NaN word with E1_8 set");
        q.scales[4 * nanblk + 1] = 0;
    }

    /* meta index beyond the partial last block (5 elements) of row 2 */
    size_t last = 2 * bpr + bpr - 1;
    if (q.meta) {
        unsigned keep = q.meta[last];
        unsigned idx_bits = fam_is_nv(m->f) ? 0x0F : 0x1F;
        for (unsigned idx = 5; idx <= idx_bits; idx += idx_bits - 5) {
            q.meta[last] = (uint8_t)((keep & ~idx_bits) | idx);
            char what[64];
            snprintf(what, sizeof what, "meta index %u in a 5-element block", idx);
            expect_bad(m, &q, rows, cols, last, y0, what);
        }
        q.meta[last] = (uint8_t)keep;
        if (m->f->family == BFP_FAMILY_MX_PLUS) { /* MX+ has no delta */
            q.meta[last] |= 0x20;
            expect_bad(m, &q, rows, cols, last, y0, "MX+ meta with a delta");
            q.meta[last] = (uint8_t)keep;
        }
        if (m->f->family == BFP_FAMILY_NVFP4_PLUS) { /* high nibble is 0 */
            q.meta[last] |= 0x10;
            expect_bad(m, &q, rows, cols, last, y0, "NVFP4+ meta high nibble");
            q.meta[last] = (uint8_t)keep;
        }
    }

    /* NVFP4 scale byte with the sign bit (block 1 of row 0) */
    if (fam_is_nv(m->f)) {
        q.scales[1] |= 0x80;
        expect_bad(m, &q, rows, cols, 1, y0, "scale with the sign bit");
        q.scales[1] &= 0x7F;
        float ts = q.ts; /* a tensor scale that is not finite positive: all bad */
        for (int k = 0; k < 3; k++) {
            q.ts = k == 0 ? 0.0f : k == 1 ? -ts : INFINITY;
            bad = 0;
            CHECK(bfp_validate(m->f->id, &in, rows, cols, &bad, NULL) == BFP_ERR_DATA &&
                      bad == rows * bpr,
                  "%s: tensor scale %a: bad %zu", m->f->name, q.ts, bad);
        }
        q.ts = ts;
    }

    /* Codes the encoder never writes (docs/formats.md: "bfp_validate reports
     * all of these"): E4M3 0x7F/0xFF (NaN), E5M2 0x7C-0x7F (Inf/NaN), and the
     * INT two's complement minimum, INT8 0x80 / INT4 0x8 (-2: SPEC 1 has
     * k in [-127, 127] / [-7, 7]). In MX+ the BM code is exempt (all its
     * bits are mantissa), so element 0 is used: it is never the BM here. */
    unsigned special = 0;
    switch (m->f->elem) {
    case BFP_ELEM_E4M3: special = 0x7F; break;
    case BFP_ELEM_E5M2: special = 0xFC; break;
    case BFP_ELEM_INT8: special = 0x80; break;
    case BFP_ELEM_INT4: special = 0x8; break;
    default: break;
    }
    if (special) {
        uint8_t keep = q.codes[0];
        q.codes[0] = (uint8_t)(w == 8 ? special : (keep & 0xF0) | special);
        bad = 0;
        bfp_status s = bfp_validate(m->f->id, &in, rows, cols, &bad, &first);
        CHECK(s == BFP_ERR_DATA && bad == 1 && first == 0,
              "%s: code %02x (never written by the encoder) not reported: validate %d bad %zu",
              m->f->name, special, s, bad);
        q.codes[0] = keep;
    }
    qp_free(&q);
    free(x);
    free(y0);
}

typedef bfp_status (*quantize_fn)(bfp_format, bfp_dtype, const void *, size_t, size_t,
                                  const bfp_options *, const bfp_planes *, bfp_stats *);
typedef bfp_status (*dequantize_fn)(bfp_format, const bfp_const_planes *, size_t, size_t,
                                    bfp_dtype, void *);

/* P12: bad arguments, for the reference entry points and the dispatching
 * ones. Every call gets real buffers unless the point is a NULL, and the
 * shape errors must be found before any memory is touched. */
static void test_bad_args(const fmodel *m, quantize_fn qf, dequantize_fn dq, const char *api)
{
    const bfp_format id = m->f->id;
    char nm[64];
    snprintf(nm, sizeof nm, "%s via %s", m->f->name, api);
    float x[64] = {1, 2, 3}, y[64];
    qplanes q;
    qp_alloc(m, 1, 64, &q, 0);
    bfp_planes out = qp_out(&q), o2;
    bfp_const_planes in = qp_in(&q), i2;
    bfp_stats st;
    bfp_plane_sizes sz;

    CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, NULL, &out, &st) == BFP_OK, "%s: baseline", nm);
    /* NULL planes and sources */
    CHECK(qf(id, BFP_DTYPE_F32, NULL, 1, 64, NULL, &out, NULL) == BFP_ERR_ARG, "%s: NULL src", nm);
    CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, NULL, NULL, NULL) == BFP_ERR_ARG, "%s: NULL out", nm);
    o2 = out;
    o2.codes = NULL;
    CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, NULL, &o2, NULL) == BFP_ERR_ARG, "%s: NULL codes", nm);
    o2 = out;
    o2.scales = NULL;
    CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, NULL, &o2, NULL) == BFP_ERR_ARG, "%s: NULL scales", nm);
    if (m->f->meta_bytes) {
        o2 = out;
        o2.meta = NULL;
        CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, NULL, &o2, NULL) == BFP_ERR_ARG, "%s: NULL meta", nm);
        i2 = in;
        i2.meta = NULL;
        CHECK(dq(id, &i2, 1, 64, BFP_DTYPE_F32, y) == BFP_ERR_ARG, "%s: deq NULL meta", nm);
    }
    if (m->f->has_tensor_scale) {
        o2 = out;
        o2.tensor_scale = NULL;
        CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, NULL, &o2, NULL) == BFP_ERR_ARG, "%s: NULL ts", nm);
        i2 = in;
        i2.tensor_scale = NULL;
        CHECK(bfp_validate(id, &i2, 1, 64, NULL, NULL) == BFP_ERR_ARG, "%s: validate NULL ts", nm);
    }
    CHECK(dq(id, NULL, 1, 64, BFP_DTYPE_F32, y) == BFP_ERR_ARG, "%s: deq NULL in", nm);
    CHECK(dq(id, &in, 1, 64, BFP_DTYPE_F32, NULL) == BFP_ERR_ARG, "%s: deq NULL dst", nm);
    i2 = in;
    i2.codes = NULL;
    CHECK(dq(id, &i2, 1, 64, BFP_DTYPE_F32, y) == BFP_ERR_ARG, "%s: deq NULL codes", nm);
    i2 = in;
    i2.scales = NULL;
    CHECK(bfp_validate(id, &i2, 1, 64, NULL, NULL) == BFP_ERR_ARG, "%s: validate NULL scales", nm);
    CHECK(bfp_validate(id, NULL, 1, 64, NULL, NULL) == BFP_ERR_ARG, "%s: validate NULL", nm);
    CHECK(bfp_plane_sizes_for(id, 1, 64, NULL) == BFP_ERR_ARG, "%s: sizes NULL", nm);

    /* shapes: zero, and rows * cols (or the plane sizes) overflowing */
    static const size_t shapes[][2] = {{0, 64},        {1, 0},           {0, 0},
                                       {SIZE_MAX, 64}, {SIZE_MAX / 2, 4}, {1, SIZE_MAX},
                                       {SIZE_MAX / 16 + 1, 16}, {(size_t)1 << 33, (size_t)1 << 33},
                                       {3, SIZE_MAX / 3 + 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t r = shapes[s][0], c = shapes[s][1];
        CHECK(qf(id, BFP_DTYPE_F32, x, r, c, NULL, &out, NULL) == BFP_ERR_SHAPE,
              "%s: quantize %zux%zu", nm, r, c);
        CHECK(qf(id, BFP_DTYPE_BF16, (const uint16_t *)x, r, c, NULL, &out, NULL) == BFP_ERR_SHAPE,
              "%s: quantize bf16 %zux%zu", nm, r, c);
        CHECK(dq(id, &in, r, c, BFP_DTYPE_F32, y) == BFP_ERR_SHAPE, "%s: dequantize %zux%zu",
              nm, r, c);
        CHECK(bfp_validate(id, &in, r, c, NULL, NULL) == BFP_ERR_SHAPE, "%s: validate %zux%zu",
              nm, r, c);
        CHECK(bfp_plane_sizes_for(id, r, c, &sz) == BFP_ERR_SHAPE, "%s: sizes %zux%zu", nm, r, c);
    }

    /* rows * cols fits and the planes are addressable, but rows * cols * 4
     * (and * 2) bytes of input/output do not: quantize and dequantize must
     * say so before touching memory (validate and plane sizes accept this
     * shape: they have no value buffer) */
    {
        size_t r = SIZE_MAX / 32, c = 32;
        CHECK(bfp_plane_sizes_for(id, r, c, &sz) == BFP_OK, "%s: sizes %zux%zu", nm, r, c);
        CHECK(qf(id, BFP_DTYPE_F32, x, r, c, NULL, &out, NULL) == BFP_ERR_SHAPE,
              "%s: quantize %zux%zu", nm, r, c);
        CHECK(qf(id, BFP_DTYPE_BF16, (const uint16_t *)x, r, c, NULL, &out, NULL) == BFP_ERR_SHAPE,
              "%s: quantize bf16 %zux%zu", nm, r, c);
        CHECK(dq(id, &in, r, c, BFP_DTYPE_F32, y) == BFP_ERR_SHAPE, "%s: dequantize %zux%zu",
              nm, r, c);
        CHECK(dq(id, &in, r, c, BFP_DTYPE_BF16, y) == BFP_ERR_SHAPE,
              "%s: dequantize bf16 %zux%zu", nm, r, c);
    }

    /* dtypes */
    CHECK(qf(id, (bfp_dtype)0, x, 1, 64, NULL, &out, NULL) == BFP_ERR_ARG, "%s: dtype 0", nm);
    CHECK(qf(id, (bfp_dtype)99, x, 1, 64, NULL, &out, NULL) == BFP_ERR_ARG, "%s: dtype 99",
          nm);
    CHECK(dq(id, &in, 1, 64, (bfp_dtype)7, y) == BFP_ERR_ARG, "%s: deq dtype 7", nm);

    /* options */
    bfp_options o;
    static const int bad_round[] = {5, 99, -1};
    for (size_t k = 0; k < 3; k++) {
        bfp_options_init(&o);
        o.rounding = (bfp_rounding)bad_round[k];
        CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, &o, &out, NULL) == BFP_ERR_ARG, "%s: rounding %d", nm,
              bad_round[k]);
        bfp_options_init(&o);
        o.scale_mode = (bfp_scale_mode)(bad_round[k] - 1);
        CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, &o, &out, NULL) == BFP_ERR_ARG, "%s: scale_mode %d",
              nm, bad_round[k] - 1);
    }
    for (int mode = BFP_SCALE_CEIL; mode <= BFP_SCALE_RCEIL; mode++) {
        bfp_options_init(&o);
        o.scale_mode = (bfp_scale_mode)mode;
        bfp_status want = m->f->family == BFP_FAMILY_MX ? BFP_OK : BFP_ERR_UNSUPPORTED;
        CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, &o, &out, NULL) == want, "%s: scale_mode %d", nm,
              mode);
    }
    bfp_options_init(&o);
    o.nvfp4_2d = 1; /* NVFP4 only: NVFP4+ has no 2-D variant (SPEC section 5) */
    CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, &o, &out, NULL) ==
              (id == BFP_NVFP4 ? BFP_OK : BFP_ERR_UNSUPPORTED),
          "%s: nvfp4_2d", nm);
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = 1;
    CHECK(qf(id, BFP_DTYPE_F32, x, 1, 64, &o, &out, NULL) ==
              (m->f->has_tensor_scale ? BFP_OK : BFP_ERR_UNSUPPORTED),
          "%s: nvfp4_no_tensor_scale", nm);
    qp_free(&q);
}

static void test_unknown_formats(void)
{
    float x[32] = {0}, y[32];
    uint8_t codes[64], scales[16], meta[16];
    float ts = 1;
    bfp_planes out = {codes, scales, meta, &ts};
    bfp_const_planes in = {codes, scales, meta, &ts};
    bfp_plane_sizes sz;
    static const int ids[] = {0, 23, 999, -1};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        bfp_format id = (bfp_format)ids[k];
        CHECK(bfp_format_get(id) == NULL, "format_get(%d)", ids[k]);
        CHECK(bfp_quantize_f32(id, x, 1, 32, NULL, &out, NULL) == BFP_ERR_FORMAT, "quantize %d",
              ids[k]);
        CHECK(bfp_quantize_ref(id, BFP_DTYPE_F32, x, 1, 32, NULL, &out, NULL) == BFP_ERR_FORMAT,
              "quantize_ref %d", ids[k]);
        CHECK(bfp_dequantize_to_f32(id, &in, 1, 32, y) == BFP_ERR_FORMAT, "dequantize %d", ids[k]);
        CHECK(bfp_dequantize_ref(id, &in, 1, 32, BFP_DTYPE_F32, y) == BFP_ERR_FORMAT,
              "dequantize_ref %d", ids[k]);
        CHECK(bfp_validate(id, &in, 1, 32, NULL, NULL) == BFP_ERR_FORMAT, "validate %d", ids[k]);
        CHECK(bfp_plane_sizes_for(id, 1, 32, &sz) == BFP_ERR_FORMAT, "sizes %d", ids[k]);
    }
    CHECK(bfp_format_at(-1) == NULL && bfp_format_at(bfp_format_count()) == NULL, "format_at range");
    bfp_format f;
    CHECK(bfp_format_from_name(NULL, &f) == BFP_ERR_FORMAT, "from_name NULL");
    CHECK(bfp_format_from_name("mxfp5", &f) == BFP_ERR_FORMAT, "from_name mxfp5");
    CHECK(bfp_format_from_name("MXFP4+", &f) == BFP_OK && f == BFP_MXFP4_PLUS, "from_name MXFP4+");
    CHECK(bfp_hif4_split_scales(NULL, 1, NULL, NULL, NULL, NULL) == BFP_ERR_ARG, "split NULL");
}

int main(void)
{
    for (int i = 0; i < bfp_format_count(); i++) {
        fmodel m;
        fmodel_init(&m, bfp_format_at(i));
        test_validate(&m);
        test_bad_args(&m, bfp_quantize_ref, bfp_dequantize_ref, "ref");
        test_bad_args(&m, bfp_quantize, bfp_dequantize, "dispatch");
    }
    test_unknown_formats();
    return check_summary("test_properties_errors");
}

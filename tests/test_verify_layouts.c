/* test_verify_layouts.c - the layout converters that bfp verify reads other
 * implementations' files with: ggml block_mxfp4 / block_nvfp4, the HiF4
 * golden files, the 128x4 swizzled scales. Each round-trips exactly, puts
 * every element where ggml's own dequantizer reads it, and planes converted
 * from a layout verify clean against the reference. */
#include "check.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng >> 33);
}

static float *make_input(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = ldexpf((float)((int)(rnd() % 2001) - 1000) / 1000.0f, (int)(rnd() % 9) - 4);
    return x;
}

/* ggml's dequantize_row_mxfp4 / dequantize_row_nvfp4 (ggml-quants.c), as
 * values: kvalues_mxfp4 is 2 * E2M1 and the scale decoders halve to match. */
static const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void ggml_dequant(bfp_format fmt, const uint8_t *blocks, size_t n, float *y)
{
    if (fmt == BFP_MXFP4) {
        for (size_t i = 0; i < n / 32; i++) {
            const uint8_t *b = blocks + 17 * i;
            float d = ldexpf(1.0f, (int)b[0] - 128); /* GGML_E8M0_TO_FP32_HALF */
            for (int j = 0; j < 16; j++) {
                y[32 * i + (size_t)j] = kvalues_mxfp4[b[1 + j] & 0x0F] * d;
                y[32 * i + (size_t)j + 16] = kvalues_mxfp4[b[1 + j] >> 4] * d;
            }
        }
        return;
    }
    for (size_t i = 0; i < n / 64; i++) {
        const uint8_t *b = blocks + 36 * i;
        for (int s = 0; s < 4; s++) {
            float d = (float)bfp_scale_decode(BFP_SCALE_UE4M3, b[s]) * 0.5f; /* ggml_ue4m3_to_fp32 */
            for (int j = 0; j < 8; j++) {
                uint8_t q = b[4 + 8 * s + j];
                y[64 * i + 16 * (size_t)s + (size_t)j] = kvalues_mxfp4[q & 0x0F] * d;
                y[64 * i + 16 * (size_t)s + (size_t)j + 8] = kvalues_mxfp4[q >> 4] * d;
            }
        }
    }
}

static void test_ggml(bfp_format fmt, size_t rows, size_t cols)
{
    const char *name = bfp_format_get(fmt)->name;
    float *x = make_input(rows * cols);
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(fmt, rows, cols, &sz);
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales);
    uint8_t *codes2 = malloc(sz.codes), *scales2 = malloc(sz.scales);
    float ts = 1, ts2 = 1;
    bfp_options o;
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = fmt == BFP_NVFP4; /* block_nvfp4 has no tensor scale */
    bfp_planes p = {codes, scales, NULL, &ts};
    CHECK(bfp_quantize_ref(fmt, BFP_DTYPE_F32, x, rows, cols, &o, &p, NULL) == BFP_OK,
          "%s: quantize", name);
    size_t bytes = 0;
    CHECK(bfp_ggml_size(fmt, rows, cols, &bytes) == BFP_OK &&
              bytes == rows * cols / (fmt == BFP_MXFP4 ? 32 : 64) * (fmt == BFP_MXFP4 ? 17 : 36),
          "%s: ggml size %zu", name, bytes);
    uint8_t *blocks = malloc(bytes);
    bfp_const_planes cp = {codes, scales, NULL, &ts};
    CHECK(bfp_planar_to_ggml(fmt, &cp, rows, cols, blocks) == BFP_OK, "%s: to ggml", name);

    /* ggml's own dequantizer reads the same values as ours */
    float *y = malloc(rows * cols * sizeof *y), *yg = malloc(rows * cols * sizeof *yg);
    bfp_dequantize_ref(fmt, &cp, rows, cols, BFP_DTYPE_F32, y);
    ggml_dequant(fmt, blocks, rows * cols, yg);
    int same = 1; /* by value: ggml's table has no -0 */
    for (size_t i = 0; i < rows * cols; i++)
        same &= y[i] == yg[i];
    CHECK(same, "%s: ggml's dequantize_row reads our values from the blocks", name);

    /* and back, exactly */
    memset(codes2, 0xAB, sz.codes);
    memset(scales2, 0xAB, sz.scales);
    bfp_planes p2 = {codes2, scales2, NULL, &ts2};
    CHECK(bfp_ggml_to_planar(fmt, blocks, rows, cols, &p2) == BFP_OK &&
              memcmp(codes, codes2, sz.codes) == 0 && memcmp(scales, scales2, sz.scales) == 0,
          "%s: ggml round trip", name);
    bfp_const_planes cp2 = {codes2, scales2, NULL, &ts2};
    bfp_verify_report rep;
    CHECK(bfp_verify(fmt, rows, cols, BFP_DTYPE_F32, x, &cp, &cp2, NULL, 0, &rep) == BFP_OK &&
              rep.identical,
          "%s: planes from ggml blocks verify clean", name);

    /* a hand-made block: element j low, j + half high */
    memset(blocks, 0, bytes);
    if (fmt == BFP_MXFP4) {
        blocks[0] = 127;
        blocks[1 + 3] = 0x2 | 0x5 << 4; /* element 3 = 1.0, element 19 = 3.0 */
    } else {
        blocks[2] = 0x38;               /* sub-block 2 scale 1.0 */
        blocks[4 + 16 + 3] = 0x2 | 0xC << 4; /* element 35 = 1.0, element 43 = -2.0 */
    }
    bfp_ggml_to_planar(fmt, blocks, rows, cols, &p2);
    if (fmt == BFP_MXFP4)
        CHECK(bfp_get_code(codes2, 3, 4) == 0x2 && bfp_get_code(codes2, 19, 4) == 0x5 &&
                  bfp_get_code(codes2, 4, 4) == 0 && scales2[0] == 127,
              "mxfp4: qs[j] holds elements j (low) and j+16 (high)");
    else
        CHECK(bfp_get_code(codes2, 35, 4) == 0x2 && bfp_get_code(codes2, 43, 4) == 0xC &&
                  bfp_get_code(codes2, 36, 4) == 0 && scales2[2] == 0x38 && scales2[0] == 0,
              "nvfp4: sub-block s, qs[8s+j] holds elements 16s+j (low) and 16s+j+8 (high)");

    free(x);
    free(codes);
    free(scales);
    free(codes2);
    free(scales2);
    free(blocks);
    free(y);
    free(yg);
}

static void test_ggml_errors(void)
{
    size_t bytes = 0;
    uint8_t buf[64] = {0};
    bfp_planes p = {buf, buf, NULL, NULL};
    CHECK(bfp_ggml_size(BFP_MXFP8_E4M3, 1, 32, &bytes) == BFP_ERR_UNSUPPORTED, "ggml mxfp8");
    CHECK(bfp_ggml_size(BFP_HIF4, 1, 64, &bytes) == BFP_ERR_UNSUPPORTED, "ggml hif4");
    CHECK(bfp_ggml_size((bfp_format)77, 1, 64, &bytes) == BFP_ERR_FORMAT, "ggml unknown");
    CHECK(bfp_ggml_size(BFP_MXFP4, 1, 48, &bytes) == BFP_ERR_SHAPE, "ggml mxfp4 cols 48");
    CHECK(bfp_ggml_size(BFP_NVFP4, 1, 32, &bytes) == BFP_ERR_SHAPE, "ggml nvfp4 cols 32");
    CHECK(bfp_ggml_size(BFP_MXFP4, 0, 32, &bytes) == BFP_ERR_SHAPE, "ggml zero rows");
    CHECK(bfp_ggml_size(BFP_MXFP4, 1, 32, NULL) == BFP_ERR_ARG, "ggml NULL size");
    CHECK(bfp_ggml_to_planar(BFP_MXFP4, NULL, 1, 32, &p) == BFP_ERR_ARG, "ggml NULL blocks");
    CHECK(bfp_planar_to_ggml(BFP_MXFP4, NULL, 1, 32, buf) == BFP_ERR_ARG, "ggml NULL planes");
    CHECK(bfp_ggml_to_planar(BFP_MXFP6_E2M3, buf, 1, 32, &p) == BFP_ERR_UNSUPPORTED,
          "ggml mxfp6 to planar");
}

static void test_hif4_golden(void)
{
    const size_t rows = 3, cols = 200; /* a partial last block */
    float *x = make_input(rows * cols);
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(BFP_HIF4, rows, cols, &sz);
    size_t nb = rows * sz.blocks_per_row;
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales), *back = malloc(sz.scales);
    uint8_t *ea = malloc(nb), *eb = malloc(nb), *ec = malloc(2 * nb);
    x[5] = NAN; /* a NaN block's word too */
    bfp_planes p = {codes, scales, NULL, NULL};
    bfp_quantize_ref(BFP_HIF4, BFP_DTYPE_F32, x, rows, cols, NULL, &p, NULL);
    CHECK(bfp_hif4_split_scales(scales, nb, ea, eb, ec, NULL) == BFP_OK &&
              bfp_hif4_golden_to_scales(ea, eb, ec, nb, back) == BFP_OK &&
              memcmp(scales, back, sz.scales) == 0,
          "hif4: golden_ea/eb/ec round-trip to the scale words");
    CHECK(ea[0] == 0xFF && scales[0] == 0xFF, "hif4: the NaN block's word");
    /* random words too, every bit */
    for (size_t i = 0; i < sz.scales; i++)
        scales[i] = (uint8_t)rnd();
    bfp_hif4_split_scales(scales, nb, ea, eb, ec, NULL);
    bfp_hif4_golden_to_scales(ea, eb, ec, nb, back);
    CHECK(memcmp(scales, back, sz.scales) == 0, "hif4: any words round-trip");
    CHECK(bfp_hif4_golden_to_scales(NULL, eb, ec, nb, back) == BFP_ERR_ARG &&
              bfp_hif4_golden_to_scales(NULL, NULL, NULL, 0, NULL) == BFP_OK,
          "hif4: golden_to_scales arguments");
    free(x);
    free(codes);
    free(scales);
    free(back);
    free(ea);
    free(eb);
    free(ec);
}

static void test_swizzled(void)
{
    const size_t shapes[][2] = {{1, 32}, {130, 96}, {128, 128}, {257, 160}};
    int ok_fmt = 0, n_fmt = 0;
    for (int k = 0; k < bfp_format_count(); k++) {
        const bfp_format_info *f = bfp_format_at(k);
        if (f->scale_bytes != 1)
            continue;
        n_fmt++;
        int ok = 1;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            size_t rows = shapes[s][0], cols = shapes[s][1];
            bfp_plane_sizes sz;
            bfp_plane_sizes_for(f->id, rows, cols, &sz);
            float *x = make_input(rows * cols);
            uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales);
            uint8_t *meta = sz.meta ? malloc(sz.meta) : NULL, *back = malloc(sz.scales);
            float ts = 1;
            bfp_planes p = {codes, scales, meta, &ts};
            bfp_quantize_ref(f->id, BFP_DTYPE_F32, x, rows, cols, NULL, &p, NULL);
            size_t n = bfp_swizzled_scales_size(rows, sz.blocks_per_row);
            uint8_t *sw = malloc(n);
            ok &= n == ((rows + 127) / 128) * ((sz.blocks_per_row + 3) / 4) * 512;
            ok &= bfp_scales_to_swizzled(scales, rows, sz.blocks_per_row, sw) == BFP_OK;
            ok &= bfp_scales_from_swizzled(sw, rows, sz.blocks_per_row, back) == BFP_OK;
            ok &= memcmp(scales, back, sz.scales) == 0;
            /* scale (r, c) at tile byte (r % 32) * 16 + (r / 32) % 4 * 4 + c % 4 */
            size_t r = rows - 1, c = sz.blocks_per_row - 1, ct = (sz.blocks_per_row + 3) / 4;
            ok &= sw[((r / 128) * ct + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4] ==
                  scales[r * sz.blocks_per_row + c];
            bfp_const_planes a = {codes, scales, meta, &ts}, b = {codes, back, meta, &ts};
            bfp_verify_report rep;
            ok &= bfp_verify(f->id, rows, cols, BFP_DTYPE_F32, x, &a, &b, NULL, 0, &rep) == BFP_OK &&
                  rep.identical;
            free(x);
            free(codes);
            free(scales);
            free(meta);
            free(back);
            free(sw);
        }
        CHECK(ok, "%s: swizzled scales round-trip and verify clean", f->name);
        ok_fmt += ok;
    }
    CHECK(ok_fmt == n_fmt && n_fmt == 21, "swizzled: every one-byte-scale format (%d)", n_fmt);
}

int main(void)
{
    test_ggml(BFP_MXFP4, 3, 96);
    test_ggml(BFP_NVFP4, 3, 128);
    test_ggml(BFP_MXFP4, 1, 32);
    test_ggml(BFP_NVFP4, 2, 64);
    test_ggml_errors();
    test_hif4_golden();
    test_swizzled();
    return check_summary("test_verify_layouts");
}

/* test_golden.c - hand-worked vectors from the seeds and SPEC: the NVFP4
 * tutorial, the MX+ paper block, MX++, HiF4 blocks, flushed, all-zero and
 * NaN/Inf blocks, scale modes. Every expected byte here was worked out by
 * hand from SPEC.md (see the comments), not produced by the library. */
#include "bfp.h"
#include "check.h"

#include <math.h>
#include <string.h>

static const float tutorial[32] = {
    0.12f,  -0.05f, 0.31f,  0.02f,  -0.18f, 0.07f,   0.00f,  -0.09f,
    0.15f,  -0.22f, 0.04f,  0.11f,  -0.01f, 0.26f,   -0.13f, 0.08f,
    0.010f, -0.030f, 0.045f, 0.005f, -0.020f, 0.015f, -0.040f, 0.025f,
    0.000f, 0.035f, -0.008f, 0.012f, -0.050f, 0.018f, 0.003f, -0.027f};

static void test_nvfp4_tutorial(void)
{
    static const uint8_t want[16] = {0xA4, 0x17, 0x3D, 0xB0, 0xE5, 0x42, 0x78, 0x3D,
                                     0xE2, 0x17, 0x4C, 0x5E, 0x60, 0x3A, 0x4F, 0xD1};
    uint8_t codes[16], scales[2];
    float ts = 0, y[32];
    bfp_planes p = {codes, scales, NULL, &ts};
    CHECK(bfp_quantize_f32(BFP_NVFP4, tutorial, 1, 32, NULL, &p, NULL) == BFP_OK, "nvfp4");
    CHECK(memcmp(codes, want, 16) == 0, "nvfp4 tutorial codes");
    CHECK(scales[0] == 0x7E && scales[1] == 0x69, "nvfp4 scales %02x %02x", scales[0], scales[1]);
    CHECK(ts == 8670.9677734375f, "tensor scale %.10f", ts);
    bfp_const_planes cp = {codes, scales, NULL, &ts};
    CHECK(bfp_dequantize_to_f32(BFP_NVFP4, &cp, 1, 32, y) == BFP_OK, "nvfp4 dequant");
    CHECK(y[2] == 2688.0f / ts, "0.31 -> 6 * 448 / s_enc");
    CHECK(y[28] == -432.0f / ts, "-0.05 -> -6 * 72 / s_enc (clamped from -6.02)");
    CHECK(y[12] == 0 && signbit(y[12]), "-0.01 -> -0");

    /* NVFP4+: the block max keeps 3 mantissa bits, 4 * (1 + m/8).
     * Block 0: 0.31 -> t/s = 6.0 = 4 * 1.5 -> m = 4, code 0x4 at index 2.
     * Block 1: -0.05 -> t = -433.548.., t/72 = -6.0215 -> /4 = 1.5054 -> m = 4,
     * code 0xC at index 12. Every other code as NVFP4. */
    uint8_t c2[16], s2[2], meta[2];
    float ts2;
    bfp_planes p2 = {c2, s2, meta, &ts2};
    CHECK(bfp_quantize_f32(BFP_NVFP4_PLUS, tutorial, 1, 32, NULL, &p2, NULL) == BFP_OK, "nvfp4+");
    CHECK(meta[0] == 2 && meta[1] == 12, "nvfp4+ meta %d %d", meta[0], meta[1]);
    uint8_t want2[16];
    memcpy(want2, want, 16);
    want2[1] = (uint8_t)((want2[1] & 0xF0) | 0x4);
    want2[14] = (uint8_t)((want2[14] & 0xF0) | 0xC);
    CHECK(memcmp(c2, want2, 16) == 0, "nvfp4+ codes");
    CHECK(s2[0] == 0x7E && s2[1] == 0x69 && ts2 == ts, "nvfp4+ scales as nvfp4");
}

/* Paper Figure 6: [-0.39, -9.84, -0.20, 0.99], shared_exp = floor(log2 9.84) - 2 = 1. */
static void test_mxplus_paper_block(void)
{
    const float x[4] = {-0.39f, -9.84f, -0.20f, 0.99f};
    uint8_t codes[2], scale, meta;
    float y[4];
    bfp_planes p = {codes, &scale, &meta, NULL};
    bfp_const_planes cp = {codes, &scale, &meta, NULL};

    /* MXFP4: /2 -> -0.195 (-0), -4.92 (-4), -0.1 (-0), 0.495 (0.5) */
    CHECK(bfp_quantize_f32(BFP_MXFP4, x, 1, 4, NULL, &p, NULL) == BFP_OK, "mxfp4");
    CHECK(scale == 128 && codes[0] == 0xE8 && codes[1] == 0x18, "mxfp4 %02x %02x %02x",
          scale, codes[0], codes[1]);

    /* MXFP4+: BM -4.92 -> 4 * (1 + 2/8) = 5 -> -10 (0b1010); meta = index 1 */
    CHECK(bfp_quantize_f32(BFP_MXFP4_PLUS, x, 1, 4, NULL, &p, NULL) == BFP_OK, "mxfp4+");
    CHECK(scale == 128 && codes[0] == 0xA8 && codes[1] == 0x18 && meta == 0x01,
          "mxfp4+ %02x %02x %02x %02x", scale, codes[0], codes[1], meta);
    CHECK(bfp_dequantize_to_f32(BFP_MXFP4_PLUS, &cp, 1, 4, y) == BFP_OK, "deq");
    CHECK(y[1] == -10.0f && y[3] == 1.0f, "mxfp4+ values %g %g", y[1], y[3]);

    /* MXFP4++: max2 = 0.99, e = -1 - 2 + 1 = -2, delta = 3 (meta 0x61);
     * -0.39/0.25 = -1.56 -> -1.5 (0xB), -0.8 -> -1 (0xA), 3.96 -> 4 (0x6) */
    CHECK(bfp_quantize_f32(BFP_MXFP4_PP, x, 1, 4, NULL, &p, NULL) == BFP_OK, "mxfp4++");
    CHECK(scale == 128 && codes[0] == 0xAB && codes[1] == 0x6A && meta == 0x61,
          "mxfp4++ %02x %02x %02x %02x", scale, codes[0], codes[1], meta);
    CHECK(bfp_dequantize_to_f32(BFP_MXFP4_PP, &cp, 1, 4, y) == BFP_OK, "deq");
    CHECK(y[0] == -0.375f && y[1] == -10.0f && y[2] == -0.25f && y[3] == 1.0f,
          "mxfp4++ values %g %g %g %g", y[0], y[1], y[2], y[3]);

    /* BM split for matrix units (SPEC 5.1): m = 2, um = 0b1010;
     * BM_H = -4 * (um >> 2) / 2 = -4 and BM_L = -4 * (um & 3) / 8 = -1 are both E2M1
     * values and sum to the stored BM / 2^shared_exp = -5. */
    unsigned um = 8 | (codes[0] >> 4 & 7);
    double bm_h = -4.0 * (um >> 2) / 2, bm_l = -4.0 * (um & 3) / 8;
    CHECK(bm_h + bm_l == -5.0 && bfp_elem_encode(BFP_ELEM_E2M1, bm_h) == 0xE &&
              bfp_elem_encode(BFP_ELEM_E2M1, bm_l) == 0xA, "BM split %g %g", bm_h, bm_l);
}

/* HiF4, SPEC 4: one outlier of 10 among small values. Vmax*C = 10 * 0.142578125
 * = 1.42578125 -> BF16 tie -> 1.421875 -> E6M2 1.5 (code 48<<2|2 = 0xC2);
 * REC = BF16(1/1.5) = 0.66796875; 10*REC >= 4 (E1_8), 10*REC/2 >= 2 (E1_16);
 * t = 6.68 -> k = 7 -> 1.75 * 1.5 * 4 = 10.5. */
static void test_hif4_outlier(void)
{
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = 0.01f * (float)(i % 7);
    x[5] = 10.0f;
    uint8_t codes[32], sc[4];
    bfp_planes p = {codes, sc, NULL, NULL};
    bfp_const_planes cp = {codes, sc, NULL, NULL};
    CHECK(bfp_quantize_f32(BFP_HIF4, x, 1, 64, NULL, &p, NULL) == BFP_OK, "hif4");
    CHECK(sc[0] == 0xC2 && sc[1] == 0x01 && sc[2] == 0x02 && sc[3] == 0x00,
          "hif4 word %02x %02x %02x %02x", sc[0], sc[1], sc[2], sc[3]);
    CHECK((codes[2] >> 4) == 0x7, "outlier code 7");
    CHECK(bfp_dequantize_to_f32(BFP_HIF4, &cp, 1, 64, y) == BFP_OK && y[5] == 10.5f,
          "10 -> %g", y[5]);

    uint8_t ea, eb, ec[2];
    uint16_t s16[16];
    CHECK(bfp_hif4_split_scales(sc, 1, &ea, &eb, ec, s16) == BFP_OK, "split");
    CHECK(ea == 0xC2 && eb == 0x01 && ec[0] == 0x02 && ec[1] == 0, "golden ea/eb/ec");
    /* per-4 factor: REC * 2^-E1_8 * 2^-E1_16 */
    CHECK(bfp_bf16_to_f32(s16[1]) == 0.66796875f / 4 && bfp_bf16_to_f32(s16[0]) == 0.66796875f / 2 &&
              bfp_bf16_to_f32(s16[2]) == 0.66796875f,
          "golden scale %g %g %g", bfp_bf16_to_f32(s16[0]), bfp_bf16_to_f32(s16[1]),
          bfp_bf16_to_f32(s16[2]));
}

/* HiF4: all ones. SF = BF16(0.142578125) -> E6M2 RNE: 1.140625 > 1.125 -> 1.25 * 2^-3
 * (code 45<<2|1 = 0xB5); REC = 0.80078125 * 8 = 6.40625; every E1_8 and E1_16 set;
 * t = 6.40625 -> k = 6 -> 1.5 * 0.15625 * 4 = 0.9375. */
static void test_hif4_flat(void)
{
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = 1.0f;
    uint8_t codes[32], sc[4];
    bfp_planes p = {codes, sc, NULL, NULL};
    bfp_const_planes cp = {codes, sc, NULL, NULL};
    CHECK(bfp_quantize_f32(BFP_HIF4, x, 1, 64, NULL, &p, NULL) == BFP_OK, "hif4 flat");
    CHECK(sc[0] == 0xB5 && sc[1] == 0xFF && sc[2] == 0xFF && sc[3] == 0xFF, "flat word");
    CHECK(codes[0] == 0x66 && codes[31] == 0x66, "flat codes %02x", codes[0]);
    CHECK(bfp_dequantize_to_f32(BFP_HIF4, &cp, 1, 64, y) == BFP_OK && y[63] == 0.9375f,
          "1 -> %g", y[63]);
}

/* HiF4 ties: Vmax = 7: 7 * 0.142578125 = 0.998046875, a BF16 tie that rounds up
 * to 1.0, so E6M2 = 1 (0xC0) and REC = 1. 0.625 in an otherwise empty group has
 * t = 0.625 * 4 = 2.5: ties away give k = 3 (0.75), RNE gives k = 2 (0.5). */
static void test_hif4_tie(void)
{
    float x[64] = {0}, y[64];
    x[0] = 7.0f;
    x[20] = 0.625f;
    x[21] = -0.625f;
    uint8_t codes[32], sc[4];
    bfp_planes p = {codes, sc, NULL, NULL};
    bfp_const_planes cp = {codes, sc, NULL, NULL};
    CHECK(bfp_quantize_f32(BFP_HIF4, x, 1, 64, NULL, &p, NULL) == BFP_OK, "hif4 tie");
    CHECK(sc[0] == 0xC0, "E6M2 0x%02x", sc[0]);
    CHECK(codes[10] == 0xB3, "ties away: 3 and -3 (0xB) got %02x", codes[10]);
    CHECK(bfp_dequantize_to_f32(BFP_HIF4, &cp, 1, 64, y) == BFP_OK && y[20] == 0.75f &&
              y[21] == -0.75f && y[0] == 7.0f,
          "%g %g %g", y[20], y[21], y[0]);
    bfp_options o;
    bfp_options_init(&o);
    o.rounding = BFP_ROUND_NEAREST_EVEN;
    CHECK(bfp_quantize_f32(BFP_HIF4, x, 1, 64, &o, &p, NULL) == BFP_OK && codes[10] == 0xA2,
          "RNE option: 2 and -2, got %02x", codes[10]);
}

static void test_flush_and_zero(void)
{
    /* MX+ flushes when floor(log2 BM) <= -127 + emax: 2^-125 with emax 2 */
    float x[32] = {0};
    x[3] = ldexpf(1.0f, -125);
    x[4] = -ldexpf(1.0f, -126);
    uint8_t codes[32], scale, meta;
    bfp_stats st;
    bfp_planes p = {codes, &scale, &meta, NULL};
    CHECK(bfp_quantize_f32(BFP_MXFP4_PLUS, x, 1, 32, NULL, &p, &st) == BFP_OK, "flush");
    CHECK(scale == 0 && meta == 0 && codes[1] == 0 && codes[2] == 0 && st.flushed_blocks == 1,
          "mxfp4+ flushed: scale %02x meta %02x", scale, meta);
    /* plain MX keeps it: shared_exp clamps to -127, 2^-125 / 2^-127 = 4 (0x6),
     * -2^-126 / 2^-127 = -2 (0xC) */
    CHECK(bfp_quantize_f32(BFP_MXFP4, x, 1, 32, NULL, &p, NULL) == BFP_OK, "mx");
    CHECK(scale == 0 && codes[1] == 0x60 && codes[2] == 0x0C, "mxfp4 at -127: %02x %02x",
          codes[1], codes[2]);
    /* one binade higher MX+ is not flushed: scale code 1 */
    x[3] = ldexpf(1.0f, -124);
    CHECK(bfp_quantize_f32(BFP_MXFP4_PLUS, x, 1, 32, NULL, &p, &st) == BFP_OK, "no flush");
    CHECK(scale == 1 && meta == 3 && st.flushed_blocks == 0, "scale %02x meta %02x", scale, meta);

    /* all-zero blocks in every format */
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        float z[64] = {0};
        uint8_t zc[64], zs[4], zm[4] = {9, 9, 9, 9};
        float ts = 0;
        bfp_planes zp = {zc, zs, zm, &ts};
        CHECK(bfp_quantize_f32(f->id, z, 1, 64, NULL, &zp, NULL) == BFP_OK, "%s zero", f->name);
        int zero_codes = 1;
        for (int k = 0; k < 64 * f->elem_bits / 8; k++)
            zero_codes &= zc[k] == 0;
        CHECK(zero_codes, "%s zero block codes", f->name);
        CHECK(zs[0] == 0 && (f->meta_bytes == 0 || zm[0] == 0), "%s zero scale %02x", f->name, zs[0]);
        if (f->has_tensor_scale)
            CHECK(ts == 1.0f, "%s all-zero tensor scale is 1", f->name);
    }
}

static void test_nonfinite_blocks(void)
{
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        for (int kind = 0; kind < 3; kind++) {
            float x[128], y[128];
            for (int k = 0; k < 128; k++)
                x[k] = 0.5f + (float)k;
            x[1] = kind == 0 ? NAN : kind == 1 ? INFINITY : -INFINITY;
            uint8_t c[128], s[8], m[8];
            float ts = 0;
            bfp_stats st;
            bfp_planes p = {c, s, m, &ts};
            bfp_const_planes cp = {c, s, m, &ts};
            CHECK(bfp_quantize_f32(f->id, x, 1, 128, NULL, &p, &st) == BFP_OK, "%s", f->name);
            unsigned want = f->scale == BFP_SCALE_UE4M3 ? 0x7F : 0xFF;
            CHECK(s[0] == want && st.nonfinite_blocks == 1, "%s NaN scale %02x count %zu",
                  f->name, s[0], st.nonfinite_blocks);
            if (f->scale == BFP_SCALE_HIF4)
                CHECK(s[1] == 0 && s[2] == 0 && s[3] == 0, "%s NaN word flags 0", f->name);
            CHECK(c[0] == 0 && (f->meta_bytes == 0 || m[0] == 0), "%s codes/meta 0", f->name);
            if (f->has_tensor_scale) /* amax over finite values: 127.5 */
                CHECK(ts == 2688.0f / 127.5f, "%s finite amax", f->name);
            CHECK(bfp_dequantize_to_f32(f->id, &cp, 1, 128, y) == BFP_OK, "deq");
            CHECK(isnan(y[0]) && isnan(y[f->block - 1]) && !isnan(y[f->block]),
                  "%s NaN block decodes to NaN, next block finite", f->name);
        }
    }
}

static void test_scale_modes(void)
{
    struct { float amax; bfp_scale_mode mode; int se; } cases[] = {
        {6.5f, BFP_SCALE_FLOOR, 0}, {6.5f, BFP_SCALE_CEIL, 1}, {4.0f, BFP_SCALE_CEIL, 0},
        {6.5f, BFP_SCALE_EVEN, 0},  /* 1.625 -> 1.5 at 1 mantissa bit */
        {7.0f, BFP_SCALE_EVEN, 1},  /* 1.75 rounds half-up to 2.0 */
        {6.5f, BFP_SCALE_RCEIL, 1}, {6.0f, BFP_SCALE_RCEIL, 0}, {3.0f, BFP_SCALE_RCEIL, -1},
        {0.0f, BFP_SCALE_CEIL, -127},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        float x[32] = {0};
        x[7] = -cases[k].amax;
        uint8_t c[16], s;
        bfp_options o;
        bfp_options_init(&o);
        o.scale_mode = cases[k].mode;
        bfp_planes p = {c, &s, NULL, NULL};
        CHECK(bfp_quantize_f32(BFP_MXFP4, x, 1, 32, &o, &p, NULL) == BFP_OK, "mode");
        CHECK((int)s - 127 == cases[k].se, "amax %g mode %d: se %d want %d", cases[k].amax,
              cases[k].mode, (int)s - 127, cases[k].se);
    }
}

static void test_signed_zero_and_partial(void)
{
    /* 5 elements: a partial block; -0.0 keeps its sign bit (0x8) */
    const float x[5] = {-0.0f, 1.0f, -0.01f, 3.0f, 6.0f};
    uint8_t c[3] = {0xFF, 0xFF, 0xFF}, s;
    bfp_planes p = {c, &s, NULL, NULL};
    CHECK(bfp_quantize_f32(BFP_MXFP4, x, 1, 5, NULL, &p, NULL) == BFP_OK, "partial");
    /* se = 0: codes 8, 2, 8, 5, 7; the unused high nibble of byte 2 is 0 */
    CHECK(s == 127 && c[0] == 0x28 && c[1] == 0x58 && c[2] == 0x07, "%02x %02x %02x %02x", s,
          c[0], c[1], c[2]);
}

int main(void)
{
    test_nvfp4_tutorial();
    test_mxplus_paper_block();
    test_hif4_outlier();
    test_hif4_flat();
    test_hif4_tie();
    test_flush_and_zero();
    test_nonfinite_blocks();
    test_scale_modes();
    test_signed_zero_and_partial();
    return check_summary("test_golden");
}

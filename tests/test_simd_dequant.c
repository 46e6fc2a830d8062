/* test_simd_dequant.c - bfp_dequantize (the CPU kernels BFP_ISA selects)
 * gives the reference decoder's float32 and bfloat16 bits exactly: planes
 * from real quantization and planes of arbitrary bytes (NaN scales, special
 * codes, bad block-max indices, impossible tensor scales), partial blocks,
 * odd lengths, outputs 1 to 3 bytes off alignment, and argument errors. */
#include "test_simd_util.h"

static const size_t shapes[][2] = {
    {1, 1},  {1, 5},  {1, 16}, {1, 17}, {2, 31}, {1, 32},  {3, 33},  {2, 63},   {2, 64},
    {3, 65}, {2, 96}, {4, 100}, {3, 127}, {2, 128}, {5, 257}, {3, 1000}, {1, 4099},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Decode both ways into buffers `skew` bytes off alignment; 1 if identical. */
static int dequantize_matches(bfp_format fmt, const simd_planes *q, size_t rows, size_t cols,
                              bfp_dtype dt, size_t skew)
{
    size_t n = rows * cols * bfp_dtype_size(dt);
    unsigned char *a = malloc(n + 8), *b = malloc(n + 8);
    memset(a, 0xA5, n + 8);
    memset(b, 0x5A, n + 8);
    bfp_const_planes in = simd_const(q);
    bfp_status ra = bfp_dequantize(fmt, &in, rows, cols, dt, a + skew);
    bfp_status rb = bfp_dequantize_ref(fmt, &in, rows, cols, dt, b + skew);
    int ok = ra == rb;
    if (ok && ra == BFP_OK) {
        long d = simd_diff(a + skew, b + skew, n);
        if (d >= 0) {
            size_t es = bfp_dtype_size(dt), i = (size_t)d / es;
            uint32_t va = 0, vb = 0;
            memcpy(&va, a + skew + i * es, es);
            memcpy(&vb, b + skew + i * es, es);
            fprintf(stderr, "  %s %zux%zu to %s: value %zu (row %zu col %zu) %08x vs %08x\n",
                    bfp_format_get(fmt)->name, rows, cols, bfp_dtype_name(dt), i, i / cols,
                    i % cols, va, vb);
            ok = 0;
        }
        ok &= a[skew + n] == 0xA5; /* nothing written past the end */
    }
    free(a);
    free(b);
    return ok;
}

/* Planes of real quantized data (the reference's). */
static void test_roundtrip(void)
{
    simd_rng r = {0xC0FFEE};
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        bfp_format fmt = bfp_format_at(fi)->id;
        int bad = 0;
        for (size_t s = 0; s < NSHAPES && bad < 3; s++) {
            size_t rows = shapes[s][0], cols = shapes[s][1];
            float *x = malloc(rows * cols * sizeof *x);
            simd_fill_f32(&r, x, rows * cols);
            simd_planes q;
            simd_planes_alloc(&q, fmt, rows, cols, s % 3, 0);
            bfp_quantize_ref(fmt, BFP_DTYPE_F32, x, rows, cols, NULL, &q.p, NULL);
            for (int d = 0; d < 2; d++) {
                bfp_dtype dt = d ? BFP_DTYPE_BF16 : BFP_DTYPE_F32;
                int ok = dequantize_matches(fmt, &q, rows, cols, dt, (s + (size_t)d) % 4);
                CHECK(ok, "%s %zux%zu to %s", bfp_format_at(fi)->name, rows, cols,
                      bfp_dtype_name(dt));
                bad += !ok;
            }
            simd_planes_free(&q);
            free(x);
        }
    }
}

/* A scale byte that is often one of the format's special values. */
static uint8_t pick_scale(simd_rng *r, const bfp_format_info *f)
{
    static const uint8_t special[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0x02, 0x03, 0xFE, 0x7E, 0xFF};
    uint32_t k = rng_below(r, 8);
    if (k == 0)
        return special[rng_below(r, sizeof special)];
    if (k < 3)
        return (uint8_t)rng_u64(r);
    if (f->scale == BFP_SCALE_UE4M3)
        return (uint8_t)(0x20 + rng_below(r, 0x50));
    return (uint8_t)(100 + rng_below(r, 56));
}

/* Planes of arbitrary bytes: every decoder path, including impossible ones. */
static void test_random_planes(void)
{
    simd_rng r = {0xBADC0DE};
    static const float tscales[] = {1.0f, 8670.9677734375f, 0.0f, -1.0f, INFINITY, NAN,
                                    1e-30f, 3.0e38f, 1.0e-45f};
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        const bfp_format_info *f = bfp_format_at(fi);
        int bad = 0;
        for (size_t s = 0; s < NSHAPES && bad < 3; s++) {
            size_t rows = shapes[s][0], cols = shapes[s][1];
            simd_planes q;
            simd_planes_alloc(&q, f->id, rows, cols, (s + 1) % 3, 0);
            for (size_t i = 0; i < q.sz.codes; i++)
                q.p.codes[i] = rng_below(&r, 4) ? (uint8_t)rng_u64(&r) : 0;
            for (size_t i = 0; i < q.sz.scales; i++)
                q.p.scales[i] = pick_scale(&r, f);
            if (f->scale == BFP_SCALE_HIF4) /* some clean NaN words */
                for (size_t i = 0; i + 4 <= q.sz.scales; i += 4)
                    if (rng_below(&r, 8) == 0)
                        memcpy(q.p.scales + i, "\xFF\0\0\0", 4);
            for (size_t i = 0; i < q.sz.meta; i++) {
                uint32_t k = rng_below(&r, 4);
                q.p.meta[i] = k == 0 ? (uint8_t)rng_u64(&r)
                                     : (uint8_t)(k == 1 ? 0 : rng_below(&r, (uint32_t)f->block));
            }
            if (f->has_tensor_scale)
                q.ts = tscales[rng_below(&r, 2) ? 0 : rng_below(&r, sizeof tscales / sizeof tscales[0])];
            for (int d = 0; d < 2; d++) {
                bfp_dtype dt = d ? BFP_DTYPE_BF16 : BFP_DTYPE_F32;
                int ok = dequantize_matches(f->id, &q, rows, cols, dt, (s + 2 * (size_t)d) % 4);
                CHECK(ok, "%s random planes %zux%zu to %s", f->name, rows, cols, bfp_dtype_name(dt));
                bad += !ok;
            }
            simd_planes_free(&q);
        }
    }
}

/* Every code of every format under each scale byte of scales[] (the first
 * byte of HiF4's scale word), and every MX+ / NVFP4+ index, in one row per
 * scale. */
static void all_codes_under(const uint8_t *scales, size_t nscales, const char *what)
{
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        const bfp_format_info *f = bfp_format_at(fi);
        size_t ncodes = (size_t)1 << f->elem_bits, cols = (size_t)f->block * 8;
        size_t rows = nscales;
        simd_planes q;
        simd_planes_alloc(&q, f->id, rows, cols, 0, 0);
        for (size_t rr = 0; rr < rows; rr++) {
            for (size_t i = 0; i < cols; i++) { /* code i mod 2^bits, LSB-first */
                unsigned c = (unsigned)((i * 7 + rr) % ncodes);
                size_t bit = i * (size_t)f->elem_bits;
                for (int k = 0; k < f->elem_bits; k++, bit++) {
                    uint8_t *p = q.p.codes + rr * q.sz.code_row_bytes + bit / 8;
                    *p = (uint8_t)(((c >> k) & 1) ? *p | (1u << (bit % 8)) : *p & ~(1u << (bit % 8)));
                }
            }
            for (size_t b = 0; b < q.sz.blocks_per_row; b++) {
                uint8_t *s = q.p.scales + (rr * q.sz.blocks_per_row + b) * (size_t)f->scale_bytes;
                s[0] = scales[rr];
                for (int k = 1; k < f->scale_bytes; k++)
                    s[k] = (uint8_t)(b * 37 + (size_t)k * 11 + rr);
                if (q.p.meta)
                    q.p.meta[rr * q.sz.blocks_per_row + b] =
                        (uint8_t)(f->family == BFP_FAMILY_MX_PP ? (b % (size_t)f->block) | (b % 8) << 5
                                                                : b % (size_t)f->block);
            }
        }
        q.ts = 1.0f;
        for (int d = 0; d < 2; d++) {
            bfp_dtype dt = d ? BFP_DTYPE_BF16 : BFP_DTYPE_F32;
            CHECK(dequantize_matches(f->id, &q, rows, cols, dt, 0), "%s all codes %s to %s",
                  f->name, what, bfp_dtype_name(dt));
        }
        simd_planes_free(&q);
    }
}

/* Normal, extreme and NaN scales. */
static void test_all_codes(void)
{
    static const uint8_t scales[] = {127, 0, 1, 2, 3, 64, 100, 0x7E, 0x7F, 0x80, 0x81,
                                     130, 200, 253, 254, 0xFF};
    all_codes_under(scales, sizeof scales, "");
}

/* Every scale byte: the kernels decode a block one way while code value
 * times scale stays a normal number of the output type and another way
 * past that, at a boundary that depends on the element type (and, for MX++,
 * on the block's exponent delta). */
static void test_every_scale(void)
{
    uint8_t scales[256];
    for (int i = 0; i < 256; i++)
        scales[i] = (uint8_t)i;
    all_codes_under(scales, 256, "under every scale");
}

static void test_errors(void)
{
    simd_planes q;
    simd_planes_alloc(&q, BFP_NVFP4_PLUS, 2, 32, 0, 0);
    float out[64];
    bfp_const_planes ok = simd_const(&q), nometa = ok, nots = ok, noscales = ok;
    nometa.meta = NULL;
    nots.tensor_scale = NULL;
    noscales.scales = NULL;
    struct {
        bfp_format f;
        const bfp_const_planes *in;
        size_t rows, cols;
        bfp_dtype d;
        void *dst;
    } cases[] = {
        {(bfp_format)0, &ok, 2, 32, BFP_DTYPE_F32, out},
        {BFP_NVFP4_PLUS, &ok, 0, 32, BFP_DTYPE_F32, out},
        {BFP_NVFP4_PLUS, &ok, 2, 32, (bfp_dtype)0, out},
        {BFP_NVFP4_PLUS, &ok, 2, 32, BFP_DTYPE_F32, NULL},
        {BFP_NVFP4_PLUS, NULL, 2, 32, BFP_DTYPE_F32, out},
        {BFP_NVFP4_PLUS, &nometa, 2, 32, BFP_DTYPE_F32, out},
        {BFP_NVFP4_PLUS, &nots, 2, 32, BFP_DTYPE_F32, out},
        {BFP_NVFP4_PLUS, &noscales, 2, 32, BFP_DTYPE_F32, out},
        {BFP_NVFP4_PLUS, &ok, SIZE_MAX / 4, 8, BFP_DTYPE_F32, out},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bfp_status a = bfp_dequantize(cases[i].f, cases[i].in, cases[i].rows, cases[i].cols,
                                      cases[i].d, cases[i].dst);
        bfp_status b = bfp_dequantize_ref(cases[i].f, cases[i].in, cases[i].rows, cases[i].cols,
                                          cases[i].d, cases[i].dst);
        CHECK(a == b && a != BFP_OK, "error case %zu: status %d vs %d", i, a, b);
    }
    /* float16 output goes to the reference */
    q.ts = 2.0f;
    CHECK(dequantize_matches(BFP_NVFP4_PLUS, &q, 2, 32, BFP_DTYPE_F16, 1), "f16 output");
    simd_planes_free(&q);
}

int main(void)
{
    if (simd_isa_skip("test_simd_dequant"))
        return check_summary("test_simd_dequant");
    test_roundtrip();
    test_random_planes();
    test_all_codes();
    test_every_scale();
    test_errors();
    return check_summary("test_simd_dequant");
}

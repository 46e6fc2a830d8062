/* test_codecs.c - every code of every element and scale type decodes to the
 * value SPEC section 1 gives, encodes back to itself, and ties round as
 * specified. Expected values are written out here, not computed by the
 * library's own formulas. */
#include "bfp.h"
#include "check.h"
#include "minifloat.h" /* src/core: the special-code predicates */

#include <math.h>
#include <string.h>

/* Expected magnitude of a minifloat code from its fields (sign stripped). */
static double expect_float(unsigned mag, int ebits, int mbits, int bias)
{
    unsigned e = mag >> mbits, m = mag & ((1u << mbits) - 1);
    double frac = (double)m / (double)(1u << mbits);
    return e == 0 ? ldexp(frac, 1 - bias) : ldexp(1 + frac, (int)e - bias);
}

static void test_e2m1_table(void)
{
    static const double v[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (unsigned c = 0; c < 16; c++) {
        double want = (c & 8) ? -v[c & 7] : v[c & 7];
        double got = bfp_elem_decode(BFP_ELEM_E2M1, c);
        CHECK(got == want && signbit(got) == signbit(want), "e2m1 %x: %g", c, got);
    }
}

static void test_e1m2_table(void)
{
    for (unsigned c = 0; c < 16; c++) {
        double want = (double)(c & 7) / 4.0 * ((c & 8) ? -1 : 1);
        CHECK(bfp_elem_decode(BFP_ELEM_E1M2, c) == want, "e1m2 %x", c);
    }
}

typedef struct {
    bfp_elem_type t;
    int bits, ebits, mbits, bias;
    double max;
} float_type;

static const float_type float_types[] = {
    {BFP_ELEM_E2M3, 6, 2, 3, 1, 7.5},    {BFP_ELEM_E3M2, 6, 3, 2, 3, 28},
    {BFP_ELEM_E4M3, 8, 4, 3, 7, 448},    {BFP_ELEM_E5M2, 8, 5, 2, 15, 57344},
    {BFP_ELEM_E2M1, 4, 2, 1, 1, 6},      {BFP_ELEM_E1M2, 4, 1, 2, 1, 1.75},
};

static int is_special(const float_type *f, unsigned mag, int *is_inf)
{
    *is_inf = 0;
    if (f->t == BFP_ELEM_E4M3)
        return mag == 0x7F;
    if (f->t == BFP_ELEM_E5M2) {
        *is_inf = mag == 0x7C;
        return mag >= 0x7C;
    }
    return 0;
}

static void test_float_types(void)
{
    for (size_t k = 0; k < sizeof float_types / sizeof float_types[0]; k++) {
        const float_type *f = &float_types[k];
        unsigned n = 1u << f->bits, sign = n >> 1;
        double maxseen = 0;
        for (unsigned c = 0; c < n; c++) {
            unsigned mag = c & (sign - 1);
            double got = bfp_elem_decode(f->t, c);
            int inf;
            if (is_special(f, mag, &inf)) {
                CHECK(inf ? isinf(got) : isnan(got), "type %d code %x special", f->t, c);
                continue;
            }
            double want = expect_float(mag, f->ebits, f->mbits, f->bias);
            if (c & sign)
                want = -want;
            CHECK(got == want && signbit(got) == signbit(want), "type %d code %x: %g != %g",
                  f->t, c, got, want);
            CHECK(bfp_elem_encode(f->t, got) == c, "type %d code %x does not encode back",
                  f->t, c);
            maxseen = fmax(maxseen, fabs(got));
            /* ties: the midpoint to the next code rounds to the even code */
            if (!(c & sign) && mag + 1 < sign && !is_special(f, mag + 1, &inf)) {
                double next = expect_float(mag + 1, f->ebits, f->mbits, f->bias);
                double mid = (got + next) / 2;
                unsigned even = (mag & 1) ? mag + 1 : mag;
                CHECK(bfp_elem_encode(f->t, mid) == even, "type %d tie %g", f->t, mid);
                CHECK(bfp_elem_encode(f->t, nextafter(mid, 0)) == mag, "below tie");
                CHECK(bfp_elem_encode(f->t, nextafter(mid, INFINITY)) == mag + 1, "above tie");
                CHECK(bfp_elem_encode(f->t, -mid) == (even | sign), "negative tie");
            }
        }
        CHECK(maxseen == f->max, "type %d max %g != %g", f->t, maxseen, f->max);
        /* saturation keeps the sign; -0 keeps the sign bit */
        double big = f->max * 4;
        CHECK(bfp_elem_decode(f->t, bfp_elem_encode(f->t, big)) == f->max, "saturate +");
        CHECK(bfp_elem_decode(f->t, bfp_elem_encode(f->t, -big)) == -f->max, "saturate -");
        CHECK(bfp_elem_encode(f->t, -0.0) == sign, "type %d -0", f->t);
        CHECK(bfp_elem_encode(f->t, -1e-30) == sign, "type %d tiny negative", f->t);
    }
}

static void test_int_types(void)
{
    for (unsigned c = 0; c < 256; c++) {
        int k = c < 128 ? (int)c : (int)c - 256;
        CHECK(bfp_elem_decode(BFP_ELEM_INT8, c) == k / 64.0, "int8 %x", c);
        if (c != 0x80)
            CHECK(bfp_elem_encode(BFP_ELEM_INT8, k / 64.0) == c, "int8 back %x", c);
    }
    for (unsigned c = 0; c < 16; c++) {
        int k = c < 8 ? (int)c : (int)c - 16;
        CHECK(bfp_elem_decode(BFP_ELEM_INT4, c) == k / 4.0, "int4 %x", c);
        if (c != 0x8)
            CHECK(bfp_elem_encode(BFP_ELEM_INT4, k / 4.0) == c, "int4 back %x", c);
    }
    /* clamp to +-127 / +-7, ties to even integers */
    CHECK(bfp_elem_encode(BFP_ELEM_INT8, -2.0) == 0x81, "int8 clamps to -127");
    CHECK(bfp_elem_encode(BFP_ELEM_INT4, 1.875) == 7, "int4 clamps to 7");
    CHECK(bfp_elem_encode(BFP_ELEM_INT4, 0.375) == 2, "int4 tie 1.5 -> 2");
    CHECK(bfp_elem_encode(BFP_ELEM_INT4, 0.625) == 2, "int4 tie 2.5 -> 2");
    CHECK(bfp_elem_encode(BFP_ELEM_INT8, 1.5 / 64) == 2, "int8 tie 1.5 -> 2");
    CHECK(bfp_elem_encode(BFP_ELEM_INT4, -0.1) == 0, "int has no -0");
}

static void test_scales(void)
{
    for (unsigned c = 0; c < 256; c++) {
        double e8 = bfp_scale_decode(BFP_SCALE_E8M0, c);
        CHECK(c == 0xFF ? isnan(e8) : e8 == ldexp(1.0, (int)c - 127), "e8m0 %x", c);
        double u4 = bfp_scale_decode(BFP_SCALE_UE4M3, c);
        if (c >= 0x7F)
            CHECK(isnan(u4), "ue4m3 %x must be NaN (0x7F, or sign bit set)", c);
        else
            CHECK(u4 == expect_float(c, 4, 3, 7), "ue4m3 %x", c);
        double u6 = bfp_scale_decode(BFP_SCALE_HIF4, c);
        if (c == 0xFF)
            CHECK(isnan(u6), "ue6m2 0xFF NaN");
        else
            CHECK(u6 == ldexp(1 + (c & 3) / 4.0, (int)(c >> 2) - 48), "ue6m2 %x", c);
    }
    CHECK(bfp_scale_decode(BFP_SCALE_UE4M3, 0x7E) == 448, "ue4m3 max 448");
    CHECK(bfp_scale_decode(BFP_SCALE_HIF4, 0x00) == ldexp(1, -48), "ue6m2 min 2^-48");
    CHECK(bfp_scale_decode(BFP_SCALE_HIF4, 0xFE) == 49152, "ue6m2 max 49152");
}

static void test_half_conversions(void)
{
    for (unsigned h = 0; h < 65536; h++) {
        float f = bfp_f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        CHECK(bfp_f32_to_f16(f) == h, "f16 %04x round trip", h);
        float b = bfp_bf16_to_f32((uint16_t)h);
        if (!isnan(b))
            CHECK(bfp_f32_to_bf16(b) == h, "bf16 %04x round trip", h);
    }
    CHECK(bfp_f32_to_bf16(1.00390625f) == 0x3F80, "bf16 tie to even (down)");
    CHECK(bfp_f32_to_bf16(1.01171875f) == 0x3F82, "bf16 tie to even (up)");
    CHECK(bfp_f32_to_f16(65520.0f) == 0x7C00, "f16 overflow to inf");
    CHECK(bfp_f32_to_f16(65519.0f) == 0x7BFF, "f16 below overflow");
    CHECK(bfp_f32_to_f16(ldexpf(1, -25)) == 0x0000, "f16 subnormal tie to even 0");
    CHECK(bfp_f32_to_f16(ldexpf(3, -25)) == 0x0002, "f16 subnormal tie to even 2");
}

/* bfp_elem_has_special (which lets validation skip the code scan) agrees
 * with bfp_elem_code_is_special over every code, and with SPEC: E4M3/E5M2
 * have NaN/Inf codes, INT8/INT4 their -2^(bits-1), the others none. */
static void test_special_codes(void)
{
    static const struct {
        const bfp_elem_desc *e;
        int special;
    } t[] = {{&bfp_e2m1, 0},     {&bfp_e1m2, 0},     {&bfp_e2m3, 0},     {&bfp_e3m2, 0},
             {&bfp_e4m3, 1},     {&bfp_e5m2, 1},     {&bfp_int8, 1},     {&bfp_int4, 1},
             {&bfp_ext_e2m1, 0}, {&bfp_ext_e2m3, 0}, {&bfp_ext_e3m2, 0}, {&bfp_ext_e4m3, 0},
             {&bfp_ext_e5m2, 0}, {&bfp_ext_int8, 0}, {&bfp_ext_int4, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int any = 0;
        for (unsigned c = 0; c < (1u << t[i].e->bits); c++)
            any |= bfp_elem_code_is_special(t[i].e, c) != 0;
        CHECK(any == t[i].special && (bfp_elem_has_special(t[i].e) != 0) == any,
              "%s: has_special %d, a special code %s (expected %d)", t[i].e->name,
              bfp_elem_has_special(t[i].e), any ? "exists" : "does not exist", t[i].special);
    }
}

int main(void)
{
    test_e2m1_table();
    test_e1m2_table();
    test_float_types();
    test_int_types();
    test_scales();
    test_half_conversions();
    test_special_codes();
    return check_summary("test_codecs");
}

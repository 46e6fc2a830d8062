/* codec_dump.c - dump libbfp's scalar codecs into binary files, for the
 * cross-check against ml_dtypes / numpy in tests/python/test_codecs_mldtypes.py.
 *
 * Usage: codec_dump DIR      (DIR must exist; files are overwritten)
 *
 * Files written (all little-endian):
 *   encode_<t>.u8    65536 bytes: bfp_elem_encode(t, bf16_to_f32(h)), h = 0..65535
 *   decode_<t>.f64   2^bits doubles: bfp_elem_decode(t, c), c = 0..2^bits-1
 *   decode_e8m0.f64  256 doubles: bfp_scale_decode(BFP_SCALE_E8M0, c)
 *   bf16_to_f32.f32  65536 floats: bfp_bf16_to_f32(h)
 *   f16_to_f32.f32   65536 floats: bfp_f16_to_f32(h)
 *   f32_inputs.f32   N floats (deterministic set, see make_inputs)
 *   f32_to_bf16.u16  N halves: bfp_f32_to_bf16(in[i])
 *   f32_to_f16.u16   N halves: bfp_f32_to_f16(in[i])
 * for <t> in e2m1 e1m2 e2m3 e3m2 e4m3 e5m2 int8 int4 (bfp_elem_name spelling).
 *
 * Uses only the public header include/bfp.h. Exit status 0 on success.
 */
#include "bfp.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_dir;

static int write_file(const char *name, const void *data, size_t size)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        fprintf(stderr, "codec_dump: path too long for %s\n", name);
        return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    int bad = (w != size);
    if (fclose(f) != 0)
        bad = 1;
    if (bad) {
        fprintf(stderr, "codec_dump: write failed: %s\n", path);
        return -1;
    }
    return 0;
}

/* Little-endian serialisation, independent of the host byte order. */
static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static void put_f32(uint8_t *p, float f) { put_u32(p, f32_bits(f)); }

static void put_f64(uint8_t *p, double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    put_u64(p, b);
}

/* ---- the float32 input set for the f32 -> bf16 / f16 conversions ---- */

typedef struct {
    uint32_t *v;
    size_t n, cap;
} u32vec;

static int push(u32vec *a, uint32_t bits)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 1u << 16;
        uint32_t *p = realloc(a->v, cap * sizeof *p);
        if (!p)
            return -1;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = bits;
    return 0;
}

/* push f and -f */
static int push_pm(u32vec *a, float f)
{
    return push(a, f32_bits(f) & 0x7FFFFFFFu) | push(a, f32_bits(f) | 0x80000000u);
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int make_inputs(u32vec *a)
{
    int rc = 0;
    /* 1. every bfloat16 pattern widened (exact in f32), and around each
     *    pattern the bf16 rounding cases: the exact tie (low half 0x8000, so
     *    bit 16 both even and odd over the sweep) and one f32 ulp either side. */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint32_t hi = h << 16;
        rc |= push(a, hi);
        rc |= push(a, hi | 0x8000u);
        rc |= push(a, hi | 0x7FFFu);
        rc |= push(a, hi | 0x8001u);
    }
    /* 2. float16 rounding cases: every positive finite f16 value and its
     *    negation are already exact bf16-or-not values; add the exact midpoint
     *    between each pair of neighbouring f16 values (normal and subnormal
     *    ties), one f32 ulp either side of it, and the f16 values themselves. */
    for (uint32_t h = 0; h < 0x7C00u; h++) {
        float lo = bfp_f16_to_f32((uint16_t)h);
        float hi = (h + 1 < 0x7C00u) ? bfp_f16_to_f32((uint16_t)(h + 1)) : 65536.0f;
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact: 12 bits */
        rc |= push_pm(a, lo);
        rc |= push_pm(a, mid);
        rc |= push_pm(a, nextafterf(mid, 0.0f));
        rc |= push_pm(a, nextafterf(mid, INFINITY));
    }
    /* 3. edges */
    static const float edges[] = {
        0.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 131008.0f, 1e6f, 1e30f,
        FLT_MAX, FLT_MIN, FLT_TRUE_MIN, FLT_MIN - FLT_TRUE_MIN, 2 * FLT_TRUE_MIN,
        1.0f, 1.5f, 0.1f, 1.0f / 3.0f, 3.0f,
        /* f16 underflow: half the smallest subnormal 2^-25 (ties to 0), 1.5 * 2^-24
         * (ties to 2 * 2^-24), just above 2^-25, largest subnormal, smallest normal */
        0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1p-24f, 0x1p-26f, 0x1.ff8p-15f,
        0x1.ffcp-15f, 0x1p-14f, 0x1.ffep-15f,
        /* bf16 overflow: largest bf16 and the tie above it (rounds to Inf) */
        0x1.fep127f, 0x1.ffp127f, 0x1.feffffp127f,
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        rc |= push_pm(a, edges[i]);
    rc |= push_pm(a, nextafterf(65520.0f, 0.0f));
    rc |= push_pm(a, INFINITY);
    /* NaNs: quiet, signalling, payloads at the top and bottom of the mantissa */
    static const uint32_t nans[] = {0x7FC00000u, 0x7F800001u, 0x7FA00000u, 0x7FFFFFFFu,
                                    0x7F802000u, 0x7F801FFFu, 0x7FC00001u, 0x7F810000u,
                                    0x7F8F0000u, 0x7FBFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        rc |= push(a, nans[i]);
        rc |= push(a, nans[i] | 0x80000000u);
    }
    /* f32 subnormals */
    for (uint32_t m = 1; m < 0x800000u; m = m * 3 + 1)
        rc |= push_pm(a, bits_f32(m));
    rc |= push_pm(a, bits_f32(0x7FFFFFu));
    /* 4. random bit patterns, fixed seed (uniform over all 2^32 patterns,
     *    and uniform magnitudes in the f16 range) */
    uint64_t seed = 0x62667020636F6465ull; /* "bfp code" */
    for (int i = 0; i < 4096; i++)
        rc |= push(a, (uint32_t)splitmix64(&seed));
    for (int i = 0; i < 4096; i++) {
        uint32_t r = (uint32_t)splitmix64(&seed);
        /* exponents 2^-26 .. 2^16 cover f16 subnormals, normals and overflow */
        uint32_t exp = 101u + (r >> 8) % 43u;
        rc |= push(a, (r & 0x80000000u) | (exp << 23) | ((uint32_t)splitmix64(&seed) & 0x7FFFFFu));
    }
    return rc;
}

/* ---- main ---- */

static const struct {
    bfp_elem_type t;
    int bits;
} k_types[] = {
    {BFP_ELEM_E2M1, 4}, {BFP_ELEM_E1M2, 4}, {BFP_ELEM_E2M3, 6}, {BFP_ELEM_E3M2, 6},
    {BFP_ELEM_E4M3, 8}, {BFP_ELEM_E5M2, 8}, {BFP_ELEM_INT8, 8}, {BFP_ELEM_INT4, 4},
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT_DIR\n", argc ? argv[0] : "codec_dump");
        return 2;
    }
    g_dir = argv[1];
    int rc = 0;
    char name[64];

    /* element codecs */
    uint8_t enc[65536];
    uint8_t dec[256 * 8];
    for (size_t k = 0; k < sizeof k_types / sizeof k_types[0]; k++) {
        bfp_elem_type t = k_types[k].t;
        const char *tn = bfp_elem_name(t);
        for (uint32_t h = 0; h < 65536u; h++) {
            unsigned c = bfp_elem_encode(t, (double)bfp_bf16_to_f32((uint16_t)h));
            if (c >> k_types[k].bits) {
                fprintf(stderr, "codec_dump: %s code 0x%X out of range\n", tn, c);
                rc = 1;
            }
            enc[h] = (uint8_t)c;
        }
        snprintf(name, sizeof name, "encode_%s.u8", tn);
        rc |= write_file(name, enc, sizeof enc) != 0;
        unsigned ncodes = 1u << k_types[k].bits;
        for (unsigned c = 0; c < ncodes; c++)
            put_f64(dec + 8 * c, bfp_elem_decode(t, c));
        snprintf(name, sizeof name, "decode_%s.f64", tn);
        rc |= write_file(name, dec, 8 * (size_t)ncodes) != 0;
    }
    for (unsigned c = 0; c < 256; c++)
        put_f64(dec + 8 * c, bfp_scale_decode(BFP_SCALE_E8M0, c));
    rc |= write_file("decode_e8m0.f64", dec, 256 * 8) != 0;

    /* half-precision conversions, all 65536 patterns */
    uint8_t *buf = malloc(65536 * 4);
    if (!buf)
        return 1;
    for (uint32_t h = 0; h < 65536u; h++)
        put_f32(buf + 4 * h, bfp_f16_to_f32((uint16_t)h));
    rc |= write_file("f16_to_f32.f32", buf, 65536 * 4) != 0;
    for (uint32_t h = 0; h < 65536u; h++)
        put_f32(buf + 4 * h, bfp_bf16_to_f32((uint16_t)h));
    rc |= write_file("bf16_to_f32.f32", buf, 65536 * 4) != 0;
    free(buf);

    /* float32 -> bf16 / f16 over the input set */
    u32vec in = {0};
    if (make_inputs(&in) != 0) {
        fprintf(stderr, "codec_dump: out of memory\n");
        free(in.v);
        return 1;
    }
    uint8_t *fin = malloc(in.n * 4), *obf = malloc(in.n * 2), *oh = malloc(in.n * 2);
    if (!fin || !obf || !oh) {
        fprintf(stderr, "codec_dump: out of memory\n");
        rc = 1;
    } else {
        for (size_t i = 0; i < in.n; i++) {
            float f = bits_f32(in.v[i]);
            put_u32(fin + 4 * i, in.v[i]);
            put_u16(obf + 2 * i, bfp_f32_to_bf16(f));
            put_u16(oh + 2 * i, bfp_f32_to_f16(f));
        }
        rc |= write_file("f32_inputs.f32", fin, in.n * 4) != 0;
        rc |= write_file("f32_to_bf16.u16", obf, in.n * 2) != 0;
        rc |= write_file("f32_to_f16.u16", oh, in.n * 2) != 0;
    }
    free(fin);
    free(obf);
    free(oh);
    free(in.v);
    if (rc == 0)
        printf("codec_dump: wrote %s (%zu f32 conversion inputs)\n", g_dir, in.n);
    return rc ? 1 : 0;
}

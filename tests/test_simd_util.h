/* test_simd_util.h - shared by tests/test_simd*.c: the ISA under test, a
 * deterministic generator of hard inputs, and plane comparisons.
 *
 * Each test binary checks the kernel set that BFP_ISA selects (ctest runs it
 * once per ISA: generic, avx2, avx512) against bfp_quantize_ref /
 * bfp_dequantize_ref, byte for byte. */
#ifndef BFP_TEST_SIMD_UTIL_H
#define BFP_TEST_SIMD_UTIL_H

#include "bfp.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#endif

/* The harness passes BFP_ISA to the library (which reads no environment).
 * 1 if it names a path this CPU cannot run (the test is skipped); otherwise
 * checks that bfp_isa() reports the requested path. */
static inline int simd_isa_skip(const char *test)
{
    const char *want = getenv("BFP_ISA");
    if (want && *want)
        CHECK(bfp_set_isa(want) == BFP_OK, "BFP_ISA=%s is not a kernel set", want);
    printf("%s: kernels %s (BFP_ISA=%s)\n", test, bfp_isa(), want ? want : "");
    if (!want || !*want)
        return 0;
    int avx2 = 0, avx512 = 0;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    unsigned a, b, c, d, xlo = 0, xhi;
    if (__get_cpuid(1, &a, &b, &c, &d) && ((c >> 27) & 1)) { /* OSXSAVE */
        int fma_avx_f16c = ((c >> 12) & 1) && ((c >> 28) & 1) && ((c >> 29) & 1);
        __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
        if (fma_avx_f16c && (xlo & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            avx2 = (b >> 5) & 1;
            avx512 = avx2 && ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) &&
                     (xlo & 0xE6) == 0xE6;
        }
    }
#endif
    if ((strcmp(want, "avx2") == 0 && !avx2) || (strcmp(want, "avx512") == 0 && !avx512)) {
        printf("%s: skipped, this CPU has no %s\n", test, want);
        return 1;
    }
    CHECK(strcmp(bfp_isa(), want) == 0, "BFP_ISA=%s but bfp_isa() = %s", want, bfp_isa());
    return 0;
}

/* xorshift64* */
typedef struct {
    uint64_t s;
} simd_rng;

static inline uint64_t rng_u64(simd_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

static inline uint32_t rng_below(simd_rng *r, uint32_t n)
{
    return (uint32_t)((rng_u64(r) >> 32) % n);
}

static inline float rng_gauss(simd_rng *r)
{
    double u = ((double)(rng_u64(r) >> 11) + 0.5) * 0x1p-53;
    double v = ((double)(rng_u64(r) >> 11) + 0.5) * 0x1p-53;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static inline float f_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static inline uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* One run of 8..24 values of a kind chosen at random: the mix puts NaN,
 * Inf, -0, subnormals, huge and tiny values, exact ties, repeated maxima
 * and outliers inside blocks of every size. */
static inline void simd_fill_f32(simd_rng *r, float *x, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t run = 8 + rng_below(r, 17);
        int kind = (int)rng_below(r, 12);
        int e = (int)rng_below(r, 60) - 30;
        for (size_t k = 0; k < run && i < n; k++, i++) {
            float v;
            switch (kind) {
            case 0: /* gaussian at a random scale */
            default:
                v = ldexpf(rng_gauss(r), e);
                break;
            case 1: /* outliers */
                v = ldexpf(rng_gauss(r), rng_below(r, 16) == 0 ? e + 20 : e);
                break;
            case 2: { /* specials sprinkled in */
                static const uint32_t sp[] = {0x7FC00000u, 0xFFC00000u, 0x7F800000u,
                                              0xFF800000u, 0x80000000u, 0x7F800001u,
                                              0x00000001u, 0x80000003u};
                v = rng_below(r, 6) == 0 ? f_from_bits(sp[rng_below(r, 8)])
                                         : ldexpf(rng_gauss(r), e);
                break;
            }
            case 3: /* subnormals (and the smallest normals) */
                v = f_from_bits(rng_below(r, 0x01000000u) | (rng_below(r, 2) << 31));
                break;
            case 4: /* huge */
                v = f_from_bits((uint32_t)(250 + rng_below(r, 5)) << 23 |
                                rng_below(r, 0x800000u) | rng_below(r, 2) << 31);
                break;
            case 5: /* exact grid points and midpoints: small integers / 2^j */
                v = ldexpf((float)((int)rng_below(r, 129) - 64), e / 4 - (int)rng_below(r, 5));
                break;
            case 6: /* random bits */
                v = f_from_bits((uint32_t)rng_u64(r));
                break;
            case 7: /* zeros of both signs and a few values */
                v = rng_below(r, 4) ? (rng_below(r, 2) ? -0.0f : 0.0f) : ldexpf(rng_gauss(r), e);
                break;
            case 8: /* repeated maxima of either sign (block-max ties) */
                v = rng_below(r, 3) ? ldexpf(rng_below(r, 2) ? -1.5f : 1.5f, e)
                                    : ldexpf(rng_gauss(r), e - 1);
                break;
            case 9: /* near the E8M0 floor: tiny blocks, flushed MX+ blocks */
                v = ldexpf(rng_gauss(r), -120 - (int)rng_below(r, 25));
                break;
            case 10: /* values with few mantissa bits at a random scale (ties) */
                v = ldexpf((float)(1 + rng_below(r, 15)) / 8.0f, e) * (rng_below(r, 2) ? -1.f : 1.f);
                break;
            case 11: /* a narrow band: every element near the block max */
                v = ldexpf(1.0f + (float)rng_below(r, 1024) / 1024.0f, e) *
                    (rng_below(r, 2) ? -1.f : 1.f);
                break;
            }
            x[i] = v;
        }
    }
}

/* Values of dtype (little-endian) from float32 test values: bf16 and f16 get
 * rounded copies, and one run in eight of raw random 16-bit patterns. */
static inline void simd_fill(simd_rng *r, bfp_dtype dt, void *dst, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    simd_fill_f32(r, x, n);
    unsigned char *p = (unsigned char *)dst;
    for (size_t i = 0; i < n; i++) {
        if (dt == BFP_DTYPE_F32) {
            memcpy(p + 4 * i, &x[i], 4);
            continue;
        }
        uint16_t h = dt == BFP_DTYPE_BF16 ? bfp_f32_to_bf16(x[i]) : bfp_f32_to_f16(x[i]);
        if (i % 64 < 8 && (i / 64) % 8 == 3)
            h = (uint16_t)rng_u64(r);
        memcpy(p + 2 * i, &h, 2);
    }
    free(x);
}

/* Planes of a rows x cols tensor in one allocation, each plane offset by
 * `skew` bytes from malloc's alignment. */
typedef struct {
    bfp_plane_sizes sz;
    unsigned char *mem;
    bfp_planes p;
    float ts;
} simd_planes;

static inline int simd_planes_alloc(simd_planes *q, bfp_format fmt, size_t rows, size_t cols,
                             size_t skew, uint8_t fill)
{
    memset(q, 0, sizeof *q);
    if (bfp_plane_sizes_for(fmt, rows, cols, &q->sz) != BFP_OK)
        return -1;
    size_t total = q->sz.codes + q->sz.scales + q->sz.meta + 3 * skew + 16;
    q->mem = malloc(total);
    if (!q->mem)
        return -1;
    memset(q->mem, fill, total);
    q->p.codes = q->mem + skew;
    q->p.scales = q->p.codes + q->sz.codes + skew;
    q->p.meta = q->sz.meta ? q->p.scales + q->sz.scales + skew : NULL;
    q->p.tensor_scale = q->sz.tensor_scale ? &q->ts : NULL;
    q->ts = -7.0f;
    return 0;
}

static inline void simd_planes_free(simd_planes *q)
{
    free(q->mem);
    q->mem = NULL;
}

static inline bfp_const_planes simd_const(const simd_planes *q)
{
    bfp_const_planes c = {q->p.codes, q->p.scales, q->p.meta, q->p.tensor_scale};
    return c;
}

/* Index of the first differing byte, or -1. */
static inline long simd_diff(const void *a, const void *b, size_t n)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return (long)i;
    return -1;
}

/* Compare two quantizations plane by plane; 1 if identical. */
static inline int simd_same_planes(const simd_planes *a, const simd_planes *b, const char *what)
{
    long d;
    if ((d = simd_diff(a->p.codes, b->p.codes, a->sz.codes)) >= 0) {
        fprintf(stderr, "  %s: codes differ at byte %ld: %02x vs %02x\n", what, d,
                a->p.codes[d], b->p.codes[d]);
        return 0;
    }
    if ((d = simd_diff(a->p.scales, b->p.scales, a->sz.scales)) >= 0) {
        fprintf(stderr, "  %s: scales differ at byte %ld: %02x vs %02x\n", what, d,
                a->p.scales[d], b->p.scales[d]);
        return 0;
    }
    if (a->sz.meta && (d = simd_diff(a->p.meta, b->p.meta, a->sz.meta)) >= 0) {
        fprintf(stderr, "  %s: meta differ at byte %ld: %02x vs %02x\n", what, d,
                a->p.meta[d], b->p.meta[d]);
        return 0;
    }
    if (a->sz.tensor_scale && bits_of(a->ts) != bits_of(b->ts)) {
        fprintf(stderr, "  %s: tensor scale %.9g vs %.9g\n", what, a->ts, b->ts);
        return 0;
    }
    return 1;
}

static inline int simd_same_stats(const bfp_stats *a, const bfp_stats *b)
{
    return a->blocks == b->blocks && a->nonfinite_blocks == b->nonfinite_blocks &&
           a->flushed_blocks == b->flushed_blocks;
}

#endif /* BFP_TEST_SIMD_UTIL_H */

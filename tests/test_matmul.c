/* test_matmul.c - the matmul reference and the prepacked weight layout:
 * unpack(prepack(planes)) equals the reference decoder bit for bit (random
 * data with outliers, NaN/Inf, zero, huge and tiny blocks, partial tiles,
 * random plane bytes, every scale byte and block-max index); bfp_matmul_ref
 * on hand-worked products and against an independent sum; the same packed
 * bytes for any thread count; argument errors. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "bfp.h"
#include "check.h"
#include "prng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS,
                                  BFP_HIF4};
#define NFMTS (int)(sizeof fmts / sizeof fmts[0])

static prng rng = {0x1234567};
static uint64_t rnd(void) { return prng_next(&rng); }
static double unif(void) { return prng_unit(&rng); }

/* Rows of random blocks: plain, outliers, zero, huge, tiny, a NaN/Inf now and then. */
static void fill(float *x, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) {
        int kind = (int)(rnd() % 8);
        double s = kind == 3 ? 1e30 : kind == 4 ? 1e-30 : 1.0;
        for (size_t c = 0; c < cols; c++) {
            double g = (unif() + unif() + unif() - 1.5) * 2.0 * s;
            if (kind == 1 && unif() < 0.05)
                g *= 100.0;
            if (kind == 2)
                g = 0.0;
            if (kind == 5 && unif() < 0.01)
                g = unif() < 0.5 ? NAN : -INFINITY;
            x[r * cols + c] = (float)g;
        }
    }
}

typedef struct {
    bfp_plane_sizes sz;
    bfp_packed_sizes ps;
    uint8_t *codes, *scales, *meta, *pc, *psc, *pcorr;
    float ts;
} planes;

static void planes_alloc(planes *p, bfp_format f, size_t n, size_t k)
{
    bfp_plane_sizes_for(f, n, k, &p->sz);
    bfp_matmul_packed_sizes(f, n, k, &p->ps);
    p->codes = calloc(1, p->sz.codes);
    p->scales = calloc(1, p->sz.scales);
    p->meta = calloc(1, p->sz.meta + 1);
    p->pc = malloc(p->ps.codes);
    p->psc = malloc(p->ps.scales);
    p->pcorr = malloc(p->ps.corr + 1);
    p->ts = 1.0f;
}

static void planes_free(planes *p)
{
    free(p->codes), free(p->scales), free(p->meta);
    free(p->pc), free(p->psc), free(p->pcorr);
}

static bfp_const_planes cview(const planes *p)
{
    bfp_const_planes c = {p->codes, p->scales, p->meta, &p->ts};
    return c;
}

/* unpack(prepack(p)) against bfp_dequantize_ref, NaN matching NaN. */
static void check_roundtrip(bfp_format f, planes *p, size_t n, size_t k, const char *what)
{
    bfp_const_planes c = cview(p);
    float *ref = malloc(n * k * sizeof *ref), *got = malloc(n * k * sizeof *got);
    CHECK(bfp_dequantize_ref(f, &c, n, k, BFP_DTYPE_F32, ref) == BFP_OK, "dequant");
    CHECK(bfp_matmul_prepack(f, &c, n, k, p->pc, p->psc, p->pcorr) == BFP_OK, "prepack");
    CHECK(bfp_matmul_unpack(f, p->pc, p->psc, p->pcorr, p->ts, n, k, got) == BFP_OK, "unpack");
    size_t bad = 0, first = SIZE_MAX;
    for (size_t i = 0; i < n * k; i++) {
        int same = isnan(ref[i]) ? isnan(got[i]) : memcmp(&ref[i], &got[i], 4) == 0;
        if (!same) {
            bad++;
            if (first == SIZE_MAX)
                first = i;
        }
    }
    CHECK(bad == 0, "%s %s %zux%zu: %zu values differ, first (%zu, %zu): ref %g got %g",
          bfp_format_get(f)->name, what, n, k, bad, first / k, first % k,
          bad ? ref[first] : 0.0, bad ? got[first] : 0.0);
    free(ref);
    free(got);
}

static void test_roundtrip_quantized(void)
{
    static const size_t shapes[][2] = {{1, 1},   {1, 33},  {16, 64}, {17, 65},
                                       {3, 200}, {40, 130}, {33, 257}, {64, 512}};
    for (int fi = 0; fi < NFMTS; fi++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            size_t n = shapes[si][0], k = shapes[si][1];
            planes p;
            planes_alloc(&p, fmts[fi], n, k);
            float *x = malloc(n * k * sizeof *x);
            fill(x, n, k);
            bfp_planes out = {p.codes, p.scales, p.meta, &p.ts};
            CHECK(bfp_quantize_ref(fmts[fi], BFP_DTYPE_F32, x, n, k, NULL, &out, NULL) ==
                      BFP_OK, "quantize");
            check_roundtrip(fmts[fi], &p, n, k, "quantized");
            free(x);
            planes_free(&p);
        }
}

/* Any bytes: impossible blocks must come back as NaN, like the reference. */
static void test_roundtrip_random_bytes(void)
{
    for (int fi = 0; fi < NFMTS; fi++)
        for (int rep = 0; rep < 20; rep++) {
            size_t n = 1 + rnd() % 40, k = 1 + rnd() % 300;
            planes p;
            planes_alloc(&p, fmts[fi], n, k);
            for (size_t i = 0; i < p.sz.codes; i++)
                p.codes[i] = (uint8_t)rnd();
            for (size_t i = 0; i < p.sz.scales; i++) /* mostly moderate scales */
                p.scales[i] = (uint8_t)(rep % 2 ? rnd() : 100 + rnd() % 40);
            for (size_t i = 0; i < p.sz.meta; i++)
                p.meta[i] = (uint8_t)(rep % 3 ? rnd() % 16 : rnd());
            p.ts = rep % 4 ? 3.0f : 1e-3f;
            check_roundtrip(fmts[fi], &p, n, k, "random bytes");
            planes_free(&p);
        }
}

/* Every scale byte (HiF4: every UE6M2 byte, with random flags) and every
 * block-max index: the prepack re-encodes UE4M3 and HiF4 scales and the
 * block-max corrections, and zeroes the magnitudes of zero-scale NVFP4
 * blocks, so each must come back exactly. */
static void test_roundtrip_every_scale(void)
{
    for (int fi = 0; fi < NFMTS; fi++) {
        size_t n = 33, k = 512;
        planes p;
        planes_alloc(&p, fmts[fi], n, k);
        int hif4 = fmts[fi] == BFP_HIF4;
        for (size_t i = 0; i < p.sz.codes; i++)
            p.codes[i] = (uint8_t)rnd();
        for (size_t i = 0; i < p.sz.scales; i++)
            p.scales[i] = (uint8_t)(hif4 && i % 4 ? rnd() : hif4 ? i / 4 : i);
        for (size_t i = 0; i < p.sz.meta; i++)
            p.meta[i] = (uint8_t)i;
        p.ts = 0.75f;
        check_roundtrip(fmts[fi], &p, n, k, "every scale byte");
        planes_free(&p);
    }
}

/* W = [[1, 2, ...], ...] chosen exactly representable, so y is known. */
/* The prepack splits W's row bands across threads (bfp_set_threads caps them):
 * the packed bytes must not depend on the count. 1000 x 4160 (2 MiB of codes,
 * a partial last band and k tile) of random plane bytes, 1 against 3 and 7
 * threads. */
static void test_prepack_threads(void)
{
    const size_t n = 1000, k = 4160;
    for (int fi = 0; fi < NFMTS; fi++) {
        planes p;
        planes_alloc(&p, fmts[fi], n, k);
        for (size_t i = 0; i < p.sz.codes; i++)
            p.codes[i] = (uint8_t)rnd();
        for (size_t i = 0; i < p.sz.scales; i++)
            p.scales[i] = (uint8_t)rnd();
        for (size_t i = 0; i < p.sz.meta; i++)
            p.meta[i] = (uint8_t)rnd();
        bfp_const_planes c = cview(&p);
        uint8_t *pc1 = malloc(p.ps.codes), *psc1 = malloc(p.ps.scales), *pr1 = malloc(p.ps.corr + 1);
        bfp_set_threads(1);
        CHECK(bfp_matmul_prepack(fmts[fi], &c, n, k, pc1, psc1, pr1) == BFP_OK, "prepack 1");
        static const int counts[] = {3, 7};
        for (int ti = 0; ti < 2; ti++) {
            bfp_set_threads(counts[ti]);
            memset(p.pc, 0xA5, p.ps.codes), memset(p.psc, 0xA5, p.ps.scales);
            memset(p.pcorr, 0xA5, p.ps.corr + 1);
            CHECK(bfp_matmul_prepack(fmts[fi], &c, n, k, p.pc, p.psc, p.pcorr) == BFP_OK,
                  "prepack %d", counts[ti]);
            CHECK(!memcmp(pc1, p.pc, p.ps.codes) && !memcmp(psc1, p.psc, p.ps.scales) &&
                      !memcmp(pr1, p.pcorr, p.ps.corr),
                  "%s: prepack with %d threads differs from 1 thread", bfp_format_get(fmts[fi])->name,
                  counts[ti]);
        }
        bfp_set_threads(0);
        free(pc1), free(psc1), free(pr1);
        planes_free(&p);
    }
}

static void test_ref_hand_worked(void)
{
    /* 2 x 32 weight, mxfp4: row 0 all 1.0 except w[0][1] = -6; row 1 = 0.5 * (c % 4) */
    float w[2 * 32], y[3 * 2];
    uint16_t x[3 * 32], bias[2] = {bfp_f32_to_bf16(0.25f), bfp_f32_to_bf16(-1.0f)};
    for (int c = 0; c < 32; c++) {
        w[c] = c == 1 ? -6.0f : 1.0f;
        w[32 + c] = 0.5f * (float)(c % 4);
    }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 32; c++)
            x[r * 32 + c] = bfp_f32_to_bf16((float)(r + 1) * (c == 0 ? 2.0f : 1.0f));
    planes p;
    planes_alloc(&p, BFP_MXFP4, 2, 32);
    bfp_planes out = {p.codes, p.scales, p.meta, &p.ts};
    CHECK(bfp_quantize_ref(BFP_MXFP4, BFP_DTYPE_F32, w, 2, 32, NULL, &out, NULL) == BFP_OK,
          "quantize");
    bfp_const_planes c = cview(&p);
    CHECK(bfp_matmul_ref(BFP_MXFP4, &c, 2, 32, x, 3, bias, y) == BFP_OK, "matmul_ref");
    for (int r = 0; r < 3; r++) {
        double s = r + 1;
        /* row 0: 2s*1 + s*(-6) + 30 s = 26 s; row 1: sum over c of 0.5(c%4) x = 0 + 24 s */
        double want0 = 26.0 * s + 0.25, want1 = 24.0 * s - 1.0;
        CHECK(y[r * 2] == (float)want0, "y[%d][0] = %g, want %g", r, y[r * 2], want0);
        CHECK(y[r * 2 + 1] == (float)want1, "y[%d][1] = %g, want %g", r, y[r * 2 + 1], want1);
    }
    planes_free(&p);
}

/* bfp_matmul_ref against dot products of the unpacked weight (independent path). */
static void test_ref_against_unpacked(void)
{
    for (int fi = 0; fi < NFMTS; fi++) {
        size_t n = 23, k = 150, m = 5;
        planes p;
        planes_alloc(&p, fmts[fi], n, k);
        float *wf = malloc(n * k * sizeof *wf), *wu = malloc(n * k * sizeof *wu);
        float *y = malloc(m * n * sizeof *y);
        uint16_t *x = malloc(m * k * sizeof *x);
        for (size_t i = 0; i < n * k; i++)
            wf[i] = (float)((unif() - 0.5) * (unif() < 0.03 ? 50.0 : 2.0));
        for (size_t i = 0; i < m * k; i++)
            x[i] = bfp_f32_to_bf16((float)(unif() - 0.5));
        bfp_planes out = {p.codes, p.scales, p.meta, &p.ts};
        bfp_quantize_ref(fmts[fi], BFP_DTYPE_F32, wf, n, k, NULL, &out, NULL);
        bfp_const_planes c = cview(&p);
        CHECK(bfp_matmul_ref(fmts[fi], &c, n, k, x, m, NULL, y) == BFP_OK, "matmul_ref");
        bfp_matmul_prepack(fmts[fi], &c, n, k, p.pc, p.psc, p.pcorr);
        bfp_matmul_unpack(fmts[fi], p.pc, p.psc, p.pcorr, p.ts, n, k, wu);
        int bad = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double acc = 0;
                for (size_t q = 0; q < k; q++)
                    acc += (double)bfp_bf16_to_f32(x[i * k + q]) * wu[j * k + q];
                bad += y[i * n + j] != (float)acc;
            }
        CHECK(bad == 0, "%s: %d outputs differ from the unpacked dot products",
              bfp_format_get(fmts[fi])->name, bad);
        free(wf), free(wu), free(y), free(x);
        planes_free(&p);
    }
}

static void test_errors(void)
{
    bfp_packed_sizes ps;
    CHECK(bfp_matmul_packed_sizes(BFP_MXFP6_E2M3, 16, 64, &ps) == BFP_ERR_UNSUPPORTED,
          "mxfp6 is not a matmul format");
    CHECK(bfp_matmul_packed_sizes((bfp_format)99, 16, 64, &ps) == BFP_ERR_FORMAT, "bad id");
    CHECK(bfp_matmul_packed_sizes(BFP_MXFP4, 0, 64, &ps) == BFP_ERR_SHAPE, "n = 0");
    CHECK(bfp_matmul_packed_sizes(BFP_MXFP4, 16, 0, &ps) == BFP_ERR_SHAPE, "k = 0");
    CHECK(bfp_matmul_packed_sizes(BFP_MXFP4, SIZE_MAX / 2, SIZE_MAX / 2, &ps) ==
              BFP_ERR_SHAPE, "overflow");
    CHECK(bfp_matmul_packed_sizes(BFP_NVFP4_PLUS, 17, 65, &ps) == BFP_OK &&
              ps.codes == 2 * 2 * 512 && ps.scales == 2 * 2 * 64 && ps.corr == 2 * 2 * 64,
          "sizes");
    CHECK(bfp_matmul_format_supported(BFP_HIF4) && !bfp_matmul_format_supported(BFP_MXINT8),
          "supported set");
    uint16_t x[64] = {0};
    float y[4];
    CHECK(bfp_matmul_ref(BFP_MXFP4, NULL, 2, 32, x, 2, NULL, y) == BFP_ERR_ARG, "NULL w");
    uint8_t codes[32] = {0}, sc[2] = {127, 127};
    bfp_const_planes c = {codes, sc, NULL, NULL};
    CHECK(bfp_matmul_ref(BFP_MXFP4, &c, 2, 32, x, 0, NULL, y) == BFP_ERR_SHAPE, "m = 0");
    CHECK(bfp_matmul_ref(BFP_MXFP4_PLUS, &c, 2, 32, x, 2, NULL, y) == BFP_ERR_ARG,
          "MX+ needs meta");
    CHECK(bfp_matmul_prepack(BFP_NVFP4_PLUS, &c, 2, 32, codes, sc, NULL) == BFP_ERR_ARG,
          "NVFP4+ needs corrections");
}

int main(void)
{
    test_roundtrip_quantized();
    test_roundtrip_random_bytes();
    test_roundtrip_every_scale();
    test_prepack_threads();
    test_ref_hand_worked();
    test_ref_against_unpacked();
    test_errors();
    return check_summary("test_matmul");
}

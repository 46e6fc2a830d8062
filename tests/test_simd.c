/* test_simd.c - bfp_quantize (the CPU kernels BFP_ISA selects) gives the
 * reference's planes and stats bit for bit: every format and input dtype,
 * hard values (NaN, Inf, -0, subnormals, huge and tiny blocks, ties,
 * repeated maxima, outliers), partial blocks, odd lengths, sources 1 to 3
 * bytes off alignment, and argument errors with the reference's statuses. */
#include "test_simd_util.h"

static const size_t shapes[][2] = {
    {1, 1},  {1, 3},  {1, 15}, {1, 16}, {1, 17}, {2, 31}, {1, 32},  {3, 33},   {2, 63},
    {2, 64}, {3, 65}, {2, 96}, {4, 100}, {3, 127}, {2, 128}, {5, 257}, {3, 1000}, {1, 4099},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static const bfp_dtype dtypes[] = {BFP_DTYPE_F32, BFP_DTYPE_BF16, BFP_DTYPE_F16};

/* Quantize src both ways and compare everything. */
static int quantize_matches(bfp_format fmt, bfp_dtype dt, const void *src, size_t rows,
                            size_t cols, const bfp_options *opts, size_t skew)
{
    simd_planes a, b;
    if (simd_planes_alloc(&a, fmt, rows, cols, skew, 0xA5) ||
        simd_planes_alloc(&b, fmt, rows, cols, skew, 0x5A))
        return 0;
    bfp_stats sa = {7, 7, 7}, sb = {9, 9, 9};
    bfp_status ra = bfp_quantize(fmt, dt, src, rows, cols, opts, &a.p, &sa);
    bfp_status rb = bfp_quantize_ref(fmt, dt, src, rows, cols, opts, &b.p, &sb);
    char what[96];
    snprintf(what, sizeof what, "%s %s %zux%zu skew %zu", bfp_format_get(fmt)->name,
             bfp_dtype_name(dt), rows, cols, skew);
    int ok = ra == rb;
    if (!ok)
        fprintf(stderr, "  %s: status %d vs %d\n", what, ra, rb);
    if (ok && ra == BFP_OK) {
        ok = simd_same_planes(&a, &b, what);
        if (ok && !simd_same_stats(&sa, &sb)) {
            fprintf(stderr, "  %s: stats %zu/%zu/%zu vs %zu/%zu/%zu\n", what, sa.blocks,
                    sa.nonfinite_blocks, sa.flushed_blocks, sb.blocks, sb.nonfinite_blocks,
                    sb.flushed_blocks);
            ok = 0;
        }
    }
    simd_planes_free(&a);
    simd_planes_free(&b);
    return ok;
}

static void test_random(void)
{
    simd_rng r = {0x9E3779B97F4A7C15ull};
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        bfp_format fmt = bfp_format_at(fi)->id;
        for (size_t d = 0; d < 3; d++) {
            int bad = 0;
            for (size_t s = 0; s < NSHAPES && bad < 3; s++) {
                size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
                size_t esz = bfp_dtype_size(dtypes[d]), skew = s % 4;
                unsigned char *buf = malloc(n * esz + 8);
                simd_fill(&r, dtypes[d], buf + skew, n);
                int ok = quantize_matches(fmt, dtypes[d], buf + skew, rows, cols, NULL, skew);
                CHECK(ok, "%s %s %zux%zu matches the reference", bfp_format_at(fi)->name,
                      bfp_dtype_name(dtypes[d]), rows, cols);
                bad += !ok;
                free(buf);
            }
        }
    }
}

/* Every bf16 and f16 bit pattern, one value per element slot. */
static void test_all_half_patterns(void)
{
    uint16_t *h = malloc(65536 * sizeof *h);
    static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP6_E3M2, BFP_MXFP8_E4M3, BFP_MXFP8_E5M2,
                                      BFP_MXINT8, BFP_MXINT4, BFP_NVFP4, BFP_HIF4,
                                      BFP_MXFP4_PLUS, BFP_MXFP6_E2M3_PP, BFP_NVFP4_PLUS};
    simd_rng r = {12345};
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        if (pass) /* shuffled: every pattern meets other neighbours */
            for (uint32_t i = 65535; i > 0; i--) {
                uint32_t j = rng_below(&r, i + 1);
                uint16_t t = h[i];
                h[i] = h[j];
                h[j] = t;
            }
        for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
            CHECK(quantize_matches(fmts[k], BFP_DTYPE_BF16, h, 256, 256, NULL, 0),
                  "%s: all bf16 patterns (pass %d)", bfp_format_get(fmts[k])->name, pass);
            CHECK(quantize_matches(fmts[k], BFP_DTYPE_F16, h, 256, 256, NULL, 0),
                  "%s: all f16 patterns (pass %d)", bfp_format_get(fmts[k])->name, pass);
        }
    }
    free(h);
}

/* Pruned weights: whole blocks of +0 and -0 (signs at random) between
 * ordinary ones, in groups with one, several or all blocks zero, and
 * blocks zero but for one element: every format and dtype. */
static void test_zero_blocks(void)
{
    simd_rng r = {4242};
    const size_t rows = 8, cols = 1024, n = rows * cols;
    float *x = malloc(n * sizeof *x);
    unsigned char *buf = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        size_t blk = i / 32, row = i / cols;
        int zero = row == 0 ? blk % 8 == 3 : row == 1 ? blk % 2 == 0 : row == 2 ? 1
                 : row == 3 ? blk % 8 != 5 : rng_below(&r, 3) == 0;
        float v = ldexpf(rng_gauss(&r), (int)(blk % 40) - 20);
        if (zero)
            v = rng_below(&r, 2) ? -0.0f : 0.0f;
        if (row == 4 && blk % 4 == 1 && i % 32 == 7)
            v = 1.5f; /* the one nonzero element of a block */
        x[i] = v;
    }
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        bfp_format fmt = bfp_format_at(fi)->id;
        for (size_t d = 0; d < 3; d++) {
            for (size_t i = 0; i < n; i++) {
                if (dtypes[d] == BFP_DTYPE_F32) {
                    memcpy(buf + 4 * i, &x[i], 4);
                    continue;
                }
                uint16_t h = dtypes[d] == BFP_DTYPE_BF16 ? bfp_f32_to_bf16(x[i]) : bfp_f32_to_f16(x[i]);
                memcpy(buf + 2 * i, &h, 2);
            }
            CHECK(quantize_matches(fmt, dtypes[d], buf, rows, cols, NULL, 0), "%s %s: zero blocks",
                  bfp_format_at(fi)->name, bfp_dtype_name(dtypes[d]));
        }
    }
    free(x);
    free(buf);
}

/* Blocks built to sit on decision points: every element a midpoint of the
 * element grid at the block's scale, for each MX format. */
static void test_ties(void)
{
    simd_rng r = {777};
    float *x = malloc(64 * 64 * sizeof *x);
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        bfp_format fmt = bfp_format_at(fi)->id;
        for (size_t i = 0; i < 64 * 64; i++) {
            int e = (int)(i / 64 % 40) - 20 - (i / 64 >= 40 ? 100 : 0);
            float m = (float)(rng_below(&r, 256) * 2 + 1) / 64.0f; /* odd: between grid points */
            x[i] = ldexpf(rng_below(&r, 2) ? -m : m, e);
            if (i % 64 == 0)
                x[i] = ldexpf(7.5f, e); /* sets the scale */
        }
        CHECK(quantize_matches(fmt, BFP_DTYPE_F32, x, 64, 64, NULL, 0), "%s: ties",
              bfp_format_at(fi)->name);
    }
    free(x);
}

/* bfloat16 blocks at every exponent: row r has block maxima with exponent
 * field r (0: subnormal blocks), the other elements up to 14 binades lower
 * (subnormals below field 1) with random 7-bit mantissas, so that ties of
 * every grid, carries into the next binade and the smallest scales all
 * occur; the maximum sits at a random place and sometimes repeats. The
 * bfloat16 kernels encode in 16-bit integer lanes with a float32 path for
 * blocks below a scale threshold: this crosses it. */
static void test_bf16_exponents(void)
{
    enum { ROWS = 255, COLS = 512 }; /* eight blocks and more per row: the grouped loops run */
    simd_rng r = {4242};
    uint16_t *h = malloc(ROWS * COLS * sizeof *h);
    for (int row = 0; row < ROWS; row++) {
        for (int b = 0; b < COLS / 32; b++) {
            uint16_t *x = h + row * COLS + 32 * b;
            for (int i = 0; i < 32; i++) {
                int e = row - (int)rng_below(&r, 15);
                unsigned m = rng_below(&r, 128);
                if (rng_below(&r, 4) == 0)
                    m &= 0x70; /* few mantissa bits: exact grid points and midpoints */
                x[i] = (uint16_t)((rng_below(&r, 2) << 15) | (unsigned)(e > 0 ? e : 0) << 7 | m);
            }
            uint16_t mx = (uint16_t)(row << 7 | rng_below(&r, 128));
            x[rng_below(&r, 32)] = mx;
            if (b % 2)
                x[rng_below(&r, 32)] = (uint16_t)(mx | 0x8000);
        }
    }
    for (int fi = 0; fi < bfp_format_count(); fi++) {
        bfp_format fmt = bfp_format_at(fi)->id;
        CHECK(quantize_matches(fmt, BFP_DTYPE_BF16, h, ROWS, COLS, NULL, 0),
              "%s: bf16 blocks at every exponent", bfp_format_at(fi)->name);
    }
    free(h);
}

/* HiF4 with float32 input: |x| * REC is not exact in float32, so blocks are
 * built where it rounds onto a decision point (a flag threshold 2 or 4, or
 * a half-integer of t) from just below or above. Group maxima fix the
 * flags; the other elements sit next to the boundaries their group uses. */
static void test_hif4_boundaries(void)
{
    static const double rec_m[4] = {1.0, 0.80078125, 0.66796875, 0.5703125};
    simd_rng r = {31337};
    enum { NB = 256 };
    float *x = malloc(NB * 64 * sizeof *x);
    simd_planes q;
    simd_planes_alloc(&q, BFP_HIF4, 1, NB * 64, 0, 0);
    for (int pass = 0; pass < 4; pass++) {
        for (int b = 0; b < NB; b++) {
            float *xb = x + 64 * b;
            float m = ldexpf(1.0f + (float)rng_below(&r, 1 << 23) * 0x1p-23f,
                             (int)rng_below(&r, 40) - 20);
            memset(xb, 0, 64 * sizeof *xb);
            xb[0] = m;
            /* group maxima: the block max scaled down, or near 2/REC or 4/REC */
            int code = 0;
            {
                uint32_t w;
                bfp_quantize_ref(BFP_HIF4, BFP_DTYPE_F32, xb, 1, 64, NULL, &q.p, NULL);
                memcpy(&w, q.p.scales, 4);
                code = (int)(w & 0xFF);
            }
            double rec = ldexp(rec_m[code & 3], 48 - (code >> 2));
            for (int g = 1; g < 16; g++) {
                double target = rng_below(&r, 2) ? 4.0 / rec : 2.0 / rec;
                float v = (float)target;
                int pick = (int)rng_below(&r, 4);
                if (pick == 1)
                    v = nextafterf(v, 0.0f);
                else if (pick == 2)
                    v = nextafterf(v, INFINITY);
                else if (pick == 3)
                    v = ldexpf(m, -(int)rng_below(&r, 4));
                xb[4 * g] = fminf(v, m);
            }
            uint32_t w;
            bfp_quantize_ref(BFP_HIF4, BFP_DTYPE_F32, xb, 1, 64, NULL, &q.p, NULL);
            memcpy(&w, q.p.scales, 4);
            /* the other elements: next to (k + 1/2) / R' below their group max */
            for (int i = 0; i < 64; i++) {
                if (i % 4 == 0)
                    continue;
                int shift = (int)((w >> (8 + i / 8)) & 1) + (int)((w >> (16 + i / 4)) & 1);
                double rp = rec * ldexp(1.0, 2 - shift);
                float gmax = xb[i & ~3];
                double k = (double)rng_below(&r, 7) + 0.5;
                while (k > 0.5 && k / rp >= (double)gmax)
                    k -= 1.0;
                float v = (float)(k / rp);
                int pick = (int)rng_below(&r, 3);
                v = pick == 0 ? nextafterf(v, 0.0f) : pick == 1 ? nextafterf(v, INFINITY) : v;
                v = fminf(v, gmax);
                xb[i] = rng_below(&r, 2) ? -v : v;
            }
        }
        CHECK(quantize_matches(BFP_HIF4, BFP_DTYPE_F32, x, 1, NB * 64, NULL, 0),
              "hif4 rounding boundaries (pass %d)", pass);
        CHECK(quantize_matches(BFP_HIF4, BFP_DTYPE_F32, x, NB, 64, NULL, 1),
              "hif4 rounding boundaries by rows (pass %d)", pass);
    }
    simd_planes_free(&q);
    free(x);
}

/* UE4M3 value of code c (0..0x7E). */
static float e4m3_value(unsigned c)
{
    return c >> 3 ? ldexpf(1.0f + (float)(c & 7) / 8.0f, (int)(c >> 3) - 7)
                  : ldexpf((float)(c & 7), -9);
}

/* NVFP4(+) blocks whose t = x * s_enc lands on the E2M1 decision points
 * (midpoints times the block scale, exactly and one float either side),
 * on grid points and on zero, for every scale code from the subnormal
 * ones to 448, with a tensor scale that is a power of two (x * s_enc
 * exact), without one, and with an arbitrary one; among them blocks whose
 * scale rounds to 0 and blocks holding NaN or Inf. Rows end in a partial
 * block, so full groups, the last group and the tail all run. */
static void test_nvfp4_decisions(void)
{
    static const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    enum { ROWS = 4, COLS = 16 * 37 + 7 };
    simd_rng r = {2718};
    float *x = malloc(ROWS * COLS * sizeof *x);
    for (int pass = 0; pass < 3; pass++) {
        /* pass 0: s_enc = 8 (amax 336), 1: no tensor scale, 2: s_enc = 2688/300 */
        float inv = pass == 0 ? 0.125f : 1.0f;
        for (int i = 0; i < ROWS * COLS; i += 16) {
            int b = i / 16;
            unsigned code = 1 + (unsigned)(b * 7 + pass) % 0x7E;
            float sb = e4m3_value(code);
            for (int k = 0; k < 16 && i + k < ROWS * COLS; k++) {
                float v;
                unsigned pick = rng_below(&r, 8);
                if (pick < 5) {
                    v = mids[rng_below(&r, 7)] * sb;
                    v = pick == 1 ? nextafterf(v, 0) : pick == 2 ? nextafterf(v, INFINITY) : v;
                } else {
                    v = grid[rng_below(&r, 8)] * sb;
                }
                v *= inv;
                if (pass == 2) /* t lands next to the decision points */
                    v = nextafterf(v * 300.0f / 2688.0f, rng_below(&r, 2) ? 0.0f : INFINITY);
                x[i + k] = rng_below(&r, 2) ? -v : v;
            }
            if (i + 16 <= ROWS * COLS) { /* the block max sets the scale: 6 sb, or for
                                              * NVFP4+ a midpoint of its own grid that
                                              * keeps it (mantissas 1..3) */
                float m = 6.0f * sb;
                if (b % 3 == 1) {
                    m = (b % 2 ? 5.75f : 6.25f) * sb;
                    m = b % 9 == 1 ? nextafterf(m, 0) : b % 9 == 4 ? nextafterf(m, INFINITY) : m;
                }
                x[i + rng_below(&r, 16)] = m * inv * (pass == 2 ? 300.0f / 2688.0f : 1.0f);
            }
            if (b % 29 == 5) /* max below the smallest scale: codes are signed zeros */
                for (int k = 0; k < 16 && i + k < ROWS * COLS; k++)
                    x[i + k] = (k & 1 ? -1.0f : 1.0f) * 0x1p-14f * inv;
            if (b % 31 == 7)
                x[i + rng_below(&r, 16) % (unsigned)(ROWS * COLS - i < 16 ? ROWS * COLS - i : 16)] =
                    b % 2 ? NAN : -INFINITY;
        }
        x[3] = pass == 2 ? 300.0f : 336.0f; /* the tensor amax */
        bfp_options o;
        bfp_options_init(&o);
        o.nvfp4_no_tensor_scale = pass == 1;
        CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_F32, x, ROWS, COLS, &o, 0),
              "nvfp4 decision points (pass %d)", pass);
        CHECK(quantize_matches(BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, ROWS, COLS, &o, 1),
              "nvfp4+ decision points (pass %d)", pass);
        CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_F32, x, 1, ROWS * COLS, &o, 2),
              "nvfp4 decision points, one row (pass %d)", pass);
    }
    free(x);
}

/* NVFP4(+) block maxima on and around every rounding point of the block
 * scale: E4M3(fp32(tmax / 6)) for tmax within four floats of 6 m, m each
 * midpoint between neighbouring UE4M3 values (where fp32(tmax / 6) may
 * round onto m, and a tie goes to the even code), and around 6 * 448,
 * 2^-125, the smallest and largest floats. Without a tensor scale (t = x)
 * and with a power-of-two one (t = x * 2^-20 exactly); 16-block groups and
 * a partial one. The AVX-512 path divides by 6 with a multiply and an FMA
 * correction and reads the code from the bits: this fails if the
 * correction or the ties-to-even rounding of the code is dropped. */
static void test_nvfp4_scale_points(void)
{
    enum { PER = 9 };
    float base[0x7E + 6];
    int nb = 0;
    for (unsigned c = 0; c < 0x7E; c++)
        base[nb++] = 6.0f * (e4m3_value(c) + e4m3_value(c + 1)) / 2.0f;
    base[nb++] = 6.0f * 448.0f;
    base[nb++] = 6.0f * 464.0f;
    base[nb++] = 0x1p-125f;
    base[nb++] = 0x1p-149f * 4;
    base[nb++] = 3.40282347e38f / 2;
    const size_t cols = (size_t)nb * PER * 16 + 16 * 5 + 3;
    float *x = malloc(cols * sizeof *x);
    simd_rng r = {1618};
    for (int pass = 0; pass < 2; pass++) {
        const float up = pass ? 0x1p20f : 1.0f; /* x = t * 2^20, s_enc = 2^-20 */
        size_t i = 0;
        for (int b = 0; b < nb; b++)
            for (int d = 0; d < PER; d++, i += 16) {
                float t = base[b];
                for (int k = 0; k < d - PER / 2; k++)
                    t = nextafterf(t, INFINITY);
                for (int k = 0; k < PER / 2 - d; k++)
                    t = nextafterf(t, 0.0f);
                if (pass && t > 3e38f / up)
                    t = 3e38f / up;
                for (int k = 0; k < 16; k++)
                    x[i + k] = t * up * ((float)rng_below(&r, 1000) / 1000.0f) * (k & 1 ? -1.0f : 1.0f);
                x[i + rng_below(&r, 16)] = (rng_below(&r, 2) ? -t : t) * up;
            }
        for (; i < cols; i++)
            x[i] = (float)rng_below(&r, 100) - 50.0f;
        bfp_options o;
        bfp_options_init(&o);
        if (pass) { /* amax 2688 * 2^20: s_enc = 2^-20 */
            for (size_t j = 0; j < cols; j++)
                x[j] = fabsf(x[j]) > 2688.0f * up ? 2688.0f * up : x[j];
            x[cols - 1] = 2688.0f * up;
        } else {
            o.nvfp4_no_tensor_scale = 1;
        }
        CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_F32, x, 1, cols, &o, 0),
              "nvfp4 block maxima at the scale rounding points (pass %d)", pass);
        CHECK(quantize_matches(BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 1, cols, &o, 1),
              "nvfp4+ block maxima at the scale rounding points (pass %d)", pass);
    }
    free(x);
}

/* NVFP4(+) with bf16 input, whose AVX-512 path decides elements by one bf16
 * threshold per block and midpoint: elements exactly on and one or two bf16
 * steps either side of the point where t = fp32(x * s_enc) crosses each
 * decision point m_k * sb, for block scales from the subnormal codes to 448
 * (and blocks whose scale is 0), under tensor scales that are 1, a power of
 * two (x * s_enc exact, t lands on m_k * sb), arbitrary, and extreme: an
 * all-tiny tensor (s_enc clamped to FLT_MAX), a subnormal one, a huge one.
 * A first reference run over the block maxima alone gives each block's
 * scale; the other elements then sit at that scale's crossing points and
 * never exceed the block max, so the scales stay. */
static void test_nvfp4_bf16_thresholds(void)
{
    static const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    /* tensor amax (0: no tensor scale, s_enc = 1) */
    static const float amax[] = {0.0f, 84.0f, 300.0f, 1e-38f, 3e-40f, 3e38f, 1e-30f, 2688.0f / 1024.0f};
    enum { ROWS = 3, BPR = 41, COLS = 16 * BPR - 5 };
    simd_rng r = {31337};
    uint16_t *h = malloc(ROWS * COLS * sizeof *h);
    for (size_t ai = 0; ai < sizeof amax / sizeof amax[0]; ai++) {
        float A = amax[ai] > 0 ? amax[ai] : 2688.0f;
        uint16_t abits = (uint16_t)(bits_of(A) >> 16);
        bfp_options o;
        bfp_options_init(&o);
        o.nvfp4_no_tensor_scale = amax[ai] == 0;
        /* block maxima only: A 2^-e with a random mantissa, e over 0..44 */
        memset(h, 0, ROWS * COLS * sizeof *h);
        int pos[ROWS][BPR];
        for (int row = 0; row < ROWS; row++)
            for (int b = 0; b < BPR; b++) {
                int len = b + 1 < BPR ? 16 : 16 - (16 * BPR - COLS);
                int e = (row * BPR + b) * 7 % 45;
                uint32_t mb = bits_of(ldexpf(A, -e)) >> 16;
                mb = mb > abits ? abits : mb;
                mb = (mb & ~0x7Fu) | rng_below(&r, 128);
                mb = mb > abits ? abits : mb;
                pos[row][b] = (int)rng_below(&r, (uint32_t)len);
                h[row * COLS + 16 * b + pos[row][b]] = (uint16_t)(mb | rng_below(&r, 2) << 15);
            }
        h[0] = abits, pos[0][0] = 0; /* the tensor amax */
        simd_planes q;
        if (simd_planes_alloc(&q, BFP_NVFP4, ROWS, COLS, 0, 0))
            break;
        bfp_stats s0;
        bfp_status rs = bfp_quantize_ref(BFP_NVFP4, BFP_DTYPE_BF16, h, ROWS, COLS, &o, &q.p, &s0);
        float ts = q.ts;
        for (int row = 0; row < ROWS && rs == BFP_OK; row++)
            for (int b = 0; b < BPR; b++) {
                unsigned sc = q.p.scales[row * BPR + b];
                int len = b + 1 < BPR ? 16 : 16 - (16 * BPR - COLS);
                uint16_t *x = h + row * COLS + 16 * b;
                uint32_t mb = x[pos[row][b]] & 0x7FFFu;
                if (sc == 0 || sc >= 0x7F)
                    continue;
                double sb = e4m3_value(sc);
                for (int i = 0; i < len; i++) {
                    if (i == pos[row][b])
                        continue;
                    double u = mids[rng_below(&r, 7)] * sb / ts; /* the crossing point */
                    int32_t c = (int32_t)(bits_of((float)u) >> 16) + (int32_t)rng_below(&r, 5) - 2;
                    uint32_t v = c < 0 ? 0u : (uint32_t)c;
                    v = v > mb ? mb : v;
                    x[i] = (uint16_t)(v | rng_below(&r, 2) << 15);
                }
            }
        simd_planes_free(&q);
        CHECK(rs == BFP_OK, "nvfp4 bf16 thresholds: reference scales (amax %g)", (double)amax[ai]);
        CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_BF16, h, ROWS, COLS, &o, 0),
              "nvfp4 bf16 at the thresholds (amax %g, s_enc %g)", (double)amax[ai], (double)ts);
        CHECK(quantize_matches(BFP_NVFP4_PLUS, BFP_DTYPE_BF16, h, ROWS, COLS, &o, 1),
              "nvfp4+ bf16 at the thresholds (amax %g, s_enc %g)", (double)amax[ai], (double)ts);
        CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_BF16, h + 1, 1, ROWS * COLS - 1, &o, 2),
              "nvfp4 bf16 at the thresholds, one row (amax %g)", (double)amax[ai]);
    }
    free(h);
}

/* NVFP4 with the tensor-scale option; the stochastic, 2-D and scale-mode
 * options go to the reference and must still agree. */
static void test_options(void)
{
    simd_rng r = {4242};
    float *x = malloc(48 * 70 * sizeof *x);
    simd_fill_f32(&r, x, 48 * 70);
    bfp_options o;
    bfp_options_init(&o);
    o.nvfp4_no_tensor_scale = 1;
    CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_F32, x, 48, 70, &o, 0), "nvfp4 no tensor scale");
    CHECK(quantize_matches(BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 48, 70, &o, 0), "nvfp4+ no ts");
    o.nvfp4_2d = 1;
    CHECK(quantize_matches(BFP_NVFP4, BFP_DTYPE_F32, x, 48, 70, &o, 1), "nvfp4 2d");
    bfp_options_init(&o);
    o.rounding = BFP_ROUND_STOCHASTIC;
    o.seed = 99;
    CHECK(quantize_matches(BFP_MXFP4, BFP_DTYPE_F32, x, 48, 70, &o, 0), "mxfp4 stochastic");
    bfp_options_init(&o);
    o.rounding = BFP_ROUND_NEAREST_EVEN;
    CHECK(quantize_matches(BFP_HIF4, BFP_DTYPE_F32, x, 48, 70, &o, 0), "hif4 rne");
    o.rounding = BFP_ROUND_NEAREST_AWAY;
    CHECK(quantize_matches(BFP_HIF4, BFP_DTYPE_F32, x, 48, 70, &o, 0), "hif4 away (default)");
    CHECK(quantize_matches(BFP_MXFP6_E2M3, BFP_DTYPE_F32, x, 48, 70, &o, 0), "mxfp6 away");
    bfp_options_init(&o);
    o.scale_mode = BFP_SCALE_RCEIL;
    CHECK(quantize_matches(BFP_MXFP8_E4M3, BFP_DTYPE_F32, x, 48, 70, &o, 0), "rceil");
    o.threads = -3; /* ignored by the reference, automatic here */
    CHECK(quantize_matches(BFP_MXFP8_E4M3, BFP_DTYPE_F32, x, 48, 70, &o, 0), "threads < 0");
    free(x);
}

/* Bad arguments give the reference's status. */
static void test_errors(void)
{
    float x[64] = {1};
    simd_planes q;
    simd_planes_alloc(&q, BFP_NVFP4_PLUS, 2, 32, 0, 0);
    bfp_planes nometa = q.p, nots = q.p, nocodes = q.p;
    nometa.meta = NULL;
    nots.tensor_scale = NULL;
    nocodes.codes = NULL;
    bfp_options bad_round = {.rounding = (bfp_rounding)9};
    bfp_options bad_mode = {.scale_mode = BFP_SCALE_CEIL};
    bfp_options bad_2d = {.nvfp4_2d = 1};
    struct {
        bfp_format f;
        bfp_dtype d;
        const void *src;
        size_t rows, cols;
        const bfp_options *o;
        const bfp_planes *p;
    } cases[] = {
        {(bfp_format)0, BFP_DTYPE_F32, x, 2, 32, NULL, &q.p},
        {(bfp_format)99, BFP_DTYPE_F32, x, 2, 32, NULL, &q.p},
        {BFP_NVFP4_PLUS, (bfp_dtype)7, x, 2, 32, NULL, &q.p},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, NULL, 2, 32, NULL, &q.p},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 0, 32, NULL, &q.p},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 0, NULL, &q.p},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, SIZE_MAX / 2, 4, NULL, &q.p},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, NULL, NULL},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, NULL, &nometa},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, NULL, &nots},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, NULL, &nocodes},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, &bad_round, &q.p},
        {BFP_NVFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, &bad_mode, &q.p},
        {BFP_MXFP4, BFP_DTYPE_F32, x, 2, 32, &bad_2d, &q.p},
        {BFP_MXFP4_PLUS, BFP_DTYPE_F32, x, 2, 32, &bad_mode, &q.p},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bfp_status a = bfp_quantize(cases[i].f, cases[i].d, cases[i].src, cases[i].rows,
                                    cases[i].cols, cases[i].o, cases[i].p, NULL);
        bfp_status b = bfp_quantize_ref(cases[i].f, cases[i].d, cases[i].src, cases[i].rows,
                                        cases[i].cols, cases[i].o, cases[i].p, NULL);
        CHECK(a == b && a != BFP_OK, "error case %zu: status %d vs %d", i, a, b);
    }
    simd_planes_free(&q);
}

/* The settings the front ends pass from BFP_ISA / BFP_THREADS: bad values
 * are refused and change nothing; "auto" is the best the CPU has. */
static void test_settings(void)
{
    char before[16];
    snprintf(before, sizeof before, "%s", bfp_isa());
    CHECK(bfp_set_isa("avx3") == BFP_ERR_ARG && bfp_set_isa("") == BFP_ERR_ARG &&
              bfp_set_isa("AVX2") == BFP_ERR_ARG,
          "bfp_set_isa refuses names it does not know");
    CHECK(strcmp(bfp_isa(), before) == 0, "a refused name left %s, not %s", bfp_isa(), before);
    CHECK(bfp_set_isa("generic") == BFP_OK && strcmp(bfp_isa(), "generic") == 0, "generic");
    CHECK(bfp_set_isa("auto") == BFP_OK, "auto");
    const char *best = bfp_isa();
    CHECK(bfp_set_isa("avx512") == BFP_OK && strcmp(bfp_isa(), best) == 0,
          "avx512 falls back to the best set, %s, not %s", best, bfp_isa());
    CHECK(bfp_set_isa("generic") == BFP_OK && bfp_set_isa(NULL) == BFP_OK &&
              strcmp(bfp_isa(), best) == 0,
          "NULL is auto");
    CHECK(bfp_set_isa(before) == BFP_OK && strcmp(bfp_isa(), before) == 0, "back to %s", before);
    CHECK(bfp_set_threads(-1) == BFP_ERR_ARG, "bfp_set_threads(-1) refused");
    CHECK(bfp_set_threads(3) == BFP_OK && bfp_set_threads(0) == BFP_OK, "bfp_set_threads");
}

int main(void)
{
    test_settings();
    if (simd_isa_skip("test_simd"))
        return check_summary("test_simd");
    test_random();
    test_all_half_patterns();
    test_zero_blocks();
    test_ties();
    test_bf16_exponents();
    test_hif4_boundaries();
    test_nvfp4_decisions();
    test_nvfp4_scale_points();
    test_nvfp4_bf16_thresholds();
    test_options();
    test_errors();
    return check_summary("test_simd");
}

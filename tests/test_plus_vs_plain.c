/* test_plus_vs_plain.c - value-level property: every "+" and "++" format is
 * never less accurate than its plain format (MXFP4+ against MXFP4, NVFP4+
 * against NVFP4, ...) by more than a small SQNR margin, on random and on
 * outlier data, for every option combination the library accepts.
 *
 * The byte-level tests compare the fast paths with the reference, so a
 * reference that is self-consistent but wrong passes them; this test looks
 * at the decoded values instead. Which combinations to run is asked of the
 * library (quantize returns BFP_ERR_UNSUPPORTED for the rest), so an option
 * it starts to accept is covered without editing this file. */
#include "check.h"
#include "prng.h"

#include "bfp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 48 /* three 16-row tiles for the 2-D option */
#define COLS 200 /* not a multiple of any block: partial last blocks */
#define MARGIN_DB 0.05
/* Stochastic rounding only lowers the error in expectation, and not even
 * that against a plain format that saturates a block max (a clamp to the
 * largest element acts as nearest rounding, while the "+" format's finer
 * grid rounds it up or down at random): one draw gets a wider margin. */
#define MARGIN_SR_DB 3.0

enum { D_NORMAL, D_ROW_OUTLIERS, D_BLOCK_OUTLIERS, D_TILE_OUTLIER, D_KINDS };
static const char *const data_names[D_KINDS] = {"normal", "row outliers", "block outliers",
                                                "one outlier per 16x16 tile"};

static double normal(prng *p)
{
    double u = prng_unit(p), v = prng_unit(p);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* Normal values of standard deviation sigma; then per kind a few values
 * 1000 times larger: two per row, one per 16 columns, or one per 16x16 tile
 * over values that are all alike (the case that exposed NVFP4+ 2-D). */
static void fill(float *x, int kind, double sigma, prng *p)
{
    for (size_t k = 0; k < (size_t)ROWS * COLS; k++)
        x[k] = (float)(sigma * (kind == D_TILE_OUTLIER ? 0.1 + 0.01 * normal(p) : normal(p)));
    for (size_t r = 0; r < ROWS; r++) {
        if (kind == D_ROW_OUTLIERS)
            for (int n = 0; n < 2; n++)
                x[r * COLS + (size_t)prng_int(p, 0, COLS - 1)] *= 1000.0f;
        if (kind == D_BLOCK_OUTLIERS)
            for (size_t c = 0; c < COLS; c += 16)
                x[r * COLS + c + (size_t)prng_int(p, 0, 15) % (COLS - c)] *= 1000.0f;
        if (kind == D_TILE_OUTLIER && r % 16 == 0)
            for (size_t c = 0; c < COLS; c += 16)
                x[r * COLS + c] = (float)(100.0 * sigma);
    }
}

static double sqnr_db(const float *x, const float *y, size_t n)
{
    double sig = 0, err = 0;
    for (size_t k = 0; k < n; k++) {
        double d = (double)x[k] - (double)y[k];
        sig += (double)x[k] * x[k];
        err += d * d;
    }
    return err == 0 ? INFINITY : 10.0 * log10(sig / err);
}

/* Quantize x with the reference and decode it; returns the status. */
static bfp_status roundtrip(bfp_format fmt, const float *x, const bfp_options *o, float *y)
{
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, ROWS, COLS, &sz);
    if (st != BFP_OK)
        return st;
    float ts = 0;
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales);
    uint8_t *meta = malloc(sz.meta ? sz.meta : 1);
    bfp_planes out = {codes, scales, meta, &ts};
    bfp_const_planes in = {codes, scales, meta, &ts};
    st = bfp_quantize_ref(fmt, BFP_DTYPE_F32, x, ROWS, COLS, o, &out, NULL);
    if (st == BFP_OK)
        st = bfp_dequantize_ref(fmt, &in, ROWS, COLS, BFP_DTYPE_F32, y);
    free(codes);
    free(scales);
    free(meta);
    return st;
}

/* The plain format a "+" / "++" format extends (same element type). */
static const bfp_format_info *plain_of(const bfp_format_info *f)
{
    bfp_family want = f->family == BFP_FAMILY_NVFP4_PLUS ? BFP_FAMILY_NVFP4 : BFP_FAMILY_MX;
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *g = bfp_format_at(i);
        if (g->family == want && g->elem == f->elem)
            return g;
    }
    return NULL;
}

/* Every value of every field of bfp_options, plus one past the last so an
 * enum value added later is reached too (the library refuses what it does
 * not know). */
#define N_ROUND 6
#define N_SCALE 6

static int combos_run;
static double worst[2] = {-INFINITY, -INFINITY}; /* largest shortfall, dB */

static void check_format(const bfp_format_info *plus, float *x, float *yp, float *yb)
{
    const bfp_format_info *plain = plain_of(plus);
    CHECK(plain != NULL, "%s: no plain format with its element type", plus->name);
    if (!plain)
        return;
    int accepted = 0;
    for (int rnd = 0; rnd < N_ROUND; rnd++)
        for (int sm = 0; sm < N_SCALE; sm++)
            for (int flags = 0; flags < 4; flags++) {
                bfp_options o;
                bfp_options_init(&o);
                o.rounding = (bfp_rounding)rnd;
                o.seed = 12345;
                o.scale_mode = (bfp_scale_mode)sm;
                o.nvfp4_no_tensor_scale = flags & 1;
                o.nvfp4_2d = flags >> 1;
                o.threads = 1;
                for (int kind = 0; kind < D_KINDS; kind++)
                    for (int si = 0; si < 3; si++) {
                        static const double sigmas[3] = {1e-3, 1.0, 1e3};
                        prng p = {(uint64_t)(kind * 7 + si + 1)};
                        fill(x, kind, sigmas[si], &p);
                        bfp_status sp = roundtrip(plus->id, x, &o, yp);
                        if (sp == BFP_ERR_UNSUPPORTED || sp == BFP_ERR_ARG)
                            goto next_combo; /* the library does not take it */
                        CHECK(sp == BFP_OK, "%s: status %d", plus->name, (int)sp);
                        bfp_status sb = roundtrip(plain->id, x, &o, yb);
                        CHECK(sb == BFP_OK, "%s accepts options (rounding %d, scale mode %d, "
                              "no tensor scale %d, 2-D %d) that %s refuses (%d)", plus->name,
                              rnd, sm, o.nvfp4_no_tensor_scale, o.nvfp4_2d, plain->name, (int)sb);
                        if (sp != BFP_OK || sb != BFP_OK)
                            goto next_combo;
                        double qp = sqnr_db(x, yp, (size_t)ROWS * COLS);
                        double qb = sqnr_db(x, yb, (size_t)ROWS * COLS);
                        double margin = rnd == BFP_ROUND_STOCHASTIC ? MARGIN_SR_DB : MARGIN_DB;
                        if (qb - qp > worst[rnd == BFP_ROUND_STOCHASTIC])
                            worst[rnd == BFP_ROUND_STOCHASTIC] = qb - qp;
                        CHECK(qp >= qb - margin,
                              "%s %.1f dB < %s %.1f dB on %s data (sigma %g; rounding %d, "
                              "scale mode %d, no tensor scale %d, 2-D %d)",
                              plus->name, qp, plain->name, qb, data_names[kind], sigmas[si], rnd,
                              sm, o.nvfp4_no_tensor_scale, o.nvfp4_2d);
                    }
                accepted++;
                combos_run++;
            next_combo:;
            }
    /* at least each rounding with the default scale rule and flags */
    CHECK(accepted >= 5, "%s: only %d option combinations accepted", plus->name, accepted);
}

int main(void)
{
    size_t n = (size_t)ROWS * COLS;
    float *x = malloc(n * sizeof *x), *yp = malloc(n * sizeof *yp), *yb = malloc(n * sizeof *yb);
    int plus_formats = 0;
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        if (f->family == BFP_FAMILY_MX_PLUS || f->family == BFP_FAMILY_MX_PP ||
            f->family == BFP_FAMILY_NVFP4_PLUS) {
            check_format(f, x, yp, yb);
            plus_formats++;
        }
    }
    CHECK(plus_formats == 13, "%d + / ++ formats in the table, expected 13", plus_formats);
    printf("%d option combinations of %d formats checked; largest shortfall %.3f dB "
           "(%.3f dB with stochastic rounding)\n", combos_run, plus_formats, worst[0], worst[1]);
    free(x);
    free(yp);
    free(yb);
    return check_summary("test_plus_vs_plain");
}

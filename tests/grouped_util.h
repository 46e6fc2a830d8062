/* grouped_util.h - shared by the grouped matmul's tests: E experts of
 * random quantized weights, bf16 activations and routing tables of several
 * kinds (random, skewed, empty experts, one row). */
#ifndef BFP_TEST_GROUPED_UTIL_H
#define BFP_TEST_GROUPED_UTIL_H

#include "bfp_grouped.h"
#include "prng.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t e_count, n, k;
    bfp_plane_sizes sz;
    uint8_t *codes, *scales, *meta; /* e_count experts back to back */
    float *ts;                      /* e_count tensor scales */
    bfp_const_planes *w;            /* e_count views */
} gexperts;

/* Expert e's weight: random values at a scale of its own (1, 1e3, 1e-3). */
static int gexperts_make(gexperts *g, bfp_format fmt, size_t e_count, size_t n, size_t k,
                         prng *r)
{
    memset(g, 0, sizeof *g);
    g->e_count = e_count, g->n = n, g->k = k;
    if (bfp_plane_sizes_for(fmt, n, k, &g->sz) != BFP_OK)
        return 0;
    g->codes = calloc(e_count, g->sz.codes);
    g->scales = calloc(e_count, g->sz.scales);
    g->meta = calloc(e_count, g->sz.meta + 1);
    g->ts = calloc(e_count, sizeof *g->ts);
    g->w = calloc(e_count, sizeof *g->w);
    float *src = malloc(n * k * sizeof *src);
    if (!g->codes || !g->scales || !g->meta || !g->ts || !g->w || !src) {
        free(src);
        return 0;
    }
    for (size_t e = 0; e < e_count; e++) {
        double s = e % 3 == 0 ? 1.0 : e % 3 == 1 ? 1e3 : 1e-3;
        for (size_t i = 0; i < n * k; i++) {
            double v = (prng_unit(r) + prng_unit(r) + prng_unit(r) - 1.5) * s;
            if (prng_unit(r) < 0.01)
                v *= 30.0;
            src[i] = (float)v;
        }
        bfp_planes out = {g->codes + e * g->sz.codes, g->scales + e * g->sz.scales,
                          g->meta + e * g->sz.meta, g->ts + e};
        if (bfp_quantize_f32(fmt, src, n, k, NULL, &out, NULL) != BFP_OK) {
            free(src);
            return 0;
        }
        bfp_const_planes c = {out.codes, out.scales, out.meta, out.tensor_scale};
        g->w[e] = c;
    }
    free(src);
    return 1;
}

static void gexperts_free(gexperts *g)
{
    free(g->codes), free(g->scales), free(g->meta), free(g->ts), free(g->w);
}

/* Routing kinds */
enum { ROUTE_RANDOM, ROUTE_SKEWED, ROUTE_HALF_EMPTY, ROUTE_ONE_EXPERT, ROUTE_LAST_ONLY,
       ROUTE_KINDS };
static const char *const route_names[] = {"random", "skewed", "half-empty", "one-expert",
                                          "last-only"};

/* offsets[e_count + 1] for t rows of a kind */
static void route_make(int kind, size_t e_count, size_t t, prng *r, int32_t *offsets)
{
    size_t *cnt = calloc(e_count, sizeof *cnt);
    for (size_t i = 0; i < t; i++) {
        size_t e;
        switch (kind) {
        case ROUTE_SKEWED: /* most rows to expert 1 % E, the rest random */
            e = prng_unit(r) < 0.85 ? 1 % e_count : (size_t)(prng_next(r) % e_count);
            break;
        case ROUTE_HALF_EMPTY: /* odd experts only (even ones empty) */
            e = e_count > 1 ? (size_t)(prng_next(r) % (e_count / 2)) * 2 + 1 : 0;
            break;
        case ROUTE_ONE_EXPERT: e = e_count / 2; break;
        case ROUTE_LAST_ONLY: e = e_count - 1; break;
        default: e = (size_t)(prng_next(r) % e_count);
        }
        cnt[e]++;
    }
    offsets[0] = 0;
    for (size_t e = 0; e < e_count; e++)
        offsets[e + 1] = offsets[e] + (int32_t)cnt[e];
    free(cnt);
}

/* bf16 activations with an outlier channel */
static void gx_make(uint16_t *x, size_t t, size_t k, prng *r)
{
    for (size_t i = 0; i < t * k; i++) {
        double v = prng_unit(r) * 2.0 - 1.0;
        if (i % k == 3)
            v *= 50.0;
        x[i] = bfp_f32_to_bf16((float)v);
    }
}

#endif

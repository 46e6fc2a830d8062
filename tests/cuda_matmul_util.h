/* cuda_matmul_util.h - what the GPU matmul tests share: random data, a
 * quantized random weight, the error sums against bfp_matmul_ref. */
#ifndef BFP_CUDA_MATMUL_UTIL_H
#define BFP_CUDA_MATMUL_UTIL_H

#include "bfp.h"
#include "check.h"
#include "prng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static prng rng = {42};
static double unif(void) { return prng_unit(&rng); }
static double gauss(void) { return (unif() + unif() + unif() - 1.5) * 2.0; }

/* Sums of squared errors (num) and squared reference values (den) of count
 * bf16 outputs against the reference; returns how many outputs are NaN. */
static size_t err_sums(const uint16_t *y, const float *ref, size_t count, double *num, double *den)
{
    size_t nans = 0;
    *num = *den = 0;
    for (size_t i = 0; i < count; i++) {
        double v = bfp_bf16_to_f32(y[i]), d = v - ref[i];
        nans += isnan(v) != 0;
        *num += d * d;
        *den += (double)ref[i] * ref[i];
    }
    return nans;
}

static const bfp_format fmts[] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_NVFP4_PLUS,
                                  BFP_HIF4};

typedef struct {
    bfp_plane_sizes sz;
    uint8_t *codes, *scales, *meta;
    float ts;
} hplanes;

/* Quantize a random n x k weight (outlier rows/blocks when heavy). */
static void make_weight(bfp_format f, size_t n, size_t k, int heavy, int nan_row,
                        hplanes *w)
{
    float *x = malloc(n * k * sizeof *x);
    for (size_t r = 0; r < n; r++) {
        double rs = heavy && r % 5 == 0 ? 50.0 : 1.0;
        if (heavy == 2 && r % 3 == 0)
            rs *= 1e30; /* E8M0 codes far above 128: the MX fold exponent */
        for (size_t c = 0; c < k; c++) {
            double v = gauss() * rs * 0.05;
            if (heavy && unif() < 0.01)
                v *= 40.0;
            x[r * k + c] = (float)v;
        }
    }
    if (nan_row >= 0)
        x[(size_t)nan_row * k + k / 2] = NAN;
    bfp_plane_sizes_for(f, n, k, &w->sz);
    w->codes = malloc(w->sz.codes);
    w->scales = malloc(w->sz.scales);
    w->meta = malloc(w->sz.meta + 1);
    bfp_planes out = {w->codes, w->scales, w->meta, &w->ts};
    CHECK(bfp_quantize(f, BFP_DTYPE_F32, x, n, k, NULL, &out, NULL) == BFP_OK, "quantize");
    free(x);
}

static void free_weight(hplanes *w) { free(w->codes), free(w->scales), free(w->meta); }

#endif

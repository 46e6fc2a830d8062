/* convert.c - float32 <-> bfloat16 / float16, row loading, error statistics. */
#include "internal.h"

#include <math.h>

float bfp_bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

uint16_t bfp_f32_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep sign, force quiet */
        return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u); /* RNE; overflow carries into Inf */
    return (uint16_t)(b >> 16);
}

float bfp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    int exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FFu;
    float v;
    if (exp == 0x1F) {
        uint32_t b = sign | 0x7F800000u | (man << 13);
        memcpy(&v, &b, sizeof v);
        return v;
    }
    v = exp ? ldexpf((float)(man | 0x400u), exp - 25) : ldexpf((float)man, -24);
    return sign ? -v : v;
}

uint16_t bfp_f32_to_f16(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)(sign | 0x7E00u);
    double a = fabs((double)f);
    if (a >= 65520.0) /* rounds past the largest finite value (65504) */
        return (uint16_t)(sign | 0x7C00u);
    double r = bfp_round_sig(a, 11, -14);
    if (r == 0)
        return sign;
    int e = bfp_floor_log2(r);
    if (e < -14) /* subnormal: multiples of 2^-24 */
        return (uint16_t)(sign | (uint16_t)ldexp(r, 24));
    uint16_t man = (uint16_t)(ldexp(r, 10 - e) - 1024.0);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | man);
}

void bfp_load_row(bfp_dtype dtype, const void *src, size_t cols, size_t r,
                  float *dst)
{
    const unsigned char *p = (const unsigned char *)src;
    if (dtype == BFP_DTYPE_F32) {
        memcpy(dst, p + r * cols * 4, cols * 4); /* memcpy: src may be unaligned */
        return;
    }
    p += r * cols * 2;
    for (size_t i = 0; i < cols; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = dtype == BFP_DTYPE_BF16 ? bfp_bf16_to_f32(h) : bfp_f16_to_f32(h);
    }
}

void bfp_error_stats_f32(const float *x, const float *y, size_t n,
                         bfp_error_stats *out)
{
    bfp_error_stats s = {0};
    double sig = 0, err = 0, rel_sum = 0;
    for (size_t i = 0; x && y && i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            /* a finite x with a non-finite y: its block decoded to NaN */
            s.skipped_input += !isfinite(x[i]);
            s.skipped_output += isfinite(x[i]) != 0;
            continue;
        }
        double xv = x[i], yv = y[i], d = fabs(xv - yv);
        s.count++;
        sig += xv * xv;
        err += d * d;
        if (d > s.max_abs_err || isnan(d))
            s.max_abs_err = d;
        if (xv != 0) {
            double rel = d / fabs(xv);
            s.nonzero++;
            rel_sum += rel;
            if (rel > s.max_rel_err || isnan(rel))
                s.max_rel_err = rel;
        }
    }
    if (!s.nonzero)
        s.max_rel_err = NAN;
    s.mean_rel_err = s.nonzero ? rel_sum / (double)s.nonzero : NAN;
    s.rmse = s.count ? sqrt(err / (double)s.count) : NAN;
    s.sqnr_db = !s.count ? NAN : err > 0 ? 10 * log10(sig / err) : INFINITY;
    if (!s.count)
        s.max_abs_err = NAN;
    if (out)
        *out = s;
}

double bfp_block_max_error_share(const float *x, const float *y, size_t rows,
                                 size_t cols, size_t block)
{
    double total = 0, on_bm = 0;
    for (size_t r = 0; x && y && block && r < rows; r++) {
        const float *xr = x + r * cols, *yr = y + r * cols;
        for (size_t b0 = 0; b0 < cols; b0 += block) {
            size_t end = cols - b0 > block ? b0 + block : cols;
            size_t bm = SIZE_MAX; /* the block's largest finite |x|, lowest index */
            float bm_abs = -1.0f;
            for (size_t i = b0; i < end; i++)
                if (isfinite(xr[i]) && fabsf(xr[i]) > bm_abs) {
                    bm_abs = fabsf(xr[i]);
                    bm = i;
                }
            for (size_t i = b0; i < end; i++) {
                if (!isfinite(xr[i]) || !isfinite(yr[i]))
                    continue;
                double d = (double)xr[i] - (double)yr[i];
                total += d * d;
                if (i == bm)
                    on_bm += d * d;
            }
        }
    }
    return total > 0 ? on_bm / total : NAN;
}

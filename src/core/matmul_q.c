/* matmul_q.c - the reference matmul with a quantized x: y = x . W^T (+ bias)
 * where both W [n, k] and x [m, k] are quantized tensors (blocks along k).
 * Both are decoded row by row by the reference decoder, products summed in
 * float64, one rounding to float32. It is what the GPU's quantized-x kernels
 * (W4A8, W4A4) are checked against. */
#include "internal.h"

#include <stdlib.h>

/* decode every row of a rows x k quantized tensor into float64 */
static bfp_status decode_all(bfp_format fmt, const bfp_const_planes *p, size_t rows,
                             size_t k, double *out)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, rows, k, &sz);
    if (st != BFP_OK)
        return st;
    float *row = malloc(k * sizeof *row);
    if (!row)
        return BFP_ERR_NOMEM;
    for (size_t r = 0; r < rows; r++) {
        impl->dequantize_row(impl, p, &sz, r, k, row);
        for (size_t c = 0; c < k; c++)
            out[r * k + c] = row[c];
    }
    free(row);
    return BFP_OK;
}

static int planes_ok(bfp_format fmt, const bfp_const_planes *p)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    return p && p->codes && p->scales && (!impl->info.meta_bytes || p->meta) &&
           (!impl->info.has_tensor_scale || p->tensor_scale);
}

bfp_status bfp_matmul_ref_q(bfp_format w_fmt, const bfp_const_planes *w, size_t n, size_t k,
                            bfp_format x_fmt, const bfp_const_planes *x, size_t m,
                            const uint16_t *bias_bf16, float *y)
{
    if (!bfp_impl_get(w_fmt) || !bfp_impl_get(x_fmt))
        return BFP_ERR_FORMAT;
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(w_fmt, n, k, &sz);
    if (st == BFP_OK)
        st = bfp_plane_sizes_for(x_fmt, m, k, &sz);
    if (st != BFP_OK)
        return st;
    if (m > SIZE_MAX / k || n > SIZE_MAX / k || m > SIZE_MAX / n ||
        n * k > SIZE_MAX / sizeof(double) || m * k > SIZE_MAX / sizeof(double))
        return BFP_ERR_SHAPE;
    if (!planes_ok(w_fmt, w) || !planes_ok(x_fmt, x) || !y)
        return BFP_ERR_ARG;

    double *wd = malloc(n * k * sizeof *wd);
    double *xd = malloc(m * k * sizeof *xd);
    if (!wd || !xd) {
        free(wd);
        free(xd);
        return BFP_ERR_NOMEM;
    }
    st = decode_all(w_fmt, w, n, k, wd);
    if (st == BFP_OK)
        st = decode_all(x_fmt, x, m, k, xd);
    if (st == BFP_OK) {
        for (size_t j = 0; j < n; j++) {
            const double *wr = wd + j * k;
            double b = bias_bf16 ? bfp_bf16_to_f32(bias_bf16[j]) : 0.0;
            for (size_t i = 0; i < m; i++) {
                const double *xr = xd + i * k;
                double acc = 0.0;
                for (size_t c = 0; c < k; c++)
                    acc += xr[c] * wr[c];
                y[i * n + j] = (float)(acc + b);
            }
        }
    }
    free(wd);
    free(xd);
    return st;
}

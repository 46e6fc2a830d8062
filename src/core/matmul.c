/* matmul.c - the reference matmul y = x . W^T (+ bias): W decoded row by row
 * by the reference decoder, products summed in float64, one rounding to
 * float32. Slow and plain on purpose: it is what the GPU kernels are
 * checked against. */
#include "internal.h"

#include <stdlib.h>

bfp_status bfp_matmul_ref(bfp_format fmt, const bfp_const_planes *w, size_t n,
                          size_t k, const uint16_t *x_bf16, size_t m,
                          const uint16_t *bias_bf16, float *y)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    if (!impl)
        return BFP_ERR_FORMAT;
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, n, k, &sz);
    if (st != BFP_OK)
        return st;
    if (m == 0 || m > SIZE_MAX / k || m > SIZE_MAX / n)
        return BFP_ERR_SHAPE;
    if (!w || !w->codes || !w->scales || !x_bf16 || !y ||
        (impl->info.meta_bytes && !w->meta) ||
        (impl->info.has_tensor_scale && !w->tensor_scale))
        return BFP_ERR_ARG;

    float *wrow = malloc(k * sizeof *wrow);
    double *xd = malloc(m * k * sizeof *xd);
    if (!wrow || !xd) {
        free(wrow);
        free(xd);
        return BFP_ERR_NOMEM;
    }
    for (size_t i = 0; i < m * k; i++)
        xd[i] = bfp_bf16_to_f32(x_bf16[i]);
    for (size_t j = 0; j < n; j++) {
        impl->dequantize_row(impl, w, &sz, j, k, wrow);
        double b = bias_bf16 ? bfp_bf16_to_f32(bias_bf16[j]) : 0.0;
        for (size_t i = 0; i < m; i++) {
            const double *xr = xd + i * k;
            double acc = 0.0;
            for (size_t c = 0; c < k; c++)
                acc += xr[c] * (double)wrow[c];
            y[i * n + j] = (float)(acc + b);
        }
    }
    free(wrow);
    free(xd);
    return BFP_OK;
}

/* fake_quant.c - the GPU entry points quantize_host.cu calls, on the host:
 * bfp_cuda_quantize is bfp_quantize (so the planes must be the CPU's), and
 * the call counter of the fake runtime. */
#include "bfp.h"

#include <stdio.h>
#include <stdlib.h>

int fake_h2d;
static int calls, fail_at = -1;

int fake_call(void)
{
    return ++calls == fail_at;
}

int bfp_cuda_available(void)
{
    const char *f = getenv("FAKE_FAIL");
    fail_at = f ? atoi(f) : -1;
    return 1;
}

bfp_status bfp_cuda_quantize(bfp_format fmt, bfp_dtype dtype, const void *d_src, size_t rows,
                             size_t cols, const bfp_options *opts, int swizzled_scales,
                             const bfp_planes *d_out, unsigned long long *d_nonfinite_blocks,
                             void *stream)
{
    bfp_stats st;
    bfp_status s = bfp_quantize(fmt, dtype, d_src, rows, cols, opts, d_out, &st);
    if (s == BFP_OK && d_nonfinite_blocks)
        *d_nonfinite_blocks += st.nonfinite_blocks;
    return s;
}

__attribute__((destructor)) static void report(void)
{
    if (getenv("FAKE_REPORT"))
        fprintf(stderr, "fake: %d CUDA calls, %d host-to-device copies\n", calls, fake_h2d);
}

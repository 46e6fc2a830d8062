/* quant_kernel_time.c - one AVX-512 quantize kernel alone, timed on thread
 * CPU time (robust to other jobs on a shared machine, unlike wall time):
 * n values (default 64 Ki: in cache) of Gaussian data with a power-of-two
 * scale per 64 values and rare x40 outliers, `calls` kernel calls per
 * repetition, the best of `reps`; prints ns per block and a checksum of the
 * codes and scales (equal between builds that give equal bytes). The
 * NVFP4 tensor scale is fixed (no amax pass). Build against a library:
 *   cc -O2 -Iinclude -Isrc/core -Isrc/cpu tools/dev/quant_kernel_time.c build/libbfp.a -lm -o /tmp/kt
 *   /tmp/kt FORMAT_ID DTYPE_ID [calls=2000] [reps=7] [n=65536] [zero_every=0]
 * e.g. `/tmp/kt 8 2` is nvfp4 from bfloat16 (bfp_format / bfp_dtype ids);
 * zero_every = z > 0 makes every z-th block all zeros (pruned weights). */
#include "cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rs = 88172645463325252ull;
static double rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s FORMAT_ID DTYPE_ID [calls] [reps] [n]\n", argv[0]);
        return 2;
    }
    const int fmt = atoi(argv[1]), dt = atoi(argv[2]);
    const int calls = argc > 3 ? atoi(argv[3]) : 2000, reps = argc > 4 ? atoi(argv[4]) : 7;
    const size_t n = argc > 5 ? (size_t)atol(argv[5]) : 65536;
    const size_t zero_every = argc > 6 ? (size_t)atol(argv[6]) : 0;
    const bfp_kernels *k = bfp_cpu_kernels_for(BFP_ISA_AVX512);
    const bfp_format_impl *impl = bfp_impl_get((bfp_format)fmt);
    if (!k || !impl || dt < 1 || dt > 2 || !k->quant[fmt][dt - 1]) {
        fprintf(stderr, "no AVX-512 kernel for format %d dtype %d\n", fmt, dt);
        return 2;
    }
    float *x = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        double u = rnd() + 1e-300, v = rnd();
        double g = sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
        g *= ldexp(1.0, (int)((i / 64 * 2654435761u) % 16) - 8);
        if (rnd() < 0.001)
            g *= 40;
        x[i] = (float)g;
        uint32_t b;
        memcpy(&b, &x[i], 4);
        h[i] = (uint16_t)((b + 0x7FFF + ((b >> 16) & 1)) >> 16); /* RNE */
    }
    const size_t nb = n / (size_t)impl->info.block;
    for (size_t b = 0; zero_every && b < nb; b += zero_every) {
        memset(x + b * (size_t)impl->info.block, 0, (size_t)impl->info.block * 4);
        memset(h + b * (size_t)impl->info.block, 0, (size_t)impl->info.block * 2);
    }
    bfp_qparams p = {impl, 2688.0f / 8.0f / 40.0f};
    uint8_t *codes = malloc(n), *sc = malloc(nb * 4), *meta = malloc(nb);
    bfp_stats st;
    memset(&st, 0, sizeof st);
    const bfp_qkernel fn = k->quant[fmt][dt - 1];
    const void *src = dt == 1 ? (const void *)x : (const void *)h;
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int c = 0; c < calls; c++) {
            fn(&p, src, nb, codes, sc, meta, &st);
            __asm__ volatile("" : : "r"(codes) : "memory");
        }
        double t = (now() - t0) / calls / (double)nb * 1e9;
        best = t < best ? t : best;
    }
    unsigned long cs = 0;
    for (size_t i = 0; i < n * (size_t)impl->info.elem_bits / 8 && i < n; i++)
        cs = cs * 31 + codes[i];
    for (size_t i = 0; i < nb; i++)
        cs = cs * 31 + sc[i];
    printf("%.3f ns/block (checksum %lx)\n", best, cs);
    free(x), free(h), free(codes), free(sc), free(meta);
    return 0;
}

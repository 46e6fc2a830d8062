/*
 * test_huge_tensor.c - a tensor of more than 2^31 elements and more than
 * 4 GiB of input through the dispatched (SIMD, threaded) quantizer and
 * dequantizer: sizes and offsets must be 64-bit everywhere. Sampled blocks
 * across the whole range (the last ones, and those around element 2^31 and
 * byte 2^32) are checked against the reference. Two shapes: MXFP4 with
 * 525312 rows of 4096, and HiF4 (4-byte scale words) as one single row.
 * Needs about 11 GiB; skips (exit 77) when /proc/meminfo says less is
 * available. Not run in the sanitizer build (too slow there).
 */
#define _POSIX_C_SOURCE 200809L

#include "bfp.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SKIP 77
#define N (((size_t)1 << 31) + ((size_t)1 << 22)) /* 4.3 GB of bf16 */
#define NEED_GIB 11

static size_t mem_available_kib(void)
{
    FILE *fp = fopen("/proc/meminfo", "r");
    char line[256];
    size_t kib = 0;
    if (!fp)
        return 0;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "MemAvailable: %zu kB", &kib) == 1)
            break;
    fclose(fp);
    return kib;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Deterministic bf16 values; each 64-element stretch gets its own magnitude
 * (huge and tiny blocks), with an occasional Inf/NaN/-0. */
static void fill(uint16_t *x)
{
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint16_t exp = (uint16_t)(((i >> 6) * 2654435761u >> 7) % 200 + 27);
        uint16_t v = (uint16_t)((s & 0x807F) | exp << 7);
        if ((s >> 40 & 0xFFFFF) == 7)
            v = (s >> 20 & 1) ? 0x7F80 : 0x7FC1; /* Inf, NaN */
        else if ((s >> 40 & 0xFFFFF) == 9)
            v = 0x8000;
        x[i] = v;
    }
}

/* Check global block b of a rows x cols tensor against the reference. */
static int check_block(const bfp_format_info *f, const uint16_t *x, size_t rows, size_t cols,
                       const bfp_plane_sizes *sz, const uint8_t *codes, const uint8_t *scales,
                       const uint16_t *y, size_t b)
{
    size_t bpr = sz->blocks_per_row, r = b / bpr, j = b % bpr;
    size_t c0 = j * (size_t)f->block, len = cols - c0 < (size_t)f->block ? cols - c0 : (size_t)f->block;
    size_t first = r * cols + c0; /* element index, 64-bit */
    uint8_t rc[64], rs[4];
    uint16_t ry[64];
    bfp_planes p = {rc, rs, NULL, NULL};
    if (bfp_quantize_ref(f->id, BFP_DTYPE_BF16, x + first, 1, len, NULL, &p, NULL) != BFP_OK)
        return 0;
    size_t cbytes = len * (size_t)f->elem_bits / 8;
    const uint8_t *gc = codes + r * sz->code_row_bytes + c0 * (size_t)f->elem_bits / 8;
    const uint8_t *gs = scales + b * (size_t)f->scale_bytes;
    if (memcmp(rc, gc, cbytes) != 0 || memcmp(rs, gs, (size_t)f->scale_bytes) != 0) {
        fprintf(stderr, "%s block %zu (row %zu, element %zu): planes differ\n", f->name, b, r,
                first);
        return 0;
    }
    bfp_const_planes cp = {rc, rs, NULL, NULL};
    if (bfp_dequantize_ref(f->id, &cp, 1, len, BFP_DTYPE_BF16, ry) != BFP_OK ||
        memcmp(ry, y + first, len * 2) != 0) {
        fprintf(stderr, "%s block %zu (element %zu): dequantized values differ\n", f->name, b,
                first);
        return 0;
    }
    (void)rows;
    return 1;
}

static void run(bfp_format fmt, size_t rows, size_t cols, const uint16_t *x, uint16_t *y)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    bfp_plane_sizes sz;
    CHECK(bfp_plane_sizes_for(fmt, rows, cols, &sz) == BFP_OK, "%s sizes", f->name);
    uint8_t *codes = malloc(sz.codes), *scales = malloc(sz.scales);
    if (!codes || !scales) {
        CHECK(0, "%s: cannot allocate the planes (%zu + %zu bytes)", f->name, sz.codes,
              sz.scales);
        free(codes);
        free(scales);
        return;
    }
    bfp_planes p = {codes, scales, NULL, NULL};
    bfp_stats st;
    double t0 = now();
    CHECK(bfp_quantize(fmt, BFP_DTYPE_BF16, x, rows, cols, NULL, &p, &st) == BFP_OK,
          "%s quantize %zux%zu", f->name, rows, cols);
    double t1 = now();
    bfp_const_planes cp = {codes, scales, NULL, NULL};
    CHECK(bfp_dequantize(fmt, &cp, rows, cols, BFP_DTYPE_BF16, y) == BFP_OK, "%s dequantize",
          f->name);
    double t2 = now();
    size_t nblocks = rows * sz.blocks_per_row;
    CHECK(st.blocks == nblocks, "%s: %zu blocks counted, %zu expected", f->name, st.blocks,
          nblocks);

    /* 4096 blocks spread evenly, the last 64, and 64 around element 2^31
     * and around byte 2^32 of the input (element 2^31 in bf16: the same) */
    size_t ok = 0, tried = 0;
    size_t per_row = sz.blocks_per_row;
    size_t at31 = (((size_t)1 << 31) / cols) * per_row + (((size_t)1 << 31) % cols) / (size_t)f->block;
    for (size_t k = 0; k < 4096 + 128; k++) {
        size_t b = k < 4096 ? k * (nblocks / 4096) + k % 7
                   : k < 4096 + 64 ? nblocks - 1 - (k - 4096)
                                   : at31 - 32 + (k - 4160);
        if (b >= nblocks)
            continue;
        tried++;
        ok += (size_t)check_block(f, x, rows, cols, &sz, codes, scales, y, b);
    }
    CHECK(ok == tried, "%s: %zu of %zu sampled blocks match the reference", f->name, ok, tried);
    printf("%s %zux%zu (%zu elements, %.2f GB bf16): quantize %.1f s, dequantize %.1f s [%s], "
           "%zu/%zu sampled blocks match the reference, %zu NaN blocks\n",
           f->name, rows, cols, rows * cols, (double)(rows * cols * 2) / 1e9, t1 - t0, t2 - t1,
           bfp_isa(), ok, tried, st.nonfinite_blocks);
    free(codes);
    free(scales);
}

int main(void)
{
    size_t have = mem_available_kib();
    if (have < (size_t)NEED_GIB << 20) {
        printf("skipped: needs %d GiB free (MemAvailable %.1f GiB)\n", NEED_GIB,
               (double)have / (1 << 20));
        return SKIP;
    }
    uint16_t *x = malloc(N * 2), *y = malloc(N * 2);
    if (!x || !y) {
        printf("skipped: needs %d GiB free (allocation failed)\n", NEED_GIB);
        free(x);
        free(y);
        return SKIP;
    }
    double t0 = now();
    fill(x);
    printf("filled %zu bf16 values in %.1f s\n", N, now() - t0);
    run(BFP_MXFP4, N / 4096, 4096, x, y);
    run(BFP_HIF4, 1, N, x, y);
    free(x);
    free(y);
    return check_summary("test_huge_tensor");
}

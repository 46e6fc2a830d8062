/* test_cuda.c - the GPU quantizer and dequantizer against the reference,
 * bit for bit: codes, scales (planar and 128x4 swizzled), meta, tensor
 * scale, non-finite block count, and decoded f32 / bf16 / f16 values, for
 * every format, input dtype and option, on random data with outliers,
 * NaN/Inf/-0/subnormals, ties, huge and tiny blocks, partial blocks, odd
 * shapes, unaligned device pointers, and 16384x16384 (every 97th row).
 * Without a GPU it prints "skipped: no GPU" and passes. BFP_TEST_QUICK=1
 * runs a reduced set (and no 16384x16384). */
#include "bfp.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BFP_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda_check.h"

static int quick;

/* ---- data ------------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

static float bits_f(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* One value for element i of a block of kind k. */
static float gen_value(int kind, double bscale)
{
    double g = (unif() + unif() + unif() - 1.5) * 2.0; /* roughly normal */
    switch (kind) {
    case 0: /* plain random, with an outlier now and then */
        return (float)(g * bscale * (unif() < 0.02 ? 300.0 : 1.0));
    case 1: { /* specials */
        double u = unif();
        if (u < 0.03) return bits_f(0x7FC00000u | (uint32_t)(rnd() & 0x3FFFFF)) * (rnd() & 1 ? -1 : 1);
        if (u < 0.06) return (rnd() & 1) ? INFINITY : -INFINITY;
        if (u < 0.15) return -0.0f;
        if (u < 0.30) return bits_f((uint32_t)(rnd() & 0x807FFFFFu)); /* fp32 subnormal */
        return (float)(g * bscale);
    }
    case 2: { /* exact grid points and midpoints: ties */
        int k = (int)(rnd() % 33) - 16;
        return (float)ldexp(k / 8.0, (int)(rnd() % 7) - 3) * (float)bscale;
    }
    case 3: /* huge */
        return (float)(g * 1e37);
    case 4: /* tiny, subnormal range */
        return (float)(g * 1e-39);
    case 5: /* zeros of both signs */
        return (rnd() & 1) ? 0.0f : -0.0f;
    case 7: /* now and then a value at bscale among subnormals (MX++: a far second max) */
        return (float)(g * (unif() < 1.0 / 16 ? bscale : 1e-39));
    default: /* f16-safe random with ties */
        return (float)ldexp((double)((int)(rnd() % 64) - 32), (int)(rnd() % 12) - 8);
    }
}

/* rows x cols f32 values; tame 1: kinds 0, 2, 6 only (NVFP4's tensor scale
 * then stays moderate); tame 2: tiny and zero blocks only (a huge tensor
 * scale); tame 3: kinds 0, 2, 7 at 2^-112..2^-123 (MX++ blocks near the
 * flush limit, some with an NBM exponent below -127). Blocks of 16 share a
 * kind and a scale. */
static float *gen_tensor(size_t rows, size_t cols, int tame, uint64_t seed)
{
    rng_state = seed;
    float *x = malloc(rows * cols * sizeof *x);
    for (size_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 < cols; c0 += 16) {
            int kind = tame == 3   ? (int[]){0, 2, 7, 7}[rnd() % 4]
                       : tame == 2 ? (rnd() % 4 ? 4 : 5)
                       : tame      ? (int[]){0, 2, 6}[rnd() % 3]
                                   : (int)(rnd() % 7);
            double bscale = ldexp(1.0, tame == 3 ? -112 - (int)(rnd() % 12) : (int)(rnd() % 60) - 30);
            for (size_t c = c0; c < cols && c < c0 + 16; c++)
                x[r * cols + c] = gen_value(kind, bscale);
        }
    return x;
}

/* the input in dtype dt (host bytes) */
static void *to_dtype(const float *x, size_t n, bfp_dtype dt)
{
    if (dt == BFP_DTYPE_F32) {
        void *p = malloc(n * 4);
        memcpy(p, x, n * 4);
        return p;
    }
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        h[i] = dt == BFP_DTYPE_BF16 ? bfp_f32_to_bf16(x[i]) : bfp_f32_to_f16(x[i]);
    return h;
}

/* ---- device helpers ------------------------------------------------------------- */

typedef struct {
    uint8_t *codes, *scales, *meta;
    float *ts;
    size_t ncodes, nscales, nmeta;
} hplanes;

static void hplanes_alloc(hplanes *p, const bfp_plane_sizes *sz, size_t nscales)
{
    p->ncodes = sz->codes;
    p->nscales = nscales;
    p->nmeta = sz->meta;
    p->codes = malloc(sz->codes);
    p->scales = malloc(nscales);
    p->meta = malloc(sz->meta ? sz->meta : 1);
    p->ts = malloc(4);
    *p->ts = 0;
}

static void hplanes_free(hplanes *p)
{
    free(p->codes);
    free(p->scales);
    free(p->meta);
    free(p->ts);
}

/* device buffer of n bytes at byte offset off from a 256-aligned allocation */
static void *dev_alloc(size_t n, size_t off, void **base)
{
    CU(cudaMalloc(base, n + off + 16));
    CU(cudaMemset(*base, 0xA5, n + off + 16)); /* poison */
    return (char *)*base + off;
}

static int first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int)i;
    return -1;
}

static const char *fname(bfp_format f) { return bfp_format_get(f)->name; }

static int failures_reported;

#define EXPECT_SAME(a, b, n, ...)                                                  \
    do {                                                                           \
        int d_ = first_diff((const uint8_t *)(a), (const uint8_t *)(b), (n));      \
        CHECK(d_ < 0, __VA_ARGS__);                                                \
        if (d_ >= 0 && failures_reported++ < 30)                                   \
            fprintf(stderr, "   first difference at byte %d: gpu %02x ref %02x\n", \
                    d_, ((const uint8_t *)(a))[d_], ((const uint8_t *)(b))[d_]);   \
    } while (0)

/* ---- one case --------------------------------------------------------------------- */

typedef struct {
    bfp_format fmt;
    bfp_dtype dt;
    size_t rows, cols;
    bfp_options o;
    int swz;
    size_t src_off, codes_off, dst_off;
    int tame;
    uint64_t seed;
} qcase;

static void case_name(const qcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s %s %zux%zu rnd=%d seed=%llu sm=%d nots=%d 2d=%d swz=%d off=%zu/%zu/%zu %s",
             fname(c->fmt), bfp_dtype_name(c->dt), c->rows, c->cols, (int)c->o.rounding,
             (unsigned long long)c->o.seed, (int)c->o.scale_mode, c->o.nvfp4_no_tensor_scale,
             c->o.nvfp4_2d, c->swz, c->src_off, c->codes_off, c->dst_off,
             c->tame == 3 ? "near-flush" : c->tame == 2 ? "tiny" : c->tame ? "tame" : "mixed");
}

/* GPU dequantize of host planes vs the reference, for f32, bf16 and f16 */
static void check_dequant(const qcase *c, const hplanes *hp, const char *what)
{
    char name[256];
    case_name(c, name, sizeof name);
    const bfp_format_info *f = bfp_format_get(c->fmt);
    size_t n = c->rows * c->cols;
    void *b1, *b2, *b3, *b4, *b5;
    uint8_t *dc = dev_alloc(hp->ncodes, c->codes_off, &b1);
    uint8_t *ds = dev_alloc(hp->nscales, 0, &b2);
    uint8_t *dm = dev_alloc(hp->nmeta ? hp->nmeta : 1, 0, &b3);
    float *dts = dev_alloc(4, 0, &b4);
    CU(cudaMemcpy(dc, hp->codes, hp->ncodes, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(ds, hp->scales, hp->nscales, cudaMemcpyHostToDevice));
    if (hp->nmeta)
        CU(cudaMemcpy(dm, hp->meta, hp->nmeta, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dts, hp->ts, 4, cudaMemcpyHostToDevice));
    bfp_const_planes dp = {dc, ds, f->meta_bytes ? dm : NULL, f->has_tensor_scale ? dts : NULL};
    bfp_const_planes cp = {hp->codes, hp->scales, hp->meta, hp->ts};
    bfp_dtype outs[3] = {BFP_DTYPE_F32, BFP_DTYPE_BF16, BFP_DTYPE_F16};
    for (int k = 0; k < 3; k++) {
        size_t es = bfp_dtype_size(outs[k]);
        void *ref = malloc(n * es), *got = malloc(n * es);
        CHECK(bfp_dequantize_ref(c->fmt, &cp, c->rows, c->cols, outs[k], ref) == BFP_OK,
              "ref dequant %s", name);
        uint8_t *dd = dev_alloc(n * es, c->dst_off, &b5);
        bfp_status st = bfp_cuda_dequantize(c->fmt, &dp, c->rows, c->cols, outs[k], dd, NULL);
        CHECK(st == BFP_OK, "gpu dequant %s: %s", name, bfp_status_str(st));
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(got, dd, n * es, cudaMemcpyDeviceToHost));
        EXPECT_SAME(got, ref, n * es, "dequant %s to %s (%s): values", name,
                    bfp_dtype_name(outs[k]), what);
        CU(cudaFree(b5));
        free(ref);
        free(got);
    }
    CU(cudaFree(b1));
    CU(cudaFree(b2));
    CU(cudaFree(b3));
    CU(cudaFree(b4));
}

static void run_case(const qcase *c)
{
    char name[256];
    case_name(c, name, sizeof name);
    const bfp_format_info *f = bfp_format_get(c->fmt);
    bfp_plane_sizes sz;
    CHECK(bfp_plane_sizes_for(c->fmt, c->rows, c->cols, &sz) == BFP_OK, "sizes %s", name);
    size_t n = c->rows * c->cols, es = bfp_dtype_size(c->dt);
    float *x = gen_tensor(c->rows, c->cols, c->tame, c->seed);
    void *src = to_dtype(x, n, c->dt);

    hplanes ref, got;
    hplanes_alloc(&ref, &sz, sz.scales);
    size_t nsc = c->swz ? bfp_swizzled_scales_size(c->rows, sz.blocks_per_row) : sz.scales;
    hplanes_alloc(&got, &sz, nsc);
    /* unused planes stay NULL: the reference's NVFP4 writes meta when given one */
    bfp_planes rp = {ref.codes, ref.scales, f->meta_bytes ? ref.meta : NULL,
                     f->has_tensor_scale ? ref.ts : NULL};
    bfp_stats stats;
    bfp_status rst = bfp_quantize_ref(c->fmt, c->dt, src, c->rows, c->cols, &c->o, &rp, &stats);
    CHECK(rst == BFP_OK, "ref %s: %s", name, bfp_status_str(rst));

    void *b[6];
    unsigned char *dsrc = dev_alloc(n * es, c->src_off, &b[0]);
    uint8_t *dc = dev_alloc(sz.codes, c->codes_off, &b[1]);
    uint8_t *ds = dev_alloc(nsc, 0, &b[2]);
    uint8_t *dm = dev_alloc(sz.meta ? sz.meta : 1, 0, &b[3]);
    float *dts = dev_alloc(4, 0, &b[4]);
    unsigned long long *dcount = dev_alloc(8, 0, &b[5]), count = 0;
    CU(cudaMemset(dcount, 0, 8));
    CU(cudaMemcpy(dsrc, src, n * es, cudaMemcpyHostToDevice));
    bfp_planes dp = {dc, ds, f->meta_bytes ? dm : NULL, f->has_tensor_scale ? dts : NULL};
    cudaStream_t stream;
    CU(cudaStreamCreate(&stream));
    bfp_status st = bfp_cuda_quantize(c->fmt, c->dt, dsrc, c->rows, c->cols, &c->o, c->swz, &dp,
                                      dcount, stream);
    CHECK(st == BFP_OK, "gpu quantize %s: %s", name, bfp_status_str(st));
    CU(cudaStreamSynchronize(stream));
    CU(cudaStreamDestroy(stream));
    CU(cudaMemcpy(got.codes, dc, sz.codes, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(got.scales, ds, nsc, cudaMemcpyDeviceToHost));
    if (sz.meta)
        CU(cudaMemcpy(got.meta, dm, sz.meta, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(got.ts, dts, 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(&count, dcount, 8, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 6; i++)
        CU(cudaFree(b[i]));

    if (st == BFP_OK && rst == BFP_OK) {
        EXPECT_SAME(got.codes, ref.codes, sz.codes, "codes %s", name);
        if (c->swz) {
            uint8_t *want = malloc(nsc), *planar = malloc(sz.scales);
            bfp_scales_to_swizzled(ref.scales, c->rows, sz.blocks_per_row, want);
            EXPECT_SAME(got.scales, want, nsc, "swizzled scales (padding zero) %s", name);
            bfp_scales_from_swizzled(got.scales, c->rows, sz.blocks_per_row, planar);
            EXPECT_SAME(planar, ref.scales, sz.scales, "unswizzled scales %s", name);
            free(want);
            free(planar);
        } else {
            EXPECT_SAME(got.scales, ref.scales, sz.scales, "scales %s", name);
        }
        if (sz.meta)
            EXPECT_SAME(got.meta, ref.meta, sz.meta, "meta %s", name);
        if (f->has_tensor_scale)
            EXPECT_SAME(got.ts, ref.ts, 4, "tensor scale %s (gpu %.9g ref %.9g)", name,
                        (double)*got.ts, (double)*ref.ts);
        CHECK(count == stats.nonfinite_blocks, "nonfinite count %s: gpu %llu ref %zu", name,
              count, stats.nonfinite_blocks);
        check_dequant(c, &ref, "reference planes");
    }
    hplanes_free(&ref);
    hplanes_free(&got);
    free(src);
    free(x);
}

/* Decode random bytes: bad blocks, NaN codes, bad tensor scales. sweep:
 * row r has scale byte r % 256 in every block (HiF4: the first byte of the
 * word), so that every scale takes the bf16 decoder's fast path or its
 * fallback, on both sides of each boundary. */
static void run_garbage(bfp_format fmt, size_t rows, size_t cols, uint64_t seed, int sweep)
{
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(fmt, rows, cols, &sz);
    hplanes hp;
    hplanes_alloc(&hp, &sz, sz.scales);
    rng_state = seed;
    for (size_t i = 0; i < sz.codes; i++)
        hp.codes[i] = (uint8_t)rnd();
    for (size_t i = 0; i < sz.scales; i++) {
        uint64_t u = rnd();
        /* mostly plausible scales, sometimes NaN / zero / anything */
        hp.scales[i] = (u & 3) == 0 ? (uint8_t)(u >> 8) : (u & 3) == 1 ? 0xFF : (u & 3) == 2 ? 0 : (uint8_t)(120 + (u >> 8) % 16);
        if (bfp_format_get(fmt)->family == BFP_FAMILY_NVFP4 || bfp_format_get(fmt)->family == BFP_FAMILY_NVFP4_PLUS)
            hp.scales[i] = (u & 7) == 0 ? (uint8_t)(u >> 8) : (u & 7) == 1 ? 0x7F : (uint8_t)((u >> 8) % 0x7F);
        if (sweep) /* HiF4: 4 bytes per block, the scale byte first */
            hp.scales[i] = bfp_format_get(fmt)->scale_bytes == 4 && i % 4 ? (uint8_t)u
                                                                         : (uint8_t)(i / (sz.scales / rows));
    }
    for (size_t i = 0; i < sz.meta; i++) {
        uint64_t u = rnd();
        hp.meta[i] = (u & 3) == 0 ? (uint8_t)(u >> 8) : (uint8_t)((u >> 8) % 16);
    }
    /* 3e37: tiny sb/s_enc too; 1e-37: sb/s_enc overflows fp32 for big sb
     * while 0.5 sb/s_enc does not; 5e-36: 6 sb/s_enc near the bf16 maximum */
    static const float ts[6] = {3.0e-5f, 1234.5f, -1.0f, 3.0e37f, 1.0e-37f, 5.0e-36f};
    *hp.ts = ts[seed % 6];
    qcase c = {fmt, BFP_DTYPE_F32, rows, cols, {0}, 0, 0, 0, 0, 0, seed};
    check_dequant(&c, &hp, "random bytes");
    hplanes_free(&hp);
}

/* ---- 16384 x 16384: GPU on the whole tensor, the reference on sampled rows -------- */

static void run_big(bfp_format fmt, bfp_dtype dt, const bfp_options *o, const void *src,
                    const float *x, size_t rows, size_t cols, float amax, size_t amax_at)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    char name[160];
    snprintf(name, sizeof name, "%s %s %zux%zu rnd=%d 2d=%d (sampled)", f->name,
             bfp_dtype_name(dt), rows, cols, (int)o->rounding, o->nvfp4_2d);
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(fmt, rows, cols, &sz);
    size_t n = rows * cols, es = bfp_dtype_size(dt);
    void *b[5];
    unsigned char *dsrc = dev_alloc(n * es, 0, &b[0]);
    uint8_t *dc = dev_alloc(sz.codes, 0, &b[1]);
    uint8_t *ds = dev_alloc(sz.scales, 0, &b[2]);
    uint8_t *dm = dev_alloc(sz.meta ? sz.meta : 1, 0, &b[3]);
    float *dts = dev_alloc(4, 0, &b[4]);
    CU(cudaMemcpy(dsrc, src, n * es, cudaMemcpyHostToDevice));
    bfp_planes dp = {dc, ds, f->meta_bytes ? dm : NULL, f->has_tensor_scale ? dts : NULL};
    CHECK(bfp_cuda_quantize(fmt, dt, dsrc, rows, cols, o, 0, &dp, NULL, NULL) == BFP_OK,
          "gpu quantize %s", name);
    uint16_t *dq = NULL;
    void *bq;
    dq = dev_alloc(n * 2, 0, &bq);
    bfp_const_planes dcp = {dc, ds, dp.meta, dp.tensor_scale};
    CHECK(bfp_cuda_dequantize(fmt, &dcp, rows, cols, BFP_DTYPE_BF16, dq, NULL) == BFP_OK,
          "gpu dequant %s", name);
    CU(cudaDeviceSynchronize());
    {
        /* a launch choice changes no byte: one CTA per SM strides over everything */
        void *bt;
        uint16_t *dt1 = dev_alloc(n * 2, 0, &bt);
        bfp_cuda_tuning tu = {{1}};
        CHECK(bfp_cuda_dequantize_tuned(fmt, &dcp, rows, cols, BFP_DTYPE_BF16, dt1, NULL, &tu) ==
                  BFP_OK, "gpu dequant tuned %s", name);
        uint16_t *h0 = malloc(n * 2), *h1 = malloc(n * 2);
        CU(cudaMemcpy(h0, dq, n * 2, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(h1, dt1, n * 2, cudaMemcpyDeviceToHost));
        CHECK(memcmp(h0, h1, n * 2) == 0, "gpu dequant tuned %s: same bytes", name);
        free(h0);
        free(h1);
        CU(cudaFree(bt));
    }

    size_t tile = o->nvfp4_2d ? 16 : 1, step = o->nvfp4_2d ? 16 * 13 : 97;
    int has_ts = f->has_tensor_scale && !o->nvfp4_no_tensor_scale;
    size_t sub_rows = tile + (has_ts ? 1 : 0);
    unsigned char *sub = malloc(sub_rows * cols * es);
    hplanes ref, got;
    bfp_plane_sizes ssz;
    bfp_plane_sizes_for(fmt, sub_rows, cols, &ssz);
    hplanes_alloc(&ref, &ssz, ssz.scales);
    hplanes_alloc(&got, &ssz, ssz.scales);
    uint16_t *gq = malloc(tile * cols * 2), *rq = malloc(sub_rows * cols * 2);
    float tsv = 0;
    CU(cudaMemcpy(&tsv, dts, 4, cudaMemcpyDeviceToHost));
    size_t checked = 0;
    int bad = 0;
    size_t last = (rows - tile) / tile * tile; /* the last whole tile is checked too */
    for (size_t r0 = 0; r0 + tile <= rows && bad < 3; r0 = r0 < last && r0 + step > last ? last : r0 + step) {
        memcpy(sub, (const unsigned char *)src + r0 * cols * es, tile * cols * es);
        if (has_ts) { /* a row holding only the tensor's amax keeps s_enc */
            memset(sub + tile * cols * es, 0, cols * es);
            memcpy(sub + tile * cols * es, (const unsigned char *)src + amax_at * es, es);
        }
        bfp_options so = *o;
        so.seed = o->seed + 0x9E3779B97F4A7C15ull * (uint64_t)(r0 * cols); /* same SR bits */
        bfp_planes rp = {ref.codes, ref.scales, f->meta_bytes ? ref.meta : NULL,
                         f->has_tensor_scale ? ref.ts : NULL};
        CHECK(bfp_quantize_ref(fmt, dt, sub, sub_rows, cols, &so, &rp, NULL) == BFP_OK, "ref %s", name);
        CU(cudaMemcpy(got.codes, dc + r0 * sz.code_row_bytes, tile * sz.code_row_bytes,
                      cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(got.scales, ds + r0 * sz.blocks_per_row * f->scale_bytes,
                      tile * sz.blocks_per_row * f->scale_bytes, cudaMemcpyDeviceToHost));
        if (sz.meta)
            CU(cudaMemcpy(got.meta, dm + r0 * sz.blocks_per_row, tile * sz.blocks_per_row,
                          cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(gq, dq + r0 * cols, tile * cols * 2, cudaMemcpyDeviceToHost));
        int ok = first_diff(got.codes, ref.codes, tile * sz.code_row_bytes) < 0 &&
                 first_diff(got.scales, ref.scales, tile * sz.blocks_per_row * f->scale_bytes) < 0 &&
                 (!sz.meta || first_diff(got.meta, ref.meta, tile * sz.blocks_per_row) < 0) &&
                 (!f->has_tensor_scale || memcmp(&tsv, ref.ts, 4) == 0);
        CHECK(ok, "%s: planes of rows %zu..%zu", name, r0, r0 + tile - 1);
        bfp_const_planes cp = {ref.codes, ref.scales, ref.meta, ref.ts};
        bfp_dequantize_ref(fmt, &cp, sub_rows, cols, BFP_DTYPE_BF16, rq);
        int dok = first_diff((uint8_t *)gq, (uint8_t *)rq, tile * cols * 2) < 0;
        CHECK(dok, "%s: bf16 dequant of rows %zu..%zu", name, r0, r0 + tile - 1);
        bad += !ok || !dok;
        checked += tile;
    }
    (void)x;
    (void)amax;
    printf("  %-40s %zu rows compared\n", name, checked);
    free(sub);
    free(gq);
    free(rq);
    hplanes_free(&ref);
    hplanes_free(&got);
    for (int i = 0; i < 5; i++)
        CU(cudaFree(b[i]));
    CU(cudaFree(bq));
}

/* 4099 x 8200: large enough that each GPU thread takes 4 rows, with a
 * partial group of rows at the bottom and partial blocks at the right. */
static void medium_tests(void)
{
    const size_t R = 4099, C = 8200, n = R * C;
    printf("4099x8200 (every 97th row and the last):\n");
    float *x = gen_tensor(R, C, 0, 4242);
    uint16_t *bf = to_dtype(x, n, BFP_DTYPE_BF16);
    free(x);
    size_t amax_at = 0;
    float amax = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(bfp_bf16_to_f32(bf[i]));
        if (isfinite(a) && a > amax) {
            amax = a;
            amax_at = i;
        }
    }
    for (int i = 0; i < bfp_format_count(); i++) {
        bfp_options o;
        bfp_options_init(&o);
        run_big(bfp_format_at(i)->id, BFP_DTYPE_BF16, &o, bf, NULL, R, C, amax, amax_at);
    }
    free(bf);
}

static void big_tests(void)
{
    const size_t R = 16384, C = 16384, n = R * C;
    printf("16384x16384 (every 97th row, every 13th 16-row tile for 2-D):\n");
    rng_state = 12345;
    uint16_t *bf = malloc(n * 2);
    size_t amax_at = 0;
    float amax = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t c0 = 0; c0 < C; c0 += 32) {
            uint64_t u = rnd();
            double bs = ldexp(1.0, (int)(u % 40) - 20);
            int special = (u >> 8) % 64 == 0;
            for (size_t c = c0; c < c0 + 32; c++) {
                float v;
                if (special && (c & 7) == 3)
                    v = (rnd() & 1) ? NAN : -INFINITY;
                else
                    v = (float)((unif() - 0.5) * bs * ((rnd() & 63) == 0 ? 100.0 : 1.0));
                uint16_t h = bfp_f32_to_bf16(v);
                bf[r * C + c] = h;
                float a = fabsf(bfp_bf16_to_f32(h));
                if (isfinite(a) && a > amax) {
                    amax = a;
                    amax_at = r * C + c;
                }
            }
        }
    for (int i = 0; i < bfp_format_count(); i++) {
        bfp_format fmt = bfp_format_at(i)->id;
        bfp_options o;
        bfp_options_init(&o);
        run_big(fmt, BFP_DTYPE_BF16, &o, bf, NULL, R, C, amax, amax_at);
        if (bfp_format_at(i)->has_tensor_scale) {
            o.nvfp4_2d = fmt == BFP_NVFP4; /* NVFP4+ has no 2-D variant */
            run_big(fmt, BFP_DTYPE_BF16, &o, bf, NULL, R, C, amax, amax_at);
            o.nvfp4_2d = 0;
            o.rounding = BFP_ROUND_STOCHASTIC;
            o.seed = 777;
            run_big(fmt, BFP_DTYPE_BF16, &o, bf, NULL, R, C, amax, amax_at);
        }
        if (fmt == BFP_MXFP4 || fmt == BFP_HIF4) {
            o.rounding = BFP_ROUND_STOCHASTIC;
            o.seed = 99;
            run_big(fmt, BFP_DTYPE_BF16, &o, bf, NULL, R, C, amax, amax_at);
        }
    }
    free(bf);
}

/* ---- argument checks: same status codes as the CPU driver ------------------------- */

static void arg_tests(void)
{
    void *base;
    uint8_t *d = dev_alloc(4096, 0, &base);
    bfp_planes p = {d, d + 1024, d + 2048, (float *)(d + 3072)};
    bfp_options o;
    bfp_options_init(&o);
    CHECK(bfp_cuda_quantize((bfp_format)99, BFP_DTYPE_F32, d, 1, 32, NULL, 0, &p, NULL, NULL) == BFP_ERR_FORMAT, "bad format");
    CHECK(bfp_cuda_quantize(BFP_MXFP4, BFP_DTYPE_F32, d, 0, 32, NULL, 0, &p, NULL, NULL) == BFP_ERR_SHAPE, "zero rows");
    CHECK(bfp_cuda_quantize(BFP_MXFP4, (bfp_dtype)9, d, 1, 32, NULL, 0, &p, NULL, NULL) == BFP_ERR_ARG, "bad dtype");
    CHECK(bfp_cuda_quantize(BFP_MXFP4, BFP_DTYPE_F32, NULL, 1, 32, NULL, 0, &p, NULL, NULL) == BFP_ERR_ARG, "null src");
    bfp_planes nometa = {d, d + 1024, NULL, NULL};
    CHECK(bfp_cuda_quantize(BFP_MXFP4_PLUS, BFP_DTYPE_F32, d, 1, 32, NULL, 0, &nometa, NULL, NULL) == BFP_ERR_ARG, "no meta");
    CHECK(bfp_cuda_quantize(BFP_NVFP4, BFP_DTYPE_F32, d, 1, 32, NULL, 0, &nometa, NULL, NULL) == BFP_ERR_ARG, "no tensor scale");
    o.scale_mode = BFP_SCALE_CEIL;
    CHECK(bfp_cuda_quantize(BFP_MXFP4_PLUS, BFP_DTYPE_F32, d, 1, 32, &o, 0, &p, NULL, NULL) == BFP_ERR_UNSUPPORTED, "MX+ ceil");
    o.scale_mode = (bfp_scale_mode)9;
    CHECK(bfp_cuda_quantize(BFP_MXFP4, BFP_DTYPE_F32, d, 1, 32, &o, 0, &p, NULL, NULL) == BFP_ERR_ARG, "bad scale mode");
    bfp_options_init(&o);
    o.rounding = (bfp_rounding)9;
    CHECK(bfp_cuda_quantize(BFP_MXFP4, BFP_DTYPE_F32, d, 1, 32, &o, 0, &p, NULL, NULL) == BFP_ERR_ARG, "bad rounding");
    bfp_options_init(&o);
    o.nvfp4_2d = 1;
    CHECK(bfp_cuda_quantize(BFP_MXFP4, BFP_DTYPE_F32, d, 1, 32, &o, 0, &p, NULL, NULL) == BFP_ERR_UNSUPPORTED, "2d on mx");
    CHECK(bfp_cuda_quantize(BFP_NVFP4_PLUS, BFP_DTYPE_F32, d, 1, 32, &o, 0, &p, NULL, NULL) == BFP_ERR_UNSUPPORTED, "2d on nvfp4+");
    bfp_options_init(&o);
    o.scale_mode = BFP_SCALE_FLOOR;
    CHECK(bfp_cuda_quantize(BFP_NVFP4, BFP_DTYPE_F32, d, 1, 32, &o, 0, &p, NULL, NULL) == BFP_ERR_UNSUPPORTED, "floor on nvfp4");
    CHECK(bfp_cuda_quantize(BFP_HIF4, BFP_DTYPE_F32, d, 1, 64, NULL, 1, &p, NULL, NULL) == BFP_ERR_UNSUPPORTED, "hif4 swizzled");
    bfp_const_planes cp = {d, d + 1024, d + 2048, (float *)(d + 3072)};
    CHECK(bfp_cuda_dequantize(BFP_MXFP4, &cp, 1, 32, (bfp_dtype)0, d + 3500, NULL) == BFP_ERR_ARG, "dequant dtype");
    CHECK(bfp_cuda_dequantize(BFP_MXFP4, &cp, 1, 0, BFP_DTYPE_F32, d + 3500, NULL) == BFP_ERR_SHAPE, "dequant shape");
    CHECK(bfp_cuda_dequantize(BFP_MXFP4, NULL, 1, 32, BFP_DTYPE_F32, d + 3500, NULL) == BFP_ERR_ARG, "dequant planes");
    bfp_cuda_tuning tu = {{(1u << 20) + 1}};
    CHECK(bfp_cuda_dequantize_tuned(BFP_MXFP4, &cp, 1, 32, BFP_DTYPE_F32, d + 3500, NULL, &tu) == BFP_ERR_ARG,
          "dequant tuning out of range");
    CU(cudaFree(base));
}

static void small_tests(void)
{
    static const size_t shapes[][2] = {{1, 1}, {1, 33}, {3, 1000}, {7, 130}, {130, 72}, {16, 64}, {33, 257}};
    const int nshapes = quick ? 4 : 7;
    static const bfp_dtype dts[3] = {BFP_DTYPE_F32, BFP_DTYPE_BF16, BFP_DTYPE_F16};
    uint64_t seed = 1;
    const char *only = getenv("BFP_TEST_FORMAT");
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        if (only && strcmp(only, f->name) != 0)
            continue;
        int before = check_failed;
        int cases = 0;
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < nshapes; s++)
                for (int tame = 0; tame < 2; tame++) {
                    qcase c = {f->id, dts[d], shapes[s][0], shapes[s][1], {0}, 0, 0, 0, 0, tame, seed++};
                    run_case(&c);
                    cases++;
                }
        /* every rounding mode (stochastic with two seeds), on two shapes */
        for (int d = 0; d < 3; d++)
            for (int rm = 1; rm <= 5; rm++)
                for (int tame = 0; tame < 2; tame++) {
                    qcase c = {f->id, dts[d], 3, 1000, {0}, 0, 0, 0, 0, tame, seed++};
                    c.o.rounding = rm == 5 ? BFP_ROUND_STOCHASTIC : (bfp_rounding)rm;
                    c.o.seed = rm == 5 ? 0xFFFFFFFFFFFFFFF0ull : 42;
                    if (quick && d != 1 && rm != 4)
                        continue;
                    run_case(&c);
                    c.rows = 1, c.cols = 33;
                    run_case(&c);
                    cases += 2;
                }
        if (f->family == BFP_FAMILY_MX)
            for (int d = 0; d < 3; d++)
                for (int sm = 1; sm <= 3; sm++)
                    for (int tame = 0; tame < 2; tame++) {
                        qcase c = {f->id, dts[d], 7, 130, {0}, 0, 0, 0, 0, tame, seed++};
                        c.o.scale_mode = (bfp_scale_mode)sm;
                        run_case(&c);
                        c.o.rounding = BFP_ROUND_STOCHASTIC;
                        c.o.seed = 5;
                        run_case(&c);
                        cases += 2;
                    }
        if (f->has_tensor_scale)
            for (int d = 0; d < 3; d++) { /* a tiny tensor: s_enc huge or FLT_MAX */
                qcase c = {f->id, dts[d], 9, 100, {0}, 0, 0, 0, 0, 2, seed++};
                run_case(&c);
                c.cols = 80; /* rows of 5 whole blocks, 45 in all (bf16: the block kernel, odd tail) */
                run_case(&c);
                c.tame = 0;
                run_case(&c);
                cases += 3;
            }
        if (f->has_tensor_scale)
            for (int d = 0; d < 3; d++)
                for (int v = 1; v < (f->id == BFP_NVFP4 ? 4 : 2); v++) /* 2-D: NVFP4 only */
                    for (int tame = 0; tame < 2; tame++) {
                        if ((v >> 1) && f->id != BFP_NVFP4)
                            continue; /* 2-D: NVFP4 only */
                        qcase c = {f->id, dts[d], 33, 257, {0}, 0, 0, 0, 0, tame, seed++};
                        c.o.nvfp4_no_tensor_scale = v & 1;
                        c.o.nvfp4_2d = (v >> 1) & 1;
                        run_case(&c);
                        c.o.rounding = BFP_ROUND_STOCHASTIC;
                        c.o.seed = 11;
                        run_case(&c);
                        c.rows = 40, c.cols = 48; /* partial tiles at the bottom */
                        c.o.rounding = BFP_ROUND_DEFAULT;
                        run_case(&c);
                        cases += 3;
                    }
        if (f->scale_bytes == 1)
            for (int s = 0; s < 3; s++) { /* 128x4 swizzled scales, with and without padding */
                static const size_t ss[3][2] = {{130, 72}, {256, 256}, {1, 33}};
                qcase c = {f->id, BFP_DTYPE_BF16, ss[s][0], ss[s][1], {0}, 1, 0, 0, 0, 1, seed++};
                run_case(&c);
                if (f->id == BFP_NVFP4) {
                    c.o.nvfp4_2d = 1;
                    run_case(&c);
                }
                cases += 2;
            }
        if (f->family == BFP_FAMILY_MX_PP) /* the bf16 block kernel on tiny blocks */
            for (int swz = 0; swz < 2; swz++) {
                qcase c = {f->id, BFP_DTYPE_BF16, 128, 256, {0}, swz, 0, 0, 0, 3, 7000 + (uint64_t)swz};
                run_case(&c);
                cases++;
            }
        if (f->family == BFP_FAMILY_HIF4) /* bf16 rows of whole blocks: hif4_block_kernel */
            for (int tame = 0; tame < 2; tame++) {
                qcase c = {f->id, BFP_DTYPE_BF16, 33, 640, {0}, 0, 0, 0, 0, tame, seed++};
                run_case(&c);
                cases++;
            }
        /* unaligned device pointers: input, codes and output */
        for (int d = 0; d < 3; d++) {
            qcase c = {f->id, dts[d], 5, 96, {0}, 0, 2, 1, 2, 0, seed++};
            run_case(&c);
            c.src_off = dts[d] == BFP_DTYPE_F32 ? 4 : 6;
            c.codes_off = 3;
            c.dst_off = 4;
            run_case(&c);
            cases += 2;
        }
        for (int g = 0; g < (quick ? 1 : 4); g++) { /* seeds: every tensor scale of run_garbage */
            run_garbage(f->id, 3, 200, 1000 + (uint64_t)g, 0);
            run_garbage(f->id, 2, 37, 2004 + (uint64_t)g, 0);
        }
        for (int g = 0; g < (f->has_tensor_scale ? 6 : 1); g++)
            run_garbage(f->id, 256, 2 * (size_t)f->block + 13, 3000 + (uint64_t)g, 1);
        /* rows of whole blocks (bf16: the flat kernel): a partial last chunk of
         * 128 groups, and many chunks (the 16384 x 16384 case below takes more
         * than one pass of its grid) */
        for (int g = 0; g < (f->has_tensor_scale ? 6 : 1); g++)
            run_garbage(f->id, 37, 4 * (size_t)f->block, 5004 + (uint64_t)g, 0);
        if (!quick)
            run_garbage(f->id, f->block == 64 ? 45003 : 60003, f->block == 64 ? 128 : 96, 6000, 0);
        printf("  %-14s %4d cases %s\n", f->name, cases, check_failed == before ? "ok" : "FAILED");
        fflush(stdout);
    }
}
#endif /* BFP_HAVE_CUDA */

int main(void)
{
    if (!bfp_cuda_available()) {
        printf("test_cuda: skipped: no GPU\n");
        return check_summary("test_cuda");
    }
#ifdef BFP_HAVE_CUDA
    quick = getenv("BFP_TEST_QUICK") && atoi(getenv("BFP_TEST_QUICK")) > 0;
    arg_tests();
    small_tests();
    if (!quick) {
        medium_tests();
        big_tests();
    }
#endif
    return check_summary("test_cuda");
}

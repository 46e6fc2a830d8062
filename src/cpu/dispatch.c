/* dispatch.c - public quantize/dequantize entry points over the CPU kernels.
 *
 * The kernel table is filled once (call_once) reference-first: the generic C
 * kernels, then AVX2 and AVX-512 overrides when the CPU has them, unless
 * BFP_ISA=generic|avx2|avx512 asks for less. Arguments are checked exactly
 * as the reference checks them (same statuses, same order). Options the
 * kernels do not implement (non-default rounding, other scale modes, 2-D
 * NVFP4) and float16 output go to the reference. */
#include "cpu_internal.h"

#include <stdlib.h>
#include <string.h>
#include <threads.h>

static bfp_kernels kernels;
static once_flag kernels_once = ONCE_FLAG_INIT;

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>

/* What the CPU and the OS (XCR0: the registers are saved) allow. */
static int cpu_isa(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return BFP_ISA_GENERIC;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c))
        return BFP_ISA_GENERIC;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 0x6) != 0x6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1))
        return BFP_ISA_GENERIC;
    int avx512 = ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1); /* F, BW, VL */
    return avx512 && (xlo & 0xE6) == 0xE6 ? BFP_ISA_AVX512 : BFP_ISA_AVX2;
}
#else
static int cpu_isa(void)
{
    return BFP_ISA_GENERIC;
}
#endif

/* Fill k reference-first up to isa (the CPU must have it); returns the ISA
 * the table really got (a build without an ISA's flags stops below it). */
static int kernels_fill(bfp_kernels *k, int isa)
{
    int got = BFP_ISA_GENERIC;
    bfp_cpu_generic_init(k);
    if (isa >= BFP_ISA_AVX2 && bfp_cpu_avx2_init(k)) {
        k->name = "avx2";
        got = BFP_ISA_AVX2;
    }
    if (isa >= BFP_ISA_AVX512 && bfp_cpu_avx512_init(k)) {
        k->name = "avx512";
        got = BFP_ISA_AVX512;
    }
    return got;
}

static void kernels_init(void)
{
    int have = cpu_isa(), want = have;
    const char *env = getenv("BFP_ISA");
    if (env && strcmp(env, "generic") == 0)
        want = BFP_ISA_GENERIC;
    else if (env && strcmp(env, "avx2") == 0)
        want = BFP_ISA_AVX2;
    kernels_fill(&kernels, want < have ? want : have);
}

static const bfp_kernels *get_kernels(void)
{
    call_once(&kernels_once, kernels_init);
    return &kernels;
}

/* One table per ISA for bfp_cpu_kernels_for(), each filled once. */
static bfp_kernels isa_tables[BFP_ISA_COUNT];
static int isa_table_ok[BFP_ISA_COUNT];
static once_flag isa_once = ONCE_FLAG_INIT;

static void isa_tables_init(void)
{
    int have = cpu_isa();
    for (int isa = 0; isa < BFP_ISA_COUNT; isa++)
        isa_table_ok[isa] = isa <= have && kernels_fill(&isa_tables[isa], isa) == isa;
}

const bfp_kernels *bfp_cpu_kernels_for(int isa)
{
    if (isa < 0 || isa >= BFP_ISA_COUNT)
        return NULL;
    call_once(&isa_once, isa_tables_init);
    return isa_table_ok[isa] ? &isa_tables[isa] : NULL;
}

const char *bfp_isa(void)
{
    return get_kernels()->name;
}

/* ---- argument checks: bfp_check_quantize_args (src/core/quantize.c) ------ */

/* The kernels implement each format's default rounding, FLOOR scales, 1-D. */
static int kernels_take(const bfp_format_info *f, const bfp_options *o)
{
    return o->rounding == f->default_rounding && o->scale_mode == BFP_SCALE_FLOOR && !o->nvfp4_2d;
}

/* ---- quantize ------------------------------------------------------------- */

typedef struct {
    const bfp_kernels *k;
    bfp_qkernel fn, fn_f32;
    bfp_qparams p;
    bfp_dtype dtype;
    const unsigned char *src;
    size_t esize, rows, cols, full, tail; /* full blocks per row, tail length */
    bfp_plane_sizes sz;
    const bfp_planes *out;
    bfp_stats st[BFP_CPU_MAX_THREADS];    /* per thread */
    float amax[BFP_CPU_MAX_THREADS];
} qrun;

/* The partial last block of row r through the float32 kernel, zero-padded. */
static void q_tail(qrun *q, size_t r, bfp_stats *st)
{
    const bfp_format_info *f = &q->p.impl->info;
    float x[BFP_CPU_MAXBLOCK] = {0};
    uint8_t codes[BFP_CPU_MAXBLOCK] = {0};
    size_t b = q->full, idx = r * q->sz.blocks_per_row + b;
    bfp_load_row(q->dtype, q->src + (r * q->cols + b * (size_t)f->block) * q->esize,
                 q->tail, 0, x);
    q->fn_f32(&q->p, x, 1, codes, q->out->scales + idx * (size_t)f->scale_bytes,
              q->out->meta ? q->out->meta + idx : NULL, st);
    memcpy(q->out->codes + r * q->sz.code_row_bytes + b * (size_t)f->block * f->elem_bits / 8,
           codes, (q->tail * (size_t)f->elem_bits + 7) / 8);
}

/* Blocks [b0, b1) of the tensor, numbered row-major. */
static void q_range(qrun *q, size_t b0, size_t b1, bfp_stats *st)
{
    const bfp_format_info *f = &q->p.impl->info;
    const size_t bpr = q->sz.blocks_per_row, block = (size_t)f->block;
    while (b0 < b1) {
        size_t r = b0 / bpr, first = b0 % bpr;
        size_t end = b1 - r * bpr < bpr ? b1 - r * bpr : bpr;
        size_t full_end = end < q->full ? end : q->full;
        if (first < full_end) {
            size_t idx = r * bpr + first;
            q->fn(&q->p, q->src + (r * q->cols + first * block) * q->esize, full_end - first,
                  q->out->codes + r * q->sz.code_row_bytes + first * block * f->elem_bits / 8,
                  q->out->scales + idx * (size_t)f->scale_bytes,
                  q->out->meta ? q->out->meta + idx : NULL, st);
        }
        if (end > q->full)
            q_tail(q, r, st);
        b0 = r * bpr + end;
    }
}

static void q_task(void *ctx, int t, int n)
{
    qrun *q = (qrun *)ctx;
    size_t total = q->rows * q->sz.blocks_per_row;
    memset(&q->st[t], 0, sizeof q->st[t]);
    q_range(q, total * (size_t)t / (size_t)n, total * (size_t)(t + 1) / (size_t)n, &q->st[t]);
}

static void amax_task(void *ctx, int t, int n)
{
    qrun *q = (qrun *)ctx;
    bfp_amax_kernel fn = q->k->amax[q->dtype - 1];
    size_t total = q->rows * q->cols;
    size_t i0 = total * (size_t)t / (size_t)n, i1 = total * (size_t)(t + 1) / (size_t)n;
    q->amax[t] = fn(q->src + i0 * q->esize, i1 - i0);
}

bfp_status bfp_cpu_quantize(const bfp_kernels *k, bfp_format fmt, bfp_dtype dtype,
                            const void *src, size_t rows, size_t cols,
                            const bfp_options *opts, const bfp_planes *out, bfp_stats *stats)
{
    bfp_plane_sizes sz;
    bfp_options o;
    bfp_status st = bfp_check_quantize_args(fmt, dtype, src, rows, cols, opts, out, &sz, &o);
    if (st != BFP_OK)
        return st;
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    const size_t esize = bfp_dtype_size(dtype);
    bfp_qkernel fn = k->quant[fmt][dtype - 1], fn_f32 = k->quant[fmt][0];
    if (!kernels_take(&impl->info, &o) || !fn || !fn_f32)
        return bfp_quantize_ref(fmt, dtype, src, rows, cols, opts, out, stats);

    qrun *q = malloc(sizeof *q); /* too big for small stacks */
    if (!q)
        return BFP_ERR_NOMEM;
    memset(q, 0, sizeof *q);
    q->k = k;
    q->fn = fn;
    q->fn_f32 = fn_f32;
    q->p.impl = impl;
    q->dtype = dtype;
    q->src = (const unsigned char *)src;
    q->esize = esize;
    q->rows = rows;
    q->cols = cols;
    q->full = cols / (size_t)impl->info.block;
    q->tail = cols % (size_t)impl->info.block;
    q->sz = sz;
    q->out = out;
    int n = bfp_cpu_threads_for(o.threads, rows * cols * esize, rows * sz.blocks_per_row);
    if (impl->info.has_tensor_scale) {
        float s_enc = 1.0f;
        if (!o.nvfp4_no_tensor_scale) {
            bfp_cpu_parallel(n, amax_task, q);
            float amax = 0;
            for (int t = 0; t < n; t++)
                amax = q->amax[t] > amax ? q->amax[t] : amax;
            s_enc = bfp_nvfp4_s_enc(amax);
        }
        q->p.s_enc = s_enc;
        *out->tensor_scale = s_enc;
    }
    bfp_cpu_parallel(n, q_task, q);
    bfp_stats sum = {0};
    for (int t = 0; t < n; t++) {
        sum.nonfinite_blocks += q->st[t].nonfinite_blocks;
        sum.flushed_blocks += q->st[t].flushed_blocks;
    }
    free(q);
    if (stats) {
        sum.blocks = rows * sz.blocks_per_row;
        *stats = sum;
    }
    return BFP_OK;
}

/* ---- dequantize ----------------------------------------------------------- */

typedef struct {
    const bfp_kernels *k;
    bfp_dkernel fn;
    bfp_dparams p;
    bfp_dtype dtype;
    const bfp_const_planes *in;
    unsigned char *dst;
    size_t esize, rows, cols, full, tail;
    bfp_plane_sizes sz;
} drun;

/* The partial last block of row r: codes copied into a zero-padded block. */
static void d_tail(const drun *d, size_t r)
{
    const bfp_format_info *f = &d->p.impl->info;
    uint8_t codes[BFP_CPU_MAXBLOCK] = {0};
    float v[BFP_CPU_MAXBLOCK];
    size_t b = d->full, idx = r * d->sz.blocks_per_row + b;
    size_t nbits = d->tail * (size_t)f->elem_bits;
    memcpy(codes, d->in->codes + r * d->sz.code_row_bytes + b * (size_t)f->block * f->elem_bits / 8,
           (nbits + 7) / 8);
    if (nbits % 8)
        codes[nbits / 8] &= (uint8_t)((1u << (nbits % 8)) - 1); /* bits past the row */
    bfp_dparams p = d->p;
    p.stream = 0;
    d->k->dequant[f->id][0](&p, codes, d->in->scales + idx * (size_t)f->scale_bytes,
                                     d->in->meta ? d->in->meta + idx : NULL, 1, d->tail, v);
    unsigned char *out = d->dst + (r * d->cols + b * (size_t)f->block) * d->esize;
    if (d->dtype == BFP_DTYPE_F32) {
        memcpy(out, v, d->tail * 4);
        return;
    }
    for (size_t i = 0; i < d->tail; i++) {
        uint16_t h = bfp_f32_to_bf16(v[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

static void d_range(const drun *d, size_t b0, size_t b1)
{
    const bfp_format_info *f = &d->p.impl->info;
    const size_t bpr = d->sz.blocks_per_row, block = (size_t)f->block;
    if (d->tail == 0 && d->sz.code_row_bytes * 8 == bpr * block * (size_t)f->elem_bits) {
        /* rows without partial blocks are contiguous in every plane: one
         * call, so that per-call setup (tables) is paid once per thread */
        if (b0 < b1)
            d->fn(&d->p, d->in->codes + b0 * block * f->elem_bits / 8,
                  d->in->scales + b0 * (size_t)f->scale_bytes, d->in->meta ? d->in->meta + b0 : NULL,
                  b1 - b0, block, d->dst + b0 * block * d->esize);
        return;
    }
    while (b0 < b1) {
        size_t r = b0 / bpr, first = b0 % bpr;
        size_t end = b1 - r * bpr < bpr ? b1 - r * bpr : bpr;
        size_t full_end = end < d->full ? end : d->full;
        if (first < full_end) {
            size_t idx = r * bpr + first;
            d->fn(&d->p, d->in->codes + r * d->sz.code_row_bytes + first * block * f->elem_bits / 8,
                  d->in->scales + idx * (size_t)f->scale_bytes,
                  d->in->meta ? d->in->meta + idx : NULL, full_end - first, block,
                  d->dst + (r * d->cols + first * block) * d->esize);
        }
        if (end > d->full)
            d_tail(d, r);
        b0 = r * bpr + end;
    }
}

static void d_task(void *ctx, int t, int n)
{
    const drun *d = (const drun *)ctx;
    size_t total = d->rows * d->sz.blocks_per_row;
    d_range(d, total * (size_t)t / (size_t)n, total * (size_t)(t + 1) / (size_t)n);
}

#define STREAM_MIN_BYTES ((size_t)8 << 20) /* outputs this big bypass the cache */

bfp_status bfp_cpu_dequantize(const bfp_kernels *k, bfp_format fmt,
                              const bfp_const_planes *in, size_t rows, size_t cols,
                              bfp_dtype dtype, void *dst)
{
    bfp_plane_sizes sz;
    bfp_status st = bfp_check_dequantize_args(fmt, in, rows, cols, dtype, dst, &sz);
    if (st != BFP_OK)
        return st;
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    const size_t esize = bfp_dtype_size(dtype);
    if (dtype == BFP_DTYPE_F16 || !k->dequant[fmt][dtype - 1] || !k->dequant[fmt][0])
        return bfp_dequantize_ref(fmt, in, rows, cols, dtype, dst);

    drun d;
    memset(&d, 0, sizeof d);
    d.k = k;
    d.fn = k->dequant[fmt][dtype - 1];
    d.p.impl = impl;
    if (impl->info.has_tensor_scale) {
        float s = *in->tensor_scale;
        d.p.s_enc = s;
        d.p.s_enc_ok = s > 0 && s <= 3.40282347e38f;
    }
    d.p.stream = rows * cols * esize >= STREAM_MIN_BYTES;
    d.dtype = dtype;
    d.in = in;
    d.dst = (unsigned char *)dst;
    d.esize = esize;
    d.rows = rows;
    d.cols = cols;
    d.full = cols / (size_t)impl->info.block;
    d.tail = cols % (size_t)impl->info.block;
    d.sz = sz;
    int n = bfp_cpu_threads_for(0, rows * cols * esize, rows * sz.blocks_per_row);
    bfp_cpu_parallel(n, d_task, &d);
    return BFP_OK;
}

bfp_status bfp_quantize(bfp_format fmt, bfp_dtype dtype, const void *src, size_t rows,
                        size_t cols, const bfp_options *opts, const bfp_planes *out,
                        bfp_stats *stats)
{
    return bfp_cpu_quantize(get_kernels(), fmt, dtype, src, rows, cols, opts, out, stats);
}

bfp_status bfp_dequantize(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                          size_t cols, bfp_dtype dtype, void *dst)
{
    return bfp_cpu_dequantize(get_kernels(), fmt, in, rows, cols, dtype, dst);
}

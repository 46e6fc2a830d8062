/*
 * ckpt_tensor.c - one tensor at a time for ckpt_run.c: the input shard
 * memory-mapped (and its pages dropped once a tensor is written), a
 * quantized tensor's planes made in work buffers that grow to the largest
 * tensor, on the CPU (bfp_quantize) or the GPU (--device cuda,
 * bfp_cuda_quantize_host: the same bytes), with the layout's extra forms
 * (ggml blocks, compressed-tensors' INT scales and codes) and the SQNR of
 * --report, and the bytes each output tensor takes.
 */
#define _GNU_SOURCE

#include "ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void ck_unmap(ck_map *m)
{
    if (m->map)
        munmap((void *)m->map, m->len);
    m->map = NULL;
}

bfp_status ck_map_shard(const ck_plan *p, size_t shard, ck_map *m, char *err,
                          size_t errlen)
{
    if (m->map && m->shard == shard)
        return BFP_OK;
    ck_unmap(m);
    const char *path = p->shard_paths[shard];
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0)
            close(fd);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot open: %s", path,
                          strerror(errno));
    }
    m->len = (size_t)sb.st_size;
    void *a = m->len ? mmap(NULL, m->len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    close(fd);
    if (a == MAP_FAILED)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot map: %s", path,
                          strerror(errno));
    madvise(a, m->len, MADV_SEQUENTIAL);
    m->map = a;
    m->shard = shard;
    return BFP_OK;
}

void ck_drop_pages(const ck_map *m, uint64_t off, uint64_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t a = off / (uint64_t)pg * (uint64_t)pg, end = off + n;
    if (pg > 0 && end > a)
        madvise((void *)(m->map + a), (size_t)(end - a), MADV_DONTNEED);
}

static int grow(void **b, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 1;
    void *r = realloc(*b, n);
    if (!r)
        return 0;
    *b = r;
    *cap = n;
    return 1;
}

/* The GPU stage of --device cuda, or why there is none. */
static bfp_status cuda_stage(bfp_format fmt, bfp_cuda_stage **stage, char *err,
                             size_t errlen)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    bfp_status st = bfp_cuda_stage_create(stage);
    if (st == BFP_ERR_UNSUPPORTED)
        return bfpio_fail(st, err, errlen, "--device cuda: this bfp was built without "
                          "CUDA (-DBFP_CUDA=OFF or no nvcc found)");
    if (st == BFP_ERR_DEVICE)
        return bfpio_fail(st, err, errlen, "--device cuda: no usable CUDA GPU (the "
                          "kernels need compute capability 9.0 or newer)");
    if (st != BFP_OK)
        return bfpio_fail(st, err, errlen, "--device cuda: %s", bfp_status_str(st));
    if (!f->cuda) {
        bfp_cuda_stage_free(*stage);
        *stage = NULL;
        return bfpio_fail(BFP_ERR_UNSUPPORTED, err, errlen, "--device cuda: %s has no "
                          "CUDA kernels (convert it on the CPU)", f->name);
    }
    return BFP_OK;
}

bfp_status ck_bufs_init(ck_bufs *b, const bfp_ckpt_opts *o, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    return o->device_cuda ? cuda_stage(o->format, &b->stage, err, errlen) : BFP_OK;
}

void ck_bufs_free(ck_bufs *b)
{
    free(b->codes);
    free(b->scales);
    free(b->meta);
    free(b->ggml);
    free(b->bf16_scales);
    free(b->int4_codes);
    free(b->x);
    free(b->y);
    bfp_cuda_stage_free(b->stage);
    memset(b, 0, sizeof *b);
}

static void to_f32(bfp_dtype d, const void *src, size_t n, float *x)
{
    const uint16_t *h = src;
    if (d == BFP_DTYPE_F32)
        memcpy(x, src, n * 4);
    else
        for (size_t i = 0; i < n; i++)
            x[i] = d == BFP_DTYPE_BF16 ? bfp_bf16_to_f32(h[i]) : bfp_f16_to_f32(h[i]);
}

bfp_status ck_quantize(const ck_plan *p, size_t i, const void *src, ck_bufs *b,
                       bfp_ckpt_tensor *rt, char *err, size_t errlen)
{
    const ck_in *t = &p->ins[i];
    bfp_plane_sizes sz;
    bfp_options opts = p->o.opts;
    bfp_stats stats;
    bfp_status st = bfp_plane_sizes_for(p->o.format, t->rows, t->cols, &sz);
    if (st != BFP_OK)
        return bfpio_fail(st, err, errlen, "%s: tensor '%s': %s",
                          p->shard_paths[t->shard], t->name, bfp_status_str(st));
    if (p->o.layout == BFP_CKPT_LAYOUT_GGUF && p->o.format == BFP_NVFP4)
        opts.nvfp4_no_tensor_scale = 1; /* ggml's NVFP4 has no tensor scale */
    if (!grow((void **)&b->codes, &b->cap[0], sz.codes) ||
        !grow((void **)&b->scales, &b->cap[1], sz.scales) ||
        !grow((void **)&b->meta, &b->cap[2], sz.meta ? sz.meta : 1))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    bfp_planes pl = {b->codes, b->scales, b->meta, &b->tscale};
    b->tscale = 1.0f;
    memset(&stats, 0, sizeof stats);
    if (b->stage) /* the GPU kernels: the same planes, bit for bit */
        st = bfp_cuda_quantize_host(b->stage, p->o.format, t->fdtype, src, t->rows, t->cols,
                                    &opts, &pl, &stats.nonfinite_blocks);
    else
        st = bfp_quantize(p->o.format, t->fdtype, src, t->rows, t->cols, &opts, &pl,
                          &stats);
    if (st != BFP_OK)
        return bfpio_fail(st, err, errlen, "%s: tensor '%s': %s",
                          p->shard_paths[t->shard], t->name, bfp_status_str(st));
    rt->nonfinite_blocks = stats.nonfinite_blocks;
    if (p->o.layout == BFP_CKPT_LAYOUT_GGUF) {
        size_t gb;
        bfp_const_planes cp = {b->codes, b->scales, b->meta, &b->tscale};
        if ((st = bfp_ggml_size(p->o.format, t->rows, t->cols, &gb)) != BFP_OK ||
            !grow((void **)&b->ggml, &b->cap[3], gb) ||
            (st = bfp_planar_to_ggml(p->o.format, &cp, t->rows, t->cols, b->ggml)) != BFP_OK)
            return bfpio_fail(st ? st : BFP_ERR_NOMEM, err, errlen,
                              "%s: tensor '%s': ggml blocks: %s",
                              p->shard_paths[t->shard], t->name,
                              bfp_status_str(st ? st : BFP_ERR_NOMEM));
    }
    int int4 = p->o.format == BFP_MXINT4;
    if (p->o.layout == BFP_CKPT_LAYOUT_CT && (p->o.format == BFP_MXINT8 || int4)) {
        if (!grow((void **)&b->bf16_scales, &b->cap[6], sz.scales * 2) ||
            (int4 && !grow((void **)&b->int4_codes, &b->cap[7], sz.codes)))
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        for (size_t k = 0; k < sz.scales; k++)
            b->bf16_scales[k] = ck_e8m0_to_bf16_scale(b->scales[k], int4 ? 2 : 6);
        for (size_t k = 0; int4 && k < sz.codes; k++)
            b->int4_codes[k] = b->codes[k] ^ 0x88; /* two's complement k -> k + 8 */
        b->shape[0] = (int64_t)t->rows;
        b->shape[1] = (int64_t)t->cols;
    }
    if (p->o.report) {
        size_t n = t->rows * t->cols;
        bfp_const_planes cp = {b->codes, b->scales, b->meta, &b->tscale};
        bfp_error_stats es;
        if (!grow((void **)&b->x, &b->cap[4], n * 4) ||
            !grow((void **)&b->y, &b->cap[5], n * 4))
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        to_f32(t->fdtype, src, n, b->x);
        if ((st = bfp_dequantize_to_f32(p->o.format, &cp, t->rows, t->cols, b->y)) != BFP_OK)
            return bfpio_fail(st, err, errlen, "dequantize: %s", bfp_status_str(st));
        bfp_error_stats_f32(b->x, b->y, n, &es);
        rt->sqnr_db = es.sqnr_db;
    }
    return BFP_OK;
}

const void *ck_out_data(const ck_bufs *b, const ck_out *o, const void *src)
{
    switch (o->role) {
    case CK_CODES:
        return b->codes;
    case CK_SCALES:
        return b->scales;
    case CK_META:
        return b->meta;
    case CK_TSCALE:
        return &b->tscale;
    case CK_GGML:
        return b->ggml;
    case CK_SCALES_BF16:
        return b->bf16_scales;
    case CK_CODES_INT4:
        return b->int4_codes;
    case CK_SHAPE:
        return b->shape;
    default:
        return src;
    }
}

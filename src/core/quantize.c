/* quantize.c - the argument checks of every entry point, then the format's
 * reference functions. Bad input returns a status; nothing aborts. (The
 * public bfp_quantize / bfp_dequantize and their typed forms are the CPU
 * layer's: src/cpu/dispatch.c, src/cpu/public_api.c.) */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

void bfp_options_init(bfp_options *o)
{
    if (o)
        memset(o, 0, sizeof *o);
}

/* The fields of o the format must accept (bfp_option bits). */
static unsigned options_used(const bfp_options *o, const bfp_format_info *f)
{
    unsigned used = 0;
    if (o->rounding != BFP_ROUND_DEFAULT && o->rounding != f->default_rounding)
        used |= BFP_OPT_ROUNDING;
    if (o->scale_mode != BFP_SCALE_DEFAULT)
        used |= BFP_OPT_SCALE_MODE;
    if (o->nvfp4_no_tensor_scale)
        used |= BFP_OPT_NO_TENSOR_SCALE;
    if (o->nvfp4_2d)
        used |= BFP_OPT_2D;
    return used;
}

/* The first field of o at fault, and why: enum ranges first, then the
 * format table's accepted options (format_defs.h). */
static bfp_status options_fault(const bfp_format_info *f, const bfp_options *o,
                                bfp_option *bad, const char **why)
{
    *bad = BFP_OPT_NONE;
    *why = "";
    if ((unsigned)o->rounding > BFP_ROUND_STOCHASTIC) {
        *bad = BFP_OPT_ROUNDING;
        *why = "is not a known rounding";
        return BFP_ERR_ARG;
    }
    if ((unsigned)o->scale_mode > BFP_SCALE_FLOOR) {
        *bad = BFP_OPT_SCALE_MODE;
        *why = "is not a known scale mode";
        return BFP_ERR_ARG;
    }
    unsigned refused = options_used(o, f) & ~f->options;
    if (refused & BFP_OPT_SCALE_MODE) {
        *bad = BFP_OPT_SCALE_MODE;
        *why = "applies only to the MX formats";
    } else if (refused & BFP_OPT_NO_TENSOR_SCALE) {
        *bad = BFP_OPT_NO_TENSOR_SCALE;
        *why = "applies only to nvfp4 and nvfp4+";
    } else if (refused & BFP_OPT_2D) {
        *bad = BFP_OPT_2D;
        *why = f->family == BFP_FAMILY_NVFP4_PLUS
                   ? "applies only to nvfp4 (nvfp4+ has no 2-D variant)"
                   : "applies only to nvfp4";
    } else if (refused & BFP_OPT_ROUNDING) {
        *bad = BFP_OPT_ROUNDING;
        *why = "is not offered by this format";
    }
    return *bad == BFP_OPT_NONE ? BFP_OK : BFP_ERR_UNSUPPORTED;
}

bfp_status bfp_options_check(bfp_format fmt, const bfp_options *opts, bfp_option *bad,
                             const char **why)
{
    bfp_option b = BFP_OPT_NONE;
    const char *w = "";
    bfp_options o;
    bfp_options_init(&o);
    if (opts)
        o = *opts;
    const bfp_format_info *f = bfp_format_get(fmt);
    bfp_status st = f ? options_fault(f, &o, &b, &w) : BFP_ERR_FORMAT;
    if (bad)
        *bad = b;
    if (why)
        *why = w;
    return st;
}

bfp_status bfp_resolve_options(const bfp_format_info *f, const bfp_options *in,
                               bfp_options *out)
{
    bfp_option bad;
    const char *why;
    bfp_options o;
    bfp_options_init(&o);
    if (in)
        o = *in;
    bfp_status st = options_fault(f, &o, &bad, &why);
    if (st != BFP_OK)
        return st;
    if (o.rounding == BFP_ROUND_DEFAULT)
        o.rounding = f->default_rounding;
    /* every family's own rule computes the shared exponent as FLOOR does */
    if (o.scale_mode == BFP_SCALE_DEFAULT)
        o.scale_mode = BFP_SCALE_FLOOR;
    *out = o;
    return BFP_OK;
}

/* The checks quantize and dequantize share, in this order: the format, the
 * plane sizes of rows x cols (into sz), then the dtype, the float-side
 * buffer and the planes the format has (planes[0..3]: codes, scales, meta,
 * tensor scale; have_planes false when the planes struct itself is NULL),
 * then the float side's byte count */
static bfp_status check_tensor_args(bfp_format fmt, bfp_dtype dtype, const void *data,
                                    size_t rows, size_t cols, int have_planes,
                                    const void *const planes[4], bfp_plane_sizes *sz,
                                    const bfp_format_info **fo)
{
    const bfp_format_info *f = bfp_format_get(fmt);
    if (!f)
        return BFP_ERR_FORMAT;
    bfp_status st = bfp_plane_sizes_for(fmt, rows, cols, sz);
    if (st != BFP_OK)
        return st;
    size_t esize = bfp_dtype_size(dtype);
    if (esize == 0 || !data || !have_planes || !planes[0] || !planes[1] ||
        (f->meta_bytes && !planes[2]) || (f->has_tensor_scale && !planes[3]))
        return BFP_ERR_ARG;
    if (rows * cols > SIZE_MAX / esize)
        return BFP_ERR_SHAPE;
    *fo = f;
    return BFP_OK;
}

bfp_status bfp_check_quantize_args(bfp_format fmt, bfp_dtype dtype, const void *src,
                                   size_t rows, size_t cols, const bfp_options *opts,
                                   const bfp_planes *out, bfp_plane_sizes *sz,
                                   bfp_options *resolved)
{
    const void *const planes[4] = {out ? out->codes : NULL, out ? out->scales : NULL,
                                   out ? out->meta : NULL, out ? out->tensor_scale : NULL};
    const bfp_format_info *f;
    bfp_status st = check_tensor_args(fmt, dtype, src, rows, cols, out != NULL, planes, sz, &f);
    return st != BFP_OK ? st : bfp_resolve_options(f, opts, resolved);
}

bfp_status bfp_check_dequantize_args(bfp_format fmt, const bfp_const_planes *in,
                                     size_t rows, size_t cols, bfp_dtype dtype,
                                     const void *dst, bfp_plane_sizes *sz)
{
    const void *const planes[4] = {in ? in->codes : NULL, in ? in->scales : NULL,
                                   in ? in->meta : NULL, in ? in->tensor_scale : NULL};
    const bfp_format_info *f;
    return check_tensor_args(fmt, dtype, dst, rows, cols, in != NULL, planes, sz, &f);
}

bfp_status bfp_quantize_ref(bfp_format fmt, bfp_dtype dtype, const void *src, size_t rows,
                            size_t cols, const bfp_options *opts, const bfp_planes *out,
                            bfp_stats *stats)
{
    bfp_qjob job;
    memset(&job, 0, sizeof job);
    bfp_status st = bfp_check_quantize_args(fmt, dtype, src, rows, cols, opts, out, &job.sz,
                                            &job.o);
    if (st != BFP_OK)
        return st;
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    job.f = &impl->info;
    bfp_stats local = {0};
    job.dtype = dtype;
    job.src = src;
    job.rows = rows;
    job.cols = cols;
    job.out = out;
    job.st = &local;
    memset(out->codes, 0, job.sz.codes); /* codes are OR-ed into bit streams */
    st = impl->quantize(&job);
    if (st == BFP_OK && stats) {
        local.blocks = rows * job.sz.blocks_per_row;
        *stats = local;
    }
    return st;
}

static bfp_status check_planes(const bfp_format_impl *impl, const bfp_const_planes *in)
{
    if (!in || !in->codes || !in->scales || (impl->info.meta_bytes && !in->meta) ||
        (impl->info.has_tensor_scale && !in->tensor_scale))
        return BFP_ERR_ARG;
    return BFP_OK;
}

bfp_status bfp_dequantize_ref(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                              size_t cols, bfp_dtype dtype, void *dst)
{
    bfp_plane_sizes sz;
    bfp_status st = bfp_check_dequantize_args(fmt, in, rows, cols, dtype, dst, &sz);
    if (st != BFP_OK)
        return st;
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    const size_t esize = bfp_dtype_size(dtype);
    float *row = malloc(cols * sizeof *row); /* dst may be unaligned */
    if (!row)
        return BFP_ERR_NOMEM;
    unsigned char *d = (unsigned char *)dst;
    for (size_t r = 0; r < rows; r++) {
        impl->dequantize_row(impl, in, &sz, r, cols, row);
        unsigned char *drow = d + r * cols * esize;
        if (dtype == BFP_DTYPE_F32) {
            memcpy(drow, row, cols * 4);
            continue;
        }
        for (size_t i = 0; i < cols; i++) {
            uint16_t h = dtype == BFP_DTYPE_BF16 ? bfp_f32_to_bf16(row[i])
                                                 : bfp_f32_to_f16(row[i]);
            memcpy(drow + 2 * i, &h, 2);
        }
    }
    free(row);
    return BFP_OK;
}

bfp_status bfp_validate(bfp_format fmt, const bfp_const_planes *in, size_t rows,
                        size_t cols, size_t *bad_blocks, size_t *first_bad)
{
    const bfp_format_impl *impl = bfp_impl_get(fmt);
    if (!impl)
        return BFP_ERR_FORMAT;
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(fmt, rows, cols, &sz);
    if (st != BFP_OK)
        return st;
    if (check_planes(impl, in) != BFP_OK)
        return BFP_ERR_ARG;
    size_t bad = 0, first = SIZE_MAX;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < sz.blocks_per_row; b++)
            if (impl->block_is_bad(impl, in, &sz, r, b, cols)) {
                if (bad++ == 0)
                    first = r * sz.blocks_per_row + b;
            }
    if (bad_blocks)
        *bad_blocks = bad;
    if (first_bad)
        *first_bad = first;
    return bad ? BFP_ERR_DATA : BFP_OK;
}

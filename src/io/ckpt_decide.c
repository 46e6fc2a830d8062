/*
 * ckpt_decide.c - whether `bfp convert` quantizes a tensor or copies it:
 * --exclude and non-float tensors copy; --include quantizes or fails with
 * the layout's reason; otherwise the default (2-D and larger weights, but
 * not embeddings, norms and heads), where the layout can hold it.
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_internal.h"

#include <string.h>

static int default_quantized(const ck_in *t)
{
    static const char *const skip[] = {"embed", "norm", "lm_head", "wte",
                                       "wpe", "token_embd", "pos_embd"};
    if (t->ndim < 2 || !ck_ends_with(t->name, "weight"))
        return 0;
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strstr(t->name, skip[i]))
            return 0;
    return strcmp(t->name, "output.weight") != 0; /* GGUF's head */
}

/* Why the layout cannot hold t quantized, or NULL. */
static const char *layout_refuses(const ck_plan *p, const ck_in *t)
{
    const bfp_format_info *f = bfp_format_get(p->o.format);
    if (t->rows == 0 || t->cols == 0)
        return "it has no values (a zero dimension)";
    switch (p->o.layout) {
    case BFP_CKPT_LAYOUT_CT:
        if (t->ndim != 2)
            return "compressed-tensors stores 2-D weights only";
        if (!ck_ends_with(t->name, ".weight"))
            return "compressed-tensors quantizes MODULE.weight tensors only";
        if (t->cols % (size_t)f->block != 0)
            return "its last dimension is not a multiple of the block "
                   "(compressed-tensors has no partial blocks)";
        return NULL;
    case BFP_CKPT_LAYOUT_GGUF:
        if (t->cols % (size_t)f->block != 0 || (p->o.format == BFP_NVFP4 && t->cols % 64))
            return "its last dimension is not a multiple of ggml's block "
                   "(32 for mxfp4, 64 for nvfp4)";
        return NULL;
    default:
        return NULL;
    }
}

bfp_status ck_decide(ck_plan *p, ck_in *t, const ck_filters *flt, const char *file, char *err,
                     size_t errlen)
{
    int inc = flt->has_inc && regexec(&flt->inc, t->name, 0, NULL, 0) == 0;
    int exc = flt->has_exc && regexec(&flt->exc, t->name, 0, NULL, 0) == 0;
    int isfloat = bfpio_st_float_dtype(t->dtype, &t->fdtype);
    int ok = 1;
    size_t rows = 1;
    for (size_t d = 0; d + 1 < t->ndim; d++)
        ok = ok && bfpio_mul(rows, t->shape[d], &rows);
    t->cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    t->rows = ok ? rows : 0;
    t->quant = 0;
    if (exc || !isfloat)
        return BFP_OK;
    if (inc) {
        const char *why = layout_refuses(p, t);
        if (why)
            return bfpio_fail(BFP_ERR_SHAPE, err, errlen,
                              "%s: tensor '%s' (matched by --include) cannot be "
                              "quantized: %s", file, t->name, why);
        t->quant = 1;
    } else if (default_quantized(t) && !layout_refuses(p, t)) {
        t->quant = 1;
    }
    return BFP_OK;
}

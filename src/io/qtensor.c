/*
 * qtensor.c - the quantized tensor in memory: its planes allocated for a
 * format and shape (with a clear error for a shape the format cannot take),
 * freed, and viewed as bfp_const_planes. The container (container.c), GGUF
 * and checkpoint readers build on it.
 */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bfp_qtensor_free(bfp_qtensor *q)
{
    if (!q)
        return;
    free(q->codes);
    free(q->scales);
    free(q->meta);
    memset(q, 0, sizeof *q);
}

void bfpio_shape_text(char *buf, size_t cap, const size_t *shape, size_t ndim)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%zu", i ? ", " : "",
                                shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

bfp_status bfpio_geometry(bfp_format fmt, size_t ndim, const size_t *shape, size_t *rows,
                          size_t *cols, bfp_plane_sizes *sz, bfp_status fail_as,
                          const char *who, char *err, size_t errlen)
{
    char stxt[8 * 24 + 4];
    const bfp_format_info *info = bfp_format_get(fmt);
    bfp_tensor t;
    if (!info)
        return bfpio_fail(BFP_ERR_FORMAT, err, errlen, "%s: unknown format id %d",
                          who, (int)fmt);
    if (ndim > BFP_IO_MAX_DIMS || (ndim > 0 && !shape))
        return bfpio_fail(fail_as == BFP_ERR_DATA ? BFP_ERR_DATA : BFP_ERR_SHAPE,
                          err, errlen, "%s: bad shape (%zu dimensions, max %d)",
                          who, ndim, BFP_IO_MAX_DIMS);
    memset(&t, 0, sizeof t);
    t.ndim = ndim;
    if (ndim > 0)
        memcpy(t.shape, shape, ndim * sizeof *shape);
    bfp_tensor_rows_cols(&t, rows, cols);
    bfp_status st = bfp_plane_sizes_for(fmt, *rows, *cols, sz);
    if (st != BFP_OK) {
        bfpio_shape_text(stxt, sizeof stxt, shape, ndim);
        return bfpio_fail(fail_as == BFP_ERR_DATA ? BFP_ERR_DATA : st, err,
                          errlen, "%s: shape %s is not valid for %s: %s", who,
                          stxt, info->name, bfp_status_str(st));
    }
    return BFP_OK;
}

bfp_status bfp_qtensor_alloc(bfp_qtensor *q, bfp_format fmt, size_t ndim,
                             const size_t *shape, char *err, size_t errlen)
{
    if (!q)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_qtensor_alloc: NULL q");
    memset(q, 0, sizeof *q);
    bfp_status st = bfpio_geometry(fmt, ndim, shape, &q->rows, &q->cols, &q->sizes,
                             BFP_OK, "bfp_qtensor_alloc", err, errlen);
    if (st != BFP_OK)
        return st;
    q->format = fmt;
    q->ndim = ndim;
    if (ndim > 0)
        memcpy(q->shape, shape, ndim * sizeof *shape);
    bfp_options_init(&q->options);
    q->tensor_scale = 1.0f;
    /* calloc(n ? n : 1): planes are never NULL when the format uses them */
    q->codes = calloc(q->sizes.codes ? q->sizes.codes : 1, 1);
    q->scales = calloc(q->sizes.scales ? q->sizes.scales : 1, 1);
    if (q->sizes.meta > 0)
        q->meta = calloc(q->sizes.meta, 1);
    if (!q->codes || !q->scales || (q->sizes.meta > 0 && !q->meta)) {
        bfp_qtensor_free(q);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen,
                          "out of memory allocating quantized planes");
    }
    return BFP_OK;
}

bfp_const_planes bfp_qtensor_planes(const bfp_qtensor *q)
{
    bfp_const_planes p = {NULL, NULL, NULL, NULL};
    if (q) {
        p.codes = q->codes;
        p.scales = q->scales;
        p.meta = q->meta;
        p.tensor_scale = q->sizes.tensor_scale > 0 ? &q->tensor_scale : NULL;
    }
    return p;
}

/*
 * tensor.c - the in-memory dense tensor: freeing it, its element count and
 * 2-D view, and the check every writer makes of one. The readers and
 * writers of each file type build on this; tensor_load.c picks one by
 * extension.
 */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

void bfp_tensor_free(bfp_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    memset(t, 0, sizeof *t);
}

size_t bfp_tensor_numel(const bfp_tensor *t)
{
    int ok;
    if (!t || t->ndim > BFP_IO_MAX_DIMS)
        return 0;
    size_t n = bfpio_numel(t->shape, t->ndim, &ok);
    return ok ? n : 0;
}

void bfp_tensor_rows_cols(const bfp_tensor *t, size_t *rows, size_t *cols)
{
    size_t r = 1, c = 1;
    if (t && t->ndim > 0 && t->ndim <= BFP_IO_MAX_DIMS) {
        int ok;
        c = t->shape[t->ndim - 1];
        r = bfpio_numel(t->shape, t->ndim - 1, &ok);
        if (!ok) /* 0 makes bfp_plane_sizes_for() reject it */
            r = 0;
    }
    if (rows)
        *rows = r;
    if (cols)
        *cols = c;
}

bfp_status bfpio_check_tensor(const bfp_tensor *t, const char *path, char *err,
                              size_t errlen)
{
    size_t es, numel, nbytes;
    int ok;
    if (!t)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: no tensor to save", path);
    es = bfp_dtype_size(t->dtype);
    if (es == 0)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: unknown tensor dtype %d",
                          path, (int)t->dtype);
    if (t->ndim > BFP_IO_MAX_DIMS)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: more than %d dimensions",
                          path, BFP_IO_MAX_DIMS);
    numel = bfpio_numel(t->shape, t->ndim, &ok);
    if (!ok || !bfpio_mul(numel, es, &nbytes))
        return bfpio_fail(BFP_ERR_SHAPE, err, errlen, "%s: shape overflows", path);
    if (nbytes != t->nbytes)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s: tensor holds %zu bytes but its shape needs %zu",
                          path, t->nbytes, nbytes);
    if (nbytes > 0 && !t->data)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: tensor has no data", path);
    return BFP_OK;
}

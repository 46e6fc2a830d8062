/*
 * tensor.c - the in-memory dense tensor and loading by file extension.
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

bfp_status bfp_tensor_load(const char *path, const char *name, bfp_tensor *out,
                           char *err, size_t errlen)
{
    if (!path || !out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_tensor_load: NULL argument");
    if (bfpio_has_ext(path, ".safetensors"))
        return bfp_safetensors_load(path, name, out, err, errlen);
    if (bfpio_has_ext(path, ".gguf"))
        return bfp_gguf_load(path, name, out, err, errlen);
    /* A .npy holds one unnamed tensor: name is ignored, since callers also
     * use it to name their outputs (the CLI's --name). */
    if (bfpio_has_ext(path, ".npy"))
        return bfp_npy_load(path, out, err, errlen);
    return bfpio_fail(BFP_ERR_ARG, err, errlen,
                      "%s: unknown file type (expected .npy, .safetensors or .gguf)",
                      path);
}

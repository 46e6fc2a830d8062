/*
 * st_set.c - several float tensors in one safetensors file (the unquantized
 * part of a state dict saved from Python).
 */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

void bfp_tensor_set_free(bfp_tensor_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->count; i++) {
        free(s->names ? s->names[i] : NULL);
        if (s->tensors)
            bfp_tensor_free(&s->tensors[i]);
    }
    free(s->names);
    free(s->tensors);
    memset(s, 0, sizeof *s);
}

static const char *st_dtype(bfp_dtype t)
{
    return t == BFP_DTYPE_F32 ? "F32" : t == BFP_DTYPE_F16 ? "F16" : "BF16";
}

bfp_status bfp_safetensors_save_set(const char *path, const char *const *names,
                                    const bfp_tensor *tensors, size_t n,
                                    int force, char *err, size_t errlen)
{
    if (!path || (n > 0 && (!names || !tensors)))
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_safetensors_save_set: NULL argument");
    bfpio_st_out *out = calloc(n ? n : 1, sizeof *out);
    if (!out)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory writing %s", path);
    bfp_status st = BFP_OK;
    for (size_t i = 0; i < n && st == BFP_OK; i++) {
        const bfp_tensor *t = &tensors[i];
        if ((st = bfpio_check_tensor(t, path, err, errlen)) != BFP_OK)
            break;
        out[i].name = names[i];
        out[i].dtype = st_dtype(t->dtype);
        out[i].elem_size = bfp_dtype_size(t->dtype);
        out[i].ndim = t->ndim;
        out[i].shape = t->shape;
        out[i].data = t->data;
        out[i].nbytes = t->nbytes;
    }
    if (st == BFP_OK) /* checks the names: non-empty, distinct */
        st = bfpio_st_write(path, out, n, NULL, NULL, 0, force, err, errlen);
    free(out);
    return st;
}

/* Every tensor of the open file f0, which this closes. */
static bfp_status load_set(bfpio_st_file *f0, bfp_tensor_set *out, char *err,
                           size_t errlen)
{
    bfpio_st_file f = *f0;
    const char *path = f.rd.path;
    bfp_status st = BFP_OK;
    out->names = calloc(f.count ? f.count : 1, sizeof *out->names);
    out->tensors = calloc(f.count ? f.count : 1, sizeof *out->tensors);
    if (!out->names || !out->tensors) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < f.count; i++) {
        const bfpio_st_entry *e = &f.entries[i];
        bfp_tensor *t = &out->tensors[i];
        out->count = i + 1; /* so a failure frees what was made */
        if (!bfpio_st_float_dtype(e->dtype, &t->dtype)) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: tensor '%s' has dtype %s (expected F32, F16 or BF16)",
                            path, e->name, e->dtype[0] ? e->dtype : "?");
            goto done;
        }
        if (e->ndim > BFP_IO_MAX_DIMS) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: tensor '%s' has %zu dimensions (max %d)", path,
                            e->name, e->ndim, BFP_IO_MAX_DIMS);
            goto done;
        }
        size_t nbytes = (size_t)(e->end - e->begin); /* == numel*size, checked */
        if (!(out->names[i] = malloc(strlen(e->name) + 1)) ||
            !(t->data = malloc(nbytes ? nbytes : 1))) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen,
                            "out of memory loading '%s' (%zu bytes)", e->name, nbytes);
            goto done;
        }
        strcpy(out->names[i], e->name);
        if ((st = bfpio_st_read(&f, i, t->data, err, errlen)) != BFP_OK)
            goto done;
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof t->shape);
        t->nbytes = nbytes;
    }
done:
    bfpio_st_close(&f);
    if (st != BFP_OK)
        bfp_tensor_set_free(out);
    return st;
}

bfp_status bfp_safetensors_load_set(const char *path, bfp_tensor_set *out,
                                    char *err, size_t errlen)
{
    bfpio_st_file f;
    if (!out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_safetensors_load_set: NULL output");
    memset(out, 0, sizeof *out);
    bfp_status st = bfpio_st_open(&f, path, err, errlen);
    return st != BFP_OK ? st : load_set(&f, out, err, errlen);
}

bfp_status bfp_safetensors_parse_set(const void *buf, size_t len,
                                     bfp_tensor_set *out, char *err,
                                     size_t errlen)
{
    bfpio_st_file f;
    if (!out || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_safetensors_parse_set: NULL argument");
    memset(out, 0, sizeof *out);
    bfp_status st = bfpio_st_open_mem(&f, buf, len, "(safetensors in memory)",
                                      err, errlen);
    return st != BFP_OK ? st : load_set(&f, out, err, errlen);
}

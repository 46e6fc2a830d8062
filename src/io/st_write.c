/*
 * st_write.c - writing safetensors files the way the reference
 * implementation does: compact JSON (__metadata__ first) padded with spaces
 * to a multiple of 8 bytes, tensors contiguous, ordered by element size
 * (largest first, so wider types stay aligned) and then by name.
 */
#include "io_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Integers as raw JSON text: cJSON's doubles would print 1e+15 style. */
static cJSON *raw_uint(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(buf);
}

/* Attach item to obj (under key, or appended when key is NULL); on any
 * failure item is freed, so nothing leaks when memory runs out. */
static cJSON *add(cJSON *obj, const char *key, cJSON *item)
{
    if (!obj || !item ||
        !(key ? cJSON_AddItemToObject(obj, key, item)
              : cJSON_AddItemToArray(obj, item))) {
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

static int cmp_order(const void *a, const void *b)
{
    const bfpio_st_out *x = *(const bfpio_st_out *const *)a;
    const bfpio_st_out *y = *(const bfpio_st_out *const *)b;
    if (x->elem_size != y->elem_size)
        return x->elem_size > y->elem_size ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bfp_status check_out(const char *path, const bfpio_st_out *t, char *err,
                            size_t errlen)
{
    size_t numel = 1, nbytes;
    if (!t->name || !*t->name || strcmp(t->name, "__metadata__") == 0)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: invalid tensor name",
                          path);
    if (!t->dtype || t->elem_size == 0 || (t->ndim > 0 && !t->shape))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: tensor %s has no "
                          "dtype or shape", path, BFPIO_Q(t->name));
    for (size_t i = 0; i < t->ndim; i++)
        if (!bfpio_mul(numel, t->shape[i], &numel))
            return bfpio_fail(BFP_ERR_SHAPE, err, errlen,
                              "%s: tensor %s shape overflows", path, BFPIO_Q(t->name));
    if (!bfpio_mul(numel, t->elem_size, &nbytes) || nbytes != t->nbytes)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s: tensor %s has %zu bytes, its shape needs more "
                          "or fewer", path, BFPIO_Q(t->name), t->nbytes);
    if (t->nbytes > 0 && !t->data)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: tensor %s has no data",
                          path, BFPIO_Q(t->name));
    return BFP_OK;
}

bfp_status bfpio_st_write(const char *path, const bfpio_st_out *tensors,
                          size_t n, const char *const *meta_keys,
                          const char *const *meta_vals, size_t nmeta,
                          int force, char *err, size_t errlen)
{
    const bfpio_st_out **order = NULL;
    bfpio_part *parts = NULL;
    cJSON *root = NULL;
    char *text = NULL, *hdr = NULL;
    bfp_status st = BFP_OK;
    int ok = 1;

    if (!path || (n > 0 && !tensors) || (nmeta > 0 && (!meta_keys || !meta_vals)))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfpio_st_write: NULL argument");
    for (size_t i = 0; i < n; i++) {
        if ((st = check_out(path, &tensors[i], err, errlen)) != BFP_OK)
            return st;
        for (size_t j = 0; j < i; j++) /* n is tiny: a handful of planes */
            if (strcmp(tensors[i].name, tensors[j].name) == 0)
                return bfpio_fail(BFP_ERR_ARG, err, errlen,
                                  "%s: tensor %s given twice", path,
                                  BFPIO_Q(tensors[i].name));
    }
    order = malloc((n ? n : 1) * sizeof *order);
    parts = malloc((n + 2) * sizeof *parts);
    root = cJSON_CreateObject();
    if (!order || !parts || !root)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        order[i] = &tensors[i];
    qsort(order, n, sizeof *order, cmp_order);

    if (nmeta > 0) {
        cJSON *m = add(root, "__metadata__", cJSON_CreateObject());
        ok = m != NULL;
        for (size_t i = 0; ok && i < nmeta; i++) {
            if (!meta_keys[i] || !meta_vals[i]) {
                st = bfpio_fail(BFP_ERR_ARG, err, errlen,
                                "%s: NULL metadata key or value", path);
                goto done;
            }
            ok = add(m, meta_keys[i], cJSON_CreateString(meta_vals[i])) != NULL;
        }
        if (!ok)
            goto nomem;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const bfpio_st_out *t = order[i];
        cJSON *e = add(root, t->name, cJSON_CreateObject()), *sh = NULL, *offs = NULL;
        ok = e && add(e, "dtype", cJSON_CreateString(t->dtype)) &&
             (sh = add(e, "shape", cJSON_CreateArray())) &&
             (offs = add(e, "data_offsets", cJSON_CreateArray()));
        for (size_t d = 0; ok && d < t->ndim; d++)
            ok = add(sh, NULL, raw_uint(t->shape[d])) != NULL;
        ok = ok && add(offs, NULL, raw_uint(off)) != NULL;
        if (t->nbytes > UINT64_MAX - off) {
            st = bfpio_fail(BFP_ERR_SHAPE, err, errlen,
                            "%s: tensors too large for one file", path);
            goto done;
        }
        off += t->nbytes;
        ok = ok && add(offs, NULL, raw_uint(off)) != NULL;
        if (!ok)
            goto nomem;
        parts[2 + i].data = t->data;
        parts[2 + i].size = t->nbytes;
    }
    if (!(text = cJSON_PrintUnformatted(root)))
        goto nomem;
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    if (!(hdr = malloc(padded)))
        goto nomem;
    memcpy(hdr, text, len);
    memset(hdr + len, ' ', padded - len);
    uint8_t lenbuf[8];
    bfpio_put_le(lenbuf, padded, 8);
    parts[0].data = lenbuf;
    parts[0].size = 8;
    parts[1].data = hdr;
    parts[1].size = padded;
    st = bfpio_write_parts_atomic(path, parts, n + 2, force, err, errlen);
    goto done;
nomem:
    st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory writing %s", path);
done:
    free(hdr);
    free(text);
    cJSON_Delete(root);
    free(parts);
    free(order);
    return st;
}

bfp_status bfp_safetensors_save(const char *path, const char *name,
                                const bfp_tensor *t, int force, char *err,
                                size_t errlen)
{
    bfp_status st = bfpio_check_tensor(t, path ? path : "(null)", err, errlen);
    if (st != BFP_OK)
        return st;
    bfpio_st_out o;
    o.name = name ? name : "tensor";
    o.dtype = t->dtype == BFP_DTYPE_F32 ? "F32"
              : t->dtype == BFP_DTYPE_F16 ? "F16" : "BF16";
    o.elem_size = bfp_dtype_size(t->dtype);
    o.ndim = t->ndim;
    o.shape = t->shape;
    o.data = t->data;
    o.nbytes = t->nbytes;
    return bfpio_st_write(path, &o, 1, NULL, NULL, 0, force, err, errlen);
}

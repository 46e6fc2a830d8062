/*
 * safetensors.c - reading and writing safetensors files.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON, then the
 * data. The JSON is parsed and written with cJSON; only the header is read
 * up front, tensors are read on demand so picking one tensor from a large
 * model file does not load the whole file.
 */
#define _POSIX_C_SOURCE 200809L

#include "io_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Same bound as the reference implementation. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* Integers above 2^53 do not survive cJSON's doubles. */
#define ST_MAX_INT 9007199254740992.0

size_t bfpio_st_dtype_size(const char *d)
{
    static const struct {
        const char *name;
        size_t size;
    } tab[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E5M2", 1},
               {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
               {"F16", 2},  {"BF16", 2}, {"I32", 4},  {"U32", 4},
               {"F32", 4},  {"I64", 8},  {"U64", 8},  {"F64", 8}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(d, tab[i].name) == 0)
            return tab[i].size;
    return 0;
}

static int get_uint(const cJSON *j, uint64_t *v)
{
    if (!cJSON_IsNumber(j))
        return 0;
    double d = j->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_INT))
        return 0;
    uint64_t u = (uint64_t)d;
    if ((double)u != d)
        return 0;
    *v = u;
    return 1;
}

void bfpio_st_close(bfpio_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->count; i++)
        free(f->entries[i].name);
    free(f->entries);
    cJSON_Delete(f->json);
    bfpio_close(&f->rd);
    memset(f, 0, sizeof *f);
    f->rd.fd = -1;
}

static int cmp_name(const void *a, const void *b)
{
    const bfpio_st_entry *x = *(const bfpio_st_entry *const *)a;
    const bfpio_st_entry *y = *(const bfpio_st_entry *const *)b;
    return strcmp(x->name, y->name);
}

/* Fill e from one header entry; returns an error message or NULL. */
static const char *parse_entry(const cJSON *j, uint64_t data_len,
                               bfpio_st_entry *e)
{
    const cJSON *dt, *sh, *off, *it;
    if (!cJSON_IsObject(j))
        return "is not a JSON object";
    dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
    off = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return "lacks dtype, shape or data_offsets";
    if (strlen(dt->valuestring) < sizeof e->dtype)
        strcpy(e->dtype, dt->valuestring);
    e->elem_size = e->dtype[0] ? bfpio_st_dtype_size(e->dtype) : 0;
    e->ndim = 0;
    e->numel = 1;
    int overflow = 0;
    cJSON_ArrayForEach(it, sh)
    {
        uint64_t d;
        if (!get_uint(it, &d))
            return "has a shape entry that is not a non-negative integer";
        if (d > SIZE_MAX || !bfpio_mul(e->numel, (size_t)d, &e->numel))
            overflow = 1;
        if (e->ndim < BFP_IO_MAX_DIMS)
            e->shape[e->ndim] = (size_t)d;
        e->ndim++;
    }
    if (overflow)
        return "has a shape whose product overflows";
    if (cJSON_GetArraySize(off) != 2 || !get_uint(off->child, &e->begin) ||
        !get_uint(off->child->next, &e->end))
        return "has data_offsets that are not two non-negative integers";
    if (e->begin > e->end || e->end > data_len)
        return "has data_offsets out of range of the data";
    size_t need;
    if (e->elem_size &&
        (!bfpio_mul(e->numel, e->elem_size, &need) ||
         (uint64_t)need != e->end - e->begin))
        return "has a byte length that does not match its dtype and shape";
    return NULL;
}

/* Does a JSON string in text[0..n) hold \u0000? cJSON would cut the name
 * there, so "a\u0000x" and "a\u0000y" would both read as "a". */
static int has_escaped_nul(const char *text, size_t n)
{
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_string) {
            in_string = text[i] == '"';
        } else if (text[i] == '"') {
            in_string = 0;
        } else if (text[i] == '\\' && i + 1 < n) {
            if (text[i + 1] == 'u' && i + 5 < n &&
                strncmp(text + i + 2, "0000", 4) == 0)
                return 1;
            i++; /* the escaped character */
        }
    }
    return 0;
}

/* The kind of file whose first 8 bytes are its magic, not a safetensors
 * header length (both would read as lengths of terabytes), or NULL. */
static const char *other_kind(const uint8_t *head)
{
    if (memcmp(head, "\x93NUMPY", 6) == 0)
        return ".npy";
    if (memcmp(head, "GGUF", 4) == 0)
        return "GGUF";
    return NULL;
}

/* Parse the header of the file already open in f->rd. */
static bfp_status st_parse(bfpio_st_file *f, char *err, size_t errlen)
{
    const char *path = f->rd.path;
    uint8_t lenbuf[8];
    char *hdr = NULL;
    const char *why = NULL;
    bfp_status st;
    if (f->rd.size < 8) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not a safetensors file (too short)", path);
        goto fail;
    }
    if ((st = bfpio_read_at(&f->rd, 0, lenbuf, 8, err, errlen)) != BFP_OK)
        goto fail;
    /* files people pass by mistake: say what they are, not a header length */
    const char *other = other_kind(lenbuf);
    if (other) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not a safetensors file (it starts like a %s file)",
                        path, other);
        goto fail;
    }
    uint64_t n = bfpio_get_le(lenbuf, 8);
    if (n > ST_MAX_HEADER) {
        /* a length past the file's end too: likely not safetensors at all */
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        n > f->rd.size - 8
                            ? "%s: not a safetensors file (header length %llu exceeds "
                              "the cap of %llu bytes and the file)"
                            : "%s: safetensors header length %llu exceeds the cap of "
                              "%llu bytes", path, (unsigned long long)n,
                        (unsigned long long)ST_MAX_HEADER);
        goto fail;
    }
    if (n < 2 || n > f->rd.size - 8) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not a safetensors file (header length %llu is "
                        "impossible for a %llu-byte file)", path,
                        (unsigned long long)n, (unsigned long long)f->rd.size);
        goto fail;
    }
    f->data_start = 8 + n;
    uint64_t data_len = f->rd.size - f->data_start;
    if (!(hdr = malloc((size_t)n + 1))) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto fail;
    }
    if ((st = bfpio_read_at(&f->rd, 8, hdr, (size_t)n, err, errlen)) != BFP_OK)
        goto fail;
    hdr[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
    if (!root) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: safetensors header is not valid JSON (near byte %lld)",
                        path, end ? (long long)(end - hdr) : -1LL);
        goto fail;
    }
    f->json = root;
    if (has_escaped_nul(hdr, end ? (size_t)(end - hdr) : (size_t)n)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: a name or value in the safetensors header holds a "
                        "NUL character (\\u0000), which bfp does not accept",
                        path);
        goto fail;
    }
    /* Only the padding the format allows may follow the JSON. */
    for (; end && end < hdr + n; end++)
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: junk after the safetensors JSON header", path);
            goto fail;
        }
    if (!cJSON_IsObject(root)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: safetensors header is not a JSON object", path);
        goto fail;
    }
    size_t cap = (size_t)cJSON_GetArraySize(root);
    f->entries = calloc(cap ? cap : 1, sizeof *f->entries);
    if (!f->entries) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto fail;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const char *label = it->string ? it->string : "?";
        if (it->string && strcmp(it->string, "__metadata__") == 0) {
            const cJSON *m;
            if (f->metadata || !cJSON_IsObject(it))
                why = "is not a single JSON object";
            else
                cJSON_ArrayForEach(m, it)
                {
                    if (!cJSON_IsString(m))
                        why = "has a value that is not a string";
                }
            f->metadata = (void *)it;
        } else if (!it->string) {
            why = "has no name";
        } else {
            bfpio_st_entry *e = &f->entries[f->count++];
            if (!(e->name = strdup(it->string))) {
                st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
                goto fail;
            }
            why = parse_entry(it, data_len, e);
        }
        if (why) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: header entry %s %s", path, BFPIO_Q(label), why);
            goto fail;
        }
    }
    /* Duplicate names would make "which tensor" ambiguous. */
    if (f->count > 1) {
        const bfpio_st_entry **v = malloc(f->count * sizeof *v);
        if (!v) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < f->count; i++)
            v[i] = &f->entries[i];
        qsort(v, f->count, sizeof *v, cmp_name);
        for (size_t i = 1; i < f->count; i++)
            if (strcmp(v[i - 1]->name, v[i]->name) == 0) {
                st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                                "%s: tensor %s appears twice", path,
                                BFPIO_Q(v[i]->name));
                free(v);
                goto fail;
            }
        free(v);
    }
    free(hdr);
    return BFP_OK;
fail:
    free(hdr);
    bfpio_st_close(f);
    return st;
}

bfp_status bfpio_st_open(bfpio_st_file *f, const char *path, char *err,
                         size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->rd.fd = -1;
    bfp_status st = bfpio_open_read(&f->rd, path, err, errlen);
    return st != BFP_OK ? st : st_parse(f, err, errlen);
}

bfp_status bfpio_st_open_mem(bfpio_st_file *f, const void *buf, size_t len,
                             const char *label, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    bfpio_open_mem(&f->rd, buf, len, label);
    return st_parse(f, err, errlen);
}

long bfpio_st_find(const bfpio_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->count; i++)
        if (strcmp(f->entries[i].name, name) == 0)
            return (long)i;
    return -1;
}

const char *bfpio_st_meta(const bfpio_st_file *f, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

bfp_status bfpio_st_read(bfpio_st_file *f, size_t i, void *buf, char *err,
                         size_t errlen)
{
    const bfpio_st_entry *e = &f->entries[i];
    uint64_t n = e->end - e->begin;
    if (n > SIZE_MAX)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "%s: tensor %s too large",
                          f->rd.path, BFPIO_Q(e->name));
    return bfpio_read_at(&f->rd, f->data_start + e->begin, buf, (size_t)n, err,
                         errlen);
}

int bfpio_st_float_dtype(const char *d, bfp_dtype *out)
{
    if (strcmp(d, "F32") == 0)
        *out = BFP_DTYPE_F32;
    else if (strcmp(d, "F16") == 0)
        *out = BFP_DTYPE_F16;
    else if (strcmp(d, "BF16") == 0)
        *out = BFP_DTYPE_BF16;
    else
        return 0;
    return 1;
}

/* Is entry i a plane of the file's bfp quantized tensor? The NVFP4 tensor
 * scale is an F32 tensor, but not a tensor to quantize. */
static int is_plane(const bfpio_st_file *f, size_t i)
{
    const char *q = bfpio_st_meta(f, "bfp.name");
    size_t n = q ? strlen(q) : 0;
    const char *e = f->entries[i].name;
    return bfpio_st_meta(f, "bfp.format") && q && strncmp(e, q, n) == 0 &&
           e[n] == '.' && strcmp(e + n + 1, "tensor_scale") == 0;
}

/* Pick the tensor for a NULL name: the only float one. */
static bfp_status pick_only_float(const bfpio_st_file *f, const char *path,
                                  long *idx, char *err, size_t errlen)
{
    size_t nfloat = 0;
    bfp_dtype dt;
    *idx = -1;
    for (size_t i = 0; i < f->count; i++)
        if (bfpio_st_float_dtype(f->entries[i].dtype, &dt) && !is_plane(f, i)) {
            nfloat++;
            *idx = (long)i;
        }
    if (nfloat == 1)
        return BFP_OK;
    if (nfloat == 0)
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s: no F32, F16 or BF16 tensor in the file%s", path,
                          bfpio_st_meta(f, "bfp.format")
                              ? " (it is a bfp quantized container)" : "");
    /* List the candidates, as many as fit in err. */
    size_t len = 0;
    if (err && errlen > 0) {
        int w = snprintf(err, errlen, "%s: %zu float tensors, name one of:",
                         path, nfloat);
        len = w > 0 ? (size_t)w : 0;
        for (size_t i = 0; i < f->count && len < errlen; i++)
            if (bfpio_st_float_dtype(f->entries[i].dtype, &dt) && !is_plane(f, i)) {
                w = snprintf(err + len, errlen - len, " %s",
                             BFPIO_Q(f->entries[i].name));
                len += w > 0 ? (size_t)w : 0;
            }
    }
    return BFP_ERR_ARG;
}

/* Load tensor name (NULL: the only float one) from the open file f, which
 * this closes. */
static bfp_status st_load(bfpio_st_file *f0, const char *name, bfp_tensor *out,
                          char *err, size_t errlen)
{
    bfpio_st_file f = *f0;
    const char *path = f.rd.path;
    bfp_status st = BFP_OK;
    long idx;
    if (name) {
        if ((idx = bfpio_st_find(&f, name)) < 0) {
            st = bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: no tensor named %s",
                            path, BFPIO_Q(name));
            goto done;
        }
    } else if ((st = pick_only_float(&f, path, &idx, err, errlen)) != BFP_OK) {
        goto done;
    }
    const bfpio_st_entry *e = &f.entries[idx];
    if (!bfpio_st_float_dtype(e->dtype, &out->dtype)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: tensor %s has dtype %s (expected F32, F16 or BF16)",
                        path, BFPIO_Q(e->name), e->dtype[0] ? e->dtype : "?");
        goto done;
    }
    if (e->ndim > BFP_IO_MAX_DIMS) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: tensor %s has %zu dimensions (max %d)", path,
                        BFPIO_Q(e->name), e->ndim, BFP_IO_MAX_DIMS);
        goto done;
    }
    size_t nbytes = (size_t)(e->end - e->begin); /* == numel*size, checked */
    if (!(out->data = malloc(nbytes ? nbytes : 1))) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen,
                        "out of memory loading %s (%zu bytes)", BFPIO_Q(e->name),
                        nbytes);
        goto done;
    }
    if ((st = bfpio_st_read(&f, (size_t)idx, out->data, err, errlen)) != BFP_OK)
        goto done;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof out->shape);
    out->nbytes = nbytes;
done:
    bfpio_st_close(&f);
    if (st != BFP_OK)
        bfp_tensor_free(out);
    return st;
}

bfp_status bfp_safetensors_load(const char *path, const char *name,
                                bfp_tensor *out, char *err, size_t errlen)
{
    bfpio_st_file f;
    if (!out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_safetensors_load: NULL output");
    memset(out, 0, sizeof *out);
    bfp_status st = bfpio_st_open(&f, path, err, errlen);
    return st != BFP_OK ? st : st_load(&f, name, out, err, errlen);
}

bfp_status bfp_safetensors_parse(const void *buf, size_t len, const char *name,
                                 bfp_tensor *out, char *err, size_t errlen)
{
    bfpio_st_file f;
    if (!out || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "bfp_safetensors_parse: NULL argument");
    memset(out, 0, sizeof *out);
    bfp_status st = bfpio_st_open_mem(&f, buf, len, "(safetensors in memory)",
                                      err, errlen);
    return st != BFP_OK ? st : st_load(&f, name, out, err, errlen);
}

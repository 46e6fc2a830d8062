/*
 * gguf.c - reading tensors from GGUF files (llama.cpp / ggml), versions 2
 * and 3, little-endian.
 *
 * Layout: magic "GGUF", u32 version, u64 tensor count, u64 key/value count,
 * the key/values (u64-length strings, a u32 value type, the value; arrays are
 * a u32 element type, a u64 count and the elements, and may nest), then per
 * tensor: name, u32 n_dims, u64 ne[n_dims] (ne[0] the contiguous axis), u32
 * ggml type, u64 offset from the data section, which starts at the next
 * multiple of general.alignment (default 32) after the tensor infos.
 * Every count, size and offset is checked against the file before use.
 */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml type ids, from ggml/include/ggml.h (enum ggml_type) in llama.cpp:
 * GGML_TYPE_F32 = 0, F16 = 1, BF16 = 30, MXFP4 = 39, NVFP4 = 40. */
enum {
    GGML_F32 = 0,
    GGML_F16 = 1,
    GGML_BF16 = 30,
    GGML_MXFP4 = 39,
    GGML_NVFP4 = 40
};

/* GGUF value types (gguf.h: enum gguf_type). */
enum {
    GV_UINT8 = 0, GV_INT8, GV_UINT16, GV_INT16, GV_UINT32, GV_INT32, GV_FLOAT32,
    GV_BOOL, GV_STRING, GV_ARRAY, GV_UINT64, GV_INT64, GV_FLOAT64, GV_COUNT
};

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT ((uint64_t)1 << 20)
/* Arrays of arrays deeper than this are surely not metadata. */
#define GGUF_MAX_NESTING 8
/* Tensor names longer than this are surely not names. */
#define GGUF_MAX_NAME 4096

/* Byte size of a fixed-size value type, 0 for strings and arrays. */
static size_t value_size(uint32_t t)
{
    static const uint8_t sizes[GV_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < GV_COUNT ? sizes[t] : 0;
}

/* Elements per block and bytes per block of the ggml types bfp reads. */
static int type_geometry(uint32_t type, uint64_t *block, uint64_t *bytes)
{
    switch (type) {
    case GGML_F32: *block = 1, *bytes = 4; return 1;
    case GGML_F16: *block = 1, *bytes = 2; return 1;
    case GGML_BF16: *block = 1, *bytes = 2; return 1;
    case GGML_MXFP4: *block = 32, *bytes = 17; return 1;  /* block_mxfp4 */
    case GGML_NVFP4: *block = 64, *bytes = 36; return 1;  /* block_nvfp4 */
    default: return 0;
    }
}

static const char *type_name(uint32_t type)
{
    switch (type) {
    case GGML_F32: return "F32";
    case GGML_F16: return "F16";
    case GGML_BF16: return "BF16";
    case GGML_MXFP4: return "MXFP4";
    case GGML_NVFP4: return "NVFP4";
    default: return NULL;
    }
}

/* A cursor over the header, reading the file in chunks. */
typedef struct {
    bfpio_reader *r;
    uint64_t pos;
    uint8_t buf[1 << 16];
    uint64_t buf_off; /* file offset of buf[0] */
    size_t buf_len;
    char *err;
    size_t errlen;
} cursor;

static bfp_status truncated(cursor *c, const char *what)
{
    return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                      "%s: GGUF header is truncated (reading %s at byte %llu of %llu)",
                      c->r->path, what, (unsigned long long)c->pos,
                      (unsigned long long)c->r->size);
}

static bfp_status take(cursor *c, void *dst, size_t n, const char *what)
{
    uint8_t *out = dst;
    if (c->pos > c->r->size || n > c->r->size - c->pos)
        return truncated(c, what);
    while (n > 0) {
        if (c->pos < c->buf_off || c->pos >= c->buf_off + c->buf_len) {
            uint64_t left = c->r->size - c->pos;
            size_t want = left < sizeof c->buf ? (size_t)left : sizeof c->buf;
            bfp_status st = bfpio_read_at(c->r, c->pos, c->buf, want, c->err, c->errlen);
            if (st != BFP_OK)
                return st;
            c->buf_off = c->pos;
            c->buf_len = want;
        }
        size_t at = (size_t)(c->pos - c->buf_off), k = c->buf_len - at;
        if (k > n)
            k = n;
        memcpy(out, c->buf + at, k);
        out += k;
        c->pos += k;
        n -= k;
    }
    return BFP_OK;
}

static bfp_status skip(cursor *c, uint64_t n, const char *what)
{
    if (c->pos > c->r->size || n > c->r->size - c->pos)
        return truncated(c, what);
    c->pos += n;
    return BFP_OK;
}

static bfp_status get_u32(cursor *c, uint32_t *v, const char *what)
{
    uint8_t b[4];
    bfp_status st = take(c, b, 4, what);
    *v = (uint32_t)bfpio_get_le(b, 4);
    return st;
}

static bfp_status get_u64(cursor *c, uint64_t *v, const char *what)
{
    uint8_t b[8];
    bfp_status st = take(c, b, 8, what);
    *v = bfpio_get_le(b, 8);
    return st;
}

/* A string's length, checked against the rest of the file. */
static bfp_status get_strlen(cursor *c, uint64_t *len, const char *what)
{
    bfp_status st = get_u64(c, len, what);
    if (st == BFP_OK && *len > c->r->size - c->pos)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF %s of %llu bytes at byte %llu runs past the end of "
                          "the file", c->r->path, what, (unsigned long long)*len,
                          (unsigned long long)c->pos);
    return st;
}

/* A string into a malloc'd NUL-terminated copy (max bytes at most). */
static bfp_status get_string(cursor *c, char **out, uint64_t max, const char *what)
{
    uint64_t len;
    *out = NULL;
    bfp_status st = get_strlen(c, &len, what);
    if (st != BFP_OK)
        return st;
    if (len > max)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF %s is %llu bytes long (max %llu)", c->r->path, what,
                          (unsigned long long)len, (unsigned long long)max);
    char *s = malloc((size_t)len + 1);
    if (!s)
        return bfpio_fail(BFP_ERR_NOMEM, c->err, c->errlen, "out of memory");
    if ((st = take(c, s, (size_t)len, what)) != BFP_OK) {
        free(s);
        return st;
    }
    s[len] = '\0';
    if (strlen(s) != len) {
        free(s);
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF %s holds a NUL byte", c->r->path, what);
    }
    *out = s;
    return BFP_OK;
}

/* Skip one value of type t (arrays recursively, depth-limited). */
static bfp_status skip_value(cursor *c, uint32_t t, int depth)
{
    if (t >= GV_COUNT)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: unknown GGUF value type %u at byte %llu", c->r->path, t,
                          (unsigned long long)c->pos);
    if (t == GV_STRING) {
        uint64_t len;
        bfp_status st = get_strlen(c, &len, "string value");
        return st != BFP_OK ? st : skip(c, len, "string value");
    }
    if (t != GV_ARRAY)
        return skip(c, value_size(t), "value");
    if (depth >= GGUF_MAX_NESTING)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF arrays nested more than %d deep", c->r->path,
                          GGUF_MAX_NESTING);
    uint32_t et;
    uint64_t n;
    bfp_status st = get_u32(c, &et, "array type");
    if (st == BFP_OK)
        st = get_u64(c, &n, "array length");
    if (st != BFP_OK)
        return st;
    if (et >= GV_COUNT)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: unknown GGUF array element type %u", c->r->path, et);
    /* Fixed-size elements: one bounds check. Others take at least 8 bytes
     * each (a string length, an array header), so a huge n fails quickly. */
    uint64_t es = value_size(et);
    if (es) {
        if (n > (c->r->size - c->pos) / es)
            return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                              "%s: GGUF array of %llu elements runs past the end of the "
                              "file", c->r->path, (unsigned long long)n);
        return skip(c, n * es, "array");
    }
    if (n > (c->r->size - c->pos) / 8)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF array of %llu elements runs past the end of the file",
                          c->r->path, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        if ((st = skip_value(c, et, depth + 1)) != BFP_OK)
            return st;
    return BFP_OK;
}

/* One key/value; general.alignment sets *alignment. */
static bfp_status read_kv(cursor *c, uint64_t *alignment)
{
    char *key;
    uint32_t t;
    bfp_status st = get_string(c, &key, GGUF_MAX_NAME, "key");
    if (st != BFP_OK)
        return st;
    if ((st = get_u32(c, &t, "value type")) != BFP_OK)
        goto out;
    if (strcmp(key, "general.alignment") == 0) {
        uint32_t a;
        if (t != GV_UINT32) {
            st = bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                            "%s: general.alignment has value type %u (expected uint32)",
                            c->r->path, t);
            goto out;
        }
        if ((st = get_u32(c, &a, "general.alignment")) != BFP_OK)
            goto out;
        if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT) {
            st = bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                            "%s: general.alignment %u is not a power of two up to %llu",
                            c->r->path, a, (unsigned long long)GGUF_MAX_ALIGNMENT);
            goto out;
        }
        *alignment = a;
    } else {
        st = skip_value(c, t, 0);
    }
out:
    free(key);
    return st;
}

void bfp_gguf_index_free(bfp_gguf_index *idx)
{
    if (!idx)
        return;
    for (size_t i = 0; i < idx->count; i++)
        free(idx->tensors[i].name);
    free(idx->tensors);
    memset(idx, 0, sizeof *idx);
}

/* One tensor info; fills t (its offset still relative to the data). */
static bfp_status read_tensor_info(cursor *c, bfp_gguf_tensor *t, size_t i)
{
    uint32_t nd;
    uint64_t ne[BFP_IO_MAX_DIMS];
    bfp_status st = get_string(c, &t->name, GGUF_MAX_NAME, "tensor name");
    if (st == BFP_OK)
        st = get_u32(c, &nd, "tensor dimensions");
    if (st != BFP_OK)
        return st;
    if (nd == 0 || nd > BFP_IO_MAX_DIMS)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF tensor %zu (%s) has %u dimensions (1 to %d allowed)",
                          c->r->path, i, BFPIO_Q(t->name), nd, BFP_IO_MAX_DIMS);
    t->ndim = nd;
    uint64_t numel = 1;
    int overflow = 0;
    for (uint32_t d = 0; d < nd; d++) {
        if ((st = get_u64(c, &ne[d], "tensor dimension")) != BFP_OK)
            return st;
        if (ne[d] > SIZE_MAX || (ne[d] && numel > UINT64_MAX / ne[d]))
            overflow = 1;
        else
            numel *= ne[d];
        t->shape[nd - 1 - d] = (size_t)ne[d]; /* row-major: ne[0] is last */
    }
    if (overflow)
        return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                          "%s: GGUF tensor %s has a shape whose size overflows",
                          c->r->path, BFPIO_Q(t->name));
    if ((st = get_u32(c, &t->ggml_type, "tensor type")) != BFP_OK ||
        (st = get_u64(c, &t->offset, "tensor offset")) != BFP_OK)
        return st;
    uint64_t block, bytes;
    t->nbytes = 0;
    if (type_geometry(t->ggml_type, &block, &bytes)) {
        if (ne[0] % block != 0)
            return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                              "%s: GGUF %s tensor %s has rows of %llu values, not a "
                              "multiple of its block of %llu", c->r->path,
                              type_name(t->ggml_type), BFPIO_Q(t->name),
                              (unsigned long long)ne[0], (unsigned long long)block);
        if (numel / block > UINT64_MAX / bytes)
            return bfpio_fail(BFP_ERR_DATA, c->err, c->errlen,
                              "%s: GGUF tensor %s is too large", c->r->path,
                              BFPIO_Q(t->name));
        t->nbytes = numel / block * bytes;
    }
    return BFP_OK;
}

static int cmp_name(const void *a, const void *b)
{
    const bfp_gguf_tensor *x = *(const bfp_gguf_tensor *const *)a;
    const bfp_gguf_tensor *y = *(const bfp_gguf_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static bfp_status check_unique(const bfp_gguf_index *idx, const char *path, char *err,
                               size_t errlen)
{
    if (idx->count < 2)
        return BFP_OK;
    const bfp_gguf_tensor **v = malloc(idx->count * sizeof *v);
    if (!v)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    for (size_t i = 0; i < idx->count; i++)
        v[i] = &idx->tensors[i];
    qsort(v, idx->count, sizeof *v, cmp_name);
    bfp_status st = BFP_OK;
    for (size_t i = 1; i < idx->count && st == BFP_OK; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: GGUF tensor %s appears twice",
                            path, BFPIO_Q(v[i]->name));
    free(v);
    return st;
}

/* Read and check the header of the GGUF in r into idx. */
static bfp_status index_read(bfpio_reader *r, bfp_gguf_index *idx, char *err, size_t errlen)
{
    cursor *c = malloc(sizeof *c);
    uint8_t magic[4];
    uint64_t ntensors = 0, nkv = 0, alignment = GGUF_DEFAULT_ALIGNMENT;
    bfp_status st;
    memset(idx, 0, sizeof *idx);
    if (!c)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    memset(c, 0, sizeof *c);
    c->r = r;
    c->err = err;
    c->errlen = errlen;
    const char *path = r->path;
    if (r->size < 24 || (st = take(c, magic, 4, "magic")) != BFP_OK ||
        memcmp(magic, "GGUF", 4) != 0) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: not a GGUF file (%s)", path,
                        r->size < 24 ? "too short" : "bad magic");
        goto fail;
    }
    if ((st = get_u32(c, &idx->version, "version")) != BFP_OK)
        goto fail;
    if (idx->version != 2 && idx->version != 3) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: unsupported GGUF version %u (2 and 3 are read%s)", path,
                        idx->version,
                        (idx->version & 0xFFFF) == 0 ? "; a big-endian file?" : "");
        goto fail;
    }
    if ((st = get_u64(c, &ntensors, "tensor count")) != BFP_OK ||
        (st = get_u64(c, &nkv, "key/value count")) != BFP_OK)
        goto fail;
    /* A key/value takes at least 13 bytes, a tensor info at least 32. */
    if (nkv > (r->size - c->pos) / 13 || ntensors > (r->size - c->pos) / 32) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: GGUF header claims %llu tensors and %llu key/values, more "
                        "than a %llu-byte file can hold", path,
                        (unsigned long long)ntensors, (unsigned long long)nkv,
                        (unsigned long long)r->size);
        goto fail;
    }
    idx->kv_count = nkv;
    for (uint64_t i = 0; i < nkv; i++)
        if ((st = read_kv(c, &alignment)) != BFP_OK)
            goto fail;
    idx->alignment = alignment;
    idx->tensors = calloc(ntensors ? (size_t)ntensors : 1, sizeof *idx->tensors);
    if (!idx->tensors) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < ntensors; i++) {
        idx->count = (size_t)i + 1; /* so a partial entry is freed */
        if ((st = read_tensor_info(c, &idx->tensors[i], (size_t)i)) != BFP_OK)
            goto fail;
    }
    uint64_t data = c->pos + (alignment - c->pos % alignment) % alignment;
    if (ntensors > 0 && data > r->size) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: GGUF data section would start at byte %llu, past the end of "
                        "the file", path, (unsigned long long)data);
        goto fail;
    }
    for (size_t i = 0; i < idx->count; i++) {
        bfp_gguf_tensor *t = &idx->tensors[i];
        if (t->offset % alignment != 0 || t->offset > r->size - data ||
            t->nbytes > r->size - data - t->offset) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: GGUF tensor %s (offset %llu, %llu bytes) is misaligned "
                            "or runs past the end of the file", path, BFPIO_Q(t->name),
                            (unsigned long long)t->offset, (unsigned long long)t->nbytes);
            goto fail;
        }
        t->offset += data;
    }
    if ((st = check_unique(idx, path, err, errlen)) != BFP_OK)
        goto fail;
    free(c);
    return BFP_OK;
fail:
    free(c);
    bfp_gguf_index_free(idx);
    return st;
}

static int is_float(uint32_t type)
{
    return type == GGML_F32 || type == GGML_F16 || type == GGML_BF16;
}

static int is_quant(uint32_t type)
{
    return type == GGML_MXFP4 || type == GGML_NVFP4;
}

/* The tensor called name, or for NULL the only one that want() accepts. */
static bfp_status pick(const bfp_gguf_index *idx, const char *path, const char *name,
                       int (*want)(uint32_t), const char *kinds,
                       const bfp_gguf_tensor **out, char *err, size_t errlen)
{
    size_t n = 0;
    *out = NULL;
    for (size_t i = 0; i < idx->count; i++) {
        const bfp_gguf_tensor *t = &idx->tensors[i];
        if (name ? strcmp(t->name, name) == 0 : want(t->ggml_type)) {
            *out = t;
            n++;
        }
    }
    if (name && !*out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: no tensor named %s", path,
                          BFPIO_Q(name));
    if (!name && n != 1) {
        if (n == 0)
            return bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: no %s tensor in the file",
                              path, kinds);
        size_t len = 0;
        if (err && errlen > 0) {
            int w = snprintf(err, errlen, "%s: %zu %s tensors, name one of:", path, n, kinds);
            len = w > 0 ? (size_t)w : 0;
            for (size_t i = 0; i < idx->count && len < errlen; i++)
                if (want(idx->tensors[i].ggml_type)) {
                    w = snprintf(err + len, errlen - len, " %s",
                                 BFPIO_Q(idx->tensors[i].name));
                    len += w > 0 ? (size_t)w : 0;
                }
        }
        return BFP_ERR_ARG;
    }
    if (!want((*out)->ggml_type)) {
        const char *tn = type_name((*out)->ggml_type);
        char num[16];
        snprintf(num, sizeof num, "%u", (unsigned)(*out)->ggml_type);
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s: tensor %s has ggml type %s (expected %s)", path,
                          BFPIO_Q((*out)->name), tn ? tn : num, kinds);
    }
    return BFP_OK;
}

static bfp_status load_float(bfpio_reader *r, const char *name, bfp_tensor *out, char *err,
                             size_t errlen)
{
    bfp_gguf_index idx;
    const bfp_gguf_tensor *t;
    bfp_status st = index_read(r, &idx, err, errlen);
    if (st != BFP_OK)
        return st;
    if ((st = pick(&idx, r->path, name, is_float, "F32, F16 or BF16", &t, err, errlen)) !=
        BFP_OK)
        goto done;
    out->dtype = t->ggml_type == GGML_F32   ? BFP_DTYPE_F32
                 : t->ggml_type == GGML_F16 ? BFP_DTYPE_F16
                                            : BFP_DTYPE_BF16;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof out->shape);
    out->nbytes = (size_t)t->nbytes; /* within the file, so within size_t */
    if (!(out->data = malloc(out->nbytes ? out->nbytes : 1))) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory loading %s (%zu bytes)",
                        BFPIO_Q(t->name), out->nbytes);
        goto done;
    }
    st = bfpio_read_at(r, t->offset, out->data, out->nbytes, err, errlen);
done:
    bfp_gguf_index_free(&idx);
    if (st != BFP_OK)
        bfp_tensor_free(out);
    return st;
}

static bfp_status load_quant(bfpio_reader *r, const char *name, bfp_qtensor *q, char *err,
                             size_t errlen)
{
    bfp_gguf_index idx;
    const bfp_gguf_tensor *t;
    uint8_t *blocks = NULL;
    bfp_status st = index_read(r, &idx, err, errlen);
    if (st != BFP_OK)
        return st;
    if ((st = pick(&idx, r->path, name, is_quant, "MXFP4 or NVFP4", &t, err, errlen)) !=
        BFP_OK)
        goto done;
    bfp_format fmt = t->ggml_type == GGML_MXFP4 ? BFP_MXFP4 : BFP_NVFP4;
    if ((st = bfp_qtensor_alloc(q, fmt, t->ndim, t->shape, err, errlen)) != BFP_OK)
        goto done;
    if (!(blocks = malloc(t->nbytes ? (size_t)t->nbytes : 1))) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory loading %s",
                        BFPIO_Q(t->name));
        goto done;
    }
    if ((st = bfpio_read_at(r, t->offset, blocks, (size_t)t->nbytes, err, errlen)) != BFP_OK)
        goto done;
    /* block_nvfp4 holds no tensor scale: q->tensor_scale stays 1 */
    bfp_planes p = {q->codes, q->scales, q->meta, NULL};
    st = bfp_ggml_to_planar(fmt, blocks, q->rows, q->cols, &p);
    if (st != BFP_OK)
        st = bfpio_fail(st, err, errlen, "%s: tensor %s: %s", r->path, BFPIO_Q(t->name),
                        bfp_status_str(st));
done:
    free(blocks);
    bfp_gguf_index_free(&idx);
    if (st != BFP_OK)
        bfp_qtensor_free(q);
    return st;
}

/* ---- entry points: a file, or a buffer in memory ---- */

bfp_status bfp_gguf_list(const char *path, bfp_gguf_index *idx, char *err, size_t errlen)
{
    bfpio_reader r;
    if (!idx)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_gguf_list: NULL index");
    memset(idx, 0, sizeof *idx);
    bfp_status st = bfpio_open_read(&r, path, err, errlen);
    if (st == BFP_OK)
        st = index_read(&r, idx, err, errlen);
    bfpio_close(&r);
    return st;
}

bfp_status bfp_gguf_load(const char *path, const char *name, bfp_tensor *out, char *err,
                         size_t errlen)
{
    bfpio_reader r;
    if (!out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_gguf_load: NULL output");
    memset(out, 0, sizeof *out);
    bfp_status st = bfpio_open_read(&r, path, err, errlen);
    if (st == BFP_OK)
        st = load_float(&r, name, out, err, errlen);
    bfpio_close(&r);
    return st;
}

bfp_status bfp_gguf_load_qtensor(const char *path, const char *name, bfp_qtensor *q,
                                 char *err, size_t errlen)
{
    bfpio_reader r;
    if (!q)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_gguf_load_qtensor: NULL q");
    memset(q, 0, sizeof *q);
    bfp_status st = bfpio_open_read(&r, path, err, errlen);
    if (st == BFP_OK)
        st = load_quant(&r, name, q, err, errlen);
    bfpio_close(&r);
    return st;
}

bfp_status bfp_gguf_list_mem(const void *buf, size_t len, bfp_gguf_index *idx, char *err,
                             size_t errlen)
{
    bfpio_reader r;
    if (!idx || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_gguf_list_mem: NULL argument");
    bfpio_open_mem(&r, buf, len, "(GGUF in memory)");
    return index_read(&r, idx, err, errlen);
}

bfp_status bfp_gguf_parse(const void *buf, size_t len, const char *name, bfp_tensor *out,
                          char *err, size_t errlen)
{
    bfpio_reader r;
    if (!out || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_gguf_parse: NULL argument");
    memset(out, 0, sizeof *out);
    bfpio_open_mem(&r, buf, len, "(GGUF in memory)");
    return load_float(&r, name, out, err, errlen);
}

bfp_status bfp_gguf_parse_qtensor(const void *buf, size_t len, const char *name,
                                  bfp_qtensor *q, char *err, size_t errlen)
{
    bfpio_reader r;
    if (!q || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_gguf_parse_qtensor: NULL argument");
    memset(q, 0, sizeof *q);
    bfpio_open_mem(&r, buf, len, "(GGUF in memory)");
    return load_quant(&r, name, q, err, errlen);
}

/*
 * npy.c - NumPy .npy files (format versions 1.0, 2.0, 3.0).
 *
 * The header is a Python dict literal; we parse exactly the subset numpy
 * writes ({'descr': ..., 'fortran_order': ..., 'shape': (...), }) and reject
 * anything else rather than guess.
 */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy itself refuses headers over 10000 bytes by default; be generous. */
#define NPY_MAX_HEADER ((size_t)1 << 20)

typedef struct {
    const char *s;
    size_t n, i;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' ||
                           c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int peek(const cursor *c)
{
    return c->i < c->n ? (unsigned char)c->s[c->i] : -1;
}

static int accept(cursor *c, char ch)
{
    skip_ws(c);
    if (peek(c) == (unsigned char)ch) {
        c->i++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes into out (cap bytes); 0 if malformed. */
static int parse_str(cursor *c, char *out, size_t cap)
{
    skip_ws(c);
    int q = peek(c);
    if (q != '\'' && q != '"')
        return 0;
    c->i++;
    size_t len = 0;
    for (;;) {
        int ch = peek(c);
        if (ch < 0 || ch == '\\' || ch < 0x20 || ch > 0x7e)
            return 0;
        c->i++;
        if (ch == q)
            break;
        if (len + 1 >= cap)
            return 0;
        out[len++] = (char)ch;
    }
    out[len] = '\0';
    return 1;
}

static int is_ident_char(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_';
}

/* True / False. Returns 0 or 1 in *v; 0 if malformed. */
static int parse_bool(cursor *c, int *v)
{
    skip_ws(c);
    const char *w[2] = {"False", "True"};
    for (int b = 0; b < 2; b++) {
        size_t l = strlen(w[b]);
        if (c->n - c->i >= l && memcmp(c->s + c->i, w[b], l) == 0 &&
            !(c->i + l < c->n && is_ident_char((unsigned char)c->s[c->i + l]))) {
            c->i += l;
            *v = b;
            return 1;
        }
    }
    return 0;
}

/* A non-negative decimal integer (Python 2's 'L' suffix allowed). */
static int parse_uint(cursor *c, size_t *v)
{
    skip_ws(c);
    size_t x = 0;
    size_t start = c->i;
    while (peek(c) >= '0' && peek(c) <= '9') {
        if (!bfpio_mul(x, 10, &x) || !bfpio_add(x, (size_t)(peek(c) - '0'), &x))
            return 0;
        c->i++;
    }
    if (c->i == start)
        return 0;
    if (peek(c) == 'L')
        c->i++;
    *v = x;
    return 1;
}

/* (a, b, ...) with a mandatory comma after a single element, as Python. */
static int parse_shape(cursor *c, size_t *shape, size_t *ndim, int *too_many)
{
    *ndim = 0;
    *too_many = 0;
    if (!accept(c, '('))
        return 0;
    if (accept(c, ')'))
        return 1;
    for (;;) {
        size_t d;
        if (!parse_uint(c, &d))
            return 0;
        if (*ndim == BFP_IO_MAX_DIMS) {
            *too_many = 1;
            return 0;
        }
        shape[(*ndim)++] = d;
        int comma = accept(c, ',');
        if (accept(c, ')'))
            return *ndim > 1 || comma;
        if (!comma)
            return 0;
    }
}

typedef struct {
    char descr[16];
    int fortran;
    size_t shape[BFP_IO_MAX_DIMS];
    size_t ndim;
} npy_header;

static bfp_status parse_header(const char *path, const char *s, size_t n,
                               npy_header *h, char *err, size_t errlen)
{
    cursor c = {s, n, 0};
    int seen[3] = {0, 0, 0};
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    if (!accept(&c, '{'))
        goto bad;
    while (!accept(&c, '}')) {
        char key[32];
        int k;
        if (!parse_str(&c, key, sizeof key) || !accept(&c, ':'))
            goto bad;
        for (k = 0; k < 3 && strcmp(key, keys[k]) != 0; k++)
            ;
        if (k == 3)
            return bfpio_fail(BFP_ERR_DATA, err, errlen,
                              "%s: unexpected key %s in .npy header", path,
                              BFPIO_Q(key));
        if (seen[k]++)
            return bfpio_fail(BFP_ERR_DATA, err, errlen,
                              "%s: duplicate key %s in .npy header", path,
                              BFPIO_Q(key));
        if (k == 0) {
            if (!parse_str(&c, h->descr, sizeof h->descr))
                return bfpio_fail(BFP_ERR_DATA, err, errlen,
                                  "%s: unsupported .npy descr (structured or "
                                  "malformed dtype)", path);
        } else if (k == 1) {
            if (!parse_bool(&c, &h->fortran))
                goto bad;
        } else {
            int too_many;
            if (!parse_shape(&c, h->shape, &h->ndim, &too_many)) {
                if (too_many)
                    return bfpio_fail(BFP_ERR_DATA, err, errlen,
                                      "%s: more than %d dimensions", path,
                                      BFP_IO_MAX_DIMS);
                goto bad;
            }
        }
        if (!accept(&c, ',')) {
            if (!accept(&c, '}'))
                goto bad;
            break;
        }
    }
    skip_ws(&c);
    if (c.i != c.n)
        goto bad;
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return bfpio_fail(BFP_ERR_DATA, err, errlen,
                              "%s: .npy header lacks '%s'", path, keys[k]);
    return BFP_OK;
bad:
    return bfpio_fail(BFP_ERR_DATA, err, errlen,
                      "%s: malformed .npy header near byte %zu", path, c.i);
}

static bfp_status dtype_from_descr(const char *path, const char *d,
                                   bfp_dtype *out, char *err, size_t errlen)
{
    if (strcmp(d, "<f4") == 0)
        *out = BFP_DTYPE_F32;
    else if (strcmp(d, "<f2") == 0)
        *out = BFP_DTYPE_F16;
    else if (strcmp(d, "<V2") == 0 || strcmp(d, "bfloat16") == 0)
        *out = BFP_DTYPE_BF16; /* ml_dtypes.bfloat16 */
    else if (d[0] == '>' && d[1] != '\0')
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s: big-endian data (%s) is not supported", path,
                          BFPIO_Q(d));
    else
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s: unsupported dtype %s (expected '<f4', '<f2' "
                          "or bfloat16)", path, BFPIO_Q(d));
    return BFP_OK;
}

/* The .npy in r into out (freed on failure). */
static bfp_status npy_read(bfpio_reader *rd, bfp_tensor *out, char *err,
                           size_t errlen)
{
    bfpio_reader r = *rd;
    const char *path = r.path;
    uint8_t pre[12];
    npy_header h;
    char *hdr = NULL;
    bfp_status st;

    memset(&h, 0, sizeof h);
    if (r.size < 10) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not a .npy file (too short)", path);
        goto done;
    }
    if ((st = bfpio_read_at(&r, 0, pre, 10, err, errlen)) != BFP_OK)
        goto done;
    if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not a .npy file (bad magic)", path);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: unsupported .npy version %d.%d", path, major, minor);
        goto done;
    }
    size_t prefix = major == 1 ? 10 : 12;
    if (prefix == 12 &&
        (st = bfpio_read_at(&r, 10, pre + 10, 2, err, errlen)) != BFP_OK)
        goto done;
    uint64_t hlen = bfpio_get_le(pre + 8, major == 1 ? 2 : 4);
    if (hlen > NPY_MAX_HEADER || hlen > r.size - prefix) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        hlen > NPY_MAX_HEADER
                            ? "%s: .npy header length %llu exceeds the cap of "
                              "%llu bytes"
                            : "%s: .npy header length %llu exceeds the file "
                              "(%llu bytes)",
                        path, (unsigned long long)hlen,
                        (unsigned long long)(hlen > NPY_MAX_HEADER
                                                 ? NPY_MAX_HEADER
                                                 : r.size));
        goto done;
    }
    hdr = malloc((size_t)hlen + 1);
    if (!hdr) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto done;
    }
    if ((st = bfpio_read_at(&r, prefix, hdr, (size_t)hlen, err, errlen)) != BFP_OK)
        goto done;
    if ((st = parse_header(path, hdr, (size_t)hlen, &h, err, errlen)) != BFP_OK)
        goto done;
    if (h.fortran) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: Fortran-order arrays are not supported "
                        "(save with np.ascontiguousarray)", path);
        goto done;
    }
    st = dtype_from_descr(path, h.descr, &out->dtype, err, errlen);
    if (st != BFP_OK)
        goto done;

    int ok;
    size_t numel = bfpio_numel(h.shape, h.ndim, &ok), nbytes;
    if (!ok || !bfpio_mul(numel, bfp_dtype_size(out->dtype), &nbytes)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: shape is too large (size overflows)", path);
        goto done;
    }
    uint64_t have = r.size - prefix - hlen;
    if (have != (uint64_t)nbytes) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: data is %s: the shape needs %zu bytes, the file "
                        "has %llu", path, have < nbytes ? "truncated" : "too long",
                        nbytes, (unsigned long long)have);
        goto done;
    }
    out->data = malloc(nbytes ? nbytes : 1);
    if (!out->data) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen,
                        "out of memory loading %s (%zu bytes)", path, nbytes);
        goto done;
    }
    st = bfpio_read_at(&r, prefix + hlen, out->data, nbytes, err, errlen);
    if (st != BFP_OK)
        goto done;
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->nbytes = nbytes;
done:
    free(hdr);
    if (st != BFP_OK)
        bfp_tensor_free(out);
    return st;
}

bfp_status bfp_npy_load(const char *path, bfp_tensor *out, char *err,
                        size_t errlen)
{
    bfpio_reader r;
    if (!out)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_npy_load: NULL output");
    memset(out, 0, sizeof *out);
    bfp_status st = bfpio_open_read(&r, path, err, errlen);
    if (st != BFP_OK)
        return st;
    st = npy_read(&r, out, err, errlen);
    bfpio_close(&r);
    return st;
}

bfp_status bfp_npy_parse(const void *buf, size_t len, bfp_tensor *out,
                         char *err, size_t errlen)
{
    bfpio_reader r;
    if (!out || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_npy_parse: NULL argument");
    memset(out, 0, sizeof *out);
    bfpio_open_mem(&r, buf, len, "(.npy in memory)");
    return npy_read(&r, out, err, errlen);
}

bfp_status bfp_npy_save(const char *path, const bfp_tensor *t, int force,
                        char *err, size_t errlen)
{
    char hdr[512];
    size_t len;
    bfp_status st = bfpio_check_tensor(t, path ? path : "(null)", err, errlen);
    if (st != BFP_OK)
        return st;
    /* bf16 as '<u2': plain numpy can read the bit patterns without ml_dtypes */
    const char *descr = t->dtype == BFP_DTYPE_F32 ? "<f4"
                        : t->dtype == BFP_DTYPE_F16 ? "<f2" : "<u2";
    len = (size_t)snprintf(hdr, sizeof hdr,
                           "{'descr': '%s', 'fortran_order': False, 'shape': (",
                           descr);
    for (size_t i = 0; i < t->ndim; i++)
        len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s%zu",
                                i ? ", " : "", t->shape[i]);
    len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s), }",
                            t->ndim == 1 ? "," : "");
    /* Pad with spaces and a final newline so data starts 64-byte aligned,
     * as numpy does. 8 dims of 20 digits fit well within hdr. */
    size_t total = 10 + len + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(hdr + len, ' ', padded - total);
    len += padded - total;
    hdr[len++] = '\n';

    uint8_t pre[10];
    memcpy(pre, NPY_MAGIC, NPY_MAGIC_LEN);
    pre[6] = 1;
    pre[7] = 0;
    bfpio_put_le(pre + 8, len, 2);
    bfpio_part parts[3] = {{pre, 10}, {hdr, len}, {t->data, t->nbytes}};
    return bfpio_write_parts_atomic(path, parts, 3, force, err, errlen);
}

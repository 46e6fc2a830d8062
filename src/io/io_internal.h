/*
 * io_internal.h - helpers shared by the files of src/io (not installed).
 */
#ifndef BFP_IO_INTERNAL_H
#define BFP_IO_INTERNAL_H

#include "bfp_io.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define BFPIO_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BFPIO_PRINTF(a, b)
#endif

/* Write one formatted line to err (if any) and return st. */
bfp_status bfpio_fail(bfp_status st, char *err, size_t errlen, const char *fmt,
                      ...) BFPIO_PRINTF(4, 5);

/* bfp_io_quote_name() into a buffer that lives to the end of the
 * statement: bfpio_fail(..., "tensor %s", BFPIO_Q(e->name)). */
#define BFPIO_Q(name)                                                          \
    bfp_io_quote_name((name), (char[BFP_IO_QUOTE_MAX]){0}, BFP_IO_QUOTE_MAX)

/* *out = a * b, or return 0 on overflow. */
static inline int bfpio_mul(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* *out = a + b, or return 0 on overflow. */
static inline int bfpio_add(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return 0;
    *out = a + b;
    return 1;
}

static inline uint64_t bfpio_get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline void bfpio_put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Product of a shape; 0 on overflow (*ok cleared). ndim 0 gives 1. */
size_t bfpio_numel(const size_t *shape, size_t ndim, int *ok);

/* A piece of an output file, so big tensors are written without a copy. */
typedef struct {
    const void *data;
    size_t size;
} bfpio_part;

/* bfp_io_write_file_atomic() for a file made of several pieces. */
bfp_status bfpio_write_parts_atomic(const char *path, const bfpio_part *parts,
                                    size_t nparts, int force, char *err,
                                    size_t errlen);

/* Write all of data to fd (retrying short writes); 0, or -1 with errno. */
int bfpio_write_all(int fd, const void *data, size_t size);

/* The directory that holds path ("." for a bare name), malloc'd or NULL. */
char *bfpio_parent_dir(const char *path);

/* An open file being read piecewise (avoids loading whole model files), or
 * a buffer in memory read the same way (the parse entry points, fuzzing). */
typedef struct {
    int fd;              /* -1 for a buffer */
    const uint8_t *mem;  /* the buffer (borrowed), or NULL for a file */
    uint64_t size;
    const char *path;    /* borrowed, for messages */
} bfpio_reader;

bfp_status bfpio_open_read(bfpio_reader *r, const char *path, char *err,
                           size_t errlen);
/* Read from buf[0..len) instead of a file; label names it in messages. */
void bfpio_open_mem(bfpio_reader *r, const void *buf, size_t len,
                    const char *label);
/* Read exactly n bytes at off; a short file is BFP_ERR_DATA. */
/* Bytes per element of a safetensors dtype name ("BF16": 2), 0 if unknown. */
size_t bfpio_st_dtype_size(const char *dtype);
/* The dtype of a float safetensors dtype name (F32, F16, BF16): 1, else 0. */
int bfpio_st_float_dtype(const char *dtype, bfp_dtype *out);

bfp_status bfpio_read_at(bfpio_reader *r, uint64_t off, void *buf, size_t n,
                         char *err, size_t errlen);
void bfpio_close(bfpio_reader *r);

/* "[4096, 14336]" into buf (qtensor.c) */
void bfpio_shape_text(char *buf, size_t cap, const size_t *shape, size_t ndim);

/* Rows, cols and plane sizes of a format and shape, with a clear error
 * naming who (qtensor.c); any failure is BFP_ERR_DATA when fail_as is (a
 * shape read from a file), else BFP_ERR_SHAPE (too many dimensions) or the
 * plane sizes' own status */
bfp_status bfpio_geometry(bfp_format fmt, size_t ndim, const size_t *shape, size_t *rows,
                          size_t *cols, bfp_plane_sizes *sz, bfp_status fail_as,
                          const char *who, char *err, size_t errlen);

/* Check a tensor handed to a writer (dtype, ndim, nbytes vs shape, data;
 * tensor.c). */
bfp_status bfpio_check_tensor(const bfp_tensor *t, const char *path, char *err,
                              size_t errlen);

/* Case-insensitive "does path end with ext". */
int bfpio_has_ext(const char *path, const char *ext);

/* ---- safetensors (safetensors.c), used by the container ---- */

/* One tensor in a safetensors header. */
typedef struct {
    char *name;
    char dtype[16];        /* as spelled in the file; "" if too long */
    size_t elem_size;      /* 0 for dtypes we do not know */
    size_t ndim;           /* may exceed BFP_IO_MAX_DIMS; shape keeps the first */
    size_t shape[BFP_IO_MAX_DIMS];
    size_t numel;
    uint64_t begin, end;   /* relative to the data start, checked in range */
} bfpio_st_entry;

typedef struct {
    bfpio_reader rd;
    uint64_t data_start;   /* 8 + header length */
    bfpio_st_entry *entries;
    size_t count;
    void *metadata;        /* cJSON object of __metadata__ (string values), or NULL */
    void *json;            /* the parsed header (cJSON *), owns metadata */
} bfpio_st_file;

/* Open and validate a safetensors file (header only; data read on demand). */
bfp_status bfpio_st_open(bfpio_st_file *f, const char *path, char *err,
                         size_t errlen);
/* The same for a buffer in memory (label names it in messages). */
bfp_status bfpio_st_open_mem(bfpio_st_file *f, const void *buf, size_t len,
                             const char *label, char *err, size_t errlen);
void bfpio_st_close(bfpio_st_file *f);
/* Index of a tensor by name, or -1. */
long bfpio_st_find(const bfpio_st_file *f, const char *name);
/* A __metadata__ value, or NULL if absent. */
const char *bfpio_st_meta(const bfpio_st_file *f, const char *key);
/* Read the bytes of entry i into buf (entry end - begin bytes). */
bfp_status bfpio_st_read(bfpio_st_file *f, size_t i, void *buf, char *err,
                         size_t errlen);

/* A tensor to write. */
typedef struct {
    const char *name;
    const char *dtype;     /* "F32", "U8", ... */
    size_t elem_size;
    size_t ndim;
    const size_t *shape;
    const void *data;
    size_t nbytes;
} bfpio_st_out;

/* Write a safetensors file: meta_keys/meta_vals (nmeta pairs) become
 * __metadata__; tensors are laid out as the reference implementation does. */
bfp_status bfpio_st_write(const char *path, const bfpio_st_out *tensors,
                          size_t n, const char *const *meta_keys,
                          const char *const *meta_vals, size_t nmeta,
                          int force, char *err, size_t errlen);

#endif /* BFP_IO_INTERNAL_H */

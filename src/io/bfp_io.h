/*
 * bfp_io.h - files: raw binaries, .npy, safetensors, and the quantized
 * container (a safetensors file of U8 planes, docs/container.md).
 *
 * Every function reports failure as a bfp_status plus one human-readable
 * line in err (errlen bytes, may be NULL). Outputs are written to a
 * temporary file in the same directory and renamed into place only when
 * complete; an existing file is never replaced unless force is set.
 */
#ifndef BFP_IO_H
#define BFP_IO_H

#include "bfp.h"

#include <stddef.h>
#include <stdint.h>

#define BFP_IO_MAX_DIMS 8

/* A dense tensor in host memory, row-major, little-endian values. */
typedef struct {
    bfp_dtype dtype;
    size_t ndim;
    size_t shape[BFP_IO_MAX_DIMS];
    void *data;      /* owned: free with bfp_tensor_free() */
    size_t nbytes;
} bfp_tensor;

/** Free the data of *t and zero it. NULL-safe. */
void bfp_tensor_free(bfp_tensor *t);

/** Number of elements (product of the shape; 1 for ndim 0). */
size_t bfp_tensor_numel(const bfp_tensor *t);

/** Rows and cols for quantization: cols = last dim, rows = the rest. */
void bfp_tensor_rows_cols(const bfp_tensor *t, size_t *rows, size_t *cols);

/**
 * A name from a file (a tensor name, a key) made safe and unambiguous for a
 * message: in single quotes, with control characters (C0, DEL, and C1 as
 * UTF-8) and bytes that are not valid UTF-8 as \xNN, ' and \ escaped, cut with "..." to fit len bytes (BFP_IO_QUOTE_MAX holds a long
 * name). Returns buf, or the constant "'?'" when len < 8. Every message of the io layer and the CLI prints
 * names from files through it.
 */
#define BFP_IO_QUOTE_MAX 160
const char *bfp_io_quote_name(const char *name, char *buf, size_t len);

/** Read a whole file into a malloc'd buffer (*data may be NULL for size 0). */
bfp_status bfp_io_read_file(const char *path, void **data, size_t *size,
                            char *err, size_t errlen);

/**
 * Write size bytes to path atomically: a temporary file in the same directory,
 * fsync, rename. Refuses (BFP_ERR_IO, "PATH exists (use --force to overwrite)")
 * when path exists and force is 0. On any failure no temporary file is left
 * and an existing file at path is untouched.
 */
bfp_status bfp_io_write_file_atomic(const char *path, const void *data,
                                    size_t size, int force, char *err,
                                    size_t errlen);

/* One file of a directory written by bfp_io_write_dir_atomic(). */
typedef struct {
    const char *name;  /* a plain name, no '/' */
    const void *data;
    size_t size;
} bfp_io_file;

/**
 * Write n files into directory dir as one set: they are written into a fresh
 * directory next to dir (".bfp-XXXXXX"), which then takes dir's place by
 * rename (an atomic exchange on Linux), and the old set is removed. dir ends
 * up holding exactly these files; on failure it is untouched; concurrent
 * calls leave one call's set whole. A missing or empty dir is taken; a
 * non-empty one only with force, and only if it holds nothing but regular
 * files named in owned[nowned] (the names a previous call may have written;
 * every files[i].name must be one of them): anything else is refused, so a
 * user's directory is never swept away. Parents are not created.
 */
bfp_status bfp_io_write_dir_atomic(const char *dir, const bfp_io_file *files,
                                   size_t n, const char *const *owned,
                                   size_t nowned, int force, char *err,
                                   size_t errlen);

/** Create a directory (and not its parents) if missing. */
bfp_status bfp_io_make_dir(const char *path, char *err, size_t errlen);

/**
 * Load a .npy file (versions 1.0, 2.0, 3.0; C order; little-endian '<f4',
 * '<f2', and bfloat16 as written by ml_dtypes, whose descr is '<V2' or
 * 'bfloat16'). Fortran order, other dtypes, truncated data: BFP_ERR_DATA.
 */
bfp_status bfp_npy_load(const char *path, bfp_tensor *out, char *err,
                        size_t errlen);

/** bfp_npy_load() of a .npy file already in memory (len bytes at buf). */
bfp_status bfp_npy_parse(const void *buf, size_t len, bfp_tensor *out,
                         char *err, size_t errlen);

/** Save a tensor as .npy version 1.0 ('<f4', '<f2'; bf16 as '<u2' raw bits,
 * readable without ml_dtypes: view it as bfloat16 there). */
bfp_status bfp_npy_save(const char *path, const bfp_tensor *t, int force,
                        char *err, size_t errlen);

/**
 * Load one tensor from a safetensors file (F32, F16, BF16). name NULL picks
 * the only floating-point tensor, or fails listing the names if several.
 */
bfp_status bfp_safetensors_load(const char *path, const char *name,
                                bfp_tensor *out, char *err, size_t errlen);

/** bfp_safetensors_load() of a file already in memory. */
bfp_status bfp_safetensors_parse(const void *buf, size_t len, const char *name,
                                 bfp_tensor *out, char *err, size_t errlen);

/** Save one float tensor to a safetensors file under name. */
bfp_status bfp_safetensors_save(const char *path, const char *name,
                                const bfp_tensor *t, int force, char *err,
                                size_t errlen);

/* Several named float tensors (owned: bfp_tensor_set_free()). */
typedef struct {
    size_t count;
    char **names;
    bfp_tensor *tensors;
} bfp_tensor_set;

/** Free every name and tensor of *s and zero it. NULL-safe. */
void bfp_tensor_set_free(bfp_tensor_set *s);

/**
 * Save n float tensors (distinct names) to one safetensors file, laid out as
 * bfp_safetensors_save() lays out one.
 */
bfp_status bfp_safetensors_save_set(const char *path, const char *const *names,
                                    const bfp_tensor *tensors, size_t n,
                                    int force, char *err, size_t errlen);

/**
 * Load every tensor of a safetensors file, in header order. Each must be
 * F32, F16 or BF16 with at most BFP_IO_MAX_DIMS dimensions; anything else is
 * BFP_ERR_DATA naming the tensor.
 */
bfp_status bfp_safetensors_load_set(const char *path, bfp_tensor_set *out,
                                    char *err, size_t errlen);

/** bfp_safetensors_load_set() of a file already in memory. */
bfp_status bfp_safetensors_parse_set(const void *buf, size_t len,
                                     bfp_tensor_set *out, char *err,
                                     size_t errlen);

/** Load a float tensor by extension: .npy, .safetensors, .gguf (name may be
 * NULL). */
bfp_status bfp_tensor_load(const char *path, const char *name, bfp_tensor *out,
                           char *err, size_t errlen);

/* A quantized tensor with its planes (owned). */
typedef struct {
    bfp_format format;
    size_t ndim;
    size_t shape[BFP_IO_MAX_DIMS]; /* original shape; blocks run along the last */
    size_t rows, cols;
    bfp_options options;           /* as used to quantize (recorded in metadata) */
    uint8_t *codes;
    uint8_t *scales;
    uint8_t *meta;                 /* NULL when the format has none */
    float tensor_scale;            /* NVFP4 / NVFP4+; 1 otherwise */
    bfp_plane_sizes sizes;
    /* Optional facts: bfp_qtensor_save() records each one whose has_ flag is
     * set as an extra metadata key, the loaders restore it (docs/container.md).
     * Zero (as bfp_qtensor_alloc() leaves them) means not recorded. */
    int has_axis;                  /* bfp.axis: the source tensor's blocked */
    size_t axis;                   /* axis, < ndim; shape has it moved last */
    int has_stats;                 /* bfp.stats: what quantization observed */
    bfp_stats stats;
    int has_source_dtype;          /* bfp.source_dtype: the quantized input's */
    bfp_dtype source_dtype;        /* dtype (bfp_dtype_name spelling) */
} bfp_qtensor;

/* The bfp_stats fields bfp.stats records, by name and offset (size_t each). */
typedef struct {
    const char *name;
    size_t offset;
} bfp_stats_field;

/** The fields of bfp.stats; *count gets their number. */
const bfp_stats_field *bfp_stats_fields(size_t *count);

/** Free the planes of *q and zero it. NULL-safe. */
void bfp_qtensor_free(bfp_qtensor *q);

/** Allocate zeroed planes for format/shape (fills rows, cols, sizes). */
bfp_status bfp_qtensor_alloc(bfp_qtensor *q, bfp_format fmt, size_t ndim,
                             const size_t *shape, char *err, size_t errlen);

/** Read-only plane view of q for bfp_dequantize(). */
bfp_const_planes bfp_qtensor_planes(const bfp_qtensor *q);

/**
 * Save a quantized tensor as safetensors: U8 tensors "<name>.codes",
 * "<name>.scales", "<name>.meta" (if any), F32 "<name>.tensor_scale" (NVFP4),
 * and __metadata__ keys bfp.format, bfp.shape, bfp.name, bfp.version,
 * bfp.options, bfp.layout, then bfp.axis, bfp.source_dtype and bfp.stats for
 * the optional facts q has (docs/container.md). name NULL means "tensor".
 */
bfp_status bfp_qtensor_save(const char *path, const char *name,
                            const bfp_qtensor *q, int force, char *err,
                            size_t errlen);

/**
 * Load a quantized tensor written by bfp_qtensor_save(). Checks every plane's
 * size against the format and shape before use. name NULL: the only one.
 */
bfp_status bfp_qtensor_load(const char *path, const char *name, bfp_qtensor *q,
                            char *err, size_t errlen);

/** bfp_qtensor_load() of a container already in memory. */
bfp_status bfp_qtensor_parse(const void *buf, size_t len, const char *name,
                             bfp_qtensor *q, char *err, size_t errlen);

/* ---- GGUF (llama.cpp / ggml model files, versions 2 and 3) ---- */

/* One tensor of a GGUF file. */
typedef struct {
    char *name;
    uint32_t ggml_type;            /* ggml's type id: 0 F32, 1 F16, 30 BF16,
                                      39 MXFP4, 40 NVFP4, others listed only */
    size_t ndim;
    size_t shape[BFP_IO_MAX_DIMS]; /* row-major: ggml's ne[] reversed */
    uint64_t offset;               /* of its data, from the start of the file */
    uint64_t nbytes;               /* 0 for types bfp does not read */
} bfp_gguf_tensor;

/* The header of a GGUF file. */
typedef struct {
    uint32_t version;
    uint64_t alignment;            /* general.alignment, default 32 */
    uint64_t kv_count;
    size_t count;
    bfp_gguf_tensor *tensors;      /* owned: bfp_gguf_index_free() */
} bfp_gguf_index;

/**
 * Read and check a GGUF header: every count, string, array (nested ones
 * too), dimension, offset and size against the file. Tensors of the types
 * bfp reads must lie inside the data section, aligned.
 */
bfp_status bfp_gguf_list(const char *path, bfp_gguf_index *idx, char *err,
                         size_t errlen);
void bfp_gguf_index_free(bfp_gguf_index *idx);

/** Load an F32, F16 or BF16 tensor; name NULL picks the only one. */
bfp_status bfp_gguf_load(const char *path, const char *name, bfp_tensor *out,
                         char *err, size_t errlen);

/**
 * Load a ggml MXFP4 (block_mxfp4) or NVFP4 (block_nvfp4) tensor as planar
 * planes (bfp_ggml_to_planar). NVFP4's tensor scale is 1: ggml keeps none
 * in the block. name NULL picks the only such tensor.
 */
bfp_status bfp_gguf_load_qtensor(const char *path, const char *name,
                                 bfp_qtensor *q, char *err, size_t errlen);

/** The same three for a GGUF file already in memory. */
bfp_status bfp_gguf_list_mem(const void *buf, size_t len, bfp_gguf_index *idx,
                             char *err, size_t errlen);
bfp_status bfp_gguf_parse(const void *buf, size_t len, const char *name,
                          bfp_tensor *out, char *err, size_t errlen);
bfp_status bfp_gguf_parse_qtensor(const void *buf, size_t len, const char *name,
                                  bfp_qtensor *q, char *err, size_t errlen);

#endif /* BFP_IO_H */

/*
 * ckpt_internal.h - the plan of a checkpoint conversion, shared by
 * ckpt_plan.c (what to do), ckpt_decide.c (each tensor quantized or
 * copied), ckpt_gguf_in.c (a GGUF input), ckpt_run.c and ckpt_tensor.c
 * (doing it), ckpt_manifest.c (resuming), ckpt_layout.c and ckpt_ct.c (the layouts'
 * names, headers and metadata).
 */
#ifndef BFP_CKPT_INTERNAL_H
#define BFP_CKPT_INTERNAL_H

#include "bfp_ckpt.h"
#include "io_internal.h"

#include <regex.h>
#include <string.h>

/* What an output tensor holds. */
typedef enum {
    CK_COPY = 0,   /* the input tensor's bytes */
    CK_CODES,      /* planar codes (also compressed-tensors' weight_packed) */
    CK_SCALES,     /* planar scales (weight_scale) */
    CK_META,
    CK_TSCALE,     /* the float32 tensor scale (weight_global_scale) */
    CK_GGML,       /* ggml blocks (bfp_planar_to_ggml) */
    CK_SCALES_BF16,/* E8M0 scales as bfloat16 2^(e-127-shift): MXINT's k/2^shift */
    CK_CODES_INT4, /* MXINT4 codes + 8 per nibble (pack-quantized's offset) */
    CK_SHAPE       /* I64 [rows, cols] (pack-quantized's weight_shape) */
} ck_role;

/* One input tensor. */
typedef struct {
    char *name;
    size_t shard;          /* index into ck_plan.shard_paths */
    uint64_t off, nbytes;  /* in the input file */
    char dtype[16];        /* safetensors spelling ("BF16", "I64", ...) */
    size_t ndim;
    size_t shape[BFP_IO_MAX_DIMS];
    int quant;             /* quantized (else copied) */
    bfp_dtype fdtype;      /* for quantized ones */
    int has_ggml;          /* from a GGUF input: ggml_type is its type */
    uint32_t ggml_type;
    size_t rows, cols;
} ck_in;

/* One output tensor: a role of one input tensor. */
typedef struct {
    char *name;
    const char *dtype;     /* safetensors dtype */
    uint32_t ggml_type;    /* GGUF layout */
    size_t ndim;
    size_t shape[BFP_IO_MAX_DIMS];
    uint64_t nbytes, off;  /* off: from the start of the file's data */
    size_t src;            /* ck_in index */
    ck_role role;
} ck_out;

/* One output file. */
typedef struct {
    char *in_path;         /* the input shard it comes from (safetensors) */
    char *name;            /* file name inside OUT (or OUT itself: GGUF) */
    size_t first, count;   /* its input tensors: ins[first .. first+count) */
    ck_out *outs;
    size_t nouts;
    uint8_t *header;       /* everything before the data */
    size_t header_len;
    uint64_t size;         /* whole file */
    void *in_meta;         /* the input shard's __metadata__ (cJSON *), or NULL */
} ck_file;

typedef struct {
    bfp_ckpt_opts o;
    char *in_dir;          /* directory of the input (extra files, config.json) */
    int in_is_dir;
    char *out;             /* OUT */
    ck_in *ins;
    size_t nins;
    char **shard_paths;    /* the input shards; ck_in.shard indexes them */
    size_t nshards;
    ck_file *files;
    size_t nfiles;
    char **extras;         /* other files of an input directory, copied */
    size_t nextras;
    int has_index;         /* write model.safetensors.index.json */
    char *arch;            /* config.json's model_type, for GGUF */
    int gguf_in;           /* IN is a GGUF file */
    uint8_t *gguf_kv;      /* its key-values to carry over, raw */
    size_t gguf_kv_len, gguf_nkv;
    int gguf_has_arch;     /* ... and they include general.architecture */
} ck_plan;

bfp_status ck_plan_make(ck_plan *p, const char *in, const char *out,
                        const bfp_ckpt_opts *o, char *err, size_t errlen);
void ck_plan_free(ck_plan *p);

/* the plan's --include / --exclude, compiled */
typedef struct {
    regex_t inc, exc;
    int has_inc, has_exc;
} ck_filters;

/* does s end with suf (case-sensitive: tensor and file names) */
static inline int ck_ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Quantize or copy t, found in file (ckpt_decide.c). */
bfp_status ck_decide(ck_plan *p, ck_in *t, const ck_filters *flt, const char *file, char *err,
                     size_t errlen);

/* Add a GGUF input's tensors and key-values to p (ckpt_gguf_in.c). */
bfp_status ck_add_gguf(ck_plan *p, const char *path, const ck_filters *flt, char *err,
                       size_t errlen);


/* Lay out f's outs and make its safetensors header (8-byte length and the
 * padded JSON): the input's __metadata__, plus bfp's keys in the bfp layout. */
bfp_status ck_st_header(const ck_plan *p, ck_file *f, char *err, size_t errlen);

/* GGUF header for the one output file; kv pairs describe the conversion. */
bfp_status ck_gguf_header(ck_plan *p, ck_file *f, char *err, size_t errlen);

/* compressed-tensors: the quantization_config object (cJSON *) for the
 * plan, and config.json's text with it merged in (malloc'd). */
char *ck_ct_config_json(const ck_plan *p, char *err, size_t errlen);

/* compressed-tensors' name of a format ("mxfp4-pack-quantized") and its
 * num_bits, or NULL when it has none. */
const char *ck_ct_format(bfp_format fmt, int *num_bits);

/* MXINT8 / MXINT4 in compressed-tensors' int layouts: the E8M0 code e as
 * the bfloat16 bits of 2^(e - 127 - shift) (shift 6 for INT8's k/64, 2 for
 * INT4's k/4; NaN for 0xFF), and back (-1 when the bits are no such value). */
uint16_t ck_e8m0_to_bf16_scale(uint8_t e, int shift);
int ck_bf16_scale_to_e8m0(uint16_t b, int shift);

/* Index file text (model.safetensors.index.json), malloc'd. */
char *ck_index_json(const ck_plan *p);

/* The manifest of finished files (ckpt_manifest.c). */
typedef struct {
    char *settings;   /* what a resumed run must share with the first */
    char *path;       /* OUT/.bfp-convert.json (NULL: GGUF, none) */
    char *part_path;  /* this rank's part under mpirun, else NULL */
    struct cJSON *done;   /* name -> "size:hash", this run's view */
    struct cJSON *claims; /* array of the parts' "done" objects */
} ck_manifest;

/* Read the manifest and the parts of OUT. check (rank 0 or a single
 * process): create OUT, or refuse one that is not a run of these settings. */
bfp_status ck_manifest_open(const ck_plan *p, int dir_out, int check, int rank,
                            int nranks, ck_manifest *mf, char *err, size_t errlen);
/* 1 if the manifest or a part vouches for final's current size and hash. */
int ck_manifest_has(ck_manifest *mf, const char *name, const char *final);
/* Hash final and record it as done. */
bfp_status ck_manifest_record(ck_manifest *mf, const char *name, const char *final,
                              char *err, size_t errlen);
/* Write the manifest (single process) or this rank's part: the files with
 * owned[k] set (owned NULL: all the recorded ones). */
bfp_status ck_manifest_save(const ck_plan *p, ck_manifest *mf,
                            const unsigned char *owned, char *err, size_t errlen);
/* Rank 0, all ranks done: the manifest from each file's owner's part
 * (owner[k] for files[k]), then the parts removed. */
bfp_status ck_manifest_merge(const ck_plan *p, ck_manifest *mf, const int *owner,
                             int nranks, char *err, size_t errlen);
void ck_manifest_drop_parts(const char *out);
void ck_manifest_free(ck_manifest *mf);

/* ---- one tensor at a time (ckpt_tensor.c) ---- */

/* The input shard mapped in memory. */
typedef struct {
    size_t shard;
    const uint8_t *map;
    size_t len;
} ck_map;
bfp_status ck_map_shard(const ck_plan *p, size_t shard, ck_map *m, char *err,
                        size_t errlen);
void ck_unmap(ck_map *m);
/* Done with a tensor's input pages: out of this process's resident set
 * (the page cache keeps them), so memory follows the tensor, not the shard. */
void ck_drop_pages(const ck_map *m, uint64_t off, uint64_t n);

/* Growing work buffers, sized by the largest tensor. */
typedef struct {
    uint8_t *codes, *scales, *meta, *ggml;
    uint16_t *bf16_scales;
    uint8_t *int4_codes;
    int64_t shape[2];
    float tscale;
    float *x, *y; /* --report */
    size_t cap[8];
    bfp_cuda_stage *stage; /* --device cuda, else NULL */
} ck_bufs;
/* Empty buffers, and the GPU stage for --device cuda (or why there is none). */
bfp_status ck_bufs_init(ck_bufs *b, const bfp_ckpt_opts *o, char *err, size_t errlen);
void ck_bufs_free(ck_bufs *b);
/* Quantize input tensor i (its bytes at src) into b; rt gets its NaN blocks
 * and, with --report, its SQNR. */
bfp_status ck_quantize(const ck_plan *p, size_t i, const void *src, ck_bufs *b,
                       bfp_ckpt_tensor *rt, char *err, size_t errlen);
/* The bytes output tensor o takes: a plane in b, or the input's (src). */
const void *ck_out_data(const ck_bufs *b, const ck_out *o, const void *src);

#endif /* BFP_CKPT_INTERNAL_H */

/*
 * bfp_ckpt.h - whole checkpoints: `bfp convert` (docs/cli.md, "convert").
 *
 * A checkpoint is a list of input shards (safetensors files, or one GGUF);
 * each input shard gives one output shard, written under a temporary name
 * and renamed. The plan (which tensor goes where, quantized or copied) is
 * made up front from the headers alone, so the ranks of an mpirun job can
 * share the work (bfp_ckpt_ranks) and an interrupted run can keep the
 * shards a manifest vouches for.
 */
#ifndef BFP_CKPT_H
#define BFP_CKPT_H

#include "bfp_io.h"

#include <stdint.h>

typedef enum {
    BFP_CKPT_LAYOUT_BFP = 0, /* planar planes per tensor (docs/container.md) */
    BFP_CKPT_LAYOUT_CT = 1,  /* compressed-tensors (vLLM, llm-compressor) */
    BFP_CKPT_LAYOUT_GGUF = 2 /* one GGUF file, ggml blocks (llama.cpp) */
} bfp_ckpt_layout;

/* Progress, reported after every tensor. */
typedef struct {
    size_t tensors_done, tensors_total;
    uint64_t bytes_done, bytes_total; /* input bytes */
    double seconds;                   /* since the start */
} bfp_ckpt_progress;

/*
 * One process (rank) of several converting one checkpoint together (the CLI
 * under mpirun: tools/bfp/ckpt_mpi.c). Every rank calls bfp_ckpt_convert()
 * with the same arguments; the library itself knows nothing of MPI.
 */
typedef struct {
    int rank, nranks;
    /* Collective: every rank passes ok (1) or 0 and its message; returns 1
     * when all were ok, else 0 with the lowest failing rank's message, as
     * "rank R: MESSAGE", in err on every rank. Also a barrier. */
    int (*agree)(void *ctx, int ok, char *err, size_t errlen);
    /* Collective: v[0..n) summed element-wise over the ranks, in place. */
    int (*sum)(void *ctx, double *v, size_t n);
    void *ctx;
} bfp_ckpt_ranks;

typedef struct {
    bfp_format format;
    bfp_ckpt_layout layout;
    const char *include_re;  /* POSIX extended regex, or NULL */
    const char *exclude_re;
    bfp_options opts;
    int force;               /* replace an OUT that is not a resumable run */
    int report;              /* compute each quantized tensor's SQNR */
    void (*progress)(void *ctx, const bfp_ckpt_progress *p);
    void *progress_ctx;
    const bfp_ckpt_ranks *ranks; /* NULL: a single process */
    int device_cuda;         /* quantize with the GPU kernels on the current
                                device (bfp_cuda_quantize_host): the same bytes */
} bfp_ckpt_opts;

/* One input tensor in the summary. */
typedef struct {
    char *name;
    int quantized;
    char dtype[16];
    size_t ndim;
    size_t shape[BFP_IO_MAX_DIMS];
    double sqnr_db;          /* NaN unless report and quantized */
    size_t nonfinite_blocks;
} bfp_ckpt_tensor;

typedef struct {
    size_t shards, shards_kept;  /* kept: finished by an earlier run */
    size_t tensors, quantized;
    uint64_t in_bytes, out_bytes;
    double seconds;
    bfp_ckpt_tensor *t;          /* tensors entries, input order */
} bfp_ckpt_summary;

void bfp_ckpt_summary_free(bfp_ckpt_summary *s);

/**
 * Convert the checkpoint at in (a .safetensors file, a directory with
 * model.safetensors.index.json or one model.safetensors, or a .gguf) into
 * out (a directory; a .gguf file for the gguf layout).
 */
bfp_status bfp_ckpt_convert(const char *in, const char *out,
                            const bfp_ckpt_opts *o, bfp_ckpt_summary *s,
                            char *err, size_t errlen);

/** The layout's name ("bfp", "compressed-tensors", "gguf"), and back. */
const char *bfp_ckpt_layout_name(bfp_ckpt_layout l);
int bfp_ckpt_layout_from_name(const char *s, bfp_ckpt_layout *out);

/** 1 if the layout can store fmt; else 0 and why (a sentence) in *why. */
int bfp_ckpt_layout_supports(bfp_ckpt_layout l, bfp_format fmt,
                             const char **why);

/**
 * Read one quantized tensor of a compressed-tensors checkpoint (a shard
 * file, or a directory with its config.json): MODULE.weight_packed,
 * .weight_scale and .weight_global_scale as planar planes. The format comes
 * from config.json's quantization_config when there is one, else from the
 * dtypes (U8 scales: mxfp4, F8_E4M3 scales: nvfp4). name is the module
 * ("model.layers.0.mlp.up_proj"), or NULL for the only one.
 */
bfp_status bfp_ct_load_qtensor(const char *path, const char *name,
                               bfp_qtensor *q, char *err, size_t errlen);

/** 1 if path is a directory, a shard of the bfp layout (planar-ckpt-v1), or
 * a safetensors file with compressed-tensors modules (MODULE.weight_scale)
 * and no bfp container metadata. bfp_ct_load_qtensor() reads the bfp
 * layout's tensors too (name: the tensor, "NAME.weight"). */
int bfp_ct_is_checkpoint(const char *path);

/** 1 if path holds quantized tensors: what bfp_ct_is_checkpoint() accepts,
 * or a container of `bfp quantize` (bfp.format metadata, bfp_qtensor_load). */
int bfp_ckpt_is_quantized(const char *path);

/**
 * Load float tensor name of path: a file as bfp_tensor_load() does, or a
 * checkpoint directory, through its model.safetensors.index.json (else its
 * model.safetensors).
 */
bfp_status bfp_ckpt_tensor_load(const char *path, const char *name, bfp_tensor *t,
                                char *err, size_t errlen);

#endif /* BFP_CKPT_H */

/*
 * bfp.h - block floating-point formats: MX (OCP), MX+ / MX++, NVFP4, HiF4.
 *
 * The one public header of libbfp. Plain C11, no dependency beyond libc/libm.
 * Every function is thread-safe and reports bad input through a bfp_status
 * code; nothing aborts. The only global state is two process-wide settings,
 * bfp_set_isa() and bfp_set_threads(); the library reads no environment.
 *
 * Layout of a quantized tensor (docs/formats.md has the details): a tensor of
 * rows x cols values is cut into blocks along cols. It is stored as planes:
 *   codes         element codes, an LSB-first bit stream per row; each row
 *                 starts on a byte boundary and holds exactly cols codes
 *                 (a partial last block stores only its real elements);
 *   scales        one entry per block (1 byte, or a 32-bit LE word for HiF4);
 *   meta          one byte per block (MX+/MX++ BM index and delta, NVFP4+);
 *   tensor_scale  one float32 (NVFP4, NVFP4+), the encode scale s_enc.
 */
#ifndef BFP_H
#define BFP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BFP_VERSION_MAJOR 0
#define BFP_VERSION_MINOR 1
#define BFP_VERSION_PATCH 0

/* Status codes. Values are stable: they appear in files and exit paths. */
typedef enum {
    BFP_OK = 0,
    BFP_ERR_ARG = 1,         /* NULL pointer or invalid argument */
    BFP_ERR_FORMAT = 2,      /* unknown format id or name */
    BFP_ERR_SHAPE = 3,       /* zero or overflowing shape */
    BFP_ERR_UNSUPPORTED = 4, /* option not defined for this format */
    BFP_ERR_NOMEM = 5,       /* allocation failed */
    BFP_ERR_IO = 6,          /* file could not be read or written */
    BFP_ERR_DATA = 7,        /* malformed file or impossible plane bytes */
    BFP_ERR_DEVICE = 8       /* GPU error (CUDA builds only) */
} bfp_status;

/** Return a short English description of a status code (never NULL). */
const char *bfp_status_str(bfp_status status);

/* Format ids. Stable values, never renumbered (they are stored in files). */
typedef enum {
    BFP_MXFP4 = 1,
    BFP_MXFP6_E2M3 = 2,
    BFP_MXFP6_E3M2 = 3,
    BFP_MXFP8_E4M3 = 4,
    BFP_MXFP8_E5M2 = 5,
    BFP_MXINT8 = 6,
    BFP_MXINT4 = 7,
    BFP_NVFP4 = 8,
    BFP_HIF4 = 9,
    BFP_MXFP4_PLUS = 10,
    BFP_MXFP6_E2M3_PLUS = 11,
    BFP_MXFP6_E3M2_PLUS = 12,
    BFP_MXFP8_E4M3_PLUS = 13,
    BFP_MXFP8_E5M2_PLUS = 14,
    BFP_MXINT8_PLUS = 15,
    BFP_MXINT4_PLUS = 16,
    BFP_MXFP4_PP = 17,
    BFP_MXFP6_E2M3_PP = 18,
    BFP_MXFP6_E3M2_PP = 19,
    BFP_MXFP8_E4M3_PP = 20,
    BFP_MXFP8_E5M2_PP = 21,
    BFP_NVFP4_PLUS = 22
} bfp_format;

/* Element types (SPEC section 1). */
typedef enum {
    BFP_ELEM_E2M1 = 1,
    BFP_ELEM_E1M2 = 2, /* HiF4 "S1P2" */
    BFP_ELEM_E2M3 = 3,
    BFP_ELEM_E3M2 = 4,
    BFP_ELEM_E4M3 = 5,
    BFP_ELEM_E5M2 = 6,
    BFP_ELEM_INT8 = 7,
    BFP_ELEM_INT4 = 8
} bfp_elem_type;

/* Scale types (SPEC section 1). */
typedef enum {
    BFP_SCALE_E8M0 = 1,
    BFP_SCALE_UE4M3 = 2,
    BFP_SCALE_HIF4 = 3 /* UE6M2 + 8 E1_8 bits + 16 E1_16 bits, one LE word */
} bfp_scale_type;

/* Format families: how the blocks are built. */
typedef enum {
    BFP_FAMILY_MX = 1,
    BFP_FAMILY_MX_PLUS = 2,
    BFP_FAMILY_MX_PP = 3,
    BFP_FAMILY_NVFP4 = 4,
    BFP_FAMILY_NVFP4_PLUS = 5,
    BFP_FAMILY_HIF4 = 6
} bfp_family;

/* Input and output value types. */
typedef enum {
    BFP_DTYPE_F32 = 1,
    BFP_DTYPE_BF16 = 2,
    BFP_DTYPE_F16 = 3
} bfp_dtype;

/* Element rounding. DEFAULT is the format's own rule: RNE, except HiF4,
 * whose elements round half away from zero. */
typedef enum {
    BFP_ROUND_DEFAULT = 0,
    BFP_ROUND_NEAREST_EVEN = 1,
    BFP_ROUND_NEAREST_AWAY = 2,
    BFP_ROUND_TOWARD_ZERO = 3,
    BFP_ROUND_STOCHASTIC = 4  /* reproducible: bits from (seed, element index) */
} bfp_rounding;

/* Options a format may accept: the bits of bfp_format_info.options. */
typedef enum {
    BFP_OPT_NONE = 0,            /* no option (bfp_options_check: nothing at fault) */
    BFP_OPT_ROUNDING = 1,        /* rounding modes other than the default */
    BFP_OPT_SCALE_MODE = 2,      /* any scale mode but DEFAULT (MX only) */
    BFP_OPT_NO_TENSOR_SCALE = 4, /* bfp_options.nvfp4_no_tensor_scale */
    BFP_OPT_2D = 8               /* bfp_options.nvfp4_2d (NVFP4, not NVFP4+) */
} bfp_option;

/* One row of the format table. */
typedef struct {
    bfp_format id;
    const char *name;          /* lower-case, as the CLI spells it */
    bfp_family family;
    int block;                 /* elements per block (32, 16 or 64) */
    int elem_bits;             /* bits per element code (4, 6 or 8) */
    bfp_elem_type elem;
    bfp_scale_type scale;
    int scale_bytes;           /* bytes per block in the scales plane */
    int meta_bytes;            /* bytes per block in the meta plane (0 or 1) */
    int has_tensor_scale;      /* 1 for NVFP4 and NVFP4+ */
    double bits_per_value;     /* (block*elem_bits + scale and meta bits) / block */
    double max_value;          /* largest finite magnitude the format stores */
    const char *description;
    bfp_rounding default_rounding; /* what BFP_ROUND_DEFAULT means for it */
    unsigned options;          /* the bfp_option bits it accepts */
    int matmul;                /* 1 if bfp_matmul_* and the GPU matmul take it */
    int cuda;                  /* 1 if bfp_cuda_quantize / _dequantize have
                                  kernels for it (else BFP_ERR_UNSUPPORTED) */
} bfp_format_info;

/** Number of formats in the table. */
int bfp_format_count(void);

/** The i-th row of the table (0 <= i < bfp_format_count()), or NULL. */
const bfp_format_info *bfp_format_at(int i);

/** The row for a format id, or NULL if the id is unknown. */
const bfp_format_info *bfp_format_get(bfp_format id);

/**
 * Look a format up by name, case-insensitively ("MXFP4+", "nvfp4", ...).
 * @return BFP_OK and *out set, or BFP_ERR_FORMAT (also for NULL name).
 */
bfp_status bfp_format_from_name(const char *name, bfp_format *out);

/** 1 if the format accepts the option (see bfp_option), 0 if not or if the
 * id is unknown. */
int bfp_format_accepts(bfp_format fmt, bfp_option opt);

/** Name of a family ("mx", "mx+", "mx++", "nvfp4", "nvfp4+", "hif4"), or "?". */
const char *bfp_family_name(bfp_family family);

/** Name of an element / scale / dtype enum value ("e2m1", "ue4m3", "bf16"). */
const char *bfp_elem_name(bfp_elem_type t);
const char *bfp_scale_name(bfp_scale_type t);
const char *bfp_dtype_name(bfp_dtype t);

/** Bytes per value of a dtype (4 or 2), or 0 if unknown. */
size_t bfp_dtype_size(bfp_dtype t);

/* Byte sizes of the planes for a rows x cols tensor. */
typedef struct {
    size_t blocks_per_row;
    size_t code_row_bytes;     /* bytes of one row in the codes plane */
    size_t codes;              /* rows * code_row_bytes */
    size_t scales;             /* rows * blocks_per_row * scale_bytes */
    size_t meta;               /* rows * blocks_per_row * meta_bytes */
    size_t tensor_scale;       /* 4 or 0 */
} bfp_plane_sizes;

/**
 * Compute plane sizes for a rows x cols tensor.
 * @return BFP_OK, BFP_ERR_FORMAT, or BFP_ERR_SHAPE (zero dimension or size
 *         overflow).
 */
bfp_status bfp_plane_sizes_for(bfp_format fmt, size_t rows, size_t cols,
                               bfp_plane_sizes *out);

/* MX shared-exponent rule. Only the MX family has a choice: every other
 * family (MX+, MX++, NVFP4, NVFP4+, HiF4) has one scale rule and takes only
 * DEFAULT. DEFAULT is FLOOR for MX. */
typedef enum {
    BFP_SCALE_DEFAULT = 0, /* the format's own rule */
    BFP_SCALE_CEIL = 1,    /* ceil(log2 amax) - emax */
    BFP_SCALE_EVEN = 2,    /* amax rounded half-up to the element's mantissa first */
    BFP_SCALE_RCEIL = 3,   /* ceil(log2(amax / max_elem)) */
    BFP_SCALE_FLOOR = 4    /* floor(log2 amax) - emax (OCP), asked for by name */
} bfp_scale_mode;

/* Quantization options. A zeroed struct means the defaults. */
typedef struct {
    bfp_rounding rounding;
    uint64_t seed;             /* for BFP_ROUND_STOCHASTIC */
    bfp_scale_mode scale_mode;
    int nvfp4_no_tensor_scale; /* NVFP4(+): s_enc = 1 */
    int nvfp4_2d;              /* NVFP4 only (NVFP4+ has no 2-D variant):
                                  16x16 tiles share a block scale */
    int threads;               /* CPU threads for large tensors: 0 = automatic,
                                  1 = the calling thread only; results are
                                  identical for any count */
} bfp_options;

/** Fill *o with the defaults (same as zeroing it). */
void bfp_options_init(bfp_options *o);

/**
 * Check options against a format: the check every quantize entry point
 * (reference, CPU, GPU) makes first, and the one place the rules live.
 * A field left at its default is always accepted.
 * @param opts  options, or NULL for defaults
 * @param bad   optional: the first field at fault, BFP_OPT_NONE if none
 * @param why   optional: a static clause to follow the option's name
 *              ("applies only to the MX formats"), "" if none
 * @return BFP_OK; BFP_ERR_FORMAT (unknown format); BFP_ERR_ARG (a value
 *         out of range); BFP_ERR_UNSUPPORTED (a value the format does not
 *         take: a scale mode outside MX, the tensor-scale option outside
 *         NVFP4 / NVFP4+, 2-D outside NVFP4)
 */
bfp_status bfp_options_check(bfp_format fmt, const bfp_options *opts, bfp_option *bad,
                             const char **why);

/* The planes of a quantized tensor. Unused planes may be NULL. */
typedef struct {
    uint8_t *codes;
    uint8_t *scales;
    uint8_t *meta;
    float *tensor_scale;
} bfp_planes;

/* Read-only view of the planes, for decoders. */
typedef struct {
    const uint8_t *codes;
    const uint8_t *scales;
    const uint8_t *meta;
    const float *tensor_scale;
} bfp_const_planes;

/* What quantization observed. */
typedef struct {
    size_t blocks;             /* scale entries written */
    size_t nonfinite_blocks;   /* blocks that held NaN or +-Inf (NaN scale) */
    size_t flushed_blocks;     /* MX+/MX++ blocks flushed to zero */
} bfp_stats;

/**
 * Quantize a rows x cols row-major tensor: the fastest kernels this CPU has
 * (bfp_isa()), split over threads for large tensors, bit for bit the planes
 * of the reference bfp_quantize_ref().
 * @param fmt   format id
 * @param dtype type of src (F32, BF16 or F16), little-endian host values
 * @param src   rows*cols values, any alignment
 * @param opts  options, or NULL for defaults
 * @param out   destination planes sized by bfp_plane_sizes_for(); the planes
 *              the format does not use are ignored
 * @param stats optional, filled on success
 * @return BFP_OK, or an error with the output planes unspecified
 */
bfp_status bfp_quantize(bfp_format fmt, bfp_dtype dtype, const void *src,
                        size_t rows, size_t cols, const bfp_options *opts,
                        const bfp_planes *out, bfp_stats *stats);

/**
 * The reference (golden model) quantizer: scalar, single-threaded, the spec
 * in code. bfp_quantize() gives the same planes, bit for bit, through the
 * fastest kernels this CPU has.
 */
bfp_status bfp_quantize_ref(bfp_format fmt, bfp_dtype dtype, const void *src,
                            size_t rows, size_t cols, const bfp_options *opts,
                            const bfp_planes *out, bfp_stats *stats);

/** The reference decoder; bfp_dequantize() gives the same values. */
bfp_status bfp_dequantize_ref(bfp_format fmt, const bfp_const_planes *in,
                              size_t rows, size_t cols, bfp_dtype dtype,
                              void *dst);

/**
 * Name of the CPU kernel set in use: "generic", "avx2" or "avx512": the best
 * the CPU has, unless bfp_set_isa() asked for less.
 */
const char *bfp_isa(void);

/**
 * Choose the CPU kernel set of bfp_quantize() / bfp_dequantize(): "generic",
 * "avx2", "avx512", or "auto" (or NULL) for the best the CPU has. A set the
 * CPU or this build lacks falls back to the best one below it (bfp_isa()
 * tells which). Results are identical for every set. The library reads no
 * environment: the CLI and the Python module pass BFP_ISA here.
 * A process-wide setting: call it before other threads use the library.
 * @return BFP_OK, or BFP_ERR_ARG for any other name (nothing changes)
 */
bfp_status bfp_set_isa(const char *name);

/**
 * Cap the automatic thread count of large calls (bfp_options.threads == 0,
 * bfp_dequantize, the matmul prepack) at n; 0 restores the default, the
 * online CPUs (at most 64). Results are identical for any count. The CLI and
 * the Python module pass BFP_THREADS here. Process-wide, like bfp_set_isa().
 * @return BFP_OK, or BFP_ERR_ARG for n < 0 (nothing changes)
 */
bfp_status bfp_set_threads(int n);

/** bfp_quantize() for float32 input. */
bfp_status bfp_quantize_f32(bfp_format fmt, const float *src, size_t rows,
                            size_t cols, const bfp_options *opts,
                            const bfp_planes *out, bfp_stats *stats);

/** bfp_quantize() for bfloat16 input (raw uint16 bit patterns). */
bfp_status bfp_quantize_bf16(bfp_format fmt, const uint16_t *src, size_t rows,
                             size_t cols, const bfp_options *opts,
                             const bfp_planes *out, bfp_stats *stats);

/** bfp_quantize() for float16 input (raw uint16 bit patterns). */
bfp_status bfp_quantize_f16(bfp_format fmt, const uint16_t *src, size_t rows,
                            size_t cols, const bfp_options *opts,
                            const bfp_planes *out, bfp_stats *stats);

/**
 * Reconstruct values from planes: the fastest kernels this CPU has, the
 * values of the reference decoder bfp_dequantize_ref(). Any plane bytes are
 * accepted: NaN scale codes and impossible bytes decode to NaN, never to
 * garbage. Blocks flagged non-finite decode to NaN.
 * @param dtype F32 or BF16 (F16 also accepted; values round to nearest even)
 * @param dst   rows*cols values of dtype
 * @return BFP_OK or an error
 */
bfp_status bfp_dequantize(bfp_format fmt, const bfp_const_planes *in,
                          size_t rows, size_t cols, bfp_dtype dtype, void *dst);

/** bfp_dequantize() to float32. */
bfp_status bfp_dequantize_to_f32(bfp_format fmt, const bfp_const_planes *in,
                                 size_t rows, size_t cols, float *dst);

/** bfp_dequantize() to bfloat16 (raw uint16 bit patterns). */
bfp_status bfp_dequantize_to_bf16(bfp_format fmt, const bfp_const_planes *in,
                                  size_t rows, size_t cols, uint16_t *dst);

/**
 * Check plane bytes for values the format can never produce (for planes
 * from outside: files, other kernels).
 * @param bad_blocks set to the number of blocks with impossible bytes
 * @param first_bad  optional: index (row * blocks_per_row + block) of the
 *                   first one, or SIZE_MAX when none
 * @return BFP_OK when every block is possible, BFP_ERR_DATA otherwise
 */
bfp_status bfp_validate(bfp_format fmt, const bfp_const_planes *in,
                        size_t rows, size_t cols, size_t *bad_blocks,
                        size_t *first_bad);

/* Error statistics of a reconstruction against its source (float64 sums).
 * Every value is either compared or counted in one skipped_* field:
 * count + skipped_input + skipped_output = n. With nothing compared, every
 * error measure is NaN (never 0 or inf, which would read as exact). */
typedef struct {
    size_t count;              /* values compared (x and y both finite) */
    size_t nonzero;            /* of those, with a nonzero reference */
    double max_rel_err;        /* over nonzero reference values; NaN if none */
    double mean_rel_err;       /* NaN if none */
    double rmse;               /* NaN if count is 0 */
    double sqnr_db;            /* 10 log10(sum x^2 / sum (x - y)^2); inf if
                                  exact; NaN if count is 0 */
    double max_abs_err;        /* NaN if count is 0 */
    size_t skipped_input;      /* not compared: x is NaN or +-Inf */
    size_t skipped_output;     /* not compared: x finite but y not, because
                                  its block decodes to NaN (the block held a
                                  NaN or Inf, or its bytes are impossible) */
    size_t saturated;          /* of the compared values, those beyond the
                                  largest magnitude their position could
                                  hold, so the quantizer clipped them; only
                                  bfp_error_stats_quantized() counts them
                                  (docs/formats.md, "Saturation") */
} bfp_error_stats;

/**
 * Compare a reconstruction y with the reference x (float32, n values).
 * Pairs where x or y is not finite are not compared but counted
 * (skipped_input, skipped_output); saturated is 0 (it needs the planes).
 */
void bfp_error_stats_f32(const float *x, const float *y, size_t n,
                         bfp_error_stats *out);

/**
 * bfp_error_stats_f32() of a quantized tensor, plus the saturated count:
 * compared values with |x| greater than what the largest element code
 * decodes to at their position (under the block's scale, the tensor scale,
 * the MX+ block-max codec, the MX++ exponent, the HiF4 flags). Blocks that
 * are flushed, zero-scaled or decode to NaN saturate nothing.
 * @param q  the planes x was quantized into (rows x cols of format fmt)
 * @param x  the reference values, float32
 * @param y  the reconstruction of q as float32 (bfp_dequantize_to_f32)
 * @return BFP_OK; BFP_ERR_FORMAT, BFP_ERR_SHAPE, BFP_ERR_ARG (NULL
 *         pointers or planes), BFP_ERR_NOMEM, with *out untouched
 */
bfp_status bfp_error_stats_quantized(bfp_format fmt, const bfp_const_planes *q, size_t rows,
                                     size_t cols, const float *x, const float *y,
                                     bfp_error_stats *out);

/**
 * HiF4 golden files (SPEC section 4) from a HiF4 scales plane of nblocks
 * 32-bit words: ea gets nblocks UE6M2 bytes; eb nblocks bytes (E1_8 bits,
 * LSB-first, block b's bit k at bit 8*b + k); ec 2*nblocks bytes (E1_16 bits,
 * bit 16*b + j); scale_bf16 16*nblocks per-4 factors REC*2^-E1_8*2^-E1_16
 * as bfloat16 (NaN for a NaN block). Any output may be NULL.
 */
bfp_status bfp_hif4_split_scales(const uint8_t *scales, size_t nblocks,
                                 uint8_t *ea, uint8_t *eb, uint8_t *ec,
                                 uint16_t *scale_bf16);

/** Library version as "MAJOR.MINOR.PATCH". */
const char *bfp_version(void);

/* ---- Tensor-core scale layout ------------------------------------------ */

/**
 * Bytes of the 128x4 swizzled scale layout used by cuBLASLt / CUTLASS /
 * FlashInfer block-scaled GEMMs for a rows x blocks_per_row scale matrix of
 * one byte per block: rows padded to 128, columns to 4 (padding is zero).
 * @return 0 on overflow
 */
size_t bfp_swizzled_scales_size(size_t rows, size_t blocks_per_row);

/** Convert a planar scales plane (1 byte per block) to the 128x4 layout. */
bfp_status bfp_scales_to_swizzled(const uint8_t *scales, size_t rows,
                                  size_t blocks_per_row, uint8_t *out);

/** Convert the 128x4 layout back to a planar scales plane. */
bfp_status bfp_scales_from_swizzled(const uint8_t *swizzled, size_t rows,
                                    size_t blocks_per_row, uint8_t *scales);

/* ---- GPU (CUDA builds; link bfp_cuda) ----------------------------------- *
 * Pointers are device pointers, stream is a cudaStream_t (NULL: default).
 * No call synchronizes or allocates, except the offline weight packing steps
 * below, as they say. Builds without CUDA, or machines
 * without a GPU, get BFP_ERR_UNSUPPORTED / BFP_ERR_DEVICE. */

/** 1 if this build has CUDA and a device is usable, else 0. */
int bfp_cuda_available(void);

/**
 * Quantize on the GPU; same planes as bfp_quantize(), bit for bit. NVFP4's
 * tensor scale is computed on the device (amax pass, then quantize) into
 * d_out->tensor_scale. If swizzled_scales is set, d_out->scales receives the
 * 128x4 layout (size bfp_swizzled_scales_size()) instead of the planar one
 * (1-byte scale formats only).
 * @param d_nonfinite_blocks optional device counter, incremented per NaN block
 */
bfp_status bfp_cuda_quantize(bfp_format fmt, bfp_dtype dtype, const void *d_src,
                             size_t rows, size_t cols, const bfp_options *opts,
                             int swizzled_scales, const bfp_planes *d_out,
                             unsigned long long *d_nonfinite_blocks, void *stream);

/** Dequantize on the GPU to F32 or BF16; same values as bfp_dequantize(). */
bfp_status bfp_cuda_dequantize(bfp_format fmt, const bfp_const_planes *d_in,
                               size_t rows, size_t cols, bfp_dtype dtype,
                               void *d_dst, void *stream);

/** Device buffers, a stream and pinned memory that bfp_cuda_quantize_host()
 *  reuses from call to call (one caller at a time). */
typedef struct bfp_cuda_stage bfp_cuda_stage;

/**
 * Make a stage on the current device; its buffers grow to the largest
 * tensor quantized through it.
 * @return BFP_OK; BFP_ERR_DEVICE without a usable GPU; BFP_ERR_UNSUPPORTED
 *         in a build without CUDA; BFP_ERR_NOMEM
 */
bfp_status bfp_cuda_stage_create(bfp_cuda_stage **out);

/** Free a stage (NULL-safe). */
void bfp_cuda_stage_free(bfp_cuda_stage *s);

/**
 * bfp_cuda_quantize() from host memory to host memory: src (rows x cols of
 * dtype, any host memory) is copied up in chunks, quantized, and the planes
 * copied into out (host planes sized by bfp_plane_sizes_for()); returns
 * when out is written. The planes of bfp_quantize(), bit for bit.
 * @param nonfinite_blocks optional: the NaN blocks written
 * @return as bfp_cuda_quantize(); BFP_ERR_DEVICE for a failed CUDA call
 */
bfp_status bfp_cuda_quantize_host(bfp_cuda_stage *s, bfp_format fmt, bfp_dtype dtype,
                                  const void *src, size_t rows, size_t cols,
                                  const bfp_options *opts, const bfp_planes *out,
                                  size_t *nonfinite_blocks);

/**
 * Launch choices of the GPU quantizer and dequantizer. They change speed
 * only, never a byte of output. A field left 0 takes the library's default
 * (docs/gpu.md says how each default was measured); benchmarks sweep them
 * (bench/gpu_bench.cu).
 */
typedef struct {
    /** CTAs per SM of the flat bf16 dequantize kernel's grid (each CTA
     *  strides over the rest), 1..2^20; 0: the default, 96. */
    unsigned dequant_ctas_per_sm;
} bfp_cuda_quant_tuning;

/**
 * Every launch choice of the GPU kernels, by part: the quantizer's here;
 * the matmul's beside it.
 */
typedef struct {
    bfp_cuda_quant_tuning quant;
} bfp_cuda_tuning;

/**
 * bfp_cuda_dequantize() with explicit launch choices.
 * @param tuning NULL, or the launch choices (0 fields: defaults)
 * @return as bfp_cuda_dequantize(); BFP_ERR_ARG for a field out of range
 */
bfp_status bfp_cuda_dequantize_tuned(bfp_format fmt, const bfp_const_planes *d_in,
                                     size_t rows, size_t cols, bfp_dtype dtype,
                                     void *d_dst, void *stream,
                                     const bfp_cuda_tuning *tuning);

/**
 * Share of the squared error sum (x - y)^2 that falls on each block's largest
 * finite |x| (ties: lowest index), blocks of `block` values along each row of
 * a rows x cols tensor; pairs with a non-finite side are skipped. This is the
 * MX+ paper's Figure 5 question, the "BM share" of `bfp compare`.
 * @return the share in [0, 1], or NaN when the error is zero
 */
double bfp_block_max_error_share(const float *x, const float *y, size_t rows,
                                 size_t cols, size_t block);

/* Scalar conversions used throughout (exact, round-to-nearest-even). */
float bfp_bf16_to_f32(uint16_t h);
uint16_t bfp_f32_to_bf16(float f);
float bfp_f16_to_f32(uint16_t h);
uint16_t bfp_f32_to_f16(float f);

/**
 * Decode one element code of a type to its value (scale 1).
 * @return the value, or NaN for a NaN code
 */
double bfp_elem_decode(bfp_elem_type t, unsigned code);

/**
 * Encode v to the nearest element code (RNE, saturating; NaN gives the NaN
 * code where the type has one, else the largest magnitude with v's sign).
 */
unsigned bfp_elem_encode(bfp_elem_type t, double v);

/** Decode a scale code to its value (NaN for NaN codes). For HiF4 this is
 * the UE6M2 byte alone. */
double bfp_scale_decode(bfp_scale_type t, unsigned code);

/* ---- Matrix multiplication: y = x . W^T (+ bias) -------------------------
 * x is bf16 [m, k] row-major, W a quantized [n, k] tensor in planar layout,
 * y is [m, n]. Weight formats: mxfp4, mxfp4+, nvfp4, nvfp4+, hif4.
 * docs/gemm.md describes the packed layout and the GPU kernels. */

/**
 * Reference matmul for checking: W dequantized by the reference decoder,
 * products accumulated in float64, rounded once to float32. bias_bf16 may
 * be NULL. Any format; NaN blocks of W give NaN outputs.
 * @return BFP_OK, BFP_ERR_FORMAT, BFP_ERR_SHAPE, BFP_ERR_ARG, BFP_ERR_NOMEM
 */
bfp_status bfp_matmul_ref(bfp_format fmt, const bfp_const_planes *w, size_t n,
                          size_t k, const uint16_t *x_bf16, size_t m,
                          const uint16_t *bias_bf16, float *y);

/**
 * Reference matmul with a quantized x (W4A8, W4A4): y = x . W^T (+ bias),
 * W [n, k] in w_fmt and x [m, k] in x_fmt, both planar with blocks along k,
 * both decoded by the reference decoder, products summed in float64, rounded
 * once to float32. bias_bf16 may be NULL. Any pair of formats; NaN blocks of
 * either operand give NaN outputs.
 * @return BFP_OK, BFP_ERR_FORMAT, BFP_ERR_SHAPE, BFP_ERR_ARG, BFP_ERR_NOMEM
 */
bfp_status bfp_matmul_ref_q(bfp_format w_fmt, const bfp_const_planes *w, size_t n, size_t k,
                            bfp_format x_fmt, const bfp_const_planes *x, size_t m,
                            const uint16_t *bias_bf16, float *y);

/** 1 if the GPU matmul and the prepacked layout support this format. */
int bfp_matmul_format_supported(bfp_format fmt);

/* Sizes of the prepacked weight's three arrays (bytes). */
typedef struct {
    size_t codes;   /* ceil(n/16) * ceil(k/64) * 512 */
    size_t scales;  /* ceil(n/16) * ceil(k/64) * (32 or 64) */
    size_t corr;    /* block-max corrections, MX+/NVFP4+ only (else 0) */
} bfp_packed_sizes;

/**
 * Sizes of the prepacked form of an n x k weight.
 * @return BFP_OK, BFP_ERR_FORMAT, BFP_ERR_UNSUPPORTED (format not in the
 *         matmul set), BFP_ERR_SHAPE
 */
bfp_status bfp_matmul_packed_sizes(bfp_format fmt, size_t n, size_t k,
                                   bfp_packed_sizes *out);

/**
 * The offline "prepack" step: reorder planar planes into the GPU kernel's
 * tiles (16 rows x 64 columns; each lane's 32 codes in one 16-byte vector,
 * in mma.sync fragment order). Blocks whose bytes the reference decodes as
 * NaN get a NaN scale; an MX+/NVFP4+ block max becomes an E2M1 code plus a
 * one-byte correction. Unpacking gives back the reference values exactly.
 * The tensor scale (NVFP4) is not part of the packed arrays.
 */
bfp_status bfp_matmul_prepack(bfp_format fmt, const bfp_const_planes *w,
                              size_t n, size_t k, uint8_t *codes,
                              uint8_t *scales, uint8_t *corr);

/**
 * Decode a prepacked weight to float32 [n, k], the values the GPU kernel
 * multiplies (tensor_scale: NVFP4's s_enc, else ignored). Equal, bit for
 * bit, to bfp_dequantize_ref() of the planes that were packed.
 */
bfp_status bfp_matmul_unpack(bfp_format fmt, const uint8_t *codes,
                             const uint8_t *scales, const uint8_t *corr,
                             float tensor_scale, size_t n, size_t k, float *w);

/* ---- Packed GPU weights -------------------------------------------------
 * A weight for the GPU matmul is one buffer that the caller owns (docs/gemm.md,
 * "Packed weights"): a 256-byte header (magic "BFPW", version, format, n, k,
 * the NVFP4 tensor scale, the MX fold exponent) and the prepacked arrays
 * (codes, scales, block-max corrections), each at a 256-byte aligned offset;
 * every path reads only these (the dequantize + cuBLAS path decodes them). It holds no pointer, so it
 * can be moved, copied, saved and loaded as bytes; a bfp_cuda_weight is a
 * host-side view of it (pointers and tensor maps), made again after a move. */

/**
 * Bytes of the packed weight buffer of an n x k weight. Pure computation (every
 * build, no GPU needed).
 * @return BFP_OK, BFP_ERR_ARG (bytes NULL), BFP_ERR_FORMAT, BFP_ERR_UNSUPPORTED
 *         (format not in the matmul set), BFP_ERR_SHAPE (zero, overflowing,
 *         or n or k above INT_MAX)
 */
bfp_status bfp_cuda_weight_packed_size(bfp_format fmt, size_t n, size_t k,
                                       size_t *bytes);

/**
 * Write the packed weight of host planes w into host memory buf (at least
 * bfp_cuda_weight_packed_size() bytes): the same bytes bfp_cuda_weight_pack()
 * puts on the device, for a framework that packs offline or saves them.
 * Pure computation (every build, no GPU needed).
 * @return BFP_OK, BFP_ERR_ARG (NULL plane or buffer, buffer too small), or
 *         the errors of bfp_cuda_weight_packed_size()
 */
bfp_status bfp_cuda_weight_pack_host(bfp_format fmt, const bfp_const_planes *w,
                                     size_t n, size_t k, void *buf, size_t bytes);

/**
 * Decode a packed weight image in host memory (bfp_cuda_weight_pack_host()'s
 * bytes, or a copy of a device buffer) to float32 w [n, k]: after checking
 * its header, bfp_matmul_unpack() of its arrays with its tensor scale, so
 * bfp_dequantize_ref()'s values of the planes packed, bit for bit. Pure
 * computation (every build, no GPU needed).
 * @return BFP_OK, BFP_ERR_ARG (NULL, buffer too small, or a header that is
 *         not this format's n x k weight), or the errors of
 *         bfp_cuda_weight_packed_size()
 */
bfp_status bfp_cuda_weight_unpack_host(bfp_format fmt, size_t n, size_t k, const void *buf,
                                       size_t bytes, float *w);

/**
 * Pack host planes w into the caller's device buffer d_buf (256-byte aligned,
 * at least bfp_cuda_weight_packed_size() bytes): prepack on the CPU into a
 * temporary host image, copy it on `stream`, wait for that stream, free the
 * image. An offline step (it allocates host memory and synchronizes).
 * @return BFP_OK, BFP_ERR_ARG, BFP_ERR_NOMEM, BFP_ERR_DEVICE (no GPU or a
 *         failed copy; BFP_ERR_UNSUPPORTED in builds without CUDA), or the
 *         errors of bfp_cuda_weight_packed_size()
 */
bfp_status bfp_cuda_weight_pack(bfp_format fmt, const bfp_const_planes *w,
                                size_t n, size_t k, void *d_buf, size_t bytes,
                                void *stream);

/* A host-side view of a packed weight on the GPU: pointers into its buffer,
 * TMA tensor maps, device facts. No library handle; no device memory of its
 * own, except the buffer of a weight that bfp_cuda_weight_upload() made. */
typedef struct bfp_cuda_weight bfp_cuda_weight;

/**
 * View the packed weight in device buffer d_buf (bytes long, 256-byte
 * aligned; written by bfp_cuda_weight_pack() or copied from such a buffer):
 * reads and checks its header (a synchronous 256-byte copy: finish writing
 * the buffer first) and records pointers. Allocates only the small host
 * descriptor; the buffer stays the caller's and must outlive the view.
 * Views of one buffer may coexist (a view is never written by a matmul).
 * After moving the buffer, view it again. *out is NULL on any error.
 * @return BFP_OK; BFP_ERR_ARG (NULL or misaligned buffer, buffer too small,
 *         or a header that is not this format's n x k packed weight);
 *         BFP_ERR_DEVICE (no GPU, failed copy or tensor map); BFP_ERR_NOMEM;
 *         the errors of bfp_cuda_weight_packed_size()
 */
bfp_status bfp_cuda_weight_view(bfp_format fmt, size_t n, size_t k, const void *d_buf,
                                size_t bytes, bfp_cuda_weight **out);

/**
 * Convenience: cudaMalloc a packed buffer, bfp_cuda_weight_pack() into it
 * (default stream) and view it; the weight owns the buffer. An offline step,
 * not for the hot path.
 * @return BFP_OK, BFP_ERR_UNSUPPORTED (format, or a build without CUDA),
 *         BFP_ERR_DEVICE, BFP_ERR_NOMEM, or the argument errors above
 */
bfp_status bfp_cuda_weight_upload(bfp_format fmt, const bfp_const_planes *w,
                                  size_t n, size_t k, bfp_cuda_weight **out);

/** Free a view (NULL-safe); the buffer too if bfp_cuda_weight_upload() made it. */
void bfp_cuda_weight_free(bfp_cuda_weight *w);

/* Tuning of the GPU matmul's planners and kernel variants: measured
 * defaults, overridden for benchmarks and sweeps (bench/gpu.sh sets them
 * through BFP_MATMUL_* variables, which only bench/ and tests/ read).
 * A zero-initialized struct ({0}) takes every default, as does NULL in the
 * calls below; docs/gemm.md says how each default was measured. */
typedef struct {
    int ctas_per_sm;  /* FUSED: K is split so that the grid has about this
                         many CTAs per SM; 1..64, 0: 8 */
    int warps_per_sm; /* SKINNY: at most this many warps per SM take work;
                         1..64, 0: as many as fit */
    int post_max_m;   /* SKINNY, MX+ / NVFP4+: the largest m at which the
                         block maxima are added after the mma; 1..32, -1:
                         never (the operands carry them at every m), 0: the
                         measured default (MX+ at m = 1, NVFP4+ never) */
    int wgmma_serial; /* WGMMA: 1: the serial mainloop (waits for each k
                         tile's wgmma before decoding the next), 0: the
                         pipelined one (default), 2: one k16 step at a
                         time (each step's wgmma committed alone, the next
                         step decoded while up to three run; an
                         experiment, docs/gemm.md) */
    int gemv_pdl;     /* GEMV: 1: programmatic dependent launch, the first
                         stages of W are read while the previous kernel in
                         the stream still runs (that kernel must not write
                         W; x, y and the workspace wait for it); 0: the
                         default (off here; on in grouped calls,
                         bfp_grouped.h); -1: off; 2: as 1 (a grouped call
                         also reads its offsets early) */
    int wgmma_consumers; /* WGMMA: consumer warpgroups per CTA, 64 rows of W
                         each: 2 (CTAs of 128 rows), 3 (192 rows, registers
                         moved from the producer warpgroup by setmaxnreg);
                         0: 2 (default) */
    int xq_kernel;    /* bfp_cuda_matmul_xq(_planes): 0: the default (the
                         mma.sync kernel), 1: the mma.sync kernel, 2: the
                         Hopper wgmma kernel (MX pairs only, sm_90;
                         BFP_ERR_UNSUPPORTED otherwise; measured in
                         docs/gemm.md) */
    int grouped_kernel; /* bfp_cuda_grouped_matmul (bfp_grouped.h): 0: the
                         default (on Hopper, by rows per active expert on
                         average: the GEMV kernel up to 8, the wgmma
                         kernel from 16, the unit kernel between; off
                         Hopper the unit kernel; docs/gemm.md), 1: the
                         mma.sync unit kernel, 2: the Hopper wgmma kernel,
                         3: the Hopper GEMV kernel (2 and 3: sm_90,
                         BFP_ERR_UNSUPPORTED otherwise) */
    int gemv_split;   /* GEMV: how the CTAs that share a group of 64 rows
                         of W add their sums: 0: the default (1), 1: fp32
                         atomics in the workspace, the group's last CTA
                         writing y (stream-K runs), 2: thread block
                         clusters of 1-8 CTAs adding them in each other's
                         shared memory, no workspace (an experiment: faster
                         on some weights, slower on others, and racecheck
                         reports hazards on it; docs/gemm.md) */
    int wgmma_bn;     /* WGMMA: rows of x per CTA: 64, 128, or 256 (with
                         2 consumer warpgroups only: each decoded tile of W
                         then feeds two n128 products, half the decode per
                         multiply-add); 0: the default (64 up to m = 64,
                         128 up to 256, then 256 while that leaves at least
                         half as many CTAs as SMs). Also the grouped wgmma
                         kernel's rows of an expert's x per tile (0 there:
                         64, 128 or 256 by rows per expert) */
} bfp_matmul_tuning;

/**
 * Check a tuning struct (NULL: the defaults, valid). Pure computation.
 * @return BFP_OK, or BFP_ERR_ARG when a field is out of its range
 */
bfp_status bfp_matmul_tuning_check(const bfp_matmul_tuning *tuning);

/* How bfp_cuda_matmul computes. */
typedef enum {
    BFP_MATMUL_AUTO = 0,     /* bfp_cuda_matmul_auto_path(): GEMV, SKINNY,
                                FUSED (or WGMMA from m = 17 on weights from
                                2^24 elements with k >= n) for m <= 32,
                                WGMMA to 1024 (Hopper;
                                above too where k >= n and no K split is
                                needed), else DEQUANT_CUBLAS */
    BFP_MATMUL_FUSED = 1,    /* tensor-core kernel, W decoded in registers */
    BFP_MATMUL_DEQUANT_CUBLAS = 2, /* W to bf16 in the workspace, cuBLAS GEMM */
    BFP_MATMUL_SKINNY = 3,   /* m <= 32 only: stream-K kernel fed by bulk copies;
                                faster than FUSED on large weights (docs/gemm.md) */
    /* 4 was the mid kernel (BFP_MATMUL_MID), retired: the wgmma kernel was
       faster at every measured m; 4 is refused with BFP_ERR_ARG
       (docs/gemm.md) */
    BFP_MATMUL_WGMMA = 5,    /* Hopper (sm_90) kernel: wgmma with W decoded in
                                registers, x and W through a TMA ring; CTAs of
                                128 rows of W x 64 or 128 rows of x (64 when
                                m <= 64; 256 by the tuning's wgmma_bn). Workspace: when K is split in s
                                parts, s fp32 [m, n] slices + counters, else
                                none. BFP_ERR_UNSUPPORTED on other GPUs */
    BFP_MATMUL_GEMV = 6      /* m <= 16 only (else BFP_ERR_SHAPE): persistent
                                stream-K GEMV, CTAs of 64 rows of W by 8 k
                                tiles through a TMA ring (docs/gemm.md).
                                Workspace: m x n fp32 + counters when a CTA's
                                run splits a group of 64 rows, else none */
} bfp_matmul_path;

/** The path BFP_MATMUL_AUTO takes for m rows of x with this weight (never
 * AUTO itself). */
bfp_matmul_path bfp_cuda_matmul_auto_path(const bfp_cuda_weight *w, size_t m);

/** The path AUTO takes under a tuning (NULL: the defaults, as above). With
 * gemv_pdl = 1 on Hopper it is the GEMV kernel at every m <= 16, where PDL
 * made it the fastest (docs/gemm.md). */
bfp_matmul_path bfp_cuda_matmul_auto_path_ex(const bfp_cuda_weight *w, size_t m,
                                             const bfp_matmul_tuning *tuning);

/** Workspace bytes bfp_cuda_matmul needs for m rows of x with a path and
 * the default tuning. */
size_t bfp_cuda_matmul_workspace_size(const bfp_cuda_weight *w, size_t m,
                                      bfp_matmul_path path);

/** The same for a tuning (NULL: the defaults); 0 also for an invalid one. */
size_t bfp_cuda_matmul_workspace_size_ex(const bfp_cuda_weight *w, size_t m,
                                         bfp_matmul_path path,
                                         const bfp_matmul_tuning *tuning);

/** Workspace bytes that serve BFP_MATMUL_AUTO at every m with the default
 * tuning (the largest of bfp_cuda_matmul_workspace_size(w, m, AUTO) over
 * all m): a framework can allocate it once, before capturing CUDA graphs.
 * 0 for NULL. */
size_t bfp_cuda_matmul_workspace_size_max(const bfp_cuda_weight *w);

/**
 * Decode a packed weight on the GPU to d_out [n, k] (row-major, device):
 * BFP_DTYPE_F32 gives bfp_matmul_unpack()'s values bit for bit (NVFP4
 * divided by its tensor scale), BFP_DTYPE_BF16 those values without the
 * NVFP4 tensor scale (exact in bf16; what the dequantize + cuBLAS path
 * multiplies). Asynchronous on `stream`; no allocation.
 * @return BFP_OK, BFP_ERR_ARG (NULL, or another dtype), BFP_ERR_DEVICE,
 *         BFP_ERR_UNSUPPORTED (a build without CUDA)
 */
bfp_status bfp_cuda_weight_unpack(const bfp_cuda_weight *w, bfp_dtype dtype, void *d_out,
                                  void *stream);

/**
 * y = x . W^T (+ bias) on the GPU with the default tuning:
 * bfp_cuda_matmul_ex() with tuning NULL.
 */
bfp_status bfp_cuda_matmul(const bfp_cuda_weight *w, const void *d_x, size_t m,
                           const void *d_bias, void *d_y, void *d_workspace,
                           size_t workspace_bytes, bfp_matmul_path path,
                           void *stream);

/**
 * y = x . W^T (+ bias) on the GPU: d_x bf16 [m, k], d_bias bf16 [n] or
 * NULL, d_y bf16 [m, n]; fp32 accumulation. d_workspace (device memory of
 * bfp_cuda_matmul_workspace_size_ex() bytes for this tuning) must hold zeros
 * before its first use. One workspace may serve every path and every m (for
 * the largest size those need): the kernels at m <= 32 use its front, which
 * every call leaves zero; the dequantize path writes only after that front,
 * and the kernel paths at larger m (and a tuning that needs more
 * than the default front) zero what they need zeroed first (the wgmma
 * kernel's split-K slices after the front are scratch: each split writes
 * all of its own).
 * Concurrent calls on different streams are safe when each has its own
 * workspace and y. The dequantize + cuBLAS path uses a cuBLAS handle of the
 * calling thread for the current device, made by that thread's first such call
 * (an allocation: make one call before capturing a CUDA graph); otherwise no
 * allocation, no synchronization.
 * @return BFP_OK; BFP_ERR_ARG (NULL pointer, invalid tuning, workspace too
 *         small); BFP_ERR_SHAPE; BFP_ERR_UNSUPPORTED (WGMMA off Hopper, or a
 *         build without CUDA); BFP_ERR_DEVICE
 */
bfp_status bfp_cuda_matmul_ex(const bfp_cuda_weight *w, const void *d_x, size_t m,
                              const void *d_bias, void *d_y, void *d_workspace,
                              size_t workspace_bytes, bfp_matmul_path path,
                              const bfp_matmul_tuning *tuning, void *stream);

/* ---- Matmul with a quantized x (W4A8, W4A4) ------------------------------
 * y = x . W^T (+ bias) with x quantized to an activation format along k, on
 * the FP8 tensor cores (mma.sync e4m3, sm_89 and later, or with
 * bfp_matmul_tuning.xq_kernel = 2 wgmma on sm_90; docs/gemm.md,
 * "Quantized activations"). Pairs: W mxfp4 or mxfp4+ with x mxfp8_e4m3
 * (W4A8), mxfp4 or mxfp4+ (W4A4); W nvfp4 or nvfp4+ with x nvfp4. The
 * reference is bfp_matmul_ref_q of W's planes and bfp_quantize(x)'s. */

/* W for these calls: its planar planes (bfp_quantize's layout) in device
 * memory the caller owns. The packed weight buffer (bfp_cuda_weight_pack)
 * holds only the prepacked arrays of the bf16 kernels, which this kernel does
 * not read yet (docs/gemm.md). */
typedef struct {
    bfp_format fmt;
    size_t n, k;
    const void *d_codes, *d_scales; /* device planes of an n x k tensor */
    const void *d_meta;             /* NULL when the format has no meta plane */
    float tensor_scale;             /* NVFP4 / NVFP4+ s_enc (host value); else ignored */
} bfp_cuda_planar_weight;

/** 1 if bfp_cuda_matmul_xq has a kernel for this pair (pure computation). */
int bfp_cuda_matmul_xq_supported(bfp_format w_fmt, bfp_format x_fmt);

/** Workspace bytes of bfp_cuda_matmul_xq (x's planes, then the K split's
 * fp32 sums); enough for bfp_cuda_matmul_xq_planes too. 0 for an unsupported
 * pair, a bad shape or an invalid tuning. */
size_t bfp_cuda_matmul_xq_workspace_size(const bfp_cuda_planar_weight *w, bfp_format x_fmt,
                                         size_t m, const bfp_matmul_tuning *tuning);

/**
 * y = x . W^T (+ bias) with x quantized on the fly: d_x_bf16 bf16 [m, k] is
 * quantized by bfp_cuda_quantize (default options, bit for bit bfp_quantize's
 * planes) into the workspace (256-byte aligned, at least
 * bfp_cuda_matmul_xq_workspace_size() bytes; no zeroing needed), then
 * multiplied. d_bias bf16 [n] or NULL, d_y bf16 [m, n]. tuning: NULL or a
 * valid struct (xq_kernel picks the kernel). Same stream rules as
 * bfp_cuda_matmul_ex; no allocation, no synchronization.
 * @return BFP_OK; BFP_ERR_ARG (NULL pointer, small or misaligned workspace,
 *         invalid tuning); BFP_ERR_FORMAT (unknown x format);
 *         BFP_ERR_UNSUPPORTED (pair without a kernel, xq_kernel = 2 with a
 *         pair or GPU it does not serve, build without CUDA);
 *         BFP_ERR_SHAPE; BFP_ERR_DEVICE
 */
bfp_status bfp_cuda_matmul_xq(const bfp_cuda_planar_weight *w, bfp_format x_fmt,
                              const void *d_x_bf16, size_t m, const void *d_bias,
                              void *d_y, void *d_workspace, size_t workspace_bytes,
                              const bfp_matmul_tuning *tuning,
                              void *stream);

/**
 * The same with x already quantized: d_x holds device planes of an m x k
 * tensor in x_fmt (planar, blocks along k; NVFP4's tensor scale on the
 * device). The workspace is used only when K is split, and with
 * xq_kernel = 2 for that kernel's copy of x (NULL allowed when the workspace
 * size minus x's planes is 0; passing the full size is safe; else 16-byte
 * aligned).
 */
bfp_status bfp_cuda_matmul_xq_planes(const bfp_cuda_planar_weight *w, bfp_format x_fmt,
                                     const bfp_const_planes *d_x, size_t m, const void *d_bias,
                                     void *d_y, void *d_workspace, size_t workspace_bytes,
                                     const bfp_matmul_tuning *tuning, void *stream);

/* ---- Quantized x on a packed weight: the bf16-x route ---------------------
 * For an x format without a float32 tensor scale (every format but NVFP4 and
 * NVFP4+) each decoded x value is a bf16 value (values below 2^-133, which
 * only blocks scaled below about 2^-120 hold, round to bf16's subnormals). So
 * W4A8 / W4A4 can run on the bf16-x kernels: x quantized (bfp_cuda_quantize,
 * bit for bit bfp_quantize's planes), decoded to bf16 (bfp_cuda_dequantize),
 * then bfp_cuda_matmul_ex. The products are exact and summed in fp32, as in
 * the xq kernels; at m <= 128 this route was faster than both xq kernels
 * (docs/gemm.md, "The bf16-x route"). */

/** 1 if x_fmt has the bf16-x route (a known format without a tensor scale). */
int bfp_matmul_qx_supported(bfp_format x_fmt);

/** Workspace bytes of bfp_cuda_matmul_qx for m rows with this path and
 * tuning: the matmul's need (at least the front that the small-m kernels
 * keep zero between calls), then x's bf16 copy and planes. 0 for NULL w,
 * m = 0, an x format without the route or an invalid tuning. */
size_t bfp_cuda_matmul_qx_workspace_size(const bfp_cuda_weight *w, bfp_format x_fmt, size_t m,
                                         bfp_matmul_path path, const bfp_matmul_tuning *tuning);

/**
 * y = bf16(decode(quantize(x, x_fmt))) . W^T (+ bias) on a packed weight:
 * d_x_bf16 bf16 [m, k], d_bias bf16 [n] or NULL, d_y bf16 [m, n]. The
 * workspace (256-byte aligned, bfp_cuda_matmul_qx_workspace_size() bytes)
 * starts with the matmul's part, which the caller zeroes once as for
 * bfp_cuda_matmul (the calls keep it zero), then x's bf16 copy and planes
 * (codes, scales, meta, tensor scale; each 256-byte aligned), written by
 * every call. No allocation, no synchronization: capturable in a CUDA graph.
 * path and tuning go to bfp_cuda_matmul_ex (with gemv_pdl = 1 the GEMV's
 * first copies of W overlap the x kernels before it).
 * @return BFP_OK; BFP_ERR_ARG (NULL pointer, small or misaligned workspace,
 *         invalid tuning); BFP_ERR_FORMAT (unknown x format);
 *         BFP_ERR_UNSUPPORTED (x format with a tensor scale, build without
 *         CUDA); the errors of bfp_cuda_quantize and bfp_cuda_matmul_ex
 */
bfp_status bfp_cuda_matmul_qx(const bfp_cuda_weight *w, bfp_format x_fmt, const void *d_x_bf16,
                              size_t m, const void *d_bias, void *d_y, void *d_workspace,
                              size_t workspace_bytes, bfp_matmul_path path,
                              const bfp_matmul_tuning *tuning, void *stream);

/* ---- Verification -------------------------------------------------------
 * Compare the planes another implementation wrote (the DUT: device or
 * kernel under test) with the reference planes of the same input, and
 * convert other layouts to the planar one first. Pure computation: no I/O.
 * docs/verify.md describes the workflow and every likely cause. */

/* Which plane a mismatch is in. For HiF4, SCALES is the UE6M2 byte of a
 * scale word (Ea) and META its E1_8/E1_16 flags (Eb, Ec). */
typedef enum {
    BFP_PLANE_CODES = 0,
    BFP_PLANE_SCALES = 1,
    BFP_PLANE_META = 2,
    BFP_PLANE_TENSOR_SCALE = 3
} bfp_plane_id;

/* The likely cause of a mismatch, as far as the bytes and the input tell. */
typedef enum {
    BFP_CAUSE_UNKNOWN = 0,     /* no pattern recognized */
    BFP_CAUSE_TIE = 1,         /* input exactly between two grid values (or a
                                  tied block max) and the DUT chose the other */
    BFP_CAUSE_ROUNDING = 2,    /* code one grid step off, input not at a tie:
                                  rounding mode or precision of the quotient */
    BFP_CAUSE_SCALE_STEP = 3,  /* block scale code one step off (and the
                                  codes follow the DUT's scale) */
    BFP_CAUSE_SCALE = 4,       /* block context (scale, tensor scale, meta,
                                  flags) differs by more than a step; the
                                  codes follow the DUT's own context */
    BFP_CAUSE_NIBBLE_ORDER = 5,/* 4-bit codes in another order: pairs 2k and
                                  2k+1 swapped, or ggml's j / j+block/2 */
    BFP_CAUSE_BIT_ORDER = 6,   /* bits or bytes reversed: code bits, an
                                  MSB-first bit stream, a byte-swapped HiF4
                                  word or tensor scale, reversed flag bits */
    BFP_CAUSE_BLOCK_SHIFT = 7, /* DUT block b holds reference block b-1 or
                                  b+1 (blocks numbered row-major) */
    BFP_CAUSE_SIGNED_ZERO = 8, /* +0 against -0 (0x0 against 0x8 for FP4;
                                  INT has no -0 code) */
    BFP_CAUSE_NAN_BLOCK = 9,   /* a block holding NaN/Inf (or a NaN scale on
                                  either side) handled differently */
    BFP_CAUSE_BIT_FLIP = 10    /* one bit differs and the DUT's value is not
                                  a nearest one: a corrupted bit, not a
                                  rounding choice */
} bfp_verify_cause;

#define BFP_VERIFY_NCAUSES 11

/** Short name of a cause ("tie", "scale-step", ...); "?" if unknown. */
const char *bfp_verify_cause_name(bfp_verify_cause cause);

/** One sentence for a kernel author: what the cause means, where to look. */
const char *bfp_verify_cause_hint(bfp_verify_cause cause);

/** Name of a plane: "codes", "scales", "meta", "tensor_scale". */
const char *bfp_plane_name(bfp_plane_id plane);

/* One differing entry. */
typedef struct {
    bfp_plane_id plane;
    size_t row;                /* tensor row (0 for the tensor scale) */
    size_t block;              /* block within the row */
    size_t elem;               /* element within the block (codes only) */
    size_t col;                /* column of the element (codes only) */
    float input;               /* the input value (codes), else NaN */
    uint32_t expected;         /* reference entry: code, scale byte, meta
                                  byte, HiF4 flags (E1_8 | E1_16 << 8), or
                                  the tensor scale's float32 bits */
    uint32_t received;         /* the DUT's entry, same encoding */
    double expected_value;     /* decoded: the element's dequantized value,
                                  the scale value, the meta byte, the tensor
                                  scale (NaN where there is none) */
    double received_value;
    bfp_verify_cause cause;
} bfp_verify_mismatch;

/* What bfp_verify() found. */
typedef struct {
    int identical;             /* 1 if every entry of every plane is equal */
    size_t codes_total, codes_differ;   /* element codes (rows * cols) */
    size_t scales_total, scales_differ; /* blocks */
    size_t meta_total, meta_differ;     /* blocks with meta (or HiF4 flags) */
    int tensor_scale_differs;           /* NVFP4 / NVFP4+ */
    size_t blocks_total, blocks_differ; /* blocks with any difference */
    size_t padding_rows_differ;  /* rows whose unused last-byte bits differ
                                    (not a mismatch: no value reads them) */
    size_t mismatches;         /* all differing entries, every plane */
    size_t recorded;           /* of those, written to the caller's array */
    size_t cause_count[BFP_VERIFY_NCAUSES]; /* every mismatch, by cause */
    size_t ref_nan_blocks, dut_nan_blocks;  /* blocks that decode to NaN */
    int have_error_stats;      /* 1 when an input was given */
    bfp_error_stats ref_error; /* reference reconstruction vs the input */
    bfp_error_stats dut_error; /* DUT reconstruction vs the input */
} bfp_verify_report;

/**
 * Compare the DUT's planes with the reference planes, entry by entry, and
 * classify each difference (bfp_verify_cause). Both sides are planar (the
 * bfp_*_to_planar converters below turn other layouts into planar ones).
 * @param input  the rows x cols values both sides quantized (dtype), or
 *               NULL: then no tie / consistency analysis and no error stats
 * @param ref    the reference planes, normally from bfp_quantize_ref()
 * @param dut    the planes under test; any bytes are accepted
 * @param mismatches     array for the first max_mismatches differences in
 *                       row-major block order (tensor scale first; per
 *                       block: scale, meta, then codes); may be NULL if 0
 * @param report filled on success
 * @return BFP_OK (whether or not the planes are identical), or
 *         BFP_ERR_FORMAT / BFP_ERR_SHAPE / BFP_ERR_ARG / BFP_ERR_NOMEM
 */
bfp_status bfp_verify(bfp_format fmt, size_t rows, size_t cols,
                      bfp_dtype dtype, const void *input,
                      const bfp_const_planes *ref, const bfp_const_planes *dut,
                      bfp_verify_mismatch *mismatches, size_t max_mismatches,
                      bfp_verify_report *report);

/* Layout converters. Each has its inverse, so planes round-trip exactly.
 * The 128x4 swizzled scale layout: bfp_scales_to_swizzled() and
 * bfp_scales_from_swizzled() above. */

/**
 * ggml / GGUF blocks (ggml-common.h): block_mxfp4 is 17 bytes per 32 values
 * (the E8M0 byte e, then qs[16], byte j holding element j in its low nibble
 * and element j+16 in its high nibble); block_nvfp4 is 36 bytes per 64
 * values (4 UE4M3 bytes d[s] for its 16-element sub-blocks, then qs[32];
 * sub-block s uses qs[8s..8s+7], byte j holding elements 16s+j (low) and
 * 16s+j+8 (high)). block_nvfp4 has no tensor scale.
 * @param bytes set to rows * cols / block * block_bytes
 * @return BFP_OK; BFP_ERR_UNSUPPORTED for formats other than mxfp4 and
 *         nvfp4; BFP_ERR_SHAPE when cols is not a multiple of 32 (mxfp4)
 *         or 64 (nvfp4), or on overflow
 */
bfp_status bfp_ggml_size(bfp_format fmt, size_t rows, size_t cols,
                         size_t *bytes);

/** ggml blocks to planar codes and scales (tensor scale untouched). */
bfp_status bfp_ggml_to_planar(bfp_format fmt, const uint8_t *blocks,
                              size_t rows, size_t cols, const bfp_planes *out);

/** Planar codes and scales to ggml blocks (bfp_ggml_size() bytes). */
bfp_status bfp_planar_to_ggml(bfp_format fmt, const bfp_const_planes *in,
                              size_t rows, size_t cols, uint8_t *blocks);

/**
 * HiF4 golden files to the scales plane: the inverse of
 * bfp_hif4_split_scales(). ea: nblocks UE6M2 bytes; eb: nblocks bytes of
 * E1_8 bits; ec: 2*nblocks bytes of E1_16 bits, LSB first. scales gets
 * nblocks little-endian 32-bit words. (golden_fp4.bin is the codes plane.)
 */
bfp_status bfp_hif4_golden_to_scales(const uint8_t *ea, const uint8_t *eb,
                                     const uint8_t *ec, size_t nblocks,
                                     uint8_t *scales);

/* ---- end of Verification ------------------------------------------------ */

#ifdef __cplusplus
}
#endif

#endif /* BFP_H */

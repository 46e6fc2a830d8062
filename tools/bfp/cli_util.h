/*
 * cli_util.h - what every bfp command shares: error reporting, parsing of
 * formats, shapes, dtypes and quantization options, small file helpers.
 *
 * Convention: a parse or check function that fails has already printed its
 * one "bfp: error: ..." line and returns -1; the command then cleans up and
 * returns CLI_EXIT_ERR.
 */
#ifndef BFP_CLI_UTIL_H
#define BFP_CLI_UTIL_H

#include "bfp.h"
#include "bfp_io.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "bfp reads and writes little-endian files as host memory"
#endif

#define CLI_EXIT_OK 0
#define CLI_EXIT_ERR 2
#define CLI_ERRLEN 512

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/** Print "bfp: error: <message>" as one line on stderr. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/** Print "bfp: warning: <message>" as one line on stderr. */
void cli_warn(const char *fmt, ...) CLI_PRINTF(1, 2);

/* Long-option values above any char, shared by every command. */
enum {
    OPT_HELP = 'h',
    OPT_ROUNDING = 0x100,
    OPT_SEED,
    OPT_SCALE_MODE,
    OPT_NO_TENSOR_SCALE,
    OPT_2D,
    OPT_FORCE,
    OPT_JSON,
    OPT_NAME
};

/* The quantization options of golden, quantize and compare, for a
 * struct option array (end it with the caller's own entries). */
#define CLI_QUANT_LONGOPTS                                           \
    {"rounding", required_argument, NULL, OPT_ROUNDING},             \
    {"seed", required_argument, NULL, OPT_SEED},                     \
    {"scale-mode", required_argument, NULL, OPT_SCALE_MODE},         \
    {"no-tensor-scale", no_argument, NULL, OPT_NO_TENSOR_SCALE},     \
    {"2d", no_argument, NULL, OPT_2D}

/* Quantization options as given on the command line. */
typedef struct {
    bfp_options opts;
    int seed_set;
    int scale_mode_set;
} cli_quant_opts;

/* Pass BFP_ISA and BFP_THREADS from the environment to the library
 * (bfp_set_isa, bfp_set_threads); unset or empty leaves the default. An
 * invalid value prints one error line and returns -1. */
int cli_apply_environment(void);

void cli_quant_opts_init(cli_quant_opts *q);

/**
 * Handle one getopt result if it is a quantization option.
 * @return 1 handled, 0 not a quantization option, -1 bad argument (reported)
 */
int cli_quant_opts_parse(cli_quant_opts *q, int c, const char *arg);

/**
 * Check that every option given applies to the format (the library's
 * bfp_options_check() decides) and that --seed comes with stochastic
 * rounding. f NULL: only the latter.
 * @return 0 or -1 (reported)
 */
int cli_quant_opts_check(const cli_quant_opts *q, const bfp_format_info *f);

/** The options for one format, dropping those it does not take (compare). */
bfp_options cli_quant_opts_for(const cli_quant_opts *q,
                               const bfp_format_info *f);

/** Prepare getopt_long for a fresh parse with our own error messages. */
void cli_getopt_reset(void);

/** Report getopt_long's '?' or ':' result as one error line; returns -1. */
int cli_getopt_fail(const char *cmd, int c, char *const *argv);

/* The options several commands share, as the command line gave them. */
typedef struct {
    cli_quant_opts qo;  /* --rounding --seed --scale-mode --no-tensor-scale --2d */
    bfp_format fmt;     /* -f FORMAT */
    int have_fmt;
    size_t rows, cols;  /* -s ROWSxCOLS */
    int have_shape;
    bfp_dtype dtype;    /* -t f32|bf16|f16, f32 unless given */
    int have_dtype;
    const char *name;   /* --name */
    int json, force;    /* --json, --force */
} cli_opts;

void cli_opts_init(cli_opts *o);

#define CLI_OPT_TAKEN (-1)

/**
 * The default: branch of a command's option switch: take getopt_long's c
 * when it is a shared option (getopt returns only those in the command's
 * longopts), print usage for --help, report an unknown option or a missing
 * value as "CMD: ...".
 * @return CLI_OPT_TAKEN (parse on), or the exit code to return now:
 *         CLI_EXIT_OK after --help, CLI_EXIT_ERR (reported)
 */
int cli_opts_take(cli_opts *o, int c, const char *arg, const char *cmd,
                  const char *usage, char *const *argv);

/** Check the number of positional arguments: "CMD needs WHAT, got N". */
int cli_want_args(const char *cmd, int got, int want, const char *what);

/** Parse a format name (case-insensitive); unknown names list the valid ones. */
int cli_parse_format(const char *s, bfp_format *out);

/**
 * Parse a comma-separated list of formats into table order without
 * duplicates. out has room for bfp_format_count() entries.
 */
int cli_parse_format_list(const char *s, bfp_format *out, int *n);

/** Parse "ROWSxCOLS" or "COLS" (one row); positive, no overflow. */
int cli_parse_shape(const char *s, size_t *rows, size_t *cols);

/** Parse "f32", "bf16" or "f16" (f16 only when allow_f16). */
int cli_parse_dtype(const char *s, int allow_f16, bfp_dtype *out);

/** Parse an unsigned 64-bit integer (decimal or 0x hex). */
int cli_parse_u64(const char *s, const char *what, uint64_t *out);

/** Names of the options as the CLI spells them ("rne", "floor"). A default
 * rounding is named after what the format does by default. */
const char *cli_rounding_name(bfp_rounding r, const bfp_format_info *f);
const char *cli_scale_mode_name(bfp_scale_mode m);
const char *cli_family_name(bfp_family fam);

/** A shape as "AxBxC" into buf. */
const char *cli_shape_str(const size_t *shape, size_t ndim, char *buf,
                          size_t len);

/**
 * Quantize src (a tensor of dtype with the given shape, blocks along the
 * last dim) with the reference into freshly allocated planes in *q, which
 * also records the options. Free *q with bfp_qtensor_free() in any case.
 * @return 0, or -1 (reported)
 */
int cli_quantize(bfp_format fmt, const bfp_options *opts, bfp_dtype dtype,
                 const void *src, size_t ndim, const size_t *shape,
                 bfp_qtensor *q, bfp_stats *stats);

/** Dequantize *q to a malloc'd float32 array, or NULL (reported). */
float *cli_dequantize_f32(const bfp_qtensor *q);

/**
 * bfp_error_stats_quantized() of q against its input x and reconstruction
 * y: the pairs where both are finite, the skipped ones counted by reason,
 * and the saturated values. With no pair left every error measure is NaN.
 * @return 0, or -1 (reported)
 */
int cli_error_stats(const bfp_qtensor *q, const float *x, const float *y,
                    bfp_error_stats *out);

/** A malloc'd float32 copy of n values of dtype, or NULL (reported). */
float *cli_to_f32(bfp_dtype dtype, const void *src, size_t n);

/** 1 if something exists at path (file, directory, anything). */
int cli_path_exists(const char *path);

/** 1 if path ends with suffix, compared case-insensitively. */
int cli_has_suffix(const char *path, const char *suffix);

/** dir + "/" + name, malloc'd, or NULL (reported). */
char *cli_join_path(const char *dir, const char *name);

/** malloc that reports failure as an error line ("what" names the buffer). */
void *cli_alloc(size_t n, const char *what);

/** Add a number to a JSON object, or null when it is NaN or infinite.
 * @return 0, or -1 when out of memory (not reported) */
int cli_json_number(cJSON *obj, const char *key, double v);

/** Print a JSON document built in full (built_ok) on stdout and delete it;
 * NULL, !built_ok or a failed print give one error line instead.
 * @return CLI_EXIT_OK or CLI_EXIT_ERR */
int cli_json_emit(cJSON *root, int built_ok);

/** Print one error line for a failed library call: "<what>: <status>". */
void cli_status_error(const char *what, bfp_status st);

/** Print the io layer's message for a failed call (its status if none). */
void cli_io_error(const char *err, bfp_status st);

/** 1 if a and b name the same existing file (device and inode, through
 * symbolic and hard links), else 0. */
int cli_same_file(const char *a, const char *b);

/** Refuse (one error line, -1) an output that is the input itself. */
int cli_check_not_input(const char *in_path, const char *out_path);

/** Refuse (one error line, -1) an existing output path unless force. */
int cli_check_output(const char *path, int force);

/**
 * Read a raw file of rows x cols little-endian values of dtype; a size
 * that does not match is an error naming both numbers.
 * @return 0 and *data malloc'd, or -1 (reported)
 */
int cli_read_raw(const char *path, size_t rows, size_t cols, bfp_dtype dtype,
                 void **data);

/** 1 if tensor name (NULL: the only one) of path is quantized: a container
 * of 'bfp quantize', a checkpoint of 'bfp convert' (directory or shard), or
 * a GGUF's MXFP4 / NVFP4 tensor (without name: a GGUF with no float one). */
int cli_is_quantized(const char *path, const char *name);

/**
 * Load quantized tensor name (NULL: the only one) of a container, a 'bfp
 * convert' checkpoint (bfp or compressed-tensors layout, where name is the
 * module) or a .gguf (cli_qtensor.c). @return 0, or -1 (reported)
 */
int cli_load_qtensor(const char *path, const char *name, bfp_qtensor *q);

#endif /* BFP_CLI_UTIL_H */

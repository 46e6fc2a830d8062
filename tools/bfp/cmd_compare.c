/*
 * cmd_compare.c - `bfp compare`: quantize a float tensor with every format
 * (or a list), dequantize, and tabulate the error, including the share of
 * the squared error that falls on the block maxima (the MX+ paper's
 * Figure 5 question: how much of the damage is the one largest element?).
 */
#define _POSIX_C_SOURCE 200809L

#include "bfp_ckpt.h"
#include "cli_util.h"
#include "commands.h"

#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char cmd_compare_usage[] =
    "usage: bfp compare [FILE] [-f FORMAT,FORMAT,...] [--name TENSOR] [--json]\n"
    "                   [-s ROWSxCOLS -t DTYPE] [--ref FILE [--ref-name TENSOR]]\n"
    "                   [quantization options]\n"
    "\n"
    "Quantize a float tensor with every format (or those of -f), dequantize\n"
    "it, and print one row per format in format-table order: bits per\n"
    "value, RMSE, SQNR, max and mean relative error (over nonzero inputs),\n"
    "BM share, the fraction of the total squared error that comes from\n"
    "the block maxima (per block of the format's size along the last axis,\n"
    "the element of largest magnitude, ties to the lowest index), and the\n"
    "number of saturated values (beyond what their block can hold: clipped).\n"
    "Non-finite inputs are counted and left out of every statistic.\n"
    "\n"
    "FILE is .npy, .safetensors, .gguf (F32/F16/BF16 tensors), or raw\n"
    "little-endian values (then -s is\n"
    "required). Without FILE, every data/*.npy (the real MiniLM tensors the\n"
    "repository ships) is compared in sorted order.\n"
    "\n"
    "A quantized FILE (a container of 'bfp quantize', a checkpoint of 'bfp\n"
    "convert' in the bfp or compressed-tensors layout: its directory or a\n"
    "shard, --name TENSOR or MODULE; or a .gguf with --name naming an MXFP4\n"
    "or NVFP4 tensor) is compared by its dequantized values;\n"
    "with --ref, the original tensor is compared instead, and a first row,\n"
    "'FORMAT (stored)', gives the error of the stored planes against it.\n"
    "\n"
    "  -f, --formats LIST     comma-separated format names (default: all)\n"
    "  --name TENSOR          tensor to read from a .safetensors or .gguf file\n"
    "  --json                 one JSON array (one object per tensor)\n"
    "  --ref FILE             the original float tensor of a quantized FILE\n"
    "                         (.npy, .safetensors, .gguf, or a checkpoint\n"
    "                         directory)\n"
    "  --ref-name TENSOR      its tensor (default: --name, else --name.weight)\n"
    "  -s, --shape ROWSxCOLS  shape of a raw FILE\n"
    "  -t, --dtype DTYPE      values of a raw FILE: f32 (default), bf16, f16\n"
    "  --rounding MODE        rne, away, zero, stochastic (default: each\n"
    "                         format's own)\n"
    "  --seed N               seed for --rounding stochastic\n"
    "  --scale-mode MODE      floor, ceil, even, rceil (MX formats only;\n"
    "                         the others keep their own rule)\n"
    "  --no-tensor-scale      NVFP4(+) only: tensor scale 1\n"
    "  --2d                   NVFP4 only: 16x16 tiles share a block scale\n"
    "  -h, --help             this text\n";

typedef struct {
    const bfp_format_info *f;
    int stored;       /* the planes FILE holds, not quantized here */
    bfp_stats qs;
    bfp_error_stats es;
    double bm_share;
} result;

typedef struct {
    const bfp_format *formats;
    int nformats;
    const cli_quant_opts *qo;
    const char *name;
    int json;
    int raw_shape;    /* -s given */
    size_t rows, cols;
    bfp_dtype raw_dtype;
    const char *ref, *ref_name; /* the original of a quantized FILE */
} compare_args;

enum { OPT_REF = 0x200, OPT_REF_NAME };


/* Load FILE as a tensor; raw files need the shape from -s. */
static int load_tensor(const char *path, const compare_args *a, bfp_tensor *t)
{
    char err[CLI_ERRLEN] = "";
    memset(t, 0, sizeof *t);
    int known = cli_has_suffix(path, ".npy") ||
                cli_has_suffix(path, ".safetensors") ||
                cli_has_suffix(path, ".gguf");
    if (known) {
        if (a->raw_shape) {
            cli_error("-s and -t are for raw input; %s carries its own shape",
                      path);
            return -1;
        }
        bfp_status st = bfp_tensor_load(path, a->name, t, err, sizeof err);
        if (st != BFP_OK) {
            cli_io_error(err, st);
            return -1;
        }
        if (bfp_tensor_numel(t) == 0) {
            char sh[128];
            cli_error("%s: %s%s%s has shape [%s]: a zero dimension leaves "
                      "nothing to quantize", path, a->name ? "tensor '" : "its tensor",
                      a->name ? a->name : "", a->name ? "'" : "",
                      cli_shape_str(t->shape, t->ndim, sh, sizeof sh));
            return -1;
        }
        return 0;
    }
    if (!a->raw_shape) {
        cli_error("%s is not .npy, .safetensors or .gguf: give raw input its shape "
                  "with -s ROWSxCOLS (and -t DTYPE)",
                  path);
        return -1;
    }
    void *data = NULL;
    if (cli_read_raw(path, a->rows, a->cols, a->raw_dtype, &data) != 0)
        return -1;
    t->dtype = a->raw_dtype;
    t->ndim = 2;
    t->shape[0] = a->rows;
    t->shape[1] = a->cols;
    t->data = data;
    t->nbytes = a->rows * a->cols * bfp_dtype_size(a->raw_dtype);
    return 0;
}

/* --ref's tensor, of the stored tensor's shape: --ref-name, else --name,
 * else --name.weight (the original of a compressed-tensors MODULE). */
static int load_ref(const compare_args *a, const bfp_qtensor *q, bfp_tensor *t)
{
    char err[CLI_ERRLEN] = "", e2[CLI_ERRLEN], s1[128], s2[128];
    const char *name = a->ref_name ? a->ref_name : a->name;
    bfp_status st = bfp_ckpt_tensor_load(a->ref, name, t, err, sizeof err);
    if (st != BFP_OK && !a->ref_name && a->name) {
        size_t n = strlen(a->name) + sizeof ".weight";
        char *w = cli_alloc(n, "a tensor name");
        if (!w)
            return -1;
        snprintf(w, n, "%s.weight", a->name);
        if (bfp_ckpt_tensor_load(a->ref, w, t, e2, sizeof e2) == BFP_OK)
            st = BFP_OK;
        free(w);
    }
    if (st != BFP_OK) {
        cli_io_error(err, st);
        return -1;
    }
    if (t->ndim != q->ndim || memcmp(t->shape, q->shape, q->ndim * sizeof *q->shape) != 0) {
        cli_error("--ref %s: its tensor is %s, the stored one %s", a->ref,
                  cli_shape_str(t->shape, t->ndim, s1, sizeof s1),
                  cli_shape_str(q->shape, q->ndim, s2, sizeof s2));
        bfp_tensor_free(t);
        return -1;
    }
    return 0;
}

/* A quantized FILE: q its stored tensor, y its values; t the tensor to
 * compare: --ref's, or (taking y over) y itself as float32. */
static int load_stored(const char *path, const compare_args *a, bfp_qtensor *q,
                       bfp_tensor *t, float **y)
{
    if (a->raw_shape) {
        cli_error("-s and -t are for raw input; %s carries its own shape", path);
        return -1;
    }
    if (cli_load_qtensor(path, a->name, q) != 0 || !(*y = cli_dequantize_f32(q)))
        return -1;
    if (a->ref)
        return load_ref(a, q, t);
    t->dtype = BFP_DTYPE_F32;
    t->ndim = q->ndim;
    memcpy(t->shape, q->shape, sizeof t->shape);
    t->nbytes = q->rows * q->cols * 4;
    t->data = *y;
    *y = NULL;
    return 0;
}

/* The stored planes q (values y) against x, as res's first row. */
static void stored_row(const bfp_qtensor *q, const float *x, const float *y,
                       result *r)
{
    size_t rows = q->rows, cols = q->cols, block = (size_t)bfp_format_get(q->format)->block;
    memset(r, 0, sizeof *r);
    r->f = bfp_format_get(q->format);
    r->stored = 1;
    r->qs.blocks = rows * q->sizes.blocks_per_row;
    for (size_t i = 0; i < rows; i++) /* blocks that decode to a NaN */
        for (size_t c = 0; c < cols; c += block) {
            int nan = 0;
            for (size_t j = c; j < cols && j < c + block; j++)
                nan |= isnan(y[i * cols + j]) != 0;
            r->qs.nonfinite_blocks += (size_t)nan;
        }
    r->bm_share = bfp_block_max_error_share(x, y, rows, cols, block);
}

/* Quantize x with every format into res[]. */
static int run_formats(const bfp_tensor *t, const float *x,
                       const compare_args *a, result *res)
{
    size_t rows, cols;
    bfp_tensor_rows_cols(t, &rows, &cols);
    for (int k = 0; k < a->nformats; k++) {
        const bfp_format_info *f = bfp_format_get(a->formats[k]);
        bfp_options o = cli_quant_opts_for(a->qo, f);
        bfp_qtensor q;
        float *y = NULL;
        memset(&q, 0, sizeof q);
        memset(&res[k], 0, sizeof res[k]);
        res[k].f = f;
        int ok = cli_quantize(f->id, &o, t->dtype, t->data, t->ndim, t->shape,
                              &q, &res[k].qs) == 0 &&
                 (y = cli_dequantize_f32(&q)) != NULL;
        ok = ok && cli_error_stats(&q, x, y, &res[k].es) == 0;
        if (ok)
            res[k].bm_share = bfp_block_max_error_share(x, y, rows, cols, (size_t)f->block);
        free(y);
        bfp_qtensor_free(&q);
        if (!ok)
            return -1;
    }
    return 0;
}

/* A number for the table: fixed for ordinary sizes, else exponent. */
static const char *num(char *buf, size_t len, double v, int decimals)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else if (isinf(v))
        snprintf(buf, len, v > 0 ? "inf" : "-inf");
    else if (v != 0 && (fabs(v) >= 1e5 || fabs(v) < 1e-3))
        snprintf(buf, len, "%.3e", v);
    else
        snprintf(buf, len, "%.*f", decimals, v);
    return buf;
}

static void print_table(const char *path, const bfp_tensor *t, const char *desc,
                        size_t nonfinite, const compare_args *a,
                        const result *res, int nres)
{
    char b[6][32], qname[BFP_IO_QUOTE_MAX], label[64];
    size_t n = bfp_tensor_numel(t);
    printf("%s%s%s: %s, %zu values", path, a->name ? " " : "",
           a->name ? bfp_io_quote_name(a->name, qname, sizeof qname) : "", desc, n);
    if (nonfinite)
        printf(", %zu non-finite (left out of the statistics)", nonfinite);
    printf("\n");
    int w = (int)strlen("format");
    for (int k = 0; k < nres; k++) {
        int len = (int)strlen(res[k].f->name) + (res[k].stored ? 9 : 0);
        w = len > w ? len : w;
    }
    printf("  %-*s  %8s  %10s  %8s  %11s  %12s  %8s  %9s\n", w, "format",
           "bits/val", "RMSE", "SQNR dB", "max rel err", "mean rel err",
           "BM share", "saturated");
    for (int k = 0; k < nres; k++) {
        const result *r = &res[k];
        int has_rel = r->es.nonzero > 0;
        snprintf(label, sizeof label, "%s%s", r->f->name, r->stored ? " (stored)" : "");
        if (isnan(r->bm_share))
            snprintf(b[5], sizeof b[5], "-");
        else
            snprintf(b[5], sizeof b[5], "%.1f%%", 100.0 * r->bm_share);
        printf("  %-*s  %8.3f  %10s  %8s  %11s  %12s  %8s  %9zu\n", w, label,
               r->f->bits_per_value, num(b[0], 32, r->es.rmse, 6),
               num(b[1], 32, r->es.sqnr_db, 2),
               num(b[2], 32, has_rel ? r->es.max_rel_err : NAN, 4),
               num(b[3], 32, has_rel ? r->es.mean_rel_err : NAN, 4), b[5],
               r->es.saturated);
    }
    const char *sep = "  NaN blocks, all their values left out:";
    for (int k = 0; k < nres; k++)
        if (res[k].qs.nonfinite_blocks) {
            printf("%s %s%s %zu", sep, res[k].f->name, res[k].stored ? " (stored)" : "",
                   res[k].qs.nonfinite_blocks);
            sep = ",";
        }
    if (sep[0] == ',')
        printf("\n");
}

static int add_json(cJSON *arr, const char *path, const bfp_tensor *t, const char *desc,
                    size_t nonfinite, const compare_args *a, const result *res, int nres)
{
    cJSON *o = cJSON_CreateObject(), *shape, *list;
    int bad = !o || !cJSON_AddItemToArray(arr, o);
    if (bad) {
        cJSON_Delete(o);
        return -1;
    }
    bad = !cJSON_AddStringToObject(o, "file", path);
    if (a->name)
        bad = bad || !cJSON_AddStringToObject(o, "name", a->name);
    bad = bad || !cJSON_AddStringToObject(o, "dtype", bfp_dtype_name(t->dtype));
    bad = bad || !cJSON_AddStringToObject(o, "input", desc);
    if (a->ref)
        bad = bad || !cJSON_AddStringToObject(o, "ref", a->ref);
    bad = bad || !(shape = cJSON_AddArrayToObject(o, "shape"));
    for (size_t i = 0; !bad && i < t->ndim; i++)
        bad = !cJSON_AddItemToArray(shape,
                                    cJSON_CreateNumber((double)t->shape[i]));
    bad = bad || !cJSON_AddNumberToObject(o, "values",
                                          (double)bfp_tensor_numel(t));
    bad = bad || !cJSON_AddNumberToObject(o, "nonfinite_values",
                                          (double)nonfinite);
    bad = bad || !(list = cJSON_AddArrayToObject(o, "results"));
    for (int k = 0; !bad && k < nres; k++) {
        const result *r = &res[k];
        int has_rel = r->es.nonzero > 0;
        cJSON *e = cJSON_CreateObject();
        bad = !e || !cJSON_AddItemToArray(list, e);
        if (bad) {
            cJSON_Delete(e);
            break;
        }
        bad = !cJSON_AddStringToObject(e, "format", r->f->name) ||
              !cJSON_AddBoolToObject(e, "stored", r->stored) ||
              !cJSON_AddNumberToObject(e, "bits_per_value",
                                       r->f->bits_per_value) ||
              cli_json_number(e, "rmse", r->es.rmse) ||
              cli_json_number(e, "sqnr_db", r->es.sqnr_db) ||
              cli_json_number(e, "max_rel_err",
                              has_rel ? r->es.max_rel_err : NAN) ||
              cli_json_number(e, "mean_rel_err",
                              has_rel ? r->es.mean_rel_err : NAN) ||
              cli_json_number(e, "max_abs_err", r->es.max_abs_err) ||
              cli_json_number(e, "bm_share", r->bm_share) ||
              !cJSON_AddNumberToObject(e, "blocks", (double)r->qs.blocks) ||
              !cJSON_AddNumberToObject(e, "nonfinite_blocks",
                                       (double)r->qs.nonfinite_blocks) ||
              !cJSON_AddNumberToObject(e, "flushed_blocks",
                                       (double)r->qs.flushed_blocks) ||
              !cJSON_AddNumberToObject(e, "compared", (double)r->es.count) ||
              !cJSON_AddNumberToObject(e, "skipped_input",
                                       (double)r->es.skipped_input) ||
              !cJSON_AddNumberToObject(e, "skipped_output",
                                       (double)r->es.skipped_output) ||
              !cJSON_AddNumberToObject(e, "saturated", (double)r->es.saturated);
    }
    return bad ? -1 : 0;
}

/* Compare one file: print its table, or append it to json. */
static int compare_file(const char *path, const compare_args *a, cJSON *json,
                        int first)
{
    bfp_tensor t;
    bfp_qtensor q;
    float *x = NULL, *ys = NULL;
    result *res = NULL;
    int rc = -1, quantized = cli_is_quantized(path, a->name), stored = quantized && a->ref;
    char desc[256], sh[128];
    memset(&t, 0, sizeof t);
    memset(&q, 0, sizeof q);
    if (!quantized && a->ref) {
        cli_error("--ref is the original of a quantized FILE; %s holds float values", path);
        goto out;
    }
    if (quantized ? load_stored(path, a, &q, &t, &ys) != 0 : load_tensor(path, a, &t) != 0)
        goto out;
    cli_shape_str(t.shape, t.ndim, sh, sizeof sh);
    if (!quantized)
        snprintf(desc, sizeof desc, "%s %s", bfp_dtype_name(t.dtype), sh);
    else if (!stored)
        snprintf(desc, sizeof desc, "%s %s stored, its dequantized values (f32)",
                 bfp_format_get(q.format)->name, sh);
    else
        snprintf(desc, sizeof desc, "%s %s stored, against --ref %s (%s)",
                 bfp_format_get(q.format)->name, sh, a->ref, bfp_dtype_name(t.dtype));
    size_t n = bfp_tensor_numel(&t), nonfinite = 0;
    if (!(x = cli_to_f32(t.dtype, t.data, n)))
        goto out;
    for (size_t i = 0; i < n; i++)
        nonfinite += !isfinite(x[i]);
    if (!(res = cli_alloc((size_t)(a->nformats + stored) * sizeof *res, "results")))
        goto out;
    if (stored) {
        stored_row(&q, x, ys, &res[0]);
        if (cli_error_stats(&q, x, ys, &res[0].es) != 0)
            goto out;
    }
    if (run_formats(&t, x, a, res + stored) != 0)
        goto out;
    if (json) {
        if (add_json(json, path, &t, desc, nonfinite, a, res, a->nformats + stored) != 0) {
            cli_error("out of memory building the JSON output");
            goto out;
        }
    } else {
        if (!first)
            printf("\n");
        print_table(path, &t, desc, nonfinite, a, res, a->nformats + stored);
    }
    rc = 0;
out:
    free(res);
    free(x);
    free(ys);
    bfp_qtensor_free(&q);
    bfp_tensor_free(&t); /* raw input too: its buffer is bfp_io_read_file's */
    return rc;
}

int cmd_compare(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"formats", required_argument, NULL, 'f'},
        {"format", required_argument, NULL, 'f'},
        {"name", required_argument, NULL, OPT_NAME},
        {"json", no_argument, NULL, OPT_JSON},
        {"ref", required_argument, NULL, OPT_REF},
        {"ref-name", required_argument, NULL, OPT_REF_NAME},
        {"shape", required_argument, NULL, 's'},
        {"dtype", required_argument, NULL, 't'},
        CLI_QUANT_LONGOPTS,
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int total = bfp_format_count(), c, rc = CLI_EXIT_ERR;
    bfp_format *formats = cli_alloc((size_t)total * sizeof *formats, "formats");
    cli_opts co;
    compare_args a;
    glob_t g;
    int globbed = 0;
    cJSON *json = NULL;

    if (!formats)
        return CLI_EXIT_ERR;
    memset(&a, 0, sizeof a);
    cli_opts_init(&co);
    a.qo = &co.qo;
    a.formats = formats;
    for (int i = 0; i < total; i++)
        formats[i] = bfp_format_at(i)->id;
    a.nformats = total;

    while ((c = getopt_long(argc, argv, ":f:s:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': /* a list here */
            if (cli_parse_format_list(optarg, formats, &a.nformats) != 0)
                goto out;
            break;
        case OPT_REF:
            a.ref = optarg;
            break;
        case OPT_REF_NAME:
            a.ref_name = optarg;
            break;
        default:
            if ((rc = cli_opts_take(&co, c, optarg, "compare", cmd_compare_usage, argv)) !=
                CLI_OPT_TAKEN)
                goto out;
            rc = CLI_EXIT_ERR;
        }
    }
    a.rows = co.rows;
    a.cols = co.cols;
    a.raw_shape = co.have_shape;
    a.raw_dtype = co.dtype;
    a.name = co.name;
    a.json = co.json;
    if (cli_quant_opts_check(&co.qo, NULL) != 0)
        goto out;
    if (argc - optind > 1) {
        cli_error("compare takes at most one FILE, got %d", argc - optind);
        goto out;
    }
    if (a.ref_name && !a.ref) {
        cli_error("--ref-name names the tensor of --ref FILE; --ref is missing");
        goto out;
    }
    if (co.have_dtype && !a.raw_shape) {
        cli_error("-t describes raw input and needs -s ROWSxCOLS");
        goto out;
    }
    if (a.json && !(json = cJSON_CreateArray())) {
        cli_error("out of memory building the JSON output");
        goto out;
    }

    if (optind < argc) {
        if (compare_file(argv[optind], &a, json, 1) != 0)
            goto out;
    } else {
        if (a.raw_shape || a.name || a.ref) {
            cli_error("-s, -t, --name and --ref describe a FILE; none was given");
            goto out;
        }
        int gr = glob("data/*.npy", 0, NULL, &g);
        globbed = gr == 0;
        if (gr != 0 || g.gl_pathc == 0) {
            cli_error("no FILE given and no data/*.npy here (run from the "
                      "repository root, or name a file)");
            goto out;
        }
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (compare_file(g.gl_pathv[i], &a, json, i == 0) != 0)
                goto out;
    }

    if (json) {
        char *text = cJSON_Print(json);
        if (!text) {
            cli_error("out of memory printing the JSON output");
            goto out;
        }
        puts(text);
        free(text);
    } else {
        printf("\nBM share: fraction of the squared error on each block's "
               "largest-magnitude element (1 of every 16, 32 or 64).\n");
    }
    rc = CLI_EXIT_OK;
out:
    if (globbed)
        globfree(&g);
    cJSON_Delete(json);
    free(formats);
    return rc;
}

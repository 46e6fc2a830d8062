/*
 * cmd_golden.c - `bfp golden`: quantize a raw little-endian binary with the
 * reference and write every plane, the reconstruction and a report into a
 * directory. Everything is computed in memory first; the files are written
 * only when all of them are ready, and none is replaced without --force.
 */
#define _POSIX_C_SOURCE 200809L

#include "cli_util.h"
#include "commands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char cmd_golden_usage[] =
    "usage: bfp golden -f FORMAT -s ROWSxCOLS [-t f32|bf16|f16] [options]\n"
    "                  INPUT.bin OUTDIR\n"
    "\n"
    "Read ROWS*COLS raw little-endian values, quantize them with the\n"
    "reference model and write into OUTDIR (created if missing):\n"
    "  codes.bin         element codes, LSB-first bit stream per row\n"
    "  scales.bin        one scale per block (HiF4: 32-bit LE words)\n"
    "  meta.bin          per-block meta byte (MX+, MX++, NVFP4+ only)\n"
    "  tensor_scale.bin  one LE float32 (NVFP4, NVFP4+ only)\n"
    "  dequant.f32.bin   the reconstruction as LE float32\n"
    "  report.json       format, shape, options, block counts, error stats\n"
    "  golden_fp4.bin golden_ea.bin golden_eb.bin golden_ec.bin\n"
    "  golden_scale.bin  HiF4 only: the reference implementation's files\n"
    "\n"
    "  -f, --format FORMAT    format name (see 'bfp formats'), required\n"
    "  -s, --shape ROWSxCOLS  tensor shape (COLS alone = one row), required\n"
    "  -t, --dtype DTYPE      input values: f32 (default), bf16, f16\n"
    "  --rounding MODE        rne, away, zero, stochastic (default: the\n"
    "                         format's own: away for hif4, else rne)\n"
    "  --seed N               seed for --rounding stochastic\n"
    "  --scale-mode MODE      MX shared exponent: floor (default), ceil,\n"
    "                         even, rceil\n"
    "  --no-tensor-scale      NVFP4(+): tensor scale 1\n"
    "  --2d                   NVFP4 only: 16x16 tiles share a block scale\n"
    "  --force                replace OUTDIR's files from an earlier run\n"
    "  -h, --help             this text\n";

typedef bfp_io_file out_file;

#define MAX_FILES 16 /* 11 at most: 6 for every format, 5 more for HiF4 */

/* Every name golden writes for some format: a directory holding only these
 * is a previous golden output that --force may replace as a whole. */
static const char *const golden_names[] = {
    "codes.bin",      "scales.bin",    "meta.bin",      "tensor_scale.bin",
    "dequant.f32.bin", "report.json",  "golden_fp4.bin", "golden_ea.bin",
    "golden_eb.bin",  "golden_ec.bin", "golden_scale.bin"};

/* Refuse an input that is one of the files OUTDIR's new set replaces. */
static int input_in_outdir(const char *in_path, const char *dir)
{
    for (size_t i = 0; i < sizeof golden_names / sizeof golden_names[0]; i++) {
        char *p = cli_join_path(dir, golden_names[i]);
        if (!p)
            return -1;
        int same = cli_same_file(in_path, p);
        if (same)
            cli_error("INPUT %s is %s, which golden would replace", in_path, p);
        free(p);
        if (same)
            return -1;
    }
    return 0;
}

/* Write every file or none: the set replaces OUTDIR whole (see
 * bfp_io_write_dir_atomic), so OUTDIR holds this run's files only. */
static int write_outputs(const char *dir, const out_file *files, size_t n,
                         int force)
{
    char err[CLI_ERRLEN] = "";
    bfp_status s = bfp_io_write_dir_atomic(
        dir, files, n, golden_names,
        sizeof golden_names / sizeof golden_names[0], force, err, sizeof err);
    if (s != BFP_OK) {
        cli_io_error(err, s);
        return -1;
    }
    return 0;
}

static cJSON *build_report(const bfp_format_info *f, size_t rows, size_t cols,
                           bfp_dtype dtype, const bfp_options *o,
                           const bfp_stats *qs, const bfp_qtensor *q,
                           const bfp_error_stats *es, const out_file *files,
                           size_t nfiles)
{
    cJSON *r = cJSON_CreateObject(), *shape, *opts, *names;
    int bad = !r;
    bad = bad || !cJSON_AddStringToObject(r, "format", f->name);
    bad = bad || !(shape = cJSON_AddArrayToObject(r, "shape"));
    if (!bad) {
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)rows));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)cols));
    }
    bad = bad || !cJSON_AddStringToObject(r, "dtype", bfp_dtype_name(dtype));
    bad = bad || !(opts = cJSON_AddObjectToObject(r, "options"));
    if (!bad) {
        bad = !cJSON_AddStringToObject(opts, "rounding",
                                       cli_rounding_name(o->rounding, f));
        if (o->rounding == BFP_ROUND_STOCHASTIC) {
            char seed[32];
            snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
            /* JSON numbers are exact only up to 2^53 */
            bad = bad || !(o->seed <= (UINT64_C(1) << 53)
                               ? cJSON_AddNumberToObject(opts, "seed",
                                                         (double)o->seed)
                               : cJSON_AddStringToObject(opts, "seed", seed));
        }
        if (f->family == BFP_FAMILY_MX)
            bad = bad || !cJSON_AddStringToObject(
                             opts, "scale_mode",
                             cli_scale_mode_name(o->scale_mode));
        if (f->has_tensor_scale) {
            bad = bad || !cJSON_AddBoolToObject(opts, "tensor_scale",
                                                !o->nvfp4_no_tensor_scale);
            bad = bad || !cJSON_AddBoolToObject(opts, "2d", o->nvfp4_2d);
        }
    }
    bad = bad || !cJSON_AddNumberToObject(r, "blocks", (double)qs->blocks);
    bad = bad || !cJSON_AddNumberToObject(r, "nonfinite_blocks",
                                          (double)qs->nonfinite_blocks);
    bad = bad || !cJSON_AddNumberToObject(r, "flushed_blocks",
                                          (double)qs->flushed_blocks);
    if (f->has_tensor_scale)
        bad = bad || cli_json_number(r, "tensor_scale", q->tensor_scale);
    bad = bad || !cJSON_AddNumberToObject(r, "values", (double)es->count);
    bad = bad || !cJSON_AddNumberToObject(r, "nonzero", (double)es->nonzero);
    bad = bad || cli_json_number(r, "max_rel_err",
                                 es->nonzero ? es->max_rel_err : NAN);
    bad = bad || cli_json_number(r, "mean_rel_err",
                                 es->nonzero ? es->mean_rel_err : NAN);
    bad = bad || cli_json_number(r, "max_abs_err", es->max_abs_err);
    bad = bad || cli_json_number(r, "rmse", es->rmse);
    bad = bad || cli_json_number(r, "sqnr_db", es->sqnr_db);
    bad = bad || !(names = cJSON_AddArrayToObject(r, "files"));
    for (size_t i = 0; !bad && i < nfiles; i++)
        bad = !cJSON_AddItemToArray(names, cJSON_CreateString(files[i].name));
    if (bad) {
        cJSON_Delete(r);
        cli_error("out of memory building report.json");
        return NULL;
    }
    return r;
}

int cmd_golden(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"shape", required_argument, NULL, 's'},
        {"dtype", required_argument, NULL, 't'},
        CLI_QUANT_LONGOPTS,
        {"force", no_argument, NULL, OPT_FORCE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    cli_opts co;
    int c, r, rc = CLI_EXIT_ERR;
    void *input = NULL;
    bfp_qtensor q;
    float *x = NULL, *y = NULL;
    uint8_t *ea = NULL, *eb = NULL, *ec = NULL, *gscale = NULL;
    cJSON *report = NULL;
    char *report_text = NULL;

    memset(&q, 0, sizeof q);
    cli_opts_init(&co);
    while ((c = getopt_long(argc, argv, ":f:s:t:h", longopts, NULL)) != -1)
        if ((r = cli_opts_take(&co, c, optarg, "golden", cmd_golden_usage, argv)) !=
            CLI_OPT_TAKEN)
            return r;
    const bfp_format fmt = co.fmt;
    const bfp_dtype dtype = co.dtype;
    const size_t rows = co.rows, cols = co.cols;
    if (!co.have_fmt || !co.have_shape) {
        cli_error("golden needs -f FORMAT and -s ROWSxCOLS (see 'bfp help "
                  "golden')");
        return CLI_EXIT_ERR;
    }
    if (cli_want_args("golden", argc - optind, 2, "INPUT.bin and OUTDIR") != 0)
        return CLI_EXIT_ERR;
    const char *in_path = argv[optind], *out_dir = argv[optind + 1];
    const bfp_format_info *f = bfp_format_get(fmt);
    if (cli_quant_opts_check(&co.qo, f) != 0)
        return CLI_EXIT_ERR;

    if (input_in_outdir(in_path, out_dir) != 0 ||
        cli_read_raw(in_path, rows, cols, dtype, &input) != 0)
        goto out;
    size_t n = rows * cols;

    size_t shape[2] = {rows, cols};
    bfp_stats qs;
    memset(&qs, 0, sizeof qs);
    if (cli_quantize(fmt, &co.qo.opts, dtype, input, 2, shape, &q, &qs) != 0)
        goto out;
    if (!(y = cli_dequantize_f32(&q)) || !(x = cli_to_f32(dtype, input, n)))
        goto out;
    bfp_error_stats es;
    if (cli_error_stats(&q, x, y, &es) != 0)
        goto out;

    out_file files[MAX_FILES];
    size_t nf = 0;
    files[nf++] = (out_file){"codes.bin", q.codes, q.sizes.codes};
    files[nf++] = (out_file){"scales.bin", q.scales, q.sizes.scales};
    if (f->meta_bytes > 0)
        files[nf++] = (out_file){"meta.bin", q.meta, q.sizes.meta};
    if (f->has_tensor_scale)
        files[nf++] = (out_file){"tensor_scale.bin", &q.tensor_scale, 4};
    files[nf++] = (out_file){"dequant.f32.bin", y, n * sizeof(float)};
    if (f->family == BFP_FAMILY_HIF4) {
        size_t nb = q.rows * q.sizes.blocks_per_row;
        ea = cli_alloc(nb, "golden_ea");
        eb = cli_alloc(nb, "golden_eb");
        ec = cli_alloc(2 * nb, "golden_ec");
        gscale = cli_alloc(32 * nb, "golden_scale");
        if (!ea || !eb || !ec || !gscale)
            goto out;
        bfp_status st = bfp_hif4_split_scales(q.scales, nb, ea, eb, ec,
                                   (uint16_t *)(void *)gscale);
        if (st != BFP_OK) {
            cli_status_error("splitting the HiF4 scales", st);
            goto out;
        }
        files[nf++] = (out_file){"golden_fp4.bin", q.codes, q.sizes.codes};
        files[nf++] = (out_file){"golden_ea.bin", ea, nb};
        files[nf++] = (out_file){"golden_eb.bin", eb, nb};
        files[nf++] = (out_file){"golden_ec.bin", ec, 2 * nb};
        files[nf++] = (out_file){"golden_scale.bin", gscale, 32 * nb};
    }
    files[nf] = (out_file){"report.json", NULL, 0};
    report = build_report(f, rows, cols, dtype, &co.qo.opts, &qs, &q, &es, files,
                          nf + 1);
    if (!report || !(report_text = cJSON_Print(report))) {
        if (report)
            cli_error("out of memory printing report.json");
        goto out;
    }
    files[nf].data = report_text;
    files[nf].size = strlen(report_text);
    nf++;

    if (write_outputs(out_dir, files, nf, co.force) != 0)
        goto out;

    if (qs.nonfinite_blocks > 0)
        cli_warn("%zu blocks held NaN/Inf and were stored as NaN blocks",
                 qs.nonfinite_blocks);
    printf("golden %s %zux%zu %s: wrote %zu files to %s (", f->name, rows,
           cols, bfp_dtype_name(dtype), nf, out_dir);
    for (size_t i = 0; i < nf; i++)
        printf("%s%s", i ? " " : "", files[i].name);
    if (isinf(es.sqnr_db) && es.sqnr_db > 0)
        printf("); exact reconstruction\n");
    else if (isnan(es.sqnr_db))
        printf("); no finite values to compare\n");
    else
        printf("); SQNR %.2f dB\n", es.sqnr_db);
    rc = CLI_EXIT_OK;
out:
    free(input);
    bfp_qtensor_free(&q);
    free(x);
    free(y);
    free(ea);
    free(eb);
    free(ec);
    free(gscale);
    cJSON_Delete(report);
    free(report_text);
    return rc;
}

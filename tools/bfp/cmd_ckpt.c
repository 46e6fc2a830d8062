/*
 * cmd_ckpt.c - `bfp convert`: a whole checkpoint into a layout an inference
 * engine loads (src/io/ckpt_*.c does the work; this is options, progress
 * bar and summary).
 */
#define _POSIX_C_SOURCE 200809L

#include "bfp_ckpt.h"
#include "ckpt_mpi.h"
#include "cli_util.h"
#include "commands.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OPT_LAYOUT = 0x200, OPT_INCLUDE, OPT_EXCLUDE, OPT_REPORT, OPT_DEVICE };

const char cmd_ckpt_usage[] =
    "usage: bfp convert -f FORMAT [--layout bfp|compressed-tensors|gguf]\n"
    "                   [--include RE] [--exclude RE] [options] IN OUT\n"
    "\n"
    "Convert a whole checkpoint: IN is a .safetensors file or a checkpoint\n"
    "directory (model.safetensors.index.json and its shards, or one\n"
    "model.safetensors, with config.json); OUT is a directory (a .gguf file\n"
    "for --layout gguf). Linear weights (2-D *weight tensors other than\n"
    "embeddings, norms and heads) are quantized, everything else is copied.\n"
    "Shards are written under temporary names and renamed; rerun the same\n"
    "command after an interruption and the finished shards are kept.\n"
    "\n"
    "  -f, --format FORMAT  format to quantize to, required\n"
    "  --layout LAYOUT      bfp (default: planar planes, every format),\n"
    "                       compressed-tensors (mxfp4, nvfp4, mxfp6_e2m3,\n"
    "                       mxfp8_e4m3, mxint8, mxint4), gguf (mxfp4, nvfp4)\n"
    "  --include RE         also quantize the tensors whose name matches RE\n"
    "                       (POSIX extended regex)\n"
    "  --exclude RE         never quantize the tensors whose name matches RE\n"
    "  --device cpu|cuda    quantize on the CPU (default) or with the GPU\n"
    "                       kernels (a CUDA build): the same bytes either way\n"
    "  --rounding, --seed, --scale-mode, --no-tensor-scale, --2d\n"
    "                       as for 'bfp quantize'\n"
    "  --json               print a JSON summary on stdout\n"
    "  --report             add each quantized tensor's SQNR\n"
    "  --force              write into an OUT that is not a run to resume\n"
    "  -h, --help           this text\n"
    "\n"
    "A progress bar is drawn on stderr when it is a terminal (one process).\n"
    "Under mpirun (mpirun -n N bfp convert ...) the ranks share the work by\n"
    "bytes and rank 0 prints the summary or the failing rank's error.\n";

typedef struct {
    double last;
    int drawn;
} progress_state;

static void fmt_bytes(double b, char *buf, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, n, "%.1f %s", b, u[i]);
}

static void draw_progress(void *ctx, const bfp_ckpt_progress *p)
{
    progress_state *ps = ctx;
    int last = p->tensors_done == p->tensors_total;
    if (!last && p->seconds - ps->last < 0.1)
        return;
    ps->last = p->seconds;
    double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 1;
    char bar[31], done[32], total[32], rate[32];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fmt_bytes((double)p->bytes_done, done, sizeof done);
    fmt_bytes((double)p->bytes_total, total, sizeof total);
    double bps = p->seconds > 0 ? (double)p->bytes_done / p->seconds : 0;
    fmt_bytes(bps, rate, sizeof rate);
    double eta = bps > 0 ? (double)(p->bytes_total - p->bytes_done) / bps : 0;
    fprintf(stderr, "\r[%s] %zu/%zu tensors  %s / %s  %s/s  ETA %.0fs ", bar,
            p->tensors_done, p->tensors_total, done, total, rate, eta);
    if (last)
        fputc('\n', stderr);
    fflush(stderr);
    ps->drawn = 1;
}

/* The progress bar, and the test hook BFP_CONVERT_TEST_DIE_AFTER=N: SIGKILL
 * after N tensors (on rank BFP_CONVERT_TEST_DIE_RANK only, when set). */
typedef struct {
    progress_state *bar;
    long die_after, done;
} progress_hook;

static void on_progress(void *ctx, const bfp_ckpt_progress *p)
{
    progress_hook *h = ctx;
    if (h->bar)
        draw_progress(h->bar, p);
    if (h->die_after >= 0 && ++h->done >= h->die_after)
        raise(SIGKILL);
}

static long die_after(int rank)
{
    const char *n = getenv("BFP_CONVERT_TEST_DIE_AFTER");
    const char *r = getenv("BFP_CONVERT_TEST_DIE_RANK");
    if (!n || !*n || (r && *r && atoi(r) != rank))
        return -1;
    return atol(n);
}

/* The summary as one JSON object on stdout: CLI_EXIT_OK, or CLI_EXIT_ERR after one error line */
static int print_json(const char *in, const char *out, const bfp_ckpt_opts *o,
                      const bfp_ckpt_summary *s)
{
    cJSON *j = cJSON_CreateObject(), *arr;
    if (!j)
        return cli_json_emit(NULL, 0);
    cJSON_AddStringToObject(j, "input", in);
    cJSON_AddStringToObject(j, "output", out);
    cJSON_AddStringToObject(j, "format", bfp_format_get(o->format)->name);
    cJSON_AddStringToObject(j, "layout", bfp_ckpt_layout_name(o->layout));
    cJSON_AddStringToObject(j, "device", o->device_cuda ? "cuda" : "cpu");
    cJSON_AddNumberToObject(j, "shards", (double)s->shards);
    cJSON_AddNumberToObject(j, "shards_kept", (double)s->shards_kept);
    cJSON_AddNumberToObject(j, "tensors", (double)s->tensors);
    cJSON_AddNumberToObject(j, "quantized", (double)s->quantized);
    cJSON_AddNumberToObject(j, "copied", (double)(s->tensors - s->quantized));
    cJSON_AddNumberToObject(j, "in_bytes", (double)s->in_bytes);
    cJSON_AddNumberToObject(j, "out_bytes", (double)s->out_bytes);
    cJSON_AddNumberToObject(j, "seconds", s->seconds);
    if (o->report && (arr = cJSON_AddArrayToObject(j, "report"))) {
        for (size_t i = 0; i < s->tensors; i++) {
            const bfp_ckpt_tensor *t = &s->t[i];
            cJSON *e = cJSON_CreateObject();
            char shape[128];
            if (!e)
                break;
            cJSON_AddItemToArray(arr, e);
            cJSON_AddStringToObject(e, "name", t->name ? t->name : "");
            cJSON_AddStringToObject(e, "dtype", t->dtype);
            cJSON_AddStringToObject(e, "shape", cli_shape_str(t->shape, t->ndim, shape,
                                                              sizeof shape));
            cJSON_AddBoolToObject(e, "quantized", t->quantized);
            if (t->quantized) {
                cli_json_number(e, "sqnr_db", t->sqnr_db);
                cJSON_AddNumberToObject(e, "nonfinite_blocks", (double)t->nonfinite_blocks);
            }
        }
    }
    return cli_json_emit(j, 1);
}

static void print_text(const bfp_ckpt_opts *o, const bfp_ckpt_summary *s)
{
    char a[32], b[32];
    fmt_bytes((double)s->in_bytes, a, sizeof a);
    fmt_bytes((double)s->out_bytes, b, sizeof b);
    printf("convert %s (%s layout): %zu tensors, %zu quantized, %zu copied; "
           "%zu shard(s), %zu kept from an earlier run; %s -> %s in %.2f s\n",
           bfp_format_get(o->format)->name, bfp_ckpt_layout_name(o->layout),
           s->tensors, s->quantized, s->tensors - s->quantized, s->shards,
           s->shards_kept, a, b, s->seconds);
    if (!o->report)
        return;
    printf("  %-48s %-6s %-16s %10s\n", "tensor", "dtype", "shape", "sqnr_db");
    for (size_t i = 0; i < s->tensors; i++) {
        const bfp_ckpt_tensor *t = &s->t[i];
        char shape[128];
        if (!t->quantized)
            continue;
        printf("  %-48s %-6s %-16s %10.2f\n", t->name, t->dtype,
               cli_shape_str(t->shape, t->ndim, shape, sizeof shape), t->sqnr_db);
    }
}

static int convert_main(int argc, char **argv, const bfp_ckpt_ranks *ranks)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        CLI_QUANT_LONGOPTS,
        {"layout", required_argument, NULL, OPT_LAYOUT},
        {"include", required_argument, NULL, OPT_INCLUDE},
        {"exclude", required_argument, NULL, OPT_EXCLUDE},
        {"report", no_argument, NULL, OPT_REPORT},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"json", no_argument, NULL, OPT_JSON},
        {"force", no_argument, NULL, OPT_FORCE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    cli_opts co;
    bfp_ckpt_opts o;
    bfp_ckpt_summary s;
    progress_state ps = {0, 0};
    progress_hook hook = {NULL, -1, 0};
    int c;
    char err[CLI_ERRLEN] = "";

    memset(&o, 0, sizeof o);
    cli_opts_init(&co);
    while ((c = getopt_long(argc, argv, ":f:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_LAYOUT:
            if (!bfp_ckpt_layout_from_name(optarg, &o.layout)) {
                cli_error("unknown layout '%s' (bfp, compressed-tensors, gguf)", optarg);
                return CLI_EXIT_ERR;
            }
            break;
        case OPT_INCLUDE:
            o.include_re = optarg;
            break;
        case OPT_EXCLUDE:
            o.exclude_re = optarg;
            break;
        case OPT_REPORT:
            o.report = 1;
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0) {
                cli_error("unknown device '%s' (cpu, cuda)", optarg);
                return CLI_EXIT_ERR;
            }
            o.device_cuda = strcmp(optarg, "cuda") == 0;
            break;
        default: {
            int r = cli_opts_take(&co, c, optarg, "convert", cmd_ckpt_usage, argv);
            if (r != CLI_OPT_TAKEN)
                return r;
        }
        }
    }
    o.format = co.fmt;
    o.force = co.force;
    if (!co.have_fmt) {
        cli_error("convert needs -f FORMAT (see 'bfp formats')");
        return CLI_EXIT_ERR;
    }
    if (cli_want_args("convert", argc - optind, 2, "IN and OUT") != 0)
        return CLI_EXIT_ERR;
    const bfp_format_info *f = bfp_format_get(o.format);
    const char *why;
    if (cli_quant_opts_check(&co.qo, f) != 0)
        return CLI_EXIT_ERR;
    if (!bfp_ckpt_layout_supports(o.layout, o.format, &why)) {
        cli_error("%s cannot be written in the %s layout: %s", f->name,
                  bfp_ckpt_layout_name(o.layout), why);
        return CLI_EXIT_ERR;
    }
    o.opts = co.qo.opts;
    o.ranks = ranks;
    /* under mpirun no bar: a rank sees only its share */
    hook.bar = !ranks && isatty(STDERR_FILENO) ? &ps : NULL;
    hook.die_after = die_after(ranks ? ranks->rank : 0);
    if (hook.bar || hook.die_after >= 0) {
        o.progress = on_progress;
        o.progress_ctx = &hook;
    }
    const char *in = argv[optind], *out = argv[optind + 1];
    bfp_status st = bfp_ckpt_convert(in, out, &o, &s, err, sizeof err);
    if (ps.drawn && st != BFP_OK)
        fputc('\n', stderr);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        bfp_ckpt_summary_free(&s);
        return CLI_EXIT_ERR;
    }
    int rc = CLI_EXIT_OK;
    if (co.json)
        rc = print_json(in, out, &o, &s);
    else
        print_text(&o, &s);
    bfp_ckpt_summary_free(&s);
    return rc;
}

/* Ranks other than 0 print nothing: rank 0 prints the summary, or the
 * first failing rank's message that the ranks agreed on. */
static void quiet(void)
{
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return;
    fflush(stdout);
    fflush(stderr);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

int cmd_ckpt(int argc, char **argv)
{
    bfp_ckpt_ranks ranks;
    char err[CLI_ERRLEN] = "";
    int m = ckpt_mpi_begin(&ranks, err, sizeof err);
    if (m < 0) {
        if (err[0])
            cli_error("%s", err);
        return CLI_EXIT_ERR;
    }
    if (m > 0 && ranks.rank != 0)
        quiet();
    int rc = convert_main(argc, argv, m > 0 ? &ranks : NULL);
    ckpt_mpi_end();
    return rc;
}

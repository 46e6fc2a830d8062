/*
 * cmd_bench.c - `bfp bench`: throughput of bfp_quantize / bfp_dequantize for
 * every format and direction against memcpy of the same buffer, measured
 * in the same run. Timings inform; they never decide pass or fail.
 */
#define _POSIX_C_SOURCE 200809L

#include "cli_util.h"
#include "commands.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char cmd_bench_usage[] =
    "usage: bfp bench [--threads N] [--json] [-f FORMAT,...] [--mib N] [--reps N]\n"
    "\n"
    "Time quantization from float32 and bfloat16 and dequantization to\n"
    "float32 and bfloat16, for every format (or those of -f), on one tensor\n"
    "of 64 MiB of float32 (4096 x 4096 values, Gaussian with block-to-block\n"
    "scales and outliers; the bfloat16 input holds the same values rounded,\n"
    "32 MiB). Beside each measurement, memcpy of the float-side buffer (the\n"
    "input of a quantization, the output of a dequantization) is timed in\n"
    "the same run, interleaved. Each figure is the best of --reps runs.\n"
    "\n"
    "  GB/s         (input bytes + output bytes) / time; the quantized side\n"
    "               counts codes, scales, meta and tensor scale\n"
    "  memcpy GB/s  2 x buffer bytes / time (read + write)\n"
    "  ratio        GB/s / memcpy GB/s\n"
    "\n"
    "  --threads N        threads per call: bfp_options.threads for quantize,\n"
    "                     bfp_set_threads() for dequantize; 0 = automatic (default 1;\n"
    "                     memcpy always runs on one thread)\n"
    "  --json             one JSON array of records {\"format\", \"op\",\n"
    "                     \"dtype\", \"threads\", \"gbps\", \"memcpy_gbps\"}\n"
    "  -f, --formats LIST comma-separated format names (default: all)\n"
    "  --mib N            float32 tensor size in MiB (default 64)\n"
    "  --reps N           runs per figure, best kept (default 5)\n"
    "  -h, --help         this text\n"
    "\n"
    "BFP_ISA=generic|avx2|avx512 picks the kernel set (see bfp_isa()).\n";

enum { OPT_THREADS = 0x200, OPT_MIB, OPT_REPS };

typedef struct {
    const bfp_format_info *f;
    const char *op;
    bfp_dtype dtype;
    int threads;
    double gbps, memcpy_gbps;
} record;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* xorshift64* */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* Weight-like data: Gaussian, a scale per 64 values, a rare outlier. */
static void fill(float *x, size_t n)
{
    uint64_t s = 0x5EED5EEDull;
    float scale = 1.0f;
    for (size_t i = 0; i < n; i++) {
        if (i % 64 == 0)
            scale = ldexpf(1.0f, (int)(rng_next(&s) >> 61) - 4);
        double u = ((double)(rng_next(&s) >> 11) + 0.5) * 0x1p-53;
        double v = ((double)(rng_next(&s) >> 11) + 0.5) * 0x1p-53;
        float g = (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
        x[i] = g * scale * ((rng_next(&s) & 1023) == 0 ? 40.0f : 1.0f);
    }
}

/* dequantize has no options: its automatic thread count is capped instead */
static void set_dequant_threads(int threads)
{
    bfp_set_threads(threads > 0 ? threads : 0);
}

typedef struct {
    size_t rows, cols, n;
    int threads, reps;
    float *x;       /* float32 input */
    uint16_t *xb;   /* the same values as bfloat16 */
    void *y;        /* decoded values (float32 or bfloat16) */
    void *copy;     /* memcpy destination */
    uint8_t *codes, *scales, *meta;
    float ts;
} bench;

/* One figure: best of reps for the operation and for memcpy of `bytes`
 * from `from`, interleaved. Returns -1 (reported) if a call fails. */
static int measure(bench *b, const bfp_format_info *f, int quantize, bfp_dtype dt,
                   record *rec)
{
    bfp_plane_sizes sz;
    bfp_plane_sizes_for(f->id, b->rows, b->cols, &sz);
    uint8_t *meta = f->meta_bytes ? b->meta : NULL;
    bfp_planes out = {b->codes, b->scales, meta, &b->ts};
    bfp_const_planes in = {b->codes, b->scales, meta, &b->ts};
    bfp_options o;
    bfp_options_init(&o);
    o.threads = b->threads;
    size_t fbytes = b->n * bfp_dtype_size(dt);
    size_t qbytes = sz.codes + sz.scales + sz.meta + sz.tensor_scale;
    const void *src = dt == BFP_DTYPE_F32 ? (const void *)b->x : (const void *)b->xb;
    double best = INFINITY, best_copy = INFINITY;
    for (int r = 0; r < b->reps; r++) {
        double t = now_s();
        bfp_status st = quantize
                            ? bfp_quantize(f->id, dt, src, b->rows, b->cols, &o, &out, NULL)
                            : bfp_dequantize(f->id, &in, b->rows, b->cols, dt, b->y);
        t = now_s() - t;
        if (st != BFP_OK) {
            cli_status_error(quantize ? "quantize" : "dequantize", st);
            return -1;
        }
        best = t < best ? t : best;
        t = now_s();
        memcpy(b->copy, quantize ? src : b->y, fbytes);
        t = now_s() - t;
        best_copy = t < best_copy ? t : best_copy;
    }
    rec->f = f;
    rec->op = quantize ? "quantize" : "dequantize";
    rec->dtype = dt;
    rec->threads = b->threads;
    rec->gbps = (double)(fbytes + qbytes) / best / 1e9;
    rec->memcpy_gbps = 2.0 * (double)fbytes / best_copy / 1e9;
    return 0;
}

static int print_json(const record *r, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            goto nomem;
        cJSON_AddItemToArray(arr, o);
        if (!cJSON_AddStringToObject(o, "format", r[i].f->name) ||
            !cJSON_AddStringToObject(o, "op", r[i].op) ||
            !cJSON_AddStringToObject(o, "dtype", bfp_dtype_name(r[i].dtype)) ||
            !cJSON_AddNumberToObject(o, "threads", r[i].threads) ||
            cli_json_number(o, "gbps", r[i].gbps) != 0 ||
            cli_json_number(o, "memcpy_gbps", r[i].memcpy_gbps) != 0)
            goto nomem;
    }
    return cli_json_emit(arr, 1);
nomem:
    return cli_json_emit(arr, 0);
}

static void print_row(const record *r)
{
    printf("%-14s %-10s %-5s %7d %8.2f %8.2f %6.0f%%\n", r->f->name, r->op,
           bfp_dtype_name(r->dtype), r->threads, r->gbps, r->memcpy_gbps,
           100.0 * r->gbps / r->memcpy_gbps);
    fflush(stdout);
}

static int run(bench *b, const bfp_format *formats, int nformats, int json)
{
    record *recs = cli_alloc((size_t)nformats * 4 * sizeof *recs, "the results");
    if (!recs)
        return CLI_EXIT_ERR;
    size_t nrec = 0;
    if (!json) {
        char th[32];
        if (b->threads > 0)
            snprintf(th, sizeof th, "%d thread%s", b->threads, b->threads == 1 ? "" : "s");
        else
            snprintf(th, sizeof th, "automatic threads");
        printf("bfp bench: %zu x %zu values (%zu MiB float32), %s per call, kernels %s, "
               "best of %d\n",
               b->rows, b->cols, b->n * 4 >> 20, th, bfp_isa(), b->reps);
        printf("%-14s %-10s %-5s %7s %8s %8s %7s\n", "format", "op", "dtype", "threads",
               "GB/s", "memcpy", "ratio");
    }
    set_dequant_threads(b->threads);
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < nformats && rc == CLI_EXIT_OK; i++) {
        const bfp_format_info *f = bfp_format_get(formats[i]);
        static const struct {
            int quantize;
            bfp_dtype dt;
        } ops[] = {{1, BFP_DTYPE_F32}, {1, BFP_DTYPE_BF16}, {0, BFP_DTYPE_F32}, {0, BFP_DTYPE_BF16}};
        /* the planes that dequantization reads come from the float32 input */
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            if (!ops[k].quantize && k == 2) {
                bfp_options o;
                bfp_options_init(&o);
                o.threads = b->threads;
                bfp_planes out = {b->codes, b->scales, f->meta_bytes ? b->meta : NULL, &b->ts};
                bfp_quantize(f->id, BFP_DTYPE_F32, b->x, b->rows, b->cols, &o, &out, NULL);
            }
            if (measure(b, f, ops[k].quantize, ops[k].dt, &recs[nrec]) != 0) {
                rc = CLI_EXIT_ERR;
                break;
            }
            if (!json)
                print_row(&recs[nrec]);
            nrec++;
        }
    }
    if (rc == CLI_EXIT_OK && json)
        rc = print_json(recs, nrec);
    free(recs);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"threads", required_argument, NULL, OPT_THREADS},
        {"json", no_argument, NULL, OPT_JSON},
        {"formats", required_argument, NULL, 'f'},
        {"mib", required_argument, NULL, OPT_MIB},
        {"reps", required_argument, NULL, OPT_REPS},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int total = bfp_format_count(), nformats = total, json = 0, c;
    bfp_format *formats = cli_alloc((size_t)total * sizeof *formats, "the format list");
    if (!formats)
        return CLI_EXIT_ERR;
    for (int i = 0; i < total; i++)
        formats[i] = bfp_format_at(i)->id;
    uint64_t threads = 1, mib = 64, reps = 5;
    int rc = CLI_EXIT_ERR;
    bench b;
    memset(&b, 0, sizeof b);
    while ((c = getopt_long(argc, argv, ":f:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_THREADS:
            if (cli_parse_u64(optarg, "--threads", &threads) != 0)
                goto out;
            if (threads > 256) {
                cli_error("--threads must be at most 256, got %s", optarg);
                goto out;
            }
            break;
        case OPT_MIB:
            if (cli_parse_u64(optarg, "--mib", &mib) != 0)
                goto out;
            if (mib < 1 || mib > 4096) {
                cli_error("--mib must be between 1 and 4096, got %s", optarg);
                goto out;
            }
            break;
        case OPT_REPS:
            if (cli_parse_u64(optarg, "--reps", &reps) != 0)
                goto out;
            if (reps < 1 || reps > 1000) {
                cli_error("--reps must be between 1 and 1000, got %s", optarg);
                goto out;
            }
            break;
        case 'f':
            if (cli_parse_format_list(optarg, formats, &nformats) != 0)
                goto out;
            break;
        case OPT_JSON:
            json = 1;
            break;
        case OPT_HELP:
            fputs(cmd_bench_usage, stdout);
            rc = CLI_EXIT_OK;
            goto out;
        default:
            cli_getopt_fail("bench", c, argv);
            goto out;
        }
    }
    if (optind < argc) {
        cli_error("bench takes no arguments, got '%s'", argv[optind]);
        goto out;
    }
    b.threads = (int)threads;
    b.reps = (int)reps;
    b.cols = 4096;
    b.rows = (size_t)mib * (1 << 20) / 4 / b.cols;
    b.n = b.rows * b.cols;
    bfp_plane_sizes big = {0};
    for (int i = 0; i < nformats; i++) { /* the largest planes of the formats asked for */
        bfp_plane_sizes sz;
        bfp_plane_sizes_for(formats[i], b.rows, b.cols, &sz);
        big.codes = sz.codes > big.codes ? sz.codes : big.codes;
        big.scales = sz.scales > big.scales ? sz.scales : big.scales;
        big.meta = sz.meta > big.meta ? sz.meta : big.meta;
    }
    b.x = cli_alloc(b.n * 4, "the float32 input");
    b.xb = cli_alloc(b.n * 2, "the bfloat16 input");
    b.y = cli_alloc(b.n * 4, "the output");
    b.copy = cli_alloc(b.n * 4, "the memcpy buffer");
    b.codes = cli_alloc(big.codes, "the codes plane");
    b.scales = cli_alloc(big.scales, "the scales plane");
    b.meta = cli_alloc(big.meta ? big.meta : 1, "the meta plane");
    if (!b.x || !b.xb || !b.y || !b.copy || !b.codes || !b.scales || !b.meta)
        goto out;
    fill(b.x, b.n);
    for (size_t i = 0; i < b.n; i++)
        b.xb[i] = bfp_f32_to_bf16(b.x[i]);
    memset(b.y, 0, b.n * 4); /* touch every page before timing */
    memset(b.copy, 0, b.n * 4);
    memset(b.codes, 0, big.codes);
    memset(b.scales, 0, big.scales);
    memset(b.meta, 0, big.meta ? big.meta : 1);
    rc = run(&b, formats, nformats, json);
out:
    free(b.x);
    free(b.xb);
    free(b.y);
    free(b.copy);
    free(b.codes);
    free(b.scales);
    free(b.meta);
    free(formats);
    return rc;
}

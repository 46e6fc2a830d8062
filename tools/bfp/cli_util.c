#define _POSIX_C_SOURCE 200809L

#include "cli_util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static void vreport(const char *kind, const char *fmt, va_list ap)
{
    char msg[1024], out[4 * sizeof msg];
    size_t o = 0;
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* One line, and no control character reaches the terminal: names from
     * files come quoted (bfp_io_quote_name), this catches what is left. */
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\n' || *p == '\r')
            out[o++] = ' ';
        else if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
    fflush(stdout);
    fprintf(stderr, "bfp: %s: %s\n", kind, out);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("error", fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("warning", fmt, ap);
    va_end(ap);
}

void cli_status_error(const char *what, bfp_status st)
{
    cli_error("%s: %s", what, bfp_status_str(st));
}

void cli_io_error(const char *err, bfp_status st)
{
    cli_error("%s", err && err[0] ? err : bfp_status_str(st));
}

void *cli_alloc(size_t n, const char *what)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        cli_error("out of memory allocating %zu bytes for %s", n, what);
    return p;
}

/* ---- getopt ---------------------------------------------------------- */

void cli_getopt_reset(void)
{
    opterr = 0; /* our messages, one line each */
    optind = 1;
}

int cli_getopt_fail(const char *cmd, int c, char *const *argv)
{
    const char *arg = argv[optind - 1];
    int shortopt = optopt > 0 && optopt < 128 && isgraph(optopt);
    if (c == ':') {
        if (shortopt)
            cli_error("%s: option '-%c' needs a value", cmd, optopt);
        else
            cli_error("%s: option '%s' needs a value", cmd, arg);
    } else if (shortopt) {
        cli_error("%s: unknown option '-%c' (see 'bfp help %s')", cmd, optopt,
                  cmd);
    } else {
        cli_error("%s: unknown or malformed option '%s' (see 'bfp help %s')",
                  cmd, arg, cmd);
    }
    return -1;
}

void cli_opts_init(cli_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_quant_opts_init(&o->qo);
    o->dtype = BFP_DTYPE_F32;
}

int cli_opts_take(cli_opts *o, int c, const char *arg, const char *cmd,
                  const char *usage, char *const *argv)
{
    int r = cli_quant_opts_parse(&o->qo, c, arg);
    if (r != 0)
        return r > 0 ? CLI_OPT_TAKEN : CLI_EXIT_ERR;
    switch (c) {
    case 'f':
        if (cli_parse_format(arg, &o->fmt) != 0)
            return CLI_EXIT_ERR;
        o->have_fmt = 1;
        return CLI_OPT_TAKEN;
    case 's':
        if (cli_parse_shape(arg, &o->rows, &o->cols) != 0)
            return CLI_EXIT_ERR;
        o->have_shape = 1;
        return CLI_OPT_TAKEN;
    case 't':
        if (cli_parse_dtype(arg, 1, &o->dtype) != 0)
            return CLI_EXIT_ERR;
        o->have_dtype = 1;
        return CLI_OPT_TAKEN;
    case OPT_NAME:
        o->name = arg;
        return CLI_OPT_TAKEN;
    case OPT_JSON:
        o->json = 1;
        return CLI_OPT_TAKEN;
    case OPT_FORCE:
        o->force = 1;
        return CLI_OPT_TAKEN;
    case OPT_HELP:
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    default:
        cli_getopt_fail(cmd, c, argv);
        return CLI_EXIT_ERR;
    }
}

int cli_want_args(const char *cmd, int got, int want, const char *what)
{
    if (got == want)
        return 0;
    cli_error("%s needs %s, got %d argument%s", cmd, what, got,
              got == 1 ? "" : "s");
    return -1;
}

/* ---- the environment ----------------------------------------------- */

int cli_apply_environment(void)
{
    const char *isa = getenv("BFP_ISA");
    if (isa && *isa && bfp_set_isa(isa) != BFP_OK) {
        cli_error("BFP_ISA='%s' is not one of generic, avx2, avx512, auto", isa);
        return -1;
    }
    const char *threads = getenv("BFP_THREADS");
    if (threads && *threads) {
        char *end;
        errno = 0;
        long n = strtol(threads, &end, 10);
        if (errno || *end || n < 0 || n > INT_MAX || bfp_set_threads((int)n) != BFP_OK) {
            cli_error("BFP_THREADS='%s' is not a thread count (an integer >= 0; 0 = automatic)",
                      threads);
            return -1;
        }
    }
    return 0;
}

/* ---- quantization options ------------------------------------------- */

void cli_quant_opts_init(cli_quant_opts *q)
{
    memset(q, 0, sizeof *q);
    bfp_options_init(&q->opts);
}

static const struct {
    const char *name;
    bfp_rounding value;
} roundings[] = {
    {"rne", BFP_ROUND_NEAREST_EVEN},
    {"away", BFP_ROUND_NEAREST_AWAY},
    {"zero", BFP_ROUND_TOWARD_ZERO},
    {"stochastic", BFP_ROUND_STOCHASTIC},
};

static const struct {
    const char *name;
    bfp_scale_mode value;
} scale_modes[] = {
    {"floor", BFP_SCALE_FLOOR},
    {"ceil", BFP_SCALE_CEIL},
    {"even", BFP_SCALE_EVEN},
    {"rceil", BFP_SCALE_RCEIL},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int cli_quant_opts_parse(cli_quant_opts *q, int c, const char *arg)
{
    size_t i;
    switch (c) {
    case OPT_ROUNDING:
        for (i = 0; i < COUNT(roundings); i++)
            if (strcasecmp(arg, roundings[i].name) == 0) {
                q->opts.rounding = roundings[i].value;
                return 1;
            }
        cli_error("unknown rounding '%s' (valid: rne, away, zero, stochastic)",
                  arg);
        return -1;
    case OPT_SEED:
        if (cli_parse_u64(arg, "--seed", &q->opts.seed) != 0)
            return -1;
        q->seed_set = 1;
        return 1;
    case OPT_SCALE_MODE:
        for (i = 0; i < COUNT(scale_modes); i++)
            if (strcasecmp(arg, scale_modes[i].name) == 0) {
                q->opts.scale_mode = scale_modes[i].value;
                q->scale_mode_set = 1;
                return 1;
            }
        cli_error("unknown scale mode '%s' (valid: floor, ceil, even, rceil)",
                  arg);
        return -1;
    case OPT_NO_TENSOR_SCALE:
        q->opts.nvfp4_no_tensor_scale = 1;
        return 1;
    case OPT_2D:
        q->opts.nvfp4_2d = 1;
        return 1;
    default:
        return 0;
    }
}

/* The option as the user spelled it, for messages. */
static const char *option_spelling(const cli_quant_opts *q, bfp_option opt, char *buf,
                                   size_t len)
{
    switch (opt) {
    case BFP_OPT_ROUNDING: return "--rounding";
    case BFP_OPT_SCALE_MODE:
        snprintf(buf, len, "--scale-mode %s", cli_scale_mode_name(q->opts.scale_mode));
        return buf;
    case BFP_OPT_NO_TENSOR_SCALE: return "--no-tensor-scale";
    case BFP_OPT_2D: return "--2d";
    case BFP_OPT_NONE: break;
    }
    return "an option";
}

int cli_quant_opts_check(const cli_quant_opts *q, const bfp_format_info *f)
{
    if (q->seed_set && q->opts.rounding != BFP_ROUND_STOCHASTIC) {
        cli_error("--seed needs --rounding stochastic");
        return -1;
    }
    if (!f)
        return 0;
    /* the library holds the rules (bfp_options_check); we only spell them */
    bfp_option bad;
    const char *why;
    char buf[64];
    if (bfp_options_check(f->id, &q->opts, &bad, &why) != BFP_OK) {
        cli_error("%s %s, not %s", option_spelling(q, bad, buf, sizeof buf), why, f->name);
        return -1;
    }
    return 0;
}

static void option_reset(bfp_options *o, bfp_option opt)
{
    switch (opt) {
    case BFP_OPT_ROUNDING: o->rounding = BFP_ROUND_DEFAULT; break;
    case BFP_OPT_SCALE_MODE: o->scale_mode = BFP_SCALE_DEFAULT; break;
    case BFP_OPT_NO_TENSOR_SCALE: o->nvfp4_no_tensor_scale = 0; break;
    case BFP_OPT_2D: o->nvfp4_2d = 0; break;
    case BFP_OPT_NONE: break;
    }
}

bfp_options cli_quant_opts_for(const cli_quant_opts *q,
                               const bfp_format_info *f)
{
    bfp_options o = q->opts;
    bfp_option bad;
    /* each field the library refuses for f goes back to its default */
    for (int i = 0; i < 8 && bfp_options_check(f->id, &o, &bad, NULL) != BFP_OK &&
                    bad != BFP_OPT_NONE;
         i++)
        option_reset(&o, bad);
    return o;
}

const char *cli_rounding_name(bfp_rounding r, const bfp_format_info *f)
{
    if (r == BFP_ROUND_DEFAULT)
        r = f ? f->default_rounding : BFP_ROUND_NEAREST_EVEN;
    for (size_t i = 0; i < COUNT(roundings); i++)
        if (roundings[i].value == r)
            return roundings[i].name;
    return "?";
}

const char *cli_scale_mode_name(bfp_scale_mode m)
{
    if (m == BFP_SCALE_DEFAULT) /* FLOOR is MX's default, the others' only rule */
        m = BFP_SCALE_FLOOR;
    for (size_t i = 0; i < COUNT(scale_modes); i++)
        if (scale_modes[i].value == m)
            return scale_modes[i].name;
    return "?";
}

const char *cli_family_name(bfp_family fam)
{
    return bfp_family_name(fam);
}

/* ---- formats, shapes, numbers ---------------------------------------- */

static void list_format_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                         f->name);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}

int cli_parse_format(const char *s, bfp_format *out)
{
    if (bfp_format_from_name(s, out) == BFP_OK)
        return 0;
    char names[1024];
    list_format_names(names, sizeof names);
    cli_error("unknown format '%s' (valid: %s)", s, names);
    return -1;
}

int cli_parse_format_list(const char *s, bfp_format *out, int *n)
{
    int total = bfp_format_count();
    char *copy = cli_alloc(strlen(s) + 1, "the format list");
    char *want = cli_alloc((size_t)total, "the format list");
    if (!copy || !want) {
        free(copy);
        free(want);
        return -1;
    }
    strcpy(copy, s);
    memset(want, 0, (size_t)total);
    int rc = 0;
    int any = 0;
    for (char *tok = copy, *next; tok; tok = next) {
        bfp_format id;
        if ((next = strchr(tok, ',')) != NULL)
            *next++ = '\0';
        if (!*tok && s[strspn(s, ",")] == '\0') {
            break; /* no name at all: reported below */
        } else if (!*tok) { /* "mxfp4,", "mxfp4,,nvfp4": a lost name */
            cli_error("format list '%s' has an empty entry", s);
            rc = -1;
            break;
        }
        if (cli_parse_format(tok, &id) != 0) {
            rc = -1;
            break;
        }
        for (int i = 0; i < total; i++)
            if (bfp_format_at(i)->id == id)
                want[i] = 1;
        any = 1;
    }
    if (rc == 0 && !any) {
        cli_error("-f needs at least one format name");
        rc = -1;
    }
    *n = 0;
    for (int i = 0; rc == 0 && i < total; i++)
        if (want[i])
            out[(*n)++] = bfp_format_at(i)->id;
    free(copy);
    free(want);
    return rc;
}

/* A positive decimal size_t with nothing else in [s, end). */
static int parse_dim(const char *s, const char *end, size_t *out)
{
    size_t v = 0;
    if (s == end)
        return -1;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        size_t d = (size_t)(*p - '0');
        if (v > (SIZE_MAX - d) / 10)
            return -2;
        v = v * 10 + d;
    }
    if (v == 0)
        return -3;
    *out = v;
    return 0;
}

int cli_parse_shape(const char *s, size_t *rows, size_t *cols)
{
    const char *x = strpbrk(s, "xX");
    const char *end = s + strlen(s);
    int r1 = 0, r2;
    size_t r = 1, c = 0;
    if (x) {
        r1 = parse_dim(s, x, &r);
        r2 = parse_dim(x + 1, end, &c);
    } else {
        r2 = parse_dim(s, end, &c);
    }
    int r0 = r1 ? r1 : r2;
    if (r0 == -2 || (r0 == 0 && c > SIZE_MAX / r / 4)) {
        cli_error("shape '%s' is too large", s);
        return -1;
    }
    if (r0 == -3) {
        cli_error("shape '%s' has a zero dimension", s);
        return -1;
    }
    if (r0 != 0) {
        cli_error("bad shape '%s' (want ROWSxCOLS or COLS, positive integers)",
                  s);
        return -1;
    }
    *rows = r;
    *cols = c;
    return 0;
}

int cli_parse_dtype(const char *s, int allow_f16, bfp_dtype *out)
{
    if (strcasecmp(s, "f32") == 0 || strcasecmp(s, "float32") == 0)
        *out = BFP_DTYPE_F32;
    else if (strcasecmp(s, "bf16") == 0 || strcasecmp(s, "bfloat16") == 0)
        *out = BFP_DTYPE_BF16;
    else if (allow_f16 &&
             (strcasecmp(s, "f16") == 0 || strcasecmp(s, "float16") == 0))
        *out = BFP_DTYPE_F16;
    else {
        cli_error("unknown dtype '%s' (valid: %s)", s,
                  allow_f16 ? "f32, bf16, f16" : "f32, bf16");
        return -1;
    }
    return 0;
}

int cli_parse_u64(const char *s, const char *what, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (!isdigit((unsigned char)s[0])) {
        cli_error("%s wants a non-negative integer, not '%s'", what, s);
        return -1;
    }
    unsigned long long v = strtoull(s, &end, 0);
    if (errno == ERANGE) {
        cli_error("%s value '%s' does not fit in 64 bits", what, s);
        return -1;
    }
    if (*end != '\0') {
        cli_error("%s wants a non-negative integer, not '%s'", what, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

const char *cli_shape_str(const size_t *shape, size_t ndim, char *buf,
                          size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    if (ndim == 0)
        snprintf(buf, len, "scalar");
    for (size_t i = 0; i < ndim && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%zu", i ? "x" : "",
                         shape[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

float *cli_to_f32(bfp_dtype dtype, const void *src, size_t n)
{
    float *dst = cli_alloc(n * sizeof(float), "float32 values");
    if (!dst)
        return NULL;
    const unsigned char *b = src;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        switch (dtype) {
        case BFP_DTYPE_F32:
            memcpy(&dst[i], b + 4 * i, 4);
            break;
        case BFP_DTYPE_BF16:
            memcpy(&h, b + 2 * i, 2);
            dst[i] = bfp_bf16_to_f32(h);
            break;
        case BFP_DTYPE_F16:
            memcpy(&h, b + 2 * i, 2);
            dst[i] = bfp_f16_to_f32(h);
            break;
        default:
            cli_error("unsupported dtype %d", (int)dtype);
            free(dst);
            return NULL;
        }
    }
    return dst;
}

/* ---- quantization ---------------------------------------------------- */

int cli_quantize(bfp_format fmt, const bfp_options *opts, bfp_dtype dtype,
                 const void *src, size_t ndim, const size_t *shape,
                 bfp_qtensor *q, bfp_stats *stats)
{
    char err[CLI_ERRLEN] = "";
    const bfp_format_info *f = bfp_format_get(fmt);
    bfp_status st = bfp_qtensor_alloc(q, fmt, ndim, shape, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        return -1;
    }
    q->options = *opts;
    bfp_planes planes = {q->codes, q->scales, q->meta, &q->tensor_scale};
    st = bfp_quantize(fmt, dtype, src, q->rows, q->cols, opts, &planes, stats);
    if (st != BFP_OK) {
        cli_error("quantizing to %s: %s", f ? f->name : "?",
                  bfp_status_str(st));
        return -1;
    }
    /* recorded in the container, as bfp.save() records them */
    q->has_source_dtype = 1;
    q->source_dtype = dtype;
    if (stats) {
        q->has_stats = 1;
        q->stats = *stats;
    }
    return 0;
}

float *cli_dequantize_f32(const bfp_qtensor *q)
{
    float *y = cli_alloc(q->rows * q->cols * sizeof(float), "the dequantized values");
    if (!y)
        return NULL;
    bfp_const_planes planes = bfp_qtensor_planes(q);
    bfp_status st = bfp_dequantize_to_f32(q->format, &planes, q->rows,
                                          q->cols, y);
    if (st != BFP_OK) {
        cli_status_error("dequantizing", st);
        free(y);
        return NULL;
    }
    return y;
}

int cli_error_stats(const bfp_qtensor *q, const float *x, const float *y,
                    bfp_error_stats *out)
{
    bfp_const_planes p = bfp_qtensor_planes(q);
    bfp_status st = bfp_error_stats_quantized(q->format, &p, q->rows, q->cols, x, y, out);
    if (st != BFP_OK) {
        cli_status_error("computing the error statistics", st);
        return -1;
    }
    return 0;
}

/* ---- paths ----------------------------------------------------------- */

int cli_path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int cli_check_not_input(const char *in_path, const char *out_path)
{
    if (!cli_same_file(in_path, out_path))
        return 0;
    cli_error("OUTPUT %s is the INPUT file %s; write to another file",
              out_path, in_path);
    return -1;
}

int cli_check_output(const char *path, int force)
{
    if (!force && cli_path_exists(path)) {
        cli_error("%s exists (use --force to replace it)", path);
        return -1;
    }
    return 0;
}

int cli_read_raw(const char *path, size_t rows, size_t cols, bfp_dtype dtype,
                 void **data)
{
    char err[CLI_ERRLEN] = "";
    size_t size = 0, need = rows * cols * bfp_dtype_size(dtype);
    *data = NULL;
    bfp_status st = bfp_io_read_file(path, data, &size, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        return -1;
    }
    if (size != need) {
        cli_error("%s has %zu bytes, but %zux%zu %s values need %zu bytes",
                  path, size, rows, cols, bfp_dtype_name(dtype), need);
        free(*data);
        *data = NULL;
        return -1;
    }
    return 0;
}

int cli_has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcasecmp(path + n - m, suffix) == 0;
}

char *cli_join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir);
    int slash = n > 0 && dir[n - 1] == '/';
    char *p = cli_alloc(n + strlen(name) + 2, "a path");
    if (p)
        sprintf(p, "%s%s%s", dir, slash ? "" : "/", name);
    return p;
}

int cli_json_number(cJSON *obj, const char *key, double v)
{
    cJSON *item = isfinite(v) ? cJSON_AddNumberToObject(obj, key, v)
                              : cJSON_AddNullToObject(obj, key);
    return item ? 0 : -1;
}

int cli_json_emit(cJSON *root, int built_ok)
{
    char *text = root && built_ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        cli_error("out of memory building the JSON output");
        return CLI_EXIT_ERR;
    }
    puts(text);
    free(text);
    return CLI_EXIT_OK;
}

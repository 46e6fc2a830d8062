#define _POSIX_C_SOURCE 200809L

#include "cli_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static void vreport(const char *kind, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* one line, whatever a library message held */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stdout);
    fprintf(stderr, "bfp: %s: %s\n", kind, msg);
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

int cli_want_args(const char *cmd, int got, int want, const char *what)
{
    if (got == want)
        return 0;
    cli_error("%s needs %s, got %d argument%s", cmd, what, got,
              got == 1 ? "" : "s");
    return -1;
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

/* "nvfp4 and nvfp4+": the formats whose table rows accept opt. */
static const char *formats_accepting(bfp_option opt, char *buf, size_t size)
{
    int n = 0, total = 0;
    for (int i = 0; i < bfp_format_count(); i++)
        total += bfp_format_accepts(bfp_format_at(i)->id, opt);
    buf[0] = 0;
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *f = bfp_format_at(i);
        if (!bfp_format_accepts(f->id, opt))
            continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", n == 0 ? "" : n + 1 == total ? " and " : ", ",
                 f->name);
        n++;
    }
    return buf;
}

int cli_quant_opts_check(const cli_quant_opts *q, const bfp_format_info *f)
{
    char list[512];
    if (q->seed_set && q->opts.rounding != BFP_ROUND_STOCHASTIC) {
        cli_error("--seed needs --rounding stochastic");
        return -1;
    }
    if (!f)
        return 0;
    if (q->opts.nvfp4_2d && !bfp_format_accepts(f->id, BFP_OPT_2D)) {
        cli_error("--2d applies only to %s, not %s",
                  formats_accepting(BFP_OPT_2D, list, sizeof list), f->name);
        return -1;
    }
    if (q->opts.nvfp4_no_tensor_scale && !bfp_format_accepts(f->id, BFP_OPT_NO_TENSOR_SCALE)) {
        cli_error("--no-tensor-scale applies only to %s, not %s",
                  formats_accepting(BFP_OPT_NO_TENSOR_SCALE, list, sizeof list), f->name);
        return -1;
    }
    if (q->opts.scale_mode != BFP_SCALE_FLOOR && !bfp_format_accepts(f->id, BFP_OPT_SCALE_MODE)) {
        cli_error("--scale-mode %s applies only to %s, not %s (it uses its own scale rule)",
                  cli_scale_mode_name(q->opts.scale_mode),
                  formats_accepting(BFP_OPT_SCALE_MODE, list, sizeof list), f->name);
        return -1;
    }
    /* anything else the library refuses (the checks above name the flag) */
    bfp_status st = bfp_check_options(f->id, &q->opts);
    if (st != BFP_OK) {
        cli_error("options not accepted for %s: %s", f->name, bfp_status_str(st));
        return -1;
    }
    return 0;
}

bfp_options cli_quant_opts_for(const cli_quant_opts *q,
                               const bfp_format_info *f)
{
    bfp_options o = q->opts;
    if (!bfp_format_accepts(f->id, BFP_OPT_2D))
        o.nvfp4_2d = 0;
    if (!bfp_format_accepts(f->id, BFP_OPT_NO_TENSOR_SCALE))
        o.nvfp4_no_tensor_scale = 0;
    if (!bfp_format_accepts(f->id, BFP_OPT_SCALE_MODE))
        o.scale_mode = BFP_SCALE_FLOOR;
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
    char *save = NULL;
    int any = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        bfp_format id;
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

int cli_error_stats(const float *x, const float *y, size_t n,
                    bfp_error_stats *out)
{
    size_t i = 0;
    while (i < n && isfinite(y[i]))
        i++;
    if (i == n) {
        bfp_error_stats_f32(x, y, n, out);
    } else {
        /* The core skips only non-finite x; hide x where y is NaN. */
        float *masked = cli_alloc(n * sizeof(float), "the error statistics");
        if (!masked)
            return -1;
        for (i = 0; i < n; i++)
            masked[i] = isfinite(y[i]) ? x[i] : NAN;
        bfp_error_stats_f32(masked, y, n, out);
        free(masked);
    }
    if (out->count == 0) /* nothing compared: no statistic, not "exact" */
        out->rmse = out->sqnr_db = out->max_abs_err = NAN;
    return 0;
}

/* ---- paths ----------------------------------------------------------- */

int cli_path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
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

/*
 * cmd_verify.c - `bfp verify`: check the planes another implementation (the
 * device or kernel under test, DUT) wrote against the golden model. Reads
 * INPUT.bin, quantizes it with the reference, reads DUT_DIR in one of the
 * accepted layouts, converts it to planar and compares with bfp_verify():
 * verdict, per-plane counts, the first mismatches, likely causes, and the
 * reconstruction error of both sides. Exit 0 identical, 1 differ, 2 error.
 */
#define _POSIX_C_SOURCE 200809L

#include "bfp_ckpt.h"
#include "cli_util.h"
#include "verify_ct.h"
#include "commands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXIT_DIFFER 1
#define DEFAULT_MAX_MISMATCHES 10

const char cmd_verify_usage[] =
    "usage: bfp verify -f FORMAT -s ROWSxCOLS [-t f32|bf16|f16] [--layout L]\n"
    "                  [--json] [--max-mismatches N] [options] INPUT.bin DUT_DIR\n"
    "\n"
    "Quantize INPUT.bin with the reference (golden) model and compare it with\n"
    "the planes another implementation wrote into DUT_DIR. Prints a verdict,\n"
    "how many codes, scales and meta entries differ, the first mismatches\n"
    "(row, block, element, input, expected and received code and value), the\n"
    "likely causes (tie, rounding, scale-step, nibble-order, bit-order,\n"
    "block-shift, signed-zero, nan-block, ...), and the reconstruction error\n"
    "of the reference and of the DUT side by side.\n"
    "Exit status: 0 identical, 1 different, 2 bad input.\n"
    "\n"
    "Layouts of DUT_DIR (guessed from the files when --layout is absent):\n"
    "  planar       codes.bin scales.bin [meta.bin] [tensor_scale.bin], as\n"
    "               'bfp golden' writes them\n"
    "  hif4-golden  golden_fp4.bin golden_ea.bin golden_eb.bin golden_ec.bin\n"
    "               [golden_scale.bin] (hif4)\n"
    "  ggml         blocks.bin: ggml/GGUF block_mxfp4 or block_nvfp4 rows\n"
    "               [tensor_scale.bin] (mxfp4, nvfp4)\n"
    "  swizzled     codes.bin, scales in the 128x4 cuBLASLt/CUTLASS layout\n"
    "               (scales_swizzled.bin or scales.bin) [meta.bin]\n"
    "               [tensor_scale.bin]\n"
    "  compressed-tensors  DUT_DIR is a compressed-tensors checkpoint or a\n"
    "               shard of one (or of the bfp layout of 'bfp convert');\n"
    "               guessed for a shard, or a directory with config.json or\n"
    "               model.safetensors[.index.json] and no codes.bin;\n"
    "               --name MODULE picks the module\n"
    "\n"
    "  -f, --format FORMAT    format name (see 'bfp formats'), required\n"
    "  -s, --shape ROWSxCOLS  tensor shape (COLS alone = one row), required\n"
    "  -t, --dtype DTYPE      input values: f32 (default), bf16, f16\n"
    "  --layout LAYOUT        planar, hif4-golden, ggml, swizzled,\n"
    "                         compressed-tensors\n"
    "  --name MODULE          the module of a compressed-tensors DUT\n"
    "  --json                 one JSON object on stdout (for CI gates)\n"
    "  --max-mismatches N     mismatches to list (default 10)\n"
    "  --rounding MODE        the reference's options, as for 'bfp golden':\n"
    "  --seed N               rne, away, zero, stochastic; --seed with\n"
    "  --scale-mode MODE      stochastic; --scale-mode (MX); --no-tensor-scale\n"
    "  --no-tensor-scale      and --2d (NVFP4)\n"
    "  --2d\n"
    "  -h, --help             this text\n";

typedef enum { LAYOUT_PLANAR, LAYOUT_HIF4_GOLDEN, LAYOUT_GGML, LAYOUT_SWIZZLED, LAYOUT_CT } layout_id;

static const char *const layout_names[] = {"planar", "hif4-golden", "ggml", "swizzled",
                                           "compressed-tensors"};

enum { OPT_LAYOUT = 0x200, OPT_MAX_MISMATCHES };

typedef struct {
    const bfp_format_info *f;
    size_t rows, cols;
    bfp_dtype dtype;
    bfp_plane_sizes sz;
    const char *dir;
    layout_id layout;
    int guessed;
    char guess_why[256];
    int implied_no_ts; /* ggml nvfp4 without tensor_scale.bin */
    const char *name;  /* compressed-tensors: the module */
    int is_dir;        /* DUT_DIR is a directory, not a checkpoint's shard */
    /* DUT planes, planar */
    uint8_t *codes, *scales, *meta;
    float ts;
    /* HiF4 golden_scale.bin, when present */
    uint16_t *gscale;
    size_t gscale_n, gscale_differ;
} dut_t;

/* ---- reading the DUT ------------------------------------------------------ */

static size_t file_size_or(const char *path, size_t none)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return none;
    long n = -1;
    if (fseek(fp, 0, SEEK_END) == 0)
        n = ftell(fp);
    fclose(fp);
    return n < 0 ? none : (size_t)n;
}

static int has_file(const dut_t *d, const char *name)
{
    char *p = cli_join_path(d->dir, name);
    int yes = p && cli_path_exists(p);
    free(p);
    return yes;
}

/* Read DIR/name, which must hold exactly want bytes; what names it in the
 * error ("codes plane"). Returns the malloc'd bytes or NULL (reported). */
static uint8_t *read_exact(const dut_t *d, const char *name, size_t want, const char *what)
{
    char err[CLI_ERRLEN] = "";
    char *path = cli_join_path(d->dir, name);
    if (!path)
        return NULL;
    void *data = NULL;
    size_t size = 0;
    if (!cli_path_exists(path)) {
        cli_error("%s is missing: the %s layout of %s %zux%zu needs it (%s, %zu bytes)", path,
                  layout_names[d->layout], d->f->name, d->rows, d->cols, what, want);
        free(path);
        return NULL;
    }
    bfp_status st = bfp_io_read_file(path, &data, &size, err, sizeof err);
    if (st != BFP_OK) {
        cli_io_error(err, st);
        free(path);
        return NULL;
    }
    if (size != want) {
        cli_error("%s has %zu bytes, expected %zu (%s of %s %zux%zu, %s layout)", path, size,
                  want, what, d->f->name, d->rows, d->cols, layout_names[d->layout]);
        free(data);
        free(path);
        return NULL;
    }
    free(path);
    if (!data) /* an empty file that was expected empty cannot happen: want > 0 */
        data = cli_alloc(1, name);
    return data;
}

static int read_tensor_scale(dut_t *d, int optional)
{
    if (!d->f->has_tensor_scale)
        return 0;
    if (optional && !has_file(d, "tensor_scale.bin")) {
        d->ts = 1.0f;
        d->implied_no_ts = 1;
        return 0;
    }
    uint8_t *b = read_exact(d, "tensor_scale.bin", 4, "the fp32 tensor scale");
    if (!b)
        return -1;
    memcpy(&d->ts, b, 4);
    free(b);
    return 0;
}

static int read_meta(dut_t *d)
{
    if (!d->f->meta_bytes)
        return 0;
    d->meta = read_exact(d, "meta.bin", d->sz.meta, "the meta plane, one byte per block");
    return d->meta ? 0 : -1;
}

static int read_planar(dut_t *d)
{
    d->codes = read_exact(d, "codes.bin", d->sz.codes, "the codes plane");
    if (!d->codes)
        return -1;
    d->scales = read_exact(d, "scales.bin", d->sz.scales, "the scales plane");
    if (!d->scales || read_meta(d) != 0)
        return -1;
    return read_tensor_scale(d, 0);
}

static int read_hif4_golden(dut_t *d)
{
    size_t nb = d->rows * d->sz.blocks_per_row;
    uint8_t *ea = NULL, *eb = NULL, *ec = NULL, *gs = NULL;
    int rc = -1;
    d->codes = read_exact(d, "golden_fp4.bin", d->sz.codes, "the packed FP4 codes");
    if (!d->codes)
        return -1;
    if (!(ea = read_exact(d, "golden_ea.bin", nb, "one UE6M2 byte per block")) ||
        !(eb = read_exact(d, "golden_eb.bin", nb, "the E1_8 bits, one byte per block")) ||
        !(ec = read_exact(d, "golden_ec.bin", 2 * nb, "the E1_16 bits, two bytes per block")))
        goto out;
    if (has_file(d, "golden_scale.bin")) {
        if (!(gs = read_exact(d, "golden_scale.bin", 32 * nb,
                              "16 bfloat16 per-4 factors per block")))
            goto out;
        d->gscale = cli_alloc(32 * nb, "golden_scale");
        if (!d->gscale)
            goto out;
        memcpy(d->gscale, gs, 32 * nb);
        d->gscale_n = 16 * nb;
    }
    if (!(d->scales = cli_alloc(d->sz.scales, "the HiF4 scale words")))
        goto out;
    bfp_status st = bfp_hif4_golden_to_scales(ea, eb, ec, nb, d->scales);
    if (st != BFP_OK) {
        cli_status_error("combining golden_ea/eb/ec", st);
        goto out;
    }
    rc = 0;
out:
    free(ea);
    free(eb);
    free(ec);
    free(gs);
    return rc;
}

static int read_ggml(dut_t *d)
{
    size_t bytes = 0;
    bfp_status st = bfp_ggml_size(d->f->id, d->rows, d->cols, &bytes);
    if (st == BFP_ERR_SHAPE) {
        cli_error("the ggml layout needs COLS a multiple of %d for %s (block_%s), got %zu",
                  d->f->id == BFP_NVFP4 ? 64 : 32, d->f->name, d->f->name, d->cols);
        return -1;
    }
    if (st != BFP_OK) {
        cli_status_error("ggml layout", st);
        return -1;
    }
    uint8_t *blocks = read_exact(d, "blocks.bin", bytes,
                                 d->f->id == BFP_NVFP4 ? "block_nvfp4 rows, 36 bytes per 64 values"
                                                       : "block_mxfp4 rows, 17 bytes per 32 values");
    if (!blocks)
        return -1;
    d->codes = cli_alloc(d->sz.codes, "the codes plane");
    d->scales = cli_alloc(d->sz.scales, "the scales plane");
    if (d->codes && d->scales) {
        bfp_planes p = {d->codes, d->scales, NULL, NULL};
        st = bfp_ggml_to_planar(d->f->id, blocks, d->rows, d->cols, &p);
        if (st != BFP_OK)
            cli_status_error("converting ggml blocks", st);
    }
    free(blocks);
    if (!d->codes || !d->scales || st != BFP_OK)
        return -1;
    return read_tensor_scale(d, 1);
}

static int read_swizzled(dut_t *d)
{
    size_t bpr = d->sz.blocks_per_row;
    size_t want = bfp_swizzled_scales_size(d->rows, bpr);
    if (want == 0) {
        cli_error("%zux%zu is too large for the swizzled scale layout", d->rows, d->cols);
        return -1;
    }
    const char *name = has_file(d, "scales_swizzled.bin") ? "scales_swizzled.bin" : "scales.bin";
    d->codes = read_exact(d, "codes.bin", d->sz.codes, "the codes plane");
    if (!d->codes)
        return -1;
    uint8_t *sw = read_exact(d, name, want,
                             "128x4 swizzled scales: rows padded to 128, blocks to 4");
    if (!sw)
        return -1;
    d->scales = cli_alloc(d->sz.scales, "the scales plane");
    bfp_status st = BFP_ERR_NOMEM;
    if (d->scales) {
        st = bfp_scales_from_swizzled(sw, d->rows, bpr, d->scales);
        if (st != BFP_OK)
            cli_status_error("unswizzling the scales", st);
    }
    free(sw);
    if (st != BFP_OK || read_meta(d) != 0)
        return -1;
    return read_tensor_scale(d, 0);
}

/* Pick the layout from the files in DUT_DIR; records why. */
static void guess_layout(dut_t *d)
{
    d->guessed = 1;
    size_t planar = d->sz.scales;
    size_t sw = d->f->scale_bytes == 1 ? bfp_swizzled_scales_size(d->rows, d->sz.blocks_per_row) : 0;
    char *sp = cli_join_path(d->dir, "scales.bin");
    size_t ssize = sp ? file_size_or(sp, SIZE_MAX) : SIZE_MAX;
    free(sp);
    if (!d->is_dir) { /* cmd_verify let only a checkpoint's shard through */
        d->layout = LAYOUT_CT;
        snprintf(d->guess_why, sizeof d->guess_why, "a shard of a checkpoint");
    } else if (!has_file(d, "codes.bin") &&
               (has_file(d, "config.json") || has_file(d, "model.safetensors.index.json") ||
                has_file(d, "model.safetensors"))) {
        d->layout = LAYOUT_CT;
        snprintf(d->guess_why, sizeof d->guess_why,
                 "a checkpoint directory: config.json or model.safetensors[.index.json], "
                 "no codes.bin");
    } else if (has_file(d, "blocks.bin")) {
        d->layout = LAYOUT_GGML;
        snprintf(d->guess_why, sizeof d->guess_why, "blocks.bin is present");
    } else if (has_file(d, "golden_ea.bin") && !has_file(d, "scales.bin")) {
        d->layout = LAYOUT_HIF4_GOLDEN;
        snprintf(d->guess_why, sizeof d->guess_why, "golden_ea.bin is present, scales.bin not");
    } else if (sw && has_file(d, "scales_swizzled.bin")) {
        d->layout = LAYOUT_SWIZZLED;
        snprintf(d->guess_why, sizeof d->guess_why, "scales_swizzled.bin is present");
    } else if (sw && sw != planar && ssize == sw) {
        d->layout = LAYOUT_SWIZZLED;
        snprintf(d->guess_why, sizeof d->guess_why,
                 "scales.bin has the swizzled size %zu, not the planar %zu", sw, planar);
    } else {
        d->layout = LAYOUT_PLANAR;
        snprintf(d->guess_why, sizeof d->guess_why, "no other layout's files are present");
    }
}

static int check_layout(const dut_t *d)
{
    switch (d->layout) {
    case LAYOUT_HIF4_GOLDEN:
        if (d->f->family != BFP_FAMILY_HIF4) {
            cli_error("the hif4-golden layout is for hif4, not %s", d->f->name);
            return -1;
        }
        return 0;
    case LAYOUT_GGML:
        if (d->f->id != BFP_MXFP4 && d->f->id != BFP_NVFP4) {
            cli_error("the ggml layout is for mxfp4 and nvfp4 (block_mxfp4, block_nvfp4), not %s",
                      d->f->name);
            return -1;
        }
        return 0;
    case LAYOUT_SWIZZLED:
        if (d->f->scale_bytes != 1) {
            cli_error("the swizzled layout is for one-byte scales, not %s", d->f->name);
            return -1;
        }
        return 0;
    default:
        return 0;
    }
}

static int read_dut(dut_t *d)
{
    if (check_layout(d) != 0)
        return -1;
    switch (d->layout) {
    case LAYOUT_HIF4_GOLDEN: return read_hif4_golden(d);
    case LAYOUT_GGML: return read_ggml(d);
    case LAYOUT_SWIZZLED: return read_swizzled(d);
    case LAYOUT_CT:
        return verify_read_ct(d->dir, d->name, d->f->id, d->rows, d->cols, &d->codes,
                              &d->scales, &d->meta, &d->ts);
    default: return read_planar(d);
    }
}

static void dut_free(dut_t *d)
{
    free(d->codes);
    free(d->scales);
    free(d->meta);
    free(d->gscale);
}

/* ---- output ------------------------------------------------------------- */

static const char *code_hex(const bfp_format_info *f, bfp_plane_id plane, uint32_t v, char *buf,
                            size_t len)
{
    int digits = 2;
    if (plane == BFP_PLANE_CODES)
        digits = f->elem_bits <= 4 ? 1 : 2;
    else if (plane == BFP_PLANE_META && f->family == BFP_FAMILY_HIF4)
        digits = 6;
    else if (plane == BFP_PLANE_TENSOR_SCALE)
        digits = 8;
    snprintf(buf, len, "0x%0*x", digits, (unsigned)v);
    return buf;
}

static void print_entry(const bfp_format_info *f, bfp_plane_id plane, uint32_t v, double val)
{
    char hex[16], cell[48];
    code_hex(f, plane, v, hex, sizeof hex);
    if (plane == BFP_PLANE_META && f->family == BFP_FAMILY_HIF4)
        snprintf(cell, sizeof cell, "Eb %02x Ec %04x", (unsigned)(v & 0xFF), (unsigned)(v >> 8));
    else if (plane == BFP_PLANE_META)
        snprintf(cell, sizeof cell, "%s", hex);
    else
        snprintf(cell, sizeof cell, "%s (%.6g)", hex, val);
    printf("  %-22s", cell);
}

static void print_error_row(const char *name, double a, double b, const char *fmt)
{
    char x[32], y[32];
    if (isfinite(a))
        snprintf(x, sizeof x, fmt, a);
    else
        snprintf(x, sizeof x, "%s", isinf(a) ? "inf" : "-");
    if (isfinite(b))
        snprintf(y, sizeof y, fmt, b);
    else
        snprintf(y, sizeof y, "%s", isinf(b) ? "inf" : "-");
    printf("  %-16s %14s %14s\n", name, x, y);
}

static void print_human(const dut_t *d, const bfp_options *o, const bfp_verify_report *rep,
                        const bfp_verify_mismatch *mm, int differ)
{
    const bfp_format_info *f = d->f;
    printf("verify %s %zux%zu %s: %s layout", f->name, d->rows, d->cols,
           bfp_dtype_name(d->dtype), layout_names[d->layout]);
    if (d->guessed)
        printf(" (guessed: %s; --layout names it)", d->guess_why);
    printf(", reference rounding %s\n", cli_rounding_name(o->rounding, f));
    if (d->implied_no_ts)
        printf("note: block_nvfp4 has no tensor scale and %s/tensor_scale.bin is absent: the "
               "reference is quantized with --no-tensor-scale\n",
               d->dir);
    if (!differ) {
        printf("IDENTICAL: every plane matches the reference (%zu codes, %zu scales", rep->codes_total,
               rep->scales_total);
        if (rep->meta_total)
            printf(", %zu meta", rep->meta_total);
        if (f->has_tensor_scale)
            printf(", the tensor scale");
        if (d->gscale)
            printf(", %zu golden_scale factors", d->gscale_n);
        printf(")\n");
    } else {
        size_t total = rep->mismatches + d->gscale_differ;
        printf("DIFFERENT: %zu entr%s differ, in %zu of %zu blocks\n", total,
               total == 1 ? "y" : "ies", rep->blocks_differ, rep->blocks_total);
    }
    if (rep->padding_rows_differ)
        printf("note: %zu rows differ in the unused bits of their last byte (no value reads "
               "them; the reference writes 0)\n",
               rep->padding_rows_differ);
    printf("  %-14s %10s %10s\n", "plane", "compared", "differ");
    printf("  %-14s %10zu %10zu\n", "codes", rep->codes_total, rep->codes_differ);
    printf("  %-14s %10zu %10zu\n", f->family == BFP_FAMILY_HIF4 ? "scales (Ea)" : "scales",
           rep->scales_total, rep->scales_differ);
    if (rep->meta_total)
        printf("  %-14s %10zu %10zu\n", f->family == BFP_FAMILY_HIF4 ? "meta (Eb, Ec)" : "meta",
               rep->meta_total, rep->meta_differ);
    if (f->has_tensor_scale)
        printf("  %-14s %10d %10d\n", "tensor_scale", 1, rep->tensor_scale_differs);
    if (d->gscale)
        printf("  %-14s %10zu %10zu\n", "golden_scale", d->gscale_n, d->gscale_differ);

    if (rep->recorded > 0) {
        printf("\n%s %zu mismatch%s:\n", rep->recorded < rep->mismatches ? "first" : "all",
               rep->recorded, rep->recorded == 1 ? "" : "es");
        printf("  %-12s %5s %6s %5s %6s %13s  %-22s  %-22s  %s\n", "plane", "row", "block", "elem",
               "col", "input", "expected", "received", "cause");
        for (size_t i = 0; i < rep->recorded; i++) {
            const bfp_verify_mismatch *m = &mm[i];
            char el[24] = "-", col[24] = "-", in[32] = "-";
            if (m->plane == BFP_PLANE_CODES) {
                snprintf(el, sizeof el, "%zu", m->elem);
                snprintf(col, sizeof col, "%zu", m->col);
                if (!isnan(m->input) || rep->have_error_stats)
                    snprintf(in, sizeof in, "%.6g", (double)m->input);
            }
            printf("  %-12s %5zu %6zu %5s %6s %13s", bfp_plane_name(m->plane), m->row, m->block,
                   el, col, in);
            print_entry(f, m->plane, m->expected, m->expected_value);
            print_entry(f, m->plane, m->received, m->received_value);
            printf("  %s\n", bfp_verify_cause_name(m->cause));
        }
    }
    if (rep->mismatches > 0) {
        printf("\nlikely causes (all %zu mismatches):\n", rep->mismatches);
        int done[BFP_VERIFY_NCAUSES] = {0};
        for (;;) { /* largest count first */
            int best = -1;
            for (int c = 0; c < BFP_VERIFY_NCAUSES; c++)
                if (!done[c] && rep->cause_count[c] &&
                    (best < 0 || rep->cause_count[c] > rep->cause_count[best]))
                    best = c;
            if (best < 0)
                break;
            done[best] = 1;
            printf("  %-13s %8zu  %s\n", bfp_verify_cause_name((bfp_verify_cause)best),
                   rep->cause_count[best], bfp_verify_cause_hint((bfp_verify_cause)best));
        }
    }
    if (d->gscale_differ)
        printf("  golden_scale.bin: %zu per-4 factors differ from the reference's (REC * "
               "2^-E1_8 * 2^-E1_16 as bfloat16)\n",
               d->gscale_differ);
    if (rep->have_error_stats) {
        const bfp_error_stats *a = &rep->ref_error, *b = &rep->dut_error;
        printf("\n  %-16s %14s %14s\n", "error vs input", "reference", "DUT");
        printf("  %-16s %14zu %14zu\n", "values compared", a->count, b->count);
        print_error_row("max rel err", a->nonzero ? a->max_rel_err : NAN,
                        b->nonzero ? b->max_rel_err : NAN, "%.6f");
        print_error_row("mean rel err", a->nonzero ? a->mean_rel_err : NAN,
                        b->nonzero ? b->mean_rel_err : NAN, "%.6f");
        print_error_row("RMSE", a->count ? a->rmse : NAN, b->count ? b->rmse : NAN, "%.6g");
        print_error_row("SQNR dB", a->count ? a->sqnr_db : NAN, b->count ? b->sqnr_db : NAN,
                        "%.2f");
        if (rep->ref_nan_blocks || rep->dut_nan_blocks)
            printf("  %-16s %14zu %14zu\n", "NaN blocks", rep->ref_nan_blocks, rep->dut_nan_blocks);
    }
}

static int json_stats(cJSON *parent, const char *key, const bfp_error_stats *s)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    if (!o)
        return -1;
    int bad = !cJSON_AddNumberToObject(o, "values", (double)s->count);
    bad = bad || cli_json_number(o, "max_rel_err", s->nonzero ? s->max_rel_err : NAN);
    bad = bad || cli_json_number(o, "mean_rel_err", s->nonzero ? s->mean_rel_err : NAN);
    bad = bad || cli_json_number(o, "max_abs_err", s->count ? s->max_abs_err : NAN);
    bad = bad || cli_json_number(o, "rmse", s->count ? s->rmse : NAN);
    bad = bad || cli_json_number(o, "sqnr_db", s->count ? s->sqnr_db : NAN);
    return bad ? -1 : 0;
}

static int json_plane(cJSON *planes, const char *name, size_t compared, size_t differ)
{
    cJSON *o = cJSON_AddObjectToObject(planes, name);
    return (o && cJSON_AddNumberToObject(o, "compared", (double)compared) &&
            cJSON_AddNumberToObject(o, "differ", (double)differ))
               ? 0
               : -1;
}

/* The report as one JSON object on stdout: CLI_EXIT_OK, or CLI_EXIT_ERR after one error line */
static int print_json(const dut_t *d, const bfp_options *o, const bfp_verify_report *rep,
                      const bfp_verify_mismatch *mm, int differ)
{
    const bfp_format_info *f = d->f;
    cJSON *r = cJSON_CreateObject(), *a, *planes, *opts, *causes, *list, *err;
    int bad = !r;
    bad = bad || !cJSON_AddStringToObject(r, "format", f->name);
    bad = bad || !(a = cJSON_AddArrayToObject(r, "shape"));
    if (!bad) {
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)d->rows));
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)d->cols));
    }
    bad = bad || !cJSON_AddStringToObject(r, "dtype", bfp_dtype_name(d->dtype));
    bad = bad || !cJSON_AddStringToObject(r, "dut_dir", d->dir);
    bad = bad || !cJSON_AddStringToObject(r, "layout", layout_names[d->layout]);
    bad = bad || !cJSON_AddBoolToObject(r, "layout_guessed", d->guessed);
    bad = bad || !(opts = cJSON_AddObjectToObject(r, "options"));
    if (!bad) {
        bad = !cJSON_AddStringToObject(opts, "rounding", cli_rounding_name(o->rounding, f));
        if (o->rounding == BFP_ROUND_STOCHASTIC) {
            char seed[32];
            snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
            /* JSON numbers are exact only up to 2^53 (as golden's report.json) */
            bad = bad || !(o->seed <= (UINT64_C(1) << 53)
                               ? cJSON_AddNumberToObject(opts, "seed", (double)o->seed)
                               : cJSON_AddStringToObject(opts, "seed", seed));
        }
        if (f->family == BFP_FAMILY_MX)
            bad = bad || !cJSON_AddStringToObject(opts, "scale_mode",
                                                  cli_scale_mode_name(o->scale_mode));
        if (f->has_tensor_scale) {
            bad = bad || !cJSON_AddBoolToObject(opts, "tensor_scale", !o->nvfp4_no_tensor_scale);
            bad = bad || !cJSON_AddBoolToObject(opts, "2d", o->nvfp4_2d);
        }
    }
    bad = bad || !cJSON_AddBoolToObject(r, "identical", !differ);
    bad = bad || !cJSON_AddNumberToObject(r, "mismatches", (double)(rep->mismatches + d->gscale_differ));
    bad = bad || !(planes = cJSON_AddObjectToObject(r, "planes"));
    bad = bad || json_plane(planes, "codes", rep->codes_total, rep->codes_differ);
    bad = bad || json_plane(planes, "scales", rep->scales_total, rep->scales_differ);
    if (rep->meta_total)
        bad = bad || json_plane(planes, "meta", rep->meta_total, rep->meta_differ);
    if (f->has_tensor_scale)
        bad = bad || json_plane(planes, "tensor_scale", 1, (size_t)rep->tensor_scale_differs);
    if (d->gscale)
        bad = bad || json_plane(planes, "golden_scale", d->gscale_n, d->gscale_differ);
    bad = bad || json_plane(r, "blocks", rep->blocks_total, rep->blocks_differ);
    bad = bad || !cJSON_AddNumberToObject(r, "padding_rows_differ", (double)rep->padding_rows_differ);
    bad = bad || !(causes = cJSON_AddArrayToObject(r, "causes"));
    for (int c = 0; !bad && c < BFP_VERIFY_NCAUSES; c++) {
        if (!rep->cause_count[c])
            continue;
        cJSON *e = cJSON_CreateObject();
        bad = !e || !cJSON_AddItemToArray(causes, e);
        bad = bad || !cJSON_AddStringToObject(e, "cause", bfp_verify_cause_name((bfp_verify_cause)c));
        bad = bad || !cJSON_AddNumberToObject(e, "count", (double)rep->cause_count[c]);
        bad = bad || !cJSON_AddStringToObject(e, "hint", bfp_verify_cause_hint((bfp_verify_cause)c));
    }
    bad = bad || !(list = cJSON_AddArrayToObject(r, "first_mismatches"));
    for (size_t i = 0; !bad && i < rep->recorded; i++) {
        const bfp_verify_mismatch *m = &mm[i];
        cJSON *e = cJSON_CreateObject();
        bad = !e || !cJSON_AddItemToArray(list, e);
        bad = bad || !cJSON_AddStringToObject(e, "plane", bfp_plane_name(m->plane));
        bad = bad || !cJSON_AddNumberToObject(e, "row", (double)m->row);
        bad = bad || !cJSON_AddNumberToObject(e, "block", (double)m->block);
        if (m->plane == BFP_PLANE_CODES) {
            bad = bad || !cJSON_AddNumberToObject(e, "elem", (double)m->elem);
            bad = bad || !cJSON_AddNumberToObject(e, "col", (double)m->col);
            bad = bad || cli_json_number(e, "input", m->input);
        }
        bad = bad || !cJSON_AddNumberToObject(e, "expected", (double)m->expected);
        bad = bad || !cJSON_AddNumberToObject(e, "received", (double)m->received);
        if (m->plane != BFP_PLANE_META) {
            bad = bad || cli_json_number(e, "expected_value", m->expected_value);
            bad = bad || cli_json_number(e, "received_value", m->received_value);
        }
        bad = bad || !cJSON_AddStringToObject(e, "cause", bfp_verify_cause_name(m->cause));
    }
    if (rep->have_error_stats) {
        bad = bad || !(err = cJSON_AddObjectToObject(r, "error"));
        bad = bad || json_stats(err, "reference", &rep->ref_error);
        bad = bad || json_stats(err, "dut", &rep->dut_error);
    }
    cJSON *nb;
    bad = bad || !(nb = cJSON_AddObjectToObject(r, "nan_blocks"));
    bad = bad || !cJSON_AddNumberToObject(nb, "reference", (double)rep->ref_nan_blocks);
    bad = bad || !cJSON_AddNumberToObject(nb, "dut", (double)rep->dut_nan_blocks);
    return cli_json_emit(r, !bad);
}

/* ---- the command ---------------------------------------------------------- */

int cmd_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"shape", required_argument, NULL, 's'},
        {"dtype", required_argument, NULL, 't'},
        {"layout", required_argument, NULL, OPT_LAYOUT},
        {"json", no_argument, NULL, OPT_JSON},
        {"max-mismatches", required_argument, NULL, OPT_MAX_MISMATCHES},
        {"name", required_argument, NULL, OPT_NAME},
        CLI_QUANT_LONGOPTS,
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    cli_opts co;
    dut_t d;
    int have_layout = 0, c, rc = CLI_EXIT_ERR;
    uint64_t max_mm = DEFAULT_MAX_MISMATCHES;
    void *input = NULL;
    uint8_t *rcodes = NULL, *rscales = NULL, *rmeta = NULL;
    uint16_t *rgscale = NULL;
    bfp_verify_mismatch *mm = NULL;

    memset(&d, 0, sizeof d);
    cli_opts_init(&co);
    while ((c = getopt_long(argc, argv, ":f:s:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_LAYOUT: {
            int found = 0;
            for (int i = 0; i < 5; i++)
                if (strcmp(optarg, layout_names[i]) == 0) {
                    d.layout = (layout_id)i;
                    found = 1;
                }
            if (!found) {
                cli_error("unknown layout '%s' (valid: planar, hif4-golden, ggml, swizzled, "
                          "compressed-tensors)",
                          optarg);
                return CLI_EXIT_ERR;
            }
            have_layout = 1;
            break;
        }
        case OPT_MAX_MISMATCHES:
            if (cli_parse_u64(optarg, "--max-mismatches", &max_mm) != 0)
                return CLI_EXIT_ERR;
            if (max_mm > 1000000) {
                cli_error("--max-mismatches %s is more than 1000000", optarg);
                return CLI_EXIT_ERR;
            }
            break;
        default: {
            int r = cli_opts_take(&co, c, optarg, "verify", cmd_verify_usage, argv);
            if (r != CLI_OPT_TAKEN)
                return r;
        }
        }
    }
    const bfp_format fmt = co.fmt;
    const int json = co.json;
    d.rows = co.rows;
    d.cols = co.cols;
    d.dtype = co.dtype;
    d.name = co.name;
    if (!co.have_fmt || !co.have_shape) {
        cli_error("verify needs -f FORMAT and -s ROWSxCOLS (see 'bfp help verify')");
        return CLI_EXIT_ERR;
    }
    if (cli_want_args("verify", argc - optind, 2, "INPUT.bin and DUT_DIR") != 0)
        return CLI_EXIT_ERR;
    const char *in_path = argv[optind];
    d.dir = argv[optind + 1];
    d.f = bfp_format_get(fmt);
    if (cli_quant_opts_check(&co.qo, d.f) != 0)
        return CLI_EXIT_ERR;
    bfp_status st = bfp_plane_sizes_for(fmt, d.rows, d.cols, &d.sz);
    if (st != BFP_OK) {
        cli_status_error("plane sizes", st);
        return CLI_EXIT_ERR;
    }
    struct stat dst;
    if (stat(d.dir, &dst) != 0) {
        cli_error("DUT directory %s does not exist", d.dir);
        return CLI_EXIT_ERR;
    }
    d.is_dir = S_ISDIR(dst.st_mode);
    if (!d.is_dir && (have_layout ? d.layout != LAYOUT_CT : !bfp_ct_is_checkpoint(d.dir))) {
        cli_error("DUT_DIR %s is not a directory (name the directory that "
                  "holds the planes, or a checkpoint's shard)", d.dir);
        return CLI_EXIT_ERR;
    }
    if (cli_read_raw(in_path, d.rows, d.cols, d.dtype, &input) != 0)
        goto out;
    if (!have_layout)
        guess_layout(&d);
    if (read_dut(&d) != 0)
        goto out;

    /* the reference: the golden model on the same input */
    bfp_options o = co.qo.opts;
    if (d.implied_no_ts)
        o.nvfp4_no_tensor_scale = 1;
    float rts = 1.0f;
    rcodes = cli_alloc(d.sz.codes, "the reference codes");
    rscales = cli_alloc(d.sz.scales, "the reference scales");
    if (d.f->meta_bytes) /* the NVFP4 reference writes a meta plane it is given */
        rmeta = cli_alloc(d.sz.meta, "the reference meta");
    mm = cli_alloc((size_t)max_mm * sizeof *mm, "the mismatch list");
    if (!rcodes || !rscales || (d.f->meta_bytes && !rmeta) || !mm)
        goto out;
    bfp_planes rp = {rcodes, rscales, rmeta, &rts};
    st = bfp_quantize_ref(fmt, d.dtype, input, d.rows, d.cols, &o, &rp, NULL);
    if (st != BFP_OK) {
        cli_status_error("quantizing the reference", st);
        goto out;
    }
    bfp_const_planes ref = {rcodes, rscales, rmeta, &rts};
    bfp_const_planes dut = {d.codes, d.scales, d.meta, &d.ts};
    bfp_verify_report rep;
    st = bfp_verify(fmt, d.rows, d.cols, d.dtype, input, &ref, &dut, mm, (size_t)max_mm, &rep);
    if (st != BFP_OK) {
        cli_status_error("verifying", st);
        goto out;
    }
    if (d.gscale) { /* golden_scale.bin against the reference's */
        size_t nb = d.rows * d.sz.blocks_per_row;
        rgscale = cli_alloc(32 * nb, "the reference golden_scale");
        if (!rgscale)
            goto out;
        bfp_hif4_split_scales(rscales, nb, NULL, NULL, NULL, rgscale);
        for (size_t i = 0; i < d.gscale_n; i++)
            d.gscale_differ += memcmp(&rgscale[i], &d.gscale[i], 2) != 0;
    }
    int differ = !rep.identical || d.gscale_differ > 0;
    if (json) {
        if (print_json(&d, &o, &rep, mm, differ) != CLI_EXIT_OK)
            goto out;
    } else {
        print_human(&d, &o, &rep, mm, differ);
    }
    rc = differ ? EXIT_DIFFER : CLI_EXIT_OK;
out:
    free(input);
    free(rcodes);
    free(rscales);
    free(rmeta);
    free(rgscale);
    free(mm);
    dut_free(&d);
    return rc;
}

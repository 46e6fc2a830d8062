/* test_io_container.c - the quantized container: round trips for every
 * format, metadata, and rejection of planes and metadata that do not match. */
#include "test_io_util.h"

#include "io_internal.h" /* bfpio_st_write/open: to forge bad containers */

#include <math.h>

static void fill_pattern(bfp_qtensor *q, unsigned seed)
{
    for (size_t i = 0; i < q->sizes.codes; i++)
        q->codes[i] = (uint8_t)(i * 7 + seed);
    for (size_t i = 0; i < q->sizes.scales; i++)
        q->scales[i] = (uint8_t)(i * 13 + seed + 1);
    for (size_t i = 0; i < q->sizes.meta; i++)
        q->meta[i] = (uint8_t)(i * 3 + seed + 2);
}

static int same_q(const bfp_qtensor *a, const bfp_qtensor *b)
{
    return a->format == b->format && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, a->ndim * sizeof a->shape[0]) == 0 &&
           a->rows == b->rows && a->cols == b->cols &&
           memcmp(&a->sizes, &b->sizes, sizeof a->sizes) == 0 &&
           memcmp(a->codes, b->codes, a->sizes.codes) == 0 &&
           memcmp(a->scales, b->scales, a->sizes.scales) == 0 &&
           (a->sizes.meta == 0 ? b->meta == NULL
                               : memcmp(a->meta, b->meta, a->sizes.meta) == 0) &&
           memcmp(&a->tensor_scale, &b->tensor_scale, 4) == 0 &&
           memcmp(&a->options, &b->options, sizeof a->options) == 0;
}

static void test_round_trips(void)
{
    char err[256];
    bfp_qtensor q, r;
    const size_t shape[3] = {2, 3, 70}; /* 70: partial last block everywhere */
    for (int i = 0; i < bfp_format_count(); i++) {
        const bfp_format_info *fi = bfp_format_at(i);
        if (!fi)
            continue;
        int ok = bfp_qtensor_alloc(&q, fi->id, 3, shape, err, sizeof err) == BFP_OK;
        ok = ok && q.rows == 6 && q.cols == 70 && (q.meta != NULL) == (fi->meta_bytes > 0);
        fill_pattern(&q, (unsigned)i);
        if (fi->has_tensor_scale)
            q.tensor_scale = 0.123f;
        ok = ok && bfp_qtensor_save(tpath("q.safetensors"), "w", &q, 0, err, sizeof err) == BFP_OK;
        ok = ok && bfp_qtensor_load(tpath("q.safetensors"), NULL, &r, err, sizeof err) == BFP_OK;
        OK(ok && same_q(&q, &r), "%s container round trip is exact", fi->name);
        if (!ok)
            fprintf(stderr, "  %s\n", err);
        bfp_qtensor_free(&r);
        bfp_qtensor_free(&q);
        unlink(tpath("q.safetensors"));
    }

    /* The four families the brief names, with non-default options. */
    const bfp_format fams[4] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_HIF4};
    for (int i = 0; i < 4; i++) {
        const size_t s2[2] = {5, 100};
        bfp_qtensor_alloc(&q, fams[i], 2, s2, err, sizeof err);
        fill_pattern(&q, 99);
        q.options.rounding = BFP_ROUND_STOCHASTIC;
        q.options.seed = UINT64_MAX;
        q.options.scale_mode = fams[i] == BFP_MXFP4 ? BFP_SCALE_RCEIL : BFP_SCALE_DEFAULT;
        q.options.nvfp4_2d = fams[i] == BFP_NVFP4;
        q.options.nvfp4_no_tensor_scale = fams[i] == BFP_NVFP4;
        OK(bfp_qtensor_save(tpath("q.safetensors"), NULL, &q, 0, err, sizeof err) == BFP_OK &&
               bfp_qtensor_load(tpath("q.safetensors"), "tensor", &r, err, sizeof err) == BFP_OK &&
               same_q(&q, &r),
           "%s: options (seed 2^64-1) survive, default name 'tensor'",
           bfp_format_get(fams[i])->name);
        bfp_const_planes p = bfp_qtensor_planes(&r);
        OK(p.codes == r.codes && p.scales == r.scales && p.meta == r.meta &&
               (p.tensor_scale != NULL) == (fams[i] == BFP_NVFP4),
           "%s: plane view", bfp_format_get(fams[i])->name);
        bfp_qtensor_free(&r);
        bfp_qtensor_free(&q);
        unlink(tpath("q.safetensors"));
    }
}

/* quantize -> save -> load -> dequantize gives the same values. */
static void test_with_codec(void)
{
    char err[256];
    enum { R = 4, C = 96 };
    float x[R * C], y0[R * C], y1[R * C];
    const size_t shape[2] = {R, C};
    for (int i = 0; i < R * C; i++)
        x[i] = sinf((float)i * 0.37f) * (float)(1 + i % 17);
    const bfp_format fams[4] = {BFP_MXFP4, BFP_MXFP4_PLUS, BFP_NVFP4, BFP_HIF4};
    for (int i = 0; i < 4; i++) {
        bfp_qtensor q, r;
        bfp_qtensor_alloc(&q, fams[i], 2, shape, err, sizeof err);
        bfp_planes out = {q.codes, q.scales, q.meta, &q.tensor_scale};
        int ok = bfp_quantize_f32(fams[i], x, R, C, NULL, &out, NULL) == BFP_OK;
        bfp_const_planes pq = bfp_qtensor_planes(&q);
        ok = ok && bfp_dequantize_to_f32(fams[i], &pq, R, C, y0) == BFP_OK;
        ok = ok && bfp_qtensor_save(tpath("c.safetensors"), "x", &q, 0, err, sizeof err) == BFP_OK;
        ok = ok && bfp_qtensor_load(tpath("c.safetensors"), "x", &r, err, sizeof err) == BFP_OK;
        bfp_const_planes pr = bfp_qtensor_planes(&r);
        ok = ok && bfp_dequantize_to_f32(r.format, &pr, r.rows, r.cols, y1) == BFP_OK;
        OK(ok && memcmp(y0, y1, sizeof y0) == 0,
           "%s: quantize, save, load, dequantize is exact",
           bfp_format_get(fams[i])->name);
        if (!ok)
            fprintf(stderr, "  %s\n", err);
        bfp_qtensor_free(&q);
        bfp_qtensor_free(&r);
        unlink(tpath("c.safetensors"));
    }
}

static void test_metadata(void)
{
    char err[256];
    bfp_qtensor q;
    bfpio_st_file f;
    const size_t shape[2] = {4096, 64};
    bfp_qtensor_alloc(&q, BFP_MXFP4_PLUS, 2, shape, err, sizeof err);
    bfp_qtensor_save(tpath("m.safetensors"), "blk.0.w", &q, 0, err, sizeof err);
    OK(bfpio_st_open(&f, tpath("m.safetensors"), err, sizeof err) == BFP_OK, "container opens as plain safetensors");
    const char *sh = bfpio_st_meta(&f, "bfp.shape"), *fm = bfpio_st_meta(&f, "bfp.format");
    const char *ve = bfpio_st_meta(&f, "bfp.version"), *la = bfpio_st_meta(&f, "bfp.layout");
    const char *nm = bfpio_st_meta(&f, "bfp.name"), *op = bfpio_st_meta(&f, "bfp.options");
    OK(sh && strcmp(sh, "[4096, 64]") == 0, "bfp.shape is \"[4096, 64]\"");
    OK(fm && strcmp(fm, "mxfp4+") == 0, "bfp.format is the format name");
    OK(ve && strcmp(ve, bfp_version()) == 0, "bfp.version is bfp_version()");
    OK(la && strcmp(la, "planar-v1") == 0, "bfp.layout is planar-v1");
    OK(nm && strcmp(nm, "blk.0.w") == 0, "bfp.name is the tensor name");
    OK(op && strcmp(op, "{\"rounding\":\"default\",\"seed\":\"0\",\"scale_mode\":\"floor\","
                        "\"nvfp4_no_tensor_scale\":false,\"nvfp4_2d\":false}") == 0,
       "bfp.options JSON: %s", op ? op : "(none)");
    long c = bfpio_st_find(&f, "blk.0.w.codes"), s = bfpio_st_find(&f, "blk.0.w.scales");
    long m = bfpio_st_find(&f, "blk.0.w.meta");
    OK(f.count == 3 && c >= 0 && s >= 0 && m >= 0 && strcmp(f.entries[c].dtype, "U8") == 0 &&
           f.entries[c].ndim == 1 && f.entries[c].shape[0] == q.sizes.codes &&
           f.entries[s].shape[0] == q.sizes.scales && f.entries[m].shape[0] == q.sizes.meta,
       "planes are 1-D U8 tensors of the plane sizes");
    bfpio_st_close(&f);
    bfp_qtensor_free(&q);
    unlink(tpath("m.safetensors"));
}

/* A forged container: NULL metadata values are left out, planes given by
 * (bytes, dtype, ndim); bytes SIZE_MAX leaves a plane out. */
typedef struct {
    const char *format, *shape, *layout, *options, *name;
    size_t bytes[4];
    const char *dtype[4];
    int ndim[4];
} forge;

static bfp_status forge_load(const forge *g, const char *load_name, char *err, size_t errlen)
{
    static uint8_t zeros[4096];
    const char *pid[4] = {"codes", "scales", "meta", "tensor_scale"};
    char names[4][64];
    size_t dims[4][2];
    bfpio_st_out out[4];
    size_t n = 0, nm = 0;
    const char *keys[6], *vals[6];
    const char *k6[6] = {"bfp.format", "bfp.shape", "bfp.layout", "bfp.options", "bfp.name", "bfp.version"};
    const char *v6[6] = {g->format, g->shape, g->layout, g->options, g->name, "0.1.0"};
    for (int i = 0; i < 6; i++)
        if (v6[i]) {
            keys[nm] = k6[i];
            vals[nm++] = v6[i];
        }
    for (int p = 0; p < 4; p++) {
        if (g->bytes[p] == SIZE_MAX)
            continue;
        size_t es = strcmp(g->dtype[p], "F32") == 0 ? 4 : 1;
        snprintf(names[p], sizeof names[p], "%s.%s", g->name ? g->name : "w", pid[p]);
        dims[p][0] = g->ndim[p] == 2 ? 1 : g->bytes[p] / es;
        dims[p][1] = g->bytes[p] / es;
        out[n] = (bfpio_st_out){names[p], g->dtype[p], es, (size_t)g->ndim[p], dims[p], zeros, g->bytes[p]};
        n++;
    }
    unlink(tpath("f.safetensors"));
    if (bfpio_st_write(tpath("f.safetensors"), out, n, keys, vals, nm, 0, err, errlen) != BFP_OK)
        return (bfp_status)99;
    bfp_qtensor q;
    bfp_status st = bfp_qtensor_load(tpath("f.safetensors"), load_name, &q, err, errlen);
    CHECK(st == BFP_OK || (q.codes == NULL && q.scales == NULL), "failed load leaves q empty");
    bfp_qtensor_free(&q);
    return st;
}

static void test_forged(void)
{
    char err[256];
    bfp_plane_sizes ps;
    bfp_plane_sizes_for(BFP_NVFP4, 2, 40, &ps); /* nvfp4: codes, scales, tensor_scale */
    const forge good = {"nvfp4", "[2, 40]", "planar-v1", NULL, "w",
                        {ps.codes, ps.scales, SIZE_MAX, 4}, {"U8", "U8", "U8", "F32"}, {1, 1, 1, 1}};
    forge g = good;
    OK(forge_load(&g, NULL, err, sizeof err) == BFP_OK, "forged control container loads (no bfp.options: defaults)");
    OK(forge_load(&g, "w", err, sizeof err) == BFP_OK, "and by its name");
    OK(forge_load(&g, "v", err, sizeof err) == BFP_ERR_ARG, "another name is refused: %s", err);

#define BAD(code, what, ...)                                                   \
    do {                                                                       \
        g = good;                                                              \
        __VA_ARGS__;                                                           \
        err[0] = '\0';                                                         \
        OK(forge_load(&g, NULL, err, sizeof err) == (code) && err[0],         \
           "rejects %s: %s", what, err);                                       \
    } while (0)
    BAD(BFP_ERR_DATA, "codes one byte short", g.bytes[0] = ps.codes - 1);
    BAD(BFP_ERR_DATA, "scales one byte long", g.bytes[1] = ps.scales + 1);
    BAD(BFP_ERR_DATA, "missing tensor_scale", g.bytes[3] = SIZE_MAX);
    BAD(BFP_ERR_DATA, "missing codes", g.bytes[0] = SIZE_MAX);
    BAD(BFP_ERR_DATA, "a meta plane nvfp4 does not have", g.bytes[2] = 5);
    BAD(BFP_ERR_DATA, "codes as F32", g.dtype[0] = "F32"; g.bytes[0] = ps.codes / 4 * 4);
    BAD(BFP_ERR_DATA, "2-D codes", g.ndim[0] = 2);
    BAD(BFP_ERR_DATA, "tensor_scale as U8", g.dtype[3] = "U8");
    BAD(BFP_ERR_FORMAT, "unknown format", g.format = "mxfp5");
    BAD(BFP_ERR_DATA, "missing bfp.format", g.format = NULL);
    BAD(BFP_ERR_DATA, "missing bfp.name", g.name = NULL);
    BAD(BFP_ERR_DATA, "other layout", g.layout = "planar-v2");
    BAD(BFP_ERR_DATA, "missing layout", g.layout = NULL);
    BAD(BFP_ERR_DATA, "shape not matching the planes", g.shape = "[2, 41]");
    BAD(BFP_ERR_DATA, "shape [80] (same numel, other rows)", g.shape = "[80]");
    BAD(BFP_ERR_DATA, "zero dimension", g.shape = "[0, 40]");
    BAD(BFP_ERR_DATA, "fractional dimension", g.shape = "[2, 40.5]");
    BAD(BFP_ERR_DATA, "shape not JSON", g.shape = "2x40");
    BAD(BFP_ERR_DATA, "missing shape", g.shape = NULL);
    BAD(BFP_ERR_DATA, "9-D shape", g.shape = "[1, 1, 1, 1, 1, 1, 1, 2, 40]");
    BAD(BFP_ERR_DATA, "huge shape", g.shape = "[4294967296, 4294967296, 40]");
    BAD(BFP_ERR_DATA, "options not JSON", g.options = "{");
    BAD(BFP_ERR_DATA, "unknown rounding", g.options = "{\"rounding\":\"up\"}");
    BAD(BFP_ERR_DATA, "numeric seed", g.options = "{\"seed\":5}");
    BAD(BFP_ERR_DATA, "seed over 2^64", g.options = "{\"seed\":\"18446744073709551616\"}");
    BAD(BFP_ERR_DATA, "non-boolean flag", g.options = "{\"nvfp4_2d\":1}");
    BAD(BFP_ERR_DATA, "junk after the shape", g.shape = "[2, 40]x");
    BAD(BFP_ERR_DATA, "a second shape after the shape", g.shape = "[2, 40][3]");
    BAD(BFP_ERR_DATA, "junk after the options", g.options = "{}}");
    BAD(BFP_ERR_DATA, "a second object after the options", g.options = "{} {}");
    g = good;
    g.shape = " [2, 40]\n";
    g.options = " {}\n";
    OK(forge_load(&g, NULL, err, sizeof err) == BFP_OK,
       "white space around shape and options is fine: %s", err);
    g = good;
    g.options = "{\"rounding\":\"toward_zero\",\"future_key\":[1]}";
    OK(forge_load(&g, NULL, err, sizeof err) == BFP_OK, "unknown option keys are ignored");
    unlink(tpath("f.safetensors"));

    /* a plain float file is not a container */
    float v[2] = {1, 2};
    bfp_tensor t = {BFP_DTYPE_F32, 1, {2}, v, 8};
    bfp_qtensor q;
    bfp_safetensors_save(tpath("p.safetensors"), "x", &t, 0, err, sizeof err);
    OK(bfp_qtensor_load(tpath("p.safetensors"), NULL, &q, err, sizeof err) == BFP_ERR_DATA,
       "plain safetensors is not a container: %s", err);
    bfp_tensor u;
    const size_t s1[1] = {32};
    bfp_qtensor_alloc(&q, BFP_MXFP4, 1, s1, err, sizeof err);
    bfp_qtensor_save(tpath("q.safetensors"), "x", &q, 0, err, sizeof err);
    OK(bfp_safetensors_load(tpath("q.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_DATA &&
           strstr(err, "container"),
       "loading a container as floats says what it is: %s", err);
    /* NVFP4's tensor scale is an F32 tensor, but not one to quantize */
    bfp_qtensor_free(&q);
    bfp_qtensor_alloc(&q, BFP_NVFP4, 1, s1, err, sizeof err);
    unlink(tpath("q.safetensors"));
    bfp_qtensor_save(tpath("q.safetensors"), "x", &q, 0, err, sizeof err);
    memset(&u, 0, sizeof u);
    OK(bfp_safetensors_load(tpath("q.safetensors"), NULL, &u, err, sizeof err) == BFP_ERR_DATA &&
           strstr(err, "container") && u.data == NULL,
       "an NVFP4 container is not read as its one-value tensor scale: %s", err);
    bfp_tensor_free(&u);
    /* every truncation of a container fails cleanly */
    void *raw = NULL;
    size_t rs = 0;
    int bad = 0;
    bfp_qtensor r;
    bfp_io_read_file(tpath("q.safetensors"), &raw, &rs, err, sizeof err);
    for (size_t n = 0; n < rs; n++) {
        write_raw(tpath("cut.safetensors"), raw, n);
        if (bfp_qtensor_load(tpath("cut.safetensors"), NULL, &r, err, sizeof err) != BFP_ERR_DATA)
            bad++;
    }
    OK(rs > 0 && bad == 0, "all %zu truncations of a container rejected", rs);
    free(raw);
    bfp_qtensor_free(&q);
    unlink(tpath("p.safetensors"));
    unlink(tpath("q.safetensors"));
    unlink(tpath("cut.safetensors"));
}

static void test_alloc_and_save_args(void)
{
    char err[256];
    bfp_qtensor q;
    const size_t s0[2] = {0, 32}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 32}, s2[2] = {2, 32};
    OK(bfp_qtensor_alloc(&q, (bfp_format)0, 2, s2, err, sizeof err) == BFP_ERR_FORMAT,
       "alloc: unknown format: %s", err);
    OK(bfp_qtensor_alloc(&q, BFP_MXFP4, 2, s0, err, sizeof err) == BFP_ERR_SHAPE,
       "alloc: zero dimension: %s", err);
    OK(bfp_qtensor_alloc(&q, BFP_MXFP4, 9, s9, err, sizeof err) == BFP_ERR_SHAPE,
       "alloc: 9 dimensions: %s", err);
    OK(bfp_qtensor_alloc(&q, BFP_NVFP4, 2, s2, err, sizeof err) == BFP_OK &&
           q.tensor_scale == 1.0f && q.meta == NULL && q.sizes.tensor_scale == 4,
       "alloc: nvfp4 starts with tensor_scale 1 and no meta");
    q.sizes.codes--;
    OK(bfp_qtensor_save(tpath("a.safetensors"), "x", &q, 0, err, sizeof err) == BFP_ERR_ARG,
       "save: sizes inconsistent with shape: %s", err);
    q.sizes.codes++;
    q.options.rounding = (bfp_rounding)42;
    OK(bfp_qtensor_save(tpath("a.safetensors"), "x", &q, 0, err, sizeof err) == BFP_ERR_ARG,
       "save: invalid rounding: %s", err);
    q.options.rounding = BFP_ROUND_DEFAULT;
    OK(bfp_qtensor_save(tpath("a.safetensors"), "", &q, 0, err, sizeof err) == BFP_ERR_ARG,
       "save: empty name");
    OK(bfp_qtensor_save(tpath("a.safetensors"), "x", &q, 0, err, sizeof err) == BFP_OK &&
           bfp_qtensor_save(tpath("a.safetensors"), "x", &q, 0, err, sizeof err) == BFP_ERR_IO,
       "save: refuses to overwrite without force");
    OK(bfp_qtensor_save(tpath("a.safetensors"), "x", &q, 1, err, sizeof err) == BFP_OK,
       "save: overwrites with force");
    OK(tdir_count() == 1, "no temporary files left");
    bfp_qtensor_free(&q);
    bfp_qtensor_free(NULL);
    unlink(tpath("a.safetensors"));
}

/* The optional keys: bfp.axis, bfp.source_dtype, bfp.stats (round trip,
 * absent when not set, malformed values refused). */
static void test_optional_keys(void)
{
    char err[256] = "";
    bfp_qtensor q, r;
    bfpio_st_file f;
    const size_t shape[2] = {3, 64};
    bfp_qtensor_alloc(&q, BFP_MXFP4, 2, shape, err, sizeof err);
    fill_pattern(&q, 5);
    OK(bfp_qtensor_save(tpath("o.safetensors"), "w", &q, 1, err, sizeof err) == BFP_OK &&
           bfp_qtensor_load(tpath("o.safetensors"), NULL, &r, err, sizeof err) == BFP_OK &&
           !r.has_axis && !r.has_stats && !r.has_source_dtype,
       "optional facts not set: none recorded or restored");
    bfp_qtensor_free(&r);
    q.has_axis = 1;
    q.axis = 0;
    q.has_source_dtype = 1;
    q.source_dtype = BFP_DTYPE_BF16;
    q.has_stats = 1;
    q.stats.blocks = 6;
    q.stats.nonfinite_blocks = 2;
    q.stats.flushed_blocks = (size_t)1 << 52;
    OK(bfp_qtensor_save(tpath("o.safetensors"), "w", &q, 1, err, sizeof err) == BFP_OK &&
           bfp_qtensor_load(tpath("o.safetensors"), NULL, &r, err, sizeof err) == BFP_OK &&
           same_q(&q, &r) && r.has_axis && r.axis == 0 && r.has_source_dtype &&
           r.source_dtype == BFP_DTYPE_BF16 && r.has_stats &&
           memcmp(&r.stats, &q.stats, sizeof q.stats) == 0,
       "axis, source dtype and stats survive a round trip: %s", err);
    bfp_qtensor_free(&r);
    OK(bfpio_st_open(&f, tpath("o.safetensors"), err, sizeof err) == BFP_OK, "reopen");
    const char *ax = bfpio_st_meta(&f, "bfp.axis"), *dt = bfpio_st_meta(&f, "bfp.source_dtype");
    const char *st = bfpio_st_meta(&f, "bfp.stats");
    OK(ax && strcmp(ax, "0") == 0 && dt && strcmp(dt, "bf16") == 0 && st &&
           strcmp(st, "{\"blocks\":6,\"nonfinite_blocks\":2,\"flushed_blocks\":4503599627370496}") == 0,
       "metadata: bfp.axis \"0\", bfp.source_dtype \"bf16\", bfp.stats %s", st ? st : "(none)");
    bfpio_st_close(&f);
    q.axis = 2;
    OK(bfp_qtensor_save(tpath("o2.safetensors"), "w", &q, 1, err, sizeof err) == BFP_ERR_ARG &&
           strstr(err, "axis 2 is out of range") != NULL,
       "save refuses an axis past the shape: %s", err);
    q.axis = 0;

    /* Forged values: the same planes, one bad key at a time. */
    const char *bad[][2] = {
        {"bfp.axis", "2"},         {"bfp.axis", ""},           {"bfp.axis", "-1"},
        {"bfp.axis", "1x"},        {"bfp.axis", "99999999999999999999"},
        {"bfp.source_dtype", "f64"}, {"bfp.stats", "[1]"},     {"bfp.stats", "{\"blocks\":-1}"},
        {"bfp.stats", "{\"blocks\":1.5}"}, {"bfp.stats", "{\"blocks\":\"1\"}"},
        {"bfp.stats", "{}x"},
    };
    char codes_name[] = "w.codes", scales_name[] = "w.scales";
    size_t dc = q.sizes.codes, ds = q.sizes.scales;
    bfpio_st_out out[2] = {{codes_name, "U8", 1, 1, &dc, q.codes, dc},
                           {scales_name, "U8", 1, 1, &ds, q.scales, ds}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *keys[5] = {"bfp.format", "bfp.shape", "bfp.name", "bfp.layout", bad[i][0]};
        const char *vals[5] = {"mxfp4", "[3, 64]", "w", "planar-v1", bad[i][1]};
        bfpio_st_write(tpath("f.safetensors"), out, 2, keys, vals, 5, 1, err, sizeof err);
        err[0] = '\0';
        OK(bfp_qtensor_load(tpath("f.safetensors"), NULL, &r, err, sizeof err) == BFP_ERR_DATA &&
               strstr(err, bad[i][0]) != NULL && r.codes == NULL,
           "%s '%s' is refused, naming the key: %s", bad[i][0], bad[i][1], err);
        bfp_qtensor_free(&r);
    }
    bfp_qtensor_free(&q);
    unlink(tpath("o.safetensors"));
    unlink(tpath("f.safetensors"));
}

/* Several float tensors in one file, and what is not one. */
static void test_tensor_sets(void)
{
    char err[256] = "";
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3c00, 0x4000, 0x4200, 0x4400}, c = 0x3f80;
    bfp_tensor ts[3] = {{BFP_DTYPE_F32, 2, {2, 3}, a, sizeof a},
                        {BFP_DTYPE_F16, 1, {4}, b, sizeof b},
                        {BFP_DTYPE_BF16, 0, {0}, &c, 2}};
    const char *names[3] = {"w", "emb", "bias"};
    bfp_tensor_set s;
    OK(bfp_safetensors_save_set(tpath("s.safetensors"), names, ts, 3, 0, err, sizeof err) ==
           BFP_OK && bfp_safetensors_load_set(tpath("s.safetensors"), &s, err, sizeof err) ==
           BFP_OK && s.count == 3,
       "three float tensors saved and loaded as a set: %s", err);
    /* header order: the F32 first, then the 2-byte ones by name */
    const int want[3] = {0, 2, 1};
    for (size_t i = 0; i < s.count && i < 3; i++) {
        const bfp_tensor *t = &s.tensors[i], *w = &ts[want[i]];
        OK(strcmp(s.names[i], names[want[i]]) == 0 && t->dtype == w->dtype &&
               t->ndim == w->ndim && t->nbytes == w->nbytes &&
               memcmp(t->data, w->data, w->nbytes) == 0 &&
               memcmp(t->shape, w->shape, w->ndim * sizeof w->shape[0]) == 0,
           "set entry %zu is '%s' with its dtype, shape and bytes", i, names[want[i]]);
    }
    bfp_tensor_set_free(&s);
    bfp_tensor_set_free(NULL);
    const char *twice[2] = {"w", "w"};
    OK(bfp_safetensors_save_set(tpath("d.safetensors"), twice, ts, 2, 0, err, sizeof err) ==
           BFP_ERR_ARG && tdir_count() == 1,
       "a name given twice is refused, nothing written: %s", err);
    /* a quantized container holds U8 planes: not a set of float tensors */
    bfp_qtensor q;
    const size_t shape[1] = {32};
    bfp_qtensor_alloc(&q, BFP_MXFP4, 1, shape, err, sizeof err);
    bfp_qtensor_save(tpath("q.safetensors"), "w", &q, 0, err, sizeof err);
    OK(bfp_safetensors_load_set(tpath("q.safetensors"), &s, err, sizeof err) == BFP_ERR_DATA &&
           strstr(err, "has dtype U8") != NULL && s.count == 0 && s.names == NULL,
       "a U8 tensor is refused by name: %s", err);
    bfp_qtensor_free(&q);
    /* a .npy file given as safetensors says so */
    static const uint8_t npy[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 118, 0};
    FILE *fp = fopen(tpath("x.npy"), "wb");
    fwrite(npy, 1, sizeof npy, fp);
    fclose(fp);
    OK(bfp_qtensor_load(tpath("x.npy"), NULL, &q, err, sizeof err) == BFP_ERR_DATA &&
           strstr(err, "not a safetensors file (it starts like a .npy file)") != NULL,
       "a .npy file: 'not a safetensors file': %s", err);
    bfp_tensor t;
    OK(bfp_safetensors_parse("GGUF\3\0\0\0\0\0\0\0\0\0\0\0", 16, NULL, &t, err, sizeof err) ==
           BFP_ERR_DATA && strstr(err, "not a safetensors file (it starts like a GGUF file)"),
       "a GGUF file: 'not a safetensors file': %s", err);
    unlink(tpath("s.safetensors"));
    unlink(tpath("q.safetensors"));
    unlink(tpath("x.npy"));
}

int main(void)
{
    tdir_make();
    test_round_trips();
    test_with_codec();
    test_metadata();
    test_forged();
    test_alloc_and_save_args();
    test_optional_keys();
    test_tensor_sets();
    return check_summary("test_io_container");
}

/*
 * container.c - the quantized container: a safetensors file whose U8 tensors
 * are the planes of one quantized tensor (docs/container.md).
 */
#include "io_internal.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT "planar-v1"

static const char *const rounding_names[] = {
    "default", "nearest_even", "nearest_away", "toward_zero", "stochastic"};
/* by bfp_scale_mode value: DEFAULT is written "floor" (MX's default, every
 * other family's one rule), and "floor" reads back as DEFAULT */
static const char *const scale_mode_names[] = {"floor", "ceil", "even", "rceil", "floor"};
#define NROUND (sizeof rounding_names / sizeof rounding_names[0])
#define NSCALE (sizeof scale_mode_names / sizeof scale_mode_names[0])

/* The bfp.options JSON text (malloc'd), or NULL for bad enum values. */
static char *options_text(const bfp_options *o)
{
    char seed[24];
    if ((unsigned)o->rounding >= NROUND || (unsigned)o->scale_mode >= NSCALE)
        return NULL;
    /* A string: 64-bit seeds do not survive JSON readers' doubles. */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON *j = cJSON_CreateObject();
    char *text = NULL;
    if (j && cJSON_AddStringToObject(j, "rounding", rounding_names[o->rounding]) &&
        cJSON_AddStringToObject(j, "seed", seed) &&
        cJSON_AddStringToObject(j, "scale_mode", scale_mode_names[o->scale_mode]) &&
        cJSON_AddBoolToObject(j, "nvfp4_no_tensor_scale", o->nvfp4_no_tensor_scale != 0) &&
        cJSON_AddBoolToObject(j, "nvfp4_2d", o->nvfp4_2d != 0))
        text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return text;
}

static const bfp_stats_field stats_fields[] = {
    {"blocks", offsetof(bfp_stats, blocks)},
    {"nonfinite_blocks", offsetof(bfp_stats, nonfinite_blocks)},
    {"flushed_blocks", offsetof(bfp_stats, flushed_blocks)},
};
#define NSTATS (sizeof stats_fields / sizeof stats_fields[0])

const bfp_stats_field *bfp_stats_fields(size_t *count)
{
    if (count)
        *count = NSTATS;
    return stats_fields;
}

static size_t *stats_at(bfp_stats *s, size_t i)
{
    return (size_t *)(void *)((char *)s + stats_fields[i].offset);
}

/* The bfp.stats JSON text (malloc'd): {"blocks":12,...}, integers. */
static char *stats_text(const bfp_stats *s)
{
    bfp_stats c = *s;
    char num[24];
    cJSON *j = cJSON_CreateObject(), *v;
    char *text = NULL;
    int ok = j != NULL;
    for (size_t i = 0; ok && i < NSTATS; i++) {
        snprintf(num, sizeof num, "%zu", *stats_at(&c, i));
        v = cJSON_CreateRaw(num);
        ok = v && cJSON_AddItemToObject(j, stats_fields[i].name, v);
        if (!ok)
            cJSON_Delete(v);
    }
    if (ok)
        text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return text;
}

/* Parse bfp.stats: a JSON object of non-negative integers (below 2^53);
 * missing fields are 0, unknown ones ignored. */
static const char *parse_stats(const char *text, bfp_stats *s)
{
    const char *why = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, NULL, 1); /* nothing after the object */
    memset(s, 0, sizeof *s);
    if (!cJSON_IsObject(j))
        why = "bfp.stats is not a JSON object";
    for (size_t i = 0; !why && i < NSTATS; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, stats_fields[i].name);
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1.0;
        if (!v)
            continue;
        if (!(d >= 0.0 && d <= 9007199254740992.0) || (double)(uint64_t)d != d ||
            (uint64_t)d > SIZE_MAX)
            why = "bfp.stats has a count that is not a non-negative integer";
        else
            *stats_at(s, i) = (size_t)d;
    }
    cJSON_Delete(j);
    return why;
}

static int find_name(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

/* Parse bfp.options into o; NULL text leaves the defaults. Missing keys keep
 * their defaults and unknown keys are ignored (newer writers stay readable),
 * but a key that is present must be well-formed. */
static const char *parse_options(const char *text, bfp_options *o)
{
    const char *why = NULL;
    int k;
    bfp_options_init(o);
    if (!text)
        return NULL;
    cJSON *j = cJSON_ParseWithOpts(text, NULL, 1); /* nothing after it */
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "rounding");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seed");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "scale_mode");
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(j, "nvfp4_no_tensor_scale");
    const cJSON *n2 = cJSON_GetObjectItemCaseSensitive(j, "nvfp4_2d");
    if (!cJSON_IsObject(j)) {
        why = "is not a JSON object";
        goto out;
    }
    if (r) {
        k = cJSON_IsString(r) ? find_name(rounding_names, NROUND, r->valuestring) : -1;
        if (k < 0) {
            why = "has an unknown rounding";
            goto out;
        }
        o->rounding = (bfp_rounding)k;
    }
    if (m) {
        k = cJSON_IsString(m) ? find_name(scale_mode_names, NSCALE, m->valuestring) : -1;
        if (k < 0) {
            why = "has an unknown scale_mode";
            goto out;
        }
        o->scale_mode = (bfp_scale_mode)k;
    }
    if ((nt && !cJSON_IsBool(nt)) || (n2 && !cJSON_IsBool(n2))) {
        why = "has a non-boolean nvfp4 flag";
        goto out;
    }
    o->nvfp4_no_tensor_scale = cJSON_IsTrue(nt);
    o->nvfp4_2d = cJSON_IsTrue(n2);
    if (s) {
        const char *p = cJSON_IsString(s) ? s->valuestring : "";
        uint64_t v = 0;
        if (!*p)
            why = "has a bad seed (expected a decimal string)";
        for (; !why && *p; p++) {
            unsigned dgt = (unsigned)(*p - '0');
            if (*p < '0' || *p > '9' || v > (UINT64_MAX - dgt) / 10)
                why = "has a bad seed (expected a decimal string)";
            else
                v = v * 10 + dgt;
        }
        o->seed = v;
    }
out:
    cJSON_Delete(j);
    return why;
}

/* "<name>.<plane>", malloc'd. */
static char *plane_name(const char *name, const char *plane)
{
    size_t a = strlen(name), b = strlen(plane);
    char *s = malloc(a + b + 2);
    if (s) {
        memcpy(s, name, a);
        s[a] = '.';
        memcpy(s + a + 1, plane, b + 1);
    }
    return s;
}

static const char *const plane_ids[4] = {"codes", "scales", "meta", "tensor_scale"};

bfp_status bfp_qtensor_save(const char *path, const char *name,
                            const bfp_qtensor *q, int force, char *err,
                            size_t errlen)
{
    size_t rows, cols;
    bfp_plane_sizes sz;
    char *names[4] = {NULL, NULL, NULL, NULL};
    char *opts = NULL, *stats = NULL;
    char stxt[8 * 24 + 4], axis[24];
    uint8_t ts[4];
    bfpio_st_out out[4];
    size_t n = 0, dims[4];
    bfp_status st;

    if (!path || !q)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_qtensor_save: NULL argument");
    if (!name)
        name = "tensor";
    if (!*name)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: empty tensor name", path);
    st = bfpio_geometry(q->format, q->ndim, q->shape, &rows, &cols, &sz, BFP_OK, path,
                  err, errlen);
    if (st != BFP_OK)
        return st;
    const bfp_format_info *info = bfp_format_get(q->format);
    /* The planes must be what the shape says; a stale q would write garbage. */
    if (rows != q->rows || cols != q->cols || memcmp(&sz, &q->sizes, sizeof sz) != 0)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s: quantized tensor sizes do not match its shape", path);
    if (!q->codes || !q->scales || (sz.meta > 0 && !q->meta))
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s: quantized tensor is missing a plane", path);
    if (q->has_axis && q->axis >= q->ndim)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s: axis %zu is out of range for %zu dimensions",
                          path, q->axis, q->ndim);
    if (q->has_source_dtype && bfp_dtype_size(q->source_dtype) == 0)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: invalid source dtype %d",
                          path, (int)q->source_dtype);
    if (!(opts = options_text(&q->options)))
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s: invalid rounding or scale_mode in options", path);

    const void *data[4] = {q->codes, q->scales, q->meta, ts};
    size_t bytes[4] = {sz.codes, sz.scales, sz.meta, 4};
    int used[4] = {1, 1, info->meta_bytes > 0, info->has_tensor_scale != 0};
    uint32_t bits;
    memcpy(&bits, &q->tensor_scale, 4);
    bfpio_put_le(ts, bits, 4); /* the file is little-endian on any host */
    for (int p = 0; p < 4; p++) {
        if (!used[p])
            continue;
        if (!(names[p] = plane_name(name, plane_ids[p]))) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
            goto done;
        }
        dims[n] = p == 3 ? 1 : bytes[p];
        out[n].name = names[p];
        out[n].dtype = p == 3 ? "F32" : "U8";
        out[n].elem_size = p == 3 ? 4 : 1;
        out[n].ndim = 1;
        out[n].shape = &dims[n];
        out[n].data = data[p];
        out[n].nbytes = bytes[p];
        n++;
    }
    bfpio_shape_text(stxt, sizeof stxt, q->shape, q->ndim);
    const char *keys[9] = {"bfp.format", "bfp.shape",   "bfp.name",
                           "bfp.version", "bfp.options", "bfp.layout"};
    const char *vals[9] = {info->name, stxt, name, bfp_version(), opts, LAYOUT};
    size_t nmeta = 6;
    if (q->has_axis) {
        snprintf(axis, sizeof axis, "%zu", q->axis);
        keys[nmeta] = "bfp.axis";
        vals[nmeta++] = axis;
    }
    if (q->has_source_dtype) {
        keys[nmeta] = "bfp.source_dtype";
        vals[nmeta++] = bfp_dtype_name(q->source_dtype);
    }
    if (q->has_stats) {
        if (!(stats = stats_text(&q->stats))) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
            goto done;
        }
        keys[nmeta] = "bfp.stats";
        vals[nmeta++] = stats;
    }
    st = bfpio_st_write(path, out, n, keys, vals, nmeta, force, err, errlen);
done:
    for (int p = 0; p < 4; p++)
        free(names[p]);
    free(opts);
    free(stats);
    return st;
}

/* Parse bfp.shape ("[4096, 14336]") with cJSON. */
static int parse_shape(const char *text, size_t *shape, size_t *ndim)
{
    cJSON *j = text ? cJSON_ParseWithOpts(text, NULL, 1) : NULL;
    const cJSON *it;
    int ok = cJSON_IsArray(j) && cJSON_GetArraySize(j) <= BFP_IO_MAX_DIMS;
    *ndim = 0;
    cJSON_ArrayForEach(it, j)
    {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
        if (!ok || !(d >= 1.0 && d <= 9007199254740992.0) ||
            (double)(uint64_t)d != d || (uint64_t)d > SIZE_MAX) {
            ok = 0;
            break;
        }
        shape[(*ndim)++] = (size_t)d;
    }
    cJSON_Delete(j);
    return ok;
}

/* Read one plane: it must be present exactly when the format uses it, be a
 * 1-D tensor of the given dtype, and hold exactly `need` bytes. */
static bfp_status load_plane(bfpio_st_file *f, const char *path, const char *name,
                             int p, int used, size_t need, const char *fmtname,
                             const char *stxt, void **out, char *err, size_t errlen)
{
    const char *dtype = p == 3 ? "F32" : "U8";
    char *pn = plane_name(name, plane_ids[p]);
    bfp_status st = BFP_OK;
    *out = NULL;
    if (!pn)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    long i = bfpio_st_find(f, pn);
    if (i < 0) {
        if (used)
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: plane %s is missing", path, BFPIO_Q(pn));
        goto done;
    }
    const bfpio_st_entry *e = &f->entries[i];
    if (!used) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: unexpected plane %s (%s has no %s plane)", path,
                        BFPIO_Q(pn), fmtname, plane_ids[p]);
        goto done;
    }
    if (strcmp(e->dtype, dtype) != 0 || e->ndim != 1) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: plane %s must be a 1-D %s tensor", path,
                        BFPIO_Q(pn), dtype);
        goto done;
    }
    if (e->end - e->begin != (uint64_t)need) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: plane %s has %llu bytes, but %s with shape %s "
                        "needs %zu", path, BFPIO_Q(pn),
                        (unsigned long long)(e->end - e->begin), fmtname, stxt,
                        need);
        goto done;
    }
    if (!(*out = malloc(need ? need : 1))) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen,
                        "out of memory loading %s (%zu bytes)", BFPIO_Q(pn),
                        need);
        goto done;
    }
    st = bfpio_st_read(f, (size_t)i, *out, err, errlen);
    if (st != BFP_OK) {
        free(*out);
        *out = NULL;
    }
done:
    free(pn);
    return st;
}

/* The optional keys bfp.axis, bfp.source_dtype and bfp.stats into q (after
 * its shape); returns why one is malformed, or NULL. */
static const char *parse_extras(const bfpio_st_file *f, bfp_qtensor *q)
{
    const char *ax = bfpio_st_meta(f, "bfp.axis");
    const char *dt = bfpio_st_meta(f, "bfp.source_dtype");
    const char *stats = bfpio_st_meta(f, "bfp.stats");
    if (ax) {
        size_t v = 0;
        const char *p = ax;
        for (; *p >= '0' && *p <= '9' && v <= BFP_IO_MAX_DIMS; p++)
            v = v * 10 + (size_t)(*p - '0');
        if (p == ax || *p || v >= q->ndim)
            return "bfp.axis is not a dimension of bfp.shape (a decimal below "
                   "its length)";
        q->has_axis = 1;
        q->axis = v;
    }
    if (dt) {
        static const bfp_dtype dtypes[] = {BFP_DTYPE_F32, BFP_DTYPE_BF16, BFP_DTYPE_F16};
        for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
            if (strcmp(dt, bfp_dtype_name(dtypes[i])) == 0) {
                q->has_source_dtype = 1;
                q->source_dtype = dtypes[i];
            }
        if (!q->has_source_dtype)
            return "bfp.source_dtype is not f32, bf16 or f16";
    }
    if (stats) {
        const char *why = parse_stats(stats, &q->stats);
        if (why)
            return why;
        q->has_stats = 1;
    }
    return NULL;
}

/* The quantized tensor of the open file f0, which this closes. */
static bfp_status qtensor_read(bfpio_st_file *f0, const char *name, bfp_qtensor *q,
                               char *err, size_t errlen)
{
    bfpio_st_file f = *f0;
    const char *path = f.rd.path;
    char stxt[8 * 24 + 4];
    void *pl[4] = {NULL, NULL, NULL, NULL};
    const char *why;
    bfp_status st;

    const char *fmtname = bfpio_st_meta(&f, "bfp.format");
    const char *layout = bfpio_st_meta(&f, "bfp.layout");
    const char *stored = bfpio_st_meta(&f, "bfp.name");
    if (!fmtname || !stored) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not a bfp quantized container (no bfp.format or "
                        "bfp.name metadata)", path);
        goto done;
    }
    if (!layout || strcmp(layout, LAYOUT) != 0) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: unsupported bfp.layout %s (expected " LAYOUT ")",
                        path, layout ? BFPIO_Q(layout) : "(missing)");
        goto done;
    }
    if (name && strcmp(name, stored) != 0) {
        st = bfpio_fail(BFP_ERR_ARG, err, errlen,
                        "%s: no quantized tensor %s (the file holds %s)",
                        path, BFPIO_Q(name), BFPIO_Q(stored));
        goto done;
    }
    if (bfp_format_from_name(fmtname, &q->format) != BFP_OK) {
        st = bfpio_fail(BFP_ERR_FORMAT, err, errlen,
                        "%s: unknown format %s", path,
                        BFPIO_Q(fmtname));
        goto done;
    }
    const bfp_format_info *info = bfp_format_get(q->format);
    if (!info || !parse_shape(bfpio_st_meta(&f, "bfp.shape"), q->shape, &q->ndim)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: bfp.shape is missing or not a list of up to %d "
                        "positive integers", path, BFP_IO_MAX_DIMS);
        goto done;
    }
    st = bfpio_geometry(q->format, q->ndim, q->shape, &q->rows, &q->cols, &q->sizes,
                  BFP_ERR_DATA, path, err, errlen);
    if (st != BFP_OK)
        goto done;
    if ((why = parse_options(bfpio_st_meta(&f, "bfp.options"), &q->options))) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: bfp.options %s", path, why);
        goto done;
    }
    if ((why = parse_extras(&f, q))) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: %s", path, why);
        goto done;
    }
    bfpio_shape_text(stxt, sizeof stxt, q->shape, q->ndim);
    size_t need[4] = {q->sizes.codes, q->sizes.scales, q->sizes.meta, 4};
    int used[4] = {1, 1, info->meta_bytes > 0, info->has_tensor_scale != 0};
    for (int p = 0; p < 4; p++) {
        st = load_plane(&f, path, stored, p, used[p], need[p], info->name, stxt,
                        &pl[p], err, errlen);
        if (st != BFP_OK)
            goto done;
    }
    q->codes = pl[0];
    q->scales = pl[1];
    q->meta = pl[2];
    q->tensor_scale = 1.0f;
    if (pl[3]) {
        uint32_t bits = (uint32_t)bfpio_get_le(pl[3], 4);
        memcpy(&q->tensor_scale, &bits, 4);
        free(pl[3]);
    }
    pl[0] = pl[1] = pl[2] = pl[3] = NULL;
done:
    for (int p = 0; p < 4; p++)
        free(pl[p]);
    bfpio_st_close(&f);
    if (st != BFP_OK)
        bfp_qtensor_free(q);
    return st;
}

bfp_status bfp_qtensor_load(const char *path, const char *name, bfp_qtensor *q,
                            char *err, size_t errlen)
{
    bfpio_st_file f;
    if (!q)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_qtensor_load: NULL q");
    memset(q, 0, sizeof *q);
    bfp_status st = bfpio_st_open(&f, path, err, errlen);
    return st != BFP_OK ? st : qtensor_read(&f, name, q, err, errlen);
}

bfp_status bfp_qtensor_parse(const void *buf, size_t len, const char *name,
                             bfp_qtensor *q, char *err, size_t errlen)
{
    bfpio_st_file f;
    if (!q || (!buf && len))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_qtensor_parse: NULL argument");
    memset(q, 0, sizeof *q);
    bfp_status st = bfpio_st_open_mem(&f, buf, len, "(container in memory)", err,
                                      errlen);
    return st != BFP_OK ? st : qtensor_read(&f, name, q, err, errlen);
}

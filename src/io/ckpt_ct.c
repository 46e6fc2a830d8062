/*
 * ckpt_ct.c - reading one quantized tensor back from a checkpoint that
 * `bfp convert` wrote: compressed-tensors (MODULE.weight_packed /
 * .weight_scale / .weight_global_scale, or MODULE.weight in F8_E4M3 for
 * mxfp8) and bfp's planar-ckpt-v1 shards (NAME.codes / .scales / .meta /
 * .tensor_scale, shapes in the "bfp.quantized" metadata).
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static char *cat3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* The format named by a config.json's quantization_config, or 0; named
 * gets the name it gives ("" without one), *group the weights' group_size
 * of its config groups (0: none given; -1: they differ). */
static bfp_format config_format(const char *dir, char *named, size_t namedlen, int *group)
{
    char *path = cat3(dir, "/", "config.json"), *text = NULL, e[8];
    size_t len = 0;
    bfp_format fmt = 0;
    if (path && bfp_io_read_file(path, (void **)&text, &len, e, sizeof e) == BFP_OK) {
        cJSON *root = cJSON_ParseWithLength(text, len);
        const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(qc, "format");
        const cJSON *g, *gs;
        if (cJSON_IsString(f))
            snprintf(named, namedlen, "%s", f->valuestring);
        *group = 0;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(qc, "config_groups")) {
            gs = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(g, "weights"), "group_size");
            if (cJSON_IsNumber(gs))
                *group = *group && *group != gs->valueint ? -1 : gs->valueint;
        }
        static const bfp_format all[] = {BFP_MXFP4, BFP_NVFP4, BFP_MXFP6_E2M3,
                                         BFP_MXFP8_E4M3, BFP_MXINT8, BFP_MXINT4};
        for (size_t i = 0; cJSON_IsString(f) && i < 6; i++) {
            int bits;
            if (strcmp(ck_ct_format(all[i], &bits), f->valuestring) == 0)
                fmt = all[i];
        }
        cJSON_Delete(root);
    }
    free(text);
    free(path);
    return fmt;
}

/* The shard of a checkpoint directory that holds tensor, via its index. */
static char *shard_for(const char *dir, const char *tensor)
{
    char *path = cat3(dir, "/", "model.safetensors.index.json"), *text = NULL, e[8];
    char *out = NULL;
    size_t len = 0;
    if (path && bfp_io_read_file(path, (void **)&text, &len, e, sizeof e) == BFP_OK) {
        cJSON *root = cJSON_ParseWithLength(text, len);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(root, "weight_map"), tensor);
        if (cJSON_IsString(v) && !strchr(v->valuestring, '/'))
            out = cat3(dir, "/", v->valuestring);
        cJSON_Delete(root);
    } else {
        out = cat3(dir, "/", "model.safetensors");
    }
    free(text);
    free(path);
    return out;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Read entry `name` of f into a fresh buffer of exactly want bytes. */
static bfp_status read_plane(bfpio_st_file *f, const char *path, const char *name,
                             const char *dtype, size_t want, uint8_t **out,
                             char *err, size_t errlen)
{
    long i = bfpio_st_find(f, name);
    if (i < 0)
        return bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: no tensor '%s'", path, name);
    const bfpio_st_entry *e = &f->entries[i];
    if (strcmp(e->dtype, dtype) != 0 || e->end - e->begin != want)
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s: tensor '%s' is %s of %llu bytes; the format needs %s "
                          "of %zu", path, name, e->dtype,
                          (unsigned long long)(e->end - e->begin), dtype, want);
    if (!(*out = malloc(want ? want : 1)))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    return bfpio_st_read(f, (size_t)i, *out, err, errlen);
}

/* One tensor of a shard in the bfp layout (planar-ckpt-v1). */
static bfp_status load_planar(bfpio_st_file *f, const char *file, const char *name,
                              bfp_qtensor *q, char *err, size_t errlen)
{
    const char *fmtname = bfpio_st_meta(f, "bfp.format");
    const char *qtext = bfpio_st_meta(f, "bfp.quantized");
    cJSON *qj = qtext ? cJSON_Parse(qtext) : NULL, *it, *sh = NULL;
    bfp_format fmt;
    size_t shape[BFP_IO_MAX_DIMS], nd = 0;
    char *tn = NULL;
    bfp_status st = BFP_OK;
    if (!fmtname || bfp_format_from_name(fmtname, &fmt) != BFP_OK || !cJSON_IsObject(qj)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: bfp.format or bfp.quantized is missing or bad", file);
        goto done;
    }
    cJSON_ArrayForEach(it, qj) {
        if (name ? strcmp(it->string, name) == 0 : 1) {
            if (sh) {
                st = bfpio_fail(BFP_ERR_ARG, err, errlen, "%s holds several quantized "
                                "tensors: name one (--name)", file);
                goto done;
            }
            sh = it;
        }
    }
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) < 1 ||
        cJSON_GetArraySize(sh) > BFP_IO_MAX_DIMS) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: no quantized tensor%s%s", file,
                        name ? " " : "", name ? name : "");
        goto done;
    }
    cJSON_ArrayForEach(it, sh) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 1 || it->valuedouble > 9e15) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: bad shape of %s", file,
                            sh->string);
            goto done;
        }
        shape[nd++] = (size_t)it->valuedouble;
    }
    name = sh->string;
    if ((st = bfp_qtensor_alloc(q, fmt, nd, shape, err, errlen)) != BFP_OK)
        goto done;
    const bfp_format_info *fi = bfp_format_get(fmt);
    uint8_t **planes[3] = {&q->codes, &q->scales, &q->meta};
    const char *suffix[3] = {".codes", ".scales", ".meta"};
    size_t sizes[3] = {q->sizes.codes, q->sizes.scales, q->sizes.meta};
    for (int k = 0; st == BFP_OK && k < 3; k++) {
        if (sizes[k] == 0)
            continue;
        free(*planes[k]);
        *planes[k] = NULL;
        free(tn);
        st = (tn = cat3(name, suffix[k], "")) ? read_plane(f, file, tn, "U8", sizes[k],
                                                            planes[k], err, errlen)
                                              : BFP_ERR_NOMEM;
    }
    if (st == BFP_OK && fi->has_tensor_scale) {
        uint8_t *ts = NULL;
        free(tn);
        st = (tn = cat3(name, ".tensor_scale", ""))
                 ? read_plane(f, file, tn, "F32", 4, &ts, err, errlen) : BFP_ERR_NOMEM;
        if (st == BFP_OK)
            memcpy(&q->tensor_scale, ts, 4);
        free(ts);
    }
done:
    free(tn);
    cJSON_Delete(qj);
    return st;
}

bfp_status bfp_ct_load_qtensor(const char *path, const char *name,
                               bfp_qtensor *q, char *err, size_t errlen)
{
    char *file = NULL, *dir = NULL, *module = NULL, *tn = NULL;
    bfpio_st_file f;
    bfp_status st;
    memset(q, 0, sizeof *q);
    memset(&f, 0, sizeof f);
    f.rd.fd = -1;
    if (is_dir(path)) {
        dir = cat3(path, "", "");
        if (!name) {
            st = bfpio_fail(BFP_ERR_ARG, err, errlen,
                            "%s: name the module to read (--name)", path);
            goto done;
        }
        char *sn = cat3(name, ".weight_scale", ""); /* every format has it */
        file = sn ? shard_for(path, sn) : NULL;
        free(sn);
        if (!file && (sn = cat3(name, ".codes", ""))) { /* the bfp layout */
            file = shard_for(path, sn);
            free(sn);
        }
    } else {
        file = cat3(path, "", "");
        const char *slash = strrchr(path, '/');
        dir = slash ? strndup(path, (size_t)(slash - path)) : cat3(".", "", "");
    }
    if (!dir) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto done;
    }
    if (!file) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: no quantized module '%s' in its "
                        "model.safetensors.index.json", path, name);
        goto done;
    }
    if ((st = bfpio_st_open(&f, file, err, errlen)) != BFP_OK)
        goto done;
    const char *lay = bfpio_st_meta(&f, "bfp.layout");
    if (lay && strcmp(lay, "planar-ckpt-v1") == 0) {
        st = load_planar(&f, file, name, q, err, errlen);
        goto done;
    }
    /* the module: the one named, or the only one with a weight_scale */
    for (size_t i = 0; i < f.count; i++) {
        const char *n = f.entries[i].name;
        if (!has_suffix(n, ".weight_scale"))
            continue;
        size_t ml = strlen(n) - strlen(".weight_scale");
        if (name && (strlen(name) != ml || strncmp(n, name, ml) != 0))
            continue;
        if (module) {
            st = bfpio_fail(BFP_ERR_ARG, err, errlen,
                            "%s holds several quantized modules: name one (--name)",
                            file);
            goto done;
        }
        if (!(module = strndup(n, ml))) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
            goto done;
        }
    }
    if (!module) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: no compressed-tensors module%s%s (MODULE.weight_scale)",
                        file, name ? " " : "", name ? name : "");
        goto done;
    }
    const bfpio_st_entry *sc = &f.entries[bfpio_st_find(&f, (tn = cat3(module, ".weight_scale", "")))];
    free(tn);
    tn = NULL;
    long ip = bfpio_st_find(&f, (tn = cat3(module, ".weight_packed", "")));
    free(tn);
    tn = NULL;
    long iw = bfpio_st_find(&f, (tn = cat3(module, ".weight", "")));
    free(tn);
    tn = NULL;
    char named[64] = "";
    int group = 0;
    bfp_format fmt = config_format(dir, named, sizeof named, &group);
    if (!fmt && named[0]) {
        st = bfpio_fail(BFP_ERR_UNSUPPORTED, err, errlen,
                        "%s/config.json: quantization_config's format '%s' is not one bfp "
                        "reads (mxfp4-pack-quantized, nvfp4-pack-quantized, "
                        "mxfp6-pack-quantized, mxfp8-quantized, int-quantized and "
                        "pack-quantized with MX scales)", dir, named);
        goto done;
    }
    if (!fmt) { /* no config.json: the dtypes tell */
        if (strcmp(sc->dtype, "F8_E4M3") == 0)
            fmt = BFP_NVFP4;
        else if (strcmp(sc->dtype, "BF16") == 0)
            fmt = ip >= 0 ? BFP_MXINT4 : BFP_MXINT8;
        else if (iw >= 0 && strcmp(f.entries[iw].dtype, "F8_E4M3") == 0)
            fmt = BFP_MXFP8_E4M3;
        else if (ip >= 0 && sc->ndim == 2 && f.entries[ip].ndim == 2 &&
                 f.entries[ip].shape[1] * 4 == sc->shape[1] * 3 * 32)
            fmt = BFP_MXFP6_E2M3;
        else
            fmt = BFP_MXFP4;
    }
    const bfp_format_info *fi = bfp_format_get(fmt);
    if (group && group != fi->block) {
        st = bfpio_fail(BFP_ERR_UNSUPPORTED, err, errlen,
                        "%s/config.json: '%s' with group_size %d, not %s's block of %d",
                        dir, named, group, fi->name, fi->block);
        goto done;
    }
    if (sc->ndim != 2) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: %s.weight_scale is not 2-D",
                        file, module);
        goto done;
    }
    size_t shape[2] = {sc->shape[0], sc->shape[1] * (size_t)fi->block};
    if ((st = bfp_qtensor_alloc(q, fmt, 2, shape, err, errlen)) != BFP_OK)
        goto done;
    free(q->codes);
    free(q->scales);
    q->codes = q->scales = NULL;
    int int4 = fmt == BFP_MXINT4, mxint = fmt == BFP_MXINT8 || int4;
    if ((st = read_plane(&f, file, (tn = cat3(module, fi->elem_bits == 8 ? ".weight"
                                                                          : ".weight_packed", "")),
                         int4 ? "I32" : mxint ? "I8" : fi->elem_bits == 8 ? "F8_E4M3" : "U8",
                         q->sizes.codes, &q->codes, err, errlen)) != BFP_OK)
        goto done;
    for (size_t k = 0; int4 && k < q->sizes.codes; k++)
        q->codes[k] ^= 0x88; /* pack-quantized stores k + 8 */
    free(tn);
    if ((st = read_plane(&f, file, (tn = cat3(module, ".weight_scale", "")),
                         mxint ? "BF16" : fi->scale == BFP_SCALE_UE4M3 ? "F8_E4M3" : "U8",
                         q->sizes.scales * (mxint ? 2 : 1), &q->scales, err,
                         errlen)) != BFP_OK)
        goto done;
    for (size_t k = 0; mxint && k < q->sizes.scales; k++) { /* bf16 2^(e-133) -> e */
        int e = ck_bf16_scale_to_e8m0((uint16_t)(q->scales[2 * k] | q->scales[2 * k + 1] << 8),
                                      int4 ? 2 : 6);
        if (e < 0) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: %s.weight_scale[%zu] is not a power of two 2^(e-127) "
                            "times the INT grid's step, so not an MX INT scale",
                            file, module, k);
            goto done;
        }
        q->scales[k] = (uint8_t)e;
    }
    free(tn);
    tn = NULL;
    if (fi->has_tensor_scale) {
        uint8_t *gs = NULL;
        st = read_plane(&f, file, (tn = cat3(module, ".weight_global_scale", "")),
                        "F32", 4, &gs, err, errlen);
        if (st == BFP_OK)
            memcpy(&q->tensor_scale, gs, 4);
        free(gs);
    }
done:
    if (st != BFP_OK)
        bfp_qtensor_free(q);
    bfpio_st_close(&f);
    free(tn);
    free(module);
    free(file);
    free(dir);
    return st;
}

int bfp_ct_is_checkpoint(const char *path)
{
    bfpio_st_file f;
    char e[8];
    int yes = 0;
    if (is_dir(path))
        return 1;
    if (bfpio_st_open(&f, path, e, sizeof e) != BFP_OK)
        return 0;
    const char *lay = bfpio_st_meta(&f, "bfp.layout");
    yes = lay && strcmp(lay, "planar-ckpt-v1") == 0;
    for (size_t i = 0; !bfpio_st_meta(&f, "bfp.format") && i < f.count; i++)
        yes |= has_suffix(f.entries[i].name, ".weight_scale");
    bfpio_st_close(&f);
    return yes;
}

int bfp_ckpt_is_quantized(const char *path)
{
    bfpio_st_file f;
    char e[8];
    if (bfp_ct_is_checkpoint(path))
        return 1;
    if (bfpio_st_open(&f, path, e, sizeof e) != BFP_OK)
        return 0;
    int yes = bfpio_st_meta(&f, "bfp.format") != NULL; /* bfp quantize's container */
    bfpio_st_close(&f);
    return yes;
}

bfp_status bfp_ckpt_tensor_load(const char *path, const char *name, bfp_tensor *t,
                                char *err, size_t errlen)
{
    if (!is_dir(path))
        return bfp_tensor_load(path, name, t, err, errlen);
    if (!name)
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          "%s is a checkpoint directory: name the tensor to read", path);
    char *file = shard_for(path, name);
    if (!file)
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s: no tensor '%s' in its model.safetensors.index.json", path,
                          name);
    bfp_status st = bfp_tensor_load(file, name, t, err, errlen);
    free(file);
    return st;
}

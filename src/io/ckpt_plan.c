/*
 * ckpt_plan.c - the plan of `bfp convert`: find the input shards, read their
 * headers, have every tensor decided (ckpt_decide.c: quantized or copied),
 * and lay out every output file (names, dtypes, shapes, offsets, header
 * bytes) before any data is touched.
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_NAME "model.safetensors.index.json"

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (s) {
        memcpy(s, a, la);
        s[la] = '/';
        memcpy(s + la + 1, b, lb + 1);
    }
    return s;
}

void ck_plan_free(ck_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nins; i++)
        free(p->ins[i].name);
    free(p->ins);
    for (size_t i = 0; i < p->nfiles; i++) {
        ck_file *f = &p->files[i];
        for (size_t j = 0; j < f->nouts; j++)
            free(f->outs[j].name);
        free(f->outs);
        free(f->header);
        free(f->in_path);
        free(f->name);
        cJSON_Delete(f->in_meta);
    }
    free(p->files);
    free(p->arch);
    free(p->gguf_kv);
    for (size_t i = 0; i < p->nshards; i++)
        free(p->shard_paths[i]);
    free(p->shard_paths);
    for (size_t i = 0; i < p->nextras; i++)
        free(p->extras[i]);
    free(p->extras);
    free(p->in_dir);
    free(p->out);
    memset(p, 0, sizeof *p);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shard files named by an index's weight_map, sorted, without repeats. */
static bfp_status read_index(ck_plan *p, char ***shards, size_t *n, char *err,
                             size_t errlen)
{
    char *path = join(p->in_dir, INDEX_NAME), *text = NULL;
    size_t len = 0;
    bfp_status st;
    cJSON *root = NULL;
    *shards = NULL;
    *n = 0;
    if (!path)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    if ((st = bfp_io_read_file(path, (void **)&text, &len, err, errlen)) != BFP_OK)
        goto done;
    root = cJSON_ParseWithLength(text, len);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *it;
    if (!cJSON_IsObject(wm)) {
        st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                        "%s: not JSON with a \"weight_map\" object", path);
        goto done;
    }
    size_t cap = (size_t)cJSON_GetArraySize(wm) + 1;
    if (!(*shards = calloc(cap, sizeof **shards)))
        goto nomem;
    cJSON_ArrayForEach(it, wm) {
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/') ||
            !ck_ends_with(it->valuestring, ".safetensors")) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: weight_map entry '%s' is not a .safetensors "
                            "file name in the same directory", path,
                            it->string ? it->string : "?");
            goto done;
        }
        size_t k = 0;
        while (k < *n && strcmp((*shards)[k], it->valuestring) != 0)
            k++;
        if (k == *n && !((*shards)[(*n)++] = dup_str(it->valuestring)))
            goto nomem;
    }
    qsort(*shards, *n, sizeof **shards, cmp_str);
    st = BFP_OK;
    goto done;
nomem:
    st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
done:
    if (st == BFP_OK && root) {
        /* every tensor of the map must be in its shard: checked in add_shard */
        p->has_index = 1;
    }
    cJSON_Delete(root);
    free(text);
    free(path);
    return st;
}

/* Name of the shard that the index assigns a tensor to, or NULL. */
static const char *index_shard_of(const cJSON *wm, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(wm, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int cmp_in_off(const void *a, const void *b)
{
    const ck_in *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Read one safetensors shard's header into p->ins. */
static bfp_status add_shard(ck_plan *p, const char *path, const char *name,
                            const cJSON *wm, const ck_filters *flt, char *err,
                            size_t errlen)
{
    bfpio_st_file f;
    bfp_status st = bfpio_st_open(&f, path, err, errlen);
    if (st != BFP_OK)
        return st;
    size_t first = p->nins;
    ck_in *grown = realloc(p->ins, (p->nins + f.count + 1) * sizeof *grown);
    ck_file *files = realloc(p->files, (p->nfiles + 1) * sizeof *files);
    char **paths = realloc(p->shard_paths, (p->nshards + 1) * sizeof *paths);
    if (grown)
        p->ins = grown;
    if (files)
        p->files = files;
    if (paths)
        p->shard_paths = paths;
    if (!grown || !files || !paths || !(paths[p->nshards] = dup_str(path))) {
        bfpio_st_close(&f);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    }
    for (size_t i = 0; i < f.count; i++) {
        const bfpio_st_entry *e = &f.entries[i];
        ck_in *t = &p->ins[p->nins];
        memset(t, 0, sizeof *t);
        if (e->ndim > BFP_IO_MAX_DIMS || !e->dtype[0] || e->elem_size == 0) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: tensor '%s' has %s", path, e->name,
                            e->elem_size ? "too many dimensions"
                                         : "a dtype bfp does not know");
            break;
        }
        if (wm) {
            const char *sh = index_shard_of(wm, e->name);
            if (!sh || strcmp(sh, name) != 0) {
                st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                                "%s: tensor '%s' is not listed for this shard in "
                                "%s", path, e->name, INDEX_NAME);
                break;
            }
        }
        if (!(t->name = dup_str(e->name))) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
            break;
        }
        p->nins++;
        t->shard = p->nshards;
        t->off = f.data_start + e->begin;
        t->nbytes = e->end - e->begin;
        snprintf(t->dtype, sizeof t->dtype, "%s", e->dtype);
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof t->shape);
        if ((st = ck_decide(p, t, flt, path, err, errlen)) != BFP_OK)
            break;
    }
    void *in_meta = f.metadata ? cJSON_Duplicate(f.metadata, 1) : NULL;
    bfpio_st_close(&f);
    p->nshards++;
    if (st != BFP_OK) {
        cJSON_Delete(in_meta);
        return st;
    }
    /* in file order: the data is then read front to back */
    qsort(p->ins + first, p->nins - first, sizeof *p->ins, cmp_in_off);
    ck_file *cf = &p->files[p->nfiles++];
    memset(cf, 0, sizeof *cf);
    cf->first = first;
    cf->count = p->nins - first;
    cf->in_meta = in_meta;
    if (!(cf->in_path = dup_str(path)) || !(cf->name = dup_str(name)))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    return BFP_OK;
}

/* Regular files of the input directory to copy along. */
static bfp_status list_extras(ck_plan *p, char *err, size_t errlen)
{
    DIR *d = opendir(p->in_dir);
    struct dirent *de;
    if (!d)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot list the directory",
                          p->in_dir);
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        struct stat sb;
        if (n[0] == '.' || ck_ends_with(n, ".safetensors") || strcmp(n, INDEX_NAME) == 0)
            continue;
        if (p->o.layout == BFP_CKPT_LAYOUT_CT && strcmp(n, "config.json") == 0)
            continue; /* rewritten with its quantization_config */
        char *full = join(p->in_dir, n);
        if (!full || stat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            free(full);
            continue;
        }
        free(full);
        char **g = realloc(p->extras, (p->nextras + 1) * sizeof *g);
        if (!g || !(g[p->nextras] = dup_str(n))) {
            if (g)
                p->extras = g;
            closedir(d);
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        }
        p->extras = g;
        p->nextras++;
    }
    closedir(d);
    if (p->nextras > 1)
        qsort(p->extras, p->nextras, sizeof *p->extras, cmp_str);
    return BFP_OK;
}

static bfp_status find_shards(ck_plan *p, const char *in, const ck_filters *flt,
                              char *err, size_t errlen)
{
    struct stat sb;
    bfp_status st = BFP_OK;
    if (stat(in, &sb) != 0)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: no such file or directory", in);
    if (!S_ISDIR(sb.st_mode) && bfpio_has_ext(in, ".gguf")) {
        const char *slash = strrchr(in, '/');
        if (p->o.layout != BFP_CKPT_LAYOUT_GGUF)
            return bfpio_fail(BFP_ERR_ARG, err, errlen,
                              "%s: a GGUF input converts to --layout gguf only", in);
        p->gguf_in = 1;
        p->in_dir = slash ? strndup(in, (size_t)(slash - in) + (slash == in))
                          : dup_str(".");
        if (!p->in_dir)
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        return ck_add_gguf(p, in, flt, err, errlen);
    }
    if (!S_ISDIR(sb.st_mode)) {
        if (!bfpio_has_ext(in, ".safetensors"))
            return bfpio_fail(BFP_ERR_ARG, err, errlen,
                              "%s: IN must be a .safetensors file, a checkpoint "
                              "directory or a .gguf", in);
        const char *slash = strrchr(in, '/');
        p->in_dir = slash ? strndup(in, (size_t)(slash - in) + (slash == in))
                          : dup_str(".");
        if (!p->in_dir)
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        return add_shard(p, in, slash ? slash + 1 : in, NULL, flt, err, errlen);
    }
    p->in_is_dir = 1;
    if (!(p->in_dir = dup_str(in)))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    char *ipath = join(in, INDEX_NAME);
    int has_index = ipath && stat(ipath, &sb) == 0;
    char **shards = NULL;
    size_t n = 0;
    cJSON *wm_root = NULL;
    if (has_index) {
        if ((st = read_index(p, &shards, &n, err, errlen)) == BFP_OK) {
            char *text = NULL;
            size_t len = 0;
            if (bfp_io_read_file(ipath, (void **)&text, &len, err, errlen) == BFP_OK)
                wm_root = cJSON_ParseWithLength(text, len);
            free(text);
        }
    } else {
        char *single = join(in, "model.safetensors");
        if (single && stat(single, &sb) == 0 && (shards = calloc(1, sizeof *shards)) &&
            (shards[0] = dup_str("model.safetensors")))
            n = 1;
        free(single);
        if (n == 0)
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: no %s and no model.safetensors in the directory",
                            in, INDEX_NAME);
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(wm_root, "weight_map");
    for (size_t i = 0; st == BFP_OK && i < n; i++) {
        char *sp = join(in, shards[i]);
        st = sp ? add_shard(p, sp, shards[i], wm, flt, err, errlen)
                : bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        free(sp);
    }
    if (st == BFP_OK && wm) { /* and every tensor of the map is somewhere */
        size_t listed = (size_t)cJSON_GetArraySize(wm);
        if (listed != p->nins)
            st = bfpio_fail(BFP_ERR_DATA, err, errlen,
                            "%s: %s lists %zu tensors, the shards hold %zu", in,
                            INDEX_NAME, listed, p->nins);
    }
    for (size_t i = 0; i < n; i++)
        free(shards[i]);
    free(shards);
    cJSON_Delete(wm_root);
    free(ipath);
    if (st == BFP_OK)
        st = list_extras(p, err, errlen);
    return st;
}

/* config.json's model_type (GGUF's general.architecture), if any. */
static void read_arch(ck_plan *p)
{
    char *path = join(p->in_dir, "config.json"), *text = NULL, e[8];
    size_t len = 0;
    if (path && bfp_io_read_file(path, (void **)&text, &len, e, sizeof e) == BFP_OK) {
        cJSON *root = cJSON_ParseWithLength(text, len);
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
        if (cJSON_IsString(mt))
            p->arch = dup_str(mt->valuestring);
        cJSON_Delete(root);
    }
    free(text);
    free(path);
}

static bfp_status add_out(ck_file *f, size_t *cap, const char *name,
                          const char *suffix, const char *dtype, size_t ndim,
                          const size_t *shape, uint64_t nbytes, size_t src,
                          ck_role role)
{
    if (f->nouts == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        ck_out *g = realloc(f->outs, nc * sizeof *g);
        if (!g)
            return BFP_ERR_NOMEM;
        f->outs = g;
        *cap = nc;
    }
    ck_out *o = &f->outs[f->nouts];
    memset(o, 0, sizeof *o);
    size_t ln = strlen(name), ls = strlen(suffix);
    if (!(o->name = malloc(ln + ls + 1)))
        return BFP_ERR_NOMEM;
    memcpy(o->name, name, ln);
    memcpy(o->name + ln, suffix, ls + 1);
    o->dtype = dtype;
    o->ndim = ndim;
    if (ndim)
        memcpy(o->shape, shape, ndim * sizeof *shape);
    o->nbytes = nbytes;
    o->src = src;
    o->role = role;
    f->nouts++;
    return BFP_OK;
}

/* The output tensors of input tensor i in file f, by layout. */
static bfp_status map_tensor(ck_plan *p, ck_file *f, size_t *cap, size_t i)
{
    const ck_in *t = &p->ins[i];
    if (!t->quant)
        return add_out(f, cap, t->name, "", t->dtype, t->ndim, t->shape,
                       t->nbytes, i, CK_COPY);
    const bfp_format_info *fi = bfp_format_get(p->o.format);
    bfp_plane_sizes sz;
    bfp_status st = bfp_plane_sizes_for(p->o.format, t->rows, t->cols, &sz);
    if (st != BFP_OK)
        return st;
    size_t one = 1;
    if (p->o.layout == BFP_CKPT_LAYOUT_GGUF) {
        size_t bytes;
        if ((st = bfp_ggml_size(p->o.format, t->rows, t->cols, &bytes)) != BFP_OK)
            return st;
        return add_out(f, cap, t->name, "", "U8", t->ndim, t->shape, bytes, i,
                       CK_GGML);
    }
    if (p->o.layout == BFP_CKPT_LAYOUT_CT) {
        /* MODULE.weight -> MODULE.weight_packed / _scale / _global_scale */
        size_t cshape[2] = {t->rows, sz.code_row_bytes};
        size_t sshape[2] = {t->rows, sz.blocks_per_row};
        /* MX INT: int8 codes or int4 ones in int32 words, bf16 scales */
        int int4 = p->o.format == BFP_MXINT4;
        int mxint = p->o.format == BFP_MXINT8 || int4;
        const char *codes_name = fi->elem_bits == 8 ? "" : "_packed";
        const char *codes_dtype = int4 ? "I32" : mxint ? "I8"
                                  : fi->elem_bits == 8 ? "F8_E4M3" : "U8";
        if (int4)
            cshape[1] = sz.code_row_bytes / 4; /* C/8 words: C is a multiple of 32 */
        size_t two = 2;
        const char *scale_dtype = mxint ? "BF16"
                                  : fi->scale == BFP_SCALE_UE4M3 ? "F8_E4M3" : "U8";
        if ((st = add_out(f, cap, t->name, codes_name, codes_dtype, 2, cshape,
                          sz.codes, i, int4 ? CK_CODES_INT4 : CK_CODES)) != BFP_OK ||
            (int4 && (st = add_out(f, cap, t->name, "_shape", "I64", 1, &two, 16, i,
                                   CK_SHAPE)) != BFP_OK) ||
            (st = add_out(f, cap, t->name, "_scale", scale_dtype, 2, sshape,
                          sz.scales * (mxint ? 2 : 1), i,
                          mxint ? CK_SCALES_BF16 : CK_SCALES)) != BFP_OK)
            return st;
        if (fi->has_tensor_scale)
            st = add_out(f, cap, t->name, "_global_scale", "F32", 1, &one, 4, i,
                         CK_TSCALE);
        return st;
    }
    size_t n;
    if ((st = add_out(f, cap, t->name, ".codes", "U8", 1, (n = sz.codes, &n),
                      sz.codes, i, CK_CODES)) != BFP_OK ||
        (st = add_out(f, cap, t->name, ".scales", "U8", 1, (n = sz.scales, &n),
                      sz.scales, i, CK_SCALES)) != BFP_OK)
        return st;
    if (sz.meta && (st = add_out(f, cap, t->name, ".meta", "U8", 1,
                                 (n = sz.meta, &n), sz.meta, i, CK_META)) != BFP_OK)
        return st;
    if (fi->has_tensor_scale)
        st = add_out(f, cap, t->name, ".tensor_scale", "F32", 1, &one, 4, i,
                     CK_TSCALE);
    return st;
}

bfp_status ck_plan_make(ck_plan *p, const char *in, const char *out,
                        const bfp_ckpt_opts *o, char *err, size_t errlen)
{
    ck_filters flt;
    bfp_status st;
    memset(p, 0, sizeof *p);
    memset(&flt, 0, sizeof flt);
    p->o = *o;
    if (!(p->out = dup_str(out)))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    if (o->include_re) {
        if (regcomp(&flt.inc, o->include_re, REG_EXTENDED | REG_NOSUB) != 0)
            return bfpio_fail(BFP_ERR_ARG, err, errlen,
                              "--include '%s' is not a valid regular expression",
                              o->include_re);
        flt.has_inc = 1;
    }
    if (o->exclude_re) {
        if (regcomp(&flt.exc, o->exclude_re, REG_EXTENDED | REG_NOSUB) != 0) {
            if (flt.has_inc)
                regfree(&flt.inc);
            return bfpio_fail(BFP_ERR_ARG, err, errlen,
                              "--exclude '%s' is not a valid regular expression",
                              o->exclude_re);
        }
        flt.has_exc = 1;
    }
    st = find_shards(p, in, &flt, err, errlen);
    if (flt.has_inc)
        regfree(&flt.inc);
    if (flt.has_exc)
        regfree(&flt.exc);
    if (st != BFP_OK)
        return st;

    if (!p->gguf_in)
        read_arch(p);
    if (p->o.layout == BFP_CKPT_LAYOUT_GGUF) { /* every shard into one file */
        for (size_t i = 1; i < p->nfiles; i++) {
            free(p->files[i].in_path);
            free(p->files[i].name);
            cJSON_Delete(p->files[i].in_meta);
        }
        p->nfiles = 1;
        p->files[0].first = 0;
        p->files[0].count = p->nins;
        free(p->files[0].name);
        if (!(p->files[0].name = dup_str(out)))
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    }
    for (size_t k = 0; k < p->nfiles; k++) {
        ck_file *f = &p->files[k];
        size_t cap = 0;
        for (size_t i = f->first; i < f->first + f->count; i++)
            if ((st = map_tensor(p, f, &cap, i)) != BFP_OK)
                return bfpio_fail(st, err, errlen, "%s: tensor '%s': %s",
                                  f->in_path ? f->in_path : in, p->ins[i].name,
                                  bfp_status_str(st));
        st = p->o.layout == BFP_CKPT_LAYOUT_GGUF ? ck_gguf_header(p, f, err, errlen)
                                                  : ck_st_header(p, f, err, errlen);
        if (st != BFP_OK)
            return st;
    }
    return BFP_OK;
}

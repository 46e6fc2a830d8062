/*
 * ckpt_run.c - carrying out a conversion plan: each output file is written
 * under a fixed temporary name (".NAME.bfp-tmp", so a rerun reuses rather
 * than strands it), its tensors put at their planned offsets straight from
 * the memory-mapped input, then fsync'd and renamed. The manifest
 * (OUT/.bfp-convert.json) records the settings and each finished file's size
 * and hash; a rerun with the same settings keeps the files that still match
 * and redoes the rest.
 */
#define _GNU_SOURCE

#include "ckpt_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST ".bfp-convert.json"

const char *bfp_ckpt_layout_name(bfp_ckpt_layout l)
{
    return l == BFP_CKPT_LAYOUT_CT     ? "compressed-tensors"
           : l == BFP_CKPT_LAYOUT_GGUF ? "gguf"
                                       : "bfp";
}

int bfp_ckpt_layout_from_name(const char *s, bfp_ckpt_layout *out)
{
    for (int l = 0; l <= 2; l++)
        if (strcmp(s, bfp_ckpt_layout_name((bfp_ckpt_layout)l)) == 0) {
            *out = (bfp_ckpt_layout)l;
            return 1;
        }
    return 0;
}

int bfp_ckpt_layout_supports(bfp_ckpt_layout l, bfp_format fmt, const char **why)
{
    int bits;
    if (l == BFP_CKPT_LAYOUT_CT && !ck_ct_format(fmt, &bits)) {
        *why = "compressed-tensors stores mxfp4, nvfp4, mxfp6_e2m3, mxfp8_e4m3, "
               "mxint8 and mxint4 only";
        return 0;
    }
    if (l == BFP_CKPT_LAYOUT_GGUF && fmt != BFP_MXFP4 && fmt != BFP_NVFP4) {
        *why = "GGUF stores mxfp4 (ggml type 39) and nvfp4 (type 40) only";
        return 0;
    }
    return 1;
}

void bfp_ckpt_summary_free(bfp_ckpt_summary *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->tensors; i++)
        free(s->t[i].name);
    free(s->t);
    memset(s, 0, sizeof *s);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *path2(const char *dir, const char *name, const char *prefix,
                   const char *suffix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(prefix) + strlen(suffix) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s%s%s", dir, prefix, name, suffix);
    return s;
}

/* A 64-bit hash of a file's bytes (integrity of our own outputs, not
 * security): 8 bytes at a time, multiply and rotate. */
static int hash_file(const char *path, uint64_t *size, uint64_t *h)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0)
        return 0;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return 0;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)sb.st_size;
    static uint8_t buf[1 << 20];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        size_t i = 0;
        for (; i + 8 <= (size_t)n; i += 8) {
            uint64_t w;
            memcpy(&w, buf + i, 8);
            x = (x ^ w) * 0xFF51AFD7ED558CCDull;
            x ^= x >> 29;
        }
        for (; i < (size_t)n; i++)
            x = (x ^ buf[i]) * 0x100000001B3ull;
    }
    close(fd);
    if (n < 0)
        return 0;
    *size = (uint64_t)sb.st_size;
    *h = x;
    return 1;
}

static bfp_status pwrite_all(int fd, const void *data, uint64_t n, uint64_t off,
                             const char *path, char *err, size_t errlen)
{
    const uint8_t *p = data;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t w = pwrite(fd, p, chunk, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: write failed: %s",
                              path, w < 0 ? strerror(errno) : "no space");
        p += w;
        off += (uint64_t)w;
        n -= (uint64_t)w;
    }
    return BFP_OK;
}

/* The input shard mapped in memory. */
typedef struct {
    size_t shard;
    const uint8_t *map;
    size_t len;
} ck_map;

static void unmap(ck_map *m)
{
    if (m->map)
        munmap((void *)m->map, m->len);
    m->map = NULL;
}

static bfp_status map_shard(const ck_plan *p, size_t shard, ck_map *m, char *err,
                            size_t errlen)
{
    if (m->map && m->shard == shard)
        return BFP_OK;
    unmap(m);
    const char *path = p->shard_paths[shard];
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0)
            close(fd);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot open: %s", path,
                          strerror(errno));
    }
    m->len = (size_t)sb.st_size;
    void *a = m->len ? mmap(NULL, m->len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    close(fd);
    if (a == MAP_FAILED)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot map: %s", path,
                          strerror(errno));
    madvise(a, m->len, MADV_SEQUENTIAL);
    m->map = a;
    m->shard = shard;
    return BFP_OK;
}

/* Done with a tensor's input pages: out of this process's resident set
 * (the page cache keeps them), so memory follows the tensor, not the shard. */
static void drop_pages(const ck_map *m, uint64_t off, uint64_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t a = off / (uint64_t)pg * (uint64_t)pg, end = off + n;
    if (pg > 0 && end > a)
        madvise((void *)(m->map + a), (size_t)(end - a), MADV_DONTNEED);
}

/* Growing work buffers, sized by the largest tensor. */
typedef struct {
    uint8_t *codes, *scales, *meta, *ggml;
    uint16_t *bf16_scales;
    uint8_t *int4_codes;
    int64_t shape[2];
    float tscale;
    float *x, *y; /* --report */
    size_t cap[8];
} ck_bufs;

static int grow(void **b, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 1;
    void *r = realloc(*b, n);
    if (!r)
        return 0;
    *b = r;
    *cap = n;
    return 1;
}

typedef struct {
    ck_plan *p;
    bfp_ckpt_summary *s;
    ck_bufs b;
    ck_map m;
    double t0;
    size_t done_tensors;
    uint64_t done_bytes, total_bytes;
} ck_run;

static void to_f32(bfp_dtype d, const void *src, size_t n, float *x)
{
    const uint16_t *h = src;
    if (d == BFP_DTYPE_F32)
        memcpy(x, src, n * 4);
    else
        for (size_t i = 0; i < n; i++)
            x[i] = d == BFP_DTYPE_BF16 ? bfp_bf16_to_f32(h[i]) : bfp_f16_to_f32(h[i]);
}

/* Quantize input tensor i into the work buffers. */
static bfp_status quantize_one(ck_run *r, size_t i, const void *src, char *err,
                               size_t errlen)
{
    const ck_plan *p = r->p;
    const ck_in *t = &p->ins[i];
    bfp_plane_sizes sz;
    bfp_options opts = p->o.opts;
    bfp_stats stats;
    bfp_status st = bfp_plane_sizes_for(p->o.format, t->rows, t->cols, &sz);
    if (st != BFP_OK)
        return bfpio_fail(st, err, errlen, "%s: tensor '%s': %s",
                          p->shard_paths[t->shard], t->name, bfp_status_str(st));
    if (p->o.layout == BFP_CKPT_LAYOUT_GGUF && p->o.format == BFP_NVFP4)
        opts.nvfp4_no_tensor_scale = 1; /* ggml's NVFP4 has no tensor scale */
    ck_bufs *b = &r->b;
    if (!grow((void **)&b->codes, &b->cap[0], sz.codes) ||
        !grow((void **)&b->scales, &b->cap[1], sz.scales) ||
        !grow((void **)&b->meta, &b->cap[2], sz.meta ? sz.meta : 1))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    bfp_planes pl = {b->codes, b->scales, b->meta, &b->tscale};
    b->tscale = 1.0f;
    st = bfp_quantize(p->o.format, t->fdtype, src, t->rows, t->cols, &opts, &pl,
                      &stats);
    if (st != BFP_OK)
        return bfpio_fail(st, err, errlen, "%s: tensor '%s': %s",
                          p->shard_paths[t->shard], t->name, bfp_status_str(st));
    bfp_ckpt_tensor *rt = &r->s->t[i];
    rt->nonfinite_blocks = stats.nonfinite_blocks;
    if (p->o.layout == BFP_CKPT_LAYOUT_GGUF) {
        size_t gb;
        bfp_const_planes cp = {b->codes, b->scales, b->meta, &b->tscale};
        if ((st = bfp_ggml_size(p->o.format, t->rows, t->cols, &gb)) != BFP_OK ||
            !grow((void **)&b->ggml, &b->cap[3], gb) ||
            (st = bfp_planar_to_ggml(p->o.format, &cp, t->rows, t->cols, b->ggml)) != BFP_OK)
            return bfpio_fail(st ? st : BFP_ERR_NOMEM, err, errlen,
                              "%s: tensor '%s': ggml blocks: %s",
                              p->shard_paths[t->shard], t->name,
                              bfp_status_str(st ? st : BFP_ERR_NOMEM));
    }
    int int4 = p->o.format == BFP_MXINT4;
    if (p->o.layout == BFP_CKPT_LAYOUT_CT && (p->o.format == BFP_MXINT8 || int4)) {
        if (!grow((void **)&b->bf16_scales, &b->cap[6], sz.scales * 2) ||
            (int4 && !grow((void **)&b->int4_codes, &b->cap[7], sz.codes)))
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        for (size_t k = 0; k < sz.scales; k++)
            b->bf16_scales[k] = ck_e8m0_to_bf16_scale(b->scales[k], int4 ? 2 : 6);
        for (size_t k = 0; int4 && k < sz.codes; k++)
            b->int4_codes[k] = b->codes[k] ^ 0x88; /* two's complement k -> k + 8 */
        b->shape[0] = (int64_t)t->rows;
        b->shape[1] = (int64_t)t->cols;
    }
    if (p->o.report) {
        size_t n = t->rows * t->cols;
        bfp_const_planes cp = {b->codes, b->scales, b->meta, &b->tscale};
        bfp_error_stats es;
        if (!grow((void **)&b->x, &b->cap[4], n * 4) ||
            !grow((void **)&b->y, &b->cap[5], n * 4))
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        to_f32(t->fdtype, src, n, b->x);
        if ((st = bfp_dequantize_to_f32(p->o.format, &cp, t->rows, t->cols, b->y)) != BFP_OK)
            return bfpio_fail(st, err, errlen, "dequantize: %s", bfp_status_str(st));
        bfp_error_stats_f32(b->x, b->y, n, &es);
        rt->sqnr_db = es.sqnr_db;
    }
    return BFP_OK;
}

static const void *role_data(const ck_run *r, const ck_out *o, const void *src)
{
    switch (o->role) {
    case CK_CODES:
        return r->b.codes;
    case CK_SCALES:
        return r->b.scales;
    case CK_META:
        return r->b.meta;
    case CK_TSCALE:
        return &r->b.tscale;
    case CK_GGML:
        return r->b.ggml;
    case CK_SCALES_BF16:
        return r->b.bf16_scales;
    case CK_CODES_INT4:
        return r->b.int4_codes;
    case CK_SHAPE:
        return r->b.shape;
    default:
        return src;
    }
}

static void report_progress(ck_run *r, uint64_t bytes)
{
    r->done_tensors++;
    r->done_bytes += bytes;
    if (r->p->o.progress) {
        bfp_ckpt_progress pr = {r->done_tensors, r->p->nins, r->done_bytes,
                                r->total_bytes, now_s() - r->t0};
        r->p->o.progress(r->p->o.progress_ctx, &pr);
    }
}

static void sync_dir_of(const char *path)
{
    char *d = strdup(path), *slash = d ? strrchr(d, '/') : NULL;
    if (!d)
        return;
    if (slash)
        *(slash == d ? slash + 1 : slash) = '\0';
    int fd = open(slash ? d : ".", O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(d);
}

/* Write output file f to final (via its temporary name). */
static bfp_status write_file(ck_run *r, ck_file *f, const char *final,
                             const char *tmp, char *err, size_t errlen)
{
    const ck_plan *p = r->p;
    bfp_status st = BFP_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot create: %s", tmp,
                          strerror(errno));
    if (ftruncate(fd, (off_t)f->size) != 0)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot size: %s", tmp,
                        strerror(errno));
    if (st == BFP_OK)
        st = pwrite_all(fd, f->header, f->header_len, 0, tmp, err, errlen);
    size_t k = 0; /* outs are grouped by input tensor, in input order */
    for (size_t i = f->first; st == BFP_OK && i < f->first + f->count; i++) {
        const ck_in *t = &p->ins[i];
        if ((st = map_shard(p, t->shard, &r->m, err, errlen)) != BFP_OK)
            break;
        if (t->off + t->nbytes > r->m.len) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: changed while read",
                            p->shard_paths[t->shard]);
            break;
        }
        const uint8_t *src = r->m.map + t->off;
        if (t->quant && (st = quantize_one(r, i, src, err, errlen)) != BFP_OK)
            break;
        for (; st == BFP_OK && k < f->nouts && f->outs[k].src == i; k++)
            st = pwrite_all(fd, role_data(r, &f->outs[k], src), f->outs[k].nbytes,
                            f->header_len + f->outs[k].off, tmp, err, errlen);
        drop_pages(&r->m, t->off, t->nbytes);
        report_progress(r, t->nbytes);
    }
    if (st == BFP_OK && fsync(fd) != 0)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && st == BFP_OK)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: close: %s", tmp, strerror(errno));
    if (st == BFP_OK && rename(tmp, final) != 0)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: rename: %s", final,
                        strerror(errno));
    if (st != BFP_OK)
        unlink(tmp);
    else
        sync_dir_of(final);
    return st;
}

/* The settings a resumed run must share with the first one. */
static char *settings_text(const ck_plan *p)
{
    cJSON *s = cJSON_CreateObject(), *in;
    char buf[64];
    if (!s)
        return NULL;
    cJSON_AddStringToObject(s, "format", bfp_format_get(p->o.format)->name);
    cJSON_AddStringToObject(s, "layout", bfp_ckpt_layout_name(p->o.layout));
    cJSON_AddStringToObject(s, "include", p->o.include_re ? p->o.include_re : "");
    cJSON_AddStringToObject(s, "exclude", p->o.exclude_re ? p->o.exclude_re : "");
    snprintf(buf, sizeof buf, "%d/%llu/%d/%d/%d", (int)p->o.opts.rounding,
             (unsigned long long)p->o.opts.seed, (int)p->o.opts.scale_mode,
             p->o.opts.nvfp4_no_tensor_scale, p->o.opts.nvfp4_2d);
    cJSON_AddStringToObject(s, "options", buf);
    cJSON_AddStringToObject(s, "bfp", bfp_version());
    in = cJSON_AddObjectToObject(s, "inputs");
    for (size_t i = 0; in && i < p->nshards; i++) {
        struct stat sb;
        const char *slash = strrchr(p->shard_paths[i], '/');
        /* size and modification time: a changed input is not resumed */
        if (stat(p->shard_paths[i], &sb) == 0)
            snprintf(buf, sizeof buf, "%lld:%lld.%09ld", (long long)sb.st_size,
                     (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
        else
            snprintf(buf, sizeof buf, "missing");
        cJSON_AddStringToObject(in, slash ? slash + 1 : p->shard_paths[i], buf);
    }
    char *t = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    return t;
}

typedef struct {
    char *settings;
    cJSON *done; /* name -> "size:hash" */
} ck_manifest;

/* Saved in plan order, so the manifest does not depend on the run's history. */
static bfp_status manifest_save(const ck_plan *p, const char *path,
                                ck_manifest *mf, char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject(), *done = NULL;
    char *text = NULL;
    bfp_status st = BFP_ERR_NOMEM;
    int ok = root && cJSON_AddStringToObject(root, "settings", mf->settings) &&
             (done = cJSON_AddObjectToObject(root, "done"));
    for (size_t k = 0; ok && k < p->nfiles; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(mf->done, p->files[k].name);
        if (cJSON_IsString(v))
            ok = cJSON_AddStringToObject(done, p->files[k].name, v->valuestring) != NULL;
    }
    if (ok && (text = cJSON_Print(root)))
        st = bfp_io_write_file_atomic(path, text, strlen(text), 1, err, errlen);
    else
        bfpio_fail(st, err, errlen, "out of memory");
    free(text);
    cJSON_Delete(root);
    return st;
}

/* Open OUT: new, or a run of the same settings to resume. */
static bfp_status manifest_open(const ck_plan *p, const char *mpath, int dir_out,
                                ck_manifest *mf, char *err, size_t errlen)
{
    struct stat sb;
    int exists = stat(p->out, &sb) == 0;
    mf->done = cJSON_CreateObject();
    if (!(mf->settings = settings_text(p)) || !mf->done)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    if (!exists) {
        if (dir_out && mkdir(p->out, 0777) != 0)
            return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot create: %s",
                              p->out, strerror(errno));
        return BFP_OK;
    }
    if (!dir_out) {
        if (!p->o.force)
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s exists (use --force to overwrite)", p->out);
        return BFP_OK;
    }
    if (!S_ISDIR(sb.st_mode))
        return bfpio_fail(BFP_ERR_IO, err, errlen,
                          "%s exists and is not a directory", p->out);
    char *text = NULL;
    size_t len = 0;
    char tmp[8];
    if (bfp_io_read_file(mpath, (void **)&text, &len, tmp, sizeof tmp) != BFP_OK) {
        if (!p->o.force)
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s exists and holds no conversion to resume (use "
                              "--force to write into it)", p->out);
        return BFP_OK;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "settings");
    cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "done");
    if (cJSON_IsString(s) && strcmp(s->valuestring, mf->settings) == 0 &&
        cJSON_IsObject(d)) {
        cJSON_Delete(mf->done);
        mf->done = cJSON_Duplicate(d, 1);
    } else if (!p->o.force) {
        cJSON_Delete(root);
        return bfpio_fail(BFP_ERR_IO, err, errlen,
                          "%s holds a conversion with other settings or input "
                          "(use --force to start it over)", p->out);
    }
    cJSON_Delete(root);
    return mf->done ? BFP_OK : bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
}

static int manifest_has(const ck_manifest *mf, const char *name, const char *final)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(mf->done, name);
    uint64_t size, h;
    char buf[48];
    if (!cJSON_IsString(v) || !hash_file(final, &size, &h))
        return 0;
    snprintf(buf, sizeof buf, "%llu:%016llx", (unsigned long long)size,
             (unsigned long long)h);
    return strcmp(v->valuestring, buf) == 0;
}

static bfp_status write_small(const char *dir, const char *name, const char *text,
                              size_t len, char *err, size_t errlen)
{
    char *path = path2(dir, name, "", "");
    bfp_status st = path ? bfp_io_write_file_atomic(path, text, len, 1, err, errlen)
                         : bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    free(path);
    return st;
}

/* index, config.json and the other files of an input directory */
static bfp_status write_finals(const ck_plan *p, char *err, size_t errlen)
{
    bfp_status st = BFP_OK;
    char *text;
    if (p->has_index) {
        if (!(text = ck_index_json(p)))
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        st = write_small(p->out, "model.safetensors.index.json", text, strlen(text),
                         err, errlen);
        free(text);
    }
    if (st == BFP_OK && p->o.layout == BFP_CKPT_LAYOUT_CT) {
        if (!(text = ck_ct_config_json(p, err, errlen)))
            return BFP_ERR_DATA;
        st = write_small(p->out, "config.json", text, strlen(text), err, errlen);
        free(text);
    }
    for (size_t i = 0; st == BFP_OK && p->in_is_dir && i < p->nextras; i++) {
        char *src = path2(p->in_dir, p->extras[i], "", "");
        void *data = NULL;
        size_t len = 0;
        st = src ? bfp_io_read_file(src, &data, &len, err, errlen)
                 : bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        if (st == BFP_OK)
            st = write_small(p->out, p->extras[i], data, len, err, errlen);
        free(data);
        free(src);
    }
    return st;
}

bfp_status bfp_ckpt_convert(const char *in, const char *out,
                            const bfp_ckpt_opts *o, bfp_ckpt_summary *s,
                            char *err, size_t errlen)
{
    ck_plan p;
    ck_run r;
    ck_manifest mf = {NULL, NULL};
    const char *why = NULL;
    char *mpath = NULL;
    bfp_status st;
    memset(s, 0, sizeof *s);
    memset(&r, 0, sizeof r);
    if (err && errlen)
        err[0] = '\0';
    if (!bfp_format_get(o->format))
        return bfpio_fail(BFP_ERR_FORMAT, err, errlen, "unknown format");
    if (!bfp_ckpt_layout_supports(o->layout, o->format, &why))
        return bfpio_fail(BFP_ERR_UNSUPPORTED, err, errlen, "%s cannot be written "
                          "in the %s layout: %s", bfp_format_get(o->format)->name,
                          bfp_ckpt_layout_name(o->layout), why);
    int gguf = o->layout == BFP_CKPT_LAYOUT_GGUF;
    if (gguf != !!bfpio_has_ext(out, ".gguf"))
        return bfpio_fail(BFP_ERR_ARG, err, errlen,
                          gguf ? "%s: the gguf layout writes one .gguf file"
                               : "%s: OUT is a directory (a .gguf OUT needs "
                                 "--layout gguf)", out);
    if ((st = ck_plan_make(&p, in, out, o, err, errlen)) != BFP_OK) {
        ck_plan_free(&p);
        return st;
    }
    char *rin = realpath(p.in_dir, NULL), *rout = realpath(out, NULL);
    int same = rin && rout && strcmp(rin, rout) == 0;
    free(rin);
    free(rout);
    if (same) {
        ck_plan_free(&p);
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: OUT is the input's directory",
                          out);
    }
    r.p = &p;
    r.s = s;
    r.t0 = now_s();
    if (!(s->t = calloc(p.nins + 1, sizeof *s->t))) {
        ck_plan_free(&p);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    }
    s->tensors = p.nins;
    s->shards = p.nfiles;
    for (size_t i = 0; i < p.nins; i++) {
        bfp_ckpt_tensor *t = &s->t[i];
        t->name = strdup(p.ins[i].name);
        t->quantized = p.ins[i].quant;
        s->quantized += (size_t)t->quantized;
        memcpy(t->dtype, p.ins[i].dtype, sizeof t->dtype);
        t->ndim = p.ins[i].ndim;
        memcpy(t->shape, p.ins[i].shape, sizeof t->shape);
        t->sqnr_db = NAN;
        r.total_bytes += p.ins[i].nbytes;
    }
    s->in_bytes = r.total_bytes;
    mpath = gguf ? NULL : path2(out, MANIFEST, "", "");
    st = manifest_open(&p, mpath, !gguf, &mf, err, errlen);
    for (size_t k = 0; st == BFP_OK && k < p.nfiles; k++) {
        ck_file *f = &p.files[k];
        char *final = gguf ? strdup(out) : path2(out, f->name, "", ""), *tmp;
        if (gguf) {
            size_t n = strlen(out) + 10;
            tmp = malloc(n);
            if (tmp)
                snprintf(tmp, n, "%s.bfp-tmp", out);
        } else {
            tmp = path2(out, f->name, ".", ".bfp-tmp");
        }
        if (!final || !tmp) {
            st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        } else if (!gguf && manifest_has(&mf, f->name, final)) {
            s->shards_kept++;
            for (size_t i = f->first; i < f->first + f->count; i++)
                report_progress(&r, p.ins[i].nbytes);
        } else if ((st = write_file(&r, f, final, tmp, err, errlen)) == BFP_OK && !gguf) {
            uint64_t size, h;
            char buf[48];
            if (!hash_file(final, &size, &h)) {
                st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot read back", final);
            } else {
                snprintf(buf, sizeof buf, "%llu:%016llx", (unsigned long long)size,
                         (unsigned long long)h);
                cJSON_DeleteItemFromObjectCaseSensitive(mf.done, f->name);
                cJSON_AddStringToObject(mf.done, f->name, buf);
                st = manifest_save(&p, mpath, &mf, err, errlen);
            }
        }
        s->out_bytes += f->size;
        free(final);
        free(tmp);
    }
    unmap(&r.m);
    if (st == BFP_OK && !gguf)
        st = write_finals(&p, err, errlen);
    s->seconds = now_s() - r.t0;
    free(r.b.codes);
    free(r.b.scales);
    free(r.b.meta);
    free(r.b.ggml);
    free(r.b.bf16_scales);
    free(r.b.int4_codes);
    free(r.b.x);
    free(r.b.y);
    free(mf.settings);
    cJSON_Delete(mf.done);
    free(mpath);
    ck_plan_free(&p);
    return st;
}

/*
 * ckpt_manifest.c - the record of finished output files that makes a
 * conversion resumable (OUT/.bfp-convert.json): the settings, and for each
 * finished file its size and a 64-bit hash. Under mpirun each rank records
 * the files it owns in its own part (.bfp-convert.part-R.json), so ranks
 * never write one file at once; rank 0 merges the parts into the manifest
 * when all have finished. A rerun reads the manifest and every part: a file
 * is kept when any of them vouches for its current size and hash.
 */
#define _GNU_SOURCE

#include "ckpt_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST ".bfp-convert.json"
#define PART_PREFIX ".bfp-convert.part-"

static char *join3(const char *dir, const char *a, const char *b)
{
    size_t n = strlen(dir) + strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s%s", dir, a, b);
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

void ck_manifest_free(ck_manifest *mf)
{
    free(mf->settings);
    free(mf->path);
    free(mf->part_path);
    cJSON_Delete(mf->done);
    cJSON_Delete(mf->claims);
    memset(mf, 0, sizeof *mf);
}

/* The "done" object of the manifest or part at path when its settings are
 * mf's, else NULL. */
static cJSON *load_done(const ck_manifest *mf, const char *path, int *other)
{
    char *text = NULL;
    size_t len = 0;
    char e[8];
    *other = 0;
    if (bfp_io_read_file(path, (void **)&text, &len, e, sizeof e) != BFP_OK)
        return NULL;
    cJSON *root = cJSON_ParseWithLength(text, len), *d = NULL;
    free(text);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "settings");
    cJSON *done = cJSON_GetObjectItemCaseSensitive(root, "done");
    if (cJSON_IsString(s) && strcmp(s->valuestring, mf->settings) == 0 &&
        cJSON_IsObject(done))
        d = cJSON_Duplicate(done, 1);
    else
        *other = 1;
    cJSON_Delete(root);
    return d;
}

static bfp_status save_to(const ck_plan *p, const char *path, const char *settings,
                          cJSON *const *srcs, size_t nsrcs, const unsigned char *owned,
                          char *err, size_t errlen);

static int is_part_name(const char *n)
{
    size_t k = strlen(PART_PREFIX), len = strlen(n);
    return strncmp(n, PART_PREFIX, k) == 0 && len > k + 5 &&
           strcmp(n + len - 5, ".json") == 0;
}

/* Every part in OUT with mf's settings, as claims. */
static void load_parts(ck_manifest *mf, const char *out)
{
    DIR *d = opendir(out);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        int other;
        if (!is_part_name(e->d_name))
            continue;
        char *path = join3(out, e->d_name, "");
        cJSON *done = path ? load_done(mf, path, &other) : NULL;
        if (done)
            cJSON_AddItemToArray(mf->claims, done);
        free(path);
    }
    closedir(d);
}

bfp_status ck_manifest_open(const ck_plan *p, int dir_out, int check, int rank,
                            int nranks, ck_manifest *mf, char *err, size_t errlen)
{
    struct stat sb;
    int exists = stat(p->out, &sb) == 0, other = 0;
    char rk[32];
    memset(mf, 0, sizeof *mf);
    snprintf(rk, sizeof rk, "%d.json", rank);
    mf->done = cJSON_CreateObject();
    mf->claims = cJSON_CreateArray();
    if (!(mf->settings = settings_text(p)) || !mf->done || !mf->claims ||
        (dir_out && (!(mf->path = join3(p->out, MANIFEST, "")) ||
                     (nranks > 1 && !(mf->part_path = join3(p->out, PART_PREFIX, rk))))))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    if (check && !exists) {
        if (dir_out && mkdir(p->out, 0777) != 0)
            return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot create: %s",
                              p->out, strerror(errno));
        /* an empty manifest at once: a run killed before its first file is
         * finished is still one to resume, not a foreign directory */
        return dir_out ? save_to(p, mf->path, mf->settings, &mf->done, 1, NULL, err,
                                   errlen)
                       : BFP_OK;
    }
    if (!dir_out) {
        if (check && !p->o.force)
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s exists (use --force to overwrite)", p->out);
        return BFP_OK;
    }
    if (check && !S_ISDIR(sb.st_mode))
        return bfpio_fail(BFP_ERR_IO, err, errlen,
                          "%s exists and is not a directory", p->out);
    cJSON *d = load_done(mf, mf->path, &other);
    if (d) {
        cJSON_Delete(mf->done);
        mf->done = d;
    } else if (check && !p->o.force) {
        if (other)
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s holds a conversion with other settings or input "
                              "(use --force to start it over)", p->out);
        /* no manifest: only the parts of an interrupted mpirun make it a run */
        load_parts(mf, p->out);
        if (cJSON_GetArraySize(mf->claims) == 0)
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s exists and holds no conversion to resume (use "
                              "--force to write into it)", p->out);
        return BFP_OK;
    }
    load_parts(mf, p->out);
    return BFP_OK;
}

static int entry_text(const char *final, char *buf, size_t n)
{
    uint64_t size, h;
    if (!hash_file(final, &size, &h))
        return 0;
    snprintf(buf, n, "%llu:%016llx", (unsigned long long)size, (unsigned long long)h);
    return 1;
}

static int same_claim(const cJSON *done, const char *name, const char *have)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(done, name);
    return cJSON_IsString(v) && strcmp(v->valuestring, have) == 0;
}

static void set_done(ck_manifest *mf, const char *name, const char *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(mf->done, name);
    cJSON_AddStringToObject(mf->done, name, v);
}

int ck_manifest_has(ck_manifest *mf, const char *name, const char *final)
{
    char have[48];
    const cJSON *c;
    int claimed = cJSON_HasObjectItem(mf->done, name);
    cJSON_ArrayForEach(c, mf->claims) claimed |= cJSON_HasObjectItem(c, name);
    if (!claimed || !entry_text(final, have, sizeof have))
        return 0;
    if (same_claim(mf->done, name, have))
        return 1;
    cJSON_ArrayForEach(c, mf->claims) if (same_claim(c, name, have))
    {
        set_done(mf, name, have);
        return 1;
    }
    return 0;
}

bfp_status ck_manifest_record(ck_manifest *mf, const char *name, const char *final,
                              char *err, size_t errlen)
{
    char have[48];
    if (!entry_text(final, have, sizeof have))
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot read back", final);
    set_done(mf, name, have);
    return BFP_OK;
}

/* Saved in plan order, so the manifest does not depend on the run's history;
 * owned (or NULL: all) picks the files of this rank's part. */
static bfp_status save_to(const ck_plan *p, const char *path, const char *settings,
                          cJSON *const *srcs, size_t nsrcs, const unsigned char *owned,
                          char *err, size_t errlen)
{
    cJSON *root = cJSON_CreateObject(), *done = NULL;
    char *text = NULL;
    bfp_status st = BFP_ERR_NOMEM;
    int ok = root && cJSON_AddStringToObject(root, "settings", settings) &&
             (done = cJSON_AddObjectToObject(root, "done"));
    for (size_t k = 0; ok && k < p->nfiles; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(srcs[nsrcs == 1 ? 0 : k],
                                                          p->files[k].name);
        if (owned && !owned[k])
            continue;
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

bfp_status ck_manifest_save(const ck_plan *p, ck_manifest *mf,
                            const unsigned char *owned, char *err, size_t errlen)
{
    return save_to(p, mf->part_path ? mf->part_path : mf->path, mf->settings, &mf->done,
                   1, mf->part_path ? owned : NULL, err, errlen);
}

void ck_manifest_drop_parts(const char *out)
{
    DIR *d = opendir(out);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char *path = is_part_name(e->d_name) ? join3(out, e->d_name, "") : NULL;
        if (path)
            unlink(path);
        free(path);
    }
    closedir(d);
}

bfp_status ck_manifest_merge(const ck_plan *p, ck_manifest *mf, const int *owner,
                             int nranks, char *err, size_t errlen)
{
    cJSON **parts = calloc((size_t)nranks, sizeof *parts), **srcs;
    bfp_status st = BFP_OK;
    if (!parts || !(srcs = malloc((p->nfiles + 1) * sizeof *srcs))) {
        free(parts);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    }
    for (size_t k = 0; k < p->nfiles; k++)
        if (owner[k] >= 0 && owner[k] < nranks)
            parts[owner[k]] = mf->done; /* a mark: this rank's part is needed */
    for (int r = 0; r < nranks && st == BFP_OK; r++) {
        char rk[32];
        int other;
        if (!parts[r])
            continue;
        parts[r] = NULL;
        snprintf(rk, sizeof rk, "%d.json", r);
        char *path = join3(p->out, PART_PREFIX, rk);
        if (!path || !(parts[r] = load_done(mf, path, &other)))
            st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: rank %d's part of the "
                            "manifest is missing", p->out, r);
        free(path);
    }
    for (size_t k = 0; st == BFP_OK && k < p->nfiles; k++)
        srcs[k] = parts[owner[k]];
    if (st == BFP_OK)
        st = save_to(p, mf->path, mf->settings, srcs, p->nfiles, NULL, err, errlen);
    if (st == BFP_OK)
        ck_manifest_drop_parts(p->out);
    for (int r = 0; r < nranks; r++)
        cJSON_Delete(parts[r]);
    free(parts);
    free(srcs);
    return st;
}

/*
 * ckpt_run.c - carrying out a conversion plan: each output file is written
 * under a fixed temporary name (".NAME.bfp-tmp", so a rerun reuses rather
 * than strands it), its tensors put at their planned offsets straight from
 * the memory-mapped input, then fsync'd and renamed. The manifest
 * (OUT/.bfp-convert.json) records the settings and each finished file's size
 * and hash; a rerun with the same settings keeps the files that still match
 * and redoes the rest. Under mpirun the ranks share the files (or the
 * tensors of few files) by bytes and agree on their status at barriers
 * (docs/convert-mpi.md). Each tensor's bytes come from ckpt_tensor.c.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

typedef struct {
    ck_plan *p;
    bfp_ckpt_summary *s;
    ck_bufs b;
    ck_map m;
    double t0;
    size_t done_tensors;
    uint64_t done_bytes, total_bytes;
} ck_run;

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

/* An output file's temporary: created at its full size with its header
 * (create), or opened to add tensors (another rank created it). */
static bfp_status open_tmp(const ck_file *f, const char *tmp, int create, int *fd,
                           char *err, size_t errlen)
{
    bfp_status st = BFP_OK;
    *fd = open(tmp, create ? O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC : O_WRONLY | O_CLOEXEC,
               0644);
    if (*fd < 0)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot %s: %s", tmp,
                          create ? "create" : "open", strerror(errno));
    if (create && ftruncate(*fd, (off_t)f->size) != 0)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: cannot size: %s", tmp,
                        strerror(errno));
    if (create && st == BFP_OK)
        st = pwrite_all(*fd, f->header, f->header_len, 0, tmp, err, errlen);
    return st;
}

/* Input tensors a .. b-1 of f into its temporary, at their planned offsets. */
static bfp_status write_range(ck_run *r, const ck_file *f, int fd, const char *tmp,
                              size_t a, size_t b, char *err, size_t errlen)
{
    const ck_plan *p = r->p;
    bfp_status st = BFP_OK;
    size_t k = 0; /* outs are grouped by input tensor, in input order */
    while (k < f->nouts && f->outs[k].src < a)
        k++;
    for (size_t i = a; st == BFP_OK && i < b; i++) {
        const ck_in *t = &p->ins[i];
        if ((st = ck_map_shard(p, t->shard, &r->m, err, errlen)) != BFP_OK)
            break;
        if (t->off + t->nbytes > r->m.len) {
            st = bfpio_fail(BFP_ERR_DATA, err, errlen, "%s: changed while read",
                            p->shard_paths[t->shard]);
            break;
        }
        const uint8_t *src = r->m.map + t->off;
        if (t->quant &&
            (st = ck_quantize(p, i, src, &r->b, &r->s->t[i], err, errlen)) != BFP_OK)
            break;
        for (; st == BFP_OK && k < f->nouts && f->outs[k].src == i; k++)
            st = pwrite_all(fd, ck_out_data(&r->b, &f->outs[k], src), f->outs[k].nbytes,
                            f->header_len + f->outs[k].off, tmp, err, errlen);
        ck_drop_pages(&r->m, t->off, t->nbytes);
        report_progress(r, t->nbytes);
    }
    return st;
}

static bfp_status close_tmp(int fd, const char *tmp, bfp_status st, char *err,
                            size_t errlen)
{
    if (st == BFP_OK && fsync(fd) != 0)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && st == BFP_OK)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: close: %s", tmp, strerror(errno));
    return st;
}

/* The finished temporary becomes final (or goes, when st says it failed). */
static bfp_status finish_tmp(const char *tmp, const char *final, bfp_status st,
                             char *err, size_t errlen)
{
    if (st == BFP_OK && rename(tmp, final) != 0)
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: rename: %s", final,
                        strerror(errno));
    if (st != BFP_OK)
        unlink(tmp);
    else
        sync_dir_of(final);
    return st;
}

/* Write output file f to final (via its temporary name). */
static bfp_status write_file(ck_run *r, ck_file *f, const char *final,
                             const char *tmp, char *err, size_t errlen)
{
    int fd;
    bfp_status st = open_tmp(f, tmp, 1, &fd, err, errlen);
    if (fd < 0)
        return st;
    if (st == BFP_OK)
        st = write_range(r, f, fd, tmp, f->first, f->first + f->count, err, errlen);
    st = close_tmp(fd, tmp, st, err, errlen);
    return finish_tmp(tmp, final, st, err, errlen);
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

/* The ranks of a job (one: a single process). Every rank makes the same
 * calls to agree(), whatever its own status, so the collectives match. */
typedef struct {
    int rank, n;
    const bfp_ckpt_ranks *r;
    int failed; /* an agreement failed: err holds the message to keep */
} ck_team;

static bfp_status agree(ck_team *t, bfp_status st, char *err, size_t errlen)
{
    char scratch[512] = "";
    if (t->n <= 1)
        return st;
    if (t->failed) { /* every rank is here, failed: only the collective is left */
        t->r->agree(t->r->ctx, 0, scratch, sizeof scratch);
        return st;
    }
    if (st == BFP_OK && err && errlen)
        err[0] = '\0';
    if (t->r->agree(t->r->ctx, st == BFP_OK, err, errlen))
        return BFP_OK;
    t->failed = 1;
    return st != BFP_OK ? st : BFP_ERR_IO;
}

/* Who writes what. Whole files when there are at least as many as ranks:
 * largest first, each to the rank with the fewest bytes so far. Otherwise
 * (one GGUF, one huge shard) every file is cut into runs of tensors by
 * their input bytes, and its owner (rank k mod N) creates, renames and
 * hashes it. trank[i]: the rank that writes input tensor i. */
static int assign(const ck_plan *p, int n, int *owner, int *trank)
{
    int split = n > 1 && p->nfiles < (size_t)n;
    uint64_t *load = calloc((size_t)n, sizeof *load);
    unsigned char *taken = calloc(p->nfiles + 1, 1);
    if (!load || !taken) {
        free(load);
        free(taken);
        return -1;
    }
    for (size_t done = 0; !split && done < p->nfiles; done++) {
        size_t big = p->nfiles;
        for (size_t k = 0; k < p->nfiles; k++)
            if (!taken[k] && (big == p->nfiles || p->files[k].size > p->files[big].size))
                big = k;
        int least = 0;
        for (int r = 1; r < n; r++)
            if (load[r] < load[least])
                least = r;
        taken[big] = 1;
        owner[big] = least;
        load[least] += p->files[big].size;
    }
    for (size_t k = 0; k < p->nfiles; k++) {
        const ck_file *f = &p->files[k];
        uint64_t total = 0, before = 0;
        if (split)
            owner[k] = (int)(k % (size_t)n);
        for (size_t i = f->first; i < f->first + f->count; i++)
            total += p->ins[i].nbytes;
        for (size_t i = f->first; i < f->first + f->count; i++) {
            /* the rank of the tensor's first byte, in n equal byte ranges */
            trank[i] = !split ? owner[k]
                       : total ? (int)((double)before * n / (double)total) : 0;
            if (trank[i] >= n)
                trank[i] = n - 1;
            before += p->ins[i].nbytes;
        }
    }
    free(load);
    free(taken);
    return split;
}

static bfp_status file_paths(const ck_plan *p, size_t k, int gguf, char **final,
                             char **tmp, char *err, size_t errlen)
{
    *final = gguf ? strdup(p->out) : path2(p->out, p->files[k].name, "", "");
    if (gguf) {
        size_t n = strlen(p->out) + 10;
        if ((*tmp = malloc(n)))
            snprintf(*tmp, n, "%s.bfp-tmp", p->out);
    } else {
        *tmp = path2(p->out, p->files[k].name, ".", ".bfp-tmp");
    }
    if (*final && *tmp)
        return BFP_OK;
    free(*final);
    free(*tmp);
    *final = *tmp = NULL;
    return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
}

/* Whole files: this rank's, each written or kept, and recorded. */
static bfp_status run_whole(ck_run *r, ck_manifest *mf, ck_team *t,
                            const int *owner, unsigned char *owned, int gguf,
                            char *err, size_t errlen)
{
    const ck_plan *p = r->p;
    bfp_status st = BFP_OK;
    for (size_t k = 0; st == BFP_OK && k < p->nfiles; k++) {
        ck_file *f = &p->files[k];
        char *final, *tmp;
        if (owner[k] != t->rank)
            continue;
        if ((st = file_paths(p, k, gguf, &final, &tmp, err, errlen)) != BFP_OK)
            break;
        owned[k] = 1;
        if (!gguf && ck_manifest_has(mf, f->name, final)) {
            r->s->shards_kept++;
            for (size_t i = f->first; i < f->first + f->count; i++)
                report_progress(r, p->ins[i].nbytes);
        } else if ((st = write_file(r, f, final, tmp, err, errlen)) == BFP_OK && !gguf &&
                   (st = ck_manifest_record(mf, f->name, final, err, errlen)) == BFP_OK) {
            st = ck_manifest_save(p, mf, owned, err, errlen);
        }
        free(final);
        free(tmp);
    }
    if (st == BFP_OK && !gguf) /* under mpirun: every rank leaves its part */
        st = ck_manifest_save(p, mf, t->n > 1 ? owned : NULL, err, errlen);
    return st;
}

/* Files cut across the ranks: each file's owner (file k: rank k mod N)
 * checks it against the manifest and creates its temporary, every rank
 * writes its tensors into it, the owner renames and records it. */
static bfp_status run_split(ck_run *r, ck_manifest *mf, ck_team *t, const int *owner,
                            const int *trank, unsigned char *owned, int gguf,
                            char *err, size_t errlen)
{
    const ck_plan *p = r->p;
    bfp_status st = BFP_OK;
    char **final = calloc(p->nfiles + 1, sizeof *final);
    char **tmp = calloc(p->nfiles + 1, sizeof *tmp);
    double *kept = calloc(p->nfiles + 1, sizeof *kept);
    if (!final || !tmp || !kept)
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    for (size_t k = 0; st == BFP_OK && k < p->nfiles; k++) {
        owned[k] = owner[k] == t->rank;
        if ((st = file_paths(p, k, gguf, &final[k], &tmp[k], err, errlen)) == BFP_OK)
            kept[k] = owned[k] && !gguf && ck_manifest_has(mf, p->files[k].name, final[k]);
    }
    /* one reader per file; the sum tells every rank what its owner found */
    if ((st = agree(t, st, err, errlen)) == BFP_OK && !t->r->sum(t->r->ctx, kept, p->nfiles))
        st = bfpio_fail(BFP_ERR_IO, err, errlen, "MPI reduction failed");
    for (size_t k = 0; st == BFP_OK && k < p->nfiles; k++) {
        int fd;
        if (!owned[k] || kept[k] > 0)
            continue;
        st = open_tmp(&p->files[k], tmp[k], 1, &fd, err, errlen);
        if (fd >= 0)
            st = close_tmp(fd, tmp[k], st, err, errlen);
    }
    st = agree(t, st, err, errlen);
    for (size_t k = 0; st == BFP_OK && k < p->nfiles; k++) {
        const ck_file *f = &p->files[k];
        size_t a = f->first, b;
        int fd;
        while (a < f->first + f->count && trank[a] != t->rank)
            a++;
        for (b = a; b < f->first + f->count && trank[b] == t->rank;)
            b++;
        if (kept[k] > 0) {
            for (size_t i = a; i < b; i++)
                report_progress(r, p->ins[i].nbytes);
            continue;
        }
        if (a == b)
            continue;
        st = open_tmp(f, tmp[k], 0, &fd, err, errlen);
        if (fd >= 0) {
            if (st == BFP_OK)
                st = write_range(r, f, fd, tmp[k], a, b, err, errlen);
            st = close_tmp(fd, tmp[k], st, err, errlen);
        }
    }
    st = agree(t, st, err, errlen);
    for (size_t k = 0; st == BFP_OK && k < p->nfiles; k++) {
        if (!owned[k])
            continue;
        if (kept[k] > 0) {
            r->s->shards_kept++;
            continue;
        }
        st = finish_tmp(tmp[k], final[k], BFP_OK, err, errlen);
        if (st == BFP_OK && !gguf)
            st = ck_manifest_record(mf, p->files[k].name, final[k], err, errlen);
    }
    if (st == BFP_OK && !gguf) /* every rank leaves its part */
        st = ck_manifest_save(p, mf, owned, err, errlen);
    for (size_t k = 0; final && tmp && k < p->nfiles; k++) {
        free(final[k]);
        free(tmp[k]);
    }
    free(final);
    free(tmp);
    free(kept);
    return st;
}

/* Every rank's share of the summary: kept files, and the SQNR and
 * non-finite blocks of the tensors it quantized. */
static bfp_status sum_summary(const ck_team *t, const int *trank, bfp_ckpt_summary *s,
                              char *err, size_t errlen)
{
    size_t n = 2 * s->tensors + 1;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    for (size_t i = 0; i < s->tensors; i++) {
        int mine = trank[i] == t->rank;
        v[2 * i] = mine ? s->t[i].sqnr_db : 0.0;
        v[2 * i + 1] = mine ? (double)s->t[i].nonfinite_blocks : 0.0;
    }
    v[n - 1] = (double)s->shards_kept;
    int ok = t->r->sum(t->r->ctx, v, n);
    for (size_t i = 0; ok && i < s->tensors; i++) {
        s->t[i].sqnr_db = v[2 * i];
        s->t[i].nonfinite_blocks = (size_t)v[2 * i + 1];
    }
    if (ok)
        s->shards_kept = (size_t)v[n - 1];
    free(v);
    return ok ? BFP_OK : bfpio_fail(BFP_ERR_IO, err, errlen, "MPI reduction failed");
}

static bfp_status start(ck_plan *p, ck_run *r, bfp_ckpt_summary *s, char *err,
                        size_t errlen)
{
    char *rin = realpath(p->in_dir, NULL), *rout = realpath(p->out, NULL);
    int same = rin && rout && strcmp(rin, rout) == 0;
    free(rin);
    free(rout);
    if (same)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "%s: OUT is the input's directory",
                          p->out);
    if (!(s->t = calloc(p->nins + 1, sizeof *s->t)))
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    s->tensors = p->nins;
    s->shards = p->nfiles;
    for (size_t i = 0; i < p->nins; i++) {
        bfp_ckpt_tensor *t = &s->t[i];
        t->name = strdup(p->ins[i].name);
        t->quantized = p->ins[i].quant;
        s->quantized += (size_t)t->quantized;
        memcpy(t->dtype, p->ins[i].dtype, sizeof t->dtype);
        t->ndim = p->ins[i].ndim;
        memcpy(t->shape, p->ins[i].shape, sizeof t->shape);
        t->sqnr_db = NAN;
        r->total_bytes += p->ins[i].nbytes;
    }
    for (size_t k = 0; k < p->nfiles; k++)
        s->out_bytes += p->files[k].size;
    s->in_bytes = r->total_bytes;
    return BFP_OK;
}

bfp_status bfp_ckpt_convert(const char *in, const char *out,
                            const bfp_ckpt_opts *o, bfp_ckpt_summary *s,
                            char *err, size_t errlen)
{
    ck_plan p;
    ck_run r;
    ck_manifest mf;
    ck_team t = {0, 1, o->ranks, 0};
    const char *why = NULL;
    int *owner = NULL, *trank = NULL, split = 0;
    unsigned char *owned = NULL;
    bfp_status st;
    memset(s, 0, sizeof *s);
    memset(&r, 0, sizeof r);
    memset(&p, 0, sizeof p);
    memset(&mf, 0, sizeof mf);
    if (o->ranks && o->ranks->nranks > 1) {
        t.rank = o->ranks->rank;
        t.n = o->ranks->nranks;
    }
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
    if ((st = ck_bufs_init(&r.b, o, err, errlen)) != BFP_OK)
        return st;
    /* the checks above are the same on every rank; from here one may fail */
    st = ck_plan_make(&p, in, out, o, err, errlen);
    r.p = &p;
    r.s = s;
    r.t0 = now_s();
    if (st == BFP_OK)
        st = start(&p, &r, s, err, errlen);
    if (st == BFP_OK && t.rank == 0)
        st = ck_manifest_open(&p, !gguf, 1, 0, t.n, &mf, err, errlen);
    st = agree(&t, st, err, errlen);
    if (st == BFP_OK && t.rank != 0)
        st = ck_manifest_open(&p, !gguf, 0, t.rank, t.n, &mf, err, errlen);
    if (st == BFP_OK && (!(owner = calloc(p.nfiles + 1, sizeof *owner)) ||
                         !(trank = calloc(p.nins + 1, sizeof *trank)) ||
                         !(owned = calloc(p.nfiles + 1, 1)) ||
                         (split = assign(&p, t.n, owner, trank)) < 0))
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    st = agree(&t, st, err, errlen);
    if (st == BFP_OK) {
        st = split ? run_split(&r, &mf, &t, owner, trank, owned, gguf, err, errlen)
                   : run_whole(&r, &mf, &t, owner, owned, gguf, err, errlen);
        ck_unmap(&r.m);
        st = agree(&t, st, err, errlen);
    }
    /* all ranks done: one writes the manifest and the metadata */
    if (st == BFP_OK && t.rank == 0 && !gguf) {
        if (t.n > 1)
            st = ck_manifest_merge(&p, &mf, owner, t.n, err, errlen);
        else
            ck_manifest_drop_parts(p.out); /* the manifest holds them all now */
        if (st == BFP_OK)
            st = write_finals(&p, err, errlen);
    }
    if (t.n > 1) {
        st = agree(&t, st, err, errlen);
        if (st == BFP_OK)
            st = sum_summary(&t, trank, s, err, errlen);
    }
    s->seconds = now_s() - r.t0;
    ck_bufs_free(&r.b);
    free(owner);
    free(trank);
    free(owned);
    ck_manifest_free(&mf);
    ck_plan_free(&p);
    return st;
}

/*
 * io_file.c - whole-file reads, atomic writes, directories, piecewise reads.
 */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64

#include "io_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bfp_status bfpio_fail(bfp_status st, char *err, size_t errlen, const char *fmt,
                      ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

size_t bfpio_numel(const size_t *shape, size_t ndim, int *ok)
{
    size_t n = 1;
    *ok = 1;
    for (size_t i = 0; i < ndim; i++) {
        if (!bfpio_mul(n, shape[i], &n)) {
            *ok = 0;
            return 0;
        }
    }
    return n;
}

int bfpio_has_ext(const char *path, const char *ext)
{
    size_t lp = strlen(path), le = strlen(ext);
    if (lp < le)
        return 0;
    for (size_t i = 0; i < le; i++)
        if (tolower((unsigned char)path[lp - le + i]) !=
            tolower((unsigned char)ext[i]))
            return 0;
    return 1;
}

void bfpio_open_mem(bfpio_reader *r, const void *buf, size_t len,
                    const char *label)
{
    r->fd = -1;
    r->mem = buf;
    r->size = buf ? (uint64_t)len : 0;
    r->path = label ? label : "(memory)";
}

bfp_status bfpio_open_read(bfpio_reader *r, const char *path, char *err,
                           size_t errlen)
{
    struct stat st;
    r->fd = -1;
    r->mem = NULL;
    r->size = 0;
    r->path = path;
    if (!path)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "no input path given");
    /* O_NONBLOCK: a FIFO must not hang the open; regular files ignore it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot open %s: %s", path,
                          strerror(errno));
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot read %s: %s", path,
                          strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot read %s: %s", path,
                          S_ISDIR(st.st_mode) ? "is a directory"
                                              : "not a regular file");
    }
    r->fd = fd;
    r->size = (uint64_t)st.st_size;
    return BFP_OK;
}

bfp_status bfpio_read_at(bfpio_reader *r, uint64_t off, void *buf, size_t n,
                         char *err, size_t errlen)
{
    uint8_t *p = buf;
    if (off > r->size || n > r->size - off)
        return bfpio_fail(BFP_ERR_DATA, err, errlen,
                          "%s is truncated: needs %llu bytes, has %llu",
                          r->path, (unsigned long long)off + n,
                          (unsigned long long)r->size);
    if (r->mem) {
        if (n)
            memcpy(buf, r->mem + off, n);
        return BFP_OK;
    }
    while (n > 0) {
        /* Stay below what off_t and one read() can take. */
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t got = pread(r->fd, p, chunk, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot read %s: %s",
                              r->path, strerror(errno));
        if (got == 0) /* file shrank under us */
            return bfpio_fail(BFP_ERR_DATA, err, errlen,
                              "%s is truncated (changed while reading)",
                              r->path);
        p += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return BFP_OK;
}

void bfpio_close(bfpio_reader *r)
{
    if (r && r->fd >= 0)
        close(r->fd);
    if (r)
        r->fd = -1;
}

bfp_status bfp_io_read_file(const char *path, void **data, size_t *size,
                            char *err, size_t errlen)
{
    bfpio_reader r;
    if (!data || !size)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "bfp_io_read_file: NULL output");
    *data = NULL;
    *size = 0;
    bfp_status st = bfpio_open_read(&r, path, err, errlen);
    if (st != BFP_OK)
        return st;
    if (r.size > (uint64_t)SIZE_MAX) {
        bfpio_close(&r);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "%s is too large", path);
    }
    size_t n = (size_t)r.size;
    void *buf = NULL;
    if (n > 0) {
        buf = malloc(n);
        if (!buf) {
            bfpio_close(&r);
            return bfpio_fail(BFP_ERR_NOMEM, err, errlen,
                              "out of memory reading %s (%zu bytes)", path, n);
        }
        st = bfpio_read_at(&r, 0, buf, n, err, errlen);
        if (st != BFP_OK) {
            free(buf);
            bfpio_close(&r);
            return st;
        }
    }
    bfpio_close(&r);
    *data = buf;
    *size = n;
    return BFP_OK;
}

int bfpio_write_all(int fd, const void *data, size_t size)
{
    const uint8_t *p = data;
    while (size > 0) {
        size_t chunk = size > ((size_t)1 << 30) ? ((size_t)1 << 30) : size;
        ssize_t w = write(fd, p, chunk);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        size -= (size_t)w;
    }
    return 0;
}

char *bfpio_parent_dir(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') /* "out/" is "out" */
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0)
        return strdup(".");
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, path, n);
        p[n] = '\0';
    }
    return p;
}

/* Best effort: make the rename itself durable. */
static void sync_parent_dir(const char *path)
{
    char *dir = bfpio_parent_dir(path);
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

static int path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

bfp_status bfpio_write_parts_atomic(const char *path, const bfpio_part *parts,
                                    size_t nparts, int force, char *err,
                                    size_t errlen)
{
    if (!path || !*path)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "no output path given");
    for (size_t i = 0; i < nparts; i++)
        if (!parts[i].data && parts[i].size > 0)
            return bfpio_fail(BFP_ERR_ARG, err, errlen,
                              "cannot write %s: NULL data", path);
    /* Refuse early, before spending time writing a large file. */
    if (!force && path_exists(path))
        return bfpio_fail(BFP_ERR_IO, err, errlen,
                          "%s exists (use --force to overwrite)", path);

    /* A short name in the same directory: path's own name may already be
     * as long as a name can be. */
    char *dir = bfpio_parent_dir(path);
    size_t dlen = dir ? strlen(dir) : 0;
    char *tmp = dir ? malloc(dlen + sizeof "/.bfp-XXXXXX") : NULL;
    if (!tmp) {
        free(dir);
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    }
    memcpy(tmp, dir, dlen);
    memcpy(tmp + dlen, "/.bfp-XXXXXX", sizeof "/.bfp-XXXXXX");
    free(dir);

    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot write %s: %s", path,
                          strerror(e));
    }
    const char *what = NULL;
    int e = 0;
    if (fchmod(fd, 0644) != 0)
        what = "chmod";
    for (size_t i = 0; !what && i < nparts; i++)
        if (bfpio_write_all(fd, parts[i].data, parts[i].size) != 0)
            what = "write";
    if (!what && fsync(fd) != 0)
        what = "fsync";
    if (what)
        e = errno;
    if (close(fd) != 0 && !what) {
        e = errno;
        what = "close";
    }
    int ok = !what;
    if (ok) {
        if (force) {
            if (rename(tmp, path) != 0) {
                e = errno;
                what = "rename";
                ok = 0;
            }
        } else if (link(tmp, path) == 0) {
            /* link() never replaces: closes the race with the check above. */
            unlink(tmp);
        } else if (errno == EEXIST) {
            unlink(tmp);
            free(tmp);
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s exists (use --force to overwrite)", path);
        } else if (path_exists(path)) {
            e = EEXIST;
            ok = 0;
        } else if (rename(tmp, path) != 0) {
            /* file system without hard links */
            e = errno;
            what = "rename";
            ok = 0;
        }
    }
    if (!ok) {
        unlink(tmp);
        free(tmp);
        if (e == EEXIST)
            return bfpio_fail(BFP_ERR_IO, err, errlen,
                              "%s exists (use --force to overwrite)", path);
        return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot write %s (%s): %s",
                          path, what, strerror(e));
    }
    free(tmp);
    sync_parent_dir(path);
    return BFP_OK;
}

bfp_status bfp_io_write_file_atomic(const char *path, const void *data,
                                    size_t size, int force, char *err,
                                    size_t errlen)
{
    bfpio_part part = {data, size};
    return bfpio_write_parts_atomic(path, &part, 1, force, err, errlen);
}

bfp_status bfp_io_make_dir(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!path || !*path)
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "no directory path given");
    if (mkdir(path, 0755) == 0)
        return BFP_OK;
    int e = errno;
    if (e == EEXIST) {
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            return BFP_OK;
        return bfpio_fail(BFP_ERR_IO, err, errlen,
                          "cannot create directory %s: exists and is not a directory",
                          path);
    }
    return bfpio_fail(BFP_ERR_IO, err, errlen, "cannot create directory %s: %s",
                      path, strerror(e));
}

/* Length of the valid UTF-8 sequence at p that a terminal shows as text
 * (not a C1 control U+0080..U+009F), or 0. */
static size_t utf8_printable(const unsigned char *p)
{
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
    if (n == 0 || p[0] > 0xF4)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] > 0x8F) || (p[0] == 0xED && p[1] > 0x9F))
        return 0; /* overlong, past U+10FFFF, or a surrogate */
    if (p[0] == 0xC2 && p[1] < 0xA0)
        return 0; /* C1 controls: some terminals obey U+009B as CSI */
    return n;
}

const char *bfp_io_quote_name(const char *name, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!buf || len < 8) /* room for "'...'" at least */
        return "'?'";
    buf[o++] = '\'';
    const unsigned char *p = (const unsigned char *)(name ? name : "");
    while (*p) {
        char esc[4];
        const char *src = esc;
        size_t n = 0, take = 1;
        if (*p >= 0x80 && (take = utf8_printable(p)) > 0) {
            src = (const char *)p; /* a whole printable character */
            n = take;
        } else if (*p < 0x20 || *p >= 0x7f) {
            take = 1;
            esc[n++] = '\\';
            esc[n++] = 'x';
            esc[n++] = hex[*p >> 4];
            esc[n++] = hex[*p & 15];
        } else if (*p == '\'' || *p == '\\') {
            esc[n++] = '\\';
            esc[n++] = (char)*p;
        } else {
            esc[n++] = (char)*p;
        }
        if (o + n + 5 > len) { /* keep room for "...'" and the NUL */
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, src, n);
        o += n;
        p += take;
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

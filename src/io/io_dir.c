/*
 * io_dir.c - a directory of output files written as one set.
 *
 * Every file goes into a fresh directory next to the target, which then
 * takes the target's place by rename (an atomic exchange where the kernel
 * has one), so a reader or a concurrent run sees the old set or the new set,
 * never a mix, and a failed run leaves the old set as it was.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#define _DEFAULT_SOURCE  /* syscall */
#define _FILE_OFFSET_BITS 64

#include "io_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#define TMP_NAME ".bfp-XXXXXX" /* short: fits NAME_MAX beside any name */

/* 1 + the index of name in owned[n], or 0 if absent. */
static size_t is_owned(const char *name, const char *const *owned, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(owned[i], name) == 0)
            return i + 1;
    return 0;
}

/* "a/b" from a and b, malloc'd. */
static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = malloc(a + (size_t)slash + b + 1);
    if (p) {
        memcpy(p, dir, a);
        if (slash)
            p[a] = '/';
        memcpy(p + a + (size_t)slash, name, b + 1);
    }
    return p;
}

/* Remove the files of a set (owned regular files only), then the dir.
 * Returns 0 when the directory is gone. */
static int remove_set(const char *dir, const char *const *owned, size_t nowned)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        char *p;
        if (!is_owned(e->d_name, owned, nowned) || !(p = join(dir, e->d_name)))
            continue;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            unlink(p);
        free(p);
    }
    closedir(d);
    return rmdir(dir);
}

/*
 * What is at dir now: 0 nothing, 1 a directory holding only owned regular
 * files (*nonempty set if any), -1 refused (reported).
 */
static int inspect(const char *dir, const char *const *owned, size_t nowned,
                   int *nonempty, char *first, size_t firstlen, char *err,
                   size_t errlen)
{
    struct stat st;
    *nonempty = 0;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        bfpio_fail(BFP_ERR_IO, err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) { /* a dangling link too */
        bfpio_fail(BFP_ERR_IO, err, errlen,
                   "%s exists and is not a directory", dir);
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        bfpio_fail(BFP_ERR_IO, err, errlen, "cannot read directory %s: %s",
                   dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 1;
    while (rc == 1 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        /* Relative to the directory being read: a concurrent run may have
         * swapped another set in under dir's name meanwhile. */
        struct stat es;
        int r = fstatat(dirfd(d), e->d_name, &es, AT_SYMLINK_NOFOLLOW);
        if (r != 0 && errno == ENOENT)
            continue; /* removed meanwhile (an old set going away) */
        if (!is_owned(e->d_name, owned, nowned) || r != 0 ||
            !S_ISREG(es.st_mode)) {
            bfpio_fail(BFP_ERR_IO, err, errlen,
                       "%s holds %s, which is not one of the files written "
                       "there; not replacing the directory", dir,
                       BFPIO_Q(e->d_name));
            rc = -1;
        } else if (!*nonempty ||
                   is_owned(e->d_name, owned, nowned) < is_owned(first, owned, nowned)) {
            *nonempty = 1; /* name the first in owned order, whatever readdir's */
            snprintf(first, firstlen, "%s", e->d_name);
        }
    }
    closedir(d);
    return rc;
}

/* Write one file of the set into the private directory tmp. */
static bfp_status write_member(const char *tmp, const char *dir,
                               const bfp_io_file *f, char *err, size_t errlen)
{
    char *p = join(tmp, f->name);
    const char *what = NULL;
    int e = 0;
    if (!p)
        return bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    free(p);
    if (fd < 0) {
        what = "create";
        e = errno;
    } else {
        if (fchmod(fd, 0644) != 0)
            what = "chmod";
        else if (bfpio_write_all(fd, f->data, f->size) != 0)
            what = "write";
        else if (fsync(fd) != 0)
            what = "fsync";
        if (what)
            e = errno;
        if (close(fd) != 0 && !what) {
            what = "close";
            e = errno;
        }
    }
    if (!what)
        return BFP_OK;
    /* name the user's path, not the temporary directory */
    char *shown = join(dir, f->name);
    bfp_status st = bfpio_fail(BFP_ERR_IO, err, errlen,
                               "cannot write %s (%s): %s",
                               shown ? shown : f->name, what, strerror(e));
    free(shown);
    return st;
}

/* Swap two directory entries atomically; -1 with errno ENOSYS/EINVAL where
 * the kernel or file system cannot. */
static int exchange(const char *a, const char *b)
{
#if defined(__linux__) && defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b,
                        1u << 1 /* RENAME_EXCHANGE */);
#else
    (void)a;
    (void)b;
    errno = ENOSYS;
    return -1;
#endif
}

/* mkdtemp() with mode 0755 under the umask, as mkdir makes a directory
 * (mkdtemp's is 0700; changing the umask to chmod it is not thread-safe).
 * path ends in XXXXXX, which this fills. */
static int make_temp_dir(char *path)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    static unsigned long counter;
    char *x = path + strlen(path) - 6;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long seed = (unsigned long)ts.tv_nsec ^
                         ((unsigned long)getpid() << 16) ^ (counter++ * 7919u);
    for (int attempt = 0; attempt < 1000; attempt++) {
        unsigned long v = seed + (unsigned long)attempt * 2654435761u;
        for (int i = 0; i < 6; i++, v /= 36)
            x[i] = digits[v % 36];
        if (mkdir(path, 0755) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Put the finished set tmp in place of the existing directory dir. Without
 * an exchange: move dir aside first (readers briefly see no directory, never
 * a mixed one). On success *old names what to remove (may be NULL). */
static int replace_dir(const char *tmp, const char *dir, const char *parent,
                       char **old)
{
    *old = NULL;
    if (exchange(tmp, dir) == 0) {
        *old = strdup(tmp);
        return 0;
    }
    if (errno == ENOENT) /* dir went away meanwhile */
        return rename(tmp, dir);
    if (errno != ENOSYS && errno != EINVAL)
        return -1;
    char *aside = join(parent, TMP_NAME);
    if (!aside || !mkdtemp(aside)) {
        free(aside);
        return -1;
    }
    if (rename(dir, aside) != 0) {
        int e = errno;
        rmdir(aside);
        free(aside);
        errno = e;
        return -1;
    }
    if (rename(tmp, dir) != 0) {
        int e = errno;
        (void)rename(aside, dir);
        free(aside);
        errno = e;
        return -1;
    }
    *old = aside;
    return 0;
}

bfp_status bfp_io_write_dir_atomic(const char *dir, const bfp_io_file *files,
                                   size_t n, const char *const *owned,
                                   size_t nowned, int force, char *err,
                                   size_t errlen)
{
    char first[NAME_MAX + 1] = "";
    char *parent = NULL, *tmp = NULL, *old = NULL, *real = NULL;
    bfp_status st = BFP_OK;
    int nonempty = 0, made = 0;

    if (!dir || !*dir || (n > 0 && !files))
        return bfpio_fail(BFP_ERR_ARG, err, errlen, "no output directory given");
    for (size_t i = 0; i < n; i++) {
        const char *nm = files[i].name;
        if (!nm || !*nm || strchr(nm, '/') || strcmp(nm, ".") == 0 ||
            strcmp(nm, "..") == 0 || (!files[i].data && files[i].size > 0) ||
            !is_owned(nm, owned, nowned))
            return bfpio_fail(BFP_ERR_ARG, err, errlen,
                              "%s: bad file name or data for file %zu", dir, i);
    }
    int what = inspect(dir, owned, nowned, &nonempty, first, sizeof first, err,
                       errlen);
    if (what < 0)
        return BFP_ERR_IO;
    if (what > 0 && nonempty && !force)
        return bfpio_fail(BFP_ERR_IO, err, errlen,
                          "%s%s%s exists (use --force to replace the directory)",
                          dir, dir[strlen(dir) - 1] == '/' ? "" : "/", first);
    /* An existing directory is replaced where it really is (a symlink to it
     * stays a symlink); the temporary one must be on its file system. */
    const char *target = dir;
    if (what > 0) {
        char cwd[PATH_MAX];
        if (!(real = realpath(dir, NULL))) {
            st = bfpio_fail(BFP_ERR_IO, err, errlen, "%s: %s", dir,
                            strerror(errno));
            goto out;
        }
        if (getcwd(cwd, sizeof cwd) && strcmp(cwd, real) == 0) {
            st = bfpio_fail(BFP_ERR_ARG, err, errlen,
                            "%s is the current directory; name a directory "
                            "of its own", dir);
            goto out;
        }
        if (strcmp(real, "/") == 0) {
            st = bfpio_fail(BFP_ERR_ARG, err, errlen,
                            "%s is the root directory", dir);
            goto out;
        }
        target = real;
    }
    if (!(parent = bfpio_parent_dir(target)) || !(tmp = join(parent, TMP_NAME))) {
        st = bfpio_fail(BFP_ERR_NOMEM, err, errlen, "out of memory");
        goto out;
    }
    if (make_temp_dir(tmp) != 0) {
        int e = errno;
        st = what > 0 ? bfpio_fail(BFP_ERR_IO, err, errlen,
                                   "cannot replace %s: no new directory beside "
                                   "it in %s: %s", dir, parent, strerror(e))
                      : bfpio_fail(BFP_ERR_IO, err, errlen,
                                   "cannot create directory %s: %s", dir,
                                   strerror(e));
        goto out;
    }
    made = 1;
    for (size_t i = 0; i < n && st == BFP_OK; i++)
        st = write_member(tmp, dir, &files[i], err, errlen);
    if (st != BFP_OK)
        goto out;
    sync_dir(tmp);
    /* rename() onto a missing or empty directory only: it fails with
     * EEXIST / ENOTEMPTY if another run put its set there meanwhile. */
    if (what == 0 || !nonempty) {
        if (rename(tmp, target) == 0) {
            made = 0;
        } else if ((errno == EEXIST || errno == ENOTEMPTY) && !force) {
            st = bfpio_fail(BFP_ERR_IO, err, errlen,
                            "%s exists (use --force to replace the directory)",
                            dir);
            goto out;
        } else if (errno != EEXIST && errno != ENOTEMPTY) {
            int e = errno;
            st = bfpio_fail(BFP_ERR_IO, err, errlen, "cannot write %s: %s", dir,
                            e == ENOTDIR ? "exists and is not a directory"
                                         : strerror(e));
            goto out;
        }
    }
    if (made) {
        if (replace_dir(tmp, target, parent, &old) != 0) {
            st = bfpio_fail(BFP_ERR_IO, err, errlen, "cannot replace %s: %s",
                            dir, strerror(errno));
            goto out;
        }
        made = 0;
    }
    sync_dir(parent);
    if (old)
        (void)remove_set(old, owned, nowned); /* the old set; best effort */
out:
    if (made)
        (void)remove_set(tmp, owned, nowned);
    free(parent);
    free(tmp);
    free(old);
    free(real);
    return st;
}

/* test_io_util.h - shared helpers of the tests/test_io_*.c programs: a
 * scratch directory under /tmp removed at exit, raw file writing, and an
 * OK() check that also prints what passed. */
#ifndef BFP_TEST_IO_UTIL_H
#define BFP_TEST_IO_UTIL_H

#define _POSIX_C_SOURCE 200809L

#include "bfp_io.h"
#include "check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OK(cond, ...)                                                          \
    do {                                                                       \
        int ok_ = !!(cond);                                                    \
        CHECK(ok_, __VA_ARGS__);                                               \
        if (ok_) {                                                             \
            printf("ok   ");                                                   \
            printf(__VA_ARGS__);                                               \
            putchar('\n');                                                     \
        }                                                                      \
    } while (0)

static char tdir[64];

/* Remove the files in the scratch dir (one level: tests make no subdirs
 * except ones they remove themselves), then the dir. */
static inline void tdir_cleanup(void)
{
    DIR *d = opendir(tdir);
    struct dirent *e;
    char p[512];
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", tdir, e->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    closedir(d);
    rmdir(tdir);
}

static inline void tdir_make(void)
{
    strcpy(tdir, "/tmp/bfp_test_io_XXXXXX");
    if (!mkdtemp(tdir)) {
        perror("mkdtemp");
        exit(2);
    }
    atexit(tdir_cleanup);
}

/* A path inside the scratch dir (static buffers, rotated). */
static inline const char *tpath(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", tdir, name);
    return b;
}

static inline int write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Number of entries in the scratch dir (to catch stray temporary files). */
static inline int tdir_count(void)
{
    DIR *d = opendir(tdir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static inline void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#endif

/*
 * replay_main.c - run a fuzz target on every file of the given directories
 * (its seed corpus and the crashes ever found), so `make test` replays them
 * with the ordinary compiler and under ASan+UBSan, without libFuzzer.
 * Usage: fuzz_replay_TARGET DIR... ; a missing DIR is fine (no crashes yet).
 */
#define _POSIX_C_SOURCE 200809L

#include "fuzz_util.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = fz_alloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                fclose(fp);
                fprintf(stderr, "replay: out of memory on %s\n", path);
                return -1;
            }
            buf = bigger;
        }
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    /* An exact-size copy: the target must not read past the input. */
    uint8_t *exact = fz_alloc(n);
    if (n)
        memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay every regular file of dir in name order; returns files run or -1. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *e;
    long rc = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (count == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!more) {
                rc = -1;
                break;
            }
            names = more;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[count] = fz_alloc(len);
        snprintf(names[count], len, "%s/%s", dir, e->d_name);
        count++;
    }
    closedir(d);
    if (count)
        qsort(names, count, sizeof *names, cmp_str);
    for (size_t i = 0; i < count; i++) {
        struct stat st;
        if (rc >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            rc = replay_file(names[i]) == 0 ? rc + 1 : -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long n = replay_dir(argv[i]);
        if (n < 0) {
            fprintf(stderr, "replay: cannot replay %s\n", argv[i]);
            return 1;
        }
        total += n;
    }
    printf("replayed %ld inputs\n", total);
    /* An empty seed corpus would make this test pass vacuously. */
    return total > 0 ? 0 : 1;
}

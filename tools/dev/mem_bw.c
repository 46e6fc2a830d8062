/* mem_bw.c - this machine's memory ceilings for `bfp bench` (issue #4), on
 * 64 MiB buffers, best of `reps` each, the measurements alternated:
 *  - memcpy on 1 and on 2 threads, read + write bytes counted as `bfp bench`
 *    counts memcpy: the ceiling of "two threads >= 1.7x one thread" for an
 *    operation that one thread already runs near memcpy's speed;
 *  - a read-only pass on 1 thread (a max over 64-bit words, as the NVFP4
 *    tensor amax reads its input): NVFP4 quantize reads the input once for
 *    the amax and once more to encode, so at best it moves in + out bytes in
 *    in / read + (in + out) / memcpy seconds.
 *   cc -O2 -pthread tools/dev/mem_bw.c -o /tmp/mem_bw && /tmp/mem_bw [reps=15]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { BYTES = 64 << 20 };

typedef struct {
    char *dst;
    const char *src;
    size_t n;
} part;

static void *copy_part(void *a)
{
    part *p = (part *)a;
    memcpy(p->dst, p->src, p->n);
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* one copy of the whole buffer on `threads` threads; seconds */
static double copy_once(char *dst, const char *src, int threads)
{
    pthread_t th[2];
    part p[2];
    size_t half = BYTES / (size_t)threads;
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        p[i] = (part){dst + (size_t)i * half, src + (size_t)i * half, half};
        if (i > 0 && pthread_create(&th[i], NULL, copy_part, &p[i]) != 0) {
            fprintf(stderr, "mem_bw: pthread_create failed\n");
            exit(1);
        }
    }
    copy_part(&p[0]);
    for (int i = 1; i < threads; i++)
        pthread_join(th[i], NULL);
    return now() - t0;
}

static volatile uint64_t sink;

/* one read of the whole buffer: the max of its words, four chains; seconds */
static double read_once(const char *src)
{
    const uint64_t *w = (const uint64_t *)src;
    uint64_t m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    double t0 = now();
    for (size_t i = 0; i < BYTES / 8; i += 4) {
        m0 = w[i] > m0 ? w[i] : m0;
        m1 = w[i + 1] > m1 ? w[i + 1] : m1;
        m2 = w[i + 2] > m2 ? w[i + 2] : m2;
        m3 = w[i + 3] > m3 ? w[i + 3] : m3;
    }
    sink = m0 ^ m1 ^ m2 ^ m3;
    return now() - t0;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    char *src = aligned_alloc(64, BYTES), *dst = aligned_alloc(64, BYTES);
    if (!src || !dst || reps < 1) {
        fprintf(stderr, "usage: %s [reps >= 1]\n", argv[0]);
        return 2;
    }
    memset(src, 1, BYTES);
    memset(dst, 2, BYTES);
    double c1 = 1e9, c2 = 1e9, r1 = 1e9, s;
    for (int r = 0; r < reps; r++) {
        c1 = (s = copy_once(dst, src, 1)) < c1 ? s : c1;
        c2 = (s = copy_once(dst, src, 2)) < c2 ? s : c2;
        r1 = (s = read_once(src)) < r1 ? s : r1;
    }
    double g1 = 2.0 * BYTES / c1 / 1e9, g2 = 2.0 * BYTES / c2 / 1e9, rd = BYTES / r1 / 1e9;
    printf("64 MiB: memcpy 1 thread %.1f GB/s, 2 threads %.1f GB/s (%.2fx); read 1 thread %.1f GB/s\n",
           g1, g2, g2 / g1, rd);
    /* NVFP4 quantize's best case: in + out bytes in in / read + (in + out) / memcpy */
    for (int bf16 = 0; bf16 < 2; bf16++) {
        double in = bf16 ? 2.0 : 4.0, io = in + 0.5 + 1.0 / 16;
        printf("NVFP4 quantize from %s, both passes at these speeds: %.0f%% of memcpy\n",
               bf16 ? "bf16" : "f32", 100.0 * io / (in * g1 / rd + io));
    }
    free(src);
    free(dst);
    return 0;
}

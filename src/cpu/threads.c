/* threads.c - fork-join over C11 threads for large calls. No pool: a call
 * that is worth splitting (>= 1 MiB) amortizes thread start-up, and small
 * calls never get here. */
#if defined(__unix__) || defined(__APPLE__)
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>
#endif

#include "cpu_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <threads.h>

#define MAX_THREADS BFP_CPU_MAX_THREADS
#define AUTO_MIN_BYTES ((size_t)1 << 20)     /* below this, one thread */
#define BYTES_PER_THREAD ((size_t)512 << 10) /* auto: at least this much each */

typedef struct {
    bfp_task_fn fn;
    void *ctx;
    int t, n;
} task;

static int task_main(void *arg)
{
    task *a = (task *)arg;
    a->fn(a->ctx, a->t, a->n);
    return 0;
}

void bfp_cpu_parallel(int n, bfp_task_fn fn, void *ctx)
{
    if (n <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    thrd_t th[MAX_THREADS];
    task args[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < n; t++) {
        args[t] = (task){fn, ctx, t, n};
        started[t] = thrd_create(&th[t], task_main, &args[t]) == thrd_success;
    }
    fn(ctx, 0, n);
    for (int t = 1; t < n; t++) {
        if (started[t])
            thrd_join(th[t], NULL);
        else
            fn(ctx, t, n); /* could not start: do its share here */
    }
}

/* bfp_set_threads(): the automatic count's cap, 0 = the online CPUs */
static atomic_int threads_setting;

bfp_status bfp_set_threads(int n)
{
    if (n < 0)
        return BFP_ERR_ARG;
    atomic_store(&threads_setting, n);
    return BFP_OK;
}

static int online_cpus(void)
{
#if defined(_SC_NPROCESSORS_ONLN)
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < MAX_THREADS ? n : MAX_THREADS) : 1;
#else
    return 1;
#endif
}

int bfp_cpu_threads_for(int requested, size_t bytes, size_t units)
{
    int n;
    if (requested > 0) {
        n = requested < MAX_THREADS ? requested : MAX_THREADS;
    } else {
        if (bytes < AUTO_MIN_BYTES)
            return 1;
        int want = atomic_load(&threads_setting);
        n = want > 0 ? (want < MAX_THREADS ? want : MAX_THREADS) : online_cpus();
        size_t by_size = bytes / BYTES_PER_THREAD;
        if ((size_t)n > by_size)
            n = by_size > 0 ? (int)by_size : 1;
    }
    if ((size_t)n > units)
        n = units > 0 ? (int)units : 1;
    return n;
}

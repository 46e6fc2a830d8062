/* bench_check.h - BFP(call) and CB(call) for the GPU benchmarks
 * (bench/gpu_*.cu): a failing bfp or cuBLAS call prints where and why and
 * exits 1 (CU(call), for the CUDA runtime, is tests/cuda_check.h); and
 * in_env_list() for their format filters. */
#ifndef BFP_BENCH_CHECK_H
#define BFP_BENCH_CHECK_H

#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bfp.h"

#define BFP(call)                                                                      \
    do {                                                                               \
        bfp_status s_ = (call);                                                        \
        if (s_ != BFP_OK) {                                                            \
            fprintf(stderr, "bfp error %s at %s:%d\n", bfp_status_str(s_), __FILE__,   \
                    __LINE__);                                                         \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define CB(call)                                                                       \
    do {                                                                               \
        cublasStatus_t s_ = (call);                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                             \
            fprintf(stderr, "cuBLAS error %d at %s:%d\n", (int)s_, __FILE__, __LINE__); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* Whether environment variable `var` (a comma-separated list, e.g.
 * "mxfp4,nvfp4") names `name`; an unset or empty list names everything. */
static inline bool in_env_list(const char *var, const char *name)
{
    const char *list = getenv(var);
    if (!list || !*list)
        return true;
    const size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && !strncmp(p, name, n))
            return true;
        p += n + (e ? 1 : 0);
    }
    return false;
}

#endif

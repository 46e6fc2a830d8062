/* matmul_tuning_env.h - the GPU matmul's tuning from the environment, for
 * the benchmarks and tests only (the library reads no environment):
 *   BFP_MATMUL_CTAS_PER_SM  -> ctas_per_sm
 *   BFP_MATMUL_WARPS_PER_SM -> warps_per_sm
 *   BFP_MATMUL_POST_MAX_M   -> post_max_m (0 here means never: -1 in the struct)
 *   BFP_MATMUL_WG_PIPE      -> wgmma_serial = 1 when 0, 0 when 1, 2 when 2
 *   BFP_MATMUL_GEMV_PDL     -> gemv_pdl
 *   BFP_MATMUL_WG_CONSUMERS -> wgmma_consumers
 *   BFP_MATMUL_XQ_KERNEL    -> xq_kernel
 *   BFP_MATMUL_GROUPED_KERNEL -> grouped_kernel
 *   BFP_MATMUL_GEMV_SPLIT   -> gemv_split
 *   BFP_MATMUL_WG_BN        -> wgmma_bn
 * Unset or empty: the default. A value that is not an integer, or out of
 * the struct's range (bfp_matmul_tuning_check), is refused with a message
 * (before, the library fell back to the default without a word). */
#ifndef BFP_MATMUL_TUNING_ENV_H
#define BFP_MATMUL_TUNING_ENV_H

#include "bfp.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* 1 and *v set when name is set to an integer, 0 when unset or empty, -1
 * (with a message) when set to anything else */
static int tuning_env_int(const char *name, int *v)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return 0;
    char *end;
    errno = 0;
    long l = strtol(e, &end, 10);
    if (*end || errno || l < INT_MIN || l > INT_MAX) {
        fprintf(stderr, "%s: '%s' is not an integer\n", name, e);
        return -1;
    }
    *v = (int)l;
    return 1;
}

/* wgmma_serial for a BFP_MATMUL_WG_PIPE value: 0 the serial mainloop (1),
 * 1 the pipelined one (0), 2 the k16-step one (2); -1 (refused by
 * bfp_matmul_tuning_check) for anything else */
static inline int tuning_wg_pipe_serial(int v)
{
    return v == 0 ? 1 : v == 1 ? 0 : v == 2 ? 2 : -1;
}

/* Fill *t from the environment: 1 when some variable was set, 0 when none
 * (t holds the defaults), -1 on a malformed value or an invalid tuning
 * (a message printed). */
static inline int matmul_tuning_from_env(bfp_matmul_tuning *t)
{
    bfp_matmul_tuning z = {0};
    *t = z;
    int any = 0, r, v = 0;
    if ((r = tuning_env_int("BFP_MATMUL_CTAS_PER_SM", &t->ctas_per_sm)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_WARPS_PER_SM", &t->warps_per_sm)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_POST_MAX_M", &v)) < 0)
        return -1;
    if (r)
        t->post_max_m = v == 0 ? -1 : v;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_WG_PIPE", &v)) < 0)
        return -1;
    if (r)
        t->wgmma_serial = tuning_wg_pipe_serial(v); /* -1: refused below */
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_GEMV_PDL", &t->gemv_pdl)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_WG_CONSUMERS", &t->wgmma_consumers)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_XQ_KERNEL", &t->xq_kernel)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_GROUPED_KERNEL", &t->grouped_kernel)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_GEMV_SPLIT", &t->gemv_split)) < 0)
        return -1;
    any |= r;
    if ((r = tuning_env_int("BFP_MATMUL_WG_BN", &t->wgmma_bn)) < 0)
        return -1;
    any |= r;
    if (bfp_matmul_tuning_check(t) != BFP_OK) {
        fprintf(stderr, "BFP_MATMUL_*: a value out of range (bfp.h, bfp_matmul_tuning)\n");
        return -1;
    }
    return any;
}

#endif

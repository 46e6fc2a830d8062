/*
 * ckpt_mpi_stub.c - a build without MPI: `bfp convert` is one process. Under
 * mpirun each process would convert the whole checkpoint into the same OUT,
 * so that is refused.
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_mpi.h"

#include <stdio.h>
#include <stdlib.h>

int ckpt_mpi_begin(bfp_ckpt_ranks *r, char *err, size_t errlen)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    (void)r;
    if (n && atoi(n) > 1) {
        if (rank && atoi(rank) != 0) /* one line for the job: rank 0's */
            err[0] = '\0';
        else
            snprintf(err, errlen, "this bfp was built without MPI (BFP_MPI=OFF): "
                                  "it cannot run under mpirun -n %s", n);
        return -1;
    }
    return 0;
}

void ckpt_mpi_end(void) {}

int ckpt_mpi_built(void)
{
    return 0;
}

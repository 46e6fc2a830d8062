/*
 * ckpt_mpi.c - the ranks of an mpirun job for bfp_ckpt_convert(): a status
 * agreement (the lowest failing rank's message, broadcast) and a sum.
 * MPI starts only when the process was launched by mpirun (OpenMPI's or
 * PMIx's environment), so a plain `bfp convert` never touches it.
 */
#define _POSIX_C_SOURCE 200809L

#include "ckpt_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_LEN 1024

static int started;

static int agree(void *ctx, int ok, char *err, size_t errlen)
{
    int rank, first, mine;
    char msg[MSG_LEN];
    (void)ctx;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mine = ok ? INT_MAX : rank;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Allreduce failed");
        return 0;
    }
    if (first == INT_MAX)
        return 1;
    if (rank == first)
        snprintf(msg, sizeof msg, "rank %d: %s", rank,
                 err && err[0] ? err : "failed");
    if (MPI_Bcast(msg, MSG_LEN, MPI_CHAR, first, MPI_COMM_WORLD) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "rank %d failed (MPI_Bcast failed)", first);
    msg[MSG_LEN - 1] = '\0';
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return 0;
}

static int sum(void *ctx, double *v, size_t n)
{
    (void)ctx;
    return n <= INT_MAX && MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, MPI_SUM,
                                         MPI_COMM_WORLD) == MPI_SUCCESS;
}

static int under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

int ckpt_mpi_begin(bfp_ckpt_ranks *r, char *err, size_t errlen)
{
    if (!under_mpirun())
        return 0;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init failed");
        return -1;
    }
    started = 1;
    memset(r, 0, sizeof *r);
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->nranks);
    r->agree = agree;
    r->sum = sum;
    return 1;
}

void ckpt_mpi_end(void)
{
    if (started)
        MPI_Finalize();
    started = 0;
}

int ckpt_mpi_built(void)
{
    return 1;
}

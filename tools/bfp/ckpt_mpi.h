/*
 * ckpt_mpi.h - `bfp convert` under mpirun: the ranks of the job as
 * bfp_ckpt_ranks (ckpt_mpi.c, built when MPI is found; ckpt_mpi_stub.c
 * otherwise). MPI stays here, out of the library and the other commands.
 */
#ifndef BFP_CKPT_MPI_H
#define BFP_CKPT_MPI_H

#include "bfp_ckpt.h"

/* 1 when started by mpirun (and MPI initialized, *r filled), 0 for a plain
 * process, -1 when MPI could not start (the message in err; empty when
 * another process of the job prints it). */
int ckpt_mpi_begin(bfp_ckpt_ranks *r, char *err, size_t errlen);

/* After the conversion, on every rank that began. */
void ckpt_mpi_end(void);

/* 1 if this build has MPI. */
int ckpt_mpi_built(void);

#endif /* BFP_CKPT_MPI_H */

/*
 * tfdiff_mpi.h — tfdiff --mpi: the rank files split over the processes of
 * an MPI job (mpirun -np K tfdiff --mpi GOLDEN BAD), MPI the transport.
 * Process p reads the jobs j with j % K == p (tfdiff.c); the results and
 * the desync extracts go to process 0, which writes the report — the same
 * report as one process writes. Without mpirun (or in a build without
 * MPI) --mpi runs as K = 1.
 */
#ifndef TFT_TFDIFF_MPI_H
#define TFT_TFDIFF_MPI_H

#include "core_spill.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tfdiff_mpi {
    bool on;                  /* MPI_Init ran */
    int me, nproc;            /* this process, the processes (1 without MPI) */
    int local;                /* processes on this host (threads are shared among them) */
} tfdiff_mpi;

/* Joins the MPI job when the program was started by an MPI launcher;
 * otherwise (or built without MPI) me 0, nproc 1. 0, or -1 with a message
 * (launched as several processes by a build without MPI). */
int tfdiff_mpi_start(tfdiff_mpi *mp, int *argc, char ***argv);
void tfdiff_mpi_end(tfdiff_mpi *mp);

/* Every process's e (0 or a negative errno): the most negative, on all. */
int tfdiff_mpi_agree(const tfdiff_mpi *mp, int e);
/* Process 0's code, on all. */
int tfdiff_mpi_bcast_int(const tfdiff_mpi *mp, int v);

/* Sends (process != 0) or receives (process 0) n bytes of a job's result
 * from its owner. */
int tfdiff_mpi_move(const tfdiff_mpi *mp, int owner, void *p, size_t n);

/* Rank file ri's extract of sp from its owner to process 0's sp. */
int tfdiff_mpi_move_extract(const tfdiff_mpi *mp, int owner, diff_spill *sp, int ri);

#endif

/*
 * mpi_prog.c — an unmodified MPI program for the MPI interposer test:
 * ITERS iterations of MPI_Allreduce (f32 sum), MPI_Bcast (f64, root 0) and
 * MPI_Barrier, after one MPI_Reduce and one MPI_Allgather.
 *   mpi_prog ok     all ranks agree
 *   mpi_prog count  rank 2 all-reduces 9 floats instead of 8 at iteration 3
 *   mpi_prog skip   rank 3 skips the all-reduce of iteration 3 and sleeps:
 *                   the others hang in it (run under tftrace --timeout)
 * Rank 0 prints the final sum, so tracing must not change it.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ITERS 5

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* a count mismatch is an error, not an abort that could cut the traces */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int one = rank + 1, total = 0, all[64] = {0};
    MPI_Reduce(&one, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allgather(&one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    float x[9];
    double y[4] = {0};
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < 9; i++)
            x[i] = (float)(rank + i + it);
        int count = 8;
        if (it == 3 && rank == 2 && !strcmp(mode, "count"))
            count = 9;
        if (it == 3 && rank == 3 && !strcmp(mode, "skip")) {
            sleep(120); /* the others wait for us in MPI_Allreduce */
            break;
        }
        MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            for (int i = 0; i < 4; i++)
                y[i] = x[i] * 0.5;
        MPI_Bcast(y, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("result %d %d %.3f\n", total, all[size - 1], y[0] + y[3]);
    MPI_Finalize();
    return 0;
}

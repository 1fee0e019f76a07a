/*
 * mn_plain.c — an unmodified MPI program (not linked with libtftrace) for
 * README's multi-node line, run as it says: mpirun -np 4 -x
 * LD_PRELOAD=libtftrace.so -x TFT_OUTPUT=run.trace ./mn_plain. An 8 MiB
 * allocation before MPI_Init (recorded by the allocation interposer, so
 * the rank file is open before MPI_Init), then three MPI_Allreduce of 256
 * floats. Prints the last sum on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    size_t big = 8u << 20;
    char *scratch = malloc(big);
    if (!scratch)
        return 1;
    memset(scratch, 1, big);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float x[256], y[256];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 256; i++)
            x[i] = (float)(i + s + scratch[i]);
        MPI_Allreduce(x, y, 256, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("%g\n", (double)y[255]);
    free(scratch);
    MPI_Finalize();
    return 0;
}

/*
 * mpi_grid.c — a trainer shaped like 2-D parallelism, for the tests
 * (tests/e2e/trainers, 4 ranks). The ranks form a 2 x 2 grid; MPI_Comm_split
 * makes the row communicators (tensor parallel: {0,1} and {2,3}) and the
 * column communicators (data parallel: {0,2} and {1,3}); two MPI_Comm_dup
 * of MPI_COMM_WORLD are a config and a metrics communicator.
 *
 * Start: the config communicator broadcasts the hyper-parameters (4 x f64
 * from rank 0). Each of ITERS iterations: the row all-reduces the partial
 * activations (ACT x f32), the column all-reduces the gradients (GRAD x
 * f32), MPI_COMM_WORLD gathers every rank's loss (MPI_Allgather, 1 x f32
 * each). End: a barrier on the metrics communicator; rank 0 prints a
 * checksum of every result, which tracing must not change.
 *
 *   mpi_grid ok     all ranks agree
 *   mpi_grid count  at iteration PLANT_ITER rank 3 all-reduces GRAD/2
 *                   gradients where its column peer rank 1 passes GRAD.
 *                   Open MPI 4.1 then leaves rank 1 waiting for the rest
 *                   of the message, and ranks 0, 2 and 3 in the next
 *                   MPI_Allgather: run it under tftrace --timeout.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define ITERS 6
#define PLANT_ITER 3
#define ACT 64
#define GRAD 1024

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        fprintf(stderr, "mpi_grid: needs 4 ranks, not %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* a mismatch is an error the program sees, not an abort that could cut
     * the traces; the communicators made below inherit the handler */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm row, col, config, metrics;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &row);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &col);
    MPI_Comm_dup(MPI_COMM_WORLD, &config);
    MPI_Comm_dup(MPI_COMM_WORLD, &metrics);

    double hp[4] = {0};
    if (rank == 0)
        hp[0] = 0.5, hp[1] = 0.25, hp[2] = 2, hp[3] = 1;
    MPI_Bcast(hp, 4, MPI_DOUBLE, 0, config);

    static float act[ACT], act_sum[ACT], grad[GRAD], grad_sum[GRAD], losses[4];
    double check = 0;
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < ACT; i++)
            act[i] = (float)(rank + i + it);
        MPI_Allreduce(act, act_sum, ACT, MPI_FLOAT, MPI_SUM, row);
        for (int i = 0; i < GRAD; i++)
            grad[i] = (float)(hp[0] * act_sum[i % ACT] + rank);
        int n = !strcmp(mode, "count") && rank == 3 && it == PLANT_ITER ? GRAD / 2 : GRAD;
        MPI_Allreduce(grad, grad_sum, n, MPI_FLOAT, MPI_SUM, col);
        float loss = (float)(grad_sum[0] * hp[1] / (it + 1));
        MPI_Allgather(&loss, 1, MPI_FLOAT, losses, 1, MPI_FLOAT, MPI_COMM_WORLD);
        for (int r = 0; r < 4; r++)
            check += losses[r];
        check += grad_sum[GRAD - 1];
    }
    MPI_Barrier(metrics);
    if (rank == 0)
        printf("grid %.3f\n", check);
    MPI_Comm_free(&metrics);
    MPI_Comm_free(&config);
    MPI_Comm_free(&col);
    MPI_Comm_free(&row);
    MPI_Finalize();
    return 0;
}

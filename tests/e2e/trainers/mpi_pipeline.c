/*
 * mpi_pipeline.c — a trainer shaped like pipeline parallelism, for the
 * tests (tests/e2e/trainers, 4 ranks = 4 stages). Each of ITERS iterations
 * (one micro-batch): stage 0 makes the activations (ACT x f32); stages 1
 * and 2 receive them from the previous stage (MPI_Recv, tag TAG_ACT),
 * transform them and send them on (MPI_Send); the last stage receives with
 * MPI_Irecv + MPI_Wait; then every stage all-reduces its loss on
 * MPI_COMM_WORLD (1 x f64). Rank 0 prints a checksum of the losses, which
 * tracing must not change.
 *
 *   mpi_pipeline ok      all stages agree
 *   mpi_pipeline tag     at iteration PLANT_ITER stage 2 sends its
 *                        activations with tag TAG_GRAD instead of TAG_ACT:
 *                        stage 3's receive never matches (it waits in
 *                        MPI_Wait), the other stages wait in MPI_Allreduce
 *   mpi_pipeline nosend  at iteration PLANT_ITER stage 1 sends nothing:
 *                        stage 2 blocks in MPI_Recv, stage 3 in MPI_Wait,
 *                        stages 0 and 1 wait in MPI_Allreduce
 * The hangs end under tftrace --timeout.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define ITERS 6
#define PLANT_ITER 3
#define ACT 256
#define TAG_ACT 1
#define TAG_GRAD 7

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        fprintf(stderr, "mpi_pipeline: needs 4 ranks, not %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    static float act[ACT];
    double total = 0;
    for (int it = 0; it < ITERS; it++) {
        if (rank == 0) {
            for (int i = 0; i < ACT; i++)
                act[i] = (float)(i + it);
        } else if (rank < 3) {
            MPI_Recv(act, ACT, MPI_FLOAT, rank - 1, TAG_ACT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Request req;
            MPI_Irecv(act, ACT, MPI_FLOAT, rank - 1, TAG_ACT, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < ACT; i++)
            act[i] = act[i] * 0.5f + (float)rank;
        if (rank < 3 && it == PLANT_ITER && !strcmp(mode, "tag") && rank == 2)
            MPI_Send(act, ACT, MPI_FLOAT, rank + 1, TAG_GRAD, MPI_COMM_WORLD);
        else if (rank < 3 && !(it == PLANT_ITER && !strcmp(mode, "nosend") && rank == 1))
            MPI_Send(act, ACT, MPI_FLOAT, rank + 1, TAG_ACT, MPI_COMM_WORLD);
        double loss = rank == 3 ? act[0] + act[ACT - 1] : 0, sum = 0;
        MPI_Allreduce(&loss, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
    }
    if (rank == 0)
        printf("pipeline %.3f\n", total);
    MPI_Finalize();
    return 0;
}

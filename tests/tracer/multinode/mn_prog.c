/*
 * mn_prog.c — a data-parallel MPI job for the multi-node tests
 * (run_multinode_test.sh): records a tensor before MPI_Init (so its rank
 * file is open, with the run id it started with, when MPI_Init agrees on
 * the job's), then STEPS steps of one tensor and one MPI_Allreduce each
 * (recorded by the MPI interposers: TFT_INTERPOSE=1).
 *   mn_prog STEPS [SLOW_RANK SLOW_MS SLOW_STEP [split]]   SLOW_RANK enters step
 *        SLOW_STEP's all-reduce SLOW_MS late (a real straggler); split: each
 *        step first all-reduces on a communicator of ranks 2k, 2k+1 (one
 *        "node" in the tests), which the straggler enters late
 * Prints the sum of the last all-reduce on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tft.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    int slow_rank = argc > 2 ? atoi(argv[2]) : -1;
    long slow_ms = argc > 3 ? atol(argv[3]) : 0;
    int slow_step = argc > 4 ? atoi(argv[4]) : -1;
    int split = argc > 5 && !strcmp(argv[5], "split");
    float x[256], y[256];
    int64_t shape[1] = {256};
    for (int i = 0; i < 256; i++)
        x[i] = (float)i;
    tft_tensor("before_init", TFT_F32, x, 1, shape);
    tft_flush();
    sleep_ms(200); /* the in-process writer opens the rank file meanwhile */
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm node = MPI_COMM_NULL;
    if (split)
        MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &node);
    for (int s = 0; s < steps; s++) {
        tft_step_begin(s);
        for (int i = 0; i < 256; i++)
            x[i] = (float)(i + s);
        tft_tensor("x", TFT_F32, x, 1, shape);
        if (rank == slow_rank && s == slow_step)
            sleep_ms(slow_ms);
        if (split)
            MPI_Allreduce(x, y, 256, MPI_FLOAT, MPI_SUM, node);
        MPI_Allreduce(x, y, 256, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        tft_step_end(s);
    }
    if (rank == 0)
        printf("%g\n", (double)y[255]);
    if (split)
        MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}

/*
 * mpi_hang.c — a job that hangs the way a rank that skips a collective
 * does: rank 1 calls MPI_Barrier while the others call MPI_Allreduce, all
 * from step() called by main. Each rank writes its pid to DIR/pid.RANK once
 * it is about to hang. With "loop N": every rank calls MPI_Allreduce N
 * times (0 = forever) on an int buffer of 1024, printing a checksum line per
 * 100 calls; for `tftrace attach`. With MPI_HANG_GO set the loop waits
 * for the file DIR/go first, and rank 0 prints the loop's time at the end
 * ("elapsed S"; bench/bpf/attach_cost.sh). Usage: mpi_hang hang DIR | loop N DIR
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void write_pid(const char *dir, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.pid.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    char final[4096];
    snprintf(final, sizeof final, "%s/pid.%d", dir, rank);
    rename(path, final);
}

__attribute__((noinline)) static void step(int rank, int *buf, int n)
{
    if (rank == 1)
        MPI_Barrier(MPI_COMM_WORLD);
    else
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    __asm__ volatile("" ::: "memory"); /* keeps step's frame (no tail call) */
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return fprintf(stderr, "usage: mpi_hang hang DIR | loop N DIR\n"), 2;
    MPI_Init(&argc, &argv);
    int rank, size, buf[1024];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 1024; i++)
        buf[i] = rank + i;
    if (!strcmp(argv[1], "hang")) {
        write_pid(argv[2], rank);
        step(rank, buf, 1024);
    } else if (argc >= 4) {
        long n = atol(argv[2]);
        write_pid(argv[3], rank);
        if (getenv("MPI_HANG_GO")) {
            char go[4096];
            snprintf(go, sizeof go, "%s/go", argv[3]);
            while (access(go, F_OK) != 0)
                usleep(10000);
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long it = 0; n == 0 || it < n; it++) {
            for (int i = 0; i < 1024; i++)
                buf[i] = rank + i + (int)it;
            MPI_Allreduce(MPI_IN_PLACE, buf, 1024, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0 && it % 100 == 99) {
                long sum = 0;
                for (int i = 0; i < 1024; i++)
                    sum += buf[i];
                printf("iter %ld sum %ld\n", it + 1, sum);
                fflush(stdout);
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rank == 0 && getenv("MPI_HANG_GO"))
            printf("elapsed %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    }
    MPI_Finalize();
    return 0;
}

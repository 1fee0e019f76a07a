/*
 * mpi_life.c — an unmodified MPI program (not linked with libtftrace) for
 * the communicator and byte-buffer cases of the MPI interposers
 * (run_mpi_test.sh). Every result is checked here: tracing must not change
 * it. Prints what the trace must show.
 *   mpi_life reuse    4 ranks: communicators freed and made again, so that
 *                     MPI hands out the freed handles to communicators with
 *                     other members; prints "call K members a,b" per
 *                     Allreduce (K counts this rank's calls) and "reused N"
 *   mpi_life threads  MPI_THREAD_MULTIPLE, 3 threads per rank, each making,
 *                     using and freeing communicators of its own
 *   mpi_life bytes    2 ranks: MPI_BYTE, MPI_CHAR, a contiguous derived
 *                     type and a strided one; prints "fp NAME HEX" (XXH3 of
 *                     the buffer after the call) for the byte buffers
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static int world_rank, world_size;

#define CHECK(c)                                                                                        \
    do {                                                                                                \
        if (!(c)) {                                                                                     \
            fprintf(stderr, "rank %d: %s:%d: %s\n", world_rank, __FILE__, __LINE__, #c);                \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                               \
        }                                                                                               \
    } while (0)

/* One Allreduce of the world ranks on comm, checked; prints its members. */
static void sum_on(MPI_Comm comm, int call)
{
    int size, n = 0, sum = 0;
    MPI_Comm_size(comm, &size);
    int *all = malloc(sizeof(int) * (size_t)size);
    CHECK(all);
    MPI_Allreduce(&world_rank, &sum, 1, MPI_INT, MPI_SUM, comm);
    MPI_Allgather(&world_rank, 1, MPI_INT, all, 1, MPI_INT, comm);
    printf("call %d members", call);
    for (int i = 0; i < size; i++) {
        n += all[i];
        printf("%s%d", i ? "," : " ", all[i]);
    }
    printf("\n");
    CHECK(n == sum);
    free(all);
}

static int reuse(void)
{
    int reused = 0, call = 0;
    for (int round = 0; round < 3; round++) {
        /* made by an interposed creator: numbered at creation */
        MPI_Comm a, b;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &a);
        sum_on(a, call++);
        void *ha = (void *)(uintptr_t)a;
        MPI_Comm_free(&a);
        MPI_Comm_split(MPI_COMM_WORLD, world_rank / 2, world_rank, &b);
        reused += (void *)(uintptr_t)b == ha;
        sum_on(b, call++);
        /* made by one the interposers do not see (MPI_Comm_idup): numbered
         * at its first recorded call, the handle of b freed just before */
        void *hb = (void *)(uintptr_t)b;
        MPI_Comm c;
        MPI_Request req;
        MPI_Comm_free(&b);
        MPI_Comm_idup(round % 2 ? MPI_COMM_WORLD : MPI_COMM_SELF, &c, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        reused += (void *)(uintptr_t)c == hb;
        sum_on(c, call++);
        MPI_Comm_free(&c);
    }
    printf("reused %d\n", reused > 0);
    return 0;
}

enum { NTHREADS = 3, NITER = 20 };

static void *thread_main(void *arg)
{
    MPI_Comm comm = *(MPI_Comm *)arg;
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int it = 0; it < NITER; it++) {
        float x[4] = {(float)rank, 1, (float)it, 0.5f}, y[4];
        MPI_Allreduce(x, y, 4, MPI_FLOAT, MPI_SUM, comm);
        CHECK(y[0] == (float)(size * (size - 1) / 2) && y[1] == (float)size && y[2] == (float)(it * size));
        unsigned char bytes[64];
        for (int i = 0; i < 64; i++)
            bytes[i] = (unsigned char)(rank == it % size ? i + it : 0);
        MPI_Bcast(bytes, 64, MPI_BYTE, it % size, comm);
        CHECK(bytes[5] == (unsigned char)(5 + it));
        /* a communicator of its own, made, used and freed on this thread */
        MPI_Comm sub;
        MPI_Comm_split(comm, rank % 2, rank, &sub);
        int one = 1, n = 0;
        MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, sub);
        CHECK(n == (size + 1 - rank % 2) / 2);
        MPI_Comm_free(&sub);
    }
    return NULL;
}

static int threads(int provided)
{
    if (provided < MPI_THREAD_MULTIPLE) {
        if (world_rank == 0)
            printf("SKIP: MPI_THREAD_MULTIPLE not provided\n");
        return 0;
    }
    MPI_Comm comms[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) /* made in the same order on every rank */
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, thread_main, &comms[t]) == 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        MPI_Comm_free(&comms[t]);
    if (world_rank == 0)
        printf("threads ok\n");
    return 0;
}

static void print_fp(const char *name, const void *p, size_t n)
{
    if (world_rank == 1)
        printf("fp %s %016llx\n", name, (unsigned long long)XXH3_64bits(p, n));
}

static int bytes(void)
{
    enum { N = 4096 };
    unsigned char *b = malloc(N);
    CHECK(b);
    for (int i = 0; i < N; i++)
        b[i] = world_rank == 0 ? (unsigned char)(i % 251) : 7;
    MPI_Bcast(b, N, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(b[300] == 300 % 251);
    print_fp("byte", b, N);
    char text[32];
    snprintf(text, sizeof(text), "%s", world_rank == 0 ? "hello from rank zero" : "");
    MPI_Bcast(text, (int)sizeof(text), MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(!strcmp(text, "hello from rank zero"));
    print_fp("char", text, sizeof(text));
    /* a contiguous derived type: its bytes are its data */
    MPI_Datatype quad, strided;
    MPI_Type_contiguous(4, MPI_FLOAT, &quad);
    MPI_Type_commit(&quad);
    float f[64];
    for (int i = 0; i < 64; i++)
        f[i] = world_rank == 0 ? (float)i * 0.5f : -1;
    MPI_Bcast(f, 16, quad, 0, MPI_COMM_WORLD);
    CHECK(f[63] == 31.5f);
    print_fp("quad", f, sizeof(f));
    /* a strided one: its bytes are not */
    MPI_Type_vector(4, 1, 2, MPI_FLOAT, &strided);
    MPI_Type_commit(&strided);
    for (int i = 0; i < 64; i++)
        f[i] = world_rank == 0 ? (float)i : -1;
    MPI_Bcast(f, 2, strided, 0, MPI_COMM_WORLD);
    CHECK(f[2] == (world_rank == 0 ? 2.0f : 2.0f) && (world_rank == 0 || f[1] == -1));
    /* a receive of the contiguous type: the count received, in bytes */
    if (world_rank == 0)
        MPI_Send(f, 3, quad, 1, 5, MPI_COMM_WORLD);
    else if (world_rank == 1)
        MPI_Recv(f, 16, quad, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Type_free(&quad);
    MPI_Type_free(&strided);
    free(b);
    if (world_rank == 0)
        printf("bytes ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int provided = MPI_THREAD_SINGLE;
    if (!strcmp(mode, "threads"))
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    int rc = 2;
    if (!strcmp(mode, "reuse"))
        rc = reuse();
    else if (!strcmp(mode, "threads"))
        rc = threads(provided);
    else if (!strcmp(mode, "bytes"))
        rc = bytes();
    fflush(stdout);
    MPI_Finalize();
    return rc;
}

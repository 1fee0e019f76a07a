/*
 * mpi_prog.c — an unmodified MPI program for the MPI interposer tests
 * (4 ranks). Part 1: ITERS iterations of MPI_Allreduce (f32 sum), MPI_Bcast
 * (f64, root 0) and MPI_Barrier, after one MPI_Reduce and one
 * MPI_Allgather. Part 2: the other collectives (Reduce_scatter_block,
 * Reduce_scatter, Alltoall, Gather, Scatter), point-to-point (Send/Recv in
 * a ring, Recv from MPI_ANY_SOURCE with MPI_STATUS_IGNORE, Sendrecv) and
 * non-blocking forms (Isend/Irecv + Waitall, Iallreduce + Wait, Ibcast +
 * Test, Ireduce_scatter_block/Ibarrier/Ialltoall + Waitany/Waitsome,
 * Irecv from MPI_ANY_SOURCE + Testall, Isend/Irecv + Testsome, Isend +
 * Request_free).
 *   mpi_prog ok        all ranks agree
 *   mpi_prog count     rank 2 all-reduces 9 floats instead of 8 at iteration 3
 *   mpi_prog skip      rank 3 skips the all-reduce of iteration 3 and sleeps:
 *                      the others hang in it (run under tftrace --timeout)
 *   mpi_prog alltoall  rank 1 exchanges 3 ints per peer in MPI_Alltoall, the others 2
 *   mpi_prog redscat   rank 0 uses MPI_MAX in MPI_Reduce_scatter_block, the others MPI_SUM
 *   mpi_prog nbskip    rank 3 never issues the MPI_Iallreduce and sleeps: the
 *                      others hang in MPI_Wait
 *   mpi_prog nbmix     rank 2 calls MPI_Allreduce where the others call
 *                      MPI_Iallreduce (a different collective to MPI)
 * Rank 0 prints the results of both parts, so tracing must not change them.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ITERS 5
#define MAXR 16

static const char *mode = "ok";
static int rank, size;

/* 1 when this rank is the one that misbehaves in mode m. */
static int planted(const char *m, int who) { return !strcmp(mode, m) && rank == who; }

static double part1(void)
{
    int one = rank + 1, total = 0, all[64] = {0};
    MPI_Reduce(&one, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allgather(&one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    float x[9];
    double y[4] = {0};
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < 9; i++)
            x[i] = (float)(rank + i + it);
        int count = 8;
        if (it == 3 && planted("count", 2))
            count = 9;
        if (it == 3 && planted("skip", 3)) {
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
    return y[0] + y[3];
}

/* The other blocking collectives; returns a checksum of what this rank got. */
static double collectives(void)
{
    double sum = 0;
    float rs_in[2 * MAXR], rs_out[2];
    for (int i = 0; i < 2 * size; i++)
        rs_in[i] = (float)(rank * 10 + i);
    MPI_Reduce_scatter_block(rs_in, rs_out, 2, MPI_FLOAT, planted("redscat", 0) ? MPI_MAX : MPI_SUM,
                             MPI_COMM_WORLD);
    sum += rs_out[0] + rs_out[1];
    int counts[MAXR], total = 0;
    for (int i = 0; i < size; i++)
        total += counts[i] = i % 3 + 1;
    int v_in[3 * MAXR], v_out[3] = {0};
    for (int i = 0; i < total; i++)
        v_in[i] = rank + i;
    MPI_Reduce_scatter(v_in, v_out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < counts[rank]; i++)
        sum += v_out[i];
    int per = planted("alltoall", 1) ? 3 : 2, a_in[3 * MAXR], a_out[3 * MAXR] = {0};
    for (int i = 0; i < per * size; i++)
        a_in[i] = rank * 100 + i;
    MPI_Alltoall(a_in, per, MPI_INT, a_out, per, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < 2 * size; i++)
        sum += a_out[i];
    int g_in = rank * rank, g_out[MAXR] = {0};
    MPI_Gather(&g_in, 1, MPI_INT, g_out, 1, MPI_INT, 1, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        sum += g_out[i];
    double s_in[2 * MAXR], s_out[2];
    for (int i = 0; i < 2 * size; i++)
        s_in[i] = i * 1.5;
    MPI_Scatter(s_in, 2, MPI_DOUBLE, s_out, 2, MPI_DOUBLE, 2, MPI_COMM_WORLD);
    return sum + s_out[0] + s_out[1];
}

/* Blocking point-to-point. */
static double p2p(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    float out[5], in[5] = {0};
    for (int i = 0; i < 5; i++)
        out[i] = (float)(rank + i);
    if (rank % 2 == 0) {
        MPI_Send(out, 5, MPI_FLOAT, right, 7, MPI_COMM_WORLD);
        MPI_Recv(in, 5, MPI_FLOAT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(in, 5, MPI_FLOAT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(out, 5, MPI_FLOAT, right, 7, MPI_COMM_WORLD);
    }
    double sum = in[0] + in[4];
    /* rank 0 collects one int from every other rank, in arrival order */
    if (rank == 0) {
        for (int k = 1; k < size; k++) {
            int v = 0;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            sum += v;
        }
    } else {
        int v = rank * 1000;
        MPI_Send(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
    }
    long sr_out = rank, sr_in = -1;
    MPI_Status st;
    MPI_Sendrecv(&sr_out, 1, MPI_LONG, right, 4, &sr_in, 1, MPI_LONG, left, 4, MPI_COMM_WORLD, &st);
    return sum + (double)sr_in + st.MPI_SOURCE;
}

/* Non-blocking forms and their completions. */
static double nonblocking(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double sum = 0;
    int ring_out[3] = {rank, rank * 2, rank * 3}, ring_in[3] = {0};
    MPI_Request r2[2];
    MPI_Irecv(ring_in, 3, MPI_INT, left, 11, MPI_COMM_WORLD, &r2[0]);
    MPI_Isend(ring_out, 3, MPI_INT, right, 11, MPI_COMM_WORLD, &r2[1]);
    MPI_Waitall(2, r2, MPI_STATUSES_IGNORE);
    sum += ring_in[0] + ring_in[1] + ring_in[2];

    double d[4] = {rank, rank + 0.5, 2.0 * rank, 1.0};
    MPI_Request req;
    if (planted("nbskip", 3)) {
        sleep(120); /* the others wait for us in MPI_Wait */
        return 0;
    }
    if (planted("nbmix", 2)) { /* MPI does not match it with the others' MPI_Iallreduce */
        MPI_Allreduce(MPI_IN_PLACE, d, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else {
        MPI_Iallreduce(MPI_IN_PLACE, d, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    sum += d[0] + d[1] + d[2] + d[3];

    int b[3] = {0};
    if (rank == 1)
        b[0] = 5, b[1] = 6, b[2] = 7;
    MPI_Ibcast(b, 3, MPI_INT, 1, MPI_COMM_WORLD, &req);
    for (int flag = 0; !flag;)
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    sum += b[0] + b[1] + b[2];

    float rs_in[2 * MAXR], rs_out[2];
    for (int i = 0; i < 2 * size; i++)
        rs_in[i] = (float)(i - rank);
    int a_in[MAXR], a_out[MAXR];
    for (int i = 0; i < size; i++)
        a_in[i] = rank * 10 + i;
    MPI_Request r3[3];
    MPI_Ireduce_scatter_block(rs_in, rs_out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r3[0]);
    MPI_Ibarrier(MPI_COMM_WORLD, &r3[1]);
    MPI_Ialltoall(a_in, 1, MPI_INT, a_out, 1, MPI_INT, MPI_COMM_WORLD, &r3[2]);
    int idx;
    MPI_Waitany(3, r3, &idx, MPI_STATUS_IGNORE);
    for (int left_over = 2; left_over > 0;) {
        int n, ids[3];
        MPI_Status sts[3];
        MPI_Waitsome(3, r3, &n, ids, sts);
        left_over -= n;
    }
    sum += rs_out[0] + rs_out[1];
    for (int i = 0; i < size; i++)
        sum += a_out[i];

    /* rank 0 receives from everyone with MPI_ANY_SOURCE, completes by Testall */
    if (rank == 0) {
        MPI_Request rr[MAXR];
        long got[MAXR] = {0};
        for (int k = 1; k < size; k++)
            MPI_Irecv(&got[k], 1, MPI_LONG, MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &rr[k - 1]);
        for (int flag = 0; !flag;)
            MPI_Testall(size - 1, rr, &flag, MPI_STATUSES_IGNORE);
        for (int k = 1; k < size; k++)
            sum += (double)got[k];
    } else {
        long v = rank * 7;
        MPI_Request sr;
        MPI_Isend(&v, 1, MPI_LONG, 0, 12, MPI_COMM_WORLD, &sr);
        MPI_Wait(&sr, MPI_STATUS_IGNORE);
    }
    /* a ring exchange completed by Testsome, statuses ignored */
    short ts_out = (short)(rank + 20), ts_in = 0;
    MPI_Request tr[2];
    MPI_Irecv(&ts_in, 1, MPI_SHORT, left, 14, MPI_COMM_WORLD, &tr[0]);
    MPI_Isend(&ts_out, 1, MPI_SHORT, right, 14, MPI_COMM_WORLD, &tr[1]);
    for (int done = 0; done < 2;) {
        int n, ids[2];
        MPI_Testsome(2, tr, &n, ids, MPI_STATUSES_IGNORE);
        done += n;
    }
    sum += ts_in;

    /* a send whose request the program frees; the receiver completes it */
    int fv = rank + 40, fin = 0;
    MPI_Request fr;
    MPI_Isend(&fv, 1, MPI_INT, right, 13, MPI_COMM_WORLD, &fr);
    MPI_Request_free(&fr);
    MPI_Recv(&fin, 1, MPI_INT, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return sum + fin;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        mode = argv[1];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > MAXR) {
        fprintf(stderr, "mpi_prog: at most %d ranks\n", MAXR);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* a count mismatch is an error, not an abort that could cut the traces */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    part1();
    double mine = collectives() + p2p() + nonblocking(), all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("part2 %.3f\n", all);
    MPI_Finalize();
    return 0;
}

/*
 * desync_records.c — the desync analysis (analyzer/desync/desync.c) on
 * traces written here record by record, for what the MPI trainer programs
 * cannot produce on demand: a trace before format 1.2 (104-byte
 * collectives, no COMM records), NCCL-style COMM records that list no
 * members (assembled from every rank file), a tie between two ranks
 * broken by the communicator's previous call, an intercommunicator, two
 * ranks blocked receiving from each other, sends and receives still in
 * flight when the trace ends (no finding), and a send nobody receives.
 */
#define _GNU_SOURCE
#include "core.h"
#include "desync.h"
#include "tft_test.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[256];
static uint64_t ts_now;

static tft_writer *w_open(const char *dir, int rank, int world)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/rank-%05d.tft", dir, rank);
    tft_file_info fi = {0};
    fi.rank = rank;
    fi.world_size = world;
    fi.pid = 2000 + rank;
    snprintf(fi.host, sizeof(fi.host), "testhost");
    tft_writer_opts o = TFT_WRITER_OPTS(.chunk_bytes = 64 * 1024, .sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &o);
    CHECK(w != NULL);
    return w;
}

static void hdr(tft_rec *h, uint16_t kind, size_t len, int64_t seq)
{
    memset(h, 0, sizeof(*h));
    h->kind = kind;
    h->len = (uint32_t)len;
    h->ts = ++ts_now;
    h->step = TFT_STEP_NONE;
    h->seq = seq;
}

/* One call's record: ENTER (exit false) or EXIT; len 104 writes a 1.1 one. */
typedef struct call {
    uint64_t comm, q, count;
    int type, rank, nranks, root, tag;
    const char *name;
} call;

static void w_call(tft_writer *w, int64_t seq, const call *c, bool exit_rec, size_t len)
{
    _Alignas(8) char buf[sizeof(tft_rec_collective)];
    tft_rec_collective *r = (tft_rec_collective *)buf;
    memset(buf, 0, sizeof(buf));
    hdr(&r->h, TFT_REC_COLLECTIVE, len, seq);
    r->h.flags = exit_rec ? TFT_COLL_FLAG_EXIT : TFT_COLL_FLAG_ENTER;
    r->comm = c->comm;
    r->coll_seq = c->q;
    r->count = c->count;
    r->t_enter = 1000 + ts_now;
    r->name = tft_writer_string(w, c->name, strlen(c->name));
    r->type = (uint16_t)c->type;
    r->dtype = TFT_F32;
    r->redop = c->type == TFT_COLL_ALLREDUCE ? TFT_REDOP_SUM : TFT_REDOP_NONE;
    r->root = c->root;
    r->rank = c->rank;
    r->nranks = c->nranks;
    if (len >= sizeof(*r))
        r->tag = c->tag;
    CHECK(tft_writer_append(w, &r->h) == 0);
}

/* A COMM record; members NULL: none listed. */
static void w_comm(tft_writer *w, uint64_t id, const char *made_by, int rank, int size, const int32_t *members,
                   int n, bool inter)
{
    _Alignas(8) char buf[sizeof(tft_rec_comm) + 4 * 16];
    tft_rec_comm *r = (tft_rec_comm *)buf;
    size_t len = (sizeof(*r) + 4 * (size_t)n + 7) & ~(size_t)7;
    memset(buf, 0, sizeof(buf));
    hdr(&r->h, TFT_REC_COMM, len, TFT_SEQ_NONE);
    r->h.flags = inter ? 0x1 : 0;
    r->comm = id;
    r->name = tft_writer_string(w, made_by, strlen(made_by));
    r->rank = rank;
    r->size = size;
    r->n_members = (uint32_t)n;
    if (n)
        memcpy(r->members, members, 4 * (size_t)n);
    CHECK(tft_writer_append(w, &r->h) == 0);
}

static void make_dir(char *dir, size_t n, const char *name)
{
    snprintf(dir, n, "%s/%s", tmpdir, name);
    CHECK(mkdir(dir, 0755) == 0);
}

static int analyse(const char *dir, desync_finding *d, int max)
{
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t != NULL);
    if (!t)
        return -1;
    int n = desync_find(t, d, max);
    for (int k = 0; k < n; k++)
        printf("%s: [%d] %s %s ranks %d cause %u: %s\n", strrchr(dir, '/') + 1, k, desync_kind_name(d[k].kind),
               d[k].comm_name, d[k].nranks ? d[k].ranks[0] : -1, d[k].cause, d[k].detail);
    tft_trace_close(t);
    return n;
}

static uint64_t sid(const char *s) { return tft_string_id(s, strlen(s)); }

/* 1.1 records: 104 bytes, no COMM records. MPI_COMM_WORLD is named from
 * its collectives; another communicator by its id in hex. */
static void test_old_format(desync_finding *d)
{
    char dir[512];
    make_dir(dir, sizeof(dir), "old.trace");
    uint64_t world = sid("MPI_COMM_WORLD"), sub = sid("MPI_Comm:3:2");
    for (int r = 0; r < 2; r++) {
        tft_writer *w = w_open(dir, r, 2);
        for (int q = 0; q < 4; q++) {
            call a = {world, (uint64_t)q, 8, TFT_COLL_ALLREDUCE, r, 2, -1, TFT_TAG_NONE, "MPI_Allreduce"};
            call b = {sub, (uint64_t)q, r == 1 && q == 2 ? 7 : 8, TFT_COLL_BCAST, r, 2, 0, TFT_TAG_NONE, "MPI_Bcast"};
            if (r == 1 && q == 3)
                a.count = 9;
            w_call(w, 2 * q, &a, false, TFT_REC_COLLECTIVE_MIN_BYTES);
            w_call(w, 2 * q, &a, true, TFT_REC_COLLECTIVE_MIN_BYTES);
            w_call(w, 2 * q + 1, &b, false, TFT_REC_COLLECTIVE_MIN_BYTES);
            w_call(w, 2 * q + 1, &b, true, TFT_REC_COLLECTIVE_MIN_BYTES);
        }
        CHECK(tft_writer_close(w) == 0);
    }
    int n = analyse(dir, d, 8);
    CHECKF(n == 2, "%d findings", n);
    if (n < 2)
        return;
    CHECK(d[0].kind == DS_COUNT && d[0].comm == sub && d[0].coll_seq == 2 && d[0].nmembers == 0);
    CHECK(strlen(d[0].comm_name) == 16 && d[0].comm_name[0] != '{');
    CHECK(d[0].seq == 5 && d[0].id == 1 && d[0].cause == 0);
    CHECK(d[1].kind == DS_COUNT && d[1].comm == world && d[1].coll_seq == 3 && d[1].ranks[0] == 1);
    CHECK(!strcmp(d[1].comm_name, "{0,1}") && d[1].nmembers == 2 && d[1].members[1] == 1);
    CHECK(strstr(d[1].detail, "on communicator {0,1}, collective #3") != NULL);
}

/* NCCL-style: COMM records name only their own rank; the members come
 * from all four rank files. The two ranks of {1,3} disagree at collective
 * #2: rank 1 changed its count, so rank 1 is named although rank 3 is
 * the higher index. */
static void test_assembled(desync_finding *d)
{
    char dir[512];
    make_dir(dir, sizeof(dir), "assembled.trace");
    uint64_t even = sid("ncclCommSplit:even"), odd = sid("ncclCommSplit:odd");
    for (int r = 0; r < 4; r++) {
        tft_writer *w = w_open(dir, r, 4);
        uint64_t id = r % 2 ? odd : even;
        w_comm(w, id, "ncclCommSplit", r / 2, 2, NULL, 0, false);
        for (int q = 0; q < 3; q++) {
            call a = {id, (uint64_t)q, r == 1 && q == 2 ? 4 : 8, TFT_COLL_ALLREDUCE, r / 2, 2, -1, TFT_TAG_NONE,
                      "ncclAllReduce"};
            w_call(w, q, &a, false, sizeof(tft_rec_collective));
            w_call(w, q, &a, true, sizeof(tft_rec_collective));
        }
        CHECK(tft_writer_close(w) == 0);
    }
    int n = analyse(dir, d, 8);
    CHECKF(n == 1, "%d findings", n);
    if (n < 1)
        return;
    CHECK(d[0].kind == DS_COUNT && d[0].comm == odd && d[0].coll_seq == 2);
    CHECK(!strcmp(d[0].comm_name, "{1,3}") && d[0].nmembers == 2 && d[0].members[0] == 1 && d[0].members[1] == 3);
    CHECKF(d[0].nranks == 1 && d[0].ranks[0] == 1, "named rank %d", d[0].ranks[0]);
    CHECK(strstr(d[0].detail, "rank 3 count 8, rank 1 count 4") != NULL);
}

/* An intercommunicator {0,1|2,3}: the groups' counts differ (legitimate),
 * the type does not... until collective #1, where rank 2 broadcasts. */
static void test_inter(desync_finding *d)
{
    char dir[512];
    make_dir(dir, sizeof(dir), "inter.trace");
    uint64_t id = sid("MPI_Intercomm{0,1|2,3}#0");
    for (int r = 0; r < 4; r++) {
        tft_writer *w = w_open(dir, r, 4);
        int32_t m[4] = {0, 1, 2, 3}, mm[4] = {2, 3, 0, 1};
        w_comm(w, id, "MPI_Intercomm_create", r % 2, 2, r < 2 ? m : mm, 4, true);
        for (int q = 0; q < 2; q++) {
            call a = {id, (uint64_t)q, r < 2 ? 8 : 16, TFT_COLL_ALLGATHER, r % 2, 2, -1, TFT_TAG_NONE,
                      "MPI_Allgather"};
            if (q == 1 && r == 2)
                a.type = TFT_COLL_BCAST, a.name = "MPI_Bcast";
            w_call(w, q, &a, false, sizeof(tft_rec_collective));
            w_call(w, q, &a, true, sizeof(tft_rec_collective));
        }
        CHECK(tft_writer_close(w) == 0);
    }
    int n = analyse(dir, d, 8);
    CHECKF(n == 1, "%d findings", n);
    if (n < 1)
        return;
    CHECK(d[0].kind == DS_TYPE && d[0].coll_seq == 1 && d[0].ranks[0] == 2);
    CHECK(!strcmp(d[0].comm_name, "{0,1|2,3}") && d[0].nmembers == 4);
}

/* Point-to-point at the end of a trace: ranks 0 and 1 each wait for the
 * other (tag 5): two findings, the later one caused by the earlier; ranks
 * 2 and 3 have a send and its receive still in flight: nothing. */
static void test_p2p(desync_finding *d)
{
    char dir[512];
    make_dir(dir, sizeof(dir), "p2p.trace");
    uint64_t world = sid("MPI_COMM_WORLD");
    char p[40];
    snprintf(p, sizeof(p), "%016llx:p2p", (unsigned long long)world);
    uint64_t space = sid(p);
    int32_t m[4] = {0, 1, 2, 3};
    for (int r = 0; r < 4; r++) {
        tft_writer *w = w_open(dir, r, 4);
        w_comm(w, world, "MPI_COMM_WORLD", r, 4, m, 4, false);
        call b = {world, 0, 0, TFT_COLL_BARRIER, r, 4, -1, TFT_TAG_NONE, "MPI_Barrier"};
        w_call(w, 0, &b, false, sizeof(tft_rec_collective));
        w_call(w, 0, &b, true, sizeof(tft_rec_collective));
        call x = {space, 0, 16, TFT_COLL_RECV, r, 4, r ^ 1, 5, "MPI_Recv"};
        if (r == 2)
            x.type = TFT_COLL_SEND, x.root = 3, x.name = "MPI_Ssend";
        if (r == 3)
            x.root = 2, x.name = "MPI_Irecv";
        w_call(w, r == 0 ? 1 : 3, &x, false, sizeof(tft_rec_collective));
        CHECK(tft_writer_close(w) == 0);
    }
    int n = analyse(dir, d, 8);
    CHECKF(n == 2, "%d findings", n);
    if (n < 2)
        return;
    CHECK(d[0].kind == DS_P2P && d[0].ranks[0] == 0 && d[0].peer == 1 && d[0].tag == 5 && d[0].cause == 0);
    CHECK(d[0].comm == world && !strcmp(d[0].comm_name, "{0-3}") && d[0].seq == 1);
    CHECK(d[1].kind == DS_P2P && d[1].ranks[0] == 1 && d[1].peer == 0 && d[1].cause == d[0].id);
    CHECK(strstr(d[0].detail, "rank 0 never completed MPI_Recv from rank 1 (tag 5, 16 x f32)") != NULL);
    CHECK(strstr(d[0].detail, "rank 1 sent it nothing; rank 1 is itself blocked in MPI_Recv from rank 0") != NULL);
    char where[160];
    desync_where(d, n, 1, where, sizeof(where));
    CHECKF(!strcmp(where, "communicator {0-3}, message #0, caused by the p2p above"), "%s", where);
}

/* Rank 0 is blocked in MPI_Ssend to rank 1 (tag 9), which posted no
 * receive. Rank 1 waits in a barrier rank 0 never reaches: the send is the
 * cause. When rank 1 is stuck nowhere (it may have taken the message with
 * MPI_Mrecv, which is not recorded) there is no finding. */
static void test_send(desync_finding *d, bool peer_stuck)
{
    char dir[512];
    make_dir(dir, sizeof(dir), peer_stuck ? "send.trace" : "send-free.trace");
    uint64_t world = sid("MPI_COMM_WORLD");
    char p[40];
    snprintf(p, sizeof(p), "%016llx:p2p", (unsigned long long)world);
    int32_t m[2] = {0, 1};
    for (int r = 0; r < 2; r++) {
        tft_writer *w = w_open(dir, r, 2);
        w_comm(w, world, "MPI_COMM_WORLD", r, 2, m, 2, false);
        if (r == 0) {
            call x = {sid(p), 0, 4, TFT_COLL_SEND, 0, 2, 1, 9, "MPI_Ssend"};
            w_call(w, 0, &x, false, sizeof(tft_rec_collective));
        } else if (peer_stuck) {
            call b = {world, 0, 0, TFT_COLL_BARRIER, 1, 2, -1, TFT_TAG_NONE, "MPI_Barrier"};
            w_call(w, 0, &b, false, sizeof(tft_rec_collective));
        }
        CHECK(tft_writer_close(w) == 0);
    }
    int n = analyse(dir, d, 8);
    if (!peer_stuck) {
        CHECKF(n == 0, "%d findings", n);
        return;
    }
    CHECKF(n == 2, "%d findings", n);
    if (n < 2)
        return;
    CHECK(d[0].kind == DS_P2P && d[0].ranks[0] == 0 && d[0].peer == 1 && d[0].tag == 9);
    CHECK(strstr(d[0].detail, "rank 0 never completed MPI_Ssend to rank 1 (tag 9, 4 x f32)") != NULL);
    CHECK(strstr(d[0].detail, "rank 1 posted no matching receive; rank 1 is itself waiting in MPI_Barrier") != NULL);
    CHECK(strstr(d[0].detail, "; then rank 1 waited in MPI_Barrier") != NULL);
    CHECK(d[1].kind == DS_MISSING && d[1].ranks[0] == 0 && d[1].cause == d[0].id);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tft-test-desync-records-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    desync_finding *d = calloc(8, sizeof(*d));
    CHECK(d != NULL);
    if (d) {
        test_old_format(d);
        test_assembled(d);
        test_inter(d);
        test_p2p(d);
        test_send(d, true);
        test_send(d, false);
    }
    free(d);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_DONE();
}

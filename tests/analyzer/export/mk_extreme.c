/*
 * mk_extreme — writes a 2-rank trace directory (OUT.trace/rank-0000R.tft,
 * no manifest) of well-formed records with extreme or contradictory
 * fields, for t_extreme.sh: what `tfdump --export` must survive and bound.
 *
 *   mk_extreme OUT.trace      (exit 0 when written)
 *
 * Per rank: thread indices beyond the track limit and a thread end never
 * begun; a step end without its begin, a step begun twice, times going
 * backwards and at 0 and UINT64_MAX; collectives exited without entering,
 * entered three times, never exited, with nranks INT32_MAX, a rank
 * outside nranks, a root outside it, exit before enter; kernels on 600
 * streams, ending before they start, on device -7; allocations on device
 * 10000, twice at one address, frees of unknown pointers and of more than
 * is live; loss and grad_norm tensors with NaN and Inf statistics; RSS
 * UINT64_MAX; undefined string ids.
 */
#include "tft_format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int put(tft_writer *w, tft_rec *h, uint16_t kind, size_t len, uint64_t ts, int64_t step, int64_t seq)
{
    h->kind = kind;
    h->len = (uint32_t)len;
    h->ts = ts;
    h->step = step;
    h->seq = seq;
    return tft_writer_append(w, h);
}

static int threads_and_steps(tft_writer *w)
{
    int e = 0;
    uint32_t idx[] = {0, 4000000000u, 7, 0};
    for (int i = 0; i < 4 && !e; i++) {
        tft_rec_thread t = {.event = TFT_THREAD_SWITCH, .tid = 100 + i, .index = idx[i], .name = 0x77ull};
        e = put(w, &t.h, TFT_REC_THREAD, sizeof(t), 1000, TFT_STEP_NONE, TFT_SEQ_NONE);
    }
    tft_rec_thread end = {.event = TFT_THREAD_END, .tid = 9, .index = 12345};
    tft_rec_step s3 = {.phase = TFT_STEP_END}, s1 = {.phase = TFT_STEP_BEGIN};
    if (!e)
        e = put(w, &end.h, TFT_REC_THREAD, sizeof(end), 1000, TFT_STEP_NONE, TFT_SEQ_NONE);
    if (!e)
        e = put(w, &s3.h, TFT_REC_STEP, sizeof(s3), 2000, 3, TFT_SEQ_NONE);
    if (!e)
        e = put(w, &s1.h, TFT_REC_STEP, sizeof(s1), 3000, 1, TFT_SEQ_NONE);
    if (!e)
        e = put(w, &s1.h, TFT_REC_STEP, sizeof(s1), 500, 1, TFT_SEQ_NONE); /* again, earlier */
    uint64_t ts[] = {0, UINT64_MAX, 4000};
    for (int i = 0; i < 3 && !e; i++) {
        uint64_t buf[sizeof(tft_rec_op) / 8];
        tft_rec_op *o = (tft_rec_op *)buf;
        memset(buf, 0, sizeof(buf));
        o->name = i == 2 ? tft_writer_string(w, "matmul", 6) : 0xabcdull;
        o->op_kind = (uint16_t)(i == 1 ? 999 : TFT_OP_GEMM);
        e = put(w, &o->h, TFT_REC_OP, sizeof(buf), ts[i], 1, i);
    }
    return e;
}

static int collectives(tft_writer *w, int rank)
{
    struct { uint32_t flags; int32_t nranks, rank, root; uint16_t type; uint64_t seq, t0, t1; } c[] = {
        {TFT_COLL_FLAG_EXIT, 2, rank, -1, TFT_COLL_ALLREDUCE, 1, 5000, 6000},       /* exit, never entered */
        {TFT_COLL_FLAG_ENTER, 2, rank, -1, TFT_COLL_ALLREDUCE, 2, 7000, 0},         /* entered three times */
        {TFT_COLL_FLAG_ENTER, 2, rank, -1, TFT_COLL_ALLREDUCE, 2, 7100, 0},
        {TFT_COLL_FLAG_ENTER, 2, rank, -1, TFT_COLL_ALLREDUCE, 2, 7200, 0},
        {0, INT32_MAX, 0, -1, TFT_COLL_ALLREDUCE, 3, 8000, 9000},                   /* a huge communicator */
        {0, 2, 5, -1, TFT_COLL_BCAST, 4, 9000, 9500},                                /* rank outside nranks */
        {0, 2, rank, 1000, TFT_COLL_REDUCE, 5, 9600, 9700},                          /* root outside */
        {0, 2, rank, 1, TFT_COLL_GATHER, 6, 9800, 9900},                             /* to the root */
        {0, 2, rank, -1, TFT_COLL_ALLREDUCE, 7, 11000, 10000},                       /* exit before enter */
        {TFT_COLL_FLAG_ENTER, 2, rank, -1, TFT_COLL_BARRIER, 8, 12000, 0},           /* never exited */
    };
    int e = 0;
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]) && !e; i++) {
        tft_rec_collective r;
        memset(&r, 0, sizeof(r));
        r.h.flags = (uint16_t)c[i].flags;
        r.comm = 0xc0ffee;
        r.coll_seq = c[i].seq;
        r.nranks = c[i].nranks, r.rank = c[i].rank, r.root = c[i].root, r.type = c[i].type;
        r.t_enter = c[i].t0, r.t_exit = c[i].t1;
        r.name = i % 2 ? 0x1111ull : tft_writer_string(w, "MPI_Allreduce", 13);
        r.tag = TFT_TAG_NONE;
        e = put(w, &r.h, TFT_REC_COLLECTIVE, sizeof(r), c[i].t1 ? c[i].t1 : c[i].t0, 1, i == 4 ? TFT_SEQ_NONE : 2);
    }
    return e;
}

static int kernels_and_memory(tft_writer *w)
{
    int e = 0;
    for (int i = 0; i < 600 && !e; i++) {
        tft_rec_kernel k;
        memset(&k, 0, sizeof(k));
        k.name = 0x2222ull;
        k.stream = (uint64_t)i;
        k.device = i % 2 ? -7 : 0;
        k.start = 20000 + (uint64_t)i, k.end = i % 3 ? 30000 : 100; /* some end before they start */
        k.kind = (uint32_t)(i % 5 ? TFT_OP_KERNEL : TFT_OP_COPY);
        e = put(w, &k.h, TFT_REC_KERNEL, sizeof(k), 31000, 1, TFT_SEQ_NONE);
    }
    tft_rec_alloc a[] = {{.ptr = 1, .bytes = 100, .device_kind = TFT_DEV_CUDA, .device = 10000},
                         {.ptr = 2, .bytes = UINT64_MAX / 2, .device_kind = TFT_DEV_CPU},
                         {.ptr = 2, .bytes = 10, .device_kind = TFT_DEV_CPU}};
    for (size_t i = 0; i < 3 && !e; i++)
        e = put(w, &a[i].h, TFT_REC_ALLOC, sizeof(a[i]), 32000, 1, TFT_SEQ_NONE);
    tft_rec_free f[] = {{.ptr = 99, .bytes = 0}, {.ptr = 98, .bytes = UINT64_MAX}, {.ptr = 2}};
    for (size_t i = 0; i < 3 && !e; i++)
        e = put(w, &f[i].h, TFT_REC_FREE, sizeof(f[i]), 33000, 1, TFT_SEQ_NONE);
    return e;
}

static int values(tft_writer *w)
{
    int e = 0;
    const char *names[] = {"loss", "grad_norm", "loss"};
    for (int i = 0; i < 3 && !e; i++) {
        tft_rec_tensor t;
        memset(&t, 0, sizeof(t));
        t.name = tft_writer_string(w, names[i], strlen(names[i]));
        t.mode = (uint8_t)(i == 2 ? TFT_STATS_SHAPE : TFT_STATS_FULL);
        t.stats.numel = i ? 5 : 1;
        t.stats.min = NAN, t.stats.mean = INFINITY;
        e = put(w, &t.h, TFT_REC_TENSOR, sizeof(t), 34000, 1, 2);
    }
    tft_rec_process p = {.event = TFT_PROC_RSS, .rss = UINT64_MAX};
    tft_rec_process x = {.event = TFT_PROC_EXIT, .signal = 9};
    tft_rec_checkpoint ck = {.path = 0x3333ull, .action = 77};
    tft_rec_dropped d = {.count = UINT64_MAX, .reason = 99};
    if (!e)
        e = put(w, &p.h, TFT_REC_PROCESS, sizeof(p), 35000, 1, TFT_SEQ_NONE);
    if (!e)
        e = put(w, &ck.h, TFT_REC_CHECKPOINT, sizeof(ck), 36000, 1, TFT_SEQ_NONE);
    if (!e)
        e = put(w, &d.h, TFT_REC_DROPPED, TFT_REC_DROPPED_MIN_BYTES, 37000, TFT_STEP_NONE, TFT_SEQ_NONE);
    if (!e)
        e = put(w, &x.h, TFT_REC_PROCESS, sizeof(x), 38000, TFT_STEP_NONE, TFT_SEQ_NONE);
    return e;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mk_extreme OUT.trace\n");
        return 2;
    }
    if (mkdir(argv[1], 0700) != 0) {
        perror(argv[1]);
        return 1;
    }
    for (int rank = 0; rank < 2; rank++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/rank-%05d.tft", argv[1], rank);
        tft_file_info info = {.rank = rank, .world_size = 2, .pid = 42 + rank, .start_monotonic_ns = 1000,
                              .start_realtime_ns = 5000, .run_id = {7}};
        snprintf(info.host, sizeof(info.host), "%s", rank ? "other" : "host"); /* two hosts */
        tft_writer *w = tft_writer_open(path, &info, &TFT_WRITER_OPTS(.sync = 0));
        if (!w) {
            perror(path);
            return 1;
        }
        int e = threads_and_steps(w);
        if (!e)
            e = collectives(w, rank);
        if (!e)
            e = kernels_and_memory(w);
        if (!e)
            e = values(w);
        int ce = tft_writer_close(w);
        if (e || ce) {
            fprintf(stderr, "mk_extreme: %s: write failed (%d, %d)\n", path, e, ce);
            return 1;
        }
    }
    return 0;
}

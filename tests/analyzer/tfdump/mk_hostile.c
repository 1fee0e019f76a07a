/*
 * mk_hostile — writes small trace directories crafted to make the analyzers
 * use much memory or time (docs/SECURITY.md, "Hostile traces and the
 * analyzers"), with the format library only: every file is valid, closed
 * and checksummed, so the analyses, not the reader, meet them.
 *
 *   mk_hostile coll DIR RANKS COMMS CALLS STRIDE
 *       RANKS rank files of one run; rank 0 enters CALLS collectives on
 *       each of COMMS communicators, sequence numbers STRIDE apart (at most
 *       4095: the largest jump the desync window takes), claiming
 *       communicators of one rank, and never leaves them: nothing is a
 *       finding, every call stays open in its communicator's window, whose
 *       entries hold a slot per rank file. The other ranks record one
 *       process start each.
 *   mk_hostile wide DIR RANKS KIB
 *       RANKS rank files, each one chunk of about KIB KiB of records (RSS
 *       samples: they compress to almost nothing), so a reader of each
 *       holds KIB KiB while it is open.
 *   mk_hostile second DIR
 *       rank-00000.tft and rank-00000-p200.tft: two processes of one run
 *       that both were given rank 0, as tftrace names them (each
 *       records a tensor "loss" in step 0).
 *   mk_hostile params DIR RANKS PARAMS
 *       RANKS ranks recording PARAMS distinct param.* tensors in step 0.
 *   mk_hostile sites DIR SITES STEPS
 *       one rank: SITES allocation sites allocate once in step 0, then
 *       STEPS steps of one record each (every step's end looks at sites).
 *   mk_hostile p2p DIR RANKS OPEN
 *       RANKS ranks, each entering OPEN receives (from rank 0, tag k) that
 *       never complete, plus OPEN sends from rank 0 to rank 1 of other tags.
 *
 * Exit status 0, or 1 with a message.
 */
#include "tft_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const uint8_t RUN_ID[16] = {0x68, 0x6f, 0x73, 0x74, 0x69, 0x6c, 0x65, 0x21,
                                   0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};

static int fail(const char *what, const char *path)
{
    fprintf(stderr, "mk_hostile: %s: %s: %s\n", path, what, strerror(errno));
    return 1;
}

static tft_writer *open_rank(const char *dir, const char *name, int rank, int pid, size_t chunk_bytes)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    tft_file_info fi = {.rank = rank, .world_size = -1, .pid = pid, .start_realtime_ns = 1700000000000000000ull,
                        .start_monotonic_ns = 1000};
    memcpy(fi.run_id, RUN_ID, 16);
    snprintf(fi.host, sizeof(fi.host), "hostile");
    tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = 3, .chunk_bytes = chunk_bytes, .sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &wo);
    if (!w)
        fail("cannot create", path);
    return w;
}

static tft_writer *open_rank_n(const char *dir, int rank, size_t chunk_bytes)
{
    char name[64];
    snprintf(name, sizeof(name), "rank-%05d.tft", rank);
    return open_rank(dir, name, rank, 1000 + rank, chunk_bytes);
}

static void hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t step, int64_t seq, uint64_t ts)
{
    memset(h, 0, len);
    *h = (tft_rec){.kind = kind, .len = len, .ts = ts, .step = step, .seq = seq};
}

static int put_process(tft_writer *w, uint32_t event, uint64_t ts)
{
    tft_rec_process p;
    hdr(&p.h, TFT_REC_PROCESS, sizeof(p), TFT_STEP_NONE, TFT_SEQ_NONE, ts);
    p.event = event;
    p.pid = 1;
    p.rss = 1u << 20;
    return tft_writer_append(w, &p.h);
}

static int put_coll(tft_writer *w, uint64_t name, uint64_t comm, uint64_t q, uint16_t type, int32_t rank,
                    int32_t nranks, int32_t peer, int32_t tag, uint64_t ts)
{
    tft_rec_collective c;
    hdr(&c.h, TFT_REC_COLLECTIVE, sizeof(c), TFT_STEP_NONE, (int64_t)q, ts);
    c.h.flags = TFT_COLL_FLAG_ENTER;
    c.comm = comm;
    c.coll_seq = q;
    c.count = 1024;
    c.t_enter = ts;
    c.name = name;
    c.type = type;
    c.dtype = TFT_F32;
    c.redop = type == TFT_COLL_ALLREDUCE ? TFT_REDOP_SUM : TFT_REDOP_NONE;
    c.root = peer;
    c.rank = rank;
    c.nranks = nranks;
    c.tag = tag;
    return tft_writer_append(w, &c.h);
}

static int close_all(tft_writer *w, const char *dir)
{
    return tft_writer_close(w) ? fail("cannot write", dir) : 0;
}

static int mk_coll(const char *dir, int ranks, int comms, int calls, int stride)
{
    for (int r = 0; r < ranks; r++) {
        tft_writer *w = open_rank_n(dir, r, 0);
        if (!w)
            return 1;
        int e = put_process(w, TFT_PROC_START, 1000);
        uint64_t name = tft_writer_string(w, "MPI_Allreduce", 13);
        for (int k = 0; r == 0 && k < calls && !e; k++)
            for (int c = 0; c < comms && !e; c++)
                e = put_coll(w, name, 0x1000 + (uint64_t)c, (uint64_t)k * (uint64_t)stride, TFT_COLL_ALLREDUCE, 0,
                             1, -1, TFT_TAG_NONE, 2000 + (uint64_t)k);
        if (e || close_all(w, dir))
            return 1;
    }
    return 0;
}

static int mk_wide(const char *dir, int ranks, int kib)
{
    size_t chunk = (size_t)kib << 10;
    for (int r = 0; r < ranks; r++) {
        tft_writer *w = open_rank_n(dir, r, chunk);
        if (!w)
            return 1;
        int e = 0;
        size_t n = chunk / sizeof(tft_rec_process) - 16;
        for (size_t k = 0; k < n && !e; k++)
            e = put_process(w, TFT_PROC_RSS, 1000 + k);
        if (e || close_all(w, dir))
            return 1;
    }
    return 0;
}

static int mk_second(const char *dir)
{
    static const struct { const char *name; int pid; } files[] = {{"rank-00000.tft", 100},
                                                                  {"rank-00000-p200.tft", 200}};
    for (int i = 0; i < 2; i++) {
        tft_writer *w = open_rank(dir, files[i].name, 0, files[i].pid, 0);
        if (!w)
            return 1;
        int e = put_process(w, TFT_PROC_START, 1000);
        tft_rec_tensor t; /* each process recorded something: a trace of headers only is incomplete */
        hdr(&t.h, TFT_REC_TENSOR, sizeof(t), 0, 0, 1500);
        t.id = 1;
        t.name = tft_writer_string(w, "loss", 4);
        t.mode = TFT_STATS_HEALTH;
        t.stats.numel = 1;
        t.stats.fingerprint = 42;
        e = e ? e : tft_writer_append(w, &t.h);
        tft_rec_process x;
        hdr(&x.h, TFT_REC_PROCESS, sizeof(x), TFT_STEP_NONE, TFT_SEQ_NONE, 2000);
        x.event = TFT_PROC_EXIT;
        x.pid = files[i].pid;
        if (e || tft_writer_append(w, &x.h) || close_all(w, dir))
            return 1;
    }
    return 0;
}

static int mk_params(const char *dir, int ranks, int params)
{
    for (int r = 0; r < ranks; r++) {
        tft_writer *w = open_rank_n(dir, r, 0);
        if (!w)
            return 1;
        int e = 0;
        for (int k = 0; k < params && !e; k++) {
            char nm[48];
            int n = snprintf(nm, sizeof(nm), "param.w%d", k);
            tft_rec_tensor t;
            hdr(&t.h, TFT_REC_TENSOR, sizeof(t), 0, k, 1000 + (uint64_t)k);
            t.id = (uint64_t)k + 1;
            t.name = tft_writer_string(w, nm, (size_t)n);
            t.mode = TFT_STATS_HEALTH;
            t.ndim = 1;
            t.shape[0] = 4;
            t.stats.numel = 4;
            t.stats.fingerprint = (uint64_t)k * 7 + (r == ranks - 1 && k == params - 1); /* the last differs */
            e = tft_writer_append(w, &t.h);
        }
        if (e || close_all(w, dir))
            return 1;
    }
    return 0;
}

static int mk_sites(const char *dir, int sites, int steps)
{
    tft_writer *w = open_rank_n(dir, 0, 0);
    if (!w)
        return 1;
    int e = 0;
    for (int k = 0; k < sites && !e; k++) {
        char nm[32];
        int n = snprintf(nm, sizeof(nm), "site%d", k);
        tft_rec_alloc a;
        hdr(&a.h, TFT_REC_ALLOC, sizeof(a), 0, TFT_SEQ_NONE, 1000 + (uint64_t)k);
        a.ptr = 0x100000 + (uint64_t)k * 64;
        a.bytes = 64;
        a.site = tft_writer_string(w, nm, (size_t)n);
        e = tft_writer_append(w, &a.h);
    }
    for (int k = 1; k <= steps && !e; k++) {
        tft_rec_step st;
        hdr(&st.h, TFT_REC_STEP, sizeof(st), k, TFT_SEQ_NONE, 100000000 + (uint64_t)k);
        st.phase = TFT_STEP_END;
        e = tft_writer_append(w, &st.h);
    }
    return e || close_all(w, dir) ? 1 : 0;
}

static int mk_p2p(const char *dir, int ranks, int open)
{
    for (int r = 0; r < ranks; r++) {
        tft_writer *w = open_rank_n(dir, r, 0);
        if (!w)
            return 1;
        uint64_t recv = tft_writer_string(w, "MPI_Recv", 8), send = tft_writer_string(w, "MPI_Send", 8);
        uint64_t space = tft_string_id("MPI_COMM_WORLD:p2p", 18);
        int e = 0;
        for (int k = 0; k < open && !e; k++) {
            if (r != 0)
                e = put_coll(w, recv, space, (uint64_t)k, TFT_COLL_RECV, r, ranks, 0, k, 1000 + (uint64_t)k);
            else
                e = put_coll(w, send, space, (uint64_t)k, TFT_COLL_SEND, 0, ranks, 1, k + open,
                             1000 + (uint64_t)k);
        }
        if (e || close_all(w, dir))
            return 1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: mk_hostile coll DIR RANKS COMMS CALLS STRIDE | wide DIR RANKS KIB | second DIR |\n"
                    "       params DIR RANKS PARAMS | sites DIR SITES STEPS | p2p DIR RANKS OPEN\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *mode = argv[1], *dir = argv[2];
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return fail("cannot create", dir);
    int a = argc > 3 ? atoi(argv[3]) : 0, b = argc > 4 ? atoi(argv[4]) : 0, c = argc > 5 ? atoi(argv[5]) : 0;
    if (!strcmp(mode, "coll") && argc == 7 && a > 0 && atoi(argv[6]) > 0 && atoi(argv[6]) < 4096)
        return mk_coll(dir, a, b, c, atoi(argv[6]));
    if (!strcmp(mode, "wide") && argc == 5 && a > 0 && b >= 64 && b <= 4096)
        return mk_wide(dir, a, b);
    if (!strcmp(mode, "second") && argc == 3)
        return mk_second(dir);
    if (!strcmp(mode, "params") && argc == 5 && a > 0)
        return mk_params(dir, a, b);
    if (!strcmp(mode, "sites") && argc == 5 && a > 0)
        return mk_sites(dir, a, b);
    if (!strcmp(mode, "p2p") && argc == 5 && a > 1)
        return mk_p2p(dir, a, b);
    return usage();
}

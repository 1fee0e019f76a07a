/*
 * test_diff_single.c — the single-trace analyses of tfdiff: leaks
 * (leak/) and desyncs across ranks (desync/), on rank files and
 * trace directories written here with the writer API, so every expected
 * finding is known exactly.
 */
#define _GNU_SOURCE
#include "core.h"
#include "desync.h"
#include "leak.h"
#include "tft_test.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[256];

/* ---- writing ----------------------------------------------------------- */

static tft_writer *w_open(const char *path, int rank, int world)
{
    tft_file_info fi = {0};
    fi.rank = rank;
    fi.world_size = world;
    fi.pid = 1000 + rank;
    snprintf(fi.host, sizeof(fi.host), "testhost");
    tft_writer_opts o = TFT_WRITER_OPTS(.chunk_bytes = 64 * 1024, .sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &o);
    CHECK(w != NULL);
    return w;
}

static uint64_t ts_now;

static void hdr(tft_rec *h, uint16_t kind, size_t len, int64_t step, int64_t seq)
{
    h->kind = kind;
    h->flags = 0;
    h->len = (uint32_t)len;
    h->ts = ++ts_now;
    h->step = step;
    h->seq = seq;
}

static void w_step(tft_writer *w, int64_t step, int phase)
{
    tft_rec_step r = {0};
    hdr(&r.h, TFT_REC_STEP, sizeof(r), step, TFT_SEQ_NONE);
    r.phase = (uint32_t)phase;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void w_alloc(tft_writer *w, int64_t step, uint64_t ptr, uint64_t bytes, const char *site)
{
    tft_rec_alloc r = {0};
    hdr(&r.h, TFT_REC_ALLOC, sizeof(r), step, TFT_SEQ_NONE);
    r.ptr = ptr;
    r.bytes = bytes;
    r.site = tft_writer_string(w, site, strlen(site));
    r.device = -1;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void w_free(tft_writer *w, int64_t step, uint64_t ptr)
{
    tft_rec_free r = {0};
    hdr(&r.h, TFT_REC_FREE, sizeof(r), step, TFT_SEQ_NONE);
    r.ptr = ptr;
    r.device = -1;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void w_tensor(tft_writer *w, int64_t step, int64_t seq, uint64_t id, const char *name, uint64_t fp)
{
    tft_rec_tensor r = {0};
    hdr(&r.h, TFT_REC_TENSOR, sizeof(r), step, seq);
    r.id = id;
    r.name = tft_writer_string(w, name, strlen(name));
    r.dtype = TFT_F32;
    r.device = -1;
    r.mode = TFT_STATS_HEALTH;
    r.ndim = 1;
    r.shape[0] = 1000;
    r.stats.numel = 1000;
    r.stats.fingerprint = fp;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

typedef struct coll {
    uint64_t comm, coll_seq, count, result, t_enter;
    int type, dtype, redop, root, rank, nranks;
    const char *name;
} coll;

static void w_coll(tft_writer *w, int64_t step, int64_t seq, const coll *c, bool exit_rec)
{
    tft_rec_collective r = {0};
    hdr(&r.h, TFT_REC_COLLECTIVE, sizeof(r), step, seq);
    r.h.flags = exit_rec ? TFT_COLL_FLAG_EXIT : TFT_COLL_FLAG_ENTER;
    r.comm = c->comm;
    r.coll_seq = c->coll_seq;
    r.count = c->count;
    r.t_enter = c->t_enter;
    r.t_exit = exit_rec ? c->t_enter + 1000 : 0;
    r.result = exit_rec ? c->result : 0;
    r.name = tft_writer_string(w, c->name, strlen(c->name));
    r.type = (uint16_t)c->type;
    r.dtype = (uint8_t)c->dtype;
    r.redop = (uint8_t)c->redop;
    r.root = c->root;
    r.rank = c->rank;
    r.nranks = c->nranks;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void make_dir(char *dir, size_t n, const char *name, int world)
{
    snprintf(dir, n, "%s/%s", tmpdir, name);
    CHECK(mkdir(dir, 0755) == 0);
    tft_manifest m = {0};
    snprintf(m.run_id, sizeof(m.run_id), "0123456789abcdef0123456789abcdef");
    snprintf(m.host, sizeof(m.host), "testhost");
    char *argv[] = {"./train"};
    m.argv = argv;
    m.argc = 1;
    m.world_size = world;
    m.complete = 1;
    tft_manifest_rank ranks[8];
    for (int k = 0; k < world && k < 8; k++) {
        ranks[k] = (tft_manifest_rank){.rank = k, .pid = 1000 + k, .exited = 1};
        snprintf(ranks[k].file, sizeof(ranks[k].file), "rank-%05d.tft", k);
    }
    m.ranks = ranks;
    m.nranks = world;
    CHECK(tft_manifest_write(dir, &m) == 0);
}

/* ---- leaks ------------------------------------------------------------- */

#define MIB (1024u * 1024u)

/* Ten steps: params kept from before step 0 (constant), a leak of 1 MiB per
 * step from leak_from, a workspace of many blocks freed every step, a cache
 * that grows in steps 0..5 and then stays flat (only step 0 in short runs),
 * and a stray free. */
static void write_leaky(const char *path, int nsteps, int leak_from)
{
    tft_writer *w = w_open(path, 0, 1);
    if (!w)
        return;
    w_alloc(w, TFT_STEP_NONE, 0x10000000, 16 * MIB, "runtime:params");
    w_free(w, TFT_STEP_NONE, 0xdead0000); /* never allocated: ignored */
    uint64_t leak_ptr = 0x20000000, cache_ptr = 0x30000000;
    for (int s = 0; s < nsteps; s++) {
        w_step(w, s, TFT_STEP_BEGIN);
        for (uint64_t k = 0; k < 3000; k++)
            w_alloc(w, s, 0x40000000 + k * 64, 64, "runtime:workspace");
        if (s >= leak_from) {
            w_alloc(w, s, leak_ptr, MIB, "test:leaky");
            leak_ptr += MIB;
        }
        if (s <= (nsteps >= 10 ? 5 : 0)) {
            w_alloc(w, s, cache_ptr, 4096, "runtime:cache");
            cache_ptr += 4096;
        }
        for (uint64_t k = 0; k < 3000; k++)
            w_free(w, s, 0x40000000 + k * 64);
        w_step(w, s, TFT_STEP_END);
    }
    w_free(w, TFT_STEP_NONE, 0x10000000); /* teardown */
    CHECK(tft_writer_close(w) == 0);
}

static void test_leaks(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/leak.tft", tmpdir);
    write_leaky(path, 10, 3);
    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    if (!r)
        return;
    leak_finding l[8];
    int n = leak_find(r, 0, l, 8);
    CHECKF(n == 1, "%d leaks", n);
    for (int k = 0; k < n; k++)
        printf("leak: rank %d site %s from step %lld, %.0f B/step, %llu B in %llu allocs at end\n", l[k].rank,
               l[k].site, (long long)l[k].from_step, l[k].bytes_per_step,
               (unsigned long long)l[k].live_bytes_at_end, (unsigned long long)l[k].live_allocs_at_end);
    if (n >= 1) {
        CHECK(strcmp(l[0].site, "test:leaky") == 0);
        CHECK(l[0].from_step == 3);
        CHECK(l[0].bytes_per_step > 0.99 * MIB && l[0].bytes_per_step < 1.01 * MIB);
        CHECK(l[0].live_bytes_at_end == 7ull * MIB && l[0].live_allocs_at_end == 7);
        CHECK(l[0].rank == 0);
    }
    /* a second pass over the same reader gives the same answer */
    CHECK(leak_find(r, 0, l, 8) == n);
    CHECK(leak_find(r, 0, l, 0) == 0);
    tft_reader_close(r);

    /* no leak at all: steps before the leak starts */
    snprintf(path, sizeof(path), "%s/noleak.tft", tmpdir);
    write_leaky(path, 10, 100);
    r = tft_reader_open(path, NULL);
    CHECK(r && leak_find(r, 0, l, 8) == 0);
    tft_reader_close(r);

    /* a short run: two steps of growth are enough */
    snprintf(path, sizeof(path), "%s/short.tft", tmpdir);
    write_leaky(path, 4, 2);
    r = tft_reader_open(path, NULL);
    n = r ? leak_find(r, 3, l, 8) : -1;
    CHECKF(n == 1, "%d leaks", n);
    CHECK(n < 1 || (strcmp(l[0].site, "test:leaky") == 0 && l[0].from_step == 2 && l[0].rank == 3));
    tft_reader_close(r);

    /* one step of growth at the very end is not a leak */
    snprintf(path, sizeof(path), "%s/late.tft", tmpdir);
    write_leaky(path, 10, 9);
    r = tft_reader_open(path, NULL);
    CHECK(r && leak_find(r, 0, l, 8) == 0);
    tft_reader_close(r);
}

/* ---- leaks at the end ----------------------------------------------------- */

static void w_exit(tft_writer *w, int code, int sig)
{
    tft_rec_process r = {0};
    hdr(&r.h, TFT_REC_PROCESS, sizeof(r), TFT_STEP_NONE, TFT_SEQ_NONE);
    r.event = TFT_PROC_EXIT;
    r.exit_code = code;
    r.signal = sig;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

enum kept_mode { KEPT_NONE, KEPT_ALL, KEPT_WEIGHTS, KEPT_TEARDOWN, KEPT_BIG };

/* A rank without steps: one 64 MiB arena kept to the end (one big block),
 * then 12 blocks of 4 MiB from test:kept back to back with nothing else
 * recorded in between (kept, or each freed at once), then its exit.
 * KEPT_WEIGHTS: instead, 16 x 4 MiB of test:weights at start, then 2,000
 * tensors of work: kept to the end, but loaded at start. KEPT_TEARDOWN:
 * the 12 blocks kept, then all freed before the exit (as an interpreter
 * frees its objects). KEPT_BIG: 8 MiB blocks, each freed at once. */
static void write_kept(const char *path, int mode, int sig)
{
    tft_writer *w = w_open(path, 0, 1);
    if (!w)
        return;
    w_alloc(w, TFT_STEP_NONE, 0x10000000, 64 * MIB, "test:arena");
    for (uint64_t k = 0; mode == KEPT_WEIGHTS && k < 16; k++)
        w_alloc(w, TFT_STEP_NONE, 0x80000000 + k * 4 * MIB, 4 * MIB, "test:weights");
    for (uint64_t k = 0; mode == KEPT_WEIGHTS && k < 2000; k++)
        w_tensor(w, TFT_STEP_NONE, (int64_t)k, k + 1, "work", k);
    uint64_t sz = (mode == KEPT_BIG ? 8 : 4) * MIB;
    for (uint64_t k = 0; mode != KEPT_WEIGHTS && k < 12; k++) {
        w_alloc(w, TFT_STEP_NONE, 0x20000000 + k * sz, sz, "test:kept");
        if (mode == KEPT_NONE || mode == KEPT_BIG)
            w_free(w, TFT_STEP_NONE, 0x20000000 + k * sz);
    }
    for (uint64_t k = 0; mode == KEPT_TEARDOWN && k < 12; k++)
        w_free(w, TFT_STEP_NONE, 0x20000000 + k * sz);
    w_exit(w, 0, sig);
    CHECK(tft_writer_close(w) == 0);
}

/* Scans path once; n_leaks gets the count of leaks found (exit rule with
 * min_bytes), mem what each site holds. */
static int scan_kept(const char *path, uint64_t min_bytes, leak_finding *l, int max, leak_rank_mem *mem)
{
    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    int n = r ? leak_find_mem(r, 0, min_bytes, l, max, mem) : -1;
    tft_reader_close(r);
    return n;
}

static void test_leaks_at_exit(void)
{
    char bad[512], good[512], weights[512], killed[512];
    snprintf(bad, sizeof(bad), "%s/kept.tft", tmpdir);
    snprintf(good, sizeof(good), "%s/freed.tft", tmpdir);
    snprintf(weights, sizeof(weights), "%s/weights.tft", tmpdir);
    snprintf(killed, sizeof(killed), "%s/killed.tft", tmpdir);
    write_kept(bad, KEPT_ALL, 0);
    write_kept(good, KEPT_NONE, 0);
    write_kept(weights, KEPT_WEIGHTS, 0);
    write_kept(killed, KEPT_ALL, 9);
    leak_finding l[8], gl[8], bl[8];
    leak_site_mem gs[8], bs[8];

    /* growth alone (tfdiff's and the default): a burst is no growth */
    tft_reader *r = tft_reader_open(bad, NULL);
    CHECK(r && leak_find(r, 0, l, 8) == 0);
    tft_reader_close(r);

    /* tfdump --check's rule: test:kept, not the arena (one block) */
    int n = scan_kept(bad, LEAK_EXIT_MIN_BYTES, l, 8, NULL);
    CHECKF(n == 1, "%d leaks", n);
    if (n == 1) {
        CHECK(!strcmp(l[0].site, "test:kept") && l[0].how == LEAK_AT_EXIT && l[0].per_alloc);
        CHECK(l[0].live_bytes_at_end == 48ull * MIB && l[0].live_allocs_at_end == 12 && l[0].iterations == 12);
        CHECK(l[0].bytes_per_step == 4.0 * MIB && l[0].from_alloc == 0 && l[0].min_bytes == LEAK_EXIT_MIN_BYTES);
        CHECK(l[0].first_known && l[0].first_alloc_step == TFT_STEP_NONE && l[0].from_step == TFT_STEP_NONE);
        CHECK(l[0].first_alloc_ns == 1); /* the second record; ts counts records here */
        char what[400];
        leak_describe(&l[0], what, sizeof(what));
        CHECKF(strstr(what, "test:kept: 50331648 bytes in 12 blocks live at the end") != NULL, "%s", what);
    }
    CHECK(scan_kept(bad, 64 * MIB, l, 8, NULL) == 0);      /* under the threshold */
    CHECK(scan_kept(good, LEAK_EXIT_MIN_BYTES, l, 8, NULL) == 0);
    CHECK(scan_kept(weights, LEAK_EXIT_MIN_BYTES, l, 8, NULL) == 0); /* loaded at start, then work */

    /* what each site holds, the largest peak first */
    leak_rank_mem bm = {.sites = bs, .max_sites = 8}, gm = {.sites = gs, .max_sites = 8};
    CHECK(scan_kept(bad, 0, bl, 8, &bm) == 0);
    CHECK(bm.nsites == 2 && bm.exit_known && bm.exit_code == 0 && !bm.exit_signal);
    CHECK(bm.nsites < 1 || (!strcmp(bs[0].site, "test:arena") && bs[0].peak_bytes == 64ull * MIB));
    CHECK(bm.nsites < 2 || (!strcmp(bs[1].site, "test:kept") && bs[1].live_allocs == 12 &&
                            bs[1].max_block == 4 * MIB && bs[1].first_alloc == 0 && bs[1].allocs == 12));
    CHECK(scan_kept(good, 0, gl, 8, &gm) == 0);
    CHECK(gm.nsites == 2 && gs[1].live_bytes == 0 && gs[1].peak_bytes == 4 * MIB);

    /* tfdiff: BAD holds 48 MiB more at the end than GOLDEN, which holds none */
    n = leak_compare(&gm, gl, 0, &bm, bl, 0, 5, l, 8);
    CHECKF(n == 1, "%d leaks", n);
    if (n == 1) {
        CHECK(!strcmp(l[0].site, "test:kept") && l[0].rank == 5 && l[0].how == LEAK_AT_EXIT);
        CHECK(l[0].golden_known && l[0].golden_live_bytes_at_end == 0 && l[0].golden_peak_live_bytes == 4 * MIB);
        CHECK(!l[0].vs_golden_peak && l[0].live_bytes_at_end == 48ull * MIB);
    }
    /* the other way round, and BAD against itself: nothing */
    CHECK(leak_compare(&bm, bl, 0, &gm, gl, 0, 0, l, 8) == 0);
    CHECK(leak_compare(&bm, bl, 0, &bm, bl, 0, 0, l, 8) == 0);

    /* BAD killed: its end against GOLDEN's peak (4 MiB): still a leak;
     * against a GOLDEN that held all 48 MiB at its peak: none */
    leak_site_mem ks[8];
    leak_rank_mem km = {.sites = ks, .max_sites = 8};
    CHECK(scan_kept(killed, 0, bl, 8, &km) == 0 && km.exit_signal == 9);
    n = leak_compare(&gm, gl, 0, &km, bl, 0, 0, l, 8);
    CHECK(n == 1 && l[0].vs_golden_peak && l[0].golden_peak_live_bytes == 4 * MIB);
    CHECK(scan_kept(bad, 0, gl, 8, &gm) == 0);
    CHECK(leak_compare(&gm, gl, 0, &km, bl, 0, 0, l, 8) == 0);

    /* kept during the run, freed at teardown: the peak rule (13 blocks
     * against GOLDEN's 1); bigger blocks freed at once are no leak */
    char td[512], big[512];
    snprintf(td, sizeof(td), "%s/teardown.tft", tmpdir);
    snprintf(big, sizeof(big), "%s/big.tft", tmpdir);
    write_kept(td, KEPT_TEARDOWN, 0);
    write_kept(big, KEPT_BIG, 0);
    CHECK(scan_kept(good, 0, gl, 8, &gm) == 0);
    CHECK(scan_kept(td, 0, bl, 8, &km) == 0 && km.sites[1].live_bytes == 0 && km.sites[1].peak_allocs == 12);
    CHECK(km.sites[1].one_thread); /* no THREAD records: one thread */
    n = leak_compare(&gm, gl, 0, &km, bl, 0, 0, l, 8);
    CHECKF(n == 1, "%d leaks", n);
    if (n == 1) {
        CHECK(!strcmp(l[0].site, "test:kept") && l[0].how == LEAK_PEAK && l[0].vs_golden_peak);
        CHECK(l[0].peak_live_bytes == 48ull * MIB && l[0].peak_live_allocs == 12 && l[0].live_bytes_at_end == 0);
        CHECK(l[0].golden_peak_live_bytes == 4 * MIB && l[0].golden_peak_live_allocs == 1 && !l[0].first_known);
        char what[400];
        leak_describe(&l[0], what, sizeof(what));
        CHECKF(strstr(what, "test:kept: held up to 50331648 bytes in 12 blocks at once") != NULL, "%s", what);
    }
    CHECK(scan_kept(big, 0, bl, 8, &km) == 0 && km.sites[1].peak_bytes == 8 * MIB);
    CHECK(leak_compare(&gm, gl, 0, &km, bl, 0, 0, l, 8) == 0);

    /* a short caller array: the largest peaks are kept, nsites counts all */
    leak_site_mem one[1];
    leak_rank_mem om = {.sites = one, .max_sites = 1};
    CHECK(scan_kept(bad, 0, bl, 8, &om) == 0 && om.nsites == 2 && !strcmp(one[0].site, "test:arena"));

    char sb[48];
    CHECK(!strcmp(core_step_text(TFT_STEP_NONE, sb, sizeof(sb)), "no step"));
    CHECK(!strcmp(core_step_text(CORE_STEPLESS_STEP(4096 * 3 + 5), sb, sizeof(sb)), "no step (window 3)"));
    CHECK(!strcmp(core_step_text(7, sb, sizeof(sb)), "step 7"));
}

/* ---- desyncs ------------------------------------------------------------ */

enum scenario { SC_CONSISTENT, SC_MISSING, SC_COUNT, SC_VALUES, SC_PARAMS, SC_REDOP, SC_STRAGGLER, SC_DAMAGED };

#define WORLD 0x1111u
#define META 0x2222u
#define NSTEPS 12

/* Per step and rank: a meta all-reduce (1 x f64), the gradient all-reduce
 * on the world communicator with a result tensor, then param.wte and
 * param.wpe after the update; `sc` breaks one thing on rank `bad`. */
static void write_rank(const char *dir, int rank, int world, int sc, int bad)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/rank-%05d.tft", dir, rank);
    tft_writer *w = w_open(path, rank, world);
    if (!w)
        return;
    uint64_t tid = 1;
    for (int s = 0; s < NSTEPS; s++) {
        int64_t seq = s * 10;
        uint64_t t0 = 1000000000ull + (uint64_t)s * 10000000ull + (uint64_t)rank * 1000;
        w_step(w, s, TFT_STEP_BEGIN);
        coll meta = {META, (uint64_t)s, 1, 0, t0, TFT_COLL_ALLREDUCE, TFT_F64, TFT_REDOP_SUM, -1, rank, world,
                     "MPI_Allreduce"};
        if (sc == SC_MISSING && rank == bad && s == 6) {
            w_coll(w, s, seq, &meta, false); /* stuck: the others hang in step 5 */
            break;
        }
        w_coll(w, s, seq, &meta, false);
        w_tensor(w, s, seq, tid, "MPI_Allreduce", 0x5000 + (uint64_t)s);
        meta.result = tid++;
        w_coll(w, s, seq, &meta, true);
        coll grad = {WORLD, (uint64_t)s, 21568, 0, t0 + 5000, TFT_COLL_ALLREDUCE, TFT_F32, TFT_REDOP_AVG, -1, rank,
                     world, "MPI_Allreduce"};
        if (sc == SC_COUNT && rank == bad && s == 3)
            grad.count = 21567;
        if (sc == SC_REDOP && rank == bad && s == 2)
            grad.redop = TFT_REDOP_SUM;
        if (sc == SC_STRAGGLER && rank == bad && s == 10)
            grad.t_enter += 2000000000ull; /* 2 s late; the usual spread is 1 us */
        if (sc == SC_MISSING && s == 5) {
            if (rank == bad)
                continue; /* skips the all-reduce ... */
            w_coll(w, s, seq + 1, &grad, false); /* ... so the others never leave it */
            break;
        }
        if (sc == SC_DAMAGED && s == 3) { /* damaged records: an absurd coll_seq on a comm of its own */
            coll junk = grad;
            junk.comm = 0x77;
            junk.coll_seq = UINT64_MAX;
            w_coll(w, s, seq + 1, &junk, false);
            w_coll(w, s, seq + 1, &junk, true);
        }
        w_coll(w, s, seq + 1, &grad, false);
        w_tensor(w, s, seq + 1, tid, "MPI_Allreduce",
                 0x7000 + (uint64_t)s + (sc == SC_VALUES && rank == bad && s >= 4 ? 0x100 : 0));
        grad.result = tid++;
        w_coll(w, s, seq + 1, &grad, true);
        bool diverged = sc == SC_PARAMS && rank == bad;
        /* the all-reduced gradients agree on every rank (what tells replicas
         * whose parameters were never broadcast from tensor-parallel shards) */
        w_tensor(w, s, seq + 2, tid++, "grad.wte", 0xb000 + (uint64_t)s);
        w_tensor(w, s, seq + 2, tid++, "param.wte", 0x9000 + (uint64_t)s + (diverged ? 0x100 : 0));
        w_tensor(w, s, seq + 3, tid++, "param.wpe", 0xa000 + (uint64_t)s);
        w_step(w, s, TFT_STEP_END);
    }
    CHECK(tft_writer_close(w) == 0);
}

static int run_desync(const char *name, int world, int sc, int bad, desync_finding *d, int max)
{
    char dir[512];
    make_dir(dir, sizeof(dir), name, world);
    for (int k = 0; k < world; k++)
        write_rank(dir, k, world, sc, bad);
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t != NULL);
    if (!t)
        return -1;
    CHECK(tft_trace_nranks(t) == world);
    int n = desync_find(t, d, max);
    for (int k = 0; k < n; k++) {
        printf("%s: %s comm %llx coll_seq %llu step %lld ranks", name, desync_kind_name(d[k].kind),
               (unsigned long long)d[k].comm, (unsigned long long)d[k].coll_seq, (long long)d[k].step);
        for (int j = 0; j < d[k].nranks; j++)
            printf(" %d", d[k].ranks[j]);
        printf(": %s\n", d[k].detail);
    }
    tft_trace_close(t);
    return n;
}

static void test_desyncs(void)
{
    desync_finding d[8];
    int n = run_desync("consistent.trace", 2, SC_CONSISTENT, -1, d, 8);
    CHECKF(n == 0, "%d findings", n);
    n = run_desync("consistent3.trace", 3, SC_CONSISTENT, -1, d, 8);
    CHECKF(n == 0, "%d findings", n);

    /* rank 1 skips the gradient all-reduce of step 5 (coll_seq 5); rank 0
     * hangs in it. Rank 1's wait in the next meta all-reduce is an echo. */
    n = run_desync("missing.trace", 2, SC_MISSING, 1, d, 8);
    CHECKF(n == 1, "%d findings", n);
    if (n >= 1) {
        CHECK(d[0].kind == DS_MISSING && d[0].comm == WORLD && d[0].coll_seq == 5 && d[0].step == 5);
        CHECK(d[0].nranks == 1 && d[0].ranks[0] == 1);
        CHECK(strstr(d[0].detail, "rank 0 entered") && strstr(d[0].detail, "never left"));
    }
    n = run_desync("missing3.trace", 3, SC_MISSING, 2, d, 8);
    CHECKF(n == 1, "%d findings", n);
    CHECK(n < 1 || (d[0].kind == DS_MISSING && d[0].nranks == 1 && d[0].ranks[0] == 2 && d[0].step == 5));

    n = run_desync("count.trace", 2, SC_COUNT, 1, d, 8);
    CHECKF(n == 1, "%d findings", n);
    CHECK(n < 1 || (d[0].kind == DS_COUNT && d[0].comm == WORLD && d[0].coll_seq == 3 && d[0].step == 3 &&
                    d[0].nranks == 1 && d[0].ranks[0] == 1 && strstr(d[0].detail, "21567")));
    /* three ranks: the minority is at fault, even when it is not rank 0's peer */
    n = run_desync("count3.trace", 3, SC_COUNT, 0, d, 8);
    CHECKF(n == 1, "%d findings", n);
    CHECK(n < 1 || (d[0].kind == DS_COUNT && d[0].nranks == 1 && d[0].ranks[0] == 0 &&
                    strstr(d[0].detail, "rank 1 count 21568, rank 0 count 21567")));

    n = run_desync("redop.trace", 2, SC_REDOP, 1, d, 8);
    CHECK(n == 1 && d[0].kind == DS_OP && d[0].coll_seq == 2 && d[0].ranks[0] == 1);

    /* all-reduce results that differ from coll_seq 4 on: the first is reported */
    n = run_desync("values.trace", 2, SC_VALUES, 1, d, 8);
    CHECKF(n == 1, "%d findings", n);
    CHECK(n < 1 || (d[0].kind == DS_VALUES && d[0].comm == WORLD && d[0].coll_seq == 4 && d[0].step == 4 &&
                    d[0].nranks == 1 && d[0].ranks[0] == 1));

    /* replicated parameters that differ from step 0 while their gradients
     * agree (dp-nosync) */
    n = run_desync("params.trace", 2, SC_PARAMS, 1, d, 8);
    CHECKF(n == 1, "%d findings", n);
    CHECK(n < 1 || (d[0].kind == DS_VALUES && d[0].comm == 0 && d[0].coll_seq == 0 && d[0].step == 0 &&
                    d[0].nranks == 1 && d[0].ranks[0] == 1 && strstr(d[0].detail, "param.wte")));

    /* one rank 2 s late to the gradient all-reduce of step 10 */
    n = run_desync("straggler.trace", 3, SC_STRAGGLER, 1, d, 8);
    CHECKF(n == 1, "%d findings", n);
    CHECK(n < 1 || (d[0].kind == DS_STRAGGLER && d[0].comm == WORLD && d[0].coll_seq == 10 && d[0].step == 10 &&
                    d[0].nranks == 1 && d[0].ranks[0] == 1));

    /* a collective record with a coll_seq no recorder writes (damage):
     * ignored, not a crash (the window arithmetic once overflowed) */
    n = run_desync("damaged.trace", 2, SC_DAMAGED, -1, d, 8);
    CHECKF(n == 0, "%d findings", n);

    /* max bounds the output */
    n = run_desync("params0.trace", 2, SC_PARAMS, 1, d, 0);
    CHECK(n == 0);

    CHECK(strcmp(desync_kind_name(DS_MISSING), "missing") == 0);
    CHECK(strcmp(desync_kind_name(DS_STRAGGLER), "straggler") == 0);
    CHECK(strcmp(desync_kind_name(99), "?") == 0);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tft-test-diff-single-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_leaks();
    test_leaks_at_exit();
    test_desyncs();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_DONE();
}

/*
 * test_diff_threads.c — compare_rank on ranks that record from several threads
 * (format 1.2 THREAD and SYNC records; analyzer/compare/compare_stash.c,
 * compare_threads.c).
 *
 * A toy trainer: a main thread marks steps and records "loss"; W worker
 * threads each record x -> h -> y per step (names "w<i>.x", ... or, with
 * same_names, "x", "h", "y" in every worker, as replicas of one model do).
 * The rank file is written the way the collector writes one: in passes, a
 * random run of each thread's pending records in turn (a THREAD switch
 * when the thread changes), a SYNC watermark after each pass; so records
 * of step S of a lagging worker come after step S+1 of others. Seq numbers
 * follow a random program order across threads. Two seeds give two
 * interleavings of the same program: they must match; a planted change in
 * one worker must be found at its step and name; an extra tensor in one
 * worker is one insertion. Everything is deterministic (seeded).
 */
#include "core.h"
#include "compare.h"
#include "tft_format.h"
#include "tft_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

enum { MAXT = 9, MAXREC = 4096 };

typedef struct spec {
    int workers, steps;
    bool same_names;
    bool stepless;          /* no steps at all: windows of ops */
    bool no_sync;           /* no SYNC records (completion by threads passing) */
    bool end_threads;       /* workers end (THREAD end) after the last step */
    int plant_w, plant_s;   /* worker/step whose x changes (-1 none) */
    int extra_w, extra_s;   /* worker/step that records an extra tensor (-1 none) */
    unsigned seed;
} spec;

/* One record to write, in its thread's order. */
typedef struct item {
    int kind;               /* 0 op+tensor, 1 step begin, 2 step end */
    int64_t step;
    char name[32];
    double v;
    int64_t seq;
    uint64_t in;            /* input tensor id (0 none) */
    uint64_t id;
} item;

typedef struct thr {
    item it[MAXREC];
    int n, done;
} thr;

static thr th[MAXT];

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static tft_stats stats_of(double v)
{
    tft_stats s = {0};
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    s.numel = 4;
    s.fingerprint = (bits ^ 0x9e3779b97f4a7c15ull) * 31u;
    s.min = s.max = s.mean = s.absmax = fabs(v) == v ? v : v;
    s.l1 = fabs(v) * 4;
    s.l2 = fabs(v) * 2;
    s.absmax = fabs(v);
    return s;
}

static void push(int t, int kind, int64_t step, const char *name, double v)
{
    item *x = &th[t].it[th[t].n++];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->step = step;
    x->v = v;
    if (name)
        snprintf(x->name, sizeof x->name, "%s", name);
}

/* The program: per step, main begins, workers record, main records loss and ends. */
static void build(const spec *sp)
{
    memset(th, 0, sizeof th);
    for (int s = 0; s < sp->steps; s++) {
        push(0, 1, s, NULL, 0);
        for (int w = 1; w <= sp->workers; w++) {
            char nm[32];
            double base = 10.0 * w + s;
            if (w == sp->plant_w && s == sp->plant_s)
                base += 0.5;
            snprintf(nm, sizeof nm, sp->same_names ? "x" : "w%d.x", w);
            push(w, 0, s, nm, base);
            snprintf(nm, sizeof nm, sp->same_names ? "h" : "w%d.h", w);
            push(w, 0, s, nm, base * 2);
            if (w == sp->extra_w && s == sp->extra_s) {
                snprintf(nm, sizeof nm, sp->same_names ? "extra" : "w%d.extra", w);
                push(w, 0, s, nm, 7);
            }
            snprintf(nm, sizeof nm, sp->same_names ? "y" : "w%d.y", w);
            push(w, 0, s, nm, base * 2 + 1);
        }
        push(0, 0, s, "loss", (double)s);
        push(0, 2, s, NULL, 0);
    }
}

/* Seqs in a random program order: within a step, main's begin first and
 * loss last, the workers' ops interleaved at random. Ids follow seqs;
 * each worker's h and y take the previous tensor as input. */
static void number(const spec *sp, unsigned *seed)
{
    int64_t seq = 0;
    int pos[MAXT] = {0};
    for (int s = 0; s < sp->steps; s++) {
        while (pos[0] < th[0].n && th[0].it[pos[0]].step == s && th[0].it[pos[0]].kind != 0)
            pos[0]++;
        for (;;) {
            int ready[MAXT], nr = 0;
            for (int w = 1; w <= sp->workers; w++)
                if (pos[w] < th[w].n && th[w].it[pos[w]].step == s)
                    ready[nr++] = w;
            if (!nr)
                break;
            int w = ready[rnd(seed) % (unsigned)nr];
            item *x = &th[w].it[pos[w]];
            x->seq = seq;
            x->id = (uint64_t)seq + 1;
            if (pos[w] > 0 && th[w].it[pos[w] - 1].step == s && strstr(x->name, "x") == NULL)
                x->in = th[w].it[pos[w] - 1].id;
            seq++;
            pos[w]++;
        }
        while (pos[0] < th[0].n && th[0].it[pos[0]].step == s) {
            item *x = &th[0].it[pos[0]++];
            if (x->kind == 0) {
                x->seq = seq;
                x->id = (uint64_t)++seq;
            }
        }
    }
}

static void w_rec(tft_writer *w, tft_rec *h)
{
    CHECK(tft_writer_append(w, h) == 0);
}

static void write_item(tft_writer *w, const item *x, const spec *sp)
{
    int64_t step = sp->stepless ? TFT_STEP_NONE : x->step;
    if (x->kind != 0) {
        if (sp->stepless)
            return;
        tft_rec_step r = {.h = {.kind = TFT_REC_STEP, .len = sizeof r, .step = step, .seq = TFT_SEQ_NONE},
                          .phase = x->kind == 1 ? TFT_STEP_BEGIN : TFT_STEP_END};
        w_rec(w, &r.h);
        return;
    }
    _Alignas(8) unsigned char buf[128];
    memset(buf, 0, sizeof buf);
    tft_rec_op *op = (tft_rec_op *)buf;
    op->h = (tft_rec){.kind = TFT_REC_OP, .len = (uint32_t)(sizeof *op + (x->in ? 8u : 0u)),
                      .ts = (uint64_t)x->seq, .step = step, .seq = x->seq};
    op->name = tft_writer_string(w, x->name, strlen(x->name));
    op->n_in = x->in ? 1 : 0;
    op->ids[0] = x->in;
    w_rec(w, &op->h);
    tft_rec_tensor t;
    memset(&t, 0, sizeof t);
    t.h = (tft_rec){.kind = TFT_REC_TENSOR, .len = sizeof t, .ts = (uint64_t)x->seq, .step = step, .seq = x->seq};
    t.id = x->id;
    t.name = op->name;
    t.dtype = TFT_F32;
    t.device = -1;
    t.mode = TFT_STATS_FULL;
    t.ndim = 1;
    t.shape[0] = 4;
    t.stats = stats_of(x->v);
    w_rec(w, &t.h);
}

static void w_thread(tft_writer *w, int t, uint32_t ev)
{
    tft_rec_thread r = {.h = {.kind = TFT_REC_THREAD, .len = sizeof r, .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                        .event = ev, .tid = 1000 + t, .index = (uint32_t)t};
    w_rec(w, &r.h);
}

/* Writes the file as a collector would: passes over the threads in a
 * random order, a random run of each one's records per visit. */
static const char *write_trace(const char *label, const spec *sp)
{
    static char paths[4][512];
    static int k;
    char *path = paths[k++ % 4];
    snprintf(path, 512, "%s/%s.tft", dir, label);
    unsigned seed = sp->seed;
    build(sp);
    number(sp, &seed);
    tft_file_info fi = {.rank = 0, .world_size = 1};
    tft_writer_opts wo = TFT_WRITER_OPTS(.chunk_bytes = 65536, .sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &wo);
    CHECK(w != NULL);
    if (!w)
        return path;
    int nt = sp->workers + 1, cur = -1;
    int64_t synced = TFT_STEP_NONE;
    for (;;) {
        int left = 0;
        int order[MAXT];
        for (int t = 0; t < nt; t++)
            order[t] = t;
        for (int t = nt - 1; t > 0; t--) {
            int j = (int)(rnd(&seed) % (unsigned)(t + 1)), tmp = order[t];
            order[t] = order[j];
            order[j] = tmp;
        }
        for (int q = 0; q < nt; q++) {
            int t = order[q];
            int run = (int)(rnd(&seed) % 7);
            for (int r = 0; r < run && th[t].done < th[t].n; r++) {
                if (cur != t) {
                    w_thread(w, t, TFT_THREAD_SWITCH);
                    cur = t;
                }
                write_item(w, &th[t].it[th[t].done++], sp);
            }
            if (sp->end_threads && t > 0 && th[t].done == th[t].n && th[t].n > 0) {
                w_thread(w, t, TFT_THREAD_END);
                th[t].n = -1; /* ended */
                th[t].done = -1;
                cur = -1;
            }
            left += th[t].done < th[t].n;
        }
        /* a truthful watermark: the smallest step still pending */
        int64_t low = INT64_MAX;
        for (int t = 0; t < nt; t++)
            if (th[t].done < th[t].n && th[t].it[th[t].done].step < low)
                low = th[t].it[th[t].done].step;
        if (!sp->no_sync && !sp->stepless && low != INT64_MAX && (synced == TFT_STEP_NONE || low > synced)) {
            tft_rec_sync sy = {.h = {.kind = TFT_REC_SYNC, .len = sizeof sy, .step = low, .seq = TFT_SEQ_NONE}};
            w_rec(w, &sy.h);
            synced = low;
        }
        if (!left)
            break;
    }
    CHECK(tft_writer_close(w) == 0);
    return path;
}

static int run_diff(const char *label, const spec *g, const spec *b, const compare_opts *o, compare_result *out)
{
    char gn[96], bn[96];
    snprintf(gn, sizeof gn, "%s-golden", label);
    snprintf(bn, sizeof bn, "%s-bad", label);
    const char *gp = write_trace(gn, g), *bp = write_trace(bn, b);
    tft_reader *gr = tft_reader_open(gp, NULL), *br = tft_reader_open(bp, NULL);
    CHECK(gr && br);
    int rc = -1;
    if (gr && br)
        rc = compare_rank(gr, br, o, out);
    tft_reader_close(gr);
    tft_reader_close(br);
    CHECKF(rc == 0, "%s: compare_rank rc %d", label, rc);
    return rc;
}

#define SPEC(...) ((spec){.workers = 4, .steps = 6, .plant_w = -1, .plant_s = -1, .extra_w = -1, .extra_s = -1, __VA_ARGS__})

static const compare_opts defaults = COMPARE_OPTS_DEFAULT;

/* Golden vs golden with other interleavings: no divergence, nothing extra. */
static void test_match(spec base, const char *label)
{
    for (unsigned seed = 2; seed < 12; seed++) {
        spec g = base, b = base;
        g.seed = 1;
        b.seed = seed;
        compare_result r;
        if (run_diff(label, &g, &b, &defaults, &r))
            continue;
        int per_step = base.workers * 3 + 1;
        CHECKF(!r.first.found, "%s seed %u: false divergence at step %lld %s (%s)", label, seed,
               (long long)r.first.step, r.first.tensor, compare_kind_name(r.first.kind));
        CHECKF(r.inserted == 0 && r.deleted == 0 && !r.structure[0], "%s seed %u: structure '%s'", label, seed,
               r.structure);
        CHECKF(r.compared == (uint64_t)(per_step * base.steps) && r.identical == r.compared,
               "%s seed %u: compared %llu identical %llu", label, seed, (unsigned long long)r.compared,
               (unsigned long long)r.identical);
    }
}

/* A planted change in one worker: found at its step and name, origin there. */
static void test_plant(spec base, const char *label)
{
    for (unsigned seed = 2; seed < 8; seed++) {
        spec g = base, b = base;
        g.seed = 1;
        b.seed = seed;
        b.plant_w = 3;
        b.plant_s = 2;
        compare_result r;
        if (run_diff(label, &g, &b, &defaults, &r))
            continue;
        const char *want = base.same_names ? "x" : "w3.x";
        int64_t want_step = base.stepless ? r.first.step : 2;
        CHECKF(r.first.found && !strcmp(r.first.tensor, want) && r.first.step == want_step &&
                   r.first.kind == DK_VALUE,
               "%s seed %u: first %s at %lld (%s), want %s at step 2", label, seed, r.first.tensor,
               (long long)r.first.step, compare_kind_name(r.first.kind), want);
        CHECKF(r.origin.found && !strcmp(r.origin.tensor, want), "%s seed %u: origin %s", label, seed,
               r.origin.tensor);
        CHECKF(r.inserted == 0 && r.deleted == 0, "%s seed %u: %llu inserted %llu deleted", label, seed,
               (unsigned long long)r.inserted, (unsigned long long)r.deleted);
        /* x, h, y of that worker differ; everything else is identical */
        int per_step = base.workers * 3 + 1;
        CHECKF(r.compared == (uint64_t)(per_step * base.steps) && r.identical == r.compared - 3,
               "%s seed %u: identical %llu of %llu", label, seed, (unsigned long long)r.identical,
               (unsigned long long)r.compared);
    }
}

/* An extra tensor in one worker: one insertion at that step, nothing else. */
static void test_extra(spec base, const char *label)
{
    spec g = base, b = base;
    g.seed = 1;
    b.seed = 5;
    b.extra_w = 2;
    b.extra_s = 3;
    compare_result r;
    if (run_diff(label, &g, &b, &defaults, &r))
        return;
    const char *want = base.same_names ? "extra" : "w2.extra";
    CHECKF(r.first.found && r.first.kind == DK_EXTRA && !strcmp(r.first.tensor, want) && r.first.step == 3,
           "%s: first %s %s at %lld", label, r.first.tensor, compare_kind_name(r.first.kind), (long long)r.first.step);
    CHECKF(r.inserted == 1 && r.deleted == 0, "%s: %llu inserted %llu deleted", label,
           (unsigned long long)r.inserted, (unsigned long long)r.deleted);
    CHECKF(strstr(r.structure, want) != NULL, "%s: structure '%s'", label, r.structure);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_diff_threads.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_match(SPEC(), "names");
    test_match(SPEC(.same_names = true), "same");
    test_match(SPEC(.no_sync = true), "nosync");
    test_match(SPEC(.end_threads = true, .no_sync = true), "ended");
    test_match(SPEC(.stepless = true), "stepless");
    test_plant(SPEC(), "plant");
    test_plant(SPEC(.same_names = true), "plant-same");
    test_plant(SPEC(.stepless = true), "plant-stepless");
    test_extra(SPEC(), "extra");
    test_extra(SPEC(.same_names = true), "extra-same");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (getenv("TFT_TEST_KEEP"))
        fprintf(stderr, "kept %s\n", dir);
    else if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_DONE();
}

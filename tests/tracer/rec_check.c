/*
 * rec_check.c — reads a trace written by rec_prog under tftrace and checks
 * what a user would rely on:
 *   rec_check threads TRACE N     every tensor present, stats equal to a
 *                                 recomputation on the same bytes, seqs unique
 *   rec_check crash TRACE STEP KIND  tensors of steps 0..STEP present, exit recorded
 *   rec_check sleep TRACE         the tensor before the hang, exit by SIGTERM/SIGKILL
 *   rec_check dropped TRACE [N S] a dropped count recorded; with N and S (rec_prog
 *                                 flood N S): per-kind counts that add up, every
 *                                 tensor and op either recorded or counted as
 *                                 dropped, the drops' steps within 0..S-1
 *   rec_check api TRACE           the records of rec_prog api, field by field
 *   rec_check structs TRACE       the records of rec_prog structs: each caller's
 *                                 struct read as far as its sz, the rest defaulted
 *   rec_check tensor-api TRACE MODE EVERY
 *                                 the records of rec_prog tensor-api recorded
 *                                 with --stats MODE --every EVERY
 *   rec_check names TRACE FILE:NAME=COUNT,... ...
 *                                 exactly these rank files, each holding
 *                                 these tensor names this many times, closed
 */
#include "tft_format.h"
#include "tft_stats.h"
#include "tft_test.h"
#include "rec_data.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct seen {
    int tensors, ops, exits, exit_code, exit_signal;
    uint64_t dropped;
    uint64_t drop_kind[TFT_DROP_KINDS]; /* summed over the DROPPED records */
    int64_t drop_first, drop_last;      /* their step span, -1 none */
    int drop_short;                     /* DROPPED records without kinds and steps */
    int64_t max_step_x;
    unsigned char *seq_seen;
    size_t seq_cap;
    int dup_seq, stats_bad;
    int found_before_sleep;
} seen;

static void check_threads_tensor(tft_reader *r, const tft_rec_tensor *t, seen *s)
{
    const char *name = tft_reader_string(r, t->name);
    int th, i;
    if (!name || sscanf(name, "t%d.%d", &th, &i) != 2)
        return;
    static float buf[4096];
    int64_t n = rec_fill(buf, th, i);
    tft_stats ref;
    memset(&ref, 0, sizeof(ref));
    tft_stats_compute(TFT_F32, buf, (size_t)n, TFT_STATS_FULL, &ref);
    ref.numel = (uint64_t)n;
    if (t->ndim != 1 || t->shape[0] != n || t->mode != TFT_STATS_FULL || memcmp(&ref, &t->stats, sizeof(ref))) {
        if (s->stats_bad++ < 3)
            fprintf(stderr, "%s: stats differ (numel %llu vs %lld, nan %llu vs %llu)\n", name,
                    (unsigned long long)t->stats.numel, (long long)n, (unsigned long long)t->stats.nan,
                    (unsigned long long)ref.nan);
    }
}

static void visit(tft_reader *r, const tft_rec *rec, seen *s, const char *mode)
{
    switch (rec->kind) {
    case TFT_REC_TENSOR: {
        const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
        s->tensors++;
        const char *name = tft_reader_string(r, t->name);
        if (!strcmp(mode, "threads"))
            check_threads_tensor(r, t, s);
        if (name && !strcmp(name, "x") && rec->step > s->max_step_x)
            s->max_step_x = rec->step;
        if (name && !strcmp(name, "before_sleep"))
            s->found_before_sleep = 1;
        break;
    }
    case TFT_REC_OP:
        s->ops++;
        if (rec->seq >= 0 && (size_t)rec->seq < s->seq_cap) {
            s->dup_seq += s->seq_seen[rec->seq];
            s->seq_seen[rec->seq] = 1;
        }
        break;
    case TFT_REC_PROCESS: {
        const tft_rec_process *p = (const tft_rec_process *)rec;
        if (p->event == TFT_PROC_EXIT) {
            s->exits++;
            s->exit_code = p->exit_code;
            s->exit_signal = p->signal;
        }
        break;
    }
    case TFT_REC_DROPPED: {
        const tft_rec_dropped *d = (const tft_rec_dropped *)rec;
        s->dropped += d->count;
        if (rec->len < sizeof(*d)) {
            s->drop_short++;
            break;
        }
        for (int k = 0; k < TFT_DROP_KINDS; k++)
            s->drop_kind[k] += d->by_kind[k];
        if (d->first_step != TFT_STEP_NONE && (s->drop_first < 0 || d->first_step < s->drop_first))
            s->drop_first = d->first_step;
        if (d->last_step != TFT_STEP_NONE && d->last_step > s->drop_last)
            s->drop_last = d->last_step;
        break;
    }
    }
}

/* Counts tensors named name in one rank file; -1 when it cannot be read. */
static int count_named(const char *path, const char *name, int *intact)
{
    tft_reader *r = tft_reader_open(path, NULL);
    if (!r)
        return -1;
    const tft_rec *rec;
    int n = 0;
    while (tft_reader_next(r, &rec) == 1) {
        if (rec->kind != TFT_REC_TENSOR)
            continue;
        const char *s = tft_reader_string(r, ((const tft_rec_tensor *)rec)->name);
        n += s && !strcmp(s, name);
    }
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    *intact = st.integrity == TFT_INTACT;
    tft_reader_close(r);
    return n;
}

static int check_names(const char *dir, int nspec, char **spec)
{
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t && tft_trace_nranks(t) == nspec);
    tft_trace_close(t);
    for (int i = 0; i < nspec; i++) {
        char buf[1024], path[2048];
        snprintf(buf, sizeof(buf), "%s", spec[i]);
        char *colon = strchr(buf, ':');
        if (!colon)
            continue;
        *colon = '\0';
        snprintf(path, sizeof(path), "%s/%s", dir, buf);
        for (char *item = strtok(colon + 1, ","); item; item = strtok(NULL, ",")) {
            char *eq = strchr(item, '=');
            if (!eq)
                continue;
            *eq = '\0';
            int intact = 0, got = count_named(path, item, &intact);
            CHECKF(got == atoi(eq + 1) && intact, "%s: %s x%d, want %s (intact %d)", path, item, got,
                   eq + 1, intact);
        }
    }
    return TEST_DONE();
}

static const char *str(tft_reader *r, uint64_t id)
{
    const char *s = id ? tft_reader_string(r, id) : "";
    return s ? s : "?";
}

/* The records of rec_prog api, in order (process start/exit aside). */
static int check_api(const char *dir)
{
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t && tft_trace_nranks(t) == 1);
    if (!t)
        return TEST_DONE();
    tft_reader *r = tft_trace_reader(t, 0);
    const tft_rec *rec;
    const tft_rec *v[64];
    char *copies[64];
    int n = 0, nthread = 0;
    while (tft_reader_next(r, &rec) == 1 && n < 64) {
        if (rec->kind == TFT_REC_PROCESS || rec->kind == TFT_REC_SYNC || /* SYNC: after collector passes */
            rec->kind == TFT_REC_CLOCK) /* the collector's clock pairs (FORMAT.md 5.17) */
            continue;
        if (rec->kind == TFT_REC_THREAD) { /* one thread: one switch, before its first record */
            const tft_rec_thread *th = (const void *)rec;
            CHECK(n == 0 && th->event == TFT_THREAD_SWITCH && th->index == 0 && th->tid > 0 && th->name);
            nthread++;
            continue;
        }
        tft_thread_info ti;
        tft_reader_thread(r, &ti);
        CHECK(ti.known && ti.index == 0);
        copies[n] = malloc(rec->len);
        memcpy(copies[n], rec, rec->len);
        v[n] = (const tft_rec *)copies[n];
        n++;
    }
    /* step, op a, tensor a, op b, tensor b, op add, tensor sum,
     * 2 x (op, enter, tensor, exit), op bcast, enter, exit, alloc, free, checkpoint, step, exception */
    CHECKF(n == 23, "%d records", n);
    CHECKF(nthread == 1, "%d THREAD records", nthread);
    if (n == 23) {
        const tft_rec_op *opa = (const void *)v[1], *opb = (const void *)v[3], *add = (const void *)v[5];
        const tft_rec_tensor *ta = (const void *)v[2], *tb = (const void *)v[4], *sum = (const void *)v[6];
        CHECK(v[0]->kind == TFT_REC_STEP && v[0]->step == 3);
        CHECK(opa->h.kind == TFT_REC_OP && !strcmp(str(r, opa->name), "a") && !strcmp(str(r, opa->scope), "L0/attn"));
        CHECK(ta->h.seq == opa->h.seq && opa->h.seq == 0 && ta->h.step == 3);
        CHECK(!strcmp(str(r, opb->scope), "L0") && opb->h.seq == 1 && tb->h.seq == 1);
        CHECK(tb->h.flags == (TFT_TENSOR_EVAL | TFT_TENSOR_NO_GRAD) && ta->h.flags == 0 && sum->h.flags == 0);
        CHECK(!strcmp(str(r, add->name), "add") && add->h.seq == 2 && add->n_in == 2);
        CHECK(add->ids[0] == ta->id && add->ids[1] == tb->id && add->scope == 0);
        CHECK(sum->h.seq == 2 && !strcmp(str(r, sum->name), "sum") && sum->stats.max == 4.5);
        for (int k = 0; k < 2; k++) {
            const tft_rec_op *op = (const void *)v[7 + 4 * k];
            const tft_rec_collective *en = (const void *)v[8 + 4 * k], *ex = (const void *)v[10 + 4 * k];
            const tft_rec_tensor *res = (const void *)v[9 + 4 * k];
            CHECK(op->op_kind == TFT_OP_COLLECTIVE && !strcmp(str(r, op->name), "MPI_Allreduce"));
            CHECK(en->h.flags == TFT_COLL_FLAG_ENTER && en->coll_seq == (uint64_t)k && en->comm == 77);
            CHECK(ex->h.flags == TFT_COLL_FLAG_EXIT && ex->coll_seq == (uint64_t)k && ex->result == res->id);
            CHECK(ex->t_enter == en->t_enter && ex->t_exit >= ex->t_enter && en->h.seq == op->h.seq);
            CHECK(ex->count == 4 && ex->redop == TFT_REDOP_SUM && ex->type == TFT_COLL_ALLREDUCE);
        }
        const tft_rec_collective *bc = (const void *)v[17];
        CHECK(bc->comm == 88 && bc->coll_seq == 0 && bc->result == 0 && bc->root == 0);
        const tft_rec_alloc *al = (const void *)v[18];
        CHECK(al->h.kind == TFT_REC_ALLOC && al->ptr == 0x1000 && al->bytes == 4096 &&
              !strcmp(str(r, al->site), "api:site"));
        CHECK(v[19]->kind == TFT_REC_FREE && ((const tft_rec_free *)v[19])->ptr == 0x1000);
        const tft_rec_checkpoint *ck = (const void *)v[20];
        CHECK(ck->h.kind == TFT_REC_CHECKPOINT && ck->h.step == 3 && ck->action == TFT_CKPT_SAVE);
        CHECK(!strcmp(str(r, ck->path), "/ckpt/step-3") && !strcmp(str(r, ck->recipe), "--resume /ckpt"));
        CHECK(v[21]->kind == TFT_REC_STEP && ((const tft_rec_step *)v[21])->phase == TFT_STEP_END);
        const tft_rec_exception *x = (const void *)v[22];
        CHECK(x->h.kind == TFT_REC_EXCEPTION && !strcmp(str(r, x->type), "RuntimeError") &&
              !strcmp(str(r, x->message), "shapes differ") && !strcmp(str(r, x->where), "model.tok_emb") &&
              !strcmp(str(r, x->frames), "train.py:37 in forward"));
    }
    for (int i = 0; i < n; i++)
        free(copies[i]);
    tft_trace_close(t);
    return TEST_DONE();
}

/* What rec_prog tensor-api records for one call: shape from the call, the
 * statistics it passed trimmed to mode, numel from the shape. */
typedef struct want_tensor {
    const char *name;
    int dtype, device_kind, device, mode, ndim;
    int64_t shape[2];
    int64_t seq;
} want_tensor;

/* rec_prog's given_stats as a record of mode carries them. */
static tft_stats stats_in_mode(int mode, uint64_t numel)
{
    tft_stats s = {.nan = 1, .pinf = 2, .ninf = 3, .zero = 4, .over_fp16 = 5, .over_bf16 = 6,
                   .under_fp16 = 7, .fingerprint = 0x1234abcd5678ef90ull, .min = -1.5, .max = 2.5,
                   .mean = 0.25, .std = 0.5, .l1 = 3, .l2 = 4, .absmax = 2.5};
    if (mode < TFT_STATS_FULL) {
        s.over_fp16 = s.over_bf16 = s.under_fp16 = 0;
        s.mean = s.std = s.l1 = s.l2 = s.absmax = 0;
    }
    if (mode == TFT_STATS_SHAPE)
        memset(&s, 0, sizeof(s));
    s.numel = numel;
    return s;
}

static void check_want_tensor(tft_reader *r, const tft_rec_tensor *t, const want_tensor *w)
{
    uint64_t numel = 1;
    for (int i = 0; i < w->ndim; i++)
        numel *= (uint64_t)w->shape[i];
    tft_stats ref = stats_in_mode(w->mode, numel);
    CHECKF(!strcmp(str(r, t->name), w->name), "tensor %s, want %s", str(r, t->name), w->name);
    CHECKF(t->dtype == w->dtype && t->device_kind == w->device_kind && t->device == w->device,
           "%s: dtype %d device %d:%d", w->name, t->dtype, t->device_kind, t->device);
    CHECKF(t->mode == w->mode && t->ndim == w->ndim && t->h.seq == w->seq, "%s: mode %d ndim %d seq %lld", w->name,
           t->mode, t->ndim, (long long)t->h.seq);
    for (int i = 0; i < w->ndim && i < TFT_MAX_NDIM; i++)
        CHECKF(t->shape[i] == w->shape[i], "%s: shape[%d] %lld", w->name, i, (long long)t->shape[i]);
    CHECKF(!memcmp(&t->stats, &ref, sizeof(ref)), "%s: stats differ (numel %llu, mean %g, nan %llu)", w->name,
           (unsigned long long)t->stats.numel, t->stats.mean, (unsigned long long)t->stats.nan);
}

/* --stats's word for a mode; -1 unknown. */
static int mode_word(const char *s)
{
    return !strcmp(s, "shape") ? TFT_STATS_SHAPE : !strcmp(s, "health") ? TFT_STATS_HEALTH
         : !strcmp(s, "full") ? TFT_STATS_FULL : -1;
}

/* The records of rec_prog tensor-api under --stats rec_mode --every every:
 * each tensor as given, trimmed to the lesser of its mode and the step's;
 * the device tensors shape only, their memory never read (it is a page the
 * program may not touch); the refused calls left nothing. */
static int check_tensor_api(const char *dir, int rec_mode, int every)
{
#define MIN_MODE(m) ((m) < rec_mode ? (m) : rec_mode)
    const want_tensor want[] = {
        {"s.full", TFT_F32, TFT_DEV_CUDA, 2, MIN_MODE(TFT_STATS_FULL), 2, {3, 4}, 0},
        {"s.health", TFT_F16, TFT_DEV_CPU, -1, MIN_MODE(TFT_STATS_HEALTH), 1, {5}, 1},
        {"s.shape", TFT_BF16, TFT_DEV_CUDA, 0, TFT_STATS_SHAPE, 0, {0}, 2},
        {"s.inop", TFT_F32, TFT_DEV_CUDA, 7, MIN_MODE(TFT_STATS_FULL), 1, {5}, 3},
        {"d.x", TFT_F16, TFT_DEV_CUDA, 1, TFT_STATS_SHAPE, 2, {2, 3}, 5},
        {"d.empty", TFT_F32, TFT_DEV_CUDA, 0, TFT_STATS_SHAPE, 1, {0}, 6},
        {"s.step1", TFT_F32, TFT_DEV_CUDA, 0, every == 2 ? TFT_STATS_SHAPE : MIN_MODE(TFT_STATS_FULL), 1, {5}, 7},
    };
#undef MIN_MODE
    const int nwant = (int)(sizeof(want) / sizeof(want[0]));
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t && tft_trace_nranks(t) == 1);
    if (!t)
        return TEST_DONE();
    tft_reader *r = tft_trace_reader(t, 0);
    const tft_rec *rec;
    int nt = 0, nops = 0;
    uint64_t inop_id = 0;
    while (tft_reader_next(r, &rec) == 1) {
        if (rec->kind == TFT_REC_TENSOR) {
            const tft_rec_tensor *tr = (const void *)rec;
            CHECKF(nt < nwant, "extra tensor %s", str(r, tr->name));
            if (nt < nwant)
                check_want_tensor(r, tr, &want[nt]);
            if (!strcmp(str(r, tr->name), "s.inop"))
                inop_id = tr->id;
            CHECKF(rec->step == (nt < nwant - 1 ? 0 : 1), "%s: step %lld", str(r, tr->name), (long long)rec->step);
            nt++;
        } else if (rec->kind == TFT_REC_OP) {
            const tft_rec_op *op = (const void *)rec;
            CHECKF(op->h.seq == nops, "op %s seq %lld, want %d", str(r, op->name), (long long)op->h.seq, nops);
            if (!strcmp(str(r, op->name), "op.uses"))
                CHECKF(op->n_in == 1 && op->ids[0] == inop_id && inop_id, "op.uses input %llu, s.inop %llu",
                       op->n_in ? (unsigned long long)op->ids[0] : 0ull, (unsigned long long)inop_id);
            nops++;
        }
    }
    CHECKF(nt == nwant && nops == 8, "%d tensors, %d ops (want %d, 8)", nt, nops, nwant);
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    CHECK(st.integrity == TFT_INTACT);
    tft_trace_close(t);
    return TEST_DONE();
}

/* rec_prog structs: the sends of an older, a current and a newer caller
 * (tags none, 5, 6: the older struct has no tag), each an ENTER and an
 * EXIT; the COMM record of an older-sized tft_comm_info; nothing from the
 * refused calls. */
static int check_structs(const char *dir)
{
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t && tft_trace_nranks(t) == 1);
    if (!t)
        return TEST_DONE();
    tft_reader *r = tft_trace_reader(t, 0);
    const int32_t want_tag[3] = {TFT_TAG_NONE, 5, 6};
    const tft_rec *rec;
    int nenter = 0, nexit = 0, ncomm = 0;
    while (tft_reader_next(r, &rec) == 1) {
        if (rec->kind == TFT_REC_COLLECTIVE) {
            const tft_rec_collective *c = (const void *)rec;
            int *n = c->h.flags == TFT_COLL_FLAG_ENTER ? &nenter : &nexit;
            CHECKF(*n < 3, "more than 3 collective records of flags %u", c->h.flags);
            if (*n < 3) {
                CHECKF(tft_rec_coll_tag(c) == want_tag[*n], "call %d: tag %d, want %d", *n, tft_rec_coll_tag(c),
                       want_tag[*n]);
                CHECKF(c->comm == 5 && c->coll_seq == (uint64_t)*n && c->type == TFT_COLL_SEND && c->root == 1 &&
                       c->count == 4 && c->nranks == 2 && !strcmp(str(r, c->name), "send"),
                       "call %d: comm %llu seq %llu type %u root %d", *n, (unsigned long long)c->comm,
                       (unsigned long long)c->coll_seq, c->type, c->root);
            }
            (*n)++;
        } else if (rec->kind == TFT_REC_COMM) {
            const tft_rec_comm *c = (const void *)rec;
            CHECK(c->comm == 9 && c->parent == 5 && c->rank == 1 && c->size == 2 && !strcmp(str(r, c->name), "split"));
            CHECK(c->n_members == 2 && c->members[0] == 3 && c->members[1] == 1 && c->h.flags == 0);
            ncomm++;
        }
    }
    CHECKF(nenter == 3 && nexit == 3 && ncomm == 1, "%d enters, %d exits, %d COMM records", nenter, nexit, ncomm);
    tft_trace_close(t);
    return TEST_DONE();
}

/* Every rank file's header run id equals the manifest's. */
static int check_runid(const char *dir)
{
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t != NULL);
    const tft_manifest *m = t ? tft_trace_manifest(t) : NULL;
    CHECK(m != NULL && strlen(m->run_id) == 32);
    for (int i = 0; m && i < tft_trace_nranks(t); i++) {
        char hex[33];
        const uint8_t *id = tft_reader_info(tft_trace_reader(t, i))->run_id;
        for (int k = 0; k < 16; k++)
            snprintf(hex + 2 * k, 3, "%02x", id[k]);
        CHECKF(!strcmp(hex, m->run_id), "rank file %d run id %s, manifest %s", i, hex, m->run_id);
    }
    tft_trace_close(t);
    return TEST_DONE();
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "runid"))
        return check_runid(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "api"))
        return check_api(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "structs"))
        return check_structs(argv[2]);
    if (argc >= 5 && !strcmp(argv[1], "tensor-api"))
        return check_tensor_api(argv[2], mode_word(argv[3]), atoi(argv[4]));
    if (argc >= 3 && !strcmp(argv[1], "names"))
        return check_names(argv[2], argc - 3, argv + 3);
    if (argc < 3) {
        fprintf(stderr, "usage: rec_check MODE TRACE [ARGS]\n");
        return 2;
    }
    const char *mode = argv[1];
    tft_trace *t = tft_trace_open(argv[2], NULL);
    CHECK(t != NULL);
    if (!t)
        return TEST_DONE();
    CHECK(tft_trace_nranks(t) == 1);
    seen s = {0};
    s.max_step_x = -1;
    s.drop_first = s.drop_last = -1;
    s.seq_cap = 1 << 20;
    s.seq_seen = calloc(s.seq_cap, 1);
    tft_reader *r = tft_trace_reader(t, 0);
    const tft_rec *rec;
    while (tft_reader_next(r, &rec) == 1)
        visit(r, rec, &s, mode);
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    CHECKF(st.integrity == TFT_INTACT, "integrity %d: %s", st.integrity, st.first_problem);
    if (!strcmp(mode, "threads")) {
        int n = atoi(argv[3]);
        CHECKF(s.tensors == n * 100, "tensors %d", s.tensors);
        CHECK(s.ops == n * 100);
        CHECK(s.dup_seq == 0);
        CHECK(s.stats_bad == 0);
        CHECK(s.exits == 1 && s.exit_code == 0 && s.exit_signal == 0);
    } else if (!strcmp(mode, "crash")) {
        int at = atoi(argv[3]);
        const char *kind = argv[4];
        CHECKF(s.max_step_x == at, "last step recorded %lld, crash at %d", (long long)s.max_step_x, at);
        CHECK(s.tensors == at + 1);
        int want_sig = !strcmp(kind, "segv") ? SIGSEGV : !strcmp(kind, "abort") ? SIGABRT
                     : !strcmp(kind, "kill") ? SIGKILL : 0;
        CHECKF(s.exits >= 1 && s.exit_signal == want_sig, "exits %d signal %d want %d", s.exits,
               s.exit_signal, want_sig);
        if (!want_sig)
            CHECK(s.exit_code == 3);
    } else if (!strcmp(mode, "sleep")) {
        CHECK(s.found_before_sleep);
        CHECKF(s.exits >= 1 && (s.exit_signal == SIGTERM || s.exit_signal == SIGKILL), "signal %d",
               s.exit_signal);
    } else if (!strcmp(mode, "dropped")) {
        CHECKF(s.dropped > 0 && st.dropped == s.dropped, "dropped records %llu, chunks %llu",
               (unsigned long long)s.dropped, (unsigned long long)st.dropped);
        if (argc >= 5) { /* rec_prog flood N S: every tensor and op recorded or counted lost, in its step */
            long n = atol(argv[3]), steps = atol(argv[4]);
            uint64_t kinds = 0;
            for (int k = 0; k < TFT_DROP_KINDS; k++)
                kinds += s.drop_kind[k];
            CHECK(s.drop_short == 0);
            CHECKF(kinds == s.dropped, "kinds sum to %llu of %llu dropped", (unsigned long long)kinds,
                   (unsigned long long)s.dropped);
            CHECKF((uint64_t)s.tensors + s.drop_kind[TFT_REC_TENSOR] == (uint64_t)n,
                   "tensors: %d recorded + %llu dropped, want %ld", s.tensors,
                   (unsigned long long)s.drop_kind[TFT_REC_TENSOR], n);
            CHECKF((uint64_t)s.ops + s.drop_kind[TFT_REC_OP] == (uint64_t)n, "ops: %d recorded + %llu dropped",
                   s.ops, (unsigned long long)s.drop_kind[TFT_REC_OP]);
            CHECKF(s.drop_first >= 0 && s.drop_first <= s.drop_last && s.drop_last < steps,
                   "drops in steps %lld..%lld of 0..%ld", (long long)s.drop_first, (long long)s.drop_last, steps - 1);
        }
    }
    free(s.seq_seen);
    tft_trace_close(t);
    return TEST_DONE();
}

/*
 * export_walk.c — the walk of `tfdump --export`: rank files, one after the
 * other, into the tracks, slices, instants and counters of
 * export_internal.h, handed to one emitter (Chrome JSON or Perfetto).
 *
 * Nesting. Viewers nest slices of one track by time, so the walker keeps
 * every track's slices strictly nested or disjoint: a child starts at least
 * 1 ns after its parent and its parent ends at least 1 ns after it; a slice
 * starts at least 1 ns after the track's previous boundary (op, step or
 * collective end). The shifts are nanoseconds against the microseconds
 * that records are apart.
 *
 * Memory per rank: the thread and stream tables (bounded), the calls in
 * flight (EXP_OPEN_MAX), the live allocations (EXP_LIVE_MAX) and the
 * reader's chunk; nothing grows with the number of steps. One rank file is
 * open at a time (the trace is opened lazily).
 */
#include "core_clock.h"
#include "export_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One recording thread's track and what is open on it. */
typedef struct export_thread {
    bool declared;
    export_track track;
    bool have_mark;
    uint64_t mark;        /* the track's last boundary (export ns) */
    bool op;              /* an op pending: its end is its last record so far */
    int64_t op_seq, op_step;
    uint64_t op_name, op_scope;
    int op_kind;
    uint64_t op_start, op_end;
    bool step_open;
    int64_t step;
    uint64_t step_ts;
    int32_t tid;
    uint64_t tname;       /* string id of the thread's name, 0 none */
} export_thread;

typedef struct export_stream {
    int32_t device;
    uint64_t stream;
    export_track track;
    uint64_t mark;
} export_stream;

/* A collective entered and not (yet) exited. */
typedef struct export_call {
    uint64_t comm, coll_seq, name, count;
    uint64_t t_enter;     /* export ns */
    int64_t step, seq;
    int thread;           /* slot */
    int type, dtype, redop;
    int32_t root, rank, nranks;
} export_call;

typedef struct export_live {
    uint64_t ptr;
    uint64_t bytes;
    int slot;             /* live-bytes counter */
} export_live;

typedef struct export_rank {
    const export_ops *ops;
    export_sink *sink;
    tft_reader *r;
    int rank;
    export_process proc;
    char pname[256];      /* "rank 0 (pid 4242 on vm; clock: ...)" */
    int64_t origin;       /* export ns of the file's start_monotonic */
    uint64_t mono0;       /* the file's start_monotonic */
    bool follow;          /* across hosts on each host's realtime: times mapped through track */
    core_clock_pair clk;  /* the pair of the last CLOCK record read (follow) */
    core_clock_track track; /* the file's clock pairs (follow) */
    int64_t rm0;          /* realtime - monotonic of the file's header (origin's) */
    export_thread *threads;  /* EXP_THREADS_MAX */
    int cur;              /* slot of the records' thread */
    export_stream streams[EXP_STREAMS_MAX + 1];
    int nstreams;
    export_track async;      /* collectives that overlap their thread's other slices */
    bool async_declared;
    uint64_t async_mark;
    tft_u64map open;      /* hash(comm, coll_seq) -> export_call */
    tft_u64map live;      /* hash(ptr, device) -> export_live */
    uint64_t live_bytes[EXP_DEVICES_MAX];
    export_track counters[EXP_DEVICES_MAX + 3]; /* live bytes per device, rss, loss, grad_norm */
    bool counter_declared[EXP_DEVICES_MAX + 3];
    uint64_t last_ts;
    int32_t max_members;  /* flows only for communicators no larger than the trace's rank files */
    uint64_t fan[EXP_FANOUT_MAX];
    int err;              /* first emitter error */
} export_rank;

enum { CTR_RSS = EXP_DEVICES_MAX, CTR_LOSS, CTR_GRAD_NORM };

bool export_rank_selected(const dump_opts *o, int rank)
{
    if (o->nranges == 0)
        return o->rank < 0 || rank == o->rank;
    for (int i = 0; i < o->nranges; i++)
        if (rank >= o->ranges[i][0] && rank <= o->ranges[i][1])
            return true;
    return false;
}

/* ---- helpers --------------------------------------------------------------- */

static uint64_t uuid_of(const char *what, int rank, int64_t a, uint64_t b)
{
    char buf[96];
    int n = snprintf(buf, sizeof(buf), "tfdump/%s/%d/%" PRId64 "/%" PRIu64, what, rank, a, b);
    return tft_string_id(buf, (size_t)n);
}

/* Export time of a record time of this rank: ns since the export's origin, 0 at the least. */
static uint64_t xt(const export_rank *k, uint64_t ts)
{
    int64_t d = (int64_t)(ts - k->mono0), out, origin = k->origin;
    const core_clock_pair *p = k->follow ? core_clock_track_at(&k->track, ts) : NULL;
    if (p && __builtin_add_overflow(origin, p->real_minus_mono - k->rm0, &origin))
        return 0;
    if (__builtin_add_overflow(origin, d, &out))
        return d > 0 ? UINT64_MAX / 4 : 0;
    return out < 0 ? 0 : (uint64_t)out;
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void set_err(export_rank *k, int e)
{
    if (e && !k->err)
        k->err = e;
}

static void arg_int(export_arg *a, int *n, const char *key, int64_t v)
{
    a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_INT, .v.i = v};
}
static void arg_uint(export_arg *a, int *n, const char *key, uint64_t v)
{
    a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_UINT, .v.u = v};
}
static void arg_str(export_arg *a, int *n, const char *key, const char *v)
{
    if (v)
        a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_STR, .v.s = v};
}
static void arg_hex(export_arg *a, int *n, const char *key, uint64_t v)
{
    a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_HEX, .v.u = v};
}
static void arg_step(export_arg *a, int *n, int64_t step)
{
    if (step != TFT_STEP_NONE)
        arg_int(a, n, "step", step);
}

/* ---- tracks ------------------------------------------------------------------ */

static export_thread *thread_at(export_rank *k, int slot)
{
    export_thread *th = &k->threads[slot];
    if (th->declared)
        return th;
    th->declared = true;
    export_track *t = &th->track;
    *t = (export_track){.kind = EXP_TRACK_THREAD, .parent = k->proc.uuid, .pid = k->proc.pid,
                     .tid = k->proc.pid * 1000 + slot, .sort = slot};
    t->uuid = uuid_of("thread", k->rank, slot, 0);
    char b[18];
    const char *nm = th->tname ? core_rec_string(k->r, th->tname, b) : NULL;
    if (slot == EXP_THREADS_MAX - 2)
        snprintf(t->name, sizeof(t->name), "threads %d and later", slot);
    else if (th->tid && nm)
        snprintf(t->name, sizeof(t->name), "thread %d (tid %d, %.48s)", slot, (int)th->tid, nm);
    else if (th->tid)
        snprintf(t->name, sizeof(t->name), "thread %d (tid %d)", slot, (int)th->tid);
    else
        snprintf(t->name, sizeof(t->name), "thread %d", slot);
    set_err(k, k->ops->track(k->sink, t));
    return th;
}

static export_thread *cur_thread(export_rank *k) { return thread_at(k, k->cur); }

static const export_track *async_track(export_rank *k)
{
    if (!k->async_declared) {
        k->async_declared = true;
        int slot = EXP_THREADS_MAX - 1;
        k->async = (export_track){.kind = EXP_TRACK_THREAD, .parent = k->proc.uuid, .pid = k->proc.pid,
                               .tid = k->proc.pid * 1000 + slot, .sort = slot,
                               .uuid = uuid_of("async", k->rank, 0, 0)};
        snprintf(k->async.name, sizeof(k->async.name), "collectives overlapping other work");
        set_err(k, k->ops->track(k->sink, &k->async));
    }
    return &k->async;
}

static export_stream *stream_of(export_rank *k, int32_t device, uint64_t stream)
{
    for (int i = 0; i < k->nstreams; i++)
        if (k->streams[i].device == device && k->streams[i].stream == stream)
            return &k->streams[i];
    if (k->nstreams == EXP_STREAMS_MAX + 1)
        return &k->streams[EXP_STREAMS_MAX];
    int i = k->nstreams++;
    export_stream *s = &k->streams[i];
    *s = (export_stream){.device = device, .stream = stream};
    export_track *t = &s->track;
    *t = (export_track){.kind = EXP_TRACK_DEVICE, .parent = k->proc.uuid, .pid = k->proc.pid,
                     .tid = k->proc.pid * 1000 + 500 + i, .sort = 500 + i,
                     .uuid = uuid_of("stream", k->rank, device, stream)};
    if (i == EXP_STREAMS_MAX)
        snprintf(t->name, sizeof(t->name), "device streams %d and later", i);
    else
        snprintf(t->name, sizeof(t->name), "cuda:%d stream %" PRIu64, (int)device, stream);
    set_err(k, k->ops->track(k->sink, t));
    return s;
}

static void counter(export_rank *k, int slot, uint64_t ts, double v)
{
    export_track *t = &k->counters[slot];
    if (!k->counter_declared[slot]) {
        k->counter_declared[slot] = true;
        *t = (export_track){.kind = EXP_TRACK_COUNTER, .parent = k->proc.uuid, .pid = k->proc.pid,
                         .uuid = uuid_of("counter", k->rank, slot, 0), .sort = 1000 + slot};
        const char *group, *series = "value";
        char dev[24];
        if (slot < EXP_DEVICES_MAX) {
            t->bytes = 1;
            group = "live bytes";
            snprintf(dev, sizeof(dev), "cuda:%d", slot - 1);
            series = slot == 0 ? "host" : dev;
        } else if (slot == CTR_RSS) {
            t->bytes = 1;
            group = "rss";
            series = "bytes";
        } else {
            group = slot == CTR_LOSS ? "loss" : "grad_norm";
        }
        snprintf(t->group, sizeof(t->group), "%s", group);
        snprintf(t->series, sizeof(t->series), "%s", series);
        if (slot == CTR_LOSS || slot == CTR_GRAD_NORM)
            snprintf(t->name, sizeof(t->name), "%s", group);
        else
            snprintf(t->name, sizeof(t->name), "%s %s", group, series);
        set_err(k, k->ops->track(k->sink, t));
    }
    set_err(k, k->ops->counter(k->sink, t, ts, v));
}

/* ---- ops and steps ------------------------------------------------------------ */

static void emit_op(export_rank *k, export_thread *th, bool open)
{
    if (!th->op)
        return;
    th->op = false;
    uint64_t end = max64(th->op_end, th->op_start + 1);
    char b1[18], b2[18];
    export_slice s = {.track = &th->track, .ts = th->op_start, .dur = end - th->op_start, .open = open, .cat = "op"};
    s.name = core_rec_string(k->r, th->op_name, b1);
    if (!s.name)
        s.name = "op";
    arg_str(s.args, &s.nargs, "kind", tft_op_kind_name(th->op_kind));
    arg_str(s.args, &s.nargs, "scope", core_rec_string(k->r, th->op_scope, b2));
    arg_step(s.args, &s.nargs, th->op_step);
    arg_int(s.args, &s.nargs, "seq", th->op_seq);
    if (open)
        arg_str(s.args, &s.nargs, "unfinished", "the op was still running when the trace ended");
    set_err(k, k->ops->slice(k->sink, &s));
    th->have_mark = true;
    th->mark = end;
}

/* The next slice on th's track starts no earlier than this. */
static uint64_t next_start(const export_thread *th, uint64_t t)
{
    return th->have_mark ? max64(t, th->mark + 1) : t;
}

static void emit_step(export_rank *k, export_thread *th, uint64_t end, bool open)
{
    th->step_open = false;
    if (!open)
        end = max64(end, max64(th->step_ts, th->have_mark ? th->mark : 0) + 1);
    char name[40];
    snprintf(name, sizeof(name), "step %" PRId64, th->step);
    export_slice s = {.track = &th->track, .ts = th->step_ts, .dur = open ? 0 : end - th->step_ts, .open = open,
                   .name = name, .cat = "step"};
    arg_int(s.args, &s.nargs, "step", th->step);
    if (open)
        arg_str(s.args, &s.nargs, "unfinished", "the step began and never ended (the rank hung or died)");
    set_err(k, k->ops->slice(k->sink, &s));
    if (!open) {
        th->have_mark = true;
        th->mark = end;
    }
}

static void on_step(export_rank *k, const tft_rec_step *st)
{
    export_thread *th = cur_thread(k);
    uint64_t ts = xt(k, st->h.ts);
    emit_op(k, th, false);
    if (st->phase == TFT_STEP_BEGIN) {
        if (th->step_open)
            emit_step(k, th, ts, false);
        th->step_open = true;
        th->step = st->h.step;
        th->step_ts = next_start(th, ts);
        th->have_mark = true;
        th->mark = th->step_ts;
    } else if (st->phase == TFT_STEP_END && th->step_open && th->step == st->h.step) {
        emit_step(k, th, ts, false);
    }
}

static void on_op(export_rank *k, const tft_rec_op *op)
{
    export_thread *th = cur_thread(k);
    uint64_t ts = xt(k, op->h.ts);
    emit_op(k, th, false);
    th->op = true;
    th->op_seq = op->h.seq;
    th->op_step = op->h.step;
    th->op_name = op->name;
    th->op_scope = op->scope;
    th->op_kind = op->op_kind;
    /* recorded after they ran: from the previous boundary; a collective's
     * op is recorded as the call is entered: from its own record */
    th->op_start = !th->have_mark ? ts : op->op_kind == TFT_OP_COLLECTIVE ? max64(ts, th->mark + 1) : th->mark + 1;
    th->op_end = max64(ts, th->op_start);
}

/* A record of the pending op (same seq) extends it. */
static void extend_op(export_rank *k, const tft_rec *h)
{
    export_thread *th = cur_thread(k);
    if (th->op && h->seq == th->op_seq)
        th->op_end = max64(th->op_end, xt(k, h->ts));
}

/* ---- collectives -------------------------------------------------------------- */

static uint64_t flow_id(uint64_t comm, uint64_t coll_seq, int32_t member)
{
    uint64_t b[3] = {comm, coll_seq, (uint64_t)(uint32_t)member};
    return tft_string_id((const char *)b, sizeof(b));
}

/* Flows of this rank's slice of a collective: a star around the
 * communicator's rank 0 or root. Data goes to the root in reduce and
 * gather (the leaves start the flows), from it otherwise. */
static void coll_flows(export_rank *k, const export_call *c, export_slice *s, uint64_t in_ts)
{
    if (c->type == TFT_COLL_SEND || c->type == TFT_COLL_RECV || c->nranks < 2 || c->nranks > k->max_members ||
        c->rank < 0 || c->rank >= c->nranks)
        return;
    bool rooted = c->type == TFT_COLL_REDUCE || c->type == TFT_COLL_BCAST || c->type == TFT_COLL_GATHER ||
                  c->type == TFT_COLL_SCATTER;
    int32_t center = rooted && c->root >= 0 && c->root < c->nranks ? c->root : 0;
    bool to_root = c->type == TFT_COLL_REDUCE || c->type == TFT_COLL_GATHER;
    size_t n = 0;
    if (c->rank == center) {
        for (int32_t m = 0; m < c->nranks; m++)
            if (m != center)
                k->fan[n++] = flow_id(c->comm, c->coll_seq, m);
    } else {
        k->fan[n++] = flow_id(c->comm, c->coll_seq, c->rank);
    }
    bool out = (c->rank == center) != to_root;
    if (out) {
        s->flow_out = k->fan;
        s->n_out = n;
    } else {
        s->flow_in = k->fan;
        s->n_in = n;
        s->in_ts = in_ts;
    }
}

static void call_args(export_rank *k, const export_call *c, export_slice *s)
{
    (void)k;
    arg_hex(s->args, &s->nargs, "comm", c->comm);
    arg_uint(s->args, &s->nargs, "coll_seq", c->coll_seq);
    arg_str(s->args, &s->nargs, "type", tft_coll_type_name(c->type));
    arg_uint(s->args, &s->nargs, "count", c->count);
    arg_str(s->args, &s->nargs, "dtype", tft_dtype_name(c->dtype));
    if (c->redop)
        arg_str(s->args, &s->nargs, "op", tft_redop_name(c->redop));
    if (c->root >= 0)
        arg_int(s->args, &s->nargs, "root", c->root);
    arg_int(s->args, &s->nargs, "rank", c->rank);
    arg_int(s->args, &s->nargs, "nranks", c->nranks);
    arg_step(s->args, &s->nargs, c->step);
}

static export_call call_of(export_rank *k, const tft_rec_collective *c)
{
    return (export_call){.comm = c->comm, .coll_seq = c->coll_seq, .name = c->name, .count = c->count,
                      .t_enter = xt(k, c->t_enter), .step = c->h.step, .seq = c->h.seq, .thread = k->cur,
                      .type = c->type, .dtype = c->dtype, .redop = c->redop, .root = c->root,
                      .rank = c->rank, .nranks = c->nranks};
}

static bool call_eq(const void *ctx, const void *val)
{
    const export_call *a = ctx, *b = val;
    return a->comm == b->comm && a->coll_seq == b->coll_seq;
}

/* Emits call c ([t_enter, t_exit], or open) on its thread's track when it
 * nests there (inside the pending op of its seq, or after the track's last
 * boundary), else on the rank's track of overlapping collectives. */
static void emit_call(export_rank *k, const export_call *c, uint64_t t_exit, bool open)
{
    export_thread *th = thread_at(k, c->thread);
    const export_track *track = &th->track;
    uint64_t start = c->t_enter;
    bool in_op = th->op && th->op_seq == c->seq && c->seq != TFT_SEQ_NONE;
    if (in_op)
        start = max64(start, th->op_start + 1);
    else if (th->have_mark && start <= th->mark) {
        track = async_track(k);
        start = max64(start, k->async_mark + 1);
    }
    uint64_t end = max64(t_exit, start + 2);
    char b[18];
    export_slice s = {.track = track, .ts = start, .dur = open ? 0 : end - start, .open = open, .cat = "collective"};
    s.name = core_rec_string(k->r, c->name, b);
    if (!s.name)
        s.name = tft_coll_type_name(c->type);
    call_args(k, c, &s);
    if (open)
        arg_str(s.args, &s.nargs, "unfinished", "entered and never returned: the rank waited here");
    coll_flows(k, c, &s, open ? max64(start + 1, k->last_ts) : end - 1);
    set_err(k, k->ops->slice(k->sink, &s));
    if (open)
        return;
    if (track == &k->async)
        k->async_mark = end;
    else if (in_op)
        th->op_end = max64(th->op_end, end + 1);
    else {
        th->have_mark = true;
        th->mark = end;
    }
}

static void on_collective(export_rank *k, const tft_rec_collective *c)
{
    export_thread *th = cur_thread(k);
    if (th->op && c->h.seq != th->op_seq)
        emit_op(k, th, false);
    export_call call = call_of(k, c);
    uint64_t key = tft_u64map_hash2(c->comm, c->coll_seq);
    if (c->h.flags & TFT_COLL_FLAG_ENTER) {
        void *v;
        if (tft_u64map_insert(&k->open, key, call_eq, &call, &v) >= 0)
            *(export_call *)v = call;
        extend_op(k, &c->h);
        return;
    }
    export_call *was = tft_u64map_find(&k->open, key, call_eq, &call);
    if (was) {
        call.thread = was->thread; /* the thread that entered */
        tft_u64map_remove(&k->open, was);
    }
    emit_call(k, &call, xt(k, c->t_exit ? c->t_exit : c->h.ts), false);
    extend_op(k, &c->h);
}

/* ---- the other kinds ------------------------------------------------------------ */

static void on_kernel(export_rank *k, const tft_rec_kernel *kr)
{
    export_stream *s = stream_of(k, kr->device, kr->stream);
    uint64_t start = xt(k, kr->start), end = xt(k, kr->end);
    if (s->mark)
        start = max64(start, s->mark + 1);
    end = max64(end, start + 1);
    s->mark = end;
    char b[18];
    export_slice sl = {.track = &s->track, .ts = start, .dur = end - start,
                    .cat = kr->kind == TFT_OP_COPY ? "copy" : "kernel"};
    sl.name = core_rec_string(k->r, kr->name, b);
    if (!sl.name)
        sl.name = sl.cat;
    char grid[48], block[48];
    snprintf(grid, sizeof(grid), "%u,%u,%u", kr->grid[0], kr->grid[1], kr->grid[2]);
    snprintf(block, sizeof(block), "%u,%u,%u", kr->block[0], kr->block[1], kr->block[2]);
    arg_str(sl.args, &sl.nargs, "grid", grid);
    arg_str(sl.args, &sl.nargs, "block", block);
    arg_uint(sl.args, &sl.nargs, "correlation", kr->corr);
    arg_step(sl.args, &sl.nargs, kr->h.step);
    set_err(k, k->ops->slice(k->sink, &sl));
}

static int dev_slot(int device_kind, int device)
{
    if (device_kind == TFT_DEV_CPU)
        return 0;
    return device >= 0 && device < EXP_DEVICES_MAX - 1 ? device + 1 : -1;
}

static void on_alloc(export_rank *k, const tft_rec_alloc *a)
{
    int slot = dev_slot(a->device_kind, a->device);
    if (slot < 0)
        return;
    uint64_t key = tft_u64map_hash2(a->ptr, (uint64_t)slot);
    void *v;
    int rc = tft_u64map_insert(&k->live, key, NULL, NULL, &v);
    if (rc >= 0) {
        export_live *l = v;
        if (rc == 0) /* a second alloc at a live address: the first was freed unseen */
            k->live_bytes[l->slot] -= l->bytes < k->live_bytes[l->slot] ? l->bytes : k->live_bytes[l->slot];
        *l = (export_live){.ptr = a->ptr, .bytes = a->bytes, .slot = slot};
    }
    k->live_bytes[slot] += a->bytes;
    counter(k, slot, xt(k, a->h.ts), (double)k->live_bytes[slot]);
}

static void on_free(export_rank *k, const tft_rec_free *f)
{
    int slot = dev_slot(f->device_kind, f->device);
    if (slot < 0)
        return;
    export_live *l = tft_u64map_find(&k->live, tft_u64map_hash2(f->ptr, (uint64_t)slot), NULL, NULL);
    uint64_t bytes = f->bytes;
    if (l) {
        bytes = l->bytes;
        tft_u64map_remove(&k->live, l);
    } else if (!bytes) {
        return;
    }
    k->live_bytes[slot] -= bytes < k->live_bytes[slot] ? bytes : k->live_bytes[slot];
    counter(k, slot, xt(k, f->h.ts), (double)k->live_bytes[slot]);
}

static void on_tensor(export_rank *k, const tft_rec_tensor *t)
{
    static uint64_t loss_id, gn_id;
    if (!loss_id) {
        loss_id = tft_string_id("loss", 4);
        gn_id = tft_string_id("grad_norm", 9);
    }
    extend_op(k, &t->h);
    if (t->name != loss_id && t->name != gn_id)
        return;
    double v;
    if (t->stats.numel == 1 && t->mode >= TFT_STATS_HEALTH)
        v = t->stats.min;
    else if (t->mode >= TFT_STATS_FULL)
        v = t->stats.mean;
    else
        return;
    counter(k, t->name == loss_id ? CTR_LOSS : CTR_GRAD_NORM, xt(k, t->h.ts), v);
}

static void instant(export_rank *k, uint64_t ts, const char *name, const char *cat, const export_arg *args, int nargs)
{
    export_thread *th = cur_thread(k);
    export_instant in = {.track = &th->track, .ts = ts, .name = name, .cat = cat, .nargs = nargs};
    memcpy(in.args, args, sizeof(export_arg) * (size_t)nargs);
    set_err(k, k->ops->instant(k->sink, &in));
}

static void on_process(export_rank *k, const tft_rec_process *p)
{
    uint64_t ts = xt(k, p->h.ts);
    if (p->event == TFT_PROC_RSS) {
        counter(k, CTR_RSS, ts, (double)p->rss);
        return;
    }
    if (p->event != TFT_PROC_EXIT)
        return;
    char name[48];
    if (p->signal)
        snprintf(name, sizeof(name), "killed by signal %d", (int)p->signal);
    else
        snprintf(name, sizeof(name), "exit %d", (int)p->exit_code);
    export_arg a[2];
    int n = 0;
    arg_int(a, &n, "pid", p->pid);
    instant(k, ts, name, "process", a, n);
}

static void on_checkpoint(export_rank *k, const tft_rec_checkpoint *c)
{
    char b[18];
    export_arg a[3];
    int n = 0;
    arg_str(a, &n, "path", core_rec_string(k->r, c->path, b));
    arg_step(a, &n, c->h.step);
    instant(k, xt(k, c->h.ts), c->action == TFT_CKPT_RESUME ? "checkpoint resume" : "checkpoint save",
            "checkpoint", a, n);
}

static void on_dropped(export_rank *k, const tft_rec_dropped *d)
{
    char name[64];
    snprintf(name, sizeof(name), "%" PRIu64 " records lost (%s)", d->count, core_drop_reason_name(d->reason));
    export_arg a[2];
    int n = 0;
    arg_uint(a, &n, "count", d->count);
    instant(k, xt(k, d->h.ts), name, "dropped", a, n);
}

static void on_thread(export_rank *k, const tft_rec_thread *t)
{
    int slot = t->index < EXP_THREADS_MAX - 2 ? (int)t->index : EXP_THREADS_MAX - 2;
    export_thread *th = &k->threads[slot];
    if (!th->declared) {
        th->tid = t->tid;
        th->tname = t->name;
    }
    if (t->event == TFT_THREAD_END) {
        emit_op(k, thread_at(k, slot), false);
        return;
    }
    k->cur = slot;
}

/* ---- one rank ------------------------------------------------------------------ */

static bool in_steps(const dump_opts *o, int64_t step)
{
    return !o->have_steps || (step != TFT_STEP_NONE && step >= o->step_lo && step <= o->step_hi);
}

/* A CLOCK record across hosts on realtime (core_clock.h; the times are
 * mapped through the file's track, xt): a step or a change of NTP state is
 * shown as an instant with the error bound of the times that follow. */
static void on_clock(export_rank *k, const tft_rec *rec)
{
    int64_t was = k->clk.real_minus_mono;
    if (!core_clock_pair_update(&k->clk, rec))
        return;
    int64_t step = k->clk.real_minus_mono - was;
    uint64_t err = core_clock_pair_error(&k->clk);
    export_arg a[3] = {{.key = "ntp", .type = EXP_ARG_STR,
                     .v.s = k->clk.ntp == TFT_NTP_SYNCED ? "synchronised" : k->clk.ntp == TFT_NTP_UNSYNCED
                                                                              ? "not synchronised"
                                                                              : "unknown"},
                    {.key = "step_ns", .type = EXP_ARG_INT, .v.i = step}};
    int n = 2;
    if (err != UINT64_MAX)
        a[n++] = (export_arg){.key = "error_ns", .type = EXP_ARG_UINT, .v.u = err};
    instant(k, xt(k, rec->ts), err != UINT64_MAX ? "clock: NTP-synchronised" : "clock: not comparable across hosts",
            "clock", a, n);
}

static void on_record(export_rank *k, const tft_rec *rec)
{
    switch (rec->kind) {
    case TFT_REC_STEP: on_step(k, (const tft_rec_step *)rec); break;
    case TFT_REC_OP: on_op(k, (const tft_rec_op *)rec); break;
    case TFT_REC_TENSOR: on_tensor(k, (const tft_rec_tensor *)rec); break;
    case TFT_REC_CAPTURE: extend_op(k, rec); break;
    case TFT_REC_COLLECTIVE: on_collective(k, (const tft_rec_collective *)rec); break;
    case TFT_REC_KERNEL: on_kernel(k, (const tft_rec_kernel *)rec); break;
    case TFT_REC_ALLOC: on_alloc(k, (const tft_rec_alloc *)rec); break;
    case TFT_REC_FREE: on_free(k, (const tft_rec_free *)rec); break;
    case TFT_REC_PROCESS: on_process(k, (const tft_rec_process *)rec); break;
    case TFT_REC_CHECKPOINT: on_checkpoint(k, (const tft_rec_checkpoint *)rec); break;
    case TFT_REC_DROPPED: on_dropped(k, (const tft_rec_dropped *)rec); break;
    default: break;
    }
}

/* What is still open at the end: with the whole file read, unfinished
 * calls (and the ops they are in) and steps are shown open; after a stop
 * at the end of --steps, only what ended is shown. */
static void finish_rank(export_rank *k, bool whole)
{
    if (whole) {
        size_t pos = 0;
        export_call *c;
        while ((c = tft_u64map_next(&k->open, &pos, NULL)) != NULL) {
            export_thread *th = thread_at(k, c->thread);
            if (th->op && th->op_seq == c->seq && c->seq != TFT_SEQ_NONE) {
                emit_call(k, c, 0, true);
                emit_op(k, th, true);
            } else {
                emit_call(k, c, 0, true);
            }
        }
    }
    for (int i = 0; i < EXP_THREADS_MAX; i++) {
        export_thread *th = &k->threads[i];
        if (!th->declared)
            continue;
        emit_op(k, th, false);
        if (th->step_open && whole)
            emit_step(k, th, 0, true);
    }
}

static int walk_rank(export_rank *k, const dump_opts *o, const char *name)
{
    tft_reader *r = k->r;
    if (o->have_steps)
        tft_reader_seek_step(r, o->step_lo);
    set_err(k, k->ops->process(k->sink, &k->proc));
    const tft_rec *rec;
    int e;
    bool synced = false, whole = true;
    while (!k->err && (e = tft_reader_next(r, &rec)) > 0) {
        if (rec->kind == TFT_REC_THREAD) {
            on_thread(k, (const tft_rec_thread *)rec);
            continue;
        }
        if (rec->kind == TFT_REC_SYNC)
            synced = true;
        if (o->have_steps && rec->step != TFT_STEP_NONE && rec->step > o->step_hi &&
            (rec->kind == TFT_REC_SYNC || !synced)) {
            whole = false;
            break;
        }
        if (rec->kind == TFT_REC_CLOCK && k->follow && !o->have_steps)
            on_clock(k, rec);
        if (!in_steps(o, rec->step))
            continue;
        k->last_ts = max64(k->last_ts, xt(k, rec->ts));
        on_record(k, rec);
    }
    if (k->err)
        return k->err;
    if (whole && e < 0) {
        dump_err("%s: read error: %s", name, strerror(-e));
        return -EIO;
    }
    finish_rank(k, whole);
    return k->err;
}

/* ---- the export ------------------------------------------------------------------ */

typedef struct export_clock {
    bool one_host;
    uint64_t base;        /* earliest file start (monotonic, or realtime across hosts) */
    int64_t *adj;         /* across hosts with clocks aligned (core_clock.h): per rank file, NULL none */
    uint64_t err;         /* adj's largest error bound */
} export_clock;

/* A file's start on the export's clock: monotonic on one host; across
 * hosts rank 0's realtime when the clocks were aligned, else the host's. */
static uint64_t start_of(const export_clock *c, const tft_file_info *fi, int i)
{
    if (c->one_host)
        return fi->start_monotonic_ns;
    return c->adj ? fi->start_monotonic_ns + (uint64_t)c->adj[i] : fi->start_realtime_ns;
}

static export_clock clock_of(dump_trace *d, const dump_opts *o)
{
    export_clock c = {.one_host = true, .base = UINT64_MAX, .adj = NULL};
    const char *host = NULL;
    for (int i = 0; i < d->n; i++) {
        const tft_file_info *fi = tft_trace_file_info(d->t, i);
        if (!fi || !export_rank_selected(o, tft_trace_rank_id(d->t, i)))
            continue;
        if (host && strncmp(host, fi->host, sizeof(fi->host)) != 0)
            c.one_host = false;
        host = fi->host;
    }
    if (!c.one_host && (c.adj = calloc((size_t)d->n + 1, sizeof(*c.adj))) &&
        !core_clock_align(d->t, d->n, c.adj, &c.err)) {
        free(c.adj);
        c.adj = NULL;
    }
    for (int i = 0; i < d->n; i++) {
        const tft_file_info *fi = tft_trace_file_info(d->t, i);
        if (!fi || !export_rank_selected(o, tft_trace_rank_id(d->t, i)))
            continue;
        uint64_t s = start_of(&c, fi, i);
        if (s < c.base)
            c.base = s;
    }
    if (c.base == UINT64_MAX)
        c.base = 0;
    return c;
}

static int32_t pid_of(int rank, int idx)
{
    return rank >= 0 && rank < 2000000 ? rank + 1 : 2000001 + idx % 140000;
}

static void rank_init(export_rank *k, dump_trace *d, int idx, const export_clock *clk, uint32_t seq_id)
{
    const tft_file_info *fi = tft_trace_file_info(d->t, idx);
    k->rank = tft_trace_rank_id(d->t, idx);
    k->mono0 = fi->start_monotonic_ns;
    uint64_t off = start_of(clk, fi, idx) - clk->base;
    k->origin = off > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)off;
    k->follow = !clk->one_host && !clk->adj;
    core_clock_pair_start(&k->clk, fi);
    k->rm0 = k->clk.real_minus_mono;
    char host[sizeof(fi->host) + 1], how[80] = "";
    memcpy(host, fi->host, sizeof(fi->host));
    host[sizeof(fi->host)] = '\0';
    /* across hosts, how this rank's times compare with the others' (docs/MULTINODE.md) */
    if (clk->adj)
        snprintf(how, sizeof(how), "; clock: rank 0's through MPI, error within %.1f us", 2 * clk->err / 1e3);
    else if (k->follow)
        snprintf(how, sizeof(how), "; clock: its host's realtime");
    snprintf(k->pname, sizeof(k->pname), "rank %d (pid %d on %.64s%s)", k->rank, (int)fi->pid, host, how);
    k->proc = (export_process){.rank = k->rank, .pid = pid_of(k->rank, idx), .os_pid = fi->pid,
                            .uuid = uuid_of("process", k->rank, idx, 0), .seq_id = seq_id, .name = k->pname};
    tft_u64map_init(&k->open, &(tft_u64map_opts){.vsize = sizeof(export_call), .max_n = EXP_OPEN_MAX, .hashed = true});
    tft_u64map_init(&k->live, &(tft_u64map_opts){.vsize = sizeof(export_live), .max_n = EXP_LIVE_MAX, .hashed = true});
}

static int export_ranks(dump_trace *d, const dump_opts *o, const export_ops *ops, export_sink *sink)
{
    export_clock clk = clock_of(d, o);
    export_rank *k = malloc(sizeof(*k));
    export_thread *threads = calloc(EXP_THREADS_MAX, sizeof(export_thread));
    int rc = 0;
    uint32_t seq_id = 0;
    if (!k || !threads) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < d->n && !rc; i++) {
        if (!export_rank_selected(o, tft_trace_rank_id(d->t, i)) || !tft_trace_file_info(d->t, i))
            continue;
        memset(k, 0, sizeof(*k));
        memset(threads, 0, EXP_THREADS_MAX * sizeof(export_thread));
        k->ops = ops;
        k->sink = sink;
        k->threads = threads;
        /* a hostile record's nranks cannot make a slice carry more flows than the trace has ranks */
        k->max_members = d->n < EXP_FANOUT_MAX ? d->n : EXP_FANOUT_MAX;
        rank_init(k, d, i, &clk, ++seq_id);
        k->r = tft_trace_reader(d->t, i);
        if (!k->r) {
            dump_err("%s: cannot read: %s", d->names[i], strerror(errno));
            rc = -EIO;
        } else {
            /* across hosts on realtime: the file's clock pairs first (one more read of it) */
            int ce = k->follow ? core_clock_track_read(&k->track, k->r, tft_trace_file_info(d->t, i)) : 0;
            if (ce < 0)
                dump_err("%s: its clock records could not all be read (%s): later times follow the last one read",
                         d->names[i], strerror(-ce));
            rc = walk_rank(k, o, d->names[i]);
        }
        core_clock_track_free(&k->track);
        tft_u64map_free(&k->open);
        tft_u64map_free(&k->live);
        tft_trace_release(d->t, i);
    }
out:
    free(threads);
    free(k);
    free(clk.adj);
    return rc;
}

static char *command_line(const tft_manifest *m)
{
    size_t n = 1;
    for (int i = 0; m && i < m->argc; i++)
        n += strlen(m->argv[i]) + 1;
    char *s = malloc(n), *p = s;
    if (!s)
        return NULL;
    *p = '\0';
    for (int i = 0; m && i < m->argc; i++) {
        size_t l = strlen(m->argv[i]);
        memcpy(p, m->argv[i], l);
        p += l;
        *p++ = i + 1 < m->argc ? ' ' : '\0';
    }
    return s;
}

static bool same_file(const struct stat *a, const char *path)
{
    struct stat b;
    return path && stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* Whether OUT names one of the trace's own files (a rank file, the
 * manifest, the rank file given as TRACE): writing it would destroy the trace. */
static bool out_is_trace(dump_trace *d, const dump_opts *o)
{
    struct stat st;
    if (stat(o->export_out, &st) != 0)
        return false;
    if (same_file(&st, o->path))
        return true;
    for (int i = 0; i < d->n; i++)
        if (same_file(&st, tft_trace_file_name(d->t, i)))
            return true;
    char m[4096];
    return snprintf(m, sizeof(m), "%s/manifest.json", o->path) < (int)sizeof(m) && same_file(&st, m);
}

int export_run(dump_trace *d, const dump_opts *o)
{
    int matches = 0;
    for (int i = 0; i < d->n; i++)
        matches += export_rank_selected(o, tft_trace_rank_id(d->t, i));
    if (matches == 0) {
        dump_err("%s: no rank of this trace (%d rank file%s) matches --rank/--ranks", o->path, d->n,
                 d->n == 1 ? "" : "s");
        return DUMP_USAGE;
    }
    bool to_stdout = strcmp(o->export_out, "-") == 0;
    if (!to_stdout && out_is_trace(d, o)) {
        dump_err("%s: is a file of the trace %s; give another OUT for the export", o->export_out, o->path);
        return DUMP_USAGE;
    }
    FILE *f = to_stdout ? stdout : fopen(o->export_out, "wb");
    if (!f) {
        dump_err("%s: cannot write the export: %s", o->export_out, strerror(errno));
        return DUMP_USAGE;
    }
    const export_ops *ops = NULL;
    export_sink *sink = o->export_format == EXP_PERFETTO ? export_perfetto_new(f, &ops) : export_chrome_new(f, &ops);
    const tft_manifest *m = tft_trace_manifest(d->t);
    char *cmd = command_line(m);
    int rc = sink && cmd ? 0 : -ENOMEM;
    if (!rc) {
        export_run_info run = {.run_id = m ? m->run_id : "", .command = cmd, .nranks = matches};
        rc = ops->begin(sink, &run);
        if (!rc)
            rc = export_ranks(d, o, ops, sink);
        if (!rc)
            rc = ops->end(sink);
    }
    free(cmd);
    if (sink)
        ops->free(sink);
    int status = DUMP_OK;
    if (rc == -EPIPE && to_stdout) {
        rc = 0; /* the reader went away: a quiet success, as for the other modes */
        clearerr(f);
    }
    if (rc == -ENOMEM) {
        dump_nomem(o->path, "the export");
        status = DUMP_USAGE;
    } else if (rc == -EIO) {
        status = DUMP_USAGE; /* said where it happened */
    } else if (rc) {
        dump_err("%s: write error: %s", o->export_out, strerror(-rc));
        status = DUMP_USAGE;
    }
    if (to_stdout) {
        if (status == DUMP_OK && fflush(f) != 0 && errno != EPIPE) {
            dump_err("%s: write error: %s", "stdout", strerror(errno));
            status = DUMP_USAGE;
        }
    } else if (fclose(f) != 0 && status == DUMP_OK) {
        dump_err("%s: write error: %s", o->export_out, strerror(errno));
        status = DUMP_USAGE;
    }
    return status;
}

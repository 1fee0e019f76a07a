/*
 * export_coll.c — collectives in tfdump --export (export_walk_internal.h):
 * a slice from enter to exit on the thread that entered, or on the rank's
 * track of overlapping collectives when it would not nest there; flows
 * linking the ranks' slices of one call: one per (communicator, sequence
 * number, member), a star around the communicator's rank 0 or root.
 * Calls entered and not yet exited wait in a bounded map (EXP_OPEN_MAX).
 */
#include "export_walk_internal.h"

#include <string.h>

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
    export_arg_hex(s->args, &s->nargs, "comm", c->comm);
    export_arg_uint(s->args, &s->nargs, "coll_seq", c->coll_seq);
    export_arg_str(s->args, &s->nargs, "type", tft_coll_type_name(c->type));
    export_arg_uint(s->args, &s->nargs, "count", c->count);
    export_arg_str(s->args, &s->nargs, "dtype", tft_dtype_name(c->dtype));
    if (c->redop)
        export_arg_str(s->args, &s->nargs, "op", tft_redop_name(c->redop));
    if (c->root >= 0)
        export_arg_int(s->args, &s->nargs, "root", c->root);
    export_arg_int(s->args, &s->nargs, "rank", c->rank);
    export_arg_int(s->args, &s->nargs, "nranks", c->nranks);
    export_arg_step(s->args, &s->nargs, c->step);
}

static export_call call_of(export_rank *k, const tft_rec_collective *c)
{
    return (export_call){.comm = c->comm, .coll_seq = c->coll_seq, .name = c->name, .count = c->count,
                      .t_enter = export_time(k, c->t_enter), .step = c->h.step, .seq = c->h.seq, .thread = k->cur,
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
void export_emit_call(export_rank *k, const export_call *c, uint64_t t_exit, bool open)
{
    export_thread *th = export_thread_at(k, c->thread);
    const export_track *track = &th->track;
    uint64_t start = c->t_enter;
    bool in_op = th->op && th->op_seq == c->seq && c->seq != TFT_SEQ_NONE;
    if (in_op)
        start = max64(start, th->op_start + 1);
    else if (th->have_mark && start <= th->mark) {
        track = export_async_track(k);
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
        export_arg_str(s.args, &s.nargs, "unfinished", "entered and never returned: the rank waited here");
    coll_flows(k, c, &s, open ? max64(start + 1, k->last_ts) : end - 1);
    export_set_err(k, k->ops->slice(k->sink, &s));
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

void export_on_collective(export_rank *k, const tft_rec_collective *c)
{
    export_thread *th = export_cur_thread(k);
    if (th->op && c->h.seq != th->op_seq)
        export_emit_op(k, th, false);
    export_call call = call_of(k, c);
    uint64_t key = tft_u64map_hash2(c->comm, c->coll_seq);
    if (c->h.flags & TFT_COLL_FLAG_ENTER) {
        void *v;
        if (tft_u64map_insert(&k->open, key, call_eq, &call, &v) >= 0)
            *(export_call *)v = call;
        export_extend_op(k, &c->h);
        return;
    }
    export_call *was = tft_u64map_find(&k->open, key, call_eq, &call);
    if (was) {
        call.thread = was->thread; /* the thread that entered */
        tft_u64map_remove(&k->open, was);
    }
    export_emit_call(k, &call, export_time(k, c->t_exit ? c->t_exit : c->h.ts), false);
    export_extend_op(k, &c->h);
}

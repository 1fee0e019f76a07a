/*
 * export_records.c — the records of one rank as slices, instants and
 * counters (export_walk_internal.h): steps on the thread that marked them,
 * ops from the thread's previous boundary to their last record (ops are
 * recorded after they ran), kernels and copies on their streams, live
 * bytes from ALLOC and FREE, loss and grad_norm from their tensors, and
 * process exits, checkpoints and lost records as instants.
 */
#include "core_drops.h"
#include "export_walk_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void export_emit_op(export_rank *k, export_thread *th, bool open)
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
    export_arg_str(s.args, &s.nargs, "kind", tft_op_kind_name(th->op_kind));
    export_arg_str(s.args, &s.nargs, "scope", core_rec_string(k->r, th->op_scope, b2));
    export_arg_step(s.args, &s.nargs, th->op_step);
    export_arg_int(s.args, &s.nargs, "seq", th->op_seq);
    if (open)
        export_arg_str(s.args, &s.nargs, "unfinished", "the op was still running when the trace ended");
    export_set_err(k, k->ops->slice(k->sink, &s));
    th->have_mark = true;
    th->mark = end;
}

/* The next slice on th's track starts no earlier than this. */
static uint64_t next_start(const export_thread *th, uint64_t t)
{
    return th->have_mark ? max64(t, th->mark + 1) : t;
}

void export_emit_step(export_rank *k, export_thread *th, uint64_t end, bool open)
{
    th->step_open = false;
    if (!open)
        end = max64(end, max64(th->step_ts, th->have_mark ? th->mark : 0) + 1);
    char name[40];
    snprintf(name, sizeof(name), "step %" PRId64, th->step);
    export_slice s = {.track = &th->track, .ts = th->step_ts, .dur = open ? 0 : end - th->step_ts, .open = open,
                   .name = name, .cat = "step"};
    export_arg_int(s.args, &s.nargs, "step", th->step);
    if (open)
        export_arg_str(s.args, &s.nargs, "unfinished", "the step began and never ended (the rank hung or died)");
    export_set_err(k, k->ops->slice(k->sink, &s));
    if (!open) {
        th->have_mark = true;
        th->mark = end;
    }
}

void export_on_step(export_rank *k, const tft_rec_step *st)
{
    export_thread *th = export_cur_thread(k);
    uint64_t ts = export_time(k, st->h.ts);
    export_emit_op(k, th, false);
    if (st->phase == TFT_STEP_BEGIN) {
        if (th->step_open)
            export_emit_step(k, th, ts, false);
        th->step_open = true;
        th->step = st->h.step;
        th->step_ts = next_start(th, ts);
        th->have_mark = true;
        th->mark = th->step_ts;
    } else if (st->phase == TFT_STEP_END && th->step_open && th->step == st->h.step) {
        export_emit_step(k, th, ts, false);
    }
}

void export_on_op(export_rank *k, const tft_rec_op *op)
{
    export_thread *th = export_cur_thread(k);
    uint64_t ts = export_time(k, op->h.ts);
    export_emit_op(k, th, false);
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
void export_extend_op(export_rank *k, const tft_rec *h)
{
    export_thread *th = export_cur_thread(k);
    if (th->op && h->seq == th->op_seq)
        th->op_end = max64(th->op_end, export_time(k, h->ts));
}

void export_on_kernel(export_rank *k, const tft_rec_kernel *kr)
{
    export_stream *s = export_stream_of(k, kr->device, kr->stream);
    uint64_t start = export_time(k, kr->start), end = export_time(k, kr->end);
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
    export_arg_str(sl.args, &sl.nargs, "grid", grid);
    export_arg_str(sl.args, &sl.nargs, "block", block);
    export_arg_uint(sl.args, &sl.nargs, "correlation", kr->corr);
    export_arg_step(sl.args, &sl.nargs, kr->h.step);
    export_set_err(k, k->ops->slice(k->sink, &sl));
}

static int dev_slot(int device_kind, int device)
{
    if (device_kind == TFT_DEV_CPU)
        return 0;
    return device >= 0 && device < EXP_DEVICES_MAX - 1 ? device + 1 : -1;
}

void export_on_alloc(export_rank *k, const tft_rec_alloc *a)
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
    export_counter(k, slot, export_time(k, a->h.ts), (double)k->live_bytes[slot]);
}

void export_on_free(export_rank *k, const tft_rec_free *f)
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
    export_counter(k, slot, export_time(k, f->h.ts), (double)k->live_bytes[slot]);
}

void export_on_tensor(export_rank *k, const tft_rec_tensor *t)
{
    static uint64_t loss_id, gn_id;
    if (!loss_id) {
        loss_id = tft_string_id("loss", 4);
        gn_id = tft_string_id("grad_norm", 9);
    }
    export_extend_op(k, &t->h);
    if (t->name != loss_id && t->name != gn_id)
        return;
    double v;
    if (t->stats.numel == 1 && t->mode >= TFT_STATS_HEALTH)
        v = t->stats.min;
    else if (t->mode >= TFT_STATS_FULL)
        v = t->stats.mean;
    else
        return;
    export_counter(k, t->name == loss_id ? CTR_LOSS : CTR_GRAD_NORM, export_time(k, t->h.ts), v);
}

void export_on_process(export_rank *k, const tft_rec_process *p)
{
    uint64_t ts = export_time(k, p->h.ts);
    if (p->event == TFT_PROC_RSS) {
        export_counter(k, CTR_RSS, ts, (double)p->rss);
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
    export_arg_int(a, &n, "pid", p->pid);
    export_emit_instant(k, ts, name, "process", a, n);
}

void export_on_checkpoint(export_rank *k, const tft_rec_checkpoint *c)
{
    char b[18];
    export_arg a[3];
    int n = 0;
    export_arg_str(a, &n, "path", core_rec_string(k->r, c->path, b));
    export_arg_step(a, &n, c->h.step);
    export_emit_instant(k, export_time(k, c->h.ts), c->action == TFT_CKPT_RESUME ? "checkpoint resume" : "checkpoint save",
            "checkpoint", a, n);
}

void export_on_dropped(export_rank *k, const tft_rec_dropped *d)
{
    char name[64];
    snprintf(name, sizeof(name), "%" PRIu64 " records lost (%s)", d->count, core_drop_reason_name(d->reason));
    export_arg a[2];
    int n = 0;
    export_arg_uint(a, &n, "count", d->count);
    export_emit_instant(k, export_time(k, d->h.ts), name, "dropped", a, n);
}

void export_on_thread(export_rank *k, const tft_rec_thread *t)
{
    int slot = t->index < EXP_THREADS_MAX - 2 ? (int)t->index : EXP_THREADS_MAX - 2;
    export_thread *th = &k->threads[slot];
    if (!th->declared) {
        th->tid = t->tid;
        th->tname = t->name;
    }
    if (t->event == TFT_THREAD_END) {
        export_emit_op(k, export_thread_at(k, slot), false);
        return;
    }
    k->cur = slot;
}

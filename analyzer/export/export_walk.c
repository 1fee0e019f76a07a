/*
 * export_walk.c — one rank file of tfdump --export walked
 * (export_walk_internal.h): from the first step asked for to the last, each
 * record to its handler; THREAD records name the thread of the records
 * that follow; CLOCK records across hosts move the rank's times. At the
 * end, with the whole file read, what began and never ended (steps, ops,
 * collectives) is shown open; after a stop at the end of --steps only what
 * ended is shown.
 */
#include "export_walk_internal.h"

#include <errno.h>
#include <string.h>

static bool in_steps(const export_opts *o, int64_t step)
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
    export_emit_instant(k, export_time(k, rec->ts), err != UINT64_MAX ? "clock: NTP-synchronised" : "clock: not comparable across hosts",
            "clock", a, n);
}

static void on_record(export_rank *k, const tft_rec *rec)
{
    switch (rec->kind) {
    case TFT_REC_STEP: export_on_step(k, (const tft_rec_step *)rec); break;
    case TFT_REC_OP: export_on_op(k, (const tft_rec_op *)rec); break;
    case TFT_REC_TENSOR: export_on_tensor(k, (const tft_rec_tensor *)rec); break;
    case TFT_REC_CAPTURE: export_extend_op(k, rec); break;
    case TFT_REC_COLLECTIVE: export_on_collective(k, (const tft_rec_collective *)rec); break;
    case TFT_REC_KERNEL: export_on_kernel(k, (const tft_rec_kernel *)rec); break;
    case TFT_REC_ALLOC: export_on_alloc(k, (const tft_rec_alloc *)rec); break;
    case TFT_REC_FREE: export_on_free(k, (const tft_rec_free *)rec); break;
    case TFT_REC_PROCESS: export_on_process(k, (const tft_rec_process *)rec); break;
    case TFT_REC_CHECKPOINT: export_on_checkpoint(k, (const tft_rec_checkpoint *)rec); break;
    case TFT_REC_DROPPED: export_on_dropped(k, (const tft_rec_dropped *)rec); break;
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
            export_thread *th = export_thread_at(k, c->thread);
            if (th->op && th->op_seq == c->seq && c->seq != TFT_SEQ_NONE) {
                export_emit_call(k, c, 0, true);
                export_emit_op(k, th, true);
            } else {
                export_emit_call(k, c, 0, true);
            }
        }
    }
    for (int i = 0; i < EXP_THREADS_MAX; i++) {
        export_thread *th = &k->threads[i];
        if (!th->declared)
            continue;
        export_emit_op(k, th, false);
        if (th->step_open && whole)
            export_emit_step(k, th, 0, true);
    }
}

int export_walk_rank(export_rank *k, const export_opts *o, const char *name)
{
    tft_reader *r = k->r;
    if (o->have_steps)
        tft_reader_seek_step(r, o->step_lo);
    export_set_err(k, k->ops->process(k->sink, &k->proc));
    const tft_rec *rec;
    int e;
    bool synced = false, whole = true;
    while (!k->err && (e = tft_reader_next(r, &rec)) > 0) {
        if (rec->kind == TFT_REC_THREAD) {
            export_on_thread(k, (const tft_rec_thread *)rec);
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
        k->last_ts = max64(k->last_ts, export_time(k, rec->ts));
        on_record(k, rec);
    }
    if (k->err)
        return k->err;
    if (whole && e < 0) {
        export_say(o, TFT_LOG_ERROR, "%s: read error: %s", name, strerror(-e));
        return -EIO;
    }
    finish_rank(k, whole);
    return k->err;
}


/*
 * dump_events.c — `tfdump --events`: every record (strings aside), merged
 * across ranks in (step, seq) order or time order, filtered by rank, step
 * range, name pattern and kind, printed as text or JSON lines.
 *
 * One rank (--rank, or a one-rank trace) is read straight from its reader so
 * --steps can seek to the first chunk that holds the range; several ranks go
 * through tft_merge, which always starts at the beginning of every file. In
 * step order reading stops after the first record past the range: steps never
 * decrease within a rank file (the reader's seek relies on the same).
 */
#include "dump_internal.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>

static bool kind_selected(const dump_opts *o, uint16_t kind)
{
    if (!o->kinds)
        return true;
    bool known = kind != TFT_REC_STRING && tft_rec_min_size(kind) != 0;
    if (!known)
        return (o->kinds & KIND_BIT_UNKNOWN) != 0;
    return kind < 64 && ((o->kinds >> kind) & 1u);
}

static bool event_selected(const dump_opts *o, const tft_rec *rec, int rank, const tft_reader *r)
{
    if (o->rank >= 0 && rank != o->rank)
        return false;
    if (!kind_selected(o, rec->kind))
        return false;
    if (o->have_steps &&
        (rec->step == TFT_STEP_NONE || rec->step < o->step_lo || rec->step > o->step_hi))
        return false;
    if (o->name_glob) {
        char b[18];
        const char *name = dump_rec_name(rec, r, b);
        if (!name || fnmatch(o->name_glob, name, 0) != 0)
            return false;
    }
    return true;
}

/* True when no later record can fall in the step range (step order only). */
static bool past_range(const dump_opts *o, const tft_rec *rec)
{
    return o->have_steps && o->order == TFT_ORDER_STEP_SEQ && rec->step != TFT_STEP_NONE &&
           rec->step > o->step_hi;
}

/* Prints one record; returns false when stdout is gone. */
static bool emit(const dump_opts *o, const tft_rec *rec, int rank, const tft_reader *r)
{
    if (!o->json) {
        dump_rec_text(stdout, rec, rank, r);
        return dump_out_ok();
    }
    cJSON *j = dump_rec_json(rec, rank, r);
    if (!j) {
        dump_err("out of memory");
        return false;
    }
    bool ok = dump_out_json_line(j);
    cJSON_Delete(j);
    return ok;
}

static int read_failed(const dump_trace *d, int idx, int e)
{
    dump_err("%s: read error: %s", d->names[idx], strerror(-e));
    return DUMP_USAGE;
}

static int events_one(dump_trace *d, const dump_opts *o, int idx)
{
    tft_reader *r = tft_trace_reader(d->t, idx);
    int rank = tft_trace_rank_id(d->t, idx);
    if (o->have_steps)
        tft_reader_seek_step(r, o->step_lo);
    const tft_rec *rec;
    int e;
    while ((e = tft_reader_next(r, &rec)) > 0) {
        if (past_range(o, rec))
            return DUMP_OK;
        if (event_selected(o, rec, rank, r) && !emit(o, rec, rank, r))
            return DUMP_OK;
    }
    return e < 0 ? read_failed(d, idx, e) : DUMP_OK;
}

static int events_merged(dump_trace *d, const dump_opts *o)
{
    tft_merge *m = tft_merge_open(d->t, o->order);
    if (!m) {
        dump_err("%s: cannot read the rank files: %s", o->path, strerror(errno));
        return DUMP_USAGE;
    }
    const tft_rec *rec;
    int idx = 0, e, status = DUMP_OK;
    while ((e = tft_merge_next(m, &rec, &idx)) > 0) {
        if (past_range(o, rec))
            break;
        tft_reader *r = tft_trace_reader(d->t, idx);
        int rank = tft_trace_rank_id(d->t, idx);
        if (event_selected(o, rec, rank, r) && !emit(o, rec, rank, r))
            break;
    }
    if (e < 0) {
        dump_err("%s: read error: %s", o->path, strerror(-e));
        status = DUMP_USAGE;
    }
    tft_merge_close(m);
    return status;
}

int dump_events(dump_trace *d, const dump_opts *o)
{
    int only = -1, matches = 0;
    for (int i = 0; i < d->n; i++) {
        if (o->rank < 0 || tft_trace_rank_id(d->t, i) == o->rank) {
            only = i;
            matches++;
        }
    }
    if (o->rank >= 0 && matches == 0) {
        dump_err("%s: no rank %d in this trace (%d rank file%s)", o->path, o->rank, d->n,
                 d->n == 1 ? "" : "s");
        return DUMP_USAGE;
    }
    if (matches == 1)
        return events_one(d, o, only);
    return events_merged(d, o);
}

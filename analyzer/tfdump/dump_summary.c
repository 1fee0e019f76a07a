/*
 * dump_summary.c — `tfdump TRACE` and `tfdump --json TRACE`: one pass over
 * every record of every rank file, counting by kind, exits, steps, drops,
 * clocks, memory and collective calls (dump_summary_internal.h), then a
 * human summary (dump_summary_text.c) or one JSON object
 * (dump_summary_json.c). A trace directory with a manifest and no rank
 * file gets the same summary with zero counts: dump_unrecorded.c.
 *
 * Memory: one rank file is open at a time (one reader: one chunk), plus a
 * 512 KiB table of counts by record kind, a few hundred bytes per rank
 * file and the unfinished collective calls (dump_internal.h: bounded);
 * time: one decompression of the whole trace.
 */
#include "core_common.h"
#include "dump_summary_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void step_range(int64_t *first, int64_t *last, int64_t step)
{
    if (step == TFT_STEP_NONE)
        return;
    if (*first == TFT_STEP_NONE || step < *first)
        *first = step;
    if (*last == TFT_STEP_NONE || step > *last)
        *last = step;
}

static void count_record(trace_sum *s, rank_sum *rs, int idx, const tft_reader *r, const tft_rec *rec)
{
    s->by_kind[rec->kind]++;
    if (rec->kind >= s->kind_hi)
        s->kind_hi = rec->kind + 1;
    rs->records++;
    step_range(&rs->step_first, &rs->step_last, rec->step);
    if (rec->kind == TFT_REC_COLLECTIVE)
        dump_coll_note(&s->coll, (const tft_rec_collective *)rec, idx);
    if (rec->kind == TFT_REC_DROPPED)
        tft_drop_sum_add(&rs->drops, (const tft_rec_dropped *)rec, rec->len);
    dump_clock_note(&rs->clock, rec);
    core_exception_take(&rs->raised, r, rec);
    if (rec->kind == TFT_REC_PROCESS) {
        const tft_rec_process *p = (const tft_rec_process *)rec;
        if (p->event == TFT_PROC_EXIT) {
            rs->exit_known = 1;
            rs->exit_code = p->exit_code;
            rs->exit_signal = p->signal;
        } else if (p->event == TFT_PROC_RSS) {
            rs->rss_samples++;
            rs->rss_last = p->rss;
            if (p->rss > rs->rss_peak)
                rs->rss_peak = p->rss;
        }
    }
}

/* Reads rank file idx to the end, then closes it: one rank file is open
 * at a time. Returns 0 or a negative errno. */
static int sum_rank(dump_trace *d, int idx, trace_sum *s)
{
    rank_sum *rs = &s->ranks[idx];
    rs->rank = tft_trace_rank_id(d->t, idx);
    rs->step_first = rs->step_last = TFT_STEP_NONE;
    tft_drop_sum_init(&rs->drops);
    dump_clock_begin(&rs->clock, tft_trace_file_info(d->t, idx));
    tft_reader *r = tft_trace_reader(d->t, idx);
    if (!r)
        return errno ? -errno : -EIO;
    const tft_rec *rec;
    int e;
    tft_reader_rewind(r);
    dump_coll_rank_begin(&s->coll);
    while ((e = tft_reader_next(r, &rec)) > 0)
        count_record(s, rs, idx, r, rec);
    int ce = dump_coll_rank_end(&s->coll, r);
    tft_reader_get_status(r, &rs->st);
    long long keep = 0;
    int64_t full_first = TFT_STEP_NONE;
    tft_reader_full_steps(r, &keep, &full_first, NULL);
    if (keep > s->keep_steps)
        s->keep_steps = keep;
    if (keep && (s->full_first == TFT_STEP_NONE || full_first > s->full_first))
        s->full_first = full_first;
    tft_trace_release(d->t, idx);
    if (e < 0)
        return e;
    if (ce < 0)
        return ce;
    s->records += rs->records;
    s->dropped += rs->st.dropped;
    /* the chunk headers' total is authoritative (FORMAT.md §5.11): counts
     * without a DROPPED record (or of a damaged chunk) have no kind */
    if (rs->st.dropped > rs->drops.count)
        rs->drops.unknown += rs->st.dropped - rs->drops.count;
    rs->drops.count = rs->st.dropped;
    s->bytes += rs->st.file_bytes;
    struct stat sb;
    if (stat(tft_trace_file_name(d->t, idx), &sb) == 0)
        rs->alloc_bytes = (uint64_t)sb.st_blocks * 512u;
    s->alloc_bytes += rs->alloc_bytes;
    s->raw_bytes += rs->st.raw_bytes;
    if (rs->st.integrity > s->integrity)
        s->integrity = rs->st.integrity;
    step_range(&s->step_first, &s->step_last, rs->step_first);
    step_range(&s->step_first, &s->step_last, rs->step_last);
    return 0;
}

/* Exit statuses the rank files did not record come from the manifest. */
static void exits_from_manifest(const tft_manifest *m, trace_sum *s, int n)
{
    for (int i = 0; m && i < n; i++) {
        rank_sum *rs = &s->ranks[i];
        if (!rs->exit_known)
            rs->exit_known = core_manifest_rank_exit(m, rs->rank, &rs->exit_code, &rs->exit_signal);
    }
}

static int sum_collect(dump_trace *d, const dump_opts *o, trace_sum *s)
{
    s->by_kind = calloc(KINDS, sizeof(*s->by_kind));
    s->ranks = calloc((size_t)d->n + 1, sizeof(*s->ranks));
    if (!s->by_kind || !s->ranks) {
        dump_nomem(o->path, "the summary");
        return DUMP_USAGE;
    }
    s->step_first = s->step_last = TFT_STEP_NONE;
    s->full_first = TFT_STEP_NONE;
    dump_coll_init(&s->coll);
    for (int i = 0; i < d->n; i++) {
        int e = sum_rank(d, i, s);
        if (e < 0)
            return dump_read_error(o->path, d->names[i], e);
    }
    if (dump_trace_check(d, o->path) > 0)
        s->integrity = TFT_DAMAGED;
    const tft_manifest *m = tft_trace_manifest(d->t);
    /* ranks that never wrote, lost files, or a manifest that lies; not an
     * extract of some ranks, whose manifest says which it kept */
    if (m && m->world_size > d->n && dump_extract_ranks_kept(o->path) != d->n) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s/manifest.json: world_size %d, but %d rank file%s: %d rank%s recorded nothing "
                 "or lost their files (or the manifest is wrong)", o->path, m->world_size, d->n, d->n == 1 ? "" : "s",
                 m->world_size - d->n, m->world_size - d->n == 1 ? "" : "s");
        dump_log_fn(&d->log, TFT_LOG_WARN, msg);
    }
    exits_from_manifest(m, s, d->n);
    return DUMP_OK;
}

int dump_summary(dump_trace *d, const dump_opts *o)
{
    trace_sum s = {0};
    int status = sum_collect(d, o, &s);
    if (status == DUMP_OK && o->json) {
        cJSON *j = dump_summary_json(d, o, &s);
        dump_print_json(j, &status);
        cJSON_Delete(j);
    } else if (status == DUMP_OK) {
        dump_summary_text(d, o, &s);
    }
    free(s.by_kind);
    free(s.ranks);
    dump_coll_free(&s.coll);
    return status;
}

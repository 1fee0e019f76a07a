/*
 * dump_summary.c — `tfdump TRACE` and `tfdump --json TRACE`: one pass over
 * every record of every rank file, counting by kind, then a human summary or
 * one JSON object with the keys: trace, ranks (count), rank_ids, steps
 * ([first, last] or null), records, records_by_kind, ops, tensors,
 * collectives (calls), collectives_unfinished ([{rank, name, comm, coll_seq,
 * step}], at most COLL_KEEP), collectives_unfinished_not_shown (the rest),
 * allocs, frees, dropped (the chunk headers' totals, FORMAT.md §5.11),
 * bytes (of the rank files), raw_bytes, ratio, integrity (complete|torn|damaged), exit
 * ({rank: {code}|{signal}|null}: the PROCESS exit record, else the manifest),
 * problems, problems_not_shown, manifest (null or {run_id, command,
 * world_size, complete, host, tool_version, format_version, exit_status,
 * incomplete (why records were lost, or null), dropped_stalled, collector
 * (finished | running | died | unknown, or null without collector entries),
 * collector_pid}),
 * files ([{file, rank, integrity, closed, chunks, chunks_bad, records,
 * bytes, raw_bytes, dropped, steps, drops (json_drops)}]), recorded (false only for a trace
 * without rank files, below), duration_ns and command_exit (the manifest's:
 * {code} | {signal} | null).
 *
 * A trace directory with a manifest and no rank file (the command died
 * before its first record: `tftrace -- sh -c 'kill -9 $$'`) gets the same
 * summary with zero counts, what the manifest knows, and "recorded": false;
 * dump_unrecorded also answers every other mode for it.
 *
 * Memory: one rank file is open at a time (one reader: one chunk), plus a
 * 512 KiB table of counts by record kind, a few hundred bytes per rank
 * file and the unfinished collective calls (dump_internal.h: bounded);
 * time: one decompression of the whole trace.
 */
#include "dump_internal.h"
#include "tft_drops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define KINDS 65536

typedef struct rank_sum {
    int rank;
    int exit_known;          /* from a PROCESS exit record or the manifest */
    int exit_code, exit_signal;
    int64_t step_first, step_last; /* TFT_STEP_NONE when no record has a step */
    uint64_t records;
    tft_reader_status st;
    tft_drop_sum drops;      /* its DROPPED records; count: the chunk headers' total */
    dump_clock_sum clock;    /* its CLOCK records (dump_clock.c) */
    uint64_t rss_samples, rss_peak, rss_last; /* its PROCESS RSS samples, bytes */
} rank_sum;

typedef struct trace_sum {
    uint64_t *by_kind;       /* KINDS counters */
    int kind_hi;             /* one past the largest kind counted */
    uint64_t records, dropped;
    int64_t step_first, step_last;
    int64_t full_first;      /* --keep-steps traces: first step every rank has in full */
    long long keep_steps;    /* largest N of a rank file written with --keep-steps, 0 none */
    uint64_t bytes, raw_bytes;
    int integrity;           /* worst over the rank files and the checks */
    rank_sum *ranks;         /* one per rank file */
    coll_track coll;         /* collective calls, unfinished ones kept */
} trace_sum;

static void step_range(int64_t *first, int64_t *last, int64_t step)
{
    if (step == TFT_STEP_NONE)
        return;
    if (*first == TFT_STEP_NONE || step < *first)
        *first = step;
    if (*last == TFT_STEP_NONE || step > *last)
        *last = step;
}

static void count_record(trace_sum *s, rank_sum *rs, int idx, const tft_rec *rec)
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
        count_record(s, rs, idx, rec);
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
        for (int k = 0; k < m->nranks && !rs->exit_known; k++) {
            if (m->ranks[k].rank != rs->rank || !m->ranks[k].exited)
                continue;
            rs->exit_known = 1;
            rs->exit_code = m->ranks[k].exit_code;
            rs->exit_signal = m->ranks[k].signal;
        }
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
    if (m && m->world_size > d->n) { /* ranks that never wrote, lost files, or a manifest that lies */
        char msg[300];
        snprintf(msg, sizeof(msg), "%s/manifest.json: world_size %d, but %d rank file%s: %d rank%s recorded nothing "
                 "or lost their files (or the manifest is wrong)", o->path, m->world_size, d->n, d->n == 1 ? "" : "s",
                 m->world_size - d->n, m->world_size - d->n == 1 ? "" : "s");
        dump_log_fn(&d->log, TFT_LOG_WARN, msg);
    }
    exits_from_manifest(m, s, d->n);
    return DUMP_OK;
}

/* ---- text -------------------------------------------------------------------- */

static void text_kinds(const trace_sum *s)
{
    printf("records      %" PRIu64, s->records);
    const char *sep = " (";
    for (int k = 0; k < s->kind_hi; k++) {
        if (!s->by_kind[k])
            continue;
        char kb[24];
        printf("%s%s %" PRIu64, sep, dump_rec_kind_label((uint16_t)k, kb), s->by_kind[k]);
        sep = ", ";
    }
    printf("%s\n", s->records ? ")" : "");
}

static void exit_text(const rank_sum *rs, char *buf, size_t n)
{
    if (!rs->exit_known)
        snprintf(buf, n, "unknown (no exit recorded)");
    else if (rs->exit_signal)
        snprintf(buf, n, "killed by signal %d", rs->exit_signal);
    else
        snprintf(buf, n, "code %d", rs->exit_code);
}

static void text_exits(const trace_sum *s, int n)
{
    char first[64], cur[64];
    bool same = true;
    if (n <= 0)
        return;
    exit_text(&s->ranks[0], first, sizeof(first));
    for (int i = 1; i < n && same; i++) {
        exit_text(&s->ranks[i], cur, sizeof(cur));
        same = strcmp(first, cur) == 0;
    }
    if (same) {
        printf("exit         %s%s\n", n > 1 ? "every rank: " : "", first);
        return;
    }
    for (int i = 0; i < n; i++) {
        exit_text(&s->ranks[i], cur, sizeof(cur));
        printf("%s rank %d: %s\n", i ? "            " : "exit        ", s->ranks[i].rank, cur);
    }
}

/* The resident set the collector sampled (PROCESS RSS records): the rank
 * with the highest peak, and each rank's peak when there are a few. */
static void text_memory(const trace_sum *s, int n)
{
    int top = -1;
    uint64_t samples = 0;
    for (int i = 0; i < n; i++) {
        samples += s->ranks[i].rss_samples;
        if (s->ranks[i].rss_samples && (top < 0 || s->ranks[i].rss_peak > s->ranks[top].rss_peak))
            top = i;
    }
    if (top < 0)
        return;
    const rank_sum *t = &s->ranks[top];
    printf("memory       peak RSS %.1f MiB (rank %d), last %.1f MiB; %" PRIu64 " samples\n",
           (double)t->rss_peak / 1048576.0, t->rank, (double)t->rss_last / 1048576.0, samples);
    for (int i = 0; n > 1 && n <= 8 && i < n; i++)
        if (s->ranks[i].rss_samples)
            printf("             rank %d: peak %.1f MiB, last %.1f MiB\n", s->ranks[i].rank,
                   (double)s->ranks[i].rss_peak / 1048576.0, (double)s->ranks[i].rss_last / 1048576.0);
}

/* The first collector of the manifest that did not finish, NULL when every
 * one did (or the manifest lists none: an in-process trace, an old one). */
static const tft_manifest_collector *unfinished_collector(const tft_manifest *m)
{
    for (int i = 0; m && i < m->ncollectors; i++)
        if (!m->collectors[i].done)
            return &m->collectors[i];
    return NULL;
}

/* "finished", "running", "died", "unknown", or NULL without collectors. */
static const char *collector_state(const tft_manifest *m)
{
    if (!m || m->ncollectors == 0)
        return NULL;
    const tft_manifest_collector *c = unfinished_collector(m);
    if (!c)
        return "finished";
    int st = tft_manifest_collector_state(c);
    return st == TFT_COLLECTOR_RUNNING ? "running" : st == TFT_COLLECTOR_GONE ? "died" : "unknown";
}

static void text_manifest(const tft_manifest *m)
{
    if (!m) {
        printf("manifest     none\n");
        return;
    }
    const char *cs = collector_state(m);
    const char *state = m->complete           ? "(run finished)"
                        : m->incomplete       ? "(run finished; the trace is INCOMPLETE)"
                        : cs && !strcmp(cs, "died") ? "(run did not finish: its collector died)"
                        : cs && !strcmp(cs, "running") ? "(still recording)"
                                                       : "(run did not finish: manifest not final)";
    printf("run          %s  host %s  world size %d  %s\n", m->run_id[0] ? m->run_id : "?",
           m->host[0] ? m->host : "?", m->world_size, state);
    printf("command     ");
    for (int i = 0; i < m->argc; i++)
        printf(" %s", m->argv[i]);
    printf("\n");
    if (m->incomplete)
        printf("incomplete   %s\n", m->incomplete);
    const tft_manifest_collector *c = unfinished_collector(m);
    if (c && !m->incomplete && cs) {
        if (!strcmp(cs, "died"))
            printf("collector    died: tftrace (pid %d on %s) is gone without finishing the trace (killed? "
                   "out of memory?); what it had not written is lost, the rank files end where it stopped\n",
                   (int)c->pid, c->host);
        else if (!strcmp(cs, "running"))
            printf("collector    running: tftrace (pid %d) is still recording; read the trace again when it "
                   "ends\n", (int)c->pid);
        else
            printf("collector    tftrace (pid %d on %s) has not finished the trace: still running there, or it "
                   "died\n", (int)c->pid, c->host);
    }
}

static const char *name_or_dash(const char *s) { return s ? s : "-"; }

/* Collective calls, and those a rank entered and never returned from. */
static void text_collectives(dump_trace *d, const trace_sum *s)
{
    const coll_track *t = &s->coll;
    printf("collectives  %" PRIu64 " calls", dump_coll_calls(t));
    if (t->n)
        printf(", %" PRIu64 " entered and never returned (hang or crash):", (uint64_t)t->n + t->unshown);
    printf("\n");
    for (size_t i = 0; i < t->n && i < 16; i++) {
        const coll_open *o = &t->open[i];
        printf("             rank %d: %s comm=%016" PRIx64 " cseq=%" PRIu64,
               tft_trace_rank_id(d->t, o->idx), name_or_dash(o->named ? o->name_text : NULL),
               o->comm, o->coll_seq);
        if (o->step != TFT_STEP_NONE)
            printf(" step %" PRId64, o->step);
        printf("\n");
    }
    if (t->n + t->unshown > 16)
        printf("             ... and %" PRIu64 " more\n", (uint64_t)t->n + t->unshown - 16);
}

static void summary_text(dump_trace *d, const dump_opts *o, const trace_sum *s)
{
    printf("trace        %s\n", o->path);
    text_manifest(tft_trace_manifest(d->t));
    dump_extract_describe(o->path, stdout);
    printf("ranks        %d\n", d->n);
    if (s->step_first == TFT_STEP_NONE)
        printf("steps        none\n");
    else
        printf("steps        %" PRId64 "..%" PRId64 "\n", s->step_first, s->step_last);
    if (s->keep_steps && s->step_first != TFT_STEP_NONE) /* --keep-steps (FORMAT.md §3.6) */
        printf("kept         full records: steps %" PRId64 "..%" PRId64 "; scalars and collectives: steps %"
               PRId64 "..%" PRId64 "\n", s->full_first, s->step_last, s->step_first, s->step_last);
    text_kinds(s);
    printf("tensors      %" PRIu64 "\n", s->by_kind[TFT_REC_TENSOR]);
    text_collectives(d, s);
    printf("allocations  %" PRIu64 " (%" PRIu64 " frees)\n", s->by_kind[TFT_REC_ALLOC],
           s->by_kind[TFT_REC_FREE]);
    printf("bytes        %" PRIu64 " on disk, %" PRIu64 " uncompressed (ratio %.2fx)\n", s->bytes,
           s->raw_bytes, s->bytes ? (double)s->raw_bytes / (double)s->bytes : 0.0);
    const tft_manifest *m = tft_trace_manifest(d->t);
    if (m && m->dropped_stalled)
        printf("dropped      %" PRIu64 " (%" PRIu64 " when --no-drop gave up on a stalled collector)\n", s->dropped,
               m->dropped_stalled);
    else
        printf("dropped      %" PRIu64 "\n", s->dropped);
    for (int i = 0; i < d->n; i++) {
        char what[512];
        if (s->ranks[i].drops.count)
            printf("WARNING      rank %d: %s; the trace is incomplete there\n", s->ranks[i].rank,
                   tft_drop_describe(&s->ranks[i].drops, what, sizeof(what)));
    }
    printf("integrity    %s\n", dump_integrity_name(s->integrity));
    text_exits(s, d->n);
    text_memory(s, d->n);
    bool any_step = false;
    for (int i = 0; i < d->n; i++)
        any_step |= s->ranks[i].clock.steps > 0;
    for (int i = 0; dump_clock_shown(d, any_step) && i < d->n; i++)
        dump_clock_line(d, i, &s->ranks[i].clock, i == 0);
    dump_procs_text(o->path);
    for (size_t i = 0; i < d->log.n; i++)
        printf("%s %s\n", i ? "            " : "problems    ", d->log.msgs[i]);
    if (d->log.more)
        printf("             ... and %zu more\n", d->log.more);
}

/* ---- JSON ---------------------------------------------------------------------- */

static cJSON *json_steps(int64_t first, int64_t last)
{
    if (first == TFT_STEP_NONE)
        return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    char b[24];
    snprintf(b, sizeof(b), "%" PRId64, first);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
    snprintf(b, sizeof(b), "%" PRId64, last);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
    return a;
}

static cJSON *json_exit(const rank_sum *rs)
{
    if (!rs->exit_known)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (rs->exit_signal)
        cJSON_AddNumberToObject(o, "signal", rs->exit_signal);
    else
        cJSON_AddNumberToObject(o, "code", rs->exit_code);
    return o;
}

static cJSON *json_manifest(const tft_manifest *m)
{
    if (!m)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run_id", m->run_id);
    cJSON *cmd = cJSON_AddArrayToObject(o, "command");
    for (int i = 0; cmd && i < m->argc; i++)
        cJSON_AddItemToArray(cmd, cJSON_CreateString(m->argv[i]));
    cJSON_AddNumberToObject(o, "world_size", m->world_size);
    cJSON_AddBoolToObject(o, "complete", m->complete);
    cJSON_AddStringToObject(o, "host", m->host);
    cJSON_AddStringToObject(o, "tool_version", m->tool_version);
    char ver[24];
    snprintf(ver, sizeof(ver), "%d.%d", m->major, m->minor);
    cJSON_AddStringToObject(o, "format_version", ver);
    if (m->exit_status >= 0)
        cJSON_AddNumberToObject(o, "exit_status", m->exit_status);
    else
        cJSON_AddNullToObject(o, "exit_status");
    dump_json_str_or_null(o, "incomplete", m->incomplete);
    core_json_u64(o, "dropped_stalled", m->dropped_stalled);
    dump_json_str_or_null(o, "collector", collector_state(m));
    const tft_manifest_collector *c = unfinished_collector(m);
    if (c)
        cJSON_AddNumberToObject(o, "collector_pid", c->pid);
    else
        cJSON_AddNullToObject(o, "collector_pid");
    return o;
}

static cJSON *json_unfinished(dump_trace *d, const trace_sum *s)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < s->coll.n; i++) {
        const coll_open *o = &s->coll.open[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "rank", tft_trace_rank_id(d->t, o->idx));
        dump_json_str_or_null(j, "name", o->named ? o->name_text : NULL);
        core_json_hex(j, "comm", o->comm);
        core_json_u64(j, "coll_seq", o->coll_seq);
        if (o->step == TFT_STEP_NONE)
            cJSON_AddNullToObject(j, "step");
        else
            core_json_i64(j, "step", o->step);
        cJSON_AddItemToArray(a, j);
    }
    return a;
}

/* What a rank file lost (null when nothing): {count, by_kind {kind: n},
 * kind_unknown (in records without kinds: before format 1.4, or counted in
 * a chunk header only), steps ([first, last] of the lost records, null
 * when outside steps or unknown), steps_known, text (the sentence the
 * launcher and the text summary print)}. */
static cJSON *json_drops(const tft_drop_sum *ds)
{
    if (!ds->count)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject(), *bk = cJSON_CreateObject();
    core_json_u64(o, "count", ds->count);
    for (int k = 0; k < TFT_DROP_KINDS; k++)
        if (ds->by_kind[k])
            core_json_u64(bk, k ? tft_rec_kind_name((uint16_t)k) : "other", ds->by_kind[k]);
    cJSON_AddItemToObject(o, "by_kind", bk);
    uint64_t known = 0;
    for (int k = 0; k < TFT_DROP_KINDS; k++)
        known += ds->by_kind[k];
    core_json_u64(o, "kind_unknown", ds->count > known ? ds->count - known : 0);
    cJSON_AddItemToObject(o, "steps", json_steps(ds->first_step, ds->last_step));
    cJSON_AddBoolToObject(o, "steps_known", !ds->steps_unknown);
    char what[512];
    cJSON_AddStringToObject(o, "text", tft_drop_describe(ds, what, sizeof(what)));
    return o;
}

static cJSON *json_file(const dump_trace *d, int i, const rank_sum *rs)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", d->names[i]);
    cJSON_AddNumberToObject(o, "rank", rs->rank);
    cJSON_AddStringToObject(o, "integrity", dump_integrity_name(rs->st.integrity));
    cJSON_AddBoolToObject(o, "closed", rs->st.closed);
    core_json_u64(o, "chunks", rs->st.chunks);
    core_json_u64(o, "chunks_bad", rs->st.chunks_bad);
    core_json_u64(o, "records", rs->records);
    core_json_u64(o, "bytes", rs->st.file_bytes);
    core_json_u64(o, "raw_bytes", rs->st.raw_bytes);
    core_json_u64(o, "dropped", rs->st.dropped);
    cJSON_AddItemToObject(o, "steps", json_steps(rs->step_first, rs->step_last));
    cJSON_AddItemToObject(o, "drops", json_drops(&rs->drops));
    cJSON_AddItemToObject(o, "clock", dump_clock_json((dump_trace *)d, i, &rs->clock));
    if (rs->rss_samples) {
        cJSON *m = cJSON_AddObjectToObject(o, "rss");
        core_json_u64(m, "samples", rs->rss_samples);
        core_json_u64(m, "peak", rs->rss_peak);
        core_json_u64(m, "last", rs->rss_last);
    } else {
        cJSON_AddNullToObject(o, "rss");
    }
    return o;
}

static void json_counts(cJSON *o, const trace_sum *s)
{
    core_json_u64(o, "records", s->records);
    cJSON *bk = cJSON_AddObjectToObject(o, "records_by_kind");
    for (int k = 0; bk && k < s->kind_hi; k++) {
        char kb[24];
        if (s->by_kind[k])
            core_json_u64(bk, dump_rec_kind_label((uint16_t)k, kb), s->by_kind[k]);
    }
    core_json_u64(o, "ops", s->by_kind[TFT_REC_OP]);
    core_json_u64(o, "tensors", s->by_kind[TFT_REC_TENSOR]);
    core_json_u64(o, "collectives", dump_coll_calls(&s->coll));
    core_json_u64(o, "allocs", s->by_kind[TFT_REC_ALLOC]);
    core_json_u64(o, "frees", s->by_kind[TFT_REC_FREE]);
    core_json_u64(o, "dropped", s->dropped);
    core_json_u64(o, "bytes", s->bytes);
    core_json_u64(o, "raw_bytes", s->raw_bytes);
    cJSON_AddNumberToObject(o, "ratio", s->bytes ? (double)s->raw_bytes / (double)s->bytes : 0.0);
}

/* The run's duration from the manifest, or false while it is not final. */
static bool manifest_duration(const tft_manifest *m, uint64_t *ns)
{
    if (!m || !m->complete || !m->start_ns || m->end_ns < m->start_ns)
        return false;
    *ns = m->end_ns - m->start_ns;
    return true;
}

/* The command's exit from the launcher's status in the manifest: tftrace
 * exits with the command's status, 128 + N when signal N killed it. Returns
 * false when unknown (run not finished). */
static bool manifest_exit(const tft_manifest *m, int *code, int *sig)
{
    if (!m || m->exit_status < 0)
        return false;
    *sig = m->exit_status > 128 && m->exit_status < 128 + 65 ? m->exit_status - 128 : 0;
    *code = *sig ? 0 : m->exit_status;
    return true;
}

static void json_run(cJSON *j, const tft_manifest *m, bool recorded)
{
    uint64_t ns;
    int code, sig;
    cJSON_AddBoolToObject(j, "recorded", recorded);
    if (manifest_duration(m, &ns))
        core_json_u64(j, "duration_ns", ns);
    else
        cJSON_AddNullToObject(j, "duration_ns");
    if (!manifest_exit(m, &code, &sig)) {
        cJSON_AddNullToObject(j, "command_exit");
        return;
    }
    cJSON *ex = cJSON_AddObjectToObject(j, "command_exit");
    if (ex)
        cJSON_AddNumberToObject(ex, sig ? "signal" : "code", sig ? sig : code);
}

static cJSON *summary_json(dump_trace *d, const dump_opts *o, const trace_sum *s)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "trace", o->path);
    cJSON_AddNumberToObject(j, "ranks", d->n);
    cJSON *ids = cJSON_AddArrayToObject(j, "rank_ids");
    for (int i = 0; ids && i < d->n; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(s->ranks[i].rank));
    cJSON_AddItemToObject(j, "steps", json_steps(s->step_first, s->step_last));
    json_counts(j, s);
    cJSON_AddItemToObject(j, "collectives_unfinished", json_unfinished(d, s));
    core_json_u64(j, "collectives_unfinished_not_shown", s->coll.unshown);
    cJSON_AddStringToObject(j, "integrity", dump_integrity_name(s->integrity));
    cJSON *ex = cJSON_AddObjectToObject(j, "exit");
    for (int i = 0; ex && i < d->n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", s->ranks[i].rank);
        cJSON_AddItemToObject(ex, key, json_exit(&s->ranks[i]));
    }
    cJSON *pr = cJSON_AddArrayToObject(j, "problems");
    for (size_t i = 0; pr && i < d->log.n; i++)
        cJSON_AddItemToArray(pr, cJSON_CreateString(d->log.msgs[i]));
    core_json_u64(j, "problems_not_shown", d->log.more);
    const tft_manifest *m = d->unrecorded ? &d->manifest : tft_trace_manifest(d->t);
    cJSON_AddItemToObject(j, "manifest", json_manifest(m));
    dump_procs_json(j, o->path);
    cJSON *files = cJSON_AddArrayToObject(j, "files");
    for (int i = 0; files && i < d->n; i++)
        cJSON_AddItemToArray(files, json_file(d, i, &s->ranks[i]));
    json_run(j, m, !d->unrecorded);
    return j;
}

static void print_json_obj(cJSON *j, int *status)
{
    char *text = j ? cJSON_Print(j) : NULL;
    if (text) {
        puts(text);
    } else {
        dump_err("out of memory");
        *status = DUMP_USAGE;
    }
    cJSON_free(text);
}

/* ---- a trace without rank files --------------------------------------------- */

/* "killed by signal 9 (status 137)", "code 0", "unknown (...)". */
static void run_exit_text(const tft_manifest *m, char *buf, size_t n)
{
    int code, sig;
    if (!manifest_exit(m, &code, &sig))
        snprintf(buf, n, "unknown (the run did not finish: manifest not final)");
    else if (sig)
        snprintf(buf, n, "killed by signal %d (status %d)", sig, m->exit_status);
    else
        snprintf(buf, n, "code %d", code);
}

/* Why nothing was recorded: "no rank file: ...". */
static void unrecorded_why(const tft_manifest *m, char *buf, size_t n)
{
    if (m->nranks)
        snprintf(buf, n, "no rank file, though manifest.json lists %d (%s%s): lost", m->nranks, m->ranks[0].file,
                 m->nranks > 1 ? ", ..." : "");
    else
        snprintf(buf, n, "no rank file: the command ended before its first record");
}

static void unrecorded_text(dump_trace *d, const dump_opts *o)
{
    const tft_manifest *m = &d->manifest;
    char buf[320];
    uint64_t ns;
    printf("trace        %s\n", o->path);
    text_manifest(m);
    if (manifest_duration(m, &ns))
        printf("duration     %.3f s\n", (double)ns * 1e-9);
    run_exit_text(m, buf, sizeof(buf));
    printf("exit         %s\n", buf);
    dump_procs_text(o->path);
    unrecorded_why(m, buf, sizeof(buf));
    printf("recorded     nothing (%s)\n", buf);
}

/* One line for stderr in the modes that have nothing to show. */
static void unrecorded_note(dump_trace *d, const dump_opts *o)
{
    char ex[96], why[320];
    run_exit_text(&d->manifest, ex, sizeof(ex));
    unrecorded_why(&d->manifest, why, sizeof(why));
    dump_err("%s: nothing was recorded (%s); exit: %s", o->path, why, ex);
}

static int unrecorded_verify(dump_trace *d, const dump_opts *o)
{
    const tft_manifest *m = &d->manifest;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "ok", m->nranks == 0);
        cJSON_AddStringToObject(j, "integrity", m->nranks ? "damaged" : "complete");
        cJSON_AddArrayToObject(j, "files");
        cJSON *pr = cJSON_AddArrayToObject(j, "problems");
        for (int k = 0; pr && k < m->nranks && k < DUMP_LOG_KEEP; k++) {
            char msg[600];
            snprintf(msg, sizeof(msg), "%s/%s: listed in manifest.json for rank %d but missing; that rank's "
                     "records are lost", o->path, m->ranks[k].file, m->ranks[k].rank);
            cJSON_AddItemToArray(pr, cJSON_CreateString(msg));
        }
        core_json_u64(j, "problems_not_shown", m->nranks > DUMP_LOG_KEEP ? (uint64_t)(m->nranks - DUMP_LOG_KEEP) : 0);
        json_run(j, m, false);
        int status = DUMP_OK;
        print_json_obj(j, &status);
        cJSON_Delete(j);
        if (status)
            return status;
    } else if (m->nranks) {
        for (int k = 0; k < m->nranks; k++)
            printf("%s/%s: listed in manifest.json for rank %d but missing; that rank's records are lost\n", o->path,
                   m->ranks[k].file, m->ranks[k].rank);
        printf("FAILED: %s: 0 rank files, %d listed in manifest.json are missing\n", o->path, m->nranks);
    } else {
        printf("OK: %s: no rank files, none listed in manifest.json: nothing was recorded\n", o->path);
    }
    return m->nranks ? DUMP_FINDINGS : DUMP_OK;
}

static int unrecorded_check(dump_trace *d, const dump_opts *o)
{
    char ex[96], why[320], msg[512];
    run_exit_text(&d->manifest, ex, sizeof(ex));
    unrecorded_why(&d->manifest, why, sizeof(why));
    snprintf(msg, sizeof(msg), "nothing to check: nothing was recorded (%s); exit: %s", why, ex);
    if (!o->json) {
        printf("%s\n", msg);
        return DUMP_FINDINGS;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNullToObject(j, "first_nonfinite");
    cJSON_AddArrayToObject(j, "leaks");
    cJSON_AddArrayToObject(j, "desync");
    json_run(j, &d->manifest, false);
    cJSON_AddStringToObject(j, "unrecorded", msg);
    bool ok = dump_out_json_line(j);
    cJSON_Delete(j);
    return ok ? DUMP_FINDINGS : DUMP_USAGE;
}

int dump_unrecorded(dump_trace *d, const dump_opts *o)
{
    int status = DUMP_OK;
    switch (o->mode) {
    case MODE_SUMMARY:
        if (o->json) {
            trace_sum s = {.step_first = TFT_STEP_NONE, .step_last = TFT_STEP_NONE};
            s.by_kind = calloc(KINDS, sizeof(*s.by_kind));
            cJSON *j = s.by_kind ? summary_json(d, o, &s) : NULL;
            print_json_obj(j, &status);
            cJSON_Delete(j);
            free(s.by_kind);
        } else {
            unrecorded_text(d, o);
        }
        return status;
    case MODE_VERIFY: return unrecorded_verify(d, o);
    case MODE_CHECK: return unrecorded_check(d, o);
    case MODE_HTML: return dump_html(d, o);
    case MODE_TENSOR:
    case MODE_REPLAY: unrecorded_note(d, o); return DUMP_USAGE;
    default: unrecorded_note(d, o); return DUMP_OK; /* --events, --chunks, --captures: nothing to list */
    }
}

int dump_summary(dump_trace *d, const dump_opts *o)
{
    trace_sum s = {0};
    int status = sum_collect(d, o, &s);
    if (status == DUMP_OK && o->json) {
        cJSON *j = summary_json(d, o, &s);
        print_json_obj(j, &status);
        cJSON_Delete(j);
    } else if (status == DUMP_OK) {
        summary_text(d, o, &s);
    }
    free(s.by_kind);
    free(s.ranks);
    dump_coll_free(&s.coll);
    return status;
}

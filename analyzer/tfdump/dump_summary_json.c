/*
 * dump_summary_json.c — `tfdump --json TRACE`: the summary as one JSON
 * object (dump_summary_internal.h) with the keys: trace, ranks (count),
 * rank_ids, steps ([first, last] or null), records, records_by_kind, ops,
 * tensors, collectives (calls), collectives_unfinished ([{rank, name,
 * comm, coll_seq, step}], at most COLL_KEEP),
 * collectives_unfinished_not_shown (the rest), allocs, frees, dropped (the
 * chunk headers' totals, FORMAT.md §5.11), bytes (of the rank files:
 * their sizes), allocated_bytes (the disk blocks they take),
 * raw_bytes, ratio, integrity (complete|torn|damaged), exit ({rank:
 * {code}|{signal}|null}: the PROCESS exit record, else the manifest),
 * problems, problems_not_shown, manifest (null or {run_id, command,
 * world_size, complete, host, tool_version, format_version, exit_status,
 * incomplete (why records were lost, or null), dropped_stalled, collector
 * (finished | running | died | unknown, or null without collector
 * entries), collector_pid}), files ([{file, rank, integrity, closed,
 * chunks, chunks_bad, records, bytes, allocated_bytes, raw_bytes, dropped, steps, drops
 * (json_drops)}]), recorded (false only for a trace without rank files),
 * duration_ns and command_exit (the manifest's: {code} | {signal} | null).
 */
#include "core_common.h"
#include "dump_summary_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* "raised": {"RANK": {"type", "step", "where", "message", "text"}}, only
 * when a rank had an uncaught exception (EXCEPTION records, format 1.7). */
static void json_raised(cJSON *j, const dump_trace *d, const trace_sum *s)
{
    cJSON *o = NULL;
    for (int i = 0; i < d->n; i++) {
        const core_exception *x = &s->ranks[i].raised;
        if (!x->known)
            continue;
        if (!o && !(o = cJSON_AddObjectToObject(j, "raised")))
            return;
        char key[16], text[700];
        snprintf(key, sizeof(key), "%d", s->ranks[i].rank);
        cJSON *e = cJSON_AddObjectToObject(o, key);
        if (!e)
            continue;
        cJSON_AddStringToObject(e, "type", x->type);
        if (x->step == TFT_STEP_NONE)
            cJSON_AddNullToObject(e, "step");
        else
            cJSON_AddNumberToObject(e, "step", (double)x->step);
        cJSON_AddStringToObject(e, "where", x->where);
        cJSON_AddStringToObject(e, "message", x->message);
        cJSON_AddStringToObject(e, "text", core_exception_text(x, text, sizeof(text)));
    }
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
    dump_json_str_or_null(o, "collector", dump_collector_state(m));
    const tft_manifest_collector *c = dump_collector_unfinished(m);
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
    cJSON_AddItemToObject(o, "steps", dump_json_range(ds->first_step, ds->last_step, TFT_STEP_NONE));
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
    core_json_u64(o, "allocated_bytes", rs->alloc_bytes);
    core_json_u64(o, "raw_bytes", rs->st.raw_bytes);
    core_json_u64(o, "dropped", rs->st.dropped);
    cJSON_AddItemToObject(o, "steps", dump_json_range(rs->step_first, rs->step_last, TFT_STEP_NONE));
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
    core_json_u64(o, "allocated_bytes", s->alloc_bytes);
    core_json_u64(o, "raw_bytes", s->raw_bytes);
    cJSON_AddNumberToObject(o, "ratio", s->bytes ? (double)s->raw_bytes / (double)s->bytes : 0.0);
}

void dump_json_run(cJSON *j, const tft_manifest *m, bool recorded)
{
    uint64_t ns;
    int code, sig;
    cJSON_AddBoolToObject(j, "recorded", recorded);
    if (core_manifest_duration(m, &ns))
        core_json_u64(j, "duration_ns", ns);
    else
        cJSON_AddNullToObject(j, "duration_ns");
    if (!core_manifest_exit(m, &code, &sig)) {
        cJSON_AddNullToObject(j, "command_exit");
        return;
    }
    cJSON *ex = cJSON_AddObjectToObject(j, "command_exit");
    if (ex)
        cJSON_AddNumberToObject(ex, sig ? "signal" : "code", sig ? sig : code);
}

cJSON *dump_summary_json(dump_trace *d, const dump_opts *o, const trace_sum *s)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "trace", o->path);
    cJSON_AddNumberToObject(j, "ranks", d->n);
    cJSON *ids = cJSON_AddArrayToObject(j, "rank_ids");
    for (int i = 0; ids && i < d->n; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(s->ranks[i].rank));
    cJSON_AddItemToObject(j, "steps", dump_json_range(s->step_first, s->step_last, TFT_STEP_NONE));
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
    json_raised(j, d, s);
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
    dump_json_run(j, m, !d->unrecorded);
    return j;
}

void dump_print_json(cJSON *j, int *status)
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

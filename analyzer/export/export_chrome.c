/*
 * export_chrome.c — the Chrome Trace Event Format emitter of `tfdump
 * --export chrome` (export_internal.h): one JSON object
 * {"displayTimeUnit":"ns","otherData":{...},"traceEvents":[...]} written
 * event by event, each event built with cJSON and printed on its own line.
 * Loads in Perfetto's UI (ui.perfetto.dev), chrome://tracing and
 * speedscope; every event has ph, pid, tid (counters: pid), ts.
 *
 * Mapping: ranks are processes (M process_name / process_sort_index),
 * tracks threads (M thread_name / thread_sort_index, tid unique in the
 * file); slices are X events (B for open ones: never ended); flows are
 * s/f events (v1, binding to the enclosing slice) with ids
 * "0x<16 hex>"; instants i (scope t); counters C, the track's group as
 * name and its series as the argument. ts and dur are microseconds
 * written as exact decimal text with three decimals (nanoseconds).
 */
#include "core_json.h"
#include "export_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct export_sink {
    FILE *f;
    bool first;           /* no event written yet */
};

/* Writes one event line; frees j. */
static int put(export_sink *s, cJSON *j)
{
    if (!j)
        return -ENOMEM;
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text)
        return -ENOMEM;
    int ok = fputs(s->first ? "\n" : ",\n", s->f) >= 0 && fputs(text, s->f) >= 0;
    s->first = false;
    free(text);
    return ok ? 0 : -(errno ? errno : EIO);
}

/* ns as microseconds with three decimals, exact (no binary rounding). */
static void add_us(cJSON *o, const char *key, uint64_t ns)
{
    char b[32];
    snprintf(b, sizeof(b), "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
    cJSON_AddRawToObject(o, key, b);
}

static cJSON *event(const char *ph, const char *name, const export_track *t, int32_t pid)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "ph", ph);
    if (name)
        cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "pid", t ? t->pid : pid);
    if (t && t->kind != EXP_TRACK_COUNTER)
        cJSON_AddNumberToObject(o, "tid", t->tid);
    return o;
}

static void add_args(cJSON *o, const export_arg *a, int n)
{
    if (n <= 0)
        return;
    cJSON *args = cJSON_AddObjectToObject(o, "args");
    if (!args)
        return;
    for (int i = 0; i < n; i++) {
        switch (a[i].type) {
        case EXP_ARG_INT: core_json_i64(args, a[i].key, a[i].v.i); break;
        case EXP_ARG_UINT: core_json_u64(args, a[i].key, a[i].v.u); break;
        case EXP_ARG_DOUBLE: cJSON_AddNumberToObject(args, a[i].key, a[i].v.d); break;
        case EXP_ARG_HEX: core_json_hex(args, a[i].key, a[i].v.u); break;
        default: cJSON_AddStringToObject(args, a[i].key, a[i].v.s); break;
        }
    }
}

static int metadata(export_sink *s, const char *what, int32_t pid, const export_track *t, const char *key,
                    const char *str, int num)
{
    cJSON *o = event("M", what, t, pid);
    cJSON *args = o ? cJSON_AddObjectToObject(o, "args") : NULL;
    if (args && str)
        cJSON_AddStringToObject(args, key, str);
    else if (args)
        cJSON_AddNumberToObject(args, key, num);
    return put(s, o);
}

static int c_begin(export_sink *s, const export_run_info *run)
{
    cJSON *other = cJSON_CreateObject();
    if (!other)
        return -ENOMEM;
    cJSON_AddStringToObject(other, "tool", "tfdump --export chrome");
    cJSON_AddStringToObject(other, "run_id", run->run_id);
    cJSON_AddStringToObject(other, "command", run->command);
    cJSON_AddNumberToObject(other, "ranks", run->nranks);
    char *text = cJSON_PrintUnformatted(other);
    cJSON_Delete(other);
    if (!text)
        return -ENOMEM;
    int ok = fprintf(s->f, "{\"displayTimeUnit\":\"ns\",\"otherData\":%s,\"traceEvents\":[", text) >= 0;
    free(text);
    return ok ? 0 : -(errno ? errno : EIO);
}

static int c_process(export_sink *s, const export_process *p)
{
    int rc = metadata(s, "process_name", p->pid, NULL, "name", p->name, 0);
    return rc ? rc : metadata(s, "process_sort_index", p->pid, NULL, "sort_index", NULL, p->rank);
}

static int c_track(export_sink *s, const export_track *t)
{
    if (t->kind == EXP_TRACK_COUNTER)
        return 0; /* a C event names its counter */
    int rc = metadata(s, "thread_name", t->pid, t, "name", t->name, 0);
    return rc ? rc : metadata(s, "thread_sort_index", t->pid, t, "sort_index", NULL, t->sort);
}

static int flow(export_sink *s, const export_track *t, const char *ph, uint64_t id, uint64_t ts)
{
    cJSON *o = event(ph, "collective", t, 0);
    if (!o)
        return -ENOMEM;
    cJSON_AddStringToObject(o, "cat", "flow");
    char b[24];
    snprintf(b, sizeof(b), "0x%016" PRIx64, id);
    cJSON_AddStringToObject(o, "id", b);
    add_us(o, "ts", ts);
    if (ph[0] == 'f')
        cJSON_AddStringToObject(o, "bp", "e");
    return put(s, o);
}

static int c_slice(export_sink *s, const export_slice *sl)
{
    cJSON *o = event(sl->open ? "B" : "X", sl->name, sl->track, 0);
    if (!o)
        return -ENOMEM;
    cJSON_AddStringToObject(o, "cat", sl->cat);
    add_us(o, "ts", sl->ts);
    if (!sl->open)
        add_us(o, "dur", sl->dur);
    add_args(o, sl->args, sl->nargs);
    int rc = put(s, o);
    for (size_t i = 0; !rc && i < sl->n_out; i++)
        rc = flow(s, sl->track, "s", sl->flow_out[i], sl->ts + 1);
    for (size_t i = 0; !rc && i < sl->n_in; i++)
        rc = flow(s, sl->track, "f", sl->flow_in[i], sl->in_ts);
    return rc;
}

static int c_instant(export_sink *s, const export_instant *in)
{
    cJSON *o = event("i", in->name, in->track, 0);
    if (!o)
        return -ENOMEM;
    cJSON_AddStringToObject(o, "cat", in->cat);
    cJSON_AddStringToObject(o, "s", "t");
    add_us(o, "ts", in->ts);
    add_args(o, in->args, in->nargs);
    return put(s, o);
}

static int c_counter(export_sink *s, const export_track *t, uint64_t ts, double v)
{
    cJSON *o = event("C", t->group, t, 0);
    if (!o)
        return -ENOMEM;
    add_us(o, "ts", ts);
    cJSON *args = cJSON_AddObjectToObject(o, "args");
    if (args)
        cJSON_AddNumberToObject(args, t->series, v);
    return put(s, o);
}

static int c_end(export_sink *s)
{
    if (fputs("\n]}\n", s->f) < 0 || fflush(s->f) != 0 || ferror(s->f))
        return -(errno ? errno : EIO);
    return 0;
}

static void c_free(export_sink *s) { free(s); }

static const export_ops chrome_ops = {c_begin, c_process, c_track, c_slice, c_instant, c_counter, c_end, c_free};

export_sink *export_chrome_new(FILE *f, const export_ops **ops)
{
    export_sink *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    s->f = f;
    s->first = true;
    *ops = &chrome_ops;
    return s;
}

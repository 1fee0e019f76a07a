/*
 * export_track.c — a rank's tracks for tfdump --export (export_walk_internal.h):
 * a track per recording thread (its name from the THREAD record), per CUDA
 * device and stream, per counter (live bytes per device, RSS, loss,
 * grad_norm), each declared to the emitter before its first event; and the
 * pieces every handler uses: export times, uuids, slice arguments.
 */
#include "export_walk_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void export_say(const export_opts *o, int level, const char *fmt, ...)
{
    if (!o->log)
        return;
    char small[512], *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(small) && (msg = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    o->log(o->log_ctx, level, msg ? msg : small);
    if (msg != small)
        free(msg);
}

uint64_t export_uuid(const char *what, int rank, int64_t a, uint64_t b)
{
    char buf[96];
    int n = snprintf(buf, sizeof(buf), "tfdump/%s/%d/%" PRId64 "/%" PRIu64, what, rank, a, b);
    return tft_string_id(buf, (size_t)n);
}

/* Export time of a record time of this rank: ns since the export's origin, 0 at the least. */
uint64_t export_time(const export_rank *k, uint64_t ts)
{
    int64_t d = (int64_t)(ts - k->mono0), out, origin = k->origin;
    const core_clock_pair *p = k->follow ? core_clock_track_at(&k->track, ts) : NULL;
    if (p && __builtin_add_overflow(origin, p->real_minus_mono - k->rm0, &origin))
        return 0;
    if (__builtin_add_overflow(origin, d, &out))
        return d > 0 ? UINT64_MAX / 4 : 0;
    return out < 0 ? 0 : (uint64_t)out;
}

void export_set_err(export_rank *k, int e)
{
    if (e && !k->err)
        k->err = e;
}

void export_arg_int(export_arg *a, int *n, const char *key, int64_t v)
{
    a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_INT, .v.i = v};
}

void export_arg_uint(export_arg *a, int *n, const char *key, uint64_t v)
{
    a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_UINT, .v.u = v};
}

void export_arg_str(export_arg *a, int *n, const char *key, const char *v)
{
    if (v)
        a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_STR, .v.s = v};
}

void export_arg_hex(export_arg *a, int *n, const char *key, uint64_t v)
{
    a[(*n)++] = (export_arg){.key = key, .type = EXP_ARG_HEX, .v.u = v};
}

void export_arg_step(export_arg *a, int *n, int64_t step)
{
    if (step != TFT_STEP_NONE)
        export_arg_int(a, n, "step", step);
}

export_thread *export_thread_at(export_rank *k, int slot)
{
    export_thread *th = &k->threads[slot];
    if (th->declared)
        return th;
    th->declared = true;
    export_track *t = &th->track;
    *t = (export_track){.kind = EXP_TRACK_THREAD, .parent = k->proc.uuid, .pid = k->proc.pid,
                     .tid = k->proc.pid * 1000 + slot, .sort = slot};
    t->uuid = export_uuid("thread", k->rank, slot, 0);
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
    export_set_err(k, k->ops->track(k->sink, t));
    return th;
}

export_thread *export_cur_thread(export_rank *k) { return export_thread_at(k, k->cur); }

const export_track *export_async_track(export_rank *k)
{
    if (!k->async_declared) {
        k->async_declared = true;
        int slot = EXP_THREADS_MAX - 1;
        k->async = (export_track){.kind = EXP_TRACK_THREAD, .parent = k->proc.uuid, .pid = k->proc.pid,
                               .tid = k->proc.pid * 1000 + slot, .sort = slot,
                               .uuid = export_uuid("async", k->rank, 0, 0)};
        snprintf(k->async.name, sizeof(k->async.name), "collectives overlapping other work");
        export_set_err(k, k->ops->track(k->sink, &k->async));
    }
    return &k->async;
}

export_stream *export_stream_of(export_rank *k, int32_t device, uint64_t stream)
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
                     .uuid = export_uuid("stream", k->rank, device, stream)};
    if (i == EXP_STREAMS_MAX)
        snprintf(t->name, sizeof(t->name), "device streams %d and later", i);
    else
        snprintf(t->name, sizeof(t->name), "cuda:%d stream %" PRIu64, (int)device, stream);
    export_set_err(k, k->ops->track(k->sink, t));
    return s;
}

void export_counter(export_rank *k, int slot, uint64_t ts, double v)
{
    export_track *t = &k->counters[slot];
    if (!k->counter_declared[slot]) {
        k->counter_declared[slot] = true;
        *t = (export_track){.kind = EXP_TRACK_COUNTER, .parent = k->proc.uuid, .pid = k->proc.pid,
                         .uuid = export_uuid("counter", k->rank, slot, 0), .sort = 1000 + slot};
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
        export_set_err(k, k->ops->track(k->sink, t));
    }
    export_set_err(k, k->ops->counter(k->sink, t, ts, v));
}

void export_emit_instant(export_rank *k, uint64_t ts, const char *name, const char *cat, const export_arg *args, int nargs)
{
    export_thread *th = export_cur_thread(k);
    export_instant in = {.track = &th->track, .ts = ts, .name = name, .cat = cat, .nargs = nargs};
    memcpy(in.args, args, sizeof(export_arg) * (size_t)nargs);
    export_set_err(k, k->ops->instant(k->sink, &in));
}

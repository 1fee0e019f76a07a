/*
 * dump_extract_file.c — one rank file of tfdump --extract copied into OUT
 * (dump_extract_internal.h): its records read with the format library's
 * reader and those kept written again with its writer.
 *
 * What is kept of each selected rank file, in file order:
 *   - every record whose step lies in the window A..B (STEP, OP, TENSOR,
 *     CAPTURE, COLLECTIVE, KERNEL, ALLOC, FREE, SYNC, CHECKPOINT, ...);
 *   - every record outside any step (the run's context: allocations made
 *     before the first step, step-less ops), every COMM record and the
 *     PROCESS start and exit records whatever their step, so the window
 *     keeps its meaning (who the communicators are, how the process ended;
 *     an exit after the window keeps its step, so the extract's records
 *     reach that step: tfdiff does not take the window's end for an early
 *     end of the run);
 *   - the DROPPED records whose lost records lie in the window, outside steps,
 *     or in unknown steps, with their counts in the chunk headers (§5.11);
 *     losses the source's chunk headers count without a DROPPED record (where
 *     they happened is unknown) are carried too, so the extract never looks
 *     more complete than its source;
 *   - THREAD switches where the kept records change thread (the writer repeats
 *     the current one in every chunk); THREAD ends as they come.
 * Left out: records of steps outside the window, among them allocations made
 * in earlier steps that are still live in the window (the window's memory
 * is counted from its own allocations and those outside steps; growth inside
 * the window shows as it did). A flight-recorder source (--keep-steps) has
 * full records only from its first full step: a window starting earlier is
 * narrowed to it (with a warning), the steps before holding only part of
 * their records; a window ending before it is refused.
 *
 * --stats health|shape rewrites TENSOR records of a richer mode to that mode,
 * zeroing the fields it does not have: FORMAT.md §5.4 says a record's `mode`
 * tells which statistics are valid and the others are 0, so a reduced record
 * says honestly what it holds. Captured tensor bytes stay.
 */
#include "dump_extract_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether a DROPPED record speaks of the window: its lost records' steps
 * meet lo..hi, lie outside steps, or are unknown (a record before 1.4). */
static bool dropped_kept(const tft_rec *rec, int64_t lo, int64_t hi)
{
    if (rec->len < sizeof(tft_rec_dropped))
        return true;
    const tft_rec_dropped *d = (const tft_rec_dropped *)rec;
    if (d->first_step == TFT_STEP_NONE)
        return true;
    return d->first_step <= hi && d->last_step >= lo;
}

static bool rec_kept(const tft_rec *rec, int64_t lo, int64_t hi)
{
    if (rec->kind == TFT_REC_DROPPED)
        return dropped_kept(rec, lo, hi);
    const tft_rec_kind_info *k = tft_rec_kind(rec->kind);
    if ((k && (k->flags & TFT_KIND_RUN_LONG)) || rec->step == TFT_STEP_NONE)
        return true;
    if (rec->kind == TFT_REC_PROCESS && rec->len >= sizeof(tft_rec_process) &&
        ((const tft_rec_process *)rec)->event != TFT_PROC_RSS)
        return true; /* how the process started and ended, at whatever step */
    return rec->step >= lo && rec->step <= hi;
}

/* rec itself, or a copy in buf reduced to statistics mode `to` (fields the
 * mode lacks zeroed, trailing fields of a newer minor cut). */
static const tft_rec *reduce_tensor(const tft_rec *rec, int to, tft_rec_tensor *buf)
{
    if (to < 0 || rec->kind != TFT_REC_TENSOR || rec->len < sizeof(tft_rec_tensor))
        return rec;
    const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
    if (t->mode <= to)
        return rec;
    memcpy(buf, t, sizeof(*buf));
    buf->h.len = sizeof(*buf);
    buf->mode = (uint8_t)to;
    tft_stats *s = &buf->stats;
    if (to < TFT_STATS_FULL) {
        s->over_fp16 = s->over_bf16 = s->under_fp16 = 0;
        s->mean = s->std = s->l1 = s->l2 = s->absmax = 0;
    }
    if (to < TFT_STATS_HEALTH) {
        s->nan = s->pinf = s->ninf = s->zero = s->fingerprint = 0;
        s->min = s->max = 0;
    }
    return &buf->h;
}

static void log_stderr(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= TFT_LOG_WARN)
        dump_err("%s", msg);
}

/* The writer's copy of the source reader's texts of rec's strings. */
static int copy_strings(tft_writer *w, const tft_reader *r, const tft_rec *rec)
{
    uint64_t ids[4];
    int n = tft_rec_string_ids(rec, ids);
    for (int k = 0; k < n; k++) {
        const char *s = ids[k] ? tft_reader_string(r, ids[k]) : NULL;
        if (s && !tft_writer_string(w, s, strlen(s)) && strlen(s) <= TFT_STRING_MAX)
            return -ENOMEM;
    }
    return 0;
}

typedef struct ex_thread {
    bool have;          /* a SWITCH was read */
    tft_rec_thread rec; /* the last SWITCH read */
    bool emitted;       /* a SWITCH was written */
    int32_t tid;        /* ... of this thread */
    uint32_t index;
} ex_thread;

/* Writes the pending THREAD switch when the kept record that follows comes
 * from another thread than the last one written. */
static int thread_before(tft_writer *w, const tft_reader *r, ex_thread *th)
{
    if (!th->have || (th->emitted && th->tid == th->rec.tid && th->index == th->rec.index))
        return 0;
    int e = copy_strings(w, r, &th->rec.h);
    if (!e)
        e = tft_writer_append(w, &th->rec.h);
    th->emitted = true;
    th->tid = th->rec.tid;
    th->index = th->rec.index;
    return e;
}

/* One record read: kept (and written) or not. */
static int extract_rec(tft_writer *w, const tft_reader *r, const tft_rec *rec, ex_file *f, int64_t hi,
                       const ex_sel *s, ex_thread *th, uint64_t *drop_recs)
{
    if (rec->kind == TFT_REC_THREAD && rec->len >= sizeof(tft_rec_thread) &&
        ((const tft_rec_thread *)rec)->event == TFT_THREAD_SWITCH) {
        memcpy(&th->rec, rec, sizeof(th->rec));
        th->rec.h.len = sizeof(th->rec);
        th->have = true;
        return 0;
    }
    if (rec->kind == TFT_REC_DROPPED && rec->len >= TFT_REC_DROPPED_MIN_BYTES)
        *drop_recs += ((const tft_rec_dropped *)rec)->count;
    if (!rec_kept(rec, f->lo, hi))
        return 0;
    int e = thread_before(w, r, th);
    tft_rec_tensor buf;
    const tft_rec *out = reduce_tensor(rec, s->stats, &buf);
    if (!e)
        e = copy_strings(w, r, out);
    if (!e)
        e = tft_writer_append(w, out);
    if (e == -EINVAL) { /* read, yet malformed to the writer: left out, counted */
        f->refused++;
        return 0;
    }
    if (e)
        return e;
    if (rec->kind == TFT_REC_DROPPED && rec->len >= TFT_REC_DROPPED_MIN_BYTES)
        tft_writer_add_dropped(w, ((const tft_rec_dropped *)rec)->count); /* same chunk (§5.11) */
    f->kept++;
    if (rec->step != TFT_STEP_NONE) {
        if (f->first == TFT_STEP_NONE || rec->step < f->first)
            f->first = rec->step;
        if (f->last == TFT_STEP_NONE || rec->step > f->last)
            f->last = rec->step;
    }
    return 0;
}

int dump_extract_file(dump_trace *d, int dirfd, const char *out, const ex_sel *s, ex_file *f)
{
    const char *src = tft_trace_file_name(d->t, f->idx);
    tft_reader *r = tft_trace_reader(d->t, f->idx);
    if (!r)
        return dump_read_error(d->names[f->idx], d->names[f->idx], -errno);
    long long keep = 0;
    int64_t first_full = TFT_STEP_NONE, last = TFT_STEP_NONE;
    tft_reader_full_steps(r, &keep, &first_full, &last);
    f->lo = s->lo;
    f->first = f->last = TFT_STEP_NONE;
    if (keep > 0 && first_full != TFT_STEP_NONE && s->hi < first_full) {
        dump_err("%s: recorded with --keep-steps %lld, it has full records from step %" PRId64
                 " only: the steps asked for hold only part of their records; extract steps from %" PRId64,
                 src, keep, first_full, first_full);
        return DUMP_USAGE;
    }
    if (keep > 0 && first_full != TFT_STEP_NONE && s->lo < first_full) {
        dump_err("%s: recorded with --keep-steps %lld, it has full records from step %" PRId64
                 " only; the extract starts there (the steps before hold only part of their records)",
                 src, keep, first_full);
        f->lo = first_full;
    }
    int fd = openat(dirfd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 && fchmod(fd, (mode_t)s->mode) < 0) { /* exactly the bits asked, whatever the umask */
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        dump_err("%s/%s: cannot create: %s", out, f->name, strerror(errno));
        return DUMP_USAGE;
    }
    tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = 3, .log = log_stderr);
    tft_writer *w = tft_writer_fdopen(fd, tft_trace_file_info(d->t, f->idx), &wo);
    if (!w) {
        dump_err("%s/%s: cannot write: %s", out, f->name, strerror(errno));
        return DUMP_USAGE;
    }
    ex_thread th = {0};
    uint64_t drop_recs = 0;
    const tft_rec *rec;
    int re, we = 0; /* the reader's and the writer's errors */
    while ((re = tft_reader_next(r, &rec)) == 1) {
        f->read++;
        if ((we = extract_rec(w, r, rec, f, s->hi, s, &th, &drop_recs)) < 0)
            break;
    }
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    f->integrity = st.integrity;
    if (re == 0 && we == 0 && st.dropped > drop_recs)
        tft_writer_add_dropped(w, st.dropped - drop_recs); /* losses without a record: place unknown */
    int ce = tft_writer_close(w);
    tft_trace_release(d->t, f->idx);
    if (re < 0)
        return dump_read_error(d->names[f->idx], d->names[f->idx], re);
    if (f->refused)
        dump_err("%s: %" PRIu64 " malformed records left out of the extract", src, f->refused);
    if (we < 0 || ce < 0) {
        dump_err("%s/%s: write failed: %s", out, f->name, strerror(-(we < 0 ? we : ce)));
        return DUMP_USAGE;
    }
    return DUMP_OK;
}

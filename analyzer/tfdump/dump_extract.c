/*
 * extract.c — tfdump --extract IN OUT: a smaller trace holding the steps and
 * ranks a CI job keeps (the window around a regression), written as a trace
 * like any other: every record is read with the format library's reader and
 * written again with its writer, so `tfdump --verify OUT` checks it and
 * `tfdiff` compares it. OUT's manifest carries an `extract` object saying
 * where it came from and what was kept (FORMAT.md §2.3).
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
 *
 * Memory: one chunk per reader and writer plus the writer's table of the
 * distinct strings the kept records name: flat in trace length. Unknown
 * record kinds (a newer minor) are kept by their step; strings they name are
 * not known here and are lost.
 */
#include "dump_internal.h"
#include "tft_writer_internal.h" /* tft_manifest_write_textat */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What the extract keeps, parsed from the options. */
typedef struct ex_sel {
    int64_t lo, hi;     /* step window, inclusive */
    bool steps_given;
    int *ranks;         /* ranks to keep (read-as ranks), sorted; NULL = all */
    int nranks;
    int stats;          /* TFT_STATS_* to reduce to, -1 as recorded */
} ex_sel;

/* What happened to one rank file. */
typedef struct ex_file {
    int idx;            /* rank file index in the source trace */
    int rank;           /* read-as rank */
    char name[64];      /* file name in OUT: the source's, rank-NNNNN.tft for another name */
    uint64_t read, kept;
    uint64_t refused;   /* records the writer refused as malformed (left out) */
    int64_t lo;         /* window start after narrowing to the full steps */
    int64_t first, last; /* steps kept, TFT_STEP_NONE none */
    int integrity;      /* the source file's, as read (enum tft_integrity) */
} ex_file;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "0,2,5-7" into a sorted array. Returns 0, -EINVAL or -ENOMEM. */
static int parse_ranks(const char *s, ex_sel *sel)
{
    size_t cap = 16;
    int *v = malloc(cap * sizeof(*v));
    int n = 0;
    if (!v)
        return -ENOMEM;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b = a;
        if (errno || end == p || a < 0 || a > INT32_MAX || *p == '-' || *p == '+')
            goto bad;
        if (*end == '-') {
            const char *q = end + 1;
            b = strtol(q, &end, 10);
            if (errno || end == q || b < a || b > INT32_MAX || *q == '-' || *q == '+' || b - a > 65536)
                goto bad;
        }
        for (long r = a; r <= b; r++) {
            if ((size_t)n == cap) {
                int *nv = realloc(v, (cap *= 2) * sizeof(*v));
                if (!nv) {
                    free(v);
                    return -ENOMEM;
                }
                v = nv;
            }
            v[n++] = (int)r;
        }
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        p = end;
    }
    if (!n)
        goto bad;
    qsort(v, (size_t)n, sizeof(*v), cmp_int);
    sel->ranks = v;
    sel->nranks = n;
    return 0;
bad:
    free(v);
    return -EINVAL;
}

static bool rank_selected(const ex_sel *s, int rank)
{
    return !s->ranks || bsearch(&rank, s->ranks, (size_t)s->nranks, sizeof(int), cmp_int);
}

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

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Copies what s keeps of rank file f->idx into dirfd/f->name. Returns
 * DUMP_OK or DUMP_USAGE (said why). */
static int extract_file(dump_trace *d, int dirfd, const char *out, const ex_sel *s, ex_file *f)
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
    int fd = openat(dirfd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
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

static void hex_id(const uint8_t id[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* The manifest's rank entry of file `name`, or NULL. */
static const tft_manifest_rank *manifest_rank(const tft_manifest *m, const char *name)
{
    for (int i = 0; m && i < m->nranks; i++)
        if (!strcmp(m->ranks[i].file, name))
            return &m->ranks[i];
    return NULL;
}

static void json_step_pair(cJSON *o, const char *key, bool given, int64_t a, int64_t b)
{
    if (!given) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    cJSON_AddItemToArray(arr, a == INT64_MIN + 1 ? cJSON_CreateNull() : cJSON_CreateNumber((double)a));
    cJSON_AddItemToArray(arr, b == INT64_MAX ? cJSON_CreateNull() : cJSON_CreateNumber((double)b));
}

/* The `extract` object of OUT's manifest (FORMAT.md §2.3). */
static cJSON *extract_json(const dump_trace *d, const char *in, const ex_sel *s, const ex_file *fs, int n,
                           const char *src_run_id)
{
    cJSON *x = cJSON_CreateObject();
    char *abs = realpath(in, NULL);
    cJSON_AddStringToObject(x, "source", abs ? abs : in);
    free(abs);
    cJSON_AddStringToObject(x, "source_run_id", src_run_id);
    const tft_manifest *m = tft_trace_manifest(d->t);
    dump_json_str_or_null(x, "source_tool_version", m && m->tool_version[0] ? m->tool_version : NULL);
    cJSON_AddStringToObject(x, "tool_version", tft_version());
    json_step_pair(x, "steps", s->steps_given, s->lo, s->hi);
    cJSON *ranks = cJSON_AddArrayToObject(x, "ranks");
    uint64_t read = 0, kept = 0;
    for (int i = 0; i < n; i++) {
        cJSON_AddItemToArray(ranks, cJSON_CreateNumber(fs[i].rank));
        read += fs[i].read, kept += fs[i].kept;
    }
    cJSON_AddNumberToObject(x, "source_ranks", d->n);
    const char *mode[] = {"shape", "health"};
    cJSON_AddItemToObject(x, "stats", s->stats < 0 ? cJSON_CreateNull() : cJSON_CreateString(mode[s->stats]));
    core_json_u64(x, "records_read", read);
    core_json_u64(x, "records_kept", kept);
    cJSON *files = cJSON_AddArrayToObject(x, "files");
    for (int i = 0; i < n; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "file", fs[i].name);
        cJSON_AddNumberToObject(f, "rank", fs[i].rank);
        json_step_pair(f, "kept_steps", fs[i].first != TFT_STEP_NONE, fs[i].first, fs[i].last);
        if (fs[i].lo != s->lo)
            cJSON_AddNumberToObject(f, "narrowed_to", (double)fs[i].lo);
        core_json_u64(f, "records_kept", fs[i].kept);
        cJSON_AddStringToObject(f, "source_integrity", dump_integrity_name(fs[i].integrity));
        if (fs[i].refused)
            core_json_u64(f, "records_refused", fs[i].refused);
        cJSON_AddItemToArray(files, f);
    }
    return x;
}

/* OUT's manifest: the source's run (or what the rank files' headers say),
 * the kept ranks, and the `extract` object. */
static int write_manifest(const dump_trace *d, int dirfd, const char *in, const ex_sel *s, const ex_file *fs,
                          int n)
{
    const tft_manifest *src = tft_trace_manifest(d->t);
    tft_manifest m = {0};
    tft_manifest_rank *ranks = calloc((size_t)n + 1, sizeof(*ranks));
    if (!ranks)
        return -ENOMEM;
    if (src) {
        m = *src; /* shallow: only the ranks and collectors are replaced */
    } else {
        const tft_file_info *fi = tft_trace_file_info(d->t, 0);
        hex_id(fi->run_id, m.run_id);
        snprintf(m.host, sizeof(m.host), "%s", fi->host);
        m.world_size = fi->world_size;
        m.start_ns = fi->start_realtime_ns;
        m.exit_status = -1;
    }
    char src_run_id[33];
    snprintf(src_run_id, sizeof(src_run_id), "%s", m.run_id);
    for (int i = 0; i < n; i++) {
        const tft_manifest_rank *mr = manifest_rank(src, fs[i].name);
        const tft_file_info *fi = tft_trace_file_info(d->t, fs[i].idx);
        if (mr)
            ranks[i] = *mr;
        else
            ranks[i] = (tft_manifest_rank){.rank = fs[i].rank, .pid = fi->pid};
        snprintf(ranks[i].file, sizeof(ranks[i].file), "%s", fs[i].name);
        if (!src && i == 0)
            hex_id(fi->run_id, m.run_id);
    }
    m.ranks = ranks;
    m.nranks = n;
    m.collectors = NULL;
    m.ncollectors = 0;
    m.dropped_stalled = 0; /* the rank files' dropped counts say what the extract lost */
    m.complete = src ? src->complete : 1;
    snprintf(m.tool_version, sizeof(m.tool_version), "%s", tft_version());
    char *text = tft_manifest_to_json(&m);
    free(ranks);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root)
        return -ENOMEM;
    cJSON_AddItemToObject(root, "extract", extract_json(d, in, s, fs, n, src_run_id));
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    if (!out)
        return -ENOMEM;
    int e = tft_manifest_write_textat(dirfd, out, 0);
    cJSON_free(out);
    return e;
}

/* OUT must not exist, or be an empty directory: an extract never writes
 * over files. Returns an open directory fd or -1 (said why). */
static int open_out(const char *out, bool *created)
{
    *created = mkdir(out, 0755) == 0;
    if (!*created && errno != EEXIST) {
        dump_err("%s: cannot create the output directory: %s", out, strerror(errno));
        return -1;
    }
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        dump_err("%s: cannot open the output directory: %s", out, strerror(errno));
        return -1;
    }
    int dup_fd = dup(fd);
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    bool empty = dir != NULL;
    for (struct dirent *de; dir && (de = readdir(dir));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            empty = false;
    if (dir)
        closedir(dir);
    else if (dup_fd >= 0)
        close(dup_fd);
    if (!empty) {
        dump_err("%s: the output directory exists and is not empty; give a new path (an extract never "
                 "writes over files)", out);
        close(fd);
        return -1;
    }
    return fd;
}

int dump_extract(dump_trace *d, const dump_opts *o)
{
    ex_sel s = {.lo = o->have_steps ? o->step_lo : INT64_MIN + 1, .hi = o->have_steps ? o->step_hi : INT64_MAX,
                .steps_given = o->have_steps, .stats = o->stats_to};
    int status = DUMP_USAGE;
    if (o->ranks_list && parse_ranks(o->ranks_list, &s) < 0) {
        dump_err("--ranks needs a list of ranks such as 0,2 or 0-3, not '%s'", o->ranks_list);
        return DUMP_USAGE;
    }
    if (o->rank >= 0 && !s.ranks) {
        s.ranks = malloc(sizeof(int));
        if (!s.ranks)
            return DUMP_USAGE;
        s.ranks[0] = o->rank;
        s.nranks = 1;
    }
    ex_file *fs = calloc((size_t)d->n + 1, sizeof(*fs));
    int n = 0, dirfd = -1;
    if (!fs)
        goto out;
    for (int i = 0; i < d->n; i++) {
        int rank = tft_trace_rank_id(d->t, i);
        if (!rank_selected(&s, rank))
            continue;
        fs[n] = (ex_file){.idx = i, .rank = rank};
        const char *bn = base_name(tft_trace_file_name(d->t, i));
        /* readers list rank-*.tft: a rank file given by another name gets its rank's */
        if (fnmatch("rank-*.tft", bn, 0) == 0 && strlen(bn) < sizeof(fs[n].name))
            snprintf(fs[n].name, sizeof(fs[n].name), "%s", bn);
        else
            snprintf(fs[n].name, sizeof(fs[n].name), "rank-%05d.tft", rank);
        n++;
    }
    if (!n) {
        dump_err("%s: none of its ranks is among those of --ranks/--rank; nothing to extract", o->path);
        goto out;
    }
    bool created = false;
    if ((dirfd = open_out(o->extract_out, &created)) < 0)
        goto out;
    status = DUMP_OK;
    int done = 0;
    for (; done < n && status == DUMP_OK; done++)
        status = extract_file(d, dirfd, o->extract_out, &s, &fs[done]);
    if (status == DUMP_OK) {
        int e = write_manifest(d, dirfd, o->path, &s, fs, n);
        if (e) {
            dump_err("%s/manifest.json: cannot write: %s", o->extract_out, strerror(-e));
            status = DUMP_USAGE;
        }
    }
    if (status != DUMP_OK) { /* no half-written trace left behind */
        for (int i = 0; i < done; i++)
            unlinkat(dirfd, fs[i].name, 0);
        if (created)
            rmdir(o->extract_out);
    } else {
        uint64_t read = 0, kept = 0;
        for (int i = 0; i < n; i++)
            read += fs[i].read, kept += fs[i].kept;
        fprintf(stderr, "tfdump: %s: %d rank file%s, %" PRIu64 " of %" PRIu64 " records kept\n", o->extract_out, n,
                n == 1 ? "" : "s", kept, read);
    }
out:
    if (dirfd >= 0)
        close(dirfd);
    free(fs);
    free(s.ranks);
    return status;
}

/* "steps 4..6" / "every step" of an `extract.steps` value. */
static void steps_text(const cJSON *st, char *buf, size_t n)
{
    const cJSON *a = cJSON_GetArrayItem(st, 0), *b = cJSON_GetArrayItem(st, 1);
    if (!cJSON_IsArray(st) || !a || !b) {
        snprintf(buf, n, "every step");
        return;
    }
    char x[24] = "", y[24] = "";
    if (cJSON_IsNumber(a))
        snprintf(x, sizeof(x), "%.0f", a->valuedouble);
    if (cJSON_IsNumber(b))
        snprintf(y, sizeof(y), "%.0f", b->valuedouble);
    snprintf(buf, n, "steps %s..%s", x, y);
}

void dump_extract_describe(const char *path, FILE *f)
{
    char mp[4096];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        (size_t)snprintf(mp, sizeof(mp), "%s/manifest.json", path) >= sizeof(mp))
        return;
    FILE *in = fopen(mp, "r");
    if (!in)
        return;
    char *text = malloc(1u << 20);
    size_t len = text ? fread(text, 1, (1u << 20) - 1, in) : 0;
    fclose(in);
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "extract");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(x, "source");
    if (cJSON_IsObject(x) && cJSON_IsString(src)) {
        char steps[64], ranks[128] = "";
        steps_text(cJSON_GetObjectItemCaseSensitive(x, "steps"), steps, sizeof(steps));
        size_t k = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(x, "ranks"))
        if (cJSON_IsNumber(r) && k < sizeof(ranks) - 16)
            k += (size_t)snprintf(ranks + k, sizeof(ranks) - k, "%s%.0f", k ? "," : "", r->valuedouble);
        const cJSON *stats = cJSON_GetObjectItemCaseSensitive(x, "stats");
        fprintf(f, "extract      %s, rank%s %s of %s", steps, strchr(ranks, ',') ? "s" : "", ranks, src->valuestring);
        if (cJSON_IsString(stats))
            fprintf(f, " (statistics reduced to %s)", stats->valuestring);
        fputc('\n', f);
    }
    cJSON_Delete(root);
}

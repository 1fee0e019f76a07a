/*
 * export_run.c — tfdump --export chrome|perfetto OUT TRACE (export_internal.h):
 * the ranks asked for checked, OUT opened (stdout for "-"; never one of the
 * trace's own files), the emitter of the format begun, the rank files
 * walked one after the other, each on the export's one clock: monotonic
 * when every rank ran on one host; across hosts rank 0's through the
 * clocks' MPI alignment (core_clock.h) when the trace has it, else each
 * host's realtime.
 */
#include "core_out.h"
#include "core_clock.h"
#include "core_escape.h"
#include "export_walk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Whether rank is among those o selects. */
bool export_rank_selected(const export_opts *o, int rank)
{
    if (o->nranges == 0)
        return o->rank < 0 || rank == o->rank;
    for (int i = 0; i < o->nranges; i++)
        if (rank >= o->ranges[i][0] && rank <= o->ranges[i][1])
            return true;
    return false;
}

typedef struct export_clock {
    bool one_host;
    uint64_t base;        /* earliest file start (monotonic, or realtime across hosts) */
    int64_t *adj;         /* across hosts with clocks aligned (core_clock.h): per rank file, NULL none */
    uint64_t err;         /* adj's largest error bound */
} export_clock;

/* A file's start on the export's clock: monotonic on one host; across
 * hosts rank 0's realtime when the clocks were aligned, else the host's. */
static uint64_t start_of(const export_clock *c, const tft_file_info *fi, int i)
{
    if (c->one_host)
        return fi->start_monotonic_ns;
    return c->adj ? fi->start_monotonic_ns + (uint64_t)c->adj[i] : fi->start_realtime_ns;
}

static export_clock clock_of(tft_trace *t, const export_opts *o)
{
    int n = tft_trace_nranks(t);
    export_clock c = {.one_host = true, .base = UINT64_MAX, .adj = NULL};
    const char *host = NULL;
    for (int i = 0; i < n; i++) {
        const tft_file_info *fi = tft_trace_file_info(t, i);
        if (!fi || !export_rank_selected(o, tft_trace_rank_id(t, i)))
            continue;
        if (host && strncmp(host, fi->host, sizeof(fi->host)) != 0)
            c.one_host = false;
        host = fi->host;
    }
    if (!c.one_host && (c.adj = calloc((size_t)n + 1, sizeof(*c.adj))) &&
        !core_clock_align(t, n, c.adj, &c.err)) {
        free(c.adj);
        c.adj = NULL;
    }
    for (int i = 0; i < n; i++) {
        const tft_file_info *fi = tft_trace_file_info(t, i);
        if (!fi || !export_rank_selected(o, tft_trace_rank_id(t, i)))
            continue;
        uint64_t s = start_of(&c, fi, i);
        if (s < c.base)
            c.base = s;
    }
    if (c.base == UINT64_MAX)
        c.base = 0;
    return c;
}

static int32_t pid_of(int rank, int idx)
{
    return rank >= 0 && rank < 2000000 ? rank + 1 : 2000001 + idx % 140000;
}

static void rank_init(export_rank *k, tft_trace *t, int idx, const export_clock *clk, uint32_t seq_id)
{
    const tft_file_info *fi = tft_trace_file_info(t, idx);
    k->rank = tft_trace_rank_id(t, idx);
    k->mono0 = fi->start_monotonic_ns;
    uint64_t off = start_of(clk, fi, idx) - clk->base;
    k->origin = off > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)off;
    k->follow = !clk->one_host && !clk->adj;
    core_clock_pair_start(&k->clk, fi);
    k->rm0 = k->clk.real_minus_mono;
    char host[sizeof(fi->host) + 1], how[80] = "";
    memcpy(host, fi->host, sizeof(fi->host));
    host[sizeof(fi->host)] = '\0';
    /* across hosts, how this rank's times compare with the others' (docs/MULTINODE.md) */
    if (clk->adj)
        snprintf(how, sizeof(how), "; clock: rank 0's through MPI, error within %.1f us", 2 * clk->err / 1e3);
    else if (k->follow)
        snprintf(how, sizeof(how), "; clock: its host's realtime");
    snprintf(k->pname, sizeof(k->pname), "rank %d (pid %d on %.64s%s)", k->rank, (int)fi->pid, host, how);
    k->proc = (export_process){.rank = k->rank, .pid = pid_of(k->rank, idx), .os_pid = fi->pid,
                            .uuid = export_uuid("process", k->rank, idx, 0), .seq_id = seq_id, .name = k->pname};
    tft_u64map_init(&k->open, &(tft_u64map_opts){.vsize = sizeof(export_call), .max_n = EXP_OPEN_MAX, .hashed = true});
    tft_u64map_init(&k->live, &(tft_u64map_opts){.vsize = sizeof(export_live), .max_n = EXP_LIVE_MAX, .hashed = true});
}

static int export_ranks(tft_trace *t, const export_opts *o, const export_ops *ops, export_sink *sink)
{
    int n = tft_trace_nranks(t);
    export_clock clk = clock_of(t, o);
    export_rank *k = malloc(sizeof(*k));
    export_thread *threads = calloc(EXP_THREADS_MAX, sizeof(export_thread));
    int rc = 0;
    uint32_t seq_id = 0;
    if (!k || !threads) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < n && !rc; i++) {
        if (!export_rank_selected(o, tft_trace_rank_id(t, i)) || !tft_trace_file_info(t, i))
            continue;
        memset(k, 0, sizeof(*k));
        memset(threads, 0, EXP_THREADS_MAX * sizeof(export_thread));
        k->ops = ops;
        k->sink = sink;
        k->threads = threads;
        /* a hostile record's nranks cannot make a slice carry more flows than the trace has ranks */
        k->max_members = n < EXP_FANOUT_MAX ? n : EXP_FANOUT_MAX;
        rank_init(k, t, i, &clk, ++seq_id);
        k->r = tft_trace_reader(t, i);
        if (!k->r) {
            export_say(o, TFT_LOG_ERROR, "%s: cannot read: %s", tft_trace_file_name(t, i), strerror(errno));
            rc = -EIO;
        } else {
            /* across hosts on realtime: the file's clock pairs first (one more read of it) */
            int ce = k->follow ? core_clock_track_read(&k->track, k->r, tft_trace_file_info(t, i)) : 0;
            if (ce < 0)
                export_say(o, TFT_LOG_WARN, "%s: its clock records could not all be read (%s): later times follow "
                           "the last one read", tft_trace_file_name(t, i), strerror(-ce));
            rc = export_walk_rank(k, o, tft_trace_file_name(t, i));
        }
        core_clock_track_free(&k->track);
        tft_u64map_free(&k->open);
        tft_u64map_free(&k->live);
        tft_trace_release(t, i);
    }
out:
    free(threads);
    free(k);
    free(clk.adj);
    return rc;
}

static char *command_line(const tft_manifest *m)
{
    size_t n = 1;
    for (int i = 0; m && i < m->argc; i++)
        n += strlen(m->argv[i]) + 1;
    char *s = malloc(n), *p = s;
    if (!s)
        return NULL;
    *p = '\0';
    for (int i = 0; m && i < m->argc; i++) {
        size_t l = strlen(m->argv[i]);
        memcpy(p, m->argv[i], l);
        p += l;
        *p++ = i + 1 < m->argc ? ' ' : '\0';
    }
    return s;
}

static bool same_file(const struct stat *a, const char *path)
{
    struct stat b;
    return path && stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* Whether OUT names one of the trace's own files (a rank file, the
 * manifest, the rank file given as TRACE): writing it would destroy the trace. */
static bool out_is_trace(tft_trace *t, const export_opts *o)
{
    struct stat st;
    if (stat(o->out, &st) != 0)
        return false;
    if (same_file(&st, o->path))
        return true;
    for (int i = 0; i < tft_trace_nranks(t); i++)
        if (same_file(&st, tft_trace_file_name(t, i)))
            return true;
    char m[4096];
    return snprintf(m, sizeof(m), "%s/manifest.json", o->path) < (int)sizeof(m) && same_file(&st, m);
}

int export_run(tft_trace *t, const export_opts *o)
{
    int n = tft_trace_nranks(t), matches = 0;
    for (int i = 0; i < n; i++)
        matches += export_rank_selected(o, tft_trace_rank_id(t, i));
    if (matches == 0) {
        export_say(o, TFT_LOG_ERROR, "%s: no rank of this trace (%d rank file%s) matches --rank/--ranks", o->path, n,
                   n == 1 ? "" : "s");
        return -EIO;
    }
    bool to_stdout = strcmp(o->out, "-") == 0;
    if (!to_stdout && out_is_trace(t, o)) {
        export_say(o, TFT_LOG_ERROR, "%s: is a file of the trace %s; give another OUT for the export", o->out,
                   o->path);
        return -EIO;
    }
    core_out out = {0};
    if (!to_stdout && core_out_open(&out, o->out, o->mode ? o->mode : 0600) < 0) {
        export_say(o, TFT_LOG_ERROR, "%s: cannot write the export: %s", o->out, core_out_strerror(&out));
        return -EIO;
    }
    FILE *f = to_stdout ? stdout : out.f;
    /* Chrome's JSON through the escaping stream: valid UTF-8 whatever bytes
     * the trace's names hold, nothing a terminal acts on */
    FILE *esc = o->format == EXP_PERFETTO ? NULL : core_escape_open(f, true);
    const export_ops *ops = NULL;
    export_sink *sink = o->format == EXP_PERFETTO ? export_perfetto_new(f, &ops)
                        : esc                     ? export_chrome_new(esc, &ops)
                                                  : NULL;
    const tft_manifest *m = tft_trace_manifest(t);
    char *cmd = command_line(m);
    int rc = sink && cmd ? 0 : -ENOMEM;
    if (!rc) {
        export_run_info run = {.run_id = m ? m->run_id : "", .command = cmd, .nranks = matches};
        rc = ops->begin(sink, &run);
        if (!rc)
            rc = export_ranks(t, o, ops, sink);
        if (!rc)
            rc = ops->end(sink);
    }
    free(cmd);
    if (sink)
        ops->free(sink);
    if (esc && fclose(esc) != 0 && !rc)   /* its last bytes into f */
        rc = errno == EPIPE ? -EPIPE : -EIO;
    if (rc == -EPIPE && to_stdout) {
        rc = 0; /* the reader went away: a quiet success, as for the other modes */
        clearerr(f);
    }
    if (rc && rc != -ENOMEM && rc != -EIO) { /* -EIO: said where it happened */
        export_say(o, TFT_LOG_ERROR, "%s: write error: %s", o->out, strerror(-rc));
        rc = -EIO;
    }
    if (to_stdout) {
        if (!rc && fflush(f) != 0 && errno != EPIPE) {
            export_say(o, TFT_LOG_ERROR, "%s: write error: %s", "stdout", strerror(errno));
            rc = -EIO;
        }
    } else if (rc) {
        core_out_abort(&out);   /* nothing half-written is left */
    } else if (core_out_commit(&out) != 0) {
        export_say(o, TFT_LOG_ERROR, "%s: write error: %s", o->out, strerror(errno));
        rc = -EIO;
    }
    return rc;
}

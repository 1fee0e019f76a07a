/*
 * trace.c — a trace directory (manifest + rank files) opened for reading,
 * and the k-way merge of its ranks by time or by (step, seq).
 *
 * A path to a single rank file is accepted as a one-rank trace. Rank files
 * are found by listing the directory (rank-*.tft), so a trace whose manifest
 * was never rewritten at the end (the launcher was killed) still opens.
 */
#include "format_internal.h"
#include "tft_writer_internal.h" /* tft_manifest_merge */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One rank file of the trace. */
typedef struct trace_file {
    char *path;              /* to open (owned) */
    char *name;              /* display name: "DIR/rank-00000.tft" (owned) */
    tft_file_info info;      /* its header */
    uint64_t dev, ino;       /* its identity: two names of one file are refused */
    int rank;                /* rank id, after renumbering */
    int part;                /* which piece of a PATH1+PATH2 trace it came from, 0 otherwise */
    tft_reader *r;           /* the open reader, NULL while closed (lazy traces) */
    bool have_st;            /* st holds the status of a reader released earlier */
    tft_reader_status st;
} trace_file;

struct tft_trace {
    tft_manifest manifest;
    int have_manifest;
    int n, cap;
    trace_file *f;
    bool lazy;               /* readers open on demand (tft_trace_open_lazy) */
    int parts;               /* pieces of a PATH1+PATH2 trace; 0 or 1 for one path */
    tft_reader_opts opts;    /* for opening readers later: the caller's log */
};

#define TLOG(opts, lvl, ...) tft_logf((opts) ? (opts)->log : NULL, (opts) ? (opts)->log_ctx : NULL, (lvl), __VA_ARGS__)

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists rank-*.tft in dir, sorted. Returns count or negative errno. */
static int list_rank_files(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "rank-", 5) != 0 || len < 9 || strcmp(de->d_name + len - 4, ".tft") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = cap > 0 ? realloc(names, (size_t)cap * sizeof(*nn)) : NULL;
            if (!nn)
                goto nomem;
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name)))
            goto nomem;
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, (size_t)n, sizeof(*names), cmp_str);
    *out = names;
    return n;
nomem:
    closedir(d);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return -ENOMEM;
}

static tft_reader *file_open(const tft_trace *t, const trace_file *f)
{
    tft_reader_opts o = t->opts;
    o.display_name = f->name;
    return tft_reader_open(f->path, &o);
}

/* Adds the rank file at path: its header (lazy) or an open reader. */
static int trace_add(tft_trace *t, const char *path, const char *display)
{
    if (t->n == t->cap) {
        int ncap = t->cap ? t->cap * 2 : 16;
        trace_file *nf = ncap > 0 ? realloc(t->f, (size_t)ncap * sizeof(*nf)) : NULL;
        if (!nf)
            return -ENOMEM;
        t->f = nf;
        t->cap = ncap;
    }
    trace_file *f = &t->f[t->n];
    memset(f, 0, sizeof(*f));
    f->path = strdup(path);
    f->name = strdup(display);
    if (!f->path || !f->name) {
        free(f->path);
        free(f->name);
        return -ENOMEM;
    }
    int e = t->lazy ? fmt_reader_peek(path, &f->info, &f->dev, &f->ino) : -1;
    if (e) { /* eager, or the header did not read: the reader opens it and says why */
        f->r = file_open(t, f);
        if (!f->r) {
            e = -errno;
            free(f->path);
            free(f->name);
            return e ? e : -EIO;
        }
        f->info = *tft_reader_info(f->r);
        fmt_reader_file_id(f->r, &f->dev, &f->ino);
        if (t->lazy) {
            tft_reader_close(f->r);
            f->r = NULL;
        }
    }
    f->rank = f->info.rank;
    t->n++;
    return 0;
}

/* ---- one file per rank -------------------------------------------------------- */

static bool same_header(const tft_file_info *a, const tft_file_info *b)
{
    return a->pid == b->pid && a->start_realtime_ns == b->start_realtime_ns &&
           a->start_monotonic_ns == b->start_monotonic_ns && !memcmp(a->run_id, b->run_id, 16);
}

static void run_hex(const uint8_t id[16], char out[33])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[id[i] >> 4];
        out[2 * i + 1] = hex[id[i] & 15];
    }
    out[32] = '\0';
}

/* Why files a and b cannot both be read as ranks of the trace (FORMAT.md
 * §2.2): the same file twice, a copy, or two runs mixed. 0 when they can. */
static int refuse_pair(const tft_trace *t, const trace_file *a, const trace_file *b)
{
    const tft_reader_opts *o = &t->opts;
    if (a->dev == b->dev && a->ino == b->ino) {
        TLOG(o, TFT_LOG_ERROR,
             "%s and %s are the same file (hard links, or a symbolic link): a trace holds one file per rank; "
             "remove the extra name", a->name, b->name);
        return -EEXIST;
    }
    if (a->info.rank != b->info.rank)
        return 0;
    char ra[33], rb[33];
    run_hex(a->info.run_id, ra);
    run_hex(b->info.run_id, rb);
    if (strcmp(ra, rb) != 0) {
        TLOG(o, TFT_LOG_ERROR,
             "%s and %s both claim rank %d but belong to different runs (run ids %s and %s): files of two "
             "recordings are mixed in one directory; move one run's files out", a->name, b->name,
             (int)a->info.rank, ra, rb);
        return -EEXIST;
    }
    if (same_header(&a->info, &b->info)) {
        TLOG(o, TFT_LOG_ERROR,
             "%s and %s both claim rank %d of run %s with the same process (pid %d, same start): one is a "
             "copy of the other; remove one", a->name, b->name, (int)a->info.rank, ra, (int)a->info.pid);
        return -EEXIST;
    }
    return 0;
}

/* by_id's longer key: a file's identity; the values are file indices. */
typedef struct file_key {
    const tft_trace *t;
    uint64_t dev, ino;
} file_key;

static bool same_file(const void *ctx, const void *val)
{
    const file_key *k = ctx;
    const trace_file *g = &k->t->f[*(const int *)val];
    return g->dev == k->dev && g->ino == k->ino;
}

/* Checks every file against the earlier ones of the same identity and the
 * same claimed rank: O(files) plus the files sharing a rank. *next links
 * the files of one claimed rank (file index -> the earlier one, -1). */
static int check_unique(tft_trace *t, int *prev_same_rank)
{
    tft_u64map by_id, by_rank; /* (dev, ino) -> file index; claimed rank -> its latest file */
    tft_u64map_init(&by_id, &(tft_u64map_opts){.vsize = sizeof(int), .hashed = true});
    tft_u64map_init(&by_rank, &(tft_u64map_opts){.vsize = sizeof(int)});
    int e = 0;
    for (int i = 0; !e && i < t->n; i++) {
        trace_file *f = &t->f[i];
        file_key key = {t, f->dev, f->ino};
        void *v;
        e = tft_u64map_insert(&by_id, tft_u64map_mix(f->dev * 0x9E3779B97F4A7C15ull ^ f->ino), same_file, &key, &v);
        if (e == 0)
            e = refuse_pair(t, &t->f[*(int *)v], f);
        if (e < 0)
            break;
        *(int *)v = i;
        e = tft_u64map_insert(&by_rank, (uint32_t)f->info.rank, NULL, NULL, &v);
        if (e < 0)
            break;
        prev_same_rank[i] = e ? -1 : *(int *)v;
        e = 0;
        for (int j = prev_same_rank[i]; j >= 0 && !e; j = prev_same_rank[j])
            e = refuse_pair(t, &t->f[j], f);
        *(int *)v = i;
    }
    tft_u64map_free(&by_id);
    tft_u64map_free(&by_rank);
    return e;
}

/* "rank-00042.tft" is the name the collector gives rank 42's file. */
static bool canonical_name(const trace_file *f)
{
    char want[32];
    snprintf(want, sizeof(want), "rank-%05d.tft", (int)f->info.rank);
    const char *base = strrchr(f->name, '/');
    return !strcmp(base ? base + 1 : f->name, want);
}

/* Which of two files of one run claiming one rank keeps it: a rank the
 * process was given over a registration index, then the collector's own
 * name for the rank (a second process claiming it is written as
 * rank-NNNNN-pPID.tft), then the first by name. */
static bool keeps_before(const trace_file *a, int ia, const trace_file *b, int ib)
{
    bool ga = !(a->info.flags & TFT_FILE_RANK_IS_INDEX), gb = !(b->info.flags & TFT_FILE_RANK_IS_INDEX);
    if (ga != gb)
        return ga;
    bool ca = canonical_name(a), cb = canonical_name(b);
    if (ca != cb)
        return ca;
    return ia < ib;
}

/* Several files of one run claiming one rank (checked: different processes)
 * are read as one rank each: the file that keeps the rank (keeps_before)
 * keeps it, the others are read as the next numbers no file holds, with a
 * note. A process without a rank of its own (a launcher such as torchrun's
 * parent) is numbered by its registration index, which a ranked process
 * may hold too; two processes given one rank (a forked child inheriting
 * RANK) are the other case. */
static int renumber(tft_trace *t, const int *prev_same_rank)
{
    int free_id = 0;
    for (int i = 0; i < t->n; i++)
        if (t->f[i].rank >= free_id && t->f[i].rank < INT32_MAX)
            free_id = t->f[i].rank + 1;
    /* One pass per group: walk each chain from its last member. */
    bool *done = calloc((size_t)t->n + 1, sizeof(*done));
    int e = done ? 0 : -ENOMEM;
    for (int i = t->n - 1; !e && i >= 0; i--) {
        if (done[i] || prev_same_rank[i] < 0)
            continue;
        int best = i;
        for (int j = i; j >= 0; j = prev_same_rank[j]) {
            done[j] = true;
            if (keeps_before(&t->f[j], j, &t->f[best], best))
                best = j;
        }
        /* the others, in name order: the chain runs from the last backwards */
        int cnt = 0;
        for (int j = i; j >= 0; j = prev_same_rank[j])
            cnt++;
        int *members = malloc((size_t)cnt * sizeof(*members));
        if (!members) {
            e = -ENOMEM;
            break;
        }
        int k = cnt;
        for (int j = i; j >= 0; j = prev_same_rank[j])
            members[--k] = j;
        for (k = 0; k < cnt; k++) {
            trace_file *f = &t->f[members[k]];
            if (members[k] == best)
                continue;
            if (free_id == INT32_MAX) {
                TLOG(&t->opts, TFT_LOG_ERROR, "%s and %s both claim rank %d and no rank number is free to read "
                     "one of them under: remove one", t->f[best].name, f->name, f->rank);
                e = -EEXIST;
                break;
            }
            TLOG(&t->opts, TFT_LOG_INFO,
                 "%s: %s (pid %d) numbered %d like %s; read as rank %d",
                 f->name, f->info.flags & TFT_FILE_RANK_IS_INDEX ? "a process without a rank of its own"
                                                                 : "a second process of the run",
                 (int)f->info.pid, f->rank, t->f[best].name, free_id);
            f->rank = free_id++;
        }
        free(members);
    }
    free(done);
    return e;
}

/* Pieces of one run (PATH1+PATH2): every file carries the first file's run
 * id, and no rank is held in two pieces (duplicate or conflicting copies of
 * one rank: check_unique already refused copies and mixes within a piece;
 * a rank numbered by registration index may repeat and is renumbered). */
static int check_parts(const tft_trace *t, const int *prev_same_rank)
{
    char r0[33], ri[33];
    run_hex(t->f[0].info.run_id, r0);
    for (int i = 1; i < t->n; i++) {
        const trace_file *f = &t->f[i];
        run_hex(f->info.run_id, ri);
        if (strcmp(r0, ri) != 0) {
            TLOG(&t->opts, TFT_LOG_ERROR,
                 "%s belongs to run %s, but %s to run %s: the pieces are not of one run; give only the "
                 "directories of one job", f->name, ri, t->f[0].name, r0);
            return -EXDEV;
        }
        for (int j = prev_same_rank[i]; j >= 0; j = prev_same_rank[j]) {
            const trace_file *g = &t->f[j];
            if (g->part == f->part || (f->info.flags & TFT_FILE_RANK_IS_INDEX) ||
                (g->info.flags & TFT_FILE_RANK_IS_INDEX))
                continue;
            TLOG(&t->opts, TFT_LOG_ERROR,
                 "%s and %s both hold rank %d of run %s (pids %d and %d%s): a rank must come from one piece; "
                 "remove the one that does not belong", g->name, f->name, (int)f->info.rank, r0,
                 (int)g->info.pid, (int)f->info.pid, same_header(&g->info, &f->info) ? ", the same process: a copy" : "");
            return -EEXIST;
        }
    }
    return 0;
}

/* The manifest of dir (fragments merged, FORMAT.md §2.4) into *m; 1 when
 * there is one, 0 when none or unreadable (a warning), negative for a newer
 * major or a manifest or fragment that is not a regular file (an error). */
static int read_manifest(const tft_trace *t, const char *dir, tft_manifest *m)
{
    char err[512];
    int e = tft_manifest_read_dir(dir, m, err, sizeof(err));
    if (e == -EPROTONOSUPPORT || e == -ESPIPE) {   /* a newer major; a FIFO, device or link: refused */
        TLOG(&t->opts, TFT_LOG_ERROR, "%s/%s", dir, err);
        return e;
    }
    if (e == -ENOENT)
        return 0;
    if (e) {
        TLOG(&t->opts, TFT_LOG_WARN, "%s/%s; reading the rank files without it", dir, err);
        return 0;
    }
    if (err[0])
        TLOG(&t->opts, TFT_LOG_WARN, "%s/%s", dir, err);
    return 1;
}

/* Adds the rank files of dir, one piece of the trace (part: its index). */
static int add_dir_files(tft_trace *t, const char *dir, int part)
{
    char path[4096];
    const tft_reader_opts *opts = &t->opts;
    char **names = NULL;
    int n = list_rank_files(dir, &names);
    if (n < 0) {
        TLOG(opts, TFT_LOG_ERROR, "%s: %s", dir, strerror(-n));
        return n;
    }
    int e = 0;
    if (n == 0) {
        TLOG(opts, TFT_LOG_ERROR, "%s: no rank files (rank-*.tft): not a tftrace trace, or nothing was recorded",
             dir);
        e = -EPROTO;
    }
    for (int i = 0; i < n && !e; i++) {
        if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= (int)sizeof(path)) {
            TLOG(opts, TFT_LOG_ERROR, "%s/%s: path too long", dir, names[i]);
            e = -ENAMETOOLONG;
            break;
        }
        e = trace_add(t, path, path);
        if (!e)
            t->f[t->n - 1].part = part;
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return e;
}

/* In-process writers list no collector and write one fragment each: fewer
 * ranks listed than world_size says (a rank killed before its fragment, a
 * node's piece not given) leaves the run not complete. */
static void check_short(tft_trace *t)
{
    tft_manifest *m = &t->manifest;
    if (t->have_manifest && m->ncollectors == 0 && m->world_size > m->nranks)
        m->complete = 0;
}

static int check_files(tft_trace *t)
{
    check_short(t);
    int *prev = malloc((size_t)t->n * sizeof(*prev) + 1);
    int e = prev ? check_unique(t, prev) : -ENOMEM;
    if (!e && t->parts > 1)
        e = check_parts(t, prev);
    if (!e)
        e = renumber(t, prev);
    free(prev);
    return e;
}

static int open_dir(tft_trace *t, const char *dir)
{
    int e = read_manifest(t, dir, &t->manifest);
    if (e < 0)
        return e;
    t->have_manifest = e;
    e = add_dir_files(t, dir, 0);
    return e ? e : check_files(t);
}

/* Directories (or rank files) of one run, each a piece written on its own
 * node (docs/MULTINODE.md). Their manifests are merged (the first one's
 * command line and options kept); check_parts refuses pieces of different
 * runs and a rank held in two pieces. */
static int open_parts(tft_trace *t, const char *const *paths, int n)
{
    int e = 0, part = 0;
    for (; part < n && !e; part++) {
        const char *p = paths[part];
        struct stat sb;
        if (stat(p, &sb) < 0) {
            e = -errno;
            TLOG(&t->opts, TFT_LOG_ERROR, "%s: %s", p, strerror(errno));
            break;
        }
        if (!S_ISDIR(sb.st_mode)) {
            e = trace_add(t, p, p);
            if (!e)
                t->f[t->n - 1].part = part;
            continue;
        }
        tft_manifest m;
        int have = read_manifest(t, p, &m);
        if (have < 0) {
            e = have;
            break;
        }
        if (have && !t->have_manifest) {
            t->manifest = m;
            t->have_manifest = 1;
        } else if (have) {
            e = tft_manifest_merge(&t->manifest, &m);
            tft_manifest_free(&m);
        }
        if (!e)
            e = add_dir_files(t, p, part);
    }
    t->parts = n;
    return e ? e : check_files(t);
}

/* PATH1+PATH2+...: open_parts of the pieces. */
static int open_plus(tft_trace *t, const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    const char **v = calloc(strlen(spec) / 2 + 2, sizeof(*v));
    int n = 0, e = copy && v ? 0 : -ENOMEM;
    for (char *p = e ? NULL : strtok_r(copy, "+", &save); p; p = strtok_r(NULL, "+", &save))
        v[n++] = p;
    if (!e)
        e = open_parts(t, v, n);
    free(v);
    free(copy);
    return e;
}

static tft_trace *trace_new(const tft_reader_opts *opts, bool lazy)
{
    tft_trace *t = calloc(1, sizeof(*t));
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    t->lazy = lazy;
    t->opts = TFT_READER_OPTS();
    if (opts)
        memcpy(&t->opts, opts, opts->sz < sizeof(t->opts) ? opts->sz : sizeof(t->opts));
    t->opts.sz = sizeof(t->opts);
    t->opts.display_name = NULL;
    return t;
}

tft_trace *tft_trace_open_parts(const char *const *paths, int n, const tft_reader_opts *opts, int lazy)
{
    if (!paths || n < 1) {
        errno = EINVAL;
        return NULL;
    }
    tft_trace *t = trace_new(opts, lazy != 0);
    if (!t)
        return NULL;
    int e = open_parts(t, paths, n);
    if (e) {
        tft_trace_close(t);
        errno = -e;
        return NULL;
    }
    return t;
}

int tft_trace_file_part(const tft_trace *t, int i)
{
    return (i >= 0 && i < t->n) ? t->f[i].part : -1;
}

static tft_trace *trace_open(const char *path, const tft_reader_opts *opts, bool lazy)
{
    tft_trace *t = trace_new(opts, lazy);
    if (!t)
        return NULL;
    struct stat sb;
    int e;
    if (stat(path, &sb) < 0) {
        e = -errno;
        if (e == -ENOENT && strchr(path, '+') && path[0] != '+')
            e = open_plus(t, path);
        else
            TLOG(&t->opts, TFT_LOG_ERROR, "%s: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        e = open_dir(t, path);
    } else {
        e = trace_add(t, path, path);
    }
    if (e) {
        tft_trace_close(t);
        errno = -e;
        return NULL;
    }
    return t;
}

tft_trace *tft_trace_open(const char *path, const tft_reader_opts *opts)
{
    return trace_open(path, opts, false);
}

tft_trace *tft_trace_open_lazy(const char *path, const tft_reader_opts *opts)
{
    return trace_open(path, opts, true);
}

void tft_trace_close(tft_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++) {
        tft_reader_close(t->f[i].r);
        free(t->f[i].path);
        free(t->f[i].name);
    }
    free(t->f);
    tft_manifest_free(&t->manifest);
    free(t);
}

const tft_manifest *tft_trace_manifest(const tft_trace *t)
{
    return t->have_manifest ? &t->manifest : NULL;
}

int tft_trace_nranks(const tft_trace *t) { return t ? t->n : 0; }
int tft_trace_rank_id(const tft_trace *t, int i) { return (t && i >= 0 && i < t->n) ? t->f[i].rank : -1; }

tft_reader *tft_trace_reader(tft_trace *t, int i)
{
    if (i < 0 || i >= t->n) {
        errno = EINVAL;
        return NULL;
    }
    trace_file *f = &t->f[i];
    if (!f->r)
        f->r = file_open(t, f); /* errno set, the reason logged, on failure */
    return f->r;
}

void tft_trace_release(tft_trace *t, int i)
{
    if (!t || i < 0 || i >= t->n || !t->f[i].r)
        return;
    trace_file *f = &t->f[i];
    tft_reader_status st;
    tft_reader_get_status(f->r, &st);
    if (!f->have_st || st.integrity >= f->st.integrity)
        f->st = st;
    f->have_st = true;
    tft_reader_close(f->r);
    f->r = NULL;
}

int tft_trace_status(const tft_trace *t, int i, tft_reader_status *out)
{
    if (i < 0 || i >= t->n)
        return -EINVAL;
    const trace_file *f = &t->f[i];
    memset(out, 0, sizeof(*out));
    if (f->have_st)
        *out = f->st;
    if (f->r) {
        tft_reader_status now;
        tft_reader_get_status(f->r, &now);
        if (!f->have_st || now.integrity >= out->integrity)
            *out = now;
    }
    return f->r || f->have_st ? 1 : 0;
}

const tft_file_info *tft_trace_file_info(const tft_trace *t, int i)
{
    return (i >= 0 && i < t->n) ? &t->f[i].info : NULL;
}

const char *tft_trace_file_name(const tft_trace *t, int i)
{
    return (i >= 0 && i < t->n) ? t->f[i].name : NULL;
}

/* ---- merge ------------------------------------------------------------------ */

typedef struct merge_head {
    const tft_rec *rec;
    int64_t step;   /* effective step: last seen step for records without one */
    int64_t seq;    /* effective seq: last seen seq for records without one */
    int idx;
} merge_head;

struct tft_merge {
    tft_trace *t;
    tft_reader **r;     /* the reader of each rank file, opened by tft_merge_open */
    int order;
    merge_head *heap;
    int n;
    int pending;    /* reader index to advance before the next pop, -1 none */
    int64_t *last_step;
    int64_t *last_seq;
};

static bool head_less(const tft_merge *m, const merge_head *a, const merge_head *b)
{
    if (m->order == TFT_ORDER_TIME) {
        if (a->rec->ts != b->rec->ts)
            return a->rec->ts < b->rec->ts;
    } else {
        if (a->step != b->step)
            return a->step < b->step;
        if (a->seq != b->seq)
            return a->seq < b->seq;
    }
    return a->idx < b->idx;
}

static void sift_down(tft_merge *m, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->n && head_less(m, &m->heap[l], &m->heap[s]))
            s = l;
        if (r < m->n && head_less(m, &m->heap[r], &m->heap[s]))
            s = r;
        if (s == i)
            return;
        merge_head tmp = m->heap[i];
        m->heap[i] = m->heap[s];
        m->heap[s] = tmp;
        i = s;
    }
}

static void sift_up(tft_merge *m, int i)
{
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!head_less(m, &m->heap[i], &m->heap[p]))
            return;
        merge_head tmp = m->heap[i];
        m->heap[i] = m->heap[p];
        m->heap[p] = tmp;
        i = p;
    }
}

/* Reads the next record of reader idx into the heap. */
static int merge_fill(tft_merge *m, int idx)
{
    const tft_rec *rec;
    int e = tft_reader_next(m->r[idx], &rec);
    if (e <= 0)
        return e;
    if (rec->step != TFT_STEP_NONE)
        m->last_step[idx] = rec->step;
    if (rec->seq != TFT_SEQ_NONE)
        m->last_seq[idx] = rec->seq;
    m->heap[m->n] = (merge_head){rec, m->last_step[idx], m->last_seq[idx], idx};
    sift_up(m, m->n++);
    return 0;
}

tft_merge *tft_merge_open(tft_trace *t, int order)
{
    tft_merge *m = calloc(1, sizeof(*m));
    if (!m)
        goto nomem;
    m->t = t;
    m->order = order;
    m->pending = -1;
    m->heap = calloc((size_t)t->n + 1, sizeof(*m->heap));
    m->last_step = calloc((size_t)t->n + 1, sizeof(*m->last_step));
    m->last_seq = calloc((size_t)t->n + 1, sizeof(*m->last_seq));
    m->r = calloc((size_t)t->n + 1, sizeof(*m->r));
    if (!m->heap || !m->last_step || !m->last_seq || !m->r)
        goto nomem;
    for (int i = 0; i < t->n; i++) {
        m->last_step[i] = INT64_MIN;
        m->last_seq[i] = INT64_MIN;
        if (!(m->r[i] = tft_trace_reader(t, i))) {
            int e = errno ? errno : EIO;
            tft_merge_close(m);
            errno = e;
            return NULL;
        }
        tft_reader_rewind(m->r[i]);
        int e = merge_fill(m, i);
        if (e < 0) {
            tft_merge_close(m);
            errno = -e;
            return NULL;
        }
    }
    return m;
nomem:
    tft_merge_close(m);
    errno = ENOMEM;
    return NULL;
}

int tft_merge_next(tft_merge *m, const tft_rec **rec, int *rank_index)
{
    if (m->pending >= 0) {
        int e = merge_fill(m, m->pending);
        m->pending = -1;
        if (e < 0)
            return e;
    }
    if (m->n == 0)
        return 0;
    merge_head top = m->heap[0];
    m->heap[0] = m->heap[--m->n];
    sift_down(m, 0);
    m->pending = top.idx;
    *rec = top.rec;
    *rank_index = top.idx;
    return 1;
}

void tft_merge_close(tft_merge *m)
{
    if (!m)
        return;
    free(m->heap);
    free(m->r);
    free(m->last_step);
    free(m->last_seq);
    free(m);
}

/*
 * trace.c — a trace directory (manifest + rank files) opened for reading,
 * and the k-way merge of its ranks by time or by (step, seq).
 *
 * A path to a single rank file is accepted as a one-rank trace. Rank files
 * are found by listing the directory (rank-*.tft), so a trace whose manifest
 * was never rewritten at the end (the launcher was killed) still opens.
 */
#include "format_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct tft_trace {
    tft_manifest manifest;
    int have_manifest;
    int n;
    tft_reader **readers;
    int *rank_ids;
};

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
            char **nn = realloc(names, (size_t)cap * sizeof(*nn));
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

static int trace_add(tft_trace *t, const char *path, const char *display, const tft_reader_opts *opts)
{
    tft_reader_opts o = opts ? *opts : TFT_READER_OPTS();
    o.sz = sizeof(o);
    o.display_name = display;
    tft_reader *r = tft_reader_open(path, &o);
    if (!r)
        return -errno;
    tft_reader **nr = realloc(t->readers, (size_t)(t->n + 1) * sizeof(*nr));
    int *ni = nr ? realloc(t->rank_ids, (size_t)(t->n + 1) * sizeof(*ni)) : NULL;
    if (nr)
        t->readers = nr;
    if (!ni) {
        tft_reader_close(r);
        return -ENOMEM;
    }
    t->rank_ids = ni;
    t->readers[t->n] = r;
    t->rank_ids[t->n] = tft_reader_info(r)->rank;
    t->n++;
    return 0;
}

/* A process without a rank of its own (no MPI, no RANK: a launcher such as
 * torchrun's parent, a helper it spawned) is numbered by its registration
 * index, which can be a number a ranked process of the same run also
 * holds. Such a file is read as the next number no file holds, with a
 * note; files that were given their rank keep it. */
static void renumber_index_ranks(tft_trace *t, const tft_reader_opts *opts)
{
    for (int i = 0; i < t->n; i++) {
        const tft_file_info *fi = tft_reader_info(t->readers[i]);
        if (!(fi->flags & TFT_FILE_RANK_IS_INDEX))
            continue;
        int clash = 0;
        for (int k = 0; k < t->n && !clash; k++) {
            const tft_file_info *o = tft_reader_info(t->readers[k]);
            clash = k != i && t->rank_ids[k] == t->rank_ids[i] && !memcmp(o->run_id, fi->run_id, 16) &&
                    (!(o->flags & TFT_FILE_RANK_IS_INDEX) || k < i);
        }
        if (!clash)
            continue;
        int free_id = 0;
        for (int k = 0; k < t->n; k++)
            if (t->rank_ids[k] >= free_id)
                free_id = t->rank_ids[k] + 1;
        fmt_log(opts ? opts->log : NULL, opts ? opts->log_ctx : NULL, TFT_LOG_INFO,
                "%s: a process without a rank of its own (pid %d) numbered %d like another process; "
                "read as rank %d",
                tft_reader_name(t->readers[i]), (int)fi->pid, t->rank_ids[i], free_id);
        t->rank_ids[i] = free_id;
    }
}

static int open_dir(tft_trace *t, const char *dir, const tft_reader_opts *opts)
{
    char path[4096], err[256];
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        int e = tft_manifest_read(path, &t->manifest, err, sizeof(err));
        if (e == -EPROTONOSUPPORT) {
            fmt_log(opts ? opts->log : NULL, opts ? opts->log_ctx : NULL, TFT_LOG_ERROR, "%s: %s", path, err);
            return e;
        }
        if (e)
            fmt_log(opts ? opts->log : NULL, opts ? opts->log_ctx : NULL, TFT_LOG_WARN,
                    "%s: %s; reading the rank files without it", path, err);
        else
            t->have_manifest = 1;
    }
    char **names = NULL;
    int n = list_rank_files(dir, &names);
    if (n < 0)
        return n;
    int e = 0;
    if (n == 0) {
        fmt_log(opts ? opts->log : NULL, opts ? opts->log_ctx : NULL, TFT_LOG_ERROR,
                "%s: no rank files (rank-*.tft): not a tftrace trace, or nothing was recorded", dir);
        e = -EPROTO;
    }
    for (int i = 0; i < n && !e; i++) {
        char disp[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        snprintf(disp, sizeof(disp), "%s/%s", dir, names[i]);
        e = trace_add(t, path, disp, opts);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (!e)
        renumber_index_ranks(t, opts);
    return e;
}

tft_trace *tft_trace_open(const char *path, const tft_reader_opts *opts)
{
    tft_trace *t = calloc(1, sizeof(*t));
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    struct stat sb;
    int e;
    if (stat(path, &sb) < 0) {
        e = -errno;
        fmt_log(opts ? opts->log : NULL, opts ? opts->log_ctx : NULL, TFT_LOG_ERROR, "%s: %s", path,
                strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        e = open_dir(t, path, opts);
    } else {
        e = trace_add(t, path, path, opts);
    }
    if (e) {
        tft_trace_close(t);
        errno = -e;
        return NULL;
    }
    return t;
}

void tft_trace_close(tft_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        tft_reader_close(t->readers[i]);
    free(t->readers);
    free(t->rank_ids);
    tft_manifest_free(&t->manifest);
    free(t);
}

const tft_manifest *tft_trace_manifest(const tft_trace *t)
{
    return t->have_manifest ? &t->manifest : NULL;
}

int tft_trace_nranks(const tft_trace *t) { return t->n; }
int tft_trace_rank_id(const tft_trace *t, int i) { return (i >= 0 && i < t->n) ? t->rank_ids[i] : -1; }
tft_reader *tft_trace_reader(tft_trace *t, int i) { return (i >= 0 && i < t->n) ? t->readers[i] : NULL; }

/* ---- merge ------------------------------------------------------------------ */

typedef struct merge_head {
    const tft_rec *rec;
    int64_t step;   /* effective step: last seen step for records without one */
    int64_t seq;    /* effective seq: last seen seq for records without one */
    int idx;
} merge_head;

struct tft_merge {
    tft_trace *t;
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
    int e = tft_reader_next(m->t->readers[idx], &rec);
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
    if (!m->heap || !m->last_step || !m->last_seq)
        goto nomem;
    for (int i = 0; i < t->n; i++) {
        m->last_step[i] = INT64_MIN;
        m->last_seq[i] = INT64_MIN;
        tft_reader_rewind(t->readers[i]);
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
    free(m->last_step);
    free(m->last_seq);
    free(m);
}

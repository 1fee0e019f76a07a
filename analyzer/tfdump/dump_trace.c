/*
 * dump_trace.c — the trace tfdump reads (dump_internal.h): opened lazily
 * with the format library's messages collected, its rank files named, a
 * directory that recorded nothing told apart, and the cross-checks the
 * library does not make (two files claiming one rank, files the manifest
 * lists and the directory lacks, files of another run), and the state of
 * the collectors the manifest lists.
 */
#include "core_common.h"
#include "dump_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the trace and its rank-file names --------------------------------------- */

static int name_files(dump_trace *d)
{
    d->names = calloc((size_t)d->n + 1, sizeof(*d->names));
    if (!d->names)
        return -ENOMEM;
    for (int i = 0; i < d->n; i++)
        if (!(d->names[i] = strdup(tft_trace_file_name(d->t, i))))
            return -ENOMEM;
    return 0;
}

/* Rank files, manifests and process tables that are not regular files
 * (a FIFO planted in a shared directory would block a blocking open) are
 * refused here first, each named, with exit 2; the library refuses them
 * too (tft_manifest_read, tft_reader_open). */
static bool only_regular_files(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) < 0)
        return true; /* the library says why */
    if (!S_ISDIR(sb.st_mode)) {
        if (S_ISREG(sb.st_mode))
            return true;
        dump_err("%s: not a regular file (a rank file or a trace directory is expected)", path);
        return false;
    }
    DIR *dp = opendir(path);
    bool ok = true;
    struct dirent *de;
    while (dp && ok && (de = readdir(dp))) {
        char full[4096];
        size_t len = strlen(de->d_name);
        bool table = !strncmp(de->d_name, "processes-", 10) && len > 15 && !strcmp(de->d_name + len - 5, ".json");
        bool manifest = !strncmp(de->d_name, "manifest", 8) && len >= 13 && !strcmp(de->d_name + len - 5, ".json");
        if (!core_rank_file_name(de->d_name) && !table && !manifest)
            continue;
        snprintf(full, sizeof(full), "%s/%s", path, de->d_name);
        /* the JSON files are read with O_NOFOLLOW: a link is refused too */
        if ((table || manifest ? lstat(full, &sb) : stat(full, &sb)) == 0 && !S_ISREG(sb.st_mode) &&
            (table || manifest || !S_ISDIR(sb.st_mode))) {
            dump_err("%s: not a regular file%s", full, S_ISLNK(sb.st_mode) ? " (a symbolic link)" : "");
            ok = false;
        }
    }
    if (dp)
        closedir(dp);
    return ok;
}

int dump_trace_open(dump_trace *d, const dump_opts *o)
{
    *d = (dump_trace){0};
    if (!only_regular_files(o->path))
        return DUMP_USAGE;
    core_raise_nofile(); /* --events and --check merge every rank file at once */
    d->log.hold = 1;
    /* rank files are opened when a mode reads them, and closed after where
     * it reads them one by one (summary, --verify, --chunks, leaks) */
    tft_reader_opts ro = TFT_READER_OPTS(.log = dump_log_fn, .log_ctx = &d->log);
    d->t = tft_trace_open_lazy(o->path, &ro);
    if (!d->t && errno == EPROTO && core_trace_unrecorded(o->path, &d->manifest)) {
        dump_log_free(&d->log); /* "no rank files": said better by dump_unrecorded */
        d->unrecorded = true;
        return DUMP_OK;
    }
    if (!d->t) {
        int e = errno;
        if (d->log.n)
            dump_log_echo(&d->log, 0);
        if (e == ENOMEM)
            dump_nomem(o->path, "opening the trace");
        else if (!d->log.n)
            dump_err("%s: cannot open the trace: %s", o->path, strerror(e));
        dump_log_free(&d->log);
        return DUMP_USAGE;
    }
    d->n = tft_trace_nranks(d->t);
    if (name_files(d) < 0) {
        dump_nomem(o->path, "opening the trace");
        dump_trace_close(d);
        return DUMP_USAGE;
    }
    return DUMP_OK;
}

void dump_trace_close(dump_trace *d)
{
    if (d->names)
        for (int i = 0; i < d->n; i++)
            free(d->names[i]);
    free(d->names);
    tft_trace_close(d->t);
    dump_log_free(&d->log);
    tft_manifest_free(&d->manifest);
    *d = (dump_trace){0};
}

const char *dump_integrity_name(int integrity)
{
    switch (integrity) {
    case TFT_INTACT: return "complete";
    case TFT_TORN: return "torn";
    default: return "damaged";
    }
}

/* ---- cross-checks the library does not make ----------------------------------- */

/* One ERROR line to the trace's log. Not tft_logf (tft_msg.h): these lines
 * name two files and run ids, and keep their 599 bytes where tft_logf's
 * stop at 511. */
static void note(dump_trace *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(dump_trace *d, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dump_log_fn(&d->log, TFT_LOG_ERROR, msg);
}

void dump_run_id_hex(const uint8_t id[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Two rank files that claim the same rank: files of two runs mixed up. */
static int check_duplicates(dump_trace *d)
{
    int *ids = malloc(sizeof(int) * ((size_t)d->n + 1)), problems = 0;
    if (!ids)
        return 0;
    for (int i = 0; i < d->n; i++)
        ids[i] = tft_trace_rank_id(d->t, i);
    qsort(ids, (size_t)d->n, sizeof(int), cmp_int);
    for (int i = 1; i < d->n; i++) {
        if (ids[i] != ids[i - 1] || (i > 1 && ids[i] == ids[i - 2]))
            continue;
        int first = -1, second = -1;
        for (int k = 0; k < d->n && second < 0; k++) {
            if (tft_trace_rank_id(d->t, k) == ids[i]) {
                if (first < 0)
                    first = k;
                else
                    second = k;
            }
        }
        note(d, "%s and %s both claim rank %d: files of different runs are mixed", d->names[first],
             d->names[second], ids[i]);
        problems++;
    }
    free(ids);
    return problems;
}

int dump_trace_check(dump_trace *d, const char *path)
{
    const tft_manifest *m = tft_trace_manifest(d->t);
    int problems = check_duplicates(d);
    if (!m)
        return problems;
    for (int k = 0; k < m->nranks; k++) {
        int found = 0;
        for (int i = 0; i < d->n && !found; i++)
            found = tft_trace_rank_id(d->t, i) == m->ranks[k].rank;
        if (!found) {
            note(d, "%s/%s: listed in manifest.json for rank %d but missing or not a rank file; "
                    "that rank's records are lost", path, m->ranks[k].file, m->ranks[k].rank);
            problems++;
        }
    }
    for (int i = 0; i < d->n && m->run_id[0]; i++) {
        char hex[33];
        dump_run_id_hex(tft_trace_file_info(d->t, i)->run_id, hex);
        if (strcmp(hex, m->run_id) != 0) {
            note(d, "%s: run id %s differs from manifest.json's %s: the file belongs to another run",
                 d->names[i], hex, m->run_id);
            problems++;
        }
    }
    return problems;
}

/* ---- the manifest's collectors ---------------------------------------------- */

const tft_manifest_collector *dump_collector_unfinished(const tft_manifest *m)
{
    for (int i = 0; m && i < m->ncollectors; i++)
        if (!m->collectors[i].done)
            return &m->collectors[i];
    return NULL;
}

const char *dump_collector_state(const tft_manifest *m)
{
    if (!m || m->ncollectors == 0)
        return NULL;
    const tft_manifest_collector *c = dump_collector_unfinished(m);
    if (!c)
        return "finished";
    int st = tft_manifest_collector_state(c);
    return st == TFT_COLLECTOR_RUNNING ? "running" : st == TFT_COLLECTOR_GONE ? "died" : "unknown";
}

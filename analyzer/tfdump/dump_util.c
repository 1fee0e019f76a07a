/*
 * dump_util.c — tfdump plumbing: collecting the format library's messages,
 * writing to stdout without dying on a closed pipe, opening the trace and
 * naming its rank files.
 */
#include "core_common.h"
#include "dump_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- an address-space limit and OpenBLAS ------------------------------------- */

/* tfdump links OpenBLAS (--replay-op). Its worker threads, started when the
 * library loads, each reserve a buffer of about 128 MiB of address space,
 * and a worker whose reservation fails retries forever: under `ulimit -v`
 * (the way to bound what a hostile trace may cost) tfdump would spin and
 * never exit instead of saying it needs more memory. So when an
 * address-space limit is set and OPENBLAS_NUM_THREADS is not, tfdump runs
 * itself again with OPENBLAS_NUM_THREADS=1 (no workers) before main. This
 * runs after OpenBLAS's own constructor (a library's constructors run
 * before the program's), the exec ends its workers. */
__attribute__((constructor)) static void dump_openblas_under_limit(int argc, char **argv, char **envp)
{
    (void)argc, (void)envp;
    struct rlimit rl;
    if (getenv("OPENBLAS_NUM_THREADS") || getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || !argv)
        return;
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0)
        execv("/proc/self/exe", argv); /* on failure: run on as we are */
}

/* ---- diagnostics ------------------------------------------------------------ */

void dump_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tfdump: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void dump_nomem(const char *path, const char *what)
{
    char lim[128];
    dump_err("%s: %s needs more memory than allowed (%s); raise the limit, or look at fewer ranks "
             "(tfdump TRACE/rank-NNNNN.tft)", path, what, core_memory_limit(lim, sizeof(lim)));
}

int dump_read_error(const char *path, const char *name, int e)
{
    if (e == -ENOMEM)
        dump_nomem(path, "reading the trace");
    else
        dump_err("%s: read error: %s", name, strerror(-e));
    return DUMP_USAGE;
}

/* Log callback for tft_reader_opts: keeps ERROR and WARN messages (INFO and
 * DEBUG are dropped) and echoes them unless the log is on hold. */
void dump_log_fn(void *ctx, int level, const char *msg)
{
    dump_log *l = ctx;
    if (level > TFT_LOG_WARN || !msg)
        return;
    if (l->n >= DUMP_LOG_KEEP) {
        if (l->more++ == 0 && !l->hold)
            dump_err("more problems follow; they are counted, not shown");
        return;
    }
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->msgs[i], msg) == 0)
            return;
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 16;
        char **nm = realloc(l->msgs, ncap * sizeof(*nm));
        if (!nm)
            return;
        l->msgs = nm;
        l->cap = ncap;
    }
    char *copy = strdup(msg);
    if (!copy)
        return;
    l->msgs[l->n++] = copy;
    if (!l->hold)
        dump_err("%s", msg);
}

void dump_log_echo(const dump_log *l, size_t from)
{
    for (size_t i = from; i < l->n; i++)
        dump_err("%s", l->msgs[i]);
    if (l->more)
        dump_err("... and %zu more problems", l->more);
}

void dump_log_free(dump_log *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->msgs[i]);
    free(l->msgs);
    *l = (dump_log){0};
}

/* ---- stdout ------------------------------------------------------------------ */

static int out_errno; /* errno of the first failed write, 0 while fine */

void dump_out_init(void)
{
    /* A reader that goes away (tfdump ... | head) must not kill us. */
    signal(SIGPIPE, SIG_IGN);
}

bool dump_out_ok(void)
{
    if (out_errno)
        return false;
    if (ferror(stdout)) {
        out_errno = errno ? errno : EIO;
        return false;
    }
    return true;
}

int dump_out_finish(int status)
{
    if (dump_out_ok() && fflush(stdout) != 0 && !out_errno)
        out_errno = errno ? errno : EIO;
    if (!out_errno)
        return status;
    if (out_errno == EPIPE)
        return status; /* the reader has all it wanted */
    dump_err("cannot write the output: %s", strerror(out_errno));
    return DUMP_USAGE;
}

bool dump_out_json_line(const cJSON *j)
{
    static char buf[1 << 16];
    if (cJSON_PrintPreallocated((cJSON *)j, buf, (int)sizeof(buf) - 1, 0)) {
        fputs(buf, stdout);
    } else {
        char *s = cJSON_PrintUnformatted(j);
        if (!s) {
            dump_err("out of memory");
            return false;
        }
        fputs(s, stdout);
        cJSON_free(s);
    }
    putchar('\n');
    return dump_out_ok();
}

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

/* The format library opens rank files with a blocking open(): a FIFO would
 * hang it, so anything that is not a regular file is refused here first. */
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
        if (!core_rank_file_name(de->d_name))
            continue;
        snprintf(full, sizeof(full), "%s/%s", path, de->d_name);
        if (stat(full, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
            dump_err("%s: not a regular file", full);
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

/* ---- JSON ------------------------------------------------------------------ */

void dump_json_str_or_null(cJSON *o, const char *key, const char *s)
{
    if (s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
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

static void run_id_hex(const uint8_t id[16], char out[33])
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
        run_id_hex(tft_trace_file_info(d->t, i)->run_id, hex);
        if (strcmp(hex, m->run_id) != 0) {
            note(d, "%s: run id %s differs from manifest.json's %s: the file belongs to another run",
                 d->names[i], hex, m->run_id);
            problems++;
        }
    }
    return problems;
}

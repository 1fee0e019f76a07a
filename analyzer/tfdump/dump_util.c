/*
 * dump_util.c — tfdump plumbing: collecting the format library's messages,
 * writing to stdout without dying on a closed pipe, JSON strings, and
 * OpenBLAS under an address-space limit.
 */
#include "core_common.h"
#include "dump_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* ---- JSON ------------------------------------------------------------------ */

void dump_json_str_or_null(cJSON *o, const char *key, const char *s)
{
    if (s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

cJSON *dump_json_range(int64_t a, int64_t b, int64_t none)
{
    return a == none ? cJSON_CreateNull() : core_json_i64_array((const int64_t[]){a, b}, 2);
}

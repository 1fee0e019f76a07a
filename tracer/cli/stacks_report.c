/*
 * stacks_report.c — grouping and printing of the stacks of several
 * processes (stacks_report.h). Two threads are in one group when they have
 * the same role (the process's main thread, or a thread of that name) and
 * the same functions on their stacks; a group lists its processes by rank.
 */
#include "stacks_report.h"

#include "py_stacks.h"
#include "tft_escape.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int stacks_rank_of(pid_t pid, char *var, size_t n)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"};
    char path[64], *buf = malloc(1 << 20);
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC), rank = -1;
    if (var && n)
        var[0] = 0;
    if (fd < 0 || !buf)
        goto out;
    size_t len = 0;
    ssize_t r;
    while (len < (1 << 20) - 1 && (r = read(fd, buf + len, (1 << 20) - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = 0;
    for (size_t v = 0; v < sizeof vars / sizeof *vars && rank < 0; v++) {
        size_t vl = strlen(vars[v]);
        for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
            if (strncmp(buf + i, vars[v], vl) || buf[i + vl] != '=')
                continue;
            char *end;
            long x = strtol(buf + i + vl + 1, &end, 10);
            if (end != buf + i + vl + 1 && *end == 0 && x >= 0 && x < (1L << 30)) {
                rank = (int)x;
                if (var && n)
                    snprintf(var, n, "%s", vars[v]);
            }
            break;
        }
    }
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rank;
}

int stacks_collect(const pid_t *pids, size_t n, unsigned window_ms, stacks_report *r, char *err, size_t errlen)
{
    struct tft_snap *snaps = NULL;
    size_t ns = 0;
    memset(r, 0, sizeof *r);
    tft_snapshot_opts o = {.window_ms = window_ms};
    int rc = tft_stacks_snapshot(pids, n, &o, &snaps, &ns, err, errlen);
    if (rc < 0)
        return rc;
    r->procs = calloc(n ? n : 1, sizeof *r->procs);
    /* grouped by process in the order of pids[] */
    struct tft_snap *sorted = malloc((ns ? ns : 1) * sizeof *sorted);
    r->threads = calloc(ns ? ns : 1, sizeof *r->threads);
    if (!r->procs || !sorted || !r->threads) {
        free(sorted);
        free(snaps);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        r->procs[i].pid = pids[i];
        r->procs[i].rank = stacks_rank_of(pids[i], r->procs[i].rank_var, sizeof r->procs[i].rank_var);
        /* main thread first, then by tid */
        for (int pass = 0; pass < 2; pass++)
            for (size_t j = 0; j < ns; j++)
                if ((pid_t)snaps[j].pid == pids[i] && ((pass == 0) == (snaps[j].tid == snaps[j].pid))) {
                    sorted[k++] = snaps[j];
                    r->procs[i].nthreads++;
                }
    }
    r->nprocs = n;
    r->nthreads = k;
    rc = tft_stacks_unwind(sorted, k, r->threads);
    for (size_t i = 0, at = 0; rc == 0 && i < n; at += (size_t)r->procs[i++].nthreads)
        tft_py_stacks(pids[i], r->threads + at, (size_t)r->procs[i].nthreads);
    free(sorted);
    free(snaps);
    if (rc < 0)
        snprintf(err, errlen, "unwinding: %s", strerror(-rc));
    return rc;
}

void stacks_report_free(stacks_report *r)
{
    free(r->procs);
    free(r->threads);
    memset(r, 0, sizeof *r);
}

static int is_api(const char *f)
{
    return !strncmp(f, "MPI_", 4) || !strncmp(f, "PMPI_", 5) || !strncmp(f, "nccl", 4) ||
           !strncmp(f, "cuda", 4) || (f[0] == 'c' && f[1] == 'u' && f[2] >= 'A' && f[2] <= 'Z');
}

/* f without a symbol version (@@GLIBC_2.34) equals name */
static int same_func(const char *f, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(f, name, n) && (f[n] == 0 || f[n] == '@');
}

static int is_root(const char *f)
{
    return same_func(f, "_start") || same_func(f, "__libc_start_main") || same_func(f, "__libc_start_call_main") ||
           same_func(f, "start_thread") || same_func(f, "clone") || same_func(f, "clone3") ||
           same_func(f, "__clone3") || same_func(f, "__clone");
}

/* The name the summary shows: PMPI_X as MPI_X (the call the program made;
 * Open MPI's MPI_X is an alias), without a symbol version or a compiler
 * clone suffix (step.constprop.0 is step). */
static const char *frame_name(const tft_frame *f, char *buf, size_t n)
{
    if (f->how == TFT_FRAME_PY) {   /* hang.py:12 in wait */
        const char *b = strrchr(f->module, '/');
        snprintf(buf, n, "%s:%llu in %s", b ? b + 1 : f->module, (unsigned long long)f->module_off, f->func);
        if (!f->module_off)
            snprintf(buf, n, "%s:? in %s", b ? b + 1 : f->module, f->func);
    }
    else if (f->func[0]) {
        snprintf(buf, n, "%s%s", f->how == TFT_FRAME_SCAN ? "?" : "",
                 !strncmp(f->func, "PMPI_", 5) ? f->func + 1 : f->func);
        static const char *const cut[] = {"@", ".constprop.", ".isra.", ".part.", ".cold"};
        for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
            char *c = strstr(buf, cut[i]);
            if (c && c > buf)
                *c = 0;
        }
    }
    else {
        snprintf(buf, n, "%s%s+0x%llx", f->how == TFT_FRAME_SCAN ? "?" : "", f->module[0] ? f->module : "??",
                 (unsigned long long)f->module_off);
    }
    return buf;
}

/* The frames a summary shows: [*from, *to), from the outermost MPI/NCCL/
 * CUDA call (or the top) to the program's or thread's entry. */
static void summary_span(const tft_thread_stack *t, int *from, int *to)
{
    *from = 0;
    *to = t->nframes;
    for (int i = 0; i < t->nframes; i++)
        if (t->frames[i].func[0] && t->frames[i].how != TFT_FRAME_PY && is_api(t->frames[i].func))
            *from = i;
    for (int i = *from + 1; i < t->nframes; i++)
        if (t->frames[i].func[0] && t->frames[i].how != TFT_FRAME_PY && is_root(t->frames[i].func)) {
            *to = i;
            break;
        }
}

/* CPython's call plumbing between a C function and the Python frame that
 * called it (PyObject_Vectorcall, cfunction_vectorcall_O, _PyEval_Vector):
 * left out of summaries. */
static int is_py_plumbing(const tft_frame *f)
{
    return f->how != TFT_FRAME_PY && (!strncmp(f->module, "libpython", 9) || !strncmp(f->module, "python", 6)) &&
           (strstr(f->func, "call") || strstr(f->func, "Call") || strstr(f->func, "PyEval_"));
}

/* Appends idx[lo..hi) to out (at *k), keeping the first `head` and the last
 * `tail` with a -1 (…) between when there are more. */
static void keep_ends(const int *idx, int lo, int hi, int head, int tail, int *out, int *k)
{
    for (int j = lo; j < hi; j++) {
        if (hi - lo > head + tail + 1 && j == lo + head) {
            out[(*k)++] = -1;
            j = hi - tail - 1;
            continue;
        }
        out[(*k)++] = idx[j];
    }
}

/* The frames of the summary span, as indices into t->frames. Below the
 * innermost Python frame only Python frames (the interpreter's C frames
 * between them say nothing), above it no call plumbing; a stack without
 * Python frames keeps them all. trimmed: with -1
 * for "…": the top four and the bottom two; for a Python stack the top two
 * native frames and the C function Python called, then the innermost four
 * Python frames and the outermost. Returns the count. */
static int summary_frames(const tft_thread_stack *t, int trimmed, int *out)
{
    int from, to, k = 0, py = -1, idx[TFT_STACK_MAX_FRAMES], any_py = 0;
    summary_span(t, &from, &to);
    for (int i = from; i < to; i++)
        any_py |= t->frames[i].how == TFT_FRAME_PY;
    for (int i = from; i < to; i++) {
        if (py < 0 && t->frames[i].how == TFT_FRAME_PY)
            py = k;
        if (!any_py || (py < 0 ? !is_py_plumbing(&t->frames[i]) : t->frames[i].how == TFT_FRAME_PY))
            idx[k++] = i;
    }
    if (!trimmed) {
        memcpy(out, idx, (size_t)k * sizeof *idx);
        return k;
    }
    int n = 0;
    if (py < 0) {
        keep_ends(idx, 0, k, 4, 2, out, &n);
    } else {
        keep_ends(idx, 0, py, 2, 1, out, &n);
        keep_ends(idx, py, k, 4, 1, out, &n);
    }
    return n;
}

void stacks_summary(const tft_thread_stack *t, char *buf, size_t n)
{
    int idx[TFT_STACK_MAX_FRAMES + 2], len = 0, k = summary_frames(t, 1, idx);
    buf[0] = 0;
    if (!t->nframes) {
        snprintf(buf, n, "(no frames)");
        return;
    }
    for (int j = 0; j < k && len < (int)n - 1; j++) {
        char name[300];
        len += snprintf(buf + len, n - (size_t)len, "%s%s", j ? " ← " : "",
                        idx[j] < 0 ? "…" : frame_name(&t->frames[idx[j]], name, sizeof name));
    }
}

/* The key of a thread's group: its role (main thread or its name) and the
 * frames of its summary, untrimmed. Frames inside the MPI library (which
 * peer a rank polls, whether it spins in send or recv) do not split groups. */
static void group_key(const tft_thread_stack *t, char *buf, size_t n)
{
    int idx[TFT_STACK_MAX_FRAMES], k = summary_frames(t, 0, idx);
    int len = snprintf(buf, n, "%s|", t->tid == t->pid ? "" : t->comm);
    for (int j = 0; j < k && len < (int)n - 1; j++) {
        char name[300];
        len += snprintf(buf + len, n - (size_t)len, "%s;", frame_name(&t->frames[idx[j]], name, sizeof name));
    }
}

static const stacks_proc *proc_of(const stacks_report *r, pid_t pid)
{
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].pid == pid)
            return &r->procs[i];
    return NULL;
}

/* group[i]: the index of the first thread with i's key (its leader) */
static size_t *make_groups(const stacks_report *r)
{
    size_t *g = malloc((r->nthreads ? r->nthreads : 1) * sizeof *g);
    char (*keys)[2048] = malloc((r->nthreads ? r->nthreads : 1) * sizeof *keys);
    if (!g || !keys) {
        free(g);
        free(keys);
        return NULL;
    }
    for (size_t i = 0; i < r->nthreads; i++) {
        group_key(&r->threads[i], keys[i], sizeof keys[i]);
        g[i] = i;
        for (size_t j = 0; j < i; j++)
            if (g[j] == j && !strcmp(keys[i], keys[j])) {
                g[i] = j;
                break;
            }
    }
    free(keys);
    return g;
}

/* "ranks 0,2,3" / "rank 1" / "pids 10,11" / "rank 0, pid 12" for group lead */
static void members(const stacks_report *r, const size_t *g, size_t lead, char *buf, size_t n)
{
    int nr = 0, np = 0, len = 0;
    for (size_t i = 0; i < r->nthreads; i++) {
        if (g[i] != lead)
            continue;
        const stacks_proc *p = proc_of(r, r->threads[i].pid);
        if (p && p->rank >= 0)
            nr++;
        else
            np++;
    }
    buf[0] = 0;
    for (int want_rank = 1; want_rank >= 0; want_rank--) {
        int first = 1;
        if ((want_rank ? nr : np) == 0)
            continue;
        len += snprintf(buf + len, n - (size_t)len, "%s%s ", len ? ", " : "",
                        want_rank ? (nr > 1 ? "ranks" : "rank") : (np > 1 ? "pids" : "pid"));
        for (size_t i = 0; i < r->nthreads && len < (int)n - 1; i++) {
            const stacks_proc *p = proc_of(r, r->threads[i].pid);
            int has = p && p->rank >= 0;
            if (g[i] != lead || has != want_rank)
                continue;
            len += snprintf(buf + len, n - (size_t)len, "%s%d", first ? "" : ",",
                            want_rank ? p->rank : (int)r->threads[i].pid);
            first = 0;
        }
    }
}

static const char *source_name(int s)
{
    return s == TFT_SNAP_ONCPU ? "on-cpu" : s == TFT_SNAP_OFFCPU ? "off-cpu" : "running";
}

void stacks_frames_text(const tft_thread_stack *t, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < t->nframes && len + 1 < n; i++) {
        const tft_frame *fr = &t->frames[i];
        char fn[200] = "??";
        if (fr->func[0])
            snprintf(fn, sizeof fn, "%s+0x%llx", fr->func, (unsigned long long)fr->func_off);
        int k;
        char line[24] = "?";
        if (fr->how == TFT_FRAME_PY && fr->module_off)
            snprintf(line, sizeof line, "%llu", (unsigned long long)fr->module_off);
        if (fr->how == TFT_FRAME_PY)    /* " #5  /tmp/hang.py:12 in wait (python)" */
            k = snprintf(buf + len, n - len, "%s #%-2d %s:%s in %s (python)", i ? "\n" : "", i, fr->module, line,
                         fr->func);
        else
            k = snprintf(buf + len, n - len, "%s%s#%-2d 0x%012llx %s (%s+0x%llx)", i ? "\n" : "",
                         fr->how == TFT_FRAME_SCAN ? "?" : " ", i, (unsigned long long)fr->pc, fn,
                         fr->module[0] ? fr->module : "??", (unsigned long long)fr->module_off);
        if (k < 0 || (size_t)k >= n - len) {
            buf[len] = 0;   /* whole lines only */
            return;
        }
        len += (size_t)k;
    }
}

static void print_group(FILE *f, const stacks_report *r, const size_t *g, size_t lead, int frames)
{
    const tft_thread_stack *t = &r->threads[lead];
    char who[512], sum[1024], esc[4096], comm[80];
    members(r, g, lead, who, sizeof who);
    stacks_summary(t, sum, sizeof sum);
    /* thread names and symbols come from the processes: escaped (tft_escape.h) */
    tft_escape_str(sum, esc, sizeof esc);
    if (t->tid == t->pid)
        fprintf(f, "  %s: %s\n", who, esc);
    else
        fprintf(f, "  %s, thread \"%s\": %s\n", who, tft_escape_str(t->comm, comm, sizeof comm), esc);
    if (!frames)
        return;
    fprintf(f, "    pid");
    for (size_t i = 0, k = 0; i < r->nthreads; i++)
        if (g[i] == lead)
            fprintf(f, "%s%d", k++ ? "," : " ", (int)r->threads[i].pid);
    fprintf(f, "; the frames of pid %d tid %d (%s):\n", (int)t->pid, (int)t->tid, source_name(t->source));
    char *text = malloc(TFT_STACK_MAX_FRAMES * 400);
    if (text) {
        stacks_frames_text(t, text, TFT_STACK_MAX_FRAMES * 400);
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
            fprintf(f, "    %s\n", tft_escape_str(line, esc, sizeof esc));
        free(text);
    }
    if (t->note[0])
        fprintf(f, "    (%s%s)\n", t->note,
                t->nframes && t->frames[t->nframes - 1].how == TFT_FRAME_SCAN
                    ? "; frames marked ? were found by scanning the stack for return addresses, a guess"
                    : "");
}

void stacks_print_text(FILE *f, const stacks_report *r, int frames)
{
    size_t *g = make_groups(r);
    if (!g) {
        fprintf(f, "tftrace stacks: out of memory\n");
        return;
    }
    int running = 0;
    for (size_t i = 0; i < r->nthreads; i++)
        running += r->threads[i].source == TFT_SNAP_RUNNING;
    fprintf(f, "%zu process%s, %zu thread%s; user stacks unwound with the CFI (.eh_frame) from BPF snapshots\n",
            r->nprocs, r->nprocs == 1 ? "" : "es", r->nthreads, r->nthreads == 1 ? "" : "s");
    for (int main_pass = 1; main_pass >= 0; main_pass--) {
        int any = 0;
        for (size_t i = 0; i < r->nthreads; i++) {
            if (g[i] != i || (r->threads[i].tid == r->threads[i].pid) != main_pass)
                continue;
            if (!any++)
                fprintf(f, "%s:\n", main_pass ? "main threads" : "other threads");
            print_group(f, r, g, i, frames);
        }
    }
    for (size_t i = 0; i < r->nprocs; i++)
        if (!r->procs[i].nthreads)
            fprintf(f, "pid %d: no thread snapped (it exited, or is a kernel thread)\n", (int)r->procs[i].pid);
    if (running)
        fprintf(f, "(%d thread%s ran on a CPU through the sampling window and were taken by the task iterator:"
                   " their registers may be stale)\n", running, running == 1 ? "" : "s");
    free(g);
}

static cJSON *frame_json(const tft_frame *fr)
{
    cJSON *o = cJSON_CreateObject();
    if (fr->how == TFT_FRAME_PY) {
        cJSON_AddStringToObject(o, "function", fr->func);
        cJSON_AddStringToObject(o, "file", fr->module);
        if (fr->module_off)
            cJSON_AddNumberToObject(o, "line", (double)fr->module_off);
        else
            cJSON_AddNullToObject(o, "line");
        cJSON_AddStringToObject(o, "how", "python");
        return o;
    }
    char pc[32];
    snprintf(pc, sizeof pc, "0x%llx", (unsigned long long)fr->pc);
    cJSON_AddStringToObject(o, "pc", pc);
    if (fr->func[0]) {
        cJSON_AddStringToObject(o, "function", fr->func);
        cJSON_AddNumberToObject(o, "offset", (double)fr->func_off);
    } else {
        cJSON_AddNullToObject(o, "function");
    }
    cJSON_AddStringToObject(o, "module", fr->module);
    cJSON_AddNumberToObject(o, "module_offset", (double)fr->module_off);
    cJSON_AddStringToObject(o, "how", fr->how == TFT_FRAME_SCAN ? "scan" : "cfi");
    return o;
}

static cJSON *thread_json(const tft_thread_stack *t)
{
    cJSON *o = cJSON_CreateObject(), *fr = cJSON_CreateArray();
    char sum[1024];
    stacks_summary(t, sum, sizeof sum);
    cJSON_AddNumberToObject(o, "tid", t->tid);
    cJSON_AddStringToObject(o, "comm", t->comm);
    cJSON_AddBoolToObject(o, "main", t->tid == t->pid);
    cJSON_AddStringToObject(o, "snapshot", source_name(t->source));
    cJSON_AddStringToObject(o, "summary", sum);
    for (int i = 0; i < t->nframes; i++)
        cJSON_AddItemToArray(fr, frame_json(&t->frames[i]));
    cJSON_AddItemToObject(o, "frames", fr);
    if (t->note[0])
        cJSON_AddStringToObject(o, "note", t->note);
    return o;
}

static cJSON *groups_json(const stacks_report *r, const size_t *g)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < r->nthreads; i++) {
        if (g[i] != i)
            continue;
        cJSON *o = cJSON_CreateObject(), *ranks = cJSON_CreateArray(), *pids = cJSON_CreateArray();
        char sum[1024];
        stacks_summary(&r->threads[i], sum, sizeof sum);
        cJSON_AddBoolToObject(o, "main", r->threads[i].tid == r->threads[i].pid);
        cJSON_AddStringToObject(o, "thread", r->threads[i].comm);
        cJSON_AddStringToObject(o, "summary", sum);
        for (size_t j = 0; j < r->nthreads; j++) {
            if (g[j] != i)
                continue;
            const stacks_proc *p = proc_of(r, r->threads[j].pid);
            cJSON_AddItemToArray(pids, cJSON_CreateNumber(r->threads[j].pid));
            cJSON_AddItemToArray(ranks, p && p->rank >= 0 ? cJSON_CreateNumber(p->rank) : cJSON_CreateNull());
        }
        cJSON_AddItemToObject(o, "ranks", ranks);
        cJSON_AddItemToObject(o, "pids", pids);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

char *stacks_json(const stacks_report *r)
{
    size_t *g = make_groups(r);
    cJSON *root = cJSON_CreateObject(), *procs = cJSON_CreateArray();
    for (size_t i = 0; i < r->nprocs; i++) {
        const stacks_proc *p = &r->procs[i];
        cJSON *o = cJSON_CreateObject(), *th = cJSON_CreateArray();
        cJSON_AddNumberToObject(o, "pid", p->pid);
        if (p->rank >= 0) {
            cJSON_AddNumberToObject(o, "rank", p->rank);
            cJSON_AddStringToObject(o, "rank_from", p->rank_var);
        } else {
            cJSON_AddNullToObject(o, "rank");
        }
        for (size_t j = 0; j < r->nthreads; j++)
            if (r->threads[j].pid == p->pid)
                cJSON_AddItemToArray(th, thread_json(&r->threads[j]));
        cJSON_AddItemToObject(o, "threads", th);
        cJSON_AddItemToArray(procs, o);
    }
    cJSON_AddItemToObject(root, "processes", procs);
    if (g)
        cJSON_AddItemToObject(root, "groups", groups_json(r, g));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    free(g);
    return s;
}

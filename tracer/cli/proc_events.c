/*
 * proc_events.c — the launcher's view of every process of its job, from
 * the kernel (tracer/bpf/procs.bpf.c): exec, fork and exit with the exit
 * status or signal — also of processes that load no recorder (static
 * binaries) and of those it cannot wait for (ranks below mpirun) — and OOM
 * kills. Exits of recording processes go to the collector (their rank files'
 * PROCESS records get the real status); at the end the launcher names the
 * processes that did not end with 0 and writes processes-PID.json into the
 * trace directory (FORMAT.md §2.5), which tfdump shows.
 * Best effort: without BPF support or privileges the run is recorded as
 * before and the summary says why there is no process table.
 */
#include "cli_internal.h"
#include "collector.h"
#include "bpf_procs.h"
#include "stacks_report.h"
#include "tft_escape.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct job_proc {
    pid_t pid, ppid;
    char comm[16];
    char exe[128];
    int ended, status;   /* status: wait(2) encoding */
    int oom;             /* chosen by the OOM killer */
} job_proc;

static struct {
    tft_procs *bpf;
    job_proc *v;
    size_t n, cap;
    pid_t self;
    collector *col;
    pid_t child;
    char off[200];       /* why there is no process table, "" when there is */
} J;

static job_proc *find_or_add(pid_t pid)
{
    for (size_t i = J.n; i-- > 0;)
        if (J.v[i].pid == pid && !J.v[i].ended)
            return &J.v[i];
    if (J.n == J.cap) {
        size_t cap = J.cap ? J.cap * 2 : 64;
        job_proc *v = realloc(J.v, cap * sizeof(*v));
        if (!v)
            return NULL;
        J.v = v;
        J.cap = cap;
    }
    job_proc *p = &J.v[J.n++];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    return p;
}

static void on_event(void *ctx, const struct tft_pevent *e)
{
    if (e->pid == J.self)
        return;
    job_proc *p = find_or_add(e->pid);
    if (!p)
        return;
    if (!p->ppid)
        p->ppid = e->ppid;
    memcpy(p->comm, e->comm, sizeof(p->comm));
    p->comm[sizeof(p->comm) - 1] = 0;
    switch (e->type) {
    case TFT_PEV_EXEC: snprintf(p->exe, sizeof(p->exe), "%s", e->file); break;
    case TFT_PEV_OOM: p->oom = 1; break;
    case TFT_PEV_EXIT:
        p->ended = 1;
        p->status = e->code;
        /* the launcher waits for its own child; the collector learns the
         * others' status here instead of "vanished without an exit status" */
        if (J.col && e->pid != J.child)
            collector_child_exit(J.col, e->pid, e->code);
        break;
    default: break;
    }
}

void proc_events_start(void)
{
    char err[200];
    J.self = getpid();
    if (!tft_stacks_supported()) {
        snprintf(J.off, sizeof(J.off), "built without BPF support");
        return;
    }
    if (!bpf_privileged()) {
        snprintf(J.off, sizeof(J.off), "needs root or CAP_BPF + CAP_PERFMON");
        return;
    }
    J.bpf = tft_procs_start(J.self, err, sizeof(err));
    if (!J.bpf)
        snprintf(J.off, sizeof(J.off), "%s", err);
}

void proc_events_poll(collector *col, pid_t child)
{
    if (!J.bpf)
        return;
    J.col = col;
    J.child = child;
    tft_procs_poll(J.bpf, on_event, NULL);
}

/* An MPI runtime daemon still running when the command has ended: Open
 * MPI's orted (a singleton MPI_Init starts one, which leaves after its
 * rank), PRRTE's prted, MPICH's hydra proxy. Not a failure of the job: it
 * ends on its own once its ranks are gone, maybe after tftrace's second. */
static int mpi_daemon_running(const job_proc *p)
{
    static const char *const names[] = {"orted", "prted", "prte", "hydra_pmi_proxy", "pmi_proxy"};
    if (p->ended || p->oom)
        return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(p->comm, names[i]))
            return 1;
    return 0;
}

/* "exit 3", "killed by SIGKILL (the OOM killer)", "still running" */
static void describe(const job_proc *p, char *buf, size_t n)
{
    if (!p->ended)
        snprintf(buf, n, "%s", p->oom ? "chosen by the OOM killer, still running at the end" : "still running at the end");
    else if (WIFSIGNALED(p->status))
        snprintf(buf, n, "killed by SIG%s%s%s", sigabbrev_np(WTERMSIG(p->status)) ? sigabbrev_np(WTERMSIG(p->status)) : "?",
                 WCOREDUMP(p->status) ? " (core dumped)" : "", p->oom ? " — the OOM killer" : "");
    else
        snprintf(buf, n, "exit %d%s", WEXITSTATUS(p->status), p->oom ? " (after the OOM killer chose it)" : "");
}

static int recorded(const collector_summary *s, pid_t pid)
{
    for (int i = 0; i < s->nranks; i++)
        if (s->ranks[i].pid == pid)
            return s->ranks[i].rank;
    return -1;
}

static cJSON *table_json(const collector_summary *s)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "launcher_pid", J.self);
    for (size_t i = 0; i < J.n; i++) {
        const job_proc *p = &J.v[i];
        cJSON *x = cJSON_CreateObject();
        char what[160];
        int rank = recorded(s, p->pid);
        describe(p, what, sizeof(what));
        cJSON_AddNumberToObject(x, "pid", p->pid);
        cJSON_AddNumberToObject(x, "ppid", p->ppid);
        cJSON_AddStringToObject(x, "comm", p->comm);
        cJSON_AddStringToObject(x, "exe", p->exe);
        if (rank >= 0)
            cJSON_AddNumberToObject(x, "rank", rank);
        else
            cJSON_AddNullToObject(x, "rank");
        cJSON_AddBoolToObject(x, "ended", p->ended);
        if (p->ended && WIFEXITED(p->status))
            cJSON_AddNumberToObject(x, "exit_code", WEXITSTATUS(p->status));
        else
            cJSON_AddNullToObject(x, "exit_code");
        if (p->ended && WIFSIGNALED(p->status))
            cJSON_AddNumberToObject(x, "signal", WTERMSIG(p->status));
        else
            cJSON_AddNullToObject(x, "signal");
        cJSON_AddBoolToObject(x, "oom_killed", p->oom);
        cJSON_AddStringToObject(x, "end", what);
        cJSON_AddItemToArray(a, x);
    }
    cJSON_AddItemToObject(o, "processes", a);
    cJSON_AddNumberToObject(o, "events_lost", (double)tft_procs_lost(J.bpf));
    return o;
}

static void write_table(int dir_fd, const char *dir, unsigned mode, const collector_summary *s)
{
    char name[64];
    snprintf(name, sizeof(name), "processes-%d.json", (int)J.self);
    cJSON *o = table_json(s);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    int fd = text ? openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode ? mode : 0600)
                  : -1;
    size_t len = text ? strlen(text) : 0;
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
        fprintf(stderr, "tftrace: %s/%s: cannot write the process table: %s\n", dir, name,
                text ? strerror(errno) : "out of memory");
    if (fd >= 0)
        close(fd);
    free(text);
}

void proc_events_finish(int dir_fd, const char *dir, unsigned mode, int quiet, const collector_summary *s)
{
    if (!J.bpf) {
        if (!quiet && J.off[0])
            fprintf(stderr, "tftrace: no process table (exec/exit/OOM of every process): %s (docs/ATTACH.md)\n", J.off);
        return;
    }
    /* a helper that ends right after the command (MPI's singleton orted,
     * a compiler daemon) gets a second to do so before it is "still
     * running at the end" */
    for (int k = 0; k < 20; k++) {
        tft_procs_poll(J.bpf, on_event, NULL);
        size_t open = 0;
        for (size_t i = 0; i < J.n; i++)
            open += !J.v[i].ended;
        if (!open)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
    }
    size_t bad = 0, daemons = 0;
    for (size_t i = 0; i < J.n; i++) {
        if (mpi_daemon_running(&J.v[i]))
            daemons++;
        else
            bad += !J.v[i].ended || J.v[i].status != 0 || J.v[i].oom;
    }
    if (!quiet || bad)
        fprintf(stderr, "tftrace: %zu process%s in the job, %zu ended with status 0%s%s\n", J.n, J.n == 1 ? "" : "es",
                J.n - bad - daemons, daemons ? (daemons == 1 ? ", 1 MPI daemon still ending" : ", MPI daemons still ending") : "",
                bad ? ":" : "");
    for (size_t i = 0; i < J.n; i++) {
        const job_proc *p = &J.v[i];
        if ((p->ended && p->status == 0 && !p->oom) || mpi_daemon_running(p))
            continue;
        char what[160];
        int rank = recorded(s, p->pid);
        describe(p, what, sizeof(what));
        char name[1024]; /* a path the process chose: escaped (tft_escape.h) */
        tft_escape_str(p->exe[0] ? p->exe : p->comm, name, sizeof name);
        fprintf(stderr, "  pid %d %s: %s%s\n", (int)p->pid, name, what, rank >= 0 ? "" : " (no recorder in it)");
    }
    write_table(dir_fd, dir, mode, s);
    tft_procs_stop(J.bpf);
    J.bpf = NULL;
    free(J.v);
    J.v = NULL;
    J.n = J.cap = 0;
}

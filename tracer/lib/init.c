/*
 * init.c — the recorder's set-up: configuration from TFT_* variables,
 * attaching to the collector's region (TFT_SHM) or starting an in-process
 * writer thread (TFT_OUTPUT), process registration, fork, exit and crash
 * records. Runs once, on the first API call, never on the hot path; with
 * it tft_enabled, whose answer is rec_on's (one load once set up).
 *
 * The in-process writer is the one part of the library that speaks on its
 * own: there is no launcher to tell the user, so a trace it cannot write
 * (a refused directory, a full disk) gets one line on stderr. It shares its
 * directory with the other processes of the job (each creates its own rank
 * file, O_CREAT|O_EXCL|O_NOFOLLOW), takes no run lock and never deletes.
 * Its manifest is a fragment of its own (manifest_frag.c), its run id the
 * job's (runid.c, interpose_mpi_init.c): processes on several hosts can
 * share a directory on a network file system (docs/MULTINODE.md).
 *
 * Under --torch (TFT_TORCH) a rank is a process that trains: a process
 * forked by a recording one (a DataLoader worker) or started below one (the
 * compiler inductor runs, a shell, a compile worker) waits instead of
 * taking a rank, and becomes one only when the Python layer sees it train
 * (tft_process_join, docs/PYTORCH.md "Workers and helper processes").
 */
#include "capture_ref.h"
#include "capture_spec.h"
#include "collector.h"
#include "interpose_internal.h"
#include "recorder_internal.h"
#include "tft.h"
#include "tft_procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { PROC_CLAIMING = 3 };

static struct {
    int active;
    collector *col;
    char dir[4096];
    int dir_fd;               /* the trace directory, open for the process's life */
    unsigned mode;            /* trace files' permission bits (TFT_MODE, default 0600) */
    int rank;
    uint8_t run_id[16];
    int run_id_private;       /* 1: no job identity in the environment; MPI_Init may replace it */
    uint64_t start_ns;        /* CLOCK_REALTIME at start, for the manifest fragment */
    uint8_t new_run_id[16];   /* rec_inproc_adopt_run_id's, for the writer thread */
    _Atomic int runid_req, runid_ack;
    int clock_known;          /* rec_inproc_set_clock's estimate, for the fragment */
    int64_t clock_offset_ns;
    int64_t clock_anchor_ns;  /* realtime - monotonic at the estimate */
    uint64_t clock_error_ns;
    int clock_ref;
    char claimed[64];         /* rank file created to claim a number, "" none */
    pthread_t thread;
    _Atomic int stop;
    _Atomic int flush_req, flush_ack;
} inproc;

/* --torch's waiting processes: set once at init or in a forked child,
 * cleared by the one tft_process_join that registers the process. */
static struct {
    int torch;                /* TFT_TORCH asks for PyTorch recording */
    _Atomic int waiting;      /* 1: records once it trains (tft_process_join) */
    int handlers;             /* atfork, on_exit and signal handlers installed */
} procs;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT};
#define NFATAL ((int)(sizeof(fatal_signals) / sizeof(fatal_signals[0])))

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? dflt : x;
}

static int env_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                       "SLURM_PROCID", "RANK", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        long r = env_long(vars[i], -1);
        if (r >= 0)
            return (int)r;
    }
    return -1;
}

static int env_world(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        long r = env_long(vars[i], -1);
        if (r > 0)
            return (int)r;
    }
    return -1;
}

/* 1 when this process is a job launcher that starts the ranks and computes
 * nothing itself: PyTorch's torchrun (torch.distributed.run / .launch, run
 * as a script or with -m). It imports torch and allocates like a rank but
 * carries no rank of its own (RANK is set for its workers only); recorded,
 * it would take rank 0's file number. Only consulted for processes without
 * a rank in their environment. */
static int is_job_launcher(void)
{
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* argv[0] is the interpreter; look at the first arguments that name a script or module */
    const char *a = buf;
    for (int i = 0; i < 4 && a < buf + n; i++, a += strlen(a) + 1) {
        const char *base = strrchr(a, '/');
        base = base ? base + 1 : a;
        if (!strcmp(base, "torchrun") || !strcmp(a, "torch.distributed.run") ||
            !strcmp(a, "torch.distributed.launch") || strstr(a, "torch/distributed/run.py") ||
            strstr(a, "torch/distributed/launch.py"))
            return 1;
    }
    return 0;
}

/* TFT_TORCH as the sitecustomize reads it: set and not 0/off/no/false. */
static int env_torch(void)
{
    const char *v = getenv("TFT_TORCH");
    if (!v || !*v)
        return 0;
    static const char *const off[] = {"0", "off", "no", "false"};
    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
        if (!strcasecmp(v, off[i]))
            return 0;
    return 1;
}

/* 1 when pid holds an active slot of the region: a process that records. */
static int pid_records(pid_t pid)
{
    const shm_hdr *h = g_rec.h;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++)
        if (atomic_load(&h->procs[i].state) == PROC_ACTIVE && h->procs[i].pid == (int32_t)pid)
            return 1;
    return 0;
}

/* 1 when an ancestor of this process (its parent, the parent's parent, ...,
 * read from /proc/PID/stat) records into the region: this process was
 * started by a rank, through any number of shells and compiler drivers.
 * An ancestor that ended first (the process was re-parented) is not seen. */
static int has_recording_ancestor(void)
{
    pid_t pid = getppid();
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        if (pid_records(pid))
            return 1;
        char buf[1024];
        const char *f = tft_procstat_fields(pid, buf, sizeof(buf));
        /* " S PPID ...": the state, then the parent */
        if (!f || f[0] != ' ' || !f[1] || f[2] != ' ')
            return 0;
        char *end;
        long pp = strtol(f + 3, &end, 10);
        if (end == f + 3 || pp <= 0 || pp == pid)
            return 0;
        pid = (pid_t)pp;
    }
    return 0;
}

static int parse_mode(void)
{
    const char *m = getenv("TFT_STATS");
    if (!m || !strcmp(m, "full"))
        return TFT_STATS_FULL;
    if (!strcmp(m, "health"))
        return TFT_STATS_HEALTH;
    if (!strcmp(m, "shape"))
        return TFT_STATS_SHAPE;
    return TFT_STATS_FULL;
}

/* TFT_CAPTURE (docs/CAPTURE.md). A spec the recorder cannot use (bad
 * syntax, or first-divergence-of without the reference the launcher builds
 * from GOLDEN, TFT_CAPTURE_REF) leaves capture off: the library never prints; the launcher checks the spec and
 * says what is wrong before the command runs. */
static void parse_capture(void)
{
    long wait_ms = env_long("TFT_CAPTURE_WAIT_MS", 5000);
    g_rec.capture_wait_ns = (uint64_t)(wait_ms < 0 ? 0 : wait_ms) * 1000000u;
    g_rec.capture_shuffle = env_long("TFT_CAPTURE_SHUFFLE", 1) != 0;
    const char *spec = getenv("TFT_CAPTURE");
    if (!spec || !*spec)
        return;
    capspec *cs = malloc(sizeof(*cs));
    if (!cs)
        return;
    if (capspec_parse(spec, cs, NULL, 0) < 0) {
        free(cs);
        return;
    }
    if (cs->first_divergence_of[0]) { /* the launcher built golden's reference */
        const char *ref = getenv("TFT_CAPTURE_REF");
        g_rec.capture_ref = ref && *ref ? capref_open(ref) : NULL;
        if (!g_rec.capture_ref) {
            free(cs);
            return;
        }
    }
    g_rec.capture = cs; /* lives as long as the process */
}

/* Takes a process slot; -1 when the region is full. */
static int register_proc(int rank)
{
    shm_hdr *h = g_rec.h;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        uint32_t expect = PROC_FREE;
        if (!atomic_compare_exchange_strong(&h->procs[i].state, &expect, PROC_CLAIMING))
            continue;
        h->procs[i].pid = (int32_t)getpid();
        h->procs[i].rank = rank;
        h->procs[i].world_size = env_world();
        h->procs[i].index = atomic_fetch_add(&h->next_index, 1);
        atomic_store_explicit(&h->procs[i].state, PROC_ACTIVE, memory_order_release);
        g_rec.proc = i;
        return 0;
    }
    return -1;
}

/* The launcher's memfd through its fd table. Only that: a process that
 * outlived its launcher could find the pid reused, and fd N there any file
 * (a device whose open has effects), so the link must name our memfd
 * before anything is opened. */
static int open_memfd(const char *path)
{
    char target[128];
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n < 0)
        return -1;
    target[n] = '\0';
    if (strncmp(target, "/memfd:tftrace-rings", 20) != 0) {
        errno = ENOENT;
        return -1;
    }
    return open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
}

/* TFT_SHM: /proc/PID/fd/N, the launcher's memfd (a named POSIX segment
 * still opens, for older launchers). */
static int attach(const char *name)
{
    int fd = !strncmp(name, "/proc/", 6) ? open_memfd(name) : shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct stat sb;
    void *p = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0)
        p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -EIO;
    if (!shm_region_valid(p, (size_t)sb.st_size)) {
        munmap(p, (size_t)sb.st_size);
        return -EPROTO;
    }
    g_rec.h = p;
    g_rec.bytes = (size_t)sb.st_size;
    return 0;
}

/* ---- in-process writer (TFT_OUTPUT without the launcher) ---------------- */

static void *inproc_main(void *arg)
{
    (void)arg;
    ip_depth = 1; /* the writer's own allocations are not the program's (interpose_alloc.c) */
    uint64_t last_flush = tft_clock_mono_ns();
    while (!atomic_load(&inproc.stop)) {
        int rq = atomic_load(&inproc.runid_req);
        if (rq != atomic_load(&inproc.runid_ack)) {
            collector_set_run_id(inproc.col, inproc.new_run_id);
            memcpy(inproc.run_id, inproc.new_run_id, 16);
            inproc.run_id_private = 0;
            atomic_store(&inproc.runid_ack, rq);
        }
        size_t n = collector_poll(inproc.col);
        uint64_t now = tft_clock_mono_ns();
        int req = atomic_load(&inproc.flush_req);
        if (req != atomic_load(&inproc.flush_ack) || now - last_flush > 1000000000ull) {
            collector_poll(inproc.col);
            collector_flush(inproc.col);
            last_flush = now;
            atomic_store(&inproc.flush_ack, req);
        }
        if (n == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int rec_inproc_flush(int timeout_ms)
{
    if (!inproc.active)
        return 0;
    int want = atomic_fetch_add(&inproc.flush_req, 1) + 1;
    for (int i = 0; i < timeout_ms; i++) {
        if (atomic_load(&inproc.flush_ack) >= want)
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return -ETIMEDOUT;
}

int rec_inproc_run_id_private(uint8_t id[16])
{
    if (!inproc.active || !inproc.run_id_private)
        return 0;
    memcpy(id, inproc.run_id, 16);
    return 1;
}

int rec_inproc_adopt_run_id(const uint8_t id[16], int timeout_ms)
{
    if (!inproc.active)
        return -ENODEV;
    memcpy(inproc.new_run_id, id, 16);
    int want = atomic_fetch_add(&inproc.runid_req, 1) + 1;
    for (int i = 0; i < timeout_ms; i++) {
        if (atomic_load(&inproc.runid_ack) >= want)
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return -ETIMEDOUT;
}

int rec_inproc_active(void) { return inproc.active; }

void rec_inproc_set_clock(int64_t offset_ns, uint64_t error_ns, int ref, int64_t anchor_ns)
{
    inproc.clock_anchor_ns = anchor_ns;
    inproc.clock_offset_ns = offset_ns;
    inproc.clock_error_ns = error_ns;
    inproc.clock_ref = ref;
    inproc.clock_known = 1;
}

/* Picks this process's rank file number: its launcher rank (the collector
 * creates the file on the first record), else the first number whose file
 * it can create exclusively — that file, claimed now, is handed to the
 * collector (*claimed_fd). */
static int inproc_rank(int *claimed_fd)
{
    *claimed_fd = -1;
    int r = env_rank();
    if (r >= 0)
        return r;
    for (int k = 0; k < 100000; k++) {
        char name[64];
        snprintf(name, sizeof(name), "rank-%05d.tft", k);
        int fd = openat(inproc.dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, inproc.mode);
        if (fd >= 0) {
            if (fchmod(fd, inproc.mode) < 0) { /* exact, whatever the umask */
                close(fd);
                unlinkat(inproc.dir_fd, name, 0);
                break;
            }
            snprintf(inproc.claimed, sizeof(inproc.claimed), "%s", name);
            *claimed_fd = fd;
            return k;
        }
        if (errno != EEXIST)
            break;
    }
    return 0;
}

/* TFT_MODE: octal permission bits with owner read and write; else 0600. */
static unsigned env_mode(void)
{
    const char *v = getenv("TFT_MODE");
    if (!v || !*v || strspn(v, "01234567") != strlen(v) || strlen(v) > 4)
        return 0600;
    unsigned long m = strtoul(v, NULL, 8);
    return m <= 0777 && (m & 0600) == 0600 ? (unsigned)m : 0600;
}

/* The trace directory, as the launcher would take it, except that it may
 * hold other processes' rank files (the job's) and is never locked:
 * created 0700 (x where TFT_MODE has r), not a symbolic link (unless
 * TFT_FORCE=1), owned by this user. Returns the fd or -1 with a reason. */
static int inproc_dir(const char *dir, char *why, size_t n)
{
    unsigned dmode = inproc.mode | ((inproc.mode & 0444) >> 2);
    int created = mkdir(dir, dmode) == 0;
    if (!created && errno != EEXIST) {
        snprintf(why, n, "cannot create it: %s", strerror(errno));
        return -1;
    }
    const char *force = getenv("TFT_FORCE");
    int follow = force && *force && strcmp(force, "0");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    struct stat sb;
    if (fd < 0) {
        int e = errno;
        if ((e == ELOOP || e == ENOTDIR) && lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode))
            snprintf(why, n, "is a symbolic link, not followed (TFT_FORCE=1 follows it)");
        else
            snprintf(why, n, "cannot open it: %s", strerror(e));
        return -1;
    }
    if (fstat(fd, &sb) < 0 || sb.st_uid != geteuid()) {
        snprintf(why, n, "belongs to uid %d, not to this process's (%d)", (int)sb.st_uid, (int)geteuid());
        close(fd);
        return -1;
    }
    if (created)
        fchmod(fd, dmode);
    return fd;
}

/* ERROR messages of the collector: the first is kept for the one line
 * inproc_finish prints (the library does not print as things happen). */
static char inproc_first_error[512];
static void inproc_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level == TFT_LOG_ERROR && !inproc_first_error[0])
        snprintf(inproc_first_error, sizeof(inproc_first_error), "%s", msg);
}

static int inproc_start(const char *dir)
{
    char why[256];
    inproc.mode = env_mode();
    snprintf(inproc.dir, sizeof(inproc.dir), "%s", dir);
    inproc.dir_fd = inproc_dir(dir, why, sizeof(why));
    if (inproc.dir_fd < 0) {
        fprintf(stderr, "tftrace: TFT_OUTPUT=%s: %s; not recording\n", dir, why);
        return -EPERM;
    }
    size_t ring = (size_t)env_long("TFT_RING_KB", 4096) * 1024u;
    ring = ring < 65536 ? 65536 : (ring + 4095) / 4096 * 4096;
    uint32_t nrings = 32;
    size_t bytes = shm_region_size(nrings, ring);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    shm_region_init(p, bytes, nrings, ring, env_long("TFT_NO_DROP", 0) ? SHM_NO_DROP : 0);
    const char *to = getenv("TFT_NO_DROP_TIMEOUT");
    char *end;
    double tos = to && *to ? strtod(to, &end) : -1;
    if (to && *to && !*end && tos >= 0)
        ((shm_hdr *)p)->nodrop_timeout_ns = (uint64_t)(tos * 1e9);
    shm_drop_wait_from_env(p);
    shm_setup_clock(p);
    g_rec.h = p;
    g_rec.bytes = bytes;
    uint8_t *run_id = inproc.run_id;
    char src[32];
    inproc.start_ns = clock_realtime_ns();
    inproc.run_id_private = !rec_job_run_id(run_id, src, sizeof(src));
    if (inproc.run_id_private && getrandom(run_id, 16, 0) != 16) {
        uint64_t x[2] = {tft_clock_mono_ns(), (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL)};
        memcpy(run_id, x, 16);
    }
    int claimed_fd;
    inproc.rank = inproc_rank(&claimed_fd);
    manifest_reserve(inproc.dir_fd); /* room for the final manifest on a full disk */
    collector_opts co = {.sz = sizeof(co), .zstd_level = (int)env_long("TFT_ZSTD_LEVEL", 1), .log = inproc_log,
                         .file_mode = inproc.mode,
                         .keep_steps = env_long("TFT_KEEP_STEPS", 0) > 0 ? env_long("TFT_KEEP_STEPS", 0) : 0};
    inproc.col = collector_new(p, dir, inproc.dir_fd, run_id, &co);
    if (!inproc.col) {
        if (claimed_fd >= 0)
            close(claimed_fd);
        return -ENOMEM;
    }
    if (claimed_fd >= 0)
        collector_set_claimed(inproc.col, claimed_fd, inproc.claimed);
    /* the writer starts with every signal blocked: a signal for the
     * process goes to the program's threads, as it would untraced */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&inproc.thread, NULL, inproc_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0)
        return -EAGAIN;
    inproc.active = 1;
    return 0;
}

static void inproc_finish(int code, int sig)
{
    if (!inproc.active)
        return;
    inproc.active = 0;
    atomic_store(&inproc.stop, 1);
    pthread_join(inproc.thread, NULL);
    collector_summary s;
    collector_finish(inproc.col, &s);
    tft_manifest_rank mr[1];
    int n = 0;
    if (s.nranks > 0) {
        mr[0] = (tft_manifest_rank){.rank = s.ranks[0].rank, .pid = s.ranks[0].pid, .exited = 1,
                                    .exit_code = code, .signal = sig};
        snprintf(mr[0].file, sizeof(mr[0].file), "%s", s.ranks[0].file);
        n = 1;
    }
    char why[2048];
    collector_incomplete_reason(&s, why, sizeof(why));
    int me = 0;
    if (n) {
        const char *nr = getenv("TFT_NO_REDACT");
        manifest_run run = {.run_id = inproc.run_id, .options_json = NULL, .no_redact = nr && *nr && strcmp(nr, "0"),
                            .file_mode = inproc.mode, .incomplete = why[0] ? why : NULL,
                            .dropped_stalled = s.dropped_stalled};
        gethostname(mr[0].host, sizeof(mr[0].host) - 1);
        mr[0].clock_known = inproc.clock_known;
        mr[0].clock_offset_ns = inproc.clock_offset_ns;
        mr[0].clock_error_ns = inproc.clock_error_ns;
        mr[0].clock_ref = inproc.clock_ref;
        mr[0].clock_anchored = inproc.clock_known;
        mr[0].clock_anchor_ns = inproc.clock_anchor_ns;
        me = manifest_write_fragment(inproc.dir_fd, inproc.dir, &run, &mr[0], env_world(), inproc.start_ns,
                                     sig ? 128 + sig : code);
    } else {
        manifest_reserve_release(inproc.dir_fd); /* recorded nothing: nothing left behind */
        if (inproc.claimed[0])
            unlinkat(inproc.dir_fd, inproc.claimed, 0);
    }
    /* the one line: the program's status is its own, the user must still learn the trace is short */
    if (why[0] || (s.errors && inproc_first_error[0]) || me < 0)
        fprintf(stderr, "tftrace: TFT_OUTPUT=%s: the trace is INCOMPLETE: %s%s%s\n", inproc.dir,
                why[0] ? why : inproc_first_error[0] ? inproc_first_error : "",
                me < 0 ? (why[0] ? "; manifest.json could not be written: " : "manifest.json could not be written: ") : "",
                me < 0 ? strerror(-me) : "");
    collector_free(inproc.col);
    inproc.col = NULL;
}

/* ---- exit, crash, fork ----------------------------------------------------- */

static struct sigaction old_actions[NFATAL];

/* Writes the exit (or fatal signal) of this process. Async-signal-safe:
 * only the lock-free ring write. */
void rec_record_exit(int code, int sig)
{
    if (atomic_load(&g_rec.state) != ST_ON || atomic_exchange(&g_rec.exit_recorded, 1))
        return;
    shm_ring *r = rec_ring();
    if (!r)
        return;
    tft_rec_process p;
    memset(&p, 0, sizeof(p));
    rec_hdr(&p.h, TFT_REC_PROCESS, sizeof(p), TFT_SEQ_NONE);
    p.event = TFT_PROC_EXIT;
    p.pid = (int32_t)getpid();
    p.exit_code = code;
    p.signal = sig;
    ring_write(g_rec.h, r, &p.h);
}

static void on_fatal(int sig)
{
    rec_record_exit(0, sig);
    if (inproc.active)
        rec_inproc_flush(1000);
    for (int i = 0; i < NFATAL; i++)
        if (fatal_signals[i] == sig)
            sigaction(sig, &old_actions[i], NULL);
    raise(sig);
}

static void install_signal_handlers(void)
{
    if (env_long("TFT_NO_SIGNALS", 0))
        return;
    for (int i = 0; i < NFATAL; i++) {
        struct sigaction cur;
        if (sigaction(fatal_signals[i], NULL, &cur) < 0 || cur.sa_handler != SIG_DFL ||
            (cur.sa_flags & SA_SIGINFO))
            continue; /* the program handles it: leave it alone */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_fatal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_NODEFER | SA_RESETHAND;
        old_actions[i] = cur;
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

static void on_process_exit(int status, void *arg)
{
    (void)arg;
    rec_record_exit(status & 0xff, 0);
    if (inproc.active)
        inproc_finish(status & 0xff, 0);
}

static void reset_counters(void)
{
    atomic_store(&g_rec.seq, 0);
    atomic_store(&g_rec.tensor_id, 0);
    atomic_store(&g_rec.next_thread, 0);
    atomic_store(&g_rec.exit_recorded, 0);
}

/* A forked child of a recording process is a rank of its own (a C
 * program's workers), except under --torch, where it waits until it
 * trains: a DataLoader worker never does. */
static void after_fork_child(void)
{
    atomic_fetch_add(&g_rec.gen, 1);
    if (atomic_load(&g_rec.state) != ST_ON)
        return;
    if (inproc.active) { /* the writer thread did not come along */
        inproc.active = 0;
        atomic_store(&g_rec.state, ST_OFF);
        return;
    }
    reset_counters();
    if (procs.torch) {
        atomic_store(&g_rec.state, ST_OFF);
        atomic_store(&procs.waiting, 1);
        return;
    }
    if (register_proc(-1) < 0)
        atomic_store(&g_rec.state, ST_OFF);
}

/* Once per process image (a forked child inherits them): fork, exit and
 * fatal-signal handling of a recording process. */
static void install_handlers(void)
{
    if (procs.handlers)
        return;
    procs.handlers = 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    on_exit(on_process_exit, NULL);
    install_signal_handlers();
}

int tft_process_waiting(void)
{
    rec_on(); /* set-up decides */
    return atomic_load(&procs.waiting);
}

/* The one caller that clears the flag registers the process: numbered by
 * its registration index (a rank in its environment is its parent's). */
int tft_process_join(void)
{
    if (rec_on())
        return 1;
    if (!atomic_exchange(&procs.waiting, 0))
        return 0;
    ip_depth++;
    reset_counters();
    atomic_fetch_add(&g_rec.gen, 1);
    int ok = register_proc(-1) == 0;
    if (ok) {
        install_handlers();
        atomic_store_explicit(&g_rec.state, ST_ON, memory_order_release);
    }
    ip_depth--;
    return ok;
}

pthread_once_t rec_init_once = PTHREAD_ONCE_INIT;

/* Runs inside the interposers' guard (ip_depth): what set-up maps and
 * allocates (the region, the writer's buffers) is the recorder's, and an
 * interposer asking whether recording is on would re-enter this
 * pthread_once on the same thread and hang. */
void rec_init(void)
{
    ip_depth++;
    int state = ST_OFF;
    g_rec.mode = parse_mode();
    g_rec.every = (int)env_long("TFT_EVERY", 1);
    if (g_rec.every < 1)
        g_rec.every = 1;
    atomic_store(&g_rec.step, TFT_STEP_NONE);
    parse_capture();
    rec_thread_key_init();
    const char *shm = getenv("TFT_SHM");
    const char *out = getenv("TFT_OUTPUT");
    if (env_long("TFT_DISABLE", 0) || (env_rank() < 0 && is_job_launcher())) {
        /* off */
    } else if (shm && *shm) {
        procs.torch = env_torch();
        if (attach(shm) < 0) {
            /* off */
        } else if (procs.torch && has_recording_ancestor()) {
            atomic_store(&procs.waiting, 1); /* started by a rank: records once it trains */
        } else if (register_proc(env_rank()) == 0) {
            state = ST_ON;
        }
    } else if (out && *out) {
        if (inproc_start(out) == 0 && register_proc(inproc.rank) == 0)
            state = ST_ON;
    }
    if (state == ST_ON)
        install_handlers();
    atomic_store_explicit(&g_rec.state, state, memory_order_release);
    ip_depth--;
}

int tft_enabled(void) { return rec_on(); }

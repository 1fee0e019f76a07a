/*
 * tftrace — runs a command with libtftrace preloaded and collects its
 * records into a trace directory. The collector lives in this process, so a
 * crash of the traced program loses nothing it committed to its rings.
 *
 *   tftrace [-o PATH] [--stats MODE] [--every N] [--timeout S] [--no-drop] -- CMD ...
 *   tftrace replay [options] GOLDEN BAD         (replay.c)
 *   tftrace gather OUT DIR...                   (gather.c)
 *   tftrace stacks [--json] PID...              (stacks_cmd.c, docs/ATTACH.md)
 *   tftrace attach [-o TRACE] PID...            (attach_cmd.c, docs/ATTACH.md)
 *
 * The trace directory (docs/SECURITY.md): new or empty, owned by the caller,
 * not a symbolic link (unless --force), locked for the whole run (the
 * instances of one mpirun job share it); files created 0600 (--mode) with
 * O_CREAT|O_EXCL|O_NOFOLLOW relative to the directory's fd. The rings live
 * in a memfd: nothing is left in /dev/shm whatever happens to this process.
 *
 * This file wires the launcher's parts (launch_internal.h: its options, its
 * trace directory, what the command gets) and holds the run itself: the
 * collector, the supervision loop (timeout, signals, --until-step) and the
 * end (final manifest, summary, warnings, exit status). The subcommands
 * live in their own files (cli_internal.h).
 *
 * Exit status: the command's (128+signal when it was killed); 2 for usage
 * errors of tftrace itself (and a trace directory it refuses); 127 when the
 * command cannot be run; 86 (--incomplete-status) when the command
 * succeeded but records were lost to write errors.
 */
#include "launch_internal.h"
#include "tft_drops.h"
#include "tft_usercmd.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) { got_signal = sig; }

static void log_stderr(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= TFT_LOG_WARN)
        fprintf(stderr, "tftrace: %s\n", msg);
}

typedef struct run_state {
    pid_t child;
    int status;
    int exited;
    double term_sent_at, kill_sent_at;
    int stopped;         /* by --until-step: its exit is ours, not a failure */
} run_state;

static double now_s(void) { return (double)tft_clock_mono_ns() / 1e9; }

/* Drains until the command and every traced descendant are gone. */
static void supervise(collector *col, const launch_opts *o, run_state *rs)
{
    double start = now_s(), last_flush = start, child_gone_at = 0;
    for (;;) {
        size_t n = collector_poll(col);
        proc_events_poll(col, rs->child);
        double t = now_s();
        if (!rs->exited) {
            int st;
            pid_t w = waitpid(rs->child, &st, WNOHANG);
            if (w == rs->child) {
                rs->exited = 1;
                rs->status = st;
                child_gone_at = t;
                collector_child_exit(col, rs->child, st);
            }
        }
        if (got_signal && !rs->exited) {
            kill(-rs->child, got_signal);
            got_signal = 0;
        }
        if (o->until_step >= 0 && !rs->exited && !rs->term_sent_at && collector_steps_done(col, o->until_step)) {
            if (!o->quiet)
                fprintf(stderr, "tftrace: step %lld done (--until-step): stopping the command\n",
                        (long long)o->until_step);
            kill(-rs->child, SIGTERM);
            rs->term_sent_at = t;
            rs->stopped = 1;
        }
        if (o->timeout > 0 && !rs->exited && t - start > o->timeout && !rs->term_sent_at) {
            fprintf(stderr, "tftrace: timeout after %.0f s: sending SIGTERM to the command\n", o->timeout);
            timeout_stacks(col, o->quiet);   /* where it hangs, before it is stopped (docs/ATTACH.md) */
            kill(-rs->child, SIGTERM);
            rs->term_sent_at = t;
        }
        if (rs->term_sent_at && !rs->kill_sent_at && t - rs->term_sent_at > o->grace) {
            fprintf(stderr, "tftrace: still running %.0f s after SIGTERM: sending SIGKILL\n", o->grace);
            kill(-rs->child, SIGKILL);
            rs->kill_sent_at = t;
        }
        if (rs->exited && (collector_live_procs(col) == 0 || t - child_gone_at > 2.0))
            break;
        if (t - last_flush > 1.0) {
            collector_flush(col);
            last_flush = t;
        }
        if (n == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* What the rank files on disk hold, from their chunk headers (the index,
 * or a scan of a file left without one): bytes, raw bytes, step range. */
typedef struct disk_sum {
    uint64_t disk, raw;
    int64_t first_step, last_step;
} disk_sum;

static void trace_sizes(const char *dir, const collector_summary *s, disk_sum *d)
{
    *d = (disk_sum){.first_step = TFT_STEP_NONE, .last_step = TFT_STEP_NONE};
    for (int i = 0; i < s->nranks; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, s->ranks[i].file);
        tft_reader *r = tft_reader_open(path, NULL);
        if (!r)
            continue;
        for (size_t k = 0; k < tft_reader_chunk_count(r); k++) {
            const tft_chunk_info *c = tft_reader_chunk(r, k);
            d->raw += c->raw_size;
            if (c->first_step != TFT_STEP_NONE && (d->first_step == TFT_STEP_NONE || c->first_step < d->first_step))
                d->first_step = c->first_step;
            if (c->last_step != TFT_STEP_NONE && (d->last_step == TFT_STEP_NONE || c->last_step > d->last_step))
                d->last_step = c->last_step;
        }
        tft_reader_status st;
        tft_reader_get_status(r, &st);
        d->disk += st.file_bytes;
        tft_reader_close(r);
    }
}

/* What reached the disk: the collector counts the records of the chunks
 * the writer completed, which is what a reader gets back (a torn tail is
 * dropped); bytes and steps are read back from the files. */
static void print_summary(const char *dir, const collector_summary *s)
{
    disk_sum d;
    trace_sizes(dir, s, &d);
    char steps[64] = "none", stalled[96] = "";
    if (d.first_step != TFT_STEP_NONE)
        snprintf(steps, sizeof(steps), "%lld..%lld", (long long)d.first_step, (long long)d.last_step);
    if (s->dropped_stalled)
        snprintf(stalled, sizeof(stalled), " (%llu when --no-drop gave up on a stalled collector)",
                 (unsigned long long)s->dropped_stalled);
    fprintf(stderr,
            "tftrace: %s: %d rank%s, steps %s, %llu records%s, %.1f MB on disk (%.1f MB raw, %.1fx), "
            "%llu dropped%s\n",
            dir, s->nranks, s->nranks == 1 ? "" : "s", steps, (unsigned long long)s->records,
            s->errors ? " on disk" : "", d.disk / 1e6, d.raw / 1e6, d.disk ? (double)d.raw / (double)d.disk : 0.0,
            (unsigned long long)s->dropped, stalled);
}

/* One loud line per rank that dropped records: how many, of which kinds,
 * in which steps, and what to do. Printed even with --quiet: a trace
 * with holes must not pass for a whole one. */
static void warn_dropped(const collector_summary *s)
{
    for (int i = 0; i < s->nranks; i++) {
        const collector_rank *r = &s->ranks[i];
        if (!r->dropped)
            continue;
        tft_drop_sum d;
        tft_drop_sum_init(&d);
        d.count = r->dropped;
        memcpy(d.by_kind, r->drop_kind, sizeof(d.by_kind));
        tft_drop_sum_steps(&d, r->drop_first_step, r->drop_last_step);
        char what[512];
        fprintf(stderr, "tftrace: WARNING: %s of rank %d — %s\n", tft_drop_describe(&d, what, sizeof(what)),
                r->rank,
                r->dropped_stalled >= r->dropped
                    ? "the collector stopped draining (--no-drop gave up after --no-drop-timeout)"
                    : "raise --ring-kb or use --no-drop");
    }
}

static int finish(collector *col, const trace_dir *td, const char *dir, const launch_opts *o, const run_state *rs)
{
    collector_summary s;
    collector_finish(col, &s);
    int code = exit_code_of(rs->status);
    tft_manifest_rank *mr = calloc((size_t)s.nranks + 1, sizeof(*mr));
    for (int i = 0; mr && i < s.nranks; i++) {
        mr[i] = (tft_manifest_rank){.rank = s.ranks[i].rank, .pid = s.ranks[i].pid,
                                    .exited = s.ranks[i].exited, .exit_code = s.ranks[i].exit_code,
                                    .signal = s.ranks[i].signal};
        snprintf(mr[i].file, sizeof(mr[i].file), "%s", s.ranks[i].file);
    }
    char why[4096];
    collector_incomplete_reason(&s, why, sizeof(why));
    manifest_run run = {.no_redact = o->no_redact, .file_mode = o->mode, .collector = 1,
                        .incomplete = why[0] ? why : NULL, .dropped_stalled = s.dropped_stalled};
    char oj[4608];
    if (td->job_rank >= 0) { /* the fragment replaces the start's: all it said again */
        launch_opts_json(o, oj, sizeof(oj));
        run.run_id = td->run_id;
        run.options_json = oj;
    }
    int me = td->job_rank >= 0
                 ? manifest_launcher_fragment(td->fd, dir, &run, td->job_rank, mr, mr ? s.nranks : 0, td->start_ns, code)
                 : manifest_merge_rank(td->fd, &run, mr, mr ? s.nranks : 0, code);
    if (me < 0)
        fprintf(stderr, "tftrace: %s/manifest.json: cannot write the final manifest: %s; the rank files are "
                        "readable without it (tfdump %s)\n", dir, strerror(-me), dir);
    free(mr);
    if (!o->quiet)
        print_summary(dir, &s);
    proc_events_finish(td->fd, dir, o->mode, o->quiet, &s);
    warn_dropped(&s);
    if (!s.nranks && o->cmd && tft_user_switch(1, o->cmd))   /* said even with --quiet: nothing was recorded */
        fprintf(stderr, "tftrace: nothing was recorded: the command switches user (%s), and the recorder is not "
                        "loaded into, or cannot write from, a program that runs as another user; run tftrace as "
                        "that user instead (runuser -u USER -- tftrace -o DIR -- CMD)\n",
                tft_user_switch(1, o->cmd));
    for (int i = 0; i < s.nranks; i++)
        if (s.ranks[i].err)
            fprintf(stderr, "tftrace: %s/%s: INCOMPLETE: %s failed (%s): %llu records reached the disk, "
                            "%llu lost\n", dir, s.ranks[i].file, s.ranks[i].err_what ? s.ranks[i].err_what : "write",
                    strerror(-s.ranks[i].err), (unsigned long long)s.ranks[i].records,
                    (unsigned long long)s.ranks[i].lost);
    if (rs->stopped)
        code = 0; /* stopped on purpose by --until-step: the manifest keeps the real status */
    if ((s.errors || me < 0) && code == 0 && o->incomplete_status) {
        fprintf(stderr, "tftrace: the command succeeded but the trace is incomplete: exit status %ld "
                        "(--incomplete-status)\n", o->incomplete_status);
        code = (int)o->incomplete_status;
    }
    return code;
}

/* ---- the trace directory ------------------------------------------------------ */

/* A fresh run id: every run its own (a joining instance of a job adopts
 * the job's, launch_dir_prepare); the clocks and the pid when the kernel
 * has no random bytes to give. */
static void run_id_new(uint8_t run_id[16])
{
    if (getrandom(run_id, 16, 0) == 16)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x[2] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                     (uint64_t)getpid() << 32 ^ tft_clock_mono_ns()};
    memcpy(run_id, x, 16);
}

/* Everything before the rings, in the order whose first failure the user
 * hears of: --torch's Python package, the trace directory's name (out,
 * when -o gave none), libtftrace.so (lib), the run id, the golden
 * reference of --capture first-divergence-of, the trace directory itself.
 * 0, or -1 with a message on stderr (exit status 2). */
static int run_prepare(launch_opts *o, char *out, size_t out_n, char *lib, size_t lib_n, uint8_t run_id[16],
                       trace_dir *td)
{
    if (o->torch && launch_child_torch(o) < 0)
        return -1;
    if (!o->out) {
        cli_fresh_name(out, out_n, "tftrace", ".trace");
        o->out = out;
    }
    if (launch_child_library(lib, lib_n) < 0) {
        fprintf(stderr, "tftrace: libtftrace.so not found next to tftrace or in ../lib; set TFT_LIB\n");
        return -1;
    }
    run_id_new(run_id);
    if (o->capture_golden[0] && launch_child_capture_ref(o) < 0)
        return -1;
    return launch_dir_prepare(o->out, o, run_id, td) < 0 ? -1 : 0;
}

/* The run: the rings, the collector, the signals passed on to the
 * command, the command itself, supervised until it and its descendants
 * are gone, then the manifest and the summary. Returns the exit status. */
static int run_record(const launch_opts *o, const trace_dir *td, const char *lib, const uint8_t run_id[16])
{
    size_t bytes;
    shm_hdr *h = launch_child_region(o, &bytes);
    if (!h) {
        fprintf(stderr, "tftrace: cannot create the shared memory for the rings (memfd, %zu bytes): %s\n",
                bytes, strerror(errno));
        return 2;
    }
    collector_opts co = {.sz = sizeof(co), .log = log_stderr, .file_mode = o->mode,
                         .keep_steps = o->keep_steps};
    collector *col = collector_new(h, o->out, td->fd, run_id, &co);
    if (!col)
        return 2;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (launch_child_env(o, lib) < 0) {
        fprintf(stderr, "tftrace: out of memory\n");
        return 2;
    }
    run_state rs = {0};
    proc_events_start();   /* before the fork: the command is tracked from its first instruction */
    rs.child = launch_child_spawn(o->cmd);
    if (rs.child < 0) {
        fprintf(stderr, "tftrace: fork: %s\n", strerror(errno));
        return 2;
    }
    collector_set_child(col, rs.child);
    supervise(col, o, &rs);
    int code = finish(col, td, o->out, o, &rs);
    collector_free(col);
    munmap(h, bytes);
    return code;
}

/* tftrace's subcommands: `tftrace NAME ...` runs NAME's main with argv
 * from NAME on. */
static const struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
} subcommands[] = {
    {"gather", gather_main}, {"replay", replay_main}, {"stacks", stacks_main}, {"attach", attach_main},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        if (!strcmp(argv[1], subcommands[i].name))
            return subcommands[i].main(argc - 1, argv + 1);
    launch_opts o = {0};
    int e = launch_opts_parse(argc, argv, &o);
    if (e)
        return e;
    char out[4096], lib[PATH_MAX];
    uint8_t run_id[16];
    trace_dir td;
    if (run_prepare(&o, out, sizeof(out), lib, sizeof(lib), run_id, &td) < 0)
        return 2;
    return run_record(&o, &td, lib, run_id);
}

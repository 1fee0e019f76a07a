/*
 * launch_internal.h — the parts of the launcher, `tftrace [options] --
 * CMD` (tftrace.c wires them and supervises the run): its options
 * (launch_opts.c), the trace directory it records into (launch_dir.c), and
 * what the command gets — libtftrace preloaded, the rings, its environment,
 * its process (launch_child.c).
 */
#ifndef TFT_LAUNCH_INTERNAL_H
#define TFT_LAUNCH_INTERNAL_H

#include "cli_internal.h"
#include "collector.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct opts {
    const char *out;
    int force;           /* --force: a non-empty or symlinked output directory */
    unsigned mode;       /* permission bits of the trace files (--mode), default 0600 */
    int no_redact;       /* --no-redact: the manifest keeps secrets in the command line */
    double nodrop_timeout; /* --no-drop-timeout: seconds a full ring waits for a stalled collector, 0 = no limit */
    long incomplete_status; /* exit status when the command succeeded but the trace lost records; 0 = the command's */
    const char *stats;
    long every;
    double timeout;      /* seconds, 0 = none */
    double grace;        /* seconds between SIGTERM and SIGKILL */
    int no_drop;
    long ring_kb;
    int quiet;
    int64_t until_step;  /* stop the command once this step ended, -1 = never */
    const char *alloc_min;  /* host allocations recorded from this size (TFT_ALLOC_MIN) */
    const char *step_range; /* NVTX range name marking steps (TFT_STEP_RANGE) */
    const char *capture; /* capture spec (docs/CAPTURE.md), NULL = none */
    const char *torch;   /* --torch: "modules" or "ops", NULL = off (TFT_TORCH) */
    long keep_steps;     /* --keep-steps: full records of the last N steps only, 0 = all */
    char capture_golden[4096]; /* GOLDEN of a first-divergence-of capture term, "" none */
    char **cmd;
} opts;

/* The trace directory of this run, opened once: every file in it is reached
 * through fd (openat), so nothing can swap the path under us. */
typedef struct trace_dir {
    int fd;
    int run_lock;        /* .run.lock, flock'ed for the whole run (closed at exit) */
    int joined;          /* another instance of the same job prepared it (mpirun ... tftrace) */
    int job_rank;        /* one instance of a job: its rank, whose manifest fragment it writes
                          * (manifest_launch.c, no lock); -1: manifest.json merged under flock */
    uint64_t start_ns;   /* CLOCK_REALTIME at the start (the fragment's start_ns) */
    uint8_t run_id[16];  /* the run's id (the final fragment repeats it) */
} trace_dir;

/* ---- launch_opts.c ---- */
int parse_args(int argc, char **argv, opts *o);
void options_json(const opts *o, char *buf, size_t n);

/* ---- launch_dir.c ---- */
int prepare_dir(const char *dir, const opts *o, uint8_t run_id[16], trace_dir *td);

/* ---- launch_child.c ---- */
extern char shm_name[64];
int find_library(char *out, size_t n);
int set_torch_env(const opts *o);
shm_hdr *create_region(const opts *o, size_t *bytes);
int set_child_env(const opts *o, const char *lib);
pid_t spawn(char **cmd);
int build_capture_ref(const opts *o);

#endif

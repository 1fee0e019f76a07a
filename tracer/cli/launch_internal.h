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

typedef struct launch_opts {
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
    int perturb;         /* --perturb: TFTRACE_PERTURB=1 for the command, whose PyTorch layer
                          * (--torch) or tftrain flips the last mantissa bit of every parameter */
    char capture_golden[4096]; /* GOLDEN of a first-divergence-of capture term, "" none */
    char **cmd;
} launch_opts;

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

/* ---- launch_opts.c: the options ------------------------------------------ */

/* Fills o from the TFT_* environment, then from argv (tftrace [options] --
 * CMD ...); o->cmd points into argv. 0, or the exit status 2 with a
 * message on stderr; --help and --version print and exit(0). */
int launch_opts_parse(int argc, char **argv, launch_opts *o);
/* The recording options as the manifest's "options" object, JSON text in
 * buf (n bytes; an option that does not fit is left out). */
void launch_opts_json(const launch_opts *o, char *buf, size_t n);

/* ---- launch_dir.c: the trace directory ------------------------------------ */

/* Opens (creating it when new) and locks the trace directory dir for this
 * run, checks it may record there, adopts the job's run id when it joins
 * another instance of its job, and writes the start manifest. 0, or -1
 * with a message on stderr (exit status 2, before the command starts). */
int launch_dir_prepare(const char *dir, const launch_opts *o, uint8_t run_id[16], trace_dir *td);

/* ---- launch_child.c: what the command gets --------------------------------- */

/* The path of libtftrace.so (TFT_LIB, next to tftrace, or ../lib). 0 or -1. */
int launch_child_library(char *out, size_t n);
/* --torch: PYTHONPATH and TFT_TORCH for the Python package's
 * sitecustomize. 0, or -1 with a message on stderr. */
int launch_child_torch(const launch_opts *o);
/* The rings: a shared memfd region of *bytes, set up from o. NULL with
 * errno set (*bytes still says the size asked for). */
shm_hdr *launch_child_region(const launch_opts *o, size_t *bytes);
/* The command's environment: LD_PRELOAD of lib, TFT_SHM, the recording
 * options, TFTRACE_PERTURB of --perturb, the NVTX/CUDA injection paths.
 * 0, or -1 when out of memory. */
int launch_child_env(const launch_opts *o, const char *lib);
/* Runs cmd in a process group of its own. Its pid, or -1 with errno set. */
pid_t launch_child_spawn(char **cmd);
/* --capture first-divergence-of: the golden trace's reference file for
 * the recorder (TFT_CAPTURE_REF), removed at exit. 0, or -1 with a
 * message on stderr. */
int launch_child_capture_ref(const launch_opts *o);

#endif

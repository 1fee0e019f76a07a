/*
 * collector.h — drains the shared-memory rings into rank files. Used by the
 * tftrace launcher (its own process, so a crash of the traced program loses
 * nothing it committed) and by the in-process writer thread of libtftrace
 * (TFT_OUTPUT without the launcher). Single-threaded: one caller at a time.
 */
#ifndef TFT_COLLECTOR_H
#define TFT_COLLECTOR_H

#include "shm_internal.h"

#include <stdbool.h>

typedef struct collector collector;

typedef struct collector_opts {
    size_t sz;
    int zstd_level;        /* default 1 */
    size_t chunk_bytes;    /* default 1 MiB */
    tft_log_fn log;
    void *log_ctx;
    unsigned file_mode;    /* rank files' permission bits, exactly (umask aside); 0 = 0600 */
    long long keep_steps;  /* flight-recorder mode: full records of the last N steps, 0 all */
} collector_opts;

typedef struct collector_rank {
    int rank;
    int pid;
    char file[64];
    int exited, exit_code, signal;
    uint64_t records;        /* records in the file that reached the disk (what a reader gets) */
    uint64_t lost;           /* records lost to a write error */
    int err;                 /* first write error (negative errno), 0 none */
    const char *err_what;    /* "create", "write", "close" when err */
    uint64_t dropped_stalled;
    uint64_t dropped;        /* records the rings dropped */
    uint64_t drop_kind[SHM_DROP_KINDS]; /* of those, per record kind (FORMAT.md §5.11: slot 0 other) */
    int64_t drop_first_step, drop_last_step; /* steps of the drops, TFT_STEP_NONE none */
} collector_rank;

typedef struct collector_summary {
    int nranks;
    collector_rank *ranks;   /* owned by the collector */
    uint64_t records;        /* on disk, every rank file */
    uint64_t lost;           /* lost to write errors */
    uint64_t raw_bytes, file_bytes, dropped;
    uint64_t dropped_stalled; /* of dropped: --no-drop gave up on a stalled or dead collector */
    int64_t first_step, last_step; /* TFT_STEP_NONE when none */
    int errors;              /* rank files that failed to write (each once) */
} collector_summary;

/* dir names the trace directory in messages; dir_fd is it, open (the
 * caller keeps it open while the collector lives): rank files are created
 * in it with O_CREAT|O_EXCL|O_NOFOLLOW. */
collector *collector_new(shm_hdr *h, const char *dir, int dir_fd, const uint8_t run_id[16],
                         const collector_opts *o);
/* The in-process writer claims its rank file (a number nobody holds) before
 * any record: fd, named name in the directory, is used for the process whose
 * file gets that name. The collector owns fd from the call on. */
void collector_set_claimed(collector *c, int fd, const char *name);
/* Drains every ring once, retires finished threads and dead processes.
 * Returns the bytes drained. */
size_t collector_poll(collector *c);
/* The launcher's direct child: left to collector_child_exit (its wait
 * status), not finished when seen dead by the liveness check. */
void collector_set_child(collector *c, pid_t pid);
/* The launcher reaped a direct child: records its exit status. */
void collector_child_exit(collector *c, pid_t pid, int wait_status);
/* Number of processes that registered and have not exited. */
int collector_live_procs(collector *c);
/* 1 when some process has ended step `step` and every process recording
 * steps has ended it or is gone (tftrace --until-step). */
int collector_steps_done(collector *c, int64_t step);
/* Seals open chunks so they survive a crash of this process. */
void collector_flush(collector *c);
/* Final drain; closes every rank file (index written). Fills *s (valid until
 * collector_free). Returns 0 or the first write error. */
int collector_finish(collector *c, collector_summary *s);
void collector_free(collector *c);
/* One clause per rank file of s that lost records to a write error ("FILE:
 * write failed (No space left on device): N records reached the disk, M
 * lost"), joined by "; ": the manifest's "incomplete". "" when none. */
void collector_incomplete_reason(const collector_summary *s, char *buf, size_t n);

/* ---- manifest.json (manifest_merge.c) --------------------------------------- */

#define MANIFEST_REDACTED "<redacted>"

/* Merges rank entries into the manifest of the trace directory dir_fd under
 * an exclusive lock (several tftrace instances or in-process writers may
 * share one trace directory): entries with the same rank are replaced,
 * others kept; fields still empty are filled from this process (command
 * line, redacted unless run->no_redact; cwd, host). exit_status -1: the
 * start (a collector joins); >= 0: the end — the reserve is released first,
 * and the manifest is complete when every collector in it is done and no
 * rank file lost records. Returns 0 or a negative errno. */
typedef struct manifest_run {
    const uint8_t *run_id;     /* 16 bytes, or NULL to keep what is there */
    const char *options_json;  /* recording options object, or NULL */
    int no_redact;             /* keep the command line verbatim (--no-redact) */
    unsigned file_mode;        /* manifest.json's permission bits; 0 = 0600 */
    int collector;             /* this process is a collector (the launcher): listed in "collectors" */
    const char *incomplete;    /* why records were lost (added to "incomplete"), NULL none */
    uint64_t dropped_stalled;  /* added to the manifest's count */
} manifest_run;
int manifest_merge_rank(int dir_fd, const manifest_run *run, const tft_manifest_rank *ranks, int n,
                        int exit_status);
/* Fills the fields of m still empty from this process: cwd, host, start
 * time (now), the command line from /proc/self/cmdline (redacted when
 * redact). */
void manifest_fill_self(tft_manifest *m, bool redact);
/* The in-process writer's end (manifest_frag.c, FORMAT.md §2.4): writes this
 * process's fragment manifest.rank-NAME.json (NAME: its rank file's name
 * without .tft) into the trace directory dir_fd by rename, no lock, then
 * refreshes manifest.json, a snapshot of every fragment there (dir: the
 * same directory's path, to list it). rank carries its host; world_size -1
 * unknown; start_ns the process's start (CLOCK_REALTIME ns). 0 or -errno
 * (the fragment's: the snapshot is best effort). */
int manifest_write_fragment(int dir_fd, const char *dir, const manifest_run *run, const tft_manifest_rank *rank,
                            int world_size, uint64_t start_ns, int exit_status);
/* manifest.json rewritten as the snapshot of the fragments in the trace
 * directory dir_fd (dir: its path), best effort, no lock (manifest_frag.c). */
void manifest_refresh_snapshot(int dir_fd, const char *dir, unsigned mode);
/* A launcher that is one instance of a job (manifest_launch.c): writes its
 * fragment manifest.rank-NNNNN.json (NNNNN = job_rank) by rename, no lock:
 * at its start (exit_status -1: collector not done, no ranks) and at its
 * end (its n rank files, exit status, collector done), then refreshes
 * manifest.json. start_ns: the run's start (CLOCK_REALTIME ns). 0 or -errno. */
int manifest_launcher_fragment(int dir_fd, const char *dir, const manifest_run *run, int job_rank,
                               const tft_manifest_rank *ranks, int n, uint64_t start_ns, int exit_status);
/* Sets the run id of the collector's rank files: those open now get it
 * written into their header (tft_writer_set_run_id), later ones at their
 * creation. Called on the thread that polls the collector. 0 or the first
 * -errno (that file keeps the old id). */
int collector_set_run_id(collector *c, const uint8_t run_id[16]);
/* CLOCK_REALTIME in ns as the recorder reports it (clock.c): plus
 * TFT_TEST_CLOCK_OFFSET_NS, set by tests only. */
uint64_t clock_realtime_ns(void);
/* A CLOCK record (FORMAT.md §5.17) read now: the host's CLOCK_MONOTONIC
 * and CLOCK_REALTIME together (the latter as clock_realtime_ns reports
 * it) and the kernel's NTP state; no step, no seq (a reader's step and
 * merge order are not moved by it). */
void clock_pair_read(tft_rec_clock *r);
/* How often the collector writes a CLOCK record into each open rank file:
 * TFT_CLOCK_PAIRS_MS milliseconds, 1 s when unset. */
uint64_t clock_pair_every_ns(void);
/* How often the collector samples each recording process's resident set
 * (rss.c): TFT_RSS_MS milliseconds, 1 s when unset, 0 never. */
uint64_t rss_every_ns(void);
/* The resident set of process pid in bytes, from /proc/PID/statm. 0 or a
 * negative errno (the process is gone or a zombie, /proc unreadable). */
int rss_read(pid_t pid, uint64_t *bytes);
/* Reads the manifest.json of the trace directory dir_fd (never through a
 * link; at most 64 MiB) into *m. Returns 0 or a negative errno. */
int manifest_read_at(int dir_fd, tft_manifest *m);
/* Creates this process's reserve (64 KiB, .manifest.reserve.PID) in the trace
 * directory, released by the final manifest_merge_rank: a disk filled by the
 * rank files still has room for the manifest that says so. 0 or -errno. */
int manifest_reserve(int dir_fd);
/* Deletes this process's reserve (done by the final manifest_merge_rank;
 * for a process that ends without one). */
void manifest_reserve_release(int dir_fd);
/* Replaces the values of secret-looking arguments in argv (docs/SECURITY.md):
 * --NAME=V and -NAME=V, --NAME V (V not starting with '-'), NAME=V (NAME an
 * identifier), where NAME contains KEY, TOKEN, SECRET, PASSWORD or PASSWD in
 * any case; and the password of scheme://user:PASSWORD@host. V becomes
 * MANIFEST_REDACTED. Writes the indices changed to idx (at most max_idx).
 * Returns their number or a negative errno. */
int manifest_redact(char **argv, int argc, int *idx, int max_idx);

/* ---- records from outside the rings (collector.c) ---------------------------- */
/* The pids of the processes whose rank files are open and that are alive,
 * at most max of them into out. Returns how many. */
int collector_live_pids(collector *c, pid_t *out, int max);
/* Appends rec to the rank file of process pid after defining its strings:
 * texts[i] (NULL or "" = none, id 0) gets an id, stored through ids[i] (which
 * point into rec) before rec is written. Returns 0, -ESRCH when pid has no
 * open rank file, or the writer's -errno. */
int collector_append_for(collector *c, pid_t pid, tft_rec *rec, const char *const *texts, uint64_t *const *ids,
                         int n);
#endif

/*
 * collector.h — drains the shared-memory rings into rank files. Used by the
 * tftrace launcher (its own process, so a crash of the traced program loses
 * nothing it committed) and by the in-process writer thread of libtftrace
 * (TFT_OUTPUT without the launcher). Single-threaded: one caller at a time.
 */
#ifndef TFT_COLLECTOR_H
#define TFT_COLLECTOR_H

#include "shm_internal.h"

typedef struct collector collector;

typedef struct collector_opts {
    size_t sz;
    int zstd_level;        /* default 1 */
    size_t chunk_bytes;    /* default 1 MiB */
    tft_log_fn log;
    void *log_ctx;
} collector_opts;

typedef struct collector_rank {
    int rank;
    int pid;
    char file[64];
    int exited, exit_code, signal;
} collector_rank;

typedef struct collector_summary {
    int nranks;
    collector_rank *ranks;   /* owned by the collector */
    uint64_t records, raw_bytes, file_bytes, dropped;
    int64_t first_step, last_step; /* TFT_STEP_NONE when none */
    int errors;              /* rank files that failed to write */
} collector_summary;

collector *collector_new(shm_hdr *h, const char *dir, const uint8_t run_id[16], const collector_opts *o);
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

#endif

/* Merges rank entries into DIR/manifest.json under an exclusive lock (several
 * tftrace instances or in-process writers may share one trace directory):
 * entries with the same rank are replaced, others kept; fields still empty
 * are filled from this process (command line, cwd, host). Marks the manifest
 * complete with exit_status (>= 0) unless exit_status is -1 (start). */
typedef struct manifest_run {
    const uint8_t *run_id;     /* 16 bytes, or NULL to keep what is there */
    const char *options_json;  /* recording options object, or NULL */
} manifest_run;
int manifest_merge_rank(const char *dir, const manifest_run *run, const tft_manifest_rank *ranks, int n,
                        int exit_status);

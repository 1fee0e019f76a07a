/*
 * collector_internal.h — what the collector's two files share
 * (collector.c: the drain; collector_end.c: ends and outside records):
 * the collector's state, one traced process's rank file, and the
 * functions that append to it.
 */
#ifndef TFT_COLLECTOR_INTERNAL_H
#define TFT_COLLECTOR_INTERNAL_H

#include "collector.h"
#include "tft_clock.h"
#include "tft_msg.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct cproc {
    tft_writer *w;
    int opened, closed, failed;
    int rank;
    pid_t pid;
    char file[64];
    int exit_known, exit_code, signal;
    uint64_t records;
    /* write errors: what reached the disk is exact (FORMAT.md: a reader
     * drops a torn tail), the rest is counted as lost */
    int err;                      /* first write error (negative errno), 0 none */
    const char *err_what;         /* "create", "write", "close" */
    uint64_t sealed;              /* records in chunks the writer completed */
    uint64_t appended;            /* records the writer took (at close) */
    uint64_t lost;                /* records drained after the file failed */
    uint64_t dropped_stalled;     /* --no-drop gave up on a stalled collector */
    uint64_t dropped;             /* records the rings dropped (attributed to this process) */
    uint64_t drop_kind[SHM_DROP_KINDS]; /* of those, per record kind (as the producers counted) */
    int64_t drop_first_step, drop_last_step; /* steps of the drops, TFT_STEP_NONE none */
    uint64_t st_records, st_chunks; /* the writer's counts after the last append (cproc_append) */
    int64_t first_step, last_step;
    int64_t last_step_end;        /* highest step whose STEP END arrived */
    /* threads (FORMAT.md §5.13-5.14) */
    bool has_thread;              /* a THREAD switch was written */
    int32_t cur_tid;              /* the thread of the records written last */
    uint32_t cur_index;
    uint32_t switches;            /* THREAD switches written */
    int64_t step_begun;           /* highest step whose STEP begin was written */
    int64_t pass_step;            /* step_begun when the current drain pass began */
    int64_t synced;               /* step of the last SYNC written */
    uint64_t pair_records;        /* st_records after the last CLOCK record (clock_pairs) */
    bool pair_due;                /* a CLOCK record was skipped while idle: one goes before the next record */
    uint64_t rss_records;         /* st_records after the last RSS sample (rss_samples) */
    uint64_t rss_last;            /* the last RSS sample written, bytes */
} cproc;

/* One ring's backlog (collector.c, drain_pass): records ring_pull moved
 * out of the ring that the writer has not taken yet, in ring order. */
typedef struct cbacklog {
    char *buf;                    /* malloc'd, cap bytes; NULL until first needed */
    size_t cap;
    size_t rd, wr;                /* records at [rd, wr) wait for the writer */
    uint32_t proc;                /* the ring's process when they were pulled */
    bool more;                    /* the last pull left records in the ring (no room) */
    uint32_t state;               /* the ring's state (RING_*) read before the last pull */
} cbacklog;

struct collector {
    shm_hdr *h;
    char *dir;                    /* for messages */
    int dir_fd;                   /* the trace directory: rank files are created in it */
    int claimed_fd;               /* collector_set_claimed: an already created rank file, -1 none */
    char claimed_name[64];
    uint8_t run_id[16];
    collector_opts o;
    cproc procs[SHM_MAX_PROCS];
    uint64_t *ring_dropped;       /* dropped counts already attributed, per ring */
    uint64_t *ring_stalled;       /* the same for dropped_stalled */
    uint64_t *ring_kinds;         /* the same for drop_kind, SHM_DROP_KINDS per ring */
    uint64_t last_liveness_ns;
    uint64_t last_refine_ns;
    uint64_t last_pair_ns;        /* CLOCK records last written (clock_pairs) */
    uint64_t last_rss_ns;         /* RSS samples last taken (rss_samples) */
    pid_t child;                  /* the launcher's direct child, 0 none */
    const shm_ring *draining;     /* the ring ring_drain is reading (on_record's source) */
    collector_rank *ranks;
    uint64_t dropped_total, stalled_total;
    int write_errors;             /* rank files with an error (each counted once) */
    /* The backlog: a producer that outpaces the writer (zstd, the chunk
     * codec: ~0.2-0.3 µs a record) for a while — a burst of small calls —
     * finds its ring emptied by a memcpy instead of waiting for the writer
     * (TFT_BACKLOG_MB, collector.c). */
    cbacklog *backlog;            /* n_rings entries */
    size_t backlog_cap;           /* bytes allocated, all rings */
    size_t backlog_max;           /* limit of backlog_cap; 0: rings drained in place (ring_drain) */
    uint32_t backlog_next;        /* the ring whose backlog the writer takes first (round robin) */
};

#define CLOG(c, lvl, ...) tft_logf((c)->o.log, (c)->o.log_ctx, (lvl), __VA_ARGS__)

/* ---- collector.c ---- */

/* Counts rec (appended to p's file) into p's records and step span. */
void cproc_record(cproc *p, const tft_rec *rec);
/* The first write error of p's file: counted once, logged once; the
 * collector stops writing the file (what it sealed stays readable). */
void cproc_fail(collector *c, cproc *p, int e, const char *what);
/* Appends rec to p's file; 0 or the writer's -errno (a write error fails
 * the file). */
int cproc_append(collector *c, cproc *p, const tft_rec *rec);
/* Seals what is buffered, notes it as on disk, and closes p's file. */
void cproc_close(collector *c, cproc *p);
/* Drains finished process idx, marks it done and closes its file. */
void cproc_finish(collector *c, uint32_t idx);
/* One pass over the rings (only_proc's, or all for -1). Returns the bytes
 * drained. */
size_t collector_drain(collector *c, int only_proc);
/* A process is gone when its pid no longer exists or is a zombie. */
int collector_pid_gone(pid_t pid);
/* Hands every record of the backlogs to the writer (pulls nothing). */
void collector_backlog_write(collector *c);

#endif

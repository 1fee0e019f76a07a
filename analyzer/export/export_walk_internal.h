/*
 * export_walk_internal.h — the walker of tfdump --export (export_internal.h
 * says what it makes of a rank): one rank file's state while it is walked,
 * and the files that turn its records into the emitter's calls. Calls go
 * one way, down this list:
 *   export_run.c      the export: options checked, OUT opened, the ranks
 *                     walked one after the other on one clock
 *   export_walk.c     one rank file walked: each record to its handler,
 *                     what is still open at the end
 *   export_coll.c     collectives: slices from enter to exit, flows across ranks
 *   export_records.c  steps, ops and the other kinds of record
 *   export_track.c    the rank's tracks (threads, streams, counters),
 *                     export times, slice arguments
 *
 * Nesting. Viewers nest slices of one track by time, so the walker keeps
 * every track's slices strictly nested or disjoint: a child starts at least
 * 1 ns after its parent and its parent ends at least 1 ns after it; a slice
 * starts at least 1 ns after the track's previous boundary (op, step or
 * collective end). The shifts are nanoseconds against the microseconds
 * that records are apart.
 *
 * Memory per rank: the thread and stream tables (bounded), the calls in
 * flight (EXP_OPEN_MAX), the live allocations (EXP_LIVE_MAX) and the
 * reader's chunk; nothing grows with the number of steps. One rank file is
 * open at a time (the trace is opened lazily).
 */
#ifndef TFT_EXPORT_WALK_INTERNAL_H
#define TFT_EXPORT_WALK_INTERNAL_H

#include "core_clock.h"
#include "export_internal.h"
#include "tft_u64map.h"

#include <stdbool.h>
#include <stdint.h>

/* One recording thread's track and what is open on it. */
typedef struct export_thread {
    bool declared;
    export_track track;
    bool have_mark;
    uint64_t mark;        /* the track's last boundary (export ns) */
    bool op;              /* an op pending: its end is its last record so far */
    int64_t op_seq, op_step;
    uint64_t op_name, op_scope;
    int op_kind;
    uint64_t op_start, op_end;
    bool step_open;
    int64_t step;
    uint64_t step_ts;
    int32_t tid;
    uint64_t tname;       /* string id of the thread's name, 0 none */
} export_thread;

typedef struct export_stream {
    int32_t device;
    uint64_t stream;
    export_track track;
    uint64_t mark;
} export_stream;

/* A collective entered and not (yet) exited. */
typedef struct export_call {
    uint64_t comm, coll_seq, name, count;
    uint64_t t_enter;     /* export ns */
    int64_t step, seq;
    int thread;           /* slot */
    int type, dtype, redop;
    int32_t root, rank, nranks;
} export_call;

typedef struct export_live {
    uint64_t ptr;
    uint64_t bytes;
    int slot;             /* live-bytes counter */
} export_live;

typedef struct export_rank {
    const export_ops *ops;
    export_sink *sink;
    tft_reader *r;
    int rank;
    export_process proc;
    char pname[256];      /* "rank 0 (pid 4242 on vm; clock: ...)" */
    int64_t origin;       /* export ns of the file's start_monotonic */
    uint64_t mono0;       /* the file's start_monotonic */
    bool follow;          /* across hosts on each host's realtime: times mapped through track */
    core_clock_pair clk;  /* the pair of the last CLOCK record read (follow) */
    core_clock_track track; /* the file's clock pairs (follow) */
    int64_t rm0;          /* realtime - monotonic of the file's header (origin's) */
    export_thread *threads;  /* EXP_THREADS_MAX */
    int cur;              /* slot of the records' thread */
    export_stream streams[EXP_STREAMS_MAX + 1];
    int nstreams;
    export_track async;      /* collectives that overlap their thread's other slices */
    bool async_declared;
    uint64_t async_mark;
    tft_u64map open;      /* hash(comm, coll_seq) -> export_call */
    tft_u64map live;      /* hash(ptr, device) -> export_live */
    uint64_t live_bytes[EXP_DEVICES_MAX];
    export_track counters[EXP_DEVICES_MAX + 3]; /* live bytes per device, rss, loss, grad_norm */
    bool counter_declared[EXP_DEVICES_MAX + 3];
    uint64_t last_ts;
    int32_t max_members;  /* flows only for communicators no larger than the trace's rank files */
    uint64_t fan[EXP_FANOUT_MAX];
    int err;              /* first emitter error */
} export_rank;

enum { CTR_RSS = EXP_DEVICES_MAX, CTR_LOSS, CTR_GRAD_NORM };

static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- export_track.c ---------------------------------------------------------- */

/* Says what went wrong through o->log (printf-style; nothing without a log). */
void export_say(const export_opts *o, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Whether o selects rank (--rank, --ranks; every rank when neither). */
bool export_rank_selected(const export_opts *o, int rank);
/* A uuid unique in the export for (what, rank, a, b). */
uint64_t export_uuid(const char *what, int rank, int64_t a, uint64_t b);
/* Export time of a record time of this rank: ns since the export's origin, 0 at the least. */
uint64_t export_time(const export_rank *k, uint64_t ts);
/* Keeps the first emitter error e (0: none) of the rank. */
void export_set_err(export_rank *k, int e);
/* Appends an argument to a[*n] (export_arg_str: none for NULL, export_arg_step:
 * none for TFT_STEP_NONE). */
void export_arg_int(export_arg *a, int *n, const char *key, int64_t v);
void export_arg_uint(export_arg *a, int *n, const char *key, uint64_t v);
void export_arg_str(export_arg *a, int *n, const char *key, const char *v);
void export_arg_hex(export_arg *a, int *n, const char *key, uint64_t v);
void export_arg_step(export_arg *a, int *n, int64_t step);
/* The thread of slot (its track declared on first use); the records' thread. */
export_thread *export_thread_at(export_rank *k, int slot);
export_thread *export_cur_thread(export_rank *k);
/* The rank's track of collectives that overlap their thread's other slices. */
const export_track *export_async_track(export_rank *k);
/* The track of (device, stream), declared on first use; past EXP_STREAMS_MAX the last. */
export_stream *export_stream_of(export_rank *k, int32_t device, uint64_t stream);
/* Counter slot (a live-bytes device, CTR_*) at ts is v; its track declared on first use. */
void export_counter(export_rank *k, int slot, uint64_t ts, double v);
/* An instant on the records' thread. */
void export_emit_instant(export_rank *k, uint64_t ts, const char *name, const char *cat, const export_arg *args,
                         int nargs);

/* ---- export_records.c --------------------------------------------------------- */

/* th's pending op as a slice (open: it never ended), if it has one. */
void export_emit_op(export_rank *k, export_thread *th, bool open);
/* th's step as a slice ending at end (open: it never ended). */
void export_emit_step(export_rank *k, export_thread *th, uint64_t end, bool open);
/* A record of the pending op (same seq) extends it. */
void export_extend_op(export_rank *k, const tft_rec *h);
/* The handlers of the records' kinds. */
void export_on_step(export_rank *k, const tft_rec_step *st);
void export_on_op(export_rank *k, const tft_rec_op *op);
void export_on_kernel(export_rank *k, const tft_rec_kernel *kr);
void export_on_alloc(export_rank *k, const tft_rec_alloc *a);
void export_on_free(export_rank *k, const tft_rec_free *f);
void export_on_tensor(export_rank *k, const tft_rec_tensor *t);
void export_on_process(export_rank *k, const tft_rec_process *p);
void export_on_checkpoint(export_rank *k, const tft_rec_checkpoint *c);
void export_on_dropped(export_rank *k, const tft_rec_dropped *d);
void export_on_thread(export_rank *k, const tft_rec_thread *t);

/* ---- export_coll.c ------------------------------------------------------------ */

/* Call c as a slice from its enter to t_exit (open: entered and never returned). */
void export_emit_call(export_rank *k, const export_call *c, uint64_t t_exit, bool open);
void export_on_collective(export_rank *k, const tft_rec_collective *c);

/* ---- export_walk.c ------------------------------------------------------------ */

/* Walks k's rank file (k->r; name for messages) into the emitter. 0 or a
 * negative errno (-EIO after a message). */
int export_walk_rank(export_rank *k, const export_opts *o, const char *name);

#endif

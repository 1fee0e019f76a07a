/*
 * export_internal.h — `tfdump --export chrome|perfetto OUT TRACE` (export.h):
 * timelines for trace viewers. One walker (export_walk_internal.h) reads
 * the rank files one after the other and turns their records into tracks,
 * slices, instants and counters; an emitter writes them in one format:
 * Chrome's Trace Event Format as JSON (export_chrome.c, with cJSON) or
 * Perfetto's protobuf TrackEvent format (export_perfetto.c, with
 * protobuf-c). Not installed;
 * nothing here is a library API.
 *
 * What the walker makes of a rank (docs/REPORTS.md, "Exports"):
 *   - a process per rank (pid = rank + 1), a thread track per recording
 *     thread, a device track per (CUDA device, stream), counter tracks;
 *   - steps as slices on the thread that marked them, enclosing that
 *     thread's ops; ops as slices (name, scope, kind, step, seq) from the
 *     thread's previous boundary to their last record (ops are recorded
 *     after they ran: the slice covers their computation and recording),
 *     collective ops from their own record (written as the call begins);
 *   - collectives as slices from enter to exit, linked across ranks by
 *     flows: one per (communicator, sequence number, member), from the
 *     communicator's rank 0 (or the root) to each other member;
 *   - kernels and copies on device tracks; checkpoints, process exits and
 *     lost records as instants; live bytes per device, RSS, loss and
 *     grad_norm as counters;
 *   - what began and never ended (a step, an op, a collective of a rank
 *     that hung or died) as an open slice.
 *
 * Output is streamed: each event is written as soon as it is complete, so
 * memory is bounded by per-rank state (threads, streams, calls in flight,
 * live allocations, distinct names), not by the trace's length.
 * Timestamps are nanoseconds since the earliest exported rank file began
 * (CLOCK_MONOTONIC when every rank ran on one host, else each rank's clock
 * mapped through its CLOCK_REALTIME start).
 */
#ifndef TFT_EXPORT_INTERNAL_H
#define TFT_EXPORT_INTERNAL_H

#include "core.h"
#include "export.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds per rank (a trace is untrusted). Threads and streams beyond share
 * the last track; calls in flight beyond are not shown open; allocations
 * beyond are not tracked (a free of unknown size then counts 0). */
#define EXP_THREADS_MAX 500
#define EXP_STREAMS_MAX 499
#define EXP_OPEN_MAX 65536
#define EXP_LIVE_MAX (1u << 22)
#define EXP_FANOUT_MAX 65536 /* flows from one collective slice */
#define EXP_DEVICES_MAX 64   /* live-bytes counters: host + CUDA devices 0..62 */

enum export_track_kind { EXP_TRACK_THREAD = 0, EXP_TRACK_DEVICE = 1, EXP_TRACK_COUNTER = 2 };
enum export_arg_type { EXP_ARG_INT, EXP_ARG_UINT, EXP_ARG_DOUBLE, EXP_ARG_STR, EXP_ARG_HEX };

/* The whole export: what the trace's manifest says. */
typedef struct export_run_info {
    const char *run_id;   /* 32 hex digits, "" unknown */
    const char *command;  /* the recorded command line, "" unknown */
    int nranks;           /* rank files exported */
} export_run_info;

/* One rank: a process. */
typedef struct export_process {
    int rank;
    int32_t pid;          /* in the export: rank + 1 (0 is the idle process in Perfetto) */
    int32_t os_pid;       /* the recorded process's pid */
    uint64_t uuid;        /* its process track */
    uint32_t seq_id;      /* Perfetto packet sequence: 1, 2, ... per rank exported */
    const char *name;     /* "rank 0 (pid 4242 on vm)" */
} export_process;

typedef struct export_track {
    uint64_t uuid;        /* unique in the export */
    uint64_t parent;      /* the process track */
    int kind;             /* enum export_track_kind */
    int32_t pid, tid;     /* tid: unique in the export (pid * 1000 + slot) */
    int sort;             /* order among the process's tracks */
    int bytes;            /* counter of bytes (else a plain number) */
    char name[96];        /* "thread 0 (tid 4242)", "cuda:0 stream 7", "live bytes host" */
    char group[32];       /* counters: the Chrome counter's name ("live bytes") */
    char series[32];      /* ... and its series ("host") */
} export_track;

typedef struct export_arg {
    const char *key;
    int type;             /* enum export_arg_type */
    union {
        int64_t i;
        uint64_t u;       /* also EXP_ARG_HEX: 16 hex digits */
        double d;
        const char *s;
    } v;
} export_arg;

#define EXP_ARGS_MAX 12

/* A slice on a track: [ts, ts + dur] or, when open, begun at ts and never
 * ended (dur 0). flow_out: flows this slice starts (bound at ts + 1, inside
 * it: closed slices last at least 2 ns); flow_in: flows that end in it
 * (bound at in_ts, inside it). A flow id appears on exactly two slices. */
typedef struct export_slice {
    const export_track *track;
    uint64_t ts, dur;
    bool open;
    const char *name, *cat;
    export_arg args[EXP_ARGS_MAX];
    int nargs;
    const uint64_t *flow_out;
    size_t n_out;
    const uint64_t *flow_in;
    size_t n_in;
    uint64_t in_ts;
} export_slice;

typedef struct export_instant {
    const export_track *track;
    uint64_t ts;
    const char *name, *cat;
    export_arg args[EXP_ARGS_MAX];
    int nargs;
} export_instant;

/* An emitter: the format's side of the export. Every function returns 0
 * or a negative errno (a write error: the export stops). Calls come in
 * this order: begin, then per rank process, its tracks (each before its
 * first event) and events, then end. Strings are valid during the call. */
typedef struct export_sink export_sink;
typedef struct export_ops {
    int (*begin)(export_sink *s, const export_run_info *run);
    int (*process)(export_sink *s, const export_process *p);
    int (*track)(export_sink *s, const export_track *t);
    int (*slice)(export_sink *s, const export_slice *sl);
    int (*instant)(export_sink *s, const export_instant *in);
    int (*counter)(export_sink *s, const export_track *t, uint64_t ts, double v);
    int (*end)(export_sink *s);
    void (*free)(export_sink *s); /* NULL-safe; does not close the FILE */
} export_ops;

/* Emitters on an open stream (written with stdio; the caller closes it).
 * NULL with errno ENOMEM. */
export_sink *export_chrome_new(FILE *f, const export_ops **ops);
export_sink *export_perfetto_new(FILE *f, const export_ops **ops);

#endif

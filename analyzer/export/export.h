/*
 * export.h — a trace as a timeline for trace viewers (tfdump --export
 * chrome|perfetto OUT TRACE; docs/REPORTS.md, "Exports"): Chrome's Trace
 * Event Format (JSON) or Perfetto's protobuf TrackEvents, a process per
 * rank, a track per thread and CUDA stream, steps, ops, collectives
 * (linked across ranks) and kernels as slices, counters, and what never
 * ended as open slices. export_internal.h says how.
 *
 * Nothing here prints: what goes wrong is said through opts->log, the
 * export itself goes to OUT (stdout for "-"). Memory is bounded by one
 * rank's state; the rank files are read one after the other.
 */
#ifndef TFT_EXPORT_H
#define TFT_EXPORT_H

#include "tft_format.h"

#include <stdbool.h>
#include <stdint.h>

enum export_format { EXP_CHROME = 1, EXP_PERFETTO = 2, EXP_TENSORBOARD = 3 /* export_tensorboard.h */ };

typedef struct export_opts {
    int format;                 /* enum export_format */
    const char *out;            /* the file to write, "-" for stdout */
    unsigned mode;              /* its permission bits (0: 0600) */
    const char *path;           /* the trace as the user named it: in messages, and
                                 * OUT may not be one of its files */
    int rank;                   /* only this rank, -1 every rank (when nranges is 0) */
    int nranges;                /* only the ranks in ranges[0..nranges): inclusive [lo, hi] */
    const int32_t (*ranges)[2];
    bool have_steps;            /* only the records of steps step_lo..step_hi (inclusive) */
    int64_t step_lo, step_hi;
    /* what went wrong, one message at a time (level TFT_LOG_ERROR or
     * TFT_LOG_WARN, no trailing newline); NULL: nothing is said */
    void (*log)(void *ctx, int level, const char *msg);
    void *log_ctx;
} export_opts;

/* Writes the export of the ranks and steps o selects of trace t (opened,
 * lazily or not; its rank files are released as they are done) to o->out
 * in o->format. Returns 0; -ENOMEM when memory ran out (nothing is said:
 * the caller knows what to advise); or -EIO after saying what failed
 * through o->log (no rank selected, OUT is one of the trace's files or
 * cannot be written, a read error). A reader of stdout that went away is
 * a quiet success. */
int export_run(tft_trace *t, const export_opts *o);

#endif

/*
 * core_drops.h — where a rank's records were lost, for tfdiff: the steps
 * the DROPPED records of each side name (FORMAT.md §5.11, format 1.4), so
 * that an incomplete comparison says which steps it could not judge.
 */
#ifndef TFT_DIFF_DROPS_H
#define TFT_DIFF_DROPS_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads r's DROPPED records (one pass, only worth it when its chunks count
 * drops) into steps[0..1] (the span of the lost records' steps,
 * TFT_STEP_NONE when outside steps) and *known (false when a record came
 * without steps: a trace before 1.4); rewinds r. 0 or a negative errno. */
int core_drops_scan(tft_reader *r, int64_t steps[2], bool *known);
/* " in steps A..B" / " in step A" / " outside steps" / "" (unknown) for
 * side (0 GOLDEN, 1 BAD) of x, into buf. Returns buf. */
const char *core_drops_span(const diff_rank_result *x, int side, char *buf, size_t n);
/* "steps A..B of rank N (BAD) dropped records[; ...]" ("rank N (BAD)
 * dropped records outside steps") for every rank a side of which dropped
 * records, into buf ("" when none). Returns buf. */
const char *core_drops_where(const diff_rank_result *ranks, int nranks, char *buf, size_t n);

/* The world rank whose BAD records were dropped in d's step (or in steps
 * unknown) among the ranks d blames (and d's peer), for a finding a lost
 * record can fake: a collective a rank "never entered" (DS_MISSING), a
 * point-to-point call "never completed" (DS_P2P). -1 when none. */
int core_drops_explain(const diff_rank_result *ranks, int nranks, const desync_finding *d);

#endif

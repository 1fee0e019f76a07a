/*
 * diff_clock.h — one timeline for ranks on several hosts (docs/MULTINODE.md,
 * "Clocks across hosts"): record times are each host's CLOCK_MONOTONIC,
 * which means nothing across hosts; the rank file header's pair of
 * monotonic and realtime clocks at its start maps them to the host's
 * CLOCK_REALTIME, and the MPI estimate of each rank's realtime offset
 * against rank 0's (the manifest's "clock", FORMAT.md §2.4) maps that to
 * rank 0's realtime.
 */
#ifndef TFT_DIFF_CLOCK_H
#define TFT_DIFF_CLOCK_H

#include "tft_format.h"

#include <stdint.h>

/* For each of the n rank files of t, adj[i]: what to add to a record time
 * of file i to get rank 0's CLOCK_REALTIME. *err_ns: the largest error
 * bound of an offset estimate (two ranks' times compare within twice it).
 * Returns 1 when every rank file has an estimate (its manifest entry,
 * matched by rank and pid, has "clock"), else 0 (adj and *err_ns unset). */
int diff_clock_align(tft_trace *t, int n, int64_t *adj, uint64_t *err_ns);

#endif

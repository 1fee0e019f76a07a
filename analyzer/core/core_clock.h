/*
 * core_clock.h — one timeline for ranks on several hosts (docs/MULTINODE.md,
 * "Clocks across hosts"): record times are each host's CLOCK_MONOTONIC,
 * which means nothing across hosts; the rank file header's pair of
 * monotonic and realtime clocks at its start maps them to the host's
 * CLOCK_REALTIME, and the MPI estimate of each rank's realtime offset
 * against rank 0's (the manifest's "clock", FORMAT.md §2.4) maps that to
 * rank 0's realtime. Without that estimate, CLOCK records (FORMAT.md
 * §5.17) give each host's realtime through the file, realtime steps
 * included, and the kernel's NTP bound on its error: ranks whose hosts say
 * they are synchronised compare on realtime within the sum of two bounds.
 */
#ifndef TFT_CORE_CLOCK_H
#define TFT_CORE_CLOCK_H

#include "tft_format.h"

#include <stdint.h>

/* For each of the n rank files of t, adj[i]: what to add to a record time
 * of file i to get rank 0's CLOCK_REALTIME. *err_ns: the largest error
 * bound of an offset estimate (two ranks' times compare within twice it).
 * Returns 1 when every rank file has an estimate (its manifest entry,
 * matched by rank and pid, has "clock"), else 0 (adj and *err_ns unset). */
int core_clock_align(tft_trace *t, int n, int64_t *adj, uint64_t *err_ns);

/* The clock pair in force while a rank file is read in order: the last
 * CLOCK record read, else the file header's pair (NTP state unknown). */
typedef struct core_clock_pair {
    int64_t real_minus_mono;  /* add to a record time for the host's CLOCK_REALTIME */
    uint32_t ntp;             /* enum tft_clock_ntp of the last CLOCK record, TFT_NTP_UNKNOWN none */
    uint64_t maxerror_ns;     /* its NTP error bound (TFT_NTP_SYNCED), else 0 */
    uint64_t window_ns;       /* its reading window */
    uint64_t said_maxerror_ns; /* maxerror_ns when core_clock_pair_update last returned 1 */
} core_clock_pair;

/* The header's pair of fi (NTP unknown). */
void core_clock_pair_start(core_clock_pair *p, const tft_file_info *fi);
/* Takes rec when it is a well-formed CLOCK record: 1 when it changed
 * real_minus_mono by more than 1 µs, the NTP state (a step, a sync) or
 * the bound by more than a quarter since it last said so, 0 otherwise (also
 * for any other record). */
int core_clock_pair_update(core_clock_pair *p, const tft_rec *rec);
/* The error bound of realtime of a host in state p against true time
 * (maxerror plus the reading window), UINT64_MAX when its host did not say
 * it was NTP-synchronised: its realtime compares with no other host's. */
uint64_t core_clock_pair_error(const core_clock_pair *p);

/* A rank file's clock pairs over its whole length, for a reader that maps
 * times out of file order (a timeline): the header's pair, then each CLOCK
 * record that changed it (core_clock_pair_update), by monotonic time. */
typedef struct core_clock_track {
    core_clock_pair *p;   /* n pairs; p[0] the header's */
    uint64_t *at;         /* n monotonic times they were read (at[0] = 0) */
    size_t *use;          /* n: the pair that maps times from at[j] on (core_clock_track_at) */
    size_t n, cap;
} core_clock_track;

/* Reads r from its start (it is rewound after) for its CLOCK records.
 * 0 or a negative errno (a read error, -ENOMEM: tr then holds the header's
 * pair at least when fi was given). */
int core_clock_track_read(core_clock_track *tr, tft_reader *r, const tft_file_info *fi);
/* The pair for monotonic time t: the last one read at or before t when its
 * host was NTP-synchronised; from an unsynchronised stretch the next
 * synchronised one (the clock was wrong until NTP stepped it, the monotonic
 * clock was not: a later synchronised pair maps the earlier times better);
 * else the last one read at or before t. NULL when tr is empty. */
const core_clock_pair *core_clock_track_at(const core_clock_track *tr, uint64_t t);
void core_clock_track_free(core_clock_track *tr); /* NULL-safe; leaves it empty */

#endif

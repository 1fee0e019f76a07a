/*
 * leak.h — leaks from a rank's ALLOC/FREE records: growth step after step
 * (or allocation after allocation), what a site holds at the end, and
 * GOLDEN vs BAD (leak_*.c, listed in leak_internal.h). Nothing here prints.
 */
#ifndef TFT_LEAK_H
#define TFT_LEAK_H

#include "core.h"

/* How a leak was found (the "how" key of the JSON schemas). */
enum leak_how {
    LEAK_GROWTH = 0,     /* live bytes grew step after step (allocation after allocation) */
    LEAK_AT_EXIT,        /* what the site holds at the end: tfdiff, more than GOLDEN holds;
                               * tfdump --check, more than its --leak-min-bytes threshold */
    LEAK_PEAK,           /* tfdiff: the most the site held at once, in more blocks than
                               * GOLDEN's (kept during the run, freed at teardown) */
};

typedef struct leak_finding {
    int rank;
    char site[128];
    int how;                  /* enum leak_how */
    int64_t from_step;        /* growth: first step of sustained growth (TFT_STEP_NONE when per_alloc);
                               * at-exit: first_alloc_step */
    double bytes_per_step;    /* per_alloc: bytes per allocation of the site; at-exit: the mean
                               * size of the site's blocks live at the end */
    uint64_t live_bytes_at_end;
    uint64_t live_allocs_at_end;
    bool per_alloc;           /* an iteration is one allocation of the site (always for at-exit) */
    uint64_t from_alloc;      /* per_alloc: index of the site's allocation where growth starts
                               * (at-exit: its oldest allocation still live at the end) */
    uint64_t iterations;      /* steps (per_alloc: allocations) the rate is taken over;
                               * at-exit: live_allocs_at_end */
    bool first_known;         /* something is live at the end: the two fields below hold */
    uint64_t first_alloc_ns;  /* the oldest allocation live at the end: ns after the rank's start
                               * (its earliest record or file header clock) */
    int64_t first_alloc_step; /* ... and its step, TFT_STEP_NONE outside steps */
    uint64_t min_bytes;       /* tfdump --check at-exit: the threshold it exceeded */
    bool golden_known;        /* tfdiff: the golden_* fields hold GOLDEN's same rank and site */
    uint64_t golden_live_bytes_at_end, golden_live_allocs_at_end;
    uint64_t golden_peak_live_bytes; /* the most GOLDEN's site held at once ... */
    uint64_t golden_peak_live_allocs; /* ... and the most blocks */
    uint64_t peak_live_bytes, peak_live_allocs; /* BAD's site: the most it held at once */
    uint64_t peak_ns;         /* when BAD's site reached peak_live_bytes: ns after the rank's start */
    int64_t peak_step;        /* ... its step, TFT_STEP_NONE outside steps */
    bool vs_golden_peak;      /* at-exit: BAD did not run to its end, so its live bytes were
                               * compared with GOLDEN's peak rather than GOLDEN's end */
} leak_finding;

/* Finds allocation sites whose live bytes grow step after step in one rank
 * (live allocations at the end grouped by site); in a trace without steps,
 * allocation after allocation of the site until late in the run (see
 * leak_rules.c). No rule of this file reports an allocator's own pool
 * (CPython's arenas) or a rank whose process is a build tool the job ran
 * (a compiler, a linker): leak_exempt.c says how they are told. Fills up
 * to max leaks; returns how many, or a negative errno. Same as
 * leak_find_mem(r, rank, 0, out, max, NULL). */
int leak_find(tft_reader *r, int rank, leak_finding *out, int max);

/* What one allocation site holds, over a rank and at its end. */
typedef struct leak_site_mem {
    char site[128];
    uint64_t allocs;          /* its ALLOC records */
    uint64_t live_bytes, live_allocs; /* at the end of the rank */
    uint64_t peak_bytes;      /* the most it held at once ... */
    uint64_t peak_ns;         /* ... first reached this many ns after the rank's start ... */
    int64_t peak_step;        /* ... in this step (TFT_STEP_NONE outside steps) */
    uint64_t peak_allocs;     /* the most blocks it held at once */
    bool one_thread;          /* no two recorded threads allocated here (its peak does not
                               * depend on how threads ran); true when the trace records no
                               * threads (format < 1.2, or a collector that writes no THREAD
                               * records): then only the block margin guards the peak rule */
    uint64_t max_block;       /* the largest of its blocks live at the end */
    uint64_t first_ns;        /* its oldest block live at the end: ns after the rank's start ... */
    int64_t first_step;       /* ... its step (TFT_STEP_NONE outside steps) ... */
    uint64_t first_alloc;     /* ... and its index among the site's allocations */
    uint64_t first_pos, last_pos; /* record positions (1 = the rank's first record) of the oldest
                               * and the newest of its blocks live at the end */
    bool pool;                /* an allocator's own pages (CPython's arenas, leak_exempt.c):
                               * never a leak */
} leak_site_mem;

/* One rank's allocations as a whole, for comparing two traces. The caller
 * provides sites[max_sites]; the scan fills them sorted by peak_bytes, the
 * largest first (sites that never allocated are left out), and sets nsites
 * to the number of sites that allocated, which exceeds max_sites when the
 * smaller ones did not fit. */
typedef struct leak_rank_mem {
    leak_site_mem *sites;     /* in: caller's array */
    int max_sites;            /* in */
    int nsites;               /* out */
    uint64_t records;         /* out: records read */
    uint64_t dropped;         /* out: records the recorder lost (a lost FREE leaves a block live) */
    int64_t last_step;        /* out: the rank's last step, TFT_STEP_NONE without steps */
    bool exit_known;          /* out: a PROCESS exit record was read (callers may fill it from
                               * the manifest when not) */
    int exit_code, exit_signal;
    char process[16];         /* out: the name of the process's main thread, "" unknown */
    bool helper;              /* out: the process is a build tool the job ran (a compiler, a
                               * linker; leak_exempt.c): none of its sites is a leak */
} leak_rank_mem;

/* Single-trace at-exit rule (tfdump --check): a site holding at least
 * LEAK_EXIT_MIN_BYTES live at the end, in several blocks, is a leak
 * even without growth (leak_rules.c says what "several" means). */
#define LEAK_EXIT_MIN_BYTES ((uint64_t)32 << 20)

/* leak_find, plus: exit_min_bytes > 0 turns on the single-trace at-exit
 * rule with that threshold (0: growth only, as tfdiff wants it), and mem,
 * when not NULL, receives what every site holds (see leak_rank_mem). One
 * pass over the rank file. Returns the number of leaks or a negative errno. */
int leak_find_mem(tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out, int max,
                   leak_rank_mem *mem);

/* leak_find_mem a record at a time, for a caller that reads the rank file
 * itself (one pass feeding several analyses): new, then every record of
 * the file from its start in order (with its reader, for the strings),
 * then finish — leak_find_mem's result; finish frees the scan (free alone
 * abandons it). record returns 0 or -ENOMEM. */
typedef struct leak_scan leak_scan;
leak_scan *leak_scan_new(void);
int leak_scan_record(leak_scan *x, tft_reader *r, const tft_rec *rec);
int leak_scan_finish(leak_scan *x, tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out,
                          int max, leak_rank_mem *mem);
void leak_scan_free(leak_scan *x); /* NULL-safe */

/* tfdiff's at-exit margin: a site is a leak of BAD when it holds at the end
 * at least LEAK_MARGIN_BYTES more than GOLDEN's and at least
 * LEAK_MARGIN_RATIO times as much (any amount over nothing counts
 * once it reaches the byte margin). */
#define LEAK_MARGIN_BYTES ((uint64_t)1 << 20)
#define LEAK_MARGIN_RATIO 2

/* Peak rule: at least this many blocks more than GOLDEN's peak (and the
 * byte margin and ratio above, on bytes and on blocks). */
#define LEAK_PEAK_MIN_EXTRA_BLOCKS 4

/* tfdiff's leaks of one rank: BAD's growth leaks (bl, nb) that GOLDEN's
 * (gl, ng) lack; sites whose live bytes at BAD's end exceed GOLDEN's by
 * the margin above — against GOLDEN's end when both ran to a normal exit
 * with the same status and BAD reached GOLDEN's last step, else against
 * GOLDEN's peak (BAD stopped early: what it held then is compared with the
 * most GOLDEN ever held); and sites allocating from one thread in both
 * whose peak exceeds GOLDEN's by the margin in bytes and by
 * LEAK_PEAK_MIN_EXTRA_BLOCKS and the ratio in blocks (kept during the
 * run, freed at teardown: an interpreter frees its objects at exit). A site
 * is reported once, by the first rule in that order, with the others'
 * fields filled. A pool site and a helper BAD (leak_rank_mem.helper) are
 * never reported. Sorts g->sites by name. Fills up to max leaks of rank
 * `rank`; returns how many. */
int leak_compare(leak_rank_mem *g, const leak_finding *gl, int ng, const leak_rank_mem *b,
                       const leak_finding *bl, int nb, int rank, leak_finding *out, int max);

/* One line for a report, without the rank: "SITE: +N bytes/step from step
 * S, L bytes live at the end" (per_alloc: "+N bytes per allocation over K
 * allocations of the site, no steps, ..."; at-exit: "L bytes in K blocks
 * live at the end, GOLDEN ..., the oldest allocated T s into the run"). */
void leak_describe(const leak_finding *l, char *buf, size_t n);

#endif

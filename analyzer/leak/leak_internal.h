/*
 * leak_internal.h — what the files of the leak analysis share: one
 * allocation site's state, a live allocation, and the state of a scan of
 * one rank file (leak_scan). Files, lowest first (each calls only files
 * above it):
 *   leak_exempt.c    what no rule reports: allocator pools, helper processes
 *   leak_scan.c      ALLOC/FREE records per site, growth streaks per step
 *                    and per allocation
 *   leak_mem.c       what every site holds at the end (leak_rank_mem)
 *   leak_rules.c     the leaks of one rank: growth, at exit (leak_find*)
 *   leak_compare.c   GOLDEN vs BAD (leak_compare)
 *   leak_describe.c  a leak as a line of text
 */
#ifndef TFT_LEAK_INTERNAL_H
#define TFT_LEAK_INTERNAL_H

#include "core.h"
#include "leak.h"
#include "tft_u64map.h"

#include <stdbool.h>
#include <stdint.h>

/* Growth of one site's live bytes over a sequence of snapshots (the ends
 * of steps, or in step-less traces the site's own allocations). */
typedef struct streak {
    bool on;
    int64_t from;          /* first step (step-less: allocation index) of the streak */
    uint64_t base;         /* live bytes just before it */
    uint32_t steps;        /* snapshots since from (inclusive) */
    uint32_t flat;         /* of those, snapshots without growth */
} streak;

/* One allocation site (string id of its name). */
typedef struct leak_site {
    uint64_t id;
    char name[128];
    bool named;
    uint64_t live_bytes, live_allocs;
    uint64_t prev_bytes;   /* live bytes at the end of the previous step */
    streak st;             /* over steps */
    bool active;           /* in leak_state.active: changed since the last snapshot, or growing */
    /* step-less: over this site's allocations */
    uint64_t allocs;       /* ALLOC records of the site so far */
    uint64_t ev_prev;      /* live bytes after its previous ALLOC */
    streak ev;
    uint64_t ev_from_pos;  /* record position where ev started */
    uint64_t ev_last_pos;  /* ... of its last growing ALLOC */
    uint64_t ev_last_bytes;/* live bytes then */
    uint32_t ev_last_steps;/* ev.steps then */
    uint64_t peak_bytes;   /* the most live at once ... */
    uint64_t peak_ts;      /* ... first reached then ... */
    int64_t peak_step;     /* ... in this step */
    uint64_t peak_allocs;  /* the most blocks live at once */
    bool thread_known;     /* the thread of an ALLOC of it was recorded ... */
    uint32_t thread;       /* ... its index */
    bool threads_many;     /* another recorded thread allocated here too */
    uint64_t one_size;     /* the size of its first block ... */
    bool sizes_mixed;      /* ... and whether another block had another size */
    /* at the end (leak_site_ends): its blocks still live */
    uint64_t end_max_block;
    uint64_t end_first_ts, end_first_alloc;
    int64_t end_first_step;
    uint64_t end_first_pos, end_last_pos;
} leak_site;

/* A live allocation, keyed by (ptr, dev). */
typedef struct live_alloc {
    uint64_t ptr;
    int32_t dev;   /* device_kind << 16 | (uint16_t)device */
    uint32_t site; /* index into sites */
    uint64_t bytes;
    uint64_t ts;   /* of its ALLOC */
    int64_t step;  /* ... its step */
    uint64_t pos;  /* ... its record position */
    uint64_t idx;  /* ... its index among the site's allocations */
} live_alloc;

typedef struct leak_state {
    tft_u64map live;      /* live_hash -> live_alloc, at most 3/4 full */
    leak_site *sites;
    size_t nsites, sites_cap;
    tft_u64map site_idx;  /* site id -> index in sites */
    uint32_t *active;     /* sites a snapshot must look at: live bytes changed since the last
                           * one, or a growth streak on. The others cannot change their streak,
                           * so a snapshot costs O(active), not O(sites): O(records) in all */
    size_t nactive, active_cap;
    int64_t cur_step;     /* step in progress, TFT_STEP_NONE before the first */
    bool step_open;       /* cur_step has records and no snapshot yet */
    bool snapped;         /* a snapshot was taken ... */
    int64_t snap_step;    /* ... of this step, the latest */
    uint64_t steps_seen;  /* snapshots taken */
    uint64_t pos;         /* records read: the step-less clock */
    uint64_t ts_min;      /* the earliest timestamp seen (UINT64_MAX before any) */
    int64_t last_step;    /* the latest step seen, TFT_STEP_NONE before any */
    bool exit_known;      /* a PROCESS exit record was read */
    int exit_code, exit_signal;
    char process[16];     /* the name of the process's main thread (its THREAD records: the
                           * thread whose tid is the pid, else the first to record), "" none */
    bool process_main;    /* process holds the main thread's name, not the first thread's */
} leak_state;

struct leak_scan {
    leak_state s;
};

/* ---- leak_exempt.c ---- */

/* The site is an allocator's own source of pages (CPython's arenas): no
 * rule reports it. Reads the site's name, sizes and allocations. */
bool leak_site_is_pool(const leak_site *st);
/* PyTorch's CPU tensor allocator (c10::alloc_cpu): never a leak at exit. */
bool leak_site_is_tensor_heap(const leak_site *st);
/* comm, a process's main thread's name, is a build tool's (a compiler, an
 * assembler, a linker): nothing of that process is reported. */
bool leak_process_is_helper(const char *comm);

/* ---- leak_scan.c ---- */

void leak_site_name(leak_site *st, const tft_reader *r);

/* ---- leak_mem.c ---- */

void leak_site_ends(leak_state *s);
uint64_t leak_rank_start(const leak_state *s, const tft_reader *r);
void leak_fill_mem(leak_state *s, tft_reader *r, leak_rank_mem *mem);

/* ---- leak_rules.c ---- */

void leak_fill_at_exit(leak_finding *l);

#endif

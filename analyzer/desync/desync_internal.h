/*
 * desync_internal.h — what the files of the desync analysis share (desync.c
 * describes the analysis): its limits, one rank's view of a collective, the
 * windows of communicators, findings with their evidence, point-to-point
 * counters and open calls, and the state of one run (desync_state), then
 * the functions each file offers the others, lowest first. Calls go one
 * way: a file calls only the files listed above it here, and desync.c
 * (desync_find) calls them all.
 */
#ifndef TFT_DESYNC_INTERNAL_H
#define TFT_DESYNC_INTERNAL_H

#include "core.h"
#include "core_clock.h"
#include "desync.h"
#include "tft_u64map.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    DESYNC_WINDOW_MAX = 4096,  /* open entries per communicator */
    DESYNC_SLOT_BUDGET = 256 << 20, /* bytes of window slots, all communicators together */
    DESYNC_SPREADS = 32,       /* per communicator: enter spreads kept */
    DESYNC_SPREADS_MIN = 8,    /* spreads needed before judging a straggler */
    DESYNC_MAX_COMMS = 4096,
    DESYNC_MAX_DEFS = 65536,   /* communicators named by COMM records */
    DESYNC_MAX_MEMBERS = 1 << 20, /* larger communicators are not assembled from ranks */
    DESYNC_MAX_OPEN = 65536,   /* per rank: open point-to-point calls */
    DESYNC_MAX_PAIRS = 1 << 20,/* point-to-point counters */
    DESYNC_OPEN_JUDGED = 256,  /* per rank: open point-to-point calls judged at the end */
    DESYNC_MAX_PARAM_FPS = 1 << 20, /* parameter fingerprints of one step, all ranks */
    DESYNC_INSTEAD_SCAN = 65536, /* counters looked at to say what a blocked receive's peer sent */
};
/* In a detail text, PH followed by 16 hex digits stands for the name of
 * that communicator, filled in once every COMM record has been read. */
#define PH "\x01"

/* One rank's view of one collective. */
typedef struct coll_slot {
    uint8_t entered, exited, has_fp, has_fields;
    uint16_t type;
    uint8_t dtype, redop;
    int32_t root;
    uint64_t count;
    uint64_t name;      /* string id of the API name */
    int64_t step;
    int64_t seq;        /* op sequence number of the call in its rank (TFT_SEQ_NONE unknown) */
    uint64_t t_enter;
    int64_t rt;         /* the rank's clock pair when it entered: t_enter + rt is its host's realtime */
    uint64_t rt_err;    /* that realtime's NTP error bound, UINT64_MAX not synchronised (core_clock.h) */
    uint64_t fp;        /* result fingerprint (all-reduce, broadcast) */
} coll_slot;

typedef struct coll_entry {
    bool used;
    uint64_t coll_seq;
    int nexit;          /* ranks that left it */
} coll_entry;

/* A finding with what the cause analysis needs (desync_causes.c). */
typedef struct found {
    bool valid;
    bool echo;          /* DS_MISSING whose missing ranks were all stuck earlier elsewhere */
    desync_finding d;
    uint8_t *inv;       /* nranks: the rank index took part (NULL: never a cause) */
    uint8_t *miss;      /* nranks: missing (DS_MISSING) or blocked (DS_P2P); NULL none */
    int peer_idx;       /* DS_P2P: rank index of the peer, -1 unknown */
    char then[112];     /* DS_MISSING: "ranks 0,2,3 waited in MPI_Allgather", "" none */
    struct found *cause;/* desync_collect: the first cause */
} found;

typedef struct comm_state {
    uint64_t comm;
    uint64_t base, top;       /* open coll_seq window [base, top) */
    size_t cap;               /* window slots, power of two */
    coll_entry *win;          /* cap entries: coll_seq q at q & (cap-1) */
    coll_slot *slots;         /* cap * wcap: entry q's slot k is rank file global[k]'s view */
    int width, wcap;          /* rank files with records on it; slots per entry (<= nranks) */
    int *local;               /* nranks: rank file -> its slot in an entry, -1 none */
    int *global;              /* wcap: slot -> rank file */
    int *order;               /* wcap: the rank files of global[0, width), ascending */
    uint8_t *member;          /* nranks: rank index has records on it */
    int size;                 /* communicator size from the records (an intercommunicator: both groups) */
    bool inter;               /* an intercommunicator (COMM record) */
    found fin;                /* first problem (lowest coll_seq) */
    found echo;               /* first hang echo (lowest coll_seq) */
    bool straggled;
    desync_finding straggler;
    bool has_last;            /* last: reference slot of the last clean entry */
    coll_slot last;
    uint64_t spreads[DESYNC_SPREADS];
    int nspreads;
} comm_state;

/* What COMM records say of one communicator. */
typedef struct comm_def {
    uint64_t id;
    uint64_t p2p, p2p_old;    /* its point-to-point spaces: "<hex id>:p2p"; the world's 1.0/1.1 one */
    int size;                 /* members (an intercommunicator: both groups), 0 unknown */
    int local;                /* an intercommunicator: size of the group listed first */
    bool inter, listed;       /* listed: mem came from one record, complete */
    int32_t *mem;             /* size entries: world rank of communicator rank k, -1 unknown */
} comm_def;

/* One step's parameters: a (name, occurrence) ... */
typedef struct param_entry {
    uint64_t name;
    uint32_t occ;
} param_entry;

/* ... and one rank's fingerprint of it. */
typedef struct param_fp {
    uint32_t param;           /* index in the step's params */
    int32_t rank;             /* rank file index */
    uint64_t fp;
} param_fp;

/* A rank's fingerprint of a named tensor: its last gradient of a
 * parameter in the step (grad.X, keyed by the id of param.X), or its first
 * record of a parameter. */
typedef struct rank_fp {
    uint64_t name;            /* string id of "param.X" */
    int32_t rank;             /* rank file index */
    int32_t zero;             /* first records: every element was zero */
    uint64_t fp;
} rank_fp;

/* A point-to-point call entered and not (yet) left. */
typedef struct p2p_open {
    uint64_t space, q;        /* its p2p sequence space and number there */
    uint64_t count, name;
    int64_t step, seq;
    int32_t me, peer, tag;    /* communicator ranks (peer -1: any source); tag (TFT_TAG_ANY) */
    uint16_t type;
    uint8_t dtype;
    bool gone;                /* left since (removed lazily: compacted in batches) */
    int32_t prev_same;        /* index of the previous open call of the same (space, q), -1 none */
} p2p_open;

typedef struct p2p_rank {
    p2p_open *v;              /* in call order, left calls marked gone until compacted */
    size_t n, cap, ngone;
    tft_u64map ix;            /* (space, q) -> index in v of its newest open call (desync_ix_init) */
    bool overflow;            /* more than DESYNC_MAX_OPEN: not judged */
} p2p_rank;

/* Counters of one (space, source, destination, tag), communicator ranks. */
typedef struct pair_ent {
    uint64_t space;           /* never 0 (pair_get) */
    int32_t src, dst, tag;    /* src -1: receives posted for any source */
    uint32_t sends, posted, done; /* sends entered; receives posted (ENTER) and completed (EXIT) */
    uint64_t last_count;      /* elements of the last send */
    uint8_t last_dtype;
} pair_ent;

/* Where rank i is at the end: the first and last collective it entered and
 * never left (valid false: none). */
typedef struct stuck_at {
    bool valid;
    int64_t step;
    int64_t seq;
    uint64_t t_enter;
    uint64_t comm;
    uint64_t q, name;
} stuck_at;

/* One window entry's slots spread out by rank file index, for the checks:
 * only the last communicator's members are set, the rest stay zero. */
typedef struct dense_view {
    coll_slot *v;          /* nranks */
    int owner;             /* index of the communicator whose members are set, -1 none */
} dense_view;

typedef struct desync_state {
    tft_trace *t;
    int nranks;
    size_t slot_bytes;     /* window slots allocated, all communicators (<= DESYNC_SLOT_BUDGET) */
    struct dense_view *dense; /* scratch: one entry's slots by rank file (desync_entry_dense) */
    bool one_host;
    bool aligned;          /* several hosts, clocks aligned (core_clock.h): adj holds the shifts */
    int64_t *adj;          /* nranks: added to a rank file's times for rank 0's realtime */
    uint64_t clock_err;    /* the alignment's largest error bound, ns */
    core_clock_pair *clk;  /* nranks: each rank's clock pair in force (SPILL_CLOCK), for hosts not aligned */
    int *host_of;          /* nranks (with clk): the first rank file of the same host, -1 unknown */
    uint64_t world;        /* id of MPI_COMM_WORLD */
    comm_state *comms;
    int ncomms, comms_cap;
    comm_def *defs;
    int ndefs, defs_cap;
    /* parameters of param_step */
    int64_t param_step;
    bool param_done;       /* a parameter finding exists: stop looking */
    desync_finding param_finding;
    param_entry *params;
    size_t nparams, params_cap;
    param_fp *fps;         /* one per parameter record of the step (<= DESYNC_MAX_PARAM_FPS) */
    size_t nfps, fps_cap;
    tft_u64map param_ix;   /* (name, occurrence) -> params index (desync_ix_init) */
    tft_u64map occ_ix;     /* (name, rank file) -> index in fps of its latest record (desync_ix_init) */
    rank_fp *gfps;         /* the step's gradients, the last per (parameter, rank file) */
    size_t ngfps, gfps_cap;
    tft_u64map grad_ix;    /* (param name, rank file) -> index in gfps (desync_ix_init) */
    rank_fp *firsts;       /* each (parameter, rank file)'s first record (<= DESYNC_MAX_PARAM_FPS) */
    size_t nfirsts, firsts_cap;
    tft_u64map first_ix;   /* (param name, rank file) -> index in firsts (desync_ix_init) */
    int32_t *rep;          /* nranks: replica class (its lowest rank file index) from the rank's
                            * first step with parameters; -1 before it */
    /* point-to-point */
    p2p_rank *open;        /* nranks */
    tft_u64map pairs;      /* pair_hash -> pair_ent, at most DESYNC_MAX_PAIRS */
    struct pair_key *pair_order; /* desync_p2p_judge: the counters, sorted (desync_pairs_sort) */
    bool pairs_overflow;
    found *p2p;            /* findings, one per blocked rank at most */
    int np2p;
    stuck_at *first_stuck, *last_stuck; /* nranks, from the final sweep */
    int *ibuf;             /* scratch: 5 * nranks rank indices */
    uint64_t *ubuf;        /* scratch: nranks values */
    uint8_t *inv_tmp, *miss_tmp; /* scratch: nranks each, evidence of the finding being built */
    /* what the extracts carry (core_spill.h) */
    bool cur_has_fp;       /* the collective being read: its result's fingerprint, resolved in its rank */
    uint64_t cur_fp;
    tft_u64map strs;       /* string id -> offset of its text in pool */
    char *pool;
    size_t pool_len, pool_cap;
} desync_state;

/* ---- desync_common.c: rank ids, the extracts' strings, text, index maps,
 * program order, a finding's fields and evidence ---- */

int desync_rank_id(const desync_state *s, int i);
int desync_rank_index(const desync_state *s, int w);
const char *desync_str_of(const desync_state *s, uint64_t id);
int desync_str_add(desync_state *s, uint64_t id, const char *txt, size_t n);
const char *desync_step_text(int64_t step, char *buf, size_t len);
void desync_str_append(char *buf, size_t len, const char *s);
void desync_add_rank(desync_finding *d, int rank);
void desync_ix_init(tft_u64map *m);
bool desync_stuck_before(const stuck_at *st, int64_t step, int64_t seq, uint64_t t_enter, bool one_host);
void desync_finding_init(desync_finding *d, const comm_state *c, uint64_t q, int64_t step, int64_t seq, int kind);
void desync_found_set(const desync_state *s, found *f, const desync_finding *d, const char *then);

/* ---- desync_comm_names.c: communicator definitions (COMM records) and
 * the names in a finding's text ---- */

comm_def *desync_def_find(const desync_state *s, uint64_t id);
comm_def *desync_def_of_p2p(const desync_state *s, uint64_t space);
comm_def *desync_def_get(desync_state *s, uint64_t id);
void desync_def_assemble(const desync_state *s, comm_def *d, int i, int k, int n);
void desync_names_fill(const desync_state *s, desync_finding *d);

/* ---- desync_window.c: communicators and their windows of entries ---- */

comm_state *desync_comm_find(const desync_state *s, uint64_t comm);
comm_state *desync_comm_get(desync_state *s, uint64_t comm);
coll_entry *desync_entry_at(comm_state *c, uint64_t q);
coll_slot *desync_slots_at(comm_state *c, uint64_t q);
const coll_slot *desync_entry_dense(const desync_state *s, comm_state *c, uint64_t q);
int desync_window_grow(desync_state *s, comm_state *c);
int desync_comm_slot(desync_state *s, comm_state *c, int i);
void desync_entry_close(comm_state *c, uint64_t q);

/* ---- desync_straggler.c: DS_STRAGGLER of a complete entry ---- */

void desync_check_straggler(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                            const int *idx, int n);

/* ---- desync_checks.c: an entry judged, complete or final ---- */

void desync_entry_check(const desync_state *s, comm_state *c, uint64_t q, bool final, const stuck_at *stuck);

/* ---- desync_collectives.c: COMM and COLLECTIVE records ---- */

void desync_on_comm(desync_state *s, int i, const tft_rec_comm *cr);
int desync_on_collective(desync_state *s, int i, const tft_rec_collective *cr, int64_t step);

/* ---- desync_p2p.c: point-to-point records, counters, open calls ---- */

const pair_ent *desync_pair_find(const desync_state *s, uint64_t space, int32_t src, int32_t dst, int32_t tag);
int desync_open_compact(p2p_rank *o);
void desync_on_p2p(desync_state *s, int i, const tft_rec_collective *cr, int64_t step);

/* ---- desync_p2p_peer.c: a blocked call's peer, the DS_P2P finding ---- */

bool desync_send_peer_stuck(const desync_state *s, int i, int k, const int *blocked);
int desync_pairs_sort(desync_state *s);
void desync_p2p_report(desync_state *s, int i, const p2p_open *o, const int *blocked, found *f);

/* ---- desync_p2p_judge.c: the calls blocked at the end (s->p2p) ---- */

int desync_p2p_judge(desync_state *s);

/* ---- desync_params.c: "param.*" replication ---- */

void desync_params_judge(desync_state *s);
int desync_on_param(desync_state *s, int i, int64_t step, uint64_t name, uint64_t fp, bool zero);
int desync_on_grad(desync_state *s, int i, int64_t step, uint64_t name, uint64_t fp);

/* ---- desync_causes.c: every finding gathered, causes linked, ordered;
 * returns how many (<= max) were copied to out, or -ENOMEM ---- */

int desync_collect(desync_state *s, desync_finding *out, int max);

#endif

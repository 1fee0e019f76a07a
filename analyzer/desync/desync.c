/*
 * desync.c — desyncs across the ranks of one trace.
 *
 * Input: not the rank files themselves but their extracts (core_spill.h:
 * each rank's collective, COMM and "param.*" records, read once per rank by
 * a pool of threads), merged in the order a merge of the whole files would
 * give, so that only a few KiB per rank are in memory at once.
 *
 * Collectives: the ranks are merged in (step, seq) order and every
 * COLLECTIVE record (ENTER or EXIT) lands in the entry of its (communicator,
 * coll_seq). An entry is checked once every member of the communicator has
 * left it (type, count, dtype, reduce op, root, the call's name — MPI does
 * not match MPI_Allreduce with MPI_Iallreduce —, result fingerprints of
 * all-reduce and broadcast, enter-time stragglers), and at the end of the
 * trace when some never did: members with no record of it are missing (the
 * hang). Per communicator only the first problem (lowest coll_seq) is kept.
 * When two ranks disagree with no majority, the one whose value differs
 * from the communicator's previous call of that name is at fault.
 *
 * Communicators are named by their members (COMM records, FORMAT.md 5.15:
 * listed there, or assembled from the records of every rank file that
 * defines one; MPI_COMM_WORLD's from its collectives when no record lists
 * them), "communicator {1,3}"; without COMM records (traces before 1.2) by
 * their id in hex.
 *
 * Point-to-point: sends and receives are counted per (communicator, source,
 * destination, tag) — sends and posted receives at their ENTER, completed
 * receives at their EXIT (actual source and tag) — and a call still open at
 * the end of the trace (a rank blocked in MPI_Recv/MPI_Send, an MPI_Irecv
 * never completed by MPI_Wait) for which no matching message or receive
 * exists is reported (DS_P2P) with what its peer did instead: messages
 * with another tag, a message of another size, nothing, and where the peer
 * itself is stuck. Sends are not paired one by one with receives (wildcards
 * and the calls we do not see would make that unreliable): the counts
 * decide, so a receive is reported only when its peer sent fewer matching
 * messages than it received.
 *
 * Causes before symptoms: a hang (DS_MISSING) whose missing ranks took part
 * in an earlier type/count/dtype/op/root mismatch or are blocked in
 * point-to-point (or a DS_P2P whose peer is) is marked as caused by it
 * (.cause) and follows it; the cause's detail ends "; then ranks ...
 * waited in MPI_...". A hang's echo on another communicator (a rank
 * "missing" there because it is stuck in an earlier collective here) is
 * reported only as the effect of such a cause, and dropped when the first
 * cause is itself a hang.
 *
 * Parameters: tensors named "param.*" are replicated under data
 * parallelism; within each step their fingerprints at equal (name,
 * occurrence) must agree across ranks. The first step where they do not is
 * reported as DS_VALUES with comm 0 and coll_seq 0.
 *
 * Memory: per communicator a window of the entries not yet complete on all
 * ranks (bounded by DESYNC_WINDOW_MAX; beyond it the oldest entry is
 * judged as if the trace ended), per rank its extract's read buffer (the
 * last DESYNC_RECENT_TENSORS tensor fingerprints are kept while extracting)
 * and its open point-to-point calls, the point-to-point counters (bounded
 * by DESYNC_MAX_PAIRS: beyond, point-to-point is not judged), and one
 * step's parameter fingerprints.
 *
 * Non-blocking collectives need nothing special: the ENTER is written at
 * the call and the EXIT at the completion (MPI_Wait...), possibly after
 * later calls' records; entries are keyed by coll_seq, not by order.
 *
 * Limits: the MPI and NCCL interposers give point-to-point calls their own
 * sequence space per communicator (FORMAT.md 5.7), so they never shift a
 * communicator's collective sequence; a program recording send/recv itself
 * with tft_coll_enter on a communicator's id does shift it. On an
 * intercommunicator only the type and the call are compared (counts, types
 * and roots legitimately differ between its two groups). Straggler
 * detection and the hang-echo filter compare CLOCK_MONOTONIC enter times
 * and are used only when all ranks ran on one host.
 */
#include "core.h"
#include "desync.h"
#include "core_clock.h"
#include "core_spill.h"
#include "tft_u64map.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DESYNC_WINDOW_MAX = 4096,  /* open entries per communicator */
    DESYNC_SLOT_BUDGET = 256 << 20, /* bytes of window slots, all communicators together */
    DESYNC_RECENT_TENSORS = 16,/* per rank: fingerprints kept for EXIT results */
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
#define STRAGGLER_NS 1000000000ull /* a straggler is > 1 s behind ... */
#define STRAGGLER_FACTOR 10        /* ... and > 10x the usual spread */
/* In a detail text, PH followed by 16 hex digits stands for the name of
 * that communicator, filled in once every COMM record has been read. */
#define PH "\x01"

static const char *const desync_names[] = {"missing", "type", "count", "dtype", "op",
                                           "root", "values", "straggler", "p2p"};

const char *desync_kind_name(int kind)
{
    if (kind < 0 || kind >= (int)(sizeof(desync_names) / sizeof(desync_names[0])))
        return "?";
    return desync_names[kind];
}

int desync_index(const desync_finding *list, int n, uint32_t id)
{
    for (int i = 0; id && list && i < n; i++)
        if (list[i].id == id)
            return i;
    return -1;
}

void desync_where(const desync_finding *list, int n, int k, char *buf, size_t len)
{
    const desync_finding *d = &list[k];
    int w;
    if (!d->comm)
        w = snprintf(buf, len, "parameters");
    else
        w = snprintf(buf, len, "communicator %s, %s #%" PRIu64, d->comm_name[0] ? d->comm_name : "?",
                     d->kind == DS_P2P ? "message" : "collective", d->coll_seq);
    int c = desync_index(list, n, d->cause);
    if (c >= 0 && w >= 0 && (size_t)w < len)
        snprintf(buf + w, len - (size_t)w, ", caused by the %s above", desync_kind_name(list[c].kind));
}

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

/* A finding with what the cause analysis needs (collect). */
typedef struct found {
    bool valid;
    bool echo;          /* DS_MISSING whose missing ranks were all stuck earlier elsewhere */
    desync_finding d;
    uint8_t *inv;       /* nranks: the rank index took part (NULL: never a cause) */
    uint8_t *miss;      /* nranks: missing (DS_MISSING) or blocked (DS_P2P); NULL none */
    int peer_idx;       /* DS_P2P: rank index of the peer, -1 unknown */
    char then[112];     /* DS_MISSING: "ranks 0,2,3 waited in MPI_Allgather", "" none */
    struct found *cause;/* collect: the first cause */
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

/* A counter's place in s->pair_order. */
typedef struct pair_key {
    uint64_t space;
    int32_t src, dst;
    uint32_t nth;             /* its place in the slot order of s->pairs */
    const pair_ent *p;
} pair_key;

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

/* ---- helpers ------------------------------------------------------------ */

static int desync_rank_id(const desync_state *s, int i) { return tft_trace_rank_id(s->t, i); }

/* Index of the rank file of world rank w, -1 none. */
static int desync_rank_index(const desync_state *s, int w)
{
    for (int i = 0; i < s->nranks; i++)
        if (desync_rank_id(s, i) == w)
            return i;
    return -1;
}

/* The text of string id (the extracts bring every string an entry names;
 * ids are hashes of the text, so one table serves all ranks). */
static const char *desync_str_of(const desync_state *s, int i, uint64_t id)
{
    (void)i;
    const uint64_t *off = tft_u64map_find(&s->strs, id, NULL, NULL);
    return off ? s->pool + *off : "?";
}

static int desync_str_add(desync_state *s, uint64_t id, const char *txt, size_t n)
{
    if (tft_u64map_find(&s->strs, id, NULL, NULL))
        return 0;
    if (s->pool_len + n + 1 > s->pool_cap) {
        size_t nc = s->pool_cap ? s->pool_cap : 4096;
        while (nc < s->pool_len + n + 1)
            nc *= 2;
        char *p = realloc(s->pool, nc);
        if (!p)
            return -ENOMEM;
        s->pool = p;
        s->pool_cap = nc;
    }
    void *v;
    int e = tft_u64map_insert(&s->strs, id, NULL, NULL, &v);
    if (e < 0)
        return e == -ENOSPC ? 0 : e;
    memcpy(s->pool + s->pool_len, txt, n);
    s->pool[s->pool_len + n] = '\0';
    *(uint64_t *)v = s->pool_len;
    s->pool_len += n + 1;
    return 0;
}

/* "step N", or "no step" for records outside any step. */
static const char *desync_step_text(int64_t step, char *buf, size_t len)
{
    if (step == TFT_STEP_NONE)
        snprintf(buf, len, "no step");
    else
        snprintf(buf, len, "step %" PRId64, step);
    return buf;
}

/* Appends s to the NUL-terminated buf of len bytes, cut to fit. */
static void desync_str_append(char *buf, size_t len, const char *s)
{
    size_t o = strlen(buf), n = strlen(s);
    if (o + 1 >= len)
        return;
    if (n > len - o - 1)
        n = len - o - 1;
    memcpy(buf + o, s, n);
    buf[o + n] = '\0';
}

static void desync_add_rank(desync_finding *d, int rank)
{
    if (d->nranks < (int)(sizeof(d->ranks) / sizeof(d->ranks[0])))
        d->ranks[d->nranks++] = rank;
}

static void ranks_text(const desync_state *s, const int *idx, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && o < len; k++) {
        int w = snprintf(buf + o, len - o, "%s%d", k ? "," : "", desync_rank_id(s, idx[k]));
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

/* Rank indices in idx[0..n) whose value differs from the majority; returns
 * how many, written to fault, and in *ref a rank index holding the
 * reference value. Without a majority the reference is the value prev
 * (the communicator's previous call of this name, has_prev) when a rank
 * holds it, else the first rank's. */
static int minority(const uint64_t *val, const int *idx, int n, bool has_prev, uint64_t prev, int *fault,
                    int *ref)
{
    *ref = idx[0];
    int same = 1;
    while (same < n && val[same] == val[0])
        same++;
    if (same == n)
        return 0;
    int best = 0, best_cnt = 0;
    for (int a = 0; a < n; a++) {
        int c = 0;
        for (int b = 0; b < n; b++)
            c += val[b] == val[a];
        if (c > best_cnt) {
            best_cnt = c;
            best = a;
        }
    }
    if (best_cnt * 2 <= n) {
        best = 0;
        for (int a = 0; has_prev && a < n; a++)
            if (val[a] == prev) {
                best = a;
                break;
            }
    }
    *ref = idx[best];
    int nf = 0;
    for (int a = 0; a < n; a++)
        if (val[a] != val[best])
            fault[nf++] = idx[a];
    return nf;
}

/* ---- small hash maps ------------------------------------------------------ */

/* An index map: tft_u64map_hash2 of a longer key -> a u32 index into the array
 * that holds the longer key (eq compares it), at most half full. */
static void desync_ix_init(tft_u64map *m)
{
    tft_u64map_init(m, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .min_cap = 256, .hashed = true});
}

/* ---- communicator definitions (COMM records) ---------------------------- */

static comm_def *desync_def_find(const desync_state *s, uint64_t id)
{
    for (int k = 0; k < s->ndefs; k++)
        if (s->defs[k].id == id)
            return &s->defs[k];
    return NULL;
}

/* The definition whose point-to-point space is space, NULL none. */
static comm_def *desync_def_of_p2p(const desync_state *s, uint64_t space)
{
    for (int k = 0; k < s->ndefs; k++)
        if (s->defs[k].p2p == space || (s->defs[k].p2p_old && s->defs[k].p2p_old == space))
            return &s->defs[k];
    return NULL;
}

static comm_def *desync_def_get(desync_state *s, uint64_t id)
{
    comm_def *d = desync_def_find(s, id);
    if (d || s->ndefs == DESYNC_MAX_DEFS)
        return d;
    if (s->ndefs == s->defs_cap) {
        int ncap = s->defs_cap ? s->defs_cap * 2 : 16;
        comm_def *n = realloc(s->defs, (size_t)ncap * sizeof(*n));
        if (!n)
            return NULL;
        s->defs = n;
        s->defs_cap = ncap;
    }
    d = &s->defs[s->ndefs++];
    memset(d, 0, sizeof(*d));
    d->id = id;
    char p[32];
    int len = snprintf(p, sizeof(p), "%016" PRIx64 ":p2p", id);
    d->p2p = tft_string_id(p, (size_t)len);
    if (id == s->world)
        d->p2p_old = tft_string_id("MPI_COMM_WORLD:p2p", 18);
    return d;
}

/* Sizes d for n members (all unknown); false when it cannot. Members not
 * listed are assembled from the rank files, one each: a communicator
 * larger than the trace's rank files can never be complete, so its size
 * is not allocated (a COMM record's size is the file's word, not memory
 * the file has paid for). */
static bool def_size(const desync_state *s, comm_def *d, int n)
{
    if (d->mem && d->size == n)
        return true;
    if (n <= 0 || n > DESYNC_MAX_MEMBERS || n > s->nranks || d->mem)
        return false;
    d->mem = malloc((size_t)n * sizeof(*d->mem));
    if (!d->mem)
        return false;
    for (int k = 0; k < n; k++)
        d->mem[k] = -1;
    d->size = n;
    return true;
}

/* Rank file i's member k of d is its own rank (assembling unlisted members). */
static void desync_def_assemble(const desync_state *s, comm_def *d, int i, int k, int n)
{
    if (!d->listed && k >= 0 && k < n && def_size(s, d, n))
        d->mem[k] = desync_rank_id(s, i);
}

static comm_state *desync_comm_find(const desync_state *s, uint64_t comm)
{
    for (int k = 0; k < s->ncomms; k++)
        if (s->comms[k].comm == comm)
            return &s->comms[k];
    return NULL;
}

/* A COMM record of rank file i. */
static void desync_on_comm(desync_state *s, int i, const tft_rec_comm *cr)
{
    comm_def *d = desync_def_get(s, cr->comm);
    if (!d)
        return;
    bool inter = (cr->h.flags & TFT_COMM_FLAG_INTER) != 0;
    /* listed members: all of them (an intercommunicator: its local group of
     * cr->size first, then the remote one) */
    if (cr->n_members > 0 && !d->listed && cr->n_members <= DESYNC_MAX_MEMBERS &&
        (inter ? cr->size > 0 && (uint32_t)cr->size <= cr->n_members : cr->n_members == (uint32_t)cr->size)) {
        free(d->mem);
        d->mem = malloc(cr->n_members * sizeof(*d->mem));
        if (d->mem) {
            memcpy(d->mem, cr->members, cr->n_members * sizeof(*d->mem));
            d->size = (int)cr->n_members;
            d->local = inter ? cr->size : d->size;
            d->inter = inter;
            d->listed = true;
        } else {
            d->size = 0;
        }
    } else if (!inter && cr->n_members == 0) {
        desync_def_assemble(s, d, i, cr->rank, cr->size);
    }
    comm_state *c = desync_comm_find(s, cr->comm);
    if (c && d->inter) {
        c->inter = true;
        c->size = d->size > c->size ? d->size : c->size;
    }
}

/* "{0-3}", "{1,3}", "{0,2,4-7}", "{0,1|2,3}" (an intercommunicator) for d
 * into buf (len >= 32); the 16-hex-digit id when the members are unknown.
 * A list that does not fit ends in "...}". */
static void def_name(const comm_def *d, uint64_t id, char *buf, size_t len)
{
    bool known = d && d->mem && d->size > 0;
    for (int k = 0; known && k < d->size; k++)
        known = d->mem[k] >= 0;
    if (!known) {
        snprintf(buf, len, "%016" PRIx64, id);
        return;
    }
    size_t o = 1;
    buf[0] = '{';
    for (int k = 0; k < d->size; k++) {
        if (o + 28 >= len) { /* room for one more item (24) and "...}" */
            o += (size_t)snprintf(buf + o, len - o, "...");
            break;
        }
        const char *sep = k == 0 ? "" : d->inter && k == d->local ? "|" : ",";
        int j = k;
        while (j + 1 < d->size && d->mem[j + 1] == d->mem[j] + 1 && !(d->inter && j + 1 == d->local))
            j++;
        if (j - k >= 2) {
            o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", sep, (int)d->mem[k], (int)d->mem[j]);
            k = j;
        } else {
            o += (size_t)snprintf(buf + o, len - o, "%s%d", sep, (int)d->mem[k]);
        }
    }
    snprintf(buf + o, len - o, "}");
}

/* ---- communicators ------------------------------------------------------ */

static comm_state *desync_comm_get(desync_state *s, uint64_t comm)
{
    comm_state *c = desync_comm_find(s, comm);
    if (c)
        return c;
    if (s->ncomms == DESYNC_MAX_COMMS)
        return NULL;
    if (s->ncomms == s->comms_cap) {
        int ncap = s->comms_cap ? s->comms_cap * 2 : 8;
        comm_state *n = realloc(s->comms, (size_t)ncap * sizeof(*n));
        if (!n)
            return NULL;
        s->comms = n;
        s->comms_cap = ncap;
    }
    c = &s->comms[s->ncomms];
    memset(c, 0, sizeof(*c));
    c->comm = comm;
    c->member = calloc((size_t)s->nranks, 1);
    c->local = malloc((size_t)s->nranks * sizeof(*c->local));
    if (!c->member || !c->local) {
        free(c->member);
        free(c->local);
        return NULL;
    }
    for (int i = 0; i < s->nranks; i++)
        c->local[i] = -1;
    const comm_def *d = desync_def_find(s, comm);
    if (d && d->inter) {
        c->inter = true;
        c->size = d->size;
    }
    s->ncomms++;
    return c;
}

static coll_entry *desync_entry_at(comm_state *c, uint64_t q) { return &c->win[q & (c->cap - 1)]; }

/* Entry q's slots, one per rank file with records on c (c->local). */
static coll_slot *desync_slots_at(const desync_state *s, comm_state *c, uint64_t q)
{
    (void)s;
    return &c->slots[(size_t)(q & (c->cap - 1)) * (size_t)c->wcap];
}

/* Entry q's slots by rank file index (rank files without records on c:
 * empty), for the checks: s->dense, valid until the next call. */
static const coll_slot *desync_entry_dense(const desync_state *s, comm_state *c, uint64_t q)
{
    dense_view *dv = s->dense;
    if (dv->owner >= 0) { /* O(members), not O(rank files) */
        const comm_state *o = &s->comms[dv->owner];
        for (int k = 0; k < o->width; k++)
            memset(&dv->v[o->global[k]], 0, sizeof(coll_slot));
    }
    const coll_slot *sl = desync_slots_at(s, c, q);
    for (int k = 0; k < c->width; k++)
        dv->v[c->global[k]] = sl[k];
    dv->owner = (int)(c - s->comms);
    return dv->v;
}

/* Doubles c's window. -ENOSPC when the slots of all windows would pass
 * DESYNC_SLOT_BUDGET (the caller judges old entries instead). */
static int desync_window_grow(desync_state *s, comm_state *c)
{
    size_t ncap = c->cap ? c->cap * 2 : 16;
    size_t grow_by = (ncap - c->cap) * (size_t)c->wcap * sizeof(coll_slot);
    if (s->slot_bytes + grow_by > DESYNC_SLOT_BUDGET)
        return -ENOSPC;
    coll_entry *nw = calloc(ncap, sizeof(*nw));
    coll_slot *ns = calloc(ncap * (size_t)c->wcap, sizeof(*ns));
    if (!nw || !ns) {
        free(nw);
        free(ns);
        return -ENOMEM;
    }
    for (uint64_t q = c->base; q < c->top; q++) {
        nw[q & (ncap - 1)] = *desync_entry_at(c, q);
        memcpy(&ns[(size_t)(q & (ncap - 1)) * (size_t)c->wcap], desync_slots_at(s, c, q),
               (size_t)c->wcap * sizeof(*ns));
    }
    free(c->win);
    free(c->slots);
    c->win = nw;
    c->slots = ns;
    c->cap = ncap;
    s->slot_bytes += grow_by;
    return 0;
}

/* The slot of rank file i in c's entries, added (widening every entry)
 * when i records on c for the first time. -ENOSPC past DESYNC_SLOT_BUDGET. */
static int desync_comm_slot(desync_state *s, comm_state *c, int i)
{
    if (c->local[i] >= 0)
        return c->local[i];
    if (c->width == c->wcap) {
        int nw = c->wcap ? c->wcap * 2 : 4;
        if (nw > s->nranks)
            nw = s->nranks;
        size_t grow_by = c->cap * (size_t)(nw - c->wcap) * sizeof(coll_slot);
        if (s->slot_bytes + grow_by > DESYNC_SLOT_BUDGET)
            return -ENOSPC;
        int *ng = realloc(c->global, (size_t)nw * sizeof(*ng));
        if (!ng)
            return -ENOMEM;
        c->global = ng;
        int *no = realloc(c->order, (size_t)nw * sizeof(*no));
        if (!no)
            return -ENOMEM;
        c->order = no;
        if (c->cap) {
            coll_slot *ns = calloc(c->cap * (size_t)nw, sizeof(*ns));
            if (!ns)
                return -ENOMEM;
            for (size_t p = 0; p < c->cap; p++)
                memcpy(&ns[p * (size_t)nw], &c->slots[p * (size_t)c->wcap], (size_t)c->wcap * sizeof(*ns));
            free(c->slots);
            c->slots = ns;
        }
        c->wcap = nw;
        s->slot_bytes += grow_by;
    }
    c->global[c->width] = i;
    c->local[i] = c->width;
    int k = c->width;
    while (k > 0 && c->order[k - 1] > i) { /* insertion: members join one at a time */
        c->order[k] = c->order[k - 1];
        k--;
    }
    c->order[k] = i;
    return c->width++;
}

/* Stores d into f with the evidence in s->inv_tmp / s->miss_tmp (then:
 * the hang's "ranks ... waited in ..." or NULL). Allocation failures leave
 * the finding without evidence (it is then never linked). */
static void desync_found_set(const desync_state *s, found *f, const desync_finding *d, const char *then)
{
    size_t n = (size_t)s->nranks;
    if (!f->inv)
        f->inv = malloc(n);
    if (!f->miss)
        f->miss = malloc(n);
    if (f->inv)
        memcpy(f->inv, s->inv_tmp, n);
    if (f->miss)
        memcpy(f->miss, s->miss_tmp, n);
    f->valid = true;
    f->d = *d;
    f->peer_idx = -1;
    snprintf(f->then, sizeof(f->then), "%s", then ? then : "");
}

/* Keeps the first problem of a communicator: the one with the lowest
 * coll_seq (echo: the first hang echo, kept apart). */
static void comm_report(const desync_state *s, comm_state *c, const desync_finding *d, const char *then, bool echo)
{
    found *f = echo ? &c->echo : &c->fin;
    if (f->valid && f->d.coll_seq <= d->coll_seq)
        return;
    desync_found_set(s, f, d, then);
    f->echo = echo;
}

static void desync_finding_init(desync_finding *d, const comm_state *c, uint64_t q, int64_t step, int64_t seq, int kind)
{
    memset(d, 0, sizeof(*d));
    d->comm = c->comm;
    d->coll_seq = q;
    d->step = step;
    d->seq = seq;
    d->kind = kind;
    d->peer = -1;
    d->tag = TFT_TAG_NONE;
}

/* The earliest (step, op seq) of the slots idx[0, n): program order. */
static void entry_key(const coll_slot *sl, const int *idx, int n, int64_t *step, int64_t *seq)
{
    *step = sl[idx[0]].step;
    *seq = TFT_SEQ_NONE;
    for (int k = 1; k < n; k++)
        if (sl[idx[k]].step < *step)
            *step = sl[idx[k]].step;
    for (int k = 0; k < n; k++) {
        const coll_slot *x = &sl[idx[k]];
        if (x->step == *step && x->seq != TFT_SEQ_NONE && (*seq == TFT_SEQ_NONE || x->seq < *seq))
            *seq = x->seq;
    }
}

/* Evidence of a finding: inv = the ranks idx[0, n) (and more by the
 * caller), miss = fault[0, nf). */
static void evidence(const desync_state *s, const int *idx, int n, const int *fault, int nf)
{
    memset(s->inv_tmp, 0, (size_t)s->nranks);
    memset(s->miss_tmp, 0, (size_t)s->nranks);
    for (int k = 0; k < n; k++)
        s->inv_tmp[idx[k]] = 1;
    for (int k = 0; k < nf; k++)
        s->miss_tmp[fault[k]] = 1;
}

/* ---- checks of one collective -------------------------------------------- */

static bool has_redop(int type)
{
    return type == TFT_COLL_ALLREDUCE || type == TFT_COLL_REDUCE || type == TFT_COLL_REDUCE_SCATTER;
}

static bool has_root(int type)
{
    return type == TFT_COLL_BCAST || type == TFT_COLL_REDUCE || type == TFT_COLL_GATHER ||
           type == TFT_COLL_SCATTER;
}

/* check_field's pseudo-kind for the call's name; reported as DS_TYPE. */
enum { FIELD_NAME = 100 };

static uint64_t field_of(const coll_slot *x, int kind)
{
    return kind == DS_TYPE ? x->type : kind == DS_COUNT ? x->count : kind == DS_DTYPE ? x->dtype
         : kind == DS_OP ? x->redop : kind == FIELD_NAME ? x->name : (uint64_t)(int64_t)x->root;
}

/* Field `kind` of every present slot agrees? Reports the minority otherwise. */
static bool check_field(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                        const int *idx, int n, int kind)
{
    uint64_t *val = s->ubuf;
    for (int k = 0; k < n; k++)
        val[k] = field_of(&sl[idx[k]], kind);
    int *fault = s->ibuf + 4 * (size_t)s->nranks;
    int ref;
    /* a tie: the value this communicator's previous call of the name had */
    bool prev = c->has_last && c->last.name == sl[idx[0]].name;
    int nf = minority(val, idx, n, prev, prev ? field_of(&c->last, kind) : 0, fault, &ref);
    if (!nf)
        return true;
    const coll_slot *a = &sl[ref], *b = &sl[fault[0]];
    int64_t step, seq;
    entry_key(sl, idx, n, &step, &seq);
    desync_finding d;
    desync_finding_init(&d, c, q, step, seq, kind == FIELD_NAME ? DS_TYPE : kind);
    for (int k = 0; k < nf; k++)
        desync_add_rank(&d, desync_rank_id(s, fault[k]));
    const char *what = kind == DS_TYPE ? "type" : kind == DS_COUNT ? "count" : kind == DS_DTYPE ? "dtype"
                     : kind == DS_OP ? "reduce op" : kind == FIELD_NAME ? "calls" : "root";
    char va[48], vb[48], st[32];
    switch (kind) {
    case FIELD_NAME:
        snprintf(va, sizeof(va), "%s", desync_str_of(s, ref, a->name));
        snprintf(vb, sizeof(vb), "%s", desync_str_of(s, fault[0], b->name));
        break;
    case DS_TYPE:
        snprintf(va, sizeof(va), "%s", tft_coll_type_name(a->type));
        snprintf(vb, sizeof(vb), "%s", tft_coll_type_name(b->type));
        break;
    case DS_DTYPE:
        snprintf(va, sizeof(va), "%s", tft_dtype_name(a->dtype));
        snprintf(vb, sizeof(vb), "%s", tft_dtype_name(b->dtype));
        break;
    case DS_OP:
        snprintf(va, sizeof(va), "%s", tft_redop_name(a->redop));
        snprintf(vb, sizeof(vb), "%s", tft_redop_name(b->redop));
        break;
    case DS_ROOT:
        snprintf(va, sizeof(va), "%d", (int)a->root);
        snprintf(vb, sizeof(vb), "%d", (int)b->root);
        break;
    default:
        snprintf(va, sizeof(va), "%" PRIu64, a->count);
        snprintf(vb, sizeof(vb), "%" PRIu64, b->count);
    }
    snprintf(d.detail, sizeof(d.detail), "%s differs on communicator " PH "%016" PRIx64 ", collective #%" PRIu64
             " (%s): rank %d %s %s, rank %d %s %s", desync_str_of(s, ref, a->name), c->comm, q,
             desync_step_text(step, st, sizeof(st)), desync_rank_id(s, ref), what, va,
             desync_rank_id(s, fault[0]), what, vb);
    evidence(s, idx, n, fault, nf);
    comm_report(s, c, &d, NULL, false);
    return false;
}

static bool check_values(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                         const int *idx, int n)
{
    int type = sl[idx[0]].type;
    if (type != TFT_COLL_ALLREDUCE && type != TFT_COLL_BCAST)
        return true;
    uint64_t *val = s->ubuf;
    for (int k = 0; k < n; k++) {
        if (!sl[idx[k]].has_fp || !sl[idx[k]].exited)
            return true;
        val[k] = sl[idx[k]].fp;
    }
    int *fault = s->ibuf + 4 * (size_t)s->nranks;
    int ref;
    int nf = minority(val, idx, n, false, 0, fault, &ref);
    if (!nf)
        return true;
    const coll_slot *a = &sl[ref];
    int64_t step, seq;
    entry_key(sl, idx, n, &step, &seq);
    desync_finding d;
    char st[32];
    desync_finding_init(&d, c, q, step, seq, DS_VALUES);
    for (int k = 0; k < nf; k++)
        desync_add_rank(&d, desync_rank_id(s, fault[k]));
    snprintf(d.detail, sizeof(d.detail), "%s results differ across ranks on communicator " PH "%016" PRIx64
             ", collective #%" PRIu64 " (%s): rank %d fp=%016" PRIx64 ", rank %d fp=%016" PRIx64,
             desync_str_of(s, ref, a->name), c->comm, q, desync_step_text(step, st, sizeof(st)),
             desync_rank_id(s, ref), a->fp, desync_rank_id(s, fault[0]), sl[fault[0]].fp);
    evidence(s, idx, n, fault, nf);
    comm_report(s, c, &d, NULL, false);
    return false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The clock entry times of a collective compare on, for desync_check_straggler:
 * one host's monotonic; across hosts rank 0's realtime through the MPI
 * estimate, else each host's realtime when every host involved was
 * NTP-synchronised then. t[k]: the time of idx[k]; *late its latest rank;
 * *err the comparison's error bound (0 on one host). false: not comparable. */
static bool entry_times(const desync_state *s, const coll_slot *sl, const int *idx, int n, uint64_t *t, int *late,
                        uint64_t *err)
{
    uint64_t t_late = 0, e1 = 0, e2 = 0; /* the two largest NTP bounds */
    *err = s->aligned ? 2 * s->clock_err : 0;
    bool local = !s->one_host && !s->aligned && s->host_of; /* these ranks on one host: its monotonic clock */
    for (int k = 0; local && k < n; k++)
        local = s->host_of[idx[k]] >= 0 && s->host_of[idx[k]] == s->host_of[idx[0]];
    for (int k = 0; k < n; k++) {
        const coll_slot *x = &sl[idx[k]];
        if (!x->t_enter)
            return false;
        bool ntp = !s->one_host && !s->aligned && !local;
        if (ntp && x->rt_err == UINT64_MAX)
            return false;
        if (ntp && x->rt_err > e1) {
            e2 = e1;
            e1 = x->rt_err;
        } else if (ntp && x->rt_err > e2) {
            e2 = x->rt_err;
        }
        t[k] = x->t_enter + (uint64_t)(s->aligned ? s->adj[idx[k]] : ntp ? x->rt : 0);
        if (t[k] > t_late) {
            t_late = t[k];
            *late = idx[k];
        }
    }
    if (!s->one_host && !s->aligned)
        *err = local ? 0 : e1 + e2;
    return true;
}

/* The last rank to enter, when it came far later than usual on this comm.
 * Across hosts only with their clocks comparable (entry_times). */
static void desync_check_straggler(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                            const int *idx, int n)
{
    if (n < 2)
        return;
    uint64_t *t = s->ubuf, err;
    int late = idx[0];
    if (!entry_times(s, sl, idx, n, t, &late, &err))
        return;
    qsort(t, (size_t)n, sizeof(t[0]), cmp_u64);
    uint64_t spread = t[n - 1] - t[(n - 1) / 2];
    if (c->nspreads >= DESYNC_SPREADS_MIN && !c->straggled && spread > STRAGGLER_NS) {
        int m = c->nspreads < DESYNC_SPREADS ? c->nspreads : DESYNC_SPREADS;
        uint64_t hist[DESYNC_SPREADS];
        memcpy(hist, c->spreads, (size_t)m * sizeof(hist[0]));
        qsort(hist, (size_t)m, sizeof(hist[0]), cmp_u64);
        if (spread > STRAGGLER_FACTOR * hist[m / 2]) {
            desync_finding *d = &c->straggler;
            desync_finding_init(d, c, q, sl[late].step, sl[late].seq, DS_STRAGGLER);
            desync_add_rank(d, desync_rank_id(s, late));
            char st[32], al[128] = "";
            if (s->aligned)
                snprintf(al, sizeof(al), "; hosts' clocks aligned through MPI, error within %.1f us", err / 1e3);
            else if (!s->one_host && err)
                snprintf(al, sizeof(al), "; hosts' clocks NTP-synchronised, error within %.3f ms", err / 1e6);
            d->clock_error_ns = s->one_host ? 0 : err;
            snprintf(d->detail, sizeof(d->detail), "rank %d entered %s (communicator " PH "%016" PRIx64
                     ", collective #%" PRIu64 ", %s) %.3f s after the median rank (usually %.3f ms%s)",
                     desync_rank_id(s, late), desync_str_of(s, late, sl[late].name), c->comm, q,
                     desync_step_text(sl[late].step, st, sizeof(st)), spread / 1e9, hist[m / 2] / 1e6, al);
            c->straggled = true;
        }
    }
    c->spreads[c->nspreads++ % DESYNC_SPREADS] = spread;
}

/* Whether st comes before (step, seq, t_enter) in program order: by step,
 * then by op sequence number (ranks of one SPMD program number their ops
 * alike, and unlike times this holds across hosts and under load), then,
 * without sequence numbers, by enter time on one host. */
static bool desync_stuck_before(const stuck_at *st, int64_t step, int64_t seq, uint64_t t_enter, bool one_host)
{
    if (!st->valid)
        return false;
    if (st->step != step)
        return st->step < step;
    if (st->seq != TFT_SEQ_NONE && seq != TFT_SEQ_NONE)
        return st->seq < seq;
    return one_host && st->t_enter < t_enter;
}

/* Members of c with no record of entry q: a hang. stuck (may be NULL: the
 * window overflowed) tells echoes of a hang elsewhere apart; an echo is
 * kept aside (comm_state.echo) and the entry's other checks go on.
 * Returns false when reported. */
static bool check_missing(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                          const stuck_at *stuck)
{
    int n = s->nranks, nmem = c->width;
    int *present = s->ibuf + n, *missing = s->ibuf + 2 * (size_t)n, *inside = s->ibuf + 3 * (size_t)n;
    int np = 0, nm = 0, ni = 0;
    bool all = nmem < c->size && c->size >= n; /* members not yet seen: everyone is one */
    for (int k = 0; k < (all ? n : c->width); k++) { /* in rank file order */
        int i = all ? k : c->order[k];
        if (sl[i].entered || sl[i].exited)
            present[np++] = i;
        else if (all || c->member[i])
            missing[nm++] = i;
        if (sl[i].entered && !sl[i].exited)
            inside[ni++] = i;
    }
    if (!nm || !np)
        return true;
    const coll_slot *a = &sl[present[0]];
    uint64_t t0 = UINT64_MAX;
    int64_t step, seq0;
    entry_key(sl, present, np, &step, &seq0);
    for (int k = 0; k < np; k++)
        if (sl[present[k]].t_enter && sl[present[k]].t_enter < t0)
            t0 = sl[present[k]].t_enter;
    int echoes = 0;
    for (int k = 0; stuck && k < nm; k++)
        echoes += stuck[missing[k]].comm != c->comm &&
                  desync_stuck_before(&stuck[missing[k]], step, seq0, t0, s->one_host);
    bool echo = stuck && echoes == nm;
    desync_finding d;
    desync_finding_init(&d, c, q, step, seq0, DS_MISSING);
    for (int k = 0; k < nm; k++)
        desync_add_rank(&d, desync_rank_id(s, missing[k]));
    char in_txt[64], miss_txt[48], st[32], then[112]; /* the ranks field holds every rank */
    ranks_text(s, missing, nm, miss_txt, sizeof(miss_txt));
    ranks_text(s, ni ? inside : present, ni ? ni : np, in_txt, sizeof(in_txt));
    const char *name = desync_str_of(s, present[0], a->name);
    snprintf(d.detail, sizeof(d.detail), "rank%s %s %s %s (%s %" PRIu64 " x %s) on communicator " PH "%016" PRIx64
             ", collective #%" PRIu64 " (%s)%s; rank%s %s never entered it", (ni ? ni : np) > 1 ? "s" : "", in_txt,
             ni ? "entered" : "completed", name, tft_coll_type_name(a->type), a->count, tft_dtype_name(a->dtype),
             c->comm, q, desync_step_text(step, st, sizeof(st)), ni ? " and never left it" : "", nm > 1 ? "s" : "",
             miss_txt);
    snprintf(then, sizeof(then), "rank%s %s waited in %s", ni > 1 ? "s" : "", in_txt, name);
    evidence(s, present, np, missing, nm);
    for (int k = 0; k < nm; k++)
        s->inv_tmp[missing[k]] = 1;
    comm_report(s, c, &d, ni ? then : NULL, echo);
    return echo;
}

/* Judges entry q of c: complete (all left it) or final (the trace ended or
 * the window overflowed). */
static void desync_entry_check(const desync_state *s, comm_state *c, uint64_t q, bool final, const stuck_at *stuck)
{
    if (c->fin.valid && c->fin.d.coll_seq <= q)
        return;
    const coll_slot *sl = desync_entry_dense(s, c, q);
    int np = 0;
    int *idx = s->ibuf;
    for (int k = 0; k < c->width; k++)
        if (sl[c->order[k]].has_fields)
            idx[np++] = c->order[k];
    if (final && !check_missing(s, c, q, sl, stuck))
        return;
    if (np < 2)
        return;
    if (!check_field(s, c, q, sl, idx, np, DS_TYPE))
        return;
    if (!c->inter) { /* an intercommunicator's two groups pass different counts, types, roots */
        if (!check_field(s, c, q, sl, idx, np, DS_COUNT) || !check_field(s, c, q, sl, idx, np, DS_DTYPE))
            return;
        if (has_redop(sl[idx[0]].type) && !check_field(s, c, q, sl, idx, np, DS_OP))
            return;
        if (has_root(sl[idx[0]].type) && !check_field(s, c, q, sl, idx, np, DS_ROOT))
            return;
    }
    if (!check_field(s, c, q, sl, idx, np, FIELD_NAME))
        return;
    if (!c->inter && !check_values(s, c, q, sl, idx, np))
        return;
    c->last = sl[idx[0]];
    c->has_last = true;
    if (!final)
        desync_check_straggler(s, c, q, sl, idx, np);
}

/* Frees entry q and drops judged entries from the bottom of the window
 * (an entry's slots are cleared when it is used again). */
static void desync_entry_close(const desync_state *s, comm_state *c, uint64_t q)
{
    (void)s;
    desync_entry_at(c, q)->used = false;
    while (c->base < c->top && !desync_entry_at(c, c->base)->used)
        c->base++;
}

/* Judges the oldest entry of c as if the trace ended, and drops it. */
static void entry_evict(const desync_state *s, comm_state *c, uint64_t q)
{
    if (desync_entry_at(c, c->base)->used)
        desync_entry_check(s, c, c->base, true, NULL);
    desync_entry_close(s, c, c->base);
    if (c->base == c->top)
        c->base = c->top = q;
}

/* ---- records ------------------------------------------------------------ */

/* The result of the collective being read: its rank's extract resolved it
 * among the rank's last DESYNC_RECENT_TENSORS tensors (core_spill.c). */
static bool result_fp(const desync_state *s, int i, uint64_t id, uint64_t *fp)
{
    (void)i;
    (void)id;
    *fp = s->cur_fp;
    return s->cur_has_fp;
}

static void slot_fill(const desync_state *s, int i, coll_slot *x, const tft_rec_collective *cr, int64_t step)
{
    if (!x->has_fields) {
        x->has_fields = 1;
        x->type = cr->type;
        x->dtype = cr->dtype;
        x->redop = cr->redop;
        x->root = cr->root;
        x->count = cr->count;
        x->name = cr->name;
        x->step = step;
        x->seq = cr->h.seq;
    }
    if (!x->t_enter) {
        x->t_enter = cr->t_enter;
        x->rt = s->clk ? s->clk[i].real_minus_mono : 0;
        x->rt_err = s->clk ? core_clock_pair_error(&s->clk[i]) : UINT64_MAX;
    }
    if (cr->h.flags & TFT_COLL_FLAG_ENTER)
        x->entered = 1;
    if (cr->h.flags & TFT_COLL_FLAG_EXIT) {
        x->exited = 1;
        if (cr->result && result_fp(s, i, cr->result, &x->fp))
            x->has_fp = 1;
    }
}

/* Records name MPI_COMM_WORLD by communicator rank = world rank: its
 * members without a COMM record that lists them (tftrain, 1.0/1.1). */
static void world_member(desync_state *s, int i, const tft_rec_collective *cr)
{
    if (cr->comm != s->world || cr->nranks <= 0 || cr->nranks > s->nranks)
        return;
    comm_def *d = desync_def_get(s, cr->comm);
    if (d)
        desync_def_assemble(s, d, i, cr->rank, cr->nranks);
}

static int desync_on_collective(desync_state *s, int i, const tft_rec_collective *cr, int64_t step)
{
    if (!(cr->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT)))
        return 0;
    comm_state *c = desync_comm_get(s, cr->comm);
    if (!c)
        return s->ncomms == DESYNC_MAX_COMMS ? 0 : -ENOMEM;
    world_member(s, i, cr);
    int li = desync_comm_slot(s, c, i);
    if (li == -ENOSPC)
        return 0; /* the windows hold DESYNC_SLOT_BUDGET: this rank is not judged here */
    if (li < 0)
        return li;
    c->member[i] = 1;
    if (cr->nranks > c->size && !c->inter)
        c->size = cr->nranks;
    uint64_t q = cr->coll_seq;
    /* The recorder's sequence numbers are int64 tokens >= 0: anything above
     * is damage, and would overflow the window arithmetic below. */
    if (q > (uint64_t)INT64_MAX || q < c->base || (c->fin.valid && q > c->fin.d.coll_seq))
        return 0;
    if (c->base == c->top)
        c->base = c->top = q;
    else if (q >= c->top + DESYNC_WINDOW_MAX)
        return 0; /* an implausible jump: leave it out */
    while (q >= c->base + DESYNC_WINDOW_MAX) /* judge the oldest as if the trace ended */
        entry_evict(s, c, q);
    while (q >= c->base + c->cap) {
        int e = desync_window_grow(s, c);
        if (e == -ENOSPC && !c->cap)
            return 0; /* no window left for another communicator: not judged */
        if (e == -ENOSPC) { /* the windows hold DESYNC_SLOT_BUDGET: this one stops growing */
            while (q >= c->base + c->cap)
                entry_evict(s, c, q);
            break;
        }
        if (e)
            return e;
    }
    if (q >= c->top) {
        for (uint64_t k = c->top; k <= q; k++) /* coll_seq numbers skipped so far stay unused */
            desync_entry_at(c, k)->used = false;
        c->top = q + 1;
    }
    coll_entry *e = desync_entry_at(c, q);
    coll_slot *x = &desync_slots_at(s, c, q)[li];
    if (!e->used) {
        *e = (coll_entry){.used = true, .coll_seq = q};
        memset(desync_slots_at(s, c, q), 0, (size_t)c->wcap * sizeof(coll_slot));
    }
    bool was_out = x->exited;
    slot_fill(s, i, x, cr, step);
    if (x->exited && !was_out)
        e->nexit++;
    int expect = c->size > 0 && c->size < s->nranks ? c->size : s->nranks;
    if (e->nexit >= expect) {
        desync_entry_check(s, c, q, false, NULL);
        desync_entry_close(s, c, q);
    }
    return 0;
}

/* ---- point-to-point -------------------------------------------------------- */

static uint64_t pair_hash(uint64_t space, int32_t src, int32_t dst, int32_t tag)
{
    uint64_t h = space ^ ((uint64_t)(uint32_t)src << 32 | (uint32_t)dst);
    h ^= (uint64_t)(uint32_t)tag * 0x9E3779B97F4A7C15ull;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static bool pair_eq(const void *ctx, const void *val)
{
    const pair_ent *a = ctx, *b = val;
    return a->space == b->space && a->src == b->src && a->dst == b->dst && a->tag == b->tag;
}

static const pair_ent *desync_pair_find(const desync_state *s, uint64_t space, int32_t src, int32_t dst, int32_t tag)
{
    pair_ent want = {.space = space, .src = src, .dst = dst, .tag = tag};
    return tft_u64map_find(&s->pairs, pair_hash(space, src, dst, tag), pair_eq, &want);
}

/* The counters of (space, src, dst, tag), added when new; NULL when the
 * table is full (point-to-point is then not judged). Room is made before
 * the lookup, as DESYNC_MAX_PAIRS counts it: once the table holds that
 * many, the next call overflows, whatever it asks for. */
static pair_ent *pair_get(desync_state *s, uint64_t space, int32_t src, int32_t dst, int32_t tag)
{
    if (s->pairs_overflow || !space)
        return NULL;
    if (tft_u64map_reserve(&s->pairs) < 0) {
        s->pairs_overflow = true;
        return NULL;
    }
    pair_ent want = {.space = space, .src = src, .dst = dst, .tag = tag};
    void *v;
    if (tft_u64map_insert(&s->pairs, pair_hash(space, src, dst, tag), pair_eq, &want, &v) == 1)
        *(pair_ent *)v = want;
    return v;
}

typedef struct open_key {
    const p2p_rank *o;
    uint64_t space, q;
} open_key;

static bool open_eq(const void *ctx, const void *val)
{
    const open_key *k = ctx;
    const p2p_open *x = &k->o->v[*(const uint32_t *)val];
    return x->space == k->space && x->q == k->q;
}

/* Drops the calls marked gone and rebuilds the index: O(open calls). */
static int desync_open_compact(p2p_rank *o)
{
    size_t k = 0;
    for (size_t j = 0; j < o->n; j++)
        if (!o->v[j].gone)
            o->v[k++] = o->v[j];
    o->n = k;
    o->ngone = 0;
    tft_u64map_clear(&o->ix);
    for (size_t j = 0; j < o->n; j++) {
        open_key key = {o, o->v[j].space, o->v[j].q};
        void *v;
        int rc = tft_u64map_insert(&o->ix, tft_u64map_hash2(key.space, key.q), open_eq, &key, &v);
        if (rc < 0)
            return rc;
        o->v[j].prev_same = rc == 0 ? (int32_t)*(uint32_t *)v : -1;
        *(uint32_t *)v = (uint32_t)j;
    }
    return 0;
}

static void open_add(p2p_rank *o, const tft_rec_collective *cr, int64_t step)
{
    if (o->overflow)
        return;
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 16;
        p2p_open *n = ncap <= DESYNC_MAX_OPEN ? realloc(o->v, ncap * sizeof(*n)) : NULL;
        if (!n) {
            o->overflow = true;
            return;
        }
        o->v = n;
        o->cap = ncap;
    }
    open_key key = {o, cr->comm, cr->coll_seq};
    void *v;
    int rc = tft_u64map_insert(&o->ix, tft_u64map_hash2(cr->comm, cr->coll_seq), open_eq, &key, &v);
    if (rc < 0) {
        o->overflow = true;
        return;
    }
    o->v[o->n] = (p2p_open){.space = cr->comm, .q = cr->coll_seq, .count = cr->count, .name = cr->name,
                            .step = step, .seq = cr->h.seq, .me = cr->rank, .peer = cr->root,
                            .tag = tft_rec_coll_tag(cr), .type = cr->type, .dtype = cr->dtype,
                            .prev_same = rc == 0 ? (int32_t)*(uint32_t *)v : -1};
    *(uint32_t *)v = (uint32_t)o->n++;
}

/* The call left: its newest open call of the same (space, q), O(1). */
static void open_remove(p2p_rank *o, const tft_rec_collective *cr)
{
    open_key key = {o, cr->comm, cr->coll_seq};
    uint32_t *ix = tft_u64map_find(&o->ix, tft_u64map_hash2(cr->comm, cr->coll_seq), open_eq, &key);
    if (!ix)
        return;
    p2p_open *x = &o->v[*ix];
    x->gone = true;
    o->ngone++;
    if (x->prev_same >= 0)
        *ix = (uint32_t)x->prev_same;
    else
        tft_u64map_remove(&o->ix, ix);
    if (o->ngone > 64 && o->ngone * 2 > o->n && desync_open_compact(o) < 0)
        o->overflow = true;
}

/* A send or receive record of rank file i: counters, open calls. */
static void desync_on_p2p(desync_state *s, int i, const tft_rec_collective *cr, int64_t step)
{
    int32_t tag = tft_rec_coll_tag(cr);
    bool send = cr->type == TFT_COLL_SEND, enter = cr->h.flags & TFT_COLL_FLAG_ENTER,
         exit = cr->h.flags & TFT_COLL_FLAG_EXIT;
    if (enter) {
        pair_ent *p = send ? pair_get(s, cr->comm, cr->rank, cr->root, tag)
                           : pair_get(s, cr->comm, cr->root, cr->rank, tag);
        if (p && send) {
            p->sends++;
            p->last_count = cr->count;
            p->last_dtype = cr->dtype;
        } else if (p) {
            p->posted++;
        }
        if (!exit)
            open_add(&s->open[i], cr, step);
    }
    if (exit) {
        if (!send) { /* the actual source and tag, from the status */
            pair_ent *p = pair_get(s, cr->comm, cr->root, cr->rank, tag);
            if (p)
                p->done++;
        }
        if (!enter)
            open_remove(&s->open[i], cr);
    }
}


/* Sums the judging needs, one per (kind, space, src, dst, tag) asked,
 * filled in one pass over the point-to-point counters (p2p_sums): a rank's
 * open calls are judged in O(1) each, whatever the number of counters. */
enum { Q_RECV = 1, Q_POSTED = 2 };
#define SRC_ALL INT32_MIN       /* any source (a receive from any rank) */
#define SRC_NEG (INT32_MIN + 1) /* the receives posted for any source (src < 0) */
#define TAG_ALL INT32_MIN       /* any tag */

typedef struct p2p_query {
    uint64_t space;
    int32_t src, dst, tag;
    int kind;
    int64_t sum;
} p2p_query;

typedef struct p2p_sums {
    p2p_query *q;
    size_t n, cap;
    tft_u64map ix;            /* query_hash -> index in q (desync_ix_init) */
} p2p_sums;

typedef struct query_key {
    const p2p_sums *ps;
    const p2p_query *want;
} query_key;

static bool query_eq(const void *ctx, const void *val)
{
    const query_key *k = ctx;
    const p2p_query *a = &k->ps->q[*(const uint32_t *)val], *b = k->want;
    return a->space == b->space && a->src == b->src && a->dst == b->dst && a->tag == b->tag && a->kind == b->kind;
}

static uint64_t query_hash(const p2p_query *w)
{
    return tft_u64map_hash2(w->space ^ (uint64_t)w->kind << 60,
                   ((uint64_t)(uint32_t)w->src << 32 | (uint32_t)w->dst) ^ (uint64_t)(uint32_t)w->tag * 0x51ull);
}

/* The query w in ps (added when add), NULL when absent or no memory. */
static p2p_query *query_get(p2p_sums *ps, const p2p_query *w, bool add)
{
    query_key key = {ps, w};
    uint64_t h = query_hash(w);
    if (!add) {
        const uint32_t *ix = tft_u64map_find(&ps->ix, h, query_eq, &key);
        return ix ? &ps->q[*ix] : NULL;
    }
    void *v;
    int rc = tft_u64map_insert(&ps->ix, h, query_eq, &key, &v);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        return &ps->q[*(uint32_t *)v];
    if (ps->n == ps->cap) {
        size_t ncap = ps->cap ? ps->cap * 2 : 256;
        p2p_query *nq = realloc(ps->q, ncap * sizeof(*nq));
        if (!nq) {
            tft_u64map_remove(&ps->ix, v);
            return NULL;
        }
        ps->q = nq;
        ps->cap = ncap;
    }
    ps->q[ps->n] = *w;
    ps->q[ps->n].sum = 0;
    *(uint32_t *)v = (uint32_t)ps->n;
    return &ps->q[ps->n++];
}

static bool tag_match(int32_t want, int32_t tag) { return want == TFT_TAG_ANY || want == tag; }

/* The sums open call o needs (what p2p_satisfied asks). */
static int p2p_ask(p2p_sums *ps, const p2p_open *o)
{
    if (o->type == TFT_COLL_RECV) {
        p2p_query w = {o->space, o->peer < 0 ? SRC_ALL : o->peer, o->me, o->tag == TFT_TAG_ANY ? TAG_ALL : o->tag,
                       Q_RECV, 0};
        return query_get(ps, &w, true) ? 0 : -ENOMEM;
    }
    int32_t srcs[2] = {o->me < 0 ? SRC_NEG : o->me, SRC_NEG}, tags[2] = {o->tag, TFT_TAG_ANY};
    for (int a = 0; a < (o->me < 0 ? 1 : 2); a++)
        for (int b = 0; b < (o->tag == TFT_TAG_ANY ? 1 : 2); b++) {
            p2p_query w = {o->space, srcs[a], o->peer, tags[b], Q_POSTED, 0};
            if (!query_get(ps, &w, true))
                return -ENOMEM;
        }
    return 0;
}

/* One pass over the counters into the sums asked. */
static void p2p_fill(const desync_state *s, p2p_sums *ps)
{
    const pair_ent *p;
    for (size_t pos = 0; ps->n && (p = tft_u64map_next(&s->pairs, &pos, NULL));) {
        if (p->src >= 0) { /* messages sent and not yet received, for the receives */
            int32_t srcs[2] = {p->src, SRC_ALL}, tags[2] = {p->tag, TAG_ALL};
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++) {
                    p2p_query w = {p->space, srcs[a], p->dst, tags[b], Q_RECV, 0};
                    p2p_query *x = query_get(ps, &w, false);
                    if (x)
                        x->sum += (int64_t)p->sends - (int64_t)p->done;
                }
        }
        p2p_query w = {p->space, p->src < 0 ? SRC_NEG : p->src, p->dst, p->tag, Q_POSTED, 0};
        p2p_query *x = query_get(ps, &w, false);
        if (x)
            x->sum += p->posted;
    }
}

/* Whether open call o of a rank can still complete from what the trace
 * holds: a receive for which more matching messages were sent than it
 * (with its rank's other receives) took, a send for which its peer posted
 * as many matching receives as were sent. The sums come from p2p_fill. */
static bool p2p_satisfied(const desync_state *s, p2p_sums *ps, const p2p_open *o)
{
    int64_t have = 0;
    if (o->type == TFT_COLL_RECV) {
        p2p_query w = {o->space, o->peer < 0 ? SRC_ALL : o->peer, o->me, o->tag == TFT_TAG_ANY ? TAG_ALL : o->tag,
                       Q_RECV, 0};
        const p2p_query *x = query_get(ps, &w, false);
        return x && x->sum > 0;
    }
    int32_t srcs[2] = {o->me < 0 ? SRC_NEG : o->me, SRC_NEG}, tags[2] = {o->tag, TFT_TAG_ANY};
    for (int a = 0; a < (o->me < 0 ? 1 : 2); a++)
        for (int b = 0; b < (o->tag == TFT_TAG_ANY ? 1 : 2); b++) {
            p2p_query w = {o->space, srcs[a], o->peer, tags[b], Q_POSTED, 0};
            const p2p_query *x = query_get(ps, &w, false);
            have += x ? x->sum : 0;
        }
    const pair_ent *p = desync_pair_find(s, o->space, o->me, o->peer, o->tag);
    if (p)
        have -= p->sends;
    return have >= 0;
}

/* Index in s->open[i] of the call rank i is blocked in, -1 none: its
 * first open call (of the first DESYNC_OPEN_JUDGED) that cannot complete. */
static int p2p_blocked(const desync_state *s, p2p_sums *ps, int i)
{
    const p2p_rank *r = &s->open[i];
    if (r->overflow || s->pairs_overflow)
        return -1;
    for (size_t k = 0; k < r->n && k < DESYNC_OPEN_JUDGED; k++)
        if (!p2p_satisfied(s, ps, &r->v[k]))
            return (int)k;
    return -1;
}

/* World rank of communicator rank k of the communicator owning space. */
static int p2p_world(const desync_state *s, uint64_t space, int k)
{
    const comm_def *d = desync_def_of_p2p(s, space);
    if (!d || !d->mem || k < 0 || k >= (d->inter ? d->local : d->size))
        return -1;
    return d->mem[k];
}

/* A send nobody posted a receive for is reported only when its peer is
 * stuck too (in a collective, or blocked in point-to-point): a peer that
 * went on may have taken the message with a call we do not see (a matched
 * probe, MPI_Mrecv, as mpi4py's comm.recv does). */
static bool desync_send_peer_stuck(const desync_state *s, int i, int k, const int *blocked)
{
    const p2p_open *o = &s->open[i].v[k];
    if (o->type != TFT_COLL_SEND)
        return true;
    int pw = p2p_world(s, o->space, o->peer), pi = pw >= 0 ? desync_rank_index(s, pw) : -1;
    return pi >= 0 && (s->last_stuck[pi].valid || blocked[pi] >= 0);
}

/* Where rank index pi stands at the end, for "; rank P is itself ..." into buf:
 * its latest open collective or blocked point-to-point call; "" none. */
static void peer_state(const desync_state *s, int pi, const int *blocked, char *buf, size_t len)
{
    buf[0] = '\0';
    const stuck_at *c = &s->last_stuck[pi];
    const p2p_open *p = blocked[pi] >= 0 ? &s->open[pi].v[blocked[pi]] : NULL;
    bool coll = c->valid;
    if (coll && p && desync_stuck_before(c, p->step, p->seq, 0, false))
        coll = false;
    if (coll) {
        snprintf(buf, len, "; rank %d is itself waiting in %s (communicator " PH "%016" PRIx64
                 ", collective #%" PRIu64 ")", desync_rank_id(s, pi), desync_str_of(s, pi, c->name), c->comm, c->q);
    } else if (p) {
        int w = p2p_world(s, p->space, p->peer);
        char who[32];
        if (w >= 0)
            snprintf(who, sizeof(who), "rank %d", w);
        else
            snprintf(who, sizeof(who), p->peer < 0 ? "any rank" : "communicator rank %d", (int)p->peer);
        snprintf(buf, len, "; rank %d is itself blocked in %s %s %s", desync_rank_id(s, pi),
                 desync_str_of(s, pi, p->name), p->type == TFT_COLL_SEND ? "to" : "from", who);
    }
}

/* s->pair_order: the counters by (space, src, dst), then slot. */
static int cmp_pair_key(const void *a, const void *b)
{
    const pair_key *x = a, *y = b;
    if (x->space != y->space)
        return x->space < y->space ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return (x->nth > y->nth) - (x->nth < y->nth);
}

static int desync_pairs_sort(desync_state *s)
{
    free(s->pair_order);
    s->pair_order = malloc((tft_u64map_count(&s->pairs) + 1) * sizeof(*s->pair_order));
    if (!s->pair_order)
        return -ENOMEM;
    size_t n = 0;
    const pair_ent *p;
    for (size_t pos = 0; (p = tft_u64map_next(&s->pairs, &pos, NULL)); n++)
        s->pair_order[n] = (pair_key){p->space, p->src, p->dst, (uint32_t)n, p};
    qsort(s->pair_order, n, sizeof(*s->pair_order), cmp_pair_key);
    return 0;
}

/* The first of s->pair_order at or after (space, src, dst). */
static size_t pairs_lower(const desync_state *s, uint64_t space, int32_t src, int32_t dst)
{
    size_t lo = 0, hi = tft_u64map_count(&s->pairs);
    pair_key want = {space, src, dst, 0, NULL};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_pair_key(&s->pair_order[mid], &want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* What the peer of receive o sent it instead, into buf: the counters of
 * (space, peer, me) only, at most DESYNC_INSTEAD_SCAN of them. */
static void recv_instead(const desync_state *s, const p2p_open *o, int pw, char *buf, size_t len)
{
    uint32_t same = 0, done = 0;
    const pair_ent *other = NULL, *mine = NULL;
    size_t npairs = tft_u64map_count(&s->pairs);
    size_t from = s->pair_order ? pairs_lower(s, o->space, o->peer, o->me) : npairs;
    for (size_t k = from; k < npairs && k < from + DESYNC_INSTEAD_SCAN; k++) {
        const pair_ent *p = s->pair_order[k].p;
        if (p->space != o->space || p->src != o->peer || p->dst != o->me)
            break;
        if (tag_match(o->tag, p->tag)) {
            same += p->sends;
            done += p->done;
            if (p->sends)
                mine = p;
        } else if (p->sends > p->done && !other) {
            other = p;
        }
    }
    if (other)
        snprintf(buf, len, "rank %d sent it %" PRIu64 " x %s with tag %d", pw, other->last_count,
                 tft_dtype_name(other->last_dtype), (int)other->tag);
    else if (mine && mine->last_count != o->count)
        snprintf(buf, len, "rank %d's last message with tag %d had %" PRIu64 " elements where this receive posted %"
                 PRIu64, pw, (int)mine->tag, mine->last_count, o->count);
    else if (same)
        snprintf(buf, len, "rank %d sent it nothing more (%u message%s with that tag, %u received)", pw, same,
                 same > 1 ? "s" : "", done);
    else
        snprintf(buf, len, "rank %d sent it nothing", pw);
}

/* What the peer of send o did instead, into buf. */
static void send_instead(const desync_state *s, int pi, const p2p_open *o, int me_w, int pw, char *buf, size_t len)
{
    const p2p_rank *r = &s->open[pi];
    for (size_t k = 0; k < r->n; k++) {
        const p2p_open *x = &r->v[k];
        if (x->space == o->space && x->type == TFT_COLL_RECV && x->peer == o->me && !tag_match(x->tag, o->tag)) {
            snprintf(buf, len, "rank %d posted no matching receive (it waits for tag %d from rank %d)", pw,
                     (int)x->tag, me_w);
            return;
        }
    }
    snprintf(buf, len, "rank %d posted no matching receive", pw);
}

/* The DS_P2P finding of rank index i, blocked in open call o. */
static void desync_p2p_report(desync_state *s, int i, const p2p_open *o, const int *blocked, found *f)
{
    int me_w = desync_rank_id(s, i), pw = o->peer >= 0 ? p2p_world(s, o->space, o->peer) : -1;
    int pi = pw >= 0 ? desync_rank_index(s, pw) : -1;
    const comm_def *def = desync_def_of_p2p(s, o->space);
    desync_finding d;
    memset(&d, 0, sizeof(d));
    d.comm = def ? def->id : o->space;
    d.coll_seq = o->q;
    d.step = o->step;
    d.seq = o->seq;
    d.kind = DS_P2P;
    d.peer = pw;
    d.tag = o->tag;
    desync_add_rank(&d, me_w);
    char who[40], tag[24], instead[200], state[200] = "", st[32];
    bool recv = o->type == TFT_COLL_RECV;
    if (pw >= 0)
        snprintf(who, sizeof(who), "rank %d", pw);
    else
        snprintf(who, sizeof(who), o->peer < 0 ? "any rank" : "communicator rank %d", (int)o->peer);
    if (o->tag == TFT_TAG_ANY)
        snprintf(tag, sizeof(tag), "any tag");
    else
        snprintf(tag, sizeof(tag), "tag %d", (int)o->tag);
    if (pi < 0)
        snprintf(instead, sizeof(instead), "%s", o->peer < 0 ? "no rank sent it a matching message"
                                                             : "the peer's records are not in the trace");
    else if (recv)
        recv_instead(s, o, pw, instead, sizeof(instead));
    else
        send_instead(s, pi, o, me_w, pw, instead, sizeof(instead));
    if (pi >= 0)
        peer_state(s, pi, blocked, state, sizeof(state));
    snprintf(d.detail, sizeof(d.detail), "rank %d never completed %s %s %s (%s, %" PRIu64 " x %s) on communicator "
             PH "%016" PRIx64 " (%s): ", me_w, desync_str_of(s, i, o->name), recv ? "from" : "to", who, tag, o->count,
             tft_dtype_name(o->dtype), d.comm, desync_step_text(o->step, st, sizeof(st)));
    desync_str_append(d.detail, sizeof(d.detail), instead);
    desync_str_append(d.detail, sizeof(d.detail), state);
    memset(s->inv_tmp, 0, (size_t)s->nranks);
    memset(s->miss_tmp, 0, (size_t)s->nranks);
    s->inv_tmp[i] = s->miss_tmp[i] = 1;
    if (pi >= 0)
        s->inv_tmp[pi] = 1;
    desync_found_set(s, f, &d, NULL);
    f->peer_idx = pi;
}

/* The end of the trace: every rank blocked in point-to-point. */
static int desync_p2p_judge(desync_state *s)
{
    int n = s->nranks;
    int *blocked = malloc((size_t)n * sizeof(*blocked));
    s->p2p = calloc((size_t)n, sizeof(*s->p2p));
    if (!blocked || !s->p2p) {
        free(blocked);
        return -ENOMEM;
    }
    p2p_sums ps = {0};
    desync_ix_init(&ps.ix);
    int e = 0;
    for (int i = 0; !e && i < n; i++) { /* the calls judged, and the sums they need */
        p2p_rank *r = &s->open[i];
        if (r->ngone && desync_open_compact(r) < 0)
            r->overflow = true;
        for (size_t k = 0; !e && !r->overflow && !s->pairs_overflow && k < r->n && k < DESYNC_OPEN_JUDGED; k++)
            e = p2p_ask(&ps, &r->v[k]);
    }
    if (!e) {
        p2p_fill(s, &ps);
        e = desync_pairs_sort(s);
    }
    for (int i = 0; !e && i < n; i++)
        blocked[i] = p2p_blocked(s, &ps, i);
    for (int i = 0; !e && i < n; i++)
        if (blocked[i] >= 0 && !desync_send_peer_stuck(s, i, blocked[i], blocked))
            blocked[i] = -1;
    for (int i = 0; !e && i < n; i++)
        if (blocked[i] >= 0)
            desync_p2p_report(s, i, &s->open[i].v[blocked[i]], blocked, &s->p2p[s->np2p++]);
    free(blocked);
    free(ps.q);
    tft_u64map_free(&ps.ix);
    return e;
}

/* ---- parameters --------------------------------------------------------- */

static int cmp_param_fp(const void *a, const void *b)
{
    const param_fp *x = a, *y = b;
    if (x->param != y->param)
        return x->param < y->param ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The step's parameters in the order they first appeared, each over its
 * ranks in rank file order: the first whose fingerprints differ is the
 * finding (the first rank holding it is the reference). */
static void desync_params_judge(desync_state *s)
{
    if (s->nfps > 1)
        qsort(s->fps, s->nfps, sizeof(*s->fps), cmp_param_fp);
    desync_finding *d = &s->param_finding;
    for (size_t a = 0; a < s->nfps && !s->param_done;) {
        size_t b = a + 1;
        while (b < s->nfps && s->fps[b].param == s->fps[a].param)
            b++;
        const param_fp *ref = &s->fps[a];
        for (size_t k = a + 1; k < b; k++) {
            const param_fp *x = &s->fps[k];
            if (x->fp == ref->fp)
                continue;
            if (!s->param_done) {
                memset(d, 0, sizeof(*d));
                d->step = s->param_step;
                d->seq = TFT_SEQ_NONE;
                d->kind = DS_VALUES;
                d->peer = -1;
                d->tag = TFT_TAG_NONE;
                snprintf(d->detail, sizeof(d->detail), "%.96s differs across ranks at step %" PRId64
                         ": rank %d fp=%016" PRIx64 ", rank %d fp=%016" PRIx64,
                         desync_str_of(s, ref->rank, s->params[ref->param].name), s->param_step,
                         desync_rank_id(s, ref->rank), ref->fp, desync_rank_id(s, x->rank), x->fp);
                s->param_done = true;
            }
            desync_add_rank(d, desync_rank_id(s, x->rank));
        }
        a = b;
    }
    s->nparams = s->nfps = 0;
    tft_u64map_clear(&s->param_ix);
    tft_u64map_clear(&s->occ_ix);
}

typedef struct occ_key {
    const desync_state *s;
    uint64_t name;
    uint32_t occ_or_rank;
} occ_key;

static bool param_eq(const void *ctx, const void *val)
{
    const occ_key *k = ctx;
    const param_entry *p = &k->s->params[*(const uint32_t *)val];
    return p->name == k->name && p->occ == k->occ_or_rank;
}

/* occ_ix values index fps: the rank's latest record of the name (its
 * param's occ + 1 is the rank's count of that name so far). */
static bool occ_eq(const void *ctx, const void *val)
{
    const occ_key *k = ctx;
    const param_fp *f = &k->s->fps[*(const uint32_t *)val];
    return k->s->params[f->param].name == k->name && (uint32_t)f->rank == k->occ_or_rank;
}

/* Notes rank i's fingerprint of (name, its next occurrence) in this step:
 * O(1) per record. Past DESYNC_MAX_PARAM_FPS records the step's
 * remaining parameters are not compared. */
static int param_note(desync_state *s, int i, uint64_t name, uint64_t fp)
{
    if (s->nfps >= DESYNC_MAX_PARAM_FPS)
        return 0;
    if (tft_u64map_reserve(&s->occ_ix) < 0 || tft_u64map_reserve(&s->param_ix) < 0)
        return -ENOMEM;
    occ_key ok = {s, name, (uint32_t)i};
    uint64_t hk = tft_u64map_hash2(name, (uint64_t)(uint32_t)i);
    const uint32_t *last = tft_u64map_find(&s->occ_ix, hk, occ_eq, &ok);
    uint32_t occ = last ? s->params[s->fps[*last].param].occ + 1 : 0;
    occ_key pk = {s, name, occ};
    void *pv;
    if (tft_u64map_insert(&s->param_ix, tft_u64map_hash2(name, 0x100000000ull | occ), param_eq, &pk, &pv) == 1) {
        if (s->nparams == s->params_cap) {
            size_t ncap = s->params_cap ? s->params_cap * 2 : 64;
            param_entry *p = realloc(s->params, ncap * sizeof(*p));
            if (!p) {
                tft_u64map_remove(&s->param_ix, pv);
                return -ENOMEM;
            }
            s->params = p;
            s->params_cap = ncap;
        }
        s->params[s->nparams] = (param_entry){.name = name, .occ = occ};
        *(uint32_t *)pv = (uint32_t)s->nparams++;
    }
    uint32_t param = *(uint32_t *)pv;
    if (s->nfps == s->fps_cap) {
        size_t ncap = s->fps_cap ? s->fps_cap * 2 : 256;
        param_fp *f = realloc(s->fps, ncap * sizeof(*f));
        if (!f)
            return -ENOMEM;
        s->fps = f;
        s->fps_cap = ncap;
    }
    s->fps[s->nfps] = (param_fp){.param = param, .rank = i, .fp = fp};
    void *ov;
    tft_u64map_insert(&s->occ_ix, hk, occ_eq, &ok, &ov); /* room reserved above */
    *(uint32_t *)ov = (uint32_t)s->nfps++;
    return 0;
}

/* A "param.*" tensor of a step with statistics (the extract keeps only those). */
static int desync_on_param(desync_state *s, int i, int64_t step, uint64_t name, uint64_t fp)
{
    if (s->param_done)
        return 0;
    if (step != s->param_step) {
        desync_params_judge(s);
        s->param_step = step;
        if (s->param_done)
            return 0;
    }
    return param_note(s, i, name, fp);
}

/* ---- driver ------------------------------------------------------------- */

/* Judges what is still open at the end: hangs (echoes kept apart), then
 * the parameters, then point-to-point. */
static int final_sweep(desync_state *s)
{
    int n = s->nranks;
    s->first_stuck = calloc((size_t)n, sizeof(*s->first_stuck));
    s->last_stuck = calloc((size_t)n, sizeof(*s->last_stuck));
    if (!s->first_stuck || !s->last_stuck)
        return -ENOMEM;
    for (int k = 0; k < s->ncomms; k++) {
        comm_state *c = &s->comms[k];
        for (uint64_t q = c->base; q < c->top; q++) {
            if (!desync_entry_at(c, q)->used)
                continue;
            const coll_slot *sl = desync_entry_dense(s, c, q);
            for (int m = 0; m < c->width; m++) {
                int i = c->order[m];
                if (!sl[i].entered || sl[i].exited)
                    continue;
                stuck_at cand = {true, sl[i].step, sl[i].seq, sl[i].t_enter, c->comm, q, sl[i].name};
                stuck_at *f = &s->first_stuck[i], *l = &s->last_stuck[i];
                if (!f->valid || desync_stuck_before(&cand, f->step, f->seq, f->t_enter, true))
                    *f = cand;
                if (!l->valid || desync_stuck_before(l, cand.step, cand.seq, cand.t_enter, true))
                    *l = cand;
            }
        }
    }
    for (int k = 0; k < s->ncomms; k++) {
        comm_state *c = &s->comms[k];
        for (uint64_t q = c->base; q < c->top; q++)
            if (desync_entry_at(c, q)->used)
                desync_entry_check(s, c, q, true, s->first_stuck);
    }
    desync_params_judge(s);
    return desync_p2p_judge(s);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Replaces every PH<16 hex digits> in d->detail by that communicator's
 * name; fills d->comm_name and d->members. */
static void desync_names_fill(const desync_state *s, desync_finding *d)
{
    char out[sizeof(d->detail)];
    size_t o = 0;
    for (const char *p = d->detail; *p && o + 1 < sizeof(out);) {
        uint64_t id = 0;
        int k = 0;
        while (*p == PH[0] && k < 16 && hexval(p[1 + k]) >= 0)
            id = id << 4 | (uint64_t)hexval(p[1 + k++]);
        if (*p != PH[0] || k < 16) {
            out[o++] = *p++;
            continue;
        }
        char nm[64];
        def_name(desync_def_find(s, id), id, nm, sizeof(nm));
        int w = snprintf(out + o, sizeof(out) - o, "%s", nm);
        o = w < 0 ? o : o + (size_t)w < sizeof(out) ? o + (size_t)w : sizeof(out) - 1;
        p += 17;
    }
    out[o] = '\0';
    memcpy(d->detail, out, o + 1);
    const comm_def *def = d->comm ? desync_def_find(s, d->comm) : NULL;
    d->comm_name[0] = '\0';
    if (d->comm)
        def_name(def, d->comm, d->comm_name, sizeof(d->comm_name));
    d->nmembers = 0;
    if (!def || !def->mem || d->comm_name[0] != '{')
        return;
    d->nmembers = def->size;
    for (int k = 0; k < def->size && k < DESYNC_MEMBERS; k++)
        d->members[k] = def->mem[k];
}

/* Program order: step, op seq (unknown last), then a fixed order. */
static int key_cmp(const desync_finding *a, const desync_finding *b)
{
    int64_t sa = a->seq == TFT_SEQ_NONE ? INT64_MAX : a->seq, sb = b->seq == TFT_SEQ_NONE ? INT64_MAX : b->seq;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->coll_seq != b->coll_seq)
        return a->coll_seq < b->coll_seq ? -1 : 1;
    return a->kind - b->kind;
}

/* Mismatches and blocked point-to-point calls can make ranks hang. */
static bool cause_kind(int kind)
{
    return kind == DS_TYPE || kind == DS_COUNT || kind == DS_DTYPE || kind == DS_OP || kind == DS_ROOT ||
           kind == DS_P2P;
}

/* The earliest finding of all[0, n) that explains f: for a hang, one its
 * missing ranks took part in (a mismatch no later than its step, or a
 * blocked call); for a blocked call, one its peer took part in (a
 * mismatch, or the peer's own blocked call). NULL none. */
static found *cause_of(const desync_state *s, found **all, int n, const found *f)
{
    if ((f->d.kind != DS_MISSING && f->d.kind != DS_P2P) || !f->miss)
        return NULL;
    found *best = NULL;
    for (int k = 0; k < n; k++) {
        found *g = all[k];
        if (g == f || !g->inv || !cause_kind(g->d.kind))
            continue;
        bool hit = false;
        if (f->d.kind == DS_P2P) {
            hit = f->peer_idx >= 0 && (g->d.kind == DS_P2P ? g->miss[f->peer_idx] : g->inv[f->peer_idx]);
            hit &= g->d.kind == DS_P2P || g->d.step <= f->d.step;
        } else {
            for (int i = 0; !hit && i < s->nranks; i++)
                hit = f->miss[i] && g->inv[i];
            hit &= g->d.kind == DS_P2P || g->d.step <= f->d.step;
        }
        if (hit && (!best || key_cmp(&g->d, &best->d) < 0))
            best = g;
    }
    return best;
}

/* Links every finding to its first cause: causes found, cycles (ranks
 * blocked on each other) broken at their earliest member, chains
 * followed to their root. */
static void causes_link(const desync_state *s, found **all, int n)
{
    for (int k = 0; k < n; k++)
        all[k]->cause = cause_of(s, all, n, all[k]);
    for (int k = 0; k < n; k++) {
        found *f = all[k], *slow = f, *fast = f;
        for (int step = 0; step <= n && fast && fast->cause; step++) {
            slow = slow->cause;
            fast = fast->cause->cause;
            if (slow != fast || !fast)
                continue;
            found *m = slow, *x = slow->cause; /* a cycle through slow: break at its earliest */
            while (x != slow) {
                if (key_cmp(&x->d, &m->d) < 0)
                    m = x;
                x = x->cause;
            }
            m->cause = NULL;
            break;
        }
    }
    for (int k = 0; k < n; k++) {
        found *r = all[k]->cause;
        for (int step = 0; r && r->cause && step < n; step++)
            r = r->cause;
        all[k]->cause = r;
    }
}

/* Causes first (in program order), each followed by what it caused;
 * stragglers last. */
static int cmp_found(const void *pa, const void *pb)
{
    const found *a = *(found *const *)pa, *b = *(found *const *)pb;
    int sa = a->d.kind == DS_STRAGGLER, sb = b->d.kind == DS_STRAGGLER;
    if (sa != sb)
        return sa - sb;
    const found *ra = a->cause ? a->cause : a, *rb = b->cause ? b->cause : b;
    if (ra != rb) {
        int c = key_cmp(&ra->d, &rb->d);
        return c ? c : ra < rb ? -1 : 1;
    }
    if (!a->cause != !b->cause)
        return a->cause ? 1 : -1;
    return key_cmp(&a->d, &b->d);
}

/* "; then ranks ... waited in MPI_..." after each cause: its first hang. */
static void then_append(found **list, int n)
{
    for (int k = 0; k < n; k++) {
        found *f = list[k];
        if (!f->cause || f->d.kind != DS_MISSING || !f->then[0] || strstr(f->cause->d.detail, "; then "))
            continue;
        desync_finding *d = &f->cause->d;
        desync_str_append(d->detail, sizeof(d->detail), "; then ");
        desync_str_append(d->detail, sizeof(d->detail), f->then);
    }
}

static int desync_collect(desync_state *s, desync_finding *out, int max)
{
    size_t cap = (size_t)s->ncomms * 3 + (size_t)s->np2p + 1, n = 0, nw = 0;
    found **all = malloc(cap * sizeof(*all));
    found *wrap = calloc((size_t)s->ncomms + 1, sizeof(*wrap)); /* stragglers, parameters */
    if (!all || !wrap) {
        free(all);
        free(wrap);
        return -ENOMEM;
    }
    for (int k = 0; k < s->ncomms; k++) {
        comm_state *c = &s->comms[k];
        if (c->fin.valid)
            all[n++] = &c->fin;
        if (c->echo.valid && !(c->fin.valid && c->fin.d.coll_seq <= c->echo.d.coll_seq))
            all[n++] = &c->echo;
        if (c->straggled) {
            wrap[nw] = (found){.valid = true, .d = c->straggler, .peer_idx = -1};
            all[n++] = &wrap[nw++];
        }
    }
    if (s->param_done) {
        wrap[nw] = (found){.valid = true, .d = s->param_finding, .peer_idx = -1};
        all[n++] = &wrap[nw++];
    }
    for (int k = 0; k < s->np2p; k++)
        all[n++] = &s->p2p[k];
    for (size_t k = 0; k < n; k++)
        desync_names_fill(s, &all[k]->d);
    causes_link(s, all, (int)n);
    size_t m = 0; /* an echo is kept only as the effect of a mismatch or a blocked call */
    for (size_t k = 0; k < n; k++)
        if (!all[k]->echo || all[k]->cause)
            all[m++] = all[k];
    qsort(all, m, sizeof(*all), cmp_found);
    then_append(all, (int)m);
    for (size_t k = 0; k < m; k++)
        all[k]->d.id = (uint32_t)k + 1;
    for (size_t k = 0; k < m; k++)
        all[k]->d.cause = all[k]->cause ? all[k]->cause->d.id : 0;
    int nout = m < (size_t)max ? (int)m : max;
    for (int k = 0; k < nout; k++)
        out[k] = all[k]->d;
    free(all);
    free(wrap);
    return nout;
}

static bool same_host(tft_trace *t, int n)
{
    const tft_file_info *a = tft_trace_file_info(t, 0);
    for (int i = 1; i < n; i++) {
        const tft_file_info *b = tft_trace_file_info(t, i);
        if (!a || !b || strncmp(a->host, b->host, sizeof(a->host)) != 0)
            return false;
    }
    return true;
}

/* For each rank file, the first rank file of its host (-1 unknown): ranks
 * on one host compare on its monotonic clock (NULL on failure: then they
 * compare as ranks of several hosts). Quadratic only in the hosts seen. */
static int *hosts_of(tft_trace *t, int n)
{
    int *h = malloc((size_t)n * sizeof(*h)), *first = malloc((size_t)n * sizeof(*first)), nh = 0;
    for (int i = 0; h && first && i < n; i++) {
        const tft_file_info *b = tft_trace_file_info(t, i);
        h[i] = -1;
        for (int k = 0; b && k < nh && h[i] < 0; k++) {
            const tft_file_info *a = tft_trace_file_info(t, first[k]);
            if (a && strncmp(a->host, b->host, sizeof(a->host)) == 0)
                h[i] = first[k];
        }
        if (b && h[i] < 0)
            h[i] = first[nh++] = i;
    }
    bool ok = h && first;
    free(first);
    if (!ok) {
        free(h);
        return NULL;
    }
    return h;
}

static void found_free(found *f)
{
    free(f->inv);
    free(f->miss);
}

static void state_free(desync_state *s)
{
    for (int k = 0; k < s->ncomms; k++) {
        free(s->comms[k].win);
        free(s->comms[k].slots);
        free(s->comms[k].member);
        free(s->comms[k].local);
        free(s->comms[k].global);
        free(s->comms[k].order);
        found_free(&s->comms[k].fin);
        found_free(&s->comms[k].echo);
    }
    free(s->comms);
    for (int k = 0; k < s->ndefs; k++)
        free(s->defs[k].mem);
    free(s->defs);
    for (int i = 0; s->open && i < s->nranks; i++) {
        free(s->open[i].v);
        tft_u64map_free(&s->open[i].ix);
    }
    free(s->open);
    tft_u64map_free(&s->pairs);
    free(s->pair_order);
    for (int k = 0; k < s->np2p; k++)
        found_free(&s->p2p[k]);
    free(s->p2p);
    free(s->first_stuck);
    free(s->last_stuck);
    tft_u64map_free(&s->strs);
    free(s->pool);
    free(s->params);
    free(s->fps);
    tft_u64map_free(&s->param_ix);
    tft_u64map_free(&s->occ_ix);
    free(s->ibuf);
    free(s->ubuf);
    free(s->adj);
    free(s->clk);
    free(s->host_of);
    if (s->dense)
        free(s->dense->v);
    free(s->dense);
    free(s->inv_tmp);
    free(s->miss_tmp);
}

/* One entry of rank file ri's extract, in the order of the old merge. */
static int on_entry(desync_state *s, int ri, const spill_ent *x)
{
    const void *body = x + 1;
    switch (x->kind) {
    case SPILL_STR:
        return desync_str_add(s, x->name, body, x->fp < x->len - sizeof(*x) ? (size_t)x->fp : 0);
    case SPILL_PARAM:
        return desync_on_param(s, ri, x->step, x->name, x->fp);
    case SPILL_COMM:
        desync_on_comm(s, ri, body);
        return 0;
    case SPILL_COLL: {
        const tft_rec_collective *cr = body;
        if (cr->type == TFT_COLL_SEND || cr->type == TFT_COLL_RECV) {
            desync_on_p2p(s, ri, cr, x->step);
            return 0;
        }
        s->cur_has_fp = x->has_fp;
        s->cur_fp = x->fp;
        return desync_on_collective(s, ri, cr, x->step);
    }
    case SPILL_CLOCK:
        if (s->clk && x->len >= sizeof(*x) + sizeof(core_clock_pair))
            memcpy(&s->clk[ri], body, sizeof(core_clock_pair));
        return 0;
    default:
        return 0;
    }
}

int desync_find_spilled(tft_trace *t, diff_spill *sp, desync_finding *out, int max)
{
    if (!t || !sp || (max > 0 && !out))
        return -EINVAL;
    int n = tft_trace_nranks(t);
    if (n < 2)
        return 0;
    desync_state s = {.t = t, .nranks = n, .one_host = same_host(t, n), .param_step = TFT_STEP_NONE,
                      .world = tft_string_id("MPI_COMM_WORLD", 14)};
    s.ibuf = calloc((size_t)n * 5, sizeof(*s.ibuf));
    s.ubuf = calloc((size_t)n, sizeof(*s.ubuf));
    s.adj = calloc((size_t)n, sizeof(*s.adj));
    s.aligned = !s.one_host && s.adj && core_clock_align(t, n, s.adj, &s.clock_err);
    s.clk = s.one_host || s.aligned ? NULL : calloc((size_t)n, sizeof(*s.clk));
    s.host_of = s.clk ? hosts_of(t, n) : NULL;
    for (int i = 0; s.clk && i < n; i++) {
        const tft_file_info *fi = tft_trace_file_info(t, i);
        if (fi)
            core_clock_pair_start(&s.clk[i], fi);
        else
            s.clk[i].ntp = TFT_NTP_UNKNOWN;
    }
    s.open = calloc((size_t)n, sizeof(*s.open));
    for (int i = 0; s.open && i < n; i++)
        desync_ix_init(&s.open[i].ix);
    desync_ix_init(&s.param_ix);
    desync_ix_init(&s.occ_ix);
    tft_u64map_init(&s.strs, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .max_n = 1 << 20});
    tft_u64map_init(&s.pairs, &(tft_u64map_opts){.vsize = sizeof(pair_ent), .max_n = DESYNC_MAX_PAIRS, .min_cap = 256,
                                                 .hashed = true});
    s.inv_tmp = calloc((size_t)n, 1);
    s.miss_tmp = calloc((size_t)n, 1);
    s.dense = calloc(1, sizeof(*s.dense));
    if (s.dense) {
        s.dense->owner = -1;
        s.dense->v = calloc((size_t)n, sizeof(*s.dense->v));
    }
    bool ok = s.ibuf && s.ubuf && s.open && s.inv_tmp && s.miss_tmp && s.dense && s.dense->v;
    core_spill_merge *m = ok ? core_spill_merge_open(sp) : NULL;
    int e = m ? 0 : (ok ? -errno : -ENOMEM);
    const spill_ent *x;
    int ri;
    while (e == 0 && (e = core_spill_merge_next(m, &x, &ri)) == 1)
        e = ri >= 0 && ri < n ? on_entry(&s, ri, x) : 0;
    if (e == 0)
        e = final_sweep(&s);
    if (e == 0)
        e = desync_collect(&s, out, max > 0 ? max : 0);
    core_spill_merge_close(m);
    state_free(&s);
    return e;
}

/* Extracts rank file i of the trace (one reader open per thread). */
static int extract_one(void *ctx, int i, int worker)
{
    (void)worker;
    void **a = ctx;
    tft_trace *t = a[0];
    tft_reader *r = tft_trace_reader(t, i);
    int e = r ? core_spill_extract(a[1], r, i) : errno ? -errno : -EIO;
    tft_trace_release(t, i);
    return e;
}

int desync_find(tft_trace *t, desync_finding *out, int max)
{
    if (!t || (max > 0 && !out))
        return -EINVAL;
    int n = tft_trace_nranks(t);
    if (n < 2)
        return 0;
    diff_spill *sp = core_spill_new(n);
    if (!sp)
        return -errno;
    void *ctx[2] = {t, sp};
    int e = core_pool_run(n, core_pool_width(), extract_one, ctx);
    if (!e)
        e = desync_find_spilled(t, sp, out, max);
    core_spill_free(sp);
    return e;
}

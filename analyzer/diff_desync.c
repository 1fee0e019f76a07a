/*
 * diff_desync.c — desyncs across the ranks of one trace.
 *
 * Collectives: the ranks are merged in (step, seq) order and every
 * COLLECTIVE record (ENTER or EXIT) lands in the entry of its (communicator,
 * coll_seq). An entry is checked once every member of the communicator has
 * left it (type, count, dtype, reduce op, root, the call's name — MPI does
 * not match MPI_Allreduce with MPI_Iallreduce —, result fingerprints of
 * all-reduce and broadcast, enter-time stragglers), and at the end of the
 * trace when some never did: members with no record of it are missing (the
 * hang). Per communicator only the first problem (lowest coll_seq) is kept;
 * a hang's echo on another communicator (a rank "missing" there because it
 * is stuck in an earlier collective here) is dropped.
 *
 * Parameters: tensors named "param.*" are replicated under data
 * parallelism; within each step their fingerprints at equal (name,
 * occurrence) must agree across ranks. The first step where they do not is
 * reported as DS_VALUES with comm 0 and coll_seq 0.
 *
 * Memory: per communicator a window of the entries not yet complete on all
 * ranks (bounded by DESYNC_WINDOW_MAX; beyond it the oldest entry is
 * judged as if the trace ended), per rank the last few tensor fingerprints,
 * and one step's parameter fingerprints.
 *
 * Non-blocking collectives need nothing special: the ENTER is written at
 * the call and the EXIT at the completion (MPI_Wait...), possibly after
 * later calls' records; entries are keyed by coll_seq, not by order.
 *
 * Limits: point-to-point records (send/recv) take no part: a Send on one
 * rank and a Recv on another are a legitimate difference. The MPI
 * interposers give them their own sequence space ("<communicator>:p2p", see
 * interpose_mpi.c), so they never shift a communicator's collective
 * sequence; a program recording send/recv itself with tft_coll_enter on a
 * communicator's id does shift it. Sends are not paired with receives, and
 * a rank stuck in a receive is not reported (only the collectives its
 * peers then wait for in vain). Straggler detection and
 * the hang-echo filter compare CLOCK_MONOTONIC enter times and are used
 * only when all ranks ran on one host.
 */
#include "diff.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DESYNC_WINDOW_MAX = 4096,  /* open entries per communicator */
    DESYNC_RECENT_TENSORS = 16,/* per rank: fingerprints kept for EXIT results */
    DESYNC_SPREADS = 32,       /* per communicator: enter spreads kept */
    DESYNC_SPREADS_MIN = 8,    /* spreads needed before judging a straggler */
    DESYNC_MAX_COMMS = 4096,
};
#define STRAGGLER_NS 1000000000ull /* a straggler is > 1 s behind ... */
#define STRAGGLER_FACTOR 10        /* ... and > 10x the usual spread */

static const char *const desync_names[] = {"missing", "type", "count", "dtype", "op", "root", "values", "straggler"};

const char *desync_kind_name(int kind)
{
    if (kind < 0 || kind >= (int)(sizeof(desync_names) / sizeof(desync_names[0])))
        return "?";
    return desync_names[kind];
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
    uint64_t fp;        /* result fingerprint (all-reduce, broadcast) */
} coll_slot;

typedef struct coll_entry {
    bool used;
    uint64_t coll_seq;
    int nexit;          /* ranks that left it */
} coll_entry;

typedef struct comm_state {
    uint64_t comm;
    uint64_t base, top;       /* open coll_seq window [base, top) */
    size_t cap;               /* window slots, power of two */
    coll_entry *win;          /* cap entries: coll_seq q at q & (cap-1) */
    coll_slot *slots;         /* cap * nranks */
    uint8_t *member;          /* nranks: rank index has records on it */
    int size;                 /* communicator size from the records */
    bool found;
    diff_desync finding;      /* first problem (lowest coll_seq) */
    bool straggled;
    diff_desync straggler;
    uint64_t spreads[DESYNC_SPREADS];
    int nspreads;
} comm_state;

typedef struct recent_tensor {
    uint64_t id, fp;
    bool valid;
} recent_tensor;

/* One step's parameter fingerprints. */
typedef struct param_entry {
    uint64_t name;
    uint32_t occ;
    char text[96];
} param_entry;

typedef struct desync_state {
    tft_trace *t;
    int nranks;
    bool one_host;
    comm_state *comms;
    int ncomms, comms_cap;
    recent_tensor *recent; /* nranks * DESYNC_RECENT_TENSORS */
    unsigned *recent_pos;  /* nranks */
    /* parameters of param_step */
    int64_t param_step;
    bool param_done;       /* a parameter finding exists: stop looking */
    diff_desync param_finding;
    param_entry *params;
    size_t nparams, params_cap;
    uint64_t *param_fp;    /* params_cap * nranks */
    uint8_t *param_have;   /* params_cap * nranks */
    int *ibuf;             /* scratch: 5 * nranks rank indices */
    uint64_t *ubuf;        /* scratch: nranks values */
} desync_state;

/* ---- helpers ------------------------------------------------------------ */

static int rank_id(const desync_state *s, int i) { return tft_trace_rank_id(s->t, i); }

static const char *str_of(const desync_state *s, int i, uint64_t id)
{
    const char *txt = tft_reader_string(tft_trace_reader(s->t, i), id);
    return txt ? txt : "?";
}

/* "step N", or "no step" for records outside any step. */
static const char *step_text(int64_t step, char *buf, size_t len)
{
    if (step == TFT_STEP_NONE)
        snprintf(buf, len, "no step");
    else
        snprintf(buf, len, "step %" PRId64, step);
    return buf;
}

static void add_rank(diff_desync *d, int rank)
{
    if (d->nranks < (int)(sizeof(d->ranks) / sizeof(d->ranks[0])))
        d->ranks[d->nranks++] = rank;
}

static void ranks_text(const desync_state *s, const int *idx, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && o < len; k++) {
        int w = snprintf(buf + o, len - o, "%s%d", k ? "," : "", rank_id(s, idx[k]));
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

/* Rank indices in idx[0..n) whose value differs from the majority (or from
 * the first when there is none); returns how many, written to fault, and in
 * *ref a rank index holding the reference value. */
static int minority(const uint64_t *val, const int *idx, int n, int *fault, int *ref)
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
    if (best_cnt * 2 <= n)
        best = 0;
    *ref = idx[best];
    int nf = 0;
    for (int a = 0; a < n; a++)
        if (val[a] != val[best])
            fault[nf++] = idx[a];
    return nf;
}

/* ---- communicators ------------------------------------------------------ */

static comm_state *comm_get(desync_state *s, uint64_t comm)
{
    for (int k = 0; k < s->ncomms; k++)
        if (s->comms[k].comm == comm)
            return &s->comms[k];
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
    comm_state *c = &s->comms[s->ncomms];
    memset(c, 0, sizeof(*c));
    c->comm = comm;
    c->member = calloc((size_t)s->nranks, 1);
    if (!c->member)
        return NULL;
    s->ncomms++;
    return c;
}

static coll_entry *entry_at(comm_state *c, uint64_t q) { return &c->win[q & (c->cap - 1)]; }

static coll_slot *slots_at(const desync_state *s, comm_state *c, uint64_t q)
{
    return &c->slots[(size_t)(q & (c->cap - 1)) * (size_t)s->nranks];
}

static int window_grow(desync_state *s, comm_state *c)
{
    size_t ncap = c->cap ? c->cap * 2 : 16;
    coll_entry *nw = calloc(ncap, sizeof(*nw));
    coll_slot *ns = calloc(ncap * (size_t)s->nranks, sizeof(*ns));
    if (!nw || !ns) {
        free(nw);
        free(ns);
        return -ENOMEM;
    }
    for (uint64_t q = c->base; q < c->top; q++) {
        nw[q & (ncap - 1)] = *entry_at(c, q);
        memcpy(&ns[(size_t)(q & (ncap - 1)) * (size_t)s->nranks], slots_at(s, c, q),
               (size_t)s->nranks * sizeof(*ns));
    }
    free(c->win);
    free(c->slots);
    c->win = nw;
    c->slots = ns;
    c->cap = ncap;
    return 0;
}

/* Keeps the first problem of a communicator: the one with the lowest coll_seq. */
static void comm_report(comm_state *c, const diff_desync *d)
{
    if (c->found && c->finding.coll_seq <= d->coll_seq)
        return;
    c->found = true;
    c->finding = *d;
}

static void desync_init(diff_desync *d, const comm_state *c, uint64_t q, int64_t step, int kind)
{
    memset(d, 0, sizeof(*d));
    d->comm = c->comm;
    d->coll_seq = q;
    d->step = step;
    d->kind = kind;
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

/* Field `kind` of every present slot agrees? Reports the minority otherwise. */
static bool check_field(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                        const int *idx, int n, int kind)
{
    uint64_t *val = s->ubuf;
    for (int k = 0; k < n; k++) {
        const coll_slot *x = &sl[idx[k]];
        val[k] = kind == DS_TYPE ? x->type : kind == DS_COUNT ? x->count : kind == DS_DTYPE ? x->dtype
               : kind == DS_OP ? x->redop : kind == FIELD_NAME ? x->name : (uint64_t)(int64_t)x->root;
    }
    int *fault = s->ibuf + 4 * (size_t)s->nranks;
    int ref;
    int nf = minority(val, idx, n, fault, &ref);
    if (!nf)
        return true;
    const coll_slot *a = &sl[ref], *b = &sl[fault[0]];
    diff_desync d;
    desync_init(&d, c, q, a->step, kind == FIELD_NAME ? DS_TYPE : kind);
    for (int k = 0; k < nf; k++)
        add_rank(&d, rank_id(s, fault[k]));
    const char *what = kind == DS_TYPE ? "type" : kind == DS_COUNT ? "count" : kind == DS_DTYPE ? "dtype"
                     : kind == DS_OP ? "reduce op" : kind == FIELD_NAME ? "calls" : "root";
    char va[48], vb[48], st[32];
    switch (kind) {
    case FIELD_NAME:
        snprintf(va, sizeof(va), "%s", str_of(s, ref, a->name));
        snprintf(vb, sizeof(vb), "%s", str_of(s, fault[0], b->name));
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
    snprintf(d.detail, sizeof(d.detail), "%s differs at comm %016" PRIx64 " coll_seq %" PRIu64
             " (%s): rank %d %s %s, rank %d %s %s", str_of(s, ref, a->name), c->comm, q,
             step_text(a->step, st, sizeof(st)), rank_id(s, ref), what, va, rank_id(s, fault[0]), what, vb);
    comm_report(c, &d);
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
    int nf = minority(val, idx, n, fault, &ref);
    if (!nf)
        return true;
    const coll_slot *a = &sl[ref];
    diff_desync d;
    char st[32];
    desync_init(&d, c, q, a->step, DS_VALUES);
    for (int k = 0; k < nf; k++)
        add_rank(&d, rank_id(s, fault[k]));
    snprintf(d.detail, sizeof(d.detail), "%s results differ across ranks at comm %016" PRIx64 " coll_seq %" PRIu64
             " (%s): rank %d fp=%016" PRIx64 ", rank %d fp=%016" PRIx64,
             str_of(s, ref, a->name), c->comm, q, step_text(a->step, st, sizeof(st)), rank_id(s, ref), a->fp,
             rank_id(s, fault[0]), sl[fault[0]].fp);
    comm_report(c, &d);
    return false;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The last rank to enter, when it came far later than usual on this comm. */
static void check_straggler(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                            const int *idx, int n)
{
    if (!s->one_host || n < 2)
        return;
    uint64_t *t = s->ubuf;
    int late = idx[0];
    for (int k = 0; k < n; k++) {
        t[k] = sl[idx[k]].t_enter;
        if (!t[k])
            return;
        if (t[k] > sl[late].t_enter)
            late = idx[k];
    }
    qsort(t, (size_t)n, sizeof(t[0]), cmp_u64);
    uint64_t spread = t[n - 1] - t[(n - 1) / 2];
    if (c->nspreads >= DESYNC_SPREADS_MIN && !c->straggled && spread > STRAGGLER_NS) {
        int m = c->nspreads < DESYNC_SPREADS ? c->nspreads : DESYNC_SPREADS;
        uint64_t hist[DESYNC_SPREADS];
        memcpy(hist, c->spreads, (size_t)m * sizeof(hist[0]));
        qsort(hist, (size_t)m, sizeof(hist[0]), cmp_u64);
        if (spread > STRAGGLER_FACTOR * hist[m / 2]) {
            diff_desync *d = &c->straggler;
            desync_init(d, c, q, sl[late].step, DS_STRAGGLER);
            add_rank(d, rank_id(s, late));
            char st[32];
            snprintf(d->detail, sizeof(d->detail), "rank %d entered %s (comm %016" PRIx64 " coll_seq %" PRIu64
                     ", %s) %.3f s after the median rank (usually %.3f ms)", rank_id(s, late),
                     str_of(s, late, sl[late].name), c->comm, q, step_text(sl[late].step, st, sizeof(st)),
                     spread / 1e9, hist[m / 2] / 1e6);
            c->straggled = true;
        }
    }
    c->spreads[c->nspreads++ % DESYNC_SPREADS] = spread;
}

/* Earliest collective rank i is stuck in (entered, never left), from the
 * final sweep; step TFT_STEP_NONE when none. */
typedef struct stuck_at {
    int64_t step;
    int64_t seq;
    uint64_t t_enter;
    uint64_t comm;
} stuck_at;

/* Whether st comes before (step, seq, t_enter) in program order: by step,
 * then by op sequence number (ranks of one SPMD program number their ops
 * alike, and unlike times this holds across hosts and under load), then,
 * without sequence numbers, by enter time on one host. */
static bool stuck_before(const stuck_at *st, int64_t step, int64_t seq, uint64_t t_enter, bool one_host)
{
    if (st->step == TFT_STEP_NONE)
        return false;
    if (st->step != step)
        return st->step < step;
    if (st->seq != TFT_SEQ_NONE && seq != TFT_SEQ_NONE)
        return st->seq < seq;
    return one_host && st->t_enter < t_enter;
}

/* Members of c with no record of entry q: a hang. stuck (may be NULL) tells
 * echoes of a hang elsewhere apart. Returns false when reported. */
static bool check_missing(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                          const stuck_at *stuck)
{
    int n = s->nranks, nmem = 0;
    int *present = s->ibuf + n, *missing = s->ibuf + 2 * (size_t)n, *inside = s->ibuf + 3 * (size_t)n;
    int np = 0, nm = 0, ni = 0;
    for (int i = 0; i < n; i++)
        nmem += c->member[i];
    bool all = nmem < c->size && c->size >= n; /* members not yet seen: everyone is one */
    for (int i = 0; i < n; i++) {
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
    int64_t step = a->step, seq0 = TFT_SEQ_NONE;
    for (int k = 0; k < np; k++) {
        if (sl[present[k]].step < step)
            step = sl[present[k]].step;
        if (sl[present[k]].t_enter && sl[present[k]].t_enter < t0)
            t0 = sl[present[k]].t_enter;
    }
    for (int k = 0; k < np; k++)
        if (sl[present[k]].step == step && sl[present[k]].seq != TFT_SEQ_NONE &&
            (seq0 == TFT_SEQ_NONE || sl[present[k]].seq < seq0))
            seq0 = sl[present[k]].seq;
    if (stuck) {
        int echoes = 0;
        for (int k = 0; k < nm; k++)
            echoes += stuck[missing[k]].comm != c->comm &&
                      stuck_before(&stuck[missing[k]], step, seq0, t0, s->one_host);
        if (echoes == nm)
            return true;
    }
    diff_desync d;
    desync_init(&d, c, q, step, DS_MISSING);
    for (int k = 0; k < nm; k++)
        add_rank(&d, rank_id(s, missing[k]));
    char in_txt[64], miss_txt[48], st[32]; /* the ranks field holds every rank */
    ranks_text(s, missing, nm, miss_txt, sizeof(miss_txt));
    ranks_text(s, ni ? inside : present, ni ? ni : np, in_txt, sizeof(in_txt));
    snprintf(d.detail, sizeof(d.detail), "rank%s %s %s %s (%s %" PRIu64 " x %s, comm %016" PRIx64
             " coll_seq %" PRIu64 ", %s)%s; rank%s %s never entered it", (ni ? ni : np) > 1 ? "s" : "", in_txt,
             ni ? "entered" : "completed", str_of(s, present[0], a->name), tft_coll_type_name(a->type), a->count,
             tft_dtype_name(a->dtype), c->comm, q, step_text(step, st, sizeof(st)), ni ? " and never left it" : "",
             nm > 1 ? "s" : "", miss_txt);
    comm_report(c, &d);
    return false;
}

/* Judges entry q of c: complete (all left it) or final (the trace ended or
 * the window overflowed). */
static void entry_check(const desync_state *s, comm_state *c, uint64_t q, bool final, const stuck_at *stuck)
{
    if (c->found && c->finding.coll_seq <= q)
        return;
    const coll_slot *sl = slots_at(s, c, q);
    int n = s->nranks, np = 0;
    int *idx = s->ibuf;
    for (int i = 0; i < n; i++)
        if (sl[i].has_fields)
            idx[np++] = i;
    if (final && !check_missing(s, c, q, sl, stuck))
        return;
    if (np < 2)
        return;
    if (!check_field(s, c, q, sl, idx, np, DS_TYPE) || !check_field(s, c, q, sl, idx, np, DS_COUNT) ||
        !check_field(s, c, q, sl, idx, np, DS_DTYPE))
        return;
    if (has_redop(sl[idx[0]].type) && !check_field(s, c, q, sl, idx, np, DS_OP))
        return;
    if (has_root(sl[idx[0]].type) && !check_field(s, c, q, sl, idx, np, DS_ROOT))
        return;
    if (!check_field(s, c, q, sl, idx, np, FIELD_NAME))
        return;
    if (!check_values(s, c, q, sl, idx, np))
        return;
    if (!final)
        check_straggler(s, c, q, sl, idx, np);
}

/* Frees entry q and drops judged entries from the bottom of the window. */
static void entry_close(const desync_state *s, comm_state *c, uint64_t q)
{
    entry_at(c, q)->used = false;
    memset(slots_at(s, c, q), 0, (size_t)s->nranks * sizeof(coll_slot));
    while (c->base < c->top && !entry_at(c, c->base)->used)
        c->base++;
}

/* ---- records ------------------------------------------------------------ */

static void on_tensor(desync_state *s, int i, const tft_rec_tensor *tr)
{
    recent_tensor *rt = &s->recent[(size_t)i * DESYNC_RECENT_TENSORS + s->recent_pos[i]++ % DESYNC_RECENT_TENSORS];
    *rt = (recent_tensor){tr->id, tr->stats.fingerprint, tr->mode >= TFT_STATS_HEALTH};
}

static bool result_fp(const desync_state *s, int i, uint64_t id, uint64_t *fp)
{
    const recent_tensor *rt = &s->recent[(size_t)i * DESYNC_RECENT_TENSORS];
    for (int k = 0; k < DESYNC_RECENT_TENSORS; k++) {
        if (rt[k].valid && rt[k].id == id) {
            *fp = rt[k].fp;
            return true;
        }
    }
    return false;
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
    if (!x->t_enter)
        x->t_enter = cr->t_enter;
    if (cr->h.flags & TFT_COLL_FLAG_ENTER)
        x->entered = 1;
    if (cr->h.flags & TFT_COLL_FLAG_EXIT) {
        x->exited = 1;
        if (cr->result && result_fp(s, i, cr->result, &x->fp))
            x->has_fp = 1;
    }
}

static int on_collective(desync_state *s, int i, const tft_rec_collective *cr, int64_t step)
{
    if (cr->type == TFT_COLL_SEND || cr->type == TFT_COLL_RECV)
        return 0;
    if (!(cr->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT)))
        return 0;
    comm_state *c = comm_get(s, cr->comm);
    if (!c)
        return s->ncomms == DESYNC_MAX_COMMS ? 0 : -ENOMEM;
    c->member[i] = 1;
    if (cr->nranks > c->size)
        c->size = cr->nranks;
    uint64_t q = cr->coll_seq;
    /* The recorder's sequence numbers are int64 tokens >= 0: anything above
     * is damage, and would overflow the window arithmetic below. */
    if (q > (uint64_t)INT64_MAX || q < c->base || (c->found && q > c->finding.coll_seq))
        return 0;
    if (c->base == c->top)
        c->base = c->top = q;
    else if (q >= c->top + DESYNC_WINDOW_MAX)
        return 0; /* an implausible jump: leave it out */
    while (q >= c->base + DESYNC_WINDOW_MAX) { /* judge the oldest as if the trace ended */
        if (entry_at(c, c->base)->used)
            entry_check(s, c, c->base, true, NULL);
        entry_close(s, c, c->base);
        if (c->base == c->top)
            c->base = c->top = q;
    }
    while (q >= c->base + c->cap) {
        int e = window_grow(s, c);
        if (e)
            return e;
    }
    if (q >= c->top) {
        for (uint64_t k = c->top; k <= q; k++) /* coll_seq numbers skipped so far stay unused */
            entry_at(c, k)->used = false;
        c->top = q + 1;
    }
    coll_entry *e = entry_at(c, q);
    coll_slot *x = &slots_at(s, c, q)[i];
    if (!e->used) {
        *e = (coll_entry){.used = true, .coll_seq = q};
        memset(slots_at(s, c, q), 0, (size_t)s->nranks * sizeof(coll_slot));
    }
    bool was_out = x->exited;
    slot_fill(s, i, x, cr, step);
    if (x->exited && !was_out)
        e->nexit++;
    int expect = c->size > 0 && c->size < s->nranks ? c->size : s->nranks;
    if (e->nexit >= expect) {
        entry_check(s, c, q, false, NULL);
        entry_close(s, c, q);
    }
    return 0;
}

/* ---- parameters --------------------------------------------------------- */

static void params_judge(desync_state *s)
{
    int n = s->nranks;
    for (size_t k = 0; k < s->nparams && !s->param_done; k++) {
        const uint64_t *fp = &s->param_fp[k * (size_t)n];
        const uint8_t *have = &s->param_have[k * (size_t)n];
        int ref = -1;
        diff_desync *d = &s->param_finding;
        for (int i = 0; i < n; i++) {
            if (!have[i])
                continue;
            if (ref < 0) {
                ref = i;
                continue;
            }
            if (fp[i] == fp[ref])
                continue;
            if (!s->param_done) {
                memset(d, 0, sizeof(*d));
                d->step = s->param_step;
                d->kind = DS_VALUES;
                snprintf(d->detail, sizeof(d->detail), "%s differs across ranks at step %" PRId64
                         ": rank %d fp=%016" PRIx64 ", rank %d fp=%016" PRIx64, s->params[k].text, s->param_step,
                         rank_id(s, ref), fp[ref], rank_id(s, i), fp[i]);
                s->param_done = true;
            }
            add_rank(d, rank_id(s, i));
        }
    }
    s->nparams = 0;
}

/* Index of (name, occurrence for rank i) in this step's table, adding it. */
static int param_slot(desync_state *s, int i, uint64_t name, const char *text, size_t *out)
{
    int n = s->nranks;
    uint32_t occ = 0;
    for (size_t k = 0; k < s->nparams; k++)
        if (s->params[k].name == name && s->param_have[k * (size_t)n + (size_t)i])
            occ++;
    for (size_t k = 0; k < s->nparams; k++) {
        if (s->params[k].name == name && s->params[k].occ == occ) {
            *out = k;
            return 0;
        }
    }
    if (s->nparams == s->params_cap) {
        size_t ncap = s->params_cap ? s->params_cap * 2 : 64;
        param_entry *p = realloc(s->params, ncap * sizeof(*p));
        if (p)
            s->params = p;
        uint64_t *f = p ? realloc(s->param_fp, ncap * (size_t)n * sizeof(*f)) : NULL;
        if (f)
            s->param_fp = f;
        uint8_t *h = f ? realloc(s->param_have, ncap * (size_t)n) : NULL;
        if (!h)
            return -ENOMEM;
        s->param_have = h;
        s->params_cap = ncap;
    }
    size_t k = s->nparams++;
    s->params[k] = (param_entry){.name = name, .occ = occ};
    snprintf(s->params[k].text, sizeof(s->params[k].text), "%s", text);
    memset(&s->param_have[k * (size_t)n], 0, (size_t)n);
    *out = k;
    return 0;
}

static int on_param(desync_state *s, int i, const tft_rec_tensor *tr)
{
    if (s->param_done || tr->h.step == TFT_STEP_NONE || tr->mode < TFT_STATS_HEALTH)
        return 0;
    const char *text = tft_reader_string(tft_trace_reader(s->t, i), tr->name);
    if (!text || strncmp(text, "param.", 6) != 0)
        return 0;
    if (tr->h.step != s->param_step) {
        params_judge(s);
        s->param_step = tr->h.step;
        if (s->param_done)
            return 0;
    }
    size_t k;
    int e = param_slot(s, i, tr->name, text, &k);
    if (e)
        return e;
    s->param_fp[k * (size_t)s->nranks + (size_t)i] = tr->stats.fingerprint;
    s->param_have[k * (size_t)s->nranks + (size_t)i] = 1;
    return 0;
}

/* ---- driver ------------------------------------------------------------- */

/* Judges what is still open at the end: hangs first, echoes filtered. */
static int final_sweep(desync_state *s)
{
    int n = s->nranks;
    stuck_at *stuck = calloc((size_t)n, sizeof(*stuck));
    if (!stuck)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        stuck[i] = (stuck_at){.step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE};
    for (int k = 0; k < s->ncomms; k++) {
        comm_state *c = &s->comms[k];
        for (uint64_t q = c->base; q < c->top; q++) {
            if (!entry_at(c, q)->used)
                continue;
            const coll_slot *sl = slots_at(s, c, q);
            for (int i = 0; i < n; i++) {
                if (!sl[i].entered || sl[i].exited)
                    continue;
                stuck_at cand = {sl[i].step, sl[i].seq, sl[i].t_enter, c->comm};
                if (stuck[i].step == TFT_STEP_NONE ||
                    stuck_before(&cand, stuck[i].step, stuck[i].seq, stuck[i].t_enter, true))
                    stuck[i] = cand;
            }
        }
    }
    for (int k = 0; k < s->ncomms; k++) {
        comm_state *c = &s->comms[k];
        for (uint64_t q = c->base; q < c->top; q++)
            if (entry_at(c, q)->used)
                entry_check(s, c, q, true, stuck);
    }
    params_judge(s);
    free(stuck);
    return 0;
}

static int cmp_desync(const void *pa, const void *pb)
{
    const diff_desync *a = pa, *b = pb;
    int sa = a->kind == DS_STRAGGLER, sb = b->kind == DS_STRAGGLER;
    if (sa != sb)
        return sa - sb;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    return a->coll_seq < b->coll_seq ? -1 : a->coll_seq > b->coll_seq;
}

static int collect(desync_state *s, diff_desync *out, int max)
{
    size_t cap = (size_t)s->ncomms * 2 + 1, n = 0;
    diff_desync *all = malloc(cap * sizeof(*all));
    if (!all)
        return -ENOMEM;
    for (int k = 0; k < s->ncomms; k++) {
        if (s->comms[k].found)
            all[n++] = s->comms[k].finding;
        if (s->comms[k].straggled)
            all[n++] = s->comms[k].straggler;
    }
    if (s->param_done)
        all[n++] = s->param_finding;
    qsort(all, n, sizeof(*all), cmp_desync);
    int m = n < (size_t)max ? (int)n : max;
    if (m > 0)
        memcpy(out, all, (size_t)m * sizeof(*out));
    free(all);
    return m;
}

static bool same_host(tft_trace *t, int n)
{
    for (int i = 1; i < n; i++) {
        const tft_file_info *a = tft_reader_info(tft_trace_reader(t, 0));
        const tft_file_info *b = tft_reader_info(tft_trace_reader(t, i));
        if (!a || !b || strncmp(a->host, b->host, sizeof(a->host)) != 0)
            return false;
    }
    return true;
}

static void state_free(desync_state *s)
{
    for (int k = 0; k < s->ncomms; k++) {
        free(s->comms[k].win);
        free(s->comms[k].slots);
        free(s->comms[k].member);
    }
    free(s->comms);
    free(s->recent);
    free(s->recent_pos);
    free(s->params);
    free(s->param_fp);
    free(s->param_have);
    free(s->ibuf);
    free(s->ubuf);
}

int diff_desyncs(tft_trace *t, diff_desync *out, int max)
{
    if (!t || (max > 0 && !out))
        return -EINVAL;
    int n = tft_trace_nranks(t);
    if (n < 2)
        return 0;
    desync_state s = {.t = t, .nranks = n, .one_host = same_host(t, n), .param_step = TFT_STEP_NONE};
    s.recent = calloc((size_t)n * DESYNC_RECENT_TENSORS, sizeof(*s.recent));
    s.recent_pos = calloc((size_t)n, sizeof(*s.recent_pos));
    s.ibuf = calloc((size_t)n * 5, sizeof(*s.ibuf));
    s.ubuf = calloc((size_t)n, sizeof(*s.ubuf));
    bool ok = s.recent && s.recent_pos && s.ibuf && s.ubuf;
    tft_merge *m = ok ? tft_merge_open(t, TFT_ORDER_STEP_SEQ) : NULL;
    int e = m ? 0 : (ok ? -errno : -ENOMEM);
    int64_t *last_step = m ? malloc((size_t)n * sizeof(*last_step)) : NULL;
    if (m && !last_step)
        e = -ENOMEM;
    for (int i = 0; last_step && i < n; i++)
        last_step[i] = TFT_STEP_NONE;
    const tft_rec *rec;
    int ri;
    while (e == 0 && (e = tft_merge_next(m, &rec, &ri)) == 1) {
        e = 0;
        if (ri < 0 || ri >= n)
            continue;
        if (rec->step != TFT_STEP_NONE)
            last_step[ri] = rec->step;
        if (rec->kind == TFT_REC_TENSOR && rec->len >= sizeof(tft_rec_tensor)) {
            on_tensor(&s, ri, (const tft_rec_tensor *)rec);
            e = on_param(&s, ri, (const tft_rec_tensor *)rec);
        } else if (rec->kind == TFT_REC_COLLECTIVE && rec->len >= sizeof(tft_rec_collective)) {
            int64_t step = rec->step != TFT_STEP_NONE ? rec->step : last_step[ri];
            e = on_collective(&s, ri, (const tft_rec_collective *)rec, step);
        }
    }
    if (e == 0)
        e = final_sweep(&s);
    if (e == 0)
        e = collect(&s, out, max > 0 ? max : 0);
    free(last_step);
    tft_merge_close(m);
    state_free(&s);
    return e;
}

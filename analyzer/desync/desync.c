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
 * last 16 tensor fingerprints are kept while extracting, core_spill.c)
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
 *
 * Files, lowest first: each calls only files above it in this list
 * (desync_internal.h holds what they share).
 *   desync_common.c       rank ids, the extracts' strings, text helpers, a
 *                         finding's fields and evidence
 *   desync_comm_names.c   COMM records: members, point-to-point spaces,
 *                         names ("{1,3}")
 *   desync_window.c       each communicator's window of open entries
 *   desync_straggler.c    DS_STRAGGLER
 *   desync_checks.c       one entry's checks: DS_MISSING, DS_TYPE ...
 *                         DS_ROOT, DS_VALUES (results)
 *   desync_collectives.c  COMM and COLLECTIVE records into the windows
 *   desync_p2p.c          point-to-point counters and open calls
 *   desync_p2p_peer.c     a blocked call's peer; the DS_P2P finding
 *   desync_p2p_judge.c    the calls still blocked at the end
 *   desync_params.c       "param.*" replication (DS_VALUES, comm 0)
 *   desync_causes.c       the findings gathered, linked to their causes,
 *                         ordered
 *   desync.c              desync_find: extracts, merge, final sweep
 *   desync_stacks.c       STACK records (desync_stacks.h), apart from the
 *                         rest
 */
#include "desync_internal.h"
#include "core_clock.h"
#include "core_spill.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* How the ranks' enter times compare (desync_straggler.c): one host, hosts
 * aligned through MPI (adj), or each rank's clock pair (clk, host_of). */
static void clocks_init(desync_state *s)
{
    tft_trace *t = s->t;
    int n = s->nranks;
    s->adj = calloc((size_t)n, sizeof(*s->adj));
    s->aligned = !s->one_host && s->adj && core_clock_align(t, n, s->adj, &s->clock_err);
    s->clk = s->one_host || s->aligned ? NULL : calloc((size_t)n, sizeof(*s->clk));
    s->host_of = s->clk ? hosts_of(t, n) : NULL;
    for (int i = 0; s->clk && i < n; i++) {
        const tft_file_info *fi = tft_trace_file_info(t, i);
        if (fi)
            core_clock_pair_start(&s->clk[i], fi);
        else
            s->clk[i].ntp = TFT_NTP_UNKNOWN;
    }
}

/* s for the n rank files of t: its scratch, clocks and maps. false when
 * out of memory; state_free frees it either way. */
static bool state_init(desync_state *s, tft_trace *t, int n)
{
    *s = (desync_state){.t = t, .nranks = n, .one_host = same_host(t, n), .param_step = TFT_STEP_NONE,
                        .world = tft_string_id("MPI_COMM_WORLD", 14)};
    s->ibuf = calloc((size_t)n * 5, sizeof(*s->ibuf));
    s->ubuf = calloc((size_t)n, sizeof(*s->ubuf));
    clocks_init(s);
    s->open = calloc((size_t)n, sizeof(*s->open));
    for (int i = 0; s->open && i < n; i++)
        desync_ix_init(&s->open[i].ix);
    desync_ix_init(&s->param_ix);
    desync_ix_init(&s->occ_ix);
    desync_ix_init(&s->grad_ix);
    desync_ix_init(&s->first_ix);
    s->rep = malloc((size_t)n * sizeof(*s->rep));
    for (int i = 0; s->rep && i < n; i++)
        s->rep[i] = -1;
    tft_u64map_init(&s->strs, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .max_n = 1 << 20});
    tft_u64map_init(&s->pairs, &(tft_u64map_opts){.vsize = sizeof(pair_ent), .max_n = DESYNC_MAX_PAIRS,
                                                  .min_cap = 256, .hashed = true});
    s->inv_tmp = calloc((size_t)n, 1);
    s->miss_tmp = calloc((size_t)n, 1);
    s->dense = calloc(1, sizeof(*s->dense));
    if (s->dense) {
        s->dense->owner = -1;
        s->dense->v = calloc((size_t)n, sizeof(*s->dense->v));
    }
    return s->ibuf && s->ubuf && s->open && s->rep && s->inv_tmp && s->miss_tmp && s->dense && s->dense->v;
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
    free(s->gfps);
    tft_u64map_free(&s->grad_ix);
    free(s->firsts);
    tft_u64map_free(&s->first_ix);
    free(s->rep);
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
        return desync_on_param(s, ri, x->step, x->name, x->fp, x->has_fp != 0);
    case SPILL_GRAD:
        return desync_on_grad(s, ri, x->step, x->name, x->fp);
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

int desync_find_spilled(tft_trace *t, diff_spill *sp, desync_finding *out, int max)
{
    if (!t || !sp || (max > 0 && !out))
        return -EINVAL;
    int n = tft_trace_nranks(t);
    if (n < 2)
        return 0;
    desync_state s;
    bool ok = state_init(&s, t, n);
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

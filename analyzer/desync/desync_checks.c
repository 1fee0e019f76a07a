/*
 * desync_checks.c — the checks of one collective, an entry of a
 * communicator's window: members that never entered it (DS_MISSING, a
 * hang; an echo of a hang elsewhere kept apart), then type, count, dtype,
 * reduce op, root and the call's name (DS_TYPE ... DS_ROOT), then the
 * results' fingerprints (DS_VALUES), then stragglers. The first problem of
 * a communicator (lowest coll_seq) is kept in its comm_state.
 */
#include "desync_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
        snprintf(va, sizeof(va), "%s", desync_str_of(s, a->name));
        snprintf(vb, sizeof(vb), "%s", desync_str_of(s, b->name));
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
             " (%s): rank %d %s %s, rank %d %s %s", desync_str_of(s, a->name), c->comm, q,
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
             desync_str_of(s, a->name), c->comm, q, desync_step_text(step, st, sizeof(st)),
             desync_rank_id(s, ref), a->fp, desync_rank_id(s, fault[0]), sl[fault[0]].fp);
    evidence(s, idx, n, fault, nf);
    comm_report(s, c, &d, NULL, false);
    return false;
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
    const char *name = desync_str_of(s, a->name);
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
void desync_entry_check(const desync_state *s, comm_state *c, uint64_t q, bool final, const stuck_at *stuck)
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

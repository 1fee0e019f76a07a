/*
 * desync_causes.c — the findings of every part gathered: named
 * (desync_comm_names.c), linked to their cause (a hang to the mismatch or
 * blocked call its missing ranks took part in, a blocked call to its
 * peer's), echoes dropped unless caused, ordered causes first with what
 * they caused after each, stragglers last, and numbered.
 */
#include "desync_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Every finding of s (communicators' first problems, kept echoes,
 * stragglers, the parameters', blocked point-to-point calls), named,
 * linked and ordered (see the top of the file), numbered from 1 with
 * their .cause ids, into out[0, max). Returns how many were copied, or
 * -ENOMEM. */
int desync_collect(desync_state *s, desync_finding *out, int max)
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

/*
 * report.c — collects tfdiff's per-rank results, leaks and desyncs and
 * renders them as text, JSON (cJSON) or JUnit XML.
 */
#include "core_common.h"
#include "report.h"
#include "core_drops.h"
#include "desync_stacks.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 4096
#define MAX_ITEMS 256

struct diff_report {
    const char *golden, *bad;
    compare_opts o;
    compare_result *ranks;
    int nranks;
    leak_finding leaks[MAX_ITEMS];
    int nleaks;
    desync_finding desyncs[MAX_ITEMS];
    int ndesyncs;
    char notes[8][160];
    int nnotes;
    char incomplete[8][200]; /* reasons from report_incomplete */
    int nincomplete;
    bool bad_unrecorded;      /* BAD has a manifest and no rank file */
    char bad_unrecorded_what[400];
    int bad_exit_status;      /* its manifest's, -1 unknown */
    const char *html, *markdown; /* the other reports written (report_set_outputs), NULL none */
    int argc;                 /* tfdiff's command line (borrowed) */
    char **argv;
    detect_finding checks[32];   /* detector findings BAD has and GOLDEN lacks (report_add_check) */
    int nchecks;
    desync_stacks stacks;       /* BAD's STACK records, read when it has a desync (owned) */
};

void report_add_check(diff_report *r, const detect_finding *f)
{
    if (r->nchecks < (int)(sizeof(r->checks) / sizeof(r->checks[0])))
        r->checks[r->nchecks++] = *f;
}

const detect_finding *report_checks(const diff_report *r, int *n)
{
    *n = r->nchecks;
    return r->checks;
}

diff_report *report_new(const char *golden, const char *bad, const compare_opts *o)
{
    diff_report *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->ranks = calloc(MAX_RANKS, sizeof(*r->ranks));
    if (!r->ranks) {
        free(r);
        return NULL;
    }
    r->golden = golden;
    r->bad = bad;
    r->o = *o;
    return r;
}

void report_free(diff_report *r)
{
    if (r) {
        free(r->ranks);
        desync_stacks_free(&r->stacks);
    }
    free(r);
}

void report_set_stacks(diff_report *r, desync_stacks *s)
{
    desync_stacks_free(&r->stacks);
    r->stacks = *s;
    *s = (desync_stacks){0};
}

void report_note(diff_report *r, const char *fmt, ...)
{
    if (r->nnotes == 8)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, ap);
    va_end(ap);
}

void report_incomplete(diff_report *r, const char *fmt, ...)
{
    if (r->nincomplete == 8)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->incomplete[r->nincomplete++], sizeof(r->incomplete[0]), fmt, ap);
    va_end(ap);
}

void report_add_rank(diff_report *r, const compare_result *res)
{
    if (r->nranks < MAX_RANKS)
        r->ranks[r->nranks++] = *res;
}

void report_add_leak(diff_report *r, const leak_finding *l)
{
    if (r->nleaks < MAX_ITEMS)
        r->leaks[r->nleaks++] = *l;
}

void report_add_desync(diff_report *r, const desync_finding *d)
{
    int lost = report_drops_explain(r->ranks, r->nranks, d);
    if (lost >= 0) { /* a dropped record can fake it: not judged */
        char sb[48];
        report_incomplete(r, "rank %d: BAD dropped records there, so a desync (%s) at %s (%s) was not judged", lost,
                          desync_kind_name(d->kind), core_step_text(d->step, sb, sizeof(sb)),
                          d->comm_name[0] ? d->comm_name : "no communicator");
        return;
    }
    if (r->ndesyncs < MAX_ITEMS)
        r->desyncs[r->ndesyncs++] = *d;
}

void report_bad_unrecorded(diff_report *r, const char *what, int exit_status)
{
    r->bad_unrecorded = true;
    snprintf(r->bad_unrecorded_what, sizeof(r->bad_unrecorded_what), "%s", what);
    r->bad_exit_status = exit_status;
}

/* The earliest (step, seq, rank) among the ranks' points; NULL if none. */
static const compare_result *first_rank(const diff_report *r)
{
    const compare_result *best = NULL;
    for (int i = 0; i < r->nranks; i++) {
        const compare_point *p = &r->ranks[i].first;
        if (!p->found)
            continue;
        if (!best || p->step < best->first.step || (p->step == best->first.step && p->seq < best->first.seq))
            best = &r->ranks[i];
    }
    return best;
}

static const compare_nonfinite *first_nonfinite(const diff_report *r)
{
    const compare_nonfinite *best = NULL;
    for (int i = 0; i < r->nranks; i++) {
        const compare_nonfinite *p = &r->ranks[i].nonfinite;
        if (p->found && (!best || p->step < best->step || (p->step == best->step && p->seq < best->seq)))
            best = p;
    }
    return best;
}

/* The reasons the comparison is incomplete, one per call with k = 0, 1,
 * ...: writes reason k to buf and returns true, false past the last. */
static bool incomplete_reason(const diff_report *r, int k, char *buf, size_t n)
{
    if (k < r->nincomplete) {
        snprintf(buf, n, "%s", r->incomplete[k]);
        return true;
    }
    k -= r->nincomplete;
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        const char *side[4] = {"GOLDEN", "BAD", "GOLDEN", "BAD"};
        bool on[4] = {x->golden_records == 0, x->bad_records == 0, x->golden_dropped > 0, x->bad_dropped > 0};
        uint64_t lost[4] = {0, 0, x->golden_dropped, x->bad_dropped};
        char span[64];
        for (int w = 0; w < 4; w++) {
            if (!on[w] || k-- > 0)
                continue;
            if (w < 2)
                snprintf(buf, n, "rank %d: %s recorded nothing (its rank file holds no records)", x->rank, side[w]);
            else
                snprintf(buf, n, "rank %d: %s lost %" PRIu64 " records (dropped by the recorder)%s%s", x->rank,
                         side[w], lost[w], report_drops_span(x, w - 2, span, sizeof(span)),
                         x->unverified ? "; differences where a lost record may be the cause were not judged" : "");
            return true;
        }
    }
    return false;
}

int report_verdict(const diff_report *r)
{
    if (report_diverged(r))
        return VERDICT_DIVERGED;
    char buf[8];
    return incomplete_reason(r, 0, buf, sizeof(buf)) ? VERDICT_INCOMPLETE : VERDICT_MATCH;
}

static const char *verdict_name(int v, bool upper)
{
    if (v == VERDICT_DIVERGED)
        return upper ? "DIVERGED" : "diverged";
    return v == VERDICT_INCOMPLETE ? (upper ? "INCOMPLETE" : "incomplete") : (upper ? "MATCH" : "match");
}

bool report_diverged(const diff_report *r)
{
    if (first_rank(r) || r->nleaks || r->ndesyncs || r->bad_unrecorded)
        return true;
    const compare_nonfinite *nf = first_nonfinite(r);
    if (nf && !nf->in_golden)
        return true;
    for (int i = 0; i < r->nranks; i++)
        if ((r->ranks[i].bad_ended_early && !r->ranks[i].lost_tail) || r->ranks[i].structure[0] ||
            r->ranks[i].exit_differs)
            return true;
    return false;
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_fp(cJSON *o, const char *key, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "%016" PRIx64, v);
    cJSON_AddStringToObject(o, key, b);
}

static cJSON *json_stats(const compare_tensor_side *t)
{
    if (!t->present)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dtype", tft_dtype_name(t->dtype));
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM; i++)
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[i]));
    const tft_stats *s = &t->stats;
    cJSON_AddNumberToObject(o, "numel", (double)s->numel);
    if (t->mode >= TFT_STATS_HEALTH) {
        cJSON_AddNumberToObject(o, "nan", (double)s->nan);
        cJSON_AddNumberToObject(o, "pinf", (double)s->pinf);
        cJSON_AddNumberToObject(o, "ninf", (double)s->ninf);
        cJSON_AddNumberToObject(o, "zero", (double)s->zero);
        cJSON_AddNumberToObject(o, "min", s->min);
        cJSON_AddNumberToObject(o, "max", s->max);
        json_fp(o, "fingerprint", s->fingerprint);
    }
    if (t->mode >= TFT_STATS_FULL) {
        cJSON_AddNumberToObject(o, "mean", s->mean);
        cJSON_AddNumberToObject(o, "std", s->std);
        cJSON_AddNumberToObject(o, "l1", s->l1);
        cJSON_AddNumberToObject(o, "l2", s->l2);
        cJSON_AddNumberToObject(o, "absmax", s->absmax);
    }
    return o;
}

/* "step": N; for a trace without steps "step": null, "window": N; outside
 * any step "step": null. */
static void json_step(cJSON *o, int64_t step)
{
    if (step == TFT_STEP_NONE) {
        cJSON_AddNullToObject(o, "step");
    } else if (CORE_IS_STEPLESS(step)) {
        cJSON_AddNullToObject(o, "step");
        cJSON_AddNumberToObject(o, "window", (double)(step - CORE_STEPLESS_BASE));
    } else {
        cJSON_AddNumberToObject(o, "step", (double)step);
    }
}

/* "steps A..B", "no steps (windows A..B)" (a trace without steps) or "no
 * steps". */
static const char *range_text(int64_t a, int64_t b, char *buf, size_t n)
{
    if (a == TFT_STEP_NONE)
        snprintf(buf, n, "no steps");
    else if (CORE_IS_STEPLESS(a))
        snprintf(buf, n, "no steps (windows %lld..%lld)", (long long)(a - CORE_STEPLESS_BASE),
                 (long long)(b - CORE_STEPLESS_BASE));
    else
        snprintf(buf, n, "steps %lld..%lld", (long long)a, (long long)b);
    return buf;
}


static cJSON *json_point(const compare_point *p)
{
    if (!p->found)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", p->rank);
    json_step(o, p->step);
    cJSON_AddNumberToObject(o, "seq", (double)p->seq);
    cJSON_AddStringToObject(o, "op", p->op);
    cJSON_AddStringToObject(o, "tensor", p->tensor);
    if (p->thread >= 0)
        cJSON_AddNumberToObject(o, "thread", p->thread);
    else
        cJSON_AddNullToObject(o, "thread");
    cJSON_AddStringToObject(o, "kind", compare_kind_name(p->kind));
    if (p->stat[0])
        cJSON_AddStringToObject(o, "stat", p->stat);
    cJSON_AddItemToObject(o, "golden", json_stats(&p->golden));
    cJSON_AddItemToObject(o, "bad", json_stats(&p->bad));
    return o;
}

/* A step number, or null outside steps (first_alloc_step, from_step). */
static void json_step_or_null(cJSON *o, const char *key, int64_t step)
{
    if (step == TFT_STEP_NONE || CORE_IS_STEPLESS(step))
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddNumberToObject(o, key, (double)step);
}

/* One leak (docs/TFDIFF.md: the keys of tfdump --check's leaks, plus
 * GOLDEN's side). */
static cJSON *json_leak(const leak_finding *l)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "rank", l->rank);
    cJSON_AddStringToObject(x, "site", l->site);
    cJSON_AddStringToObject(x, "how", l->how == LEAK_PEAK      ? "peak"
                                      : l->how == LEAK_AT_EXIT ? "at-exit"
                                                                    : "growth");
    json_step_or_null(x, "from_step", l->per_alloc && l->how == LEAK_GROWTH ? TFT_STEP_NONE : l->from_step);
    if (l->per_alloc && l->how == LEAK_PEAK && !l->first_known)
        cJSON_AddNullToObject(x, "from_allocation"); /* nothing of it live at the end */
    else if (l->per_alloc)
        cJSON_AddNumberToObject(x, "from_allocation", (double)l->from_alloc);
    cJSON_AddStringToObject(x, "per", l->per_alloc ? "allocation" : "step");
    cJSON_AddNumberToObject(x, "iterations", (double)l->iterations);
    cJSON_AddNumberToObject(x, "bytes_per_step", l->bytes_per_step);
    cJSON_AddNumberToObject(x, "live_bytes_at_end", (double)l->live_bytes_at_end);
    cJSON_AddNumberToObject(x, "live_allocs_at_end", (double)l->live_allocs_at_end);
    if (l->first_known)
        cJSON_AddNumberToObject(x, "first_alloc_ns", (double)l->first_alloc_ns);
    else
        cJSON_AddNullToObject(x, "first_alloc_ns");
    json_step_or_null(x, "first_alloc_step", l->first_known ? l->first_alloc_step : TFT_STEP_NONE);
    if (l->golden_known) {
        cJSON_AddNumberToObject(x, "golden_live_bytes_at_end", (double)l->golden_live_bytes_at_end);
        cJSON_AddNumberToObject(x, "golden_live_allocs_at_end", (double)l->golden_live_allocs_at_end);
        cJSON_AddNumberToObject(x, "golden_peak_live_bytes", (double)l->golden_peak_live_bytes);
        cJSON_AddNumberToObject(x, "golden_peak_live_allocs", (double)l->golden_peak_live_allocs);
    } else { /* a rank GOLDEN does not have */
        cJSON_AddNullToObject(x, "golden_live_bytes_at_end");
        cJSON_AddNullToObject(x, "golden_live_allocs_at_end");
        cJSON_AddNullToObject(x, "golden_peak_live_bytes");
        cJSON_AddNullToObject(x, "golden_peak_live_allocs");
    }
    cJSON_AddNumberToObject(x, "peak_live_bytes", (double)l->peak_live_bytes);
    cJSON_AddNumberToObject(x, "peak_live_allocs", (double)l->peak_live_allocs);
    if (l->how != LEAK_GROWTH)
        cJSON_AddStringToObject(x, "compared_to", l->vs_golden_peak ? "golden_peak" : "golden_end");
    else
        cJSON_AddNullToObject(x, "compared_to");
    return x;
}

static cJSON *json_rank(const compare_result *x)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", x->rank);
    cJSON_AddNumberToObject(o, "compared", (double)x->compared);
    cJSON_AddNumberToObject(o, "identical", (double)x->identical);
    cJSON_AddNumberToObject(o, "within_tolerance", (double)x->within_tolerance);
    int64_t st[3][2] = {{x->golden_first_step, x->golden_last_step}, {x->bad_first_step, x->bad_last_step},
                        {x->common_first_step, x->common_last_step}};
    const char *keys[3] = {"golden_steps", "bad_steps", "common_steps"};
    const char *wkeys[3] = {"golden_windows", "bad_windows", "common_windows"};
    for (int k = 0; k < 3; k++) { /* a trace without steps: null steps, its windows */
        bool none = st[k][0] == TFT_STEP_NONE, windows = CORE_IS_STEPLESS(st[k][0]);
        for (int w = 0; w < 2; w++) {
            const char *key = w ? wkeys[k] : keys[k];
            if (none || windows != (w == 1)) {
                cJSON_AddNullToObject(o, key);
                continue;
            }
            int64_t base = windows ? CORE_STEPLESS_BASE : 0;
            cJSON *a = cJSON_AddArrayToObject(o, key);
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(st[k][0] - base)));
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(st[k][1] - base)));
        }
    }
    cJSON_AddBoolToObject(o, "bad_ended_early", x->bad_ended_early);
    cJSON_AddBoolToObject(o, "lost_tail", x->lost_tail);
    cJSON_AddNumberToObject(o, "golden_dropped", (double)x->golden_dropped);
    cJSON_AddNumberToObject(o, "bad_dropped", (double)x->bad_dropped);
    const char *dkey[2] = {"golden_dropped_steps", "bad_dropped_steps"}; /* [first, last] or null */
    for (int k = 0; k < 2; k++) {
        const int64_t *ds = x->drop_steps[k];
        cJSON *a = ds[0] == TFT_STEP_NONE ? cJSON_CreateNull() : cJSON_CreateArray();
        if (ds[0] != TFT_STEP_NONE) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ds[0]));
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ds[1]));
        }
        cJSON_AddItemToObject(o, dkey[k], a);
    }
    cJSON_AddNumberToObject(o, "unverified", (double)x->unverified);
    if (x->bad_exit_known) {
        cJSON *ex = cJSON_AddObjectToObject(o, "bad_exit");
        if (x->bad_exit_signal)
            cJSON_AddNumberToObject(ex, "signal", x->bad_exit_signal);
        else
            cJSON_AddNumberToObject(ex, "code", x->bad_exit_code);
    } else {
        cJSON_AddNullToObject(o, "bad_exit");
    }
    if (x->golden_exit_known) {
        cJSON *ex = cJSON_AddObjectToObject(o, "golden_exit");
        if (x->golden_exit_signal)
            cJSON_AddNumberToObject(ex, "signal", x->golden_exit_signal);
        else
            cJSON_AddNumberToObject(ex, "code", x->golden_exit_code);
    } else {
        cJSON_AddNullToObject(o, "golden_exit");
    }
    cJSON_AddBoolToObject(o, "exit_differs", x->exit_differs);
    cJSON_AddNumberToObject(o, "threads", x->threads);
    cJSON_AddNumberToObject(o, "inserted", (double)x->inserted);
    cJSON_AddNumberToObject(o, "deleted", (double)x->deleted);
    if (x->structure[0]) {
        cJSON_AddStringToObject(o, "structure", x->structure);
    }
    cJSON_AddItemToObject(o, "first_divergence", json_point(&x->first));
    return o;
}

static cJSON *json_findings(const diff_report *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "verdict", verdict_name(report_verdict(r), false));
    cJSON *inc = cJSON_AddArrayToObject(o, "incomplete");
    char why[320];
    for (int k = 0; incomplete_reason(r, k, why, sizeof(why)); k++)
        cJSON_AddItemToArray(inc, cJSON_CreateString(why));
    char where[1024];
    report_drops_where(r->ranks, r->nranks, where, sizeof(where));
    cJSON_AddItemToObject(o, "incomplete_drops", where[0] ? cJSON_CreateString(where) : cJSON_CreateNull());
    const compare_result *fr = first_rank(r);
    cJSON_AddItemToObject(o, "first_divergence", fr ? json_point(&fr->first) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "origin", fr && fr->origin.found ? json_point(&fr->origin) : cJSON_CreateNull());
    const compare_nonfinite *nf = first_nonfinite(r);
    if (nf) {
        cJSON *n = cJSON_AddObjectToObject(o, "first_nonfinite");
        cJSON_AddNumberToObject(n, "rank", nf->rank);
        json_step(n, nf->step);
        cJSON_AddNumberToObject(n, "seq", (double)nf->seq);
        cJSON_AddStringToObject(n, "op", nf->op);
        cJSON_AddStringToObject(n, "tensor", nf->tensor);
        cJSON_AddBoolToObject(n, "in_golden", nf->in_golden);
    } else {
        cJSON_AddNullToObject(o, "first_nonfinite");
    }
    cJSON *leaks = cJSON_AddArrayToObject(o, "leaks");
    for (int i = 0; i < r->nleaks; i++)
        cJSON_AddItemToArray(leaks, json_leak(&r->leaks[i]));
    cJSON *ds = cJSON_AddArrayToObject(o, "desync");
    for (int i = 0; i < r->ndesyncs; i++) {
        const desync_finding *d = &r->desyncs[i];
        cJSON *x = cJSON_CreateObject();
        json_fp(x, "comm", d->comm);
        cJSON_AddNumberToObject(x, "coll_seq", (double)d->coll_seq);
        if (d->step == TFT_STEP_NONE)
            cJSON_AddNullToObject(x, "step");
        else
            cJSON_AddNumberToObject(x, "step", (double)d->step);
        cJSON_AddStringToObject(x, "kind", desync_kind_name(d->kind));
        cJSON *rk = cJSON_AddArrayToObject(x, "ranks");
        for (int k = 0; k < d->nranks && k < 16; k++)
            cJSON_AddItemToArray(rk, cJSON_CreateNumber(d->ranks[k]));
        cJSON_AddStringToObject(x, "detail", d->detail);
        report_desync_json_more(x, r->desyncs, r->ndesyncs, i);
        cJSON_AddItemToArray(ds, x);
    }
    cJSON_AddItemToObject(o, "stacks", desync_stacks_json(&r->stacks));
    uint64_t wt = 0;
    for (int i = 0; i < r->nranks; i++)
        wt += r->ranks[i].within_tolerance;
    cJSON_AddNumberToObject(o, "within_tolerance", (double)wt);
    return o;
}

void report_json(const diff_report *r, FILE *f)
{
    cJSON *o = json_findings(r);
    cJSON_AddStringToObject(o, "golden", r->golden);
    cJSON_AddStringToObject(o, "bad", r->bad);
    cJSON *tol = cJSON_AddObjectToObject(o, "tolerance");
    cJSON_AddNumberToObject(tol, "rtol", r->o.rtol);
    cJSON_AddNumberToObject(tol, "atol", r->o.atol);
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int i = 0; i < r->nranks; i++)
        cJSON_AddItemToArray(ranks, json_rank(&r->ranks[i]));
    cJSON *notes = cJSON_AddArrayToObject(o, "notes");
    if (r->bad_unrecorded)
        cJSON_AddItemToArray(notes, cJSON_CreateString(r->bad_unrecorded_what));
    for (int i = 0; i < r->nnotes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(r->notes[i]));
    cJSON_AddBoolToObject(o, "bad_recorded", !r->bad_unrecorded);
    int st = r->bad_exit_status;
    if (!r->bad_unrecorded || st < 0) { /* a recorded BAD's exits are per rank (bad_exit) */
        cJSON_AddNullToObject(o, "bad_command_exit");
    } else {
        cJSON *ex = cJSON_AddObjectToObject(o, "bad_command_exit");
        bool sig = st > 128 && st < 128 + 65;
        cJSON_AddNumberToObject(ex, sig ? "signal" : "code", sig ? st - 128 : st);
    }
    cJSON *bo = cJSON_AddArrayToObject(o, "bad_only_findings");
    for (int i = 0; i < r->nchecks; i++)
        cJSON_AddItemToArray(bo, detect_finding_json(&r->checks[i]));
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        fputs(s, f);
        fputc('\n', f);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

/* ---- text ------------------------------------------------------------------ */

static void shape_str(const compare_tensor_side *t, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, "%s[", tft_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n)
        snprintf(b + k, n - k, "]");
}

static void side_by_side(FILE *f, const compare_point *p)
{
    char gs[64], bs[64];
    shape_str(&p->golden, gs, sizeof(gs));
    shape_str(&p->bad, bs, sizeof(bs));
    fprintf(f, "    %-12s %-24s %-24s\n", "", "golden", "bad");
    fprintf(f, "    %-12s %-24s %-24s\n", "shape", p->golden.present ? gs : "-", p->bad.present ? bs : "-");
    const tft_stats *g = &p->golden.stats, *b = &p->bad.stats;
    struct { const char *n; double g, b; } rows[] = {
        {"mean", g->mean, b->mean}, {"std", g->std, b->std}, {"min", g->min, b->min},
        {"max", g->max, b->max}, {"absmax", g->absmax, b->absmax}, {"l1", g->l1, b->l1}, {"l2", g->l2, b->l2},
        {"nan", (double)g->nan, (double)b->nan}, {"inf", (double)(g->pinf + g->ninf), (double)(b->pinf + b->ninf)},
        {"zero", (double)g->zero, (double)b->zero},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        fprintf(f, "    %-12s %-24.8g %-24.8g%s\n", rows[i].n, rows[i].g, rows[i].b,
                !strcmp(rows[i].n, p->stat) ? "  <--" : "");
    fprintf(f, "    %-12s %016" PRIx64 "         %016" PRIx64 "\n", "fingerprint", g->fingerprint, b->fingerprint);
}

static void text_ranks(const diff_report *r, FILE *f)
{
    char a[64], b[64];
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        if (x->structure[0])
            fprintf(f, "rank %d: structure: %s (%" PRIu64 " inserted, %" PRIu64 " deleted)\n", x->rank,
                    x->structure, x->inserted, x->deleted);
        if (x->bad_ended_early && CORE_IS_STEPLESS(x->bad_last_step))
            fprintf(f, "rank %d: BAD ended early, in window %lld of its ops (no steps; golden ran to window %lld)%s\n",
                    x->rank, (long long)(x->bad_last_step - CORE_STEPLESS_BASE),
                    (long long)(x->golden_last_step - CORE_STEPLESS_BASE), x->bad_exit_known ? "" : ", exit unknown");
        else if (x->lost_tail)
            fprintf(f, "rank %d: BAD's records end at %s (golden's at %s), but it exited as GOLDEN did: "
                       "the rest was lost, not skipped\n", x->rank, core_step_text(x->bad_last_step, a, sizeof(a)),
                    core_step_text(x->golden_last_step, b, sizeof(b)));
        else if (x->bad_ended_early)
            fprintf(f, "rank %d: BAD ended early at %s (golden ran to %s)%s\n", x->rank,
                    core_step_text(x->bad_last_step, a, sizeof(a)), core_step_text(x->golden_last_step, b, sizeof(b)),
                    x->bad_exit_known ? "" : ", exit unknown");
        if (x->bad_exit_known && (x->bad_exit_code || x->bad_exit_signal || x->exit_differs)) {
            fprintf(f, "rank %d: BAD exited with %s %d", x->rank, x->bad_exit_signal ? "signal" : "code",
                    x->bad_exit_signal ? x->bad_exit_signal : x->bad_exit_code);
            if (x->exit_differs && x->golden_exit_known)
                fprintf(f, " (GOLDEN with %s %d)", x->golden_exit_signal ? "signal" : "code",
                        x->golden_exit_signal ? x->golden_exit_signal : x->golden_exit_code);
            fputc('\n', f);
        }
        if (x->common_first_step != x->golden_first_step && x->common_first_step != TFT_STEP_NONE)
            fprintf(f, "rank %d: compared %s only (BAD has %s)\n", x->rank,
                    range_text(x->common_first_step, x->common_last_step, a, sizeof(a)),
                    range_text(x->bad_first_step, x->bad_last_step, b, sizeof(b)));
    }
}

void report_text(const diff_report *r, FILE *f)
{
    const compare_result *fr = first_rank(r);
    char sb[48];
    fprintf(f, "tfdiff: %s\n", verdict_name(report_verdict(r), true));
    char why[320];
    for (int k = 0; incomplete_reason(r, k, why, sizeof(why)); k++)
        fprintf(f, "incomplete: %s\n", why);
    char lost_where[1024];
    if (report_verdict(r) == VERDICT_INCOMPLETE &&
        report_drops_where(r->ranks, r->nranks, lost_where, sizeof(lost_where))[0])
        fprintf(f, "no divergence found, but the comparison is incomplete: %s\n", lost_where);
    if (r->bad_unrecorded)
        fprintf(f, "BAD recorded nothing: %s\n", r->bad_unrecorded_what);
    if (fr) {
        const compare_point *p = &fr->first;
        char th[32] = "", op[128] = "";
        if (fr->threads > 1 && p->thread >= 0)
            snprintf(th, sizeof(th), ", thread %d", p->thread);
        if (p->op[0] && strcmp(p->op, p->tensor) != 0)
            snprintf(op, sizeof(op), " [%s]", p->op);
        fprintf(f, "first divergence: rank %d, %s, seq %lld%s: %s%s (%s%s%s)\n", p->rank,
                core_step_text(p->step, sb, sizeof(sb)), (long long)p->seq, th, p->tensor, op,
                compare_kind_name(p->kind), p->stat[0] ? ", " : "", p->stat);
        side_by_side(f, p);
        if (fr->n_context)
            fprintf(f, "  the %d tensors before it (golden mean / bad mean):\n", fr->n_context);
        for (int k = 0; k < fr->n_context; k++)
            fprintf(f, "    %-18s %-24s %-16.8g %-16.8g%s\n", core_step_text(fr->context_b[k].step, sb, sizeof(sb)),
                    fr->context_b[k].name, fr->context_g[k].stats.mean, fr->context_b[k].stats.mean,
                    fr->context_g[k].stats.fingerprint == fr->context_b[k].stats.fingerprint ? "identical"
                                                                                             : "within tolerance");
        if (fr->origin.found && (fr->origin.step != p->step || fr->origin.seq != p->seq))
            fprintf(f, "origin: %s, seq %lld: %s — its inputs match GOLDEN, its output does not\n",
                    core_step_text(fr->origin.step, sb, sizeof(sb)), (long long)fr->origin.seq, fr->origin.tensor);
        else if (fr->origin.found && fr->origin.leaf)
            fprintf(f, "origin: the same tensor — no recorded op produced it (data, a parameter, an operand):"
                       " it changed before it was recorded\n");
        else if (fr->origin.found)
            fprintf(f, "origin: the same op — its inputs match GOLDEN, its output does not\n");
    }
    const compare_nonfinite *nf = first_nonfinite(r);
    if (nf)
        fprintf(f, "first non-finite in BAD: rank %d, %s, %s (%s)\n", nf->rank, core_step_text(nf->step, sb, sizeof(sb)),
                nf->tensor, nf->in_golden ? "GOLDEN has it too" : "GOLDEN has none");
    for (int i = 0; i < r->nleaks; i++) {
        char what[400];
        leak_describe(&r->leaks[i], what, sizeof(what));
        fprintf(f, "leak: rank %d, %s\n", r->leaks[i].rank, what);
    }
    for (int i = 0; i < r->ndesyncs; i++) {
        char where[160];
        desync_where(r->desyncs, r->ndesyncs, i, where, sizeof(where));
        fprintf(f, "desync: %s at %s (%s): %s\n", desync_kind_name(r->desyncs[i].kind),
                core_step_text(r->desyncs[i].step, sb, sizeof(sb)), where,
                r->desyncs[i].detail);
    }
    if (r->stacks.n) {
        fprintf(f, "stacks: where each rank's main thread in BAD was when tftrace --timeout stopped it"
                   " (tfdump --events --kind stack BAD: every thread's frames):\n");
        desync_stacks_print(f, &r->stacks, "  ");
    }
    text_ranks(r, f);
    uint64_t cmp = 0, same = 0, tol = 0;
    for (int i = 0; i < r->nranks; i++)
        cmp += r->ranks[i].compared, same += r->ranks[i].identical, tol += r->ranks[i].within_tolerance;
    fprintf(f, "compared %" PRIu64 " tensors on %d rank%s: %" PRIu64 " bit-identical, %" PRIu64
               " different but within tolerance (rtol %g, atol %g)\n",
            cmp, r->nranks, r->nranks == 1 ? "" : "s", same, tol, r->o.rtol, r->o.atol);
    for (int i = 0; i < r->nchecks; i++) {
        const detect_finding *c = &r->checks[i];
        fprintf(f, "only in BAD: %s: %s: rank %d, %s, %s: %s\n", detect_severity_name(c->severity), c->kind, c->rank,
                core_step_text(c->step, sb, sizeof(sb)), c->tensor[0] ? c->tensor : "-", c->evidence);
    }
    for (int i = 0; i < r->nnotes; i++)
        fprintf(f, "note: %s\n", r->notes[i]);
}

/* ---- JUnit ------------------------------------------------------------------ */

static void xml_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* The report a failing case points to: the HTML report, else the Markdown
 * summary when it went to a file. */
static const char *junit_attachment(const diff_report *r)
{
    if (r->html)
        return r->html;
    return r->markdown && strcmp(r->markdown, "-") ? r->markdown : NULL;
}

/* One case; a failing one carries its sentence as the failure message (and
 * its text), and the attachment as a property and as the [[ATTACHMENT|..]]
 * line Jenkins' JUnit Attachments plugin and GitLab read in system-out. */
static void junit_case(FILE *f, const char *name, const char *failure, const char *attach)
{
    fputs("    <testcase classname=\"tfdiff\" name=\"", f);
    xml_escaped(f, name);
    if (!failure) {
        fputs("\"/>\n", f);
        return;
    }
    fputs("\">\n", f);
    if (attach) {
        fputs("      <properties>\n        <property name=\"attachment\" value=\"", f);
        xml_escaped(f, attach);
        fputs("\"/>\n      </properties>\n", f);
    }
    fputs("      <failure message=\"", f);
    xml_escaped(f, failure);
    fputs("\" type=\"tfdiff\">", f);
    xml_escaped(f, failure);
    fputs("</failure>\n", f);
    if (attach) {
        fputs("      <system-out>[[ATTACHMENT|", f);
        xml_escaped(f, attach);
        fputs("]]</system-out>\n", f);
    }
    fputs("    </testcase>\n", f);
}

/* A rank's divergence sentence: its first divergence and origin, else a
 * structural difference or an early or different end; NULL when none. */
static const char *rank_sentence(const compare_result *x, char *buf, size_t n)
{
    char sb[48], ob[48], gb[48];
    const compare_point *p = &x->first;
    if (p->found) {
        int w = snprintf(buf, n, "first divergence: rank %d, %s, seq %lld: %s (%s%s%s)", p->rank,
                         core_step_text(p->step, sb, sizeof(sb)), (long long)p->seq, p->tensor,
                         compare_kind_name(p->kind), p->stat[0] ? ", " : "", p->stat);
        const compare_point *o = &x->origin;
        if (w > 0 && (size_t)w < n && o->found && (o->step != p->step || o->seq != p->seq))
            snprintf(buf + w, n - (size_t)w, "; origin: %s, seq %lld: %s (its inputs match GOLDEN, its output does not)",
                     core_step_text(o->step, ob, sizeof(ob)), (long long)o->seq, o->tensor);
        return buf;
    }
    if (x->structure[0])
        snprintf(buf, n, "rank %d: structure: %s", x->rank, x->structure);
    else if (x->bad_ended_early && !x->lost_tail)
        snprintf(buf, n, "rank %d: BAD ended early at %s (GOLDEN ran to %s)", x->rank,
                 core_step_text(x->bad_last_step, sb, sizeof(sb)), core_step_text(x->golden_last_step, gb, sizeof(gb)));
    else if (x->exit_differs)
        snprintf(buf, n, "rank %d: BAD exited with %s %d, GOLDEN otherwise", x->rank,
                 x->bad_exit_signal ? "signal" : "code", x->bad_exit_signal ? x->bad_exit_signal : x->bad_exit_code);
    else
        return NULL;
    return buf;
}

static const char *nonfinite_sentence(const compare_nonfinite *nf, char *buf, size_t n)
{
    char sb[48];
    snprintf(buf, n, "first non-finite in BAD: rank %d, %s, %s (GOLDEN has none)", nf->rank,
             core_step_text(nf->step, sb, sizeof(sb)), nf->tensor);
    return buf;
}

static const char *leak_sentence(const leak_finding *l, char *buf, size_t n)
{
    char what[400];
    leak_describe(l, what, sizeof(what));
    snprintf(buf, n, "leak: rank %d, %s", l->rank, what);
    return buf;
}

static const char *desync_sentence(const diff_report *r, char *buf, size_t n)
{
    char sb[48], where[160];
    desync_where(r->desyncs, r->ndesyncs, 0, where, sizeof(where));
    snprintf(buf, n, "desync: %s at %s (%s): %s", desync_kind_name(r->desyncs[0].kind),
             core_step_text(r->desyncs[0].step, sb, sizeof(sb)), where, r->desyncs[0].detail);
    return buf;
}

int report_junit(const diff_report *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const char *att = junit_attachment(r);
    int failures = 0, cases = 0;
    char msg[1024], why[320];
    for (int i = 0; i < r->nranks; i++)
        failures += rank_sentence(&r->ranks[i], msg, sizeof(msg)) != NULL, cases++;
    bool incomplete = incomplete_reason(r, 0, why, sizeof(why));
    cases += 4 + r->bad_unrecorded;
    failures += r->bad_unrecorded + incomplete;
    failures += r->nleaks > 0;
    failures += r->ndesyncs > 0;
    const compare_nonfinite *nf = first_nonfinite(r);
    failures += nf && !nf->in_golden;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"tfdiff\" tests=\"%d\" "
               "failures=\"%d\">\n", cases, failures);
    if (att) {
        fputs("    <properties>\n      <property name=\"attachment\" value=\"", f);
        xml_escaped(f, att);
        fputs("\"/>\n    </properties>\n", f);
    }
    char name[64];
    for (int i = 0; i < r->nranks; i++) {
        snprintf(name, sizeof(name), "rank %d divergence", r->ranks[i].rank);
        junit_case(f, name, rank_sentence(&r->ranks[i], msg, sizeof(msg)), att);
    }
    if (r->bad_unrecorded) {
        snprintf(msg, sizeof(msg), "BAD recorded nothing: %s", r->bad_unrecorded_what);
        junit_case(f, "BAD recorded", msg, att);
    }
    junit_case(f, "non-finite", nf && !nf->in_golden ? nonfinite_sentence(nf, msg, sizeof(msg)) : NULL, att);
    junit_case(f, "leaks", r->nleaks ? leak_sentence(&r->leaks[0], msg, sizeof(msg)) : NULL, att);
    junit_case(f, "desync", r->ndesyncs ? desync_sentence(r, msg, sizeof(msg)) : NULL, att);
    if (incomplete)
        snprintf(msg, sizeof(msg), "incomplete: %s", why);
    junit_case(f, "complete", incomplete ? msg : NULL, att);
    fputs("  </testsuite>\n</testsuites>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- for the other renderings (report_markdown.c) --------------------------- */

void report_set_outputs(diff_report *r, const char *html, const char *markdown, int argc, char **argv)
{
    r->html = html;
    r->markdown = markdown;
    r->argc = argc;
    r->argv = argv;
}

bool report_first_finding(const diff_report *r, char *buf, size_t n)
{
    buf[0] = '\0';
    const compare_result *fr = first_rank(r);
    const compare_nonfinite *nf = first_nonfinite(r);
    if (r->bad_unrecorded)
        snprintf(buf, n, "BAD recorded nothing: %s", r->bad_unrecorded_what);
    else if (fr)
        rank_sentence(fr, buf, n);
    else if (nf && !nf->in_golden)
        nonfinite_sentence(nf, buf, n);
    else if (r->ndesyncs)
        desync_sentence(r, buf, n);
    else if (r->nleaks)
        leak_sentence(&r->leaks[0], buf, n);
    for (int i = 0; !buf[0] && i < r->nranks; i++)
        rank_sentence(&r->ranks[i], buf, n);
    char why[320];
    if (!buf[0] && incomplete_reason(r, 0, why, sizeof(why)))
        snprintf(buf, n, "incomplete: %s", why);
    return buf[0] != '\0';
}

void report_count(const diff_report *r, report_counts *c)
{
    *c = (report_counts){.leaks = r->nleaks, .desyncs = r->ndesyncs, .unrecorded = r->bad_unrecorded,
                         .ranks = r->nranks};
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        c->divergence += x->first.found;
        c->nonfinite += x->nonfinite.found && !x->nonfinite.in_golden;
        c->structure += x->structure[0] != '\0';
        c->ended += (x->bad_ended_early && !x->lost_tail) || x->exit_differs;
        c->compared += x->compared;
        c->identical += x->identical;
        c->within_tolerance += x->within_tolerance;
    }
    char why[320];
    while (incomplete_reason(r, c->incomplete, why, sizeof(why)))
        c->incomplete++;
}

const char *report_verdict_name(int verdict) { return verdict_name(verdict, false); }
const char *report_golden(const diff_report *r) { return r->golden; }
const char *report_bad(const diff_report *r) { return r->bad; }
const compare_opts *report_opts(const diff_report *r) { return &r->o; }
const char *report_html(const diff_report *r) { return r->html; }

int report_argv(const diff_report *r, char ***argv)
{
    *argv = r->argv;
    return r->argc;
}

const compare_result *report_first_rank(const diff_report *r) { return first_rank(r); }
const compare_nonfinite *report_first_nonfinite(const diff_report *r) { return first_nonfinite(r); }

const compare_result *report_ranks(const diff_report *r, int *n)
{
    *n = r->nranks;
    return r->ranks;
}

const leak_finding *report_leaks(const diff_report *r, int *n)
{
    *n = r->nleaks;
    return r->leaks;
}

const desync_finding *report_desyncs(const diff_report *r, int *n)
{
    *n = r->ndesyncs;
    return r->desyncs;
}

/* The order of report_first_finding. */
int64_t report_first_step(const diff_report *r)
{
    const compare_result *fr = first_rank(r);
    const compare_nonfinite *nf = first_nonfinite(r);
    if (r->bad_unrecorded)
        return TFT_STEP_NONE;
    if (fr)
        return fr->first.step;
    if (nf && !nf->in_golden)
        return nf->step;
    if (r->ndesyncs)
        return r->desyncs[0].step;
    if (r->nleaks) {
        const leak_finding *l = &r->leaks[0];
        return l->how == LEAK_GROWTH && l->from_step != TFT_STEP_NONE ? l->from_step
               : l->how == LEAK_PEAK ? l->peak_step : l->first_alloc_step;
    }
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        if (x->bad_ended_early && !x->lost_tail)
            return x->bad_last_step;
    }
    return TFT_STEP_NONE;
}

/*
 * diff_report.c — collects tfdiff's per-rank results, leaks and desyncs and
 * renders them as text, JSON (cJSON) or JUnit XML.
 */
#include "diff_report.h"

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
    diff_opts o;
    diff_rank_result *ranks;
    int nranks;
    diff_leak leaks[MAX_ITEMS];
    int nleaks;
    diff_desync desyncs[MAX_ITEMS];
    int ndesyncs;
    char notes[8][160];
    int nnotes;
};

diff_report *report_new(const char *golden, const char *bad, const diff_opts *o)
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
    if (r)
        free(r->ranks);
    free(r);
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

void report_add_rank(diff_report *r, const diff_rank_result *res)
{
    if (r->nranks < MAX_RANKS)
        r->ranks[r->nranks++] = *res;
}

void report_add_leak(diff_report *r, const diff_leak *l)
{
    if (r->nleaks < MAX_ITEMS)
        r->leaks[r->nleaks++] = *l;
}

void report_add_desync(diff_report *r, const diff_desync *d)
{
    if (r->ndesyncs < MAX_ITEMS)
        r->desyncs[r->ndesyncs++] = *d;
}

/* The earliest (step, seq, rank) among the ranks' points; NULL if none. */
static const diff_rank_result *first_rank(const diff_report *r)
{
    const diff_rank_result *best = NULL;
    for (int i = 0; i < r->nranks; i++) {
        const diff_point *p = &r->ranks[i].first;
        if (!p->found)
            continue;
        if (!best || p->step < best->first.step || (p->step == best->first.step && p->seq < best->first.seq))
            best = &r->ranks[i];
    }
    return best;
}

static const diff_nonfinite *first_nonfinite(const diff_report *r)
{
    const diff_nonfinite *best = NULL;
    for (int i = 0; i < r->nranks; i++) {
        const diff_nonfinite *p = &r->ranks[i].nonfinite;
        if (p->found && (!best || p->step < best->step || (p->step == best->step && p->seq < best->seq)))
            best = p;
    }
    return best;
}

bool report_diverged(const diff_report *r)
{
    if (first_rank(r) || r->nleaks || r->ndesyncs)
        return true;
    const diff_nonfinite *nf = first_nonfinite(r);
    if (nf && !nf->in_golden)
        return true;
    for (int i = 0; i < r->nranks; i++)
        if (r->ranks[i].bad_ended_early || r->ranks[i].structure[0])
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

static cJSON *json_stats(const diff_tensor *t)
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

/* "step": N, or for a trace without steps "step": null, "window": N. */
static void json_step(cJSON *o, int64_t step)
{
    if (DIFF_IS_STEPLESS(step)) {
        cJSON_AddNullToObject(o, "step");
        cJSON_AddNumberToObject(o, "window", (double)(step - DIFF_STEPLESS_BASE));
    } else {
        cJSON_AddNumberToObject(o, "step", (double)step);
    }
}

static const char *step_word(int64_t step, long long *n)
{
    *n = DIFF_IS_STEPLESS(step) ? (long long)(step - DIFF_STEPLESS_BASE) : (long long)step;
    return DIFF_IS_STEPLESS(step) ? "window" : "step";
}

static cJSON *json_point(const diff_point *p)
{
    if (!p->found)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", p->rank);
    json_step(o, p->step);
    cJSON_AddNumberToObject(o, "seq", (double)p->seq);
    cJSON_AddStringToObject(o, "op", p->op);
    cJSON_AddStringToObject(o, "tensor", p->tensor);
    cJSON_AddStringToObject(o, "kind", diff_kind_name(p->kind));
    if (p->stat[0])
        cJSON_AddStringToObject(o, "stat", p->stat);
    cJSON_AddItemToObject(o, "golden", json_stats(&p->golden));
    cJSON_AddItemToObject(o, "bad", json_stats(&p->bad));
    return o;
}

static cJSON *json_rank(const diff_rank_result *x)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", x->rank);
    cJSON_AddNumberToObject(o, "compared", (double)x->compared);
    cJSON_AddNumberToObject(o, "identical", (double)x->identical);
    cJSON_AddNumberToObject(o, "within_tolerance", (double)x->within_tolerance);
    int64_t st[3][2] = {{x->golden_first_step, x->golden_last_step}, {x->bad_first_step, x->bad_last_step},
                        {x->common_first_step, x->common_last_step}};
    const char *keys[3] = {"golden_steps", "bad_steps", "common_steps"};
    for (int k = 0; k < 3; k++) {
        if (st[k][0] == TFT_STEP_NONE) {
            cJSON_AddNullToObject(o, keys[k]);
            continue;
        }
        cJSON *a = cJSON_AddArrayToObject(o, keys[k]);
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st[k][0]));
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st[k][1]));
    }
    cJSON_AddBoolToObject(o, "bad_ended_early", x->bad_ended_early);
    if (x->bad_exit_known) {
        cJSON *ex = cJSON_AddObjectToObject(o, "bad_exit");
        if (x->bad_exit_signal)
            cJSON_AddNumberToObject(ex, "signal", x->bad_exit_signal);
        else
            cJSON_AddNumberToObject(ex, "code", x->bad_exit_code);
    } else {
        cJSON_AddNullToObject(o, "bad_exit");
    }
    cJSON_AddNumberToObject(o, "inserted", (double)x->inserted);
    cJSON_AddNumberToObject(o, "deleted", (double)x->deleted);
    if (x->structure[0])
        cJSON_AddStringToObject(o, "structure", x->structure);
    cJSON_AddItemToObject(o, "first_divergence", json_point(&x->first));
    return o;
}

/* The keys of a desync object beyond comm, coll_seq, step, kind, ranks and
 * detail (docs/TFDIFF.md): seq, comm_name, members, caused_by (an index in
 * this report's list: a cause GOLDEN shares too is not listed, and its
 * hang then has none), peer, tag. */
static void json_desync_more(cJSON *x, const diff_desync *ds, int nd, int i)
{
    const diff_desync *d = &ds[i];
    if (d->seq == TFT_SEQ_NONE)
        cJSON_AddNullToObject(x, "seq");
    else
        cJSON_AddNumberToObject(x, "seq", (double)d->seq);
    if (d->comm_name[0])
        cJSON_AddStringToObject(x, "comm_name", d->comm_name);
    else
        cJSON_AddNullToObject(x, "comm_name");
    if (d->nmembers > 0 && d->nmembers <= DIFF_DESYNC_MEMBERS) {
        cJSON *m = cJSON_AddArrayToObject(x, "members");
        for (int k = 0; m && k < d->nmembers; k++)
            cJSON_AddItemToArray(m, cJSON_CreateNumber(d->members[k]));
    } else {
        cJSON_AddNullToObject(x, "members");
    }
    int c = diff_desync_index(ds, nd, d->cause);
    if (c >= 0)
        cJSON_AddNumberToObject(x, "caused_by", c);
    else
        cJSON_AddNullToObject(x, "caused_by");
    if (d->kind == DS_P2P && d->peer >= 0)
        cJSON_AddNumberToObject(x, "peer", d->peer);
    else
        cJSON_AddNullToObject(x, "peer");
    if (d->kind == DS_P2P)
        cJSON_AddNumberToObject(x, "tag", d->tag);
    else
        cJSON_AddNullToObject(x, "tag");
}

static cJSON *json_findings(const diff_report *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "verdict", report_diverged(r) ? "diverged" : "match");
    const diff_rank_result *fr = first_rank(r);
    cJSON_AddItemToObject(o, "first_divergence", fr ? json_point(&fr->first) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "origin", fr && fr->origin.found ? json_point(&fr->origin) : cJSON_CreateNull());
    const diff_nonfinite *nf = first_nonfinite(r);
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
    for (int i = 0; i < r->nleaks; i++) {
        const diff_leak *l = &r->leaks[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "rank", l->rank);
        cJSON_AddStringToObject(x, "site", l->site);
        if (l->per_alloc) { /* a trace without steps */
            cJSON_AddNullToObject(x, "from_step");
            cJSON_AddNumberToObject(x, "from_allocation", (double)l->from_alloc);
        } else {
            cJSON_AddNumberToObject(x, "from_step", (double)l->from_step);
        }
        cJSON_AddStringToObject(x, "per", l->per_alloc ? "allocation" : "step");
        cJSON_AddNumberToObject(x, "iterations", (double)l->iterations);
        cJSON_AddNumberToObject(x, "bytes_per_step", l->bytes_per_step);
        cJSON_AddNumberToObject(x, "live_bytes_at_end", (double)l->live_bytes_at_end);
        cJSON_AddItemToArray(leaks, x);
    }
    cJSON *ds = cJSON_AddArrayToObject(o, "desync");
    for (int i = 0; i < r->ndesyncs; i++) {
        const diff_desync *d = &r->desyncs[i];
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
        json_desync_more(x, r->desyncs, r->ndesyncs, i);
        cJSON_AddItemToArray(ds, x);
    }
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
    for (int i = 0; i < r->nnotes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(r->notes[i]));
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        fputs(s, f);
        fputc('\n', f);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

/* ---- text ------------------------------------------------------------------ */

static void shape_str(const diff_tensor *t, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, "%s[", tft_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n)
        snprintf(b + k, n - k, "]");
}

static void side_by_side(FILE *f, const diff_point *p)
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
    for (int i = 0; i < r->nranks; i++) {
        const diff_rank_result *x = &r->ranks[i];
        if (x->structure[0])
            fprintf(f, "rank %d: structure: %s (%" PRIu64 " inserted, %" PRIu64 " deleted)\n", x->rank, x->structure,
                    x->inserted, x->deleted);
        if (x->bad_ended_early)
            fprintf(f, "rank %d: BAD ended early at step %lld (golden ran to %lld)%s\n", x->rank,
                    (long long)x->bad_last_step, (long long)x->golden_last_step,
                    x->bad_exit_known ? "" : ", exit unknown");
        if (x->bad_exit_known && (x->bad_exit_code || x->bad_exit_signal))
            fprintf(f, "rank %d: BAD exited with %s %d\n", x->rank, x->bad_exit_signal ? "signal" : "code",
                    x->bad_exit_signal ? x->bad_exit_signal : x->bad_exit_code);
        if (x->common_first_step != x->golden_first_step && x->common_first_step != TFT_STEP_NONE)
            fprintf(f, "rank %d: compared steps %lld..%lld only (BAD has %lld..%lld)\n", x->rank,
                    (long long)x->common_first_step, (long long)x->common_last_step,
                    (long long)x->bad_first_step, (long long)x->bad_last_step);
    }
}

void report_text(const diff_report *r, FILE *f)
{
    const diff_rank_result *fr = first_rank(r);
    fprintf(f, "tfdiff: %s\n", report_diverged(r) ? "DIVERGED" : "MATCH");
    if (fr) {
        const diff_point *p = &fr->first;
        long long sn;
        const char *sw = step_word(p->step, &sn);
        fprintf(f, "first divergence: rank %d, %s %lld, seq %lld: %s (%s%s%s)\n", p->rank, sw, sn,
                (long long)p->seq, p->tensor, diff_kind_name(p->kind), p->stat[0] ? ", " : "", p->stat);
        side_by_side(f, p);
        if (fr->n_context)
            fprintf(f, "  the %d tensors before it (golden mean / bad mean):\n", fr->n_context);
        for (int k = 0; k < fr->n_context; k++)
            fprintf(f, "    step %-5lld %-24s %-16.8g %-16.8g%s\n", (long long)fr->context_b[k].step,
                    fr->context_b[k].name, fr->context_g[k].stats.mean, fr->context_b[k].stats.mean,
                    fr->context_g[k].stats.fingerprint == fr->context_b[k].stats.fingerprint ? "identical"
                                                                                             : "within tolerance");
        if (fr->origin.found && (fr->origin.step != p->step || fr->origin.seq != p->seq))
            fprintf(f, "origin: step %lld, seq %lld: %s — its inputs match GOLDEN, its output does not\n",
                    (long long)fr->origin.step, (long long)fr->origin.seq, fr->origin.tensor);
        else if (fr->origin.found)
            fprintf(f, "origin: the same op — its inputs match GOLDEN, its output does not\n");
    }
    const diff_nonfinite *nf = first_nonfinite(r);
    if (nf)
        fprintf(f, "first non-finite in BAD: rank %d, step %lld, %s (%s)\n", nf->rank, (long long)nf->step,
                nf->tensor, nf->in_golden ? "GOLDEN has it too" : "GOLDEN has none");
    for (int i = 0; i < r->nleaks; i++) {
        char what[400];
        diff_leak_describe(&r->leaks[i], what, sizeof(what));
        fprintf(f, "leak: rank %d, %s\n", r->leaks[i].rank, what);
    }
    for (int i = 0; i < r->ndesyncs; i++) {
        char at[48] = "no step", where[160];
        if (r->desyncs[i].step != TFT_STEP_NONE)
            snprintf(at, sizeof(at), "step %lld", (long long)r->desyncs[i].step);
        diff_desync_where(r->desyncs, r->ndesyncs, i, where, sizeof(where));
        fprintf(f, "desync: %s at %s (%s): %s\n", desync_kind_name(r->desyncs[i].kind), at, where,
                r->desyncs[i].detail);
    }
    text_ranks(r, f);
    uint64_t cmp = 0, same = 0, tol = 0;
    for (int i = 0; i < r->nranks; i++)
        cmp += r->ranks[i].compared, same += r->ranks[i].identical, tol += r->ranks[i].within_tolerance;
    fprintf(f, "compared %" PRIu64 " tensors on %d rank%s: %" PRIu64 " bit-identical, %" PRIu64
               " different but within tolerance (rtol %g, atol %g)\n",
            cmp, r->nranks, r->nranks == 1 ? "" : "s", same, tol, r->o.rtol, r->o.atol);
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

static void junit_case(FILE *f, const char *name, const char *failure)
{
    fputs("    <testcase classname=\"tfdiff\" name=\"", f);
    xml_escaped(f, name);
    if (!failure) {
        fputs("\"/>\n", f);
        return;
    }
    fputs("\">\n      <failure message=\"", f);
    xml_escaped(f, failure);
    fputs("\"/>\n    </testcase>\n", f);
}

int report_junit(const diff_report *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int failures = 0, cases = 0;
    for (int i = 0; i < r->nranks; i++)
        failures += r->ranks[i].first.found, cases++;
    cases += 3;
    failures += r->nleaks > 0;
    failures += r->ndesyncs > 0;
    const diff_nonfinite *nf = first_nonfinite(r);
    failures += nf && !nf->in_golden;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"tfdiff\" tests=\"%d\" "
               "failures=\"%d\">\n", cases, failures);
    char name[64], msg[512];
    for (int i = 0; i < r->nranks; i++) {
        const diff_point *p = &r->ranks[i].first;
        snprintf(name, sizeof(name), "rank %d divergence", r->ranks[i].rank);
        snprintf(msg, sizeof(msg), "step %lld, %s: %s", (long long)p->step, p->tensor, diff_kind_name(p->kind));
        junit_case(f, name, p->found ? msg : NULL);
    }
    if (nf)
        snprintf(msg, sizeof(msg), "rank %d step %lld %s", nf->rank, (long long)nf->step, nf->tensor);
    junit_case(f, "non-finite", nf && !nf->in_golden ? msg : NULL);
    if (r->nleaks) {
        char what[400];
        diff_leak_describe(&r->leaks[0], what, sizeof(what));
        snprintf(msg, sizeof(msg), "rank %d: %s", r->leaks[0].rank, what);
    }
    junit_case(f, "leaks", r->nleaks ? msg : NULL);
    if (r->ndesyncs) { /* the detail, cut to the message's size */
        int w = r->desyncs[0].step == TFT_STEP_NONE
                    ? snprintf(msg, sizeof(msg), "%s: ", desync_kind_name(r->desyncs[0].kind))
                    : snprintf(msg, sizeof(msg), "%s at step %lld: ", desync_kind_name(r->desyncs[0].kind),
                               (long long)r->desyncs[0].step);
        if (w >= 0 && (size_t)w < sizeof(msg))
            snprintf(msg + w, sizeof(msg) - (size_t)w, "%.*s", (int)(sizeof(msg) - (size_t)w - 1),
                     r->desyncs[0].detail);
    }
    junit_case(f, "desync", r->ndesyncs ? msg : NULL);
    fputs("  </testsuite>\n</testsuites>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

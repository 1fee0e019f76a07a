/*
 * report_json.c — tfdiff --json: the report as one JSON object with the
 * stable schema of docs/TFDIFF.md (cJSON).
 */
#include "core_common.h"
#include "report_internal.h"
#include "core_json.h"
#include "core_drops.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

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
        core_json_hex(o, "fingerprint", s->fingerprint);
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

/* The keys that place a tensor: rank, step (json_step), seq, op, tensor. */
static void json_place(cJSON *o, int rank, int64_t step, int64_t seq, const char *op, const char *tensor)
{
    cJSON_AddNumberToObject(o, "rank", rank);
    json_step(o, step);
    cJSON_AddNumberToObject(o, "seq", (double)seq);
    cJSON_AddStringToObject(o, "op", op);
    cJSON_AddStringToObject(o, "tensor", tensor);
}

static cJSON *json_point(const compare_point *p)
{
    if (!p->found)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    json_place(o, p->rank, p->step, p->seq, p->op, p->tensor);
    if (p->thread >= 0)
        cJSON_AddNumberToObject(o, "thread", p->thread);
    else
        cJSON_AddNullToObject(o, "thread");
    cJSON_AddStringToObject(o, "kind", compare_kind_name(p->kind));
    if (p->stat[0])
        cJSON_AddStringToObject(o, "stat", p->stat);
    cJSON_AddNumberToObject(o, "colls_before", p->colls_before);
    cJSON_AddItemToObject(o, "coll", p->coll[0] ? cJSON_CreateString(p->coll) : cJSON_CreateNull());
    /* a --keep-steps trace's kept scalars: where the full records start */
    cJSON_AddItemToObject(o, "full_records_from", p->kept ? cJSON_CreateNumber((double)p->full_from) : cJSON_CreateNull());
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

/* The steps each side recorded and both have: [first, last] or null; for
 * a trace without steps null steps and its windows. */
static void json_rank_steps(cJSON *o, const compare_result *x)
{
    int64_t st[3][2] = {{x->golden_first_step, x->golden_last_step}, {x->bad_first_step, x->bad_last_step},
                        {x->common_first_step, x->common_last_step}};
    const char *keys[3] = {"golden_steps", "bad_steps", "common_steps"};
    const char *wkeys[3] = {"golden_windows", "bad_windows", "common_windows"};
    for (int k = 0; k < 3; k++) {
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
}

/* The records each side dropped and in which steps ([first, last] or null). */
static void json_rank_drops(cJSON *o, const compare_result *x)
{
    cJSON_AddNumberToObject(o, "golden_dropped", (double)x->golden_dropped);
    cJSON_AddNumberToObject(o, "bad_dropped", (double)x->bad_dropped);
    const char *dkey[2] = {"golden_dropped_steps", "bad_dropped_steps"};
    for (int k = 0; k < 2; k++) {
        const int64_t *ds = x->drop_steps[k];
        cJSON *a = ds[0] == TFT_STEP_NONE ? cJSON_CreateNull() : cJSON_CreateArray();
        if (ds[0] != TFT_STEP_NONE) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ds[0]));
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ds[1]));
        }
        cJSON_AddItemToObject(o, dkey[k], a);
    }
}

/* key: {"signal": N} or {"code": N}, null when unknown. */
static void json_exit(cJSON *o, const char *key, bool known, int signal, int code)
{
    if (!known) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    cJSON *ex = cJSON_AddObjectToObject(o, key);
    if (signal)
        cJSON_AddNumberToObject(ex, "signal", signal);
    else
        cJSON_AddNumberToObject(ex, "code", code);
}

/* A side's uncaught exception (EXCEPTION records, format 1.7); the key only
 * when there was one. */
static void json_raised(cJSON *o, const char *key, const core_exception *e)
{
    if (!e->known)
        return;
    cJSON *x = cJSON_AddObjectToObject(o, key);
    if (!x)
        return;
    cJSON_AddStringToObject(x, "type", e->type);
    if (e->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(x, "step");
    else
        cJSON_AddNumberToObject(x, "step", (double)e->step);
    cJSON_AddStringToObject(x, "where", e->where);
    cJSON_AddStringToObject(x, "message", e->message);
}

static cJSON *json_rank(const compare_result *x)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", x->rank);
    cJSON_AddNumberToObject(o, "compared", (double)x->compared);
    cJSON_AddNumberToObject(o, "identical", (double)x->identical);
    cJSON_AddNumberToObject(o, "within_tolerance", (double)x->within_tolerance);
    json_rank_steps(o, x);
    cJSON_AddBoolToObject(o, "bad_ended_early", x->bad_ended_early);
    cJSON_AddBoolToObject(o, "lost_tail", x->lost_tail);
    json_rank_drops(o, x);
    cJSON_AddNumberToObject(o, "unverified", (double)x->unverified);
    cJSON_AddNumberToObject(o, "shape_only", (double)x->shape_only);
    uint64_t judged = x->identical + x->within_tolerance + x->unverified + x->shape_only;
    cJSON_AddNumberToObject(o, "different", (double)(x->compared > judged ? x->compared - judged : 0));
    json_exit(o, "bad_exit", x->bad_exit_known, x->bad_exit_signal, x->bad_exit_code);
    json_exit(o, "golden_exit", x->golden_exit_known, x->golden_exit_signal, x->golden_exit_code);
    cJSON_AddBoolToObject(o, "exit_differs", x->exit_differs);
    json_raised(o, "bad_raised", &x->bad_raised);
    json_raised(o, "golden_raised", &x->golden_raised);
    cJSON_AddNumberToObject(o, "threads", x->threads);
    cJSON_AddNumberToObject(o, "inserted", (double)x->inserted);
    cJSON_AddNumberToObject(o, "deleted", (double)x->deleted);
    if (x->structure[0])
        cJSON_AddStringToObject(o, "structure", x->structure);
    cJSON_AddItemToObject(o, "first_divergence", json_point(&x->first));
    return o;
}

static cJSON *json_nonfinite(const compare_nonfinite *nf)
{
    if (!nf)
        return cJSON_CreateNull();
    cJSON *n = cJSON_CreateObject();
    json_place(n, nf->rank, nf->step, nf->seq, nf->op, nf->tensor);
    cJSON_AddBoolToObject(n, "in_golden", nf->in_golden);
    return n;
}

/* The findings: the verdict, why incomplete, the first divergence and its
 * origin, the first non-finite, leaks, desyncs, BAD's stacks. */
static cJSON *json_findings(const diff_report *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "verdict", report_verdict_word(report_verdict(r), false));
    cJSON *inc = cJSON_AddArrayToObject(o, "incomplete");
    char why[320];
    for (int k = 0; report_incomplete_reason(r, k, why, sizeof(why)); k++)
        cJSON_AddItemToArray(inc, cJSON_CreateString(why));
    char where[1024];
    report_drops_where(r->ranks, r->nranks, where, sizeof(where));
    cJSON_AddItemToObject(o, "incomplete_drops", where[0] ? cJSON_CreateString(where) : cJSON_CreateNull());
    const compare_result *fr = report_first_rank(r);
    cJSON_AddItemToObject(o, "first_divergence", fr ? json_point(&fr->first) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "origin", fr && fr->origin.found ? json_point(&fr->origin) : cJSON_CreateNull());
    const compare_result *down = report_downstream_rank(r, fr);
    if (down) { /* the rank the cause reached through a collective */
        cJSON *t = json_point(&down->first);
        cJSON_AddStringToObject(t, "after_collective", down->first.coll);
        cJSON_AddItemToObject(o, "through_collective", t);
    } else {
        cJSON_AddNullToObject(o, "through_collective");
    }
    cJSON_AddItemToObject(o, "first_nonfinite", json_nonfinite(report_first_nonfinite(r)));
    cJSON *leaks = cJSON_AddArrayToObject(o, "leaks");
    for (int i = 0; i < r->nleaks; i++)
        cJSON_AddItemToArray(leaks, json_leak(&r->leaks[i]));
    cJSON *ds = cJSON_AddArrayToObject(o, "desync");
    for (int i = 0; i < r->ndesyncs; i++)
        cJSON_AddItemToArray(ds, report_desync_json(r->desyncs, r->ndesyncs, i, false));
    cJSON_AddItemToObject(o, "stacks", desync_stacks_json(&r->stacks));
    report_counts c;
    report_count(r, &c);
    cJSON_AddNumberToObject(o, "within_tolerance", (double)c.within_tolerance);
    cJSON_AddNumberToObject(o, "compared", (double)c.compared);
    cJSON_AddNumberToObject(o, "identical", (double)c.identical);
    cJSON_AddNumberToObject(o, "different", (double)c.different);
    cJSON_AddNumberToObject(o, "unverified", (double)c.unverified);
    cJSON_AddNumberToObject(o, "shape_only", (double)c.shape_only);
    return o;
}

/* "roundoff": what the round-off model saw (docs/TFDIFF.md), null when it
 * did not judge (--rtol/--atol given). */
static cJSON *json_roundoff(const diff_report *r)
{
    compare_roundoff ro;
    report_roundoff(r, &ro);
    if (!ro.on)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    char line[1024];
    const char *s = report_sentence_roundoff(r, line, sizeof(line));
    cJSON_AddItemToObject(o, "summary", s ? cJSON_CreateString(s) : cJSON_CreateNull());
    cJSON_AddBoolToObject(o, "noise", ro.noise);
    cJSON_AddNumberToObject(o, "differing", (double)ro.differing);
    cJSON_AddNumberToObject(o, "explained", (double)ro.explained);
    bool any = ro.first_step != TFT_STEP_NONE;
    cJSON_AddItemToObject(o, "first_step", any ? cJSON_CreateNumber((double)ro.first_step) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "first_diff", ro.first_diff);
    cJSON_AddItemToObject(o, "last_step", any ? cJSON_CreateNumber((double)ro.last_step) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "last_diff", ro.last_diff);
    cJSON_AddItemToObject(o, "max_step", any ? cJSON_CreateNumber((double)ro.max_step) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "max_diff", ro.max_diff);
    cJSON_AddStringToObject(o, "max_tensor", ro.max_tensor);
    cJSON *near = cJSON_CreateObject(); /* the pair nearest to a divergence */
    bool jumped = ro.jump_share > 0;
    cJSON_AddNumberToObject(near, "share", ro.jump_share);
    cJSON_AddItemToObject(near, "own_growth", jumped && ro.jump < INFINITY ? cJSON_CreateNumber(ro.jump) : cJSON_CreateNull());
    cJSON_AddItemToObject(near, "run_growth", jumped && ro.jump_run < INFINITY ? cJSON_CreateNumber(ro.jump_run)
                                                                                 : cJSON_CreateNull());
    cJSON_AddItemToObject(near, "step", jumped ? cJSON_CreateNumber((double)ro.jump_step) : cJSON_CreateNull());
    cJSON_AddStringToObject(near, "tensor", ro.jump_tensor);
    cJSON_AddItemToObject(o, "nearest", near);
    cJSON_AddItemToObject(o, "wide_step", ro.wide_step != TFT_STEP_NONE ? cJSON_CreateNumber((double)ro.wide_step)
                                                                          : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "optimizer_noise", (double)ro.optimizer_noise);
    cJSON_AddItemToObject(o, "optimizer_noise_first", ro.optimizer_noise ? cJSON_CreateString(ro.optimizer_noise_tensor)
                                                                          : cJSON_CreateNull());
    cJSON *th = cJSON_AddObjectToObject(o, "thresholds");
    cJSON_AddNumberToObject(th, "own_growth", RO_KEY_GROWTH);
    cJSON_AddNumberToObject(th, "run_growth", RO_RUN_GROWTH);
    int64_t lo[10], hi[10];
    double mx[10];
    int nw = compare_roundoff_windows(&ro, 10, lo, hi, mx);
    cJSON *w = cJSON_AddArrayToObject(o, "windows");
    for (int k = 0; k < nw; k++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "first_step", (double)lo[k]);
        cJSON_AddNumberToObject(x, "last_step", (double)hi[k]);
        cJSON_AddNumberToObject(x, "max_diff", mx[k]);
        cJSON_AddItemToArray(w, x);
    }
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
    cJSON_AddBoolToObject(tol, "roundoff", r->o.roundoff);
    cJSON_AddItemToObject(o, "roundoff", json_roundoff(r));
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

/*
 * compare_judge.c — a step's edits judged (compare_internal.h): each pair
 * compared, the states of its tensors recorded for the ops that read
 * them, and the result updated: the first divergence with the pairs
 * before it, the origin, the first non-finite, the counts, the first
 * structural difference and runs of different models.
 *
 * Comparison of a pair: shape, then dtype, then equal fingerprints
 * (identical), then non-finite counts that grow in BAD, then the statistics
 * valid in both modes with |g-b| <= atol + rtol*max(|g|, |b|, scale), scale
 * = max(|golden mean|, golden std, golden absmax*1e-3) (optimizer moments
 * with means near 1e-12 need a scale of their own).  rtol = atol = 0 asks
 * for bitwise equality: any fingerprint difference diverges.
 *
 * The name glob narrows what is counted and reported (first, nonfinite,
 * context, counts, structure). The origin is searched over every compared
 * tensor, glob or not, because it answers where the bug is: asked about
 * grad.*, the first divergence is a gradient but its origin may be
 * `targets`.
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *compare_kind_name(int kind)
{
    switch (kind) {
    case DK_VALUE: return "value";
    case DK_SHAPE: return "shape";
    case DK_DTYPE: return "dtype";
    case DK_NONFINITE: return "nonfinite";
    case DK_MISSING: return "missing";
    case DK_EXTRA: return "extra";
    default: return "?";
    }
}

static const char *tensor_op(const align_side *s, const align_tensor *t)
{
    return t->op >= 0 ? s->ops[t->op].name : "";
}

/* An op name without its scope path ("L0/attn/x" -> "x"). */
static const char *base_name(const char *op)
{
    const char *sl = strrchr(op, '/');
    return sl ? sl + 1 : op;
}

/* The op of t as reports name it. The GEMM interposers record a call's
 * operands (cblas_sgemm.A, .B, a gemv's .x) just before the call, each as
 * an op of its own without inputs; such a tensor is named as what it is:
 * "input B of cblas_sgemm (seq 48)", after the op of its thread that
 * follows and reads it. */
static void describe_op(const align_side *s, const align_tensor *t, char *buf, size_t n)
{
    const char *own = tensor_op(s, t);
    if (t->op >= 0 && s->ops[t->op].n_in == 0 && strcmp(base_name(own), t->name) == 0) {
        uint32_t thread = s->ops[t->op].thread;
        for (size_t i = (size_t)t->op + 1; i < s->n_ops && i <= (size_t)t->op + ALIGN_OP_SEARCH; i++) {
            const align_op *c = &s->ops[i];
            if (c->thread != thread)
                continue;
            for (uint32_t k = 0; k < c->n_in; k++) {
                if (s->inputs[c->in_off + k] != t->id)
                    continue;
                const char *cn = base_name(c->name);
                size_t ln = strlen(cn);
                const char *role = strncmp(t->name, cn, ln) == 0 && t->name[ln] == '.' ? t->name + ln + 1 : "";
                snprintf(buf, n, "input %s%sof %.60s (seq %lld)", role, *role ? " " : "", c->name,
                         (long long)c->seq);
                return;
            }
        }
    }
    compare_copy_text(buf, n, own, n - 1);
}

static uint64_t nonfinite_count(const align_tensor *t)
{
    if (t->mode < TFT_STATS_HEALTH)
        return 0;
    return t->stats.nan + t->stats.pinf + t->stats.ninf;
}

/* How far b's value v is outside the tolerance around golden's g: <= 1
 * within, > 1 outside (the ratio to the tolerance).  With rtol = atol = 0
 * every difference is outside. */
static double excess(const compare_opts *o, double g, double b, double scale)
{
    if (isnan(g) && isnan(b))
        return 0;
    double d = fabs(g - b);
    if (isnan(d))
        return INFINITY;
    if (d == 0)
        return 0;
    double mag = fmax(fmax(fabs(g), fabs(b)), scale);
    double tol = o->atol + o->rtol * mag;
    if (!(tol > 0))
        return 1.0 + d / (fmax(fabs(g), fabs(b)) + 1e-300);
    return d / tol;
}

/* Classes of a compared pair. */
enum pair_class { PC_UNCHECKED = 0, PC_IDENTICAL, PC_WITHIN, PC_DIVERGED };

/* The statistic of g and b (HEALTH or better, fingerprints differing)
 * most out of tolerance: its excess (<= 1 within), its name in stat
 * (untouched when every statistic is equal). */
static double worst_stat(const compare_opts *o, const align_tensor *g, const align_tensor *b, char stat[32])
{
    const tft_stats *gs = &g->stats, *bs = &b->stats;
    bool full = g->mode >= TFT_STATS_FULL && b->mode >= TFT_STATS_FULL;
    double scale = full ? fmax(fmax(fabs(gs->mean), gs->std), gs->absmax * 1e-3)
                        : fmax(fabs(gs->min), fabs(gs->max)) * 1e-3;
    if (isnan(scale))
        scale = 0;
    const struct { const char *name; double g, b; } st[] = {
        {"min", gs->min, bs->min}, {"max", gs->max, bs->max},
        {"mean", gs->mean, bs->mean}, {"std", gs->std, bs->std},
        {"l1", gs->l1, bs->l1}, {"l2", gs->l2, bs->l2}, {"absmax", gs->absmax, bs->absmax},
    };
    size_t n = full ? sizeof st / sizeof st[0] : 2, i0 = 0;
    if (g->mean_only || b->mean_only) /* an average over ranks: its mean alone is known */
        i0 = 2, n = full ? 3 : 0;
    double worst = 0;
    for (size_t i = i0; i < n; i++) {
        double e = excess(o, st[i].g, st[i].b, scale);
        if (e > worst) {
            worst = e;
            snprintf(stat, 32, "%s", st[i].name);
        }
    }
    return worst;
}

/* Whether the element counts of gs and bs differ (numel, then the
 * non-finite counts); the first that does named in stat. */
static bool counts_differ(const tft_stats *gs, const tft_stats *bs, char stat[32])
{
    const struct { const char *name; uint64_t g, b; } counts[] = {
        {"numel", gs->numel, bs->numel}, {"nan", gs->nan, bs->nan},
        {"pinf", gs->pinf, bs->pinf}, {"ninf", gs->ninf, bs->ninf},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].g != counts[i].b) {
            snprintf(stat, 32, "%s", counts[i].name);
            return true;
        }
    }
    return false;
}

/* Compares an aligned pair: returns its class; for PC_DIVERGED sets *kind
 * and, for DK_VALUE, the worst statistic's name in stat. */
static int compare_pair(const compare_opts *o, const align_tensor *g, const align_tensor *b,
                        int *kind, char stat[32])
{
    compare_opts floor_o;
    if (o->roundoff) { /* the fixed tolerance of the pair's precision */
        floor_o = *o;
        floor_o.rtol = compare_ro_floor(o, g->dtype, b->dtype);
        o = &floor_o;
    }
    stat[0] = 0;
    bool shape_eq = g->ndim == b->ndim;
    for (int i = 0; shape_eq && i < g->ndim; i++)
        shape_eq = g->shape[i] == b->shape[i];
    if (!shape_eq) {
        *kind = DK_SHAPE;
        return PC_DIVERGED;
    }
    if (g->dtype != b->dtype && !(o->roundoff && compare_ro_mixed(g->dtype, b->dtype))) {
        *kind = DK_DTYPE;
        return PC_DIVERGED;
    }
    if (g->mode < TFT_STATS_HEALTH || b->mode < TFT_STATS_HEALTH)
        return PC_UNCHECKED; /* shape and dtype only: nothing more to compare */
    const tft_stats *gs = &g->stats, *bs = &b->stats;
    if (gs->fingerprint == bs->fingerprint && g->dtype == b->dtype)
        return PC_IDENTICAL;
    *kind = DK_VALUE;
    if (bs->nan > gs->nan || bs->pinf > gs->pinf || bs->ninf > gs->ninf) {
        *kind = DK_NONFINITE;
        snprintf(stat, 32, "%s", bs->nan > gs->nan ? "nan" : bs->pinf > gs->pinf ? "pinf" : "ninf");
        return PC_DIVERGED;
    }
    if (counts_differ(gs, bs, stat) || worst_stat(o, g, b, stat) > 1)
        return PC_DIVERGED;
    if (o->rtol == 0 && o->atol == 0) {
        snprintf(stat, 32, "fingerprint"); /* bitwise asked: the bytes differ */
        return PC_DIVERGED;
    }
    stat[0] = 0;
    return PC_WITHIN;
}

static void fill_tensor(compare_tensor_side *d, const align_side *s, const align_tensor *t)
{
    memset(d, 0, sizeof *d);
    if (!t)
        return;
    d->present = true;
    d->step = t->step;
    d->seq = t->seq;
    compare_copy_text(d->name, sizeof d->name, t->name, sizeof d->name - 1);
    describe_op(s, t, d->op, sizeof d->op);
    d->dtype = t->dtype;
    d->ndim = t->ndim;
    memcpy(d->shape, t->shape, sizeof d->shape);
    d->mode = t->mode;
    d->stats = t->stats;
}

static void fill_point(align_ctx *c, compare_point *p, const align_tensor *gt,
                       const align_tensor *bt, int kind, const char *stat)
{
    memset(p, 0, sizeof *p);
    const align_side *s = bt ? &c->b : &c->g;
    const align_tensor *t = bt ? bt : gt;
    p->found = true;
    p->rank = c->out->rank;
    p->step = t->step;
    p->seq = t->seq;
    snprintf(p->tensor, sizeof p->tensor, "%s", t->name);
    describe_op(s, t, p->op, sizeof p->op);
    p->kind = kind;
    p->thread = t->thread == THREAD_UNKNOWN ? -1 : (int)t->thread;
    p->leaf = compare_tensor_is_leaf(s, t);
    fill_tensor(&p->golden, &c->g, gt);
    fill_tensor(&p->bad, &c->b, bt);
    snprintf(p->stat, sizeof p->stat, "%s", stat ? stat : "");
}

static void ring_push(align_ctx *c, const align_tensor *gt, const align_tensor *bt)
{
    fill_tensor(&c->ring_g[c->ring_pos], &c->g, gt);
    fill_tensor(&c->ring_b[c->ring_pos], &c->b, bt);
    c->ring_pos = (c->ring_pos + 1) % 4;
    if (c->ring_n < 4)
        c->ring_n++;
}

/* The collective ops of the step before seq on the side s: their count, the
 * last one's name in p->coll. */
static void colls_before(const align_side *s, int64_t seq, compare_point *p)
{
    p->colls_before = 0;
    p->coll[0] = 0;
    for (size_t i = 0; i < s->n_ops; i++) {
        const align_op *op = &s->ops[i];
        if (op->op_kind != TFT_OP_COLLECTIVE || op->seq >= seq)
            continue;
        p->colls_before++;
        compare_copy_text(p->coll, sizeof p->coll, op->name, sizeof p->coll - 1);
    }
}

static void set_first(align_ctx *c, const align_tensor *gt, const align_tensor *bt, int kind,
                      const char *stat)
{
    compare_result *out = c->out;
    fill_point(c, &out->first, gt, bt, kind, stat);
    colls_before(bt ? &c->b : &c->g, bt ? bt->seq : gt->seq, &out->first);
    out->n_context = c->ring_n;
    for (int k = 0; k < c->ring_n; k++) {
        int i = (c->ring_pos - c->ring_n + k + 4) % 4;
        out->context_g[k] = c->ring_g[i];
        out->context_b[k] = c->ring_b[i];
    }
}

static void note_nonfinite(align_ctx *c, const align_tensor *gt, const align_tensor *bt)
{
    compare_nonfinite *nf = &c->out->nonfinite;
    if (nf->found || !bt || !nonfinite_count(bt))
        return;
    nf->found = true;
    nf->rank = c->out->rank;
    nf->step = bt->step;
    nf->seq = bt->seq;
    snprintf(nf->tensor, sizeof nf->tensor, "%s", bt->name);
    describe_op(&c->b, bt, nf->op, sizeof nf->op);
    nf->in_golden = gt && nonfinite_count(gt) > 0;
}

static void set_structure(align_ctx *c, int64_t step, const char *msg)
{
    if (c->out->structure[0])
        return;
    snprintf(c->out->structure, sizeof c->out->structure, "%s", msg);
    c->structure_step = step;
}

/* Reportable edits of a step; leaves (tensors whose op has no inputs:
 * parameters at init, tokens) tell one model from another. */
typedef struct step_tally {
    size_t pairs, ins, del;
    size_t leaves, leaf_shape; /* leaf pairs, those of another shape or dtype */
} step_tally;

static void structure_edit(align_ctx *c, const align_tensor *gt, const align_tensor *bt,
                           const char *prev_g, const char *prev_b, bool trailing, size_t n_trailing)
{
    char msg[256], at[40];
    int64_t step = bt ? bt->step : gt->step;
    core_step_text(step, at, sizeof at);
    if (bt)
        snprintf(msg, sizeof msg, "%.39s: BAD has an extra tensor %.64s %s%.64s", at, bt->name,
                 prev_b ? "after " : "at the start of the step", prev_b ? prev_b : "");
    else if (trailing)
        snprintf(msg, sizeof msg, "%.39s: BAD stops after %.64s; GOLDEN has %zu more tensors in this step, from %.64s",
                 at, prev_b ? prev_b : "the step's start", n_trailing, gt->name);
    else
        snprintf(msg, sizeof msg, "%.39s: BAD lacks tensor %.64s (GOLDEN has it %s%.64s)", at, gt->name,
                 prev_g ? "after " : "at the start of the step", prev_g ? prev_g : "");
    set_structure(c, step, msg);
}

/* Whether t (BAD's) is an optimizer step's output: its op "<Optimizer>.step"
 * (the PyTorch layer's, one per parameter). */
static bool is_optimizer_output(const align_side *s, const align_tensor *t)
{
    if (!t || t->op < 0)
        return false;
    const char *n = base_name(s->ops[t->op].name);
    size_t k = strlen(n);
    return k > 5 && !strcmp(n + k - 5, ".step");
}

/* The round-off model on a pair compare_pair judged (cls): a value
 * difference beyond the fixed tolerance within the envelope becomes a
 * match; every pair of values feeds the envelope. Collective results and
 * shape or dtype changes are left as they are. */
static void judge_roundoff(align_ctx *c, const align_tensor *gt, const align_tensor *bt, int *cls, int kind,
                           char stat[32])
{
    if (!c->o->roundoff && !c->o->noise_out)
        return;
    if (gt->skip || *cls == PC_UNCHECKED || (*cls == PC_DIVERGED && kind != DK_VALUE))
        return;
    uint64_t key = compare_ro_key(&c->ro, gt);
    double d = *cls == PC_IDENTICAL ? 0 : compare_ro_diff(gt, bt), growth[2] = {0, 0};
    bool beyond = *cls == PC_DIVERGED, opt = is_optimizer_output(&c->b, bt);
    if (beyond && c->o->roundoff && compare_ro_explains(&c->ro, key, gt, d, growth)) {
        *cls = PC_WITHIN;
        stat[0] = 0;
    } else if (beyond && c->o->roundoff && opt && !c->out->first.found) {
        c->pend_now = true; /* step_edit keeps it pending */
        snprintf(c->pend_stat, sizeof c->pend_stat, "%s", stat);
        *cls = PC_WITHIN;
        stat[0] = 0;
    }
    compare_ro_note(&c->ro, key, gt, d, *cls != PC_DIVERGED, beyond && !c->pend_now, growth, !c->out->first.found,
                    !opt);
}

/* Ends a pending divergence that the next step did not confirm: an
 * optimizer's noise, counted in the summary. */
static void drop_pending(align_ctx *c)
{
    compare_roundoff *s = &c->out->roundoff;
    if (!c->has_pending)
        return;
    c->has_pending = false;
    if (!s->optimizer_noise++) {
        s->optimizer_noise_step = c->pend.step;
        snprintf(s->optimizer_noise_tensor, sizeof s->optimizer_noise_tensor, "%s", c->pend.tensor);
    }
}

/* The pending divergence becomes the first (and its origin). */
static void take_pending(align_ctx *c)
{
    compare_result *out = c->out;
    out->first = c->pend;
    out->origin = c->pend;
    out->n_context = c->pend_nctx;
    memcpy(out->context_g, c->pend_ctx_g, sizeof out->context_g);
    memcpy(out->context_b, c->pend_ctx_b, sizeof out->context_b);
    c->has_pending = false;
}

void compare_judge_finish(align_ctx *c)
{
    if (c->has_pending && !c->out->first.found && c->pend_step >= c->b.last_step)
        take_pending(c); /* no later step to tell */
    drop_pending(c);
}

/* Handles one edit of the step (a pair, an insertion or a deletion):
 * compares, records the states, updates first/origin/nonfinite/counts. */
static int step_edit(align_ctx *c, const align_tensor *gt, const align_tensor *bt,
                     step_tally *tally, const char *prev_g, const char *prev_b,
                     bool trailing, size_t n_trailing)
{
    compare_result *out = c->out;
    int kind = DK_VALUE, cls;
    char stat[32] = "";
    align_tensor view;
    if (gt && bt) { /* a merged side's tensor as it compares (compare_layout.c) */
        const align_tensor *gv = compare_layout_view(gt, bt, c->nextra + 1, &view);
        bt = gv == gt ? compare_layout_view(bt, gt, c->nextra + 1, &view) : bt;
        gt = gv;
        cls = compare_pair(c->o, gt, bt, &kind, stat);
        judge_roundoff(c, gt, bt, &cls, kind, stat);
    } else {
        cls = PC_DIVERGED;
        kind = bt ? DK_EXTRA : DK_MISSING;
    }
    if (c->pend_now) { /* an optimizer's output beyond the envelope: pending */
        c->pend_now = false;
        if (!c->has_pending) {
            fill_point(c, &c->pend, gt, bt, DK_VALUE, c->pend_stat);
            colls_before(&c->b, bt->seq, &c->pend);
            c->pend_nctx = c->ring_n;
            for (int k = 0; k < c->ring_n; k++) {
                int i = (c->ring_pos - c->ring_n + k + 4) % 4;
                c->pend_ctx_g[k] = c->ring_g[i];
                c->pend_ctx_b[k] = c->ring_b[i];
            }
            c->has_pending = true;
            c->pend_step = bt->step;
        }
    }
    bool diverged = cls == PC_DIVERGED;
    if (diverged && c->has_pending && !out->first.found) { /* the next step parts too: it was one */
        if ((bt ? bt->step : gt->step) <= c->pend_step + 1)
            take_pending(c);
        else
            drop_pending(c);
    }
    if (diverged && compare_match_unverifiable(&c->script, gt, bt)) { /* neither a match nor a divergence: unknown */
        if (bt ? bt->report : gt->report) {
            out->unverified++;
            out->compared += gt && bt;
        }
        return 0;
    }
    if (diverged && !out->origin.found && compare_side_inputs_match(&c->g, gt) && compare_side_inputs_match(&c->b, bt))
        fill_point(c, &out->origin, gt, bt, kind, stat);
    uint8_t st = diverged ? AS_DIVERGED : AS_MATCH;
    int rc = 0;
    if (gt)
        rc = compare_side_set_state(&c->g, gt, st);
    if (rc == 0 && bt)
        rc = compare_side_set_state(&c->b, bt, st);
    if (rc < 0)
        return rc;
    if (!(bt ? bt->report : gt->report))
        return 0;
    if (gt && bt) {
        tally->pairs++;
        out->compared++;
        if (cls == PC_IDENTICAL)
            out->identical++;
        else if (cls == PC_WITHIN)
            out->within_tolerance++;
        else if (cls == PC_UNCHECKED)
            out->shape_only++;
        if (compare_tensor_is_leaf(&c->b, bt)) {
            tally->leaves++;
            tally->leaf_shape += diverged && (kind == DK_SHAPE || kind == DK_DTYPE);
        }
    } else {
        if (bt) {
            tally->ins++;
            out->inserted++;
        } else {
            tally->del += !trailing; /* a truncated last step is not another model */
            out->deleted++;
        }
        structure_edit(c, gt, bt, prev_g, prev_b, trailing, n_trailing);
    }
    if (diverged && !out->first.found)
        set_first(c, gt, bt, kind, stat);
    if (gt && bt)
        ring_push(c, gt, bt);
    note_nonfinite(c, gt, bt);
    return 0;
}

/* Flags two runs of different programs: most leaves of a step (parameters
 * at init) of another shape, or most tensors unmatched.  A shape change
 * downstream of one input (a shorter batch) changes every activation but
 * not the parameters, so only leaves count.  Replaces a structure message
 * of the same step. */
static void check_models(align_ctx *c, int64_t step, const step_tally *t)
{
    size_t total = t->leaves + t->ins + t->del, bad = t->leaf_shape + t->ins + t->del;
    if (c->models_flagged || total < 3 || bad * 2 <= total)
        return;
    c->models_flagged = true;
    if (c->out->structure[0] && c->structure_step != step)
        return;
    c->out->structure[0] = 0;
    char msg[256], at[48];
    snprintf(msg, sizeof msg,
             "%s: GOLDEN and BAD record different tensors (%zu of %zu leaf tensors differ "
             "in shape or dtype, %zu only in BAD, %zu only in GOLDEN): runs of different models?",
             core_step_text(step, at, sizeof at), t->leaf_shape, t->leaves, t->ins, t->del);
    set_structure(c, step, msg);
}

int compare_judge_step(align_ctx *c)
{
    compare_ro_step(&c->ro, c->b.step);
    if (c->has_pending && c->b.step > c->pend_step + 1)
        drop_pending(c);
    int rc = compare_match_step(&c->script, &c->g, &c->b);
    if (rc < 0)
        return rc;
    size_t last_b = SIZE_MAX; /* the last edit with a BAD tensor */
    for (size_t k = 0; k < c->script.n_edits; k++)
        if (c->script.edits[k].b >= 0)
            last_b = k;
    bool bad_last = compare_side_is_last_step(&c->b);
    step_tally tally = {0};
    const char *prev_g = NULL, *prev_b = NULL;
    for (size_t k = 0; rc == 0 && k < c->script.n_edits; k++) {
        const align_tensor *gt = c->script.edits[k].g >= 0 ? &c->g.tensors[c->script.edits[k].g] : NULL;
        const align_tensor *bt = c->script.edits[k].b >= 0 ? &c->b.tensors[c->script.edits[k].b] : NULL;
        bool trailing = bad_last && (last_b == SIZE_MAX || k > last_b);
        rc = step_edit(c, gt, bt, &tally, prev_g, prev_b, trailing, c->script.n_edits - k);
        if (gt)
            prev_g = gt->name;
        if (bt)
            prev_b = bt->name;
    }
    check_models(c, c->b.step, &tally);
    return rc;
}

/* A step only one side has.  Inside the other side's run it is a structural
 * difference (every tensor inserted or deleted); before the other side
 * starts or after it ends it is outside the common range: only BAD's
 * non-finite values are looked for. */
int compare_judge_one_sided(align_ctx *c, bool bad_side, bool gap)
{
    align_side *s = bad_side ? &c->b : &c->g;
    size_t n = 0;
    for (size_t k = 0; k < s->n_tensors; k++)
        n += !s->tensors[k].skip && s->tensors[k].report;
    step_tally tally = {0};
    for (size_t k = 0; k < s->n_tensors; k++) {
        const align_tensor *t = &s->tensors[k];
        if (t->skip)
            continue;
        if (!gap || c->script.lossy) { /* lossy: a whole step may have been lost */
            if (bad_side && t->report)
                note_nonfinite(c, NULL, t);
            c->out->unverified += gap && t->report;
            continue;
        }
        if (n && !c->out->structure[0]) {
            char msg[256], at[48];
            snprintf(msg, sizeof msg, "%s: %s has no records of this step (%s has %zu tensors)",
                     core_step_text(s->step, at, sizeof at), bad_side ? "GOLDEN" : "BAD", bad_side ? "BAD" : "GOLDEN", n);
            set_structure(c, s->step, msg);
        }
        int rc = step_edit(c, bad_side ? NULL : t, bad_side ? t : NULL, &tally, NULL, NULL, false, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

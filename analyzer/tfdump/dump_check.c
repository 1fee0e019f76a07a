/*
 * dump_check.c — tfdump --check: the findings one trace shows on its own,
 * without a GOLDEN: the first non-finite tensor, collective desyncs across
 * ranks (desync/) and leaks (leak/); and the detectors that
 * read the tensor statistics over time (detect.h, docs/CHECK.md),
 * fed in the same pass.
 */
#include "core.h"
#include "core_common.h"
#include "core_spill.h"
#include "dump_internal.h"
#include "tft_drops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef report_check_nonfinite nonfinite;

/* One pass over the rank files, a pool of threads each with one rank file
 * open at a time: every rank's extract for the cross-rank analyses
 * (desyncs, the first non-finite; core_spill.h) and its leaks. */
typedef struct check_scan {
    dump_trace *d;
    diff_spill *sp;
    uint64_t min_bytes;
    leak_finding **leaks;  /* per rank file: its leaks (malloc'd), NULL none */
    int *nleaks;        /* per rank file: how many, or a negative errno */
    tft_drop_sum *drops; /* per rank file: the records it lost */
    detect_rank **chk;     /* per rank file: the detectors' state */
    const detect_opts *copts;
    double clip_cmd;    /* the clip threshold the recorded command line states, 0 unknown */
    desync_stacks *stacks; /* per rank file: its STACK records */
    tft_reader_status *status; /* per rank file: what reading it found (damage, a torn tail) */
} check_scan;

static int scan_one(void *ctx, int i, int worker)
{
    (void)worker;
    check_scan *c = ctx;
    tft_reader *r = tft_trace_reader(c->d->t, i);
    if (!r)
        return errno ? -errno : -EIO;
    core_spill_extractor *x = core_spill_extract_begin(c->sp, r, i);
    leak_scan *ls = leak_scan_new();
    detect_rank *ck = c->chk[i] = detect_rank_new(c->copts, tft_trace_rank_id(c->d->t, i), c->clip_cmd);
    int e = x && ls && ck ? tft_reader_rewind(r) : -ENOMEM;
    const tft_rec *rec;
    tft_drop_sum *ds = &c->drops[i];
    tft_drop_sum_init(ds);
    uint64_t holes = tft_reader_holes(r);
    bool in_hole = false; /* after a damaged chunk: the steps it held are partial */
    int64_t hole_lo = TFT_STEP_NONE, hole_hi = TFT_STEP_NONE;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1) { /* one pass feeds both */
        if (tft_reader_holes(r) != holes) {   /* a damaged chunk skipped: no rule reads across it */
            holes = tft_reader_holes(r);
            in_hole = true;
            if (!tft_reader_hole_steps(r, &hole_lo, &hole_hi))   /* steps unknown: the one it resumed in */
                hole_lo = hole_hi = rec->step;
        }
        if (in_hole && rec->step != TFT_STEP_NONE && hole_hi != TFT_STEP_NONE && rec->step > hole_hi) {
            in_hole = false;   /* past the steps the lost chunks held: every series starts over */
            detect_rank_hole(ck);
        }
        if (rec->kind == TFT_REC_DROPPED)
            tft_drop_sum_add(ds, (const tft_rec_dropped *)rec, rec->len);
        if (rec->kind == TFT_REC_STACK)
            e = desync_stacks_add(&c->stacks[i], r, tft_trace_rank_id(c->d->t, i), rec);
        else if ((e = core_spill_extract_record(x, rec)) == 0 && (e = leak_scan_record(ls, r, rec)) == 0 &&
                 !(in_hole || (hole_lo != TFT_STEP_NONE && rec->step >= hole_lo && rec->step <= hole_hi)))
            e = detect_rank_record(ck, r, rec);   /* records of the lost chunks' steps are partial */
    }
    if (e == 0)
        e = detect_rank_finish(ck);
    if (e == 0) { /* the chunk headers' total is authoritative (FORMAT.md 5.11) */
        tft_reader_status st;
        tft_reader_get_status(r, &st);
        c->status[i] = st;
        if (st.dropped > ds->count)
            ds->unknown += st.dropped - ds->count;
        ds->count = st.dropped > ds->count ? st.dropped : ds->count;
    }
    if (e == 0) {
        leak_finding tmp[64];
        int k = leak_scan_finish(ls, r, tft_trace_rank_id(c->d->t, i), c->min_bytes, tmp, 64, NULL);
        ls = NULL;
        c->nleaks[i] = k;
        if (k > 0 && (c->leaks[i] = malloc((size_t)k * sizeof(*tmp))) != NULL)
            memcpy(c->leaks[i], tmp, (size_t)k * sizeof(*tmp));
        else if (k > 0)
            c->nleaks[i] = -ENOMEM;
    }
    int f = core_spill_extract_end(x, e == 0);
    leak_scan_free(ls);
    tft_trace_release(c->d->t, i);
    return e < 0 ? e : f;
}

/* The first tensor with a NaN or Inf in (step, seq) order across ranks
 * (the order of a merge of the rank files, core_spill.c). */
static void first_nonfinite(const dump_trace *d, const diff_spill *sp, nonfinite *nf)
{
    const core_spill_nonfinite *best = NULL;
    int bi = -1;
    for (int i = 0; i < tft_trace_nranks(d->t); i++) {
        const core_spill_nonfinite *x = core_spill_nonfinite_of(sp, i);
        if (x->found && (!best || x->kstep < best->kstep || (x->kstep == best->kstep && x->kseq < best->kseq))) {
            best = x;
            bi = i;
        }
    }
    if (!best)
        return;
    *nf = (nonfinite){true, tft_trace_rank_id(d->t, bi), best->step, best->seq, "", best->nan, best->inf};
    snprintf(nf->name, sizeof(nf->name), "%s", best->name);
}

/* The rank files' leaks in rank file order, at most max. */
static int gather_leaks(const check_scan *c, int n, leak_finding *out, int max)
{
    int k = 0;
    for (int i = 0; i < n && k < max; i++) {
        if (c->nleaks[i] < 0)
            return c->nleaks[i];
        for (int j = 0; j < c->nleaks[i] && k < max; j++)
            out[k++] = c->leaks[i][j];
    }
    return k;
}

/* What the trace lost, as findings said first: the recording cut short
 * (records lost to write errors, a collector that died) and each rank file
 * that is torn (its tail never written) or has damaged chunks. */
static void damage_findings(const dump_trace *d, const tft_reader_status *st, int n, report_check_result *res)
{
    char why[400];
    if (core_trace_cut(d->t, why, sizeof(why)) && res->ndamage < REPORT_CHECK_DAMAGE_MAX)
        snprintf(res->damage[res->ndamage++], sizeof(res->damage[0]),
                 "the recording was cut short: %s; every rank file ends where writing stopped, and what "
                 "follows covers only what was written", why);
    for (int i = 0; i < n; i++) {
        if (st[i].integrity == TFT_INTACT && !st[i].chunks_bad)
            continue;
        if (res->ndamage == REPORT_CHECK_DAMAGE_MAX) {
            res->damage_more++;
            continue;
        }
        bool damaged = st[i].integrity == TFT_DAMAGED || st[i].chunks_bad;
        const char *file = tft_trace_file_name(d->t, i), *p = st[i].first_problem;
        size_t fl = strlen(file);
        if (!strncmp(p, file, fl) && !strncmp(p + fl, ": ", 2))
            p += fl + 2;   /* the reader's message starts with the path */
        snprintf(res->damage[res->ndamage++], sizeof(res->damage[0]), "rank %d (%s) is %s: %.250s; %s",
                 tft_trace_rank_id(d->t, i), file, damaged ? "damaged" : "torn", p[0] ? p : "no detail",
                 !st[i].records ? "it holds no records"
                 : damaged      ? "the records of its damaged chunks are lost, and no rule reads across them"
                                : "its records end where writing stopped");
    }
}

int dump_check_collect(dump_trace *d, const dump_opts *o, report_check_result *out)
{
    report_check_result *res = out;
    *res = (report_check_result){0};
    int n = tft_trace_nranks(d->t);
    check_scan c = {.d = d, .min_bytes = o->leak_min_bytes, .sp = core_spill_new(n),
                    .leaks = calloc((size_t)n + 1, sizeof(*c.leaks)), .nleaks = calloc((size_t)n + 1, sizeof(int)),
                    .drops = calloc((size_t)n + 1, sizeof(*c.drops)), .chk = calloc((size_t)n + 1, sizeof(*c.chk)),
                    .copts = &o->chk, .clip_cmd = detect_clip_of(tft_trace_manifest(d->t)),
                    .stacks = calloc((size_t)n + 1, sizeof(*c.stacks)),
                    .status = calloc((size_t)n + 1, sizeof(*c.status))};
    res->findings = calloc(DETECT_FIND_MAX, sizeof(*res->findings));
    int e = c.sp && c.leaks && c.nleaks && c.drops && c.chk && c.stacks && c.status && res->findings
                ? core_pool_run(n, core_pool_width(), scan_one, &c)
                : -ENOMEM;
    if (!e)
        e = desync_stacks_merge(&res->stacks, c.stacks, n);
    for (int i = 0; c.stacks && i < n; i++)
        desync_stacks_free(&c.stacks[i]);
    free(c.stacks);
    int nl = 0, nd = 0;
    if (!e) {
        first_nonfinite(d, c.sp, &res->nf);
        nl = gather_leaks(&c, n, res->leaks, 64);
        nd = nl < 0 ? 0 : desync_find_spilled(d->t, c.sp, res->ds, 64);
        res->nfind = detect_merge(c.chk, n, res->findings, DETECT_FIND_MAX);
        for (int i = 0; i < res->nfind; i++) {
            int sev = res->findings[i].severity;
            *(sev == DETECT_ERROR ? &res->nerr : sev == DETECT_WARNING ? &res->nwarn : &res->ninfo) += 1;
        }
    }
    for (int i = 0; c.chk && i < n; i++)
        detect_rank_free(c.chk[i]);
    free(c.chk);
    for (int i = 0; c.leaks && i < n; i++)
        free(c.leaks[i]);
    free(c.leaks);
    free(c.nleaks);
    core_spill_free(c.sp);
    res->drops = c.drops;
    res->nl = nl;
    res->nd = nd;
    if (e)
        free(c.status);
    if (e == -ENOMEM) {
        dump_nomem(o->path, "--check (reading the rank files)");
        return DUMP_USAGE;
    }
    if (e < 0) {
        dump_err("%s: read error while scanning the rank files: %s", o->path, strerror(-e));
        return DUMP_USAGE;
    }
    if (nl == -ENOMEM || nd == -ENOMEM) {
        dump_nomem(o->path, nl == -ENOMEM ? "--check (leaks)" : "--check (desyncs across ranks)");
        return DUMP_USAGE;
    }
    if (nl < 0 || nd < 0) {
        dump_err("%s: read error while scanning allocations and collectives: %s", o->path,
                 strerror(-(nl < 0 ? nl : nd)));
        return DUMP_USAGE;
    }
    for (int i = 0; i < n; i++)
        res->lossy += c.drops[i].count != 0;
    damage_findings(d, c.status, n, res);
    free(c.status);
    return DUMP_OK;
}

/* A --keep-steps trace (FORMAT.md §3.6) has every record of its last steps
 * only: the rules over one-element tensors (loss, lr, grad_norm) judge
 * every step from the scalars kept for all, the others the full steps
 * alone. Said once on stderr (the findings stay as they are). */
static void keep_note(dump_trace *d)
{
    int64_t from = TFT_STEP_NONE;
    for (int i = 0; i < tft_trace_nranks(d->t); i++) {
        tft_reader *r = tft_trace_reader(d->t, i);
        long long keep = 0;
        int64_t first = TFT_STEP_NONE;
        if (r && tft_reader_full_steps(r, &keep, &first, NULL) == 0 && keep && first != TFT_STEP_NONE &&
            (from == TFT_STEP_NONE || first > from))
            from = first;
        tft_trace_release(d->t, i);
    }
    if (from != TFT_STEP_NONE)
        fprintf(stderr, "tfdump: note: a --keep-steps trace: full records from step %lld only; the rules on "
                        "loss, lr, grad_norm and other one-element tensors judge every step (their records are "
                        "kept for all), the others steps %lld.. alone\n", (long long)from, (long long)from);
}

int dump_check(dump_trace *d, const dump_opts *o)
{
    report_check_result res;
    keep_note(d);
    int status = dump_check_collect(d, o, &res);
    if (status) {
        report_check_result_free(&res);
        return status;
    }
    if (o->json) {
        cJSON *j = report_check_json(&res, d->t);
        dump_out_json_line(j);
        cJSON_Delete(j);
    } else {
        report_check_text(stdout, &res, d->t);
    }
    status = report_check_found(&res) ? DUMP_FINDINGS : DUMP_OK;
    report_check_result_free(&res);
    return status;
}

/*
 * tfdiff_rank.c — one job of tfdiff (tfdiff_internal.h): one pass over a
 * BAD rank file and GOLDEN's of the same rank, compare_rank's tap feeding
 * the leak scans and the desync extracts of both, so that every file is
 * decompressed and walked once; or, for a file nothing compares, the tap
 * alone. Runs on the pool's threads, one job per thread at a time.
 */
#include "tfdiff_internal.h"
#include "core_common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_record(void *ctx, int side, const tft_rec *rec)
{
    job_tap *t = ctx;
    int e = t->leak[side] ? leak_scan_record(t->leak[side], t->r[side], rec) : 0;
    if (!e && t->ex[side])
        e = core_spill_extract_record(t->ex[side], rec);
    return e;
}

/* The rest of side's file through the tap (a job that compares nothing). */
static int tap_drain(job_tap *t, int side)
{
    const tft_rec *rec;
    int e;
    while ((e = tft_reader_next(t->r[side], &rec)) == 1)
        if ((e = tap_record(t, side, rec)) < 0)
            break;
    return e < 0 ? e : 0;
}

/* A rank file written with --keep-steps has full records for its last
 * steps only (FORMAT.md §3.6): the comparison of every tensor starts at the
 * first step both sides have in full, and says so once; the steps before
 * it compare their kept scalars (tfdiff_keep.c). Returns the first step
 * compared in full, INT64_MIN when not limited. */
static int64_t keep_limit(tft_reader *g, tft_reader *b, compare_opts *o)
{
    static atomic_bool noted;
    int64_t fg = TFT_STEP_NONE, fb = TFT_STEP_NONE;
    long long kg = 0, kb = 0;
    tft_reader_full_steps(g, &kg, &fg, NULL);
    tft_reader_full_steps(b, &kb, &fb, NULL);
    int64_t from = (kg && fg != TFT_STEP_NONE) ? fg : INT64_MIN;
    if (kb && fb != TFT_STEP_NONE && fb > from)
        from = fb;
    if (from == INT64_MIN || from <= o->step_lo)
        return INT64_MIN;
    o->step_lo = from;
    if (!atomic_exchange(&noted, true))
        fprintf(stderr, "tfdiff: note: a --keep-steps trace: every tensor compared from step %lld on, the steps "
                "both sides have in full; before it, the scalars kept for every step (loss, lr, grad norm)\n",
                (long long)from);
    return from;
}

/* A side cut by its recording (a full disk, a collector that died:
 * core_trace_cut) ends in the middle of its last step: the comparison
 * stops before that step, what both sides have. Returns the last step of
 * the cut side's rank file (why: the reason), TFT_STEP_NONE when not cut. */
static int64_t cut_limit(const tft_trace *t, tft_reader *r, compare_opts *o, char *why, size_t n)
{
    if (!r || !core_trace_cut(t, why, n))
        return TFT_STEP_NONE;
    int64_t last = TFT_STEP_NONE;
    for (size_t i = 0; i < tft_reader_chunk_count(r); i++) {
        const tft_chunk_info *ci = tft_reader_chunk(r, i);
        if (ci && ci->last_step != TFT_STEP_NONE && (last == TFT_STEP_NONE || ci->last_step > last))
            last = ci->last_step;
    }
    if (last != TFT_STEP_NONE && last - 1 < o->step_hi)
        o->step_hi = last - 1;
    return last;
}

/* One pass over the job's files: the comparison (its tap feeding the leak
 * scans and the extracts), or the tap alone. */
static int job_pass(rank_work *w, rank_job *j, job_tap *t)
{
    if (j->leaks && (!(t->leak[1] = leak_scan_new()) || (j->gi >= 0 && !(t->leak[0] = leak_scan_new()))))
        return -ENOMEM;
    if (j->extract_b && !(t->ex[1] = core_spill_extract_begin(w->bsp, t->r[1], j->bi)))
        return -errno;
    if (j->extract_g && !(t->ex[0] = core_spill_extract_begin(w->gsp, t->r[0], j->gi)))
        return -errno;
    if (!j->compare) {
        int e = t->r[0] ? tap_drain(t, 0) : 0;
        return e ? e : t->r[1] ? tap_drain(t, 1) : 0;
    }
    compare_opts o = w->o->d;
    o.noise = j->noise;
    o.tap = tap_record;
    o.tap_ctx = t;
    int64_t lo = o.step_lo, full_from = keep_limit(t->r[0], t->r[1], &o);
    int64_t cut[2];
    char why[2][200];
    for (int s = 0; s < 2; s++)
        cut[s] = cut_limit(s ? w->b : w->g, t->r[s], &o, why[s], sizeof(why[s]));
    keep_scan *ks = NULL;
    if (full_from != INT64_MIN) {
        int64_t hi = o.step_hi != INT64_MAX && o.step_hi < full_from ? o.step_hi + 1 : full_from;
        if (!(ks = tfdiff_keep_begin(t->r[0], t->r[1], lo, hi, &o)))
            return -ENOMEM;
    }
    int e = compare_rank(t->r[0], t->r[1], &o, &j->res);
    j->res.rank = tft_trace_rank_id(w->b, j->bi); /* the rank it is read as */
    tfdiff_keep_end(ks, e ? NULL : &j->res);
    for (int s = 0; s < 2; s++) {
        j->res.cut_step[s] = cut[s];
        snprintf(j->res.cut_why[s], sizeof(j->res.cut_why[s]), "%s", cut[s] != TFT_STEP_NONE ? why[s] : "");
    }
    return e;
}

/* --noise: GOLDEN's rank file against GOLDEN2's of the same rank, into a
 * calibration for the comparison (NULL when GOLDEN2 lacks the rank: the
 * envelope is then the comparison's own). Both readers are released, so
 * the comparison reads GOLDEN afresh. */
static int calibrate(rank_work *w, rank_job *j, compare_noise **out)
{
    tft_trace *n = w->o->noise_trace;
    *out = NULL;
    if (!n || !j->compare || j->gi < 0)
        return 0;
    int rank = tft_trace_rank_id(w->g, j->gi), ni = -1;
    for (int i = 0; i < tft_trace_nranks(n) && ni < 0; i++)
        if (tft_trace_rank_id(n, i) == rank)
            ni = i;
    if (ni < 0)
        return 0;
    tft_reader *g = tft_trace_reader(w->g, j->gi), *g2 = tft_trace_reader(n, ni);
    if (!g || !g2)
        return errno ? -errno : -EIO;
    compare_noise *nz = compare_noise_new();
    if (!nz)
        return -ENOMEM;
    compare_opts o = w->o->d;
    o.roundoff = false;
    o.noise = NULL;
    o.noise_out = nz;
    o.progress = NULL;
    compare_result *res = malloc(sizeof *res);
    int e = res ? compare_rank(g, g2, &o, res) : -ENOMEM;
    free(res);
    tft_trace_release(w->g, j->gi);
    tft_trace_release(n, ni);
    if (e < 0) {
        compare_noise_free(nz);
        return e;
    }
    *out = nz;
    return 0;
}

int tfdiff_job_run(rank_work *w, rank_job *j, leak_scratch *sc)
{
    compare_noise *nz = NULL;
    int ce = calibrate(w, j, &nz);
    if (ce < 0)
        return ce;
    j->noise = nz;
    job_tap t = {.r = {j->gi >= 0 ? tft_trace_reader(w->g, j->gi) : NULL,
                       j->bi >= 0 ? tft_trace_reader(w->b, j->bi) : NULL}};
    if ((j->gi >= 0 && !t.r[0]) || (j->bi >= 0 && !t.r[1])) {
        int e = errno ? -errno : -EIO;
        compare_noise_free(nz);
        j->noise = NULL;
        return e;
    }
    int e = job_pass(w, j, &t);
    if (!e && j->leaks)
        e = tfdiff_job_leaks(w, j, &t, sc);
    for (int side = 0; side < 2; side++) {
        int f = core_spill_extract_end(t.ex[side], e == 0);
        e = e ? e : f;
        leak_scan_free(t.leak[side]);
    }
    compare_noise_free(nz);
    j->noise = NULL;
    return e;
}

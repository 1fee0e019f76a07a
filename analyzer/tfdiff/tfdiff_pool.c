/*
 * tfdiff_pool.c — tfdiff's jobs (tfdiff_internal.h): planned one per rank
 * file in the order the report lists what they find, run on a pool of
 * threads (core_pool.h; under --mpi also over the processes, job j on
 * process j % K) with a progress line on a terminal, their results moved
 * to process 0 and handed to the report in job order — so the report is
 * the same whichever thread or process ran a job. Then the desyncs, from
 * every job's extracts.
 */
#include "core_pool.h"
#include "tfdiff_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A progress line on a terminal for long comparisons, at most twice a
 * second, shared by the rank threads. */
static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
static double progress_last; /* when the last line was written (now_s) */
static int progress_shown;   /* a line was written: the run ends it with a newline */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress(void *ctx, int rank, int64_t step)
{
    (void)ctx;
    double t = now_s();
    if (t - progress_last < 0.5)
        return;
    pthread_mutex_lock(&progress_lock);
    if (t - progress_last >= 0.5) {
        progress_last = t;
        progress_shown = 1;
        fprintf(stderr, "\rtfdiff: rank %d at step %lld   ", rank, (long long)step);
    }
    pthread_mutex_unlock(&progress_lock);
}

void tfdiff_progress_begin(compare_opts *d)
{
    d->progress = progress;
    progress_last = now_s(); /* the first line after half a second: short runs print none */
}

/* The jobs this process runs: j with j % nproc == me. */
static int my_jobs(const rank_work *w)
{
    return (w->njobs - w->me + w->nproc - 1) / w->nproc;
}

static int job_main(void *ctx, int k, int worker)
{
    rank_work *w = ctx;
    int i = k * w->nproc + w->me; /* this process's k-th job */
    rank_job *j = &w->jobs[i];
    j->err = tfdiff_job_run(w, j, &w->scratch[worker]);
    if (j->gi >= 0)
        tft_trace_release(w->g, j->gi);
    if (j->bi >= 0)
        tft_trace_release(w->b, j->bi);
    int done = atomic_fetch_add(&w->done, 1) + 1;
    if (!w->o->quiet && !w->o->json && isatty(2) && w->njobs > 1) {
        pthread_mutex_lock(&progress_lock);
        fprintf(stderr, "\rtfdiff: read %d of %d ranks   ", done, my_jobs(w));
        pthread_mutex_unlock(&progress_lock);
    }
    return j->err;
}

static bool rank_wanted(const tfdiff_opts *o, int rank)
{
    if (!o->nranks)
        return true;
    for (int i = 0; i < o->nranks; i++)
        if (o->ranks[i] == rank)
            return true;
    return false;
}

/* Index of rank `rank` in t, -1 none (tft_trace_open made ranks unique). */
static int rank_index_of(const tft_trace *t, int rank)
{
    for (int k = 0; k < tft_trace_nranks(t); k++)
        if (tft_trace_rank_id(t, k) == rank)
            return k;
    return -1;
}

/* The jobs, in the order the report lists what they find: every BAD rank
 * file (compared when wanted and GOLDEN has its rank), then the GOLDEN rank
 * files no BAD job reads (extracted only). Notes what cannot be compared. */
/* One run on one process against a data-parallel one (docs/TFDIFF.md,
 * "Across layouts"): 1 for BAD's ranks merged, 0 for GOLDEN's, -1 when the
 * traces are not that (both have the same number of ranks, or --ranks). */
static int layout_side(const tfdiff_opts *o, tft_trace *g, tft_trace *b)
{
    int n = tft_trace_nranks(b), ng = tft_trace_nranks(g);
    if (o->nranks || o->mpi)
        return -1;
    if (ng == 1 && n > 1 && rank_index_of(b, tft_trace_rank_id(g, 0)) >= 0)
        return 1;
    if (n == 1 && ng > 1 && rank_index_of(g, tft_trace_rank_id(b, 0)) >= 0)
        return 0;
    return -1;
}

/* Across layouts: every file's leaks and extracts as jobs of their own (no
 * comparison), the comparison of the single run with the merged ranks
 * after them (layout_compare), reported as the single run's rank. */
static rank_job *plan_layout(tft_trace *g, tft_trace *b, int side, diff_report *rep, int *njobs)
{
    int n = tft_trace_nranks(b), ng = tft_trace_nranks(g), k = 0;
    rank_job *jobs = calloc((size_t)(n + ng) + 1, sizeof(*jobs));
    if (!jobs)
        return NULL;
    for (int i = 0; i < n; i++)
        jobs[k++] = (rank_job){.gi = -1, .bi = i, .extract_b = true, .leaks = true};
    for (int gi = 0; gi < ng; gi++)
        jobs[k++] = (rank_job){.gi = gi, .bi = -1, .extract_g = true};
    *njobs = k;
    report_note(rep, "%s ran on one process, %s on %d ranks: its ranks merged into one run of the same global "
                "batch (docs/TFDIFF.md, \"Across layouts\")", side ? "GOLDEN" : "BAD", side ? "BAD" : "GOLDEN",
                side ? n : ng);
    return jobs;
}

/* The comparison of plan_layout, after the jobs: the single run's file
 * with the merged side's rank files, read afresh. Its result goes to the
 * first job (reported as a comparison). */
static int layout_compare(rank_work *w, int side)
{
    tft_trace *single = side ? w->g : w->b, *many = side ? w->b : w->g;
    int nm = tft_trace_nranks(many), r0 = rank_index_of(many, tft_trace_rank_id(single, 0));
    tft_reader **extra = calloc((size_t)nm, sizeof(*extra));
    if (!extra)
        return -ENOMEM;
    int e = 0, ne = 0;
    for (int i = 0; i < nm && !e; i++)
        if (i != r0 && !(extra[ne++] = tft_trace_reader(many, i)))
            e = errno ? -errno : -EIO;
    tft_reader *rs = e ? NULL : tft_trace_reader(single, 0), *rm = e ? NULL : tft_trace_reader(many, r0);
    if (!e && (!rs || !rm))
        e = errno ? -errno : -EIO;
    rank_job *j = &w->jobs[0];
    if (!e) {
        compare_opts o = w->o->d;
        e = compare_rank_layout(side ? rs : rm, side ? rm : rs, extra, ne, side, &o, &j->res);
        j->res.rank = tft_trace_rank_id(single, 0);
        j->compare = e == 0;
    }
    for (int i = 0; i < nm; i++)
        tft_trace_release(many, i);
    tft_trace_release(single, 0);
    free(extra);
    return e;
}

static rank_job *plan_jobs(const tfdiff_opts *o, tft_trace *g, tft_trace *b, diff_report *rep, int *njobs)
{
    int n = tft_trace_nranks(b), ng = tft_trace_nranks(g);
    int side = layout_side(o, g, b);
    if (side >= 0)
        return plan_layout(g, b, side, rep, njobs);
    rank_job *jobs = calloc((size_t)(n + ng) + 1, sizeof(*jobs));
    bool *g_used = calloc((size_t)ng + 1, sizeof(*g_used));
    if (!jobs || !g_used) {
        free(jobs);
        free(g_used);
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        int rank = tft_trace_rank_id(b, i), gi = rank_index_of(g, rank);
        bool wanted = rank_wanted(o, rank);
        rank_job *j = &jobs[k++];
        *j = (rank_job){.gi = -1, .bi = i, .extract_b = true, .leaks = wanted};
        if (wanted && gi < 0)
            report_note(rep, "rank %d is in BAD only", rank);
        if (gi < 0)
            continue;
        if (g_used[gi]) { /* cannot happen after tft_trace_open's checks; never share a reader */
            if (wanted)
                report_note(rep, "rank %d: a second BAD file read as this rank is left out", rank);
            continue;
        }
        g_used[gi] = true;
        j->gi = gi;
        j->compare = wanted;
        j->extract_g = true;
    }
    for (int gi = 0; gi < ng; gi++) {
        int rank = tft_trace_rank_id(g, gi);
        if (!g_used[gi] && rank_index_of(b, rank) < 0 && rank_wanted(o, rank))
            report_incomplete(rep, "rank %d is in GOLDEN only: BAD has no rank file for it", rank);
        if (!g_used[gi])
            jobs[k++] = (rank_job){.gi = gi, .bi = -1, .extract_g = true};
    }
    free(g_used);
    *njobs = k;
    return jobs;
}

/* This process's jobs on a pool of threads. 0 or the first error in job order. */
static int run_jobs(rank_work *w, int per_host)
{
    int width = core_pool_width() / (per_host > 1 ? per_host : 1);
    width = width > 1 ? width : 1;
    w->scratch = calloc((size_t)width, sizeof(*w->scratch));
    int e = w->scratch ? 0 : -ENOMEM;
    for (int k = 0; !e && k < width; k++) {
        leak_scratch *sc = &w->scratch[k];
        sc->gm = (leak_rank_mem){.max_sites = SITES_MAX, .sites = calloc(SITES_MAX, sizeof(leak_site_mem))};
        sc->bm = (leak_rank_mem){.max_sites = SITES_MAX, .sites = calloc(SITES_MAX, sizeof(leak_site_mem))};
        if (!sc->gm.sites || !sc->bm.sites)
            e = -ENOMEM;
    }
    if (!e)
        e = core_pool_run(my_jobs(w), width, job_main, w);
    if ((!w->o->quiet && !w->o->json && isatty(2) && w->njobs > 1) || progress_shown)
        fputc('\n', stderr);
    for (int k = 0; w->scratch && k < width; k++) {
        free(w->scratch[k].gm.sites);
        free(w->scratch[k].bm.sites);
    }
    free(w->scratch);
    w->scratch = NULL;
    return e;
}

/* The jobs' results into the report, in job order: the ranks' comparisons,
 * then the leaks (each rank's, with its note). */
static void report_jobs(const rank_work *w, diff_report *rep)
{
    for (int i = 0; i < w->njobs; i++)
        if (w->jobs[i].compare)
            report_add_rank(rep, &w->jobs[i].res);
    for (int i = 0; i < w->njobs; i++) {
        const rank_job *j = &w->jobs[i];
        for (int k = 0; k < j->nfound; k++)
            report_add_leak(rep, &j->found[k]);
        if (j->nfound && j->bad_dropped)
            report_note(rep, "rank %d: BAD dropped %llu records; a lost FREE leaves its block live at the end",
                        tft_trace_rank_id(w->b, j->bi), (unsigned long long)j->bad_dropped);
    }
}

/* A damaged input (not a torn tail) makes the comparison meaningless. */
static int check_integrity(tft_trace *t, const char *path)
{
    for (int i = 0; i < tft_trace_nranks(t); i++) {
        tft_reader_status st;
        tft_trace_status(t, i, &st);
        if (st.integrity == TFT_DAMAGED) {
            fprintf(stderr, "tfdiff: %s: %s\n", path, st.first_problem[0] ? st.first_problem : "damaged");
            return -1;
        }
    }
    return 0;
}

/* Moves the results of the jobs other processes ran to process 0, and
 * their extracts (--mpi). */
static int gather_jobs(const tfdiff_mpi *mp, rank_work *w)
{
    int e = 0;
    for (int i = 0; i < w->njobs; i++) {
        rank_job *j = &w->jobs[i], copy = *j;
        int owner = i % mp->nproc, m = tfdiff_mpi_move(mp, owner, &copy, sizeof(copy));
        if (mp->me == 0 && owner != 0 && !m) {
            copy.found = NULL;
            if (copy.nfound > 0 && !(copy.found = malloc((size_t)copy.nfound * sizeof(*copy.found))))
                m = -ENOMEM; /* the sender's leaks still come: taken into a scratch copy below */
            *j = copy;
        }
        if (j->nfound > 0) {
            leak_finding scratch[LEAKS_MAX];
            int m2 = tfdiff_mpi_move(mp, owner, j->found ? (void *)j->found : scratch,
                                     (size_t)j->nfound * sizeof(*j->found));
            m = m ? m : m2;
        }
        e = e ? e : m;
    }
    for (int i = 0; i < w->njobs; i++) {
        const rank_job *j = &w->jobs[i];
        int owner = i % mp->nproc, m = 0;
        if (j->extract_b)
            m = tfdiff_mpi_move_extract(mp, owner, w->bsp, j->bi);
        if (j->extract_g)
            m = m ? m : tfdiff_mpi_move_extract(mp, owner, w->gsp, j->gi);
        e = e ? e : m;
    }
    return e;
}

/* Every analysis of GOLDEN vs BAD into rep (process 0's under --mpi; the
 * others' rep stays unused). 0, or the first error (the same on all
 * processes), -EBADMSG when a damaged input was named on stderr. */
int tfdiff_compare_all(const tfdiff_opts *o, tft_trace *g, tft_trace *b, diff_report *rep, const tfdiff_mpi *mp)
{
    rank_work w = {.o = o, .g = g, .b = b, .me = mp->me, .nproc = mp->nproc};
    w.jobs = plan_jobs(o, g, b, rep, &w.njobs);
    w.gsp = core_spill_new(tft_trace_nranks(g));
    w.bsp = core_spill_new(tft_trace_nranks(b));
    int e = w.jobs && w.gsp && w.bsp ? 0 : !w.jobs ? -ENOMEM : errno ? -errno : -EIO;
    double t0 = now_s();
    if (!e)
        e = run_jobs(&w, mp->local);
    int side = layout_side(o, g, b);
    if (!e && side >= 0)
        e = layout_compare(&w, side);
    double t1 = now_s();
    for (int i = 0; !e && i < w.njobs; i++)
        e = i % w.nproc == w.me ? w.jobs[i].err : 0;
    if (!e && (check_integrity(g, o->golden) < 0 || check_integrity(b, o->bad) < 0))
        e = -EBADMSG;
    e = tfdiff_mpi_agree(mp, e);
    if (!e)
        e = tfdiff_mpi_agree(mp, gather_jobs(mp, &w));
    double t2 = now_s();
    if (!e && mp->me == 0)
        report_jobs(&w, rep);
    for (int i = 0; w.jobs && i < w.njobs; i++) /* the report has them: their memory goes before the desyncs' */
        free(w.jobs[i].found);
    free(w.jobs);
    if (!e && mp->me == 0)
        e = tfdiff_desyncs(g, b, w.gsp, w.bsp, rep);
    if (getenv("TFDIFF_TIMES")) /* where the time goes (bench/analyzer) */
        fprintf(stderr, "tfdiff: process %d: ranks %.2f s, gather %.2f s, desyncs %.2f s\n", mp->me, t1 - t0,
                t2 - t1, now_s() - t2);
    core_spill_free(w.gsp);
    core_spill_free(w.bsp);
    return e;
}

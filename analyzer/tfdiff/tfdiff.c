/*
 * tfdiff — compares a GOLDEN and a BAD trace: the first divergent op and
 * its origin, the first non-finite, leaks BAD has and GOLDEN lacks, and
 * collective desyncs. main parses options and wires the analyses
 * (compare_align.c, leak.c, desync.c) to the reports (report.c).
 *
 * Exit status: 0 no difference, 1 differences found, 2 usage or input error.
 * A trace that recorded nothing (a manifest and no rank file: the command
 * died before its first record) is a finding as BAD (1) and unusable as
 * GOLDEN (2).
 */
#include "core.h"
#include "desync.h"
#include "leak.h"
#include "compare.h"
#include "core_common.h"
#include "report.h"
#include "desync_stacks.h"
#include "compare_tensors.h"
#include "report_html.h"
#include "tfdiff_mpi.h"

#include <stdatomic.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tfdiff [options] GOLDEN BAD\n"
            "       tfdiff --tensors [--json] [--rtol X] [--atol X] [--name GLOB] GOLDEN BAD\n"
            "Compares two traces (directories or rank files) recorded by tftrace and reports\n"
            "where BAD parts from GOLDEN: the first divergent op and its origin, the first\n"
            "non-finite value, leaks, and collective desyncs.\n\n"
            "  --json           one JSON object on stdout (schema in docs/TFDIFF.md)\n"
            "  --junit FILE     also write JUnit XML (one case per rank and finding class; a\n"
            "                   failing case's message is the finding, its attachment the\n"
            "                   HTML or Markdown report)\n"
            "  --html FILE      also write the report as one self-contained HTML page (verdict,\n"
            "                   curves of both runs, a heatmap of where the difference starts\n"
            "                   and spreads, the findings' sections; docs/REPORTS.md)\n"
            "  --markdown FILE  also write a short Markdown summary (verdict, first finding,\n"
            "                   findings by class, command lines) for a pull-request comment;\n"
            "                   '-' for stdout, in place of the text report\n"
            "  --rtol X         relative tolerance of statistics (default 1e-4)\n"
            "  --atol X         absolute tolerance (default 1e-6); 0 and 0: any bit differs\n"
            "  --ranks LIST     compare only these ranks (e.g. 0,2)\n"
            "  --steps A:B      compare only steps A..B (A: or :B open)\n"
            "  --name GLOB      compare only tensors whose name matches\n"
            "  --collectives    also compare collective result tensors\n"
            "  --tensors        compare the whole tensors both traces captured (tftrace --capture,\n"
            "                   tftrace replay) element by element: differing count, max/mean\n"
            "                   difference, first indices, and where they lie (rows, columns,\n"
            "                   diagonal, padding); exact unless --rtol/--atol are given\n"
            "  --pad-id N       padding token value in captured `tokens` (default 256, tftrain's)\n"
            "  --mpi            under mpirun -np K: split the rank files over the K processes\n"
            "                   (process 0 writes the report, the same as one process's);\n"
            "                   without mpirun, one process\n"
            "  -q, --quiet      no progress line\n"
            "  -h, --help       this help;  -V, --version\n\n"
            "Exit status: 0 no difference, 1 differences found (also: BAD recorded nothing,\n"
            "a manifest and no rank file), 2 usage or input error (also: GOLDEN recorded nothing),\n"
            "3 incomplete: no difference in what was compared, but not everything could be\n"
            "(records dropped by the recorder, a rank file with no records, a rank BAD lacks).\n");
}

typedef struct opts {
    compare_opts d;
    int json, quiet, tensors, tol_given;
    int mpi;               /* --mpi: split the rank files over the processes of an MPI job */
    double pad_id;
    const char *junit;
    const char *markdown;  /* --markdown FILE, "-" stdout */
    const char *html;      /* --html FILE */
    int argc;              /* the command line as given (getopt permutes argv) */
    char **argv;
    int ranks[64], nranks; /* empty = all */
    const char *golden, *bad;
} opts;

static int parse_steps(const char *s, compare_opts *d)
{
    char *end;
    const char *colon = strchr(s, ':');
    if (!colon) {
        d->step_lo = d->step_hi = strtoll(s, &end, 10);
        return *end || end == s ? -1 : 0;
    }
    if (colon != s) {
        d->step_lo = strtoll(s, &end, 10);
        if (end != colon)
            return -1;
    }
    if (colon[1]) {
        d->step_hi = strtoll(colon + 1, &end, 10);
        if (*end)
            return -1;
    }
    return d->step_lo <= d->step_hi ? 0 : -1;
}

static int parse_double(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0)
        return fprintf(stderr, "tfdiff: %s needs a number >= 0, got '%s'\n", opt, s), -1;
    *out = v;
    return 0;
}

static int parse_ranks(const char *s, opts *o)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long r = strtol(tok, &end, 10);
        if (*end || end == tok || r < 0 || o->nranks == 64)
            return -1;
        o->ranks[o->nranks++] = (int)r;
    }
    return o->nranks ? 0 : -1;
}

static int parse_args(int argc, char **argv, opts *o)
{
    enum { O_JSON = 256, O_JUNIT, O_RTOL, O_ATOL, O_RANKS, O_STEPS, O_NAME, O_COLL, O_TENSORS, O_PAD, O_MPI,
           O_MARKDOWN, O_HTML };
    static const struct option lo[] = {
        {"json", 0, 0, O_JSON}, {"junit", 1, 0, O_JUNIT}, {"rtol", 1, 0, O_RTOL}, {"atol", 1, 0, O_ATOL},
        {"ranks", 1, 0, O_RANKS}, {"steps", 1, 0, O_STEPS}, {"name", 1, 0, O_NAME},
        {"collectives", 0, 0, O_COLL}, {"tensors", 0, 0, O_TENSORS}, {"pad-id", 1, 0, O_PAD},
        {"mpi", 0, 0, O_MPI}, {"markdown", 1, 0, O_MARKDOWN}, {"html", 1, 0, O_HTML},
        {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {0, 0, 0, 0}};
    compare_opts dflt = COMPARE_OPTS_DEFAULT;
    o->d = dflt;
    o->pad_id = 256;
    int c;
    while ((c = getopt_long(argc, argv, "qhV", lo, NULL)) != -1) {
        switch (c) {
        case O_JSON: o->json = 1; break;
        case O_JUNIT: o->junit = optarg; break;
        case O_MARKDOWN: o->markdown = optarg; break;
        case O_HTML: o->html = optarg; break;
        case O_RTOL:
            if (parse_double("--rtol", optarg, &o->d.rtol) < 0)
                return 2;
            o->tol_given = 1;
            break;
        case O_ATOL:
            if (parse_double("--atol", optarg, &o->d.atol) < 0)
                return 2;
            o->tol_given = 1;
            break;
        case O_TENSORS: o->tensors = 1; break;
        case O_PAD:
            if (parse_double("--pad-id", optarg, &o->pad_id) < 0)
                return 2;
            break;
        case O_RANKS:
            if (parse_ranks(optarg, o) < 0)
                return fprintf(stderr, "tfdiff: --ranks needs a list like 0,1, got '%s'\n", optarg), 2;
            break;
        case O_STEPS:
            if (parse_steps(optarg, &o->d) < 0)
                return fprintf(stderr, "tfdiff: --steps needs A:B, A: or :B, got '%s'\n", optarg), 2;
            break;
        case O_NAME: o->d.name_glob = optarg; break;
        case O_COLL: o->d.collectives = true; break;
        case O_MPI: o->mpi = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("tfdiff (tftrace) %s (trace format %s)\n", tft_version(), tft_format_version()); exit(0);
        default: fprintf(stderr, "Try 'tfdiff --help'.\n"); return 2;
        }
    }
    if (o->json && o->markdown && !strcmp(o->markdown, "-"))
        return fprintf(stderr, "tfdiff: --json and --markdown - both write to stdout; give --markdown a file\n"), 2;
    if (argc - optind != 2)
        return fprintf(stderr, "tfdiff: need GOLDEN and BAD traces\nTry 'tfdiff --help'.\n"), 2;
    o->golden = argv[optind];
    o->bad = argv[optind + 1];
    return 0;
}

static void log_stderr(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= TFT_LOG_WARN)
        fprintf(stderr, "tfdiff: %s\n", msg);
}

/* A progress line on a terminal for long comparisons, at most twice a
 * second, shared by the rank threads. */
static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
static double progress_last;
static int progress_shown;

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

/* "needs more memory than allowed (...)": what an allocation failure
 * means to the user, with the limit that caused it. */
static void say_nomem(const char *what)
{
    struct rlimit rl;
    char lim[128] = "the machine is out of memory";
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(lim, sizeof(lim), "the address space is limited to %llu MiB (ulimit -v)",
                 (unsigned long long)(rl.rlim_cur >> 20));
    fprintf(stderr, "tfdiff: %s needs more memory than allowed (%s); raise the limit, or compare fewer ranks "
            "(--ranks)\n", what, lim);
}

/* Every rank file of a trace open at once (the desync analysis merges them)
 * needs a file descriptor each: the soft limit goes up to the hard one. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The work on one BAD rank file (or one GOLDEN rank file BAD lacks): its
 * comparison with GOLDEN's same rank, the leaks of both, and their extracts
 * for the desync analysis (core_spill.h); one pass of each analysis over
 * each file, the files open only while the job runs. Jobs run on a pool of
 * threads (one per CPU) and, under --mpi, over the processes (job j on
 * process j % K); the report takes their results in job order, so it is
 * the same whichever ran where. */
typedef struct rank_job {
    int gi, bi;              /* rank file indices in GOLDEN and BAD, -1 none */
    bool compare;            /* compare gi with bi (compare_rank) */
    bool leaks;              /* leaks of bi (against gi when gi >= 0) */
    bool extract_g, extract_b; /* extracts of gi, bi */
    compare_result res;
    int err;
    leak_finding *found;        /* leaks to report (malloc'd), nfound of them */
    int nfound;
    uint64_t bad_dropped;    /* BAD's records lost, noted when it has leaks */
} rank_job;

/* Per worker thread: the leak scans' site tables (large, reused). */
typedef struct leak_scratch {
    leak_rank_mem gm, bm;
} leak_scratch;

enum { LEAKS_MAX = 64, SITES_MAX = 16384 };

typedef struct rank_work {
    const opts *o;
    tft_trace *g, *b;
    rank_job *jobs;
    int njobs;
    diff_spill *gsp, *bsp;   /* extracts of GOLDEN's and BAD's rank files */
    leak_scratch *scratch;   /* one per worker */
    int me, nproc;           /* this process and their number (--mpi) */
    _Atomic int done;
} rank_work;

/* The exit of rank `rank` from the manifest, for a rank file that has no
 * PROCESS exit record (a launcher that saw the rank die writes it there). */
static void exit_from_manifest(tft_trace *t, int rank, leak_rank_mem *m)
{
    const tft_manifest *man = tft_trace_manifest(t);
    for (int k = 0; man && !m->exit_known && k < man->nranks; k++) {
        if (man->ranks[k].rank != rank || !man->ranks[k].exited)
            continue;
        m->exit_known = true;
        m->exit_code = man->ranks[k].exit_code;
        m->exit_signal = man->ranks[k].signal;
    }
}

/* What reads along with a job's comparison, per side (0 GOLDEN, 1 BAD):
 * the leak scan and the desync extract of each file, fed by compare_rank's
 * tap, so every file is decompressed and walked once. */
typedef struct job_tap {
    tft_reader *r[2];
    leak_scan *leak[2];
    core_spill_extractor *ex[2];
} job_tap;

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

/* Side's growth leaks and what each site holds, from its finished scan. */
static int finish_leaks(job_tap *t, int side, tft_trace *tr, int i, leak_finding *l, int max, leak_rank_mem *m)
{
    int n = leak_scan_finish(t->leak[side], t->r[side], tft_trace_rank_id(tr, i), 0, l, max, m);
    t->leak[side] = NULL;
    if (n >= 0)
        exit_from_manifest(tr, tft_trace_rank_id(tr, i), m);
    return n;
}

/* Leaks of BAD that GOLDEN does not have at the same rank and site: growth
 * GOLDEN lacks, and sites holding far more at BAD's end than at GOLDEN's
 * (leak_compare); a rank in BAD only: its growth leaks. */
static int job_leaks(rank_work *w, rank_job *j, job_tap *t, leak_scratch *sc)
{
    leak_finding gl[LEAKS_MAX], bl[LEAKS_MAX], out[LEAKS_MAX];
    int rank = tft_trace_rank_id(w->b, j->bi);
    int nb = finish_leaks(t, 1, w->b, j->bi, bl, LEAKS_MAX, &sc->bm);
    if (nb < 0)
        return nb;
    const leak_finding *src = bl;
    int n = nb;
    if (j->gi >= 0) {
        int ng = finish_leaks(t, 0, w->g, j->gi, gl, LEAKS_MAX, &sc->gm);
        if (ng < 0)
            return ng;
        n = leak_compare(&sc->gm, gl, ng, &sc->bm, bl, nb, rank, out, LEAKS_MAX);
        src = out;
        j->bad_dropped = n ? sc->bm.dropped : 0;
    }
    if (n > 0 && !(j->found = malloc((size_t)n * sizeof(*j->found))))
        return -ENOMEM;
    if (n > 0)
        memcpy(j->found, src, (size_t)n * sizeof(*j->found));
    j->nfound = n;
    return 0;
}

/* A rank file written with --keep-steps has full records for its last
 * steps only (FORMAT.md §3.6): the comparison starts at the first step both
 * sides have in full, and says so once. */
static void keep_limit(tft_reader *g, tft_reader *b, compare_opts *o)
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
        return;
    o->step_lo = from;
    if (!atomic_exchange(&noted, true))
        fprintf(stderr, "tfdiff: note: a --keep-steps trace: compared from step %lld on, the steps both "
                "sides have in full\n", (long long)from);
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
    o.tap = tap_record;
    o.tap_ctx = t;
    keep_limit(t->r[0], t->r[1], &o);
    int e = compare_rank(t->r[0], t->r[1], &o, &j->res);
    j->res.rank = tft_trace_rank_id(w->b, j->bi); /* the rank it is read as */
    return e;
}

static int job_run(rank_work *w, rank_job *j, leak_scratch *sc)
{
    job_tap t = {.r = {j->gi >= 0 ? tft_trace_reader(w->g, j->gi) : NULL,
                       j->bi >= 0 ? tft_trace_reader(w->b, j->bi) : NULL}};
    if ((j->gi >= 0 && !t.r[0]) || (j->bi >= 0 && !t.r[1]))
        return errno ? -errno : -EIO;
    int e = job_pass(w, j, &t);
    if (!e && j->leaks)
        e = job_leaks(w, j, &t, sc);
    for (int side = 0; side < 2; side++) {
        int f = core_spill_extract_end(t.ex[side], e == 0);
        e = e ? e : f;
        leak_scan_free(t.leak[side]);
    }
    return e;
}

static int job_main(void *ctx, int k, int worker)
{
    rank_work *w = ctx;
    int i = k * w->nproc + w->me; /* this process's k-th job */
    rank_job *j = &w->jobs[i];
    j->err = job_run(w, j, &w->scratch[worker]);
    if (j->gi >= 0)
        tft_trace_release(w->g, j->gi);
    if (j->bi >= 0)
        tft_trace_release(w->b, j->bi);
    int done = atomic_fetch_add(&w->done, 1) + 1;
    if (!w->o->quiet && !w->o->json && isatty(2) && w->njobs > 1) {
        pthread_mutex_lock(&progress_lock);
        fprintf(stderr, "\rtfdiff: read %d of %d ranks   ", done, (w->njobs - w->me + w->nproc - 1) / w->nproc);
        pthread_mutex_unlock(&progress_lock);
    }
    return j->err;
}

static bool rank_wanted(const opts *o, int rank)
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
static rank_job *plan_jobs(const opts *o, tft_trace *g, tft_trace *b, diff_report *rep, int *njobs)
{
    int n = tft_trace_nranks(b), ng = tft_trace_nranks(g);
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
    int mine = (w->njobs - w->me + w->nproc - 1) / w->nproc;
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
        e = core_pool_run(mine, width, job_main, w);
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

/* Desyncs of BAD that GOLDEN does not have (same kind, communicator and
 * collective), from the extracts of every rank file of both. */
static int compare_desyncs(tft_trace *g, tft_trace *b, diff_spill *gsp, diff_spill *bsp, diff_report *rep)
{
    desync_finding bd[64], gd[64];
    int nb = desync_find_spilled(b, bsp, bd, 64);
    if (nb < 0)
        return nb;
    int ng = desync_find_spilled(g, gsp, gd, 64);
    if (ng == -ENOMEM)
        return ng;
    for (int j = 0; j < nb; j++) {
        bool in_golden = false;
        for (int k = 0; k < ng; k++)
            in_golden |= gd[k].kind == bd[j].kind && gd[k].comm == bd[j].comm && gd[k].coll_seq == bd[j].coll_seq;
        if (!in_golden)
            report_add_desync(rep, &bd[j]);
    }
    int nrep;
    report_desyncs(rep, &nrep);
    if (nrep > 0) {   /* a hang: where each rank was, when --timeout took it (FORMAT.md §5.16) */
        desync_stacks st = {0};
        if (desync_stacks_read(b, &st) == 0)
            report_set_stacks(rep, &st);
        desync_stacks_free(&st);
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
static int compare_all(const opts *o, tft_trace *g, tft_trace *b, diff_report *rep, const tfdiff_mpi *mp)
{
    rank_work w = {.o = o, .g = g, .b = b, .me = mp->me, .nproc = mp->nproc};
    w.jobs = plan_jobs(o, g, b, rep, &w.njobs);
    w.gsp = core_spill_new(tft_trace_nranks(g));
    w.bsp = core_spill_new(tft_trace_nranks(b));
    int e = w.jobs && w.gsp && w.bsp ? 0 : !w.jobs ? -ENOMEM : errno ? -errno : -EIO;
    double t0 = now_s();
    if (!e)
        e = run_jobs(&w, mp->local);
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
    w.jobs = NULL;
    if (!e && mp->me == 0)
        e = compare_desyncs(g, b, w.gsp, w.bsp, rep);
    if (getenv("TFDIFF_TIMES")) /* where the time goes (bench/analyzer) */
        fprintf(stderr, "tfdiff: process %d: ranks %.2f s, gather %.2f s, desyncs %.2f s\n", mp->me, t1 - t0,
                t2 - t1, now_s() - t2);
    for (int i = 0; w.jobs && i < w.njobs; i++)
        free(w.jobs[i].found);
    free(w.jobs);
    core_spill_free(w.gsp);
    core_spill_free(w.bsp);
    return e;
}

/* "`CMD` was killed by signal 9 after 0.006 s, before its first record"
 * from what the manifest knows (CMD: what followed tftrace's "--"). */
static void unrecorded_text(const tft_manifest *m, char *buf, size_t n)
{
    char cmd[160] = "";
    int from = 0;
    const char *a0 = m->argc ? strrchr(m->argv[0], '/') : NULL;
    if (m->argc && !strcmp(a0 ? a0 + 1 : m->argv[0], "tftrace"))
        for (int i = 1; i < m->argc && !from; i++)
            from = !strcmp(m->argv[i], "--") ? i + 1 : 0;
    size_t k = 0;
    for (int i = from; i < m->argc && k + 1 < sizeof(cmd); i++) {
        int w = snprintf(cmd + k, sizeof(cmd) - k, "%s%s", i > from ? " " : "", m->argv[i]);
        k = w < 0 || (size_t)w >= sizeof(cmd) - k ? sizeof(cmd) - 1 : k + (size_t)w;
    }
    if (k == sizeof(cmd) - 1)
        memcpy(cmd + sizeof(cmd) - 4, "...", 4);
    char how[64] = "ended (exit status unknown: the run did not finish)", after[48] = "";
    int st = m->exit_status;
    if (st > 128 && st < 128 + 65)
        snprintf(how, sizeof(how), "was killed by signal %d", st - 128);
    else if (st >= 0)
        snprintf(how, sizeof(how), "exited with code %d", st);
    if (m->complete && m->start_ns && m->end_ns >= m->start_ns)
        snprintf(after, sizeof(after), " after %.3f s", (double)(m->end_ns - m->start_ns) * 1e-9);
    snprintf(buf, n, "`%s` %s%s, before its first record (a manifest and no rank file)", cmd, how, after);
}

/* Writes the report in the chosen forms; returns the exit status. g and b:
 * the traces compared, read again for the HTML page (NULL: none). */
static int render(const opts *o, diff_report *rep, tft_trace *g, tft_trace *b)
{
    int code = report_verdict(rep); /* 0 match, 1 diverged, 3 incomplete */
    const char *html = NULL;
    if (o->html && report_html_write(rep, g, b, o->html) < 0) {
        fprintf(stderr, "tfdiff: %s: cannot write the HTML report: %s\n", o->html, strerror(errno));
        code = 2;
    } else {
        html = o->html;
    }
    report_set_outputs(rep, html, o->markdown, o->argc, o->argv);
    bool md_stdout = o->markdown && !strcmp(o->markdown, "-");
    if (o->json)
        report_json(rep, stdout);
    else if (!md_stdout)
        report_text(rep, stdout);
    if (o->markdown && report_markdown(rep, o->markdown) < 0) {
        fprintf(stderr, "tfdiff: %s: cannot write the Markdown summary: %s\n", o->markdown, strerror(errno));
        code = 2;
    }
    if (o->junit && report_junit(rep, o->junit) < 0) {
        fprintf(stderr, "tfdiff: %s: cannot write JUnit XML: %s\n", o->junit, strerror(errno));
        code = 2;
    }
    return code;
}

/* GOLDEN or BAD recorded nothing: GOLDEN is unusable (2), BAD's nothing is
 * a finding (1). Returns -1 when neither is such a trace. */
static int compare_unrecorded(const opts *o)
{
    tft_manifest m = {0};
    char what[400];
    if (core_trace_unrecorded(o->golden, &m)) {
        unrecorded_text(&m, what, sizeof(what));
        fprintf(stderr, "tfdiff: GOLDEN %s recorded nothing: %s; there is nothing to compare BAD with\n",
                o->golden, what);
        tft_manifest_free(&m);
        return 2;
    }
    if (!core_trace_unrecorded(o->bad, &m))
        return -1;
    unrecorded_text(&m, what, sizeof(what));
    int code = 2;
    diff_report *rep = report_new(o->golden, o->bad, &o->d);
    if (rep) {
        report_bad_unrecorded(rep, what, m.exit_status);
        code = render(o, rep, NULL, NULL);
    }
    report_free(rep);
    tft_manifest_free(&m);
    return code;
}

/* The detectors of tfdump --check (docs/CHECK.md) on both traces: BAD's
 * errors and warnings of a kind GOLDEN has none of go to the report. A
 * pass of their own over every rank file of both traces (under --mpi, by
 * process 0 alone, so the report is the same); nothing on no memory. */
static void compare_checks(tft_trace *g, tft_trace *b, diff_report *rep)
{
    detect_opts co = DETECT_OPTS_DEFAULT;
    detect_finding *gf = calloc(DETECT_FIND_MAX, sizeof(*gf)), *bf = calloc(DETECT_FIND_MAX, sizeof(*bf));
    int ng = gf && bf ? detect_trace(g, &co, detect_clip_of(tft_trace_manifest(g)), gf, DETECT_FIND_MAX) : -ENOMEM;
    int nb = ng >= 0 ? detect_trace(b, &co, detect_clip_of(tft_trace_manifest(b)), bf, DETECT_FIND_MAX) : ng;
    for (int i = 0; i < nb; i++) {
        bool in_golden = bf[i].severity == DETECT_INFO;
        for (int k = 0; k < ng && !in_golden; k++)
            in_golden = !strcmp(gf[k].kind, bf[i].kind);
        if (!in_golden)
            report_add_check(rep, &bf[i]);
    }
    free(gf);
    free(bf);
}

/* The comparison the options ask for; returns the exit status. */
static int run(opts *po, const tfdiff_mpi *mp)
{
    opts o = *po;
    int e;
    if (o.tensors) {
        tensors_opts to = {.rtol = o.tol_given ? o.d.rtol : 0, .atol = o.tol_given ? o.d.atol : 0,
                           .name_glob = o.d.name_glob, .pad_id = o.pad_id, .json = o.json, .html = o.html};
        return compare_tensors(o.golden, o.bad, &to, stdout);
    }
    if ((e = compare_unrecorded(&o)) >= 0)
        return e;
    raise_nofile();
    tft_reader_opts ro = TFT_READER_OPTS(.log = log_stderr);
    tft_trace *g = tft_trace_open_lazy(o.golden, &ro);
    tft_trace *b = g ? tft_trace_open_lazy(o.bad, &ro) : NULL;
    if (!g || !b) {
        if (errno == ENOMEM)
            say_nomem(!g ? "opening GOLDEN" : "opening BAD");
        tft_trace_close(g);
        return 2;
    }
    if (!o.quiet && !o.json && isatty(2)) {
        o.d.progress = progress;
        progress_last = now_s(); /* the first line after half a second: short runs print none */
    }
    diff_report *rep = report_new(o.golden, o.bad, &o.d);
    if (!rep) {
        say_nomem("the report");
        tft_trace_close(g);
        tft_trace_close(b);
        return 2;
    }
    e = compare_all(&o, g, b, rep, mp);
    int code = 2;
    if (e == -ENOMEM) {
        say_nomem("comparing GOLDEN and BAD");
    } else if (e) {
        if (e != -EBADMSG)
            fprintf(stderr, "tfdiff: %s\n", strerror(-e));
    } else {
        if (mp->me == 0)
            compare_checks(g, b, rep);
        code = render(&o, rep, g, b);
    }
    report_free(rep);
    tft_trace_close(g);
    tft_trace_close(b);
    return code;
}

int main(int argc, char **argv)
{
    opts o = {0};
    char **argv0 = malloc(((size_t)argc + 1) * sizeof(*argv0));
    if (argv0) {
        memcpy(argv0, argv, ((size_t)argc + 1) * sizeof(*argv0));
        o.argc = argc;
        o.argv = argv0;
    }
    int e = parse_args(argc, argv, &o);
    if (e) {
        free(argv0);
        return e;
    }
    signal(SIGPIPE, SIG_IGN);
    tfdiff_mpi mp = {.nproc = 1, .local = 1};
    if (o.mpi && tfdiff_mpi_start(&mp, &argc, &argv) < 0) {
        free(argv0);
        return 2;
    }
    if (mp.me != 0) { /* process 0 writes the report; the others' stdout stays quiet */
        o.junit = NULL;
        o.markdown = NULL;
        o.html = NULL;
        o.quiet = 1;
        if (!freopen("/dev/null", "w", stdout))
            fclose(stdout);
    }
    int code = run(&o, &mp);
    code = tfdiff_mpi_bcast_int(&mp, code);
    tfdiff_mpi_end(&mp);
    free(argv0);
    return code;
}

/*
 * tfdiff — compares a GOLDEN and a BAD trace: the first divergent op and
 * its origin, the first non-finite, leaks BAD has and GOLDEN lacks, and
 * collective desyncs. main parses options and wires the analyses
 * (diff_align.c, diff_leak.c, diff_desync.c) to the reports (diff_report.c).
 *
 * Exit status: 0 no difference, 1 differences found, 2 usage or input error.
 * A trace that recorded nothing (a manifest and no rank file: the command
 * died before its first record) is a finding as BAD (1) and unusable as
 * GOLDEN (2).
 */
#include "diff.h"
#include "diff_common.h"
#include "diff_report.h"
#include "diff_tensors.h"

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
            "  --junit FILE     also write JUnit XML (one case per rank and finding class)\n"
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
            "  -q, --quiet      no progress line\n"
            "  -h, --help       this help;  -V, --version\n\n"
            "Exit status: 0 no difference, 1 differences found (also: BAD recorded nothing,\n"
            "a manifest and no rank file), 2 usage or input error (also: GOLDEN recorded nothing),\n"
            "3 incomplete: no difference in what was compared, but not everything could be\n"
            "(records dropped by the recorder, a rank file with no records, a rank BAD lacks).\n");
}

typedef struct opts {
    diff_opts d;
    int json, quiet, tensors, tol_given;
    double pad_id;
    const char *junit;
    int ranks[64], nranks; /* empty = all */
    const char *golden, *bad;
} opts;

static int parse_steps(const char *s, diff_opts *d)
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
    enum { O_JSON = 256, O_JUNIT, O_RTOL, O_ATOL, O_RANKS, O_STEPS, O_NAME, O_COLL, O_TENSORS, O_PAD };
    static const struct option lo[] = {
        {"json", 0, 0, O_JSON}, {"junit", 1, 0, O_JUNIT}, {"rtol", 1, 0, O_RTOL}, {"atol", 1, 0, O_ATOL},
        {"ranks", 1, 0, O_RANKS}, {"steps", 1, 0, O_STEPS}, {"name", 1, 0, O_NAME},
        {"collectives", 0, 0, O_COLL}, {"tensors", 0, 0, O_TENSORS}, {"pad-id", 1, 0, O_PAD},
        {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {0, 0, 0, 0}};
    diff_opts dflt = DIFF_OPTS_DEFAULT;
    o->d = dflt;
    o->pad_id = 256;
    int c;
    while ((c = getopt_long(argc, argv, "qhV", lo, NULL)) != -1) {
        switch (c) {
        case O_JSON: o->json = 1; break;
        case O_JUNIT: o->junit = optarg; break;
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
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("tfdiff (tftrace) %s (trace format %s)\n", tft_version(), tft_format_version()); exit(0);
        default: fprintf(stderr, "Try 'tfdiff --help'.\n"); return 2;
        }
    }
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

/* One rank's comparison. Each job has readers of its own, opened by the
 * main thread before the job starts and released after it ended: no
 * reader is ever used by two threads. */
typedef struct rank_job {
    int gi, bi;              /* rank file indices in GOLDEN and BAD */
    tft_reader *g, *b;
    const diff_opts *o;
    diff_opts ko;            /* o limited to the steps both sides have in full (--keep-steps) */
    diff_rank_result res;
    int err;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    j->err = diff_rank(j->g, j->b, j->o, &j->res);
    return NULL;
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

/* A rank file written with --keep-steps has full records for its last
 * steps only (FORMAT.md §3.6): the comparison starts at the first step both
 * sides have in full, and says so once. */
static void keep_limit(rank_job *j)
{
    static bool noted;
    int64_t fg = TFT_STEP_NONE, fb = TFT_STEP_NONE;
    long long kg = 0, kb = 0;
    tft_reader_full_steps(j->g, &kg, &fg, NULL);
    tft_reader_full_steps(j->b, &kb, &fb, NULL);
    int64_t from = (kg && fg != TFT_STEP_NONE) ? fg : INT64_MIN;
    if (kb && fb != TFT_STEP_NONE && fb > from)
        from = fb;
    if (from == INT64_MIN || from <= j->o->step_lo)
        return;
    j->ko = *j->o;
    j->ko.step_lo = from;
    j->o = &j->ko;
    if (!noted)
        fprintf(stderr, "tfdiff: note: a --keep-steps trace: compared from step %lld on, the steps both "
                "sides have in full\n", (long long)from);
    noted = true;
}

/* Runs jobs[base, top): one thread each (inline when a thread cannot be
 * made), then releases their readers. */
static int run_batch(tft_trace *g, tft_trace *b, rank_job *jobs, pthread_t *th, int base, int top)
{
    int e = 0;
    bool *started = calloc((size_t)(top - base), sizeof(*started));
    if (!started)
        return -ENOMEM;
    for (int i = base; i < top; i++) {
        jobs[i].g = tft_trace_reader(g, jobs[i].gi);
        jobs[i].b = jobs[i].g ? tft_trace_reader(b, jobs[i].bi) : NULL;
        if (!jobs[i].g || !jobs[i].b) {
            jobs[i].err = errno ? -errno : -EIO;
            continue;
        }
        keep_limit(&jobs[i]);
        started[i - base] = pthread_create(&th[i], NULL, rank_main, &jobs[i]) == 0;
        if (!started[i - base])
            rank_main(&jobs[i]);
    }
    for (int i = base; i < top; i++) {
        if (started[i - base])
            pthread_join(th[i], NULL);
        jobs[i].res.rank = tft_trace_rank_id(b, jobs[i].bi); /* the rank it is read as */
        tft_trace_release(g, jobs[i].gi);
        tft_trace_release(b, jobs[i].bi);
        if (jobs[i].err && !e)
            e = jobs[i].err;
    }
    free(started);
    return e;
}

/* Pairs the ranks of both traces and compares them, one thread per CPU at
 * a time: memory is two readers (two chunks) and one step per side per
 * thread, whatever the rank count. */
static int compare_ranks(const opts *o, tft_trace *g, tft_trace *b, diff_report *rep)
{
    int n = tft_trace_nranks(b);
    rank_job *jobs = calloc((size_t)n + 1, sizeof(*jobs));
    pthread_t *th = calloc((size_t)n + 1, sizeof(*th));
    bool *g_used = calloc((size_t)tft_trace_nranks(g) + 1, sizeof(*g_used));
    if (!jobs || !th || !g_used) {
        free(jobs);
        free(th);
        free(g_used);
        return -ENOMEM;
    }
    int njobs = 0, e = 0;
    for (int i = 0; i < n; i++) {
        int rank = tft_trace_rank_id(b, i), gi = rank_index_of(g, rank);
        if (!rank_wanted(o, rank))
            continue;
        if (gi < 0) {
            report_note(rep, "rank %d is in BAD only", rank);
            continue;
        }
        if (g_used[gi]) { /* cannot happen after tft_trace_open's checks; never share a reader */
            report_note(rep, "rank %d: a second BAD file read as this rank is left out", rank);
            continue;
        }
        g_used[gi] = true;
        jobs[njobs] = (rank_job){.gi = gi, .bi = i, .o = &o->d};
        njobs++;
    }
    for (int k = 0; k < tft_trace_nranks(g); k++) {
        int rank = tft_trace_rank_id(g, k), found = 0;
        for (int i = 0; i < n && !found; i++)
            found = tft_trace_rank_id(b, i) == rank;
        if (!found && rank_wanted(o, rank))
            report_incomplete(rep, "rank %d is in GOLDEN only: BAD has no rank file for it", rank);
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int width = ncpu > 1 ? (int)ncpu : 1;
    for (int base = 0; base < njobs; base += width) {
        int top = base + width < njobs ? base + width : njobs;
        int be = run_batch(g, b, jobs, th, base, top);
        if (be && !e)
            e = be;
        if (!o->quiet && !o->json && isatty(2) && njobs > 1)
            fprintf(stderr, "\rtfdiff: compared %d of %d ranks", top, njobs);
    }
    if ((!o->quiet && !o->json && isatty(2) && njobs > 1) || progress_shown)
        fputc('\n', stderr);
    for (int i = 0; i < njobs; i++)
        report_add_rank(rep, &jobs[i].res);
    free(jobs);
    free(th);
    free(g_used);
    return e;
}

/* The exit of rank `rank` from the manifest, for a rank file that has no
 * PROCESS exit record (a launcher that saw the rank die writes it there). */
static void exit_from_manifest(tft_trace *t, int rank, diff_rank_mem *m)
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

/* Reads rank i of t once: its growth leaks and what each site holds. */
static int scan_leaks(tft_trace *t, int i, diff_leak *l, int max, diff_rank_mem *m)
{
    tft_reader *r = tft_trace_reader(t, i);
    if (!r)
        return errno ? -errno : -EIO;
    tft_reader_rewind(r);
    int n = diff_leaks_mem(r, tft_trace_rank_id(t, i), 0, l, max, m);
    tft_trace_release(t, i);
    if (n >= 0)
        exit_from_manifest(t, tft_trace_rank_id(t, i), m);
    return n;
}

/* Leaks of BAD that GOLDEN does not have at the same rank and site: growth
 * GOLDEN lacks, and sites holding far more at BAD's end than at GOLDEN's
 * (diff_leaks_compare). */
enum { LEAKS_MAX = 64, SITES_MAX = 16384 };
static int compare_leaks(const opts *o, tft_trace *g, tft_trace *b, diff_report *rep)
{
    diff_leak gl[LEAKS_MAX], bl[LEAKS_MAX], out[LEAKS_MAX];
    diff_rank_mem gm = {.max_sites = SITES_MAX}, bm = {.max_sites = SITES_MAX};
    gm.sites = calloc(SITES_MAX, sizeof(*gm.sites));
    bm.sites = calloc(SITES_MAX, sizeof(*bm.sites));
    int e = gm.sites && bm.sites ? 0 : -ENOMEM;
    for (int i = 0; !e && i < tft_trace_nranks(b); i++) {
        int rank = tft_trace_rank_id(b, i), gi = rank_index_of(g, rank);
        if (!rank_wanted(o, rank))
            continue;
        int nb = scan_leaks(b, i, bl, LEAKS_MAX, &bm);
        if (nb >= 0 && gi < 0) { /* a rank in BAD only (noted by compare_ranks): its growth leaks */
            for (int j = 0; j < nb; j++)
                report_add_leak(rep, &bl[j]);
            continue;
        }
        int ng = nb < 0 ? 0 : scan_leaks(g, gi, gl, LEAKS_MAX, &gm);
        if (nb < 0 || ng < 0) {
            e = nb < 0 ? nb : ng;
            break;
        }
        int n = diff_leaks_compare(&gm, gl, ng, &bm, bl, nb, rank, out, LEAKS_MAX);
        for (int j = 0; j < n; j++)
            report_add_leak(rep, &out[j]);
        if (n && bm.dropped)
            report_note(rep, "rank %d: BAD dropped %llu records; a lost FREE leaves its block live at the end",
                        rank, (unsigned long long)bm.dropped);
    }
    free(gm.sites);
    free(bm.sites);
    return e;
}

static void release_all(tft_trace *t)
{
    for (int i = 0; i < tft_trace_nranks(t); i++)
        tft_trace_release(t, i);
}

/* The desync analysis merges every rank file of a trace: one chunk per
 * rank file of BAD, then of GOLDEN, is in memory at once. */
static int compare_desyncs(tft_trace *g, tft_trace *b, diff_report *rep)
{
    diff_desync bd[64], gd[64];
    int nb = diff_desyncs(b, bd, 64);
    release_all(b);
    if (nb < 0)
        return nb;
    int ng = diff_desyncs(g, gd, 64);
    release_all(g);
    if (ng == -ENOMEM)
        return ng;
    for (int j = 0; j < nb; j++) {
        bool in_golden = false;
        for (int k = 0; k < ng; k++)
            in_golden |= gd[k].kind == bd[j].kind && gd[k].comm == bd[j].comm && gd[k].coll_seq == bd[j].coll_seq;
        if (!in_golden)
            report_add_desync(rep, &bd[j]);
    }
    return 0;
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

/* Writes the report in the chosen forms; returns the exit status. */
static int render(const opts *o, diff_report *rep)
{
    int code = report_verdict(rep); /* 0 match, 1 diverged, 3 incomplete */
    if (o->json)
        report_json(rep, stdout);
    else
        report_text(rep, stdout);
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
    if (trace_unrecorded(o->golden, &m)) {
        unrecorded_text(&m, what, sizeof(what));
        fprintf(stderr, "tfdiff: GOLDEN %s recorded nothing: %s; there is nothing to compare BAD with\n",
                o->golden, what);
        tft_manifest_free(&m);
        return 2;
    }
    if (!trace_unrecorded(o->bad, &m))
        return -1;
    unrecorded_text(&m, what, sizeof(what));
    int code = 2;
    diff_report *rep = report_new(o->golden, o->bad, &o->d);
    if (rep) {
        report_bad_unrecorded(rep, what, m.exit_status);
        code = render(o, rep);
    }
    report_free(rep);
    tft_manifest_free(&m);
    return code;
}

int main(int argc, char **argv)
{
    opts o = {0};
    int e = parse_args(argc, argv, &o);
    if (e)
        return e;
    signal(SIGPIPE, SIG_IGN);
    if (o.tensors) {
        tensors_opts to = {.rtol = o.tol_given ? o.d.rtol : 0, .atol = o.tol_given ? o.d.atol : 0,
                           .name_glob = o.d.name_glob, .pad_id = o.pad_id, .json = o.json};
        return tensors_compare(o.golden, o.bad, &to, stdout);
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
    e = compare_ranks(&o, g, b, rep);
    if (!e)
        e = compare_leaks(&o, g, b, rep);
    if (!e)
        e = compare_desyncs(g, b, rep);
    if (!e && (check_integrity(g, o.golden) < 0 || check_integrity(b, o.bad) < 0))
        e = -EBADMSG;
    int code = 2;
    if (e == -ENOMEM) {
        say_nomem("comparing GOLDEN and BAD");
    } else if (e) {
        if (e != -EBADMSG)
            fprintf(stderr, "tfdiff: %s\n", strerror(-e));
    } else {
        code = render(&o, rep);
    }
    report_free(rep);
    tft_trace_close(g);
    tft_trace_close(b);
    return code;
}

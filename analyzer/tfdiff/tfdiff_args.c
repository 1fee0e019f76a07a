/*
 * tfdiff_args.c — tfdiff's command line (tfdiff_internal.h): --help, the
 * options into a tfdiff_opts, and the messages for the wrong ones (exit
 * status 2).
 */
#include "tfdiff_internal.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            "  --tensorboard DIR  also write both runs for TensorBoard: DIR/golden and\n"
            "                   DIR/bad (loss, lr, grad norm, each tensor's std and abs-max\n"
            "                   per step; the report as a text in BAD's run), so that\n"
            "                   tensorboard --logdir DIR overlays their curves\n"
            "  --markdown FILE  also write a short Markdown summary (verdict, first finding,\n"
            "                   findings by class, command lines) for a pull-request comment;\n"
            "                   '-' for stdout, in place of the text report\n"
            "  --rtol X         relative tolerance of statistics (default 1e-4, for 16-bit\n"
            "                   floats 4 of their epsilon); given, it alone decides: the\n"
            "                   round-off model is off\n"
            "  --atol X         absolute tolerance (default 1e-6); 0 and 0: any bit differs\n"
            "  --noise GOLDEN2  GOLDEN run again with the setup's nondeterminism (another\n"
            "                   thread count, tftrace --perturb): how far GOLDEN and GOLDEN2\n"
            "                   differ, per tensor and step, widens the round-off envelope\n"
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
            "Differences beyond the tolerance that stay within the envelope of round-off (a\n"
            "tensor's own difference in earlier steps, the run's so far) are a match: two\n"
            "runs apart only by the order of floating-point operations exit 0, and say so.\n\n"
            "Exit status: 0 no difference, 1 differences found (also: BAD recorded nothing,\n"
            "a manifest and no rank file), 2 usage or input error (also: GOLDEN recorded nothing),\n"
            "3 incomplete: no difference in what was compared, but not everything could be\n"
            "(records dropped by the recorder, a rank file with no records, a rank BAD lacks).\n");
}

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

static int parse_ranks(const char *s, tfdiff_opts *o)
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

int tfdiff_parse_args(int argc, char **argv, tfdiff_opts *o)
{
    enum { O_JSON = 256, O_JUNIT, O_RTOL, O_ATOL, O_RANKS, O_STEPS, O_NAME, O_COLL, O_TENSORS, O_PAD, O_MPI,
           O_MARKDOWN, O_HTML, O_NOISE, O_TB };
    static const struct option lo[] = {
        {"json", 0, 0, O_JSON}, {"junit", 1, 0, O_JUNIT}, {"rtol", 1, 0, O_RTOL}, {"atol", 1, 0, O_ATOL},
        {"ranks", 1, 0, O_RANKS}, {"steps", 1, 0, O_STEPS}, {"name", 1, 0, O_NAME},
        {"collectives", 0, 0, O_COLL}, {"tensors", 0, 0, O_TENSORS}, {"pad-id", 1, 0, O_PAD},
        {"mpi", 0, 0, O_MPI}, {"markdown", 1, 0, O_MARKDOWN}, {"html", 1, 0, O_HTML}, {"noise", 1, 0, O_NOISE},
        {"tensorboard", 1, 0, O_TB}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
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
        case O_TB: o->tensorboard = optarg; break;
        case O_RTOL:
            if (parse_double("--rtol", optarg, &o->d.rtol) < 0)
                return 2;
            o->tol_given = 1;
            o->d.roundoff = false;
            break;
        case O_ATOL:
            if (parse_double("--atol", optarg, &o->d.atol) < 0)
                return 2;
            o->tol_given = 1;
            o->d.roundoff = false;
            break;
        case O_NOISE: o->noise = optarg; break;
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
        case 'h': usage(stdout); return -1;
        case 'V': printf("tfdiff (tftrace) %s (trace format %s)\n", tft_version(), tft_format_version()); return -1;
        default: fprintf(stderr, "Try 'tfdiff --help'.\n"); return 2;
        }
    }
    if (o->json && o->markdown && !strcmp(o->markdown, "-"))
        return fprintf(stderr, "tfdiff: --json and --markdown - both write to stdout; give --markdown a file\n"), 2;
    if (argc - optind != 2)
        return fprintf(stderr, "tfdiff: need GOLDEN and BAD traces\nTry 'tfdiff --help'.\n"), 2;
    if (o->noise && (o->tol_given || o->tensors))
        return fprintf(stderr, "tfdiff: --noise calibrates the round-off model, which --rtol, --atol and "
                       "--tensors turn off\n"), 2;
    o->golden = argv[optind];
    o->bad = argv[optind + 1];
    return 0;
}

/*
 * tfdiff — compares a GOLDEN and a BAD trace: the first divergent op and
 * its origin, the first non-finite, leaks BAD has and GOLDEN lacks, and
 * collective desyncs. main parses options and wires the parts
 * (tfdiff_internal.h lists them) to the analyses (compare/, leak/,
 * desync/, detect/) and the reports (report/).
 *
 * Exit status: 0 no difference, 1 differences found, 2 usage or input error.
 * A trace that recorded nothing (a manifest and no rank file: the command
 * died before its first record) is a finding as BAD (1) and unusable as
 * GOLDEN (2).
 */
#include "core_escape.h"
#include "core_common.h"
#include "report_tensors.h"
#include "tfdiff_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_stderr(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= TFT_LOG_WARN)
        fprintf(stderr, "tfdiff: %s\n", msg);
}

/* "needs more memory than allowed (...)": what an allocation failure
 * means to the user, with the limit that caused it. */
static void say_nomem(const char *what)
{
    char lim[128];
    fprintf(stderr, "tfdiff: %s needs more memory than allowed (%s); raise the limit, or compare fewer ranks "
            "(--ranks)\n", what, core_memory_limit(lim, sizeof(lim)));
}

/* The comparison the options ask for; returns the exit status. */
static int run(tfdiff_opts *po, const tfdiff_mpi *mp)
{
    tfdiff_opts o = *po;
    int e;
    if (o.tensors) {
        tensors_opts to = {.rtol = o.tol_given ? o.d.rtol : 0, .atol = o.tol_given ? o.d.atol : 0,
                           .name_glob = o.d.name_glob, .pad_id = o.pad_id, .json = o.json, .html = o.html};
        compare_tensors_result tr;
        int st = compare_tensors_run(o.golden, o.bad, &to, &tr);
        if (!st)
            st = report_tensors(&tr, o.golden, o.bad, &to, stdout);
        compare_tensors_free(&tr);
        return st;
    }
    if ((e = tfdiff_unrecorded(&o)) >= 0)
        return e;
    core_raise_nofile(); /* the desync analysis merges every rank file */
    tft_reader_opts ro = TFT_READER_OPTS(.log = log_stderr);
    tft_trace *g = tft_trace_open_lazy(o.golden, &ro);
    tft_trace *b = g ? tft_trace_open_lazy(o.bad, &ro) : NULL;
    if (!g || !b) {
        if (errno == ENOMEM)
            say_nomem(!g ? "opening GOLDEN" : "opening BAD");
        tft_trace_close(g);
        return 2;
    }
    if (o.noise && !(o.noise_trace = tft_trace_open_lazy(o.noise, &ro))) {
        if (errno == ENOMEM)
            say_nomem("opening GOLDEN2 (--noise)");
        tft_trace_close(g);
        tft_trace_close(b);
        return 2;
    }
    if (!o.quiet && !o.json && isatty(2))
        tfdiff_progress_begin(&o.d);
    diff_report *rep = report_new(o.golden, o.bad, &o.d);
    if (!rep) {
        say_nomem("the report");
        tft_trace_close(g);
        tft_trace_close(b);
        tft_trace_close(o.noise_trace);
        return 2;
    }
    e = tfdiff_compare_all(&o, g, b, rep, mp);
    int code = 2;
    if (e == -ENOMEM) {
        say_nomem("comparing GOLDEN and BAD");
    } else if (e) {
        if (e != -EBADMSG)
            fprintf(stderr, "tfdiff: %s\n", strerror(-e));
    } else {
        if (mp->me == 0)
            tfdiff_checks(g, b, rep);
        code = tfdiff_render(&o, rep, g, b);
    }
    report_free(rep);
    tft_trace_close(g);
    tft_trace_close(b);
    tft_trace_close(o.noise_trace);
    return code;
}

int main(int argc, char **argv)
{
    tfdiff_opts o = {0};
    char **argv0 = malloc(((size_t)argc + 1) * sizeof(*argv0));
    if (argv0) {
        memcpy(argv0, argv, ((size_t)argc + 1) * sizeof(*argv0));
        o.argc = argc;
        o.argv = argv0;
    }
    int e = tfdiff_parse_args(argc, argv, &o);
    if (e) {
        free(argv0);
        return e < 0 ? 0 : e; /* -1: --help or --version shown */
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
    /* strings from the traces never reach the output raw */
    if (mp.me == 0)
        core_escape_stdout(o.json);
    int code = run(&o, &mp);
    code = tfdiff_mpi_bcast_int(&mp, code);
    tfdiff_mpi_end(&mp);
    free(argv0);
    return code;
}

/*
 * tfdiff_output.c — tfdiff's report written (tfdiff_internal.h): text or
 * JSON on stdout, and the HTML page, the Markdown summary and JUnit XML
 * where asked; and the report of a comparison with a trace that recorded
 * nothing (a manifest and no rank file).
 */
#include "core_common.h"
#include "export_tensorboard.h"
#include "report_html.h"
#include "tfdiff_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
    int code, sig;
    uint64_t ns;
    bool known = core_manifest_exit(m, &code, &sig);
    if (known && sig)
        snprintf(how, sizeof(how), "was killed by signal %d", sig);
    else if (known)
        snprintf(how, sizeof(how), "exited with code %d", code);
    if (core_manifest_duration(m, &ns))
        snprintf(after, sizeof(after), " after %.3f s", (double)ns * 1e-9);
    snprintf(buf, n, "`%s` %s%s, before its first record (a manifest and no rank file)", cmd, how, after);
}

/* Writes the report in the chosen forms; returns the exit status. g and b:
 * the traces compared, read again for the HTML page (NULL: none). */
/* Why an output file could not be written (core_out_open's ELOOP: a link
 * of another user's at its path). */
static const char *out_error(int e)
{
    return e == ELOOP ? "a symbolic link of another user: not written through; remove it or give another path"
                      : strerror(e);
}

static void tb_say(void *ctx, int level, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "tfdiff: %s%s\n", level == TFT_LOG_WARN ? "warning: " : "", msg);
}

/* --tensorboard DIR: GOLDEN as DIR/golden, BAD as DIR/bad with the text
 * report. 0, or -1 after saying why. */
static int tensorboard(const tfdiff_opts *o, diff_report *rep, tft_trace *g, tft_trace *b)
{
    char dir[2][4096];
    if ((size_t)snprintf(dir[0], sizeof(dir[0]), "%s/golden", o->tensorboard) >= sizeof(dir[0]) ||
        (size_t)snprintf(dir[1], sizeof(dir[1]), "%s/bad", o->tensorboard) >= sizeof(dir[1])) {
        fprintf(stderr, "tfdiff: %s: path too long\n", o->tensorboard);
        return -1;
    }
    char *text = NULL, *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        report_text(rep, f);
        fclose(f);
    }
    md = text ? export_tb_markdown_block(text) : NULL;
    free(text);
    if (!md) {
        fprintf(stderr, "tfdiff: out of memory writing the TensorBoard runs\n");
        return -1;
    }
    export_opts eo = {.out = o->tensorboard, .mode = 0600, .rank = -1, .log = tb_say};
    int e = mkdir(o->tensorboard, 0700) == 0 || errno == EEXIST ? 0 : -1;
    if (e)
        fprintf(stderr, "tfdiff: %s: cannot make the directory: %s\n", o->tensorboard, strerror(errno));
    eo.path = o->golden;
    if (!e)
        e = export_tensorboard(g, &eo, dir[0], NULL, NULL, TFT_STEP_NONE);
    eo.path = o->bad;
    if (!e)
        e = export_tensorboard(b, &eo, dir[1], "tftrace/tfdiff", md, report_first_step(rep));
    free(md);
    if (e == -ENOMEM)
        fprintf(stderr, "tfdiff: out of memory writing the TensorBoard runs\n");
    return e ? -1 : 0;
}

int tfdiff_render(const tfdiff_opts *o, diff_report *rep, tft_trace *g, tft_trace *b)
{
    int code = report_verdict(rep); /* 0 match, 1 diverged, 3 incomplete */
    const char *html = NULL;
    if (o->html && report_html_write(rep, g, b, o->html) < 0) {
        fprintf(stderr, "tfdiff: %s: cannot write the HTML report: %s\n", o->html, out_error(errno));
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
        fprintf(stderr, "tfdiff: %s: cannot write the Markdown summary: %s\n", o->markdown, out_error(errno));
        code = 2;
    }
    if (o->junit && report_junit(rep, o->junit) < 0) {
        fprintf(stderr, "tfdiff: %s: cannot write JUnit XML: %s\n", o->junit, out_error(errno));
        code = 2;
    }
    if (o->tensorboard && g && b && tensorboard(o, rep, g, b) < 0)
        code = 2;
    return code;
}

/* GOLDEN or BAD recorded nothing: GOLDEN is unusable (2), BAD's nothing is
 * a finding (1). Returns -1 when neither is such a trace. */
int tfdiff_unrecorded(const tfdiff_opts *o)
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
        code = tfdiff_render(o, rep, NULL, NULL);
    }
    report_free(rep);
    tft_manifest_free(&m);
    return code;
}

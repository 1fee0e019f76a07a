/*
 * report_markdown.c — tfdiff --markdown FILE: a short summary of the report
 * for a pull-request comment or a CI job summary (GitHub's
 * $GITHUB_STEP_SUMMARY, a GitLab merge-request note): the verdict, the first
 * finding, a table of findings by class, the tensors compared, the command
 * lines (tfdiff's and the two recordings'), and where the HTML report is
 * when one was written. Everything comes from diff_report's data.
 *
 * Names inside the traces (tensors, sites, commands) are untrusted text:
 * they go into code spans whose fence is longer than any backtick run in
 * them, with line breaks and other control characters turned into spaces
 * and '|' escaped inside the table, so no trace can inject Markdown or HTML.
 */
#include "core_out.h"
#include "report_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Text as one Markdown code span (no control characters, '|' escaped
 * when in_table). */
static void md_code(FILE *f, const char *s, bool in_table)
{
    size_t run = 0, longest = 0;
    for (const char *p = s; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    size_t fence = longest + 1;
    for (size_t i = 0; i < fence; i++)
        fputc('`', f);
    if (s[0] == '`' || (s[0] && s[strlen(s) - 1] == '`'))
        fputc(' ', f);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f)
            fputc(' ', f);
        else if (c == '|' && in_table)
            fputs("\\|", f);
        else
            fputc(c, f);
    }
    if (s[0] == '`' || (s[0] && s[strlen(s) - 1] == '`'))
        fputc(' ', f);
    for (size_t i = 0; i < fence; i++)
        fputc('`', f);
}

/* Prose from report sentences: the characters Markdown or HTML would
 * interpret are escaped, control characters become spaces. */
static void md_text(FILE *f, const char *s)
{
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f)
            fputc(' ', f);
        else if (strchr("\\`*_[]<>#|~", c))
            fprintf(f, "\\%c", c);
        else if (c == '&')
            fputs("&amp;", f);
        else
            fputc(c, f);
    }
}

/* A command line as one shell-quoted string (single quotes where needed). */
static void shell_line(char *buf, size_t n, int argc, char *const *argv)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < argc && k + 1 < n; i++) {
        const char *a = argv[i] ? argv[i] : "";
        bool plain = a[0] != '\0';
        for (const char *p = a; *p && plain; p++)
            plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+%", *p) != NULL;
        if (i && k + 1 < n)
            buf[k++] = ' ';
        if (plain) {
            for (const char *p = a; *p && k + 1 < n; p++)
                buf[k++] = *p;
            continue;
        }
        if (k + 1 < n)
            buf[k++] = '\'';
        for (const char *p = a; *p && k + 4 < n; p++) {
            if (*p == '\'') {
                memcpy(buf + k, "'\\''", 4);
                k += 4;
            } else {
                buf[k++] = *p;
            }
        }
        if (k + 1 < n)
            buf[k++] = '\'';
    }
    buf[k < n ? k : n - 1] = '\0';
}

/* The recorded command of a trace directory's manifest, "" when none. */
static void recorded_command(const char *trace, char *buf, size_t n)
{
    buf[0] = '\0';
    struct stat st;
    if (stat(trace, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
    char path[4096], err[256];
    if ((size_t)snprintf(path, sizeof(path), "%s/manifest.json", trace) >= sizeof(path))
        return;
    tft_manifest m = {0};
    if (tft_manifest_read(path, &m, err, sizeof(err)) == 0)
        shell_line(buf, n, m.argc, m.argv);
    tft_manifest_free(&m);
}

static void row(FILE *f, const char *what, int count, const char *unit)
{
    fprintf(f, "| %s | %d%s%s |\n", what, count, count && unit ? " " : "", count && unit ? unit : "");
}

static void write_md(const diff_report *r, FILE *f)
{
    int v = report_verdict(r);
    static const char *const icon[] = {"✅", "❌", "", "⚠️"};
    fprintf(f, "### tfdiff: %s %s\n\n", icon[v], report_verdict_word(v, true));
    char finding[1400];
    if (report_first_finding(r, finding, sizeof(finding))) {
        fputs(v == VERDICT_DIVERGED ? "**First finding:** " : "**Note:** ", f);
        md_text(f, finding);
        fputs("\n\n", f);
    } else {
        fputs("No difference found.\n\n", f);
    }
    report_counts c;
    report_count(r, &c);
    fputs("| finding | count |\n| --- | --- |\n", f);
    row(f, "first divergence", c.divergence, c.divergence == 1 ? "rank" : "ranks");
    row(f, "non-finite BAD alone has", c.nonfinite, c.nonfinite == 1 ? "rank" : "ranks");
    row(f, "desync", c.desyncs, NULL);
    row(f, "leak", c.leaks, NULL);
    row(f, "structure (ops inserted or deleted)", c.structure, c.structure == 1 ? "rank" : "ranks");
    row(f, "BAD ended early or exited otherwise", c.ended, c.ended == 1 ? "rank" : "ranks");
    if (c.unrecorded)
        row(f, "BAD recorded nothing", 1, NULL);
    row(f, "incomplete (reasons)", c.incomplete, NULL);
    char cmp[512];
    fputs("\nCompared ", f);
    md_text(f, report_sentence_compared(r, &c, cmp, sizeof(cmp)));
    fputs(".\n\n", f);
    char ro[1024];
    if (report_sentence_roundoff(r, ro, sizeof(ro))) {
        md_text(f, ro);
        fputs("\n\n", f);
    }
    const char *html = r->html;
    if (html) {
        fputs("Full report: ", f);
        md_code(f, html, false);
        fputs(" (HTML, in the job's artifacts)\n\n", f);
    }
    char line[4096];
    fputs("<details><summary>Command lines</summary>\n\n", f);
    if (r->argc > 0) {
        shell_line(line, sizeof(line), r->argc, r->argv);
        fputs("- compare: ", f);
        md_code(f, line, false);
        fputc('\n', f);
    }
    const char *side[2] = {r->golden, r->bad};
    const char *label[2] = {"GOLDEN", "BAD"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "- %s ", label[k]);
        md_code(f, side[k], false);
        recorded_command(side[k], line, sizeof(line));
        if (line[0]) {
            fputs(" recorded by: ", f);
            md_code(f, line, false);
        }
        fputc('\n', f);
    }
    fputs("\n</details>\n", f);
}

int report_markdown(const diff_report *r, const char *path)
{
    if (!strcmp(path, "-")) {
        write_md(r, stdout);
        return fflush(stdout) == 0 ? 0 : -1;
    }
    core_out out;
    if (core_out_open(&out, path, 0) < 0)
        return -1;
    write_md(r, out.f);
    return core_out_commit(&out);
}

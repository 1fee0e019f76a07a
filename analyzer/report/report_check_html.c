/*
 * report_check_html.c — tfdump --check's findings in HTML: the detectors'
 * findings (detect.h) as a small table, for tfdump --html and tfdiff
 * --html, and tfdump --html's section of every finding, in the sentences
 * of tfdump --check's text (report_check.c). Names and evidence come from
 * the trace (untrusted): every text goes through html_text.
 */
#include "report_internal.h"
#include "html_page.h"
#include "html_svg.h"
#include "tft_drops.h"

#include <stdio.h>

void report_check_html_table(FILE *f, const detect_finding *x, int n)
{
    if (n <= 0)
        return;
    fputs("<table class=\"checks\"><thead><tr><th>severity</th><th>kind</th><th>rank</th><th>step</th>"
          "<th>tensor</th><th>layer</th><th>evidence</th><th>likely causes</th></tr></thead><tbody>\n",
          f);
    for (int i = 0; i < n; i++) {
        char sb[48];
        fprintf(f, "<tr class=\"check %s\" data-kind=\"", detect_severity_name(x[i].severity));
        html_attr(f, x[i].kind);
        fprintf(f, "\" data-step=\"%lld\"><td>%s</td><td>", x[i].step == TFT_STEP_NONE ? -1LL : (long long)x[i].step,
                detect_severity_name(x[i].severity));
        html_text(f, x[i].kind);
        fprintf(f, "</td><td>%d</td><td>", x[i].rank);
        html_text(f, core_step_text(x[i].step, sb, sizeof(sb)));
        fputs("</td><td>", f);
        html_text(f, x[i].tensor);
        if (x[i].layer >= 0)
            fprintf(f, "</td><td>%d</td><td>", x[i].layer);
        else
            fputs("</td><td></td><td>", f);
        html_text(f, x[i].evidence);
        fputs("</td><td>", f);
        html_text(f, x[i].causes ? x[i].causes : "");
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* A list item of class cls holding sentence s. */
static void item(FILE *f, const char *cls, const char *s)
{
    fprintf(f, "<li class=\"%s\">", cls);
    html_text(f, s);
    fputs("</li>", f);
}

void report_check_html_section(FILE *f, const report_check_result *c, const tft_trace *t)
{
    char line[2048];
    html_page_section(f, "check", "Findings (tfdump --check)");
    fputs("<ul class=\"findings\">", f);
    for (int i = 0; i < c->ndamage; i++)
        item(f, "damage", c->damage[i]);
    for (int i = 0; c->drops && t && i < tft_trace_nranks(t); i++)
        if (c->drops[i].count)
            item(f, "incomplete", report_check_sentence_drops(tft_trace_rank_id(t, i), &c->drops[i], line,
                                                              sizeof(line)));
    if (c->nf.found)
        item(f, "nonfinite", report_check_sentence_nonfinite(&c->nf, line, sizeof(line)));
    for (int i = 0; i < c->nl; i++)
        item(f, "leak", report_sentence_leak(&c->leaks[i], line, sizeof(line)));
    for (int i = 0; i < c->nd; i++)
        item(f, "desync", report_sentence_desync(c->ds, c->nd, i, line, sizeof(line)));
    if (!c->nf.found && !c->nl && !c->nd) {
        /* "OK" only when the detectors' table below holds no error or
         * warning either: the line must agree with the verdict */
        fputs("<li>", f);
        if (c->nerr || c->nwarn || c->ndamage)
            html_textf(f, "No non-finite values, leaks or desyncs%s; the detectors found %d error%s and %d warning%s "
                          "(below)",
                       c->lossy ? " in what was recorded" : "", c->nerr, c->nerr == 1 ? "" : "s", c->nwarn,
                       c->nwarn == 1 ? "" : "s");
        else
            html_text(f, report_check_sentence_ok(c, line, sizeof(line)));
        fputs("</li>", f);
    }
    fputs("</ul>\n", f);
    report_check_html_table(f, c->findings, c->nfind); /* the detectors (docs/CHECK.md) */
    fputs("</section>\n", f);
}

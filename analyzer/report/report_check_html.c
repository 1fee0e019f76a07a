/*
 * report_check_html.c — the detectors' findings (detect.h) as a small HTML
 * table, for tfdump --html and tfdiff --html. Names and evidence come from
 * the trace (untrusted): every text goes through html_text.
 */
#include "report_check.h"
#include "html_svg.h"

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

/*
 * report_html.c — tfdiff --html FILE (report_html.h): the verdict and the
 * first finding, then a section per class of finding, drawn as inline
 * SVG. The findings come from the report (report.h); the curves,
 * heatmap, memory and timelines from a second streaming pass over a few
 * rank files (html_series.h): rank 0 and the ranks of the findings, both
 * sides, so the page costs a bounded number of passes however many ranks
 * the traces have (the desync timeline reads the collectives of at most
 * TIMELINE_LANES ranks).
 */
#include "report_html_internal.h"
#include "core_out.h"
#include "html_page.h"

#include <errno.h>
#include <stdlib.h>

int report_html_write(const diff_report *r, tft_trace *g, tft_trace *b, const char *path)
{
    core_out o;
    if (core_out_open(&o, path, 0) < 0)
        return -1;
    page *p = calloc(1, sizeof(*p));
    if (!p) {
        core_out_abort(&o);
        errno = ENOMEM;
        return -1;
    }
    *p = (page){.r = r, .g = g, .b = b, .mark = INT64_MIN};
    int64_t step = report_first_step(r);
    if (step != TFT_STEP_NONE && !CORE_IS_STEPLESS(step))
        p->mark = step;
    int e = g && b ? report_html_collect(p) : 0;
    if (e) {
        report_html_free(p);
        free(p);
        core_out_abort(&o);
        errno = -e;
        return -1;
    }
    FILE *f = o.f;
    html_page_head(f, "diff", "tfdiff report");
    fputs("<h1>tfdiff report</h1>\n", f);
    report_html_verdict(f, p);
    report_html_first_divergence(f, p);
    report_html_nonfinite(f, p);
    report_html_desyncs(f, p);
    report_html_bad_only(f, p);
    report_html_leaks(f, p);
    report_html_heatmap(f, p);
    report_html_curves(f, p);
    html_page_tail(f);
    report_html_free(p);
    free(p);
    return core_out_commit(&o);
}

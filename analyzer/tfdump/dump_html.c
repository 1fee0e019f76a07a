/*
 * dump_html.c — tfdump --html FILE TRACE: one trace as a self-contained
 * page: --check's verdict and findings, the loss / grad-norm curves, memory
 * over time and the collectives of every rank (docs/REPORTS.md). Each rank
 * file is read once more for the charts (html_series.h), one at a time;
 * the curves and memory are drawn for rank 0 and the first finding's rank,
 * the collective chart for the first COLL_LINES ranks, the table for all.
 */
#include "dump_internal.h"
#include "html_series.h"
#include "core_out.h"
#include "html_page.h"
#include "html_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SHOWN_MAX = 2, COLL_LINES = 8, SITES_DRAWN = 5, TABLE_RANKS = 64 };

typedef struct rank_coll {
    int rank;
    uint64_t colls, coll_ns, open;
    double ms[HC_BINS];
} rank_coll;

typedef struct dpage {
    dump_trace *d;
    const report_check_result *res;
    html_series_bins bins;
    bool have_bins;
    double x[HC_BINS];
    html_series_run *shown[SHOWN_MAX];
    int ns;
    rank_coll *coll;   /* per rank file */
    int64_t mark;
} dpage;

static int collect(dpage *p, int finding_rank)
{
    tft_trace *t = p->d->t;
    int n = tft_trace_nranks(t);
    html_series_span s = {0};
    for (int i = 0; i < n; i++)
        html_series_span_add(&s, t, i);
    if (!s.any || CORE_IS_STEPLESS(s.lo))
        return 0;
    html_series_bins_x(&p->bins, p->x, s.lo, s.hi, p->mark);
    p->have_bins = true;
    if (!(p->coll = calloc((size_t)n + 1, sizeof(*p->coll))))
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        int rank = tft_trace_rank_id(t, i);
        tft_reader *r = tft_trace_reader(t, i);
        if (!r)
            continue;
        html_series_run *x = html_series_run_new(&p->bins, rank, NULL);
        int e = x ? html_series_run_read(x, r) : -ENOMEM;
        tft_trace_release(t, i);
        if (e == -ENOMEM) {
            html_series_run_free(x);
            return e;
        }
        rank_coll *c = &p->coll[i];
        *c = (rank_coll){.rank = rank, .colls = x->colls, .coll_ns = x->coll_ns, .open = x->coll_open};
        memcpy(c->ms, x->coll_ms, sizeof(c->ms));
        bool keep = p->ns < SHOWN_MAX && (i == 0 || rank == finding_rank);
        if (keep)
            p->shown[p->ns++] = x;
        else
            html_series_run_free(x);
    }
    return 0;
}

static void downsampled_note(FILE *f, const dpage *p)
{
    if (p->have_bins && p->bins.downsampled)
        fprintf(f, "<p class=\"downsampled\">Downsampled: steps %" PRId64 " to %" PRId64 " are drawn as %d columns; "
                   "each shows one step of its range, memory the largest over the range.</p>\n",
                p->bins.lo, p->bins.hi, p->bins.nbins);
}

static void one_chart(FILE *f, const dpage *p, const char *title, const double *y, const char *label, int flags)
{
    html_svg_series s = {.label = label, .color = "#36c", .x = p->x, .y = y, .n = p->bins.nbins};
    html_svg_line_chart(f, title, &s, 1, p->mark, flags);
}

static void curves(FILE *f, const dpage *p)
{
    bool any = false;
    for (int i = 0; i < p->ns; i++)
        any |= html_series_run_has_curves(p->shown[i]);
    if (!any)
        return;
    html_page_section(f, "curves", "Curves");
    fputs("<p>Loss, gradient norm and learning rate over the steps, for rank 0 and the first finding's rank; the "
          "dashed vertical line marks the first finding's step.</p>\n", f);
    downsampled_note(f, p);
    for (int i = 0; i < p->ns; i++) {
        const html_series_run *x = p->shown[i];
        const double *v[3] = {x->loss, x->grad_norm, x->lr};
        const char *name[3] = {"loss", "grad_norm", "lr"};
        for (int k = 0; k < 3; k++) {
            if (!html_series_any_finite(v[k], p->bins.nbins))
                continue;
            char title[64];
            snprintf(title, sizeof(title), "rank %d: %s", x->rank, name[k]);
            one_chart(f, p, title, v[k], name[k], HTML_Y_AUTO);
        }
    }
    fputs("</section>\n", f);
}

static void memory(FILE *f, const dpage *p)
{
    bool any = false;
    for (int i = 0; i < p->ns; i++)
        any |= p->shown[i]->nsites > 0;
    if (!any)
        return;
    html_page_section(f, "memory", "Memory over time");
    fputs("<p>Live bytes of the recorded allocations, every site together and the largest sites (by their peak), "
          "the most over each column's steps.</p>\n", f);
    downsampled_note(f, p);
    static const char *const colors[SITES_DRAWN] = {"#c33", "#36c", "#2a6", "#e90", "#839"};
    for (int i = 0; i < p->ns; i++) {
        const html_series_run *x = p->shown[i];
        double total[HC_BINS];
        html_series_carried(x->live_total, total, p->bins.nbins);
        char title[64];
        snprintf(title, sizeof(title), "rank %d: live bytes, every site", x->rank);
        one_chart(f, p, title, total, "live bytes", HTML_UNIT_BYTES);
        int order[HC_SITES], nt = x->nsites < SITES_DRAWN ? x->nsites : SITES_DRAWN;
        for (int k = 0; k < x->nsites; k++) { /* by peak, the largest first */
            int j = k;
            for (; j > 0 && x->sites[order[j - 1]].peak < x->sites[k].peak; j--)
                order[j] = order[j - 1];
            order[j] = k;
        }
        const int *top = order;
        double (*ys)[HC_BINS] = calloc(SITES_DRAWN, sizeof(*ys));
        html_svg_series s[SITES_DRAWN];
        for (int k = 0; ys && k < nt; k++) {
            html_series_carried(x->sites[top[k]].live, ys[k], p->bins.nbins);
            s[k] = (html_svg_series){.label = x->sites[top[k]].name, .color = colors[k], .x = p->x, .y = ys[k],
                                .n = p->bins.nbins};
        }
        snprintf(title, sizeof(title), "rank %d: live bytes of the largest sites", x->rank);
        if (ys && nt)
            html_svg_line_chart(f, title, s, nt, p->mark, HTML_UNIT_BYTES);
        if (ys && nt) {
            fputs("<table class=\"sites\"><tr><th>site</th><th>peak</th></tr>", f);
            for (int k = 0; k < nt; k++) {
                fputs("<tr><td><code>", f);
                html_text(f, x->sites[top[k]].name);
                char pb[48];
                fprintf(f, "</code></td><td class=\"num\">%s</td></tr>",
                        html_num_unit((double)x->sites[top[k]].peak, HTML_UNIT_BYTES, pb, sizeof(pb)));
            }
            fputs("</table>\n", f);
        }
        free(ys);
    }
    fputs("</section>\n", f);
}

static void collectives(FILE *f, const dpage *p)
{
    int n = tft_trace_nranks(p->d->t);
    uint64_t total = 0;
    for (int i = 0; p->coll && i < n; i++)
        total += p->coll[i].colls + p->coll[i].open;
    if (!total)
        return;
    html_page_section(f, "collectives", "Collectives per rank");
    downsampled_note(f, p);
    static const char *const colors[COLL_LINES] = {"#c33", "#36c", "#2a6", "#e90", "#839", "#088", "#963", "#555"};
    html_svg_series s[COLL_LINES];
    char labels[COLL_LINES][24];
    int ns = 0;
    for (int i = 0; i < n && ns < COLL_LINES; i++) {
        snprintf(labels[ns], sizeof(labels[ns]), "rank %d", p->coll[i].rank);
        s[ns] = (html_svg_series){.label = labels[ns], .color = colors[ns], .x = p->x, .y = p->coll[i].ms,
                             .n = p->bins.nbins, .dashed = ns % 2};
        ns++;
    }
    html_svg_line_chart(f, "time in collectives per step", s, ns, p->mark, HTML_UNIT_MS);
    fputs("<table class=\"coll\"><tr><th>rank</th><th>calls completed</th><th>time in them (ms)</th>"
          "<th>entered, never left</th></tr>", f);
    for (int i = 0; i < n && i < TABLE_RANKS; i++) {
        const rank_coll *c = &p->coll[i];
        fprintf(f, "<tr%s><td>%d</td><td class=\"num\">%" PRIu64 "</td><td class=\"num\">%.3f</td>"
                   "<td class=\"num\">%" PRIu64 "</td></tr>",
                c->open ? " class=\"hot\"" : "", c->rank, c->colls, (double)c->coll_ns * 1e-6, c->open);
    }
    fputs("</table>\n", f);
    if (n > TABLE_RANKS)
        fprintf(f, "<p class=\"meta\">and %d more ranks</p>\n", n - TABLE_RANKS);
    fputs("</section>\n", f);
}

static void free_page(dpage *p)
{
    for (int i = 0; i < p->ns; i++)
        html_series_run_free(p->shown[i]);
    free(p->coll);
}

/* The verdict line (the first finding, or why nothing was checked) and
 * the trace's name. */
static void verdict(FILE *f, const dpage *p, const char *path, bool found, const char *unrecorded)
{
    const report_check_result *res = p->res;
    const tft_trace *t = p->d->t;
    const char *status = found ? "findings" : res->lossy ? "incomplete" : "ok";
    char what[1200];
    if (unrecorded)
        snprintf(what, sizeof(what), "%s", unrecorded);
    else
        report_check_first_finding(res, what, sizeof(what));
    fprintf(f, "<p id=\"verdict\" data-status=\"%s\"", status);
    if (p->mark != INT64_MIN)
        fprintf(f, " data-step=\"%" PRId64 "\"", p->mark);
    fputs(">", f);
    html_text(f, what);
    fputs("</p>\n<p class=\"meta\">Trace <code>", f);
    html_text(f, path);
    fprintf(f, "</code>: %d rank file%s.</p>\n", t ? tft_trace_nranks(t) : 0, t && tft_trace_nranks(t) == 1 ? "" : "s");
}

static int write_page(dump_trace *d, const dump_opts *o, const report_check_result *res, const char *unrecorded)
{
    core_out out;
    if (core_out_open(&out, o->html_out, 0) < 0) {
        dump_err("%s: cannot write the HTML page: %s", o->html_out, core_out_strerror(&out));
        return DUMP_USAGE;
    }
    dpage *p = calloc(1, sizeof(*p));
    if (!p) {
        core_out_abort(&out);
        dump_nomem(o->path, "--html");
        return DUMP_USAGE;
    }
    *p = (dpage){.d = d, .res = res, .mark = INT64_MIN};
    int frank = -1;
    int64_t step = unrecorded ? TFT_STEP_NONE : report_check_first_step(res, &frank);
    bool found = unrecorded || report_check_found(res);
    if (step != TFT_STEP_NONE && !CORE_IS_STEPLESS(step))
        p->mark = step;
    int e = d->t ? collect(p, frank) : 0;
    if (e) {
        free_page(p);
        free(p);
        core_out_abort(&out);
        dump_nomem(o->path, "--html (reading the rank files)");
        return DUMP_USAGE;
    }
    FILE *f = out.f;
    html_page_head(f, "dump", "tfdump report");
    fputs("<h1>tfdump report</h1>\n", f);
    verdict(f, p, o->path, found, unrecorded);
    if (!unrecorded)
        report_check_html_section(f, res, d->t);
    curves(f, p);
    memory(f, p);
    collectives(f, p);
    html_page_tail(f);
    free_page(p);
    free(p);
    if (core_out_commit(&out) < 0) {
        dump_err("%s: cannot write the HTML page: %s", o->html_out, strerror(errno));
        return DUMP_USAGE;
    }
    return found ? DUMP_FINDINGS : DUMP_OK;
}

int dump_html(dump_trace *d, const dump_opts *o)
{
    report_check_result res = {0};
    if (d->unrecorded)
        return write_page(d, o, &res, "nothing to check: nothing was recorded (a manifest and no rank file)");
    int status = dump_check_collect(d, o, &res);
    if (!status)
        status = write_page(d, o, &res, NULL);
    report_check_result_free(&res);
    return status;
}

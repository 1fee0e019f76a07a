/*
 * html_svg.c — escaping and inline SVG charts for the HTML reports
 * (html_svg.h). Coordinates are rounded to one decimal so that large
 * charts stay small.
 */
#include "html_svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

static void escaped(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*p < 0x20 || *p == 0x7f ? ' ' : *p, f);
        }
    }
}

void html_text(FILE *f, const char *s) { escaped(f, s); }
void html_attr(FILE *f, const char *s) { escaped(f, s); }

void html_textf(FILE *f, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    escaped(f, buf);
}

const char *html_num(double v, char *buf, size_t n)
{
    if (isnan(v))
        snprintf(buf, n, "-");
    else if (v != 0 && (fabs(v) < 1e-3 || fabs(v) >= 1e6))
        snprintf(buf, n, "%.3g", v);
    else
        snprintf(buf, n, "%.4g", v);
    return buf;
}

enum { CW = 720, CH = 200, ML = 64, MR = 12, MT = 22, MB = 30 };

static double ymap(double y, double lo, double hi, int log_y)
{
    if (log_y) {
        y = log10(y > 0 ? y : 1e-300);
        lo = log10(lo);
        hi = log10(hi);
    }
    double t = hi > lo ? (y - lo) / (hi - lo) : 0.5;
    return MT + (1 - t) * (CH - MT - MB);
}

static double xmap(double x, double lo, double hi)
{
    double t = hi > lo ? (x - lo) / (hi - lo) : 0.5;
    return ML + t * (CW - ML - MR);
}

/* The ranges of the series (x over every point, y over finite ones; a
 * log scale over positive ones). false when nothing is finite. */
static bool ranges(const html_svg_series *s, int ns, int log_y, double *x0, double *x1, double *y0, double *y1)
{
    bool any = false;
    *x0 = *y0 = INFINITY;
    *x1 = *y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y) || (log_y && y <= 0))
                continue;
            any = true;
            *x0 = fmin(*x0, x), *x1 = fmax(*x1, x), *y0 = fmin(*y0, y), *y1 = fmax(*y1, y);
        }
    if (any && *y0 == *y1) {
        double d = log_y ? *y0 * 0.5 : (*y0 != 0 ? fabs(*y0) * 0.05 : 1);
        *y0 -= d, *y1 += log_y ? 2 * d : d;
    }
    return any;
}

void html_svg_line_chart(FILE *f, const char *title, const html_svg_series *s, int ns, int64_t mark_step, int log_y)
{
    double x0, x1, y0, y1;
    bool any = ranges(s, ns, log_y, &x0, &x1, &y0, &y1);
    if (any && mark_step != INT64_MIN) { /* the mark inside the axis */
        x0 = fmin(x0, (double)mark_step);
        x1 = fmax(x1, (double)mark_step);
    }
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %d %d\" "
               "width=\"%d\" height=\"%d\" role=\"img\"><title>", CW, CH, CW, CH);
    html_text(f, title);
    fputs("</title>", f);
    fprintf(f, "<text x=\"%d\" y=\"14\" class=\"t\">", ML);
    html_text(f, title);
    fprintf(f, "%s</text><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"plot\"/>", log_y ? " (log scale)" : "",
            ML, MT, CW - ML - MR, CH - MT - MB);
    if (!any) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">no finite values</text></svg></figure>\n", ML + 8, CH / 2);
        return;
    }
    char a[32], b[32];
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">%s</text>", ML - 4, MT + 8,
            html_num(y1, a, sizeof(a)));
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">%s</text>", ML - 4, CH - MB,
            html_num(y0, b, sizeof(b)));
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">step %.0f</text>", ML, CH - 10, x0);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">step %.0f</text>", CW - MR, CH - 10, x1);
    for (int k = 0; k < ns; k++) {
        bool open = false;
        for (int i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            bool ok = isfinite(x) && isfinite(y) && (!log_y || y > 0);
            bool alone = ok && !open && (i + 1 == s[k].n || !isfinite(s[k].y[i + 1]));
            if (alone) { /* a point with no neighbour: a dot */
                fprintf(f, "<circle r=\"2.5\" fill=\"%s\" cx=\"%.1f\" cy=\"%.1f\"/>", s[k].color, xmap(x, x0, x1),
                        ymap(y, y0, y1, log_y));
                continue;
            }
            if (!ok) {
                if (open)
                    fputs("\"/>", f);
                open = false;
                continue;
            }
            if (!open)
                fprintf(f, "<polyline class=\"ln\" stroke=\"%s\"%s points=\"", s[k].color,
                        s[k].dashed ? " stroke-dasharray=\"5 3\"" : "");
            fprintf(f, "%s%.1f,%.1f", open ? " " : "", xmap(x, x0, x1), ymap(y, y0, y1, log_y));
            open = true;
        }
        if (open)
            fputs("\"/>", f);
        fprintf(f, "<text x=\"%d\" y=\"14\" class=\"lg\" fill=\"%s\">", CW - MR - 150 * (ns - k), s[k].color);
        html_text(f, s[k].label);
        fputs("</text>", f);
    }
    if (mark_step != INT64_MIN) {
        double x = (double)mark_step;
        x = x < x0 ? x0 : x > x1 ? x1 : x;
        double px = xmap(x, x0, x1);
        fprintf(f, "<line class=\"divergence-mark\" data-step=\"%" PRId64 "\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" "
                   "y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" class=\"mk\"%s>step %" PRId64 "</text>",
                mark_step, px, px, MT, CH - MB, px > CW - 80 ? px - 3 : px + 3, MT + 10,
                px > CW - 80 ? " text-anchor=\"end\"" : "", mark_step);
    }
    fputs("</svg></figure>\n", f);
}

/* Colour of a relative difference: white at 0, then yellow to dark red
 * over 1e-7 .. 1 on a log scale. */
static void rel_color(double v, char *buf, size_t n)
{
    double t = (log10(v < 1e-7 ? 1e-7 : v > 1 ? 1 : v) + 7) / 7; /* 0..1 */
    int r = (int)(255 - 80 * t), g = (int)(230 * (1 - t)), b = (int)(120 * (1 - t));
    snprintf(buf, n, "#%02x%02x%02x", r, g, b);
}

void html_svg_heatmap(FILE *f, const char *const *rows, int nrows, const int64_t *col_step, int ncols, const double *v,
                 int mark_row, int mark_col, int64_t mark_step)
{
    const int lw = 150, ch = 12, top = 18;
    double cw = ncols ? (double)(CW - lw - MR) / ncols : 1;
    int h = top + nrows * ch + 24;
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %d %d\" width=\"%d\" "
               "height=\"%d\" role=\"img\"><title>relative difference, tensors by steps</title>"
               "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"same\"/>",
            CW, h, CW, h, lw, top, CW - lw - MR, nrows * ch);
    for (int r = 0; r < nrows; r++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">", lw - 4, top + r * ch + ch - 2);
        html_text(f, rows[r]);
        fputs("</text>", f);
        for (int c = 0; c < ncols; c++) {
            double x = v[(size_t)r * (size_t)ncols + (size_t)c];
            if (x == 0)
                continue; /* identical: the background */
            char col[16];
            if (isnan(x))
                snprintf(col, sizeof(col), "#d0d0d0");
            else
                rel_color(x, col, sizeof(col));
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>", lw + c * cw, top + r * ch,
                    cw + 0.05, ch, col);
        }
    }
    if (mark_row >= 0 && mark_row < nrows && mark_col >= 0 && mark_col < ncols)
        fprintf(f, "<rect class=\"first-divergence\" data-step=\"%" PRId64 "\" x=\"%.1f\" y=\"%d\" width=\"%.2f\" "
                   "height=\"%d\"/>",
                mark_step, lw + mark_col * cw, top + mark_row * ch, cw < 3 ? 3 : cw, ch);
    if (ncols)
        fprintf(f, "<text x=\"%d\" y=\"12\" class=\"ax\">step %" PRId64 "</text><text x=\"%d\" y=\"12\" class=\"ax\" "
                   "text-anchor=\"end\">step %" PRId64 "</text>",
                lw, col_step[0], CW - MR, col_step[ncols - 1]);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">white: identical statistics (or not recorded); yellow to red: relative difference "
               "1e-7 to 1 (log); grey: on one side only</text></svg></figure>\n",
            lw, h - 6);
}

void html_svg_timeline(FILE *f, const char *const *lanes, const char *const *lane_cls, int nlanes, const html_svg_bar *bars,
                  int nbars, const char *axis_left, const char *axis_right)
{
    const int lw = 110, lh = 18, top = 8;
    int h = top + nlanes * lh + 22, pw = CW - lw - MR;
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %d %d\" width=\"%d\" "
               "height=\"%d\" role=\"img\"><title>collective timeline</title>",
            CW, h, CW, h);
    for (int i = 0; i < nlanes; i++) {
        fprintf(f, "<g class=\"lane %s\"><rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"lanebg\"/>"
                   "<text x=\"4\" y=\"%d\" class=\"ax\">",
                lane_cls && lane_cls[i] ? lane_cls[i] : "", top + i * lh, CW, lh, top + i * lh + 13);
        html_text(f, lanes[i]);
        fputs("</text></g>", f);
    }
    for (int k = 0; k < nbars; k++) {
        const html_svg_bar *b = &bars[k];
        double t1 = b->t1 < 0 ? 1 : b->t1, w = (t1 - b->t0) * pw;
        fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>", b->cls,
                lw + b->t0 * pw, top + b->lane * lh + 3, w < 1.5 ? 1.5 : w, lh - 6);
        html_text(f, b->tip);
        fputs("</title></rect>", f);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">", lw, h - 6);
    html_text(f, axis_left);
    fprintf(f, "</text><text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">", CW - MR, h - 6);
    html_text(f, axis_right);
    fputs("</text></svg></figure>\n", f);
}

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

enum { CW = 720, CH = 220, ML = 64, MR = 12, MT = 36, MB = 34 };

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

/* HTML_Y_AUTO: a log scale when every finite value is positive and they
 * span more than 100x (one spike would flatten the rest of a linear one). */
static int auto_log(const html_svg_series *s, int ns)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            double y = s[k].y[i];
            if (!isfinite(y))
                continue;
            if (y <= 0)
                return 0;
            lo = fmin(lo, y), hi = fmax(hi, y);
        }
    return isfinite(lo) && hi > 100 * lo;
}

const char *html_num_unit(double v, int unit, char *buf, size_t n)
{
    if (unit == HTML_UNIT_BYTES && isfinite(v)) {
        static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        double a = fabs(v);
        int k = 0;
        while (a >= 1024 && k < 4)
            a /= 1024, v /= 1024, k++;
        snprintf(buf, n, k ? "%.3g %s" : "%.0f %s", v, u[k]);
        return buf;
    }
    html_num(v, buf, n);
    if (unit == HTML_UNIT_MS && isfinite(v)) {
        size_t l = strlen(buf);
        snprintf(buf + l, n > l ? n - l : 0, " ms");
    }
    return buf;
}

/* Up to about max "nice" tick values (1, 2 or 5 times a power of ten
 * apart, at least min_step) within lo..hi; n ticks into t. */
static int nice_ticks(double lo, double hi, int max, double min_step, double *t)
{
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi))
        return 0;
    double raw = (hi - lo) / max, p = pow(10, floor(log10(raw))), step = p;
    if (raw / p > 5)
        step = 10 * p;
    else if (raw / p > 2)
        step = 5 * p;
    else if (raw / p > 1)
        step = 2 * p;
    if (step < min_step)
        step = min_step;
    int n = 0;
    for (double v = ceil(lo / step) * step; v <= hi + step * 1e-9 && n < 2 * max; v += step)
        t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    return n;
}

/* Powers of ten within lo..hi (both positive), at most 12. */
static int log_ticks(double lo, double hi, double *t)
{
    int n = 0, a = (int)ceil(log10(lo) - 1e-9), b = (int)floor(log10(hi) + 1e-9);
    int every = (b - a) / 8 + 1;
    for (int e = a; e <= b && n < 12; e += every)
        t[n++] = pow(10, e);
    return n;
}

/* Axis ticks with gridlines and labels: y (values, in unit) and x (steps). */
static void axes(FILE *f, double x0, double x1, double y0, double y1, int log_y, int unit)
{
    double t[24];
    char a[48];
    int n = log_y ? log_ticks(y0, y1, t) : nice_ticks(y0, y1, 5, 0, t);
    fputs("<g class=\"grid\">", f);
    for (int i = 0; i < n; i++) {
        double py = ymap(t[i], y0, y1, log_y);
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>", ML, CW - MR, py, py);
    }
    int nx = nice_ticks(x0, x1, 8, 1, t + 12); /* steps: whole numbers */
    for (int i = 0; i < nx; i++) {
        double px = xmap(t[12 + i], x0, x1);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>", px, px, MT, CH - MB);
    }
    fputs("</g>", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%s</text>", ML - 4,
                ymap(t[i], y0, y1, log_y) + 3, html_num_unit(t[i], unit, a, sizeof(a)));
    for (int i = 0; i < nx; i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">%.0f</text>",
                xmap(t[12 + i], x0, x1), CH - MB + 12, t[12 + i]);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">step</text>", CW - MR, CH - 8);
}

/* The legend: one row under the title, each entry a line sample and its
 * label (long labels shortened, the whole in a tooltip). */
static void legend(FILE *f, const html_svg_series *s, int ns)
{
    double x = ML;
    for (int k = 0; k < ns; k++) {
        char shortl[40];
        const char *l = s[k].label ? s[k].label : "";
        size_t len = strlen(l);
        if (len > 36)
            snprintf(shortl, sizeof(shortl), "\u2026%s", l + len - 33);
        else
            snprintf(shortl, sizeof(shortl), "%s", l);
        fprintf(f, "<g class=\"lgi\"><title>");
        html_text(f, l);
        fprintf(f, "</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"27\" y2=\"27\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                   "<text x=\"%.1f\" y=\"31\" class=\"lg\" fill=\"%s\">",
                x, x + 14, s[k].color, s[k].dashed ? " stroke-dasharray=\"4 2\"" : "", x + 18, s[k].color);
        html_text(f, shortl);
        fputs("</text></g>", f);
        x += 30 + 6.2 * (double)strlen(shortl);
    }
}

void html_svg_line_chart(FILE *f, const char *title, const html_svg_series *s, int ns, int64_t mark_step, int flags)
{
    int scale = flags & HTML_Y_SCALE_MASK, unit = flags & HTML_UNIT_MASK;
    int log_y = scale == HTML_Y_LOG || (scale == HTML_Y_AUTO && auto_log(s, ns));
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
    legend(f, s, ns);
    if (!any) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">no finite values</text></svg></figure>\n", ML + 8, CH / 2);
        return;
    }
    if (!log_y) { /* room above and below the data, on tick values */
        double pad = (y1 - y0) * 0.04;
        y0 -= pad, y1 += pad;
    }
    axes(f, x0, x1, y0, y1, log_y, unit);
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
    }
    /* tooltips: an invisible dot per point, its value on hover (no script) */
    fputs("<g class=\"pts\">", f);
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y) || (log_y && y <= 0))
                continue;
            char v[48];
            fprintf(f, "<circle r=\"4\" cx=\"%.1f\" cy=\"%.1f\"><title>", xmap(x, x0, x1), ymap(y, y0, y1, log_y));
            html_text(f, s[k].label);
            fprintf(f, ", step %.0f: %s</title></circle>", x, html_num_unit(y, unit, v, sizeof(v)));
        }
    fputs("</g>", f);
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

/* A row label that fits lw pixels: the name's end (where a module path
 * says which layer), the whole name in the tooltip. */
static void row_label(FILE *f, const char *name, int x, int y)
{
    size_t len = strlen(name), max = 23;
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\"><title>", x, y);
    html_text(f, name);
    fputs("</title>", f);
    if (len > max) {
        fputs("\u2026", f);
        html_text(f, name + len - (max - 1));
    } else {
        html_text(f, name);
    }
    fputs("</text>", f);
}

void html_svg_heatmap(FILE *f, const char *const *rows, int nrows, const int64_t *col_step, int ncols, const double *v,
                 int mark_row, int mark_col, int64_t mark_step)
{
    const int lw = 160, ch = 12, top = 18;
    double cw = ncols ? (double)(CW - lw - MR) / ncols : 1;
    int h = top + nrows * ch + 52;
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %d %d\" width=\"%d\" "
               "height=\"%d\" role=\"img\"><title>relative difference, tensors by steps</title>"
               "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"same\"/>",
            CW, h, CW, h, lw, top, CW - lw - MR, nrows * ch);
    int drawn = 0;
    for (int r = 0; r < nrows; r++) {
        row_label(f, rows[r], lw - 4, top + r * ch + ch - 2);
        for (int c = 0; c < ncols; c++) {
            double x = v[(size_t)r * (size_t)ncols + (size_t)c];
            if (x == 0)
                continue; /* identical: the background */
            char col[16], num[32];
            if (isnan(x))
                snprintf(col, sizeof(col), "#d0d0d0");
            else
                rel_color(x, col, sizeof(col));
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", lw + c * cw,
                    top + r * ch, cw + 0.05, ch, col);
            html_text(f, rows[r]);
            fprintf(f, ", step %" PRId64 ": %s</title></rect>", col_step[c],
                    isnan(x) ? "on one side only" : html_num(x, num, sizeof(num)));
            drawn++;
        }
    }
    if (mark_row >= 0 && mark_row < nrows && mark_col >= 0 && mark_col < ncols)
        fprintf(f, "<rect class=\"first-divergence\" data-step=\"%" PRId64 "\" x=\"%.1f\" y=\"%d\" width=\"%.2f\" "
                   "height=\"%d\"/>",
                mark_step, lw + mark_col * cw, top + mark_row * ch, cw < 3 ? 3 : cw, ch);
    if (!drawn)
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">no tensor's statistics differ in these steps</text>", lw + 8,
                top + (nrows * ch) / 2 + 4);
    if (ncols)
        fprintf(f, "<text x=\"%d\" y=\"12\" class=\"ax\">step %" PRId64 "</text><text x=\"%d\" y=\"12\" class=\"ax\" "
                   "text-anchor=\"end\">step %" PRId64 "</text>",
                lw, col_step[0], CW - MR, col_step[ncols - 1]);
    /* the colour bar: 1e-7 .. 1, log */
    int by = top + nrows * ch + 8, bw = 240;
    for (int i = 0; i < 24; i++) {
        char col[16];
        rel_color(pow(10, -7 + 7.0 * (i + 0.5) / 24), col, sizeof(col));
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"10\" fill=\"%s\"/>", lw + i * bw / 24.0, by,
                bw / 24.0 + 0.05, col);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" class=\"cbar\"/>", lw, by, bw);
    static const int ex[] = {-7, -5, -3, -1, 0};
    for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">%s</text>", lw + bw * (ex[i] + 7) / 7.0,
                by + 21, ex[i] == 0 ? "1" : ex[i] == -1 ? "0.1" : ex[i] == -3 ? "1e-3" : ex[i] == -5 ? "1e-5" : "1e-7");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"#d0d0d0\"/><text x=\"%d\" y=\"%d\" "
               "class=\"ax\">one side only</text>",
            lw + bw + 16, by, lw + bw + 32, by + 9);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">relative difference of the statistics (log colour scale); white: "
               "identical (or not recorded)</text></svg></figure>\n",
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
        double t1 = b->t1 < 0 ? 1 : b->t1, w = (t1 - b->t0) * pw, x = lw + b->t0 * pw;
        /* a call that never left runs to the edge: at least 16 px, so a hang
         * that began at the end of the window still shows */
        if (b->t1 < 0 && w < 16) {
            w = 16;
            x = x + w > lw + pw ? lw + pw - w : x;
        }
        fprintf(f, "<rect class=\"%s%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>", b->cls,
                b->t1 < 0 ? " open" : "", x, top + b->lane * lh + 3, w < 1.5 ? 1.5 : w, lh - 6);
        html_text(f, b->tip);
        fputs("</title></rect>", f);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">", lw, h - 6);
    html_text(f, axis_left);
    fprintf(f, "</text><text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"end\">", CW - MR, h - 6);
    html_text(f, axis_right);
    fputs("</text></svg></figure>\n", f);
}

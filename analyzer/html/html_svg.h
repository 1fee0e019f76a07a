/*
 * html_svg.h — the pieces of tftrace's HTML reports (report_html.c): text
 * escaping for HTML and SVG, and inline SVG charts (line charts over steps,
 * a tensors x steps heatmap, a timeline of bars). Everything is written to
 * a FILE; nothing references anything outside the page.
 *
 * All text from a trace (tensor, op, site and communicator names, paths,
 * commands) is untrusted: it goes through html_text/html_attr, which
 * escape the characters HTML and SVG interpret and turn control
 * characters into spaces, so no trace can inject markup or script.
 */
#ifndef TFT_HTML_SVG_H
#define TFT_HTML_SVG_H

#include <stdint.h>
#include <stdio.h>

/* Text content, escaped (&, <, >, ", ' and control characters). */
void html_text(FILE *f, const char *s);
/* The same, for an attribute value between double quotes. */
void html_attr(FILE *f, const char *s);
/* printf, then escaped as text. */
void html_textf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line of a chart: n points (x[i], y[i]); a NaN y is a gap. */
typedef struct html_svg_series {
    const char *label;   /* legend text (trace-derived text allowed) */
    const char *color;   /* CSS colour, a constant of ours */
    const double *x, *y;
    int n;
    int dashed;
} html_svg_series;

/* html_svg_line_chart's flags: the y scale (one of) and the unit of the
 * values (one of), or'ed. HTML_Y_AUTO: log when every value is positive
 * and they span more than 100x. */
enum {
    HTML_Y_LINEAR = 0, HTML_Y_LOG = 1, HTML_Y_AUTO = 2, HTML_Y_SCALE_MASK = 3,
    HTML_UNIT_NONE = 0, HTML_UNIT_BYTES = 4, HTML_UNIT_MS = 8, HTML_UNIT_MASK = 12
};

/* A line chart of the series over x (steps): ticks with gridlines on both
 * axes (values in the flags' unit: B/KiB/MiB/GiB, ms), a legend row under
 * the title (long labels shortened, whole in a tooltip), a tooltip on
 * every point ("LABEL, step S: VALUE"), and when mark_step is not
 * INT64_MIN a vertical line of class divergence-mark with
 * data-step="mark_step" (placed even when outside the data, clamped to the
 * edge). title is escaped. No script. */
void html_svg_line_chart(FILE *f, const char *title, const html_svg_series *s, int ns, int64_t mark_step, int flags);

/* A heatmap of nrows x ncols cells: v[r * ncols + c] in [0, 1] (relative
 * difference, drawn on a log scale from 1e-7, with a colour bar), 0
 * identical, NaN absent; each coloured cell has a tooltip (name, step,
 * value), long row names are shortened to their end (whole in a tooltip).
 * col_step[c] is the first step of column c (for tooltips and the axis);
 * the cell (mark_row, mark_col) gets class first-divergence and
 * data-step="mark_step" (mark_row < 0: none). */
void html_svg_heatmap(FILE *f, const char *const *rows, int nrows, const int64_t *col_step, int ncols, const double *v,
                 int mark_row, int mark_col, int64_t mark_step);

/* A horizontal bar (timeline), in a chart begun by the caller: lane row,
 * from t0 to t1 (0..1 of the width; t1 < 0: open to the right edge). */
typedef struct html_svg_bar {
    int lane;
    double t0, t1;
    const char *cls;     /* CSS class ("bar", "bar missing", ...) */
    const char *tip;     /* tooltip text (escaped) */
} html_svg_bar;
/* A timeline: one lane per label, the bars, a legend line below. */
void html_svg_timeline(FILE *f, const char *const *lanes, const char *const *lane_cls, int nlanes, const html_svg_bar *bars,
                  int nbars, const char *axis_left, const char *axis_right);

/* A number in a short form for labels and tables ("1.25e-05", "3.5"). */
const char *html_num(double v, char *buf, size_t n);
/* html_num with a unit (HTML_UNIT_*): "8 MiB", "12.5 ms". */
const char *html_num_unit(double v, int unit, char *buf, size_t n);

#endif

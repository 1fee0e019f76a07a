/*
 * report_tensors.c — tfdiff --tensors' report (report_tensors.h): each
 * pair of captured tensors compare_tensors.c compared, as a text line or
 * a JSON object, with where its differences lie as a sentence (the
 * pattern: diagonal, padding, rows, columns, a constant ratio), and the
 * HTML page: the verdict, then each differing pair with its pattern and
 * its element-wise difference drawn as an SVG image (at most TD_IMAGES).
 */
#include "report_tensors.h"

#include "core_out.h"
#include "html_page.h"
#include "html_svg.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TD_RANGES 8     /* index ranges listed per dimension */
#define TD_IMAGES 16    /* differing pairs drawn */

/* ---- words ------------------------------------------------------------- */

/* "0..3, 7, 9..12" from a bitmap of n entries (at most TD_RANGES ranges). */
static void ranges_text(const unsigned char *bits, int64_t n, char *buf, size_t len, cJSON *arr)
{
    size_t k = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n;) {
        if (!bits[i]) {
            i++;
            continue;
        }
        int64_t j = i;
        while (j + 1 < n && bits[j + 1])
            j++;
        if (arr) {
            cJSON *r = cJSON_CreateArray();
            cJSON_AddItemToArray(r, cJSON_CreateNumber((double)i));
            cJSON_AddItemToArray(r, cJSON_CreateNumber((double)j));
            cJSON_AddItemToArray(arr, r);
        }
        if (shown < TD_RANGES && k < len) {
            if (j > i)
                k += (size_t)snprintf(buf + k, len - k, "%s%lld..%lld", shown ? ", " : "", (long long)i,
                                      (long long)j);
            else
                k += (size_t)snprintf(buf + k, len - k, "%s%lld", shown ? ", " : "", (long long)i);
        } else if (shown == TD_RANGES && k < len) {
            k += (size_t)snprintf(buf + k, len - k, ", ...");
        }
        shown++;
        i = j + 1;
    }
}

static int64_t count_bits(const unsigned char *bits, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++)
        c += bits[i] != 0;
    return c;
}

/* The structural summary line into p; with pj (NULL: the sentence only)
 * its parts as JSON keys. */
static void describe(const core_capture_tensor *g, const compare_tensors_diff *r, char *p, size_t len, cJSON *pj)
{
    size_t k = 0;
    p[0] = '\0';
    if (r->differing == 0)
        return;
    if (r->differing == r->numel)
        k += (size_t)snprintf(p + k, len - k, "everywhere");
    if (r->has_matrix) {
        const char *diag = NULL;
        if (r->rows == r->cols) {
            if (r->above == r->differing)
                diag = r->super1 == r->differing ? "only just above the diagonal (column = row + 1)"
                                                 : "only above the diagonal (column > row)";
            else if (r->below == r->differing)
                diag = r->sub1 == r->differing ? "only just below the diagonal (row = column + 1)"
                                               : "only below the diagonal (column < row)";
            else if (r->on == r->differing)
                diag = "only on the diagonal";
            else if (r->above == 0 && r->differing != r->numel)
                diag = "on and below the diagonal only";
        }
        if (diag) {
            k += (size_t)snprintf(p + k, len - k, "%s%s", k ? "; " : "", diag);
            cJSON_AddStringToObject(pj, "diagonal", diag);
        }
        if (r->pad_known) {
            const char *pad = NULL;
            if (r->at_pad_col == r->differing)
                pad = "only at padded positions (columns where tokens are padding)";
            else if (r->at_pad_row == r->differing)
                pad = "only at padded positions (rows where tokens are padding)";
            if (pad) {
                k += (size_t)snprintf(p + k, len - k, "%s%s", k ? "; " : "", pad);
                cJSON_AddStringToObject(pj, "padding", pad);
            }
        }
        char rows[256], cols[256], lead[256];
        cJSON *ra = cJSON_AddArrayToObject(pj, "rows");
        cJSON *ca = cJSON_AddArrayToObject(pj, "columns");
        ranges_text(r->rowbits, r->rows, rows, sizeof(rows), ra);
        ranges_text(r->colbits, r->cols, cols, sizeof(cols), ca);
        int64_t nr = count_bits(r->rowbits, r->rows), nc = count_bits(r->colbits, r->cols);
        if (r->differing != r->numel) {
            k += (size_t)snprintf(p + k, len - k, "%srows %s (%lld of %lld), columns %s (%lld of %lld)", k ? "; " : "",
                                  rows, (long long)nr, (long long)r->rows, cols, (long long)nc, (long long)r->cols);
            if (g->ndim >= 3) {
                cJSON *la = cJSON_AddArrayToObject(pj, "dim0");
                ranges_text(r->leadbits, g->shape[0], lead, sizeof(lead), la);
                int64_t nl = count_bits(r->leadbits, g->shape[0]);
                k += (size_t)snprintf(p + k, len - k, ", dim 0 index %s (%lld of %lld)", lead, (long long)nl,
                                      (long long)g->shape[0]);
            }
        }
    }
    if (r->ratio_const) {
        k += (size_t)snprintf(p + k, len - k, "%sBAD = %.6g x GOLDEN wherever they differ", k ? "; " : "", r->ratio);
        cJSON_AddNumberToObject(pj, "ratio", r->ratio);
    }
    cJSON_AddStringToObject(pj, "summary", p);
}

static void index_text(const core_capture_tensor *t, uint64_t i, char *buf, size_t len, cJSON *arr)
{
    int64_t idx[TFT_MAX_NDIM];
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->shape[d] > 0 ? t->shape[d] : 1;
        idx[d] = (int64_t)(i % (uint64_t)s);
        i /= (uint64_t)s;
    }
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim; d++) {
        k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%lld", d ? "," : "", (long long)idx[d]);
        cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)idx[d]));
    }
    snprintf(buf + k, k < len ? len - k : 0, "]");
}

static void shape_text(const core_capture_tensor *t, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim; d++)
        k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    snprintf(buf + k, k < len ? len - k : 0, "]");
}

static cJSON *shape_json(const core_capture_tensor *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < t->ndim; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[d]));
    return a;
}

/* "step N", or "seq N" for a capture outside steps. */
static const char *step_text(const core_capture_tensor *g, char *buf, size_t n)
{
    if (g->step == TFT_STEP_NONE)
        snprintf(buf, n, "seq %lld", (long long)g->seq);
    else
        snprintf(buf, n, "step %lld", (long long)g->step);
    return buf;
}

/* ---- text and JSON ------------------------------------------------------ */

/* The keys every pair has (and a pair of another layout, all of its). */
static cJSON *pair_json(const compare_tensors_pair *p)
{
    const core_capture_tensor *g = p->g, *b = p->b;
    cJSON *tj = cJSON_CreateObject();
    cJSON_AddStringToObject(tj, "name", g->name);
    cJSON_AddNumberToObject(tj, "rank", g->rank);
    if (g->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(tj, "step");
    else
        cJSON_AddNumberToObject(tj, "step", (double)g->step);
    cJSON_AddNumberToObject(tj, "seq_golden", (double)g->seq);
    cJSON_AddNumberToObject(tj, "seq_bad", (double)b->seq);
    cJSON_AddStringToObject(tj, "dtype", tft_dtype_name(g->dtype));
    cJSON_AddItemToObject(tj, "shape", shape_json(g));
    if (p->layout_differs) {
        cJSON_AddStringToObject(tj, "verdict", "layout");
        cJSON_AddItemToObject(tj, "shape_bad", shape_json(b));
        cJSON_AddStringToObject(tj, "dtype_bad", tft_dtype_name(b->dtype));
        return tj;
    }
    const compare_tensors_diff *r = &p->d;
    cJSON_AddNumberToObject(tj, "numel", (double)r->numel);
    cJSON_AddNumberToObject(tj, "differing", (double)r->differing);
    cJSON_AddNumberToObject(tj, "fraction", r->numel ? (double)r->differing / (double)r->numel : 0.0);
    cJSON_AddStringToObject(tj, "verdict", r->differing ? "different" : "identical");
    return tj;
}

/* A differing pair: its keys beyond pair_json's into tj, and its text lines
 * to out unless o->json. */
static void pair_differs(const compare_tensors_pair *p, const tensors_opts *o, cJSON *tj, FILE *out,
                         const char *shape, const char *step)
{
    const core_capture_tensor *g = p->g;
    const compare_tensors_diff *r = &p->d;
    cJSON *pj = cJSON_CreateObject();
    char pattern[512];
    describe(g, r, pattern, sizeof(pattern), pj);
    cJSON_AddNumberToObject(tj, "max_abs_diff", isfinite(r->max_abs) ? r->max_abs : 1e308);
    cJSON_AddNumberToObject(tj, "mean_abs_diff", r->sum_abs / (double)r->numel);
    cJSON_AddNumberToObject(tj, "max_rel_diff", r->max_rel);
    cJSON *fa = cJSON_AddArrayToObject(tj, "first");
    char idx[COMPARE_TENSORS_FIRST][96];
    for (int k = 0; k < r->nfirst; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON *ia = cJSON_AddArrayToObject(e, "index");
        index_text(g, r->first[k], idx[k], sizeof(idx[k]), ia);
        cJSON_AddNumberToObject(e, "golden", isfinite(r->first_g[k]) ? r->first_g[k] : 0);
        cJSON_AddNumberToObject(e, "bad", isfinite(r->first_b[k]) ? r->first_b[k] : 0);
        cJSON_AddItemToArray(fa, e);
    }
    cJSON_AddItemToObject(tj, "pattern", pj);
    if (o->json)
        return;
    fprintf(out, "%s  %s rank %d  %s %s\n", g->name, step, g->rank, shape, tft_dtype_name(g->dtype));
    fprintf(out, "  differs: %llu of %llu elements (%.3g%%); max |diff| %.6g, mean |diff| %.6g, max rel %.3g\n",
            (unsigned long long)r->differing, (unsigned long long)r->numel,
            100.0 * (double)r->differing / (double)r->numel, r->max_abs, r->sum_abs / (double)r->numel, r->max_rel);
    fprintf(out, "  first:");
    for (int k = 0; k < r->nfirst && k < 4; k++)
        fprintf(out, "%s %s golden %.6g bad %.6g", k ? ";" : "", idx[k], r->first_g[k], r->first_b[k]);
    fprintf(out, "\n  where: %s\n", pattern);
}

/* One pair: its JSON object into arr, its text to out unless o->json. */
static void pair_report(const compare_tensors_pair *p, const tensors_opts *o, cJSON *arr, FILE *out)
{
    const core_capture_tensor *g = p->g, *b = p->b;
    cJSON *tj = pair_json(p);
    cJSON_AddItemToArray(arr, tj);
    char shape[160], step[48];
    shape_text(g, shape, sizeof(shape));
    step_text(g, step, sizeof(step));
    if (p->layout_differs) {
        char bshape[160];
        shape_text(b, bshape, sizeof(bshape));
        if (!o->json)
            fprintf(out, "%s  %s rank %d: layout differs: golden %s %s, bad %s %s\n", g->name, step, g->rank, shape,
                    tft_dtype_name(g->dtype), bshape, tft_dtype_name(b->dtype));
    } else if (p->d.differing) {
        pair_differs(p, o, tj, out, shape, step);
    } else if (!o->json) {
        fprintf(out, "%s  %s rank %d  %s %s: identical\n", g->name, step, g->rank, shape, tft_dtype_name(g->dtype));
    }
}

/* The names of the usable captures of one side left unpaired, into a; how many. */
static int unpaired(const compare_tensors_item *v, size_t n, cJSON *a)
{
    int k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (!v[i].paired) {
            cJSON_AddItemToArray(a, cJSON_CreateString(v[i].t->name));
            k++;
        }
    return k;
}

/* ---- the HTML page ------------------------------------------------------ */

/* The element-wise difference of one matrix (the last two dimensions, at
 * leading index lead) of a pair as an SVG image: a cell per element, or
 * per block of elements when the matrix is larger than the grid
 * (compare_tensors_grid_of: the largest |BAD - GOLDEN| of the block),
 * white where they agree. */
static void html_image(FILE *f, const compare_tensors_pair *p, const tensors_opts *o, int64_t lead)
{
    enum { G = COMPARE_TENSORS_GRID };
    const compare_tensors_diff *r = &p->d;
    compare_tensors_grid *gr = malloc(sizeof(*gr));
    if (!gr)
        return;
    compare_tensors_grid_of(p, o, lead, gr);
    int64_t rows = gr->rows, cols = gr->cols;
    int br = gr->br, bc = gr->bc;
    if (rows <= 0 || cols <= 0) {
        free(gr);
        return;
    }
    double top = isfinite(r->max_abs) && r->max_abs > 0 ? r->max_abs : 1;
    int px = 320 / (bc > br ? bc : br);
    px = px < 4 ? 4 : px;
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
               "class=\"tensor-diff\"><title>|BAD - GOLDEN|</title><rect class=\"same\" x=\"0\" y=\"0\" width=\"%d\" "
               "height=\"%d\"/>",
            bc * px, br * px, bc * px, br * px, bc * px, br * px);
    for (int i = 0; i < br; i++)
        for (int j = 0; j < bc; j++) {
            if (!gr->any[i * G + j])
                continue;
            double t = isfinite(gr->cell[i * G + j]) ? 0.25 + 0.75 * fmin(1, gr->cell[i * G + j] / top) : 1;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#c00\" fill-opacity=\"%.2f\"/>",
                    j * px, i * px, px, px, t);
        }
    fputs("</svg><figcaption>", f);
    html_textf(f, "rows 0-%lld by columns 0-%lld%s; red where BAD differs from GOLDEN (darker: larger |difference|)",
               (long long)rows - 1, (long long)cols - 1, rows > G || cols > G ? ", in blocks" : "");
    if (r->has_matrix && r->lead > 1)
        html_textf(f, "; leading index %lld of %lld", (long long)lead, (long long)r->lead);
    fputs("</figcaption></figure>\n", f);
    free(gr);
}

/* One differing pair of the page's #tensors section. */
static void html_pair(FILE *f, const compare_tensors_pair *p, const tensors_opts *o)
{
    const core_capture_tensor *g = p->g;
    const compare_tensors_diff *r = &p->d;
    char shape[160], step[48], pattern[512];
    shape_text(g, shape, sizeof(shape));
    describe(g, r, pattern, sizeof(pattern), NULL);
    fputs("<div class=\"pair\"><h3><code>", f);
    html_text(f, g->name);
    fputs("</code> ", f);
    html_textf(f, "%s rank %d, %s %s", step_text(g, step, sizeof(step)), g->rank, shape, tft_dtype_name(g->dtype));
    fputs("</h3>\n<p>", f);
    html_textf(f, "differs: %llu of %llu elements (%.3g%%); max |diff| %.6g, mean |diff| %.6g, max rel %.3g",
               (unsigned long long)r->differing, (unsigned long long)r->numel,
               100.0 * (double)r->differing / (double)r->numel, r->max_abs, r->sum_abs / (double)r->numel, r->max_rel);
    fputs("</p>\n<p class=\"pattern\">Where: ", f);
    html_text(f, pattern);
    fputs("</p>\n", f);
    int64_t per = r->has_matrix ? r->rows * r->cols : (int64_t)r->numel;
    int64_t lead = r->nfirst && per > 0 ? (int64_t)(r->first[0] / (uint64_t)per) : 0;
    html_image(f, p, o, lead);
    fputs("</div>\n", f);
}

/* The verdict's sentence: the first pair that differs (NULL none), into buf. */
static const compare_tensors_pair *first_differing(const compare_tensors_result *res, char *buf, size_t n)
{
    for (int i = 0; i < res->npairs; i++) {
        const compare_tensors_pair *p = &res->pairs[i];
        const core_capture_tensor *g = p->g;
        char step[48], pattern[512];
        step_text(g, step, sizeof(step));
        if (p->layout_differs) {
            snprintf(buf, n, "%s %s rank %d: layout differs", g->name, step, g->rank);
            return p;
        }
        if (p->d.differing) {
            describe(g, &p->d, pattern, sizeof(pattern), NULL);
            snprintf(buf, n, "%s %s rank %d: %llu of %llu elements differ; where: %s", g->name, step, g->rank,
                     (unsigned long long)p->d.differing, (unsigned long long)p->d.numel, pattern);
            return p;
        }
    }
    return NULL;
}

/* The #tensors section: the first TD_IMAGES pairs that differ drawn (a
 * pair of another layout counts, undrawn). */
static void html_pairs(FILE *f, const compare_tensors_result *res, const tensors_opts *o)
{
    fputs("<section id=\"tensors\">\n<h2>Captured tensors</h2>\n", f);
    int k = 0;
    for (int i = 0; i < res->npairs; i++) {
        const compare_tensors_pair *p = &res->pairs[i];
        k += p->layout_differs || p->d.differing;
        if (!p->layout_differs && p->d.differing && k <= TD_IMAGES)
            html_pair(f, p, o);
    }
    if (res->n_diff > TD_IMAGES)
        fprintf(f, "<p class=\"meta\">%d more differing pairs are not drawn (tfdiff --tensors --json lists them)"
                   "</p>\n", res->n_diff - TD_IMAGES);
    fputs("</section>\n", f);
}

/* The page: the verdict first, then the pairs. 0, or -1 with errno. */
static int html_write(const compare_tensors_result *res, const tensors_opts *o, const char *golden, const char *bad,
                      int code)
{
    char first[1400] = "";
    const compare_tensors_pair *fp = first_differing(res, first, sizeof(first));
    core_out out;
    if (core_out_open(&out, o->html, 0) < 0)
        return -1;
    FILE *f = out.f;
    html_page_head(f, "diff", "tfdiff --tensors report");
    fputs("<h1>tfdiff --tensors report</h1>\n", f);
    const char *status = code == 0 ? "match" : code == 1 ? "diverged" : "incomplete";
    fprintf(f, "<p id=\"verdict\" data-status=\"%s\"", status);
    if (code == 1 && fp && fp->g->step != TFT_STEP_NONE)
        fprintf(f, " data-step=\"%" PRId64 "\"", fp->g->step);
    fputs(">tfdiff: ", f);
    fputs(code == 0 ? "MATCH — every captured pair is identical" : code == 1 ? "DIVERGED — " :
          "INCOMPLETE — no captured tensors in common", f);
    if (code == 1)
        html_text(f, first);
    fputs("</p>\n<p class=\"meta\">GOLDEN <code>", f);
    html_text(f, golden);
    fputs("</code>, BAD <code>", f);
    html_text(f, bad);
    fprintf(f, "</code>: %d captured tensor%s compared, %d identical, %d different (rtol %g, atol %g).</p>\n",
            res->npairs, res->npairs == 1 ? "" : "s", res->n_same, res->n_diff, o->rtol, o->atol);
    if (res->npairs)
        html_pairs(f, res, o);
    html_page_tail(f);
    return core_out_commit(&out);
}

/* ---- the report --------------------------------------------------------- */

int report_tensors(const compare_tensors_result *res, const char *golden, const char *bad, const tensors_opts *o,
                   FILE *out)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "golden", golden);
    cJSON_AddStringToObject(root, "bad", bad);
    cJSON *tol = cJSON_AddObjectToObject(root, "tolerance");
    cJSON_AddNumberToObject(tol, "rtol", o->rtol);
    cJSON_AddNumberToObject(tol, "atol", o->atol);
    cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
    for (int i = 0; i < res->npairs; i++)
        pair_report(&res->pairs[i], o, arr, out);
    int ug = unpaired(res->gv, res->ng, cJSON_AddArrayToObject(root, "only_golden"));
    int ub = unpaired(res->bv, res->nb, cJSON_AddArrayToObject(root, "only_bad"));
    cJSON_AddNumberToObject(root, "compared", res->npairs);
    cJSON_AddNumberToObject(root, "identical", res->n_same);
    cJSON_AddNumberToObject(root, "different", res->n_diff);
    int code = res->npairs == 0 ? 2 : res->n_diff ? 1 : 0;
    /* captures lost to damage: what was compared is not all there was */
    cJSON *inc = cJSON_AddArrayToObject(root, "incomplete");
    for (int s = 0; s < 2; s++)
        if (res->lost[s][0]) {
            char why[600];
            snprintf(why, sizeof(why), "%s lost captures: %s", s ? "BAD" : "GOLDEN", res->lost[s]);
            cJSON_AddItemToArray(inc, cJSON_CreateString(why));
            if (!o->json)
                fprintf(out, "incomplete: %s\n", why);
            if (code == 0)
                code = 3;
        }
    if (o->json) {
        char *s = cJSON_Print(root);
        if (s)
            fprintf(out, "%s\n", s);
        free(s);
    } else {
        if (ug || ub)
            fprintf(out, "unpaired captures: %d only in golden, %d only in bad\n", ug, ub);
        fprintf(out, "%d captured tensor%s compared: %d identical, %d different\n", res->npairs,
                res->npairs == 1 ? "" : "s", res->n_same, res->n_diff);
    }
    if (o->html && html_write(res, o, golden, bad, code) < 0) {
        fprintf(stderr, "tfdiff: %s: cannot write the HTML report: %s\n", o->html, strerror(errno));
        code = 2;
    }
    if (res->npairs == 0)
        fprintf(stderr, "tfdiff: no captured tensors in common (golden has %zu, bad %zu): record with "
                        "tftrace --capture or tftrace replay\n", res->ng, res->nb);
    cJSON_Delete(root);
    return code;
}

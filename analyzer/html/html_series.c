/*
 * html_series.c — one streaming pass over a rank file for the HTML
 * reports' curves, heatmap, memory and collective charts (html_series.h).
 */
#include "html_series.h"
#include "tft_u64map.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool html_series_step_range(tft_reader *r, int64_t *lo, int64_t *hi)
{
    bool any = false;
    for (size_t i = 0; i < tft_reader_chunk_count(r); i++) {
        const tft_chunk_info *c = tft_reader_chunk(r, i);
        if (!c || c->first_step == TFT_STEP_NONE || c->last_step == TFT_STEP_NONE)
            continue;
        if (!any || c->first_step < *lo)
            *lo = c->first_step;
        if (!any || c->last_step > *hi)
            *hi = c->last_step;
        any = true;
    }
    return any;
}

void html_series_span_add(html_series_span *s, tft_trace *t, int i)
{
    tft_reader *r = t && i >= 0 ? tft_trace_reader(t, i) : NULL;
    int64_t a, b;
    if (r && html_series_step_range(r, &a, &b)) {
        s->lo = s->any && s->lo < a ? s->lo : a;
        s->hi = s->any && s->hi > b ? s->hi : b;
        s->any = true;
    }
    if (r)
        tft_trace_release(t, i);
}

/* Steps lo..hi in unsigned arithmetic (a crafted index may span every
 * int64_t): UINT64_MAX when they do. */
static uint64_t span_of(const html_series_bins *b)
{
    uint64_t span = (uint64_t)b->hi - (uint64_t)b->lo + 1;
    return span ? span : UINT64_MAX;
}

void html_series_bins_init(html_series_bins *b, int64_t lo, int64_t hi, int64_t pin)
{
    *b = (html_series_bins){.lo = lo, .hi = hi < lo ? lo : hi};
    uint64_t span = span_of(b);
    b->nbins = span < HC_BINS ? (int)span : HC_BINS;
    b->downsampled = span > HC_BINS;
    for (int k = 0; k < b->nbins; k++) /* the first step s with (s - lo) * nbins / span == k */
        b->rep[k] = (int64_t)((uint64_t)lo + (uint64_t)(((unsigned __int128)k * span + (unsigned)b->nbins - 1) /
                                                         (unsigned)b->nbins));
    int pb = html_series_bin_of(b, pin);
    if (pb >= 0)
        b->rep[pb] = pin;
}

void html_series_bins_x(html_series_bins *b, double x[HC_BINS], int64_t lo, int64_t hi, int64_t pin)
{
    html_series_bins_init(b, lo, hi, pin);
    for (int k = 0; k < b->nbins; k++)
        x[k] = (double)b->rep[k];
}

bool html_series_any_finite(const double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            return true;
    return false;
}

bool html_series_run_has_curves(const html_series_run *x)
{
    const int n = x ? x->bins->nbins : 0;
    return x && (html_series_any_finite(x->loss, n) || html_series_any_finite(x->grad_norm, n));
}

void html_series_carried(const double *in, double *out, int n)
{
    double last = NAN;
    for (int i = 0; i < n; i++)
        out[i] = last = isnan(in[i]) ? last : in[i];
}

int html_series_bin_of(const html_series_bins *b, int64_t step)
{
    if (step == INT64_MIN || step < b->lo || step > b->hi || !b->nbins)
        return -1;
    uint64_t off = (uint64_t)step - (uint64_t)b->lo;
    int k = (int)((unsigned __int128)off * (unsigned)b->nbins / span_of(b));
    return k < b->nbins ? k : b->nbins - 1;
}

static void fill_nan(double *v, int n)
{
    for (int i = 0; i < n; i++)
        v[i] = NAN;
}

html_series_run *html_series_run_new(const html_series_bins *b, int rank, const char *keep)
{
    html_series_run *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->names = calloc(HC_NAMES, sizeof(*x->names));
    x->sites = calloc(HC_SITES, sizeof(*x->sites));
    if (!x->names || !x->sites) {
        html_series_run_free(x);
        errno = ENOMEM;
        return NULL;
    }
    x->bins = b;
    x->rank = rank;
    snprintf(x->keep, sizeof(x->keep), "%s", keep ? keep : "");
    fill_nan(x->loss, HC_BINS);
    fill_nan(x->grad_norm, HC_BINS);
    fill_nan(x->lr, HC_BINS);
    fill_nan(x->live_total, HC_BINS);
    x->first_nonfinite_step = TFT_STEP_NONE;
    return x;
}

void html_series_run_free(html_series_run *x)
{
    if (!x)
        return;
    free(x->names);
    free(x->sites);
    free(x);
}

const html_series_name *html_series_run_name(const html_series_run *x, const char *name)
{
    for (int i = 0; i < x->nnames; i++)
        if (!strcmp(x->names[i].name, name))
            return &x->names[i];
    return NULL;
}

/* The pass's state besides the run. */
typedef struct scan {
    html_series_run *x;
    tft_reader *r;
    tft_u64map names;   /* string id -> index + 1 into x->names (0: not followed) */
    tft_u64map live;    /* hash(ptr, device) -> live_block */
    uint64_t site_live[HC_SITES + 1]; /* live bytes per site; [HC_SITES]: the others */
    uint64_t total_live;
    int last_bin;
    int64_t nf_step;    /* the step whose non-finite count nf_count holds */
    double nf_count;
    uint64_t enters, exits;
    uint64_t id_loss, id_gn, id_lr;
} scan;

typedef struct live_block {
    uint64_t bytes;
    int site;           /* index into x->sites, HC_SITES: not followed */
} live_block;

static double scalar_of(const tft_rec_tensor *t)
{
    if (t->stats.numel == 1 && t->mode >= TFT_STATS_HEALTH)
        return t->stats.min;
    return t->mode >= TFT_STATS_FULL ? t->stats.mean : NAN;
}

static html_series_name *name_slot(scan *s, uint64_t id)
{
    void *v;
    int rc = tft_u64map_insert(&s->names, id, NULL, NULL, &v);
    if (rc < 0)
        return NULL;
    int *idx = v;
    if (rc == 1) {
        const char *text = tft_reader_string(s->r, id);
        bool state = text && (!strncmp(text, "adam.", 5) || !strncmp(text, "param.", 6));
        if (state && strcmp(text, s->x->keep)) {
            *idx = 0;
            return NULL;
        }
        if (s->x->nnames == HC_NAMES) {
            s->x->names_full = true;
            *idx = 0;
            return NULL;
        }
        html_series_name *n = &s->x->names[s->x->nnames++];
        n->id = id;
        snprintf(n->name, sizeof(n->name), "%s", text ? text : "?");
        fill_nan(n->mean, HC_BINS);
        fill_nan(n->std, HC_BINS);
        fill_nan(n->absmax, HC_BINS);
        *idx = s->x->nnames;
    }
    return *idx ? &s->x->names[*idx - 1] : NULL;
}

static void flush_nonfinite(scan *s)
{
    int b = html_series_bin_of(s->x->bins, s->nf_step);
    if (b >= 0 && s->nf_count > s->x->nonfinite[b])
        s->x->nonfinite[b] = s->nf_count;
    s->nf_count = 0;
}

static void on_tensor(scan *s, const tft_rec_tensor *t)
{
    html_series_run *x = s->x;
    int64_t step = t->h.step;
    uint64_t bad = t->stats.nan + t->stats.pinf + t->stats.ninf;
    if (t->mode >= TFT_STATS_HEALTH && bad) {
        if (step != s->nf_step)
            flush_nonfinite(s);
        s->nf_step = step;
        s->nf_count += (double)bad;
        if (x->first_nonfinite_step == TFT_STEP_NONE && step != TFT_STEP_NONE) {
            x->first_nonfinite_step = step;
            const char *text = tft_reader_string(s->r, t->name);
            snprintf(x->first_nonfinite, sizeof(x->first_nonfinite), "%s", text ? text : "?");
        }
    }
    int b = html_series_bin_of(x->bins, step);
    if (b < 0 || step != x->bins->rep[b])
        return;
    double v = scalar_of(t);
    if (t->name == s->id_loss && isnan(x->loss[b]))
        x->loss[b] = v;
    else if (t->name == s->id_gn && isnan(x->grad_norm[b]))
        x->grad_norm[b] = v;
    else if (t->name == s->id_lr && isnan(x->lr[b]))
        x->lr[b] = v;
    html_series_name *n = name_slot(s, t->name);
    if (!n || !isnan(n->mean[b]))
        return;
    n->mean[b] = v;
    if (t->mode >= TFT_STATS_FULL) {
        n->std[b] = t->stats.std;
        n->absmax[b] = t->stats.absmax;
    }
}

/* The live bytes into bin b (the most in the bin). */
static void note_live(scan *s, int b)
{
    html_series_run *x = s->x;
    if (b < 0)
        return;
    for (int i = 0; i < x->nsites; i++)
        if (isnan(x->sites[i].live[b]) || (double)s->site_live[i] > x->sites[i].live[b])
            x->sites[i].live[b] = (double)s->site_live[i];
    if (isnan(x->live_total[b]) || (double)s->total_live > x->live_total[b])
        x->live_total[b] = (double)s->total_live;
}

static int site_index(scan *s, uint64_t id)
{
    html_series_run *x = s->x;
    for (int i = 0; i < x->nsites; i++)
        if (x->sites[i].id == id)
            return i;
    if (x->nsites == HC_SITES)
        return HC_SITES;
    html_series_site *st = &x->sites[x->nsites];
    st->id = id;
    const char *text = id ? tft_reader_string(s->r, id) : NULL;
    snprintf(st->name, sizeof(st->name), "%s", text ? text : id ? "?" : "(no site)");
    fill_nan(st->live, HC_BINS);
    return x->nsites++;
}

static void on_alloc(scan *s, const tft_rec_alloc *a)
{
    void *v;
    uint64_t key = tft_u64map_hash2(a->ptr, (uint64_t)a->device_kind << 16 | (uint16_t)a->device);
    int rc = tft_u64map_insert(&s->live, key, NULL, NULL, &v);
    if (rc < 0)
        return; /* past HC_LIVE_MAX: not followed */
    live_block *l = v;
    if (rc == 0) { /* freed unseen */
        s->site_live[l->site] -= l->bytes < s->site_live[l->site] ? l->bytes : s->site_live[l->site];
        s->total_live -= l->bytes < s->total_live ? l->bytes : s->total_live;
    }
    l->bytes = a->bytes;
    l->site = site_index(s, a->site);
    s->site_live[l->site] += a->bytes;
    s->total_live += a->bytes;
    if (l->site < HC_SITES && s->site_live[l->site] > s->x->sites[l->site].peak)
        s->x->sites[l->site].peak = s->site_live[l->site];
}

static void on_free(scan *s, const tft_rec_free *f)
{
    uint64_t key = tft_u64map_hash2(f->ptr, (uint64_t)f->device_kind << 16 | (uint16_t)f->device);
    live_block *l = tft_u64map_find(&s->live, key, NULL, NULL);
    if (!l)
        return;
    s->site_live[l->site] -= l->bytes < s->site_live[l->site] ? l->bytes : s->site_live[l->site];
    s->total_live -= l->bytes < s->total_live ? l->bytes : s->total_live;
    tft_u64map_remove(&s->live, l);
}

static void on_collective(scan *s, const tft_rec_collective *c)
{
    html_series_run *x = s->x;
    if (c->h.flags & TFT_COLL_FLAG_ENTER) {
        s->enters++;
        return;
    }
    s->exits++;
    if (c->t_exit < c->t_enter)
        return;
    uint64_t ns = c->t_exit - c->t_enter;
    x->colls++;
    x->coll_ns += ns;
    int b = html_series_bin_of(x->bins, c->h.step);
    if (b >= 0 && c->h.step == x->bins->rep[b]) {
        x->coll_ms[b] += (double)ns * 1e-6;
        x->coll_n[b] += 1;
    }
}

int html_series_run_read(html_series_run *x, tft_reader *r)
{
    scan s = {.x = x, .r = r, .last_bin = -1, .nf_step = TFT_STEP_NONE,
              .id_loss = tft_string_id("loss", 4), .id_gn = tft_string_id("grad_norm", 9),
              .id_lr = tft_string_id("lr", 2)};
    tft_u64map_init(&s.names, &(tft_u64map_opts){.vsize = sizeof(int), .max_n = 1u << 16});
    tft_u64map_init(&s.live, &(tft_u64map_opts){.vsize = sizeof(live_block), .max_n = HC_LIVE_MAX, .hashed = true});
    int e = tft_reader_rewind(r);
    const tft_rec *rec;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1) {
        e = 0;
        x->records++;
        int b = html_series_bin_of(x->bins, rec->step);
        switch (rec->kind) {
        case TFT_REC_TENSOR:
            if (rec->len >= sizeof(tft_rec_tensor))
                on_tensor(&s, (const tft_rec_tensor *)rec);
            break;
        case TFT_REC_ALLOC:
            if (rec->len >= sizeof(tft_rec_alloc))
                on_alloc(&s, (const tft_rec_alloc *)rec);
            break;
        case TFT_REC_FREE:
            if (rec->len >= sizeof(tft_rec_free))
                on_free(&s, (const tft_rec_free *)rec);
            break;
        case TFT_REC_COLLECTIVE:
            if (rec->len >= TFT_REC_COLLECTIVE_MIN_BYTES)
                on_collective(&s, (const tft_rec_collective *)rec);
            break;
        default: break;
        }
        if (b >= 0 && (rec->kind == TFT_REC_ALLOC || rec->kind == TFT_REC_FREE || b != s.last_bin))
            note_live(&s, b);
        if (b >= 0)
            s.last_bin = b;
    }
    flush_nonfinite(&s);
    x->coll_open = s.enters > s.exits ? s.enters - s.exits : 0;
    tft_u64map_free(&s.names);
    tft_u64map_free(&s.live);
    return e < 0 ? e : 0;
}

int html_series_calls_read(tft_reader *r, uint64_t comm, uint64_t seq_lo, uint64_t seq_hi, html_series_call *out, int max)
{
    int n = 0;
    int e = tft_reader_rewind(r);
    const tft_rec *rec;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1) {
        e = 0;
        if (rec->kind != TFT_REC_COLLECTIVE || rec->len < TFT_REC_COLLECTIVE_MIN_BYTES)
            continue;
        const tft_rec_collective *c = (const tft_rec_collective *)rec;
        if (c->comm != comm || c->coll_seq < seq_lo || c->coll_seq > seq_hi)
            continue;
        int k = 0;
        while (k < n && out[k].coll_seq != c->coll_seq)
            k++;
        if (k == n) {
            if (n == max)
                continue;
            const char *name = tft_reader_string(r, c->name);
            out[n] = (html_series_call){.comm = comm, .coll_seq = c->coll_seq, .type = c->type, .count = c->count,
                               .step = c->h.step};
            snprintf(out[n].name, sizeof(out[n].name), "%s", name ? name : "collective");
            n++;
        }
        if (c->t_enter)
            out[k].t_enter = c->t_enter;
        if (!(c->h.flags & TFT_COLL_FLAG_ENTER) && c->t_exit)
            out[k].t_exit = c->t_exit;
    }
    return e < 0 ? e : n;
}

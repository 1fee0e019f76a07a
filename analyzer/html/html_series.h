/*
 * html_series.h — the data the HTML reports draw (report_html.c), read
 * from rank files with the format library in one streaming pass each.
 *
 * Steps are put into at most HC_BINS columns ("bins"): each bin stands for
 * a run of consecutive steps and shows the values of one of them, its
 * representative step (the first step of the bin, or the pinned step — the
 * divergence — when it falls in the bin), except counts and memory, which
 * are the largest over the bin's steps. Memory is bounded: per bin and per
 * name, never per step or per record, plus the live allocations of the
 * rank (at most HC_LIVE_MAX of them are followed).
 */
#ifndef TFT_HTML_COLLECT_H
#define TFT_HTML_COLLECT_H

#include "tft_format.h"

#include <stdbool.h>
#include <stdint.h>

#define HC_BINS 200
#define HC_NAMES 160    /* tensor names followed per rank file (optimizer state left out) */
#define HC_SITES 64     /* allocation sites followed per rank file */
#define HC_LIVE_MAX (1u << 22)

/* The steps a report bins: lo..hi, in nbins bins; rep[b] is bin b's
 * representative step. The same for the runs a page compares. */
typedef struct html_series_bins {
    int64_t lo, hi;
    int nbins;
    int64_t rep[HC_BINS];
    bool downsampled;   /* more steps than bins */
} html_series_bins;

/* The steps of a rank file from its chunk index: false when none. */
bool html_series_step_range(tft_reader *r, int64_t *lo, int64_t *hi);
/* Bins lo..hi; pin (INT64_MIN none) becomes its bin's representative. */
void html_series_bins_init(html_series_bins *b, int64_t lo, int64_t hi, int64_t pin);
/* The bin of step, -1 outside lo..hi. */
int html_series_bin_of(const html_series_bins *b, int64_t step);

/* The steps of the rank files a page draws: html_series_span_add widens s
 * (zero-initialised: none yet) by the steps of rank file i of t (nothing
 * when t is NULL, i < 0, or the file has no steps or cannot be read). */
typedef struct html_series_span {
    bool any;           /* a rank file had steps: lo..hi hold */
    int64_t lo, hi;
} html_series_span;
void html_series_span_add(html_series_span *s, tft_trace *t, int i);
/* html_series_bins_init, and x[k] = bin k's representative step (the
 * charts' x values). */
void html_series_bins_x(html_series_bins *b, double x[HC_BINS], int64_t lo, int64_t hi, int64_t pin);

/* Whether any of v[0..n) is finite (a chart has something to draw). */
bool html_series_any_finite(const double *v, int n);
/* in[0..n) with each NaN (no value in the bin) replaced by the last value
 * before it: live bytes carried over the bins where nothing happened. */
void html_series_carried(const double *in, double *out, int n);

typedef struct html_series_name {
    uint64_t id;        /* string id */
    char name[96];
    double mean[HC_BINS], std[HC_BINS], absmax[HC_BINS]; /* at the representative step, NaN none */
} html_series_name;

typedef struct html_series_site {
    uint64_t id;
    char name[128];
    uint64_t peak;                /* the most it held at once */
    double live[HC_BINS];         /* the most it held in the bin's steps, NaN before its first */
} html_series_site;

/* One rank file's series. */
typedef struct html_series_run {
    const html_series_bins *bins;
    int rank;
    double loss[HC_BINS], grad_norm[HC_BINS], lr[HC_BINS]; /* NaN none */
    html_series_name *names;               /* HC_NAMES of them, nnames used, in order of first record; names
                                   * "adam.*" and "param.*" (optimizer state, parameters after the
                                   * update: as many as the parameters) are left out, except keep */
    char keep[96];                /* a name followed whatever it is (the first divergence's) */
    int nnames;
    bool names_full;              /* more names than HC_NAMES */
    double nonfinite[HC_BINS];    /* the most NaN+Inf elements of one step in the bin (over its tensors) */
    int64_t first_nonfinite_step; /* TFT_STEP_NONE none */
    char first_nonfinite[96];
    html_series_site *sites;               /* HC_SITES of them */
    int nsites;
    double live_total[HC_BINS];   /* the most live bytes (every site) in the bin's steps */
    double coll_ms[HC_BINS];      /* time in collectives in the bin's representative step, ms */
    double coll_n[HC_BINS];       /* collectives completed in it */
    uint64_t colls, coll_ns;      /* collectives completed, their total time */
    uint64_t coll_open;           /* entered and never left (a hang) */
    uint64_t records;
} html_series_run;

/* A new run over bins b (borrowed), NULL with errno on failure; keep (NULL
 * none) is a tensor name followed even when it would be left out. */
html_series_run *html_series_run_new(const html_series_bins *b, int rank, const char *keep);
void html_series_run_free(html_series_run *x); /* NULL-safe */
/* Reads r from its start to its end into x. 0 or a negative errno. */
int html_series_run_read(html_series_run *x, tft_reader *r);
/* Whether x (NULL: no) has a loss or gradient-norm curve to draw. */
bool html_series_run_has_curves(const html_series_run *x);
/* The series of tensor name in x, NULL when not followed. */
const html_series_name *html_series_run_name(const html_series_run *x, const char *name);

/* One collective call of a rank file, for a timeline. */
typedef struct html_series_call {
    uint64_t comm, coll_seq;
    uint64_t t_enter, t_exit;     /* t_exit 0: entered, never left */
    int type;                     /* enum tft_coll_type */
    uint64_t count;
    int64_t step;
    char name[48];
} html_series_call;

/* The calls of r on communicator comm with coll_seq in [seq_lo, seq_hi],
 * at most max (in file order). Returns how many or a negative errno. */
int html_series_calls_read(tft_reader *r, uint64_t comm, uint64_t seq_lo, uint64_t seq_hi, html_series_call *out, int max);

#endif

/*
 * compare_tensors.h — element-wise comparison of captured tensors
 * (compare_tensors.c), for `tfdiff --tensors`: both traces' captures
 * loaded, paired and compared into a result; report/report_tensors.c
 * renders it (text, JSON, the HTML page).
 */
#ifndef TFT_DIFF_TENSORS_H
#define TFT_DIFF_TENSORS_H

#include "core_capture.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tensors_opts {
    double rtol, atol;     /* an element differs when |g-b| > atol + rtol*max(|g|,|b|); 0, 0 = exact */
    const char *name_glob; /* only tensors whose name matches, NULL all */
    double pad_id;         /* token value of padding in a captured `tokens` tensor */
    int json;
    const char *html;      /* also write the HTML page here (docs/REPORTS.md, #tensors), NULL none */
} tensors_opts;

#define COMPARE_TENSORS_FIRST 8 /* differing indices kept per pair */

/* How one pair of the same layout differs. */
typedef struct compare_tensors_diff {
    uint64_t numel, differing;          /* elements, and those that differ */
    double max_abs, sum_abs, max_rel;   /* |g-b| largest (INFINITY: a non-finite one) and summed; largest relative */
    int nfirst;                         /* the first differing elements (flat indices) with both values */
    uint64_t first[COMPARE_TENSORS_FIRST];
    double first_g[COMPARE_TENSORS_FIRST], first_b[COMPARE_TENSORS_FIRST];
    /* structure over the last two dimensions (rows x columns) */
    int has_matrix;                     /* 2 or more dimensions, and the bitmaps below were allocated */
    int64_t rows, cols, lead;           /* lead: the matrices (numel / (rows * cols)) */
    uint64_t above, on, below, super1, sub1; /* differing elements by place to the diagonal */
    unsigned char *rowbits, *colbits, *leadbits; /* rows, columns, dim-0 indices with a difference (owned) */
    int pad_known;                      /* the step's tokens were captured (padding known) */
    uint64_t at_pad_col, at_pad_row;    /* differing elements at padded columns / rows */
    int ratio_const;                    /* BAD = ratio x GOLDEN wherever they differ (2 or more elements) */
    double ratio;
} compare_tensors_diff;

/* A captured tensor of one side, usable for the comparison: complete, with
 * data, one per (rank, tensor id). */
typedef struct compare_tensors_item {
    const core_capture_tensor *t; /* borrowed from the result's captures */
    int occ;        /* occurrence of (rank, step, name) in this trace */
    int paired;
} compare_tensors_item;

/* A pair: GOLDEN's and BAD's capture of (rank, step, name, occurrence). */
typedef struct compare_tensors_pair {
    const core_capture_tensor *g, *b;
    bool layout_differs;  /* dtype or shape differ: d is left zero */
    compare_tensors_diff d;
} compare_tensors_pair;

/* Both traces compared. */
typedef struct compare_tensors_result {
    core_capture_tensor *gt, *bt;   /* every capture of each side (owned) */
    size_t gn, bn;
    compare_tensors_item *gv, *bv;  /* the usable ones, in capture order (owned) */
    size_t ng, nb;
    compare_tensors_pair *pairs;    /* in GOLDEN's order (owned) */
    int npairs;
    int n_same, n_diff;             /* pairs identical (within tolerance); differing or of another layout */
    char lost[2][480];              /* [GOLDEN, BAD]: a rank file torn or damaged (its captures there are
                                     * lost), "" none */
} compare_tensors_result;

/* Loads the captured tensors of both traces, pairs them by (rank, step,
 * name, occurrence within the step) and compares each pair element by
 * element. Returns 0, or 2 after a message on stderr when a trace's
 * captures cannot be read. res is to be freed either way. */
int compare_tensors_run(const char *golden, const char *bad, const tensors_opts *o, compare_tensors_result *res);
void compare_tensors_free(compare_tensors_result *res); /* NULL-safe members */

/* The element-wise difference of one matrix of a pair (the last two
 * dimensions at leading index lead; a row of numel elements when the
 * tensor has fewer than two) in at most COMPARE_TENSORS_GRID x
 * COMPARE_TENSORS_GRID cells: the largest |BAD - GOLDEN| of the elements
 * of each cell (INFINITY for a non-finite one), and whether any differs. */
#define COMPARE_TENSORS_GRID 64
typedef struct compare_tensors_grid {
    int64_t rows, cols;   /* of the matrix drawn; rows <= 0 or cols <= 0: nothing */
    int br, bc;           /* cells: rows and columns */
    double cell[COMPARE_TENSORS_GRID * COMPARE_TENSORS_GRID];
    unsigned char any[COMPARE_TENSORS_GRID * COMPARE_TENSORS_GRID];
} compare_tensors_grid;
void compare_tensors_grid_of(const compare_tensors_pair *p, const tensors_opts *o, int64_t lead,
                             compare_tensors_grid *out);

#endif

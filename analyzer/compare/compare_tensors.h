/*
 * compare_tensors.h — element-wise comparison of captured tensors
 * (compare_tensors.c), for `tfdiff --tensors`.
 */
#ifndef TFT_DIFF_TENSORS_H
#define TFT_DIFF_TENSORS_H

#include <stdio.h>

typedef struct tensors_opts {
    double rtol, atol;     /* an element differs when |g-b| > atol + rtol*max(|g|,|b|); 0, 0 = exact */
    const char *name_glob; /* only tensors whose name matches, NULL all */
    double pad_id;         /* token value of padding in a captured `tokens` tensor */
    int json;
    const char *html;      /* also write the HTML page here (docs/REPORTS.md, #tensors), NULL none */
} tensors_opts;

/* Compares the captured tensors of two traces; writes the report (text or
 * JSON) to out, and with o->html the page (each differing pair's
 * element-wise difference as an image, with its pattern sentence). Returns
 * the exit status: 0 all identical (within tolerance), 1 some differ, 2 no
 * tensors in common or an input error, or the page cannot be written
 * (message on stderr). */
int compare_tensors(const char *golden, const char *bad, const tensors_opts *o, FILE *out);

#endif

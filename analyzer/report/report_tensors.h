/*
 * report_tensors.h — tfdiff --tensors' report (report_tensors.c): the
 * comparison of captured tensors (compare_tensors.h) as text or JSON, and
 * as the HTML page of docs/REPORTS.md (#tensors).
 */
#ifndef TFT_REPORT_TENSORS_H
#define TFT_REPORT_TENSORS_H

#include "compare_tensors.h"

#include <stdio.h>

/* Writes res (GOLDEN golden, BAD bad, compared with o) to out, as text or
 * JSON (o->json), and with o->html the page (each differing pair's
 * element-wise difference as an image, with its pattern sentence). Returns
 * the exit status: 0 all identical (within tolerance), 1 some differ, 2 no
 * tensors in common or the page cannot be written (message on stderr). */
int report_tensors(const compare_tensors_result *res, const char *golden, const char *bad, const tensors_opts *o,
                   FILE *out);

#endif

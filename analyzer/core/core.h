/*
 * core.h — what every analysis of the analyzer shares: steps (and the
 * windows that stand in for them in a trace without steps) and their
 * names in reports, and the text of a record's string ids. The analyses themselves are rooms above this one:
 * compare (GOLDEN vs BAD per rank), leak, desync, detect; programs
 * (tfdiff, tfdump) format their results; nothing here prints.
 *
 * Streaming: every analysis reads its rank files once, in order, holding at
 * most one step's records per rank (plus small per-name state), so memory
 * does not grow with the number of steps.
 */
#ifndef TFT_CORE_H
#define TFT_CORE_H

#include "tft_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Traces without steps (programs that never call tft_step_begin, e.g. an
 * unmodified program under the interposers): ops and tensors are aligned
 * by seq in windows of CORE_STEPLESS_WINDOW ops, each window standing in
 * for a step: step = CORE_STEPLESS_BASE + window (ordered like steps;
 * reports show "no step (window N)" / "step": null, "window": N). */
#define CORE_STEPLESS_WINDOW 4096
#define CORE_STEPLESS_BASE (-(INT64_C(1) << 40))
#define CORE_STEPLESS_STEP(seq) (CORE_STEPLESS_BASE + (int64_t)((seq) / CORE_STEPLESS_WINDOW))
#define CORE_IS_STEPLESS(step) ((step) != INT64_MIN && (step) < CORE_STEPLESS_BASE / 2)

/* "step N", "no step" (TFT_STEP_NONE), or for a window of a trace without
 * steps "no step (window N)". */
const char *core_step_text(int64_t step, char *buf, size_t n);

/* Text of string id `id` in reader r: the text, "#<16 hex>" when the id has no
 * definition, NULL for id 0 ("none"). buf must hold 18 bytes. */
const char *core_rec_string(const tft_reader *r, uint64_t id, char buf[18]);

#endif

/*
 * export_tensorboard.h — a trace's per-step scalars as TensorBoard event
 * files: tfdump --export tensorboard DIR TRACE, tfdiff --tensorboard DIR
 * (docs/REPORTS.md "TensorBoard"). export_tensorboard.c says how.
 *
 * A run directory per rank (DIR itself when one rank is exported, else
 * DIR/rank-NNNNN), each with one event file: per step the scalars "loss",
 * "lr" and "grad_norm" and, for every other tensor name recorded with
 * statistics (at most 512 per rank; optimizer state and parameters after
 * the update left out), "std/NAME" and "absmax/NAME"; optionally a text
 * (a report) for TensorBoard's text plugin. Files are written as every
 * analyzer output (core_out.h: a temporary file renamed; mode o->mode,
 * 0600 by default; directories made with x added where r is).
 */
#ifndef TFT_EXPORT_TENSORBOARD_H
#define TFT_EXPORT_TENSORBOARD_H

#include "export.h"

#include <stdbool.h>
#include <stdint.h>

/* Writes the ranks and steps o selects (o->format and o->out unused) into
 * dir as above; when text is not NULL, it goes with tag text_tag into the
 * first rank's run at step text_step (TFT_STEP_NONE: 0). 0, -ENOMEM, or
 * -EIO after saying what failed through o->log. */
int export_tensorboard(tft_trace *t, const export_opts *o, const char *dir, const char *text_tag, const char *text,
                       int64_t text_step);

/* text with each line indented by four spaces, so TensorBoard's Markdown
 * shows it as written; malloc'd, NULL when memory is short. */
char *export_tb_markdown_block(const char *text);

/* The event-file writer underneath, for tests. export_tb_open makes dir
 * when missing and a new event file in it (NULL, why in why, on failure);
 * scalars of one step are written together as one Event when the step
 * changes or the file closes; export_tb_close(keep false) removes the file.
 * The others return 0 or a negative errno. */
typedef struct export_tb export_tb;
export_tb *export_tb_open(const char *dir, unsigned mode, double wall, char *why, size_t n);
int export_tb_scalar(export_tb *w, int64_t step, double wall, const char *tag, double v);
int export_tb_text(export_tb *w, int64_t step, double wall, const char *tag, const char *text);
int export_tb_close(export_tb *w, bool keep);
const char *export_tb_path(const export_tb *w);

#endif

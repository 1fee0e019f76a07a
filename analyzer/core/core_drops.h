/*
 * core_drops.h — where a rank's records were lost: the steps the DROPPED
 * records of a rank file name (FORMAT.md §5.11, format 1.4), so that an
 * incomplete comparison says which steps it could not judge.
 */
#ifndef TFT_CORE_DROPS_H
#define TFT_CORE_DROPS_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads r's DROPPED records (one pass, only worth it when its chunks count
 * drops) into steps[0..1] (the span of the lost records' steps,
 * TFT_STEP_NONE when outside steps) and *known (false when a record came
 * without steps: a trace before 1.4); rewinds r. 0 or a negative errno. */
int core_drops_scan(tft_reader *r, int64_t steps[2], bool *known);

/* A DROPPED record's reason (enum tft_drop_reason): ring_full, too_big,
 * other, or "?" for one this build does not know. */
const char *core_drop_reason_name(uint32_t reason);

#endif

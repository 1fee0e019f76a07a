/*
 * core_escape.h — the analyzers' text on stdout with what traces hold that
 * a terminal would act on escaped (tft_escape.h): ESC sequences, carriage
 * returns, C1 and bidirectional controls, bytes that are not UTF-8. A
 * crafted tensor name cannot make a terminal show "MATCH" over a failed
 * verdict. One stream filter for every text mode, so no printf is missed.
 */
#ifndef TFT_CORE_ESCAPE_H
#define TFT_CORE_ESCAPE_H

#include <stdbool.h>
#include <stdio.h>

/* A stream that writes to dst escaped: text keeps newlines and tabs and
 * writes "\xHH" / "\uHHHH"; json (cJSON's text: its strings already
 * escape C0) writes "\u00HH" / "\uHHHH", valid inside a JSON string, so
 * the file is valid UTF-8 whatever bytes the names held. Closing it
 * flushes it, not dst. NULL when out of memory. Not for binary output. */
FILE *core_escape_open(FILE *dst, bool json);
/* From now on stdout is such a stream over the real one (flushed at
 * exit). 0, or -1 (stdout left as it was). */
int core_escape_stdout(bool json);

#endif

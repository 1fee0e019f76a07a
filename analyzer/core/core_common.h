/*
 * core_common.h — what tfdiff and tfdump share beyond the analyses:
 * telling a trace that recorded nothing. Nothing here prints.
 */
#ifndef TFT_CORE_COMMON_H
#define TFT_CORE_COMMON_H

#include "core.h"
#include "tft_format.h"

#include <stdbool.h>

/* A directory holding a manifest.json that reads and no rank file: the
 * command recorded nothing (tftrace -- CMD where CMD died or exited before
 * its first record). Fills *m then (release with tft_manifest_free);
 * false otherwise, *m untouched. */
bool core_trace_unrecorded(const char *path, tft_manifest *m);

#endif

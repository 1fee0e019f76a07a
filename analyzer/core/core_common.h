/*
 * core_common.h — pieces tfdiff (report.c, tfdiff.c) and tfdump
 * (dump_check.c, dump_util.c) share: telling a trace that recorded
 * nothing, and the JSON keys of a desync finding. Part of the analyses'
 * library (tftdiff); nothing here prints.
 */
#ifndef TFT_DIFF_COMMON_H
#define TFT_DIFF_COMMON_H

#include "core.h"
#include "tft_format.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* A directory holding a manifest.json that reads and no rank file: the
 * command recorded nothing (tftrace -- CMD where CMD died or exited before
 * its first record). Fills *m then (release with tft_manifest_free);
 * false otherwise, *m untouched. */
bool trace_unrecorded(const char *path, tft_manifest *m);

/* Adds the keys of desync finding ds[i] beyond comm, coll_seq, step, kind,
 * ranks and detail (docs/TFDIFF.md): seq, comm_name, members, caused_by
 * (the cause's index in ds[0..nd)), peer, tag. */
void diff_desync_json_more(cJSON *x, const diff_desync *ds, int nd, int i);

#endif

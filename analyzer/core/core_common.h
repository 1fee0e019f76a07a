/*
 * core_common.h — what tfdiff and tfdump share beyond the analyses:
 * telling a trace that recorded nothing, rank-file names, and the process
 * limits that reading a trace runs into. Nothing here prints.
 */
#ifndef TFT_CORE_COMMON_H
#define TFT_CORE_COMMON_H

#include "core.h"
#include "tft_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A directory holding a manifest.json that reads and no rank file: the
 * command recorded nothing (tftrace -- CMD where CMD died or exited before
 * its first record). Fills *m then (release with tft_manifest_free);
 * false otherwise, *m untouched. */
bool core_trace_unrecorded(const char *path, tft_manifest *m);

/* The run's duration from the manifest (ns), or false while it is not final. */
bool core_manifest_duration(const tft_manifest *m, uint64_t *ns);
/* The command's exit from the launcher's status in the manifest: tftrace
 * exits with the command's status, 128 + N when signal N killed it (*sig N,
 * *code 0; else *sig 0). Returns false when unknown (run not finished). */
bool core_manifest_exit(const tft_manifest *m, int *code, int *sig);
/* Rank `rank`'s exit as the manifest lists it (a launcher that saw the
 * rank die writes it there): *code and *sig (0 none) of its first entry
 * with a known exit; false, both untouched, when there is none. */
bool core_manifest_rank_exit(const tft_manifest *m, int rank, int *code, int *sig);

/* Whether a tensor's non-finite values are a mask's -inf, not a numerical
 * fault: -inf only (no NaN, no +inf) in the output of a masking op
 * (masked_fill, where, full, fill, triu, tril: `--torch ops` names them
 * `model.attn:aten.masked_fill`) or a tensor named like a mask. The first
 * non-finite value and the detectors pass over these. */
bool core_mask_inf(const char *name, const tft_stats *st);

/* Whether name is a rank file's, "rank-*.tft" (the names tft_trace_open reads). */
bool core_rank_file_name(const char *name);

/* Whether the trace was cut short by its recording rather than by the
 * program: its manifest says records were lost to write errors (a full
 * disk: "incomplete"), or a collector died without finishing it. why gets
 * the reason in words. The rank files then end where writing stopped, in
 * the middle of a step: nothing after their last complete step is data. */
bool core_trace_cut(const tft_trace *t, char *why, size_t n);

/* Every rank file of a trace open at once (a merge across ranks) needs a
 * file descriptor each: the soft limit goes up to the hard one. */
void core_raise_nofile(void);

/* What bounds memory, for a message about an allocation that failed:
 * "the address space is limited to N MiB (ulimit -v)", or "the machine is
 * out of memory" without such a limit. Written into buf; returns buf. */
const char *core_memory_limit(char *buf, size_t n);

#endif

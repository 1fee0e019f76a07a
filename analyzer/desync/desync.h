/*
 * desync.h — the collectives of every rank of a trace aligned by
 * (communicator, sequence number): missing calls (hangs), mismatches,
 * values that differ across ranks, stragglers, point-to-point calls never
 * completed (desync.c and the files it lists). Nothing here prints.
 */
#ifndef TFT_DESYNC_H
#define TFT_DESYNC_H

#include "core.h"
#include "core_spill.h"

enum desync_kind { DS_MISSING = 0, DS_TYPE, DS_COUNT, DS_DTYPE, DS_OP, DS_ROOT, DS_VALUES, DS_STRAGGLER, DS_P2P };
const char *desync_kind_name(int kind);

/* Members a finding lists (a larger communicator is named, not listed). */
#define DESYNC_MEMBERS 128

typedef struct desync_finding {
    uint64_t comm;            /* communicator id (DS_P2P: the communicator, not its p2p space; 0 none) */
    uint64_t coll_seq;        /* collective number on comm (DS_P2P: the call's number in the p2p space) */
    int64_t step;
    int64_t seq;              /* op seq of the earliest call involved: program order within step (TFT_SEQ_NONE) */
    int kind;                 /* enum desync_kind */
    int ranks[16];            /* the ranks at fault (DS_MISSING: missing; DS_P2P: the blocked rank) */
    int nranks;
    int nmembers;             /* members of comm as world ranks, 0 when unknown */
    int members[DESYNC_MEMBERS]; /* listed when nmembers <= DESYNC_MEMBERS */
    char comm_name[64];       /* "{1,3}", "{0-3}", "{0,1|2,3}" (intercommunicator); 16 hex digits when
                               * the members are unknown; "" for comm 0 */
    uint32_t id;              /* 1, 2, ... in the order desync_find returns them */
    uint32_t cause;           /* id of the finding that caused this one (a hang after a mismatch), 0 none */
    int peer;                 /* DS_P2P: world rank of the peer, -1 any source / unknown */
    int tag;                  /* DS_P2P: the message tag (TFT_TAG_ANY: any tag) */
    uint64_t clock_error_ns;  /* DS_STRAGGLER across hosts: the error bound of the times compared, 0 one host */
    char detail[512];
} desync_finding;

/* Aligns the collectives of all ranks of a trace by (communicator,
 * coll_seq) and reports the first mismatch per communicator: a rank
 * missing a collective others entered (a hang), type/count/dtype/op/root
 * differences, all-reduce results whose fingerprints differ across ranks,
 * and stragglers; point-to-point calls a rank never completed, with what
 * its peer did instead (DS_P2P). Findings are in program order (step, op
 * seq), a cause before the hangs it caused (their .cause = its .id),
 * stragglers last. Returns how many (<= max), or a negative errno. */
int desync_find(tft_trace *t, desync_finding *out, int max);

/* Index of the finding with id in list[0, n), -1 when none (0 included). */
int desync_index(const desync_finding *list, int n, uint32_t id);

/* Where finding list[k] is, for a report line: "communicator {1,3},
 * collective #3" (DS_P2P: "..., message #3"; parameters: "parameters"),
 * and ", caused by the count above" when its cause is in list[0, n). */
void desync_where(const desync_finding *list, int n, int k, char *buf, size_t len);

/* desync_find on the extracts of every rank file of t (each extracted
 * before): the same findings, one rank file's read buffer in memory per
 * rank instead of its reader. */
int desync_find_spilled(tft_trace *t, diff_spill *sp, desync_finding *out, int max);

#endif

/*
 * attach_cmd_internal.h — the parts of `tftrace attach` (attach_cmd.c: the
 * command, targets and probes; attach_write.c: calls to records;
 * attach_stream.c: the per-target queues that align the ranks' world
 * calls and stream everything else into the trace as it comes).
 * BPF builds only.
 */
#ifndef TFT_ATTACH_CMD_INTERNAL_H
#define TFT_ATTACH_CMD_INTERNAL_H

#include "bpf_attach.h"
#include "tft_format.h"

#include <elfutils/libdwfl.h>
#include <stdint.h>
#include <sys/types.h>

enum { ATT_MAX_TARGETS = 256, ATT_MAX_COMMS = 64 };

/* One call waiting in its target's queue (attach_stream.c). */
typedef struct att_pending {
    struct tft_acall c;
    int world;              /* an MPI_COMM_WORLD collective (aligned across ranks) */
    uint64_t k;             /* world: its index among the process's world calls */
} att_pending;

typedef struct att_target {
    pid_t pid;
    int rank, size;         /* from the environment, -1 unknown */
    char mpi[4096];         /* the MPI library it maps, "" none */
    int mpi_probed;         /* its MPI collectives are probed (takes part in the alignment) */
    unsigned probed_libs;   /* bit set: which kinds of library got probes (attach_cmd.c) */
    tft_writer *w;
    char file[64];
    Dwfl *dwfl;             /* for naming handles and call sites */
    uint64_t comm_handle[ATT_MAX_COMMS], comm_seq[ATT_MAX_COMMS];
    int ncomms;
    uint64_t calls, open, dropped_edge, allocs, frees, cuda, nccl, nccl_errors;
    uint64_t seq;           /* records of calls written (op seq) */
    uint64_t lost_seen[TFT_AFN_MAX]; /* ring-buffer losses already written as DROPPED */
    uint64_t lost;          /* calls lost, all functions */
    /* the queue (attach_stream.c): a ring of cap calls */
    att_pending *q;
    size_t qhead, qlen, qcap, qmax; /* qmax: the most ever queued */
    uint64_t nworld;        /* world calls received (local index of the next) */
    uint64_t first_world_enter[35], first_world_exit[35]; /* the first 35, for the alignment */
    long off;               /* its world calls' offset against the reference rank */
} att_target;

/* The targets (defined in attach_stream.c, filled by attach_cmd.c). */
extern att_target att_T[ATT_MAX_TARGETS];
extern int att_NT;

/* attach_write.c */
/* Writes call c of target t as records (COLLECTIVE ENTER/EXIT, ALLOC,
 * FREE, OP). A c with t_exit 0 is a call that never returned: its ENTER
 * only. */
void att_write_call(att_target *t, const struct tft_acall *c);
/* Whether c is a collective on MPI_COMM_WORLD. */
int att_is_world(att_target *t, const struct tft_acall *c);
/* Writes a DROPPED record for the calls of t lost since the last call
 * (tft_attach_lost_of), adds them to the chunk's count. */
void att_write_losses(att_target *t, const struct tft_alost *now);
void att_target_free(att_target *t);

/* attach_stream.c */
/* Hands call c to its target's queue; writes what may be written. */
void att_stream_call(void *ctx, const struct tft_acall *c);
/* Writes what the queues hold at the end: world calls past the last one
 * every rank recorded are left out (counted in dropped_edge). */
void att_stream_finish(void);

#endif

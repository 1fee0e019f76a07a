/*
 * diff_align_internal.h — private pieces of diff_align.c: the per-step
 * tensor buffers of one side, the id -> state maps, the edit script of a
 * step.  Nothing outside diff_align.c includes this.
 *
 * Memory: one step of records per side (tensors, ops, op input ids), two
 * id maps per side (this step and the previous one) and a capped map of
 * leaf tensors (parameters at initialisation, tokens, lr), which ops of
 * any later step may reference by id.
 */
#ifndef TFT_DIFF_ALIGN_INTERNAL_H
#define TFT_DIFF_ALIGN_INTERNAL_H

#include "diff.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Divergence state of a recorded tensor, as seen by the ops that read it. */
enum align_state {
    AS_UNKNOWN = 0, /* not in any map: treated as matching */
    AS_MATCH = 1,   /* aligned counterpart identical or within tolerance */
    AS_DIVERGED = 2 /* differs, or has no counterpart */
};

/* One op record of the current step. */
typedef struct align_op {
    int64_t seq;
    uint32_t in_off, n_in; /* input ids: side->inputs[in_off .. in_off+n_in) */
    uint16_t op_kind;      /* enum tft_op_kind */
    char name[96];         /* "scope/name", or "name" without a scope */
} align_op;

/* One tensor record of the current step, with what the diff needs. */
typedef struct align_tensor {
    uint64_t id, name_id;
    int64_t step, seq;
    int32_t op;            /* index into side->ops, -1 when no op record */
    uint8_t dtype, mode, ndim;
    bool skip;             /* collective result, left out of the alignment */
    bool report;           /* passes the name glob: counted and reported */
    int64_t shape[TFT_MAX_NDIM];
    tft_stats stats;
    char name[96];
} align_tensor;

/* Open-addressing map uint64 -> small state; a zero state marks a free slot. */
typedef struct id_map {
    uint64_t *keys;
    uint8_t *vals;
    size_t cap, n;         /* cap is 0 or a power of two */
    size_t max_n;          /* inserts beyond this are dropped (0 = no cap) */
} id_map;

/* One side (GOLDEN or BAD): its reader, the current step's records and the
 * record that started the next step, held until that step is loaded. */
typedef struct align_side {
    tft_reader *r;
    bool eof;              /* reader returned 0 */
    bool has;              /* a step is loaded in tensors/ops */
    int64_t step;          /* the loaded step */
    uint64_t groups;       /* steps loaded so far */
    unsigned char *pend;   /* copy of the first record of the next step */
    size_t pend_cap;
    bool has_pend;
    align_tensor *tensors;
    size_t n_tensors, cap_tensors;
    align_op *ops;
    size_t n_ops, cap_ops;
    uint64_t *inputs;
    size_t n_inputs, cap_inputs;
    int64_t first_step, last_step;
    bool exit_known;
    int exit_code, exit_signal;
    id_map cur, prev, leaf; /* tensor id -> enum align_state */
    _Alignas(8) unsigned char stepless[TFT_REC_MAX_BYTES]; /* a step-less record given a window step */
} align_side;

/* One entry of a step's edit script: a pair, or a tensor on one side only. */
typedef struct align_edit {
    int32_t g, b;          /* indices into the sides' tensors, -1 = absent */
} align_edit;

#endif

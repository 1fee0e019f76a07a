/*
 * capture.h — reading captured tensors (CAPTURE records, FORMAT.md §5.12)
 * out of a trace, and writing one as a .npy file. Shared by tfdump
 * (--tensor, --captures, --replay-op) and tfdiff (--tensors).
 *
 * A capture is one tensor's bytes for one op: an output of op `seq`, an
 * input of op `seq` (its memory when the op began), or the prior value of an
 * in-place output (a GEMM's C before it ran, role TFT_CAPTURE_PRIOR). The
 * same tensor id can be captured more than once (as the output of its op and
 * as the input of a later one); each capture is its own core_capture_tensor.
 *
 * Memory: core_capture_list streams every rank file once (plus a second pass only
 * when the TENSOR record of an input capture lay too far back to be kept:
 * then its statistics are looked up by id); with_data holds the captured
 * tensors' bytes, nothing else grows with the trace. Nothing here prints.
 */
#ifndef TFT_CORE_CAPTURE_H
#define TFT_CORE_CAPTURE_H

#include "tft_format.h"

#include <stddef.h>
#include <stdint.h>

typedef struct core_capture_tensor {
    int rank;                /* rank id of the file it came from */
    int64_t step;            /* step of the capture (TFT_STEP_NONE outside steps) */
    int64_t seq;             /* the op of the capture */
    int role;                /* enum tft_capture_role: 0 output, 1 input, 2 prior */
    uint64_t id;             /* tensor id (the TENSOR record's) */
    char name[256];          /* tensor name ("#<hex>" when its string is missing) */
    char op_name[256];       /* name of op `seq` ("" when its OP record was not seen) */
    int dtype;               /* enum tft_dtype */
    int ndim;
    int64_t shape[TFT_MAX_NDIM];
    uint64_t bytes;          /* raw bytes of the whole tensor */
    void *data;              /* malloc'd `bytes` bytes; NULL when not loaded or incomplete */
    int complete;            /* the parts cover every byte exactly once */
    tft_stats stats;         /* the TENSOR record's statistics, when have_stats */
    int stats_mode;          /* its mode (enum tft_stats_mode), -1 when not found */
    /* additions beyond the first contract */
    uint64_t present;        /* bytes received (parts seen, duplicates not counted) */
    uint32_t parts;          /* CAPTURE records of this capture */
    int consistent;          /* every part agreed on name, dtype, shape and total */
    int op_kind;             /* enum tft_op_kind of op `seq`, -1 when not seen */
} core_capture_tensor;

/* Every captured tensor of every rank of trace_path (a trace directory or
 * one rank file), in (rank file, file order of the first part) order. With
 * with_data the bytes of complete captures are loaded (t->data); without,
 * only the metadata. *out (release with core_capture_free) may be empty (n = 0) for a
 * trace without captures. Returns 0, or a negative errno with a message in
 * err (unreadable trace, out of memory). A damaged or torn trace still lists
 * what its readable chunks hold; the lost parts make captures incomplete,
 * and lost (lostlen bytes; NULL: not asked) names the first such rank file
 * ("" when none). */
int core_capture_list(const char *trace_path, int with_data, core_capture_tensor **out, size_t *n, char *err,
                      size_t errlen, char *lost, size_t lostlen);
void core_capture_free(core_capture_tensor *t, size_t n); /* NULL-safe */
/* Which captures' bytes to load: want(ctx, t) sees the capture as its first
 * part describes it (rank, step, seq, role, id, name, dtype, shape, bytes)
 * and returns non-zero to keep its bytes. core_capture_want_none keeps none. */
typedef int (*core_capture_want_fn)(void *ctx, const core_capture_tensor *t);
int core_capture_want_none(void *ctx, const core_capture_tensor *t);
/* core_capture_list that loads the bytes of the captures want accepts (NULL:
 * all), so memory is what the caller needs rather than every capture of
 * the trace, and passes the reader's diagnostics (damaged chunks, a torn
 * tail) to log (NULL = none), as tft_reader_opts.log does. */
int core_capture_list_want(const char *trace_path, core_capture_want_fn want, void *want_ctx, core_capture_tensor **out, size_t *n,
                  tft_log_fn log, void *log_ctx, char *err, size_t errlen);

/* Index of the first capture matching name_or_id, -1 when none: a decimal
 * number is a tensor id; otherwise a tensor name, optionally "NAME@STEP".
 * Only output and input captures match a name (a PRIOR capture is found by
 * its id or through core_capture_find_op). */
int core_capture_find(const core_capture_tensor *t, size_t n, const char *name_or_id);

/* Index of the capture of tensor `id` with `role` for op `seq` of `rank`, -1 none. */
int core_capture_find_op(const core_capture_tensor *t, size_t n, int rank, int64_t seq, uint64_t id, int role);

/* Writes t (complete, data loaded) as a .npy file, format version 1.0, C
 * order, the exact shape (a 0-d tensor is shape ()), dtype: f32 '<f4',
 * f64 '<f8', f16 '<f2', i32 '<i4', i64 '<i8', u8 '|u1', i8 '|i1', i16
 * '<i2', u16 '<u2', u32 '<u4', u64 '<u8', bool '|b1'. numpy has no bf16
 * and no fp8 (bf16, f8e4m3, f8e5m2): they are written
 * as their raw bits, bf16 '<u2' and f8e4m3/f8e5m2 '|u1' (as_f32 = 0), or
 * converted exactly to '<f4' (as_f32 = 1; other dtypes ignore it).
 * The file gets the permission bits mode (0: 0600) and is written with
 * core_out (never through a link at path). Returns 0 or a negative errno
 * with a message in err. */
int core_capture_write_npy(const core_capture_tensor *t, const char *path, int as_f32, unsigned mode, char *err,
                           size_t errlen);

/* "output" / "input" / "prior" / "?" */
const char *core_capture_role_name(int role);

#endif

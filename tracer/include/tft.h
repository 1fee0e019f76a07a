/*
 * tft.h — the tftrace recording API (libtftrace.so).
 *
 * Instrumented programs call these functions to record steps, ops, tensors
 * with their statistics, allocations, collectives and checkpoints. Records
 * go to per-thread lock-free rings in shared memory drained by the tftrace
 * collector (or, without the launcher but with TFT_OUTPUT set, by a writer
 * thread inside the process).
 *
 * Without tftrace and without TFT_* configuration every call is a cheap
 * no-op returning 0, so programs can ship with the calls in. Functions never
 * abort or print; they return 0 or a negative errno (-ENOSPC when a record
 * was dropped because its ring was full). All functions are thread-safe;
 * each thread records into its own ring.
 *
 * ABI: the structs a caller passes in (tft_coll_info, tft_comm_info) begin
 * with size_t sz, which their initialiser macros set to the size the
 * caller was compiled with. They only grow at the end; the library reads
 * the prefix sz covers (anything from the first published size, *_V1_SZ,
 * on) and gives the fields beyond it their defaults, so a program built
 * against an older tft.h runs with a newer library, and a newer program's
 * larger struct is read as far as the library knows it.
 */
#ifndef TFT_H
#define TFT_H

#include "tft_types.h" /* TFT_API, tft_dtype, tft_stats, enum tft_op_kind, tft_coll_type, tft_redop */

#include <stddef.h>
#include <stdint.h>

/* The version of tftrace this header belongs to (the library, the tools and
 * the API; CMakeLists.txt takes its version from here). A MINOR step adds
 * to the API and keeps the ABI: programs built against an older header run
 * with a newer library of the same MAJOR. 0.2 added tft_tensor_dev and
 * tft_tensor_stats. tft_version() (tft_types.h) gives the version of the
 * library a program runs with. The trace format has its own version
 * (TFT_FORMAT_MAJOR/MINOR, tft_format.h; tft_format_version()). */
#define TFT_VERSION_MAJOR 0
#define TFT_VERSION_MINOR 2
#define TFT_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when recording is active in this process, 0 when calls are no-ops. */
TFT_API int tft_enabled(void);

/* Under tftrace --torch a rank is a process that trains. A process forked
 * by a recording one (a DataLoader worker) or started below one (a shell,
 * the compiler torch.compile runs) does not record at first: it waits.
 * tft_process_waiting() is 1 in such a process (0 otherwise);
 * tft_process_join() makes a waiting process a rank of its own from now on
 * (numbered after the others) — the PyTorch layer calls it at the first
 * module forward, loss, optimizer step or collective of the process.
 * Returns 1 when the process records (now or already), 0 when it does not. */
TFT_API int tft_process_waiting(void);
TFT_API int tft_process_join(void);

/* Marks the start / end of a training step. Records between them carry the
 * step number — the records of every thread of the process, not only the
 * calling one: mark steps on one thread (usually the main one) and record
 * from any. Tensors are sampled per TFT_EVERY on step numbers. */
TFT_API int tft_step_begin(int64_t step);
TFT_API int tft_step_end(int64_t step);

/* Starts an op: assigns the next sequence number of this rank and records
 * the op with the ids of its input tensors (from tft_last_tensor_id()).
 * Tensors recorded by this thread until tft_op_end() (or the next
 * tft_op_begin) are its outputs. Returns the seq (>= 0), or a negative errno;
 * returns 0 when recording is off. */
TFT_API int64_t tft_op_begin(const char *name, int op_kind, int n_in, const uint64_t *in_ids);
TFT_API void tft_op_end(void);

/* Records a host tensor: shape, dtype and statistics per the recording mode.
 * Outside an op bracket the tensor is its own op (named like the tensor).
 * data may be NULL only when numel is 0. Never aborts the caller. */
TFT_API int tft_tensor(const char *name, tft_dtype dtype, const void *data, int ndim,
                       const int64_t *shape);
/* Records a strided host tensor read in place — a transposed view, a
 * slice, an expanded tensor — like tft_tensor would its dense row-major
 * copy (the same statistics and fingerprint, bit for bit), without making
 * that copy: strides[d] is the distance in elements between neighbours
 * along dimension d (>= 0; 0 for a broadcast dimension). Dense strides take
 * tft_tensor's path. Added in 0.3. Returns 0, -EINVAL (as
 * tft_tensor, a NULL strides or a negative stride), -ENOSPC. */
TFT_API int tft_tensor_strided(const char *name, tft_dtype dtype, const void *data, int ndim,
                               const int64_t *shape, const int64_t *strides);
/* Id of the last tensor this thread recorded (0 = none), for op inputs. */
TFT_API uint64_t tft_last_tensor_id(void);

/* Records a tensor in CUDA device memory: dense, row-major, the elements
 * of shape at dev_ptr on CUDA device `device` (>= 0). Its statistics (per
 * the recording mode) are computed on the device, on `stream` (a
 * cudaStream_t; NULL = the legacy default stream) behind the work already
 * queued there — the caller's own kernels that produce it — by the CUDA
 * plugin (libtftrace-cuda.so, which the CUDA driver loads under tftrace
 * when a device is there, docs/INTERPOSE.md). The call does not wait: the
 * record is written when the statistics have come back, at the latest by
 * the step's tft_step_end (or tft_flush, or exit); its id
 * (tft_last_tensor_id) and op are taken at the call, like tft_tensor's.
 * dev_ptr's memory must hold the tensor until the work queued on stream
 * before the call has run. Without the plugin (no device, not under
 * tftrace, a build without CUDA) the record carries shape and dtype only.
 * dev_ptr is never dereferenced on the host. Returns 0, -EINVAL (as
 * tft_tensor, or device < 0), -ENOSPC. */
TFT_API int tft_tensor_dev(const char *name, tft_dtype dtype, const void *dev_ptr, int ndim,
                           const int64_t *shape, int device, void *stream);

/* Records a tensor whose statistics the caller computed (fused into the
 * kernel that made it, on a device, in another library): stats holds the
 * fields stats_mode makes valid (enum tft_stats_mode; the semantics of
 * every field are tft_stats's, FORMAT.md). The record gets the lesser of
 * stats_mode and the recording's mode for this step, the fields beyond it
 * zeroed, and numel from shape (stats->numel is ignored). device: the CUDA
 * ordinal that holds the tensor, or -1 for host memory. Same op rules as
 * tft_tensor; never captured (the recorder does not see the bytes).
 * Returns 0, -EINVAL (as tft_tensor, a NULL stats or a bad mode or
 * device), -ENOSPC. */
TFT_API int tft_tensor_stats(const char *name, tft_dtype dtype, int ndim, const int64_t *shape,
                             const tft_stats *stats, int stats_mode, int device);

/* Name nesting (layers, modules); the scope path joins names with '/'. */
TFT_API void tft_scope_push(const char *name);
TFT_API void tft_scope_pop(void);

/* Host allocations (for leak reports); site names where it came from. */
TFT_API int tft_alloc(const void *ptr, size_t bytes, const char *site);
TFT_API int tft_free(const void *ptr);
/* Device allocations (device = CUDA ordinal). */
TFT_API int tft_alloc_dev(const void *ptr, size_t bytes, int device, const char *site);
TFT_API int tft_free_dev(const void *ptr, int device);

/* A collective: call tft_coll_enter before the communication and
 * tft_coll_exit after it, with the result buffer (host memory) for its
 * statistics. A rank stuck in a collective leaves an enter without exit.
 * The per-communicator sequence number is assigned by the recorder. */
typedef struct tft_coll_info {
    size_t sz;          /* sizeof(tft_coll_info) as the caller was built (TFT_COLL_INFO sets it) */
    const char *name;   /* API name, e.g. "MPI_Allreduce" */
    uint64_t comm;      /* communicator id, equal across its ranks */
    int type;           /* enum tft_coll_type */
    int dtype;          /* tft_dtype of the buffer elements */
    uint64_t count;     /* elements */
    int redop;          /* enum tft_redop */
    int root;           /* root (bcast, reduce) or peer (send, recv); -1 when the call has none */
    int rank, nranks;   /* position in the communicator */
    /* added with format 1.2 (callers built before pass a smaller sz, at least
     * TFT_COLL_INFO_V1_SZ: the tag is taken as none) */
    int tag;            /* send/recv: the message tag, TFT_TAG_ANY (-2) for any; ignored for collectives */
    /* added in tftrace 0.2 (format unchanged; a smaller sz: taken as 0) */
    uint64_t t_enter;   /* tft_coll_exit only: when the call began (tft_now_ns), for a call that
                         * completes on another thread than the one that called tft_coll_enter
                         * (an async collective waited for elsewhere); 0 = the enter time this
                         * thread's tft_coll_enter noted */
} tft_coll_info;
/* Zero-initialised but for sz; set .root = -1 for calls without a root. */
#define TFT_COLL_INFO(...) ((tft_coll_info){ .sz = sizeof(tft_coll_info), __VA_ARGS__ })
/* The size of tft_coll_info before the tag was added: the smallest sz accepted. */
#define TFT_COLL_INFO_V1_SZ (offsetof(tft_coll_info, tag))

/* Returns a token for tft_coll_exit (>= 0) or a negative errno (-EINVAL:
 * ci NULL or its sz below TFT_COLL_INFO_V1_SZ). */
TFT_API int64_t tft_coll_enter(const tft_coll_info *ci);
/* result: host buffer holding count elements of dtype after the call, or NULL. */
TFT_API int tft_coll_exit(int64_t token, const tft_coll_info *ci, const void *result);

/* A communicator, recorded once per process before the first collective
 * that names its id (a COMM record, FORMAT.md 5.15): lets reports name it by
 * its members ("communicator {1,3}"). The caller keeps the once-only
 * promise; every call writes a record. */
typedef struct tft_comm_info {
    size_t sz;              /* sizeof(tft_comm_info) as the caller was built (TFT_COMM_INFO sets it) */
    uint64_t comm;          /* its id, as in tft_coll_info.comm; 0 is refused */
    const char *name;       /* what made it ("MPI_Comm_split", "ncclCommInitRank"), NULL none */
    uint64_t parent;        /* id of the communicator it was made from, 0 none or unknown */
    int rank, size;         /* this process's rank in it (of its local group for an
                             * intercommunicator) and its size */
    unsigned order;         /* creation order among this process's communicators with the same members */
    int n_members;          /* entries of members, 0 when not known here */
    const int32_t *members; /* world rank of communicator rank 0, 1, ... (an intercommunicator:
                             * the local group, then the remote group), or NULL */
    unsigned flags;         /* TFT_COMM_INTER */
} tft_comm_info;
/* tft_comm_info.flags, written as the COMM record's header flags: an
 * intercommunicator (FORMAT.md 5.15; TFT_COMM_FLAG_INTER in tft_format.h). */
#define TFT_COMM_INTER 0x1u
/* Zero-initialised but for sz. */
#define TFT_COMM_INFO(...) ((tft_comm_info){ .sz = sizeof(tft_comm_info), __VA_ARGS__ })
/* The size of the first published tft_comm_info: the smallest sz accepted
 * (fields added after it go at the end and are defaulted for a smaller sz). */
#define TFT_COMM_INFO_V1_SZ (offsetof(tft_comm_info, flags) + sizeof(unsigned))

/* Writes the COMM record of ci (members beyond TFT_COMM_MAX_MEMBERS: none
 * listed). Returns 0 (also when recording is off), -EINVAL for a bad ci,
 * -ENOMEM, or -ENOSPC when the record was dropped. ci and members stay the
 * caller's. */
TFT_API int tft_comm_define(const tft_comm_info *ci);

/* The context of this thread's next tensors: TFT_TENSOR_TRAIN (0x2) or
 * TFT_TENSOR_EVAL (0x4), | TFT_TENSOR_NO_GRAD (0x8) (tft_types.h),
 * stamped on each tensor record's flags until changed; 0 (the start) says
 * nothing. Other bits are ignored. */
TFT_API void tft_tensor_context(unsigned flags);
/* A checkpoint saved (TFT_CKPT_SAVE) or resumed (TFT_CKPT_RESUME) at step,
 * with the path and a resume recipe (e.g. "--resume DIR"), may be NULL. */
TFT_API int tft_checkpoint(int action, int64_t step, const char *path, const char *recipe);
/* An exception the program did not catch (an EXCEPTION record at the
 * current step): its type ("RuntimeError"), message, what was running
 * ("model.tok_emb"; NULL unknown) and the innermost frames, one per line
 * (NULL none). Each text is cut at 1 KiB. */
TFT_API int tft_exception(const char *type, const char *message, const char *where, const char *frames);

/* Flushes this process's records towards the trace (best effort). */
TFT_API int tft_flush(void);

/* CLOCK_MONOTONIC nanoseconds, the clock of record timestamps. */
TFT_API uint64_t tft_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* TFT_H */

/*
 * tft_format.h — the tftrace trace format: record layouts, the rank-file
 * writer, the streaming reader, the multi-rank merger and the manifest.
 *
 * formats/FORMAT.md is the normative specification; this header mirrors it.
 * All multi-byte fields are little-endian; records are 8-byte aligned.
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno.  The library never prints: diagnostics go to the log
 * callback given in the options (none = silent).
 *
 * ABI (LIBTFTRACE_1): how each struct may change.
 *   - Passed in by the caller, with size_t sz first (tft_writer_opts,
 *     tft_reader_opts; their TFT_*_OPTS macros set sz): they grow at the
 *     end; the library reads the prefix sz covers and defaults the rest.
 *   - Filled into the caller's memory, with sz first (tft_writer_stats): the
 *     caller sets sz (TFT_WRITER_STATS()), the library writes only what it
 *     covers; they grow at the end.
 *   - Handed out by pointer into the library's memory (tft_reader_info's
 *     tft_file_info, tft_chunk_info, tft_trace_manifest's tft_manifest):
 *     may grow at the end; a caller reads the fields it knows.
 *   - Fixed in size: tft_file_info as tft_writer_open's input,
 *     tft_reader_status, tft_thread_info, tft_manifest and its entries as
 *     the caller's (tft_manifest_parse/read, tft_manifest_collector_self):
 *     they never change; a field they would need comes with a new struct
 *     and a new function.
 *   - Record layouts: FORMAT.md's rules (fields appended, lengths say).
 *
 * Workload: the writer takes millions of small records per second from one
 * thread (the collector); the reader streams files of any size with memory
 * bounded by one chunk (<= 4 MiB raw) per open rank file.
 */
#ifndef TFT_FORMAT_H
#define TFT_FORMAT_H

#include "tft_types.h" /* TFT_API, tft_dtype, tft_stats, the shared enumerations */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The format version this header describes and the library writes
 * (tft_format_version() gives the library's as text). */
#define TFT_FORMAT_MAJOR 1
#define TFT_FORMAT_MINOR 7 /* 1.1: CAPTURE records; 1.2: THREAD, SYNC, COMM records, p2p tags; 1.3: fp8 dtypes; 1.4: chunk encodings, --keep-steps, DROPPED kinds and steps; 1.5: STACK records, per-rank manifest fragments, host per rank; 1.6: CLOCK records; 1.7: EXCEPTION records */

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

enum tft_log_level { TFT_LOG_ERROR = 0, TFT_LOG_WARN = 1, TFT_LOG_INFO = 2, TFT_LOG_DEBUG = 3 };
/* Called with a complete one-line message (no trailing newline). */
typedef void (*tft_log_fn)(void *ctx, int level, const char *msg);

/* ------------------------------------------------------------------------ */
/* Enumerations of records (those the recording API shares: tft_types.h)    */
/* ------------------------------------------------------------------------ */

/* Record kinds (u16 in the record header). Readers skip unknown kinds. */
enum tft_rec_kind {
    TFT_REC_STRING = 1,     /* interned string definition */
    TFT_REC_STEP = 2,       /* step begin / end */
    TFT_REC_OP = 3,         /* one op: name, scope, kind, inputs, outputs */
    TFT_REC_TENSOR = 4,     /* tensor shape, dtype and statistics */
    TFT_REC_ALLOC = 5,      /* allocation */
    TFT_REC_FREE = 6,       /* deallocation */
    TFT_REC_COLLECTIVE = 7, /* collective / point-to-point communication */
    TFT_REC_KERNEL = 8,     /* device kernel or copy activity */
    TFT_REC_CHECKPOINT = 9, /* checkpoint save / resume */
    TFT_REC_PROCESS = 10,   /* process start / exit / memory sample */
    TFT_REC_DROPPED = 11,   /* records lost by the recorder */
    TFT_REC_CAPTURE = 12,   /* bytes of a captured tensor, one part (format 1.1) */
    TFT_REC_THREAD = 13,    /* the recording thread of the records that follow (format 1.2) */
    TFT_REC_SYNC = 14,      /* no later record of the file has an earlier step (format 1.2) */
    TFT_REC_COMM = 15,      /* a communicator: identity, rank, size, members (format 1.2) */
    TFT_REC_STACK = 16,     /* one thread's call stack, taken from outside (format 1.5) */
    TFT_REC_CLOCK = 17,     /* a pair of the host's monotonic and realtime clocks, NTP state (format 1.6) */
    TFT_REC_EXCEPTION = 18, /* an exception the program did not catch (format 1.7) */
    TFT_REC_KIND_MAX = 19
};

enum tft_step_phase { TFT_STEP_BEGIN = 0, TFT_STEP_END = 1 };
enum tft_proc_event { TFT_PROC_START = 0, TFT_PROC_EXIT = 1, TFT_PROC_RSS = 2 };
enum tft_drop_reason { TFT_DROP_RING_FULL = 0, TFT_DROP_TOO_BIG = 1, TFT_DROP_OTHER = 2 };
enum tft_thread_event {
    TFT_THREAD_SWITCH = 0, /* the records that follow (until the next SWITCH) come from this thread */
    TFT_THREAD_END = 1     /* the thread let go of its ring (it exited): no more records from it */
};

/* ------------------------------------------------------------------------ */
/* Record layouts (FORMAT.md §5). Every record starts with tft_rec.          */
/* ------------------------------------------------------------------------ */

#define TFT_REC_ALIGN 8u
#define TFT_REC_MAX_BYTES 65536u /* largest record a writer accepts */
#define TFT_STRING_MAX 65000u    /* longest string text a writer accepts */
#define TFT_SEQ_NONE INT64_MIN  /* seq field when no op is current */
#define TFT_STEP_NONE INT64_MIN /* step field when outside any step */

typedef struct tft_rec {
    uint16_t kind;  /* enum tft_rec_kind */
    uint16_t flags; /* kind-specific flag bits */
    uint32_t len;   /* total bytes including this header, multiple of 8 */
    uint64_t ts;    /* CLOCK_MONOTONIC nanoseconds (see file header clocks) */
    int64_t step;   /* training step, TFT_STEP_NONE when unknown */
    int64_t seq;    /* op sequence number this record belongs to, or TFT_SEQ_NONE */
} tft_rec;          /* 32 bytes */

typedef struct tft_rec_string {
    tft_rec h;
    uint64_t id;  /* xxh3-64 of the text */
    uint32_t n;   /* text bytes (no terminator is stored) */
    uint32_t pad;
    char text[];  /* n bytes, then zero padding to 8 */
} tft_rec_string;

typedef struct tft_rec_step {
    tft_rec h;      /* h.step is the step */
    uint32_t phase; /* enum tft_step_phase */
    uint32_t pad;
} tft_rec_step;

/* An op: h.seq is its own sequence number (0,1,2,... per rank). */
typedef struct tft_rec_op {
    tft_rec h;
    uint64_t name;  /* string id of the op name */
    uint64_t scope; /* string id of the scope path ("L0/attn"), 0 = none */
    uint16_t op_kind; /* enum tft_op_kind */
    uint8_t n_in;   /* input tensor ids that follow */
    uint8_t n_out;  /* output tensor ids that follow */
    uint8_t n_attr; /* int64 attributes that follow (gemm: M,N,K,transA,transB,dtype) */
    uint8_t pad[3];
    uint64_t ids[]; /* n_in input ids, n_out output ids, then n_attr int64 attrs */
} tft_rec_op;

#define TFT_TENSOR_HAS_DATA 0x1u /* h.flags: its bytes are captured as an output (CAPTURE records) */
/* TFT_TENSOR_TRAIN, _EVAL, _NO_GRAD, _CONTEXT (format 1.7): tft_types.h */

typedef struct tft_rec_tensor {
    tft_rec h;           /* h.seq: the op that produced (or consumed) it */
    uint64_t id;         /* tensor id, unique within the rank file */
    uint64_t name;       /* string id of the tensor name */
    uint8_t dtype;       /* enum tft_dtype */
    uint8_t device_kind; /* enum tft_device_kind */
    int16_t device;      /* device ordinal, -1 for host */
    uint8_t mode;        /* enum tft_stats_mode: which stats are valid */
    uint8_t ndim;        /* 0..TFT_MAX_NDIM */
    uint8_t pad[2];
    int64_t shape[TFT_MAX_NDIM]; /* first ndim entries valid */
    tft_stats stats;
} tft_rec_tensor;

typedef struct tft_rec_alloc {
    tft_rec h;
    uint64_t ptr;
    uint64_t bytes;
    uint64_t site;   /* string id of the allocation site */
    uint8_t device_kind;
    uint8_t pad;
    int16_t device;
    uint32_t pad2;
    uint64_t stream;
} tft_rec_alloc;

typedef struct tft_rec_free {
    tft_rec h;
    uint64_t ptr;
    uint64_t bytes;  /* 0 when unknown */
    uint8_t device_kind;
    uint8_t pad;
    int16_t device;
    uint32_t pad2;
} tft_rec_free;

/* tft_rec_collective.h.flags: written before the call (t_exit 0, no result)
 * or after it; a rank stuck in the call leaves an ENTER without an EXIT. */
#define TFT_COLL_FLAG_ENTER 0x1u
#define TFT_COLL_FLAG_EXIT 0x2u

typedef struct tft_rec_collective {
    tft_rec h;
    uint64_t comm;      /* communicator id, equal across ranks */
    uint64_t coll_seq;  /* per-communicator sequence number */
    uint64_t count;     /* elements */
    uint64_t t_enter, t_exit; /* CLOCK_MONOTONIC ns */
    uint64_t result;    /* tensor id of the result buffer's stats, 0 = none */
    uint64_t name;      /* string id of the API name ("MPI_Allreduce") */
    uint16_t type;      /* enum tft_coll_type */
    uint8_t dtype;      /* enum tft_dtype */
    uint8_t redop;      /* enum tft_redop */
    int32_t root;       /* root or peer rank, -1 none */
    int32_t rank;       /* rank within the communicator */
    int32_t nranks;
    /* since 1.2 (a 1.0/1.1 record ends here, at TFT_REC_COLLECTIVE_MIN_BYTES):
     * read it with tft_rec_coll_tag() */
    int32_t tag;        /* point-to-point message tag; TFT_TAG_NONE, TFT_TAG_ANY (tft_types.h) */
    uint32_t pad3;
} tft_rec_collective;
/* Length of a 1.0/1.1 COLLECTIVE record, the smallest a reader accepts. */
#define TFT_REC_COLLECTIVE_MIN_BYTES 104u

typedef struct tft_rec_kernel {
    tft_rec h;
    uint64_t name;      /* string id of the kernel name */
    uint64_t start, end;/* ns, device clock converted to CLOCK_MONOTONIC */
    uint64_t stream;
    uint64_t corr;      /* correlation id */
    uint32_t grid[3];
    uint32_t block[3];
    int32_t device;
    uint32_t kind;      /* enum tft_op_kind: KERNEL or COPY */
} tft_rec_kernel;

typedef struct tft_rec_checkpoint {
    tft_rec h;          /* h.step: the step saved / resumed */
    uint64_t path;      /* string id of the checkpoint path */
    uint64_t recipe;    /* string id of a resume recipe (command fragment), 0 none */
    uint32_t action;    /* enum tft_ckpt_action */
    uint32_t pad;
} tft_rec_checkpoint;

/* EXCEPTION (format 1.7): an exception the program did not catch, at the
 * step in its header (tft_exception). */
typedef struct tft_rec_exception {
    tft_rec h;
    uint64_t type;    /* string id: "RuntimeError" */
    uint64_t message; /* string id: its message (first line, at most 4 KiB) */
    uint64_t where;   /* string id: what was running ("model.tok_emb"), 0 = unknown */
    uint64_t frames;  /* string id: the innermost frames, innermost last, one per line */
} tft_rec_exception;

typedef struct tft_rec_process {
    tft_rec h;
    uint32_t event;     /* enum tft_proc_event */
    int32_t pid;
    int32_t exit_code;  /* valid for EXIT when signal == 0 */
    int32_t signal;     /* terminating signal, 0 none */
    uint64_t rss;       /* bytes, for RSS samples */
} tft_rec_process;

#define TFT_DROP_KINDS 16 /* per-kind counts of a DROPPED record: record kinds 0..15 */
typedef struct tft_rec_dropped {
    tft_rec h;          /* h.step: TFT_STEP_NONE (the loss's steps are below) */
    uint64_t count;
    uint32_t reason;    /* enum tft_drop_reason */
    uint32_t pad;
    /* since 1.4 (a 1.0-1.3 record ends here, at TFT_REC_DROPPED_MIN_BYTES:
     * kinds and steps unknown) */
    int64_t first_step; /* lowest step a lost record carried, TFT_STEP_NONE: none (outside steps) */
    int64_t last_step;  /* highest */
    uint64_t by_kind[TFT_DROP_KINDS]; /* lost records per kind (enum tft_rec_kind; slot 0: other kinds) */
} tft_rec_dropped;
/* Length of a 1.0-1.3 DROPPED record, the smallest a reader accepts. */
#define TFT_REC_DROPPED_MIN_BYTES 48u

/* The thread the records that follow come from (format 1.2, FORMAT.md
 * §5.13). The collector writes a SWITCH whenever the next records of a
 * rank file come from another thread than the previous ones, and the writer
 * repeats the current one at the start of every chunk, so every chunk
 * decodes alone; records before any SWITCH of a chunk (files before 1.2)
 * have no known thread. */
typedef struct tft_rec_thread {
    tft_rec h;
    uint32_t event;     /* enum tft_thread_event */
    int32_t tid;        /* OS thread id */
    uint32_t index;     /* thread number in its process: 0, 1, 2, ... in order of first record */
    uint32_t pad;
    uint64_t name;      /* string id of the thread's name when it first recorded, 0 none */
} tft_rec_thread;       /* 56 bytes */

/* A step watermark (format 1.2, FORMAT.md §5.14): no record after this one
 * in the file has a step smaller than h.step. Written by the collector for
 * processes with several recording threads, whose records of one step need
 * not be contiguous in the file. */
typedef struct tft_rec_sync {
    tft_rec h;          /* h.step: the watermark */
    uint64_t reserved;
} tft_rec_sync;         /* 40 bytes */

/* A communicator, once per process that uses it (format 1.2, FORMAT.md
 * §5.15): its id as COLLECTIVE records carry it, this process's rank and
 * the size, how it was made, and when known its members as world ranks in
 * communicator rank order (a reader may also collect the members from the
 * COMM records of all rank files). */
typedef struct tft_rec_comm {
    tft_rec h;
    uint64_t comm;      /* communicator id, as in COLLECTIVE records */
    uint64_t name;      /* string id: what made it ("MPI_COMM_WORLD", "MPI_Comm_split", ...), 0 none */
    uint64_t parent;    /* id of the communicator it was made from, 0 none or unknown */
    int32_t rank;       /* this process's rank in it */
    int32_t size;       /* its number of members */
    uint32_t order;     /* creation order among this process's communicators with the same members */
    uint32_t n_members; /* entries of members[] (0: not known here) */
    int32_t members[];  /* world rank of communicator rank 0, 1, ...; zero padding to 8 */
} tft_rec_comm;         /* 72 bytes + 4 per member */
/* tft_rec_comm.h.flags: an intercommunicator; members lists the local
 * group, then the remote one (FORMAT.md §5.15). */
#define TFT_COMM_FLAG_INTER 0x1u
/* Most members one COMM record lists (a larger communicator lists none). */
#define TFT_COMM_MAX_MEMBERS ((TFT_REC_MAX_BYTES - sizeof(tft_rec_comm)) / 4u)

/* One thread's user-space call stack (format 1.5, FORMAT.md §5.16), taken
 * by tftrace from outside the process (BPF; --timeout before it stops a
 * hung run). The rank file's rank is the process's. All text is in the
 * strings: frames one per line "#N 0xPC FUNC+0xOFF (MODULE+0xOFF)", a
 * frame found by scanning the stack (a guess) starting with '?'. */
typedef struct tft_rec_stack {
    tft_rec h;          /* h.step, h.seq: TFT_STEP_NONE, TFT_SEQ_NONE */
    int32_t pid;
    int32_t tid;
    uint32_t source;    /* 1 sampled on a CPU, 2 off CPU (asleep, preempted), 3 running (registers may be stale) */
    uint32_t nframes;
    uint64_t comm;      /* string id: the thread's name */
    uint64_t summary;   /* string id: "MPI_Allreduce ← step ← main" */
    uint64_t frames;    /* string id: the frames, one per line, innermost first */
    uint64_t note;      /* string id: why unwinding stopped early, 0 none */
} tft_rec_stack;        /* 80 bytes */
#define TFT_STACK_FLAG_MAIN 0x1u /* h.flags: the process's main thread */
#define TFT_STACK_FLAG_SCAN 0x2u /* h.flags: some frames are guesses from a stack scan */
#define TFT_STACK_FLAG_TIMEOUT 0x4u /* h.flags: taken by --timeout before SIGTERM */

/* A pair of the recording host's clocks read together (format 1.6,
 * FORMAT.md §5.17): h.ts is CLOCK_MONOTONIC at the middle of two monotonic
 * readings taken around the CLOCK_REALTIME reading `realtime_ns`; `window_ns`
 * their distance. Written when a rank file opens and then periodically, so
 * a reader maps record times to the host's realtime with the pair in force
 * (a realtime step between two pairs shows as a change of realtime - ts).
 * The kernel's NTP state at the same moment (adjtimex(2)) says how far
 * that realtime may be from true time. */
enum tft_clock_ntp {
    TFT_NTP_UNKNOWN = 0,    /* not read (adjtimex failed, not Linux) */
    TFT_NTP_SYNCED = 1,     /* the kernel clock is synchronised: maxerror_ns bounds its error */
    TFT_NTP_UNSYNCED = 2,   /* STA_UNSYNC or TIME_ERROR: realtime is this host's alone */
};
typedef struct tft_rec_clock {
    tft_rec h;              /* h.ts: CLOCK_MONOTONIC ns; h.step, h.seq: none */
    uint64_t realtime_ns;   /* CLOCK_REALTIME ns */
    uint32_t window_ns;     /* the two monotonic readings' distance (the pair's own uncertainty) */
    uint32_t ntp;           /* enum tft_clock_ntp */
    uint64_t maxerror_ns;   /* adjtimex maxerror: bound of realtime's error against true time (0 unknown) */
    uint64_t esterror_ns;   /* adjtimex esterror: its estimated error (0 unknown) */
} tft_rec_clock;       /* 64 bytes */

/* A captured tensor's bytes (format 1.1, FORMAT.md §5.12). A tensor's raw
 * bytes (dense, row-major, its dtype, little-endian) are split into parts
 * written in order, each its own CAPTURE record of at most
 * TFT_REC_MAX_BYTES; a reader assembles them by offset and knows the
 * tensor complete when the parts cover [0, total). Every part repeats the
 * tensor's name, dtype and shape, so a capture reads without its TENSOR
 * record (an input's TENSOR record may lie far back in the file). */
enum tft_capture_role {
    TFT_CAPTURE_OUTPUT = 0, /* an output of op h.seq, as recorded */
    TFT_CAPTURE_INPUT = 1,  /* an input of op h.seq: its memory when the op began */
    TFT_CAPTURE_PRIOR = 2   /* the value an in-place/accumulating output held before
                             * op h.seq ran (a GEMM's C when beta != 0) */
};
/* tft_rec_capture.h.flags: the part's bytes are byte-shuffled by element
 * size (all first bytes of the part's elements, then all second bytes, ...),
 * which lets zstd compress floats better. Clear: the bytes as in memory. */
#define TFT_CAPTURE_SHUFFLED 0x1u

typedef struct tft_rec_capture {
    tft_rec h;          /* h.seq: the op whose capture this is (the consuming op for
                         * an input, the producing op for an output); h.step: step */
    uint64_t tensor;    /* id of the TENSOR record (same rank file) whose bytes these are */
    uint64_t total;     /* raw bytes of the whole tensor (numel * dtype size) */
    uint64_t offset;    /* of this part within those bytes */
    uint32_t n;         /* bytes in this part */
    uint32_t role;      /* enum tft_capture_role */
    uint64_t name;      /* string id of the tensor name */
    uint8_t dtype;      /* enum tft_dtype */
    uint8_t ndim;       /* 0..TFT_MAX_NDIM */
    uint16_t pad;
    uint32_t pad2;
    int64_t shape[TFT_MAX_NDIM]; /* first ndim entries valid */
    uint8_t data[];     /* n bytes, zero-padded to a multiple of 8 */
} tft_rec_capture;      /* 144 bytes + data */

/* Most data bytes one CAPTURE record carries (65392). */
#define TFT_CAPTURE_PART_MAX (TFT_REC_MAX_BYTES - sizeof(tft_rec_capture))

/* The tag of a COLLECTIVE record: TFT_TAG_NONE when the record predates
 * format 1.2 (or is a collective). */
static inline int32_t tft_rec_coll_tag(const tft_rec_collective *c)
{
    return c->h.len >= sizeof(tft_rec_collective) ? c->tag : TFT_TAG_NONE;
}

/* 1 when rec is a TENSOR record of exactly one element (a loss, a learning
 * rate, a gradient norm): a scalar, which a flight-recorder file keeps for
 * every step (FORMAT.md §3.6); 0 otherwise. rec->len must be valid. */
static inline int tft_rec_is_scalar(const tft_rec *rec)
{
    if (rec->kind != TFT_REC_TENSOR || rec->len < sizeof(tft_rec_tensor))
        return 0;
    const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
    int64_t n = 1;
    for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM; i++)
        n *= t->shape[i];
    return n == 1;
}

/* What a record kind is to the tools: one row per kind in the format
 * library (formats/src/record.c), read by the reader, the writer, the
 * analyzers and the Python package, so that a new kind is described in one
 * place (docs/CONTRIBUTING.md, "a new record kind").
 *
 * flags:
 *   TFT_KIND_SUBSTANCE  what the program did (an op, a tensor, an
 *                       allocation, a collective, ...), as opposed to the
 *                       recorder's bookkeeping (threads, watermarks, drops,
 *                       process events, stacks, clocks): tfdiff counts
 *                       records of substance to tell a side that recorded
 *                       nothing.
 *   TFT_KIND_RUN_LONG   describes the run rather than a step (a
 *                       communicator): an extract keeps it whatever its
 *                       window of steps.
 * strings: the record's string ids (uint64 fields naming interned strings,
 * 0 = none), at most TFT_REC_STRINGS, by offset from the record's start and
 * field name; label is the index of the one that names the record in a
 * listing (tfdump --events), -1 when none does.
 *
 * The struct only grows at the end; the library owns the rows. */
#define TFT_KIND_SUBSTANCE 0x1u
#define TFT_KIND_RUN_LONG 0x2u
#define TFT_REC_STRINGS 4
typedef struct tft_rec_kind_info {
    const char *name;          /* "tensor" */
    uint32_t min_size;         /* fixed part in bytes: a shorter record is damaged */
    uint32_t flags;            /* TFT_KIND_* */
    int32_t n_strings;         /* string id fields, 0..TFT_REC_STRINGS */
    int32_t label;             /* the string naming the record, -1 none */
    uint32_t string_offset[TFT_REC_STRINGS];
    const char *string_field[TFT_REC_STRINGS];
} tft_rec_kind_info;

/* The row of kind, NULL for a kind this library does not know (a newer
 * minor version's: skipped by length). */
TFT_API const tft_rec_kind_info *tft_rec_kind(uint16_t kind);
/* The string ids rec names (its kind's strings, read at their offsets),
 * into ids; returns how many (0 for an unknown kind). rec must be at least
 * its kind's min_size long (tft_rec_check). */
TFT_API int tft_rec_string_ids(const tft_rec *rec, uint64_t ids[TFT_REC_STRINGS]);
/* Fixed size of a record kind (without variable tail), 0 if unknown. */
TFT_API size_t tft_rec_min_size(uint16_t kind);
/* Structural check of one record: length, alignment, counts vs length.
 * Returns 0 when well-formed, -EBADMSG otherwise. Unknown kinds pass when
 * their length is sane. */
TFT_API int tft_rec_check(const tft_rec *rec, size_t avail);
/* Name of a record kind / op kind / coll type / redop ("?" if unknown);
 * dtypes: tft_dtype_name (tft_types.h). */
TFT_API const char *tft_rec_kind_name(uint16_t kind);
TFT_API const char *tft_op_kind_name(int kind);
TFT_API const char *tft_coll_type_name(int type);
TFT_API const char *tft_redop_name(int op);
/* Byte (un)shuffle of a CAPTURE part (TFT_CAPTURE_SHUFFLED): n bytes of
 * elements esz bytes wide (n a multiple of esz; other n are copied as is).
 * inverse 0 shuffles (memory -> part), 1 restores. dst and src must not overlap. */
TFT_API void tft_capture_shuffle(void *dst, const void *src, size_t n, size_t esz, int inverse);
/* String id of a text: xxh3-64. */
TFT_API uint64_t tft_string_id(const char *s, size_t n);

/* ------------------------------------------------------------------------ */
/* Rank-file identity (the header frame)                                     */
/* ------------------------------------------------------------------------ */

/* tft_file_info.flags: the rank is the process's registration index, not
 * a rank it was given (MPI, RANK, ...): a reader renumbers such a file when
 * a file with a given rank of the same run claims the same number. */
#define TFT_FILE_RANK_IS_INDEX 0x1u

typedef struct tft_file_info {
    uint16_t major, minor;     /* format version of the file */
    uint8_t run_id[16];        /* equal for all ranks of one run */
    int32_t rank;              /* this file's rank */
    int32_t world_size;        /* -1 when unknown */
    int32_t pid;
    uint32_t flags;            /* TFT_FILE_* bits */
    uint64_t start_realtime_ns;   /* CLOCK_REALTIME at open */
    uint64_t start_monotonic_ns;  /* CLOCK_MONOTONIC at open (same instant) */
    char host[64];             /* NUL-terminated */
} tft_file_info;

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct tft_writer tft_writer;

typedef struct tft_writer_opts {
    size_t sz;             /* sizeof(tft_writer_opts), for ABI growth */
    int zstd_level;        /* 1..19, default 1 */
    size_t chunk_bytes;    /* raw bytes per chunk, 1..4 MiB, default 1 MiB */
    int sync;              /* fsync at close (default 1) */
    tft_log_fn log;        /* diagnostics, default none */
    void *log_ctx;
    unsigned encoding;     /* chunk encoding (FORMAT.md §3.3.1): 0 default
                            * (TFT_ENC_COLUMNS | TFT_ENC_SHUFFLE), TFT_ENC_NONE for
                            * plain records as 1.3 wrote them, or a set of TFT_ENC_* bits */
    long long keep_steps;  /* flight-recorder mode (FORMAT.md §3.6): > 0 keeps full records
                            * for the last keep_steps steps only; scalar tensors, collectives,
                            * steps, allocations, process, checkpoint, thread and dropped
                            * records for the whole run. 0: everything (default). */
} tft_writer_opts;
#define TFT_ENC_COLUMNS 0x1u  /* records grouped by kind, fields as delta-coded columns */
#define TFT_ENC_SHUFFLE 0x2u  /* the chunk's 8-byte words stored as eight byte planes */
#define TFT_ENC_NONE 0x80000000u /* plain records (readable by 1.3 and older readers) */
#define TFT_WRITER_OPTS(...) ((tft_writer_opts){ .sz = sizeof(tft_writer_opts), __VA_ARGS__ })

/* Creates (truncates) a rank file at path and writes the header frame.
 * A symbolic link at path is not followed (ELOOP). info->major/minor are
 * ignored (the writer's version is written). opts may be NULL. Returns NULL
 * and sets errno on failure. */
TFT_API tft_writer *tft_writer_open(const char *path, const tft_file_info *info,
                                    const tft_writer_opts *opts);
/* The same on fd: an empty regular file open for writing that the caller
 * created (tftrace uses openat(dirfd, name, O_CREAT|O_EXCL|O_NOFOLLOW) so a
 * trace never writes through a planted link or over an existing file). The
 * writer owns fd from the call on, also when it fails (fd closed). */
TFT_API tft_writer *tft_writer_fdopen(int fd, const tft_file_info *info, const tft_writer_opts *opts);
/* Registers a string and returns its id (xxh3-64). The writer emits its
 * definition in every chunk whose records reference the id; records may also
 * reference ids registered later, as long as that happens before the chunk
 * seals. Returns 0 (never a valid id) on allocation failure or when the
 * text is longer than TFT_STRING_MAX bytes. */
TFT_API uint64_t tft_writer_string(tft_writer *w, const char *s, size_t n);
/* Appends one record (rec->len bytes, copied). String ids the record refers
 * to (by kind) are noted so their definitions go into the chunk. Seals the
 * chunk when it is full. Returns 0, -EINVAL for a malformed record, or a
 * negative errno from I/O (the writer is then failed; later calls return it). */
TFT_API int tft_writer_append(tft_writer *w, const tft_rec *rec);
/* Adds n to the dropped count of the current chunk. */
TFT_API void tft_writer_add_dropped(tft_writer *w, uint64_t n);
/* Seals the current chunk now (if it holds records) and writes it out, so it
 * survives a crash of the writer's process. */
TFT_API int tft_writer_flush(tft_writer *w);
/* Seals, writes the index and seek table, fsyncs (opts.sync) and frees.
 * NULL-safe. Returns 0 or the first error seen. */
TFT_API int tft_writer_close(tft_writer *w);

/* What a writer has done so far. Filled into the caller's memory, so it
 * begins with sz like an options struct: the caller sets it
 * (TFT_WRITER_STATS()) to the size it was built with, and the library
 * writes only the fields sz covers; fields added later go at the end. */
typedef struct tft_writer_stats {
    size_t sz;           /* sizeof(tft_writer_stats) as the caller was built */
    uint64_t records;    /* records appended */
    uint64_t chunks;     /* chunks sealed and written */
    uint64_t raw_bytes;  /* record bytes of those chunks before compression */
    uint64_t file_bytes; /* bytes of the file written so far */
    uint64_t dropped;    /* dropped counts of those chunks (tft_writer_add_dropped) */
    uint64_t retired_chunks; /* keep_steps: full chunks retired (their blocks returned) */
} tft_writer_stats;
#define TFT_WRITER_STATS() ((tft_writer_stats){ .sz = sizeof(tft_writer_stats) })
/* The size of the first published tft_writer_stats: the smallest sz accepted. */
#define TFT_WRITER_STATS_V1_SZ (offsetof(tft_writer_stats, dropped) + sizeof(uint64_t))
/* Fills out as far as out->sz. Returns 0, or -EINVAL (out untouched) for a
 * NULL w or out, or out->sz below TFT_WRITER_STATS_V1_SZ. */
TFT_API int tft_writer_get_stats(const tft_writer *w, tft_writer_stats *out);

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct tft_reader tft_reader;

typedef struct tft_reader_opts {
    size_t sz;
    tft_log_fn log;
    void *log_ctx;
    const char *display_name; /* name used in messages, default the path */
} tft_reader_opts;
#define TFT_READER_OPTS(...) ((tft_reader_opts){ .sz = sizeof(tft_reader_opts), __VA_ARGS__ })

enum tft_integrity {
    TFT_INTACT = 0,   /* closed with index, every chunk verified so far */
    TFT_TORN = 1,     /* ends inside a chunk or without index: tail dropped */
    TFT_DAMAGED = 2   /* a checksum or structure error before the end */
};

typedef struct tft_chunk_info {
    uint64_t offset;       /* file offset of the chunk header frame */
    uint32_t chunk_no;
    uint32_t records;
    uint32_t raw_size, comp_size;
    int64_t first_step, last_step; /* TFT_STEP_NONE when no record has a step */
    int64_t first_seq, last_seq;
    uint64_t first_ts, last_ts;
    uint64_t dropped;
} tft_chunk_info;

typedef struct tft_reader_status {
    int integrity;          /* enum tft_integrity (worst seen so far) */
    int closed;             /* file had an index and seek table */
    int index_rebuilt;      /* index was missing or damaged and rebuilt by scanning */
    uint64_t chunks, chunks_bad;
    uint64_t records;       /* records read so far */
    uint64_t dropped;       /* dropped counts of chunks read */
    uint64_t file_bytes, raw_bytes;
    uint64_t torn_offset;   /* where the torn tail starts (file offset) */
    uint64_t bad_offset;    /* offset of the first damaged frame */
    char first_problem[512];/* message of the first problem, "" if none */
} tft_reader_status;

/* Opens a rank file: checks the header frame, loads the index (or rebuilds
 * it by scanning the frame structure). Chunks are decompressed lazily.
 * Returns NULL with errno: ENOENT/EACCES..., EPROTO = not a tftrace file,
 * EPROTONOSUPPORT = newer major version. The log callback receives the reason. */
TFT_API tft_reader *tft_reader_open(const char *path, const tft_reader_opts *opts);
TFT_API void tft_reader_close(tft_reader *r); /* NULL-safe */
TFT_API const tft_file_info *tft_reader_info(const tft_reader *r);
/* The name used in messages (display_name or the path). */
TFT_API const char *tft_reader_name(const tft_reader *r);
/* Next record in file order. Returns 1 and sets *rec (valid until the next
 * call), 0 at the end, negative errno on I/O failure. Damaged chunks are
 * skipped (reported through the log and the status). STRING records are
 * consumed internally and not returned. */
TFT_API int tft_reader_next(tft_reader *r, const tft_rec **rec);
/* The thread of the record tft_reader_next returned last (format 1.2):
 * *known = 0 when its chunk named none (files before 1.2). The thread's
 * index is its number in its process (tft_rec_thread.index); tid and name
 * as recorded. Rewinding or seeking forgets it until the next SWITCH. */
typedef struct tft_thread_info {
    int known;
    int32_t tid;
    uint32_t index;
    uint64_t name;      /* string id, 0 none */
} tft_thread_info;
TFT_API void tft_reader_thread(const tft_reader *r, tft_thread_info *out);
/* Text of a string id seen so far in the file, or NULL. */
TFT_API const char *tft_reader_string(const tft_reader *r, uint64_t id);
/* Positions before the first chunk that may hold records of step >= step;
 * the caller skips records with smaller steps. */
TFT_API int tft_reader_seek_step(tft_reader *r, int64_t step);
TFT_API int tft_reader_rewind(tft_reader *r);
/* How many damaged chunks tft_reader_next has skipped so far (each skip
 * counted, in every pass): a caller that sees it grow between two records
 * knows records are missing between them — a hole, not a sequel. */
TFT_API uint64_t tft_reader_holes(const tft_reader *r);
/* The steps the skipped damaged chunks held (the union of their step
 * ranges from the index): 1 with *lo..*hi, 0 when unknown (no chunk
 * skipped, or skipped chunks without steps). A rank file may interleave
 * chunks of several threads, so records of those steps can still follow
 * in later chunks: partial steps. */
TFT_API int tft_reader_hole_steps(const tft_reader *r, int64_t *lo, int64_t *hi);
TFT_API size_t tft_reader_chunk_count(const tft_reader *r);
TFT_API const tft_chunk_info *tft_reader_chunk(const tft_reader *r, size_t i);
TFT_API void tft_reader_get_status(const tft_reader *r, tft_reader_status *out);
/* Which steps the file has in full (flight-recorder mode, FORMAT.md §3.6):
 * *keep_steps gets the writer's N (0: not written in that mode, every
 * record kept), *first_full the first step whose records are all there
 * (later steps too), *last the last step of the file (TFT_STEP_NONE when
 * none). Steps before *first_full keep only their kept records (scalars,
 * collectives, steps, ...). Returns 0 or -EINVAL. */
TFT_API int tft_reader_full_steps(const tft_reader *r, long long *keep_steps, int64_t *first_full,
                                  int64_t *last);
/* Reads every chunk and checks every checksum; fills the status. Returns 0
 * when intact, 1 when torn or damaged, negative errno on I/O failure.
 * Leaves the reader rewound. */
TFT_API int tft_reader_verify(tft_reader *r, tft_reader_status *out);

/* ------------------------------------------------------------------------ */
/* Manifest and trace directory                                              */
/* ------------------------------------------------------------------------ */

#define TFT_MANIFEST_MAX_RANKS 65536

typedef struct tft_manifest_rank {
    int32_t rank;
    int32_t pid;
    char file[64];          /* "rank-00000.tft" relative to the trace dir */
    int exited;             /* exit known */
    int exit_code;          /* when exited and signal == 0 */
    int signal;             /* terminating signal, 0 none */
    char host[64];          /* the host the rank ran on, "" unknown (format 1.5, FORMAT.md §2.4) */
    int clock_known;        /* the next two hold an estimate (format 1.5, FORMAT.md §2.4 "clock") */
    int64_t clock_offset_ns;   /* this rank's CLOCK_REALTIME minus rank clock_ref's at one instant */
    uint64_t clock_error_ns;   /* the estimate's bound: |true offset - clock_offset_ns| <= this */
    int32_t clock_ref;         /* the rank the offset is measured against (0) */
    int clock_anchored;        /* clock_anchor_ns holds a value (format 1.6) */
    int64_t clock_anchor_ns;   /* this rank's CLOCK_REALTIME minus CLOCK_MONOTONIC when the estimate was made */
} tft_manifest_rank;

/* A tftrace process that records (or recorded) into the trace: the launcher
 * (one per trace, or one per rank under mpirun ... tftrace). Lets a reader
 * tell a run still recording from one whose collector died. */
typedef struct tft_manifest_collector {
    int32_t pid;
    char host[64];
    char boot_id[40];       /* /proc/sys/kernel/random/boot_id, "" unknown */
    uint64_t start_ticks;   /* the process's start time, clock ticks after boot (/proc/PID/stat), 0 unknown */
    int done;               /* it finished: closed its rank files and rewrote the manifest */
} tft_manifest_collector;

typedef struct tft_manifest {
    int major, minor;
    char run_id[33];        /* 32 hex digits */
    char tool_version[32];
    char host[64];
    char cwd[1024];
    char **argv;            /* command line, argc entries (owned) */
    int argc;
    uint64_t start_ns, end_ns; /* CLOCK_REALTIME ns; end 0 while running */
    int world_size;
    int complete;           /* rewritten at end */
    int exit_status;        /* the launcher's status (128+sig when killed), -1 unknown */
    char *options_json;     /* recording options as a JSON object text (owned), may be NULL */
    tft_manifest_rank *ranks; /* nranks entries (owned) */
    int nranks;
    /* keys added after format 1.2's first release (FORMAT.md §2.1); a
     * manifest without them reads as NULL / 0 */
    char *incomplete;       /* why the trace lacks records it should hold (write errors), NULL none (owned) */
    int *redacted;          /* indices into argv whose values were redacted, nredacted entries (owned) */
    int nredacted;
    uint64_t dropped_stalled; /* records dropped because --no-drop gave up on a stalled collector */
    tft_manifest_collector *collectors; /* ncollectors entries (owned) */
    int ncollectors;
} tft_manifest;

/* Parses manifest JSON text (len bytes, need not be NUL-terminated).
 * Fills *m (release with tft_manifest_free). Returns 0, -EPROTO (not valid
 * JSON / missing keys; err gets the reason) or -EPROTONOSUPPORT (newer major). */
TFT_API int tft_manifest_parse(const char *text, size_t len, tft_manifest *m,
                               char *err, size_t errlen);
/* Reads and parses the file path: -ESPIPE (err says why) when it is not a
 * regular file — a FIFO, socket, device, directory or a symbolic link: the
 * open never blocks and never follows a link —, -EFBIG past 64 MiB, or
 * tft_manifest_parse's result. */
TFT_API int tft_manifest_read(const char *path, tft_manifest *m, char *err, size_t errlen);
/* The manifest of the trace directory dir as readers take it (FORMAT.md
 * §2.4): the per-rank fragments manifest.rank-*.json merged (in-process
 * writers leave one per rank file), else manifest.json. (tft_trace_open
 * also takes a manifest without collectors that lists fewer ranks than its
 * world_size as not complete.) 0 (err
 * may then name a fragment that did not parse and was skipped), -ENOENT
 * when the directory has neither, -EPROTO / -EPROTONOSUPPORT as
 * tft_manifest_parse, -ESPIPE when manifest.json or a fragment is not a
 * regular file (a FIFO planted by another user would otherwise hang the
 * reader), or another -errno; err starts with the name of the file it is
 * about ("manifest.json: ..."). */
TFT_API int tft_manifest_read_dir(const char *dir, tft_manifest *m, char *err, size_t errlen);
/* Serialises to a malloc'd NUL-terminated JSON string (NULL on ENOMEM). */
TFT_API char *tft_manifest_to_json(const tft_manifest *m);
/* Writes dir/manifest.json atomically (temp file, fsync, rename). */
TFT_API int tft_manifest_write(const char *dir, const tft_manifest *m);
/* The same in the directory dirfd. The temp file is created with
 * O_CREAT|O_EXCL|O_NOFOLLOW (never through a planted link) and gets exactly
 * the permission bits mode (not masked by the umask); mode 0 = 0644 masked
 * by the umask, as tft_manifest_write. Returns 0 or a negative errno. */
TFT_API int tft_manifest_writeat(int dirfd, const tft_manifest *m, unsigned mode);
TFT_API void tft_manifest_free(tft_manifest *m); /* NULL-safe, leaves *m zeroed */
/* The calling process as a collector entry (pid, host, boot id, start time). */
TFT_API void tft_manifest_collector_self(tft_manifest_collector *c);
/* Whether the process a collector entry names still runs, judged on this
 * machine: RUNNING (same boot, same pid and start time), GONE (it exited,
 * was killed, or the machine rebooted), UNKNOWN (another host, or an entry
 * without a boot id). */
enum tft_collector_state { TFT_COLLECTOR_UNKNOWN = 0, TFT_COLLECTOR_RUNNING = 1, TFT_COLLECTOR_GONE = 2 };
TFT_API int tft_manifest_collector_state(const tft_manifest_collector *c);

/* A trace directory opened for reading: the manifest (if readable) plus one
 * reader per rank file. Rank files are found by listing the directory
 * (rank-*.tft), whatever the manifest says, so a trace whose manifest was
 * never rewritten still opens; comparing the two is the caller's business. */
typedef struct tft_trace tft_trace;
TFT_API tft_trace *tft_trace_open(const char *dir, const tft_reader_opts *opts);
TFT_API void tft_trace_close(tft_trace *t);
/* Several directories (or rank files) of one run as one trace: the pieces a
 * job's nodes wrote to their local disks (FORMAT.md §2.4). tft_trace_open
 * and tft_trace_open_lazy take the same as one path "DIR1+DIR2" when no
 * file of that name exists. The manifests are merged (the first piece's
 * command line and options kept). Refused (NULL, errno set, the reason
 * logged): pieces whose rank files carry different run ids (EXDEV), a rank
 * held in two pieces (EEXIST), anything tft_trace_open refuses. lazy: as
 * tft_trace_open_lazy. */
TFT_API tft_trace *tft_trace_open_parts(const char *const *paths, int n, const tft_reader_opts *opts, int lazy);
/* Which of the paths given to tft_trace_open_parts (or of DIR1+DIR2) rank
 * file i came from; 0 for a trace of one path; -1 for a bad index. */
TFT_API int tft_trace_file_part(const tft_trace *t, int i);
TFT_API const tft_manifest *tft_trace_manifest(const tft_trace *t); /* NULL if none */
/* Rank files of t (0 for NULL) and the rank of file i (-1 for a bad index or NULL). */
TFT_API int tft_trace_nranks(const tft_trace *t);
TFT_API int tft_trace_rank_id(const tft_trace *t, int i);
TFT_API tft_reader *tft_trace_reader(tft_trace *t, int i);

/* Merge of all ranks of a trace in one order. */
enum tft_merge_order { TFT_ORDER_TIME = 0, TFT_ORDER_STEP_SEQ = 1 };
typedef struct tft_merge tft_merge;
TFT_API tft_merge *tft_merge_open(tft_trace *t, int order);
/* Returns 1 with *rec and *rank_index set, 0 at the end, negative errno. */
TFT_API int tft_merge_next(tft_merge *m, const tft_rec **rec, int *rank_index);
TFT_API void tft_merge_close(tft_merge *m);

/* ------------------------------------------------------------------------ */
/* Traces read one rank file at a time (added after 1.2's first release)     */
/* ------------------------------------------------------------------------ */

/* Opens a trace like tft_trace_open, checks its rank files the same way
 * (one file per rank, FORMAT.md §2.2), but keeps none of them open: each
 * file's header is read and closed. tft_trace_reader then opens a rank
 * file when first asked for it (returning NULL with errno set, the reason
 * logged, when it cannot), and tft_trace_release closes it again, so an
 * analysis that reads the ranks one after the other holds one reader's
 * memory (one chunk) and one file descriptor, whatever the rank count.
 * tft_merge_open opens every reader. opts->log_ctx must outlive the trace. */
TFT_API tft_trace *tft_trace_open_lazy(const char *path, const tft_reader_opts *opts);
/* Closes the reader of rank file i (either kind of trace), keeping its
 * status for tft_trace_status; a later tft_trace_reader opens it afresh
 * (rewound, its strings read again as its chunks are). Readers a merge
 * still uses must not be released. NULL-safe. */
TFT_API void tft_trace_release(tft_trace *t, int i);
/* The status of rank file i: of its open reader, or the worst of those
 * released. Returns 1 when it was ever opened, 0 when not (out zeroed),
 * -EINVAL for a bad index. */
TFT_API int tft_trace_status(const tft_trace *t, int i, tft_reader_status *out);
/* Header of rank file i (its rank as the file claims it: tft_trace_rank_id
 * gives the rank it is read as), and its name in messages ("DIR/rank-00000.tft"),
 * without opening it. NULL for a bad index. */
TFT_API const tft_file_info *tft_trace_file_info(const tft_trace *t, int i);
TFT_API const char *tft_trace_file_name(const tft_trace *t, int i);

#ifdef __cplusplus
}
#endif
#endif /* TFT_FORMAT_H */

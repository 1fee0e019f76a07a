/*
 * interpose_mpi_internal.h — what the MPI interposers share: the blocking
 * calls and communicator creators (interpose_mpi.c), the handles,
 * datatypes and communicators they are on (interpose_mpi_comm.c), and the
 * non-blocking calls with their completion (interpose_mpi_nb.c). Built
 * with TFT_HAVE_MPI.
 */
#ifndef TFT_INTERPOSE_MPI_INTERNAL_H
#define TFT_INTERPOSE_MPI_INTERNAL_H

#include "interpose_internal.h"
#include "recorder_internal.h"

#ifdef TFT_HAVE_MPI
#include <errno.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

/* Handles as void * so one comparison serves both ABIs: Open MPI's are
 * addresses of objects in libmpi, MPICH's integer constants. RKEY: a
 * request handle as a table key. */
#ifdef OPEN_MPI
#define H(x) ((void *)(x))
#define RKEY(r) ((uintptr_t)(void *)(r))
#else
#define H(x) ((void *)(intptr_t)(x))
#define RKEY(r) ((uintptr_t)(intptr_t)(r))
#endif

/* ---- MPI's predefined handles (interpose_mpi_comm.c) ---------------------- */

/* MPI datatypes with a tft_dtype (C name suffix, MPI name, ours, the most
 * statistics their buffers get); LP64. Numbers get the recording mode's
 * statistics; bytes (MPI_BYTE, MPI_CHAR: text, MPI_UNSIGNED_CHAR,
 * MPI_PACKED) are u8 with at most HEALTH ones: the count, zero bytes,
 * the smallest and largest byte and the fingerprint, no moments (a mean
 * of packed bytes means nothing, and they cost most). The most used come
 * first: map_dtype scans in this order. */
#define MPI_DTYPES(X)                                                                                   \
    X(float, MPI_FLOAT, TFT_F32, FULL) X(double, MPI_DOUBLE, TFT_F64, FULL)                            \
    X(byte, MPI_BYTE, TFT_U8, HEALTH) X(int, MPI_INT, TFT_I32, FULL)                                   \
    X(char, MPI_CHAR, TFT_U8, HEALTH) X(unsigned_char, MPI_UNSIGNED_CHAR, TFT_U8, HEALTH)              \
    X(packed, MPI_PACKED, TFT_U8, HEALTH) X(long, MPI_LONG, TFT_I64, FULL)                             \
    X(int32_t, MPI_INT32_T, TFT_I32, FULL) X(long_long_int, MPI_LONG_LONG_INT, TFT_I64, FULL)          \
    X(int64_t, MPI_INT64_T, TFT_I64, FULL) X(unsigned, MPI_UNSIGNED, TFT_U32, FULL)                    \
    X(uint32_t, MPI_UINT32_T, TFT_U32, FULL) X(unsigned_long, MPI_UNSIGNED_LONG, TFT_U64, FULL)        \
    X(unsigned_long_long, MPI_UNSIGNED_LONG_LONG, TFT_U64, FULL) X(uint64_t, MPI_UINT64_T, TFT_U64, FULL)\
    X(short, MPI_SHORT, TFT_I16, FULL) X(int16_t, MPI_INT16_T, TFT_I16, FULL)                          \
    X(unsigned_short, MPI_UNSIGNED_SHORT, TFT_U16, FULL) X(uint16_t, MPI_UINT16_T, TFT_U16, FULL)      \
    X(uint8_t, MPI_UINT8_T, TFT_U8, FULL) X(signed_char, MPI_SIGNED_CHAR, TFT_I8, FULL)                \
    X(int8_t, MPI_INT8_T, TFT_I8, FULL) X(c_bool, MPI_C_BOOL, TFT_BOOL, FULL)
#define MPI_OPS(X) X(sum, MPI_SUM, TFT_REDOP_SUM, 0) X(prod, MPI_PROD, TFT_REDOP_PROD, 0) \
    X(min, MPI_MIN, TFT_REDOP_MIN, 0) X(max, MPI_MAX, TFT_REDOP_MAX, 0)

#define COUNT_ONE(a, b, c, d) +1
#define DT_INDEX(a, b, c, d) DTI_##a,
enum { MPI_DTYPES(DT_INDEX) N_DTYPES };
enum { N_OPS = 0 MPI_OPS(COUNT_ONE) };

/* Handles as void * so one comparison serves both ABIs: Open MPI's are
 * addresses of objects in libmpi, looked up at run time so that libtftrace
 * has no undefined data symbols; MPICH's are integer constants. */
struct mpi_handles {
    void *world, *self, *comm_null, *req_null;
    void *dt[N_DTYPES];
    void *op[N_OPS];
};
extern struct mpi_handles mpi_mh __attribute__((visibility("hidden")));
extern pthread_once_t mpi_mh_once __attribute__((visibility("hidden")));
/* Loads mpi_mh (interpose_mpi_comm.c); run once, through mpi_mh_once. */
void mpi_handles_load(void);

/* The process's rank and size in comm, -1 when MPI cannot tell. Our own
 * queries leave errno as they found it, like everything we add. Inline:
 * the calls ask on their recording path; the real functions are cached in
 * mpi_comm_rank_fn and mpi_comm_size_fn (interpose_mpi_comm.c). */
typedef int (*comm_int_fn)(MPI_Comm, int *);
extern void *_Atomic mpi_comm_rank_fn __attribute__((visibility("hidden")));
extern void *_Atomic mpi_comm_size_fn __attribute__((visibility("hidden")));
static inline int mpi_comm_query(const char *fn_name, void *_Atomic *cache, MPI_Comm comm, int dflt)
{
    int saved = errno;
    comm_int_fn fn = (comm_int_fn)ip_real_cached(cache, fn_name);
    int v;
    if (!fn || fn(comm, &v) != MPI_SUCCESS)
        v = dflt;
    errno = saved;
    return v;
}
static inline int mpi_comm_rank(MPI_Comm comm) { return mpi_comm_query("MPI_Comm_rank", &mpi_comm_rank_fn, comm, -1); }
static inline int mpi_comm_size(MPI_Comm comm) { return mpi_comm_query("MPI_Comm_size", &mpi_comm_size_fn, comm, -1); }
/* After a communicator creator made out from parent: numbers it now, in
 * the order its members make it, and remembers what made it. Guard held. */
void mpi_comm_made(MPI_Comm out, const char *made_by, MPI_Comm parent);

/* One recorded call. */
typedef struct mpi_call {
    tft_coll_info ci;
    int64_t token;    /* from tft_coll_enter; < 0: no EXIT to write */
    uint64_t t_enter; /* record stamp (shm_stamp) taken as the call began */
    int smax;         /* the most statistics the result gets: TFT_STATS_FULL for a numeric
                       * dtype, TFT_STATS_HEALTH for bytes (counts and fingerprint, no
                       * moments), -1 none (a layout we cannot read as contiguous bytes) */
    int own_op;       /* no op was current at the ENTER: the EXIT ends the implicit one */
    int derived;      /* a derived type: count is in bytes (MPI_Get_count in MPI_BYTE) */
    uint64_t name_id; /* string id of ci.name (the interposer's literal), cached per thread */
} mpi_call;

/* Takes the re-entry guard when this call is to be recorded: returns 1 with
 * ip_depth held (release with mpi_rec_end), 0 to pass through. Loads MPI's
 * predefined handles the first time. Leaves errno as it found it. */
int mpi_rec_begin(void);
void mpi_rec_end(void);

/* Fills mc for a call on comm: count elements of dt (bytes and a type we
 * have no tft_dtype for are counted in bytes, see map_dtype). p2p selects the
 * communicator's point-to-point sequence space; root is the root or peer;
 * tag the message tag (TFT_TAG_NONE for a collective). Writes the
 * communicator's COMM record the first time. */
void mpi_call_fill(mpi_call *mc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, uint64_t count,
                   int redop, int root, int p2p, int tag);

/* After a receive into a buffer of dt: the actual source and tag, and the
 * count actually received (what the statistics cover). */
void mpi_recv_status(mpi_call *mc, const MPI_Status *st, MPI_Datatype dt);

/* Writes mc's ENTER (tft_coll_enter: the op, the per-communicator
 * sequence number) and notes when the call began. */
void mpi_enter(mpi_call *mc);

/* Writes mc's EXIT (nothing when mc->token < 0) with the statistics of
 * result (NULL: none), at most mc->smax of them, and ends the implicit op
 * (mc->own_op). Guard held; errno kept. */
void mpi_exit(mpi_call *mc, const void *result);

/* The tft_redop of a predefined MPI_Op (TFT_REDOP_OTHER for others). */
int mpi_map_redop(MPI_Op op);

/* RKEY of MPI_REQUEST_NULL (valid once mpi_rec_begin returned 1). */
uintptr_t mpi_req_null(void);

/* The tft_coll_info tag of an MPI tag (MPI_ANY_TAG: TFT_TAG_ANY). */
static inline int mpi_tag(int tag) { return tag == MPI_ANY_TAG ? TFT_TAG_ANY : tag < 0 ? TFT_TAG_NONE : tag; }

/* An MPI count as a record's element count (negative: 0). */
static inline uint64_t mpi_count(int count) { return count > 0 ? (uint64_t)count : 0; }

/* Looks the real function up into fn (errno kept), or returns MPI_ERR_OTHER. */
#define REAL(type, name)                                                                                \
    static void *_Atomic real_;                                                                         \
    type fn = (type)atomic_load_explicit(&real_, memory_order_acquire);                                 \
    if (!fn) {                                                                                          \
        int saved_ = errno;                                                                             \
        fn = (type)ip_real_cached(&real_, name);                                                        \
        errno = saved_;                                                                                 \
    }                                                                                                   \
    if (!fn)                                                                                            \
        return MPI_ERR_OTHER


#endif /* TFT_HAVE_MPI */
#endif

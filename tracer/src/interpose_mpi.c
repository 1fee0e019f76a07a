/*
 * interpose_mpi.c — LD_PRELOAD interposers for MPI (built when MPI headers
 * are found, TFT_HAVE_MPI): the blocking collectives MPI_Allreduce,
 * MPI_Bcast, MPI_Reduce, MPI_Allgather and MPI_Barrier. Shared machinery
 * (guard, real-symbol lookup, on/off decision): interpose.c.
 */
#include "interpose_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_MPI
#include <mpi.h>

/* Open MPI's predefined handles are addresses of objects in libmpi; we look
 * them up instead of referencing them, so that libtftrace has no undefined
 * data symbols. MPICH's are integer constants. */
#ifdef OPEN_MPI
static struct {
    _Atomic int ready;
    void *world, *f32, *f64, *i32, *sum, *prod, *min, *max;
} mh;

/* RTLD_DEFAULT first: a program's copy relocation of a handle object (as
 * non-PIC code referencing MPI_INT makes) is the address everyone uses, and
 * RTLD_NEXT would find libmpi's original instead. */
static void *handle_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : ip_real(name);
}

static void mpi_handles(void)
{
    if (atomic_load_explicit(&mh.ready, memory_order_acquire))
        return;
    mh.world = handle_sym("ompi_mpi_comm_world");
    mh.f32 = handle_sym("ompi_mpi_float");
    mh.f64 = handle_sym("ompi_mpi_double");
    mh.i32 = handle_sym("ompi_mpi_int");
    mh.sum = handle_sym("ompi_mpi_op_sum");
    mh.prod = handle_sym("ompi_mpi_op_prod");
    mh.min = handle_sym("ompi_mpi_op_min");
    mh.max = handle_sym("ompi_mpi_op_max");
    atomic_store_explicit(&mh.ready, 1, memory_order_release);
}
#define H_WORLD mh.world
#define H_F32 mh.f32
#define H_F64 mh.f64
#define H_I32 mh.i32
#define H_SUM mh.sum
#define H_PROD mh.prod
#define H_MIN mh.min
#define H_MAX mh.max
#define H(x) ((void *)(x))
#else
static void mpi_handles(void) {}
#define H_WORLD MPI_COMM_WORLD
#define H_F32 MPI_FLOAT
#define H_F64 MPI_DOUBLE
#define H_I32 MPI_INT
#define H_SUM MPI_SUM
#define H_PROD MPI_PROD
#define H_MIN MPI_MIN
#define H_MAX MPI_MAX
#define H(x) (x)
#endif

typedef int (*comm_int_fn)(MPI_Comm, int *);
typedef int (*type_size_fn)(MPI_Datatype, int *);

static int comm_query(const char *fn_name, void *_Atomic *cache, MPI_Comm comm, int dflt)
{
    comm_int_fn fn = (comm_int_fn)ip_real_cached(cache, fn_name);
    int v;
    return fn && fn(comm, &v) == MPI_SUCCESS ? v : dflt;
}

/* A communicator id equal on all its ranks. MPI_COMM_WORLD: the id tftrain
 * uses for it. Others: the Fortran handle and size — an approximation that
 * holds when the ranks create their communicators in the same order (the
 * usual case); MPI has no portable cross-rank communicator identity. */
static uint64_t comm_id(MPI_Comm comm, int size)
{
    if (H(comm) == H_WORLD)
        return tft_string_id("MPI_COMM_WORLD", 14);
    long f = -1;
#ifdef MPI_Comm_c2f
    f = (long)MPI_Comm_c2f(comm);
#else
    static void *_Atomic c2f;
    MPI_Fint (*fn)(MPI_Comm) = (MPI_Fint(*)(MPI_Comm))ip_real_cached(&c2f, "MPI_Comm_c2f");
    if (fn)
        f = (long)fn(comm);
#endif
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "MPI_Comm:%ld:%d", f, size);
    return tft_string_id(buf, (size_t)n);
}

static int map_dtype(MPI_Datatype dt)
{
    if (H(dt) == H_F32)
        return TFT_F32;
    if (H(dt) == H_F64)
        return TFT_F64;
    if (H(dt) == H_I32)
        return TFT_I32;
    return -1;
}

static int map_redop(MPI_Op op)
{
    if (H(op) == H_SUM)
        return TFT_REDOP_SUM;
    if (H(op) == H_PROD)
        return TFT_REDOP_PROD;
    if (H(op) == H_MIN)
        return TFT_REDOP_MIN;
    if (H(op) == H_MAX)
        return TFT_REDOP_MAX;
    return TFT_REDOP_OTHER;
}

typedef struct coll_call {
    tft_coll_info ci;
    int64_t token;
    int stats;        /* the dtype maps to ours: the result gets statistics */
} coll_call;

/* Decides whether to record this call and records its enter; returns 1 when
 * coll_end must follow the real call. Leaves errno as it found it. */
static int coll_begin(coll_call *cc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, int count,
                      const MPI_Op *op, int root)
{
    if (ip_depth || rec_explicit_coll)
        return 0;
    ip_depth++;
    int saved = errno;
    if (!ip_active()) {
        errno = saved;
        ip_depth--;
        return 0;
    }
    mpi_handles();
    int redop = op ? map_redop(*op) : TFT_REDOP_NONE;
    static void *_Atomic rank_fn;
    static void *_Atomic size_fn;
    static void *_Atomic tsize_fn;
    int size = comm_query("MPI_Comm_size", &size_fn, comm, -1);
    int dtype = type == TFT_COLL_BARRIER ? TFT_U8 : map_dtype(dt);
    uint64_t n = count > 0 ? (uint64_t)count : 0;
    cc->stats = dtype >= 0;
    if (dtype < 0) { /* an MPI type we have no tft_dtype for: count bytes */
        type_size_fn ts = (type_size_fn)ip_real_cached(&tsize_fn, "MPI_Type_size");
        int bytes = 1;
        if (ts && ts(dt, &bytes) != MPI_SUCCESS)
            bytes = 1;
        dtype = TFT_U8;
        n *= (uint64_t)(bytes > 0 ? bytes : 1);
    }
    cc->ci = TFT_COLL_INFO(.name = name, .comm = comm_id(comm, size), .type = type, .dtype = dtype,
                           .count = type == TFT_COLL_BARRIER ? 0 : n, .redop = redop, .root = root,
                           .rank = comm_query("MPI_Comm_rank", &rank_fn, comm, -1), .nranks = size);
    cc->token = tft_coll_enter(&cc->ci);
    errno = saved;
    return 1;
}

/* Records the exit with the result buffer (NULL: no statistics). */
static void coll_end(coll_call *cc, const void *result)
{
    int saved = errno;
    if (cc->token >= 0)
        tft_coll_exit(cc->token, &cc->ci, cc->stats ? result : NULL);
    errno = saved;
    ip_depth--;
}

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*reduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
typedef int (*allgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int (*barrier_fn)(MPI_Comm);

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    static void *_Atomic real;
    allreduce_fn fn = (allreduce_fn)ip_real_cached(&real, "MPI_Allreduce");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Allreduce", TFT_COLL_ALLREDUCE, comm, datatype, count, &op, -1))
        return fn(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, comm);
    coll_end(&cc, rc == MPI_SUCCESS ? recvbuf : NULL);
    return rc;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    static void *_Atomic real;
    bcast_fn fn = (bcast_fn)ip_real_cached(&real, "MPI_Bcast");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Bcast", TFT_COLL_BCAST, comm, datatype, count, NULL, root))
        return fn(buffer, count, datatype, root, comm);
    int rc = fn(buffer, count, datatype, root, comm);
    coll_end(&cc, rc == MPI_SUCCESS ? buffer : NULL);
    return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm)
{
    static void *_Atomic real;
    reduce_fn fn = (reduce_fn)ip_real_cached(&real, "MPI_Reduce");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Reduce", TFT_COLL_REDUCE, comm, datatype, count, &op, root))
        return fn(sendbuf, recvbuf, count, datatype, op, root, comm);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, root, comm);
    coll_end(&cc, rc == MPI_SUCCESS && cc.ci.rank == root ? recvbuf : NULL);
    return rc;
}

/* The count recorded is the per-rank recvcount; the result gets no
 * statistics (it is nranks x recvcount elements). */
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    static void *_Atomic real;
    allgather_fn fn = (allgather_fn)ip_real_cached(&real, "MPI_Allgather");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Allgather", TFT_COLL_ALLGATHER, comm, recvtype, recvcount, NULL, -1))
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    coll_end(&cc, NULL);
    return rc;
}

int MPI_Barrier(MPI_Comm comm)
{
    static void *_Atomic real;
    barrier_fn fn = (barrier_fn)ip_real_cached(&real, "MPI_Barrier");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Barrier", TFT_COLL_BARRIER, comm, (MPI_Datatype)0, 0, NULL, -1))
        return fn(comm);
    int rc = fn(comm);
    coll_end(&cc, NULL);
    return rc;
}
#endif /* TFT_HAVE_MPI */

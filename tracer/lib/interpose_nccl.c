/*
 * interpose_nccl.c — LD_PRELOAD interposers for NCCL (with the CUDA side,
 * TFT_HAVE_CUDA): communicator creation (ncclCommInitRank, ...InitRankConfig,
 * ...InitRankScalable, ...InitAll, ncclCommSplit; ncclCommDestroy/Abort
 * forget them), the collectives ncclAllReduce, ncclBroadcast, ncclBcast,
 * ncclReduce, ncclAllGather, ncclReduceScatter, point-to-point ncclSend and
 * ncclRecv, and ncclGroupStart/End.
 *
 * Each call is a COLLECTIVE enter/exit pair (tft_coll_enter/exit) around
 * the real call, with the communicator id, rank and nranks remembered from
 * its creation. NCCL calls only enqueue work on a stream: "exit" means
 * enqueued, and a rank that never reaches a collective shows as a missing
 * enter (the desync analysis compares (comm, coll_seq) across ranks). The
 * result buffer's statistics (device memory) are computed by the plugin on
 * the call's stream; inside a group the collectives are enqueued only by
 * the outermost ncclGroupEnd, so their statistics are launched after it.
 *
 * Communicator id, equal on all ranks of a communicator: XXH3 of the
 * ncclUniqueId the ranks were created with (the first one for
 * ...InitRankScalable); for ncclCommInitAll, of the process and a counter;
 * for ncclCommSplit, of the parent's id, the parent's split count and the
 * color (ranks split in the same order, as NCCL requires of them). A
 * communicator created before our interposers saw it gets an id from its
 * size only. Each communicator's COMM record (tft_comm_define: what made
 * it, its parent, this rank and the size; NCCL does not tell a rank the
 * others' global ranks, so the analysis assembles the members from the
 * records of all rank files) is written when it is made, or at its first
 * call when it was made unseen; ncclCommInitAll's (one process holding
 * every rank) get none.
 *
 * The few NCCL types are declared here (their ABI is stable since NCCL 2.0:
 * enums are ints, the unique id 128 bytes), so this file needs no nccl.h and
 * works with whatever libnccl the program loads (PyTorch's own included).
 * When the real function cannot be found the wrappers return
 * ncclSystemError.
 */
#include "interpose_cuda_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct ncclConfig ncclConfig_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct {
    char internal[128];
} ncclUniqueId;

enum { NCCL_SUCCESS = 0, NCCL_SYSTEM_ERROR = 2, NCCL_IN_PROGRESS = 7 };

/* The real function of sym (same prototype), cached in var##_cache. */

TFT_INTERPOSE ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
TFT_INTERPOSE ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                                  ncclConfig_t *config);
TFT_INTERPOSE ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                    ncclUniqueId *commIds, ncclConfig_t *config);
TFT_INTERPOSE ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
TFT_INTERPOSE ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config);
TFT_INTERPOSE ncclResult_t ncclCommDestroy(ncclComm_t comm);
TFT_INTERPOSE ncclResult_t ncclCommAbort(ncclComm_t comm);
TFT_INTERPOSE ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                             cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                    ncclComm_t comm, cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                    cudaStream_t stream);
TFT_INTERPOSE ncclResult_t ncclGroupStart(void);
TFT_INTERPOSE ncclResult_t ncclGroupEnd(void);
/* Looked up, not interposed. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);

/* ---- communicators ----------------------------------------------------------- */

#define MAX_COMMS 256

typedef struct comm_ent {
    ncclComm_t comm;   /* NULL: free */
    uint64_t id;
    int rank, nranks;
    unsigned splits;   /* ncclCommSplit calls on this communicator */
    const char *made_by; /* static: "ncclCommInitRank", ...; NULL unknown */
    uint64_t parent;   /* id of the communicator it was split from, 0 none */
    int defined;       /* its COMM record was written (or is never to be) */
} comm_ent;

static struct {
    pthread_mutex_t mu;
    comm_ent e[MAX_COMMS];
    unsigned init_all; /* ncclCommInitAll calls */
} comms = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ncclCommInitAll's communicators: one process holds all their ranks, so
 * a rank file cannot stand for a member; they get no COMM record. */
static const char init_all_name[] = "ncclCommInitAll";

static void comm_put(ncclComm_t c, uint64_t id, int rank, int nranks, unsigned splits, const char *made_by,
                     uint64_t parent)
{
    if (!c)
        return;
    pthread_mutex_lock(&comms.mu);
    comm_ent *slot = NULL;
    for (int i = 0; i < MAX_COMMS; i++) {
        if (comms.e[i].comm == c) {
            slot = &comms.e[i];
            break;
        }
        if (!slot && !comms.e[i].comm)
            slot = &comms.e[i];
    }
    if (slot)
        *slot = (comm_ent){c, id, rank, nranks, splits, made_by, parent, made_by == init_all_name};
    pthread_mutex_unlock(&comms.mu);
}

static void comm_forget(ncclComm_t c)
{
    pthread_mutex_lock(&comms.mu);
    for (int i = 0; i < MAX_COMMS; i++)
        if (comms.e[i].comm == c)
            comms.e[i].comm = NULL;
    pthread_mutex_unlock(&comms.mu);
}

/* Writes c's COMM record once (tft_comm_define: a no-op when recording is
 * off); keeps errno. */
static void comm_define(ncclComm_t c)
{
    comm_ent e = {0};
    pthread_mutex_lock(&comms.mu);
    for (int i = 0; i < MAX_COMMS; i++) {
        if (comms.e[i].comm == c && !comms.e[i].defined) {
            comms.e[i].defined = 1;
            e = comms.e[i];
            break;
        }
    }
    pthread_mutex_unlock(&comms.mu);
    if (!e.comm)
        return;
    int saved = errno;
    tft_comm_define(&TFT_COMM_INFO(.comm = e.id, .name = e.made_by, .parent = e.parent, .rank = e.rank,
                                   .size = e.nranks));
    errno = saved;
}

/* Rank and size of c as NCCL says (-1 when it cannot). */
static void comm_query(ncclComm_t c, int *rank, int *nranks)
{
    static void *_Atomic ur_cache, *_Atomic cc_cache;
    REAL(ur, ncclCommUserRank);
    REAL(cc, ncclCommCount);
    if (!ur || ur(c, rank) != NCCL_SUCCESS)
        *rank = -1;
    if (!cc || cc(c, nranks) != NCCL_SUCCESS)
        *nranks = -1;
}

/* The entry of c; an unknown c is queried and remembered. split: bump and
 * return the split counter instead of nothing. */
static comm_ent comm_get(ncclComm_t c, unsigned *split)
{
    comm_ent r = {0};
    int found = 0;
    pthread_mutex_lock(&comms.mu);
    for (int i = 0; i < MAX_COMMS; i++) {
        if (comms.e[i].comm == c) {
            if (split)
                *split = comms.e[i].splits++;
            r = comms.e[i];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&comms.mu);
    if (found)
        return r;
    int rank, n;
    comm_query(c, &rank, &n);
    char buf[48];
    int len = snprintf(buf, sizeof(buf), "ncclComm:%d", n);
    r = (comm_ent){c, tft_string_id(buf, (size_t)len), rank, n, 0, NULL, 0, 0};
    if (split)
        *split = 0;
    comm_put(c, r.id, rank, n, split ? 1 : 0, NULL, 0);
    return r;
}

static int recording(void)
{
    if (ip_depth)
        return 0;
    ip_depth++;
    int saved = errno;
    int on = ip_active();
    errno = saved;
    ip_depth--;
    return on;
}

static uint64_t unique_id_hash(const ncclUniqueId *u) { return tft_string_id(u->internal, sizeof(u->internal)); }

static int init_ok(ncclResult_t rc) { return rc == NCCL_SUCCESS || rc == NCCL_IN_PROGRESS; }

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommInitRank);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    ncclResult_t rc = fn(comm, nranks, commId, rank);
    if (init_ok(rc) && comm && recording()) {
        comm_put(*comm, unique_id_hash(&commId), rank, nranks, 0, "ncclCommInitRank", 0);
        comm_define(*comm);
    }
    return rc;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommInitRankConfig);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    ncclResult_t rc = fn(comm, nranks, commId, rank, config);
    if (init_ok(rc) && comm && recording()) {
        comm_put(*comm, unique_id_hash(&commId), rank, nranks, 0, "ncclCommInitRankConfig", 0);
        comm_define(*comm);
    }
    return rc;
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommInitRankScalable);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    ncclResult_t rc = fn(newcomm, nranks, myrank, nId, commIds, config);
    if (init_ok(rc) && newcomm && nId > 0 && commIds && recording()) {
        comm_put(*newcomm, unique_id_hash(&commIds[0]), myrank, nranks, 0, "ncclCommInitRankScalable", 0);
        comm_define(*newcomm);
    }
    return rc;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommInitAll);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    ncclResult_t rc = fn(comm, ndev, devlist);
    if (rc == NCCL_SUCCESS && comm && ndev > 0 && recording()) {
        pthread_mutex_lock(&comms.mu);
        unsigned k = comms.init_all++;
        pthread_mutex_unlock(&comms.mu);
        char buf[64];
        int len = snprintf(buf, sizeof(buf), "ncclCommInitAll:%d:%u", (int)getpid(), k);
        uint64_t id = tft_string_id(buf, (size_t)len);
        for (int i = 0; i < ndev; i++)
            comm_put(comm[i], id, i, ndev, 0, init_all_name, 0);
    }
    return rc;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommSplit);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    int rec = recording();
    unsigned split = 0;
    comm_ent parent = {0};
    if (rec)
        parent = comm_get(comm, &split);
    ip_depth++; /* a library making the new communicator with its own ncclCommInitRank is not recorded twice */
    ncclResult_t rc = fn(comm, color, key, newcomm, config);
    ip_depth--;
    if (init_ok(rc) && rec && newcomm && *newcomm) {
        char buf[80];
        int len = snprintf(buf, sizeof(buf), "ncclCommSplit:%016llx:%u:%d", (unsigned long long)parent.id, split,
                           color);
        int rank, n;
        comm_query(*newcomm, &rank, &n);
        comm_put(*newcomm, tft_string_id(buf, (size_t)len), rank, n, 0, "ncclCommSplit", parent.id);
        comm_define(*newcomm);
    }
    return rc;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommDestroy);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    comm_forget(comm);
    return fn(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclCommAbort);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    comm_forget(comm);
    return fn(comm);
}

/* ---- collectives ------------------------------------------------------------- */

/* tft dtype of an ncclDataType_t, -1 when we have none. */
static int map_dtype(ncclDataType_t t)
{
    static const int8_t map[] = {TFT_I8, TFT_U8, TFT_I32, TFT_U32, TFT_I64, TFT_U64, TFT_F16, TFT_F32, TFT_F64,
                                 TFT_BF16, TFT_F8E4M3, TFT_F8E5M2}; /* 10, 11: ncclFloat8e4m3, ncclFloat8e5m2 */
    return t >= 0 && t < (int)sizeof(map) ? map[t] : -1;
}

static int map_redop(ncclRedOp_t op)
{
    switch (op) {
    case 0: return TFT_REDOP_SUM;
    case 1: return TFT_REDOP_PROD;
    case 2: return TFT_REDOP_MAX;
    case 3: return TFT_REDOP_MIN;
    case 4: return TFT_REDOP_AVG;
    default: return TFT_REDOP_OTHER;
    }
}

/* Result statistics waiting for the outermost ncclGroupEnd. */
#define MAX_DEFERRED 64
typedef struct deferred {
    devq_call c;
    void *stream;
} deferred;

static __thread struct {
    int group_depth;
    int n;
    deferred *d; /* MAX_DEFERRED entries, allocated at the first group */
} nt __attribute__((tls_model("initial-exec")));

typedef struct nccl_call {
    tft_coll_info ci;
    int64_t token;
} nccl_call;

/* The sequence space of the point-to-point calls on communicator id: a
 * rank's sends and receives legitimately differ in number from its peers'
 * (a pipeline's first and last stages), so they must not shift the
 * communicator's collective sequence, which the desync analysis aligns
 * across ranks (as interpose_mpi.c does, with the same "<id>:p2p"). */
static uint64_t p2p_id(uint64_t id)
{
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%016llx:p2p", (unsigned long long)id);
    return tft_string_id(buf, (size_t)len);
}

/* Records the enter of a collective and returns 1 when nccl_end must
 * follow the real call; 0: pass through. Keeps errno. */
static int nccl_begin(nccl_call *cc, const char *name, int type, ncclComm_t comm, ncclDataType_t dt, size_t count,
                      int redop, int root)
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
    comm_ent e = comm_get(comm, NULL);
    if (!e.defined)
        comm_define(comm);
    int dtype = map_dtype(dt);
    uint64_t id = type == TFT_COLL_SEND || type == TFT_COLL_RECV ? p2p_id(e.id) : e.id;
    cc->ci = TFT_COLL_INFO(.name = name, .comm = id, .type = type, .dtype = dtype >= 0 ? dtype : TFT_U8,
                           .count = count, .redop = redop, .root = root, .rank = e.rank, .nranks = e.nranks);
    cc->token = tft_coll_enter(&cc->ci);
    errno = saved;
    return 1;
}

/* The result buffer's statistics as an output of the collective's op. */
static void result_stats(const nccl_call *cc, int64_t seq, const void *buf, size_t count, ncclDataType_t dt,
                         void *stream)
{
    int dtype = map_dtype(dt);
    if (!buf || !count || dtype < 0 || seq == TFT_SEQ_NONE || !devq_have_plugin())
        return;
    devq_call c;
    memset(&c, 0, sizeof(c));
    c.kind = DEVQ_RESULT;
    c.op_name = cc->ci.name;
    c.op_kind = TFT_OP_COLLECTIVE;
    c.seq = seq;
    c.nt = 1;
    c.t[0] = (devq_tensor){.name = cc->ci.name, .dtype = dtype, .ndim = 1, .shape = {(int64_t)count},
                           .mem = {.ptr = buf, .dtype = dtype, .rows = count, .cols = 1, .ld = count,
                                   .batch = 1, .stride = 0}};
    if (nt.group_depth > 0) {
        if (!nt.d)
            nt.d = calloc(MAX_DEFERRED, sizeof(deferred));
        if (nt.d && nt.n < MAX_DEFERRED)
            nt.d[nt.n++] = (deferred){c, stream};
        return;
    }
    devq_submit(&c, stream, -1);
}

/* Records the exit (result: the buffer to take statistics of, NULL none). */
static void nccl_end(nccl_call *cc, ncclResult_t rc, const void *result, size_t count, ncclDataType_t dt,
                     void *stream)
{
    int saved = errno;
    _Alignas(8) char sbuf[sizeof(tft_rec_op)];
    memset(sbuf, 0, sizeof(sbuf));
    tft_x_record(TFT_X_STATE, (tft_rec *)sbuf, NULL); /* the collective's op seq */
    int64_t seq = ((tft_rec *)sbuf)->seq;
    if (cc->token >= 0)
        tft_coll_exit(cc->token, &cc->ci, NULL);
    if (init_ok(rc) && result)
        result_stats(cc, seq, result, count, dt, stream);
    devq_drain(0);
    errno = saved;
    ip_depth--;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclAllReduce);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclAllReduce", TFT_COLL_ALLREDUCE, comm, datatype, count, map_redop(op), -1))
        return fn(sendbuff, recvbuff, count, datatype, op, comm, stream);
    ncclResult_t rc = fn(sendbuff, recvbuff, count, datatype, op, comm, stream);
    nccl_end(&cc, rc, recvbuff, count, datatype, stream);
    return rc;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclBroadcast);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclBroadcast", TFT_COLL_BCAST, comm, datatype, count, TFT_REDOP_NONE, root))
        return fn(sendbuff, recvbuff, count, datatype, root, comm, stream);
    ncclResult_t rc = fn(sendbuff, recvbuff, count, datatype, root, comm, stream);
    nccl_end(&cc, rc, recvbuff, count, datatype, stream);
    return rc;
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclBcast);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclBcast", TFT_COLL_BCAST, comm, datatype, count, TFT_REDOP_NONE, root))
        return fn(buff, count, datatype, root, comm, stream);
    ncclResult_t rc = fn(buff, count, datatype, root, comm, stream);
    nccl_end(&cc, rc, buff, count, datatype, stream);
    return rc;
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclReduce);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclReduce", TFT_COLL_REDUCE, comm, datatype, count, map_redop(op), root))
        return fn(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
    ncclResult_t rc = fn(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
    nccl_end(&cc, rc, cc.ci.rank == root ? recvbuff : NULL, count, datatype, stream);
    return rc;
}

/* The count recorded is the per-rank sendcount; the result statistics
 * cover the whole gathered buffer (nranks x sendcount). */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclAllGather);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclAllGather", TFT_COLL_ALLGATHER, comm, datatype, sendcount, TFT_REDOP_NONE, -1))
        return fn(sendbuff, recvbuff, sendcount, datatype, comm, stream);
    ncclResult_t rc = fn(sendbuff, recvbuff, sendcount, datatype, comm, stream);
    size_t total = cc.ci.nranks > 0 ? sendcount * (size_t)cc.ci.nranks : 0;
    nccl_end(&cc, rc, recvbuff, total, datatype, stream);
    return rc;
}

/* The count recorded is the per-rank recvcount. */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclReduceScatter);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclReduceScatter", TFT_COLL_REDUCE_SCATTER, comm, datatype, recvcount, map_redop(op),
                    -1))
        return fn(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
    ncclResult_t rc = fn(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
    nccl_end(&cc, rc, recvbuff, recvcount, datatype, stream);
    return rc;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclSend);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclSend", TFT_COLL_SEND, comm, datatype, count, TFT_REDOP_NONE, peer))
        return fn(sendbuff, count, datatype, peer, comm, stream);
    ncclResult_t rc = fn(sendbuff, count, datatype, peer, comm, stream);
    nccl_end(&cc, rc, NULL, count, datatype, stream);
    return rc;
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclRecv);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    nccl_call cc;
    if (!nccl_begin(&cc, "ncclRecv", TFT_COLL_RECV, comm, datatype, count, TFT_REDOP_NONE, peer))
        return fn(recvbuff, count, datatype, peer, comm, stream);
    ncclResult_t rc = fn(recvbuff, count, datatype, peer, comm, stream);
    nccl_end(&cc, rc, recvbuff, count, datatype, stream);
    return rc;
}

ncclResult_t ncclGroupStart(void)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclGroupStart);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    ncclResult_t rc = fn();
    if (rc == NCCL_SUCCESS)
        nt.group_depth++;
    return rc;
}

ncclResult_t ncclGroupEnd(void)
{
    static void *_Atomic fn_cache;
    REAL(fn, ncclGroupEnd);
    if (!fn)
        return NCCL_SYSTEM_ERROR;
    ncclResult_t rc = fn();
    if (nt.group_depth > 0)
        nt.group_depth--;
    if (nt.group_depth == 0 && nt.n > 0) {
        int n = nt.n;
        nt.n = 0;
        if (init_ok(rc) && !ip_depth) {
            ip_depth++;
            for (int i = 0; i < n; i++)
                devq_submit(&nt.d[i].c, nt.d[i].stream, -1);
            ip_depth--;
        }
    }
    return rc;
}

/*
 * fake_nccl.c — a stand-in for libnccl on machines without a GPU
 * (libtft_fake_nccl.so): the entry points fake_prog.c calls, with the real
 * nccl.h prototypes, on host memory. A communicator of nranks > 1 behaves
 * as if every other rank held the same data as this one (a sum is nranks
 * times the input), which is enough to produce real results.
 */
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

struct ncclComm {
    int nranks, rank;
};

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "fake nccl error"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static unsigned char n;
    memset(id->internal, 0, sizeof(id->internal));
    memcpy(id->internal, "fake-nccl", 9);
    id->internal[127] = (char)++n;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    *comm = malloc(sizeof(**comm));
    (*comm)->nranks = nranks;
    (*comm)->rank = rank;
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    return ncclCommInitRank(newcomm, comm->nranks, (ncclUniqueId){{0}}, comm->rank);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = comm->rank;
    return ncclSuccess;
}

static size_t esize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 4;
    }
}

static void reduce(const void *in, void *out, size_t count, ncclDataType_t t, ncclRedOp_t op, int nranks)
{
    memmove(out, in, count * esize(t));
    if (t == ncclFloat32 && op == ncclSum)
        for (size_t i = 0; i < count; i++)
            ((float *)out)[i] *= (float)nranks;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    reduce(sendbuff, recvbuff, count, datatype, op, comm->nranks);
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    if (comm->rank == root)
        reduce(sendbuff, recvbuff, count, datatype, op, comm->nranks);
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream)
{
    memmove(recvbuff, sendbuff, count * esize(datatype));
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    size_t b = sendcount * esize(datatype);
    for (int r = 0; r < comm->nranks; r++)
        memmove((char *)recvbuff + (size_t)r * b, sendbuff, b);
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    reduce((const char *)sendbuff + (size_t)comm->rank * recvcount * esize(datatype), recvbuff, recvcount, datatype,
           op, comm->nranks);
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return ncclSuccess;
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    memset(recvbuff, 0, count * esize(datatype));
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

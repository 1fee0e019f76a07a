/*
 * attach_event.h — what attach.bpf.c sends user space (bpf_attach.c,
 * `tftrace attach`): one event per probed call that returned (a free: when
 * it is entered), with its arguments as raw values (handles are pointers
 * or integers of the library; user space names them where it can). Shared
 * by both sides.
 */
#ifndef TFT_ATTACH_EVENT_H
#define TFT_ATTACH_EVENT_H

/* The functions probed; the uprobe's cookie is the index. */
enum tft_attach_fn {
    TFT_AFN_ALLREDUCE = 0,  /* (sbuf, rbuf, count, dtype, op, comm) */
    TFT_AFN_REDUCE = 1,     /* (sbuf, rbuf, count, dtype, op, root, comm) */
    TFT_AFN_BCAST = 2,      /* (buf, count, dtype, root, comm) */
    TFT_AFN_ALLGATHER = 3,  /* (sbuf, scount, stype, rbuf, rcount, rtype, comm) */
    TFT_AFN_BARRIER = 4,    /* (comm) */
    TFT_AFN_MPI_END = 5,    /* the MPI functions are those below */
    TFT_AFN_MALLOC = 5,     /* (size) -> ptr; only size >= min_bytes */
    TFT_AFN_CALLOC = 6,     /* (n, size) -> ptr; only n*size >= min_bytes */
    TFT_AFN_FREE = 7,       /* (ptr); only pointers a probed malloc/calloc returned */
    TFT_AFN_CUDA_MALLOC = 8, /* (void **ptr, size) -> cudaError_t */
    TFT_AFN_CUDA_FREE = 9,  /* (ptr) -> cudaError_t */
    TFT_AFN_NCCL_ALLREDUCE = 10,     /* (sbuf, rbuf, count, dtype, op, comm, stream) */
    TFT_AFN_NCCL_BROADCAST = 11,     /* (sbuf, rbuf, count, dtype, root, comm, stream) */
    TFT_AFN_NCCL_REDUCE = 12,        /* (sbuf, rbuf, count, dtype, op, root, comm, stream) */
    TFT_AFN_NCCL_ALLGATHER = 13,     /* (sbuf, rbuf, sendcount, dtype, comm, stream) */
    TFT_AFN_NCCL_REDUCESCATTER = 14, /* (sbuf, rbuf, recvcount, dtype, op, comm, stream) */
    TFT_AFN_NCCL_SEND = 15,          /* (buf, count, dtype, peer, comm, stream) */
    TFT_AFN_NCCL_RECV = 16,          /* (buf, count, dtype, peer, comm, stream) */
    TFT_AFN_COUNT
};
#define TFT_AFN_MAX 32 /* slots of struct tft_alost */

struct tft_acall {
    unsigned int fn;          /* enum tft_attach_fn */
    int pid, tid;
    int root;                 /* -1 none (NCCL send/recv: the peer) */
    unsigned long long count; /* elements; malloc, calloc, cudaMalloc: bytes; free: the bytes its malloc had */
    unsigned long long dtype, op, comm; /* raw handles (NCCL: the enum values; comm: the ncclComm_t) */
    unsigned long long t_enter, t_exit; /* CLOCK_MONOTONIC ns; t_exit 0: never returned */
    unsigned long long ret;   /* the return value (a pointer, cudaError_t, ncclResult_t); free: 0 */
    unsigned long long ptr;   /* malloc, calloc, cudaMalloc: the block (0 none); free, cudaFree: the argument */
    unsigned long long site;  /* the return address of the call (the caller), 0 unknown */
};

/* Calls of one target process the ring buffer had no room for, by fn. */
struct tft_alost {
    unsigned long long by_fn[TFT_AFN_MAX];
};

#endif

/*
 * attach_event.h — what attach.bpf.c sends user space (bpf_attach.c,
 * `tftrace attach`): one event per MPI collective call that returned, with
 * its arguments as raw values (handles are pointers or integers of the MPI
 * library; user space names them where it can). Shared by both sides.
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
    TFT_AFN_COUNT
};

struct tft_acall {
    unsigned int fn;          /* enum tft_attach_fn */
    int pid, tid;
    int root;                 /* -1 none */
    unsigned long long count;
    unsigned long long dtype, op, comm; /* raw handles */
    unsigned long long t_enter, t_exit; /* CLOCK_MONOTONIC ns; t_exit 0: never returned */
};

#endif

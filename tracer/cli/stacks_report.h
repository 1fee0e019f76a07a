/*
 * stacks_report.h — `tftrace stacks` and the launcher's --timeout stacks:
 * collect (BPF snapshot + unwinding, tracer/bpf), name each process's rank
 * from its environment, group equal stacks across processes, print them as
 * text or JSON. Program code: prints only where asked (a FILE given).
 */
#ifndef TFT_STACKS_REPORT_H
#define TFT_STACKS_REPORT_H

#include <stdio.h>
#include <sys/types.h>

#include "bpf_stacks.h"

typedef struct stacks_proc {
    pid_t pid;
    int rank;              /* -1 when the environment names none */
    char rank_var[24];     /* the variable it came from (OMPI_COMM_WORLD_RANK, PMI_RANK, RANK) */
    int nthreads;          /* threads snapped */
} stacks_proc;

typedef struct stacks_report {
    stacks_proc *procs;    /* one per target pid, in the order given */
    size_t nprocs;
    tft_thread_stack *threads;  /* every thread snapped, grouped by process */
    size_t nthreads;
} stacks_report;

/* Snapshot and unwind the threads of pids[0..n-1] into *r (freed with
 * stacks_report_free, also after an error). Returns 0 or the -errno of
 * tft_stacks_snapshot, with err holding the reason. */
int stacks_collect(const pid_t *pids, size_t n, unsigned window_ms, stacks_report *r, char *err, size_t errlen);
void stacks_report_free(stacks_report *r);

/* The MPI/torch rank in /proc/PID/environ (OMPI_COMM_WORLD_RANK, then
 * PMI_RANK, then RANK); -1 when none or unreadable. var gets its name. */
int stacks_rank_of(pid_t pid, char *var, size_t n);

/* "MPI_Allreduce ← step ← main": the stack from its outermost MPI/NCCL/CUDA
 * call (PMPI_ shown as MPI_) down to main, or its top frames when it has
 * none. */
void stacks_summary(const tft_thread_stack *t, char *buf, size_t n);

/* Groups of equal stacks across processes, text (f; with each group's
 * frames when frames is 1) or JSON (a malloc'ed string, NULL on no memory). */
void stacks_print_text(FILE *f, const stacks_report *r, int frames);
char *stacks_json(const stacks_report *r);

/* t's frames, one per line (no final newline): "#N 0xPC FUNC+0xOFF
 * (MODULE+0xOFF)", '?' first for a scanned frame (FORMAT.md §5.16). Whole
 * lines only, cut at n. */
void stacks_frames_text(const tft_thread_stack *t, char *buf, size_t n);

/* 1 when this process may load BPF programs and open perf events (root,
 * CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN). */
int bpf_privileged(void);

#endif

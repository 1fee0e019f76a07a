/*
 * stacks_snap.h — the record the stack-snapshot BPF programs (stacks.bpf.c)
 * hand to user space through their ring buffer, shared by both sides.
 *
 * One record per thread: its user registers (DWARF x86-64 numbering, so the
 * unwinder takes them as they are) and the top of its user stack, copied
 * page by page from the page that holds the stack pointer upwards until
 * TFT_SNAP_STACK bytes or the first page that cannot be read. x86-64 only.
 */
#ifndef TFT_STACKS_SNAP_H
#define TFT_STACKS_SNAP_H

#define TFT_SNAP_STACK      16384  /* bytes of user stack copied per thread */
#define TFT_SNAP_PAGES      (TFT_SNAP_STACK / 4096)
#define TFT_SNAP_NREGS      17     /* DWARF x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
#define TFT_SNAP_MAX_PROCS  1024   /* target processes per snapshot */
#define TFT_SNAP_MAX_TASKS  16384  /* threads one snapshot remembers as taken */

enum tft_snap_source {
    TFT_SNAP_ONCPU = 1,   /* a CPU-clock sample caught the thread running */
    TFT_SNAP_OFFCPU = 2,  /* the task iterator: the thread was off CPU (asleep, preempted) */
    TFT_SNAP_RUNNING = 3, /* the task iterator, while the thread ran on a CPU: registers may be stale */
};

struct tft_snap {
    unsigned int pid;          /* thread group id */
    unsigned int tid;
    unsigned int source;       /* enum tft_snap_source */
    unsigned int state;        /* task __state when taken (0 = runnable) */
    unsigned long long regs[TFT_SNAP_NREGS];
    unsigned long long stack_base; /* user address of stack[0] (page aligned) */
    unsigned int stack_len;    /* bytes of stack[] that were read */
    unsigned int pad;
    char comm[16];
    unsigned char stack[TFT_SNAP_STACK];
};

#endif

/*
 * bpf_stacks.h — where every thread of some processes is: a BPF
 * snapshot of each thread's user registers and stack top (bpf_stacks.c,
 * stacks.bpf.c), unwound in user space with the .eh_frame CFI and
 * symbolised from the targets' ELF symbols (stacks_unwind.c, libdw).
 * Used by `tftrace stacks` and by the launcher's --timeout. Linux x86-64,
 * root or CAP_BPF + CAP_PERFMON (+ CAP_SYS_PTRACE to read the targets'
 * files through /proc/PID/map_files and memory beyond the snapshot).
 *
 * The library part never prints; errors come back as -errno and a message
 * in the caller's buffer.
 */
#ifndef TFT_BPF_STACKS_H
#define TFT_BPF_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacks_snap.h"

#define TFT_STACK_MAX_FRAMES 128  /* native and Python frames together */
#define TFT_STACK_MAX_NATIVE 64   /* native frames the unwinder walks */

/* How a frame was found. */
enum tft_frame_how {
    TFT_FRAME_CFI = 0,   /* the registers, then the unwinder (.eh_frame / .debug_frame) */
    TFT_FRAME_SCAN = 1,  /* a word of the stack that points into a function: a guess */
    TFT_FRAME_PY = 2,    /* a Python frame (py_stacks.h): func its function, module its file, module_off its line */
};

typedef struct tft_frame {
    uint64_t pc;            /* return address (the interrupted pc for frame 0) */
    char func[128];         /* symbol from .symtab/.dynsym, "" when none covers pc */
    uint64_t func_off;      /* pc - symbol start */
    char module[128];       /* file name of the mapping (basename), "" when unmapped */
    uint64_t module_off;    /* pc - the module's load address */
    int how;                /* enum tft_frame_how */
} tft_frame;

typedef struct tft_thread_stack {
    pid_t pid, tid;
    char comm[16];
    int source;             /* enum tft_snap_source */
    int nframes;
    tft_frame frames[TFT_STACK_MAX_FRAMES];
    char note[160];         /* why unwinding stopped early, "" when it reached the bottom */
} tft_thread_stack;

/* Options of tft_stacks_snapshot. */
typedef struct tft_snapshot_opts {
    unsigned window_ms;     /* how long CPU-clock samples may catch running threads (default 300) */
} tft_snapshot_opts;

/*
 * Takes one snapshot per thread of each of the npids processes: running
 * threads through a CPU-clock perf event on every CPU during the window,
 * the others (and any the samples missed) through a task iterator after it.
 * On success *out is a malloc'ed array of *n snapshots (the caller frees it)
 * and 0 is returned. -EPERM/-EACCES: the kernel refused BPF or perf events
 * (not root, no CAP_BPF + CAP_PERFMON, or a lockdown/seccomp policy);
 * -ENOSYS: built without BPF support. err gets a one-line reason.
 * The targets are never written to or stopped.
 */
int tft_stacks_snapshot(const pid_t *pids, size_t npids, const tft_snapshot_opts *opts,
                        struct tft_snap **out, size_t *n, char *err, size_t errlen);

/*
 * Unwinds the n snapshots s[] into st[0..n-1] (one each, same order); their
 * processes must still be alive: the modules come from /proc/PID/maps and
 * the files they map. Returns 0, also when a thread's unwinding stopped
 * early (its note says why, its frames so far are kept); -ENOMEM.
 * Reads beyond the copied stack top come from /proc/PID/mem.
 */
int tft_stacks_unwind(const struct tft_snap *s, size_t n, tft_thread_stack *st);

/* 1 when this binary was built with BPF support (TFT_HAVE_BPF). */
int tft_stacks_supported(void);

#endif

/*
 * bpf_procs.h — the processes of a job from the kernel's tracepoints
 * (procs.bpf.c): fork, exec, exit with its status, OOM kills, for every
 * process below a root pid, recorder or not. Linux, root or CAP_BPF +
 * CAP_PERFMON; the library part never prints.
 */
#ifndef TFT_BPF_PROCS_H
#define TFT_BPF_PROCS_H

#include <stddef.h>
#include <sys/types.h>

#include "procs_event.h"

typedef struct tft_procs tft_procs;
typedef void (*tft_procs_fn)(void *ctx, const struct tft_pevent *e);

/*
 * Loads and attaches the programs and tracks root and every process it
 * forks from now on. NULL on failure with errno set (EPERM/EACCES: BPF not
 * permitted; ENOSYS: built without BPF) and err holding a one-line reason.
 */
tft_procs *tft_procs_start(pid_t root, char *err, size_t errlen);
/* Hands every event that arrived to fn, in order, without waiting.
 * Returns how many, or -errno. */
int tft_procs_poll(tft_procs *p, tft_procs_fn fn, void *ctx);
/* Events the ring buffer had no room for (0 normally). */
unsigned long long tft_procs_lost(const tft_procs *p);
/* Detaches and frees; NULL is fine. */
void tft_procs_stop(tft_procs *p);

#endif

/*
 * bpf_attach.h — uprobes on the MPI and NCCL collectives, CUDA and
 * large host allocations of running processes (attach.bpf.c) for
 * `tftrace attach`. Linux x86-64, root or CAP_BPF +
 * CAP_PERFMON. The library part never prints.
 */
#ifndef TFT_BPF_ATTACH_H
#define TFT_BPF_ATTACH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach_event.h"

typedef struct tft_attach tft_attach;
typedef void (*tft_attach_fn)(void *ctx, const struct tft_acall *c);

/* Loads the programs: malloc/calloc requests below min_bytes are not
 * recorded; ring_bytes sizes the ring buffer (0: 4 MiB; else a power of two
 * multiple of the page size). NULL with errno set and a reason in err. */
tft_attach *tft_attach_open(uint64_t min_bytes, size_t ring_bytes, char *err, size_t errlen);
/* Probes are only taken for pids added here (their loss counts start at
 * 0). 0 or -errno. */
int tft_attach_target(tft_attach *a, pid_t pid);
/* A uprobe and a uretprobe (TFT_AFN_FREE: the uprobe only) on func of
 * library lib (a path) in process pid, reported as fn. 0 or -errno
 * (-ENOENT: lib has no such function). */
int tft_attach_probe(tft_attach *a, pid_t pid, const char *lib, const char *func, int fn);
/* Waits up to timeout_ms for calls and hands each to cb. Returns how many
 * or -errno (-EINTR when a signal came). */
int tft_attach_poll(tft_attach *a, int timeout_ms, tft_attach_fn cb, void *ctx);
/* Hands cb each call entered and not returned (t_exit 0). */
void tft_attach_open_calls(tft_attach *a, tft_attach_fn cb, void *ctx);
/* The calls of target pid lost to a full ring buffer so far, by function
 * (cumulative). 0 or -errno. */
int tft_attach_lost_of(const tft_attach *a, pid_t pid, struct tft_alost *out);
/* Detaches every probe and frees; NULL is fine. */
void tft_attach_close(tft_attach *a);

#endif

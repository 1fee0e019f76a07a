/*
 * bpf_procs.c — loads procs.bpf.c (its skeleton) for the launcher: the
 * fork/exec/exit/OOM events of a job, drained without blocking from the
 * launcher's supervision loop (a few per process, never on a hot path).
 */
#include "bpf_procs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_BPF
#include "procs.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct tft_procs {
    struct tft_procs_bpf *skel;
    struct ring_buffer *rb;
    tft_procs_fn fn;      /* the current poll's */
    void *ctx;
};

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap) { return 0; }

static int on_event(void *ctx, void *data, size_t size)
{
    tft_procs *p = ctx;
    if (size >= sizeof(struct tft_pevent) && p->fn)
        p->fn(p->ctx, data);
    return 0;
}

tft_procs *tft_procs_start(pid_t root, char *err, size_t errlen)
{
    libbpf_set_print(quiet_print);
    tft_procs *p = calloc(1, sizeof(*p));
    int e = ENOMEM;
    const char *what = "out of memory";
    if (!p)
        goto fail;
    p->skel = tft_procs_bpf__open_and_load();
    if (!p->skel) {
        e = errno, what = "loading the BPF programs";
        goto fail;
    }
    __u32 k = (__u32)root;
    __u8 one = 1;
    if (bpf_map__update_elem(p->skel->maps.tracked, &k, sizeof k, &one, 1, BPF_ANY) < 0) {
        e = errno, what = "filling the BPF map";
        goto fail;
    }
    if (tft_procs_bpf__attach(p->skel) < 0) {
        e = errno, what = "attaching to the sched_process_* and mark_victim tracepoints";
        goto fail;
    }
    p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), on_event, p, NULL);
    if (!p->rb) {
        e = errno, what = "opening the BPF ring buffer";
        goto fail;
    }
    return p;
fail:
    if (err && errlen)
        snprintf(err, errlen, "%s: %s", what, strerror(e));
    tft_procs_stop(p);
    errno = e;
    return NULL;
}

int tft_procs_poll(tft_procs *p, tft_procs_fn fn, void *ctx)
{
    p->fn = fn;
    p->ctx = ctx;
    int n = ring_buffer__consume(p->rb);
    p->fn = NULL;
    return n;
}

unsigned long long tft_procs_lost(const tft_procs *p) { return p && p->skel ? p->skel->bss->lost : 0; }

void tft_procs_stop(tft_procs *p)
{
    if (!p)
        return;
    ring_buffer__free(p->rb);
    tft_procs_bpf__destroy(p->skel);
    free(p);
}

#else

tft_procs *tft_procs_start(pid_t root, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "built without BPF support");
    errno = ENOSYS;
    return NULL;
}
int tft_procs_poll(tft_procs *p, tft_procs_fn fn, void *ctx) { return -ENOSYS; }
unsigned long long tft_procs_lost(const tft_procs *p) { return 0; }
void tft_procs_stop(tft_procs *p) {}

#endif

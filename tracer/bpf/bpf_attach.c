/*
 * bpf_attach.c — loads attach.bpf.c and places its uprobes (one entry and
 * one return probe per function and process; free: the entry only) for
 * `tftrace attach`.
 */
#include "bpf_attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_BPF
#include "attach.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct tft_attach {
    struct tft_attach_bpf *skel;
    struct ring_buffer *rb;
    struct bpf_link **links;
    size_t nlinks, cap;
    tft_attach_fn cb;
    void *ctx;
};

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap) { return 0; }

static int on_call(void *ctx, void *data, size_t size)
{
    tft_attach *a = ctx;
    if (size >= sizeof(struct tft_acall) && a->cb)
        a->cb(a->ctx, data);
    return 0;
}

tft_attach *tft_attach_open(uint64_t min_bytes, size_t ring_bytes, char *err, size_t errlen)
{
    libbpf_set_print(quiet_print);
    tft_attach *a = calloc(1, sizeof(*a));
    int e = ENOMEM;
    const char *what = "out of memory";
    if (!a)
        goto fail;
    a->skel = tft_attach_bpf__open();
    if (!a->skel) {
        e = errno, what = "opening the BPF programs";
        goto fail;
    }
    a->skel->rodata->min_bytes = min_bytes;
    if (ring_bytes && (e = -bpf_map__set_max_entries(a->skel->maps.calls, (__u32)ring_bytes)) != 0) {
        what = "sizing the BPF ring buffer";
        goto fail;
    }
    if ((e = -tft_attach_bpf__load(a->skel)) != 0) {
        what = "loading the BPF programs";
        goto fail;
    }
    a->rb = ring_buffer__new(bpf_map__fd(a->skel->maps.calls), on_call, a, NULL);
    if (!a->rb) {
        e = errno, what = "opening the BPF ring buffer";
        goto fail;
    }
    return a;
fail:
    if (err && errlen)
        snprintf(err, errlen, "%s: %s", what, strerror(e));
    tft_attach_close(a);
    errno = e;
    return NULL;
}

int tft_attach_target(tft_attach *a, pid_t pid)
{
    __u32 k = (__u32)pid;
    __u8 one = 1;
    struct tft_alost zero = {{0}};
    if (bpf_map__update_elem(a->skel->maps.lost, &k, sizeof k, &zero, sizeof zero, BPF_ANY) < 0)
        return -errno;
    return bpf_map__update_elem(a->skel->maps.targets, &k, sizeof k, &one, 1, BPF_ANY) < 0 ? -errno : 0;
}

int tft_attach_lost_of(const tft_attach *a, pid_t pid, struct tft_alost *out)
{
    __u32 k = (__u32)pid;
    return bpf_map__lookup_elem(a->skel->maps.lost, &k, sizeof k, out, sizeof *out, 0) < 0 ? -errno : 0;
}

static int keep(tft_attach *a, struct bpf_link *l)
{
    if (a->nlinks == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 32;
        struct bpf_link **v = realloc(a->links, cap * sizeof(*v));
        if (!v) {
            bpf_link__destroy(l);
            return -ENOMEM;
        }
        a->links = v;
        a->cap = cap;
    }
    a->links[a->nlinks++] = l;
    return 0;
}

int tft_attach_probe(tft_attach *a, pid_t pid, const char *lib, const char *func, int fn)
{
    for (int ret = 0; ret < (fn == TFT_AFN_FREE ? 1 : 2); ret++) {
        LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = func, .retprobe = ret != 0, .bpf_cookie = (__u64)fn);
        struct bpf_link *l = bpf_program__attach_uprobe_opts(ret ? a->skel->progs.tft_mpi_exit
                                                                 : a->skel->progs.tft_mpi_enter,
                                                             pid, lib, 0, &o);
        if (!l)
            return -errno;
        int e = keep(a, l);
        if (e)
            return e;
    }
    return 0;
}

int tft_attach_poll(tft_attach *a, int timeout_ms, tft_attach_fn cb, void *ctx)
{
    a->cb = cb;
    a->ctx = ctx;
    int n = ring_buffer__poll(a->rb, timeout_ms);
    a->cb = NULL;
    return n;
}

void tft_attach_open_calls(tft_attach *a, tft_attach_fn cb, void *ctx)
{
    int fd = bpf_map__fd(a->skel->maps.open);
    struct { __u64 id; __u32 fn, pad; } key, next;
    struct tft_acall c;
    int first = 1;
    while (bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
        first = 0;
        key = next;
        if (bpf_map_lookup_elem(fd, &key, &c) == 0) {
            c.t_exit = 0;
            cb(ctx, &c);
        }
    }
}

void tft_attach_close(tft_attach *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->nlinks; i++)
        bpf_link__destroy(a->links[i]);
    free(a->links);
    ring_buffer__free(a->rb);
    tft_attach_bpf__destroy(a->skel);
    free(a);
}

#else

tft_attach *tft_attach_open(uint64_t min_bytes, size_t ring_bytes, char *err, size_t errlen)
{
    (void)min_bytes, (void)ring_bytes;
    if (err && errlen)
        snprintf(err, errlen, "built without BPF support");
    errno = ENOSYS;
    return NULL;
}
int tft_attach_target(tft_attach *a, pid_t pid) { return -ENOSYS; }
int tft_attach_probe(tft_attach *a, pid_t pid, const char *lib, const char *func, int fn) { return -ENOSYS; }
int tft_attach_poll(tft_attach *a, int timeout_ms, tft_attach_fn cb, void *ctx) { return -ENOSYS; }
void tft_attach_open_calls(tft_attach *a, tft_attach_fn cb, void *ctx) {}
int tft_attach_lost_of(const tft_attach *a, pid_t pid, struct tft_alost *out) { return -ENOSYS; }
void tft_attach_close(tft_attach *a) {}

#endif

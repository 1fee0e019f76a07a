// SPDX-License-Identifier: GPL-2.0
/*
 * attach.bpf.c — `tftrace attach`: uprobes and uretprobes on the MPI and
 * NCCL collectives, cudaMalloc/cudaFree and large malloc/calloc/free of
 * running processes. The entry probe keeps the call's arguments per thread
 * and function; the return probe sends them with both times and the
 * result. A call that never returns (a hang) stays in `open` for user space
 * to read at the end. A free is sent from its entry, and only for a block a
 * probed malloc/calloc returned (`live`, by process and address): small
 * blocks cost the probe and one hash lookup. Read-only: the probes never
 * change the target's registers or memory. The cookie of each uprobe is the
 * function (enum tft_attach_fn). A call the ring buffer has no room for is
 * counted in `lost` (per process and function), never waited for.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "attach_event.h"

char LICENSE[] SEC("license") = "GPL";

/* malloc/calloc requests below this many bytes are not recorded (set by
 * user space before loading: TFT_ALLOC_MIN, as the interposer's) */
const volatile __u64 min_bytes = 1 << 20;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, __u8);
} targets SEC(".maps");

struct open_key {
    __u64 pid_tgid;
    __u32 fn;
    __u32 pad;
};

/* calls entered and not yet returned, by thread and function (a large
 * malloc inside an MPI call does not replace the MPI call) */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, struct open_key);
    __type(value, struct tft_acall);
} open SEC(".maps");

struct live_key {
    __u32 pid;
    __u32 pad;
    __u64 ptr;
};

/* large blocks alive (malloc/calloc returned them, no free yet): their size */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct live_key);
    __type(value, __u64);
} live SEC(".maps");

/* per target process (user space adds the entry): calls lost, by function */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, struct tft_alost);
} lost SEC(".maps");

/* user space may shrink it before loading (a test-only setting) */
struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 16 << 20);
} calls SEC(".maps");

/* the 6th integer argument (x86-64 SysV: r9; libbpf 1.1 has no PARM6) */
#define ARG6(ctx) ((ctx)->r9)

/* the 7th integer argument: on the stack above the return address */
static __always_inline __u64 arg7(struct pt_regs *ctx)
{
    __u64 v = 0;
    bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8));
    return v;
}

static __always_inline void send(const struct tft_acall *c)
{
    struct tft_acall *e = bpf_ringbuf_reserve(&calls, sizeof(*e), 0);
    if (e) {
        *e = *c;
        bpf_ringbuf_submit(e, 0);
        return;
    }
    __u32 pid = (__u32)c->pid;
    struct tft_alost *l = bpf_map_lookup_elem(&lost, &pid);
    if (l)
        __sync_fetch_and_add(&l->by_fn[c->fn & (TFT_AFN_MAX - 1)], 1);
}

/* The arguments of an MPI or NCCL collective; 0, or -1 for another fn. */
static __always_inline int coll_args(struct pt_regs *ctx, struct tft_acall *c)
{
    switch (c->fn) {
    case TFT_AFN_ALLREDUCE:
    case TFT_AFN_NCCL_ALLREDUCE:
    case TFT_AFN_NCCL_REDUCESCATTER:
        c->count = PT_REGS_PARM3(ctx), c->dtype = PT_REGS_PARM4(ctx), c->op = PT_REGS_PARM5(ctx);
        c->comm = ARG6(ctx);
        break;
    case TFT_AFN_REDUCE:
    case TFT_AFN_NCCL_REDUCE:
        c->count = PT_REGS_PARM3(ctx), c->dtype = PT_REGS_PARM4(ctx), c->op = PT_REGS_PARM5(ctx);
        c->root = (int)ARG6(ctx), c->comm = arg7(ctx);
        break;
    case TFT_AFN_BCAST:
        c->count = PT_REGS_PARM2(ctx), c->dtype = PT_REGS_PARM3(ctx), c->root = (int)PT_REGS_PARM4(ctx);
        c->comm = PT_REGS_PARM5(ctx);
        break;
    case TFT_AFN_NCCL_BROADCAST:
        c->count = PT_REGS_PARM3(ctx), c->dtype = PT_REGS_PARM4(ctx), c->root = (int)PT_REGS_PARM5(ctx);
        c->comm = ARG6(ctx);
        break;
    case TFT_AFN_ALLGATHER:
        c->count = PT_REGS_PARM2(ctx), c->dtype = PT_REGS_PARM3(ctx), c->comm = arg7(ctx);
        break;
    case TFT_AFN_NCCL_ALLGATHER:
        c->count = PT_REGS_PARM3(ctx), c->dtype = PT_REGS_PARM4(ctx), c->comm = PT_REGS_PARM5(ctx);
        break;
    case TFT_AFN_NCCL_SEND:
    case TFT_AFN_NCCL_RECV:
        c->count = PT_REGS_PARM2(ctx), c->dtype = PT_REGS_PARM3(ctx), c->root = (int)PT_REGS_PARM4(ctx);
        c->comm = PT_REGS_PARM5(ctx);
        break;
    case TFT_AFN_BARRIER: c->comm = PT_REGS_PARM1(ctx); break;
    default: return -1;
    }
    return 0;
}

/* The arguments of an allocator call; 0 to record it, -1 to let it pass. */
static __always_inline int alloc_args(struct pt_regs *ctx, struct tft_acall *c)
{
    __u64 n;
    switch (c->fn) {
    case TFT_AFN_MALLOC: c->count = PT_REGS_PARM1(ctx); break;
    case TFT_AFN_CALLOC:
        n = PT_REGS_PARM1(ctx);
        c->count = n * PT_REGS_PARM2(ctx);
        if (n && c->count / n != PT_REGS_PARM2(ctx))
            return -1;   /* overflows: calloc fails it */
        break;
    case TFT_AFN_CUDA_MALLOC: c->ptr = PT_REGS_PARM1(ctx), c->count = PT_REGS_PARM2(ctx); return 0;
    case TFT_AFN_CUDA_FREE: c->ptr = PT_REGS_PARM1(ctx); return 0;
    default: return -1;
    }
    return c->count >= min_bytes ? 0 : -1;
}

static __always_inline int on_free(struct pt_regs *ctx, struct tft_acall *c)
{
    struct live_key k = {.pid = (__u32)c->pid, .ptr = PT_REGS_PARM1(ctx)};
    __u64 *size = k.ptr ? bpf_map_lookup_elem(&live, &k) : 0;
    if (!size)
        return 0;
    c->ptr = k.ptr, c->count = *size, c->t_exit = c->t_enter;
    bpf_map_delete_elem(&live, &k);
    send(c);
    return 0;
}

SEC("uprobe")
int tft_mpi_enter(struct pt_regs *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = id >> 32;
    if (!bpf_map_lookup_elem(&targets, &tgid))
        return 0;
    struct tft_acall c = {};
    c.fn = (unsigned int)bpf_get_attach_cookie(ctx);
    c.pid = tgid;
    c.tid = (int)id;
    c.root = -1;
    c.t_enter = bpf_ktime_get_ns();
    bpf_probe_read_user(&c.site, sizeof(c.site), (void *)PT_REGS_SP(ctx));
    if (c.fn == TFT_AFN_FREE)
        return on_free(ctx, &c);
    if (coll_args(ctx, &c) < 0 && alloc_args(ctx, &c) < 0)
        return 0;
    struct open_key k = {.pid_tgid = id, .fn = c.fn};
    bpf_map_update_elem(&open, &k, &c, BPF_ANY);
    return 0;
}

SEC("uretprobe")
int tft_mpi_exit(struct pt_regs *ctx)
{
    struct open_key k = {.pid_tgid = bpf_get_current_pid_tgid(), .fn = (__u32)bpf_get_attach_cookie(ctx)};
    struct tft_acall *o = bpf_map_lookup_elem(&open, &k);
    if (!o)
        return 0;
    struct tft_acall c = *o;
    bpf_map_delete_elem(&open, &k);
    c.t_exit = bpf_ktime_get_ns();
    c.ret = PT_REGS_RC(ctx);
    if (c.fn == TFT_AFN_MALLOC || c.fn == TFT_AFN_CALLOC) {
        c.ptr = c.ret;
        struct live_key lk = {.pid = (__u32)c.pid, .ptr = c.ptr};
        if (c.ptr)
            bpf_map_update_elem(&live, &lk, &c.count, BPF_ANY);
    } else if (c.fn == TFT_AFN_CUDA_MALLOC) {
        __u64 at = c.ptr;
        c.ptr = 0;
        if ((int)c.ret == 0)
            bpf_probe_read_user(&c.ptr, sizeof(c.ptr), (void *)at);
    }
    send(&c);
    return 0;
}

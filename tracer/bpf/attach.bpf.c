// SPDX-License-Identifier: GPL-2.0
/*
 * attach.bpf.c — `tftrace attach`: uprobes and uretprobes on the MPI
 * collectives of running processes. The entry probe keeps the call's
 * arguments per thread; the return probe sends them with both times. A
 * call that never returns (a hang) stays in `open` for user space to read
 * at the end. Read-only: the probes never change the target's registers or
 * memory. The cookie of each uprobe is the function (enum tft_attach_fn).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "attach_event.h"

char LICENSE[] SEC("license") = "GPL";

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, __u8);
} targets SEC(".maps");

/* calls entered and not yet returned, by thread (pid_tgid) */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, __u64);
    __type(value, struct tft_acall);
} open SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 4 << 20);
} calls SEC(".maps");

__u64 lost = 0;

/* the 6th integer argument (x86-64 SysV: r9; libbpf 1.1 has no PARM6) */
#define ARG6(ctx) ((ctx)->r9)

/* the 7th integer argument: on the stack above the return address */
static __always_inline __u64 arg7(struct pt_regs *ctx)
{
    __u64 v = 0;
    bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8));
    return v;
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
    switch (c.fn) {
    case TFT_AFN_ALLREDUCE:
        c.count = PT_REGS_PARM3(ctx), c.dtype = PT_REGS_PARM4(ctx), c.op = PT_REGS_PARM5(ctx);
        c.comm = ARG6(ctx);
        break;
    case TFT_AFN_REDUCE:
        c.count = PT_REGS_PARM3(ctx), c.dtype = PT_REGS_PARM4(ctx), c.op = PT_REGS_PARM5(ctx);
        c.root = (int)ARG6(ctx), c.comm = arg7(ctx);
        break;
    case TFT_AFN_BCAST:
        c.count = PT_REGS_PARM2(ctx), c.dtype = PT_REGS_PARM3(ctx), c.root = (int)PT_REGS_PARM4(ctx);
        c.comm = PT_REGS_PARM5(ctx);
        break;
    case TFT_AFN_ALLGATHER:
        c.count = PT_REGS_PARM2(ctx), c.dtype = PT_REGS_PARM3(ctx), c.comm = arg7(ctx);
        break;
    case TFT_AFN_BARRIER: c.comm = PT_REGS_PARM1(ctx); break;
    default: return 0;
    }
    bpf_map_update_elem(&open, &id, &c, BPF_ANY);
    return 0;
}

SEC("uretprobe")
int tft_mpi_exit(struct pt_regs *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    struct tft_acall *c = bpf_map_lookup_elem(&open, &id);
    if (!c)
        return 0;
    struct tft_acall *e = bpf_ringbuf_reserve(&calls, sizeof(*e), 0);
    if (e) {
        *e = *c;
        e->t_exit = bpf_ktime_get_ns();
        bpf_ringbuf_submit(e, 0);
    } else {
        __sync_fetch_and_add(&lost, 1);
    }
    bpf_map_delete_elem(&open, &id);
    return 0;
}

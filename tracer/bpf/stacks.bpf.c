// SPDX-License-Identifier: GPL-2.0
/*
 * stacks.bpf.c — user-stack snapshots of the threads of chosen processes,
 * for `tftrace stacks` and `tftrace --timeout` (tracer/bpf/bpf_stacks.c).
 *
 * Two programs fill one ring buffer with struct tft_snap records:
 *   tft_snap_oncpu   a CPU-clock perf event on every CPU: a thread of a target
 *                    that is running (a spinning MPI progress loop) is caught
 *                    with the registers of its interrupted user context;
 *   tft_snap_offcpu  a task iterator, run once after: every thread of a target
 *                    not caught yet (asleep in a syscall, preempted), with the
 *                    user registers saved when it entered the kernel.
 * Neither writes to the target: they read its registers and the top of its
 * stack, and user space unwinds those with the .eh_frame CFI (libdw), because
 * libraries built without frame pointers (Debian's Open MPI) defeat a
 * frame-pointer walk. Kept small for the verifier: fixed-size page copies.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "stacks_snap.h"

char LICENSE[] SEC("license") = "GPL";

/* thread group ids to snapshot (value unused) */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, TFT_SNAP_MAX_PROCS);
    __type(key, __u32);
    __type(value, __u8);
} targets SEC(".maps");

/* threads already taken: one snapshot per thread */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, TFT_SNAP_MAX_TASKS);
    __type(key, __u32);
    __type(value, __u8);
} taken SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 8 << 20);
} snaps SEC(".maps");

/* records lost because the ring was full */
__u64 lost = 0;

static __always_inline void fill_regs(struct tft_snap *s, struct pt_regs *r)
{
    s->regs[0] = BPF_CORE_READ(r, ax);
    s->regs[1] = BPF_CORE_READ(r, dx);
    s->regs[2] = BPF_CORE_READ(r, cx);
    s->regs[3] = BPF_CORE_READ(r, bx);
    s->regs[4] = BPF_CORE_READ(r, si);
    s->regs[5] = BPF_CORE_READ(r, di);
    s->regs[6] = BPF_CORE_READ(r, bp);
    s->regs[7] = BPF_CORE_READ(r, sp);
    s->regs[8] = BPF_CORE_READ(r, r8);
    s->regs[9] = BPF_CORE_READ(r, r9);
    s->regs[10] = BPF_CORE_READ(r, r10);
    s->regs[11] = BPF_CORE_READ(r, r11);
    s->regs[12] = BPF_CORE_READ(r, r12);
    s->regs[13] = BPF_CORE_READ(r, r13);
    s->regs[14] = BPF_CORE_READ(r, r14);
    s->regs[15] = BPF_CORE_READ(r, r15);
    s->regs[16] = BPF_CORE_READ(r, ip);
}

static __always_inline int is_target(__u32 tgid, __u32 tid)
{
    return bpf_map_lookup_elem(&targets, &tgid) && !bpf_map_lookup_elem(&taken, &tid);
}

static __always_inline struct tft_snap *begin(struct task_struct *t, __u32 source)
{
    struct tft_snap *s = bpf_ringbuf_reserve(&snaps, sizeof(*s), 0);
    if (!s) {
        __sync_fetch_and_add(&lost, 1);
        return 0;
    }
    s->pid = BPF_CORE_READ(t, tgid);
    s->tid = BPF_CORE_READ(t, pid);
    s->source = source;
    s->state = BPF_CORE_READ(t, __state);
    s->stack_len = 0;
    s->pad = 0;
    BPF_CORE_READ_STR_INTO(&s->comm, t, comm);
    return s;
}

static __always_inline void finish(struct tft_snap *s)
{
    __u32 tid = s->tid;
    __u8 one = 1;
    bpf_map_update_elem(&taken, &tid, &one, BPF_ANY);
    bpf_ringbuf_submit(s, 0);
}

SEC("perf_event")
int tft_snap_oncpu(void *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    if (!is_target(id >> 32, (__u32)id))
        return 0;
    struct task_struct *t = bpf_get_current_task_btf();
    /* the user context, also when the sample hit inside a syscall */
    struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
    struct tft_snap *s = begin(t, TFT_SNAP_ONCPU);
    if (!s)
        return 0;
    fill_regs(s, r);
    __u64 base = s->regs[7] & ~4095ULL;
    s->stack_base = base;
#pragma unroll
    for (int i = 0; i < TFT_SNAP_PAGES; i++) {
        if (bpf_probe_read_user(&s->stack[i * 4096], 4096, (void *)(base + i * 4096)))
            break;
        s->stack_len = (i + 1) * 4096;
    }
    finish(s);
    return 0;
}

SEC("iter.s/task")
int tft_snap_offcpu(struct bpf_iter__task *ctx)
{
    struct task_struct *t = ctx->task;
    if (!t || !t->mm || !is_target(t->tgid, t->pid))
        return 0;
    __u32 source = (t->__state == 0 && t->on_cpu) ? TFT_SNAP_RUNNING : TFT_SNAP_OFFCPU;
    struct tft_snap *s = begin(t, source);
    if (!s)
        return 0;
    fill_regs(s, (struct pt_regs *)bpf_task_pt_regs(t));
    __u64 base = s->regs[7] & ~4095ULL;
    s->stack_base = base;
#pragma unroll
    for (int i = 0; i < TFT_SNAP_PAGES; i++) {
        if (bpf_copy_from_user_task(&s->stack[i * 4096], 4096, (void *)(base + i * 4096), t, 0))
            break;
        s->stack_len = (i + 1) * 4096;
    }
    finish(s);
    return 0;
}

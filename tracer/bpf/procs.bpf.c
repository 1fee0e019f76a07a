// SPDX-License-Identifier: GPL-2.0
/*
 * procs.bpf.c — every process of a job under `tftrace`: fork, exec and
 * exit (with the exit status or the signal, as wait(2) would give it)
 * from the sched_process_* tracepoints, and OOM kills (oom/mark_victim),
 * including processes that load no recorder (static binaries) and those a
 * launcher cannot wait for (grandchildren). The job is the subtree of the
 * pids user space puts in `tracked` (the launcher itself); forks of
 * tracked processes are tracked. Read-only: nothing here changes a task.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "procs_event.h"

char LICENSE[] SEC("license") = "GPL";

#define SIGNAL_GROUP_EXIT_FLAG 0x00000004 /* include/linux/sched/signal.h */

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, TFT_PROCS_MAX);
    __type(key, __u32);
    __type(value, __u8);
} tracked SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 20);
} events SEC(".maps");

__u64 lost = 0;

static __always_inline struct tft_pevent *ev_new(__u32 type, struct task_struct *t)
{
    struct tft_pevent *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        __sync_fetch_and_add(&lost, 1);
        return 0;
    }
    e->type = type;
    e->pid = BPF_CORE_READ(t, tgid);
    e->ppid = BPF_CORE_READ(t, real_parent, tgid);
    e->code = 0;
    e->ts = bpf_ktime_get_ns();
    BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
    e->file[0] = 0;
    return e;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(tft_on_fork, struct task_struct *parent, struct task_struct *child)
{
    __u32 ppid = parent->tgid, pid = child->tgid;
    __u8 one = 1;
    if (pid == ppid || !bpf_map_lookup_elem(&tracked, &ppid))
        return 0;   /* a thread, or not of the job */
    bpf_map_update_elem(&tracked, &pid, &one, BPF_ANY);
    struct tft_pevent *e = ev_new(TFT_PEV_FORK, child);
    if (e) {
        e->ppid = ppid;
        bpf_ringbuf_submit(e, 0);
    }
    return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tft_on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
    __u32 pid = p->tgid;
    if (!bpf_map_lookup_elem(&tracked, &pid))
        return 0;
    struct tft_pevent *e = ev_new(TFT_PEV_EXEC, p);
    if (e) {
        bpf_probe_read_kernel_str(e->file, sizeof(e->file), BPF_CORE_READ(bprm, filename));
        bpf_ringbuf_submit(e, 0);
    }
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(tft_on_exit, struct task_struct *p)
{
    __u32 pid = p->tgid;
    if (!bpf_map_lookup_elem(&tracked, &pid))
        return 0;
    if (BPF_CORE_READ(p, signal, live.counter) != 0)
        return 0;   /* not the process's last thread */
    struct tft_pevent *e = ev_new(TFT_PEV_EXIT, p);
    if (e) {
        unsigned int flags = BPF_CORE_READ(p, signal, flags);
        e->code = (flags & SIGNAL_GROUP_EXIT_FLAG) ? BPF_CORE_READ(p, signal, group_exit_code) : p->exit_code;
        bpf_ringbuf_submit(e, 0);
    }
    bpf_map_delete_elem(&tracked, &pid);
    return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(tft_on_oom, struct task_struct *p)
{
    __u32 pid = p->tgid;
    if (!bpf_map_lookup_elem(&tracked, &pid))
        return 0;
    struct tft_pevent *e = ev_new(TFT_PEV_OOM, p);
    if (e)
        bpf_ringbuf_submit(e, 0);
    return 0;
}

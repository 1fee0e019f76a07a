/*
 * stacks_unwind.c — turns the BPF snapshots of stacks.bpf.c into symbolised
 * call stacks with libdw (elfutils): the modules of each process are those
 * of /proc/PID/maps, the unwinder follows the .eh_frame/.debug_frame CFI
 * from the snapshot's registers over the copied stack top (and
 * /proc/PID/mem beyond it), symbols come from .symtab/.dynsym.
 *
 * When the CFI walk stops before it reaches the program's entry (no CFI for
 * a frame, a corrupt stack), the rest of the copied stack is scanned for
 * words that point inside a function; those frames are marked
 * TFT_FRAME_SCAN (shown as "?" guesses), never mixed up with real ones.
 * Workload: tens of threads, once per command; ~1 ms per thread.
 */
#include "bpf_stacks.h"

#ifdef TFT_HAVE_BPF
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One process being unwound: its snapshots and the one being walked. */
typedef struct proc_ctx {
    const struct tft_snap *snaps;
    size_t n;                    /* snapshots of this process (contiguous view not required) */
    const struct tft_snap *cur;  /* the thread dwfl asks about */
    tft_thread_stack *st;        /* where cur's frames go */
    int memfd;                   /* /proc/PID/mem, -1 when it cannot be opened */
    int from_return;             /* the walk starts at a return address (a PLT retry) */
    Dwfl *dwfl;
} proc_ctx;

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    proc_ctx *p = arg;
    if (*thread_argp)            /* only the thread asked for is reported */
        return 0;
    *thread_argp = (void *)p->cur;
    return (pid_t)p->cur->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    proc_ctx *p = arg;
    if (!p->cur || (pid_t)p->cur->tid != tid)
        return false;
    *thread_argp = (void *)p->cur;
    return true;
}

/* 8 bytes at addr: from the snapshot when it holds them, else the live
 * process (older frames of a hung thread do not change). */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    proc_ctx *p = arg;
    const struct tft_snap *s = p->cur;
    if (s && addr >= s->stack_base && addr + 8 <= s->stack_base + s->stack_len) {
        memcpy(result, s->stack + (addr - s->stack_base), 8);
        return true;
    }
    uint64_t v;
    if (p->memfd >= 0 && pread(p->memfd, &v, 8, (off_t)addr) == 8) {
        *result = v;
        return true;
    }
    return false;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
    const struct tft_snap *s = thread_arg;
    Dwarf_Word regs[TFT_SNAP_NREGS];
    for (int i = 0; i < TFT_SNAP_NREGS; i++)
        regs[i] = s->regs[i];
    dwfl_thread_state_register_pc(thread, s->regs[16]);
    return dwfl_thread_state_registers(thread, 0, TFT_SNAP_NREGS - 1, regs);
}

static const Dwfl_Thread_Callbacks thread_cbs = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

static const char *base_name(const char *path)
{
    const char *b = path ? strrchr(path, '/') : NULL;
    return b ? b + 1 : (path ? path : "");
}

/* Fills f for address pc (lookup at pc - 1 for return addresses, so a call
 * at a function's very end is named by its caller). Returns 1 when a
 * function symbol covers it. */
static int symbolise(Dwfl *dwfl, uint64_t pc, int activation, tft_frame *f)
{
    uint64_t look = activation ? pc : pc - 1;
    memset(f, 0, sizeof *f);
    f->pc = pc;
    Dwfl_Module *m = dwfl_addrmodule(dwfl, look);
    if (!m)
        return 0;
    Dwarf_Addr start = 0;
    const char *mname = dwfl_module_info(m, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    snprintf(f->module, sizeof f->module, "%s", base_name(mname));
    f->module_off = pc - start;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(m, look, &off, &sym, NULL, NULL, NULL);
    if (!name || GELF_ST_TYPE(sym.st_info) != STT_FUNC)
        return 0;
    snprintf(f->func, sizeof f->func, "%s", name);
    f->func_off = pc - (look - off);
    return 1;
}

static int on_frame(Dwfl_Frame *state, void *arg)
{
    proc_ctx *p = arg;
    tft_thread_stack *st = p->st;
    Dwarf_Addr pc;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation))
        return DWARF_CB_ABORT;
    if (st->nframes >= TFT_STACK_MAX_NATIVE)
        return DWARF_CB_ABORT;
    if (p->from_return) {        /* the retry's first pc is a return address */
        activation = false;
        p->from_return = 0;
    }
    symbolise(p->dwfl, pc, activation, &st->frames[st->nframes]);
    st->frames[st->nframes].how = TFT_FRAME_CFI;
    st->nframes++;
    return DWARF_CB_OK;
}

/* The walk reached a thread's first frame: the entry of the program or of
 * a thread. */
static int reached_bottom(const tft_thread_stack *st)
{
    static const char *const roots[] = {"_start", "__libc_start_main", "__libc_start_call_main",
                                        "start_thread", "clone", "clone3", "__clone3", "__clone", "main"};
    if (!st->nframes)
        return 0;
    const char *f = st->frames[st->nframes - 1].func;
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++)
        if (!strcmp(f, roots[i]))
            return 1;
    return 0;
}

/* After an early stop: the words of the copied stack above the last known
 * frame that point inside a function (not at its start), as guesses. */
static void scan_stack(proc_ctx *p)
{
    const struct tft_snap *s = p->cur;
    tft_thread_stack *st = p->st;
    uint64_t sp = s->regs[7];
    if (sp < s->stack_base || sp >= s->stack_base + s->stack_len)
        return;
    for (uint64_t a = sp; a + 8 <= s->stack_base + s->stack_len; a += 8) {
        if (st->nframes >= TFT_STACK_MAX_NATIVE)
            return;
        uint64_t v;
        memcpy(&v, s->stack + (a - s->stack_base), 8);
        tft_frame f;
        if (!symbolise(p->dwfl, v, 0, &f) || f.func_off == 0)
            continue;
        if (st->nframes && st->frames[st->nframes - 1].pc == v)
            continue;
        f.how = TFT_FRAME_SCAN;
        st->frames[st->nframes++] = f;
        if (reached_bottom(st))
            return;
    }
}

/* Where a PLT stub that pc is in keeps its caller's return address: the
 * byte offset from the stack pointer, or -1 when pc is not in a .plt,
 * .plt.sec or .plt.got section. libdw ends a walk that starts in a stub
 * after that one frame, without an error: the stubs' CFI is an expression of
 * rip (a lazy .plt entry has pushed its index from byte 11 on; the first
 * entry is reached with the index pushed and pushes a second word at byte 6). */
static int plt_return_slot(Dwfl *dwfl, uint64_t pc)
{
    Dwfl_Module *m = dwfl_addrmodule(dwfl, pc);
    Dwarf_Addr bias = 0;
    Elf *elf = m ? dwfl_module_getelf(m, &bias) : NULL;
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return -1;
    uint64_t a = pc - bias;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || a < sh.sh_addr || a >= sh.sh_addr + sh.sh_size)
            continue;
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!name || strncmp(name, ".plt", 4) != 0)
            return -1;
        if (strcmp(name, ".plt") != 0)       /* .plt.sec, .plt.got: one indirect jump */
            return 0;
        uint64_t off = a - sh.sh_addr;
        if (off < 16)                         /* the first entry, index pushed */
            return off < 6 ? 8 : 16;
        return (off & 15) >= 11 ? 8 : 0;
    }
    return -1;
}

/* A walk that ended after frame 0 in a PLT stub goes on from the stub's
 * return address, as if the stub had returned. */
static void unwind_past_plt(proc_ctx *p, const struct tft_snap *s, tft_thread_stack *st)
{
    int slot = plt_return_slot(p->dwfl, s->regs[16]);
    Dwarf_Word ret;
    uint64_t sp = s->regs[7] + (uint64_t)(slot < 0 ? 0 : slot);
    if (slot < 0 || !memory_read(p->dwfl, sp, &ret, p))
        return;
    struct tft_snap *r = malloc(sizeof *r);
    if (!r)
        return;
    memcpy(r, s, sizeof *r);
    r->regs[16] = ret;
    r->regs[7] = sp + 8;
    p->cur = r;
    p->from_return = 1;
    int rc = dwfl_getthread_frames(p->dwfl, (pid_t)s->tid, on_frame, p);
    if (rc != 0 && !reached_bottom(st))
        snprintf(st->note, sizeof st->note, "CFI unwinding stopped after %d frames: %s", st->nframes,
                 dwfl_errmsg(-1));
    p->from_return = 0;
    p->cur = s;
    free(r);
}

static void unwind_one(proc_ctx *p, const struct tft_snap *s, tft_thread_stack *st)
{
    memset(st, 0, sizeof *st);
    st->pid = (pid_t)s->pid;
    st->tid = (pid_t)s->tid;
    st->source = (int)s->source;
    memcpy(st->comm, s->comm, sizeof st->comm);
    st->comm[sizeof st->comm - 1] = 0;
    if (!p->dwfl) {
        snprintf(st->note, sizeof st->note, "the process's modules could not be read");
        return;
    }
    p->cur = s;
    p->st = st;
    int rc = dwfl_getthread_frames(p->dwfl, (pid_t)s->tid, on_frame, p);
    if (rc != 0 && !reached_bottom(st))
        snprintf(st->note, sizeof st->note, "CFI unwinding stopped after %d frames: %s", st->nframes,
                 dwfl_errmsg(-1));
    if (st->nframes == 1 && !reached_bottom(st)) {
        st->note[0] = 0;
        unwind_past_plt(p, s, st);
    }
    if (st->note[0] && !reached_bottom(st))
        scan_stack(p);
    p->cur = NULL;
}

static Dwfl *open_process(proc_ctx *p, pid_t pid)
{
    static const Dwfl_Callbacks cbs = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
    };
    Dwfl *d = dwfl_begin(&cbs);
    if (!d)
        return NULL;
    dwfl_report_begin(d);
    if (dwfl_linux_proc_report(d, pid) != 0 || dwfl_report_end(d, NULL, NULL) != 0)
        goto fail;
    if (!dwfl_attach_state(d, NULL, pid, &thread_cbs, p))
        goto fail;
    return d;
fail:
    dwfl_end(d);
    return NULL;
}

int tft_stacks_unwind(const struct tft_snap *s, size_t n, tft_thread_stack *st)
{
    char *done = calloc(n ? n : 1, 1);
    if (!done)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        proc_ctx p = {.snaps = s, .n = n, .memfd = -1};
        char path[64];
        snprintf(path, sizeof path, "/proc/%u/mem", s[i].pid);
        p.memfd = open(path, O_RDONLY | O_CLOEXEC);
        p.dwfl = open_process(&p, (pid_t)s[i].pid);
        for (size_t j = i; j < n; j++) {
            if (s[j].pid != s[i].pid)
                continue;
            unwind_one(&p, &s[j], &st[j]);
            done[j] = 1;
        }
        if (p.dwfl)
            dwfl_end(p.dwfl);
        if (p.memfd >= 0)
            close(p.memfd);
    }
    free(done);
    return 0;
}

#else

#include <errno.h>

int tft_stacks_unwind(const struct tft_snap *s, size_t n, tft_thread_stack *st) { return -ENOSYS; }

#endif

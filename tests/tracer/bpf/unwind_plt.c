/*
 * unwind_plt.c — the stack unwinder (tracer/bpf/stacks_unwind.c) on a thread
 * caught inside a PLT stub: a forked child calls getpgrp() through this
 * program's PLT (lazy binding: the first call goes through the resolver's
 * entry) and is single-stepped under ptrace; at every instruction inside a
 * .plt section its registers and stack top become a snapshot, as the BPF
 * program would take it, and the unwound stack must reach main through
 * call_loop by the CFI alone. libdw ends such a walk after the stub's frame
 * without an error; `tftrace stacks` once summarised a spinning MPI rank as
 * "mca_pml_ob1.so+0x41a0" that way.
 *
 * Needs no privilege (a parent traces its own child). Exit 0 on success,
 * 1 with the failing state's frames on stderr.
 */
#include "bpf_stacks.h"

#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct range {
    uint64_t lo, hi;
} range;

static range plt[4];
static int nplt;

static int main_base(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(uint64_t *)arg = info->dlpi_addr;
    return 1;   /* the first object is the program */
}

/* the .plt* sections of this program, at their run-time addresses */
static int find_plt(void)
{
    uint64_t bias = 0;
    dl_iterate_phdr(main_base, &bias);
    elf_version(EV_CURRENT);
    int fd = open("/proc/self/exe", O_RDONLY);
    Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    size_t shstrndx;
    if (!e || elf_getshdrstrndx(e, &shstrndx) != 0)
        return -1;
    for (Elf_Scn *scn = elf_nextscn(e, NULL); scn && nplt < 4; scn = elf_nextscn(e, scn)) {
        GElf_Shdr sh;
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
        if (name && !strncmp(name, ".plt", 4) && sh.sh_size)
            plt[nplt++] = (range){bias + sh.sh_addr, bias + sh.sh_addr + sh.sh_size};
    }
    elf_end(e);
    close(fd);
    return nplt ? 0 : -1;
}

__attribute__((noinline)) static void call_loop(void)
{
    for (int i = 0; i < 3; i++)
        if (getpgrp() < 0)
            _exit(3);
}

static int in_plt(uint64_t pc)
{
    for (int i = 0; i < nplt; i++)
        if (pc >= plt[i].lo && pc < plt[i].hi)
            return 1;
    return 0;
}

static int in_loop;   /* states whose stub was called from call_loop */

static int has(const tft_thread_stack *st, const char *fn)
{
    for (int i = 0; i < st->nframes; i++)
        if (!strcmp(st->frames[i].func, fn))
            return 1;
    return 0;
}

/* one snapshot of the stopped child; 0 when its stack unwinds through the stub */
static int check_state(pid_t c, const struct user_regs_struct *r, int memfd)
{
    static struct tft_snap s;
    static tft_thread_stack st;
    memset(&s, 0, sizeof s);
    s.pid = s.tid = (unsigned)c;
    s.source = TFT_SNAP_ONCPU;
    const unsigned long long v[TFT_SNAP_NREGS] = {r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi,
                                                  r->rbp, r->rsp, r->r8,  r->r9,  r->r10, r->r11,
                                                  r->r12, r->r13, r->r14, r->r15, r->rip};
    memcpy(s.regs, v, sizeof v);
    s.stack_base = r->rsp & ~4095ULL;
    ssize_t n = pread(memfd, s.stack, 8192, (off_t)s.stack_base);
    s.stack_len = n > 0 ? (unsigned)n : 0;
    if (tft_stacks_unwind(&s, 1, &st) != 0)
        return -1;
    /* the stub's caller: call_loop (getpgrp) or main (raise, _exit) */
    int ok = st.nframes >= 3 && st.frames[0].pc == r->rip && has(&st, "main") && !st.note[0] &&
             (!strcmp(st.frames[1].func, "call_loop") || !strcmp(st.frames[1].func, "main"));
    for (int i = 0; ok && i < st.nframes; i++)
        ok = st.frames[i].how == TFT_FRAME_CFI;
    if (ok && !strcmp(st.frames[1].func, "call_loop"))
        in_loop++;
    if (!ok) {
        fprintf(stderr, "FAIL: pc %#llx: %d frames, note '%s'\n", r->rip, st.nframes, st.note);
        for (int i = 0; i < st.nframes; i++)
            fprintf(stderr, "  #%d %#llx %s (%s+%#llx)%s\n", i, (unsigned long long)st.frames[i].pc,
                    st.frames[i].func, st.frames[i].module, (unsigned long long)st.frames[i].module_off,
                    st.frames[i].how == TFT_FRAME_SCAN ? " [scan]" : "");
    }
    return ok ? 0 : -1;
}

int main(void)
{
    if (!tft_stacks_supported()) {
        printf("SKIP: built without BPF support (no libdw)\n");
        return 0;
    }
    if (find_plt() != 0) {
        printf("SKIP: this program has no .plt section\n");
        return 0;
    }
    pid_t c = fork();
    if (c < 0)
        return 1;
    if (c == 0) {
        ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        raise(SIGSTOP);
        call_loop();
        _exit(0);
    }
    int status;
    if (waitpid(c, &status, 0) != c || !WIFSTOPPED(status)) {
        printf("SKIP: cannot trace a child here\n");
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)c);
    int memfd = open(path, O_RDONLY);
    int states = 0, bad = 0, steps = 0;
    unsigned offs = 0;   /* bit k: an instruction at byte k of a 16-byte entry */
    for (; steps < 2000000 && bad < 3; steps++) {
        struct user_regs_struct r;
        if (ptrace(PTRACE_GETREGS, c, NULL, &r) != 0)
            break;
        if (in_plt(r.rip)) {
            states++;
            offs |= 1u << (r.rip & 15);
            bad += check_state(c, &r, memfd) != 0;
        }
        if (ptrace(PTRACE_SINGLESTEP, c, NULL, NULL) != 0 || waitpid(c, &status, 0) != c || !WIFSTOPPED(status))
            break;
    }
    kill(c, SIGKILL);
    waitpid(c, &status, 0);
    printf("%d instructions stepped, %d inside the PLT (%d called from call_loop; entry offsets seen: mask %#x), "
           "%d not unwound\n", steps, states, in_loop, offs, bad);
    if (in_loop < 3) {   /* getpgrp three times: at least its first instruction each time */
        fprintf(stderr, "FAIL: the child ran getpgrp's PLT stub %d times, not 3\n", in_loop);
        return 1;
    }
    return bad ? 1 : 0;
}

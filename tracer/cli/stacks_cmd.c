/*
 * stacks_cmd.c — `tftrace stacks PID... [--json] [--window MS]`: where every
 * thread of some running processes is, grouped across ranks (docs/ATTACH.md).
 *
 * Permissions: root, or CAP_BPF + CAP_PERFMON (and CAP_SYS_PTRACE or the
 * same user to read the targets' memory and files). Without them the
 * command says so and exits 2 before touching anything; another user's
 * process is refused unless root. The targets are never stopped or written.
 */
#include "cli_internal.h"
#include "stacks_report.h"

#include <errno.h>
#include <getopt.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static void stacks_usage(FILE *f)
{
    fprintf(f, "usage: tftrace stacks [--json] [--window MS] PID...\n"
               "Prints the user-space stack of every thread of each PID (no restart, no ptrace stop),\n"
               "grouped across processes: \"ranks 0,2,3: MPI_Allreduce ← step ← main\". The rank is\n"
               "read from each process's OMPI_COMM_WORLD_RANK, PMI_RANK or RANK.\n\n"
               "  --json        one JSON document: processes, threads, frames, groups\n"
               "  --window MS   how long running threads are sampled (default 300)\n"
               "Needs root or CAP_BPF + CAP_PERFMON; see docs/ATTACH.md.\n");
}

static int has_cap(int cap)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) < 0)
        return 0;
    return (d[cap / 32].effective >> (cap % 32)) & 1;
}

/* 0 when this process may load BPF programs and open perf events, else a
 * message on stderr and 2. cmd names the command in the message. */
int bpf_privileged(void)
{
    return geteuid() == 0 || (has_cap(CAP_BPF) && has_cap(CAP_PERFMON)) || has_cap(CAP_SYS_ADMIN);
}

int bpf_privilege_check(const char *cmd)
{
    if (bpf_privileged())
        return 0;
    fprintf(stderr,
            "tftrace %s: needs root or the capabilities CAP_BPF and CAP_PERFMON (BPF programs and perf\n"
            "events); this process has neither, so nothing was attached and the target processes are\n"
            "untouched. Run it with sudo, or grant them: setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep tftrace.\n"
            "What works without them: recording a run under `tftrace -- CMD` (LD_PRELOAD; --timeout\n"
            "ends a hang), tfdump and tfdiff on its trace.\n", cmd);
    return 2;
}

/* 0 when pid exists and the caller may look at it, else a message and 2. */
int bpf_target_check(const char *cmd, pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (stat(path, &st) < 0) {
        fprintf(stderr, "tftrace %s: no process %d (%s)\n", cmd, (int)pid, strerror(errno));
        return 2;
    }
    if (geteuid() != 0 && st.st_uid != getuid()) {
        fprintf(stderr, "tftrace %s: process %d belongs to user %u, not to you (%u); only root may look at"
                        " another user's process\n", cmd, (int)pid, (unsigned)st.st_uid, (unsigned)getuid());
        return 2;
    }
    return 0;
}

static int parse_pid(const char *s, pid_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v <= 0 || v > 0x3fffffff)
        return -1;
    *out = (pid_t)v;
    return 0;
}

int stacks_main(int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'j'}, {"window", required_argument, 0, 'w'},
                                        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int json = 0, c;
    long window = 300;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'j': json = 1; break;
        case 'w':
            window = strtol(optarg, &end, 10);
            if (*end || end == optarg || window < 1 || window > 60000)
                return fprintf(stderr, "tftrace stacks: --window needs milliseconds 1..60000, got '%s'\n", optarg), 2;
            break;
        case 'h': stacks_usage(stdout); return 0;
        default: stacks_usage(stderr); return 2;
        }
    }
    if (optind >= argc)
        return fprintf(stderr, "tftrace stacks: no PID given\n"), stacks_usage(stderr), 2;
    if (!tft_stacks_supported())
        return fprintf(stderr, "tftrace stacks: this tftrace was built without BPF support (libbpf, libdw, clang,"
                               " bpftool and kernel BTF are needed at build time; docs/ATTACH.md)\n"), 2;
    size_t n = (size_t)(argc - optind);
    pid_t *pids = calloc(n, sizeof *pids);
    if (!pids)
        return fprintf(stderr, "tftrace stacks: out of memory\n"), 2;
    int rc = 2;
    for (size_t i = 0; i < n; i++)
        if (parse_pid(argv[optind + (int)i], &pids[i]) < 0) {
            fprintf(stderr, "tftrace stacks: '%s' is not a process id\n", argv[optind + (int)i]);
            goto out;
        }
    if (bpf_privilege_check("stacks"))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (bpf_target_check("stacks", pids[i]))
            goto out;
    stacks_report r;
    char err[256] = "";
    int e = stacks_collect(pids, n, (unsigned)window, &r, err, sizeof err);
    if (e == -EPERM || e == -EACCES) {
        fprintf(stderr, "tftrace stacks: BPF is not permitted here (%s): a lockdown, seccomp or container policy;"
                        " nothing was attached\n", err);
    } else if (e < 0) {
        fprintf(stderr, "tftrace stacks: %s\n", err);
    } else if (json) {
        char *s = stacks_json(&r);
        if (s)
            printf("%s\n", s);
        free(s);
        rc = s ? 0 : 2;
    } else {
        stacks_print_text(stdout, &r, 1);
        rc = 0;
    }
    stacks_report_free(&r);
out:
    free(pids);
    return rc;
}

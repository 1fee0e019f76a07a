/*
 * cli_internal.h — what the parts of the `tftrace` program share: the
 * launcher (tftrace.c: record a command), its subcommands (replay, gather,
 * stacks, attach), the launcher's helpers of the supervision loop, and the
 * small utilities of cli_util.c.
 */
#ifndef TFT_CLI_INTERNAL_H
#define TFT_CLI_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

/* `tftrace replay ...`: re-runs a golden and a bad recording up to where
 * they part, with capture armed, and compares (docs/REPLAY.md). argv[0] is
 * "replay"; tfdiff is looked up first in the directory holding tftrace.
 * Returns the exit status. */
int replay_main(int argc, char **argv);

/* `tftrace gather OUT DIR...` (gather.c): one trace from the directories
 * a job's nodes wrote (docs/MULTINODE.md). argv[0] is "gather". Returns
 * the exit status (0, or 2 with a message). */
int gather_main(int argc, char **argv);

/* A name PREFIX-DATE-TIME[-K]SUFFIX that does not exist yet, for output
 * directories (cli_util.c; tftrace-....trace, replay-..., attach-....trace). */
void cli_fresh_name(char *buf, size_t n, const char *prefix, const char *suffix);

/* The folder of this program: /proc/self/exe without its last part, into
 * buf (n bytes). 0, or -1 when it cannot be read (cli_util.c). */
int cli_exe_dir(char *buf, size_t n);

/* `tftrace stacks ...` (stacks_cmd.c): argv[0] is "stacks". */
int stacks_main(int argc, char **argv);

/* --timeout: the stacks of the recording processes, printed and stored
 * in their rank files before SIGTERM (timeout_stacks.c). Best effort. */
struct collector;
void timeout_stacks(struct collector *col, int quiet);

/* Every process of the job from the kernel (proc_events.c): start before
 * the command is spawned, poll from the supervision loop, finish after the
 * collector (prints what did not end with 0, writes processes-PID.json). */
struct collector_summary;
void proc_events_start(void);
void proc_events_poll(struct collector *col, int child);
void proc_events_finish(int dir_fd, const char *dir, unsigned mode, int quiet, const struct collector_summary *s);

/* BPF commands' checks (stacks_cmd.c): 0, or a message on stderr and 2. */
int bpf_privilege_check(const char *cmd);
int bpf_target_check(const char *cmd, pid_t pid);

/* `tftrace attach ...` (attach_cmd.c): argv[0] is "attach". */
int attach_main(int argc, char **argv);

#endif

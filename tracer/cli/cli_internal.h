/*
 * cli_internal.h — what the two parts of the `tftrace` program share: the
 * launcher (tftrace.c: record a command) and the replay driver (replay.c:
 * `tftrace replay`, which runs tftrace and tfdiff as child processes).
 */
#ifndef TFT_CLI_INTERNAL_H
#define TFT_CLI_INTERNAL_H

#include <stddef.h>

/* `tftrace replay ...`: re-runs a golden and a bad recording up to where
 * they part, with capture armed, and compares (docs/REPLAY.md). argv[0] is
 * "replay"; self_dir is the directory holding tftrace (tfdiff is looked up
 * there first). Returns the exit status. */
int replay_main(int argc, char **argv, const char *self_dir);

/* `tftrace gather OUT DIR...` (gather.c): one trace from the directories
 * a job's nodes wrote (docs/MULTINODE.md). argv[0] is "gather". Returns
 * the exit status (0, or 2 with a message). */
int gather_main(int argc, char **argv);

/* A name PREFIX-DATE-TIME[-K]SUFFIX that does not exist yet, for output
 * directories (tftrace.c; tftrace-....trace, replay-...). */
void fresh_name(char *buf, size_t n, const char *prefix, const char *suffix);

#endif

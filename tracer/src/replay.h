/*
 * replay.h — `tftrace replay` (replay.c): re-run a golden and a bad
 * recording up to where they part, with capture armed, and compare.
 */
#ifndef TFT_REPLAY_H
#define TFT_REPLAY_H

#include <stddef.h>

/* argv[0] is "replay"; self_dir is the directory holding tftrace (tfdiff is
 * looked up there first). Returns the exit status. */
int replay_main(int argc, char **argv, const char *self_dir);

/* A name PREFIX-DATE-TIME[-K]SUFFIX that does not exist yet, for output
 * directories (tftrace.c; tftrace-....trace, replay-...). */
void fresh_name(char *buf, size_t n, const char *prefix, const char *suffix);

#endif

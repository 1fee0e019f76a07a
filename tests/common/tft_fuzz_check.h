/*
 * tft_fuzz_check.h — FUZZ_CHECK(cond, fmt, ...) for the libFuzzer targets:
 * an invariant that must hold on every input; when it does not, one line
 * "TARGET: invariant failed at FILE:LINE: COND: message" on stderr and
 * abort(), which libFuzzer reports as a crash with the input that caused
 * it. Define FUZZ_TARGET (the target's name, a string) before including.
 * fuzz_scratch_dir: the directory a target writes its traces into.
 */
#ifndef TFT_FUZZ_CHECK_H
#define TFT_FUZZ_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FUZZ_TARGET
#error "define FUZZ_TARGET (the fuzz target's name) before including tft_fuzz_check.h"
#endif

#define FUZZ_CHECK(cond, ...)                                                                         \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, FUZZ_TARGET ": invariant failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                             \
            fputc('\n', stderr);                                                                      \
            abort();                                                                                  \
        }                                                                                             \
    } while (0)

/* Creates this process's scratch directory, on tmpfs when /dev/shm is
 * writable, into dir: BASE/FUZZ_TARGET.PID followed by suffix. */
static inline void fuzz_scratch_dir(char *dir, size_t len, const char *suffix)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, len, "%s/%s.%d%s", base, FUZZ_TARGET, (int)getpid(), suffix);
    FUZZ_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s", dir);
}

#endif

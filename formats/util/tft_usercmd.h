/*
 * tft_usercmd.h — whether a traced command switches user (su, runuser,
 * sudo, setpriv, ...). The recorder is not loaded into, or cannot write
 * from, the program such a command starts: the dynamic loader ignores
 * LD_PRELOAD in a setuid program, an environment reset drops it, and the
 * trace directory and shared memory are the launching user's (0700/0600).
 * A run that recorded nothing then says why instead of "ended before its
 * first record". Header-only: the launcher and tfdump use it alike.
 */
#ifndef TFT_USERCMD_H
#define TFT_USERCMD_H

#include <string.h>

/* The user-switching program of a command line, or NULL: the first word
 * after the first "--" (a manifest's command: "tftrace ... -- su ..."),
 * else argv[0]. argc 1: argv[0] only (the command itself, whose own
 * arguments may hold "--"). */
static inline const char *tft_user_switch(int argc, char *const *argv)
{
    static const char *const names[] = {"su", "runuser", "sudo", "setpriv", "doas", "sg", "newgrp",
                                        "setuidgid", "chpst", "gosu", "su-exec", "pkexec"};
    int k = 0;
    for (int i = 0; i + 1 < argc; i++)
        if (argv[i] && !strcmp(argv[i], "--")) {
            k = i + 1;
            break;
        }
    if (k >= argc || !argv[k])
        return NULL;
    const char *b = strrchr(argv[k], '/');
    b = b ? b + 1 : argv[k];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(b, names[i]))
            return names[i];
    return NULL;
}

#endif

/*
 * attach_pidfile.h — the attach test programs' handshake with
 * run_bpf_test.sh: DIR/pid.tmp is written at once, and renamed to DIR/pid
 * (what the script waits for) by attach_pid_ready once the program has
 * loaded what the probes need.
 */
#ifndef TFT_ATTACH_PIDFILE_H
#define TFT_ATTACH_PIDFILE_H

#include <stdio.h>
#include <unistd.h>

/* Writes this process's pid to DIR/pid.tmp; path and tmp (4096 and 4200
 * bytes) get the two names. 0, or 1 with the error printed. */
static inline int attach_pid_write(const char *dir, char *path, char *tmp)
{
    snprintf(path, 4096, "%s/pid", dir);
    snprintf(tmp, 4200, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return perror(tmp), 1;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    return 0;
}

#endif

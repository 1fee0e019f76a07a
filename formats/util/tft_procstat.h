/*
 * tft_procstat.h — /proc/PID/stat read the one careful way: the command
 * name (field 2) may hold spaces and ')', so the fields that follow start
 * after the last ')'. Plain syscalls on the caller's buffer, no allocation:
 * the recorder asks on the traced program's threads, where an allocation
 * would be recorded. Internal, header-only; every room may include it.
 */
#ifndef TFT_PROCSTAT_H
#define TFT_PROCSTAT_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* The fields of /proc/PID/stat from the state on: a pointer into buf (n
 * bytes) just past the ')' that ends the name, at the space before field 3
 * (" S PPID ..."); 512 bytes hold the state, 1024 the start time (field
 * 22). NULL when the file cannot be read or holds no name. */
static inline const char *tft_procstat_fields(pid_t pid, char *buf, size_t n)
{
    char path[48];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k <= 0)
        return NULL;
    buf[k] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp ? rp + 1 : NULL;
}

/* Whether the process is a zombie or dead (state Z or X) by its stat. */
static inline bool tft_procstat_zombie(const char *fields)
{
    return fields && fields[0] == ' ' && (fields[1] == 'Z' || fields[1] == 'X');
}

/* A process is gone when its pid no longer exists or is a zombie (killed,
 * its parent has not reaped it yet). An unreadable stat of a live pid
 * (another pid namespace's) is not gone. */
static inline bool tft_procstat_gone(pid_t pid)
{
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    char buf[512];
    return tft_procstat_zombie(tft_procstat_fields(pid, buf, sizeof(buf)));
}

#endif

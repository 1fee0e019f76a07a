/*
 * rss.c — the resident set of a recording process, sampled by the
 * collector (collector.c, rss_samples) into its rank file as PROCESS
 * records of event TFT_PROC_RSS (FORMAT.md §5.10): the memory curve of
 * every rank, read from outside the traced program, which pays nothing.
 *   TFT_RSS_MS=N   one sample every N ms per recording process (1000 when
 *                  unset; 0 turns the samples off).
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

uint64_t rss_every_ns(void)
{
    static int64_t every = -1;
    if (every < 0) {
        const char *s = getenv("TFT_RSS_MS");
        char *end = NULL;
        long long ms = s && *s ? strtoll(s, &end, 10) : 1000;
        if (s && *s && (*end || ms < 0))
            ms = 1000; /* not a number: the default, never an error in the traced job */
        every = (int64_t)ms * 1000000;
    }
    return (uint64_t)every;
}

int rss_read(pid_t pid, uint64_t *bytes)
{
    char path[48], buf[128];
    snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int e = n < 0 ? -errno : 0;
    close(fd);
    if (n <= 0)
        return e ? e : -ENODATA;
    buf[n] = '\0';
    uint64_t size, resident;
    if (sscanf(buf, "%" SCNu64 " %" SCNu64, &size, &resident) != 2)
        return -EPROTO;
    if (!resident)
        return -ESRCH; /* a zombie: its memory is gone, not zero */
    long page = sysconf(_SC_PAGESIZE);
    *bytes = resident * (uint64_t)(page > 0 ? page : 4096);
    return 0;
}

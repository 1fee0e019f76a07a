/*
 * cli_util.c — small helpers every part of the `tftrace` program uses:
 * fresh output names (the launcher's trace directory, replay's and attach's
 * output folders) and the folder of the running executable (where the
 * launcher finds libtftrace.so and the Python package, and replay finds
 * tfdiff).
 */
#include "cli_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_fresh_name(char *buf, size_t n, const char *prefix, const char *suffix)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, n, "%s-%s%s", prefix, stamp, suffix);
    for (int k = 2; access(buf, F_OK) == 0 && k < 1000; k++)
        snprintf(buf, n, "%s-%s-%d%s", prefix, stamp, k, suffix);
}

int cli_exe_dir(char *buf, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    return 0;
}

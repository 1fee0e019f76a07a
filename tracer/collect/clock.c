/*
 * clock.c — CLOCK_REALTIME as the recorder reports it (rank file headers,
 * the MPI clock estimate of interpose_mpi_init.c): the system's, plus
 * TFT_TEST_CLOCK_OFFSET_NS, an offset for tests only, which make one
 * group of processes look like a host whose clock is off
 * (tests/tracer/multinode, docs/MULTINODE.md).
 */
#include "collector.h"

#include <stdlib.h>
#include <time.h>

uint64_t clock_realtime_ns(void)
{
    static int64_t test_offset;
    static int read_env;
    if (!read_env) { /* a race reads the same value twice */
        const char *v = getenv("TFT_TEST_CLOCK_OFFSET_NS");
        char *end;
        long long x = v && *v ? strtoll(v, &end, 10) : 0;
        test_offset = v && *v && !*end ? (int64_t)x : 0;
        read_env = 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)((int64_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) + test_offset);
}

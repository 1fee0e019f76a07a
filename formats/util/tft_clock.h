/*
 * tft_clock.h — CLOCK_MONOTONIC in nanoseconds, the clock of record
 * timestamps (tft.h's tft_now_ns): the one reading that the rings, the
 * collector, the CLI and the CUDA plugin share. Internal, header-only;
 * every room may include it.
 */
#ifndef TFT_CLOCK_H
#define TFT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Not inlined: a record's time stamp (shm_stamp) reads the TSC where it
 * can, and this fallback stays out of its caller's frame. */
static __attribute__((noinline, unused)) uint64_t tft_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif

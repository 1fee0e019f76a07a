/*
 * clock.c — CLOCK_REALTIME as the recorder reports it (rank file headers,
 * the MPI clock estimate of interpose_mpi_init.c, CLOCK records): the
 * system's, plus three test-only overrides that make one group of
 * processes look like a host whose clock is off (tests/tracer/multinode,
 * docs/MULTINODE.md); they have no use otherwise:
 *   TFT_TEST_CLOCK_OFFSET_NS=N   adds N ns to every realtime reading;
 *   TFT_TEST_CLOCK_STEP=MS:N     from MS ms after the process's first
 *                                CLOCK record (its rank file's start) on,
 *                                adds N ns more (a step, as NTP makes when
 *                                it brings a clock into sync);
 *   TFT_TEST_NTP=US              the kernel's NTP state reads synchronised
 *                                with maxerror US µs (esterror US/2), and,
 *                                with TFT_TEST_CLOCK_STEP, unsynchronised
 *                                until the step.
 * CLOCK records (FORMAT.md §5.17): clock_pair_read.
 */
#include "collector.h"
#include "tft_clock.h"

#include <stdlib.h>
#include <sys/timex.h>
#include <time.h>

typedef struct test_clock {
    int64_t offset;      /* TFT_TEST_CLOCK_OFFSET_NS */
    uint64_t step_at;    /* CLOCK_MONOTONIC ns of the step, 0 none (yet); atomic */
    uint64_t step_ms;    /* TFT_TEST_CLOCK_STEP's MS, 0 none */
    int64_t step;        /* TFT_TEST_CLOCK_STEP's N */
    long ntp_us;         /* TFT_TEST_NTP, -1 none */
} test_clock;

static int64_t env_i64(const char *name, char **rest)
{
    const char *v = getenv(name);
    char *end = NULL;
    long long x = v && *v ? strtoll(v, &end, 10) : 0;
    if (rest)
        *rest = end;
    return v && *v && end && (!*end || rest) ? (int64_t)x : 0;
}

static test_clock *test_clock_get(void)
{
    static test_clock tc;
    static int read_env;
    if (!read_env) { /* a race reads the same values twice */
        tc.offset = env_i64("TFT_TEST_CLOCK_OFFSET_NS", NULL);
        char *rest = NULL;
        int64_t ms = env_i64("TFT_TEST_CLOCK_STEP", &rest);
        if (ms > 0 && rest && *rest == ':') {
            char *end;
            tc.step = (int64_t)strtoll(rest + 1, &end, 10);
            tc.step_ms = *end ? 0 : (uint64_t)ms;
        }
        const char *n = getenv("TFT_TEST_NTP");
        tc.ntp_us = n && *n ? strtol(n, NULL, 10) : -1;
        read_env = 1;
    }
    return &tc;
}

static int64_t test_shift(const test_clock *tc, uint64_t mono)
{
    uint64_t at = __atomic_load_n(&tc->step_at, __ATOMIC_RELAXED);
    return tc->offset + (at && mono >= at ? tc->step : 0);
}

uint64_t clock_realtime_ns(void)
{
    const test_clock *tc = test_clock_get();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t shift = test_shift(tc, tc->step_ms ? tft_clock_mono_ns() : 0);
    return (uint64_t)((int64_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) + shift);
}

/* The kernel's NTP state (adjtimex with no modes changes nothing and needs
 * no privilege): synchronised unless STA_UNSYNC or TIME_ERROR. */
static void ntp_read(tft_rec_clock *r, const test_clock *tc, uint64_t mono)
{
    if (tc->ntp_us >= 0) {
        uint64_t at = __atomic_load_n(&tc->step_at, __ATOMIC_RELAXED);
        bool before_step = tc->step_ms && (!at || mono < at);
        r->ntp = before_step ? TFT_NTP_UNSYNCED : TFT_NTP_SYNCED;
        r->maxerror_ns = before_step ? 16000000000u : (uint64_t)tc->ntp_us * 1000u;
        r->esterror_ns = r->maxerror_ns / 2;
        return;
    }
    struct timex tx = {0};
    int st = adjtimex(&tx);
    if (st < 0) {
        r->ntp = TFT_NTP_UNKNOWN;
        return;
    }
    r->ntp = (st == TIME_ERROR || (tx.status & STA_UNSYNC)) ? TFT_NTP_UNSYNCED : TFT_NTP_SYNCED;
    r->maxerror_ns = tx.maxerror > 0 ? (uint64_t)tx.maxerror * 1000u : 0;
    r->esterror_ns = tx.esterror > 0 ? (uint64_t)tx.esterror * 1000u : 0;
}

void clock_pair_read(tft_rec_clock *r)
{
    test_clock *tc = test_clock_get();
    if (tc->step_ms && !__atomic_load_n(&tc->step_at, __ATOMIC_RELAXED))
        __atomic_store_n(&tc->step_at, tft_clock_mono_ns() + tc->step_ms * 1000000u, __ATOMIC_RELAXED);
    *r = (tft_rec_clock){.h = {.kind = TFT_REC_CLOCK, .len = sizeof(*r), .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE}};
    struct timespec rt;
    uint64_t m0 = tft_clock_mono_ns();
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t m1 = tft_clock_mono_ns();
    r->h.ts = m0 + (m1 - m0) / 2;
    r->window_ns = m1 - m0 > UINT32_MAX ? UINT32_MAX : (uint32_t)(m1 - m0);
    r->realtime_ns = (uint64_t)((int64_t)((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec) +
                                test_shift(tc, r->h.ts));
    ntp_read(r, tc, r->h.ts);
}

uint64_t clock_pair_every_ns(void)
{
    static uint64_t every;
    if (!every) {
        int64_t ms = env_i64("TFT_CLOCK_PAIRS_MS", NULL);
        every = ms > 0 ? (uint64_t)ms * 1000000u : 1000000000u;
    }
    return every;
}

/*
 * tft_test_rng.h — the tests' deterministic random numbers: Marsaglia's
 * xorshift64 (shifts 13, 7, 17). Each test keeps its own state and seed
 * (never 0), so its stream is the same from run to run and independent of
 * the other tests; the helpers below are the transforms the tests use.
 */
#ifndef TFT_TEST_RNG_H
#define TFT_TEST_RNG_H

#include <stdint.h>

/* Advances *s one step and returns the new state. */
static inline uint64_t tft_test_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Uniform in [0, 1), 24 bits (exact as a float). */
static inline float tft_test_rng_unit(uint64_t *s) { return (float)(tft_test_rng(s) >> 40) / (float)(1u << 24); }

/* Uniform in [-1, 1), 24 bits (exact as a float). */
static inline float tft_test_rng_sym(uint64_t *s)
{
    return (float)((double)(tft_test_rng(s) >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

#endif

/*
 * tft_test.h — a minimal check harness for our C tests: CHECK() records a
 * failure with file:line and continues; tests end with TEST_DONE(), which
 * prints "N passed, N failed" and returns the exit status.
 */
#ifndef TFT_TEST_H
#define TFT_TEST_H

#include <stdio.h>

static int tft_test_pass_, tft_test_fail_;

/* Failures printed at most (a failing loop over 65536 patterns stays readable). */
#ifndef TFT_TEST_MAX_PRINT
#define TFT_TEST_MAX_PRINT 50
#endif

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            tft_test_pass_++;                                                          \
        } else {                                                                       \
            if (++tft_test_fail_ <= TFT_TEST_MAX_PRINT)                                \
                fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                              \
    } while (0)

#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        if (cond) {                                                                    \
            tft_test_pass_++;                                                          \
        } else {                                                                       \
            if (++tft_test_fail_ <= TFT_TEST_MAX_PRINT) {                              \
                fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
                fprintf(stderr, __VA_ARGS__);                                          \
                fputc('\n', stderr);                                                   \
            }                                                                          \
        }                                                                              \
    } while (0)

#define TEST_DONE()                                                                    \
    (printf("%d passed, %d failed\n", tft_test_pass_, tft_test_fail_),                 \
     tft_test_fail_ ? 1 : 0)

#endif

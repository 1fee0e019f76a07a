/*
 * tft_msg.h — the two ways our libraries hand a message to their caller
 * (they never print, docs/ARCHITECTURE.md): a printf-style message into the
 * caller's buffer next to an error code (tft_errf), or one line to the log
 * callback the caller set (tft_logf). Internal: for every component's
 * sources, never for a public header.
 */
#ifndef TFT_MSG_H
#define TFT_MSG_H

#include "tft_format.h" /* tft_log_fn */

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Writes a printf-style message into err (errlen bytes, truncated; nothing
 * when err is NULL or errlen 0) and returns rc, so that a failing function
 * can `return tft_errf(err, errlen, -EINVAL, "...", ...);`. */
static inline int tft_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int tft_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Formats one line (at most 511 bytes, no trailing newline) and hands it to
 * fn at level (enum tft_log_level); nothing when fn is NULL. */
static inline void tft_logf(tft_log_fn fn, void *ctx, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void tft_logf(tft_log_fn fn, void *ctx, int level, const char *fmt, ...)
{
    if (!fn)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fn(ctx, level, buf);
}

#endif

/*
 * rt_err.h — the error-message helper of the runtime's libraries (data.c,
 * ckpt.c): a printf-style message into the caller's buffer, and the code.
 */
#ifndef TFT_RT_ERR_H
#define TFT_RT_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Writes a printf-style message to err (when given) and returns rc. */
static inline int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

#endif

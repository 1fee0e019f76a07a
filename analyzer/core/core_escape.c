/*
 * core_escape.c — stdout through an escaping filter (core_escape.h):
 * fopencookie over the real stdout; a UTF-8 sequence cut between two
 * writes waits for the next one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fopencookie */
#endif
#include "core_escape.h"

#include "tft_escape.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct esc_cookie {
    FILE *dst;
    bool json;
    unsigned char pend[4]; /* the start of a UTF-8 sequence the last write cut */
    size_t npend;
} esc_cookie;

static FILE *real_stdout, *filtered;

static int put_escaped(esc_cookie *c, const unsigned char *p, int len, uint32_t cp)
{
    if (len <= 0)   /* not UTF-8: the byte */
        return fprintf(c->dst, c->json ? "\\u00%02x" : "\\x%02x", *p) < 0 ? -1 : 0;
    if (!tft_escape_cp(cp, true))
        return fwrite(p, 1, (size_t)len, c->dst) == (size_t)len ? 0 : -1;
    if (cp < 0x80 && !c->json)
        return fprintf(c->dst, "\\x%02x", (unsigned)cp) < 0 ? -1 : 0;
    return fprintf(c->dst, "\\u%04x", (unsigned)cp) < 0 ? -1 : 0;
}

/* Writes what of buf (n bytes) forms whole characters; an incomplete tail
 * of at most 3 bytes goes to pend (final: written as bytes). */
static int filter(esc_cookie *c, const unsigned char *buf, size_t n, bool final)
{
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && buf[run] >= 0x20 && buf[run] < 0x7f)
            run++;   /* plain ASCII goes out in one piece */
        if (run > i && fwrite(buf + i, 1, run - i, c->dst) != run - i)
            return -1;
        if ((i = run) >= n)
            break;
        uint32_t cp = 0;
        int len = tft_utf8_next(buf + i, n - i, &cp);
        if (len < 0 && !final) {
            memcpy(c->pend, buf + i, n - i);
            c->npend = n - i;
            return 0;
        }
        if (put_escaped(c, buf + i, len, cp) < 0)
            return -1;
        i += len > 0 ? (size_t)len : 1;
    }
    return 0;
}

static ssize_t esc_write(void *cookie, const char *buf, size_t size)
{
    esc_cookie *c = cookie;
    const unsigned char *p = (const unsigned char *)buf;
    size_t used = 0;
    if (c->npend) {   /* the characters that start in what the last write cut */
        unsigned char tmp[12];
        size_t k = c->npend, take = size < 8 ? size : 8, have = k + take, pos = 0;
        memcpy(tmp, c->pend, k);
        memcpy(tmp + k, p, take);
        c->npend = 0;
        while (pos < k) {
            uint32_t cp = 0;
            int len = tft_utf8_next(tmp + pos, have - pos, &cp);
            if (len < 0) {   /* all of this write is still part of it (take == size, < 4 bytes left) */
                memcpy(c->pend, tmp + pos, have - pos);
                c->npend = have - pos;
                return (ssize_t)size;
            }
            if (put_escaped(c, tmp + pos, len, cp) < 0)
                return -1;
            pos += len > 0 ? (size_t)len : 1;
        }
        used = pos - k;
    }
    if (filter(c, p + used, size - used, false) < 0 || fflush(c->dst) != 0)
        return -1;   /* errno as the real stdout left it (EPIPE: the reader went away) */
    return (ssize_t)size;
}

static int esc_close(void *cookie)
{
    esc_cookie *c = cookie;
    int e = c->npend ? filter(c, c->pend, c->npend, true) : 0;
    free(c);
    return e;
}

/* At exit: the filter's last bytes into the real stdout, which becomes
 * stdout again; the filter is closed (its cookie freed). */
static void flush_at_exit(void)
{
    FILE *f = filtered;
    filtered = NULL;
    if (f) {
        fflush(f);
        stdout = real_stdout;
        fclose(f);
    }
    if (real_stdout)
        fflush(real_stdout);
}

FILE *core_escape_open(FILE *dst, bool json)
{
    esc_cookie *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->dst = dst;
    c->json = json;
    cookie_io_functions_t io = {.write = esc_write, .close = esc_close};
    FILE *f = fopencookie(c, "w", io);
    if (!f) {
        free(c);
        return NULL;
    }
    /* a write of dst per buffer: lines on a terminal, 64 KiB blocks otherwise */
    setvbuf(f, NULL, isatty(fileno(dst)) ? _IOLBF : _IOFBF, 1 << 16);
    return f;
}

int core_escape_stdout(bool json)
{
    if (filtered)
        return 0;
    FILE *f = core_escape_open(stdout, json);
    if (!f)
        return -1;
    real_stdout = stdout;
    filtered = f;
    atexit(flush_at_exit);
    stdout = f;   /* glibc's stdout is a variable a program may set */
    return 0;
}

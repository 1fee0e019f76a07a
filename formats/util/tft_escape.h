/*
 * tft_escape.h — what of a string from a trace or another process may reach
 * a terminal as it is. Names, commands and paths are input: a crafted one
 * holding ESC sequences, carriage returns, C1 controls or bidirectional
 * overrides could rewrite what a terminal shows (a "MATCH" over a failed
 * verdict, a reversed file name). Escaped: the C0 controls (but tab and
 * newline where the text is multi-line), DEL, the C1 controls (U+0080 to
 * U+009F), the bidirectional controls (U+061C, U+200E, U+200F, U+202A to
 * U+202E, U+2066 to U+2069) and bytes that are not well-formed UTF-8. A
 * byte is written "\xHH", a code point "\uHHHH". Header-only: the tools
 * and the launcher use it alike.
 */
#ifndef TFT_ESCAPE_H
#define TFT_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The well-formed UTF-8 sequence at p (n bytes there): its length 1..4 and
 * code point, 0 when p does not start one, -1 when it may once more bytes
 * arrive (n too short). */
static inline int tft_utf8_next(const unsigned char *p, size_t n, uint32_t *cp)
{
    unsigned c = p[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, v = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, v = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return -1;
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (p[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

/* Whether code point cp is written escaped (newline and tab kept when
 * multiline). */
static inline bool tft_escape_cp(uint32_t cp, bool multiline)
{
    if (cp == '\n' || cp == '\t')
        return !multiline;
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
           cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* s (NUL-terminated) into out (outlen bytes, always terminated; cut at a
 * character) with everything above escaped, newlines too: one line of a
 * terminal. Returns out. */
static inline char *tft_escape_str(const char *s, char *out, size_t outlen)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = 0, left = 0;
    while (p[left])
        left++;
    if (!outlen)
        return out;
    while (*p) {
        uint32_t cp;
        int len = tft_utf8_next(p, left, &cp);
        char tmp[16];
        int w;
        if (len <= 0) {
            w = snprintf(tmp, sizeof(tmp), "\\x%02x", *p);
            len = 1;
        }
        else if (tft_escape_cp(cp, false)) {
            w = cp < 0x80 ? snprintf(tmp, sizeof(tmp), "\\x%02x", (unsigned)cp)
                          : snprintf(tmp, sizeof(tmp), "\\u%04x", (unsigned)cp);
        }
        else {
            for (w = 0; w < len; w++)
                tmp[w] = (char)p[w];
        }
        if (n + (size_t)w >= outlen)
            break;
        for (int i = 0; i < w; i++)
            out[n++] = tmp[i];
        p += len;
        left -= (size_t)len;
    }
    out[n] = 0;
    return out;
}

#endif

/*
 * py_lines.c — CPython's line tables, decoded from bytes read out of
 * another process (py_stacks.h): the 3.10 co_linetable (pairs of a byte
 * delta and a signed line delta, -128 for "no line") and the 3.11+
 * location table of PEP 626 (Objects/locations.md in CPython: entries of
 * a first byte 1CCCCLLL — code C, length L+1 code units — and 0 to 4
 * varints). Both are walked from the start up to the wanted offset; the
 * input is untrusted, every read is bounds-checked, a corrupt table gives
 * -1 (line unknown). Pure functions, no I/O.
 */
#include "py_stacks.h"

/* 6-bit little-endian chunks, bit 6 continues; *i advances. -1 past the end. */
static long read_varint(const unsigned char *t, size_t len, size_t *i)
{
    unsigned long v = 0;
    unsigned shift = 0;
    for (;;) {
        if (*i >= len || shift > 56)
            return -1;
        unsigned b = t[(*i)++];
        v |= (unsigned long)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            return (long)(v & 0x7fffffffffffffffUL);
    }
}

static int read_svarint(const unsigned char *t, size_t len, size_t *i, long *out)
{
    long v = read_varint(t, len, i);
    if (v < 0)
        return -1;
    *out = (v & 1) ? -(v >> 1) : (v >> 1);
    return 0;
}

int tft_py_line_311(const unsigned char *t, size_t len, int firstlineno, long lasti)
{
    long line = firstlineno, addr = 0;
    size_t i = 0;
    if (lasti < 0)
        return firstlineno;
    while (i < len) {
        unsigned b = t[i++];
        if (!(b & 0x80))
            return -1;                 /* not the first byte of an entry: corrupt */
        unsigned code = (b >> 3) & 15, units = (b & 7) + 1;
        long delta = 0;
        int has_line = 1;
        if (code == 15) {              /* no location */
            has_line = 0;
        } else if (code == 14) {       /* long form: line delta, end line, columns */
            if (read_svarint(t, len, &i, &delta) < 0 || read_varint(t, len, &i) < 0 ||
                read_varint(t, len, &i) < 0 || read_varint(t, len, &i) < 0)
                return -1;
        } else if (code == 13) {       /* no columns: line delta */
            if (read_svarint(t, len, &i, &delta) < 0)
                return -1;
        } else if (code >= 10) {       /* one line: delta code-10, two column bytes */
            delta = (long)code - 10;
            i += 2;
        } else {                       /* short form: same line, one column byte */
            i += 1;
        }
        if (i > len)
            return -1;
        line += delta;
        if (line < -1 || line > 0x7fffffff)
            return -1;
        if (lasti >= addr && lasti < addr + (long)units)
            return has_line ? (int)line : -1;
        addr += units;
    }
    return -1;
}

int tft_py_line_310(const unsigned char *t, size_t len, int firstlineno, long lasti)
{
    long line = firstlineno, end = 0, addr = lasti * 2;   /* the table counts bytes */
    if (lasti < 0)
        return firstlineno;
    for (size_t i = 0; i + 1 < len; i += 2) {
        long start = end;
        int ldelta = (signed char)t[i + 1];
        end = start + t[i];
        int cur = -1;
        if (ldelta != -128) {
            line += ldelta;
            cur = (int)line;
        }
        if (addr >= start && addr < end)
            return cur;
    }
    return -1;
}

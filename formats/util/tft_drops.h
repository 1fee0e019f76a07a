/*
 * tft_drops.h — what a rank lost, summed from its DROPPED records (FORMAT.md
 * §5.11) or the collector's counts, and the one sentence every tool says
 * about it: "40,221 records dropped (tensor 38,000, collective 2,221) in
 * steps 3..17". Internal, header-only: the launcher's summary, tfdump and
 * tfdiff share it so that they say the same thing.
 */
#ifndef TFT_DROPS_H
#define TFT_DROPS_H

#include "tft_format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct tft_drop_sum {
    uint64_t count;                   /* records lost (the DROPPED records' counts) */
    uint64_t by_kind[TFT_DROP_KINDS]; /* of those, per kind, where recorded (format 1.4) */
    uint64_t unknown;                 /* of count: in records without kinds (before 1.4) */
    int64_t first_step, last_step;    /* span of the lost records' steps, TFT_STEP_NONE none */
    bool steps_unknown;               /* some loss came without its steps (before 1.4) */
} tft_drop_sum;

static inline void tft_drop_sum_init(tft_drop_sum *s)
{
    memset(s, 0, sizeof(*s));
    s->first_step = s->last_step = TFT_STEP_NONE;
}

/* Widens s's step span by [first, last] (either may be TFT_STEP_NONE). */
static inline void tft_drop_sum_steps(tft_drop_sum *s, int64_t first, int64_t last)
{
    if (first == TFT_STEP_NONE)
        first = last;
    if (last == TFT_STEP_NONE)
        last = first;
    if (first == TFT_STEP_NONE)
        return;
    if (first > last) {
        int64_t t = first;
        first = last;
        last = t;
    }
    if (s->first_step == TFT_STEP_NONE || first < s->first_step)
        s->first_step = first;
    if (s->last_step == TFT_STEP_NONE || last > s->last_step)
        s->last_step = last;
}

/* Adds one DROPPED record of len bytes (a 48-byte record of format 1.0-1.3
 * has neither kinds nor steps). */
static inline void tft_drop_sum_add(tft_drop_sum *s, const tft_rec_dropped *d, size_t len)
{
    s->count += d->count;
    if (len < sizeof(*d)) {
        s->unknown += d->count;
        s->steps_unknown = true;
        return;
    }
    for (int k = 0; k < TFT_DROP_KINDS; k++)
        s->by_kind[k] += d->by_kind[k];
    tft_drop_sum_steps(s, d->first_step, d->last_step);
}

/* Appends to buf (n bytes, at *k) with truncation. */
static inline void tft_drop_put(char *buf, size_t n, size_t *k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void tft_drop_put(char *buf, size_t n, size_t *k, const char *fmt, ...)
{
    if (*k + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *k, n - *k, fmt, ap);
    va_end(ap);
    *k = w < 0 ? *k : (size_t)w < n - *k ? *k + (size_t)w : n - 1;
}

/* v with thousands separators ("40,221") into buf (at least 27 bytes). */
static inline const char *tft_drop_num(uint64_t v, char *buf)
{
    char t[24];
    int n = snprintf(t, sizeof(t), "%" PRIu64, v), j = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[j++] = ',';
        buf[j++] = t[i];
    }
    buf[j] = '\0';
    return buf;
}

/* The sentence: "N records dropped (KIND N, KIND N[, kind unknown N]) in
 * steps A..B" (or "in step A", "outside steps", "in steps A..B and outside
 * them"; "steps not recorded" for a trace before format 1.4). Kinds
 * largest first. Returns buf. */
static inline const char *tft_drop_describe(const tft_drop_sum *s, char *buf, size_t n)
{
    char a[32];
    size_t k = 0;
    if (n)
        buf[0] = '\0';
    tft_drop_put(buf, n, &k, "%s record%s dropped", tft_drop_num(s->count, a), s->count == 1 ? "" : "s");
    uint64_t left[TFT_DROP_KINDS], known = 0;
    memcpy(left, s->by_kind, sizeof(left));
    for (int k2 = 0; k2 < TFT_DROP_KINDS; k2++)
        known += left[k2];
    uint64_t unknown = s->count > known ? s->count - known : 0;
    const char *sep = " (";
    for (;;) {
        int best = -1;
        for (int j = 0; j < TFT_DROP_KINDS; j++)
            if (left[j] && (best < 0 || left[j] > left[best]))
                best = j;
        if (best < 0)
            break;
        tft_drop_put(buf, n, &k, "%s%s %s", sep, best ? tft_rec_kind_name((uint16_t)best) : "other",
                     tft_drop_num(left[best], a));
        left[best] = 0;
        sep = ", ";
    }
    if (unknown && known)
        tft_drop_put(buf, n, &k, "%skind unknown %s", sep, tft_drop_num(unknown, a));
    else if (unknown)
        tft_drop_put(buf, n, &k, " (kinds not recorded");
    if (known || unknown)
        tft_drop_put(buf, n, &k, ")");
    if (s->first_step != TFT_STEP_NONE && s->first_step == s->last_step)
        tft_drop_put(buf, n, &k, " in step %" PRId64, s->first_step);
    else if (s->first_step != TFT_STEP_NONE)
        tft_drop_put(buf, n, &k, " in steps %" PRId64 "..%" PRId64, s->first_step, s->last_step);
    else if (s->steps_unknown)
        tft_drop_put(buf, n, &k, ", steps not recorded (a trace before format 1.4)");
    else
        tft_drop_put(buf, n, &k, " outside steps");
    return buf;
}

#endif

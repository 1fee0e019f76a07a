/*
 * capture_spec.c — parser of capture specs (capture_spec.h). Runs once, at
 * start-up of the launcher or the recorder; never on the record path.
 */
#include "capture_spec.h"
#include "tft_msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A bad spec: the reason into err, -EINVAL. */
#define fail(err, errlen, ...) tft_errf((err), (errlen), -EINVAL, __VA_ARGS__)

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

static bool parse_i64(const char *s, int64_t *out)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* N, A:B, A: or :B (inclusive) into [lo, hi]. */
static bool parse_range(char *s, int64_t *lo, int64_t *hi)
{
    char *colon = strchr(s, ':');
    if (!colon) {
        if (!parse_i64(s, lo))
            return false;
        *hi = *lo;
        return true;
    }
    *colon = '\0';
    *lo = INT64_MIN + 1;
    *hi = INT64_MAX;
    if (!*s && !colon[1])
        return false;
    if (*s && !parse_i64(s, lo))
        return false;
    if (colon[1] && !parse_i64(colon + 1, hi))
        return false;
    return *lo <= *hi;
}

static int parse_term(char *term, capspec_alt *a, capspec *out, char *err, size_t errlen)
{
    char *eq = strchr(term, '=');
    if (!eq)
        return fail(err, errlen, "term '%s': expected KEY=VALUE (step, seq, rank, name, first-divergence-of)",
                    term);
    *eq = '\0';
    char *key = trim(term), *val = trim(eq + 1);
    if (!*val)
        return fail(err, errlen, "term '%s=': empty value", key);
    bool dup = false;
    if (!strcmp(key, "step")) {
        dup = a->has_step;
        a->has_step = true;
        if (!parse_range(val, &a->step_lo, &a->step_hi))
            return fail(err, errlen, "step=%s: expected N, A:B, A: or :B with A <= B", val);
    } else if (!strcmp(key, "seq")) {
        dup = a->has_seq;
        a->has_seq = true;
        if (!parse_range(val, &a->seq_lo, &a->seq_hi))
            return fail(err, errlen, "seq=%s: expected N, A:B, A: or :B with A <= B", val);
    } else if (!strcmp(key, "rank")) {
        int64_t r;
        dup = a->has_rank;
        a->has_rank = true;
        if (!parse_i64(val, &r) || r < 0 || r > INT32_MAX)
            return fail(err, errlen, "rank=%s: expected a rank number", val);
        a->rank = (int)r;
    } else if (!strcmp(key, "name")) {
        dup = a->name[0] != '\0';
        if (strlen(val) >= sizeof(a->name))
            return fail(err, errlen, "name=%.40s...: pattern longer than %d bytes", val, CAPSPEC_NAME_MAX - 1);
        snprintf(a->name, sizeof(a->name), "%s", val);
    } else if (!strcmp(key, "first-divergence-of")) {
        dup = a->first_divergence;
        a->first_divergence = true;
        if (strlen(val) >= sizeof(out->first_divergence_of))
            return fail(err, errlen, "first-divergence-of: path too long");
        snprintf(out->first_divergence_of, sizeof(out->first_divergence_of), "%s", val);
    } else {
        return fail(err, errlen, "term '%s=%s': unknown key '%s' (step, seq, rank, name, first-divergence-of)",
                    key, val, key);
    }
    if (dup)
        return fail(err, errlen, "'%s' given twice in one alternative (use ';' for alternatives)", key);
    return 0;
}

static int parse_alt(char *text, capspec *out, char *err, size_t errlen)
{
    if (out->n == CAPSPEC_MAX_ALTS)
        return fail(err, errlen, "more than %d alternatives", CAPSPEC_MAX_ALTS);
    capspec_alt *a = &out->alt[out->n];
    memset(a, 0, sizeof(*a));
    int terms = 0;
    for (char *save = NULL, *t = strtok_r(text, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *term = trim(t);
        if (!*term)
            continue;
        int e = parse_term(term, a, out, err, errlen);
        if (e)
            return e;
        terms++;
    }
    if (!terms)
        return fail(err, errlen, "empty alternative (write name=* to capture every op)");
    out->n++;
    return 0;
}

int capspec_parse(const char *text, capspec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!text || !*text)
        return fail(err, errlen, "empty capture spec");
    char *copy = strdup(text);
    if (!copy)
        return fail(err, errlen, "out of memory");
    int e = 0;
    /* ';' splits alternatives; strtok_r skips empty ones, which we reject */
    char *p = copy;
    for (;;) {
        char *semi = strchr(p, ';');
        if (semi)
            *semi = '\0';
        if (!*trim(p)) {
            e = fail(err, errlen, "empty alternative in '%s'", text);
            break;
        }
        if ((e = parse_alt(p, out, err, errlen)))
            break;
        if (!semi)
            break;
        p = semi + 1;
    }
    free(copy);
    return e;
}

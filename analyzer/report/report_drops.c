/*
 * report_drops.c — the words tfdiff's report uses for records a side lost:
 * in which steps, on which ranks, and whether a lost record explains a
 * desync finding away (the steps come from core_drops_scan).
 */
#include "report.h"
#include "tft_drops.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *report_drops_span(const compare_result *x, int side, char *buf, size_t n)
{
    const int64_t *st = x->drop_steps[side];
    if (st[0] != TFT_STEP_NONE && st[0] == st[1])
        snprintf(buf, n, " in step %" PRId64, st[0]);
    else if (st[0] != TFT_STEP_NONE)
        snprintf(buf, n, " in steps %" PRId64 "..%" PRId64, st[0], st[1]);
    else
        snprintf(buf, n, "%s", x->drop_steps_known[side] ? " outside steps" : "");
    return buf;
}

const char *report_drops_where(const compare_result *ranks, int nranks, char *buf, size_t n)
{
    size_t k = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < nranks; i++) {
        const compare_result *x = &ranks[i];
        uint64_t lost[2] = {x->golden_dropped, x->bad_dropped};
        for (int side = 0; side < 2; side++) {
            if (!lost[side])
                continue;
            const int64_t *st = x->drop_steps[side];
            const char *who = side ? "BAD" : "GOLDEN";
            const char *sep = k ? "; " : "";
            if (st[0] != TFT_STEP_NONE && st[0] != st[1])
                tft_drop_put(buf, n, &k, "%ssteps %" PRId64 "..%" PRId64 " of rank %d (%s) dropped records", sep,
                             st[0], st[1], x->rank, who);
            else if (st[0] != TFT_STEP_NONE)
                tft_drop_put(buf, n, &k, "%sstep %" PRId64 " of rank %d (%s) dropped records", sep, st[0], x->rank,
                             who);
            else
                tft_drop_put(buf, n, &k, "%srank %d (%s) dropped records %s", sep, x->rank, who,
                             x->drop_steps_known[side] ? "outside steps" : "in steps not recorded");
        }
    }
    return buf;
}

/* Whether side BAD of x lost records that may have carried step. */
static bool lost_in(const compare_result *x, int64_t step)
{
    const int64_t *st = x->drop_steps[1];
    if (!x->bad_dropped)
        return false;
    if (!x->drop_steps_known[1] || step == TFT_STEP_NONE)
        return true; /* unknown steps, or a call outside steps: no telling */
    return st[0] != TFT_STEP_NONE && step >= st[0] && step <= st[1];
}

int report_drops_explain(const compare_result *ranks, int nranks, const desync_finding *d)
{
    if (d->kind != DS_MISSING && d->kind != DS_P2P)
        return -1;
    for (int i = 0; i < nranks; i++) {
        bool blamed = d->kind == DS_P2P && d->peer == ranks[i].rank;
        for (int k = 0; k < d->nranks && k < 16; k++)
            blamed |= d->ranks[k] == ranks[i].rank;
        if (blamed && lost_in(&ranks[i], d->step))
            return ranks[i].rank;
    }
    return -1;
}

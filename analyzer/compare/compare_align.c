/*
 * compare_align.c — one rank of GOLDEN vs BAD (compare_rank, compare.h;
 * docs/TFDIFF.md, "What it reports" and "Alignment"): the driver that
 * walks both rank files step by step and fills the compare_result.
 *
 * Both rank files are streamed step by step: the TENSOR and OP records of
 * one step of each side are collected (compare_side.c), aligned
 * (compare_match.c), compared and judged (compare_judge.c), and discarded.
 * Memory is one step per side, id -> state maps for the current and the
 * previous step, and a capped map of the leaf tensors of the first step;
 * nothing grows with the number of steps.
 *
 * Steps are paired by number: steps only one side has before the other
 * starts (BAD resumed from a checkpoint) or after it ended (a crash, a
 * timeout) are outside the common range and not compared; a step missing
 * in the middle is a structural difference. Steps outside [step_lo,
 * step_hi] are read but not compared.
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"
#include "core_drops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool in_range(const compare_opts *o, int64_t step)
{
    return step >= o->step_lo && step <= o->step_hi;
}

/* "steps A..B", or "no steps (windows A..B)" for a trace without steps. */
static const char *range_text(int64_t a, int64_t b, char *buf, size_t n)
{
    if (CORE_IS_STEPLESS(a))
        snprintf(buf, n, "no steps (windows %lld..%lld)", (long long)(a - CORE_STEPLESS_BASE),
                 (long long)(b - CORE_STEPLESS_BASE));
    else
        snprintf(buf, n, "steps %lld..%lld", (long long)a, (long long)b);
    return buf;
}

static void finish(align_ctx *c)
{
    compare_result *out = c->out;
    out->golden_first_step = c->g.first_step;
    out->golden_last_step = c->g.last_step;
    out->bad_first_step = c->b.first_step;
    out->bad_last_step = c->b.last_step;
    out->common_first_step = out->common_last_step = TFT_STEP_NONE;
    if (c->g.first_step != TFT_STEP_NONE && c->b.first_step != TFT_STEP_NONE) {
        int64_t lo = c->g.first_step > c->b.first_step ? c->g.first_step : c->b.first_step;
        int64_t hi = c->g.last_step < c->b.last_step ? c->g.last_step : c->b.last_step;
        if (lo <= hi) {
            out->common_first_step = lo;
            out->common_last_step = hi;
        } else if (!out->structure[0]) {
            char gr[64], br[64];
            snprintf(out->structure, sizeof out->structure, "no steps in common: GOLDEN has %s, BAD %s",
                     range_text(c->g.first_step, c->g.last_step, gr, sizeof gr),
                     range_text(c->b.first_step, c->b.last_step, br, sizeof br));
        }
        /* with --steps A:B, a BAD that reaches B (a window kept by tfdump
         * --extract) has not ended early */
        int64_t g_end = c->g.last_step < c->o->step_hi ? c->g.last_step : c->o->step_hi;
        out->bad_ended_early = c->b.last_step < g_end;
    }
    out->threads = c->b.threaded ? (int)c->b.op_threads : 0;
    out->bad_exit_known = c->b.exit_known;
    out->bad_exit_code = c->b.exit_code;
    out->bad_exit_signal = c->b.exit_signal;
    out->golden_exit_known = c->g.exit_known;
    out->golden_exit_code = c->g.exit_code;
    out->golden_exit_signal = c->g.exit_signal;
    out->golden_raised = c->g.raised;
    out->bad_raised = c->b.raised;
    if (c->b.exit_known)
        out->exit_differs = c->g.exit_known ? c->b.exit_signal != c->g.exit_signal ||
                                                  (!c->b.exit_signal && c->b.exit_code != c->g.exit_code)
                                            : c->b.exit_signal || c->b.exit_code;
    out->lost_tail = out->bad_ended_early && out->bad_dropped && c->b.exit_known && c->g.exit_known &&
                     !out->exit_differs;
    out->unverified += out->lost_tail;
}

/* Loads the next step of side s; on a merged side, the other ranks' same
 * step folded in (a rank that lacks the step adds nothing to it). */
static int side_load(align_ctx *c, align_side *s)
{
    int rc = compare_side_load(s, c->o);
    bool merged = c->nextra && s == (c->merge_side ? &c->b : &c->g);
    for (int k = 0; merged && rc > 0 && k < c->nextra; k++) {
        align_side *e = &c->extra[k];
        int er = !e->has && !e->eof ? compare_side_load(e, c->o) : 1;
        while (er > 0 && e->has && e->step < s->step)
            er = compare_side_load(e, c->o);
        if (er < 0)
            return er;
        if (e->has && e->step == s->step && (er = compare_layout_fold(s, e, &c->merge_map)) < 0)
            return er;
    }
    return rc;
}

static int run(align_ctx *c)
{
    const compare_opts *o = c->o;
    int rc = side_load(c, &c->g);
    if (rc >= 0)
        rc = side_load(c, &c->b);
    while (rc >= 0 && (c->g.has || c->b.has)) {
        bool both = c->g.has && c->b.has && c->g.step == c->b.step;
        if (both) {
            if (in_range(o, c->b.step))
                rc = compare_judge_step(c);
            if (o->progress)
                o->progress(o->progress_ctx, c->out->rank, c->b.step);
            if (rc >= 0)
                rc = side_load(c, &c->g);
            if (rc >= 0)
                rc = side_load(c, &c->b);
        } else if (c->g.has && (!c->b.has || c->g.step < c->b.step)) {
            /* BAD started later (resumed) or ended: outside the common range */
            bool gap = c->b.has && c->b.groups > 1;
            if (in_range(o, c->g.step))
                rc = compare_judge_one_sided(c, false, gap);
            if (rc >= 0)
                rc = side_load(c, &c->g);
        } else {
            bool gap = c->g.has && c->g.groups > 1;
            if (in_range(o, c->b.step))
                rc = compare_judge_one_sided(c, true, gap);
            if (rc >= 0)
                rc = side_load(c, &c->b);
        }
    }
    /* both sides returned 0: both files were read to the end */
    return rc < 0 ? rc : 0;
}

/* Records the recorder lost, as the chunk headers count them (known before
 * reading: the index holds them). */
static uint64_t reader_dropped(const tft_reader *r)
{
    uint64_t n = 0;
    for (size_t i = 0; i < tft_reader_chunk_count(r); i++)
        n += tft_reader_chunk(r, i)->dropped;
    return n;
}

/* The steps each side lost records in: a pass over a side's DROPPED
 * records, only for a side whose chunks count drops. */
static int drops_steps(tft_reader *g, tft_reader *b, compare_result *out)
{
    tft_reader *side[2] = {g, b};
    uint64_t lost[2] = {out->golden_dropped, out->bad_dropped};
    for (int k = 0; k < 2; k++) {
        out->drop_steps[k][0] = out->drop_steps[k][1] = TFT_STEP_NONE;
        int e = lost[k] ? core_drops_scan(side[k], out->drop_steps[k], &out->drop_steps_known[k]) : 0;
        if (e < 0)
            return e;
    }
    return 0;
}

int compare_rank(tft_reader *g, tft_reader *b, const compare_opts *o, compare_result *out)
{
    return compare_rank_layout(g, b, NULL, 0, 1, o, out);
}

int compare_rank_layout(tft_reader *g, tft_reader *b, tft_reader **extra, int nextra, int merged_side,
                        const compare_opts *o, compare_result *out)
{
    static const compare_opts defaults = COMPARE_OPTS_DEFAULT;
    if (!g || !b || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    const tft_file_info *bi = tft_reader_info(b);
    out->rank = bi ? bi->rank : 0;
    out->golden_first_step = out->golden_last_step = TFT_STEP_NONE;
    out->bad_first_step = out->bad_last_step = TFT_STEP_NONE;
    out->common_first_step = out->common_last_step = TFT_STEP_NONE;
    align_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->o = o ? o : &defaults;
    c->out = out;
    out->golden_dropped = reader_dropped(g);
    out->bad_dropped = reader_dropped(b);
    int de = drops_steps(g, b, out);
    if (de < 0) {
        free(c);
        return de;
    }
    compare_side_init(&c->g, g);
    compare_side_init(&c->b, b);
    c->g.tap = c->b.tap = c->o->tap;
    c->g.tap_ctx = c->b.tap_ctx = c->o->tap_ctx;
    c->b.tap_side = 1;
    c->script.lossy = out->golden_dropped || out->bad_dropped;
    compare_ro_init(&c->ro, c->o, &out->roundoff);
    int rc = 0;
    if (nextra > 0) {
        c->extra = calloc((size_t)nextra, sizeof *c->extra);
        rc = c->extra ? 0 : -ENOMEM;
        for (int k = 0; c->extra && k < nextra; k++)
            compare_side_init(&c->extra[k], extra[k]);
        c->nextra = c->extra ? nextra : 0;
        c->merge_side = merged_side;
        tft_u64map_init(&c->merge_map, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .hashed = true});
    }
    if (rc == 0)
        rc = run(c);
    compare_judge_finish(c);
    finish(c);
    compare_ro_free(&c->ro);
    for (int k = 0; k < c->nextra; k++)
        compare_side_free(&c->extra[k]);
    free(c->extra);
    tft_u64map_free(&c->merge_map);
    out->golden_records = c->g.records;
    out->bad_records = c->b.records;
    compare_side_free(&c->g);
    compare_side_free(&c->b);
    compare_match_free(&c->script);
    free(c);
    return rc;
}

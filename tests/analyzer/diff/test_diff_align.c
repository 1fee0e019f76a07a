/*
 * test_diff_align.c — compare_rank (analyzer/compare/compare_align.c) on small GOLDEN and
 * BAD rank files written by hand with the public writer API.
 *
 * Every trace runs one toy program per step (values are functions of their
 * inputs, so a change propagates downstream as it would in a real run):
 *
 *   step 0 only: wte   = 0.5                      leaf (a parameter at init)
 *   every step:  tokens = step + 1                leaf
 *                A     = 10 + step                leaf
 *                B     = 2 * A                    in: A
 *                C     = B + tokens + wte         in: B, tokens, wte (id of step 0)
 *                loss  = C / 100                  in: C
 *
 * A spec changes one tensor (value factor, shape, NaN), inserts an extra
 * tensor, starts late (resume), stops early (with an exit record), etc.
 */
#include "core.h"
#include "compare.h"
#include "tft_format.h"
#include "tft_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

enum mod_kind { MOD_NONE = 0, MOD_FACTOR, MOD_SHAPE, MOD_NAN };

typedef struct spec {
    int64_t first_step, last_step; /* last_step 0: 5 */
    const char *mod_name;      /* the tensor changed at mod_step */
    int64_t mod_step;
    int mod_kind;
    double factor;             /* MOD_FACTOR: value *= factor */
    const char *mod2_name;     /* a second change (same kind) */
    int64_t mod2_step;
    const char *extra_after;   /* insert "<name>.extra" after this tensor ... */
    int64_t extra_step;        /* ... at this step */
    const char *stop_after;    /* last step ends after this tensor (a crash) */
    bool exit_rec;
    int exit_code;
    bool wide;                 /* every tensor of shape [8]: another model */
    bool coll;                 /* an MPI_Allreduce tensor after A */
    double coll_value;
    bool odd;                  /* a tensor with no name string, ndim 8, dtype 200 */
    const char *lose_name;     /* this tensor of lose_step is lost: not written, counted as dropped */
    int64_t lose_step;
    bool lose_silent;          /* ... and not counted: a tensor the program did not record */
} spec;

typedef struct tw {
    tft_writer *w;
    uint64_t next_id;
    int64_t seq;
    const spec *sp;
    int64_t last;
    bool stopped;
} tw;

static uint64_t fingerprint_of(double v, int64_t numel)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (bits ^ 0x9e3779b97f4a7c15ull) * 31u + (uint64_t)numel;
}

/* Stats of a tensor of numel copies of v (v NaN: all NaN). */
static tft_stats stats_of(double v, int64_t numel)
{
    tft_stats s = {0};
    s.numel = (uint64_t)numel;
    s.fingerprint = fingerprint_of(v, numel);
    if (isnan(v)) {
        s.nan = (uint64_t)numel;
        return s;
    }
    s.min = s.max = s.mean = v;
    s.std = 0;
    s.l1 = fabs(v) * (double)numel;
    s.l2 = fabs(v) * sqrt((double)numel);
    s.absmax = fabs(v);
    s.zero = v == 0 ? (uint64_t)numel : 0;
    return s;
}

static void w_op(tw *t, int64_t step, const char *name, int kind, int n_in, const uint64_t *in)
{
    _Alignas(8) unsigned char buf[512];
    memset(buf, 0, sizeof buf);
    tft_rec_op *op = (tft_rec_op *)buf;
    op->h.kind = TFT_REC_OP;
    op->h.len = (uint32_t)(sizeof *op + 8u * (size_t)n_in);
    op->h.ts = (uint64_t)t->seq * 1000u;
    op->h.step = step;
    op->h.seq = t->seq;
    op->name = tft_writer_string(t->w, name, strlen(name));
    op->op_kind = (uint16_t)kind;
    op->n_in = (uint8_t)n_in;
    for (int i = 0; i < n_in; i++)
        op->ids[i] = in[i];
    CHECK(tft_writer_append(t->w, &op->h) == 0);
}

/* Writes op + tensor `name` with value v (after the spec's changes) and
 * returns the tensor id; *vout gets the recorded value. */
static uint64_t w_tensor(tw *t, int64_t step, const char *name, double v, int n_in,
                         const uint64_t *in, double *vout)
{
    const spec *sp = t->sp;
    if (t->stopped) {
        if (vout)
            *vout = v; /* nothing recorded; the caller's arithmetic goes on */
        return 0;
    }
    int64_t numel = sp->wide ? 8 : 4;
    int mod = MOD_NONE;
    if ((sp->mod_name && step == sp->mod_step && strcmp(name, sp->mod_name) == 0) ||
        (sp->mod2_name && step == sp->mod2_step && strcmp(name, sp->mod2_name) == 0))
        mod = sp->mod_kind;
    if (mod == MOD_FACTOR)
        v *= sp->factor;
    if (mod == MOD_NAN)
        v = NAN;
    if (mod == MOD_SHAPE)
        numel = 5;
    bool coll = strncmp(name, "MPI_", 4) == 0;
    if (sp->lose_name && step == sp->lose_step && strcmp(name, sp->lose_name) == 0) {
        if (!sp->lose_silent)
            tft_writer_add_dropped(t->w, 2); /* its op and tensor records */
        if (vout)
            *vout = v;
        return t->next_id++;
    }
    w_op(t, step, name, coll ? TFT_OP_COLLECTIVE : TFT_OP_RUNTIME, n_in, in);
    tft_rec_tensor rt;
    memset(&rt, 0, sizeof rt);
    rt.h.kind = TFT_REC_TENSOR;
    rt.h.len = sizeof rt;
    rt.h.ts = (uint64_t)t->seq * 1000u + 1;
    rt.h.step = step;
    rt.h.seq = t->seq;
    rt.id = t->next_id++;
    rt.name = tft_writer_string(t->w, name, strlen(name));
    rt.dtype = TFT_F32;
    rt.device = -1;
    rt.mode = TFT_STATS_FULL;
    rt.ndim = 1;
    rt.shape[0] = numel;
    rt.stats = stats_of(v, numel);
    CHECK(tft_writer_append(t->w, &rt.h) == 0);
    t->seq++;
    if (vout)
        *vout = v;
    if (sp->extra_after && step == sp->extra_step && strcmp(name, sp->extra_after) == 0) {
        char extra[64];
        snprintf(extra, sizeof extra, "%s.extra", name);
        w_tensor(t, step, extra, 7.0, 0, NULL, NULL);
    }
    if (sp->stop_after && step == t->last && strcmp(name, sp->stop_after) == 0)
        t->stopped = true;
    return rt.id;
}

static void w_step(tw *t, int64_t step, int phase)
{
    tft_rec_step r;
    memset(&r, 0, sizeof r);
    r.h.kind = TFT_REC_STEP;
    r.h.len = sizeof r;
    r.h.step = step;
    r.h.seq = TFT_SEQ_NONE;
    r.phase = (uint32_t)phase;
    CHECK(tft_writer_append(t->w, &r.h) == 0);
}

static void w_odd(tw *t, int64_t step)
{
    tft_rec_tensor rt;
    memset(&rt, 0, sizeof rt);
    rt.h.kind = TFT_REC_TENSOR;
    rt.h.len = sizeof rt;
    rt.h.step = step;
    rt.h.seq = 99999; /* no op record with this seq */
    rt.id = t->next_id++;
    rt.name = 0x1234567890abcdefull; /* never defined */
    rt.dtype = 200;
    rt.mode = 7;
    rt.ndim = TFT_MAX_NDIM;
    for (int i = 0; i < TFT_MAX_NDIM; i++)
        rt.shape[i] = INT64_MAX - i;
    CHECK(tft_writer_append(t->w, &rt.h) == 0);
}

/* Writes the toy program under spec sp to dir/name, returns the path. */
static const char *write_trace(const char *name, const spec *sp)
{
    static char paths[8][512];
    static int k;
    char *path = paths[k++ % 8];
    snprintf(path, 512, "%s/%s.tft", dir, name);
    tft_file_info fi = {0};
    fi.rank = 0;
    fi.world_size = 1;
    tft_writer_opts wo = TFT_WRITER_OPTS(.chunk_bytes = 4096, .sync = 0);
    tw t = {.w = tft_writer_open(path, &fi, &wo), .next_id = 1, .sp = sp,
            .last = sp->last_step ? sp->last_step : 5};
    CHECK(t.w != NULL);
    if (!t.w)
        return path;
    uint64_t wte = 0;
    double vwte = 0.5;
    for (int64_t s = sp->first_step; s <= t.last && !t.stopped; s++) {
        w_step(&t, s, TFT_STEP_BEGIN);
        if (s == sp->first_step)
            wte = w_tensor(&t, s, "wte", 0.5, 0, NULL, &vwte);
        double vt, va, vb, vc;
        uint64_t tok = w_tensor(&t, s, "tokens", (double)s + 1, 0, NULL, &vt);
        uint64_t a = w_tensor(&t, s, "A", 10.0 + (double)s, 0, NULL, &va);
        if (sp->coll)
            w_tensor(&t, s, "MPI_Allreduce", sp->coll_value, 0, NULL, NULL);
        if (sp->odd)
            w_odd(&t, s);
        uint64_t b = w_tensor(&t, s, "B", 2 * va, 1, (uint64_t[]){a}, &vb);
        uint64_t c = w_tensor(&t, s, "C", vb + vt + vwte, 3, (uint64_t[]){b, tok, wte}, &vc);
        w_tensor(&t, s, "loss", vc / 100, 1, (uint64_t[]){c}, NULL);
        if (!t.stopped)
            w_step(&t, s, TFT_STEP_END);
    }
    if (sp->exit_rec) {
        tft_rec_process p;
        memset(&p, 0, sizeof p);
        p.h.kind = TFT_REC_PROCESS;
        p.h.len = sizeof p;
        p.h.step = TFT_STEP_NONE;
        p.h.seq = TFT_SEQ_NONE;
        p.event = TFT_PROC_EXIT;
        p.pid = 42;
        p.exit_code = sp->exit_code;
        CHECK(tft_writer_append(t.w, &p.h) == 0);
    }
    CHECK(tft_writer_close(t.w) == 0);
    return path;
}

/* Runs compare_rank on two specs; returns its rc. */
static int run_diff(const char *label, const spec *g, const spec *b, const compare_opts *o,
                    compare_result *out)
{
    char gn[96], bn[96];
    snprintf(gn, sizeof gn, "%s-golden", label);
    snprintf(bn, sizeof bn, "%s-bad", label);
    const char *gp = write_trace(gn, g), *bp = write_trace(bn, b);
    tft_reader *gr = tft_reader_open(gp, NULL), *br = tft_reader_open(bp, NULL);
    CHECK(gr && br);
    int rc = -1;
    if (gr && br)
        rc = compare_rank(gr, br, o, out);
    tft_reader_close(gr);
    tft_reader_close(br);
    CHECKF(rc == 0, "%s: compare_rank rc %d", label, rc);
    return rc;
}

#define STD_SPEC(...) ((spec){__VA_ARGS__}) /* last_step 0 means 5 */
#define TENSORS_PER_STEP 5 /* tokens A B C loss (+ wte at the first step) */

static void test_identical(void)
{
    spec g = STD_SPEC(), b = STD_SPEC();
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("identical", &g, &b, &o, &r);
    CHECK(!r.first.found);
    CHECK(!r.origin.found);
    CHECK(!r.nonfinite.found);
    CHECK(r.compared == 6 * TENSORS_PER_STEP + 1);
    CHECK(r.identical == r.compared);
    CHECK(r.within_tolerance == 0);
    CHECK(r.inserted == 0 && r.deleted == 0 && r.structure[0] == 0);
    CHECK(r.golden_first_step == 0 && r.golden_last_step == 5);
    CHECK(r.common_first_step == 0 && r.common_last_step == 5);
    CHECK(!r.bad_ended_early && !r.bad_exit_known);
    CHECK(strcmp(compare_kind_name(DK_VALUE), "value") == 0);
    CHECK(strcmp(compare_kind_name(DK_NONFINITE), "nonfinite") == 0);
    CHECK(strcmp(compare_kind_name(99), "?") == 0);
}

/* B changes at step 2, its input A does not: first = origin = B. */
static void test_value_at_b(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.mod_name = "B", .mod_step = 2, .mod_kind = MOD_FACTOR, .factor = 1.5);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("value-b", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 2 && strcmp(r.first.tensor, "B") == 0);
    CHECK(r.first.kind == DK_VALUE);
    CHECKF(strcmp(r.first.stat, "mean") == 0 || strcmp(r.first.stat, "min") == 0 ||
               strcmp(r.first.stat, "l1") == 0,
           "stat %s", r.first.stat);
    CHECK(strcmp(r.first.op, "B") == 0);
    CHECK(r.first.golden.present && r.first.bad.present);
    CHECK(r.first.golden.stats.mean == 24 && r.first.bad.stats.mean == 36);
    CHECK(r.origin.found && r.origin.step == 2 && strcmp(r.origin.tensor, "B") == 0);
    /* context: step 1 C, loss; step 2 tokens, A (oldest first) */
    CHECK(r.n_context == 4);
    CHECK(strcmp(r.context_b[0].name, "C") == 0 && r.context_b[0].step == 1);
    CHECK(strcmp(r.context_b[3].name, "A") == 0 && r.context_b[3].step == 2);
    CHECK(strcmp(r.context_g[3].name, "A") == 0);
    CHECK(!r.nonfinite.found);
}

/* A changes at step 2 (a leaf), B = 2A and later inherit: first = origin = A. */
static void test_value_at_a(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.mod_name = "A", .mod_step = 2, .mod_kind = MOD_FACTOR, .factor = 3);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("value-a", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 2 && strcmp(r.first.tensor, "A") == 0);
    CHECK(r.origin.found && r.origin.step == 2 && strcmp(r.origin.tensor, "A") == 0);
    /* A, B, C, loss of step 2 diverge: 4 of 31 are not identical */
    CHECK(r.identical == r.compared - 4);
}

/* Asked about B only, the first divergence is B but it inherits from A:
 * origin = A (outside the glob). */
static void test_inherited(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.mod_name = "A", .mod_step = 2, .mod_kind = MOD_FACTOR, .factor = 3);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    o.name_glob = "B";
    compare_result r;
    run_diff("inherited", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 2 && strcmp(r.first.tensor, "B") == 0);
    CHECK(r.origin.found && r.origin.step == 2 && strcmp(r.origin.tensor, "A") == 0);
    CHECK(r.compared == 6);
}

/* Last-bit differences: within tolerance by default, a divergence at the
 * first changed tensor with rtol = atol = 0. */
static void test_tolerance(void)
{
    spec g = STD_SPEC(),
         b = STD_SPEC(.mod_name = "A", .mod_step = 1, .mod_kind = MOD_FACTOR, .factor = 1 + 1e-7);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("tol", &g, &b, &o, &r);
    CHECK(!r.first.found && !r.origin.found);
    CHECKF(r.within_tolerance == 4, "within %llu", (unsigned long long)r.within_tolerance);
    CHECK(r.identical + r.within_tolerance == r.compared);

    o.rtol = o.atol = 0;
    run_diff("tol0", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 1 && strcmp(r.first.tensor, "A") == 0);
    CHECK(r.first.kind == DK_VALUE);
    CHECK(r.origin.found && strcmp(r.origin.tensor, "A") == 0);

    /* a large factor is outside even a loose tolerance; a small one inside */
    o.rtol = 0.1;
    o.atol = 0;
    b.factor = 1.05;
    run_diff("tol-loose", &g, &b, &o, &r);
    CHECK(!r.first.found && r.within_tolerance == 4);
    b.factor = 1.5;
    run_diff("tol-loose2", &g, &b, &o, &r);
    CHECK(r.first.found && strcmp(r.first.tensor, "A") == 0);
}

static void test_shape(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.mod_name = "B", .mod_step = 3, .mod_kind = MOD_SHAPE);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("shape", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 3 && strcmp(r.first.tensor, "B") == 0);
    CHECK(r.first.kind == DK_SHAPE);
    CHECK(r.first.golden.shape[0] == 4 && r.first.bad.shape[0] == 5);
    CHECK(r.structure[0] == 0);
}

static void test_nan(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.mod_name = "C", .mod_step = 1, .mod_kind = MOD_NAN);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("nan", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 1 && strcmp(r.first.tensor, "C") == 0);
    CHECK(r.first.kind == DK_NONFINITE);
    CHECK(r.nonfinite.found && r.nonfinite.step == 1 && strcmp(r.nonfinite.tensor, "C") == 0);
    CHECK(!r.nonfinite.in_golden);

    /* both have it: no divergence there, but nonfinite notes golden has it too */
    run_diff("nan-both", &b, &b, &o, &r);
    CHECK(!r.first.found);
    CHECK(r.nonfinite.found && strcmp(r.nonfinite.tensor, "C") == 0 && r.nonfinite.in_golden);
}

/* An extra tensor in BAD at step 1: one insertion, a message, and the
 * steps after it compared normally (no cascade). */
static void test_extra(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.extra_after = "A", .extra_step = 1);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("extra", &g, &b, &o, &r);
    CHECK(r.inserted == 1 && r.deleted == 0);
    CHECKF(strstr(r.structure, "step 1") && strstr(r.structure, "extra tensor A.extra after A"),
           "structure: %s", r.structure);
    CHECK(r.first.found && r.first.kind == DK_EXTRA && r.first.step == 1);
    CHECK(strcmp(r.first.tensor, "A.extra") == 0 && !r.first.golden.present && r.first.bad.present);
    CHECK(r.compared == 6 * TENSORS_PER_STEP + 1 && r.identical == r.compared);

    /* an earlier value divergence stays the first; the extra one and a later
     * change are found as they are */
    b.mod_name = "loss";
    b.mod_step = 0;
    b.mod_kind = MOD_FACTOR;
    b.factor = 2;
    run_diff("extra-late", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.kind == DK_VALUE && r.first.step == 0);
    CHECK(strcmp(r.first.tensor, "loss") == 0);
    CHECK(r.inserted == 1 && strstr(r.structure, "A.extra"));
    CHECK(r.identical == r.compared - 1);

    /* missing: GOLDEN has the extra one */
    spec g2 = STD_SPEC(.extra_after = "B", .extra_step = 2), b2 = STD_SPEC();
    run_diff("missing", &g2, &b2, &o, &r);
    CHECK(r.deleted == 1 && r.inserted == 0);
    CHECK(r.first.found && r.first.kind == DK_MISSING && r.first.step == 2);
    CHECK(strcmp(r.first.tensor, "B.extra") == 0 && r.first.golden.present && !r.first.bad.present);
    CHECKF(strstr(r.structure, "lacks tensor B.extra"), "structure: %s", r.structure);
    CHECK(r.identical == r.compared && r.compared == 6 * TENSORS_PER_STEP + 1);
}

/* BAD resumed at step 3: compared over 3..5 only, no divergence. */
static void test_resumed(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.first_step = 3);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("resumed", &g, &b, &o, &r);
    CHECK(r.golden_first_step == 0 && r.bad_first_step == 3);
    CHECK(r.common_first_step == 3 && r.common_last_step == 5);
    /* BAD's step 3 records wte (its first step) where golden has none */
    CHECK(r.first.found == (r.inserted > 0));
    CHECK(r.compared == 3 * TENSORS_PER_STEP);
    CHECK(!r.bad_ended_early);

    /* without the parameter record: nothing differs */
    compare_opts o2 = COMPARE_OPTS_DEFAULT;
    o2.name_glob = "[!w]*";
    run_diff("resumed2", &g, &b, &o2, &r);
    CHECK(!r.first.found && r.structure[0] == 0 && r.compared == 3 * TENSORS_PER_STEP);
}

/* BAD ended early: at a step boundary with an exit record, then inside a step. */
static void test_ended_early(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.last_step = 3, .exit_rec = true, .exit_code = 3);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("early", &g, &b, &o, &r);
    CHECK(r.bad_ended_early && r.bad_last_step == 3 && r.golden_last_step == 5);
    CHECK(r.common_first_step == 0 && r.common_last_step == 3);
    CHECK(r.bad_exit_known && r.bad_exit_code == 3 && r.bad_exit_signal == 0);
    CHECK(!r.first.found && r.structure[0] == 0);
    CHECK(r.compared == 4 * TENSORS_PER_STEP + 1);

    spec b2 = STD_SPEC(.last_step = 3, .stop_after = "A", .exit_rec = true, .exit_code = 1);
    run_diff("crash", &g, &b2, &o, &r);
    CHECK(r.bad_ended_early && r.bad_exit_known && r.bad_exit_code == 1);
    CHECK(r.first.found && r.first.kind == DK_MISSING && r.first.step == 3);
    CHECK(strcmp(r.first.tensor, "B") == 0);
    CHECK(r.deleted == 3);
    CHECKF(strstr(r.structure, "stops after A"), "structure: %s", r.structure);

    /* the same steps and tensors, but BAD ends otherwise than GOLDEN: a finding */
    spec g0 = STD_SPEC(.exit_rec = true, .exit_code = 0), b1 = STD_SPEC(.exit_rec = true, .exit_code = 1);
    run_diff("exit-code", &g0, &b1, &o, &r);
    CHECK(!r.first.found && !r.bad_ended_early && r.exit_differs);
    CHECK(r.golden_exit_known && r.golden_exit_code == 0 && r.bad_exit_code == 1);
    run_diff("exit-same", &g0, &g0, &o, &r);
    CHECK(!r.exit_differs && r.golden_exit_known && r.bad_exit_known);
    run_diff("exit-golden-unknown", &g, &b1, &o, &r); /* GOLDEN has no exit record: a non-zero BAD differs */
    CHECK(r.exit_differs && !r.golden_exit_known);
    run_diff("exit-zero-golden-unknown", &g, &g0, &o, &r);
    CHECK(!r.exit_differs);
}

/* BAD lost records (the recorder dropped them): a tensor missing where the
 * loss happened is not a divergence; a value difference elsewhere still is. */
static void test_dropped(void)
{
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    spec g = STD_SPEC(), b = STD_SPEC(.lose_name = "B", .lose_step = 3);
    run_diff("lost", &g, &b, &o, &r);
    CHECK(r.bad_dropped == 2 && r.golden_dropped == 0);
    CHECKF(!r.first.found, "lost: first %s at %lld (%s)", r.first.tensor, (long long)r.first.step,
           compare_kind_name(r.first.kind));
    CHECK(r.unverified == 1 && r.structure[0] == 0 && r.deleted == 0);
    CHECK(r.compared == 6 * TENSORS_PER_STEP + 1 - 1);
    /* not counted as dropped, the same gap is a missing tensor */
    spec b1 = STD_SPEC(.lose_name = "B", .lose_step = 3, .lose_silent = true);
    run_diff("missing", &g, &b1, &o, &r);
    CHECK(r.first.found && r.first.kind == DK_MISSING && r.first.step == 3 && r.bad_dropped == 0 && !r.unverified);
    /* a real change in what was recorded is still found */
    spec b2 = STD_SPEC(.lose_name = "B", .lose_step = 3, .mod_name = "A", .mod_step = 4, .mod_kind = MOD_FACTOR,
                       .factor = 2);
    run_diff("lost-and-changed", &g, &b2, &o, &r);
    CHECK(r.first.found && r.first.step == 4 && !strcmp(r.first.tensor, "A") && r.first.kind == DK_VALUE);
}

static void test_filters(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.mod_name = "A", .mod_step = 1, .mod_kind = MOD_FACTOR, .factor = 2,
                                      .mod2_name = "A", .mod2_step = 4);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("range-all", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 1);
    o.step_lo = 3;
    run_diff("range-3", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.step == 4 && strcmp(r.first.tensor, "A") == 0);
    CHECK(r.compared == 3 * TENSORS_PER_STEP);
    o.step_lo = INT64_MIN;
    o.step_hi = 0;
    run_diff("range-0", &g, &b, &o, &r);
    CHECK(!r.first.found && r.compared == TENSORS_PER_STEP + 1);

    compare_opts o2 = COMPARE_OPTS_DEFAULT;
    o2.name_glob = "lo*";
    run_diff("glob", &g, &b, &o2, &r);
    CHECK(r.first.found && r.first.step == 1 && strcmp(r.first.tensor, "loss") == 0);
    CHECK(r.compared == 6);
    CHECK(r.origin.found && strcmp(r.origin.tensor, "A") == 0);
    o2.name_glob = "tokens";
    run_diff("glob2", &g, &b, &o2, &r);
    CHECK(!r.first.found && r.compared == 6);
}

/* Collective results are skipped unless asked for. */
static void test_collectives(void)
{
    spec g = STD_SPEC(.coll = true, .coll_value = 1), b = STD_SPEC(.coll = true, .coll_value = 2);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("coll", &g, &b, &o, &r);
    CHECK(!r.first.found && r.compared == 6 * TENSORS_PER_STEP + 1);
    o.collectives = true;
    run_diff("coll2", &g, &b, &o, &r);
    CHECK(r.first.found && strcmp(r.first.tensor, "MPI_Allreduce") == 0 && r.first.step == 0);
}

/* Two runs of different models: one clear message. */
static void test_models(void)
{
    spec g = STD_SPEC(), b = STD_SPEC(.wide = true);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("models", &g, &b, &o, &r);
    CHECK(r.first.found && r.first.kind == DK_SHAPE && r.first.step == 0);
    CHECK(strcmp(r.first.tensor, "wte") == 0);
    CHECKF(strstr(r.structure, "different models"), "structure: %s", r.structure);
}

/* Odd records: no name string, unknown dtype and mode, 8 dims, no op. */
static void test_odd(void)
{
    spec g = STD_SPEC(.odd = true), b = STD_SPEC(.odd = true, .mod_name = "C", .mod_step = 2,
                                                 .mod_kind = MOD_FACTOR, .factor = 2);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("odd", &g, &b, &o, &r);
    CHECK(r.first.found && strcmp(r.first.tensor, "C") == 0 && r.first.step == 2);
    CHECK(r.compared == 6 * TENSORS_PER_STEP + 1 + 6);
    CHECK(r.n_context == 4 && strcmp(r.context_b[2].name, "#1234567890abcdef") == 0);
    CHECK(r.context_b[2].ndim == TFT_MAX_NDIM);

    /* against a trace without them: six insertions, not a cascade */
    spec g2 = STD_SPEC();
    run_diff("odd2", &g2, &b, &o, &r);
    CHECK(r.inserted == 6 && r.first.found && r.first.kind == DK_EXTRA && r.first.step == 0);
    CHECK(strstr(r.structure, "#1234567890abcdef") != NULL);
}

/* Empty and garbage-free edge cases: no steps at all on one side. */
static void test_no_common(void)
{
    spec g = STD_SPEC(.last_step = 2), b = STD_SPEC(.first_step = 4, .last_step = 5);
    compare_opts o = COMPARE_OPTS_DEFAULT;
    compare_result r;
    run_diff("nocommon", &g, &b, &o, &r);
    CHECK(r.common_first_step == TFT_STEP_NONE && !r.first.found);
    CHECKF(strstr(r.structure, "no steps in common"), "structure: %s", r.structure);
    CHECK(compare_rank(NULL, NULL, &o, &r) < 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_diff_align.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_identical();
    test_value_at_b();
    test_value_at_a();
    test_inherited();
    test_tolerance();
    test_shape();
    test_nan();
    test_extra();
    test_resumed();
    test_ended_early();
    test_dropped();
    test_filters();
    test_collectives();
    test_models();
    test_odd();
    test_no_common();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_DONE();
}

/*
 * dump_replay.c — `tfdump --replay-op SEQ TRACE`: re-executes one captured
 * op from its captured inputs and compares the result with its captured
 * output, to tell a code bug (different) from non-determinism (within
 * tolerance) or a hardware fault (different on a re-run of the same
 * inputs, on the same machine).
 *
 * What can be replayed (docs/CAPTURE.md):
 *  - cblas_sgemm / cblas_dgemm ops of the interposer: the OP record's
 *    attributes (layout, transposes, M, N, K, alpha, beta) and the captured
 *    A, B (and C's prior value when beta != 0), through the CBLAS tfdump is
 *    linked with (OpenBLAS);
 *  - tftrain's forward ops, told by their names, through the runtime's
 *    registry of replayable ops (runtime/replay_ops.h: emb, L*.ln1/ln2,
 *    lnf, L*.qkv, logits, L*.attn.scores/probs/out, L*.gelu, L*.res1/res2)
 *    and its CPU ops (kernels/ops/tft_ops.h).
 * Anything else is "cannot be replayed" (exit 2).
 *
 * Exit: 0 bit-identical or within tolerance, 1 different, 2 cannot replay.
 */
#include "core_capture.h"
#include "dump_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef TFT_HAVE_OPS
#include "replay_ops.h" /* the runtime's registry of replayable ops */
#include "tft_ops.h"
#endif

typedef struct replay {
    const dump_opts *o;
    int rank;
    tft_rec_op *op;          /* copy of the OP record of seq (malloc'd) */
    char op_name[256];
    core_capture_tensor *caps;
    size_t ncaps;
    const core_capture_tensor *in[16];/* captured inputs, by the op's input order (NULL: not captured) */
    const core_capture_tensor *out;   /* the captured output */
    const core_capture_tensor *prior; /* PRIOR capture (gemm C before), or NULL */
    void *got;               /* replayed output, out->bytes bytes */
    char note[256];          /* how the result was obtained, "" plain */
    char why[512];           /* cannot replay: the reason */
} replay;

/* ---- finding the op and its captures ---------------------------------------- */

static int find_op(dump_trace *d, replay *rp)
{
    for (int i = 0; i < d->n; i++) {
        if (tft_trace_rank_id(d->t, i) != rp->rank)
            continue;
        tft_reader *r = tft_trace_reader(d->t, i);
        if (!r)
            return -1;
        tft_reader_rewind(r);
        const tft_rec *rec;
        int e;
        while ((e = tft_reader_next(r, &rec)) > 0) {
            if (rec->kind != TFT_REC_OP || rec->seq != rp->o->replay_seq)
                continue;
            rp->op = malloc(rec->len);
            if (!rp->op)
                break;
            memcpy(rp->op, rec, rec->len);
            char b[18];
            const char *nm = core_rec_string(r, rp->op->name, b);
            snprintf(rp->op_name, sizeof(rp->op_name), "%s", nm ? nm : "?");
            break;
        }
        tft_trace_release(d->t, i);
        if (rp->op)
            return 0;
    }
    return -1;
}

static int pick_captures(replay *rp)
{
    int64_t seq = rp->o->replay_seq;
    int n_in = rp->op->n_in < 16 ? rp->op->n_in : 16;
    for (int k = 0; k < n_in; k++) {
        int i = core_capture_find_op(rp->caps, rp->ncaps, rp->rank, seq, rp->op->ids[k], TFT_CAPTURE_INPUT);
        rp->in[k] = i >= 0 ? &rp->caps[i] : NULL;
    }
    for (size_t i = 0; i < rp->ncaps; i++) {
        const core_capture_tensor *t = &rp->caps[i];
        if (t->rank != rp->rank || t->seq != seq)
            continue;
        if (t->role == TFT_CAPTURE_OUTPUT && !rp->out)
            rp->out = t;
        if (t->role == TFT_CAPTURE_PRIOR && !rp->prior)
            rp->prior = t;
    }
    if (!rp->out) {
        snprintf(rp->why, sizeof(rp->why), "its output was not captured");
        return -1;
    }
    if (!rp->out->complete) {
        snprintf(rp->why, sizeof(rp->why), "its output %s is incomplete in the trace", rp->out->name);
        return -1;
    }
    rp->got = calloc(1, (size_t)rp->out->bytes + 1);
    if (!rp->got) {
        snprintf(rp->why, sizeof(rp->why), "out of memory");
        return -1;
    }
    return 0;
}

/* Input k, complete, of dtype and element count; else sets why. */
static const void *input(replay *rp, int k, int dtype, uint64_t numel)
{
    const core_capture_tensor *t = k < rp->op->n_in && k < 16 ? rp->in[k] : NULL;
    if (k >= rp->op->n_in) {
        snprintf(rp->why, sizeof(rp->why), "the op lists %d input%s, its replay needs input %d too (tftrain "
                 "does not list a bias among the inputs of every op)", rp->op->n_in, rp->op->n_in == 1 ? "" : "s",
                 k);
        return NULL;
    }
    if (!t) {
        snprintf(rp->why, sizeof(rp->why), "input %d was not captured (it was recorded too long before the op, "
                 "or its memory was gone)", k);
        return NULL;
    }
    if (!t->complete || !t->data) {
        snprintf(rp->why, sizeof(rp->why), "input %d (%s) is incomplete in the trace", k, t->name);
        return NULL;
    }
    size_t esz = tft_dtype_size(dtype);
    if (t->dtype != dtype || !esz || numel > UINT64_MAX / esz || t->bytes != numel * esz) {
        snprintf(rp->why, sizeof(rp->why), "input %d (%s) is %s with %" PRIu64 " bytes, expected %s with %" PRIu64
                 " elements", k, t->name, tft_dtype_name(t->dtype), t->bytes, tft_dtype_name(dtype), numel);
        return NULL;
    }
    return t->data;
}

static uint64_t numel(const core_capture_tensor *t) { return t->bytes / (tft_dtype_size(t->dtype) ?: 1); }

/* ---- GEMM ----------------------------------------------------------------------- */

static double attr_f64(int64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

/* A captured gemm call, from its op's attributes (interpose.c). */
typedef struct gemm_call {
    int64_t m, n, k, ta, tb, dtype, col;
    double alpha, beta;
} gemm_call;

/* The call of rp's gemm op; -1 with rp->why when its attributes are
 * missing or not valid. */
static int gemm_of(replay *rp, gemm_call *g)
{
    const tft_rec_op *op = rp->op;
    if (op->n_attr < 12) {
        snprintf(rp->why, sizeof(rp->why), "the gemm op has %u attributes, not the 12 a replay needs (recorded "
                 "by an older tftrace)", op->n_attr);
        return -1;
    }
    const int64_t *a = (const int64_t *)(op->ids + op->n_in + op->n_out);
    *g = (gemm_call){.m = a[0], .n = a[1], .k = a[2], .ta = a[3] != 0, .tb = a[4] != 0, .dtype = a[5],
                     .col = a[6] != 0, .alpha = attr_f64(a[10]), .beta = attr_f64(a[11])};
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX ||
        (g->dtype != TFT_F32 && g->dtype != TFT_F64)) {
        snprintf(rp->why, sizeof(rp->why), "the gemm op's attributes are not valid");
        return -1;
    }
    return 0;
}

#ifdef TFT_HAVE_CBLAS
/* g on A and B into rp->got with this machine's CBLAS: with OpenBLAS's
 * default threads, then (if that differs) with one, as programs that want
 * reproducible results (tftrain) run it. */
static void run_gemm(replay *rp, const gemm_call *g, const void *A, const void *B)
{
    /* the matrices as captured: dense, row-major view (interpose.c) */
    int64_t a_cols = (g->ta ^ g->col) ? g->m : g->k, b_cols = (g->tb ^ g->col) ? g->k : g->n;
    int64_t c_cols = g->col ? g->m : g->n;
    enum CBLAS_ORDER ord = g->col ? CblasColMajor : CblasRowMajor;
    enum CBLAS_TRANSPOSE tA = g->ta ? CblasTrans : CblasNoTrans, tB = g->tb ? CblasTrans : CblasNoTrans;
    int lda = (int)(a_cols > 1 ? a_cols : 1), ldb = (int)(b_cols > 1 ? b_cols : 1);
    int ldc = (int)(c_cols > 1 ? c_cols : 1);
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (attempt) {
            if (openblas_get_num_threads() == 1)
                break;
            openblas_set_num_threads(1);
        }
        if (g->beta != 0)
            memcpy(rp->got, rp->prior->data, (size_t)rp->out->bytes);
        else
            memset(rp->got, 0, (size_t)rp->out->bytes);
        if (g->dtype == TFT_F32)
            cblas_sgemm(ord, tA, tB, m, n, k, (float)g->alpha, A, lda, B, ldb, (float)g->beta, rp->got, ldc);
        else
            cblas_dgemm(ord, tA, tB, m, n, k, g->alpha, A, lda, B, ldb, g->beta, rp->got, ldc);
        snprintf(rp->note, sizeof(rp->note), "replayed with this machine's CBLAS (%d thread%s)",
                 openblas_get_num_threads(), openblas_get_num_threads() == 1 ? "" : "s");
        if (memcmp(rp->got, rp->out->data, (size_t)rp->out->bytes) == 0)
            break;
    }
}
#endif

static int replay_gemm(replay *rp)
{
    gemm_call g;
    if (gemm_of(rp, &g) < 0)
        return -1;
    const void *A = input(rp, 0, (int)g.dtype, (uint64_t)(g.m * g.k));
    const void *B = A ? input(rp, 1, (int)g.dtype, (uint64_t)(g.k * g.n)) : NULL;
    if (!A || !B)
        return -1;
    if (rp->out->dtype != g.dtype || numel(rp->out) != (uint64_t)(g.m * g.n)) {
        snprintf(rp->why, sizeof(rp->why), "the captured output does not match the gemm's shape");
        return -1;
    }
    if (g.beta != 0 && (!rp->prior || !rp->prior->complete || rp->prior->bytes != rp->out->bytes)) {
        snprintf(rp->why, sizeof(rp->why), "beta = %g and C's prior value was not captured", g.beta);
        return -1;
    }
#ifdef TFT_HAVE_CBLAS
    run_gemm(rp, &g, A, B);
    return 0;
#else
    snprintf(rp->why, sizeof(rp->why), "this tfdump was built without CBLAS (OpenBLAS)");
    return -1;
#endif
}

/* ---- tftrain's runtime ops -------------------------------------------------------- */

#ifdef TFT_HAVE_OPS
/* The runtime registry's view of a captured tensor (NULL: not captured). */
static rt_replay_tensor view(const core_capture_tensor *t)
{
    if (!t)
        return (rt_replay_tensor){.missing = "was not captured (it was recorded too long before the op, or its "
                                             "memory was gone)"};
    rt_replay_tensor v = {.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
                          .data = t->complete ? t->data : NULL, .bytes = t->bytes};
    if (!v.data)
        v.missing = "is incomplete in the trace";
    return v;
}
#endif

/* An op of tftrain, by its name, through the runtime's registry of
 * replayable ops (runtime/replay_ops.h). */
static int replay_runtime(replay *rp)
{
#ifdef TFT_HAVE_OPS
    openblas_set_num_threads(1); /* as tftrain runs it: bit-identical matmuls */
    rt_replay_tensor in[16], out = view(rp->out);
    int n_in = rp->op->n_in < 16 ? rp->op->n_in : 16;
    for (int k = 0; k < n_in; k++)
        in[k] = view(rp->in[k]);
    unsigned how = 0;
    if (rt_replay_run(rp->op_name, &out, in, rp->op->n_in, rp->got, &how, rp->why, sizeof(rp->why)) < 0)
        return -1;
    if (how & RT_REPLAY_UNSCALED)
        snprintf(rp->note, sizeof(rp->note), "with scale 1: the scores are not scaled by 1/sqrt(head size)");
    /* tftrain stores activations rounded to its storage dtype (emulated fp16/bf16) */
    const int dts[2] = {TFT_BF16, TFT_F16};
    size_t n = (size_t)numel(rp->out);
    for (int i = 0; i < 2 && memcmp(rp->got, rp->out->data, (size_t)rp->out->bytes) != 0; i++) {
        float *r = malloc((size_t)rp->out->bytes + 1);
        if (!r)
            break;
        memcpy(r, rp->got, (size_t)rp->out->bytes);
        op_round_storage(r, n, dts[i]);
        if (memcmp(r, rp->out->data, (size_t)rp->out->bytes) == 0) {
            memcpy(rp->got, r, (size_t)rp->out->bytes);
            snprintf(rp->note, sizeof(rp->note), "after rounding to %s storage, as tftrain stores activations",
                     tft_dtype_name(dts[i]));
        }
        free(r);
    }
    return 0;
#else
    snprintf(rp->why, sizeof(rp->why), "this tfdump was built without the runtime's CPU ops (needs OpenBLAS)");
    return -1;
#endif
}

/* ---- comparison ------------------------------------------------------------------- */

static double elem(const void *p, int dtype, uint64_t i)
{
    switch (dtype) {
    case TFT_F32: { float v; memcpy(&v, (const char *)p + 4 * i, 4); return v; }
    case TFT_F64: { double v; memcpy(&v, (const char *)p + 8 * i, 8); return v; }
    default: return 0;
    }
}

typedef struct verdict {
    int identical, within;
    uint64_t differ, first;
    double max_abs, want_at, got_at;
    uint64_t max_at;
} verdict;

static verdict compare(const replay *rp)
{
    const core_capture_tensor *o = rp->out;
    verdict v = {.identical = memcmp(rp->got, o->data, (size_t)o->bytes) == 0, .within = 1};
    if (v.identical)
        return v;
    uint64_t n = numel(o);
    for (uint64_t i = 0; i < n; i++) {
        double want = elem(o->data, o->dtype, i), got = elem(rp->got, o->dtype, i);
        if (memcmp((const char *)o->data + i * tft_dtype_size(o->dtype),
                   (const char *)rp->got + i * tft_dtype_size(o->dtype), tft_dtype_size(o->dtype)) == 0)
            continue;
        if (v.differ++ == 0)
            v.first = i;
        double d = fabs(got - want);
        bool ok = isfinite(d) && d <= rp->o->atol + rp->o->rtol * fabs(want);
        if (isnan(want) && isnan(got))
            ok = true, d = 0;
        if (!ok)
            v.within = 0;
        if (!(d <= v.max_abs)) {
            v.max_abs = d;
            v.max_at = i;
            v.want_at = want;
            v.got_at = got;
        }
    }
    return v;
}

static int report(const replay *rp, const verdict *v)
{
    const char *res = v->identical ? "bit-identical" : v->within ? "within tolerance" : "different";
    if (rp->o->json) {
        cJSON *j = cJSON_CreateObject();
        if (j) {
            cJSON_AddNumberToObject(j, "rank", rp->rank);
            core_json_i64(j, "seq", rp->o->replay_seq);
            cJSON_AddStringToObject(j, "op", rp->op_name);
            cJSON_AddStringToObject(j, "op_kind", tft_op_kind_name(rp->op->op_kind));
            cJSON_AddStringToObject(j, "output", rp->out->name);
            cJSON_AddStringToObject(j, "result", v->identical ? "bit-identical" : v->within ? "within_tolerance"
                                                                                            : "different");
            core_json_u64(j, "numel", numel(rp->out));
            core_json_u64(j, "differing", v->differ);
            cJSON_AddNumberToObject(j, "max_abs_diff", v->max_abs);
            dump_json_str_or_null(j, "note", rp->note[0] ? rp->note : NULL);
            dump_out_json_line(j);
            cJSON_Delete(j);
        }
    } else {
        printf("op %" PRId64 " %s (%s, rank %d): replayed from %d captured input%s: %s", rp->o->replay_seq,
               rp->op_name, tft_op_kind_name(rp->op->op_kind), rp->rank, rp->op->n_in, rp->op->n_in == 1 ? "" : "s",
               res);
        if (!v->identical)
            printf(" (%" PRIu64 " of %" PRIu64 " elements differ, max abs diff %.6g at element %" PRIu64
                   ": replayed %.9g, captured %.9g; rtol %g, atol %g)",
                   v->differ, numel(rp->out), v->max_abs, v->max_at, v->got_at, v->want_at, rp->o->rtol,
                   rp->o->atol);
        putchar('\n');
        if (rp->note[0])
            printf("note: %s\n", rp->note);
        if (!v->identical && v->within)
            printf("the same inputs give nearly the same output: non-determinism (e.g. another summation "
                   "order or BLAS), not a code bug in this op\n");
        else if (!v->within)
            printf("the same inputs give another output: the op computes something else than its "
                   "replay (a code bug, or a fault of the machine that recorded it)\n");
    }
    return v->within ? DUMP_OK : DUMP_FINDINGS;
}

/* Only the captures of op SEQ keep their bytes. */
static int want_op(void *ctx, const core_capture_tensor *t)
{
    const dump_opts *o = ctx;
    return t->seq == o->replay_seq && (o->rank < 0 || t->rank == o->rank);
}

int dump_replay(dump_trace *d, const dump_opts *o)
{
    replay rp = {.o = o, .rank = o->rank};
    char err[512];
    int status = DUMP_USAGE;
    if (core_capture_list_want(o->path, want_op, (void *)o, &rp.caps, &rp.ncaps, dump_log_fn, &d->log, err, sizeof(err)) < 0) {
        dump_err("%s", err);
        return DUMP_USAGE;
    }
    if (rp.rank < 0) { /* the first rank with a capture of this op */
        for (size_t i = 0; i < rp.ncaps && rp.rank < 0; i++)
            if (rp.caps[i].seq == o->replay_seq)
                rp.rank = rp.caps[i].rank;
    }
    if (rp.rank < 0) {
        dump_err("%s: op %" PRId64 " has no captured tensors (record it with tftrace --capture seq=%" PRId64 ")",
                 o->path, o->replay_seq, o->replay_seq);
        goto out;
    }
    if (find_op(d, &rp) < 0) {
        dump_err("%s: rank %d has no op %" PRId64, o->path, rp.rank, o->replay_seq);
        goto out;
    }
    int e = pick_captures(&rp);
    if (!e)
        e = rp.op->op_kind == TFT_OP_GEMM && (!strcmp(rp.op_name, "cblas_sgemm") || !strcmp(rp.op_name, "cblas_dgemm"))
                ? replay_gemm(&rp)
                : replay_runtime(&rp);
    if (e < 0) {
        dump_err("%s: op %" PRId64 " (%s) cannot be replayed: %s", o->path, o->replay_seq, rp.op_name, rp.why);
        goto out;
    }
    verdict v = compare(&rp);
    status = report(&rp, &v);
out:
    free(rp.got);
    free(rp.op);
    core_capture_free(rp.caps, rp.ncaps);
    return status;
}

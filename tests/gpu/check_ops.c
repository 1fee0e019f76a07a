/*
 * check_ops.c — the CUDA backend's device code against its CPU references,
 * on a GPU machine (run by tests/gpu/run-backend-checks.sh; in CI without a
 * device it prints "SKIP: no CUDA device" and exits 0).
 *
 *   ops     every op of kernels/ops/tft_ops_cuda.h against kernels/ops/ops.c on the
 *           same inputs, at two shapes (one with NH <= B, one with NH > B
 *           and odd sizes), fp32 and the bf16/fp16 matmuls; each line: op,
 *           worst absolute and relative error, the tolerance, PASS/FAIL.
 *           An element passes when |gpu - cpu| <= atol + rtol * |cpu| (NaN
 *           only where the CPU has NaN). Also: reruns bit-identical.
 *   stats   the statistics kernel (tft_stats_cuda_launch) for every dtype
 *           and three sizes against tft_stats_compute on the same bytes:
 *           counts, min, max exact, fingerprint == tft_fingerprint_blocked,
 *           moments within 1e-9 relative; and bit for bit equal to the
 *           host emulation of the same algorithm.
 *   ring    the device record queue (tft_stats_cuda_ring.h): records come
 *           back in order with the right statistics and bytes.
 *   bw      statistics kernel bandwidth next to cudaMemcpy device to device
 *           on 256 MiB of fp32 (tensor bytes per second; goal >= 0.8x).
 *
 * Usage: check_ops [ops|stats|ring|bw]... (default: all). Exit status: the
 * number of failed checks (at most 100).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "tft_format.h"
#include "tft_ops.h"
#include "tft_ops_cuda.h"
#include "tft_stats.h"
#include "tft_stats_cuda.h"
#include "tft_stats_cuda_ring.h"

#include "tft_test_rng.h"

static int n_pass, n_fail;

#define CK(call)                                                                                          \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));              \
            exit(100);                                                                                    \
        }                                                                                                 \
    } while (0)
/* An op call: 0 expected. */
#define OP(x, call)                                                                                       \
    do {                                                                                                  \
        int r_ = (call);                                                                                  \
        if (r_) {                                                                                         \
            printf("FAIL %s:%d: %s = %d (%s)\n", __FILE__, __LINE__, #call, r_, tft_cuda_ops_error(x));      \
            exit(100);                                                                                    \
        }                                                                                                 \
    } while (0)

static void verdict(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verdict(int ok, const char *fmt, ...)
{
    va_list ap;
    printf("%s ", ok ? "PASS" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (ok)
        n_pass++;
    else
        n_fail++;
}

/* ---- host/device buffers ------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { return tft_test_rng_sym(&rng); }

static float *hrand(size_t n, float scale)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}

static float *hcopy(const float *x, size_t n)
{
    float *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

static void *dput(const void *h, size_t bytes)
{
    void *d;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes)
        CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static float *dputf(const float *h, size_t n) { return dput(h, n * sizeof(float)); }

/* The device array back on the host (a new buffer; waits). */
static float *dget(const float *d, size_t n)
{
    float *h = malloc(n * sizeof(float) + 1);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

/* Compares n device floats with the CPU's: worst absolute and relative
 * errors, the count outside atol + rtol |ref|; NaN must meet NaN. */
static void compare(const char *what, const float *dev, const float *ref, size_t n, double atol, double rtol)
{
    float *got = dget(dev, n);
    double wa = 0, wr = 0;
    size_t bad = 0, same = 0, first = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        int both_nan = isnan(g) && isnan(r);
        same += both_nan || memcmp(&got[i], &ref[i], 4) == 0;
        if (both_nan || (isinf(r) && g == r))
            continue;
        double a = fabs(g - r), rel = a / (fabs(r) > 1e-30 ? fabs(r) : 1e-30);
        if (!(a <= atol + rtol * fabs(r))) {
            if (first == (size_t)-1)
                first = i;
            bad++;
        }
        if (a > wa || isnan(a))
            wa = a;
        if (fabs(r) > atol && (rel > wr || isnan(rel)))
            wr = rel;
    }
    char extra[96] = "";
    if (bad)
        snprintf(extra, sizeof(extra), "; %zu bad, first [%zu] gpu %.9g cpu %.9g", bad, first, got[first],
                 ref[first]);
    verdict(bad == 0, "%-34s n %-8zu max_abs %.2e max_rel %.2e (tol %.0e + %.0e|x|) bit-identical %.1f%%%s",
            what, n, wa, wr, atol, rtol, n ? 100.0 * same / n : 100.0, extra);
    free(got);
}

/* ---- ops ------------------------------------------------------------------ */

typedef struct shape {
    int B, T, C, NH, V;
} shape;

/* model.c's mask: j <= i + off, and both positions real when combined. */
static void cpu_mask(uint8_t *mask, const uint8_t *pad, int B, int T, int off, int combine)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                int ok = j <= i + off;
                if (combine && pad)
                    ok = ok && pad[b * T + i] && pad[b * T + j];
                mask[((size_t)b * T + i) * T + j] = (uint8_t)ok;
            }
}

static void check_embedding(tft_cuda_ops *x, const shape *s)
{
    int B = s->B, T = s->T, C = s->C, V = s->V;
    size_t BT = (size_t)B * T;
    int32_t *tok = malloc(BT * 4);
    for (size_t i = 0; i < BT; i++)
        tok[i] = (int32_t)((rng = rng * 6364136223846793005ull + 1) >> 33) % (V / 3 + 1); /* repeats */
    float *wte = hrand((size_t)V * C, 1), *wpe = hrand((size_t)T * C, 1), *out = malloc(BT * C * 4);
    float *dout = hrand(BT * C, 1), *dwte = hrand((size_t)V * C, 1), *dwpe = hrand((size_t)T * C, 1);
    int32_t *dtok = dput(tok, BT * 4);
    float *dwte_d = dputf(wte, (size_t)V * C), *dwpe_d = dputf(wpe, (size_t)T * C), *dout_d = dputf(dout, BT * C);
    float *out_d = dputf(out, BT * C), *gwte_d = dputf(dwte, (size_t)V * C), *gwpe_d = dputf(dwpe, (size_t)T * C);
    op_embedding_fwd(out, tok, wte, wpe, B, T, C);
    OP(x, opd_embedding_fwd(x, out_d, dtok, dwte_d, dwpe_d, B, T, C));
    compare("embedding_fwd", out_d, out, BT * C, 0, 0);
    op_embedding_bwd(dwte, dwpe, dout, tok, B, T, C);
    OP(x, opd_embedding_bwd(x, gwte_d, gwpe_d, dout_d, dtok, B, T, C, V));
    compare("embedding_bwd dwte (+=)", gwte_d, dwte, (size_t)V * C, 0, 0);
    compare("embedding_bwd dwpe (+=)", gwpe_d, dwpe, (size_t)T * C, 0, 0);
    cudaFree(dtok), cudaFree(dwte_d), cudaFree(dwpe_d), cudaFree(dout_d), cudaFree(out_d), cudaFree(gwte_d),
        cudaFree(gwpe_d);
    free(tok), free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}

static void check_layernorm(tft_cuda_ops *x, const shape *s)
{
    int N = s->B * s->T, C = s->C;
    size_t n = (size_t)N * C;
    float *inp = hrand(n, 2), *w = hrand(C, 1), *b = hrand(C, 1), *out = malloc(n * 4), *mean = malloc(N * 4),
          *rstd = malloc(N * 4);
    for (size_t i = 0; i < n; i++)
        inp[i] += 3.0f; /* a mean far from 0 */
    float *d_in = dputf(inp, n), *d_w = dputf(w, C), *d_b = dputf(b, C), *d_out = dputf(out, n);
    float *d_mean = dputf(mean, N), *d_rstd = dputf(rstd, N);
    op_layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    OP(x, opd_layernorm_fwd(x, d_out, d_mean, d_rstd, d_in, d_w, d_b, N, C));
    compare("layernorm_fwd out", d_out, out, n, 1e-6, 1e-5);
    compare("layernorm_fwd mean", d_mean, mean, N, 1e-7, 1e-6);
    compare("layernorm_fwd rstd", d_rstd, rstd, N, 1e-7, 1e-6);
    float *dout = hrand(n, 1), *dinp = hrand(n, 1), *dw = hrand(C, 1), *db = hrand(C, 1);
    float *d_dout = dputf(dout, n), *d_dinp = dputf(dinp, n), *d_dw = dputf(dw, C), *d_db = dputf(db, C);
    /* the backward from the CPU's saved mean/rstd, so only it is compared */
    CK(cudaMemcpy(d_mean, mean, N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_rstd, rstd, N * 4, cudaMemcpyHostToDevice));
    op_layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    OP(x, opd_layernorm_bwd(x, d_dinp, d_dw, d_db, d_dout, d_in, d_w, d_mean, d_rstd, N, C));
    compare("layernorm_bwd dinp (+=)", d_dinp, dinp, n, 1e-5, 1e-4);
    /* the CPU sums dw, db in float row by row, the GPU in double: ~N ulps */
    compare("layernorm_bwd dw (+=)", d_dw, dw, C, 1e-4, 1e-4);
    compare("layernorm_bwd db (+=)", d_db, db, C, 1e-4, 1e-4);
    void *all[] = {d_in, d_w, d_b, d_out, d_mean, d_rstd, d_dout, d_dinp, d_dw, d_db};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(dout), free(dinp), free(dw), free(db);
}

/* The matmuls with operands of dtype (fp32: as they are; bf16/fp16: the CPU
 * gets the inputs rounded to that type, so both sides multiply the same
 * values and only summation order differs). */
static void check_matmul(tft_cuda_ops *x, const shape *s, int dtype)
{
    int N = s->B * s->T, C = s->C, OC = 3 * s->C;
    const char *dn = dtype == TFT_F32 ? "fp32" : dtype == TFT_BF16 ? "bf16" : "fp16";
    float *inp = hrand((size_t)N * C, 1), *w = hrand((size_t)OC * C, 0.5f), *bias = hrand(OC, 1);
    float *dout = hrand((size_t)N * OC, 1);
    float *d_inp = dputf(inp, (size_t)N * C), *d_w = dputf(w, (size_t)OC * C), *d_bias = dputf(bias, OC);
    float *d_dout = dputf(dout, (size_t)N * OC);
    op_round_storage(inp, (size_t)N * C, dtype);
    op_round_storage(w, (size_t)OC * C, dtype);
    op_round_storage(dout, (size_t)N * OC, dtype);
    float *out = malloc((size_t)N * OC * 4), *d_out = dputf(out, (size_t)N * OC);
    char name[64];
    double tol = dtype == TFT_F32 ? 1e-5 : 1e-4;
    op_matmul_fwd(out, inp, w, bias, N, C, OC);
    OP(x, opd_matmul_fwd(x, d_out, d_inp, d_w, d_bias, N, C, OC));
    snprintf(name, sizeof(name), "matmul_fwd %s (bias)", dn);
    compare(name, d_out, out, (size_t)N * OC, tol, tol);
    op_matmul_fwd(out, inp, w, NULL, N, C, OC);
    OP(x, opd_matmul_fwd(x, d_out, d_inp, d_w, NULL, N, C, OC));
    snprintf(name, sizeof(name), "matmul_fwd %s (no bias)", dn);
    compare(name, d_out, out, (size_t)N * OC, tol, tol);
    float *dinp = hrand((size_t)N * C, 1), *dw = hrand((size_t)OC * C, 1), *dbias = hrand(OC, 1);
    float *d_dinp = dputf(dinp, (size_t)N * C), *d_dw = dputf(dw, (size_t)OC * C), *d_dbias = dputf(dbias, OC);
    op_matmul_bwd(dinp, dw, dbias, dout, inp, w, N, C, OC);
    OP(x, opd_matmul_bwd(x, d_dinp, d_dw, d_dbias, d_dout, d_inp, d_w, N, C, OC));
    snprintf(name, sizeof(name), "matmul_bwd %s dinp (+=)", dn);
    compare(name, d_dinp, dinp, (size_t)N * C, tol, tol);
    snprintf(name, sizeof(name), "matmul_bwd %s dw (+=)", dn);
    compare(name, d_dw, dw, (size_t)OC * C, tol, tol);
    if (dtype == TFT_F32)
        compare("matmul_bwd dbias (+=)", d_dbias, dbias, OC, 1e-5, 1e-5);
    void *all[] = {d_inp, d_w, d_bias, d_dout, d_out, d_dinp, d_dw, d_dbias};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(inp), free(w), free(bias), free(dout), free(out), free(dinp), free(dw), free(dbias);
}

/* The attention chain as model.c runs it: scores, mask (built on both
 * sides), masked fill, softmax, values; then the backward in reverse.
 * The GPU runs each op from the CPU's inputs to that op. */
static void check_attention(tft_cuda_ops *x, const shape *s, int dtype)
{
    int B = s->B, T = s->T, C = s->C, NH = s->NH;
    size_t BT = (size_t)B * T, att = (size_t)B * NH * T * T;
    float scale = 1.0f / sqrtf((float)(C / NH));
    const char *dn = dtype == TFT_F32 ? "" : dtype == TFT_BF16 ? " bf16" : " fp16";
    double tol = dtype == TFT_F32 ? 1e-5 : 1e-4;
    char name[64];
    float *qkv = hrand(BT * 3 * C, 1);
    op_round_storage(qkv, BT * 3 * C, dtype);
    uint8_t *pad = malloc(BT), *mask = malloc((size_t)B * T * T);
    for (size_t i = 0; i < BT; i++)
        pad[i] = (int)(i % T) < T - 1 - (int)(i / T) % 3; /* a few padded positions per row */
    pad[BT - 1] = pad[BT - 2] = 0;
    float *d_qkv = dputf(qkv, BT * 3 * C);
    uint8_t *d_pad = dput(pad, BT), *d_mask;
    float *d_maskf;
    CK(cudaMalloc((void **)&d_mask, (size_t)B * T * T));
    CK(cudaMalloc((void **)&d_maskf, (size_t)B * T * T * 4));
    cpu_mask(mask, pad, B, T, 0, 1);
    OP(x, opd_build_mask(x, d_mask, d_maskf, d_pad, B, T, 0, 1));
    uint8_t *gm = malloc((size_t)B * T * T);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gm, d_mask, (size_t)B * T * T, cudaMemcpyDeviceToHost));
    verdict(!memcmp(gm, mask, (size_t)B * T * T), "build_mask (causal + padding) identical");
    cpu_mask(mask, pad, B, T, 1, 0); /* the causal-offbyone, pad-mask variants */
    OP(x, opd_build_mask(x, d_mask, NULL, d_pad, B, T, 1, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gm, d_mask, (size_t)B * T * T, cudaMemcpyDeviceToHost));
    verdict(!memcmp(gm, mask, (size_t)B * T * T), "build_mask (offset 1, no padding) identical");
    cpu_mask(mask, pad, B, T, 0, 1);
    OP(x, opd_build_mask(x, d_mask, NULL, d_pad, B, T, 0, 1));

    float *sc = malloc(att * 4), *d_sc = dputf(sc, att);
    op_attn_scores_fwd(sc, qkv, B, T, C, NH, scale);
    OP(x, opd_attn_scores_fwd(x, d_sc, d_qkv, B, T, C, NH, scale));
    snprintf(name, sizeof(name), "attn_scores_fwd%s", dn);
    compare(name, d_sc, sc, att, tol, tol);
    CK(cudaMemcpy(d_sc, sc, att * 4, cudaMemcpyHostToDevice));
    op_masked_fill(sc, mask, -1e9f, B, NH, T);
    OP(x, opd_masked_fill(x, d_sc, d_mask, -1e9f, B, NH, T));
    compare("masked_fill", d_sc, sc, att, 0, 0);
    float *pr = malloc(att * 4), *d_pr = dputf(pr, att);
    op_softmax_fwd(pr, sc, B * NH * T, T);
    OP(x, opd_softmax_fwd(x, d_pr, d_sc, B * NH * T, T));
    compare("softmax_fwd", d_pr, pr, att, 1e-7, 1e-5);
    /* an all -inf row gives NaN on both */
    float *inf_row = malloc((size_t)T * 4), *p_row = malloc((size_t)T * 4);
    for (int j = 0; j < T; j++)
        inf_row[j] = -INFINITY;
    float *d_row = dputf(inf_row, T), *d_prow = dputf(inf_row, T);
    op_softmax_fwd(p_row, inf_row, 1, T);
    OP(x, opd_softmax_fwd(x, d_prow, d_row, 1, T));
    compare("softmax_fwd all -inf row (NaN)", d_prow, p_row, T, 0, 0);
    op_round_storage(pr, att, dtype); /* what a bf16/fp16 matmul reads */
    float *out = malloc(BT * C * 4), *d_out = dputf(out, BT * C);
    op_attn_values_fwd(out, pr, qkv, B, T, C, NH);
    CK(cudaMemcpy(d_pr, pr, att * 4, cudaMemcpyHostToDevice));
    OP(x, opd_attn_values_fwd(x, d_out, d_pr, d_qkv, B, T, C, NH));
    snprintf(name, sizeof(name), "attn_values_fwd%s", dn);
    compare(name, d_out, out, BT * C, tol, tol);
    /* backward */
    float *dout = hrand(BT * C, 1), *dprobs = malloc(att * 4), *dqkv = hrand(BT * 3 * C, 1);
    op_round_storage(dout, BT * C, dtype);
    float *d_dout = dputf(dout, BT * C), *d_dprobs = dputf(dprobs, att), *d_dqkv = dputf(dqkv, BT * 3 * C);
    op_attn_values_bwd(dprobs, dqkv, dout, pr, qkv, B, T, C, NH);
    OP(x, opd_attn_values_bwd(x, d_dprobs, d_dqkv, d_dout, d_pr, d_qkv, B, T, C, NH));
    snprintf(name, sizeof(name), "attn_values_bwd%s dprobs", dn);
    compare(name, d_dprobs, dprobs, att, tol, tol);
    snprintf(name, sizeof(name), "attn_values_bwd%s dv (+=)", dn);
    compare(name, d_dqkv, dqkv, BT * 3 * C, tol, tol);
    float *dsc = malloc(att * 4), *d_dsc = dputf(dsc, att);
    CK(cudaMemcpy(d_dprobs, dprobs, att * 4, cudaMemcpyHostToDevice));
    op_softmax_bwd(dsc, dprobs, pr, B * NH * T, T);
    OP(x, opd_softmax_bwd(x, d_dsc, d_dprobs, d_pr, B * NH * T, T));
    compare("softmax_bwd", d_dsc, dsc, att, 1e-6, 1e-4);
    CK(cudaMemcpy(d_dsc, dsc, att * 4, cudaMemcpyHostToDevice));
    op_masked_fill_bwd(dsc, mask, B, NH, T);
    OP(x, opd_masked_fill_bwd(x, d_dsc, d_mask, B, NH, T));
    compare("masked_fill_bwd", d_dsc, dsc, att, 0, 0);
    op_round_storage(dsc, att, dtype);
    CK(cudaMemcpy(d_dsc, dsc, att * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dqkv, dqkv, BT * 3 * C * 4, cudaMemcpyHostToDevice));
    op_attn_scores_bwd(dqkv, dsc, qkv, B, T, C, NH, scale);
    OP(x, opd_attn_scores_bwd(x, d_dqkv, d_dsc, d_qkv, B, T, C, NH, scale));
    snprintf(name, sizeof(name), "attn_scores_bwd%s dq, dk (+=)", dn);
    compare(name, d_dqkv, dqkv, BT * 3 * C, tol, tol);
    void *all[] = {d_qkv, d_pad, d_mask, d_maskf, d_sc, d_pr, d_row, d_prow, d_out, d_dout, d_dprobs, d_dqkv,
                   d_dsc};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(qkv), free(pad), free(mask), free(gm), free(sc), free(pr), free(inf_row), free(p_row), free(out);
    free(dout), free(dprobs), free(dqkv), free(dsc);
}

static void check_elementwise(tft_cuda_ops *x, const shape *s)
{
    size_t n = (size_t)s->B * s->T * 4 * s->C;
    float *a = hrand(n, 4), *b = hrand(n, 4), *out = malloc(n * 4);
    a[0] = 30.0f, a[1] = -30.0f, a[2] = 0.0f; /* cosh overflow, saturation */
    float *d_a = dputf(a, n), *d_b = dputf(b, n), *d_out = dputf(out, n);
    op_gelu_fwd(out, a, n);
    OP(x, opd_gelu_fwd(x, d_out, d_a, n));
    compare("gelu_fwd", d_out, out, n, 1e-7, 1e-5);
    float *din = hrand(n, 1), *d_din = dputf(din, n);
    op_gelu_bwd(din, a, b, n);
    OP(x, opd_gelu_bwd(x, d_din, d_a, d_b, n));
    compare("gelu_bwd (+=)", d_din, din, n, 1e-6, 1e-5);
    op_residual_fwd(out, a, b, n);
    OP(x, opd_residual_fwd(x, d_out, d_a, d_b, n));
    compare("residual_fwd", d_out, out, n, 0, 0);
    /* storage rounding: ties, overflow, subnormals */
    float sp[] = {65504.0f, 65520.0f, 65519.99f, -70000.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-25f,
                  0x1p-24f, 3e38f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 1e-40f};
    for (int dt = TFT_F16; dt <= TFT_BF16; dt++) {
        float *r = hcopy(a, n);
        memcpy(r, sp, sizeof(sp));
        float *d_r = dputf(r, n);
        op_round_storage(r, n, dt);
        OP(x, opd_round_storage(x, d_r, n, dt));
        compare(dt == TFT_F16 ? "round_storage fp16" : "round_storage bf16", d_r, r, n, 0, 0);
        cudaFree(d_r);
        free(r);
    }
    op_scale(a, n, 0.37f);
    OP(x, opd_scale(x, d_a, n, 0.37f));
    compare("scale", d_a, a, n, 0, 0);
    float one = 1.0f, half = 0.5f, *d_one = dputf(&one, 1), *d_half = dputf(&half, 1);
    OP(x, opd_scale_dev(x, d_a, n, d_one, 0));
    compare("scale_dev by 1 (untouched)", d_a, a, n, 0, 0);
    op_scale(a, n, 2.0f);
    OP(x, opd_scale_dev(x, d_a, n, d_half, 1));
    compare("scale_dev by 1/0.5", d_a, a, n, 0, 0);
    void *all[] = {d_a, d_b, d_out, d_din, d_one, d_half};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(a), free(b), free(out), free(din);
}

static void check_crossentropy(tft_cuda_ops *x, const shape *s)
{
    int N = s->B * s->T, V = s->V;
    size_t n = (size_t)N * V;
    float *logits = hrand(n, 6), *probs = malloc(n * 4), *losses = malloc(N * 4), *weight = malloc(N * 4);
    int32_t *tgt = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        tgt[i] = (int32_t)((unsigned)(i * 7919) % (unsigned)V);
        weight[i] = i % 5 == 4 ? 0.0f : 1.0f; /* padded positions: not in the loss */
    }
    float *d_logits = dputf(logits, n), *d_probs = dputf(probs, n), *d_losses = dputf(losses, N);
    float *d_weight = dputf(weight, N), *d_loss;
    int32_t *d_tgt = dput(tgt, N * 4);
    double *d_sum;
    CK(cudaMalloc((void **)&d_sum, sizeof(double)));
    CK(cudaMalloc((void **)&d_loss, sizeof(float)));
    double sum = op_crossentropy_fwd(losses, probs, logits, tgt, weight, N, V);
    float denom = (float)(N - N / 5), loss = (float)(sum / (double)denom);
    OP(x, opd_crossentropy_fwd(x, d_losses, d_probs, d_logits, d_tgt, d_weight, N, V, d_sum, denom, d_loss));
    compare("crossentropy_fwd probs", d_probs, probs, n, 1e-9, 1e-6);
    compare("crossentropy_fwd losses", d_losses, losses, N, 1e-6, 1e-6);
    compare("crossentropy_fwd loss", d_loss, &loss, 1, 1e-6, 1e-6);
    double gsum;
    CK(cudaMemcpy(&gsum, d_sum, sizeof(gsum), cudaMemcpyDeviceToHost));
    verdict(fabs(gsum - sum) <= 1e-6 * fabs(sum), "crossentropy_fwd sum: gpu %.12g cpu %.12g", gsum, sum);
    float *dl = malloc(n * 4), *d_dl = dputf(dl, n), ls = 1024.0f, *d_ls = dputf(&ls, 1);
    CK(cudaMemcpy(d_probs, probs, n * 4, cudaMemcpyHostToDevice));
    op_crossentropy_bwd(dl, probs, tgt, weight, 1.0f / denom, N, V);
    OP(x, opd_crossentropy_bwd(x, d_dl, d_probs, d_tgt, d_weight, 1.0f / denom, NULL, N, V));
    compare("crossentropy_bwd", d_dl, dl, n, 0, 0);
    op_crossentropy_bwd(dl, probs, tgt, weight, 1.0f / denom * 1024.0f, N, V);
    OP(x, opd_crossentropy_bwd(x, d_dl, d_probs, d_tgt, d_weight, 1.0f / denom, d_ls, N, V));
    compare("crossentropy_bwd x loss scale 1024", d_dl, dl, n, 0, 0);
    void *all[] = {d_logits, d_probs, d_losses, d_weight, d_loss, d_tgt, d_sum, d_dl, d_ls};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(logits), free(probs), free(losses), free(weight), free(tgt), free(dl);
}

static void check_optimizer(tft_cuda_ops *x)
{
    size_t n = 300007;
    float *p = hrand(n, 1), *g = hrand(n, 1), *m = hrand(n, 0.1f), *v = hrand(n, 0.1f);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    float *d_p = dputf(p, n), *d_g = dputf(g, n), *d_m = dputf(m, n), *d_v = dputf(v, n);
    for (int t = 1; t <= 7; t += 6) {
        op_adamw(p, g, m, v, n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        OP(x, opd_adamw(x, d_p, d_g, d_m, d_v, n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, NULL));
    }
    compare("adamw param (t 1, 7; wd 0.1)", d_p, p, n, 0, 1e-6);
    compare("adamw m", d_m, m, n, 0, 1e-6);
    compare("adamw v", d_v, v, n, 0, 1e-6);
    int one = 1, *d_skip = dput(&one, sizeof(int));
    OP(x, opd_adamw(x, d_p, d_g, d_m, d_v, n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 8, d_skip));
    compare("adamw skipped (loss scaler)", d_p, p, n, 0, 0);
    /* SGD with momentum, as train.c's */
    for (size_t i = 0; i < n; i++) {
        m[i] = 0.9f * m[i] + g[i];
        p[i] -= 0.5f * m[i];
    }
    OP(x, opd_sgd_momentum(x, d_p, d_g, d_m, n, 0.5f, NULL));
    compare("sgd_momentum param", d_p, p, n, 0, 1e-6);
    /* norms: per-parameter sums of squares and train.c's global norm */
    uint64_t off[3] = {0, 1000, 250000}, cnt[3] = {1000, 249000, n - 250000};
    uint64_t *d_off = dput(off, sizeof(off)), *d_cnt = dput(cnt, sizeof(cnt));
    double *d_sq, sq[3], gsq[3];
    CK(cudaMalloc((void **)&d_sq, sizeof(sq)));
    OP(x, opd_sum_squares_segments(x, d_g, d_off, d_cnt, 3, d_sq));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gsq, d_sq, sizeof(gsq), cudaMemcpyDeviceToHost));
    double wr = 0;
    for (int k = 0; k < 3; k++) {
        sq[k] = op_sum_squares(g + off[k], cnt[k]);
        wr = fmax(wr, fabs(gsq[k] - sq[k]) / sq[k]);
    }
    verdict(wr < 1e-12, "sum_squares_segments: max_rel %.2e (tol 1e-12)", wr);
    for (int reverse = 0; reverse <= 1; reverse++) {
        float s = 0;
        for (int k = 0; k < 3; k++)
            s += sq[reverse ? 2 - k : k];
        float norm = sqrtf(s), clip = 1.0f, factor = norm > clip ? (float)(clip / (double)norm) : 1.0f;
        float *d_norm, *d_clip, gn, gc;
        int *d_found, found;
        CK(cudaMalloc((void **)&d_norm, 4));
        CK(cudaMalloc((void **)&d_clip, 4));
        CK(cudaMalloc((void **)&d_found, 4));
        CK(cudaMemcpy(d_sq, sq, sizeof(sq), cudaMemcpyHostToDevice));
        OP(x, opd_global_norm(x, d_sq, 3, reverse, clip, d_norm, d_clip, d_found));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&gn, d_norm, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&gc, d_clip, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&found, d_found, 4, cudaMemcpyDeviceToHost));
        verdict(gn == norm && gc == factor && !found, "global_norm%s: gpu %.9g clip %.9g, cpu %.9g clip %.9g",
                reverse ? " (reverse)" : "", gn, gc, norm, factor);
        cudaFree(d_norm), cudaFree(d_clip), cudaFree(d_found);
    }
    double one_sq;
    OP(x, opd_sum_squares(x, d_g, n, d_sq));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&one_sq, d_sq, sizeof(double), cudaMemcpyDeviceToHost));
    double cpu_sq = op_sum_squares(g, n);
    verdict(fabs(one_sq - cpu_sq) <= 1e-12 * cpu_sq, "sum_squares: gpu %.15g cpu %.15g", one_sq, cpu_sq);
    /* f32 -> f64 */
    double *d_f64, h64[4];
    CK(cudaMalloc((void **)&d_f64, sizeof(h64)));
    OP(x, opd_f32_to_f64(x, d_g, d_f64, 4));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h64, d_f64, sizeof(h64), cudaMemcpyDeviceToHost));
    verdict(h64[0] == g[0] && h64[3] == g[3], "f32_to_f64");
    /* the loss scaler on the device follows the host rule */
    tft_loss_scale hs, ds, *d_ls;
    tft_loss_scale_init(&hs, TFT_LOSS_SCALE_INIT, 3);
    CK(cudaMalloc((void **)&d_ls, sizeof(ds)));
    CK(cudaMemcpy(d_ls, &hs, sizeof(hs), cudaMemcpyHostToDevice));
    int seq[] = {1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}, *d_f;
    CK(cudaMalloc((void **)&d_f, sizeof(int)));
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        tft_loss_scale_update(&hs, seq[i]);
        CK(cudaMemcpy(d_f, &seq[i], sizeof(int), cudaMemcpyHostToDevice));
        OP(x, opd_loss_scale_update(x, d_ls, d_f));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&ds, d_ls, sizeof(ds), cudaMemcpyDeviceToHost));
    verdict(!memcmp(&ds, &hs, sizeof(ds)), "loss_scale_update: gpu scale %g skipped %d, host %g skipped %d",
            (double)ds.scale, ds.skipped, (double)hs.scale, hs.skipped);
    void *all[] = {d_p, d_g, d_m, d_v, d_skip, d_off, d_cnt, d_sq, d_f64, d_ls, d_f};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(p), free(g), free(m), free(v);
}

/* The same op twice: bit-identical (no atomics, fixed orders). */
static void check_determinism(tft_cuda_ops *x, const shape *s)
{
    int N = s->B * s->T, C = s->C;
    size_t n = (size_t)N * C;
    float *inp = hrand(n, 1), *w = hrand(C, 1), *dout = hrand(n, 1), *z = calloc(n, 4);
    float *d_in = dputf(inp, n), *d_w = dputf(w, C), *d_dout = dputf(dout, n), *d_mean = dputf(z, N),
          *d_rstd = dputf(z, N), *d_out = dputf(z, n);
    float *res[2][3];
    OP(x, opd_layernorm_fwd(x, d_out, d_mean, d_rstd, d_in, d_w, d_w, N, C));
    for (int r = 0; r < 2; r++) {
        float *d_dinp = dputf(z, n), *d_dw = dputf(z, C), *d_db = dputf(z, C);
        OP(x, opd_layernorm_bwd(x, d_dinp, d_dw, d_db, d_dout, d_in, d_w, d_mean, d_rstd, N, C));
        res[r][0] = dget(d_dinp, n);
        res[r][1] = dget(d_dw, C);
        res[r][2] = dget(d_db, C);
        cudaFree(d_dinp), cudaFree(d_dw), cudaFree(d_db);
    }
    verdict(!memcmp(res[0][0], res[1][0], n * 4) && !memcmp(res[0][1], res[1][1], C * 4) &&
                !memcmp(res[0][2], res[1][2], C * 4),
            "layernorm_bwd twice: bit-identical");
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            free(res[r][k]);
    void *all[] = {d_in, d_w, d_dout, d_mean, d_rstd, d_out};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cudaFree(all[i]);
    free(inp), free(w), free(dout), free(z);
}

static tft_cuda_ops *ops_new(int dtype, size_t ws)
{
    tft_cuda_ops *x;
    char err[256];
    tft_cuda_ops_opts o = {.sz = sizeof(o), .gemm_dtype = dtype, .gemm_ws_elems = ws};
    int e = tft_cuda_ops_new(&x, &o, err, sizeof(err));
    if (e) {
        printf("FAIL tft_cuda_ops_new(%s): %d %s\n", tft_dtype_name(dtype), e, err);
        exit(100);
    }
    return x;
}

static void run_ops(void)
{
    shape shapes[2] = {{4, 64, 128, 4, 259}, {3, 17, 40, 5, 37}};
    for (int k = 0; k < 2; k++) {
        const shape *s = &shapes[k];
        printf("-- ops, B %d T %d C %d NH %d V %d\n", s->B, s->T, s->C, s->NH, s->V);
        size_t ws = (size_t)s->B * s->T * 4 * s->C * 4 + (size_t)s->B * s->NH * s->T * s->T;
        tft_cuda_ops *x = ops_new(TFT_F32, 0);
        check_embedding(x, s);
        check_layernorm(x, s);
        check_matmul(x, s, TFT_F32);
        check_attention(x, s, TFT_F32);
        check_elementwise(x, s);
        check_crossentropy(x, s);
        check_determinism(x, s);
        if (k == 0)
            check_optimizer(x);
        tft_cuda_ops_free(x);
        for (int dt = TFT_F16; dt <= TFT_BF16; dt++) {
            x = ops_new(dt, ws);
            check_matmul(x, s, dt);
            check_attention(x, s, dt);
            tft_cuda_ops_free(x);
        }
    }
}

/* ---- statistics ------------------------------------------------------------ */

static void fill_dtype(uint8_t *p, int dtype, size_t n)
{
    size_t esz = tft_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        double v = frand() * (i % 97 == 0 ? 1e6 : 3.0);
        uint8_t *e = p + i * esz;
        switch (dtype) {
        case TFT_F32: {
            float f = (float)v;
            if (i % 1009 == 1) f = NAN;
            if (i % 1013 == 2) f = INFINITY;
            if (i % 1019 == 3) f = -INFINITY;
            if (i % 31 == 4) f = 0.0f;
            if (i % 37 == 5) f = 1e-6f; /* below fp16's smallest normal */
            if (i % 41 == 6) f = 1e5f;  /* above fp16's max */
            memcpy(e, &f, 4);
            break;
        }
        case TFT_F64: {
            /* (beyond ~1e154 the device's sum of squares overflows: tft_stats_cuda.h) */
            double d = i % 1009 == 1 ? NAN : i % 31 == 4 ? 0.0 : i % 211 == 7 ? 1e100 : v;
            memcpy(e, &d, 8);
            break;
        }
        case TFT_F16: {
            uint16_t h = tft_f32_to_f16((float)(i % 1009 == 1 ? NAN : i % 1013 == 2 ? 1e6 : v / 8));
            memcpy(e, &h, 2);
            break;
        }
        case TFT_BF16: {
            uint16_t h = tft_f32_to_bf16((float)(i % 1009 == 1 ? NAN : v));
            memcpy(e, &h, 2);
            break;
        }
        case TFT_BOOL: *e = (uint8_t)(i % 3 == 0); break;
        default: { /* integers: random bytes */
            for (size_t b = 0; b < esz; b++) {
                e[b] = (uint8_t)(tft_test_rng(&rng) >> 24);
            }
        }
        }
    }
}

static int rel_ok(double a, double b, double tol)
{
    if (a == b)
        return 1;
    return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

static void run_stats(void)
{
    printf("-- statistics kernel vs CPU statistics\n");
    int dtypes[] = {TFT_F32, TFT_F64, TFT_F16, TFT_BF16, TFT_I32, TFT_I64, TFT_U8, TFT_I8, TFT_I16, TFT_U16,
                    TFT_U32, TFT_U64, TFT_BOOL};
    size_t bytes_sizes[] = {1000, 65536 * 2 + 24, 3u << 20};
    size_t cap = (3u << 20) + 64;
    uint8_t *h = malloc(cap), *d;
    CK(cudaMalloc((void **)&d, cap));
    size_t sb = tft_stats_cuda_scratch_bytes(TFT_U8, cap);
    void *scratch;
    CK(cudaMalloc(&scratch, sb));
    tft_stats *pinned;
    CK(cudaHostAlloc((void **)&pinned, sizeof(tft_stats), cudaHostAllocDefault));
    for (size_t di = 0; di < sizeof(dtypes) / sizeof(dtypes[0]); di++) {
        int dt = dtypes[di];
        size_t esz = tft_dtype_size(dt);
        int ok_all = 1;
        char why[200] = "";
        for (size_t si = 0; si < 3; si++) {
            size_t n = bytes_sizes[si] / esz, bytes = n * esz;
            fill_dtype(h, dt, n);
            CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
            tft_stats_cuda_pending pend = {0};
            int e = tft_stats_cuda_launch(dt, d, n, TFT_STATS_FULL, NULL, scratch, sb, pinned, &pend);
            if (!e)
                e = tft_stats_cuda_wait(&pend);
            tft_stats g = *pinned, c, em;
            tft_stats_compute(dt, h, n, TFT_STATS_FULL, &c);
            tft_stats_cuda_emulate(dt, h, n, TFT_STATS_FULL, &em);
            uint64_t fp = tft_fingerprint_blocked(h, bytes);
            int counts = g.numel == c.numel && g.nan == c.nan && g.pinf == c.pinf && g.ninf == c.ninf &&
                         g.zero == c.zero && g.over_fp16 == c.over_fp16 && g.over_bf16 == c.over_bf16 &&
                         g.under_fp16 == c.under_fp16 && g.min == c.min && g.max == c.max;
            /* the CPU accumulates f32/f16/bf16/small-int moments in float:
             * its documented bounds (tft_stats.h) are the difference */
            int fa = dt == TFT_F32 || dt == TFT_F16 || dt == TFT_BF16 || dt == TFT_I32 || dt == TFT_I64;
            double tr = fa ? TFT_STATS_F32ACC_REL : 1e-9, tl = fa ? TFT_STATS_F32ACC_L1 : 1e-9;
            int moments = (fa ? fabs(g.mean - c.mean) <= TFT_STATS_F32ACC_MEAN * c.std + 1e-9 * fabs(c.mean)
                              : rel_ok(g.mean, c.mean, 1e-9)) &&
                          rel_ok(g.std, c.std, tr) && rel_ok(g.l1, c.l1, tl) && rel_ok(g.l2, c.l2, tr) &&
                          g.absmax == c.absmax;
            int same_em = !memcmp(&g, &em, sizeof(g));
            int ok = !e && counts && g.fingerprint == fp && moments && same_em;
            if (!ok && !why[0])
                snprintf(why, sizeof(why), " (%zu elements: launch %d counts %d fingerprint %d moments %d "
                                           "emulation %d; mean gpu %.17g cpu %.17g)",
                         n, e, counts, g.fingerprint == fp, moments, same_em, g.mean, c.mean);
            ok_all &= ok;
        }
        verdict(ok_all, "stats %-5s 3 sizes: counts, min/max, blocked fingerprint exact, moments within the CPU's bounds, = emulation%s",
                tft_dtype_name(dt), why);
    }
    /* many tensors in one launch: each result equals its single launch */
    enum { NI = 40 };
    tft_stats_cuda_item items[NI];
    tft_stats single[NI], *many;
    CK(cudaMalloc((void **)&many, NI * sizeof(tft_stats)));
    fill_dtype(h, TFT_F32, cap / 4);
    CK(cudaMemcpy(d, h, cap, cudaMemcpyHostToDevice));
    size_t off = 0;
    for (int i = 0; i < NI; i++) {
        int dt = dtypes[i % (sizeof(dtypes) / sizeof(dtypes[0]))];
        size_t esz = tft_dtype_size(dt), n = i == 3 ? 0 : (size_t)(1 + (i * 7919) % 40000);
        off = (off + 7) & ~(size_t)7;
        if (off + n * esz > cap)
            off = 0;
        items[i] = (tft_stats_cuda_item){.dtype = dt, .dev_data = d + off, .numel = n, .out = many + i};
        tft_stats_cuda_pending pend = {0};
        int e = tft_stats_cuda_launch(dt, d + off, n, TFT_STATS_FULL, NULL, scratch, sb, pinned, &pend);
        if (!e)
            e = tft_stats_cuda_wait(&pend);
        single[i] = *pinned;
        off += n * esz;
    }
    size_t sbm = tft_stats_cuda_scratch_bytes_many(items, NI, TFT_STATS_FULL);
    void *scratch_m;
    CK(cudaMalloc(&scratch_m, sbm));
    int e = tft_stats_cuda_launch_many(items, NI, TFT_STATS_FULL, NULL, scratch_m, sbm);
    tft_stats got[NI];
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got, many, sizeof(got), cudaMemcpyDeviceToHost));
    int same = 0;
    for (int i = 0; i < NI; i++)
        same += !memcmp(&got[i], &single[i], sizeof(tft_stats));
    verdict(e == 0 && same == NI, "stats launch_many (%d tensors, mixed dtypes, one empty): %d/%d equal to single "
            "launches bit for bit (launch %d)", NI, same, NI, e);
    cudaFree(scratch_m);
    cudaFree(many);
    cudaFreeHost(pinned);
    cudaFree(scratch);
    cudaFree(d);
    free(h);
}

/* ---- the record queue ---------------------------------------------------- */

typedef struct ring_seen {
    int n, bad;
} ring_seen;

typedef struct rmeta {
    int idx, kind;           /* kind 0 stats, 1 copy, 2 host */
    tft_stats want;          /* stats: expected (computed on the host) */
    float first;             /* copy/host: expected first element */
} rmeta;

static void ring_emit(void *ctx, const void *meta, const void *payload, size_t len, int status)
{
    ring_seen *s = ctx;
    const rmeta *m = meta;
    int ok = status == 0 && m->idx == s->n;
    if (ok && m->kind == 0)
        ok = len == sizeof(tft_stats) && ((const tft_stats *)payload)->fingerprint == m->want.fingerprint &&
             ((const tft_stats *)payload)->numel == m->want.numel;
    else if (ok)
        ok = len >= 4 && !memcmp(payload, &m->first, 4);
    s->bad += !ok;
    s->n++;
}

static void ring_once(int batch)
{
    ring_seen seen = {0, 0};
    tft_dring *r;
    tft_dring_opts o = {.sz = sizeof(o), .arena_bytes = 1 << 16, .nslots = 64, .meta_bytes = sizeof(rmeta),
                        .max_stats_bytes = 4096, .emit = ring_emit, .ctx = &seen, .batch_stats = batch};
    int e = tft_dring_new(&r, &o);
    if (e) {
        verdict(0, "tft_dring_new: %d", e);
        return;
    }
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    size_t n = 200000; /* larger than the arena (copies go the slow way) and the scratch (grows) */
    float *h = hrand(n, 1), *d = dputf(h, n);
    int idx = 0;
    for (int it = 0; it < 300; it++) {
        rmeta m = {.idx = idx++, .kind = it % 3};
        size_t k = it % 7 == 6 ? n : (size_t)(1 + it * 37 % 5000);
        if (m.kind == 0) {
            tft_stats c;
            tft_stats_compute(TFT_F32, h, k, TFT_STATS_FULL, &c);
            m.want = c;
            m.want.fingerprint = tft_fingerprint_blocked(h, k * 4);
            e = tft_dring_stats(r, &m, TFT_F32, d, k, TFT_STATS_FULL, st);
        } else if (m.kind == 1) {
            m.first = h[0];
            e = tft_dring_copy(r, &m, d, k * 4, st);
        } else {
            m.first = h[it];
            e = tft_dring_host(r, &m, &h[it], 4);
        }
        if (e)
            seen.bad++;
        tft_dring_poll(r);
    }
    /* the flush contract: statistics requested, flushed, then the tensor
     * changes on the stream; the record still has the values it had */
    rmeta m = {.idx = idx++, .kind = 0};
    tft_stats_compute(TFT_F32, h, 1000, TFT_STATS_FULL, &m.want);
    m.want.fingerprint = tft_fingerprint_blocked(h, 4000);
    tft_dring_stats(r, &m, TFT_F32, d, 1000, TFT_STATS_FULL, st);
    tft_dring_flush(r);
    CK(cudaMemsetAsync(d, 0, 4000, st));
    float *z = calloc(1000, 4);
    m = (rmeta){.idx = idx++, .kind = 0};
    tft_stats_compute(TFT_F32, z, 1000, TFT_STATS_FULL, &m.want);
    m.want.fingerprint = tft_fingerprint_blocked(z, 4000);
    tft_dring_stats(r, &m, TFT_F32, d, 1000, TFT_STATS_FULL, st);
    tft_dring_drain(r);
    verdict(seen.n == idx && seen.bad == 0, "ring%s: %d records queued, %d emitted in order, %d wrong",
            batch ? " (batched statistics)" : "", idx, seen.n, seen.bad);
    tft_dring_free(r);
    cudaStreamDestroy(st);
    cudaFree(d);
    free(h);
    free(z);
}

static void run_ring(void)
{
    printf("-- device record queue\n");
    ring_once(0);
    ring_once(1);
}

/* ---- bandwidth ----------------------------------------------------------- */

static void run_bw(void)
{
    size_t bytes = 256u << 20, n = bytes / 4;
    printf("-- statistics bandwidth, %zu MiB fp32\n", bytes >> 20);
    float *h = hrand(n, 1), *d, *d2;
    CK(cudaMalloc((void **)&d, bytes));
    CK(cudaMalloc((void **)&d2, bytes));
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    size_t sb = tft_stats_cuda_scratch_bytes(TFT_F32, n);
    void *scratch;
    CK(cudaMalloc(&scratch, sb));
    tft_stats *pinned;
    CK(cudaHostAlloc((void **)&pinned, sizeof(tft_stats), cudaHostAllocDefault));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    enum { REPS = 10 };
    float ms_copy = 0, ms_stats[3] = {0, 0, 0};
    for (int w = 0; w < 2; w++) { /* w = 0 warms up */
        CK(cudaEventRecord(a, 0));
        for (int i = 0; i < REPS; i++)
            CK(cudaMemcpyAsync(d2, d, bytes, cudaMemcpyDeviceToDevice, 0));
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms_copy, a, b));
        for (int mode = TFT_STATS_HEALTH; mode <= TFT_STATS_FULL; mode++) {
            tft_stats_cuda_pending pend[REPS];
            memset(pend, 0, sizeof(pend));
            CK(cudaEventRecord(a, 0));
            for (int i = 0; i < REPS; i++) /* back to back on one stream, as a step records them */
                if (tft_stats_cuda_launch(TFT_F32, d, n, mode, NULL, scratch, sb, pinned, &pend[i]) != 0)
                    printf("FAIL: statistics launch\n");
            CK(cudaEventRecord(b, 0));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms_stats[mode], a, b));
            for (int i = 0; i < REPS; i++)
                if (pend[i].event)
                    tft_stats_cuda_wait(&pend[i]);
        }
    }
    double gbs_copy = (double)bytes * REPS / (ms_copy * 1e-3) / 1e9;
    for (int mode = TFT_STATS_HEALTH; mode <= TFT_STATS_FULL; mode++) {
        double gbs = (double)bytes * REPS / (ms_stats[mode] * 1e-3) / 1e9;
        printf("bandwidth: cudaMemcpy D2D %.0f GB/s of tensor (%.0f GB/s read+write); statistics (%s) %.0f GB/s; "
               "ratio %.2f\n",
               gbs_copy, 2 * gbs_copy, mode == TFT_STATS_FULL ? "full" : "health", gbs, gbs / gbs_copy);
        if (mode == TFT_STATS_FULL) /* a measurement: reported, not a failure */
            verdict(1, "stats bandwidth (full) %.2fx of a device-to-device copy: goal >= 0.8 %s", gbs / gbs_copy,
                    gbs / gbs_copy >= 0.8 ? "MET" : "NOT MET");
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    cudaFreeHost(pinned);
    cudaFree(scratch), cudaFree(d), cudaFree(d2);
    free(h);
}

int main(int argc, char **argv)
{
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (%s)\n", ce != cudaSuccess ? cudaGetErrorString(ce) : "none");
        return 0;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    int all = argc < 2;
    for (int i = 1; i < argc || all; i++) {
        const char *w = all ? NULL : argv[i];
        if (all || !strcmp(w, "ops"))
            run_ops();
        if (all || !strcmp(w, "stats"))
            run_stats();
        if (all || !strcmp(w, "ring"))
            run_ring();
        if (all || !strcmp(w, "bw"))
            run_bw();
        if (all)
            break;
    }
    printf("check_ops: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail > 100 ? 100 : n_fail;
}

/*
 * train.c — tftrain's training loop: batches, forward, backward, gradient
 * all-reduce, clipping, LR schedule, AdamW, checkpoints, eval, and the bug
 * zoo, every step recorded through tft.h under the canonical names of
 * runtime/README.md ("What is recorded"; the names: names.h). Messages go to stderr prefixed "tftrain:", progress to
 * stdout on rank 0.
 */
#include "train.h"

#include "tft.h"
#include "tft_ops.h"
#include "tft_stats.h"
#include "train_cuda.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Fused statistics (rec_fused_mode): the tensors the gradient-norm sweep
 * and AdamW touch get their statistics there, a piece at a time while the
 * piece is in L1 (tft_stats_stream: the same statistics, bit for bit, as
 * the recorder's tft_stats_compute of the whole tensor), and are recorded
 * afterwards, in the order and with the names rec_tensor would give them. */
#define FUSED_PIECE 2048 /* floats: one statistics block; AdamW's four arrays fill 32 KiB of L1 */
typedef struct fused {
    tft_stats_stream s[3];
    tft_stats *grad, *m, *v, *p; /* per parameter */
    bool *ok;                    /* per parameter: its statistics came out (else rec_tensor) */
} fused;

typedef struct run {
    const train_opts *o;
    dist *d;
    data_corpus *corpus;
    data_loader loader;
    gpt_model m;
    gpt_variant var;
    rec_map *rec;
    tft_rng rng;
    int64_t step0;            /* first step of this run (> 0 after resume) */
    int B, T;
    int32_t *tokens, *targets;
    float *loss_mask;
    uint8_t *pad;
    char err[512];
    cuda_run *cu;             /* the CUDA backend (train_cuda.h), NULL on the CPU */
    fused *fs;                /* fused statistics' state, NULL until first used */
} run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool bug_at(const run *r, int kind, int64_t step)
{
    return r->o->bug.kind == kind && step == r->o->bug.step;
}

static bool bug_is(const run *r, int kind) { return r->o->bug.kind == kind; }

/* The config line saved in checkpoints: a resume must match it. */
static void config_text(const run *r, char *out, size_t cap)
{
    snprintf(out, cap, "layers=%d\nd_model=%d\nheads=%d\nseq=%d\nvocab=%d\nbatch=%d\nworld=%d\n",
             r->o->layers, r->o->d_model, r->o->heads, r->o->seq, TFT_VOCAB, r->B, r->d->world);
}

/* The model variant of `step`: the model bugs (masks, scaling) are on from
 * their @STEP (default 0) on, so a run can part from its golden late. */
static void variant_at(run *r, int64_t step)
{
    const train_opts *o = r->o;
    r->var = (gpt_variant){.store_dtype = o->store_dtype, .causal_offset = 0, .combine_pad_mask = 1,
                           .scale_scores = 1};
    /* golden masked fill: the most negative finite value of the storage type */
    r->var.mask_fill = o->store_dtype == TFT_F16 ? -65504.0f : -1e9f;
    if (bug_is(r, BUG_FP16_MASK) && step >= r->o->bug.step)
        r->var.mask_fill = -1e9f; /* overflows fp16 to -inf */
    if (bug_is(r, BUG_CAUSAL_OFFBYONE) && step >= r->o->bug.step)
        r->var.causal_offset = 1;
    if (bug_is(r, BUG_PAD_MASK) && step >= r->o->bug.step)
        r->var.combine_pad_mask = 0;
    if (bug_is(r, BUG_NO_SCALE) && step >= r->o->bug.step)
        r->var.scale_scores = 0;
}

static int setup_data(run *r)
{
    const train_opts *o = r->o;
    int e = o->data ? data_corpus_open_file(&r->corpus, o->data, 0, r->err, sizeof(r->err))
                    : data_corpus_synthetic(&r->corpus, o->seed, r->err, sizeof(r->err));
    if (e)
        return e;
    unsigned flags = bug_is(r, BUG_DP_SHARD) ? DATA_SHARD_SAME : 0;
    e = data_loader_init(&r->loader, r->corpus, DATA_TRAIN, r->B, r->T, r->d->rank, r->d->world, flags,
                         r->err, sizeof(r->err));
    if (e)
        return e;
    size_t n = (size_t)r->B * (size_t)r->T;
    r->tokens = calloc(n, sizeof(int32_t));
    r->targets = calloc(n, sizeof(int32_t));
    r->loss_mask = calloc(n, sizeof(float));
    r->pad = calloc(n, 1);
    return r->tokens && r->targets && r->loss_mask && r->pad ? 0 : -ENOMEM;
}

/* Every parameter's PREFIX.P (names.h) from the block at base. */
static void record_block(run *r, const char *prefix, const float *base)
{
    for (int i = 0; i < r->m.nparams; i++) {
        const gpt_param *p = &r->m.params_info[i];
        gpt_param_names pn;
        gpt_param_names_init(&pn, prefix, p->name);
        rec_tensor(r->rec, pn.name, TFT_F32, base + p->offset, p->ndim, p->shape, pn.inputs, pn.n_inputs);
    }
}

/* Parameters at initialisation: seeded per rank; the golden run broadcasts
 * rank 0's so all ranks start equal (dp-nosync forgets to). */
static int setup_model(run *r)
{
    gpt_config cfg = {.vocab = TFT_VOCAB, .max_seq = r->o->seq, .layers = r->o->layers,
                      .channels = r->o->d_model, .heads = r->o->heads};
    /* with the CUDA backend the host model holds the parameters only (its
     * activations, sized (1,1), are unused) */
    int cuda = r->o->backend == TRAIN_BACKEND_CUDA;
    int e = gpt_init(&r->m, &cfg, cuda ? 1 : r->B, cuda ? 1 : r->T, r->o->seed + (uint64_t)r->d->rank * 1000003u);
    if (e) {
        snprintf(r->err, sizeof(r->err), "cannot build the model (layers %d, d_model %d, heads %d, seq %d): %s",
                 cfg.layers, cfg.channels, cfg.heads, cfg.max_seq,
                 e == -EINVAL ? "d_model must be a multiple of heads, all sizes >= 1" : strerror(-e));
        return e;
    }
    if (bug_is(r, BUG_POS_ZERO)) {
        const gpt_param *wpe = gpt_param_find(&r->m, GPT_N_WPE);
        memset(r->m.params + wpe->offset, 0, wpe->count * sizeof(float));
    }
    return 0;
}

static int sync_initial_params(run *r)
{
    if (bug_is(r, BUG_DP_NOSYNC) || r->d->world == 1)
        return 0;
    return dist_bcast(r->d, r->m.params, r->m.num_params);
}

/* TFTRACE_PERTURB (tftrace --perturb): the parameters training starts
 * from, each one unit in the last place away, on every rank alike (after
 * the broadcast: dp-nosync's ranks flip their own). Only a fresh start:
 * a resumed run continues the checkpoint's parameters as they were saved.
 * Nothing on stdout, which runs compare bit for bit. */
static void perturb_params(run *r)
{
    if (!r->o->perturb)
        return;
    gpt_perturb_params(&r->m);
    if (r->d->rank == 0)
        fprintf(stderr, "tftrain: TFTRACE_PERTURB: the last mantissa bit of every parameter flipped\n");
}

static void ckpt_tensors(run *r, ckpt_tensor *t, bool load_moments)
{
    t[0] = (ckpt_tensor){"params", r->m.params, r->m.num_params};
    t[1] = (ckpt_tensor){"adam.m", load_moments ? r->m.m : NULL, r->m.num_params};
    t[2] = (ckpt_tensor){"adam.v", load_moments ? r->m.v : NULL, r->m.num_params};
}

static int resume(run *r)
{
    char path[4096], cfg[1024];
    struct stat sb;
    int e = 0;
    if (stat(r->o->resume, &sb) == 0 && S_ISREG(sb.st_mode)) /* a checkpoint file */
        snprintf(path, sizeof(path), "%s", r->o->resume);
    else /* a directory: its newest checkpoint */
        e = ckpt_find_latest(r->o->resume, path, sizeof(path), r->err, sizeof(r->err));
    if (e)
        return e;
    ckpt_tensor t[3];
    ckpt_tensors(r, t, !bug_is(r, BUG_CKPT_OPTIM)); /* ckpt-optim: moments not restored */
    ckpt_meta meta;
    config_text(r, cfg, sizeof(cfg));
    e = ckpt_load(path, cfg, t, 3, &meta, r->err, sizeof(r->err));
    if (e)
        return e;
    r->step0 = meta.step;
    memcpy(r->rng.s, meta.rng, sizeof(r->rng.s));
    if (!bug_is(r, BUG_CKPT_DATA)) /* ckpt-data: the cursor starts over */
        data_cursor_set(&r->loader, meta.data_cursor);
    rec_checkpoint(TFT_CKPT_RESUME, meta.step, path, NULL);
    if (r->d->rank == 0 && !r->o->quiet)
        printf("resumed from %s at step %lld\n", path, (long long)meta.step);
    return 0;
}

static int save_ckpt(run *r, int64_t next_step)
{
    if (r->d->rank != 0)
        return 0;
    if (r->cu && cuda_run_download(r->cu, &r->m) < 0) { /* the device's parameters and moments */
        snprintf(r->err, sizeof(r->err), "checkpoint at step %lld: %s", (long long)next_step,
                 cuda_run_error(r->cu));
        return -EIO;
    }
    ckpt_meta meta = {.step = next_step, .data_cursor = data_cursor_get(&r->loader)};
    memcpy(meta.rng, r->rng.s, sizeof(meta.rng));
    config_text(r, meta.config, sizeof(meta.config));
    ckpt_tensor t[3];
    ckpt_tensors(r, t, true);
    char path[4096], recipe[4200];
    int e = ckpt_save(r->o->ckpt_dir, &meta, t, 3, path, sizeof(path), r->err, sizeof(r->err));
    if (e)
        return e;
    /* appended to the command line by `tftrace replay`: {path} is this
     * checkpoint, {scratch} a directory of the replay's own (so the replay
     * does not write over this run's checkpoints) */
    snprintf(recipe, sizeof(recipe), "--resume {path} --ckpt-dir {scratch}");
    rec_checkpoint(TFT_CKPT_SAVE, next_step, path, recipe);
    return 0;
}

/* Learning rate: linear warm-up over `warmup` steps, then cosine decay to
 * 10% at the last step. no-warmup skips the warm-up. */
static float lr_at(const run *r, int64_t step)
{
    const train_opts *o = r->o;
    int warm = bug_is(r, BUG_NO_WARMUP) ? 0 : o->warmup;
    if (step < warm)
        return o->lr * (float)(step + 1) / (float)warm;
    double span = (double)(o->steps - warm);
    double p = span > 0 ? (double)(step - warm) / span : 1.0;
    if (p > 1)
        p = 1;
    return (float)(o->lr * (0.1 + 0.9 * 0.5 * (1.0 + cos(M_PI * p))));
}

/* Rows shortened to T-1 columns (short-batch): the batch the data bug makes. */
static void drop_last_column(int32_t *x, int B, int T)
{
    for (int b = 0; b < B; b++)
        memmove(x + (size_t)b * (T - 1), x + (size_t)b * T, (size_t)(T - 1) * sizeof(int32_t));
}

/* Loads, breaks (bug zoo), records and checks this step's batch. */
static int load_batch(run *r, int64_t step)
{
    int B = r->B, T = r->T;
    size_t n = (size_t)B * T;
    int e = data_loader_next(&r->loader, r->tokens, r->targets, r->loss_mask);
    if (e) {
        snprintf(r->err, sizeof(r->err), "step %lld: cannot read a batch: %s", (long long)step, strerror(-e));
        return e;
    }
    if (bug_is(r, BUG_LABEL_SHIFT)) /* targets are the current token, not the next */
        memcpy(r->targets, r->tokens, n * sizeof(int32_t));
    if (bug_is(r, BUG_LOSS_PAD)) /* padding positions count in the loss */
        for (size_t i = 0; i < n; i++)
            r->loss_mask[i] = 1.0f;
    if (bug_at(r, BUG_TOKEN_OOB, step))
        data_corrupt_token(r->tokens, n, (uint64_t)step);
    int Tb = T;
    if (bug_at(r, BUG_SHORT_BATCH, step)) { /* the last batch came one column short */
        Tb = T - 1;
        drop_last_column(r->tokens, B, T);
        drop_last_column(r->targets, B, T);
    }
    int64_t shape[2] = {B, Tb};
    rec_tensor(r->rec, GPT_N_TOKENS, TFT_I32, r->tokens, 2, shape, NULL, 0);
    rec_tensor(r->rec, GPT_N_TARGETS, TFT_I32, r->targets, 2, shape, (const char *[]){GPT_N_TOKENS}, 1);
    rec_tensor(r->rec, GPT_N_LOSS_MASK, TFT_F32, r->loss_mask, 2, shape, (const char *[]){GPT_N_TARGETS}, 1);
    if (Tb != T) {
        snprintf(r->err, sizeof(r->err), "step %lld: shape mismatch: tokens is (%d, %d) but the model takes (%d, %d)",
                 (long long)step, B, Tb, B, T);
        return -EINVAL;
    }
    char msg[256];
    if (data_check_tokens(r->tokens, B, T, msg, sizeof(msg)) < 0) {
        snprintf(r->err, sizeof(r->err), "step %lld: tokens: %s", (long long)step, msg);
        return -ERANGE;
    }
    for (size_t i = 0; i < n; i++)
        r->pad[i] = r->tokens[i] != TFT_PAD;
    return 0;
}

/* The fused statistics' state (allocated once); NULL when out of memory,
 * and the runtime then records unfused. */
static fused *fused_get(run *r)
{
    if (r->fs)
        return r->fs;
    size_t np = (size_t)r->m.nparams;
    fused *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->grad = calloc(4 * np, sizeof(tft_stats));
    f->ok = calloc(np, sizeof(bool));
    if (!f->grad || !f->ok) {
        free(f->grad);
        free(f->ok);
        free(f);
        return NULL;
    }
    f->m = f->grad + np;
    f->v = f->m + np;
    f->p = f->v + np;
    r->fs = f;
    return f;
}

static void fused_free(fused *f)
{
    if (f) {
        free(f->grad);
        free(f->ok);
    }
    free(f);
}

/* Every parameter's PREFIX.P from the statistics st (fused), or from the
 * data at base where they did not come out. */
static void record_block_stats(run *r, const char *prefix, const tft_stats *st, const float *base, int mode)
{
    for (int i = 0; i < r->m.nparams; i++) {
        const gpt_param *p = &r->m.params_info[i];
        gpt_param_names pn;
        gpt_param_names_init(&pn, prefix, p->name);
        if (r->fs->ok[i])
            rec_tensor_stats(r->rec, pn.name, TFT_F32, &st[i], mode, p->ndim, p->shape, pn.inputs, pn.n_inputs);
        else
            rec_tensor(r->rec, pn.name, TFT_F32, base + p->offset, p->ndim, p->shape, pn.inputs, pn.n_inputs);
    }
}

/* Global norm of the gradients; nondet sums the parameters in reverse
 * order. With mode >= 0 (fused) each parameter's gradient statistics are
 * computed in the same sweep, piece by piece, into f->grad (the sum of
 * squares continues across pieces: the same norm, bit for bit). */
static double grad_norm(run *r, fused *f, int mode)
{
    float s = 0; /* float: the summation order shows in the last bit (nondet) */
    int np = r->m.nparams;
    for (int k = 0; k < np; k++) {
        int idx = bug_is(r, BUG_NONDET) ? np - 1 - k : k;
        const gpt_param *p = &r->m.params_info[idx];
        const float *g = r->m.grads + p->offset;
        if (mode < 0) {
            s += op_sum_squares(g, p->count);
            continue;
        }
        int e = tft_stats_stream_begin(&f->s[0], TFT_F32, p->count, mode);
        double acc = 0.0;
        for (size_t i = 0; i < p->count; i += FUSED_PIECE) {
            size_t n = p->count - i < FUSED_PIECE ? p->count - i : FUSED_PIECE;
            if (!e)
                e = tft_stats_stream_update(&f->s[0], g + i, n);
            acc = op_sum_squares_acc(acc, g + i, n);
        }
        s += acc;
        f->ok[idx] = !e && tft_stats_stream_finish(&f->s[0], g, &f->grad[idx]) == 0;
    }
    return sqrtf(s);
}

/* AdamW, with mode >= 0 the statistics of each parameter's new m, v and
 * values computed piece by piece right after the piece's update (the
 * update is element-wise: the same values as one op_adamw call). */
static void adamw(run *r, float lr, int64_t step, fused *f, int mode)
{
    gpt_model *m = &r->m;
    float wd = r->o->weight_decay;
    int t = (int)(step + 1);
    if (mode < 0) {
        op_adamw(m->params, m->grads, m->m, m->v, m->num_params, lr, 0.9f, 0.95f, 1e-8f, wd, t);
        return;
    }
    for (int k = 0; k < m->nparams; k++) {
        const gpt_param *p = &m->params_info[k];
        float *pp = m->params + p->offset, *mm = m->m + p->offset, *vv = m->v + p->offset;
        const float *gg = m->grads + p->offset;
        int e = 0;
        for (int q = 0; q < 3; q++)
            e |= tft_stats_stream_begin(&f->s[q], TFT_F32, p->count, mode);
        for (size_t i = 0; i < p->count; i += FUSED_PIECE) {
            size_t n = p->count - i < FUSED_PIECE ? p->count - i : FUSED_PIECE;
            op_adamw(pp + i, gg + i, mm + i, vv + i, n, lr, 0.9f, 0.95f, 1e-8f, wd, t);
            if (!e)
                e = tft_stats_stream_update(&f->s[0], mm + i, n) | tft_stats_stream_update(&f->s[1], vv + i, n) |
                    tft_stats_stream_update(&f->s[2], pp + i, n);
        }
        f->ok[k] = !e && tft_stats_stream_finish(&f->s[0], mm, &f->m[k]) == 0 &&
                   tft_stats_stream_finish(&f->s[1], vv, &f->v[k]) == 0 &&
                   tft_stats_stream_finish(&f->s[2], pp, &f->p[k]) == 0;
    }
}

/* adam.m and adam.v per parameter, then param.*: from the fused
 * statistics (mode >= 0) or the data. */
static void record_moments_fused(run *r, int mode)
{
    fused *f = r->fs;
    for (int i = 0; i < r->m.nparams; i++) {
        const gpt_param *p = &r->m.params_info[i];
        gpt_param_names m, v;
        gpt_param_names_init(&m, GPT_P_ADAM_M, p->name);
        gpt_param_names_init(&v, GPT_P_ADAM_V, p->name);
        if (f->ok[i]) {
            rec_tensor_stats(r->rec, m.name, TFT_F32, &f->m[i], mode, p->ndim, p->shape, m.inputs, m.n_inputs);
            rec_tensor_stats(r->rec, v.name, TFT_F32, &f->v[i], mode, p->ndim, p->shape, v.inputs, v.n_inputs);
        } else {
            rec_tensor(r->rec, m.name, TFT_F32, r->m.m + p->offset, p->ndim, p->shape, m.inputs, m.n_inputs);
            rec_tensor(r->rec, v.name, TFT_F32, r->m.v + p->offset, p->ndim, p->shape, v.inputs, v.n_inputs);
        }
    }
    record_block_stats(r, GPT_P_PARAM, f->p, r->m.params, mode);
}

/* adam.m and adam.v per parameter, then param.* */
static void record_moments(run *r)
{
    for (int i = 0; i < r->m.nparams; i++) {
        const gpt_param *p = &r->m.params_info[i];
        gpt_param_names m, v;
        gpt_param_names_init(&m, GPT_P_ADAM_M, p->name);
        gpt_param_names_init(&v, GPT_P_ADAM_V, p->name);
        rec_tensor(r->rec, m.name, TFT_F32, r->m.m + p->offset, p->ndim, p->shape, m.inputs, m.n_inputs);
        rec_tensor(r->rec, v.name, TFT_F32, r->m.v + p->offset, p->ndim, p->shape, v.inputs, v.n_inputs);
    }
    record_block(r, GPT_P_PARAM, r->m.params);
}

/* Gradient all-reduce (mean); dp-mean sums, dp-skip's last rank skips it once. */
static int reduce_grads(run *r, int64_t step)
{
    if (bug_at(r, BUG_DP_SKIP, step) && r->d->rank == r->d->world - 1)
        return 0;
    return dist_allreduce(r->d, 0, r->m.grads, r->m.num_params, !bug_is(r, BUG_DP_MEAN));
}

/* SGD with momentum 0.9 (the velocity kept in m): unlike AdamW, its step
 * grows with the gradient, which is what clipping exists for. */
static void sgd_momentum(gpt_model *m, float lr)
{
    for (size_t i = 0; i < m->num_params; i++) {
        m->m[i] = 0.9f * m->m[i] + m->grads[i];
        m->params[i] -= lr * m->m[i];
    }
}

typedef struct step_stats {
    float loss;
    double norm;
    float lr;
} step_stats;

/* The CUDA backend's part of a step, from zeroing the gradients on
 * (train_cuda.h); loss and norm are read only for progress lines. */
static int cuda_step(run *r, int64_t step, float denom, step_stats *st)
{
    st->lr = lr_at(r, step);
    cuda_step_in in = {.step = step, .var = &r->var, .tokens = r->tokens, .targets = r->targets,
                       .loss_mask = r->loss_mask, .pad = r->pad, .denom = denom, .lr = st->lr,
                       .zero_grad = !bug_is(r, BUG_GRAD_ACCUM) || step == r->step0,
                       .reduce = !(bug_at(r, BUG_DP_SKIP, step) && r->d->rank == r->d->world - 1),
                       .mean = !bug_is(r, BUG_DP_MEAN), .clip = !bug_is(r, BUG_NO_CLIP) && r->o->clip > 0,
                       .reverse_norm = bug_is(r, BUG_NONDET)};
    int e = cuda_run_step(r->cu, &in);
    if (e)
        snprintf(r->err, sizeof(r->err), "step %lld: %s", (long long)step, cuda_run_error(r->cu));
    return e;
}

static int train_step(run *r, int64_t step, step_stats *st)
{
    if (bug_is(r, BUG_LEAK) && step >= r->o->bug.step) { /* a buffer kept every step */
        size_t sz = 1u << 20;
        char *p = malloc(sz);
        if (p) {
            memset(p, 1, sz);
            rec_alloc(p, sz, "tftrain:leak_buffer");
        }
    }
    int e = load_batch(r, step);
    if (e)
        return e;
    size_t n = (size_t)r->B * r->T;
    double cnt[2] = {0, 0};
    for (size_t i = 0; i < n; i++)
        cnt[0] += r->loss_mask[i];
    if ((e = dist_allreduce_f64(r->d, cnt, 1)) < 0)
        return e;
    float denom = cnt[0] > 0 ? (float)(cnt[0] / r->d->world) : 1.0f;
    if (r->cu)
        return cuda_step(r, step, denom, st);
    if (!bug_is(r, BUG_GRAD_ACCUM) || step == r->step0)
        gpt_zero_grad(&r->m);
    int fmode = rec_fused_mode(r->rec, step);
    fused *f = fmode >= 0 ? fused_get(r) : NULL;
    if (!f)
        fmode = -1;
    gpt_set_fused_stats(&r->m, fmode, rec_cb_stats); /* -ENOMEM: the forward records unfused */
    st->loss = gpt_forward(&r->m, &r->var, r->tokens, r->targets, r->loss_mask, r->pad, denom, rec_cb, r->rec);
    gpt_backward(&r->m, &r->var, r->tokens, r->targets, r->loss_mask, denom);
    if ((e = reduce_grads(r, step)) < 0)
        return e;
    if (fmode < 0) {
        record_block(r, GPT_P_GRAD, r->m.grads);
        st->norm = grad_norm(r, NULL, -1);
    } else { /* the statistics in the norm's sweep, recorded after it in the same order */
        st->norm = grad_norm(r, f, fmode);
        record_block_stats(r, GPT_P_GRAD, f->grad, r->m.grads, fmode);
    }
    float gn = (float)st->norm;
    int64_t one = 1;
    rec_tensor(r->rec, GPT_N_GRAD_NORM, TFT_F32, &gn, 1, &one, (const char *[]){GPT_N_LOSS}, 1);
    if (!bug_is(r, BUG_NO_CLIP) && r->o->clip > 0 && st->norm > r->o->clip)
        op_scale(r->m.grads, r->m.num_params, (float)(r->o->clip / st->norm));
    st->lr = lr_at(r, step);
    rec_tensor(r->rec, GPT_N_LR, TFT_F32, &st->lr, 1, &one, NULL, 0);
    if (r->o->sgd) {
        sgd_momentum(&r->m, st->lr);
        record_moments(r);
    } else if (fmode < 0) {
        adamw(r, st->lr, step, NULL, -1);
        record_moments(r);
    } else {
        adamw(r, st->lr, step, f, fmode);
        record_moments_fused(r, fmode);
    }
    double ls[1] = {(double)st->loss};
    if ((e = dist_allreduce_f64(r->d, ls, 1)) < 0)
        return e;
    st->loss = (float)(ls[0] / r->d->world);
    return 0;
}

/* Exact-match accuracy of greedy decoding on k held-out equations. */
static double eval_accuracy(run *r, int k, int *correct_out)
{
    int B = r->B, T = r->T, correct = 0, total = 0;
    int32_t *tok = calloc((size_t)B * T, sizeof(int32_t));
    data_eval_example *ex = calloc((size_t)B, sizeof(*ex));
    int32_t gen[64][DATA_EVAL_MAX_NEW];
    if (!tok || !ex || B > 64) {
        free(tok);
        free(ex);
        return -1;
    }
    for (int base = 0; base < k; base += B) {
        int rows = k - base < B ? k - base : B;
        int len[64];
        for (size_t i = 0; i < (size_t)B * T; i++)
            tok[i] = TFT_PAD;
        for (int b = 0; b < rows; b++) {
            if (data_eval_example_get(r->corpus, (uint64_t)(base + b), &ex[b]) < 0)
                goto out;
            len[b] = ex[b].prompt_len;
            memcpy(tok + (size_t)b * T, ex[b].prompt, (size_t)len[b] * sizeof(int32_t));
        }
        for (int g = 0; g < DATA_EVAL_MAX_NEW; g++) {
            const float *lg;
            if (r->cu) {
                if (cuda_run_logits(r->cu, &r->var, tok, &lg) < 0)
                    goto out;
            } else {
                gpt_forward(&r->m, &r->var, tok, NULL, NULL, NULL, 1.0f, NULL, NULL);
                lg = gpt_logits(&r->m);
            }
            for (int b = 0; b < rows; b++) {
                int pos = len[b] - 1 < T ? len[b] - 1 : T - 1, best = 0;
                const float *row = lg + ((size_t)b * T + pos) * TFT_VOCAB;
                for (int v = 1; v < TFT_VOCAB; v++)
                    best = row[v] > row[best] ? v : best;
                gen[b][g] = best;
                if (len[b] < T)
                    tok[(size_t)b * T + len[b]++] = best;
            }
        }
        for (int b = 0; b < rows; b++, total++)
            correct += data_answer_correct(ex[b].answer, gen[b], DATA_EVAL_MAX_NEW);
    }
out:
    free(tok);
    free(ex);
    *correct_out = correct;
    return total ? (double)correct / total : -1;
}

static void run_free(run *r)
{
    cuda_run_free(r->cu); /* first: emits the records still queued */
    fused_free(r->fs);
    tft_free(r->m.params);
    gpt_free(&r->m);
    data_loader_free(&r->loader);
    data_corpus_free(r->corpus);
    rec_map_free(r->rec);
    free(r->tokens);
    free(r->targets);
    free(r->loss_mask);
    free(r->pad);
}

/* After the host model is set up (e: its status): the CUDA backend takes
 * its parameters and moments. */
static int cuda_setup(run *r, int e)
{
    if (e || r->o->backend != TRAIN_BACKEND_CUDA)
        return e;
    return cuda_run_new(&r->cu, r->o, r->d, &r->m, r->rec, r->err, sizeof(r->err));
}

static int setup(run *r)
{
    int e = setup_data(r);
    if (!e)
        e = setup_model(r);
    if (e)
        return e;
    tft_alloc(r->m.params, r->m.num_params * 4 * sizeof(float), "tftrain:params+grads+adam");
    tft_rng_seed(&r->rng, r->o->seed);
    if (r->o->resume) {
        if (r->o->perturb && r->d->rank == 0)
            fprintf(stderr, "tftrain: TFTRACE_PERTURB: resumed from a checkpoint, nothing flipped (only a "
                            "fresh start is perturbed)\n");
        return cuda_setup(r, resume(r));
    }
    tft_step_begin(0);
    e = sync_initial_params(r);
    perturb_params(r);
    record_block(r, "", r->m.params); /* at initialisation (after the broadcast), before the first forward */
    return cuda_setup(r, e);
}

static void report(const run *r, int64_t step, const step_stats *st, double tok_s)
{
    printf("step %5lld | loss %.4f | grad norm %.4f | lr %.2e | %.0f tok/s\n", (long long)step, st->loss,
           st->norm, st->lr, tok_s);
    fflush(stdout);
}

static void maybe_eval(run *r, int64_t step)
{
    if (r->o->eval_every <= 0 || (step + 1) % r->o->eval_every || r->d->rank != 0 || r->o->data)
        return;
    int correct = 0;
    double acc = eval_accuracy(r, 64, &correct);
    if (acc >= 0 && !r->o->quiet)
        printf("eval  %5lld | accuracy %.1f%% (%d/64 held-out equations)\n", (long long)step, 100 * acc, correct);
}

int train_run(const train_opts *o, dist *d)
{
    run r = {.o = o, .d = d, .B = o->batch, .T = o->seq};
    r.rec = rec_map_new();
    variant_at(&r, r.step0);
    int e = r.rec ? setup(&r) : -ENOMEM;
    double t0 = now_s();
    int64_t last = r.step0;
    for (int64_t step = r.step0; !e && step < o->steps; step++) {
        if (step > 0 || o->resume)
            rec_step(1, step);
        variant_at(&r, step);
        step_stats st;
        e = train_step(&r, step, &st);
        rec_step(0, step);
        if (e)
            break;
        if (o->ckpt_dir && o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0 && (e = save_ckpt(&r, step + 1)))
            break;
        if (d->rank == 0 && !o->quiet && ((step + 1) % o->log_every == 0 || step + 1 == o->steps)) {
            double t = now_s();
            if (r.cu && (e = cuda_run_read(r.cu, &st.loss, &st.norm)) < 0) {
                snprintf(r.err, sizeof(r.err), "%s", cuda_run_error(r.cu));
                break;
            }
            report(&r, step, &st, (double)(step + 1 - last) * r.B * r.T * d->world / (t - t0));
            t0 = t;
            last = step + 1;
        }
        maybe_eval(&r, step);
    }
    if (e)
        fprintf(stderr, "tftrain: rank %d: %s\n", d->rank, r.err[0] ? r.err : strerror(-e));
    run_free(&r);
    return e ? 1 : 0;
}

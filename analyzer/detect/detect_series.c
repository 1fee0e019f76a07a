/*
 * detect_series.c — the series store of a rank (detect_internal.h): one
 * series per tensor name, created at its first record, with its classes
 * (DETECT_C_*: what the name is, for the rule table), its first record, a
 * downsampled history and the summaries every rule reads; and the name
 * helpers the rules share (suffixes, layers, shapes as text).
 *
 * Bounds: at most DETECT_MAX_SERIES series per rank (the map refuses more:
 * their records are not followed), DETECT_HIST history points each (the
 * stride doubles when it fills). Input is untrusted: names are cut to the
 * series' buffer; the dispatcher checks ndim before a record gets here.
 * The store calls nothing of the rules or the dispatcher.
 */
#include "detect_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool detect_ends(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    if (n == k)
        return !strcmp(name, suffix);
    return n > k && name[n - k - 1] == '.' && !strcmp(name + n - k, suffix);
}

const char *detect_shape_text(const int64_t *shape, int ndim, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* The layer a name belongs to: "L3." at the start, or a ".blocks.3.",
 * ".layers.3.", ".layer.3.", ".h.3." component (PyTorch module paths);
 * *pos and *len locate its digits (layer-growth names the layer below). */
int detect_layer_span(const char *name, size_t *pos, size_t *len)
{
    const char *p = name;
    for (const char *q = name; *q; q++)
        if (*q == '.' && q[1] == 'L' && q[2] >= '0' && q[2] <= '9')
            p = q + 1; /* grad.L0.qkv.w, adam.m.L1.fc.w */
    if (p[0] == 'L' && p[1] >= '0' && p[1] <= '9') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (*end == '.' && v < 1000000) {
            *pos = (size_t)(p + 1 - name);
            *len = (size_t)(end - (p + 1));
            return (int)v;
        }
    }
    static const char *const comp[] = {".blocks.", ".layers.", ".layer.", ".h."};
    for (size_t i = 0; i < sizeof(comp) / sizeof(comp[0]); i++) {
        const char *q = strstr(name, comp[i]);
        if (q && q[strlen(comp[i])] >= '0' && q[strlen(comp[i])] <= '9') {
            char *end;
            const char *d = q + strlen(comp[i]);
            long v = strtol(d, &end, 10);
            if ((*end == '.' || !*end) && v < 1000000) {
                *pos = (size_t)(d - name);
                *len = (size_t)(end - d);
                return (int)v;
            }
        }
    }
    return -1;
}

static int parse_layer(const char *name)
{
    size_t pos, len;
    return detect_layer_span(name, &pos, &len);
}

/* An activation: not a parameter, gradient, optimizer state, scalar, data
 * or mask tensor (absmax-growth, layer-growth judge these). */
static bool is_activation(const detect_series *s)
{
    static const char *const skip[] = {"param.", "adam.", "grad.", "grad_norm", "lr", "sgd.", "loss", "buffer.",
                                       "input.", "input[", "amp.", "rmsprop.", "adagrad."};
    for (size_t k = 0; k < sizeof(skip) / sizeof(skip[0]); k++)
        if (!strncmp(s->name, skip[k], strlen(skip[k])))
            return false;
    return s->first.numel > 1 && s->mode >= TFT_STATS_FULL && !detect_ends(s->name, "tokens") &&
           !detect_ends(s->name, "targets") && !detect_ends(s->name, "loss_mask") &&
           !detect_ends(s->name, "attn.mask") && !detect_ends(s->name, "attn.probs");
}

detect_series *detect_find(detect_rank *c, const char *name)
{
    for (int i = 0; i < c->ns; i++)
        if (!c->s[i].eval && !strcmp(c->s[i].name, name))
            return &c->s[i];
    return NULL;
}

detect_series *detect_series_get(detect_rank *c, const tft_reader *r, uint64_t id, bool eval, int *e)
{
    void *v;
    int k = tft_u64map_insert(&c->idx, eval ? id ^ DETECT_EVAL_KEY : id, NULL, NULL, &v);
    if (k == -ENOSPC) /* past DETECT_MAX_SERIES: not followed */
        return NULL;
    if (k < 0) {
        *e = k;
        return NULL;
    }
    if (k == 0)
        return &c->s[*(uint32_t *)v - 1];
    if (c->ns == c->caps) {
        int nc = c->caps ? 2 * c->caps : 64;
        detect_series *ns = realloc(c->s, (size_t)nc * sizeof(*ns));
        if (!ns) {
            tft_u64map_remove(&c->idx, v);
            *e = -ENOMEM;
            return NULL;
        }
        c->s = ns;
        c->caps = nc;
    }
    detect_series *s = &c->s[c->ns];
    *s = (detect_series){.id = id, .eval = eval, .last_step = TFT_STEP_NONE, .first_step = TFT_STEP_NONE,
                         .stride = 1, .nonfinite_step = TFT_STEP_NONE,
                         .param = {.change_step = TFT_STEP_NONE, .frozen_step = TFT_STEP_NONE},
                         .token_range = {.run_max = -INFINITY, .neg_step = TFT_STEP_NONE},
                         .absmax_growth = {.step = TFT_STEP_NONE},
                         .precision_risk = {.step = TFT_STEP_NONE, .max_step = TFT_STEP_NONE}};
    if (!(s->hist = malloc(DETECT_HIST * sizeof(*s->hist)))) {
        tft_u64map_remove(&c->idx, v);
        *e = -ENOMEM;
        return NULL;
    }
    const char *txt = tft_reader_string(r, id);
    snprintf(s->name, sizeof(s->name), "%s", txt ? txt : "?");
    s->layer = parse_layer(s->name);
    *(uint32_t *)v = (uint32_t)++c->ns;
    return s;
}

/* A name of training state (a parameter, a gradient, optimizer state, a
 * buffer, the loss scaler's): never data, a mask or a loss, whatever it
 * ends with (grad.model.loss is the gradient of a module's output). */
static bool is_state(const char *n)
{
    static const char *const pre[] = {"param.", "grad.", "adam.", "sgd.", "rmsprop.", "adagrad.", "buffer.", "amp."};
    for (size_t k = 0; k < sizeof(pre) / sizeof(pre[0]); k++)
        if (!strncmp(n, pre[k], strlen(pre[k])))
            return true;
    return false;
}

/* The classes of s (DETECT_C_*), from its name and its first record. A
 * series of eval-mode records is no data (a validation batch is not a
 * training batch) and no loss. */
static uint32_t classify(const detect_series *s)
{
    const char *n = s->name;
    uint32_t data = 0;
    if (!is_state(n) && !s->eval) {
        data = (detect_ends(n, "tokens") || detect_ends(n, "input_ids") ? DETECT_C_TOKENS : 0) |
               (detect_ends(n, "targets") || detect_ends(n, "labels") ? DETECT_C_TARGETS : 0) |
               (detect_ends(n, "loss_mask") ? DETECT_C_LOSS_MASK : 0) |
               (detect_ends(n, "attention_mask") ? DETECT_C_ATTENTION_MASK : 0);
        /* a root's argument as tftrace --torch names it ("model.input.x",
         * "crossentropyloss.input.target"): an input, whatever its name */
        if (data || !strncmp(n, "input.", 6) || !strncmp(n, "input[", 6) || strstr(n, ".input."))
            data |= DETECT_C_INPUT;
        data |= !strcmp(n, "loss") ? DETECT_C_LOSS : 0;
    }
    return data | (!is_state(n) && detect_ends(n, "attn.mask") ? DETECT_C_CAUSAL_MASK : 0) |
           (detect_ends(n, "attn.probs") ? DETECT_C_PROBS : 0) | (detect_ends(n, "attn.scores") ? DETECT_C_SCORES : 0) |
           (!strcmp(n, "grad_norm") ? DETECT_C_GRAD_NORM : 0) |
           (!strncmp(n, "param.", 6) ? DETECT_C_PARAM : 0) | (!strncmp(n, "grad.", 5) && n[5] ? DETECT_C_GRAD : 0) |
           (!strncmp(n, "adam.m.", 7) ? DETECT_C_ADAM_M : 0) | (!strncmp(n, "buffer.", 7) ? DETECT_C_BUFFER : 0) |
           (is_activation(s) ? DETECT_C_ACTIVATION : 0);
}

/* Keeps a point every stride records; a full history drops every other
 * point and doubles the stride, so it spans the whole run. */
static void hist_push(detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!s->hist || (s->nrec - 1) % s->stride)
        return;
    if (s->nh == DETECT_HIST) {
        for (int i = 0; i < DETECT_HIST / 2; i++)
            s->hist[i] = s->hist[2 * i];
        s->nh = DETECT_HIST / 2;
        s->stride *= 2;
        if ((s->nrec - 1) % s->stride)
            return;
    }
    const tft_stats *st = &t->stats;
    s->hist[s->nh++] = (detect_point){.step = step, .v = st->mean, .l2 = st->l2, .finite = finite};
}

void detect_series_count(detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (s->nrec++ == 0) {
        s->first_dtype = t->dtype;
        s->first_ndim = t->ndim;
        s->mode = t->mode;
        memcpy(s->first_shape, t->shape, sizeof(s->first_shape));
        s->first_step = step;
        s->first = t->stats;
        s->vmax = -INFINITY;
        s->vmin = INFINITY;
        s->cls = classify(s);
    }
    s->last_step = step;
    if (!finite && !s->nonfinite_seen) {
        s->nonfinite_seen = true;
        s->nonfinite_step = step;
    }
    hist_push(s, t, step, finite);
    if (finite && t->mode >= TFT_STATS_FULL && t->stats.numel == 1) {
        double v = t->stats.mean;
        s->vmax = v > s->vmax ? v : s->vmax;
        s->vmin = v < s->vmin ? v : s->vmin;
        s->nvals++;
    }
    s->step_absmax = finite && t->mode >= TFT_STATS_FULL ? t->stats.absmax : 0;
}

void detect_series_keep(detect_series *s, const tft_rec_tensor *t, bool finite)
{
    if (finite && t->mode >= TFT_STATS_FULL) {
        s->prev_l2 = t->stats.l2;
        s->prev_v = t->stats.mean;
        s->have_prev = true;
    }
}

bool detect_zero_is_choice(const char *n)
{
    return !strncmp(n, "param.", 6) && (strstr(n, "emb") || strstr(n, "wpe") || strstr(n, "pos") || strstr(n, "token"));
}

const detect_series *detect_initial(detect_rank *c, const detect_series *param)
{
    const detect_series *x = detect_find(c, param->name + 6);
    if (x && x->first_step <= param->first_step)
        return x;
    return param->param.initial ? param : NULL;
}

const detect_series *detect_first_nonfinite(const detect_rank *c)
{
    const detect_series *nf = NULL;
    for (int i = 0; i < c->ns; i++)
        if (c->s[i].nonfinite_seen && (!nf || c->s[i].nonfinite_step < nf->nonfinite_step))
            nf = &c->s[i];
    return nf;
}

void detect_pick_offer(detect_pick *p, const detect_series *s,
                       bool (*before)(const detect_series *a, const detect_series *b))
{
    if (p->s && !(before && before(s, p->s))) {
        p->others++;
        return;
    }
    p->others += p->s != NULL;
    p->s = s;
}

void detect_series_free_hist(detect_rank *c)
{
    for (int i = 0; i < c->ns; i++) {
        free(c->s[i].hist);
        c->s[i].hist = NULL;
    }
}

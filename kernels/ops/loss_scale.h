/*
 * loss_scale.h — dynamic loss scaling for fp16 training, the rule of
 * torch.cuda.amp.GradScaler: the loss gradient is multiplied by a scale S
 * (a power of two, so scaling and unscaling are exact); a step whose
 * gradients hold an Inf or NaN is skipped and halves S; after
 * growth_interval finite steps in a row S doubles.
 *
 * Header-only so the CUDA backend runs it in a one-thread kernel on the
 * device (the state lives there: no host round trip per step) and the host
 * tests run the very same code.
 */
#ifndef TFT_LOSS_SCALE_H
#define TFT_LOSS_SCALE_H

#if defined(__CUDACC__)
#define TFT_HD __host__ __device__
#else
#define TFT_HD
#endif

#define TFT_LOSS_SCALE_INIT 65536.0f    /* 2^16, as GradScaler */
#define TFT_LOSS_SCALE_MAX 16777216.0f  /* 2^24: growth stops there */
#define TFT_LOSS_SCALE_MIN 1.0f         /* backoff stops there (a step that
                                         * overflows unscaled keeps being
                                         * skipped: visible as a flat loss) */
#define TFT_LOSS_SCALE_INTERVAL 2000

typedef struct tft_loss_scale {
    float scale;         /* S: what the loss gradient is multiplied by */
    int good_steps;      /* finite steps since S last changed */
    int growth_interval; /* finite steps in a row before S doubles */
    int skipped;         /* steps skipped so far */
} tft_loss_scale;

static inline TFT_HD void tft_loss_scale_init(tft_loss_scale *s, float scale, int growth_interval)
{
    s->scale = scale;
    s->good_steps = 0;
    s->growth_interval = growth_interval > 0 ? growth_interval : 1;
    s->skipped = 0;
}

/* After a step: found_inf != 0 when its gradients held an Inf or NaN (the
 * step was skipped). */
static inline TFT_HD void tft_loss_scale_update(tft_loss_scale *s, int found_inf)
{
    if (found_inf) {
        s->skipped++;
        s->good_steps = 0;
        s->scale = s->scale * 0.5f < TFT_LOSS_SCALE_MIN ? TFT_LOSS_SCALE_MIN : s->scale * 0.5f;
        return;
    }
    if (++s->good_steps >= s->growth_interval) {
        s->good_steps = 0;
        if (s->scale * 2.0f <= TFT_LOSS_SCALE_MAX)
            s->scale *= 2.0f;
    }
}

#endif

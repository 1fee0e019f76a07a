/* Builds without the CUDA toolkit: no device, ever; the CUDA backend's
 * entry points (train_cuda.h) say so. */
#include "tft_stats_cuda.h"
#include "train_cuda.h"

#include <errno.h>
#include <stdio.h>

int tft_stats_cuda_available(void) { return 0; }

int cuda_probe(char *why, size_t len)
{
    snprintf(why, len, "this tftrain was built without CUDA");
    return 0;
}

int cuda_devices(void) { return 0; }

int cuda_run_new(cuda_run **out, const train_opts *o, dist *d, gpt_model *host, rec_map *rec, char *err,
                 size_t errlen)
{
    (void)o, (void)d, (void)host, (void)rec;
    *out = NULL;
    snprintf(err, errlen, "this tftrain was built without CUDA");
    return -ENOTSUP;
}

void cuda_run_free(cuda_run *c) { (void)c; }
const char *cuda_run_error(const cuda_run *c) { return (void)c, "this tftrain was built without CUDA"; }
int cuda_run_step(cuda_run *c, const cuda_step_in *in) { return (void)c, (void)in, -ENOTSUP; }
int cuda_run_read(cuda_run *c, float *loss, double *norm) { return (void)c, (void)loss, (void)norm, -ENOTSUP; }
int cuda_run_download(cuda_run *c, gpt_model *host) { return (void)c, (void)host, -ENOTSUP; }
int cuda_run_logits(cuda_run *c, const gpt_variant *var, const int32_t *tokens, const float **logits)
{
    return (void)c, (void)var, (void)tokens, (void)logits, -ENOTSUP;
}

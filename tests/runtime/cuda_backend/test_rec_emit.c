/*
 * test_rec_emit.c — tftrain's recording of device tensors (runtime/rec.c,
 * rec_emit_*), without a GPU: tensors and a collective result recorded
 * from statistics "computed on device 3" go into a real trace (TFT_OUTPUT,
 * set by run_rec_emit.sh), which the script reads back with tfdump and
 * checks: device cuda:3, the statistics as given (reduced to the mode),
 * numel from the shape, op inputs linked to earlier tensors by name, the
 * collective's result as an output of its op.
 */
#include <stdio.h>

#include "tft.h"
#include "train.h"

int main(void)
{
    if (!tft_enabled()) {
        fprintf(stderr, "test_rec_emit: recording is off (set TFT_OUTPUT)\n");
        return 2;
    }
    rec_map *m = rec_map_new();
    tft_step_begin(0);
    int32_t tok[4] = {1, 2, 3, 4};
    int64_t s2[2] = {2, 2}, s3[3] = {2, 2, 3};
    rec_tensor(m, "tokens", TFT_I32, tok, 2, s2, NULL, 0);
    tft_stats st = {.numel = 999, .nan = 1, .zero = 2, .under_fp16 = 1, .fingerprint = 0x1234abcd5678ef90ull,
                    .min = -1.5, .max = 2.5, .mean = 0.25, .std = 0.5, .l1 = 3, .l2 = 4, .absmax = 2.5};
    rec_emit_tensor(m, "L0.qkv", TFT_F32, NULL, &st, TFT_STATS_FULL, 3, 3, s3, (const char *[]){"tokens"}, 1);
    rec_emit_tensor(m, "L0.gelu", TFT_F32, NULL, &st, TFT_STATS_HEALTH, 3, 3, s3, (const char *[]){"L0.qkv"}, 1);
    tft_coll_info ci = TFT_COLL_INFO(.name = "ncclAllReduce", .comm = 77, .type = TFT_COLL_ALLREDUCE,
                                     .dtype = TFT_F32, .count = 12, .redop = TFT_REDOP_SUM, .root = -1, .rank = 0,
                                     .nranks = 1);
    int64_t t = tft_coll_enter(&ci);
    rec_emit_coll_exit(t, &ci, NULL, &st, TFT_STATS_FULL, 3);
    tft_step_end(0);
    rec_map_free(m);
    return 0;
}

/*
 * cap_prog.c — a program instrumented with tft.h for the capture tests:
 * steps 0..2, each recording tensors of every dtype with known contents
 * (special values included: NaN with payload, ±Inf, -0, subnormals), a
 * 0-d and an empty tensor, a 1.2 MB tensor (many CAPTURE parts), and an op
 * "sum" whose inputs are t_f32 and big (so its inputs are captured from the
 * recorder's cache). Contents depend on the step.
 *
 *   cap_prog OUTDIR     writes OUTDIR/NAME.bin (raw bytes) and
 *                       OUTDIR/expected.json (name -> npy descr, shape) of
 *                       step 1, as the test expects them captured
 */
#include "tft.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG 300000 /* f32 elements: 1.2 MB, 19 parts */

typedef struct item {
    const char *name, *descr;
    tft_dtype dtype;
    int ndim;
    int64_t shape[3];
    void *data;
    size_t bytes;
} item;

static FILE *json;

static void save(const char *dir, const item *it)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, it->name);
    FILE *f = fopen(path, "wb");
    if (!f || (it->bytes && fwrite(it->data, 1, it->bytes, f) != it->bytes)) {
        perror(path);
        exit(3);
    }
    fclose(f);
    fprintf(json, "%s\"%s\": {\"descr\": \"%s\", \"shape\": [", ftell(json) > 2 ? ", " : "", it->name, it->descr);
    for (int i = 0; i < it->ndim; i++)
        fprintf(json, "%s%lld", i ? ", " : "", (long long)it->shape[i]);
    fprintf(json, "]}");
}

/* Fills the step's contents; returns the items (static storage). */
static item *make(int step, int *n)
{
    static float f32[2 * 3 * 4], big[BIG], sum[4];
    static double f64[7], scalar;
    static uint16_t f16[9], bf16[9];
    static int32_t i32[3 * 5];
    static int64_t i64[4];
    static uint8_t u8[6], b8[5];
    for (int i = 0; i < 24; i++)
        f32[i] = (float)(i - 11) * 0.375f + (float)step;
    uint32_t qnan = 0x7fc01234u; /* NaN with a payload: bytes must survive */
    memcpy(&f32[0], &qnan, 4);
    f32[1] = -0.0f;
    f32[2] = INFINITY;
    f32[3] = -INFINITY;
    f32[4] = 1e-40f; /* subnormal */
    for (int i = 0; i < BIG; i++)
        big[i] = sinf((float)i * 0.001f + (float)step) * 3.0f;
    for (int i = 0; i < 4; i++)
        sum[i] = f32[5 + i] + big[i];
    for (int i = 0; i < 7; i++)
        f64[i] = 1.0 / (i + 1) + step;
    f64[6] = -0.0;
    scalar = 2.5 + step;
    static const uint16_t f16v[9] = {0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e01, 0x8000, 0x0001, 0x7bff, 0x3555};
    static const uint16_t bf16v[9] = {0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc1, 0x8000, 0x0001, 0x7f7f, 0x3eab};
    for (int i = 0; i < 9; i++) {
        f16[i] = (uint16_t)(f16v[i] + (i == 8 ? step : 0));
        bf16[i] = (uint16_t)(bf16v[i] + (i == 8 ? step : 0));
    }
    for (int i = 0; i < 15; i++)
        i32[i] = (i - 7) * 1000003 + step;
    i32[0] = INT32_MIN;
    i32[14] = INT32_MAX;
    for (int i = 0; i < 4; i++)
        i64[i] = ((int64_t)1 << 40) * (i - 2) + step;
    for (int i = 0; i < 6; i++)
        u8[i] = (uint8_t)(250 + i + step);
    for (int i = 0; i < 5; i++)
        b8[i] = (uint8_t)((i + step) & 1);
    static item items[12];
    item v[] = {
        {"t_f32", "<f4", TFT_F32, 3, {2, 3, 4}, f32, sizeof(f32)},
        {"t_f64", "<f8", TFT_F64, 1, {7}, f64, sizeof(f64)},
        {"t_f16", "<f2", TFT_F16, 2, {3, 3}, f16, sizeof(f16)},
        {"t_bf16", "<u2", TFT_BF16, 1, {9}, bf16, sizeof(bf16)},
        {"t_i32", "<i4", TFT_I32, 2, {3, 5}, i32, sizeof(i32)},
        {"t_i64", "<i8", TFT_I64, 1, {4}, i64, sizeof(i64)},
        {"t_u8", "|u1", TFT_U8, 2, {2, 3}, u8, sizeof(u8)},
        {"t_bool", "|b1", TFT_BOOL, 1, {5}, b8, sizeof(b8)},
        {"scalar", "<f8", TFT_F64, 0, {0}, &scalar, sizeof(scalar)},
        {"empty", "<f4", TFT_F32, 2, {0, 3}, NULL, 0}, /* no data: allowed when numel is 0 */
        {"big", "<f4", TFT_F32, 1, {BIG}, big, sizeof(big)},
        {"sum_out", "<f4", TFT_F32, 1, {4}, sum, sizeof(sum)},
    };
    memcpy(items, v, sizeof(v));
    *n = (int)(sizeof(v) / sizeof(v[0]));
    return items;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : NULL;
    for (int step = 0; step < 3; step++) {
        tft_step_begin(step);
        int n;
        item *it = make(step, &n);
        uint64_t ids[2] = {0, 0};
        for (int i = 0; i < n - 1; i++) { /* each its own op */
            tft_tensor(it[i].name, it[i].dtype, it[i].data, it[i].ndim, it[i].shape);
            if (!strcmp(it[i].name, "t_f32"))
                ids[0] = tft_last_tensor_id();
            if (!strcmp(it[i].name, "big"))
                ids[1] = tft_last_tensor_id();
        }
        tft_op_begin("sum", TFT_OP_RUNTIME, 2, ids);
        tft_tensor(it[n - 1].name, it[n - 1].dtype, it[n - 1].data, it[n - 1].ndim, it[n - 1].shape);
        tft_op_end();
        float other = (float)step;
        tft_tensor("other", TFT_F32, &other, 0, NULL);
        if (dir && step == 1) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/expected.json", dir);
            json = fopen(path, "w");
            if (!json) {
                perror(path);
                return 3;
            }
            fputs("{", json);
            for (int i = 0; i < n; i++)
                save(dir, &it[i]);
            fputs("}\n", json);
            fclose(json);
        }
        tft_step_end(step);
    }
    puts("cap_prog done");
    return 0;
}

/*
 * types.c — what tft_types.h declares: the one table of dtype sizes and
 * names, and the version strings. Its own library (tfttypes) so that the
 * statistics kernels and the format library share it without depending on
 * each other; libtftrace.so holds it once.
 */
#include "tft_types.h"

#include "tft_format.h" /* TFT_FORMAT_MAJOR, TFT_FORMAT_MINOR (macros only) */

#include <errno.h>
#include <string.h>

#ifndef TFT_VERSION_STRING /* CMake's PROJECT_VERSION, taken from tft.h */
#define TFT_VERSION_STRING "0.0.0"
#endif
#define STR_(x) #x
#define STR(x) STR_(x)

static const struct {
    const char *name;
    unsigned char size; /* bytes per element */
} dtypes[TFT_DTYPE_COUNT] = {
    [TFT_F32] = {"f32", 4},  [TFT_F64] = {"f64", 8},  [TFT_F16] = {"f16", 2},  [TFT_BF16] = {"bf16", 2},
    [TFT_I32] = {"i32", 4},  [TFT_I64] = {"i64", 8},  [TFT_U8] = {"u8", 1},    [TFT_I8] = {"i8", 1},
    [TFT_I16] = {"i16", 2},  [TFT_U16] = {"u16", 2},  [TFT_U32] = {"u32", 4},  [TFT_U64] = {"u64", 8},
    [TFT_BOOL] = {"bool", 1}, [TFT_F8E4M3] = {"f8e4m3", 1}, [TFT_F8E5M2] = {"f8e5m2", 1},
};

size_t tft_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < TFT_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *tft_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < TFT_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

int tft_dtype_parse(const char *s)
{
    static const struct { const char *alias; int dtype; } aliases[] = {
        {"fp32", TFT_F32}, {"float32", TFT_F32}, {"fp64", TFT_F64}, {"float64", TFT_F64},
        {"fp16", TFT_F16}, {"float16", TFT_F16}, {"bfloat16", TFT_BF16},
        {"int32", TFT_I32}, {"int64", TFT_I64}, {"uint8", TFT_U8},
        {"float8_e4m3fn", TFT_F8E4M3}, {"fp8e4m3", TFT_F8E4M3},
        {"float8_e5m2", TFT_F8E5M2}, {"fp8e5m2", TFT_F8E5M2},
    };
    if (!s)
        return -EINVAL;
    for (int i = 0; i < TFT_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0)
            return i;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(s, aliases[i].alias) == 0)
            return aliases[i].dtype;
    return -EINVAL;
}

const char *tft_version(void) { return TFT_VERSION_STRING; }

const char *tft_format_version(void) { return STR(TFT_FORMAT_MAJOR) "." STR(TFT_FORMAT_MINOR); }

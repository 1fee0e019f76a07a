/*
 * core_json.c — exact integers in JSON (core_json.h).
 */
#include "core_json.h"

#include <inttypes.h>
#include <stdio.h>

void core_json_u64(cJSON *o, const char *key, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "%" PRIu64, v);
    cJSON_AddRawToObject(o, key, b);
}

void core_json_i64(cJSON *o, const char *key, int64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "%" PRId64, v);
    cJSON_AddRawToObject(o, key, b);
}

void core_json_hex(cJSON *o, const char *key, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "%016" PRIx64, v);
    cJSON_AddStringToObject(o, key, b);
}

cJSON *core_json_i64_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        char b[24];
        snprintf(b, sizeof(b), "%" PRId64, v[i]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
    }
    return a;
}

/*
 * core_json.h — JSON helpers for the analyzer's outputs: integers written
 * as exact decimal text (cJSON numbers are doubles and would round ids and
 * nanosecond times above 2^53), 64-bit hashes as 16 hex digits. Nothing
 * here prints.
 */
#ifndef TFT_CORE_JSON_H
#define TFT_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

void core_json_u64(cJSON *o, const char *key, uint64_t v);
void core_json_i64(cJSON *o, const char *key, int64_t v);
void core_json_hex(cJSON *o, const char *key, uint64_t v); /* "9f2c...", 16 digits */
/* v[0..n) as an array of exact integers (a shape); NULL: no memory. */
cJSON *core_json_i64_array(const int64_t *v, int n);

#endif

/*
 * bench_capture.c — size of captured tensors in a trace against their raw
 * bytes. For every captured tensor of TRACE, its bytes are cut into CAPTURE
 * parts as the recorder cuts them and compressed the way the writer
 * compresses chunks (zstd, one stream, level 1 by default), once with the
 * bytes as in memory and once byte-shuffled (TFT_CAPTURE_SHUFFLED): the
 * per-tensor cost of a capture. The trace itself holds one of the two (the
 * recorder shuffles unless TFT_CAPTURE_SHUFFLE=0); compare with the whole
 * trace's size in run_bench.sh.
 *
 *   bench_capture [--level N] TRACE
 */
#include "core_capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* Compressed bytes of the tensor's parts (records with headers), as one
 * zstd stream at level. */
static size_t cost(const core_capture_tensor *t, int shuffle, int level, char *rec)
{
    size_t esz = tft_dtype_size(t->dtype);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
    size_t outcap = ZSTD_CStreamOutSize(), total = 0;
    char *out = malloc(outcap);
    if (!cc || !out) {
        ZSTD_freeCCtx(cc);
        free(out);
        return 0;
    }
    uint64_t off = 0;
    do {
        size_t n = t->bytes - off < TFT_CAPTURE_PART_MAX ? (size_t)(t->bytes - off) : TFT_CAPTURE_PART_MAX;
        tft_rec_capture *c = (tft_rec_capture *)rec;
        size_t len = (sizeof(*c) + n + 7) & ~(size_t)7;
        memset(rec, 0, len);
        c->h.kind = TFT_REC_CAPTURE;
        c->h.len = (uint32_t)len;
        c->tensor = t->id;
        c->total = t->bytes;
        c->offset = off;
        c->n = (uint32_t)n;
        c->dtype = (uint8_t)t->dtype;
        c->ndim = (uint8_t)t->ndim;
        memcpy(c->shape, t->shape, sizeof(c->shape));
        if (shuffle && esz > 1 && n % esz == 0)
            tft_capture_shuffle(c->data, (const char *)t->data + off, n, esz, 0);
        else
            memcpy(c->data, (const char *)t->data + off, n);
        ZSTD_inBuffer in = {rec, len, 0};
        int last = off + n >= t->bytes;
        for (;;) {
            ZSTD_outBuffer ob = {out, outcap, 0};
            size_t rem = ZSTD_compressStream2(cc, &ob, &in, last ? ZSTD_e_end : ZSTD_e_continue);
            total += ob.pos;
            if (ZSTD_isError(rem))
                break;
            if (last ? rem == 0 : in.pos == in.size)
                break;
        }
        off += n;
    } while (off < t->bytes);
    free(out);
    ZSTD_freeCCtx(cc);
    return total;
}

int main(int argc, char **argv)
{
    int level = 1;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--level") && i + 1 < argc)
            level = atoi(argv[++i]);
        else
            path = argv[i];
    }
    if (!path)
        return fprintf(stderr, "usage: bench_capture [--level N] TRACE\n"), 2;
    core_capture_tensor *t;
    size_t n;
    char err[512];
    if (core_capture_list(path, 1, &t, &n, err, sizeof(err), NULL, 0) < 0)
        return fprintf(stderr, "bench_capture: %s\n", err), 2;
    char *rec = malloc(TFT_REC_MAX_BYTES);
    if (!rec)
        return fprintf(stderr, "bench_capture: out of memory\n"), 2;
    uint64_t raw = 0, plain = 0, shuf = 0;
    printf("%-22s %-6s %5s %10s %10s %6s %10s %6s\n", "tensor", "role", "dtype", "raw", "zstd", "ratio",
           "shuffled", "ratio");
    for (size_t i = 0; i < n; i++) {
        if (!t[i].complete || !t[i].bytes)
            continue;
        size_t p = cost(&t[i], 0, level, rec), s = cost(&t[i], 1, level, rec);
        printf("%-22.22s %-6s %5s %10llu %10zu %6.3f %10zu %6.3f\n", t[i].name, core_capture_role_name(t[i].role),
               tft_dtype_name(t[i].dtype), (unsigned long long)t[i].bytes, p, (double)p / (double)t[i].bytes, s,
               (double)s / (double)t[i].bytes);
        raw += t[i].bytes;
        plain += p;
        shuf += s;
    }
    if (raw)
        printf("total: %zu captures, %llu raw bytes; zstd -%d %.3f of raw, shuffled %.3f of raw\n", n,
               (unsigned long long)raw, level, (double)plain / (double)raw, (double)shuf / (double)raw);
    free(rec);
    core_capture_free(t, n);
    return 0;
}

/*
 * cap_mk.c — writes rank files with hand-made CAPTURE records, for the
 * reader's handling of what the recorder does not produce on its own:
 *
 *   cap_mk DIR   writes DIR/x.trace/rank-00000.tft with
 *     op 1 "good": f32 [3, 50000] in 3 parts (the middle one shuffled),
 *                  its TENSOR record flagged HAS_DATA; values i * 0.5
 *     op 2 "gap":  f32 [40000], parts 0 and 2 of 3 (part 1 lost)
 *     op 3 "mixed": f32 [2, 40000], its second part claiming shape [80000]
 *     op 4 "twice": a part repeated
 *   and DIR/good.bin, the expected bytes of "good".
 */
#include "tft_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static _Alignas(8) char buf[TFT_REC_MAX_BYTES];

static void die(const char *what)
{
    perror(what);
    exit(3);
}

static void hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t seq)
{
    h->kind = kind;
    h->flags = 0;
    h->len = len;
    h->ts = 1000 + (uint64_t)seq;
    h->step = 5;
    h->seq = seq;
}

static void op(tft_writer *w, const char *name, int64_t seq)
{
    tft_rec_op *o = (tft_rec_op *)buf;
    memset(o, 0, sizeof(*o));
    hdr(&o->h, TFT_REC_OP, sizeof(*o), seq);
    o->name = tft_writer_string(w, name, strlen(name));
    if (tft_writer_append(w, &o->h) < 0)
        die("append op");
}

static void tensor(tft_writer *w, const char *name, int64_t seq, uint64_t id, int ndim, const int64_t *shape)
{
    tft_rec_tensor *t = (tft_rec_tensor *)buf;
    memset(t, 0, sizeof(*t));
    hdr(&t->h, TFT_REC_TENSOR, sizeof(*t), seq);
    t->h.flags = TFT_TENSOR_HAS_DATA;
    t->id = id;
    t->name = tft_writer_string(w, name, strlen(name));
    t->dtype = TFT_F32;
    t->ndim = (uint8_t)ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    if (tft_writer_append(w, &t->h) < 0)
        die("append tensor");
}

/* One part: bytes [off, off+n) of the tensor whose data is src. */
static void part(tft_writer *w, const char *name, int64_t seq, uint64_t id, int ndim, const int64_t *shape,
                 const char *src, uint64_t total, uint64_t off, uint32_t n, int shuffle)
{
    tft_rec_capture *c = (tft_rec_capture *)buf;
    uint32_t len = (uint32_t)((sizeof(*c) + n + 7) & ~(size_t)7);
    memset(c, 0, len);
    hdr(&c->h, TFT_REC_CAPTURE, len, seq);
    c->tensor = id;
    c->total = total;
    c->offset = off;
    c->n = n;
    c->role = TFT_CAPTURE_OUTPUT;
    c->name = tft_writer_string(w, name, strlen(name));
    c->dtype = TFT_F32;
    c->ndim = (uint8_t)ndim;
    memcpy(c->shape, shape, sizeof(int64_t) * (size_t)ndim);
    if (shuffle) {
        c->h.flags = TFT_CAPTURE_SHUFFLED;
        tft_capture_shuffle(c->data, src + off, n, 4, 0);
    } else {
        memcpy(c->data, src + off, n);
    }
    if (tft_writer_append(w, &c->h) < 0)
        die("append capture");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return fprintf(stderr, "usage: cap_mk DIR\n"), 2;
    char path[4096];
    snprintf(path, sizeof(path), "%s/x.trace", argv[1]);
    if (mkdir(path, 0755) < 0)
        die(path);
    snprintf(path, sizeof(path), "%s/x.trace/rank-00000.tft", argv[1]);
    tft_file_info fi = {.world_size = 1, .pid = 1};
    tft_writer *w = tft_writer_open(path, &fi, NULL);
    if (!w)
        die(path);
    enum { NG = 150000 };
    float *v = malloc(NG * sizeof(float));
    if (!v)
        die("malloc");
    for (int i = 0; i < NG; i++)
        v[i] = (float)i * 0.5f;
    const char *src = (const char *)v;
    const uint32_t P = 65000 * 4 / 4; /* part size: a multiple of 4 below TFT_CAPTURE_PART_MAX */

    int64_t sg[2] = {3, 50000};
    uint64_t tg = (uint64_t)NG * 4;
    op(w, "good", 1);
    tensor(w, "good", 1, 11, 2, sg);
    for (uint64_t off = 0, k = 0; off < tg; off += P, k++)
        part(w, "good", 1, 11, 2, sg, src, tg, off, (uint32_t)(tg - off < P ? tg - off : P), k == 1);

    int64_t s1[1] = {40000};
    uint64_t t1 = 160000;
    op(w, "gap", 2);
    tensor(w, "gap", 2, 12, 1, s1);
    part(w, "gap", 2, 12, 1, s1, src, t1, 0, P, 0);
    part(w, "gap", 2, 12, 1, s1, src, t1, 2 * (uint64_t)P, (uint32_t)(t1 - 2 * P), 0);

    int64_t s2[2] = {2, 40000}, s2bad[1] = {80000};
    uint64_t t2 = 320000;
    op(w, "mixed", 3);
    tensor(w, "mixed", 3, 13, 2, s2);
    part(w, "mixed", 3, 13, 2, s2, src, t2, 0, P, 0);
    part(w, "mixed", 3, 13, 1, s2bad, src, t2, P, P, 0);

    int64_t s3[1] = {100};
    op(w, "twice", 4);
    tensor(w, "twice", 4, 14, 1, s3);
    part(w, "twice", 4, 14, 1, s3, src, 400, 0, 200, 0);
    part(w, "twice", 4, 14, 1, s3, src, 400, 0, 200, 0);
    part(w, "twice", 4, 14, 1, s3, src, 400, 200, 200, 0);

    if (tft_writer_close(w) < 0)
        die("close");
    snprintf(path, sizeof(path), "%s/good.bin", argv[1]);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(v, 1, tg, f) != tg)
        die(path);
    fclose(f);
    free(v);
    return 0;
}

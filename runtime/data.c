/*
 * data.c — tokenizer, corpora, the sharded batch loader and eval examples of
 * tftrain (contracts in data.h).
 *
 * The synthetic corpus keeps no documents: document g of a split is
 * regenerated from (seed, split, g) when asked for, so the loader's cursor is
 * the whole data state. A file corpus keeps the file in memory and a table of
 * (offset, length) per document and split.
 */
#include "data.h"
#include "tft_msg.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CORPUS_SYNTHETIC, CORPUS_FILE };

struct data_corpus {
    int kind;               /* CORPUS_SYNTHETIC or CORPUS_FILE */
    uint64_t seed;          /* synthetic: the corpus seed */
    uint8_t *text;          /* file: its whole contents */
    size_t text_len;        /* file: bytes in text */
    size_t *off[2];         /* file: per split, start of each document in text */
    size_t *len[2];         /* file: per split, length of each document */
    uint64_t n[2];          /* file: documents per split */
};


/* ---- tokenizer ------------------------------------------------------------ */

size_t data_encode(const void *bytes, size_t n, int32_t *ids)
{
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++)
        ids[i] = b[i];
    return n;
}

int data_decode(const int32_t *ids, size_t n, char *out, size_t cap, size_t *out_len)
{
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= TFT_VOCAB) {
            rc = -ERANGE;
            break;
        }
        if (ids[i] >= 256)
            continue;
        if (k == cap) {
            rc = -ENOSPC;
            break;
        }
        out[k++] = (char)(uint8_t)ids[i];
    }
    if (k < cap)
        out[k] = '\0';
    if (out_len)
        *out_len = k;
    return rc;
}

/* ---- RNG ------------------------------------------------------------------ */

/* splitmix64's finaliser: a bijective 64-bit mix. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void tft_rng_seed(tft_rng *r, uint64_t seed)
{
    /* Consecutive splitmix64 outputs; never all zero (mix64 is a bijection
     * and the four inputs differ). */
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ull;
        r->s[i] = mix64(seed);
    }
}

uint64_t tft_rng_next(tft_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint32_t tft_rng_below(tft_rng *r, uint32_t n)
{
    return (uint32_t)(((tft_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

float tft_rng_uniform(tft_rng *r)
{
    return (float)(tft_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float tft_rng_normal(tft_rng *r)
{
    double u1 = ((double)(tft_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(tft_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- synthetic corpus --------------------------------------------------------- */

/* Which split an equation belongs to: fixed for all seeds, about 10% eval. */
static int equation_split(unsigned a, unsigned op, unsigned b)
{
    return mix64(0x7466747261696eull ^ (a * 200u + b * 2u + op)) % 10 == 0 ? DATA_EVAL : DATA_TRAIN;
}

/* Draws one equation of split and writes it ("A+B=C", at most 9 bytes)
 * at out; returns its length. */
static size_t synth_equation(tft_rng *r, int split, char *out)
{
    unsigned a, b, op;
    do {
        a = tft_rng_below(r, 100);
        b = tft_rng_below(r, 100);
        op = tft_rng_below(r, 2);
    } while (equation_split(a, op, b) != split);
    int c = op ? (int)a - (int)b : (int)a + (int)b;
    return (size_t)snprintf(out, 10, "%u%c%u=%d", a, op ? '-' : '+', b, c);
}

/* Writes document g of split (at most DATA_SYNTH_DOC_MAX bytes) to out and
 * returns its length. */
static size_t synth_doc(uint64_t seed, int split, uint64_t g, char *out)
{
    tft_rng r;
    tft_rng_seed(&r, mix64(seed) ^ mix64((g << 1) | (uint64_t)split));
    unsigned neq = 1 + tft_rng_below(&r, 6);
    size_t len = 0;
    for (unsigned e = 0; e < neq; e++) {
        if (e)
            out[len++] = tft_rng_below(&r, 2) ? ';' : ' ';
        len += synth_equation(&r, split, out + len);
    }
    return len;
}

int data_corpus_synthetic(data_corpus **out, uint64_t seed, char *err, size_t errlen)
{
    data_corpus *c = calloc(1, sizeof(*c));
    if (!c)
        return tft_errf(err, errlen, -ENOMEM, "synthetic corpus: out of memory");
    c->kind = CORPUS_SYNTHETIC;
    c->seed = seed;
    *out = c;
    return 0;
}

/* ---- file corpus ------------------------------------------------------------- */

/* Reads all of path into *buf (malloc'd) and *len. */
static int read_whole(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tft_errf(err, errlen, -errno, "%s: cannot open data file: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    int rc = 0, read_errno = 0;
    while (b) {
        size_t want = cap - n, got = fread(b + n, 1, want, f);
        n += got;
        if (got < want) {
            read_errno = ferror(f) ? (errno ? errno : EIO) : 0;
            break;
        }
        uint8_t *nb = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
        if (!nb)
            free(b);
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (!b)
        rc = tft_errf(err, errlen, -ENOMEM, "%s: out of memory reading the data file", path);
    else if (read_errno)
        rc = tft_errf(err, errlen, -read_errno, "%s: cannot read data file: %s", path,
                      strerror(read_errno));
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Visits the documents of text in file order: lines without their "\n" or
 * "\r\n", empty ones skipped, long ones cut into max_doc pieces. With off
 * and len NULL only counts them; else stores document i of split s at
 * off[s][k], len[s][k]. Returns the number of documents per split in n[]. */
static void split_docs(const uint8_t *text, size_t text_len, size_t max_doc, size_t *off[2],
                       size_t *len[2], uint64_t n[2])
{
    uint64_t i = 0;
    n[0] = n[1] = 0;
    for (size_t p = 0; p < text_len;) {
        const uint8_t *nl = memchr(text + p, '\n', text_len - p);
        size_t end = nl ? (size_t)(nl - text) : text_len, next = nl ? end + 1 : text_len;
        if (end > p && text[end - 1] == '\r')
            end--;
        for (size_t q = p; q < end; q += max_doc, i++) {
            int s = i % 10 == 9 ? DATA_EVAL : DATA_TRAIN;
            if (off) {
                off[s][n[s]] = q;
                len[s][n[s]] = end - q < max_doc ? end - q : max_doc;
            }
            n[s]++;
        }
        p = next;
    }
}

int data_corpus_open_file(data_corpus **out, const char *path, size_t max_doc, char *err,
                          size_t errlen)
{
    data_corpus *c = calloc(1, sizeof(*c));
    if (!c)
        return tft_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
    c->kind = CORPUS_FILE;
    if (max_doc == 0)
        max_doc = 1024;
    int rc = read_whole(path, &c->text, &c->text_len, err, errlen);
    if (rc)
        goto err_out;
    split_docs(c->text, c->text_len, max_doc, NULL, NULL, c->n);
    if (c->n[0] + c->n[1] == 0) {
        rc = tft_errf(err, errlen, -ENODATA,
                      "%s: no documents (the file is empty or has only empty lines); "
                      "give a text file with one document per line", path);
        goto err_out;
    }
    for (int s = 0; s < 2; s++) {
        c->off[s] = malloc((c->n[s] + 1) * sizeof(size_t));
        c->len[s] = malloc((c->n[s] + 1) * sizeof(size_t));
        if (!c->off[s] || !c->len[s]) {
            rc = tft_errf(err, errlen, -ENOMEM, "%s: out of memory indexing documents", path);
            goto err_out;
        }
    }
    split_docs(c->text, c->text_len, max_doc, c->off, c->len, c->n);
    *out = c;
    return 0;
err_out:
    data_corpus_free(c);
    return rc;
}

void data_corpus_free(data_corpus *c)
{
    if (!c)
        return;
    for (int s = 0; s < 2; s++) {
        free(c->off[s]);
        free(c->len[s]);
    }
    free(c->text);
    free(c);
}

uint64_t data_corpus_count(const data_corpus *c, int split)
{
    if (split != DATA_TRAIN && split != DATA_EVAL)
        return 0;
    return c->kind == CORPUS_SYNTHETIC ? UINT64_MAX : c->n[split];
}

int data_corpus_doc(const data_corpus *c, int split, uint64_t g, uint8_t *buf, size_t cap,
                    size_t *len)
{
    if (split != DATA_TRAIN && split != DATA_EVAL)
        return -EINVAL;
    const uint8_t *src;
    char tmp[DATA_SYNTH_DOC_MAX];
    size_t n;
    if (c->kind == CORPUS_SYNTHETIC) {
        n = synth_doc(c->seed, split, g, tmp);
        src = (const uint8_t *)tmp;
    } else {
        if (c->n[split] == 0)
            return -ENODATA;
        uint64_t k = g % c->n[split];
        src = c->text + c->off[split][k];
        n = c->len[split][k];
    }
    if (n && cap)
        memcpy(buf, src, n < cap ? n : cap);
    *len = n;
    return 0;
}

/* ---- loader --------------------------------------------------------------------- */

int data_loader_init(data_loader *dl, const data_corpus *c, int split, int B, int T, int rank,
                     int world, unsigned flags, char *err, size_t errlen)
{
    memset(dl, 0, sizeof(*dl));
    if (split != DATA_TRAIN && split != DATA_EVAL)
        return tft_errf(err, errlen, -EINVAL, "data loader: split %d is neither train nor eval", split);
    if (B < 1 || T < 1)
        return tft_errf(err, errlen, -EINVAL, "data loader: batch %d x %d; both must be >= 1", B, T);
    if (world < 1 || rank < 0 || rank >= world)
        return tft_errf(err, errlen, -EINVAL, "data loader: rank %d of %d ranks", rank, world);
    if (data_corpus_count(c, split) == 0)
        return tft_errf(err, errlen, -ENODATA,
                        "data loader: the %s split is empty (a data file needs 10 or more "
                        "documents to have eval documents)", split == DATA_EVAL ? "eval" : "train");
    dl->scratch = malloc((size_t)T);
    if (!dl->scratch)
        return tft_errf(err, errlen, -ENOMEM, "data loader: out of memory");
    dl->corpus = c;
    dl->split = split;
    dl->B = B;
    dl->T = T;
    dl->rank = rank;
    dl->world = world;
    dl->flags = flags;
    return 0;
}

void data_loader_free(data_loader *dl)
{
    free(dl->scratch);
    dl->scratch = NULL;
}

/* Fills one row (T positions) from document g. */
static int fill_row(data_loader *dl, uint64_t g, int32_t *tok, int32_t *tgt, float *mask)
{
    size_t n;
    int T = dl->T;
    int rc = data_corpus_doc(dl->corpus, dl->split, g, dl->scratch, (size_t)T, &n);
    if (rc)
        return rc;
    /* row[t]: BOS at 0, byte t-1 for t in 1..n, EOS at n+1, PAD after. */
    for (int t = 0; t <= T; t++) {
        int32_t id = t == 0 ? TFT_BOS
                   : (size_t)t <= n ? dl->scratch[t - 1]
                   : (size_t)t == n + 1 ? TFT_EOS : TFT_PAD;
        if (t < T)
            tok[t] = id;
        if (t > 0) {
            tgt[t - 1] = id;
            mask[t - 1] = id == TFT_PAD ? 0.0f : 1.0f;
        }
    }
    return 0;
}

int data_loader_batch(data_loader *dl, uint64_t cursor, int32_t *tokens, int32_t *targets,
                      float *loss_mask)
{
    int shard = (dl->flags & DATA_SHARD_SAME) ? 0 : dl->rank;
    uint64_t first = cursor + (uint64_t)shard * (uint64_t)dl->B;
    for (int b = 0; b < dl->B; b++) {
        size_t o = (size_t)b * (size_t)dl->T;
        int rc = fill_row(dl, first + (uint64_t)b, tokens + o, targets + o, loss_mask + o);
        if (rc)
            return rc;
    }
    return 0;
}

int data_loader_next(data_loader *dl, int32_t *tokens, int32_t *targets, float *loss_mask)
{
    int rc = data_loader_batch(dl, dl->cursor, tokens, targets, loss_mask);
    if (rc == 0)
        dl->cursor += (uint64_t)dl->world * (uint64_t)dl->B;
    return rc;
}

uint64_t data_cursor_get(const data_loader *dl)
{
    return dl->cursor;
}

void data_cursor_set(data_loader *dl, uint64_t cursor)
{
    dl->cursor = cursor;
}

/* ---- bug-zoo and safety checks --------------------------------------------------- */

size_t data_corrupt_token(int32_t *tokens, size_t n, uint64_t step)
{
    size_t pos = (size_t)(mix64(step ^ 0x6f6f62ull) % n);
    tokens[pos] = TFT_VOCAB;
    return pos;
}

int data_check_tokens(const int32_t *tokens, int rows, int cols, char *err, size_t errlen)
{
    for (int b = 0; b < rows; b++)
        for (int t = 0; t < cols; t++) {
            int32_t id = tokens[(size_t)b * (size_t)cols + (size_t)t];
            if (id < 0 || id >= TFT_VOCAB)
                return tft_errf(err, errlen, -ERANGE,
                                "tokens[row %d, column %d] = %d is outside the vocabulary [0, %d); "
                            "the tokenizer or the data are broken", b, t, (int)id, TFT_VOCAB);
        }
    return 0;
}

/* ---- eval ------------------------------------------------------------------------- */

int data_eval_example_get(const data_corpus *c, uint64_t i, data_eval_example *ex)
{
    if (c->kind != CORPUS_SYNTHETIC)
        return -ENOTSUP;
    char doc[DATA_SYNTH_DOC_MAX];
    size_t n = synth_doc(c->seed, DATA_EVAL, i, doc);
    size_t eq = (size_t)((char *)memchr(doc, '=', n) - doc);
    size_t end = eq + 1;
    while (end < n && doc[end] != ';' && doc[end] != ' ')
        end++;
    memset(ex, 0, sizeof(*ex));
    memcpy(ex->text, doc, eq + 1);
    memcpy(ex->answer, doc + eq + 1, end - eq - 1);
    ex->prompt[0] = TFT_BOS;
    data_encode(ex->text, eq + 1, ex->prompt + 1);
    ex->prompt_len = (int)(eq + 2);
    return 0;
}

bool data_answer_correct(const char *answer, const int32_t *generated, size_t n)
{
    size_t k = strlen(answer);
    if (n < k)
        return false;
    for (size_t i = 0; i < k; i++)
        if (generated[i] != (int32_t)(uint8_t)answer[i])
            return false;
    if (n == k)
        return true;
    int32_t next = generated[k];
    return next == TFT_EOS || next == TFT_PAD || next == ';' || next == ' ';
}

/*
 * test_data.c — tftrain's data pipeline: tokenizer, RNG, synthetic and file
 * corpora, batch layout, sharding, cursor resume, bug-zoo hooks and eval.
 */
#include "data.h"
#include "tft_test.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { B = 8, T = 32 };

/* ---- tokenizer and RNG ---------------------------------------------------------- */

static void test_tokenizer(void)
{
    uint8_t bytes[256];
    int32_t ids[260];
    char out[257];
    size_t n = 0;
    for (int i = 0; i < 256; i++)
        bytes[i] = (uint8_t)i;
    CHECK(data_encode(bytes, 256, ids) == 256);
    CHECK(ids[0] == 0 && ids[255] == 255 && ids[200] == 200);
    CHECK(data_decode(ids, 256, out, sizeof(out), &n) == 0 && n == 256);
    CHECK(memcmp(out, bytes, 256) == 0);

    int32_t mixed[] = {TFT_BOS, 'h', 'i', TFT_EOS, TFT_PAD, TFT_PAD};
    CHECK(data_decode(mixed, 6, out, sizeof(out), &n) == 0 && n == 2 && strcmp(out, "hi") == 0);
    int32_t bad[] = {'a', TFT_VOCAB, 'b'};
    CHECK(data_decode(bad, 3, out, sizeof(out), &n) == -ERANGE && n == 1);
    int32_t neg[] = {-1};
    CHECK(data_decode(neg, 1, out, sizeof(out), &n) == -ERANGE);
    CHECK(data_decode(ids + 'a', 3, out, 2, &n) == -ENOSPC && n == 2);
    CHECK(TFT_PAD == 256 && TFT_BOS == 257 && TFT_EOS == 258 && TFT_VOCAB == 259);
}

static void test_rng(void)
{
    tft_rng a, b, c;
    tft_rng_seed(&a, 42);
    tft_rng_seed(&b, 42);
    tft_rng_seed(&c, 43);
    int same = 0, differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = tft_rng_next(&a), y = tft_rng_next(&b), z = tft_rng_next(&c);
        same += x == y;
        differ += x != z;
    }
    CHECK(same == 100);
    CHECK(differ == 100);

    tft_rng saved = a; /* the state is all there is: a copy resumes the stream */
    uint64_t first = tft_rng_next(&a);
    CHECK(tft_rng_next(&saved) == first);

    double sum = 0, sq = 0;
    int in_range = 1, hist[10] = {0};
    for (int i = 0; i < 100000; i++) {
        float u = tft_rng_uniform(&a);
        uint32_t k = tft_rng_below(&a, 10);
        in_range &= u >= 0.0f && u < 1.0f && k < 10;
        hist[k < 10 ? k : 0]++;
        double g = tft_rng_normal(&a);
        sum += g;
        sq += g * g;
    }
    CHECK(in_range);
    for (int k = 0; k < 10; k++)
        CHECKF(hist[k] > 9000 && hist[k] < 11000, "bucket %d has %d of 100000", k, hist[k]);
    CHECKF(fabs(sum / 1e5) < 0.02 && fabs(sq / 1e5 - 1.0) < 0.03, "normal mean %g var %g",
           sum / 1e5, sq / 1e5);
}

/* ---- synthetic corpus ----------------------------------------------------------- */

/* Parses a synthetic document into equations; checks each one's arithmetic
 * and marks (a, op, b) in seen[a][op][b]. Returns the number of equations,
 * or -1 when the document is malformed or an equation is wrong. */
static int parse_doc(const char *doc, size_t n, unsigned char seen[100][2][100])
{
    char buf[DATA_SYNTH_DOC_MAX + 1];
    memcpy(buf, doc, n);
    buf[n] = '\0';
    int neq = 0;
    for (char *p = buf; *p;) {
        int a, b, c, used = 0;
        char op;
        if (sscanf(p, "%d%c%d=%d%n", &a, &op, &b, &c, &used) != 4 || a < 0 || a > 99 || b < 0 ||
            b > 99 || (op != '+' && op != '-') || c != (op == '+' ? a + b : a - b))
            return -1;
        seen[a][op == '-'][b] = 1;
        neq++;
        p += used;
        if (*p && *p != ';' && *p != ' ')
            return -1;
        if (*p)
            p++;
    }
    return neq;
}

static unsigned char seen_train[100][2][100], seen_eval[100][2][100];

static void test_synthetic(void)
{
    data_corpus *c1 = NULL, *c2 = NULL, *c3 = NULL;
    char err[256];
    CHECK(data_corpus_synthetic(&c1, 7, err, sizeof(err)) == 0);
    CHECK(data_corpus_synthetic(&c2, 7, err, sizeof(err)) == 0);
    CHECK(data_corpus_synthetic(&c3, 8, err, sizeof(err)) == 0);
    CHECK(data_corpus_count(c1, DATA_TRAIN) == UINT64_MAX);

    uint8_t d1[DATA_SYNTH_DOC_MAX], d2[DATA_SYNTH_DOC_MAX], d3[DATA_SYNTH_DOC_MAX];
    size_t n1, n2, n3, minlen = 1000, maxlen = 0;
    int same = 1, differ = 0, train_eval_same = 0, bad = 0, maxeq = 0;
    for (uint64_t g = 0; g < 3000; g++) {
        data_corpus_doc(c1, DATA_TRAIN, g, d1, sizeof(d1), &n1);
        data_corpus_doc(c2, DATA_TRAIN, g, d2, sizeof(d2), &n2);
        data_corpus_doc(c3, DATA_TRAIN, g, d3, sizeof(d3), &n3);
        same &= n1 == n2 && memcmp(d1, d2, n1) == 0;
        differ += n1 != n3 || memcmp(d1, d3, n1) != 0;
        int neq = parse_doc((char *)d1, n1, seen_train);
        bad += neq < 0;
        maxeq = neq > maxeq ? neq : maxeq;
        minlen = n1 < minlen ? n1 : minlen;
        maxlen = n1 > maxlen ? n1 : maxlen;
        data_corpus_doc(c1, DATA_EVAL, g, d2, sizeof(d2), &n2);
        bad += parse_doc((char *)d2, n2, seen_eval) < 0;
        train_eval_same += n1 == n2 && memcmp(d1, d2, n1) == 0;
    }
    CHECK(same);
    CHECKF(differ > 2900, "seeds 7 and 8 share %d of 3000 documents", 3000 - differ);
    CHECKF(bad == 0, "%d malformed or wrong documents", bad);
    CHECK(train_eval_same == 0);
    CHECKF(minlen <= 8 && maxlen > 40 && maxlen <= DATA_SYNTH_DOC_MAX, "lengths %zu..%zu", minlen,
           maxlen);
    CHECK(maxeq == 6);

    uint8_t small[4];
    CHECK(data_corpus_doc(c1, DATA_TRAIN, 5, small, sizeof(small), &n1) == 0 && n1 > 4);
    data_corpus_doc(c1, DATA_TRAIN, 5, d1, sizeof(d1), &n2);
    CHECK(n1 == n2 && memcmp(small, d1, 4) == 0);
    CHECK(data_corpus_doc(c1, 2, 0, d1, sizeof(d1), &n1) == -EINVAL);
    data_corpus_free(c1);
    data_corpus_free(c2);
    data_corpus_free(c3);
    data_corpus_free(NULL);
}

/* Held-out by construction (after test_synthetic filled seen_*): no equation
 * occurs in both splits, and each split is a substantial share of them. */
static void test_split_disjoint(void)
{
    int overlap = 0, ntrain = 0, neval = 0;
    for (int a = 0; a < 100; a++)
        for (int op = 0; op < 2; op++)
            for (int b = 0; b < 100; b++) {
                overlap += seen_train[a][op][b] && seen_eval[a][op][b];
                ntrain += seen_train[a][op][b];
                neval += seen_eval[a][op][b];
            }
    CHECK(overlap == 0);
    CHECKF(ntrain > 5000 && neval > 500, "train %d, eval %d distinct equations", ntrain, neval);
}

/* ---- batches ------------------------------------------------------------------------ */

/* Checks one row against the document it must hold. Returns the number of
 * PAD targets in the row, or -1 on a layout error. */
static int check_row(const data_corpus *c, int split, uint64_t g, int Tn, const int32_t *tok,
                     const int32_t *tgt, const float *mask)
{
    uint8_t doc[4096];
    size_t n;
    data_corpus_doc(c, split, g, doc, sizeof(doc), &n);
    int pads = 0;
    for (int t = 0; t <= Tn; t++) {
        int32_t want = t == 0 ? TFT_BOS
                     : (size_t)t <= n ? doc[t - 1]
                     : (size_t)t == n + 1 ? TFT_EOS : TFT_PAD;
        if (t < Tn && tok[t] != want)
            return -1;
        if (t > 0 && (tgt[t - 1] != want || mask[t - 1] != (want == TFT_PAD ? 0.0f : 1.0f)))
            return -1;
        pads += t > 0 && want == TFT_PAD;
    }
    return pads;
}

static void test_batch_layout(void)
{
    data_corpus *c = NULL;
    data_loader dl;
    char err[256];
    int32_t tok[B * T], tgt[B * T];
    float mask[B * T];
    data_corpus_synthetic(&c, 1, err, sizeof(err));
    CHECK(data_loader_init(&dl, c, DATA_TRAIN, B, T, 0, 1, 0, err, sizeof(err)) == 0);
    int bad = 0, pads = 0, shifted = 1, eos_rows = 0;
    for (int step = 0; step < 4; step++) {
        uint64_t cur = data_cursor_get(&dl);
        CHECK(data_loader_next(&dl, tok, tgt, mask) == 0);
        CHECK(data_cursor_get(&dl) == cur + B);
        for (int b = 0; b < B; b++) {
            int p = check_row(c, DATA_TRAIN, cur + (uint64_t)b, T, tok + b * T, tgt + b * T,
                              mask + b * T);
            bad += p < 0;
            pads += p > 0 ? p : 0;
            for (int t = 0; t + 1 < T; t++)
                shifted &= tgt[b * T + t] == tok[b * T + t + 1];
            for (int t = 0; t < T; t++)
                eos_rows += tgt[b * T + t] == TFT_EOS;
            CHECK(tok[b * T] == TFT_BOS);
        }
    }
    CHECK(bad == 0);
    CHECK(shifted);
    CHECKF(pads > B * 4, "only %d padded targets in 4 batches", pads);
    CHECK(eos_rows > 0);
    data_loader_free(&dl);

    /* T shorter than documents: rows are cut, no EOS, mask all ones. */
    enum { Ts = 6 };
    int32_t tk[B * Ts], tg[B * Ts];
    float mk[B * Ts];
    CHECK(data_loader_init(&dl, c, DATA_EVAL, B, Ts, 0, 1, 0, err, sizeof(err)) == 0);
    CHECK(data_loader_next(&dl, tk, tg, mk) == 0);
    int ones = 0;
    for (int i = 0; i < B * Ts; i++)
        ones += mk[i] == 1.0f && tg[i] != TFT_PAD && tg[i] != TFT_EOS;
    CHECK(ones == B * Ts);
    CHECK(check_row(c, DATA_EVAL, 3, Ts, tk + 3 * Ts, tg + 3 * Ts, mk + 3 * Ts) == 0);
    data_loader_free(&dl);
    data_loader_free(&dl); /* safe twice */
    data_corpus_free(c);
}

/* ---- sharding and cursor -------------------------------------------------------------- */

static void test_sharding(void)
{
    data_corpus *c = NULL;
    data_loader one, r0, r1, same1;
    char err[256];
    int32_t tok1[2 * B * T], tgt1[2 * B * T], tok[2 * B * T], tgt[2 * B * T], tsame[B * T], gs[B * T];
    float m1[2 * B * T], m[2 * B * T], ms[B * T];
    data_corpus_synthetic(&c, 3, err, sizeof(err));
    CHECK(data_loader_init(&one, c, DATA_TRAIN, 2 * B, T, 0, 1, 0, err, sizeof(err)) == 0);
    CHECK(data_loader_init(&r0, c, DATA_TRAIN, B, T, 0, 2, 0, err, sizeof(err)) == 0);
    CHECK(data_loader_init(&r1, c, DATA_TRAIN, B, T, 1, 2, 0, err, sizeof(err)) == 0);
    CHECK(data_loader_init(&same1, c, DATA_TRAIN, B, T, 1, 2, DATA_SHARD_SAME, err, sizeof(err)) == 0);
    int concat = 1, shard_same = 1, ranks_differ = 1;
    for (int step = 0; step < 5; step++) {
        data_loader_next(&one, tok1, tgt1, m1);
        data_loader_next(&r0, tok, tgt, m);
        data_loader_next(&r1, tok + B * T, tgt + B * T, m + B * T);
        data_loader_next(&same1, tsame, gs, ms);
        /* rank 0's rows then rank 1's rows == the single rank's 2B rows */
        concat &= memcmp(tok, tok1, sizeof(tok)) == 0 && memcmp(tgt, tgt1, sizeof(tgt)) == 0 &&
                  memcmp(m, m1, sizeof(m)) == 0;
        shard_same &= memcmp(tsame, tok, sizeof(tsame)) == 0;
        ranks_differ &= memcmp(tok, tok + B * T, sizeof(tsame)) != 0;
    }
    CHECK(concat);
    CHECK(shard_same);
    CHECK(ranks_differ);
    CHECK(data_cursor_get(&one) == 5 * 2 * B && data_cursor_get(&r0) == 5 * 2 * B &&
          data_cursor_get(&r1) == 5 * 2 * B && data_cursor_get(&same1) == 5 * 2 * B);
    data_loader_free(&one);
    data_loader_free(&r0);
    data_loader_free(&r1);
    data_loader_free(&same1);

    CHECK(data_loader_init(&one, c, DATA_TRAIN, 0, T, 0, 1, 0, err, sizeof(err)) == -EINVAL);
    CHECK(data_loader_init(&one, c, DATA_TRAIN, B, T, 2, 2, 0, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "rank 2 of 2") != NULL);
    CHECK(data_loader_init(&one, c, 5, B, T, 0, 1, 0, err, sizeof(err)) == -EINVAL);
    data_corpus_free(c);
}

static void test_cursor_resume(void)
{
    data_corpus *c = NULL;
    data_loader a, b;
    char err[256];
    enum { STEPS = 6, CUT = 2 };
    static int32_t tok[STEPS][B * T], tgt[STEPS][B * T];
    static float m[STEPS][B * T];
    int32_t tk[B * T], tg[B * T];
    float mk[B * T];
    data_corpus_synthetic(&c, 11, err, sizeof(err));
    data_loader_init(&a, c, DATA_TRAIN, B, T, 1, 2, 0, err, sizeof(err));
    uint64_t saved = 0;
    for (int s = 0; s < STEPS; s++) {
        if (s == CUT)
            saved = data_cursor_get(&a);
        data_loader_next(&a, tok[s], tgt[s], m[s]);
    }
    CHECK(saved == (uint64_t)CUT * 2 * B);
    CHECK(data_loader_init(&b, c, DATA_TRAIN, B, T, 1, 2, 0, err, sizeof(err)) == 0);
    data_cursor_set(&b, saved);
    int same = 1;
    for (int s = CUT; s < STEPS; s++) {
        data_loader_next(&b, tk, tg, mk);
        same &= memcmp(tk, tok[s], sizeof(tk)) == 0 && memcmp(tg, tgt[s], sizeof(tg)) == 0 &&
                memcmp(mk, m[s], sizeof(mk)) == 0;
    }
    CHECK(same);
    CHECK(data_cursor_get(&b) == data_cursor_get(&a));
    /* Not restoring the cursor (the ckpt-data bug) gives a different stream. */
    data_cursor_set(&b, 0);
    data_loader_next(&b, tk, tg, mk);
    CHECK(memcmp(tk, tok[CUT], sizeof(tk)) != 0);
    /* data_loader_batch is pure: same cursor, same batch, cursor unmoved. */
    uint64_t cur = data_cursor_get(&b);
    CHECK(data_loader_batch(&b, (uint64_t)CUT * 2 * B, tk, tg, mk) == 0);
    CHECK(memcmp(tk, tok[CUT], sizeof(tk)) == 0 && data_cursor_get(&b) == cur);
    data_loader_free(&a);
    data_loader_free(&b);
    data_corpus_free(c);
}

/* ---- bug-zoo hooks --------------------------------------------------------------------- */

static void test_token_checks(void)
{
    int32_t tok[B * T], tok2[B * T], tgt[B * T];
    float m[B * T];
    char err[256] = "";
    data_corpus *c = NULL;
    data_loader dl;
    data_corpus_synthetic(&c, 5, err, sizeof(err));
    data_loader_init(&dl, c, DATA_TRAIN, B, T, 0, 1, 0, err, sizeof(err));
    data_loader_next(&dl, tok, tgt, m);
    memcpy(tok2, tok, sizeof(tok));
    CHECK(data_check_tokens(tok, B, T, err, sizeof(err)) == 0);
    size_t p1 = data_corrupt_token(tok, B * T, 3);
    size_t p2 = data_corrupt_token(tok2, B * T, 3);
    CHECK(p1 == p2 && p1 < B * T && tok[p1] == TFT_VOCAB);
    CHECK(memcmp(tok, tok2, sizeof(tok)) == 0);
    CHECK(data_check_tokens(tok, B, T, err, sizeof(err)) == -ERANGE);
    char want[64];
    snprintf(want, sizeof(want), "row %zu, column %zu] = 259", p1 / T, p1 % T);
    CHECKF(strstr(err, want) != NULL, "message: %s", err);
    int moved = 0;
    for (uint64_t s = 0; s < 20; s++) {
        memcpy(tok2, tok, sizeof(tok));
        moved += data_corrupt_token(tok2, B * T, s) != p1;
    }
    CHECK(moved > 10);
    tok[0] = -3;
    CHECK(data_check_tokens(tok, B, T, NULL, 0) == -ERANGE);
    data_loader_free(&dl);
    data_corpus_free(c);
}

/* ---- eval ------------------------------------------------------------------------------- */

static int32_t ids_of(const char *s, int32_t *ids)
{
    return (int32_t)data_encode(s, strlen(s), ids);
}

static void test_eval(void)
{
    data_corpus *c = NULL;
    char err[256], dec[32];
    data_eval_example ex, ex2;
    data_corpus_synthetic(&c, 9, err, sizeof(err));
    int bad = 0, held_out = 1, correct = 1;
    for (uint64_t i = 0; i < 300; i++) {
        CHECK(data_eval_example_get(c, i, &ex) == 0);
        int a, b, r, used = 0;
        char op;
        size_t n = 0;
        data_decode(ex.prompt, (size_t)ex.prompt_len, dec, sizeof(dec), &n);
        bad += ex.prompt[0] != TFT_BOS || strcmp(dec, ex.text) != 0 ||
               ex.prompt_len != (int)strlen(ex.text) + 1;
        bad += sscanf(ex.text, "%d%c%d=%n", &a, &op, &b, &used) != 3 || ex.text[used] != '\0';
        r = op == '+' ? a + b : a - b;
        bad += atoi(ex.answer) != r;
        if (a >= 0 && a < 100 && b >= 0 && b < 100)
            held_out &= !seen_train[a][op == '-'][b];
        int32_t gen[8];
        size_t k = (size_t)ids_of(ex.answer, gen);
        gen[k] = ';';
        correct &= data_answer_correct(ex.answer, gen, k + 1) && k + 1 <= DATA_EVAL_MAX_NEW;
    }
    CHECK(bad == 0);
    CHECK(held_out);
    CHECK(correct);
    data_eval_example_get(c, 7, &ex);
    data_eval_example_get(c, 7, &ex2);
    CHECK(memcmp(&ex, &ex2, sizeof(ex)) == 0);

    int32_t g[8];
    int n = ids_of("42", g);
    g[n] = TFT_EOS;
    CHECK(data_answer_correct("42", g, 3));
    CHECK(data_answer_correct("42", g, 2));
    CHECK(!data_answer_correct("42", g, 1));
    n = ids_of("421", g);
    CHECK(!data_answer_correct("42", g, (size_t)n));
    n = ids_of("42 7", g);
    CHECK(data_answer_correct("42", g, (size_t)n));
    n = ids_of("-42", g);
    CHECK(!data_answer_correct("42", g, (size_t)n));
    CHECK(data_answer_correct("-42", g, (size_t)n));
    n = ids_of("43;", g);
    CHECK(!data_answer_correct("42", g, (size_t)n));
    CHECK(!data_answer_correct("42", g, 0));
    data_corpus_free(c);
}

/* ---- file corpus ---------------------------------------------------------------------- */

static void write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void test_file_corpus(const char *dir)
{
    char path[512], err[512], text[4096];
    data_corpus *c = NULL;
    uint8_t doc[2048];
    size_t n = 0, len;
    /* 12 lines: the 5th empty, the 3rd CRLF, the 8th 2500 bytes long. */
    for (int i = 0; i < 12; i++) {
        if (i == 4)
            n += (size_t)snprintf(text + n, sizeof(text) - n, "\n");
        else if (i == 7) {
            memset(text + n, 'x', 2500);
            n += 2500;
            text[n++] = '\n';
        } else
            n += (size_t)snprintf(text + n, sizeof(text) - n, "line %d%s\n", i, i == 2 ? "\r" : "");
    }
    snprintf(path, sizeof(path), "%s/corpus.txt", dir);
    write_file(path, text, n);
    CHECK(data_corpus_open_file(&c, path, 1024, err, sizeof(err)) == 0);
    /* documents: lines 0-3, 5-6, three pieces of line 7, 8-11 = 13; the
     * 10th (line 8) is eval */
    CHECK(data_corpus_count(c, DATA_TRAIN) == 12 && data_corpus_count(c, DATA_EVAL) == 1);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 0, doc, sizeof(doc), &len) == 0 && len == 6 &&
          memcmp(doc, "line 0", 6) == 0);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 2, doc, sizeof(doc), &len) == 0 && len == 6 &&
          memcmp(doc, "line 2", 6) == 0);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 4, doc, sizeof(doc), &len) == 0 &&
          memcmp(doc, "line 5", 6) == 0);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 6, doc, sizeof(doc), &len) == 0 && len == 1024);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 8, doc, sizeof(doc), &len) == 0 && len == 452);
    CHECK(data_corpus_doc(c, DATA_EVAL, 0, doc, sizeof(doc), &len) == 0 && len == 6 &&
          memcmp(doc, "line 8", 6) == 0);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 9, doc, sizeof(doc), &len) == 0 && len == 6 &&
          memcmp(doc, "line 9", 6) == 0);
    CHECK(data_corpus_doc(c, DATA_TRAIN, 12, doc, sizeof(doc), &len) == 0 && len == 6 &&
          memcmp(doc, "line 0", 6) == 0); /* wraps: second epoch */
    data_eval_example ex;
    CHECK(data_eval_example_get(c, 0, &ex) == -ENOTSUP);

    data_loader dl;
    int32_t tok[2 * 16], tgt[2 * 16];
    float m[2 * 16];
    CHECK(data_loader_init(&dl, c, DATA_TRAIN, 2, 16, 0, 1, 0, err, sizeof(err)) == 0);
    CHECK(data_loader_next(&dl, tok, tgt, m) == 0);
    CHECK(check_row(c, DATA_TRAIN, 1, 16, tok + 16, tgt + 16, m + 16) > 0);
    data_loader_free(&dl);
    data_corpus_free(c);
}

static void test_file_errors(const char *dir)
{
    char path[512], err[512];
    data_corpus *c = NULL;
    data_loader dl;
    /* Fewer than 10 documents: no eval split, and the eval loader says so. */
    snprintf(path, sizeof(path), "%s/small.txt", dir);
    write_file(path, "a\nb", 3);
    c = NULL;
    CHECK(data_corpus_open_file(&c, path, 0, err, sizeof(err)) == 0);
    CHECK(data_corpus_count(c, DATA_TRAIN) == 2 && data_corpus_count(c, DATA_EVAL) == 0);
    CHECK(data_loader_init(&dl, c, DATA_EVAL, 2, 8, 0, 1, 0, err, sizeof(err)) == -ENODATA);
    CHECKF(strstr(err, "eval split is empty") != NULL, "message: %s", err);
    data_corpus_free(c);

    /* Errors name the file and the reason. */
    snprintf(path, sizeof(path), "%s/missing.txt", dir);
    CHECK(data_corpus_open_file(&c, path, 0, err, sizeof(err)) == -ENOENT);
    CHECKF(strstr(err, path) && strstr(err, "No such file"), "message: %s", err);
    snprintf(path, sizeof(path), "%s/empty.txt", dir);
    write_file(path, "", 0);
    CHECK(data_corpus_open_file(&c, path, 0, err, sizeof(err)) == -ENODATA);
    CHECKF(strstr(err, path) && strstr(err, "empty"), "message: %s", err);
    write_file(path, "\n\r\n\n", 4);
    CHECK(data_corpus_open_file(&c, path, 0, err, sizeof(err)) == -ENODATA);
    CHECK(data_corpus_open_file(&c, dir, 0, err, sizeof(err)) == -EISDIR);
    CHECKF(strstr(err, dir) && strstr(err, "directory"), "message: %s", err);
}

int main(void)
{
    char dir[] = "/tmp/tft-test-data-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_tokenizer();
    test_rng();
    test_synthetic();
    test_split_disjoint();
    test_batch_layout();
    test_sharding();
    test_cursor_resume();
    test_token_checks();
    test_eval();
    test_file_corpus(dir);
    test_file_errors(dir);
    const char *names[] = {"corpus.txt", "small.txt", "empty.txt"};
    char p[512];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return TEST_DONE();
}

/*
 * data.h — the data pipeline of tftrain: a byte-level tokenizer, a corpus
 * (built-in synthetic arithmetic, or a text file), a sharded batch loader
 * with a resumable cursor, eval examples for exact-match accuracy, and the
 * small deterministic RNG the runtime saves in checkpoints.
 *
 * Workload: a few batches of (B, T) per training step, B*T in the
 * thousands; nothing here is on a hot path. Nothing here prints or keeps
 * global state; errors come back as a negative errno plus, where the user
 * can cause them, a message in the caller's buffer (err, errlen; err may be
 * NULL).
 *
 * Bug-zoo hooks (runtime/README.md, "The bug zoo") and who implements them:
 *   label-shift  the runtime copies tokens into targets (loss_mask unchanged);
 *   short-batch  the runtime drops the last column of a (B, T) batch;
 *   token-oob    data_corrupt_token() plants an id >= TFT_VOCAB and
 *                data_check_tokens() is the check that then fails;
 *   dp-shard     DATA_SHARD_SAME in data_loader_init(): rank treated as 0;
 *   ckpt-data    the runtime does not call data_cursor_set() on resume.
 */
#ifndef TFT_RUNTIME_DATA_H
#define TFT_RUNTIME_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- tokenizer ----------------------------------------------------------
 * Ids 0..255 are the bytes themselves; three specials follow. */
enum {
    TFT_PAD = 256,   /* padding after EOS; never a real target */
    TFT_BOS = 257,   /* first token of every row */
    TFT_EOS = 258,   /* end of a document */
    TFT_VOCAB = 259, /* number of ids */
};

/* Writes the ids of n bytes to ids (room for n). Cannot fail; returns n. */
size_t data_encode(const void *bytes, size_t n, int32_t *ids);

/* Writes the bytes of ids 0..255 to out (room for cap bytes) and skips
 * PAD/BOS/EOS; NUL-terminates when there is room. *out_len = bytes written.
 * Returns 0, -ERANGE when an id is outside [0, TFT_VOCAB) (nothing is
 * decoded past it), -ENOSPC when out is too small. */
int data_decode(const int32_t *ids, size_t n, char *out, size_t cap, size_t *out_len);

/* ---- RNG ------------------------------------------------------------------
 * xoshiro256** seeded through splitmix64. The whole state is s[], so a
 * checkpoint saves and restores it by copying the four words. */
typedef struct tft_rng {
    uint64_t s[4];
} tft_rng;

void tft_rng_seed(tft_rng *r, uint64_t seed);
uint64_t tft_rng_next(tft_rng *r);
/* Uniform in [0, n); n > 0. Bias below n / 2^32. */
uint32_t tft_rng_below(tft_rng *r, uint32_t n);
/* Uniform in [0, 1) with 24 random bits. */
float tft_rng_uniform(tft_rng *r);
/* Standard normal (Box-Muller; two draws per call, nothing cached). */
float tft_rng_normal(tft_rng *r);

/* ---- corpus ---------------------------------------------------------------
 * Documents come in two disjoint splits. Index g of a split is any uint64:
 * the synthetic corpus is unbounded, a file corpus wraps (g modulo the count,
 * i.e. epochs in file order). */
enum data_split { DATA_TRAIN = 0, DATA_EVAL = 1 };

/* Longest synthetic document, in bytes. */
enum { DATA_SYNTH_DOC_MAX = 64 };

typedef struct data_corpus data_corpus;

/* The built-in corpus: documents of 1 to 6 equations "A+B=C" or "A-B=C"
 * (A, B in 0..99, C possibly negative) separated by ';' or ' ', e.g.
 * "17+25=42;3-80=-77". Document g of a split depends only on (seed, split, g).
 * Every (A, op, B) belongs to exactly one split (about 10% are eval, fixed
 * independently of the seed), so eval equations never occur in training.
 * Returns 0 or -ENOMEM. */
int data_corpus_synthetic(data_corpus **out, uint64_t seed, char *err, size_t errlen);

/* A text file: each line (without "\n" or "\r\n") is a document, empty lines
 * are skipped, lines longer than max_doc bytes are cut into pieces of max_doc
 * (0 = 1024). Document i of the file is eval when i % 10 == 9, else train, so
 * a file of fewer than 10 documents has no eval split. Returns 0, or a
 * negative errno with a message naming the file: unreadable (-errno of
 * open/read), no documents (-ENODATA), -ENOMEM. */
int data_corpus_open_file(data_corpus **out, const char *path, size_t max_doc, char *err,
                          size_t errlen);

/* Frees the corpus; NULL is fine. Loaders using it must be freed first. */
void data_corpus_free(data_corpus *c);

/* Documents in a split: UINT64_MAX for the synthetic corpus (unbounded). */
uint64_t data_corpus_count(const data_corpus *c, int split);

/* Copies up to cap bytes of document g of split into buf; *len = its full
 * length (may exceed cap). Returns 0, -EINVAL for a bad split, -ENODATA when
 * the split is empty. */
int data_corpus_doc(const data_corpus *c, int split, uint64_t g, uint8_t *buf, size_t cap,
                    size_t *len);

/* ---- batches ----------------------------------------------------------------
 * Row layout: BOS, the document's bytes, EOS, then PAD, cut to T+1 tokens.
 *   tokens[b][t]    = row[t]        (B,T) int32
 *   targets[b][t]   = row[t+1]      (B,T) int32, PAD where padded
 *   loss_mask[b][t] = targets[b][t] != PAD ? 1 : 0    (B,T) float
 * A document longer than T-1 bytes loses its tail (and its EOS).
 *
 * Sharding: the cursor counts documents of the split consumed by all ranks
 * together and is the same on every rank. The step at cursor c uses the
 * documents c .. c + W*B - 1; rank r's row b is document c + r*B + b. So the
 * ranks' batches concatenated in rank order are exactly the batch of one
 * rank with W*B rows, and every step advances the cursor by W*B. */
enum { DATA_SHARD_SAME = 1u }; /* dp-shard bug: every rank reads rank 0's rows */

typedef struct data_loader {
    const data_corpus *corpus; /* borrowed; must outlive the loader */
    int split;                 /* DATA_TRAIN or DATA_EVAL */
    int B, T;                  /* rows per rank, positions per row */
    int rank, world;           /* this rank, number of ranks */
    unsigned flags;            /* DATA_SHARD_SAME or 0 */
    uint64_t cursor;           /* documents consumed by all ranks together */
    uint8_t *scratch;          /* T bytes: one document's head */
} data_loader;

/* Sets up a loader at cursor 0. Returns 0, -EINVAL (B, T < 1, rank outside
 * [0, world), W*B overflowing) or -ENODATA (the split is empty) with a
 * message, -ENOMEM. On error the loader needs no data_loader_free. */
int data_loader_init(data_loader *dl, const data_corpus *c, int split, int B, int T, int rank,
                     int world, unsigned flags, char *err, size_t errlen);
/* Frees the scratch buffer; safe on a zeroed or already freed loader. */
void data_loader_free(data_loader *dl);

/* Fills this rank's batch at cursor without moving the cursor. Each output
 * has B*T elements. Returns 0 or a negative errno of data_corpus_doc. */
int data_loader_batch(data_loader *dl, uint64_t cursor, int32_t *tokens, int32_t *targets,
                      float *loss_mask);
/* data_loader_batch at the cursor, then cursor += world * B. */
int data_loader_next(data_loader *dl, int32_t *tokens, int32_t *targets, float *loss_mask);

uint64_t data_cursor_get(const data_loader *dl);
void data_cursor_set(data_loader *dl, uint64_t cursor);

/* ---- bug-zoo and safety checks ----------------------------------------------- */

/* token-oob: sets one of tokens[0..n) to TFT_VOCAB, at a position that
 * depends only on (n, step), and returns that position. n > 0. */
size_t data_corrupt_token(int32_t *tokens, size_t n, uint64_t step);

/* Checks that every id of tokens (rows x cols) lies in [0, TFT_VOCAB).
 * Returns 0, or -ERANGE with a message naming the first bad row, column and
 * id. */
int data_check_tokens(const int32_t *tokens, int rows, int cols, char *err, size_t errlen);

/* ---- eval -------------------------------------------------------------------------
 * Example i is the first equation of eval document i: the prompt is BOS
 * followed by "A+B=" (or "A-B="), the answer is C in decimal. Greedy
 * decoding of DATA_EVAL_MAX_NEW tokens after the prompt always suffices to
 * judge it. */
enum { DATA_EVAL_MAX_NEW = 4 }; /* longest answer "-99"/"198" plus a terminator */

typedef struct data_eval_example {
    int32_t prompt[8];  /* BOS, then the bytes of "A+B=" */
    int prompt_len;     /* tokens in prompt, 5..7 */
    char text[16];      /* the prompt's bytes, NUL-terminated: "17+25=" */
    char answer[8];     /* NUL-terminated: "42" */
} data_eval_example;

/* Fills ex with eval example i. Returns 0, -ENOTSUP for a file corpus (it has
 * no equations; the runtime reports eval loss only). */
int data_eval_example_get(const data_corpus *c, uint64_t i, data_eval_example *ex);

/* True when the generated ids spell answer exactly and then end: the ids
 * after the answer's characters are either absent (n == strlen(answer)) or
 * begin with a terminator (EOS, PAD, ';' or ' '). "42" matches "42;", "42"
 * and "42<EOS>", not "421", "4" or "-42". */
bool data_answer_correct(const char *answer, const int32_t *generated, size_t n);

#endif

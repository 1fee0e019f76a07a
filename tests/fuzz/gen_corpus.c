/*
 * gen_corpus.c — writes the seed corpus of the fuzz targets.
 *
 *   fuzz_gen_corpus DIR     writes the seeds into DIR/reader/ and DIR/manifest/
 *
 * The committed seeds in tests/fuzz/corpus/ came from
 *   cmake --build BUILD --target fuzz_gen_corpus
 *   BUILD/tests/fuzz/fuzz_gen_corpus tests/fuzz/corpus
 * Rerun it when the format or fuzz_sample.h changes. Reader seeds are small
 * rank files from tft_writer (closed, unclosed, torn, damaged, header only)
 * plus inputs for fuzz_reader's mutation modes (see fuzz_reader.c); manifest
 * seeds are valid manifests from tft_manifest_to_json and invalid ones.
 * Files named regress-* are inputs that once crashed the library; they are
 * kept by hand (this program does not write them) and replayed by ctest.
 */
#include "tft_format.h"
#include "fuzz_sample.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failed;

static void put_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_gen_corpus: %s: cannot write: %s\n", path, strerror(errno));
        failed = 1;
    }
}

static char *get_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        p = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (p && (fseek(f, 0, SEEK_SET) != 0 || fread(p, 1, (size_t)len, f) != (size_t)len)) {
            free(p);
            p = NULL;
        } else if (p) {
            *n = (size_t)len;
        }
    }
    if (f)
        fclose(f);
    if (!p) {
        fprintf(stderr, "fuzz_gen_corpus: %s: cannot read\n", path);
        failed = 1;
    }
    return p;
}

static void rank_file(const char *dir, const char *name, int nsteps, int close_it)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int e = sample_write_rank_file(path, nsteps, close_it);
    if (e) {
        fprintf(stderr, "fuzz_gen_corpus: %s: %s\n", path, strerror(-e));
        failed = 1;
    }
}

/* A closed rank file, then rewritten as name with fn applied to its bytes. */
static void derived_file(const char *dir, const char *name, void (*fn)(char *p, size_t *n))
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    rank_file(dir, name, SAMPLE_STEPS, 1);
    size_t n;
    char *p = get_file(path, &n);
    if (!p)
        return;
    fn(p, &n);
    put_file(dir, name, p, n);
    free(p);
}

static void cut_in_last_chunk(char *p, size_t *n) { (void)p, *n = *n * 2 / 3; }
static void flip_middle(char *p, size_t *n) { p[*n / 2] ^= 0x10; }

static void mode_input(const char *dir, const char *name, const uint8_t *head, size_t nhead,
                       const sample_buf *raw)
{
    sample_buf b = {0};
    sample_buf_put(&b, head, nhead);
    if (raw)
        sample_buf_put(&b, raw->p, raw->len);
    put_file(dir, name, b.p, b.len);
    free(b.p);
}

static void reader_seeds(const char *dir)
{
    rank_file(dir, "rank-closed.tft", SAMPLE_STEPS, 1);
    rank_file(dir, "rank-one-chunk.tft", 1, 1);
    rank_file(dir, "rank-unclosed.tft", SAMPLE_STEPS, 0);
    char path[4200];
    tft_writer *w = NULL; /* a recorder that died at once: the header frame only */
    if (snprintf(path, sizeof(path), "%s/rank-header-only.tft", dir) >= (int)sizeof(path) ||
        !(w = tft_writer_open(path, NULL, NULL)))
        failed = 1;
    tft_writer_abandon(w);
    derived_file(dir, "rank-torn.tft", cut_in_last_chunk);
    derived_file(dir, "rank-damaged.tft", flip_middle);

    /* mutation modes of fuzz_reader: first byte & 3 */
    static const uint8_t xor[] = {0x00, 0x90, 0x00, 0x01, 0x00, 0x02, 0x80};
    static const uint8_t trunc[] = {0x01, 0x00, 0x04, 0x20, 0x01, 0x04};
    static const uint8_t reseal_index[] = {0x02, 0x01, 0x28, 0x00, 0x01};
    static const uint8_t reseal_recount[] = {0x02, 0x02, 0x04, 0x01, 0x08};
    mode_input(dir, "mode0-xor.bin", xor, sizeof(xor), NULL);
    mode_input(dir, "mode1-truncate.bin", trunc, sizeof(trunc), NULL);
    mode_input(dir, "mode2-reseal-index.bin", reseal_index, sizeof(reseal_index), NULL);
    mode_input(dir, "mode2-reseal-recount.bin", reseal_recount, sizeof(reseal_recount), NULL);
    /* mode 4, a program of writer calls: 0 string (len = 1 + 300*a + b),
     * 1 flush, 2 dropped, else a record (kind byte, then kind's fields) */
    static const uint8_t writer_calls[] = {
        0x04, 0x00,                         /* 64 KiB chunks */
        0x00, 0x00, 0x10, 0x00, 0x01, 0x20, /* two strings */
        0x03, 0x01, 0x00, 0x01, 0x01, 0x02, 0x01, 0x03, 0x00, 0x01, /* op: 2 in, 1 out, 3 attrs */
        0x03, 0x02, 0x00, 0x01, 0x01, 0x08, 0x01,                   /* tensor, ndim 8 */
        0x01,                                                       /* flush */
        0x03, 0x03, 0x00, 0x01, 0x01, 0x00, 0x03, 0x04, 0x00, 0x01, 0x01, /* alloc, free */
        0x03, 0x00, 0x00, 0x01, 0x00, 0x03, 0x08, 0x00, 0x00, 0x00,       /* step, process */
        0x03, 0x09, 0x00, 0x00, 0x00,                                     /* dropped record */
        0x02, 0x05,                                                 /* 5 dropped */
        0x03, 0x05, 0x00, 0x01, 0x01, 0x01, 0x03, 0x06, 0x00, 0x01, 0x01, 0x00, /* coll, kernel */
        0x03, 0x07, 0x00, 0x01, 0x01, 0x00, 0x01, 0x03, 0x0a, 0x02, 0x00, 0x01, 0x01, /* ckpt, unknown */
        0x03, 0x0b, 0x01, 0x00, 0x00, 0x00,                         /* a STRING: refused */
    };
    mode_input(dir, "mode4-writer-calls.bin", writer_calls, sizeof(writer_calls), NULL);
    sample_buf raw;
    if (sample_raw_records(&raw, 2) == 0) {
        static const uint8_t raw_index[] = {0x03, 0x33};  /* index, recount, 512 B pieces */
        static const uint8_t raw_nocount[] = {0x03, 0x04}; /* no index, counts off by one */
        mode_input(dir, "mode3-raw-index.bin", raw_index, sizeof(raw_index), &raw);
        mode_input(dir, "mode3-raw-wrong-count.bin", raw_nocount, sizeof(raw_nocount), &raw);
    } else {
        failed = 1;
    }
    free(raw.p);
}

static void manifest_seeds(const char *dir)
{
    static char *cmd[] = {"torchrun", "--nproc-per-node=2", "train.py", "--lr=3e-4"};
    tft_manifest_rank ranks[2] = {
        {.rank = 0, .pid = 4242, .file = "rank-00000.tft", .exited = 1, .exit_code = 0},
        {.rank = 1, .pid = 4243, .file = "rank-00001.tft", .exited = 1, .signal = 9},
    };
    tft_manifest m = {
        .major = 1, .minor = 0, .run_id = "0123456789abcdef0123456789abcdef",
        .tool_version = "0.1.0", .host = "node07", .cwd = "/home/u/run",
        .argv = cmd, .argc = 4, .start_ns = 1700000000123456789ull,
        .end_ns = 1700000100123456789ull, .world_size = 2, .complete = 1, .exit_status = 137,
        .options_json = "{\"stats\":\"full\",\"every\":1,\"ring_mb\":64,\"ops\":[\"gemm\",\"nccl\"]}",
        .ranks = ranks, .nranks = 2,
    };
    char *j = tft_manifest_to_json(&m);
    if (!j) {
        failed = 1;
        return;
    }
    put_file(dir, "complete.json", j, strlen(j));
    put_file(dir, "truncated.json", j, strlen(j) / 2);
    free(j);

    ranks[0].exited = ranks[1].exited = 0;
    m.complete = 0, m.end_ns = 0, m.exit_status = -1, m.options_json = NULL;
    if (!(j = tft_manifest_to_json(&m))) {
        failed = 1;
        return;
    }
    put_file(dir, "running.json", j, strlen(j));
    free(j);

    static const struct { const char *name, *text; } fixed[] = {
        {"minimal.json", "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"ranks\":[]}"},
        {"newer-major.json", "{\"format\":\"tftrace\",\"format_version\":\"2.0\",\"ranks\":[]}"},
        {"missing-ranks.json", "{\"format\":\"tftrace\",\"format_version\":\"1.0\"}"},
        {"unsafe-file.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"ranks\":[{\"file\":\"../x\"}]}"},
        {"wrong-types.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.x\",\"command\":\"x\",\"world_size\":\"2\","
         "\"start_ns\":12,\"ranks\":[1,{\"file\":\"a\",\"exit\":{\"code\":\"3\"}}]}"},
        {"escapes.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"host\":\"h\\u00e9\\n\","
         "\"command\":[\"a\\u0000b\",\"\\\"q\\\"\"],\"ranks\":[{\"file\":\"r\\u0000/x\",\"rank\":-1}]}"},
        {"not-json.txt", "format=tftrace\n"},
        /* numbers outside int / uint64 (once undefined casts in get_int / get_ns) */
        {"world-size-1e10.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"world_size\":1e10,\"ranks\":[]}"},
        {"start-ns-1e20.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"start_ns\":1e20,\"ranks\":[]}"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        put_file(dir, fixed[i].name, fixed[i].text, strlen(fixed[i].text));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_corpus DIR  (writes DIR/reader and DIR/manifest)\n");
        return 2;
    }
    char reader[4096], manifest[4096];
    snprintf(reader, sizeof(reader), "%s/reader", argv[1]);
    snprintf(manifest, sizeof(manifest), "%s/manifest", argv[1]);
    mkdir(argv[1], 0755);
    if ((mkdir(reader, 0755) < 0 && errno != EEXIST) ||
        (mkdir(manifest, 0755) < 0 && errno != EEXIST)) {
        fprintf(stderr, "fuzz_gen_corpus: cannot create %s: %s\n", reader, strerror(errno));
        return 1;
    }
    reader_seeds(reader);
    manifest_seeds(manifest);
    return failed;
}

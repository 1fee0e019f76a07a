/*
 * gen_fixture.c — writes fixtures/format-1.3.tft: the fixture_stream.h
 * records through the writer of format 1.3 (main at 108ca21), the last
 * version whose chunks hold plain records. Not built by CMake: it is built
 * by hand against that commit's formats/ once, and its output committed:
 *   git archive 108ca21 formats | tar -x -C /tmp/old
 *   cc -std=c17 -O1 -D_GNU_SOURCE -I/tmp/old/formats/include -I/tmp/old/formats/util \
 *      -I/tmp/old/formats/src tests/formats/gen_fixture.c /tmp/old/formats/src/{record,writer,types}.c \
 *      -lzstd -lxxhash -o /tmp/gen_fixture && /tmp/gen_fixture tests/formats/fixtures/format-1.3.tft
 */
#include "fixture_stream.h"

#include <stdio.h>

static int emit(void *ctx, const tft_rec *rec) { return tft_writer_append(ctx, rec); }

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_fixture OUT.tft\n");
        return 2;
    }
    tft_file_info fi = {.rank = 0, .world_size = 1, .pid = 4242, .start_monotonic_ns = 1000};
    snprintf(fi.host, sizeof(fi.host), "fixture");
    tft_writer *w = tft_writer_open(argv[1], &fi, &TFT_WRITER_OPTS(.chunk_bytes = 64 * 1024, .sync = 0));
    if (!w)
        return 1;
    uint64_t names[FIXTURE_TENSORS + 1];
    char b[16];
    for (int i = 0; i < FIXTURE_TENSORS; i++) {
        int n = snprintf(b, sizeof(b), "w%d", i);
        names[i] = tft_writer_string(w, b, (size_t)n);
    }
    names[FIXTURE_TENSORS] = tft_writer_string(w, "MPI_Allreduce", 13);
    int e = fixture_stream(names, emit, w);
    return e || tft_writer_close(w) ? 1 : 0;
}

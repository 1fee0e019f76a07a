/*
 * fuzz_manifest.c — libFuzzer target for the manifest parser.
 *
 * The input is manifest JSON text (not NUL-terminated: the parser takes a
 * length). When it parses, the manifest must survive a round trip:
 * to_json -> parse succeeds with the same rank count, argv, world size,
 * exit status, rank files and rank numbers, and serialising the result again
 * gives the same text (to_json is a fixed point after one round).
 * Violations abort.
 */
#include "tft_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_TARGET "fuzz_manifest"
#include "tft_fuzz_check.h"

static void check_same(const tft_manifest *a, const tft_manifest *b)
{
    FUZZ_CHECK(a->nranks == b->nranks, "nranks %d -> %d", a->nranks, b->nranks);
    FUZZ_CHECK(a->argc == b->argc, "argc %d -> %d", a->argc, b->argc);
    FUZZ_CHECK(a->world_size == b->world_size, "world_size %d -> %d", a->world_size, b->world_size);
    FUZZ_CHECK(a->complete == b->complete, "complete %d -> %d", a->complete, b->complete);
    FUZZ_CHECK(a->start_ns == b->start_ns && a->end_ns == b->end_ns, "timestamps changed");
    FUZZ_CHECK(strcmp(a->run_id, b->run_id) == 0 && strcmp(a->host, b->host) == 0 &&
                   strcmp(a->cwd, b->cwd) == 0,
               "run_id/host/cwd changed");
    for (int i = 0; i < a->argc; i++)
        FUZZ_CHECK(strcmp(a->argv[i], b->argv[i]) == 0, "argv[%d] changed", i);
    for (int i = 0; i < a->nranks; i++) {
        const tft_manifest_rank *x = &a->ranks[i], *y = &b->ranks[i];
        FUZZ_CHECK(x->rank == y->rank && x->pid == y->pid && strcmp(x->file, y->file) == 0 &&
                       x->exited == y->exited && x->signal == y->signal &&
                       (x->signal || x->exit_code == y->exit_code),
                   "ranks[%d] changed", i);
    }
    /* a negative status is written as null and read back as -1 */
    FUZZ_CHECK((a->exit_status < 0 ? -1 : a->exit_status) == b->exit_status,
               "exit_status %d -> %d", a->exit_status, b->exit_status);
    /* absent (or not an object) options are written as {} */
    const char *oa = a->options_json ? a->options_json : "{}";
    FUZZ_CHECK(b->options_json && strcmp(oa, b->options_json) == 0, "options %s -> %s", oa,
               b->options_json ? b->options_json : "(none)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    tft_manifest m, m2, m3;
    /* copy so ASan sees a read past len */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    int e = tft_manifest_parse(text, size, &m, err, sizeof(err));
    free(text);
    FUZZ_CHECK(e == 0 || e == -EPROTO || e == -EPROTONOSUPPORT || e == -ENOMEM,
               "parse returned %d", e);
    FUZZ_CHECK(memchr(err, 0, sizeof(err)), "error message unterminated");
    if (e) {
        FUZZ_CHECK(err[0], "parse failed (%d) without a reason", e);
        FUZZ_CHECK(m.argv == NULL && m.ranks == NULL && m.nranks == 0, "failed parse leaked state");
        tft_manifest_free(&m);
        return 0;
    }
    for (int i = 0; i < m.nranks; i++)
        FUZZ_CHECK(m.ranks[i].file[0] && !strchr(m.ranks[i].file, '/'), "unsafe rank file");

    char *j1 = tft_manifest_to_json(&m);
    FUZZ_CHECK(j1, "to_json failed");
    e = tft_manifest_parse(j1, strlen(j1), &m2, err, sizeof(err));
    FUZZ_CHECK(e == 0, "own output does not parse: %s\n%s", err, j1);
    check_same(&m, &m2);

    char *j2 = tft_manifest_to_json(&m2);
    FUZZ_CHECK(j2, "to_json failed");
    e = tft_manifest_parse(j2, strlen(j2), &m3, err, sizeof(err));
    FUZZ_CHECK(e == 0, "own output does not parse: %s", err);
    check_same(&m2, &m3);
    char *j3 = tft_manifest_to_json(&m3);
    FUZZ_CHECK(j3 && strcmp(j2, j3) == 0, "to_json is not stable:\n%s\n---\n%s", j2, j3 ? j3 : "");

    free(j1);
    free(j2);
    free(j3);
    tft_manifest_free(&m);
    tft_manifest_free(&m2);
    tft_manifest_free(&m3);
    tft_manifest_free(NULL);
    return 0;
}

/*
 * fuzz_diff.c — libFuzzer target for tfdiff's comparison of two rank
 * files: the alignment and first divergence (compare_rank), leaks of each
 * side and BAD against GOLDEN (leak_find_mem, leak_compare), the
 * report in text, JSON, JUnit and Markdown (report_text.c, report_json.c,
 * report_junit.c, report_markdown.c), and the element-wise comparison of
 * captured tensors (tfdiff --tensors: compare_tensors.c, report_tensors.c).
 *
 * The input is a program (fuzz_trace.h) of at least two rank files: file 0
 * is GOLDEN, file 1 BAD, each written with tft_writer (checksummed) into a
 * directory of its own on tmpfs. The last input byte picks the options:
 * tolerances 0 (bitwise), a name glob, a step range, collectives compared.
 *
 * Invariants (abort): compare_rank returns 0 on readable files and reports a
 * first divergence only with a kind in range; leak counts stay within the
 * arrays given. The rest (crashes, leaks, time, memory) is libFuzzer's.
 */
#include "core.h"
#include "desync.h"
#include "leak.h"
#include "compare.h"
#include "report.h"
#include "report_tensors.h"
#include "fuzz_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FUZZ_TARGET "fuzz_diff"
#include "tft_fuzz_check.h"

static char dir[256], gdir[300], bdir[300], junit[320], markdown[320];
static FILE *devnull;

/* at exit: the directories go (libFuzzer's exit, replay_main.c's) */
static void remove_dirs(void)
{
    unlink(junit);
    unlink(markdown);
    ft_remove(gdir);
    ft_remove(bdir);
    ft_remove(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch_dir(dir, sizeof(dir), "");
    snprintf(gdir, sizeof(gdir), "%s/g.trace", dir);
    snprintf(bdir, sizeof(bdir), "%s/b.trace", dir);
    snprintf(junit, sizeof(junit), "%s/junit.xml", dir);
    snprintf(markdown, sizeof(markdown), "%s/summary.md", dir);
    FUZZ_CHECK((mkdir(gdir, 0700) == 0 || errno == EEXIST) && (mkdir(bdir, 0700) == 0 || errno == EEXIST), "mkdir %s",
               dir);
    atexit(remove_dirs);
    FUZZ_CHECK((devnull = fopen("/dev/null", "w")), "/dev/null");
    return 0;
}

static void quiet_log(void *ctx, int level, const char *msg) { (void)ctx, (void)level, (void)msg; }

/* Moves rank file i of dir into side (as its rank-00000.tft). */
static void take_file(int i, const char *side)
{
    char from[4096], to[4096];
    ft_path(from, sizeof(from), dir, i);
    ft_path(to, sizeof(to), side, 0);
    FUZZ_CHECK(rename(from, to) == 0, "rename %s", from);
}

static void compare(const compare_opts *o)
{
    tft_reader_opts ro = TFT_READER_OPTS(.log = quiet_log);
    char gp[4096], bp[4096];
    ft_path(gp, sizeof(gp), gdir, 0);
    ft_path(bp, sizeof(bp), bdir, 0);
    tft_reader *g = tft_reader_open(gp, &ro), *b = tft_reader_open(bp, &ro);
    FUZZ_CHECK(g && b, "a rank file written by tft_writer does not open: %s", strerror(errno));
    diff_report *rep = report_new(gdir, bdir, o);
    FUZZ_CHECK(rep, "report_new");
    compare_result res;
    int e = compare_rank(g, b, o, &res);
    FUZZ_CHECK(e == 0, "compare_rank: %s", strerror(-e));
    FUZZ_CHECK(!res.first.found || (res.first.kind >= DK_VALUE && res.first.kind <= DK_EXTRA), "kind %d",
               res.first.kind);
    report_add_rank(rep, &res);

    enum { SITES = 64, LEAKS = 16 };
    leak_site_mem gs[SITES], bs[SITES];
    leak_rank_mem gm = {.sites = gs, .max_sites = SITES}, bm = {.sites = bs, .max_sites = SITES};
    leak_finding gl[LEAKS], bl[LEAKS], out[LEAKS];
    int ng = leak_find_mem(g, 0, 0, gl, LEAKS, &gm), nb = leak_find_mem(b, 0, 0, bl, LEAKS, &bm);
    FUZZ_CHECK(ng >= 0 && ng <= LEAKS && nb >= 0 && nb <= LEAKS, "leaks %d %d", ng, nb);
    int n = leak_compare(&gm, gl, ng, &bm, bl, nb, 0, out, LEAKS);
    FUZZ_CHECK(n >= 0 && n <= LEAKS, "leaks compared %d", n);
    for (int k = 0; k < n; k++)
        report_add_leak(rep, &out[k]);
    report_text(rep, devnull);
    report_json(rep, devnull);
    report_set_outputs(rep, NULL, markdown, 0, NULL); /* JUnit attaches it */
    report_junit(rep, junit);
    report_markdown(rep, markdown);
    report_free(rep);
    tft_reader_close(g);
    tft_reader_close(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    ft_clean(dir);
    ft_clean(gdir);
    ft_clean(bdir);
    uint8_t prog[4096 + 1];
    size_t n = size < sizeof(prog) ? size : sizeof(prog);
    memcpy(prog, data, n);
    prog[0] = (uint8_t)((prog[0] | 1) & ~(FT_CFG_COPY | FT_CFG_SAME_RANK | FT_CFG_MANIFEST)); /* 2 or 4 files */
    FUZZ_CHECK(ft_build(dir, prog, n) >= 2, "could not write the trace");
    take_file(0, gdir);
    take_file(1, bdir);

    uint8_t opt = data[size - 1];
    compare_opts o = COMPARE_OPTS_DEFAULT;
    if (opt & 1)
        o.rtol = o.atol = 0;
    if (opt & 2)
        o.name_glob = "L0.*";
    if (opt & 4)
        o.step_lo = 1, o.step_hi = 2;
    o.collectives = opt & 8;
    compare(&o);

    tensors_opts to = {.rtol = opt & 16 ? 1e-3 : 0, .atol = 0, .pad_id = 256, .json = opt & 32,
                       .name_glob = opt & 64 ? "L0.*" : NULL};
    compare_tensors_result tr;
    int st = compare_tensors_run(gdir, bdir, &to, &tr);
    if (!st)
        st = report_tensors(&tr, gdir, bdir, &to, devnull);
    compare_tensors_free(&tr);
    FUZZ_CHECK(st >= 0 && st <= 2, "compare_tensors %d", st);
    return 0;
}

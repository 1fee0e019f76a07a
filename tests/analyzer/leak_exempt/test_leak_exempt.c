/*
 * test_leak_exempt.c — what no leak rule reports (analyzer/leak/leak_exempt.c):
 * an allocator's own pool (CPython's arenas, by the function that maps
 * them, or a stripped interpreter's site of arena-sized blocks) and every
 * site of a helper process (a compiler or linker the job ran, by its main
 * thread's name). Each case is a rank file written here with the writer
 * API, shaped as the real traces were: a step-less program that keeps a
 * block of each site per iteration, interleaved with other work, to its
 * end — which the growth rule, tfdump --check's at-exit rule and tfdiff's
 * rules all report unless the site or process is left out. Sites beside
 * them that are the program's own (an activation cache, CPython's large
 * objects, a stripped interpreter's site of mixed sizes) must still be
 * found: the cases fail both without the rule and with one too broad.
 */
#define _GNU_SOURCE
#include "leak.h"
#include "tft_test.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024u * 1024u)
#define PID 4000
#define ITERS 40
#define MAXL 16

static char tmpdir[256];
static uint64_t ts_now;

/* A site the program keeps a block of per iteration: bytes, or bytes and
 * alt_bytes in turn when alt_bytes is not 0. */
typedef struct kept_site {
    const char *name;
    uint64_t bytes, alt_bytes;
} kept_site;

/* The recording threads: first (tid first_tid, named first_name) and, when
 * main_name is not NULL, the main thread (tid = pid) after it. */
typedef struct threads {
    int32_t first_tid;
    const char *first_name;
    const char *main_name;
} threads;

static void hdr(tft_rec *h, uint16_t kind, size_t len)
{
    h->kind = kind;
    h->flags = 0;
    h->len = (uint32_t)len;
    h->ts = ++ts_now;
    h->step = TFT_STEP_NONE;
    h->seq = TFT_SEQ_NONE;
}

static void w_thread(tft_writer *w, int32_t tid, uint32_t index, const char *name)
{
    tft_rec_thread r = {0};
    hdr(&r.h, TFT_REC_THREAD, sizeof(r));
    r.event = TFT_THREAD_SWITCH;
    r.tid = tid;
    r.index = index;
    r.name = tft_writer_string(w, name, strlen(name));
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void w_process(tft_writer *w, uint32_t event)
{
    tft_rec_process r = {0};
    hdr(&r.h, TFT_REC_PROCESS, sizeof(r));
    r.event = event;
    r.pid = PID;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void w_alloc(tft_writer *w, uint64_t ptr, uint64_t bytes, const char *site)
{
    tft_rec_alloc r = {0};
    hdr(&r.h, TFT_REC_ALLOC, sizeof(r));
    r.ptr = ptr;
    r.bytes = bytes;
    r.site = tft_writer_string(w, site, strlen(site));
    r.device = -1;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

static void w_free(tft_writer *w, uint64_t ptr)
{
    tft_rec_free r = {0};
    hdr(&r.h, TFT_REC_FREE, sizeof(r));
    r.ptr = ptr;
    r.device = -1;
    CHECK(tft_writer_append(w, &r.h) == 0);
}

/* A step-less program of `iters` iterations: each keeps one block of every
 * site in sites[n] and allocates and frees a work buffer (the other work
 * between the kept blocks); it then exits with status 0. */
static void write_prog(const char *path, const threads *th, const kept_site *sites, int n, int iters)
{
    tft_file_info fi = {0};
    fi.rank = 0;
    fi.world_size = 1;
    fi.pid = PID;
    snprintf(fi.host, sizeof(fi.host), "testhost");
    tft_writer_opts o = TFT_WRITER_OPTS(.chunk_bytes = 64 * 1024, .sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &o);
    CHECK(w != NULL);
    if (!w)
        return;
    w_process(w, TFT_PROC_START);
    w_thread(w, th->first_tid, 0, th->first_name);
    w_alloc(w, 0x7000000000, 8 * MIB, "work_buffer");
    w_free(w, 0x7000000000);
    if (th->main_name)
        w_thread(w, PID, 1, th->main_name);
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < n; k++) {
            uint64_t bytes = sites[k].alt_bytes && (i & 1) ? sites[k].alt_bytes : sites[k].bytes;
            w_alloc(w, 0x100000000ull * (uint64_t)(k + 1) + (uint64_t)i * 16 * MIB, bytes, sites[k].name);
        }
        w_alloc(w, 0x7000000000, 8 * MIB, "work_buffer");
        w_free(w, 0x7000000000);
    }
    w_process(w, TFT_PROC_EXIT);
    CHECK(tft_writer_close(w) == 0);
}

/* Scans path (exit_min_bytes as tfdump --check gives it, 0 as tfdiff);
 * returns the number of leaks, out and mem filled. */
static int scan(const char *path, uint64_t exit_min_bytes, leak_finding *out, leak_rank_mem *mem)
{
    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    int n = r ? leak_find_mem(r, 0, exit_min_bytes, out, MAXL, mem) : -1;
    tft_reader_close(r);
    return n;
}

static bool found(const leak_finding *l, int n, const char *site)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(l[i].site, site))
            return true;
    return false;
}

static void print_leaks(const char *what, const leak_finding *l, int n)
{
    for (int i = 0; i < n; i++) {
        char line[512];
        leak_describe(&l[i], line, sizeof(line));
        printf("%s: leak: %s\n", what, line);
    }
}

/* CPython's arena mappers of every version, mimalloc's, and a stripped
 * interpreter's arena site: none is a leak. The program's own sites in the
 * same process are, by growth and at exit. */
static const kept_site PY_SITES[] = {
    {"_PyObject_ArenaMmap", MIB, 0},                 /* 3.4-3.11 */
    {"_PyObject_ArenaMalloc", MIB, 0},               /* arenas from malloc */
    {"_PyMem_ArenaAlloc", MIB, 0},                   /* 3.12+ */
    {"_mi_os_alloc_aligned", 4 * MIB, 0},            /* 3.13 mimalloc */
    {"unix_mmap_prim", 32 * MIB, 0},                 /* ... its mmap primitive */
    {"python3.11+0x22d099", MIB, 0},                 /* stripped python: arenas */
    {"libpython3.9.so.1.0+0x1d00", 256 * 1024, 0},   /* ... 256 KiB before 3.10 */
    {"save_activations", MIB, 0},                    /* the program's own: leaks */
    {"_PyObject_Malloc", MIB + 33, 0},               /* big Python objects: leak */
    {"python3.11+0x1d2e3f", MIB, MIB + 4096},        /* stripped, mixed sizes: leak */
    {"python3.11+0x1d2e40", 2 * MIB, 0},             /* stripped, not an arena's size: leak */
};
static const char *const PY_LEAKS[] = {"save_activations", "_PyObject_Malloc", "python3.11+0x1d2e3f",
                                       "python3.11+0x1d2e40"};
#define NPY ((int)(sizeof(PY_SITES) / sizeof(PY_SITES[0])))
#define NPY_LEAKS ((int)(sizeof(PY_LEAKS) / sizeof(PY_LEAKS[0])))

static void test_pools(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/python.tft", tmpdir);
    threads th = {PID, "python", NULL};
    write_prog(path, &th, PY_SITES, NPY, ITERS);
    leak_finding l[MAXL];
    leak_site_mem sm[MAXL];
    leak_rank_mem mem = {.sites = sm, .max_sites = MAXL};
    /* tfdump --check: growth and the at-exit threshold */
    int n = scan(path, LEAK_EXIT_MIN_BYTES, l, &mem);
    print_leaks("python", l, n);
    CHECKF(n == NPY_LEAKS, "%d leaks, want %d", n, NPY_LEAKS);
    for (int k = 0; k < NPY_LEAKS; k++)
        CHECKF(found(l, n, PY_LEAKS[k]), "%s not found", PY_LEAKS[k]);
    CHECKF(!strcmp(mem.process, "python") && !mem.helper, "process '%s' helper %d", mem.process, mem.helper);
    /* every site is listed, the pools marked */
    CHECK(mem.nsites == NPY + 1);
    for (int j = 0; j < mem.nsites && j < MAXL; j++) {
        bool want = strcmp(sm[j].site, "work_buffer") != 0;
        for (int k = 0; k < NPY_LEAKS; k++)
            want = want && strcmp(sm[j].site, PY_LEAKS[k]) != 0;
        CHECKF(sm[j].pool == want, "%s: pool %d", sm[j].site, sm[j].pool);
    }
    /* the at-exit rule alone would have named the arenas: they hold 40 MiB
     * in 40 blocks kept over the run */
    for (int j = 0; j < mem.nsites && j < MAXL; j++)
        if (!strcmp(sm[j].site, "_PyObject_ArenaMmap"))
            CHECK(sm[j].live_bytes == (uint64_t)ITERS * MIB && sm[j].live_allocs == ITERS);

    /* tfdiff: BAD keeps 40 of each, GOLDEN 10; the arenas differ as much as
     * the activations, and only the program's sites are BAD's leaks */
    char gpath[512];
    snprintf(gpath, sizeof(gpath), "%s/python-golden.tft", tmpdir);
    write_prog(gpath, &th, PY_SITES, NPY, ITERS / 4);
    leak_finding gl[MAXL], bl[MAXL], out[MAXL];
    leak_site_mem gs[MAXL], bs[MAXL];
    leak_rank_mem gm = {.sites = gs, .max_sites = MAXL}, bm = {.sites = bs, .max_sites = MAXL};
    int ng = scan(gpath, 0, gl, &gm), nb = scan(path, 0, bl, &bm);
    CHECK(ng >= 0 && nb >= 0);
    n = leak_compare(&gm, gl, ng, &bm, bl, nb, 0, out, MAXL);
    print_leaks("python vs golden", out, n);
    CHECKF(n == NPY_LEAKS, "%d leaks, want %d", n, NPY_LEAKS);
    for (int k = 0; k < NPY_LEAKS; k++)
        CHECKF(found(out, n, PY_LEAKS[k]), "%s not found", PY_LEAKS[k]);
}

/* GCC's collected heap, the linker's obstack: a compiler or linker's sites
 * are never a leak, whatever they hold; the same sites in a process of
 * another name are. */
static const kept_site TOOL_SITES[] = {
    {"_Z18ggc_internal_allocmPFvPvEmm", 2 * MIB, 0},
    {"_objalloc_alloc", MIB + 4096, 0},
};
#define NTOOL ((int)(sizeof(TOOL_SITES) / sizeof(TOOL_SITES[0])))

static int scan_named(const threads *th, leak_rank_mem *mem, leak_finding *l)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/tool.tft", tmpdir);
    write_prog(path, th, TOOL_SITES, NTOOL, ITERS);
    return scan(path, LEAK_EXIT_MIN_BYTES, l, mem);
}

static void test_helpers(void)
{
    static const char *const helpers[] = {"cc1plus", "cc1", "g++", "c++", "gcc-12", "clang-17", "as", "ld",
                                          "ld.lld", "collect2", "x86_64-linux-gn", "aarch64-linux-g",
                                          "nvcc", "ptxas", "cicc", "ninja", "make"};
    static const char *const others[] = {"python", "python3.11", "pt_main_thread", "pt_data_worker", "trainer",
                                         "train-12", "cc1plus2", "gccx", "ldconfig"};
    leak_finding l[MAXL];
    leak_site_mem sm[MAXL];
    leak_rank_mem mem = {.sites = sm, .max_sites = MAXL};
    for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++) {
        threads th = {PID, helpers[i], NULL};
        int n = scan_named(&th, &mem, l);
        CHECKF(n == 0 && mem.helper && !strcmp(mem.process, helpers[i]), "%s: %d leaks, helper %d, process '%s'",
               helpers[i], n, mem.helper, mem.process);
    }
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        threads th = {PID, others[i], NULL};
        int n = scan_named(&th, &mem, l);
        CHECKF(n == NTOOL && !mem.helper, "%s: %d leaks, helper %d", others[i], n, mem.helper);
    }

    /* the process is its main thread (tid = pid): a helper-named thread of
     * a trainer does not make it one; a process whose main thread never
     * recorded is named by its first recording thread */
    threads th = {PID + 1, "ld", "python"};
    int n = scan_named(&th, &mem, l);
    CHECKF(n == NTOOL && !mem.helper && !strcmp(mem.process, "python"), "%d leaks, process '%s'", n, mem.process);
    th = (threads){PID + 1, "cc1plus", NULL};
    CHECK(scan_named(&th, &mem, l) == 0 && mem.helper);

    /* tfdiff: a compiler of BAD holding more than GOLDEN's is no leak; a
     * trainer doing the same is */
    char gpath[512], bpath[512];
    snprintf(gpath, sizeof(gpath), "%s/tool-golden.tft", tmpdir);
    snprintf(bpath, sizeof(bpath), "%s/tool-bad.tft", tmpdir);
    const char *names[] = {"cc1plus", "trainer"};
    for (int k = 0; k < 2; k++) {
        th = (threads){PID, names[k], NULL};
        write_prog(gpath, &th, TOOL_SITES, NTOOL, 2);
        write_prog(bpath, &th, TOOL_SITES, NTOOL, ITERS);
        leak_finding gl[MAXL], bl[MAXL], out[MAXL];
        leak_site_mem gs[MAXL], bs[MAXL];
        leak_rank_mem gm = {.sites = gs, .max_sites = MAXL}, bm = {.sites = bs, .max_sites = MAXL};
        int ng = scan(gpath, 0, gl, &gm), nb = scan(bpath, 0, bl, &bm);
        n = ng >= 0 && nb >= 0 ? leak_compare(&gm, gl, ng, &bm, bl, nb, 0, out, MAXL) : -1;
        print_leaks(names[k], out, n);
        CHECKF(n == (k ? NTOOL : 0), "%s vs its golden: %d leaks", names[k], n);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tft-test-leak-exempt-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_pools();
    test_helpers();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_DONE();
}

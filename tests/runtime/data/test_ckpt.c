/*
 * test_ckpt.c — tftrain checkpoints: bit-exact round trip, latest pointer,
 * crash leftovers, corruption, config and tensor mismatches, missing paths.
 */
#include "ckpt.h"
#include "data.h"
#include "tft_test.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NW = 1000, NB = 37 };
static const char CONFIG[] = "layers=2\nd_model=64\nheads=4\nseq=32\nvocab=259\ndtype=fp32\n";

static float w[NW], bvec[NB], mw[NW];   /* what is saved */
static float w2[NW], b2[NB], mw2[NW];   /* what is loaded into */

static void fill_inputs(uint64_t seed)
{
    tft_rng r;
    tft_rng_seed(&r, seed);
    for (int i = 0; i < NW; i++) {
        w[i] = tft_rng_normal(&r);
        mw[i] = tft_rng_uniform(&r) * 1e-30f;
    }
    for (int i = 0; i < NB; i++)
        bvec[i] = (float)i - 18.0f;
    w[1] = -0.0f;
    w[2] = NAN;
    w[3] = INFINITY;
    w[4] = 1e-45f; /* denormal */
}

static void clear_outputs(void)
{
    memset(w2, 0xAB, sizeof(w2));
    memset(b2, 0xAB, sizeof(b2));
    memset(mw2, 0xAB, sizeof(mw2));
}

static int outputs_untouched(void)
{
    unsigned char probe[sizeof(w2)];
    memset(probe, 0xAB, sizeof(probe));
    return memcmp(w2, probe, sizeof(w2)) == 0 && memcmp(b2, probe, sizeof(b2)) == 0 &&
           memcmp(mw2, probe, sizeof(mw2)) == 0;
}

static ckpt_meta make_meta(int64_t step)
{
    ckpt_meta m;
    memset(&m, 0, sizeof(m));
    m.step = step;
    tft_rng r;
    tft_rng_seed(&r, (uint64_t)step + 100);
    memcpy(m.rng, r.s, sizeof(m.rng));
    m.data_cursor = (uint64_t)step * 16 + 5;
    snprintf(m.config, sizeof(m.config), "%s", CONFIG);
    return m;
}

static char save_err[512]; /* message of the last save_step */

/* Saves step with fresh inputs; returns ckpt_save's result. */
static int save_step(const char *dir, int64_t step, char *path, size_t cap)
{
    ckpt_tensor t[] = {{"wte", w, NW}, {"L0.b", bvec, NB}, {"adam.m.wte", mw, NW}};
    ckpt_meta m = make_meta(step);
    fill_inputs((uint64_t)step);
    return ckpt_save(dir, &m, t, 3, path, cap, save_err, sizeof(save_err));
}

/* Loads path into the *2 buffers (tensors listed in another order). */
static int load(const char *path, const char *config, ckpt_meta *m, char *err, size_t errlen)
{
    ckpt_tensor t[] = {{"adam.m.wte", mw2, NW}, {"wte", w2, NW}, {"L0.b", b2, NB}};
    return ckpt_load(path, config, t, 3, m, err, errlen);
}

static int count_tmp_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)) != NULL)
        n += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void copy_prefix(const char *from, const char *to, long bytes)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[4096];
    size_t n;
    while (in && out && bytes > 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0) {
        size_t k = (long)n < bytes ? n : (size_t)bytes;
        fwrite(buf, 1, k, out);
        bytes -= (long)k;
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

static void poke(const char *path, long off, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, off, SEEK_SET);
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_round_trip(const char *root)
{
    char dir[512], path[1024], found[1024], err[512] = "";
    ckpt_meta m;
    snprintf(dir, sizeof(dir), "%s/run", root);
    CHECKF(save_step(dir, 100, path, sizeof(path)) == 0, "%s", save_err); /* creates dir */
    CHECK(strstr(path, "/ckpt-step-000100.bin") != NULL);
    CHECK(ckpt_find_latest(dir, found, sizeof(found), err, sizeof(err)) == 0);
    CHECKF(strcmp(found, path) == 0, "found %s, saved %s", found, path);
    clear_outputs();
    memset(&m, 0, sizeof(m));
    CHECKF(load(found, CONFIG, &m, err, sizeof(err)) == 0, "%s", err);
    CHECK(memcmp(w2, w, sizeof(w)) == 0 && memcmp(b2, bvec, sizeof(b2)) == 0 &&
          memcmp(mw2, mw, sizeof(mw)) == 0);
    ckpt_meta want = make_meta(100);
    CHECK(m.step == 100 && m.data_cursor == want.data_cursor &&
          memcmp(m.rng, want.rng, sizeof(m.rng)) == 0 && strcmp(m.config, CONFIG) == 0);

    /* A newer save moves latest; the older file stays loadable. */
    CHECK(save_step(dir, 200, path, sizeof(path)) == 0);
    CHECK(ckpt_find_latest(dir, found, sizeof(found), err, sizeof(err)) == 0);
    CHECK(strstr(found, "ckpt-step-000200.bin") != NULL);
    CHECK(count_tmp_files(dir) == 0);
    snprintf(path, sizeof(path), "%s/ckpt-step-000100.bin", dir);
    CHECK(load(path, NULL, &m, err, sizeof(err)) == 0 && m.step == 100);

    /* data == NULL: checked, not filled (the ckpt-optim bug's resume). */
    fill_inputs(200);
    clear_outputs();
    ckpt_tensor t[] = {{"wte", w2, NW}, {"L0.b", b2, NB}, {"adam.m.wte", NULL, NW}};
    CHECK(ckpt_load(found, CONFIG, t, 3, &m, err, sizeof(err)) == 0 && m.step == 200);
    CHECK(memcmp(w2, w, sizeof(w)) == 0 && memcmp(b2, bvec, sizeof(b2)) == 0);
    unsigned char probe[sizeof(mw2)];
    memset(probe, 0xAB, sizeof(probe));
    CHECK(memcmp(mw2, probe, sizeof(mw2)) == 0);
}

static void test_crash_leftovers(const char *root)
{
    char dir[512], p1[1024], p2[1024], tmp[1100], found[1024], err[512] = "";
    ckpt_meta m;
    snprintf(dir, sizeof(dir), "%s/crash", root);
    CHECK(save_step(dir, 1, p1, sizeof(p1)) == 0);
    CHECK(save_step(dir, 2, p2, sizeof(p2)) == 0);
    /* A crash while writing step 3 leaves half a temp file, and one while
     * updating latest leaves a stray latest temp file. */
    snprintf(tmp, sizeof(tmp), "%s/.ckpt-step-000003.bin.tmp.Ab12Cd", dir);
    copy_prefix(p2, tmp, file_size(p2) / 2);
    snprintf(tmp, sizeof(tmp), "%s/.latest.tmp.Zz99Yy", dir);
    copy_prefix(p2, tmp, 10);
    CHECK(ckpt_find_latest(dir, found, sizeof(found), err, sizeof(err)) == 0);
    CHECK(strcmp(found, p2) == 0);
    clear_outputs();
    CHECKF(load(found, CONFIG, &m, err, sizeof(err)) == 0 && m.step == 2, "%s", err);
    fill_inputs(2);
    CHECK(memcmp(w2, w, sizeof(w)) == 0);

    /* A file cut short (as a non-atomic writer would leave it). */
    snprintf(tmp, sizeof(tmp), "%s/cut.bin", dir);
    copy_prefix(p2, tmp, file_size(p2) - 100);
    clear_outputs();
    CHECK(load(tmp, CONFIG, &m, err, sizeof(err)) == -EBADMSG);
    CHECKF(strstr(err, tmp) && strstr(err, "truncated"), "message: %s", err);
    CHECK(outputs_untouched());
    copy_prefix(p2, tmp, 20);
    CHECK(load(tmp, CONFIG, &m, err, sizeof(err)) == -EBADMSG);
    CHECKF(strstr(err, "not a tftrain checkpoint"), "message: %s", err);
    unlink(tmp);

    /* A failed write (the final name is a directory) cleans up its temp file
     * and leaves the previous checkpoint as it was. */
    char blocked[1100];
    snprintf(blocked, sizeof(blocked), "%s/ckpt-step-000004.bin", dir);
    mkdir(blocked, 0755);
    int before = count_tmp_files(dir);
    CHECK(save_step(dir, 4, NULL, 0) == -EISDIR);
    CHECKF(strstr(save_err, "previous file") != NULL, "message: %s", save_err);
    CHECK(count_tmp_files(dir) == before);
    CHECK(ckpt_find_latest(dir, found, sizeof(found), err, sizeof(err)) == 0 &&
          strcmp(found, p2) == 0);
    rmdir(blocked);

    /* Without latest, the newest ckpt-step file is found by name. */
    snprintf(tmp, sizeof(tmp), "%s/latest", dir);
    unlink(tmp);
    CHECK(save_step(dir, 3, NULL, 0) == 0);
    unlink(tmp);
    CHECK(ckpt_find_latest(dir, found, sizeof(found), err, sizeof(err)) == 0);
    CHECK(strstr(found, "ckpt-step-000003.bin") != NULL);
    copy_prefix(p2, tmp, 20); /* latest holding binary garbage */
    CHECK(ckpt_find_latest(dir, found, sizeof(found), err, sizeof(err)) == -EBADMSG);
    CHECKF(strstr(err, "latest"), "message: %s", err);
}

static void test_corruption(const char *root)
{
    char dir[512], path[1024], err[512] = "";
    ckpt_meta m;
    snprintf(dir, sizeof(dir), "%s/corrupt", root);
    CHECK(save_step(dir, 5, path, sizeof(path)) == 0);
    long size = file_size(path);
    unsigned char x = 0x5A;
    poke(path, size - 7, &x, 1); /* inside the last tensor's data */
    clear_outputs();
    CHECK(load(path, CONFIG, &m, err, sizeof(err)) == -EBADMSG);
    CHECKF(strstr(err, path) && strstr(err, "corrupt checkpoint: checksum mismatch"),
           "message: %s", err);
    CHECK(outputs_untouched());

    CHECK(save_step(dir, 5, path, sizeof(path)) == 0);
    uint32_t v = CKPT_VERSION + 1;
    poke(path, 8, &v, 4);
    CHECK(load(path, CONFIG, &m, err, sizeof(err)) == -EPROTONOSUPPORT);
    CHECKF(strstr(err, "version 2"), "message: %s", err);

    CHECK(save_step(dir, 5, path, sizeof(path)) == 0);
    poke(path, 0, "X", 1);
    CHECK(load(path, CONFIG, &m, err, sizeof(err)) == -EBADMSG);
    CHECKF(strstr(err, "bad magic"), "message: %s", err);
}

static void test_mismatch(const char *root)
{
    char dir[512], path[1024], err[512] = "";
    ckpt_meta m;
    snprintf(dir, sizeof(dir), "%s/mismatch", root);
    CHECK(save_step(dir, 7, path, sizeof(path)) == 0);
    clear_outputs();
    const char *wider = "layers=2\nd_model=128\nheads=4\nseq=32\nvocab=259\ndtype=fp32\n";
    CHECK(load(path, wider, &m, err, sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, path) && strstr(err, "checkpoint has d_model=64, this run d_model=128"),
           "message: %s", err);
    CHECK(load(path, "layers=2\nd_model=64\nheads=4\nseq=32\nvocab=259\n", &m, err,
               sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, "checkpoint has dtype=fp32, this run does not set dtype"), "message: %s", err);
    CHECK(load(path, "layers=2\nd_model=64\nheads=4\nseq=32\nvocab=259\ndtype=fp32\nlr=3\n", &m,
               err, sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, "checkpoint has no lr"), "message: %s", err);
    /* Same keys in another order match. */
    CHECK(load(path, "dtype=fp32\nvocab=259\nseq=32\nheads=4\nd_model=64\nlayers=2", &m, err,
               sizeof(err)) == 0);
    clear_outputs();

    ckpt_tensor shorter[] = {{"wte", w2, NW - 1}, {"L0.b", b2, NB}, {"adam.m.wte", mw2, NW}};
    CHECK(ckpt_load(path, NULL, shorter, 3, &m, err, sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, "tensor wte has 1000 floats in the checkpoint, this run 999"), "message: %s",
           err);
    ckpt_tensor fewer[] = {{"wte", w2, NW}, {"L0.b", b2, NB}};
    CHECK(ckpt_load(path, NULL, fewer, 2, &m, err, sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, "checkpoint has tensor adam.m.wte"), "message: %s", err);
    ckpt_tensor more[] = {{"wte", w2, NW}, {"L0.b", b2, NB}, {"adam.m.wte", mw2, NW},
                          {"adam.v.wte", mw2, NW}};
    CHECK(ckpt_load(path, NULL, more, 4, &m, err, sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, "checkpoint has no tensor adam.v.wte"), "message: %s", err);
    CHECK(outputs_untouched());

    ckpt_tensor dup[] = {{"wte", w, NW}, {"wte", w, NW}};
    ckpt_meta mm = make_meta(8);
    CHECK(ckpt_save(dir, &mm, dup, 2, NULL, 0, err, sizeof(err)) == -EINVAL);
    CHECKF(strstr(err, "wte given twice"), "message: %s", err);
    mm.step = -1;
    CHECK(ckpt_save(dir, &mm, dup, 1, NULL, 0, err, sizeof(err)) == -EINVAL);
}

static void test_missing(const char *root)
{
    char dir[512], path[1024], err[512] = "";
    ckpt_meta m;
    snprintf(dir, sizeof(dir), "%s/nope", root);
    CHECK(ckpt_find_latest(dir, path, sizeof(path), err, sizeof(err)) == -ENOENT);
    CHECKF(strstr(err, dir) && strstr(err, "No such file"), "message: %s", err);
    snprintf(path, sizeof(path), "%s/ckpt-step-000001.bin", dir);
    CHECK(load(path, CONFIG, &m, err, sizeof(err)) == -ENOENT);
    CHECKF(strstr(err, path) != NULL, "message: %s", err);
    snprintf(dir, sizeof(dir), "%s/nope/deeper", root);
    CHECK(save_step(dir, 1, NULL, 0) == -ENOENT);
    CHECKF(strstr(save_err, dir) && strstr(save_err, "cannot create"), "message: %s", save_err);
    snprintf(dir, sizeof(dir), "%s/emptydir", root);
    mkdir(dir, 0755);
    CHECK(ckpt_find_latest(dir, path, sizeof(path), err, sizeof(err)) == -ENOENT);
    CHECKF(strstr(err, "no checkpoint found"), "message: %s", err);
    char small[8];
    CHECK(ckpt_path("/some/dir", 12, small, sizeof(small)) == -ENAMETOOLONG);
    CHECK(ckpt_path("d", 12, path, sizeof(path)) == 0 && strcmp(path, "d/ckpt-step-000012.bin") == 0);
}

/* Removes the files this test made under root, then root. */
static void cleanup(const char *root)
{
    const char *sub[] = {"run", "crash", "corrupt", "mismatch", "emptydir"};
    char p[1100];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s", root, sub[i]);
        DIR *d = opendir(p);
        struct dirent *de;
        char f[1400];
        while (d && (de = readdir(d)) != NULL) {
            snprintf(f, sizeof(f), "%s/%s", p, de->d_name);
            if (de->d_name[0] != '.' || strstr(de->d_name, ".tmp."))
                unlink(f);
        }
        if (d)
            closedir(d);
        rmdir(p);
    }
    rmdir(root);
}

int main(void)
{
    char root[] = "/tmp/tft-test-ckpt-XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip(root);
    test_crash_leftovers(root);
    test_corruption(root);
    test_mismatch(root);
    test_missing(root);
    cleanup(root);
    return TEST_DONE();
}

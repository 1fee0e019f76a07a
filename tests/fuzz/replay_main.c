/*
 * replay_main.c — a main for a libFuzzer target without libFuzzer: runs the
 * target's LLVMFuzzerTestOneInput once on each input file, so the seed
 * corpora (corpus/<target>/) replay as regression tests in every build —
 * gcc's, Release, the ASan+UBSan build — and not only in the clang
 * -DTFT_FUZZ=ON build (tests/fuzz/CMakeLists.txt links one per target).
 *
 *   fuzz_reader_replay PATH...
 *
 * A PATH is a file or a directory, whose regular files (not its
 * subdirectories, not names starting with '.') run in name order. Each
 * input is read into a buffer of exactly its size, so that ASan sees a
 * read past its end, as libFuzzer passes it. LLVMFuzzerInitialize runs
 * first when the target defines one.
 *
 * Exit status: 0 when every input ran; 1 when a path could not be read or
 * no input was found (an empty corpus tests nothing); 2 on a usage error. A
 * target reports a broken invariant by aborting: stderr names the input
 * before it runs, so the last name printed is the one that failed.
 * Inputs over REPLAY_MAX_BYTES are refused (the seeds are kilobytes).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_MAX_BYTES ((size_t)64 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static const char *prog = "replay";

/* Reads the whole of path into a buffer of exactly its size (one byte for
 * an empty file, so the pointer is never NULL). Returns 0 and sets *out
 * (the caller frees it) and *size, or -1 after printing why. */
static int read_input(const char *path, uint8_t **out, size_t *size)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    uint8_t *buf = NULL;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        goto err_out;
    }
    if ((uint64_t)st.st_size > REPLAY_MAX_BYTES) {
        fprintf(stderr, "%s: %s: %lld bytes, over the %zu MiB an input may have\n", prog, path,
                (long long)st.st_size, REPLAY_MAX_BYTES >> 20);
        goto err_out;
    }
    size_t n = (size_t)st.st_size;
    buf = malloc(n ? n : 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, buf ? "short read" : strerror(errno));
        goto err_out;
    }
    fclose(f);
    *out = buf, *size = n;
    return 0;
err_out:
    free(buf);
    if (f)
        fclose(f);
    return -1;
}

/* Runs the target on one file. Returns 0, or -1 when the file could not be
 * read or the target returned what libFuzzer does not allow (0 or -1). */
static int run_file(const char *path)
{
    uint8_t *data;
    size_t size;
    if (read_input(path, &data, &size) != 0)
        return -1;
    fprintf(stderr, "%s: %s (%zu bytes)\n", prog, path, size);
    int r = LLVMFuzzerTestOneInput(data, size);
    free(data);
    if (r != 0 && r != -1) {
        fprintf(stderr, "%s: %s: LLVMFuzzerTestOneInput returned %d (0 or -1 expected)\n", prog, path, r);
        return -1;
    }
    return 0;
}

static int skip_dot(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Runs every regular file of dir, in name order; adds them to *ran.
 * Returns 0, or -1 when the directory or one of its files failed. */
static int run_dir(const char *dir, int *ran)
{
    struct dirent **names;
    int n = scandir(dir, &names, skip_dot, alphasort), st = 0;
    if (n < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        int len = snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        if (len < 0 || (size_t)len >= sizeof(path)) {
            fprintf(stderr, "%s: %s/%s: path too long\n", prog, dir, names[i]->d_name);
            st = -1;
        } else if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (run_file(path) != 0)
                st = -1;
            else
                ++*ran;
        }
        free(names[i]);
    }
    free(names);
    return st;
}

int main(int argc, char **argv)
{
    const char *slash = strrchr(argv[0], '/');
    prog = slash ? slash + 1 : argv[0];
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", prog);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    int ran = 0, st = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            st |= run_dir(argv[i], &ran);
        } else if (run_file(argv[i]) == 0) {
            ran++;
        } else {
            st = -1;
        }
    }
    if (ran == 0) {
        fprintf(stderr, "%s: no input found in the paths given\n", prog);
        return 1;
    }
    fprintf(stderr, "%s: %d inputs ran%s\n", prog, ran, st ? ", some paths failed" : "");
    return st ? 1 : 0;
}

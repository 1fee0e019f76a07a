/*
 * launch_child.c — what the launcher's command gets: libtftrace.so
 * preloaded (found next to tftrace or in ../lib), the rings in a memfd
 * (TFT_SHM), the recording options as TFT_* variables (and --perturb's
 * TFTRACE_PERTURB), the NVTX and CUDA injection paths, the Python package
 * for --torch, the golden reference of --capture first-divergence-of; and
 * its own process group.
 */
#include "launch_internal.h"
#include "capture_ref.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char shm_name[64]; /* the region as traced processes open it: /proc/PID/fd/N of our memfd */

/* The reference file of --capture first-divergence-of (capture_ref.h),
 * removed when the run ends. */
static char capture_ref_path[4200];

/* libtftrace.so next to this program (build tree) or in ../lib (install). */
int launch_child_library(char *out, size_t n)
{
    const char *env = getenv("TFT_LIB");
    if (env && access(env, R_OK) == 0)
        return snprintf(out, n, "%s", env), 0;
    char exe[PATH_MAX];
    if (cli_exe_dir(exe, sizeof(exe)) < 0)
        return -1;
    static const char *const rel[] = {"/libtftrace.so", "/../lib/libtftrace.so",
                                      "/../lib64/libtftrace.so", "/../lib/x86_64-linux-gnu/libtftrace.so"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(out, n, "%s%s", exe, rel[i]);
        if (access(out, R_OK) == 0) {
            char real[PATH_MAX];
            if (realpath(out, real))
                snprintf(out, n, "%s", real);
            return 0;
        }
    }
    return -1;
}

/* The folder holding the tftrace Python package (and its _boot/ with the
 * sitecustomize of --torch): TFT_PYTHON_DIR, else python/ next to this
 * program (the build tree links it there), else ../lib/tftrace/python
 * (cmake --install), else ../../.. (the wheel: the package holds us). */
static int find_python_dir(char *out, size_t n)
{
    const char *env = getenv("TFT_PYTHON_DIR");
    char probe[PATH_MAX + 64];
    if (env && *env) {
        snprintf(probe, sizeof(probe), "%s/tftrace/_boot/sitecustomize.py", env);
        if (access(probe, R_OK) == 0)
            return snprintf(out, n, "%s", env), 0;
        return -1;
    }
    char exe[PATH_MAX];
    if (cli_exe_dir(exe, sizeof(exe)) < 0)
        return -1;
    /* ../../..: the Python wheel, PLATLIB/tftrace/_native/bin -> PLATLIB */
    static const char *const rel[] = {"/python", "/../lib/tftrace/python", "/../lib64/tftrace/python",
                                      "/../lib/x86_64-linux-gnu/tftrace/python", "/../../.."};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(probe, sizeof(probe), "%s%s/tftrace/_boot/sitecustomize.py", exe, rel[i]);
        if (access(probe, R_OK) == 0) {
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof(dir), "%s%s", exe, rel[i]);
            char real[PATH_MAX];
            if (!realpath(dir, real) || strlen(real) >= n)
                return -1;
            memcpy(out, real, strlen(real) + 1);
            return 0;
        }
    }
    return -1;
}

/* --torch: TFT_TORCH for the sitecustomize, whose folder goes first on
 * PYTHONPATH and the package's after it (a user's PYTHONPATH follows). */
int launch_child_torch(const launch_opts *o)
{
    char dir[PATH_MAX];
    if (find_python_dir(dir, sizeof(dir)) < 0) {
        fprintf(stderr, "tftrace: --torch: the tftrace Python package was not found next to tftrace "
                        "(python/, ../lib/tftrace/python or the wheel's site-packages); set TFT_PYTHON_DIR to the "
                        "folder holding it\n");
        return -1;
    }
    const char *pp = getenv("PYTHONPATH");
    size_t need = 2 * strlen(dir) + (pp ? strlen(pp) : 0) + 32;
    char *v = malloc(need);
    if (!v)
        return -1;
    snprintf(v, need, "%s/tftrace/_boot:%s%s%s", dir, dir, pp && *pp ? ":" : "", pp && *pp ? pp : "");
    setenv("PYTHONPATH", v, 1);
    free(v);
    setenv("TFT_TORCH", o->torch, 1);
    return 0;
}

/* The rings live in a memfd: an anonymous file that goes away with its
 * last user, so no named segment outlives a SIGKILLed tftrace in /dev/shm.
 * Traced processes open it through this process's fd table
 * (/proc/PID/fd/N, TFT_SHM): that needs this process alive, which is when
 * there is someone to drain them; the fd itself is not inherited (CLOEXEC),
 * so programs that close or count their descriptors see nothing of ours. */
shm_hdr *launch_child_region(const launch_opts *o, size_t *bytes)
{
    size_t ring = (size_t)o->ring_kb * 1024u;
    ring = (ring + 4095) / 4096 * 4096;
    uint32_t nrings = 128;
    *bytes = shm_region_size(nrings, ring);
    int fd = memfd_create("tftrace-rings", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    snprintf(shm_name, sizeof(shm_name), "/proc/%d/fd/%d", (int)getpid(), fd);
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)*bytes) == 0)
        p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    /* fd stays open for the run: it is what TFT_SHM names */
    shm_region_init(p, *bytes, nrings, ring, o->no_drop ? SHM_NO_DROP : 0);
    ((shm_hdr *)p)->nodrop_timeout_ns = (uint64_t)(o->nodrop_timeout * 1e9);
    shm_drop_wait_from_env(p);
    shm_setup_clock(p);
    return p;
}

/* A sanitizer runtime loaded in this (sanitized) launcher must precede a
 * sanitized libtftrace in LD_PRELOAD, or the runtime refuses to start. */
static int find_sanitizer(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "/libasan.so") || strstr(n, "/libtsan.so")) && !*(char *)data) {
        snprintf(data, PATH_MAX, "%s", n);
        return 1;
    }
    return 0;
}

/* Sets the command's environment; returns 0, or -1 when out of memory. */
int launch_child_env(const launch_opts *o, const char *lib)
{
    const char *pre = getenv("LD_PRELOAD");
    char buf[64], san[PATH_MAX] = "";
    dl_iterate_phdr(find_sanitizer, san);
    /* sized to fit: a user's LD_PRELOAD may be long, and a cut one would
     * preload a path that does not exist */
    size_t need = strlen(san) + strlen(lib) + (pre ? strlen(pre) : 0) + 3;
    char *ld = malloc(need);
    if (!ld)
        return -1;
    if (pre && *pre)
        snprintf(ld, need, "%s%s%s:%s", san, san[0] ? ":" : "", lib, pre);
    else
        snprintf(ld, need, "%s%s%s", san, san[0] ? ":" : "", lib);
    setenv("LD_PRELOAD", ld, 1);
    free(ld);
    setenv("TFT_SHM", shm_name, 1);
    if (o->stats)
        setenv("TFT_STATS", o->stats, 1);
    snprintf(buf, sizeof(buf), "%ld", o->every);
    setenv("TFT_EVERY", buf, 1);
    if (o->capture)
        setenv("TFT_CAPTURE", o->capture, 1);
    if (o->alloc_min)
        setenv("TFT_ALLOC_MIN", o->alloc_min, 1);
    if (o->step_range)
        setenv("TFT_STEP_RANGE", o->step_range, 1);
    /* read by the program's side (python/tftrace/_torch, tftrain), not by
     * the recorder: the run itself is changed, on purpose */
    if (o->perturb)
        setenv("TFTRACE_PERTURB", "1", 1);
    /* NVTX ranges (steps, scopes) through NVTX's injection hook, served by
     * the preloaded libtftrace itself; CUPTI (allocations, kernels) through
     * the CUDA driver's, by the plugin next to it (loaded only when the
     * program initialises CUDA). A user's own setting (a profiler) wins. */
    if (!getenv("NVTX_INJECTION64_PATH"))
        setenv("NVTX_INJECTION64_PATH", lib, 1);
    char plugin[PATH_MAX + 32];
    snprintf(plugin, sizeof(plugin), "%s", lib);
    char *slash = strrchr(plugin, '/');
    if (slash && !getenv("CUDA_INJECTION64_PATH")) {
        snprintf(slash + 1, sizeof(plugin) - (size_t)(slash + 1 - plugin), "libtftrace-cuda.so");
        if (access(plugin, R_OK) == 0)
            setenv("CUDA_INJECTION64_PATH", plugin, 1);
    }
    return 0;
}

pid_t launch_child_spawn(char **cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        execvp(cmd[0], cmd);
        fprintf(stderr, "tftrace: cannot run '%s': %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    if (pid > 0)
        setpgid(pid, pid);
    return pid;
}

/* --capture first-divergence-of=GOLDEN: golden's fingerprints, for the
 * recorder to compare each tensor with as it is recorded (TFT_CAPTURE_REF). */
static void remove_capture_ref(void) { unlink(capture_ref_path); }

int launch_child_capture_ref(const launch_opts *o)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(capture_ref_path, sizeof(capture_ref_path), "%s/tftrace-ref-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(capture_ref_path);
    if (fd < 0) {
        fprintf(stderr, "tftrace: %s: cannot create: %s\n", capture_ref_path, strerror(errno));
        return -1;
    }
    close(fd);
    atexit(remove_capture_ref);
    char err[512] = "";
    uint64_t n = 0;
    if (!o->quiet)
        fprintf(stderr, "tftrace: reading %s for --capture first-divergence-of\n", o->capture_golden);
    if (capref_build(o->capture_golden, capture_ref_path, &n, err, sizeof(err)) < 0) {
        fprintf(stderr, "tftrace: --capture first-divergence-of: %s\n", err);
        return -1;
    }
    if (!o->quiet)
        fprintf(stderr, "tftrace: %llu golden tensors to compare with; the first that differs is captured\n",
                (unsigned long long)n);
    setenv("TFT_CAPTURE_REF", capture_ref_path, 1);
    return 0;
}

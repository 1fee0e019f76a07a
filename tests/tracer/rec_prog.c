/*
 * rec_prog.c — a traced test program. Data is a pure function of
 * (thread, index) so rec_check can recompute every tensor's statistics.
 *   rec_prog threads N        N threads x 100 tensors of 1..4096 floats
 *   rec_prog crash KIND STEP  steps 0..9, one tensor "x" per step; at STEP:
 *                             segv | abort | kill (SIGKILL itself) | exit3
 *   rec_prog sleep [noterm]   one step, then sleeps forever (ignoring SIGTERM)
 *   rec_prog flood N [S]      N tensors as fast as possible (ring overflow), in
 *                             S steps (default 1) numbered from 0
 *   rec_prog fork             records, forks a child that records, waits
 *   rec_prog spawn SELF       under --torch: records; a forked child that
 *                             waits (records nothing), one that joins and
 *                             records, an exec'd helper (SELF threads 1,
 *                             waits) and an exec'd SELF join, one at a time
 *   rec_prog join             tft_process_join, then 10 tensors "joined"
 *   rec_prog closefds         closes stdin/stdout/stderr, then records
 *   rec_prog exec PROG ARGS   records one tensor, then execs PROG ARGS
 *   rec_prog api              every record kind of tft.h once, in a known order
 *   rec_prog keydtor          a thread records from a thread-specific-data
 *                             destructor that runs after the recorder's own
 *   rec_prog sigwait          records, then blocks SIGTERM, sends it to itself
 *                             and takes it with sigtimedwait: exit 0 when it
 *                             arrives there, 3 when not within 10 s
 *   rec_prog repeat V         step 0: tensor "h" four times, each its own op,
 *                             holding 0, 1, 2, 3 (the last V + 3)
 *   rec_prog structs          tft_coll_info and tft_comm_info of older (smaller
 *                             sz, ending at an inaccessible page), current
 *                             and newer (larger) callers; too small ones refused
 *   rec_prog tensor-api       tft_tensor_stats and tft_tensor_dev: valid calls
 *                             in steps 0 and 1 (rec_check tensor-api knows
 *                             them), invalid ones refused; tft_tensor_dev's
 *                             pointer is an inaccessible page
 */
#include "tft.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rec_data.h"

static _Atomic int api_errors; /* any non-zero return of the API */

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    float *buf = malloc(4096 * sizeof(float));
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%d.%d", t, i);
        int64_t n = rec_fill(buf, t, i);
        if (tft_tensor(name, TFT_F32, buf, 1, &n) != 0)
            api_errors++;
    }
    free(buf);
    return NULL;
}

static int run_threads(int n)
{
    pthread_t th[64];
    n = n > 64 ? 64 : n;
    tft_step_begin(0);
    for (int t = 0; t < n; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    tft_step_end(0);
    if (api_errors)
        fprintf(stderr, "rec_prog: %d API calls failed\n", (int)api_errors);
    return api_errors ? 1 : 0;
}

/* Parent and child each record 100 tensors of their own. */
static int run_fork(void)
{
    tft_step_begin(0);
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t n = 8;
    tft_tensor("parent.before", TFT_F32, v, 1, &n);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 100; i++)
            tft_tensor("child", TFT_F32, v, 1, &n);
        _exit(0);
    }
    for (int i = 0; i < 100; i++)
        tft_tensor("parent", TFT_F32, v, 1, &n);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* Runs child() in a forked child or argv in a fork+exec'd one and
 * returns its exit status (255 when it did not exit). */
static int wait_child(pid_t pid)
{
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return 255;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static int spawn_exec(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    return wait_child(pid);
}

/* --torch's rule for processes a rank starts (docs/PYTORCH.md, "Workers
 * and helper processes"): each child waits, and records only after
 * tft_process_join. Exit 0 when every child saw what it should. */
static int run_spawn(char *self)
{
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t n = 8;
    int bad = tft_process_waiting() != 0;
    tft_step_begin(0);
    tft_tensor("parent.before", TFT_F32, v, 1, &n);
    pid_t pid = fork();
    if (pid == 0) { /* a worker: waits, its tensors go nowhere */
        int w = tft_process_waiting();
        tft_tensor("worker", TFT_F32, v, 1, &n);
        _exit(w == 1 && !tft_enabled() ? 0 : 3);
    }
    bad |= wait_child(pid) != 0;
    pid = fork();
    if (pid == 0) { /* a forked process that trains */
        int ok = tft_process_waiting() == 1 && tft_process_join() == 1 && !tft_process_waiting();
        for (int i = 0; i < 5; i++)
            tft_tensor("forkjoined", TFT_F32, v, 1, &n);
        _exit(ok ? 0 : 4);
    }
    bad |= wait_child(pid) != 0;
    bad |= spawn_exec((char *[]){self, "threads", "1", NULL}) != 0;
    bad |= spawn_exec((char *[]){self, "join", NULL}) != 0;
    for (int i = 0; i < 100; i++)
        tft_tensor("parent", TFT_F32, v, 1, &n);
    tft_step_end(0);
    if (bad)
        fprintf(stderr, "rec_prog spawn: a child did not see what it should (waiting, joined)\n");
    return bad;
}

static int run_join(void)
{
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t n = 8;
    int ok = tft_process_waiting() == 1 && tft_process_join() == 1 && tft_process_join() == 1;
    for (int i = 0; i < 10; i++)
        tft_tensor("joined", TFT_F32, v, 1, &n);
    return ok ? 0 : 6;
}

/* Each API call once; rec_check api knows the expected records. */
static int run_api(void)
{
    int bad = 0;
    float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    int64_t n = 4;
    bad |= tft_step_begin(3);
    tft_scope_push("L0");
    tft_scope_push("attn");
    bad |= tft_tensor("a", TFT_F32, a, 1, &n); /* its own op, scope L0/attn */
    uint64_t ida = tft_last_tensor_id();
    tft_scope_pop();
    tft_tensor_context(TFT_TENSOR_EVAL | TFT_TENSOR_NO_GRAD | 0x100); /* (0x100: not a context bit) */
    bad |= tft_tensor("b", TFT_F32, b, 1, &n); /* scope L0 */
    tft_tensor_context(0);
    uint64_t idb = tft_last_tensor_id();
    tft_scope_pop();
    uint64_t in[2] = {ida, idb};
    int64_t seq = tft_op_begin("add", TFT_OP_RUNTIME, 2, in);
    bad |= seq != 2;
    for (int i = 0; i < 4; i++)
        a[i] += b[i];
    bad |= tft_tensor("sum", TFT_F32, a, 1, &n);
    tft_op_end();
    for (int k = 0; k < 2; k++) { /* two all-reduces on comm 77, one on comm 88 */
        tft_coll_info ci = TFT_COLL_INFO(.name = "MPI_Allreduce", .comm = 77, .type = TFT_COLL_ALLREDUCE,
                                         .dtype = TFT_F32, .count = 4, .redop = TFT_REDOP_SUM, .root = -1,
                                         .rank = 0, .nranks = 1);
        int64_t tok = tft_coll_enter(&ci);
        bad |= tok != k;
        bad |= tft_coll_exit(tok, &ci, a);
    }
    tft_coll_info c2 = TFT_COLL_INFO(.name = "MPI_Bcast", .comm = 88, .type = TFT_COLL_BCAST, .dtype = TFT_F32,
                                     .count = 4, .root = 0, .rank = 0, .nranks = 1);
    int64_t t2 = tft_coll_enter(&c2);
    bad |= t2 != 0;
    bad |= tft_coll_exit(t2, &c2, NULL);
    bad |= tft_alloc((void *)0x1000, 4096, "api:site");
    bad |= tft_free((void *)0x1000);
    bad |= tft_checkpoint(TFT_CKPT_SAVE, 3, "/ckpt/step-3", "--resume /ckpt");
    bad |= tft_step_end(3);
    bad |= tft_exception("RuntimeError", "shapes differ", "model.tok_emb", "train.py:37 in forward");
    bad |= tft_tensor(NULL, TFT_F32, a, 1, &n) != -EINVAL;
    bad |= tft_tensor("x", TFT_F32, NULL, 1, &n) != -EINVAL;
    int64_t neg = -1;
    bad |= tft_tensor("x", TFT_F32, a, 1, &neg) != -EINVAL;
    bad |= tft_tensor("x", (tft_dtype)99, a, 1, &n) != -EINVAL;
    bad |= tft_tensor("x", TFT_F32, a, 9, &n) != -EINVAL;
    if (bad)
        fprintf(stderr, "rec_prog api: an API call returned an unexpected value\n");
    return bad ? 1 : 0;
}

/* The statistics every tft_tensor_stats call passes: each field set, so a
 * field the recorder fails to zero shows. */
static const tft_stats given_stats = {
    .numel = 999, .nan = 1, .pinf = 2, .ninf = 3, .zero = 4, .over_fp16 = 5, .over_bf16 = 6,
    .under_fp16 = 7, .fingerprint = 0x1234abcd5678ef90ull, .min = -1.5, .max = 2.5, .mean = 0.25,
    .std = 0.5, .l1 = 3, .l2 = 4, .absmax = 2.5};

/* The calls rec_check tensor-api expects, in order, and the ones it must
 * not see. Returns 1 when a call returned something unexpected. */
static int run_tensor_api(void)
{
    int bad = 0;
    const tft_stats *st = &given_stats;
    int64_t s34[2] = {3, 4}, s5[1] = {5}, s23[2] = {2, 3}, s0[1] = {0}, neg[1] = {-1};
    /* device memory the host may not touch: a dereference faults */
    void *dev = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dev == MAP_FAILED)
        return 1;
    bad |= tft_step_begin(0);
    bad |= tft_tensor_stats("s.full", TFT_F32, 2, s34, st, TFT_STATS_FULL, 2);
    bad |= tft_tensor_stats("s.health", TFT_F16, 1, s5, st, TFT_STATS_HEALTH, -1);
    bad |= tft_tensor_stats("s.shape", TFT_BF16, 0, NULL, st, TFT_STATS_SHAPE, 0);
    int64_t seq = tft_op_begin("op.stats", TFT_OP_RUNTIME, 0, NULL);
    bad |= seq < 0;
    bad |= tft_tensor_stats("s.inop", TFT_F32, 1, s5, st, TFT_STATS_FULL, 7);
    uint64_t id = tft_last_tensor_id();
    tft_op_end();
    bad |= tft_op_begin("op.uses", TFT_OP_RUNTIME, 1, &id) < 0; /* its input: s.inop's id */
    tft_op_end();
    bad |= tft_tensor_dev("d.x", TFT_F16, dev, 2, s23, 1, NULL);
    bad |= tft_tensor_dev("d.empty", TFT_F32, NULL, 1, s0, 0, NULL); /* no elements: no pointer needed */
    /* refused: no record */
    bad |= tft_tensor_stats(NULL, TFT_F32, 1, s5, st, TFT_STATS_FULL, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, s5, NULL, TFT_STATS_FULL, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, s5, st, TFT_STATS_FULL + 1, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, s5, st, -1, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, s5, st, TFT_STATS_FULL, -2) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, s5, st, TFT_STATS_FULL, 1 << 16) != -EINVAL;
    bad |= tft_tensor_stats("bad", (tft_dtype)99, 1, s5, st, TFT_STATS_FULL, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 9, s5, st, TFT_STATS_FULL, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, neg, st, TFT_STATS_FULL, 0) != -EINVAL;
    bad |= tft_tensor_stats("bad", TFT_F32, 1, NULL, st, TFT_STATS_FULL, 0) != -EINVAL;
    bad |= tft_tensor_dev(NULL, TFT_F32, dev, 1, s5, 0, NULL) != -EINVAL;
    bad |= tft_tensor_dev("bad", TFT_F32, dev, 1, s5, -1, NULL) != -EINVAL;
    bad |= tft_tensor_dev("bad", TFT_F32, dev, 1, s5, 1 << 16, NULL) != -EINVAL;
    bad |= tft_tensor_dev("bad", TFT_F32, NULL, 1, s5, 0, NULL) != -EINVAL;
    bad |= tft_tensor_dev("bad", (tft_dtype)99, dev, 1, s5, 0, NULL) != -EINVAL;
    bad |= tft_tensor_dev("bad", TFT_F32, dev, 1, neg, 0, NULL) != -EINVAL;
    bad |= tft_step_end(0);
    bad |= tft_step_begin(1); /* skipped by --every 2: shape only */
    bad |= tft_tensor_stats("s.step1", TFT_F32, 1, s5, st, TFT_STATS_FULL, 0);
    bad |= tft_step_end(1);
    munmap(dev, 4096);
    if (bad)
        fprintf(stderr, "rec_prog tensor-api: an API call returned an unexpected value\n");
    return bad ? 1 : 0;
}

/* A send of peer 1 on communicator 5, tag tag, as a caller whose struct
 * is sz bytes long (sz <= sizeof: an older tft.h; larger: a newer one)
 * would pass it, at dst. */
static const tft_coll_info *coll_as(void *dst, size_t sz, int tag)
{
    tft_coll_info ci = TFT_COLL_INFO(.name = "send", .comm = 5, .type = TFT_COLL_SEND, .dtype = TFT_F32,
                                     .count = 4, .root = 1, .rank = 0, .nranks = 2, .tag = tag);
    ci.sz = sz;
    memset(dst, 0x5a, sz); /* a newer caller's fields this library does not know */
    memcpy(dst, &ci, sz < sizeof(ci) ? sz : sizeof(ci));
    return dst;
}

/* rec_check structs expects: three sends (tags none, 5, 6) and one COMM
 * record, from callers built against tft.h versions older than, equal to
 * and newer than the library's. The older struct ends where an
 * inaccessible page begins, so reading past its sz faults. */
static int run_structs(void)
{
    int bad = 0;
    long pg = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (two == MAP_FAILED || mprotect(two + pg, (size_t)pg, PROT_NONE) != 0)
        return 1;
    char *edge = two + pg;
    float buf[4] = {1, 2, 3, 4};
    _Alignas(16) char cur[sizeof(tft_coll_info)], newer[sizeof(tft_coll_info) + 16];
    const tft_coll_info *calls[3] = {
        coll_as(edge - TFT_COLL_INFO_V1_SZ, TFT_COLL_INFO_V1_SZ, 77), /* no tag field: none */
        coll_as(cur, sizeof(cur), 5),
        coll_as(newer, sizeof(newer), 6),
    };
    bad |= tft_step_begin(0);
    for (int i = 0; i < 3; i++) {
        int64_t tok = tft_coll_enter(calls[i]);
        bad |= tok != i;
        bad |= tft_coll_exit(tok, calls[i], buf) != 0;
    }
    const tft_coll_info *small = coll_as(edge - TFT_COLL_INFO_V1_SZ + 8, TFT_COLL_INFO_V1_SZ - 8, 0);
    bad |= tft_coll_enter(small) != -EINVAL;
    bad |= tft_coll_exit(0, small, NULL) != -EINVAL;
    bad |= tft_coll_enter(NULL) != -EINVAL;
    int32_t members[2] = {3, 1};
    tft_comm_info co = TFT_COMM_INFO(.comm = 9, .name = "split", .parent = 5, .rank = 1, .size = 2,
                                     .n_members = 2, .members = members);
    co.sz = TFT_COMM_INFO_V1_SZ;
    bad |= tft_comm_define(&co);
    co.sz = TFT_COMM_INFO_V1_SZ - 4;
    bad |= tft_comm_define(&co) != -EINVAL;
    bad |= tft_step_end(0);
    munmap(two, 2 * (size_t)pg);
    if (bad)
        fprintf(stderr, "rec_prog structs: an API call returned an unexpected value\n");
    return bad ? 1 : 0;
}

static int run_crash(const char *kind, int at)
{
    float x[16];
    for (int step = 0; step < 10; step++) {
        tft_step_begin(step);
        for (int i = 0; i < 16; i++)
            x[i] = (float)step;
        int64_t n = 16;
        tft_tensor("x", TFT_F32, x, 1, &n);
        tft_step_end(step);
        if (step == at) {
            if (!strcmp(kind, "segv")) { /* a real fault, on a page we may not touch */
                volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                *bad = 1;
            }
            if (!strcmp(kind, "abort"))
                abort();
            if (!strcmp(kind, "kill"))
                kill(getpid(), SIGKILL);
            if (!strcmp(kind, "exit3"))
                exit(3);
        }
    }
    return 0;
}

/* A key created after the recorder's (tft_step_begin created those): its
 * destructor runs after the recorder retired the thread's ring, and waits
 * for the collector to take that ring back before it records. */
static pthread_key_t late_key;

static void late_dtor(void *p)
{
    (void)p;
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    float v = 3;
    int64_t n = 1;
    if (tft_tensor("t.dtor", TFT_F32, &v, 1, &n) != 0)
        api_errors++;
}

static void *keydtor_thread(void *arg)
{
    (void)arg;
    float v = 2;
    int64_t n = 1;
    if (tft_tensor("t.body", TFT_F32, &v, 1, &n) != 0)
        api_errors++;
    pthread_setspecific(late_key, &late_key);
    return NULL;
}

static int run_keydtor(void)
{
    tft_step_begin(0);
    float v = 1;
    int64_t n = 1;
    tft_tensor("main.before", TFT_F32, &v, 1, &n);
    pthread_key_create(&late_key, late_dtor);
    pthread_t th;
    pthread_create(&th, NULL, keydtor_thread, NULL);
    pthread_join(th, NULL);
    tft_step_end(0);
    return api_errors ? 1 : 0;
}

/* The program's own threads all block SIGTERM and wait for it: a thread of
 * the recorder must not be the one it is delivered to. */
static int run_sigwait(void)
{
    float v = 1;
    int64_t n = 1;
    tft_tensor("before_sigwait", TFT_F32, &v, 1, &n);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    kill(getpid(), SIGTERM);
    struct timespec pause_ts = {0, 200 * 1000 * 1000}; /* time for another thread to take it */
    nanosleep(&pause_ts, NULL);
    struct timespec limit = {10, 0};
    return sigtimedwait(&set, NULL, &limit) == SIGTERM ? 0 : 3;
}

static int run_repeat(int v)
{
    tft_step_begin(0);
    for (int i = 0; i < 4; i++) {
        float x = (float)(i == 3 ? v + 3 : i);
        int64_t n = 1;
        tft_tensor("h", TFT_F32, &x, 1, &n);
    }
    tft_step_end(0);
    return 0;
}

/* Keeps and touches mib MiB more at each of steps steps, 150 ms apart: a
 * resident set the collector's RSS samples must see grow. */
static int run_grow(int mib, int steps)
{
    static char *kept[64]; /* reachable to the end: no leak for LeakSanitizer */
    for (int s = 0; s < steps && s < 64; s++) {
        tft_step_begin(s);
        char *p = kept[s] = malloc((size_t)mib << 20);
        if (!p)
            return 1;
        memset(p, s + 1, (size_t)mib << 20); /* resident and kept */
        float v = (float)p[s];
        int64_t n = 1;
        tft_tensor("grown", TFT_F32, &v, 1, &n);
        tft_step_end(s);
        struct timespec ts = {0, 150 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "threads"))
        return run_threads(atoi(argv[2]));
    if (argc >= 4 && !strcmp(argv[1], "crash"))
        return run_crash(argv[2], atoi(argv[3]));
    if (argc >= 2 && !strcmp(argv[1], "sleep")) {
        if (argc >= 3 && !strcmp(argv[2], "noterm"))
            signal(SIGTERM, SIG_IGN);
        tft_step_begin(0);
        float v = 1;
        int64_t n = 1;
        tft_tensor("before_sleep", TFT_F32, &v, 1, &n);
        for (;;)
            pause();
    }
    if (argc >= 3 && !strcmp(argv[1], "flood")) {
        static float buf[64];
        int64_t n = 64;
        long count = atol(argv[2]), failed = 0, steps = argc >= 4 ? atol(argv[3]) : 1;
        steps = steps < 1 ? 1 : steps;
        for (long i = 0; i < count; i++) {
            if (i % ((count + steps - 1) / steps) == 0)
                tft_step_begin(i / ((count + steps - 1) / steps));
            failed += tft_tensor("flood", TFT_F32, buf, 1, &n) != 0;
        }
        printf("flood: %ld of %ld dropped by the recorder\n", failed, count);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "api"))
        return run_api();
    if (argc >= 2 && !strcmp(argv[1], "fork"))
        return run_fork();
    if (argc >= 3 && !strcmp(argv[1], "spawn"))
        return run_spawn(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "join"))
        return run_join();
    if (argc >= 2 && !strcmp(argv[1], "keydtor"))
        return run_keydtor();
    if (argc >= 2 && !strcmp(argv[1], "sigwait"))
        return run_sigwait();
    if (argc >= 4 && !strcmp(argv[1], "grow"))
        return run_grow(atoi(argv[2]), atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "repeat"))
        return run_repeat(atoi(argv[2]));
    if (argc >= 2 && !strcmp(argv[1], "tensor-api"))
        return run_tensor_api();
    if (argc >= 2 && !strcmp(argv[1], "structs"))
        return run_structs();
    if (argc >= 2 && !strcmp(argv[1], "closefds")) {
        close(0);
        close(1);
        close(2);
        return run_threads(2);
    }
    if (argc >= 3 && !strcmp(argv[1], "exec")) {
        float v = 2;
        int64_t n = 1;
        tft_tensor("before_exec", TFT_F32, &v, 1, &n);
        execv(argv[2], argv + 2);
        return 127;
    }
    fprintf(stderr, "usage: rec_prog threads N | crash KIND STEP | sleep | flood N | grow MIB STEPS\n");
    return 2;
}

/*
 * attach_cmd.c — `tftrace attach PID... [-o TRACE] [--duration S]
 * [--children]`: records the MPI collectives of running processes that were
 * started without tftrace, through uprobes (tracer/bpf/attach.bpf.c) on the
 * MPI library each maps, into an ordinary trace (one rank file per process,
 * a manifest), which tfdump and tfdiff read as any other (docs/ATTACH.md).
 *
 * What a record holds: the function, count, enter and exit times, the
 * communicator (MPI_COMM_WORLD recognised by its symbol, ompi_mpi_comm_world,
 * and given the id the interposers give it; any other by its raw handle,
 * per process), datatype and reduce op named from the symbol their handle
 * points at (ompi_mpi_float, ompi_mpi_op_sum; unknown: dtype 255, op OTHER),
 * the world rank and size from OMPI_COMM_WORLD_RANK/SIZE (PMI_RANK/SIZE).
 * Sequence numbers count per communicator from the attach. Calls still
 * inside the library at the end are written as entered and never left.
 * Ends on --duration, Ctrl-C/SIGTERM, or when every target has exited;
 * the probes are removed on every path (the targets run on unharmed).
 */
#include "cli_internal.h"
#include "collector.h"
#include "stacks_report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#ifdef TFT_HAVE_BPF
#include "attach_internal.h"
#include <elfutils/libdwfl.h>
#include <gelf.h>

enum { MAX_TARGETS = 256, MAX_COMMS = 64 };

static const struct {
    const char *name;
    uint16_t type;
} fns[TFT_AFN_COUNT] = {
    [TFT_AFN_ALLREDUCE] = {"MPI_Allreduce", TFT_COLL_ALLREDUCE}, [TFT_AFN_REDUCE] = {"MPI_Reduce", TFT_COLL_REDUCE},
    [TFT_AFN_BCAST] = {"MPI_Bcast", TFT_COLL_BCAST},             [TFT_AFN_ALLGATHER] = {"MPI_Allgather", TFT_COLL_ALLGATHER},
    [TFT_AFN_BARRIER] = {"MPI_Barrier", TFT_COLL_BARRIER},
};

typedef struct target {
    pid_t pid;
    int rank, size;
    char lib[4096];         /* the MPI library it maps */
    tft_writer *w;
    char file[64];
    Dwfl *dwfl;             /* for naming handles */
    uint64_t comm_handle[MAX_COMMS], comm_seq[MAX_COMMS];
    int ncomms;
    uint64_t calls, open, dropped_edge;
    uint64_t seq;           /* calls written (op seq) */
    struct tft_acall *buf;  /* calls that returned, in order (written at the end, aligned) */
    size_t n, cap;
    int world_first;        /* index in buf of the first MPI_COMM_WORLD call kept, -1 none */
} target;

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

static target T[MAX_TARGETS];
static int NT;

static const char *symbol_lookup(target *t, uint64_t addr);
static const char *object_at(Dwfl *dwfl, uint64_t addr);

/* The symbol a handle points at (its start), NULL none; the last 16 cached. */
static const char *handle_symbol(target *t, uint64_t addr)
{
    static struct { pid_t pid; uint64_t addr; const char *name; } cache[16];
    static unsigned next;
    for (int i = 0; i < 16; i++)
        if (cache[i].pid == t->pid && cache[i].addr == addr)
            return cache[i].name;
    const char *n = symbol_lookup(t, addr);
    cache[next % 16].pid = t->pid, cache[next % 16].addr = addr, cache[next % 16].name = n;
    next++;
    return n;
}

static const char *symbol_lookup(target *t, uint64_t addr)
{
    if (!t->dwfl) {
        static const Dwfl_Callbacks cbs = {.find_elf = dwfl_linux_proc_find_elf,
                                           .find_debuginfo = dwfl_standard_find_debuginfo};
        t->dwfl = dwfl_begin(&cbs);
        if (!t->dwfl)
            return NULL;
        dwfl_report_begin(t->dwfl);
        dwfl_linux_proc_report(t->dwfl, t->pid);
        dwfl_report_end(t->dwfl, NULL, NULL);
    }
    Dwfl_Module *m = dwfl_addrmodule(t->dwfl, addr);
    GElf_Sym sym;
    GElf_Off off;
    const char *n = m ? dwfl_module_addrinfo(m, addr, &off, &sym, NULL, NULL, NULL) : NULL;
    return n && off == 0 ? n : object_at(t->dwfl, addr);
}

/* The module mapped at the highest address at or below want->addr. */
struct below {
    uint64_t addr;
    Dwfl_Module *m;
    Dwarf_Addr start;
};

static int below_cb(Dwfl_Module *m, void **ud, const char *name, Dwarf_Addr start, void *arg)
{
    (void)ud, (void)name;
    struct below *b = arg;
    if (start <= b->addr && (!b->m || start > b->start))
        b->m = m, b->start = start;
    return DWARF_CB_OK;
}

/*
 * A data object that starts at addr, searched by value in the symbols of
 * the module below it. The handles MPI passes (&ompi_mpi_comm_world, ...)
 * live in a .bss: the executable's, when it copy-relocates them, or the
 * library's. A .bss longer than the file's last page continues in an
 * anonymous mapping that /proc/PID/maps does not tie to the file, so
 * dwfl_addrmodule finds no module for the part of it past that page (an
 * ASan-built executable, or any program with large static arrays).
 */
static const char *object_at(Dwfl *dwfl, uint64_t addr)
{
    struct below b = {.addr = addr};
    if (dwfl_getmodules(dwfl, below_cb, &b, 0) < 0 || !b.m)
        return NULL;
    int n = dwfl_module_getsymtab(b.m);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr value;
        const char *name = dwfl_module_getsym_info(b.m, i, &sym, &value, NULL, NULL, NULL);
        if (name && value == addr && GELF_ST_TYPE(sym.st_info) == STT_OBJECT && sym.st_shndx != SHN_UNDEF)
            return name;
    }
    return NULL;
}

static uint8_t dtype_of(target *t, uint64_t h)
{
    static const struct { const char *sym; uint8_t d; } map[] = {
        {"ompi_mpi_float", TFT_F32}, {"ompi_mpi_double", TFT_F64}, {"ompi_mpi_int", TFT_I32},
        {"ompi_mpi_int32_t", TFT_I32}, {"ompi_mpi_long", TFT_I64}, {"ompi_mpi_long_long_int", TFT_I64},
        {"ompi_mpi_int64_t", TFT_I64}, {"ompi_mpi_unsigned", TFT_U32}, {"ompi_mpi_uint32_t", TFT_U32},
        {"ompi_mpi_unsigned_long", TFT_U64}, {"ompi_mpi_uint64_t", TFT_U64}, {"ompi_mpi_char", TFT_I8},
        {"ompi_mpi_signed_char", TFT_I8}, {"ompi_mpi_int8_t", TFT_I8}, {"ompi_mpi_byte", TFT_U8},
        {"ompi_mpi_unsigned_char", TFT_U8}, {"ompi_mpi_uint8_t", TFT_U8}, {"ompi_mpi_short", TFT_I16},
        {"ompi_mpi_int16_t", TFT_I16}, {"ompi_mpi_c_bool", TFT_BOOL},
    };
    const char *s = h ? handle_symbol(t, h) : NULL;
    for (size_t i = 0; s && i < sizeof map / sizeof *map; i++)
        if (!strcmp(s, map[i].sym))
            return map[i].d;
    return 255;   /* unknown: the raw handle's meaning could not be read */
}

static uint8_t redop_of(target *t, uint64_t h)
{
    const char *s = h ? handle_symbol(t, h) : NULL;
    if (!s)
        return TFT_REDOP_OTHER;
    return !strcmp(s, "ompi_mpi_op_sum") ? TFT_REDOP_SUM : !strcmp(s, "ompi_mpi_op_prod") ? TFT_REDOP_PROD
         : !strcmp(s, "ompi_mpi_op_min") ? TFT_REDOP_MIN : !strcmp(s, "ompi_mpi_op_max") ? TFT_REDOP_MAX
                                         : TFT_REDOP_OTHER;
}

/* The communicator's id and next sequence number (counted from the attach). */
static uint64_t comm_of(target *t, uint64_t h, uint64_t *seq, int *world)
{
    const char *s = handle_symbol(t, h);
    char name[64];
    *world = s && !strcmp(s, "ompi_mpi_comm_world");
    if (*world)
        snprintf(name, sizeof name, "MPI_COMM_WORLD");
    else
        snprintf(name, sizeof name, "MPI_Comm@pid%d:0x%llx", (int)t->pid, (unsigned long long)h);
    int i = 0;
    while (i < t->ncomms && t->comm_handle[i] != h)
        i++;
    if (i == t->ncomms && t->ncomms < MAX_COMMS)
        t->comm_handle[t->ncomms++] = h, t->comm_seq[i] = 0;
    *seq = i < MAX_COMMS ? t->comm_seq[i]++ : 0;
    return tft_string_id(name, strlen(name));
}

static void write_call(target *t, const struct tft_acall *c)
{
    if (c->fn >= TFT_AFN_COUNT || !t->w)
        return;
    int world;
    tft_rec_collective r = {.h = {.kind = TFT_REC_COLLECTIVE, .len = sizeof(r), .ts = c->t_enter,
                                  .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE, .flags = TFT_COLL_FLAG_ENTER},
                            .count = c->count, .t_enter = c->t_enter, .type = fns[c->fn].type,
                            .root = c->root, .tag = TFT_TAG_NONE};
    r.comm = comm_of(t, c->comm, &r.coll_seq, &world);
    r.h.seq = (int64_t)t->seq++;   /* the process's calls in order, as the interposers' op seq */
    r.dtype = c->fn == TFT_AFN_BARRIER ? TFT_U8 : dtype_of(t, c->dtype);
    r.redop = (c->fn == TFT_AFN_ALLREDUCE || c->fn == TFT_AFN_REDUCE) ? redop_of(t, c->op) : TFT_REDOP_NONE;
    r.rank = world ? t->rank : -1;
    r.nranks = world ? t->size : 0;
    r.name = tft_writer_string(t->w, fns[c->fn].name, strlen(fns[c->fn].name));
    tft_writer_append(t->w, &r.h);
    if (c->t_exit) {
        r.h.flags = TFT_COLL_FLAG_EXIT;
        r.h.ts = r.t_exit = c->t_exit;
        tft_writer_append(t->w, &r.h);
        t->calls++;
    } else {
        t->open++;
    }
}

static void on_call(void *ctx, const struct tft_acall *c)
{
    for (int i = 0; i < NT; i++) {
        target *t = &T[i];
        if (t->pid != c->pid)
            continue;
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 1024;
            struct tft_acall *v = realloc(t->buf, cap * sizeof(*v));
            if (!v)
                return;
            t->buf = v;
            t->cap = cap;
        }
        t->buf[t->n++] = *c;
        return;
    }
}

/* Calls inside a collective when recording ended: one entered more than a
 * second before is taken as stuck (written as entered, never left); a
 * younger one was merely in flight and is left out. */
static uint64_t end_ns;
static void on_open_call(void *ctx, const struct tft_acall *c)
{
    for (int i = 0; i < NT; i++)
        if (T[i].pid == c->pid && end_ns - c->t_enter > 1000000000ull)
            write_call(&T[i], c);
}

static int is_world(target *t, const struct tft_acall *c)
{
    const char *s = handle_symbol(t, c->comm);
    return s && !strcmp(s, "ompi_mpi_comm_world");
}

/* The MPI_COMM_WORLD calls of target t, as indices into t->buf. */
static size_t world_calls(target *t, size_t **out)
{
    size_t k = 0;
    *out = malloc((t->n ? t->n : 1) * sizeof(**out));
    for (size_t i = 0; *out && i < t->n; i++)
        if (is_world(t, &t->buf[i]))
            (*out)[k++] = i;
    return *out ? k : 0;
}

/*
 * The probes start in each process at a slightly different moment, so the
 * first MPI_COMM_WORLD call recorded need not be the same call on every
 * rank. A collective's calls overlap in time on all ranks (none returns
 * before the last enters it): the offset d of rank b against rank 0 is the
 * one (-3..3) for which call j of rank 0 and call j+d of rank b overlap for
 * the first 32 calls. Each rank then drops its calls before the first one
 * every rank recorded, and those after the last one every rank recorded,
 * so the world's sequence numbers count the same calls from the attach.
 */
static void align_world(void)
{
    size_t *idx[MAX_TARGETS] = {0}, n[MAX_TARGETS];
    long off[MAX_TARGETS] = {0};
    for (int i = 0; i < NT; i++)
        n[i] = world_calls(&T[i], &idx[i]);
    for (int b = 1; b < NT; b++) {
        long best = 0, best_ok = -1;
        for (long d = -3; d <= 3; d++) {
            long ok = 0, tried = 0;
            for (long j = 0; j < 32 && j < (long)n[0]; j++) {
                long k = j + d;
                if (k < 0 || k >= (long)n[b])
                    continue;
                const struct tft_acall *x = &T[0].buf[idx[0][j]], *y = &T[b].buf[idx[b][k]];
                tried++;
                ok += x->t_enter < y->t_exit && y->t_enter < x->t_exit;
            }
            if (tried && ok == tried && ok > best_ok)
                best = d, best_ok = ok;
        }
        off[b] = best;
    }
    long lo = 0, hi = (long)n[0];   /* the global calls [lo, hi) in rank 0's numbering */
    for (int b = 1; b < NT; b++) {
        if (-off[b] > lo)
            lo = -off[b];
        if ((long)n[b] - off[b] < hi)
            hi = (long)n[b] - off[b];
    }
    for (int b = 0; b < NT; b++) {
        for (long k = 0; k < (long)n[b]; k++) {
            long g = k - off[b];
            if (g < lo || g >= hi) {
                T[b].buf[idx[b][k]].fn = TFT_AFN_COUNT;   /* left out */
                T[b].dropped_edge++;
            }
        }
        free(idx[b]);
    }
}

/* The MPI library process pid maps (its path), or -ENOENT. */
static int find_mpi_lib(pid_t pid, char *out, size_t n)
{
    char path[64], line[4352];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof line, f)) {
        char *p = strchr(line, '/');
        if (!p)
            continue;
        p[strcspn(p, "\n")] = 0;
        const char *b = strrchr(p, '/') + 1;
        if (!strncmp(b, "libmpi.so", 9) && strlen(p) < n) {
            snprintf(out, n, "%s", p);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

static int env_int(pid_t pid, const char *const *vars, int nvars)
{
    /* stacks_rank_of reads the rank; the size has its own names */
    char path[64], buf[1 << 16];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = 0;
    for (int v = 0; v < nvars; v++)
        for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1) {
            size_t vl = strlen(vars[v]);
            if (!strncmp(buf + i, vars[v], vl) && buf[i + vl] == '=')
                return atoi(buf + i + vl + 1);
        }
    return -1;
}

/* Adds the descendants of the targets (--children). */
static void add_children(void)
{
    for (int grew = 1; grew && NT < MAX_TARGETS;) {
        grew = 0;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL && NT < MAX_TARGETS) {
            char path[300], buf[512];
            pid_t p = (pid_t)atoi(e->d_name);
            if (p <= 0)
                continue;
            snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n <= 0)
                continue;
            buf[n] = 0;
            char *rp = strrchr(buf, ')');
            int ppid = 0;
            char st;
            if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2)
                continue;
            int known = 0, parent = 0;
            for (int i = 0; i < NT; i++)
                known |= T[i].pid == p, parent |= T[i].pid == ppid;
            if (parent && !known) {
                T[NT++].pid = p;
                grew = 1;
            }
        }
        if (d)
            closedir(d);
    }
}

/* The trace directory: new (or empty), 0700, and one rank file per target. */
static int open_trace(const char *out, int *dfd, const uint8_t run_id[16])
{
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
        return fprintf(stderr, "tftrace attach: cannot create %s: %s\n", out, strerror(errno)), -1;
    *dfd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*dfd < 0)
        return fprintf(stderr, "tftrace attach: cannot open %s: %s\n", out, strerror(errno)), -1;
    for (int i = 0; i < NT; i++) {
        target *t = &T[i];
        snprintf(t->file, sizeof t->file, t->rank >= 0 ? "rank-%05d.tft" : "rank-pid%d.tft",
                 t->rank >= 0 ? t->rank : (int)t->pid);
        int fd = openat(*dfd, t->file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return fprintf(stderr, "tftrace attach: %s/%s: %s (the trace directory must be new or empty)\n", out,
                           t->file, strerror(errno)), -1;
        tft_file_info fi = {0};
        memcpy(fi.run_id, run_id, 16);
        fi.rank = t->rank >= 0 ? t->rank : i;
        fi.world_size = t->size;
        fi.pid = t->pid;
        if (t->rank < 0)
            fi.flags |= TFT_FILE_RANK_IS_INDEX;
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        fi.start_monotonic_ns = shm_now_ns();
        fi.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
        gethostname(fi.host, sizeof(fi.host) - 1);
        tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = 1);
        t->w = tft_writer_fdopen(fd, &fi, &wo);
        if (!t->w)
            return fprintf(stderr, "tftrace attach: %s/%s: cannot start the rank file: %s\n", out, t->file,
                           strerror(errno)), -1;
    }
    return 0;
}

static int alive(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Probes every target's MPI library; the number of targets probed. */
static int place_probes(tft_attach *a)
{
    int probed = 0;
    for (int i = 0; i < NT; i++) {
        target *t = &T[i];
        if (find_mpi_lib(t->pid, t->lib, sizeof t->lib) < 0) {
            fprintf(stderr, "tftrace attach: pid %d maps no MPI library (libmpi.so): nothing to probe in it\n",
                    (int)t->pid);
            continue;
        }
        int ok = tft_attach_target(a, t->pid) == 0;
        for (int f = 0; ok && f < TFT_AFN_COUNT; f++) {
            int e = tft_attach_probe(a, t->pid, t->lib, fns[f].name, f);
            if (e < 0)
                fprintf(stderr, "tftrace attach: pid %d: %s in %s: %s\n", (int)t->pid, fns[f].name, t->lib,
                        strerror(-e));
        }
        probed += ok;
    }
    return probed;
}

static int finish_trace(int dfd, const char *out, const uint8_t run_id[16], tft_attach *a)
{
    tft_manifest_rank mr[MAX_TARGETS];
    uint64_t calls = 0, open = 0, edge = 0;
    for (int i = 0; i < NT; i++) {
        tft_writer_close(T[i].w);
        T[i].w = NULL;
        mr[i] = (tft_manifest_rank){.rank = T[i].rank >= 0 ? T[i].rank : i, .pid = T[i].pid};
        snprintf(mr[i].file, sizeof mr[i].file, "%s", T[i].file);
        calls += T[i].calls, open += T[i].open, edge += T[i].dropped_edge;
        free(T[i].buf);
        if (T[i].dwfl)
            dwfl_end(T[i].dwfl);
    }
    manifest_run run = {.run_id = run_id, .file_mode = 0600, .collector = 0,
                        .options_json = "{\"attach\":true}"};
    int me = manifest_merge_rank(dfd, &run, mr, NT, 0);
    fprintf(stderr, "tftrace attach: %s: %d process%s, %llu collective calls recorded (%llu at the edges of the"
                    " window left out so that every rank's MPI_COMM_WORLD calls are the same ones), %llu stuck in"
                    " one at the end%s; probes removed\n", out, NT, NT == 1 ? "" : "es", (unsigned long long)calls,
            (unsigned long long)edge, (unsigned long long)open,
            tft_attach_lost(a) ? " (some calls lost: ring buffer full)" : "");
    if (me < 0)
        fprintf(stderr, "tftrace attach: %s/manifest.json: %s\n", out, strerror(-me));
    return me < 0 ? 2 : 0;
}

static int run_attach(const char *out, double duration, int children)
{
    char err[256];
    if (children)
        add_children();
    for (int i = 0; i < NT; i++) {
        static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"};
        T[i].rank = stacks_rank_of(T[i].pid, NULL, 0);
        T[i].size = env_int(T[i].pid, sizes, 3);
    }
    tft_attach *a = tft_attach_open(err, sizeof err);
    if (!a) {
        fprintf(stderr, "tftrace attach: %s%s\n", errno == EPERM || errno == EACCES ? "BPF is not permitted here: " : "",
                err);
        return 2;
    }
    uint8_t run_id[16] = {0};
    if (getrandom(run_id, sizeof run_id, 0) != sizeof run_id)
        run_id[0] = 1;
    int dfd = -1, rc = 2;
    if (place_probes(a) == 0) {
        fprintf(stderr, "tftrace attach: no target maps an MPI library: nothing attached\n");
        goto out;
    }
    if (open_trace(out, &dfd, run_id) < 0)
        goto out;
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fprintf(stderr, "tftrace attach: recording the MPI collectives of %d process%s into %s (%s)\n", NT,
            NT == 1 ? "" : "es", out, duration > 0 ? "until --duration" : "until Ctrl-C or the targets exit");
    double start = (double)shm_now_ns() / 1e9;
    while (!stop_signal) {
        tft_attach_poll(a, 100, on_call, NULL);
        if (duration > 0 && (double)shm_now_ns() / 1e9 - start >= duration)
            break;
        int any = 0;
        for (int i = 0; i < NT && !any; i++)
            any = alive(T[i].pid);
        if (!any)
            break;
    }
    tft_attach_poll(a, 0, on_call, NULL);
    align_world();
    for (int i = 0; i < NT; i++)
        for (size_t k = 0; k < T[i].n; k++)
            write_call(&T[i], &T[i].buf[k]);
    end_ns = shm_now_ns();
    tft_attach_open_calls(a, on_open_call, NULL);
    rc = finish_trace(dfd, out, run_id, a);
out:
    tft_attach_close(a);
    if (dfd >= 0)
        close(dfd);
    return rc;
}
#endif

static void attach_usage(FILE *f)
{
    fprintf(f, "usage: tftrace attach [-o TRACE] [--duration S] [--children] PID...\n"
               "Records the MPI collectives (MPI_Allreduce, MPI_Reduce, MPI_Bcast, MPI_Allgather,\n"
               "MPI_Barrier) of running processes started without tftrace, through uprobes on the MPI\n"
               "library each maps, into an ordinary trace; the probes are removed at the end and the\n"
               "processes run on unharmed.\n\n"
               "  -o, --output TRACE   trace directory, new or empty (default: attach-DATE-TIME.trace)\n"
               "      --duration S     stop after S seconds (default: Ctrl-C, or when every target exited)\n"
               "      --children       also every descendant of each PID\n"
               "Needs root or CAP_BPF + CAP_PERFMON; see docs/ATTACH.md.\n");
}

int attach_main(int argc, char **argv)
{
    static const struct option lo[] = {{"output", required_argument, 0, 'o'}, {"duration", required_argument, 0, 'd'},
                                       {"children", no_argument, 0, 'c'},     {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *out = NULL;
    double duration = 0;
    int children = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+o:h", lo, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o': out = optarg; break;
        case 'd':
            duration = strtod(optarg, &end);
            if (*end || end == optarg || !(duration > 0))
                return fprintf(stderr, "tftrace attach: --duration needs seconds > 0, got '%s'\n", optarg), 2;
            break;
        case 'c': children = 1; break;
        case 'h': attach_usage(stdout); return 0;
        default: attach_usage(stderr); return 2;
        }
    }
    if (optind >= argc)
        return fprintf(stderr, "tftrace attach: no PID given\n"), attach_usage(stderr), 2;
    if (!tft_stacks_supported())
        return fprintf(stderr, "tftrace attach: this tftrace was built without BPF support (docs/ATTACH.md)\n"), 2;
#ifdef TFT_HAVE_BPF
    for (int i = optind; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (*end || end == argv[i] || v <= 0 || v > 0x3fffffff)
            return fprintf(stderr, "tftrace attach: '%s' is not a process id\n", argv[i]), 2;
        if (NT == MAX_TARGETS)
            return fprintf(stderr, "tftrace attach: at most %d processes\n", MAX_TARGETS), 2;
        T[NT++].pid = (pid_t)v;
    }
    if (bpf_privilege_check("attach"))
        return 2;
    for (int i = 0; i < NT; i++)
        if (bpf_target_check("attach", T[i].pid))
            return 2;
    char buf[4096];
    if (!out) {
        fresh_name(buf, sizeof buf, "attach", ".trace");
        out = buf;
    }
    return run_attach(out, duration, children);
#else
    return 2;
#endif
}

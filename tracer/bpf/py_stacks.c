/*
 * py_stacks.c — the Python frames of a CPython process's threads, read from
 * outside (py_stacks.h). Steps, per process:
 *
 * 1. /proc/PID/maps: the mapped file named python3.X or libpython3.X.so*
 *    whose ELF symbols (.dynsym, else .symtab) have _PyRuntime; its load
 *    bias from the mapping at file offset 0.
 * 2. The version: 3.13 from the _Py_DebugOffsets at the start of
 *    _PyRuntime (cookie "xdebugpy"), which also give every offset used;
 *    3.11/3.12 from the Py_Version symbol; 3.10 from the file's name. The
 *    offsets of 3.10-3.12 are tables below, taken with offsetof() from
 *    each version's headers (x86-64; pyenv 3.10.13, 3.11.7, 3.12.1,
 *    Debian 3.11.2 — all verified by test bpf.stacks-python).
 * 3. Every interpreter's thread states; a thread state's native thread id
 *    (3.11+) or its pthread's tid (3.10: glibc's struct pthread) names the
 *    thread. Its frame chain, innermost first, split at each entry into
 *    _PyEval_EvalFrameDefault (3.11 is_entry, 3.12+ a frame owned by the
 *    C stack, 3.10 every frame).
 * 4. The frames go in front of the native _PyEval_EvalFrameDefault frames,
 *    the innermost group in front of the innermost such frame.
 *
 * The target is never stopped: a running thread's chain may be torn (the
 * checks below then stop the walk with a note); a hung one's is exact.
 * Workload: once per `tftrace stacks` / --timeout; a few hundred reads.
 */
#include "py_stacks.h"

#ifdef TFT_HAVE_BPF
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    PY_MAX_DEPTH = 256,          /* Python frames walked per thread */
    PY_MAX_NAME = 1024,          /* characters of a file or function name */
    PY_MAX_TABLE = 1 << 20,      /* bytes of a line table */
    PY_MAX_INTERPS = 64,
    PY_MAX_TSTATES = 4096,
    PY_OWNED_BY_CSTACK = 3,      /* 3.12+: the shim frame of an eval call */
    GLIBC_PTHREAD_TID = 720,     /* offsetof(struct pthread, tid), glibc x86-64 (3.10 only) */
};
#define NONE UINT64_MAX

/* Where things are in one CPython version's structs (bytes). */
typedef struct py_layout {
    unsigned minor;              /* 3.minor */
    uint64_t rt_interp_head;     /* _PyRuntimeState.interpreters.head */
    uint64_t is_next, is_threads;/* PyInterpreterState.next, .threads.head (3.10 tstate_head) */
    uint64_t ts_next, ts_tid;    /* PyThreadState.next, .native_thread_id (3.10 .thread_id: a pthread_t) */
    uint64_t ts_frame;           /* .frame (3.10), .cframe (3.11/3.12), .current_frame (3.13) */
    uint64_t cf_current;         /* _PyCFrame.current_frame (3.11/3.12), else NONE */
    uint64_t fr_previous, fr_code, fr_instr;   /* f_back/f_code/f_lasti (3.10); previous, f_code|f_executable, prev_instr|instr_ptr */
    uint64_t fr_owner, fr_is_entry;            /* NONE where the version has none */
    uint64_t co_filename, co_name, co_firstlineno, co_linetable;   /* co_name: co_qualname from 3.11 */
    uint64_t co_code;            /* 3.10: the co_code bytes object; 3.11+: co_code_adaptive, inline */
    uint64_t u_length, u_state, u_ascii_size, u_compact_size;      /* PyASCIIObject, PyCompactUnicodeObject */
    uint64_t b_size, b_sval;     /* PyBytesObject ob_size, ob_sval */
} py_layout;

static const py_layout layout_310 = {
    .minor = 10, .rt_interp_head = 32, .is_next = 0, .is_threads = 8, .ts_next = 8, .ts_tid = 176, .ts_frame = 24,
    .cf_current = NONE, .fr_previous = 24, .fr_code = 32, .fr_instr = 96, .fr_owner = NONE, .fr_is_entry = NONE,
    .co_filename = 104, .co_name = 112, .co_firstlineno = 40, .co_linetable = 120, .co_code = 48,
    .u_length = 16, .u_state = 32, .u_ascii_size = 48, .u_compact_size = 72, .b_size = 16, .b_sval = 32,
};
static const py_layout layout_311 = {
    .minor = 11, .rt_interp_head = 40, .is_next = 0, .is_threads = 16, .ts_next = 8, .ts_tid = 160, .ts_frame = 56,
    .cf_current = 8, .fr_previous = 48, .fr_code = 32, .fr_instr = 56, .fr_owner = 69, .fr_is_entry = 68,
    .co_filename = 112, .co_name = 128, .co_firstlineno = 72, .co_linetable = 136, .co_code = 184,
    .u_length = 16, .u_state = 32, .u_ascii_size = 48, .u_compact_size = 72, .b_size = 16, .b_sval = 32,
};
static const py_layout layout_312 = {
    .minor = 12, .rt_interp_head = 40, .is_next = 0, .is_threads = 72, .ts_next = 8, .ts_tid = 144, .ts_frame = 56,
    .cf_current = 0, .fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = NONE,
    .co_filename = 112, .co_name = 128, .co_firstlineno = 68, .co_linetable = 136, .co_code = 192,
    .u_length = 16, .u_state = 32, .u_ascii_size = 40, .u_compact_size = 56, .b_size = 16, .b_sval = 32,
};

/* The _Py_DebugOffsets of CPython 3.13 (Include/internal/pycore_runtime.h):
 * every field a uint64_t, in this order. Only those used are named. */
typedef struct py313_debug {
    char cookie[8];
    uint64_t version, free_threaded;
    uint64_t rt_size, rt_finalizing, rt_interp_head;
    uint64_t is_size, is_id, is_next, is_threads, is_gc, is_modules, is_sysdict, is_builtins, is_ceval_gil,
        is_gil, is_gil_enabled, is_gil_locked, is_gil_holder;
    uint64_t ts_size, ts_prev, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_tid, ts_chunk,
        ts_status;
    uint64_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_localsplus, fr_owner;
    uint64_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_argcount,
        co_localsplusnames, co_localspluskinds, co_code_adaptive;
    uint64_t ob_size_, ob_type;
    uint64_t ty_size, ty_name, ty_repr, ty_flags;
    uint64_t tu_size, tu_item, tu_ob_size;
    uint64_t li_size, li_item, li_ob_size;
    uint64_t di_size, di_keys, di_values;
    uint64_t fl_size, fl_fval;
    uint64_t lo_size, lo_tag, lo_digit;
    uint64_t by_size, by_ob_size, by_sval;
    uint64_t un_size, un_state, un_length, un_ascii_size;
    uint64_t gc_size, gc_collecting;
} py313_debug;
_Static_assert(sizeof(py313_debug) == 584, "_Py_DebugOffsets of 3.13 is 73 words");

/* One process being read. */
typedef struct py_proc {
    pid_t pid;
    int memfd;                   /* /proc/PID/mem */
    py_layout L;
    uint64_t runtime;            /* &_PyRuntime in the target */
    uint64_t code_type;          /* &PyCode_Type in the target, 0 unknown */
    char why[160];               /* why no Python frames, "" when they were read */
} py_proc;

/* One Python frame read, before merging. */
typedef struct py_frame {
    char file[128], func[128];
    int line;                    /* 0 unknown */
    int group;                   /* which eval call runs it: 0 the innermost */
} py_frame;

static int rd(const py_proc *p, uint64_t addr, void *buf, size_t n)
{
    if (!addr || addr >= (1ULL << 47) || addr + n > (1ULL << 47))
        return -EFAULT;
    return pread(p->memfd, buf, n, (off_t)addr) == (ssize_t)n ? 0 : -EFAULT;
}

static uint64_t rd_ptr(const py_proc *p, uint64_t addr)
{
    uint64_t v = 0;
    if (rd(p, addr, &v, 8) < 0 || (v & 7))
        return 0;
    return v;
}

/* The value of symbol name in elf (.dynsym first, then .symtab), 0 if none. */
static uint64_t elf_symbol(Elf *elf, const char *name)
{
    for (int pass = 0; pass < 2; pass++) {
        for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != (pass ? SHT_SYMTAB : SHT_DYNSYM) || !sh.sh_entsize)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            size_t n = d ? d->d_size / sh.sh_entsize : 0;
            for (size_t i = 0; i < n; i++) {
                GElf_Sym s;
                const char *sn;
                if (gelf_getsym(d, (int)i, &s) && s.st_value && (sn = elf_strptr(elf, sh.sh_link, s.st_name)) &&
                    !strcmp(sn, name))
                    return s.st_value;
            }
        }
    }
    return 0;
}

/* The p_vaddr of the PT_LOAD segment at file offset 0, page-aligned. */
static int elf_first_load(Elf *elf, uint64_t *vaddr)
{
    size_t n;
    if (elf_getphdrnum(elf, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset == 0) {
            *vaddr = ph.p_vaddr & ~0xfffULL;
            return 0;
        }
    }
    return -1;
}

/* 3.minor from a name like "libpython3.12.so.1.0" or "python3.10"; -1 none. */
static int minor_from_name(const char *base)
{
    const char *s = strstr(base, "python3.");
    if (!s || !isdigit((unsigned char)s[8]))
        return -1;
    return atoi(s + 8);
}

static const char *base_of(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int is_python_file(const char *base)
{
    return !strncmp(base, "libpython3", 10) || !strncmp(base, "python", 6);
}

/* Opens the ELF mapped at [start,end) (path as maps says) and fills
 * p->runtime, p->code_type and *py_version (Py_Version's address, 0 none).
 * 1 when it has _PyRuntime, 0 not, -1 unreadable. */
static int probe_file(py_proc *p, const char *range, const char *path, uint64_t start, uint64_t *py_version)
{
    char mf[96];
    snprintf(mf, sizeof mf, "/proc/%d/map_files/%s", (int)p->pid, range);
    int fd = open(mf, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        char alt[4200];
        snprintf(alt, sizeof alt, "/proc/%d/root%s", (int)p->pid, path);
        fd = open(alt, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    int rc = 0;
    uint64_t vaddr = 0, rt = elf ? elf_symbol(elf, "_PyRuntime") : 0;
    if (rt && elf_first_load(elf, &vaddr) == 0) {
        uint64_t bias = start - vaddr, ct = elf_symbol(elf, "PyCode_Type"), pv = elf_symbol(elf, "Py_Version");
        p->runtime = rt + bias;
        p->code_type = ct ? ct + bias : 0;
        *py_version = pv ? pv + bias : 0;
        rc = 1;
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

/* Step 1: finds the interpreter; 1 found, 0 not a Python process. name
 * gets the file's base name. */
static int find_runtime(py_proc *p, char *name, size_t namelen, uint64_t *py_version)
{
    char path[64], line[4400];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)p->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int found = 0;
    char last[4096] = "";
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long s, e, off;
        char range[64], file[4096] = "";
        if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %4095[^\n]", &s, &e, &off, file) < 3 || file[0] != '/' ||
            off != 0 || !strcmp(file, last) || !is_python_file(base_of(file)))
            continue;
        snprintf(last, sizeof last, "%s", file);
        snprintf(range, sizeof range, "%llx-%llx", s, e);
        if (probe_file(p, range, file, s, py_version) == 1) {
            snprintf(name, namelen, "%s", base_of(file));
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void layout_from_debug(py_layout *L, const py313_debug *d)
{
    *L = (py_layout){
        .minor = 13, .rt_interp_head = d->rt_interp_head, .is_next = d->is_next, .is_threads = d->is_threads,
        .ts_next = d->ts_next, .ts_tid = d->ts_native_tid, .ts_frame = d->ts_current_frame, .cf_current = NONE,
        .fr_previous = d->fr_previous, .fr_code = d->fr_executable, .fr_instr = d->fr_instr_ptr,
        .fr_owner = d->fr_owner, .fr_is_entry = NONE, .co_filename = d->co_filename, .co_name = d->co_qualname,
        .co_firstlineno = d->co_firstlineno, .co_linetable = d->co_linetable, .co_code = d->co_code_adaptive,
        .u_length = d->un_length, .u_state = d->un_state, .u_ascii_size = d->un_ascii_size,
        .u_compact_size = d->un_ascii_size + 16, .b_size = d->by_ob_size, .b_sval = d->by_sval,
    };
}

/* Step 2: the layout of the target's version; 0, or -1 with p->why. */
static int pick_layout(py_proc *p, const char *name, uint64_t py_version)
{
    py313_debug d;
    if (rd(p, p->runtime, &d, sizeof d) == 0 && !memcmp(d.cookie, "xdebugpy", 8)) {
        unsigned v = (unsigned)d.version;
        if ((v >> 16) != 0x030d) {
            snprintf(p->why, sizeof p->why, "Python %u.%u is not supported (3.10-3.13 are)", v >> 24,
                     (v >> 16) & 0xff);
            return -1;
        }
        if (d.free_threaded) {
            snprintf(p->why, sizeof p->why, "a free-threaded Python 3.13 is not supported");
            return -1;
        }
        layout_from_debug(&p->L, &d);
        return 0;
    }
    int minor = -1;
    uint64_t v = 0;
    if (py_version && rd(p, py_version, &v, 8) == 0 && (v >> 24) == 3)
        minor = (int)((v >> 16) & 0xff);
    else
        minor = minor_from_name(name);
    if (minor == 10 || minor == 11 || minor == 12) {
        p->L = minor == 10 ? layout_310 : minor == 11 ? layout_311 : layout_312;
        return 0;
    }
    if (minor < 0)
        snprintf(p->why, sizeof p->why, "the Python version of %s is unknown", name);
    else
        snprintf(p->why, sizeof p->why, "Python 3.%d is not supported (3.10-3.13 are)", minor);
    return -1;
}

/* UTF-8 of code point c into out[*k..n-1]; '?' for a surrogate or worse. */
static void put_utf8(char *out, size_t n, size_t *k, uint32_t c)
{
    char b[4];
    size_t m;
    if (c >= 0xd800 && (c < 0xe000 || c > 0x10ffff))
        c = '?';
    if (c < 0x80) {
        b[0] = (char)c;
        m = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xc0 | (c >> 6));
        b[1] = (char)(0x80 | (c & 63));
        m = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xe0 | (c >> 12));
        b[1] = (char)(0x80 | ((c >> 6) & 63));
        b[2] = (char)(0x80 | (c & 63));
        m = 3;
    } else {
        b[0] = (char)(0xf0 | (c >> 18));
        b[1] = (char)(0x80 | ((c >> 12) & 63));
        b[2] = (char)(0x80 | ((c >> 6) & 63));
        b[3] = (char)(0x80 | (c & 63));
        m = 4;
    }
    if (*k + m < n) {
        memcpy(out + *k, b, m);
        *k += m;
    }
}

/* A str object as UTF-8 (compact strings: ASCII, latin-1, UCS-2, UCS-4),
 * at most PY_MAX_NAME characters; "?" when it cannot be read. */
static void read_str(const py_proc *p, uint64_t obj, char *out, size_t n)
{
    uint32_t state = 0;
    int64_t len = 0;
    unsigned char raw[PY_MAX_NAME * 4];
    snprintf(out, n, "?");
    if (!obj || rd(p, obj + p->L.u_state, &state, 4) < 0 || rd(p, obj + p->L.u_length, &len, 8) < 0 || len < 0)
        return;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4))
        return;
    size_t chars = len > PY_MAX_NAME ? PY_MAX_NAME : (size_t)len, k = 0;
    uint64_t data = obj + (ascii ? p->L.u_ascii_size : p->L.u_compact_size);
    if (rd(p, data, raw, chars * kind) < 0)
        return;
    for (size_t i = 0; i < chars; i++) {
        uint32_t c = kind == 1 ? raw[i] : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                                                    : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                                                          (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        if (ascii && c >= 0x80)
            c = '?';
        put_utf8(out, n, &k, c);
    }
    out[k] = 0;
}

/* s into dst[n]: whole, or "..." and its tail on a UTF-8 boundary. */
static void keep_tail(char *dst, size_t n, const char *s)
{
    size_t len = strlen(s);
    if (len < n) {
        memcpy(dst, s, len + 1);
        return;
    }
    const char *t = s + len - (n - 4);
    while (*t && ((unsigned char)*t & 0xc0) == 0x80)
        t++;
    snprintf(dst, n, "...%s", t);
}

/* The line code object co runs at code-unit offset lasti; 0 unknown. */
static int code_line(const py_proc *p, uint64_t co, long lasti)
{
    int32_t first = 0;
    int64_t size = 0;
    uint64_t table = rd_ptr(p, co + p->L.co_linetable);
    if (rd(p, co + p->L.co_firstlineno, &first, 4) < 0 || !table || rd(p, table + p->L.b_size, &size, 8) < 0 ||
        size < 0 || size > PY_MAX_TABLE)
        return 0;
    unsigned char *t = malloc(size ? (size_t)size : 1);
    int line = -1;
    if (t && rd(p, table + p->L.b_sval, t, (size_t)size) == 0)
        line = p->L.minor == 10 ? tft_py_line_310(t, (size_t)size, first, lasti)
                                : tft_py_line_311(t, (size_t)size, first, lasti);
    free(t);
    return line > 0 ? line : 0;
}

/* One frame's code object into f; -1 when co is not a code object. */
static int read_code(const py_proc *p, uint64_t co, long lasti, py_frame *f)
{
    char buf[PY_MAX_NAME * 4 + 1];
    if (p->code_type && rd_ptr(p, co + 8) != p->code_type)
        return -1;
    read_str(p, rd_ptr(p, co + p->L.co_filename), buf, sizeof buf);
    keep_tail(f->file, sizeof f->file, buf);
    read_str(p, rd_ptr(p, co + p->L.co_name), buf, sizeof buf);
    keep_tail(f->func, sizeof f->func, buf);
    f->line = code_line(p, co, lasti);
    return 0;
}

/* Step 3 for one thread: the chain from frame, innermost first, into
 * out[0..PY_MAX_DEPTH); returns the count.
 * A frame that cannot be read ends the walk with a note in why. */
static int walk_frames(const py_proc *p, uint64_t frame, py_frame *out, char *why, size_t wn)
{
    const py_layout *L = &p->L;
    int n = 0, group = 0;
    for (int depth = 0; frame && depth < PY_MAX_DEPTH; depth++) {
        uint64_t prev = rd_ptr(p, frame + L->fr_previous), co = rd_ptr(p, frame + L->fr_code);
        uint8_t owner = 0, entry = 0;
        if (L->fr_owner != NONE && rd(p, frame + L->fr_owner, &owner, 1) < 0)
            break;
        if (L->fr_is_entry != NONE && rd(p, frame + L->fr_is_entry, &entry, 1) < 0)
            break;
        if (L->fr_owner != NONE && L->minor >= 12 && owner == PY_OWNED_BY_CSTACK) {
            group++;             /* the shim that starts an eval call */
            frame = prev;
            continue;
        }
        long lasti = -1;
        if (L->minor == 10) {
            int32_t li = -1;
            if (rd(p, frame + L->fr_instr, &li, 4) == 0)
                lasti = li;
        } else {
            uint64_t instr = 0;
            if (rd(p, frame + L->fr_instr, &instr, 8) == 0 && instr >= co + L->co_code)
                lasti = (long)((instr - (co + L->co_code)) / 2);
        }
        py_frame *f = &out[n];
        memset(f, 0, sizeof *f);
        if (!co || read_code(p, co, lasti, f) < 0) {
            snprintf(why, wn, "Python frame %d could not be read (the thread is running, or its state is torn)", n);
            break;
        }
        f->group = group;
        n++;
        if (L->minor == 10 || entry)
            group++;
        frame = prev;
    }
    if (frame && !why[0] && n >= PY_MAX_DEPTH)
        snprintf(why, wn, "only the innermost %d Python frames were read", PY_MAX_DEPTH);
    return n;
}

static int is_eval_frame(const tft_frame *f)
{
    static const char name[] = "_PyEval_EvalFrameDefault";
    size_t k = sizeof name - 1;
    return f->how != TFT_FRAME_PY && !strncmp(f->func, name, k) &&
           (f->func[k] == 0 || f->func[k] == '.' || f->func[k] == '@');
}

static void add_note(tft_thread_stack *t, const char *s)
{
    size_t len = strlen(t->note);
    snprintf(t->note + len, sizeof t->note - len, "%s%s", len ? "; " : "", s);
}

static void to_frame(const py_frame *pf, tft_frame *f)
{
    memset(f, 0, sizeof *f);
    f->how = TFT_FRAME_PY;
    snprintf(f->func, sizeof f->func, "%s", pf->func);
    snprintf(f->module, sizeof f->module, "%s", pf->file);
    f->module_off = (uint64_t)pf->line;
}

/* Step 4: py[0..npy) in front of t's eval frames, group by group; the
 * groups left over (the native walk stopped above them) go last. */
static void merge(tft_thread_stack *t, const py_frame *py, int npy)
{
    tft_frame *out = malloc(sizeof t->frames);
    if (!out)
        return;
    int k = 0, pi = 0, group = 0, dropped = 0;
    for (int i = 0; i < t->nframes; i++) {
        int eval = is_eval_frame(&t->frames[i]);
        for (; eval && pi < npy && py[pi].group == group; pi++) {
            if (k < TFT_STACK_MAX_FRAMES)
                to_frame(&py[pi], &out[k++]);
            else
                dropped++;
        }
        group += eval;
        if (k < TFT_STACK_MAX_FRAMES)
            out[k++] = t->frames[i];
        else
            dropped++;
    }
    int left = npy - pi;
    for (; pi < npy; pi++) {
        if (k < TFT_STACK_MAX_FRAMES)
            to_frame(&py[pi], &out[k++]);
        else
            dropped++;
    }
    memcpy(t->frames, out, (size_t)k * sizeof *out);
    t->nframes = k;
    free(out);
    char note[120];
    if (left) {
        snprintf(note, sizeof note, "%d Python frame%s below the native frames unwound listed last", left,
                 left == 1 ? "" : "s");
        add_note(t, note);
    }
    if (dropped) {
        snprintf(note, sizeof note, "%d frames beyond the %d kept", dropped, TFT_STACK_MAX_FRAMES);
        add_note(t, note);
    }
}

typedef struct py_tstate {
    uint64_t tid, frame;
} py_tstate;

/* Step 3: every thread state's tid and innermost frame; the count. */
static int thread_states(const py_proc *p, py_tstate *ts, int max)
{
    const py_layout *L = &p->L;
    int n = 0;
    uint64_t interp = rd_ptr(p, p->runtime + L->rt_interp_head);
    for (int ni = 0; interp && ni < PY_MAX_INTERPS; ni++) {
        uint64_t t = rd_ptr(p, interp + L->is_threads);
        for (int nt = 0; t && nt < PY_MAX_TSTATES && n < max; nt++) {
            uint64_t tid = 0, frame = rd_ptr(p, t + L->ts_frame);
            if (rd(p, t + L->ts_tid, &tid, 8) == 0) {
                if (L->minor == 10) {     /* a pthread_t: glibc's struct pthread has the tid */
                    int32_t k = 0;
                    tid = rd(p, tid + GLIBC_PTHREAD_TID, &k, 4) == 0 ? (uint64_t)k : 0;
                }
                if (L->cf_current != NONE)
                    frame = frame ? rd_ptr(p, frame + L->cf_current) : 0;
                ts[n++] = (py_tstate){.tid = tid, .frame = frame};
            }
            t = rd_ptr(p, t + L->ts_next);
        }
        interp = rd_ptr(p, interp + L->is_next);
    }
    return n;
}

static int elf_ready(void)
{
    static int ok = -1;
    if (ok < 0)
        ok = elf_version(EV_CURRENT) != EV_NONE;
    return ok;
}

int tft_py_stacks(pid_t pid, tft_thread_stack *st, size_t n)
{
    py_proc p = {.pid = pid, .memfd = -1};
    char name[256] = "", path[64];
    uint64_t pyver = 0;
    int got = 0;
    if (!n || !elf_ready() || !find_runtime(&p, name, sizeof name, &pyver))
        return 0;
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    p.memfd = open(path, O_RDONLY | O_CLOEXEC);
    py_tstate *ts = malloc(PY_MAX_TSTATES * sizeof *ts);
    py_frame *frames = malloc(PY_MAX_DEPTH * sizeof *frames);
    int nts = 0;
    if (p.memfd < 0)
        snprintf(p.why, sizeof p.why, "its memory cannot be read (%s)", strerror(errno));
    else if (!ts || !frames)
        snprintf(p.why, sizeof p.why, "out of memory");
    else if (pick_layout(&p, name, pyver) == 0 && (nts = thread_states(&p, ts, PY_MAX_TSTATES)) == 0)
        snprintf(p.why, sizeof p.why, "no Python thread state could be read in %.100s", name);
    for (size_t i = 0; i < n; i++) {
        char why[160] = "", note[200];
        if (p.why[0]) {
            snprintf(note, sizeof note, "no Python frames: %s", p.why);
            add_note(&st[i], note);
            continue;
        }
        for (int j = 0; j < nts; j++) {
            if (ts[j].tid != (uint64_t)st[i].tid || !ts[j].frame)
                continue;
            int npy = walk_frames(&p, ts[j].frame, frames, why, sizeof why);
            merge(&st[i], frames, npy);
            got += npy > 0;
            if (why[0]) {
                snprintf(note, sizeof note, "Python frames: %s", why);
                add_note(&st[i], note);
            }
            break;
        }
    }
    if (p.memfd >= 0)
        close(p.memfd);
    free(ts);
    free(frames);
    return got;
}

#else

#include <errno.h>

int tft_py_stacks(pid_t pid, tft_thread_stack *st, size_t n)
{
    (void)pid, (void)st, (void)n;
    return -ENOSYS;
}

#endif

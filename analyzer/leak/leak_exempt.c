/*
 * leak_exempt.c — what the leak rules leave out, by name: allocation sites
 * that are an allocator's own source of pages (leak_site_is_pool), and
 * processes that are the job's build tools (leak_process_is_helper). Both
 * are read from the trace alone: the site's name (the interposed
 * allocator's caller, docs/INTERPOSE.md) and the name of the process's main
 * thread (its THREAD records: the kernel's comm, the executable's base name
 * cut to 15 characters).
 *
 * Pools. CPython keeps its small objects (at most 512 bytes: ints, strs,
 * dicts, list nodes) in arenas of 1 MiB (256 KiB before 3.10) that it maps
 * itself and keeps until the interpreter ends, returning one only when
 * every object in it is gone: a healthy program's arenas are live at its
 * end, were mapped over its run, and grow with whatever it holds. They are
 * what the allocator keeps, not what the program allocated — the objects
 * in them are too small to be recorded one by one — so their live bytes
 * say nothing about which code keeps what. Never a leak, by any rule. The
 * functions that map them, by CPython version:
 *   _PyObject_ArenaMmap     3.4-3.11 (obmalloc.c; static, named from .symtab)
 *   _PyObject_ArenaMalloc   the same where arenas come from malloc (no mmap)
 *   _PyMem_ArenaAlloc       3.12 and later
 *   mimalloc (3.13's free-threaded build and PYTHONMALLOC=mimalloc, which
 *   keep every object in mimalloc's segments): _mi_* and mi_* functions and
 *   its unix_mmap* primitives.
 * An interpreter whose executable is stripped (Debian's /usr/bin/python3)
 * names no function: the site is "python3.11+0x22d099". Such a site of the
 * interpreter's own code (python*, libpython*) whose blocks all have one
 * arena's size (exactly 1 MiB or 256 KiB) is taken for the arena mapper;
 * CPython's other large blocks (lists, bytes, dict tables over 512 bytes,
 * from _PyObject_Malloc's fall-back to malloc) come from a site whose
 * sizes vary, and stay analysed (a program whose only big Python objects
 * are all of exactly 1 MiB would be missed). What is not a pool stays
 * analysed too: a leak of numpy arrays, of torch's CPU tensors or of big
 * Python objects (_PyObject_Malloc) is found as before. The risk of the
 * names: a program's own function called mi_something or unix_mmap is
 * taken for mimalloc's. Not listed, for want of a trace that shows them:
 * the page sources of a preloaded jemalloc or tcmalloc, whose blocks the
 * interposed malloc records already at the program's own sites.
 *
 * Helpers. A process of the job that only serves it — the C/C++ compiler
 * torch.compile's inductor runs (g++ and its cc1plus, as, collect2, ld),
 * nvcc and ptxas, a build tool — runs one task and ends, and what it held
 * went back to the system then, while the job went on. GCC keeps its
 * garbage-collected heap to its end (ggc_internal_alloc), the linker its
 * obstacks (_objalloc_alloc, xcalloc): read as leaks of the job they were
 * a dozen findings on a torch.compile of a two-layer MLP on the CPU.
 * Such a process is never reported. A process is a helper when its main
 * thread's name is one of TOOLS below (after a version suffix "-12" or
 * "-17.0" is dropped), or starts with a GNU target triplet
 * ("x86_64-linux-gnu-g++-12" is cut to "x86_64-linux-gn"): nothing but a
 * toolchain is named that way. Python processes the job starts (inductor's
 * compile workers, a child that checks something) cannot be told from the
 * trainer by name; what they hold is their arenas, left out above. A file
 * before format 1.2 has no THREAD records: its process is no helper.
 */
#include "leak_internal.h"

#include <string.h>

/* Functions that map pages for an allocator's own pools (see the top of
 * the file). */
static const char *const POOL_FUNCS[] = {
    "_PyObject_ArenaMmap", "_PyObject_ArenaMalloc", "_PyMem_ArenaAlloc",
    "unix_mmap", "unix_mmap_prim", "unix_mmap_prim_aligned",
};

/* Prefixes of mimalloc's functions (CPython 3.13 links it in). */
static const char *const POOL_PREFIXES[] = {"_mi_", "mi_"};

/* CPython's arena sizes: 1 MiB since 3.10, 256 KiB before. */
static const uint64_t ARENA_BYTES[] = {(uint64_t)1 << 20, (uint64_t)256 << 10};

/* The job's build tools, by the name of their main thread. */
static const char *const TOOLS[] = {
    /* compiler drivers and their passes */
    "cc", "c++", "gcc", "g++", "cpp", "clang", "clang++", "cc1", "cc1plus", "cc1obj", "cc1objplus", "f951",
    "lto1", "lto-wrapper", "collect2", "icx", "icpx", "hipcc",
    /* assemblers, linkers, archivers */
    "as", "ld", "ld.bfd", "ld.gold", "ld.lld", "lld", "gold", "mold", "ar", "ranlib", "strip", "objcopy",
    /* CUDA's compiler and its passes */
    "nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "cudafe++",
    /* build drivers */
    "make", "gmake", "ninja", "cmake",
};

/* First words of GNU target triplets (x86_64-linux-gnu-gcc, aarch64-...). */
static const char *const TRIPLET_ARCHS[] = {
    "x86_64", "aarch64", "i386", "i486", "i586", "i686", "arm", "armv7l", "armv7a", "armhf",
    "powerpc64", "powerpc64le", "ppc64", "ppc64le", "riscv64", "s390x", "loongarch64", "mips64el",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool in_list(const char *s, size_t len, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && !strncmp(s, list[i], len))
            return true;
    return false;
}

/* "python3.11+0x22d099", "libpython3.12.so.1.0+0x1f00": an unnamed place in
 * the interpreter's own code. */
static bool in_stripped_python(const char *name)
{
    const char *p = starts_with(name, "lib") ? name + 3 : name;
    if (!starts_with(p, "python"))
        return false;
    for (p += 6; *p && *p != '+'; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || *p == '.' || *p == '_' || *p == '-'))
            return false;
    return starts_with(p, "+0x");
}

bool leak_site_is_pool(const leak_site *st)
{
    if (in_list(st->name, strlen(st->name), POOL_FUNCS, COUNT(POOL_FUNCS)))
        return true;
    for (size_t i = 0; i < COUNT(POOL_PREFIXES); i++)
        if (starts_with(st->name, POOL_PREFIXES[i]))
            return true;
    if (!st->allocs || st->sizes_mixed || !in_stripped_python(st->name))
        return false;
    for (size_t i = 0; i < COUNT(ARENA_BYTES); i++)
        if (st->one_size == ARENA_BYTES[i])
            return true;
    return false;
}

/* PyTorch's CPU allocator (c10::alloc_cpu): every CPU tensor of a
 * PyTorch program comes from it, and what is live there when the recorder
 * stops is the model, its data and the optimizer's state, freed by the
 * interpreter's teardown after that: no leak at exit. Growth step after
 * step is still one (a list of tensors kept per step). */
bool leak_site_is_tensor_heap(const leak_site *st)
{
    return starts_with(st->name, "_ZN3c109alloc_cpu") || strstr(st->name, "c10::alloc_cpu") != NULL;
}

/* The length of comm without a version suffix: "gcc-12" -> 3, "clang-17.0"
 * -> 5, "g++" -> 3. */
static size_t unversioned_len(const char *comm)
{
    const char *dash = strrchr(comm, '-');
    if (!dash || dash == comm || !dash[1])
        return strlen(comm);
    for (const char *p = dash + 1; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return strlen(comm);
    return (size_t)(dash - comm);
}

bool leak_process_is_helper(const char *comm)
{
    if (!comm || !comm[0])
        return false;
    if (in_list(comm, unversioned_len(comm), TOOLS, COUNT(TOOLS)))
        return true;
    const char *dash = strchr(comm, '-');
    return dash && in_list(comm, (size_t)(dash - comm), TRIPLET_ARCHS, COUNT(TRIPLET_ARCHS));
}

/*
 * py_stacks.h — the Python frames of a CPython process's threads, read
 * from outside (process_vm_readv: no code in the target, no ptrace stop)
 * and merged into the native stacks the unwinder gave (bpf_stacks.h):
 * each native _PyEval_EvalFrameDefault frame gets the Python frames it was
 * running placed just above it, as TFT_FRAME_PY frames ("hang.py:12 in
 * wait"). CPython 3.10 to 3.13 on x86-64 (docs/ATTACH.md, "Python frames").
 *
 * Everything read from the target is untrusted: loops are bounded (256
 * frames, 1024-byte names, 1 MiB line tables), pointers checked, and a
 * failure leaves the native frames as they are, with a one-line note.
 */
#ifndef TFT_PY_STACKS_H
#define TFT_PY_STACKS_H

#include <stddef.h>
#include <sys/types.h>

#include "bpf_stacks.h"

/*
 * Adds the Python frames to st[0..n-1], the unwound threads of process pid
 * (all of one process). A process that maps no CPython interpreter
 * (no python executable or libpython with a _PyRuntime symbol) is left
 * untouched and 0 returned. Otherwise returns how many threads got Python
 * frames; when the interpreter's state cannot be read (an unsupported
 * version, unreadable memory) each thread's note says why and 0 is
 * returned. -ENOSYS: built without BPF support (no libelf).
 */
int tft_py_stacks(pid_t pid, tft_thread_stack *st, size_t n);

/*
 * The source line of code-unit offset lasti (2-byte units) in a CPython
 * 3.11+ location table (PEP 626, Objects/locations.md) of len bytes, or -1
 * when the table has none for it (or is corrupt). firstlineno starts the
 * count. Pure; exported for the tests.
 */
int tft_py_line_311(const unsigned char *t, size_t len, int firstlineno, long lasti);

/* The same for a CPython 3.10 line table (co_linetable: byte-delta,
 * line-delta pairs); lasti in code units. */
int tft_py_line_310(const unsigned char *t, size_t len, int firstlineno, long lasti);

#endif

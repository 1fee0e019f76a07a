"""Finding and loading libtftrace.so, and the C prototypes the package calls.

The package is pure Python over the C library through ctypes (docs/PYTORCH.md
says why: no compiler at install time, one reader and one recorder for C and
Python alike). The library is looked for, first match wins:

1. ``TFT_LIB`` (a path to libtftrace.so), as the ``tftrace`` launcher reads it;
2. the copy already mapped into this process (``tftrace`` preloads it);
3. inside this package, ``tftrace/_native/lib`` (the wheel built by
   ``pip install .`` at the repository's top);
4. next to this package when ``cmake --install`` put it under
   ``PREFIX/lib/tftrace/python`` (the library is ``PREFIX/lib/libtftrace.so``);
5. next to a ``tftrace`` program on ``PATH`` (``../lib``), then the dynamic
   linker's search (``ldconfig``).

Loading happens once, on first use; a failure raises ``TftLibraryError``
naming every place that was tried.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import threading

from ._version import __version__


class TftLibraryError(RuntimeError):
    """libtftrace.so could not be found or loaded."""


_lock = threading.Lock()
_lib = None
_path = None


def _mapped():
    """Path of a libtftrace.so already mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.rstrip("\n").split(None, 5)
                if len(p) == 6 and os.path.basename(p[5]).startswith("libtftrace.so"):
                    return p[5]
    except OSError:
        pass
    return None


def _candidates():
    env = os.environ.get("TFT_LIB")
    if env:
        yield env, "TFT_LIB"
    m = _mapped()
    if m:
        yield m, "already loaded"
    here = os.path.dirname(os.path.abspath(__file__))
    wheel = os.path.join(here, "_native", "lib", "libtftrace.so")
    if os.path.exists(wheel):
        yield wheel, "in the package (the wheel)"
    # PREFIX/lib/tftrace/python/tftrace -> PREFIX/lib
    libdir = os.path.normpath(os.path.join(here, "..", "..", ".."))
    yield os.path.join(libdir, "libtftrace.so"), "installed beside the package"
    exe = shutil.which("tftrace")
    if exe:
        d = os.path.dirname(os.path.realpath(exe))
        for rel in ("libtftrace.so", "../lib/libtftrace.so", "../lib64/libtftrace.so",
                    "../lib/x86_64-linux-gnu/libtftrace.so"):
            yield os.path.normpath(os.path.join(d, rel)), "next to " + exe
    found = ctypes.util.find_library("tftrace")
    if found:
        yield found, "the dynamic linker's search path"


def _declare(lib):
    c = ctypes
    P, I, U64, I64, SZ = c.c_void_p, c.c_int, c.c_uint64, c.c_int64, c.c_size_t
    CS = c.c_char_p
    protos = {
        # recording (tft.h)
        "tft_enabled": (I, []),
        "tft_step_begin": (I, [I64]),
        "tft_step_end": (I, [I64]),
        "tft_op_begin": (I64, [CS, I, I, P]),
        "tft_op_end": (None, []),
        "tft_tensor": (I, [CS, I, P, I, P]),
        "tft_tensor_dev": (I, [CS, I, P, I, P, I, P]),
        "tft_tensor_stats": (I, [CS, I, I, P, P, I, I]),
        "tft_last_tensor_id": (U64, []),
        "tft_scope_push": (None, [CS]),
        "tft_scope_pop": (None, []),
        "tft_coll_enter": (I64, [P]),
        "tft_coll_exit": (I, [I64, P, P]),
        "tft_comm_define": (I, [P]),
        "tft_flush": (I, []),
        "tft_now_ns": (U64, []),
        "tft_version": (CS, []),
        "tft_format_version": (CS, []),
        "tft_string_id": (U64, [CS, SZ]),
        "tft_dtype_name": (CS, [I]),
        # reading (tft_format.h)
        "tft_trace_open_lazy": (P, [CS, P]),
        "tft_trace_close": (None, [P]),
        "tft_trace_nranks": (I, [P]),
        "tft_trace_rank_id": (I, [P, I]),
        "tft_trace_reader": (P, [P, I]),
        "tft_trace_release": (None, [P, I]),
        "tft_trace_file_name": (CS, [P, I]),
        "tft_reader_next": (I, [P, c.POINTER(P)]),
        "tft_reader_string": (CS, [P, U64]),
        "tft_reader_rewind": (I, [P]),
        "tft_reader_seek_step": (I, [P, I64]),
        "tft_rec_kind_name": (CS, [c.c_uint16]),
        "tft_op_kind_name": (CS, [I]),
        "tft_coll_type_name": (CS, [I]),
        "tft_redop_name": (CS, [I]),
        # reading, used by the reader API (_trace.py, _layouts.py, _captures.py)
        "tft_rec_kind": (P, [c.c_uint16]),
        "tft_dtype_size": (SZ, [I]),
        "tft_capture_shuffle": (None, [P, P, SZ, SZ, I]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    # EXCEPTION records (format 1.7): declared when the library has the call
    if hasattr(lib, "tft_exception"):
        lib.tft_exception.restype, lib.tft_exception.argtypes = I, [CS, CS, CS, CS]
    lib.tft_checkpoint.restype, lib.tft_checkpoint.argtypes = I, [I, I64, CS, CS]
    if hasattr(lib, "tft_tensor_context"):
        lib.tft_tensor_context.restype, lib.tft_tensor_context.argtypes = None, [c.c_uint]
    # since 0.3 (docs/PYTORCH.md, "Workers and helper processes"): optional,
    # a library without them has no waiting processes (_record.py)
    # since 0.3: a strided host tensor read in place (optional, as above)
    if hasattr(lib, "tft_tensor_strided"):
        lib.tft_tensor_strided.restype, lib.tft_tensor_strided.argtypes = I, [CS, I, P, I, P, P]
    for name in ("tft_process_waiting", "tft_process_join"):
        f = getattr(lib, name, None)
        if f is not None:
            f.restype, f.argtypes = I, []


def lib() -> ctypes.CDLL:
    """The loaded libtftrace.so (a ctypes.CDLL), loading it on first use."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, why in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append("%s (%s): not there" % (path, why))
                continue
            try:
                # PyDLL: calls keep the GIL (no release and re-take around each of the
                # many short calls a training step makes; the longest, a statistics
                # pass over one tensor, is a few hundred microseconds)
                handle = ctypes.PyDLL(path)
                _declare(handle)
            except (OSError, AttributeError) as e:
                tried.append("%s (%s): %s" % (path, why, e))
                continue
            _lib, _path = handle, path
            return _lib
        raise TftLibraryError(
            "tftrace: libtftrace.so not found; set TFT_LIB to its path. Tried:\n  "
            + "\n  ".join(tried or ["nothing (no candidate)"]))


def library_path() -> str:
    """Path of the loaded libtftrace.so (loading it if needed)."""
    lib()
    return _path  # type: ignore[return-value]  # a str once lib() returned


def library_version() -> str:
    """The loaded library's tft_version(), e.g. "0.2.0"."""
    return lib().tft_version().decode()


def check_version() -> str | None:
    """Returns a warning text when the library's version differs from the package's, else None."""
    v = library_version()
    if v != __version__:
        return ("tftrace: the Python package is %s but %s is %s; install both from one "
                "tftrace release" % (__version__, library_path(), v))
    return None

"""Reading tftrace traces from Python: tables of tensors, collectives and
allocations, captured tensors as numpy arrays, and the C tools' summary
and diff as dicts (docs/PYTHON.md is the reference).

Everything here reads through libtftrace.so's reader (tft_format.h) with
ctypes: ``tft_trace_open_lazy`` opens a trace directory or one rank file,
``tft_trace_reader(i)`` / ``tft_trace_release(i)`` open and close one rank
file at a time, and each record ``tft_reader_next`` hands out is decoded in
place from the ctypes.Structure below that mirrors its C struct (sizes are
checked against ``tft_rec_min_size`` when the module first reads). The
reader has checked every record's structure (length, counts) before it
hands it out, so decoding reads only inside the record.

Contracts:

- ``open(path)`` -> ``Trace``; a path that is missing, not a trace, or
  damaged past opening raises ``TraceError`` with the C library's message.
  Damage found while reading (a chunk whose checksum fails: its records are
  skipped) is a ``TraceWarning`` (warnings module) and kept in
  ``Trace.problems``; a read error raises ``TraceError``.
- The table methods return a pandas DataFrame when pandas imports, else a
  dict of numpy arrays (column name -> 1-d array, all of one length).
  Values a record does not carry (a statistic beyond the record's mode, a
  step outside any step) are NaN in float columns and None elsewhere: in a
  DataFrame the integer columns that can miss values have pandas' nullable
  dtypes (Int64 / UInt64, missing = <NA>); in the dict, such a column is an
  int64/uint64 array when no value is missing and an object array (Python
  ints and None) when some are.
- Rows come rank file by rank file (in ``Trace.ranks`` order), each in file
  order, as ``tfdump --events --rank R`` lists them.
- A Trace is not for concurrent use from several threads (calls are
  serialised by a lock); ``close()`` (or the ``with`` block) frees it.
"""

import builtins
import contextlib
import ctypes
import fnmatch
import json
import numbers
import os
import re
import stat
import threading
import warnings

import numpy as np

from . import _lib
from . import _tools

__all__ = ["open", "diff", "Trace", "TraceError", "TraceWarning", "ToolNotFoundError"]

ToolNotFoundError = _tools.ToolNotFoundError


class TraceError(Exception):
    """A trace could not be opened or read, or a tool failed on it.

    Attributes: ``path`` (the trace, or None), ``errno`` (when the C library
    set one, else None), ``stderr`` (a tool's, when one failed), ``status``
    (its exit status), ``result`` (what it printed as JSON anyway, else None).
    """

    def __init__(self, message, path=None, errno=None, stderr=None, status=None, result=None):
        super().__init__(message)
        self.path = path
        self.errno = errno
        self.stderr = stderr
        self.status = status
        self.result = result


class TraceWarning(UserWarning):
    """A problem the reader reported while reading (damaged chunk, torn tail, odd manifest)."""


# ---- constants of tft_format.h / tft_types.h ---------------------------------

STEP_NONE = -(1 << 63)  # TFT_STEP_NONE
SEQ_NONE = -(1 << 63)   # TFT_SEQ_NONE
MAX_NDIM = 8            # TFT_MAX_NDIM

REC_STRING, REC_STEP, REC_OP, REC_TENSOR, REC_ALLOC, REC_FREE = 1, 2, 3, 4, 5, 6
REC_COLLECTIVE, REC_KERNEL, REC_CHECKPOINT, REC_PROCESS, REC_DROPPED = 7, 8, 9, 10, 11
REC_CAPTURE, REC_THREAD, REC_SYNC, REC_COMM = 12, 13, 14, 15
REC_STACK = 16
REC_CLOCK = 17

_KIND_NAMES = {REC_STEP: "step", REC_OP: "op", REC_TENSOR: "tensor", REC_ALLOC: "alloc",
               REC_FREE: "free", REC_COLLECTIVE: "collective", REC_KERNEL: "kernel",
               REC_CHECKPOINT: "checkpoint", REC_PROCESS: "process", REC_DROPPED: "dropped",
               REC_CAPTURE: "capture", REC_THREAD: "thread", REC_SYNC: "sync", REC_COMM: "comm",
               REC_STACK: "stack", REC_CLOCK: "clock"}
_KIND_BY_NAME = {v: k for k, v in _KIND_NAMES.items()}

_TENSOR_HAS_DATA = 0x1
_COLL_FLAG_ENTER, _COLL_FLAG_EXIT = 0x1, 0x2
_CAPTURE_SHUFFLED = 0x1
_COMM_FLAG_INTER = 0x1
_COLL_SEND, _COLL_RECV = 7, 8
_STACK_FLAG_MAIN = 0x1
_STACK_SOURCES = {1: "on-cpu", 2: "off-cpu"}  # else "running" (FORMAT.md §5.16)
_TAG_NONE = -1
_BF16 = 3
_F8E4M3, _F8E5M2 = 13, 14
_MODE_NAMES = ("shape", "health", "full")
_ROLE_NAMES = ("output", "input", "prior")
_PROC_EVENTS = ("start", "exit", "rss")
_DROP_REASONS = ("ring_full", "too_big", "other")
_LOG_WARN = 1
_LIST_IN_ERROR = 100  # captures a KeyError names
_MANIFEST_MAX_BYTES = 64 << 20  # the C library's limit (formats/src/manifest.c)

# numpy dtype of each tft_dtype (little-endian, as captured bytes are); bf16
# has none: its bits are widened to float32 (exact) or returned as uint16;
# nor has fp8 (f8e4m3, f8e5m2): decoded to float32 (exact) or its bytes as
# uint8.
_NP_DTYPES = {0: "<f4", 1: "<f8", 2: "<f2", 3: "<u2", 4: "<i4", 5: "<i8", 6: "|u1", 7: "|i1",
              8: "<i2", 9: "<u2", 10: "<u4", 11: "<u8", 12: "|b1", 13: "|u1", 14: "|u1"}


def _fp8_table(mbits, bias, ieee):
    """The float32 value of each of the 256 bytes of an 8-bit float format
    with mbits mantissa bits and exponent bias `bias`; ieee: the top
    exponent holds Inf and NaNs (E5M2), else only S.1111.111 is NaN (E4M3FN).
    NaNs are the quiet NaN with the byte's sign, as the C library's
    tft_f8e4m3_to_f32 / tft_f8e5m2_to_f32 and tfdump --out give them."""
    b = np.arange(256)
    e, m = (b & 0x7f) >> mbits, b & ((1 << mbits) - 1)
    emax = (1 << (7 - mbits)) - 1
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits),
                   np.ldexp(((1 << mbits) + m).astype(np.float64), e - bias - mbits))
    if ieee:
        mag = np.where((e == emax) & (m == 0), np.inf, mag)
        nan = (e == emax) & (m != 0)
    else:
        nan = (e == emax) & (m == (1 << mbits) - 1)
    bits = np.where(b >= 128, -mag, mag).astype(np.float32).view(np.uint32)
    bits = np.where(nan, np.where(b >= 128, 0xffc00000, 0x7fc00000), bits).astype(np.uint32)
    return bits.view(np.float32)


_FP8_TABLES = {}  # tft dtype -> its _fp8_table, made on first use


def _fp8_decode(dtype, a):
    t = _FP8_TABLES.get(dtype)
    if t is None:
        t = _FP8_TABLES[dtype] = _fp8_table(3, 7, False) if dtype == _F8E4M3 else _fp8_table(2, 15, True)
    return t[a]


# ---- record layouts (tft_format.h, FORMAT.md section 5) ----------------------

c = ctypes
_u8, _u16, _u32, _u64 = c.c_uint8, c.c_uint16, c.c_uint32, c.c_uint64
_i16, _i32, _i64 = c.c_int16, c.c_int32, c.c_int64


class _Rec(c.Structure):
    _fields_ = [("kind", _u16), ("flags", _u16), ("len", _u32), ("ts", _u64), ("step", _i64),
                ("seq", _i64)]


class _Stats(c.Structure):
    _fields_ = [("numel", _u64), ("nan", _u64), ("pinf", _u64), ("ninf", _u64), ("zero", _u64),
                ("over_fp16", _u64), ("over_bf16", _u64), ("under_fp16", _u64),
                ("fingerprint", _u64), ("min", c.c_double), ("max", c.c_double),
                ("mean", c.c_double), ("std", c.c_double), ("l1", c.c_double), ("l2", c.c_double),
                ("absmax", c.c_double)]


class _RecString(c.Structure):
    _fields_ = [("h", _Rec), ("id", _u64), ("n", _u32), ("pad", _u32)]


class _RecStep(c.Structure):
    _fields_ = [("h", _Rec), ("phase", _u32), ("pad", _u32)]


class _RecOp(c.Structure):
    _fields_ = [("h", _Rec), ("name", _u64), ("scope", _u64), ("op_kind", _u16), ("n_in", _u8),
                ("n_out", _u8), ("n_attr", _u8), ("pad", _u8 * 3)]  # then u64 ids[]


class _RecTensor(c.Structure):
    _fields_ = [("h", _Rec), ("id", _u64), ("name", _u64), ("dtype", _u8), ("device_kind", _u8),
                ("device", _i16), ("mode", _u8), ("ndim", _u8), ("pad", _u8 * 2),
                ("shape", _i64 * MAX_NDIM), ("stats", _Stats)]


class _RecAlloc(c.Structure):
    _fields_ = [("h", _Rec), ("ptr", _u64), ("bytes", _u64), ("site", _u64), ("device_kind", _u8),
                ("pad", _u8), ("device", _i16), ("pad2", _u32), ("stream", _u64)]


class _RecFree(c.Structure):
    _fields_ = [("h", _Rec), ("ptr", _u64), ("bytes", _u64), ("device_kind", _u8), ("pad", _u8),
                ("device", _i16), ("pad2", _u32)]


class _RecCollective(c.Structure):
    # tag and pad3 since format 1.2: read only when h.len covers them
    _fields_ = [("h", _Rec), ("comm", _u64), ("coll_seq", _u64), ("count", _u64),
                ("t_enter", _u64), ("t_exit", _u64), ("result", _u64), ("name", _u64),
                ("type", _u16), ("dtype", _u8), ("redop", _u8), ("root", _i32), ("rank", _i32),
                ("nranks", _i32), ("tag", _i32), ("pad3", _u32)]


_COLLECTIVE_MIN_BYTES = 104  # TFT_REC_COLLECTIVE_MIN_BYTES: a 1.0/1.1 record ends before tag


class _RecKernel(c.Structure):
    _fields_ = [("h", _Rec), ("name", _u64), ("start", _u64), ("end", _u64), ("stream", _u64),
                ("corr", _u64), ("grid", _u32 * 3), ("block", _u32 * 3), ("device", _i32),
                ("kind", _u32)]


class _RecCheckpoint(c.Structure):
    _fields_ = [("h", _Rec), ("path", _u64), ("recipe", _u64), ("action", _u32), ("pad", _u32)]


class _RecProcess(c.Structure):
    _fields_ = [("h", _Rec), ("event", _u32), ("pid", _i32), ("exit_code", _i32), ("signal", _i32),
                ("rss", _u64)]


class _RecDropped(c.Structure):
    _fields_ = [("h", _Rec), ("count", _u64), ("reason", _u32), ("pad", _u32)]


class _RecThread(c.Structure):
    _fields_ = [("h", _Rec), ("event", _u32), ("tid", _i32), ("index", _u32), ("pad", _u32),
                ("name", _u64)]


class _RecClock(c.Structure):  # format 1.6 (FORMAT.md 5.17)
    _fields_ = [("h", _Rec), ("realtime_ns", _u64), ("window_ns", _u32), ("ntp", _u32),
                ("maxerror_ns", _u64), ("esterror_ns", _u64)]


_NTP_STATES = ("unknown", "synced", "unsynced")


class _RecSync(c.Structure):
    _fields_ = [("h", _Rec), ("reserved", _u64)]


class _RecComm(c.Structure):
    _fields_ = [("h", _Rec), ("comm", _u64), ("name", _u64), ("parent", _u64), ("rank", _i32),
                ("size", _i32), ("order", _u32), ("n_members", _u32)]  # then i32 members[]


class _RecStack(c.Structure):  # FORMAT.md §5.16 (since 1.5)
    _fields_ = [("h", _Rec), ("pid", _i32), ("tid", _i32), ("source", _u32), ("nframes", _u32),
                ("comm", _u64), ("summary", _u64), ("frames", _u64), ("note", _u64)]


class _RecCapture(c.Structure):
    _fields_ = [("h", _Rec), ("tensor", _u64), ("total", _u64), ("offset", _u64), ("n", _u32),
                ("role", _u32), ("name", _u64), ("dtype", _u8), ("ndim", _u8), ("pad", _u16),
                ("pad2", _u32), ("shape", _i64 * MAX_NDIM)]  # then u8 data[]


# the fixed size of each kind as tft_rec_min_size() gives it
_LAYOUTS = {REC_STRING: _RecString, REC_STEP: _RecStep, REC_OP: _RecOp, REC_TENSOR: _RecTensor,
            REC_ALLOC: _RecAlloc, REC_FREE: _RecFree, REC_KERNEL: _RecKernel,
            REC_CHECKPOINT: _RecCheckpoint, REC_PROCESS: _RecProcess, REC_DROPPED: _RecDropped,
            REC_CAPTURE: _RecCapture, REC_THREAD: _RecThread, REC_SYNC: _RecSync,
            REC_COMM: _RecComm, REC_STACK: _RecStack, REC_CLOCK: _RecClock}

_checked = False


def _check_layouts(lib):
    """Raises TraceError when a Structure here disagrees with the loaded library's record sizes."""
    global _checked
    if _checked:
        return
    bad = []
    if c.sizeof(_Rec) != 32 or c.sizeof(_Stats) != 128:
        bad.append("tft_rec/tft_stats")
    for kind, layout in _LAYOUTS.items():
        if c.sizeof(layout) != lib.tft_rec_min_size(kind):
            bad.append("%s: %d here, %d in the library" % (_KIND_NAMES.get(kind, "string"),
                                                            c.sizeof(layout),
                                                            lib.tft_rec_min_size(kind)))
    if lib.tft_rec_min_size(REC_COLLECTIVE) != _COLLECTIVE_MIN_BYTES or c.sizeof(_RecCollective) != 112:
        bad.append("collective")
    if bad:
        raise TraceError("tftrace: this Python package and %s disagree on record layouts (%s); "
                         "install both from one tftrace release" % (_lib.library_path(), ", ".join(bad)))
    _checked = True


_LOGFN = c.CFUNCTYPE(None, c.c_void_p, c.c_int, c.c_char_p)


class _ReaderOpts(c.Structure):
    _fields_ = [("sz", c.c_size_t), ("log", _LOGFN), ("log_ctx", c.c_void_p),
                ("display_name", c.c_char_p)]


_errno_fns = {}


def _errno_fn(lib, name, restype, argtypes):
    """The library's function ``name`` with ctypes keeping its errno
    (c.get_errno() after the call), which _lib's prototypes do not."""
    f = _errno_fns.get(name)
    if f is None:
        f = _errno_fns[name] = c.CFUNCTYPE(restype, *argtypes, use_errno=True)((name, lib))
    return f


# ---- names of enumerations, cached ---------------------------------------------

class _Names:
    """Text of the C library's enumeration names (tft_dtype_name, ...), cached per value."""

    def __init__(self, lib):
        self._lib = lib
        self.dtype = {}
        self.coll = {}
        self.redop = {}
        self.op_kind = {}

    def _get(self, cache, fn, v):
        s = cache.get(v)
        if s is None:
            s = cache[v] = fn(v).decode()
        return s

    def dtype_name(self, v):
        return self._get(self.dtype, self._lib.tft_dtype_name, v)

    def coll_name(self, v):
        return self._get(self.coll, self._lib.tft_coll_type_name, v)

    def redop_name(self, v):
        return self._get(self.redop, self._lib.tft_redop_name, v)

    def op_kind_name(self, v):
        return self._get(self.op_kind, self._lib.tft_op_kind_name, v)


def _device(kind, dev):
    if kind == 0:
        return "cpu"
    if kind == 1:
        return "cuda:%d" % dev
    return "dev%d:%d" % (kind, dev)


def _mode_name(mode):
    return _MODE_NAMES[mode] if mode < 3 else "?"


# ---- filters ---------------------------------------------------------------------

class _Steps:
    """The steps= filter: None (all records), an int, an inclusive (a, b)
    pair (either end None = open), a range, or any iterable of ints.
    With a filter, records outside any step are left out."""

    def __init__(self, steps):
        self.any = steps is None
        self.lo = self.hi = None
        self.only = None  # a set, when not a contiguous range
        self.empty = False
        if self.any:
            return
        if isinstance(steps, bool):
            raise TypeError("tftrace: steps= takes an int, an (a, b) pair, a range or an iterable, not a bool")
        if isinstance(steps, numbers.Integral):
            self.lo = self.hi = int(steps)
        elif isinstance(steps, tuple) and len(steps) == 2 and all(
                s is None or (isinstance(s, numbers.Integral) and not isinstance(s, bool)) for s in steps):
            self.lo = None if steps[0] is None else int(steps[0])
            self.hi = None if steps[1] is None else int(steps[1])
        elif isinstance(steps, range) and steps.step == 1:
            self.lo, self.hi = steps.start, steps.stop - 1
        else:
            vals = _ints(steps, "steps= takes an int, an (a, b) pair, a range or an iterable of ints")
            self.only = vals
            if vals:
                self.lo, self.hi = min(vals), max(vals)
        if self.only is not None and not self.only:
            self.empty = True
        if self.lo is not None and self.hi is not None and self.lo > self.hi:
            self.empty = True

    def keep(self, step):
        if self.any:
            return True
        if step == STEP_NONE:
            return False
        if self.only is not None:
            return step in self.only
        return (self.lo is None or step >= self.lo) and (self.hi is None or step <= self.hi)


def _ranks_filter(ranks):
    if ranks is None:
        return None
    if isinstance(ranks, bool):
        raise TypeError("tftrace: ranks= takes an int or an iterable of ints")
    if isinstance(ranks, numbers.Integral):
        return {int(ranks)}
    return _ints(ranks, "ranks= takes an int or an iterable of ints")


def _ints(values, what):
    """The set of the ints in the iterable values; TypeError (what) for anything else."""
    bad = TypeError("tftrace: %s, not %r" % (what, values))
    if isinstance(values, (str, bytes)):
        raise bad
    try:
        out = set()
        for v in values:
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise bad
            out.add(int(v))
        return out
    except TypeError:
        raise bad from None


def _name_matcher(name):
    """name= filter: None, a glob (fnmatch, case-sensitive as fnmatch(3)) or a compiled regex (search)."""
    if name is None:
        return None
    if isinstance(name, re.Pattern):
        return lambda s: s is not None and name.search(s) is not None
    if isinstance(name, str):
        if not any(ch in name for ch in "*?["):
            return lambda s: s == name
        rx = re.compile(fnmatch.translate(name), re.DOTALL)
        return lambda s: s is not None and rx.match(s) is not None
    raise TypeError("tftrace: name= takes a glob string or a compiled regular expression, not %r" % (name,))


# ---- tables ------------------------------------------------------------------------

# column kinds: i = int64, u = uint64, f = float64, o = object (str/None/tuple),
# I / U = int64 / uint64 that may be missing (None)
_TENSOR_COLS = (("step", "I"), ("rank", "i"), ("seq", "I"), ("ts", "u"), ("id", "u"),
                ("name", "o"), ("op", "o"), ("scope", "o"), ("dtype", "o"), ("device", "o"),
                ("shape", "o"), ("mode", "o"), ("numel", "u"), ("nan", "U"), ("pinf", "U"),
                ("ninf", "U"), ("zero", "U"), ("over_fp16", "U"), ("over_bf16", "U"),
                ("under_fp16", "U"), ("fingerprint", "U"), ("min", "f"), ("max", "f"),
                ("mean", "f"), ("std", "f"), ("l1", "f"), ("l2", "f"), ("absmax", "f"))
_COLL_COLS = (("step", "I"), ("rank", "i"), ("seq", "I"), ("comm", "u"), ("coll_seq", "u"),
              ("type", "o"), ("name", "o"), ("dtype", "o"), ("count", "u"), ("redop", "o"),
              ("root", "i"), ("tag", "i"), ("rank_in_comm", "i"), ("nranks", "i"),
              ("t_enter", "u"), ("t_exit", "u"), ("phase", "o"), ("result", "U"))
_ALLOC_COLS = (("step", "I"), ("rank", "i"), ("ts", "u"), ("event", "o"), ("ptr", "u"),
               ("bytes", "u"), ("site", "o"), ("device", "o"))
_STEP_COLS = (("rank", "i"), ("step", "i"), ("t_begin", "U"), ("t_end", "U"), ("duration", "U"))
_CAPTURE_COLS = (("rank", "i"), ("step", "I"), ("seq", "I"), ("role", "o"), ("id", "u"),
                 ("name", "o"), ("op", "o"), ("dtype", "o"), ("shape", "o"), ("bytes", "u"),
                 ("present", "u"), ("parts", "u"), ("complete", "b"))

_pandas = None  # the module, False when it does not import


def _pd():
    global _pandas
    if _pandas is None:
        try:
            import pandas
            _pandas = pandas
        except Exception:  # not installed, or broken: the dict path
            _pandas = False
    return _pandas or None


def _objects(values):
    a = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        a[i] = v
    return a


def _column(values, kind, pd):
    if kind == "f":
        return np.array(values, dtype=np.float64)
    if kind == "i":
        return np.array(values, dtype=np.int64)
    if kind == "u":
        return np.array(values, dtype=np.uint64)
    if kind == "b":
        return np.array(values, dtype=bool)
    if kind in "IU":
        npt = np.int64 if kind == "I" else np.uint64
        n = len(values)
        missing = any(v is None for v in values)
        if pd is None:
            return _objects(values) if missing else np.array(values, dtype=npt)
        if missing:
            mask = np.fromiter((v is None for v in values), dtype=bool, count=n)
            vals = np.fromiter((0 if v is None else v for v in values), dtype=npt, count=n)
        else:
            mask, vals = np.zeros(n, dtype=bool), np.array(values, dtype=npt)
        return pd.arrays.IntegerArray(vals, mask)
    return _objects(values)


def _table(rows, spec):
    """Rows (tuples in spec order) -> DataFrame (pandas) or dict of numpy arrays."""
    pd = _pd()
    cols = list(zip(*rows)) if rows else [()] * len(spec)
    data = {name: _column(vals, kind, pd) for (name, kind), vals in zip(spec, cols)}
    if pd is None:
        return data
    return pd.DataFrame(data)


# ---- the trace ------------------------------------------------------------------------

def _check_regular(path):
    """Refuses a FIFO or device where a rank file is expected: the library opens with a blocking open()."""
    try:
        st = os.stat(path)
    except OSError:
        return  # the library says why
    if stat.S_ISDIR(st.st_mode):
        try:
            names = os.listdir(path)
        except OSError:
            return
        for n in names:
            if n.startswith("rank-") and n.endswith(".tft") and len(n) >= 9:
                full = os.path.join(path, n)
                try:
                    m = os.stat(full).st_mode
                except OSError:
                    continue
                if not stat.S_ISREG(m) and not stat.S_ISDIR(m):
                    raise TraceError("%s: not a regular file" % full, path=path)
    elif not stat.S_ISREG(st.st_mode):
        raise TraceError("%s: not a regular file (a rank file or a trace directory is expected)"
                         % path, path=path)


def open(path):  # noqa: A001 (the package's API: tftrace.open)
    """Opens the trace at ``path`` (a trace directory, or one rank-NNNNN.tft
    file) for reading and returns a Trace. Raises TraceError with the C
    library's message when it cannot be opened. Warns (RuntimeWarning) when
    the loaded libtftrace.so belongs to another tftrace release."""
    return Trace(path)


class Trace:
    """A trace opened for reading (``tftrace.open``). Rank files are opened
    one at a time while a method reads them and closed after, so memory and
    file descriptors do not grow with the number of ranks.

    Attributes: ``path`` (as given), ``ranks`` (rank ids, one per rank file,
    in file-name order), ``manifest`` (manifest.json as a dict, None for a
    single rank file or a trace without a readable one), ``problems`` (the
    reader's warnings and errors so far, as text).
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._t = None
        self._lock = threading.Lock()
        self._log = []
        self._warned = set()
        self.problems = []
        lib = _lib.lib()
        _check_layouts(lib)
        msg = _lib.check_version()
        if msg:
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
        self._l = lib
        self._names = _Names(lib)
        _check_regular(self.path)

        sink = self._log  # (not self: no reference cycle through the callback)

        def log(ctx, level, text):
            try:
                sink.append((level, text.decode("utf-8", "replace") if text else ""))
            except Exception:  # a callback must not raise into C
                pass

        self._logfn = _LOGFN(log)  # kept alive as long as the trace (the library keeps the pointer)
        self._opts = _ReaderOpts(c.sizeof(_ReaderOpts), self._logfn, None, None)
        t = _errno_fn(lib, "tft_trace_open_lazy", c.c_void_p, [c.c_char_p, c.c_void_p])(
            os.fsencode(self.path), c.byref(self._opts))
        if not t:
            err = c.get_errno()
            msgs = [m for lvl, m in self._log if lvl <= _LOG_WARN and m]
            del self._log[:]
            text = "; ".join(msgs) if msgs else "%s: cannot open the trace: %s" % (
                self.path, os.strerror(err) if err else "unknown error")
            raise TraceError(text, path=self.path, errno=err or None)
        self._t = t
        n = lib.tft_trace_nranks(t)
        self.ranks = [lib.tft_trace_rank_id(t, i) for i in range(n)]
        self._files = [(lib.tft_trace_file_name(t, i) or b"").decode("utf-8", "replace")
                       for i in range(n)]
        self.manifest = self._read_manifest()
        self._flush_log()

    # -- housekeeping --

    def _read_manifest(self):
        p = os.path.join(self.path, "manifest.json")
        if not os.path.isdir(self.path) or not os.path.isfile(p):
            return None
        try:
            with builtins.open(p, "rb") as f:
                text = f.read(_MANIFEST_MAX_BYTES + 1)
            if len(text) > _MANIFEST_MAX_BYTES:
                raise ValueError("larger than %d bytes" % _MANIFEST_MAX_BYTES)
            m = json.loads(text.decode("utf-8"))
            if not isinstance(m, dict):
                raise ValueError("not a JSON object")
            return m
        except (OSError, ValueError) as e:  # the C library warned too (through the log)
            self._log.append((_LOG_WARN, "%s: %s; manifest left out" % (p, e)))
            return None

    def _flush_log(self):
        """Moves the reader's messages (ERROR, WARN) to problems, warning once per text."""
        log = self._log[:]
        del self._log[:]
        for level, text in log:
            if level > _LOG_WARN or not text or text in self._warned:
                continue
            self._warned.add(text)
            self.problems.append(text)
            warnings.warn(TraceWarning(text), stacklevel=3)

    def close(self):
        """Frees the trace (idempotent). Methods called afterwards raise TraceError."""
        with self._lock:
            if self._t:
                self._l.tft_trace_close(self._t)
                self._t = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<tftrace.Trace %r ranks=%r%s>" % (self.path, getattr(self, "ranks", None),
                                                 "" if self._t else " closed")

    # -- reading --

    def _handle(self):
        if not self._t:
            raise TraceError("%s: the trace is closed" % self.path, path=self.path)
        return self._t

    def _each_rank(self, ranks):
        """(index, rank id) of the rank files ranks= selects, in file order."""
        self._handle()
        want = _ranks_filter(ranks)
        return [(i, rank) for i, rank in enumerate(self.ranks) if want is None or rank in want]

    @contextlib.contextmanager
    def _opened(self, i, steps):
        """Opens rank file i for the with block: (reader, strings), the reader
        positioned before steps' lower bound; released after, whatever happens."""
        t = self._handle()
        lib = self._l
        r = _errno_fn(lib, "tft_trace_reader", c.c_void_p, [c.c_void_p, c.c_int])(t, i)
        if not r:
            err = c.get_errno()
            msgs = [m for lvl, m in self._log if lvl <= _LOG_WARN and m]
            del self._log[:]  # said by the exception, not warned about too
            raise TraceError("; ".join(msgs) or "%s: cannot open: %s" % (
                self._files[i], os.strerror(err) if err else "unknown error"), path=self.path,
                errno=err or None)
        try:
            if steps is not None and steps.lo is not None:
                lib.tft_reader_seek_step(r, steps.lo)
            yield r, _Strings(lib, r)
        finally:
            lib.tft_trace_release(t, i)
            self._flush_log()

    def _walk(self, i, r, kinds, steps):
        """Yields (kind, header, address) of the records of reader r whose
        kind is in ``kinds`` (a set) and whose step passes ``steps``. Stops
        early after a SYNC watermark past the last step asked for."""
        nxt = self._l.tft_reader_next
        ptr = c.c_void_p()
        ref = c.byref(ptr)
        hdr = _Rec.from_address
        hi = None if steps is None or steps.any else steps.hi
        keep = None if steps is None or steps.any else steps.keep
        while True:
            e = nxt(r, ref)
            if e <= 0:
                if e < 0:
                    self._flush_log()
                    raise TraceError("%s: read error: %s" % (self._files[i], os.strerror(-e)),
                                     path=self.path, errno=-e)
                return
            addr = ptr.value
            h = hdr(addr)
            kind = h.kind
            if kind == REC_SYNC and hi is not None and h.step > hi:
                return  # no later record of this file has a step <= hi
            if kind not in kinds:
                continue
            if keep is not None and not keep(h.step):
                continue
            yield kind, h, addr

    def summary(self):
        """What ``tfdump --json TRACE`` prints, as a dict (ranks, steps,
        records by kind, bytes, integrity, exits, manifest, per-file details;
        the keys are tfdump's). Raises TraceError with tfdump's message when
        it fails, ToolNotFoundError when tfdump cannot be found."""
        self._handle()
        return _tool_json("tfdump", ["--json", "--", self.path], self.path, (0,))

    # -- tables --

    def tensors(self, steps=None, ranks=None, name=None):
        """TENSOR records as a table (DataFrame, or dict of numpy arrays).

        steps: int, (a, b) inclusive, range or iterable; ranks: int or
        iterable of rank ids; name: glob (fnmatch) or compiled regex
        (re.search) on the tensor name. Columns: step, rank, seq, ts, id,
        name, op, scope, dtype, device, shape, mode, numel, nan, pinf, ninf,
        zero, over_fp16, over_bf16, under_fp16, fingerprint, min, max, mean,
        std, l1, l2, absmax (docs/PYTHON.md says which mode makes which valid).
        """
        sel = _Steps(steps)
        match = _name_matcher(name)
        rows = []
        names = self._names
        with self._lock:
            for i, rank in ([] if sel.empty else self._each_rank(ranks)):
                with self._opened(i, sel) as (r, strings):
                    ops = {}
                    pending = []  # rows whose OP record had not been seen yet
                    matched = {}
                    for kind, h, addr in self._walk(i, r, _OP_TENSOR, sel):
                        if kind == REC_OP:
                            o = _RecOp.from_address(addr)
                            ops[h.seq] = (strings(o.name), strings(o.scope))
                            continue
                        tr = _RecTensor.from_address(addr)
                        nid = tr.name
                        if match is not None:
                            ok = matched.get(nid)
                            if ok is None:
                                ok = matched[nid] = match(strings(nid))
                            if not ok:
                                continue
                        op = ops.get(h.seq)
                        if op is None and h.seq != SEQ_NONE:
                            pending.append(len(rows))
                        rows.append(_tensor_row(names, h, tr, rank, strings(nid), op))
                    for k in pending:
                        row = rows[k]
                        op = ops.get(row[2])
                        if op is not None:
                            rows[k] = row[:6] + op + row[8:]
        return _table(rows, _TENSOR_COLS)

    def collectives(self, steps=None, ranks=None):
        """COLLECTIVE records (collectives and point-to-point calls, entered
        and finished) as a table. Columns: step, rank, seq, comm, coll_seq,
        type, name, dtype, count, redop, root, tag, rank_in_comm, nranks,
        t_enter, t_exit, phase, result."""
        sel = _Steps(steps)
        rows = []
        with self._lock:
            for i, rank in ([] if sel.empty else self._each_rank(ranks)):
                with self._opened(i, sel) as (r, strings):
                    for kind, h, addr in self._walk(i, r, _COLLECTIVE, sel):
                        rows.append(_coll_row(self._names, h, _RecCollective.from_address(addr),
                                              rank, strings))
        return _table(rows, _COLL_COLS)

    def allocations(self, steps=None, ranks=None):
        """ALLOC and FREE records as a table. Columns: step, rank, ts, event
        ("alloc"/"free"), ptr, bytes (0 for a free of unknown size), site
        (None for frees), device."""
        sel = _Steps(steps)
        rows = []
        with self._lock:
            for i, rank in ([] if sel.empty else self._each_rank(ranks)):
                with self._opened(i, sel) as (r, strings):
                    for kind, h, addr in self._walk(i, r, _ALLOC_FREE, sel):
                        rows.append(_alloc_row(h, addr, rank, strings))
        return _table(rows, _ALLOC_COLS)

    def steps(self, ranks=None):
        """STEP records folded into one row per (rank, step). Columns: rank,
        step, t_begin (ts of its first BEGIN), t_end (ts of its last END),
        duration (t_end - t_begin); None where a record is missing."""
        rows = []
        with self._lock:
            for i, rank in self._each_rank(ranks):
                with self._opened(i, None) as (r, strings):
                    seen = {}
                    for kind, h, addr in self._walk(i, r, _STEP, None):
                        end = _RecStep.from_address(addr).phase == 1
                        row = seen.get(h.step)
                        if row is None:
                            row = seen[h.step] = [None, None]
                            rows.append((rank, h.step, row))
                        if end:
                            row[1] = h.ts
                        elif row[0] is None:
                            row[0] = h.ts
        out = [(rank, step, b, e, e - b if b is not None and e is not None and e >= b else None)
               for rank, step, (b, e) in rows]
        return _table(out, _STEP_COLS)

    def events(self, kinds=None, steps=None, ranks=None):
        """Generator of one dict per record (STRING records aside), rank file
        by rank file in file order. kinds: None (all) or names ("tensor",
        "op", "collective", ...). Every dict has rank, step, seq (None when
        the record has none), kind, ts, name; tensor, collective, alloc and
        free dicts have the columns of the tables, the other kinds the keys
        docs/PYTHON.md lists. Reads through its own handle on the trace, so
        it may be interleaved with other calls."""
        if kinds is None:
            want = _ALL_KINDS
        else:
            if isinstance(kinds, str):
                kinds = [kinds]
            want = set()
            for k in kinds:
                if k not in _KIND_BY_NAME:
                    raise ValueError("tftrace: unknown record kind %r (one of %s)"
                                     % (k, ", ".join(sorted(_KIND_BY_NAME))))
                want.add(_KIND_BY_NAME[k])
        sel = _Steps(steps)
        selected = self._each_rank(ranks)
        if sel.empty:
            return
        scan = want if want is _ALL_KINDS else frozenset(want | {REC_OP})
        other = Trace(self.path)
        other._warned, other.problems = self._warned, self.problems  # one record of problems
        try:
            for i, rank in selected:
                with other._opened(i, sel) as (r, strings):
                    ops = {}
                    for kind, h, addr in other._walk(i, r, scan, sel):
                        if kind == REC_OP:
                            o = _RecOp.from_address(addr)
                            ops[h.seq] = (strings(o.name), strings(o.scope))
                            if REC_OP not in want:
                                continue
                        yield _event(self._names, h, addr, rank, strings, ops)
        finally:
            other.close()

    # -- captured tensors --

    def captures(self, ranks=None):
        """The captured tensors (tftrace --capture) as a table, in the order
        ``tfdump --captures --json`` lists them. Columns: rank, step, seq,
        role, id, name, op, dtype, shape, bytes, present, parts, complete."""
        with self._lock:
            caps, _ = self._scan_captures(ranks, None, None)
        return _table([cp.row() for cp in caps], _CAPTURE_COLS)

    def captured(self, name, step=None, rank=None, role="output", bf16="float32", fp8="float32"):
        """The whole captured tensor ``name`` as a numpy array of its exact
        shape and dtype (tft dtype -> numpy: f32 float32, f64 float64, f16
        float16, i32 int32, i64 int64, u8 uint8, i8 int8, i16 int16, u16
        uint16, u32 uint32, u64 uint64, bool bool_; bf16: float32 values,
        converted exactly, or with bf16="raw" its bits as uint16; f8e4m3
        and f8e5m2: float32 values, converted exactly, or with fp8="raw"
        the bytes as uint8).

        name: the tensor name, or an int tensor id. step / rank narrow the
        search; role: "output" (the value its op produced), "input" (its
        memory when a consuming op began), "prior" (an in-place output's
        value before its op), or None for the first output or input, as
        ``tfdump --tensor NAME`` picks. The first matching capture in rank
        file order is returned. Raises KeyError naming what the trace holds
        when nothing matches, TraceError when the match is incomplete (parts
        dropped or lost to damage) or inconsistent."""
        if role is not None and role not in _ROLE_NAMES:
            raise ValueError("tftrace: role= is 'output', 'input', 'prior' or None, not %r" % (role,))
        if bf16 not in ("float32", "raw"):
            raise ValueError("tftrace: bf16= is 'float32' or 'raw', not %r" % (bf16,))
        if fp8 not in ("float32", "raw"):
            raise ValueError("tftrace: fp8= is 'float32' or 'raw', not %r" % (fp8,))
        if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Integral)):
            raise TypeError("tftrace: step= is an int or None")
        by_id = isinstance(name, numbers.Integral) and not isinstance(name, bool)
        if not by_id and not isinstance(name, str):
            raise TypeError("tftrace: name is a tensor name (str) or a tensor id (int)")

        def want(cp):
            if (cp.id != name) if by_id else (cp.name != name):
                return False
            if role is None:
                if cp.role == 2:
                    return False
            elif cp.role >= 3 or _ROLE_NAMES[cp.role] != role:
                return False
            return step is None or cp.step == step

        with self._lock:
            caps, hit = self._scan_captures(rank, step, want)
            if hit is None and (rank is not None or step is not None):
                caps, _ = self._scan_captures(None, None, None)  # to say what the trace holds
        if hit is None:
            what = "%r%s%s%s" % (name, "" if role is None else " (%s)" % role,
                                 "" if step is None else " at step %d" % step,
                                 "" if rank is None else " on rank %s" % (rank,))
            if not caps:
                raise KeyError("%s: no captured tensor %s: the trace has no captures (record with "
                               "tftrace --capture SPEC)" % (self.path, what))
            listed = sorted({"%s@%s (%s)" % (cp.name, "-" if cp.step is None else cp.step,
                                             _ROLE_NAMES[cp.role] if cp.role < 3 else "?")
                             for cp in caps})
            more = ""
            if len(listed) > _LIST_IN_ERROR:
                more = ", ... (%d more; Trace.captures() lists them all)" % (len(listed) - _LIST_IN_ERROR)
            raise KeyError("%s: no captured tensor %s; captured: %s%s"
                           % (self.path, what, ", ".join(listed[:_LIST_IN_ERROR]), more))
        return hit.array(self, bf16 == "raw", fp8 == "raw")

    def _scan_captures(self, ranks, step, want):
        """Reads CAPTURE records; returns (the captures seen, the first one
        ``want`` accepts, with its bytes, or None). With want, stops as soon
        as that capture is complete or has a gap."""
        sel = _Steps(step) if step is not None else None
        caps, hit = [], None
        for i, rank in self._each_rank(ranks):
            with self._opened(i, sel) as (r, strings):
                ops = {}
                cur = {}  # (seq, tensor id, role) -> the capture its parts continue
                for kind, h, addr in self._walk(i, r, _OP_CAPTURE, sel):
                    if kind == REC_OP:
                        ops[h.seq] = _RecOp.from_address(addr).name
                        continue
                    p = _RecCapture.from_address(addr)
                    key = (h.seq, p.tensor, p.role)
                    cp = cur.get(key)
                    if cp is None or (cp.next == cp.bytes and p.offset == 0 and cp.bytes):
                        # a new capture (or the same key again after a complete one)
                        cp = cur[key] = _Capture(self._l, rank, h, p, strings, ops.get(h.seq))
                        caps.append(cp)
                        if hit is None and want is not None and want(cp):
                            hit = cp
                            cp.data = bytearray()
                    cp.add(h, p, addr)
                    if hit is not None and (hit.gap or not hit.consistent or hit.next == hit.bytes):
                        return caps, hit
        return caps, hit


_OP_TENSOR = frozenset((REC_OP, REC_TENSOR))
_COLLECTIVE = frozenset((REC_COLLECTIVE,))
_ALLOC_FREE = frozenset((REC_ALLOC, REC_FREE))
_STEP = frozenset((REC_STEP,))
_OP_CAPTURE = frozenset((REC_OP, REC_CAPTURE))


class _AllKinds:
    """Every record kind (the reader never hands out STRING records)."""

    def __contains__(self, kind):
        return True


_ALL_KINDS = _AllKinds()


class _Strings:
    """String ids -> text for one open reader: None for id 0, "#<16 hex>" for
    an id the file does not define (as tfdump shows it)."""

    __slots__ = ("_fn", "_r", "_cache")

    def __init__(self, lib, r):
        self._fn = lib.tft_reader_string
        self._r = r
        self._cache = {}

    def __call__(self, sid):
        if not sid:
            return None
        s = self._cache.get(sid)
        if s is None:
            b = self._fn(self._r, sid)
            if b is None:
                return "#%016x" % sid
            s = self._cache[sid] = b.decode("utf-8", "replace")
        return s

    def defined(self, sid):
        """The text of sid, None for 0 or an id the file does not define."""
        return self(sid) if sid and (sid in self._cache or self._fn(self._r, sid) is not None) else None


_NAN = float("nan")


def _tensor_row(names, h, tr, rank, name, op):
    s = tr.stats
    mode = tr.mode
    step, seq = h.step, h.seq
    row = (None if step == STEP_NONE else step, rank, None if seq == SEQ_NONE else seq, h.ts, tr.id,
           name) + (op if op is not None else (None, None)) + (
        names.dtype_name(tr.dtype), _device(tr.device_kind, tr.device), tuple(tr.shape[:tr.ndim]),
        _mode_name(mode), s.numel)
    if mode >= 2:
        return row + (s.nan, s.pinf, s.ninf, s.zero, s.over_fp16, s.over_bf16, s.under_fp16,
                      s.fingerprint, s.min, s.max, s.mean, s.std, s.l1, s.l2, s.absmax)
    if mode == 1:
        return row + (s.nan, s.pinf, s.ninf, s.zero, None, None, None, s.fingerprint, s.min, s.max,
                      _NAN, _NAN, _NAN, _NAN, _NAN)
    return row + (None, None, None, None, None, None, None, None, _NAN, _NAN, _NAN, _NAN, _NAN,
                  _NAN, _NAN)


def _coll_row(names, h, cr, rank, strings):
    step, seq = h.step, h.seq
    typ = cr.type
    tag = _TAG_NONE
    if typ in (_COLL_SEND, _COLL_RECV) and h.len >= c.sizeof(_RecCollective):
        tag = cr.tag
    phase = "enter" if (h.flags & (_COLL_FLAG_ENTER | _COLL_FLAG_EXIT)) == _COLL_FLAG_ENTER else "exit"
    return (None if step == STEP_NONE else step, rank, None if seq == SEQ_NONE else seq, cr.comm,
            cr.coll_seq, names.coll_name(typ), strings(cr.name), names.dtype_name(cr.dtype),
            cr.count, names.redop_name(cr.redop), cr.root, tag, cr.rank, cr.nranks, cr.t_enter,
            cr.t_exit, phase, cr.result or None)


def _alloc_row(h, addr, rank, strings):
    step = None if h.step == STEP_NONE else h.step
    if h.kind == REC_ALLOC:
        a = _RecAlloc.from_address(addr)
        return (step, rank, h.ts, "alloc", a.ptr, a.bytes, strings(a.site), _device(a.device_kind, a.device))
    f = _RecFree.from_address(addr)
    return (step, rank, h.ts, "free", f.ptr, f.bytes, None, _device(f.device_kind, f.device))


def _row_dict(spec, row):
    return {k: v for (k, _), v in zip(spec, row)}


def _event(names, h, addr, rank, strings, ops):
    """One record as a dict (Trace.events)."""
    kind = h.kind
    if kind == REC_TENSOR:
        tr = _RecTensor.from_address(addr)
        d = _row_dict(_TENSOR_COLS, _tensor_row(names, h, tr, rank, strings(tr.name), ops.get(h.seq)))
        d["kind"] = "tensor"
        d["has_data"] = bool(h.flags & _TENSOR_HAS_DATA)
        return d
    if kind == REC_COLLECTIVE:
        cr = _RecCollective.from_address(addr)
        d = _row_dict(_COLL_COLS, _coll_row(names, h, cr, rank, strings))
        d["kind"], d["ts"] = "collective", h.ts
        return d
    if kind in (REC_ALLOC, REC_FREE):
        d = _row_dict(_ALLOC_COLS, _alloc_row(h, addr, rank, strings))
        d["kind"], d["seq"] = _KIND_NAMES[kind], None if h.seq == SEQ_NONE else h.seq
        d["name"] = d["site"]
        if kind == REC_ALLOC:
            d["stream"] = _RecAlloc.from_address(addr).stream
        return d
    d = {"rank": rank, "step": None if h.step == STEP_NONE else h.step,
         "seq": None if h.seq == SEQ_NONE else h.seq,
         "kind": _KIND_NAMES.get(kind, "unknown(%d)" % kind), "ts": h.ts, "name": None}
    if kind == REC_STEP:
        d["phase"] = "end" if _RecStep.from_address(addr).phase == 1 else "begin"
    elif kind == REC_OP:
        o = _RecOp.from_address(addr)
        n_in, n_out, n_attr = o.n_in, o.n_out, o.n_attr
        ids = (_u64 * (n_in + n_out + n_attr)).from_address(addr + c.sizeof(_RecOp))
        attrs = (_i64 * n_attr).from_address(addr + c.sizeof(_RecOp) + 8 * (n_in + n_out))
        d.update(name=strings(o.name), op_kind=names.op_kind_name(o.op_kind), scope=strings(o.scope),
                 inputs=list(ids[:n_in]), outputs=list(ids[n_in:n_in + n_out]), attrs=list(attrs))
    elif kind == REC_KERNEL:
        k = _RecKernel.from_address(addr)
        d.update(name=strings(k.name), op_kind=names.op_kind_name(k.kind), start=k.start, end=k.end,
                 stream=k.stream, corr=k.corr, grid=tuple(k.grid), block=tuple(k.block),
                 device="cuda:%d" % k.device)
    elif kind == REC_CHECKPOINT:
        k = _RecCheckpoint.from_address(addr)
        d.update(name=strings(k.path), action="resume" if k.action == 1 else "save",
                 path=strings(k.path), recipe=strings(k.recipe))
    elif kind == REC_PROCESS:
        p = _RecProcess.from_address(addr)
        is_exit = p.event == 1
        d.update(event=_PROC_EVENTS[p.event] if p.event < 3 else "?", pid=p.pid,
                 code=p.exit_code if is_exit and not p.signal else None,
                 signal=p.signal if is_exit and p.signal else None, rss=p.rss)
    elif kind == REC_DROPPED:
        p = _RecDropped.from_address(addr)
        d.update(count=p.count, reason=_DROP_REASONS[p.reason] if p.reason < 3 else "?")
    elif kind == REC_CAPTURE:
        p = _RecCapture.from_address(addr)
        d.update(name=strings(p.name), id=p.tensor,
                 role=_ROLE_NAMES[p.role] if p.role < 3 else "?", dtype=names.dtype_name(p.dtype),
                 shape=tuple(p.shape[:p.ndim]), total=p.total, offset=p.offset, n=p.n,
                 shuffled=bool(h.flags & _CAPTURE_SHUFFLED))
    elif kind == REC_THREAD:
        p = _RecThread.from_address(addr)
        d.update(name=strings(p.name), event="end" if p.event == 1 else "switch", index=p.index,
                 tid=p.tid)
    elif kind == REC_COMM:
        p = _RecComm.from_address(addr)
        members = None
        if p.n_members:
            members = list((_i32 * p.n_members).from_address(addr + c.sizeof(_RecComm)))
        d.update(name=strings(p.name), comm=p.comm, parent=p.parent or None, comm_rank=p.rank,
                 size=p.size, order=p.order, inter=bool(h.flags & _COMM_FLAG_INTER), members=members)
    elif kind == REC_STACK:
        d.update(_stack_fields(h, _RecStack.from_address(addr), strings))
    elif kind == REC_CLOCK and h.len >= c.sizeof(_RecClock):
        p = _RecClock.from_address(addr)
        d.update(realtime_ns=p.realtime_ns, ntp=_NTP_STATES[p.ntp] if p.ntp < 3 else "unknown",
                 maxerror_ns=p.maxerror_ns, esterror_ns=p.esterror_ns)
    elif kind not in _KIND_NAMES:
        d["len"] = h.len
    return d


def _stack_fields(h, p, strings):
    """A STACK record's keys as tfdump --events --json gives them: the
    frames as a list of their lines (each cut at 511 bytes), [] when the
    file does not define the string."""
    frames = strings.defined(p.frames)
    lines = []
    if frames is not None:
        for line in frames.split("\n"):
            b = line.encode("utf-8")
            lines.append(b[:511].decode("utf-8", "replace") if len(b) > 511 else line)
        if lines and lines[-1] == "":
            lines.pop()
    return {"name": strings(p.summary), "pid": p.pid, "tid": p.tid, "main": bool(h.flags & _STACK_FLAG_MAIN),
            "snapshot": _STACK_SOURCES.get(p.source, "running"), "comm": strings(p.comm),
            "summary": strings(p.summary), "frames": lines, "note": strings(p.note)}


class _Capture:
    """One captured tensor being assembled from its CAPTURE parts, which
    arrive in offset order; a missing or repeated part leaves a gap (the
    capture is then incomplete). Only the capture asked for keeps bytes
    (data is a bytearray), which grow with the parts that arrived, never
    to a size a header claims."""

    def __init__(self, lib, rank, h, p, strings, op_name_id):
        self.lib = lib
        self.rank = rank
        self.step = None if h.step == STEP_NONE else h.step
        self.seq = None if h.seq == SEQ_NONE else h.seq
        self.role = p.role
        self.id = p.tensor
        self.name = strings(p.name)
        self.op = strings(op_name_id) if op_name_id else None
        self.dtype = p.dtype
        self.dtype_name = lib.tft_dtype_name(p.dtype).decode()
        self.shape = tuple(p.shape[:p.ndim])
        self._shape_raw = tuple(p.shape)
        self.ndim = p.ndim
        self.bytes = p.total
        self.esz = lib.tft_dtype_size(p.dtype)
        numel = 1
        ok = True
        for d in self.shape:
            if d < 0:
                ok = False
            numel *= max(d, 0)
        self.consistent = ok and self.esz > 0 and numel * self.esz == self.bytes
        self.next = 0
        self.present = 0
        self.parts = 0
        self.gap = False
        self.data = None

    def add(self, h, p, addr):
        self.parts += 1
        if (p.total != self.bytes or p.dtype != self.dtype or p.ndim != self.ndim
                or tuple(p.shape) != self._shape_raw):
            self.consistent = False
        if not self.consistent:
            return
        if p.offset != self.next:  # lost (dropped) or repeated parts
            self.gap = True
            return
        n = p.n
        self.next += n
        self.present += n
        if self.data is None or self.gap or not n:
            return
        src = addr + c.sizeof(_RecCapture)
        if h.flags & _CAPTURE_SHUFFLED:
            buf = (c.c_char * n)()
            self.lib.tft_capture_shuffle(buf, src, n, self.esz, 1)
            self.data += buf.raw
        else:
            self.data += c.string_at(src, n)

    @property
    def complete(self):
        return self.consistent and not self.gap and self.present == self.bytes

    def row(self):
        return (self.rank, self.step, self.seq, _ROLE_NAMES[self.role] if self.role < 3 else "?",
                self.id, self.name, self.op, self.dtype_name, self.shape, self.bytes, self.present,
                self.parts, self.complete)

    def array(self, trace, raw_bf16, raw_fp8):
        where = "%s: captured tensor %s (%s of op %s, rank %d)" % (
            trace.path, self.name, _ROLE_NAMES[self.role], self.seq, self.rank)
        if not self.consistent:
            raise TraceError("%s: its parts disagree on dtype, shape or size, or dtype %s has no "
                             "numpy equivalent" % (where, self.dtype_name), path=trace.path)
        if not self.complete:
            raise TraceError("%s is incomplete: %d of %d bytes captured (parts were dropped or lost "
                             "to damage; record with --no-drop or a larger --ring-kb)"
                             % (where, self.present, self.bytes), path=trace.path)
        npd = np.dtype(_NP_DTYPES[self.dtype])
        if self.bytes == 0:
            a = np.zeros(self.shape, dtype=npd)
        else:
            a = np.frombuffer(self.data, dtype=npd).reshape(self.shape)
        if self.dtype == _BF16 and not raw_bf16:
            a = (a.astype(np.uint32) << 16).view(np.float32)
        elif self.dtype in (_F8E4M3, _F8E5M2) and not raw_fp8:
            a = _fp8_decode(self.dtype, a)
        return a


# ---- the C tools ------------------------------------------------------------------------

def _tool_json(tool, args, path, ok_status):
    """Runs tool, parses its stdout as one JSON value; raises TraceError on an
    exit status not in ok_status (with the tool's stderr) or unparsable output."""
    p = _tools.run(tool, args)
    result = None
    try:
        result = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        result = None
    if p.returncode not in ok_status:
        err = p.stderr.strip()
        raise TraceError(err or "%s exited with status %d" % (tool, p.returncode), path=path,
                         stderr=p.stderr, status=p.returncode, result=result)
    if result is None:
        raise TraceError("%s printed no JSON (status %d): %s" % (tool, p.returncode, p.stderr.strip()),
                         path=path, stderr=p.stderr, status=p.returncode)
    return result




def _trace_path(x):
    return x.path if isinstance(x, Trace) else os.fspath(x)


def diff(golden, bad, **options):
    """What ``tfdiff --json GOLDEN BAD`` prints, as a dict (schema:
    docs/TFDIFF.md). golden, bad: trace paths or Trace objects.

    Keyword options become tfdiff flags: ``rtol=1e-3`` -> ``--rtol 1e-3``,
    ``foo_bar=v`` -> ``--foo-bar v``, True -> the flag alone, False/None ->
    left out; a list/tuple/set/range value is joined with commas
    (``ranks=[0, 2]`` -> ``--ranks 0,2``), except ``steps=(a, b)`` ->
    ``--steps a:b`` (None = open end). Exit statuses 0 (match) and 1
    (diverged) return the dict; any other raises TraceError with tfdiff's
    stderr (for 3, "incomplete", its dict is the exception's ``result``).
    """
    args = ["--json", "-q"]
    for key, val in options.items():
        flag = "--" + key.replace("_", "-")
        if val is None or val is False:
            continue
        if val is True:
            args.append(flag)
            continue
        if key == "steps" and isinstance(val, tuple) and len(val) == 2:
            val = "%s:%s" % ("" if val[0] is None else val[0], "" if val[1] is None else val[1])
        elif isinstance(val, (list, tuple, set, frozenset, range)):
            val = ",".join(str(v) for v in (sorted(val) if isinstance(val, (set, frozenset)) else val))
        args += [flag, str(val)]
    g, b = _trace_path(golden), _trace_path(bad)
    args += ["--", g, b]
    return _tool_json("tfdiff", args, b, (0, 1))

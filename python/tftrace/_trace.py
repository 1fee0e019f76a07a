"""``tftrace.open`` and ``Trace``: a trace opened through libtftrace.so's
reader (``tft_trace_open_lazy``), its rank files opened one at a time
(``tft_trace_reader`` / ``tft_trace_release``) and walked record by record
(``tft_reader_next``); the methods turn the records of the kinds they read
into rows (``_layouts.py``) and tables (``_tables.py``). The reader's log
(damaged chunks, torn tails) becomes ``TraceWarning``s and
``Trace.problems``. The contracts are in ``_reader.py``'s docstring."""

from __future__ import annotations

import builtins
import contextlib
import ctypes as c
import json
import os
import stat
import sys
import threading
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Literal, Optional, Set, Tuple, Union

import numpy as np

from . import _lib
from . import _captures
from ._layouts import (SEQ_NONE, REC_OP, REC_SYNC, KIND_BY_NAME, Rec, RecOp, RecTensor, RecCollective,
                       RecStep, check_layouts, Names, tensor_row, coll_row, alloc_row, event_dict,
                       TENSOR_COLS, COLL_COLS, ALLOC_COLS, STEP_COLS, CAPTURE_COLS, OP_TENSOR_KINDS,
                       COLLECTIVE_KINDS, ALLOC_FREE_KINDS, STEP_KINDS, ALL_KINDS)
from ._reader import TraceError, TraceWarning, tool_json
from ._tables import NameArg, RanksArg, StepsArg, Steps, Table, name_matcher, ranks_filter, table

StrPath = Union[str, "os.PathLike[str]"]

_LOG_WARN = 1
_MANIFEST_MAX_BYTES = 64 << 20  # the C library's limit (formats/src/manifest.c)

_LOGFN = c.CFUNCTYPE(None, c.c_void_p, c.c_int, c.c_char_p)



_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_OURS = (_PACKAGE_DIR, contextlib.__file__)  # our with-blocks run through contextlib


def _warn(message: Any, category: Optional[type] = None) -> None:
    """warnings.warn, said at the caller's line: the first frame outside
    this package and the contextlib frames of its with-blocks (a warning's
    file:line inside tftrace helps no one)."""
    level, f = 2, sys._getframe(1)  # stacklevel 2: _warn's caller
    while f is not None and f.f_code.co_filename.startswith(_OURS):
        level, f = level + 1, f.f_back
    warnings.warn(message, category, stacklevel=level)

class _ReaderOpts(c.Structure):
    _fields_ = [("sz", c.c_size_t), ("log", _LOGFN), ("log_ctx", c.c_void_p),
                ("display_name", c.c_char_p)]


_errno_fns: Dict[str, Any] = {}


def _errno_fn(lib, name, restype, argtypes):
    """The library's function ``name`` with ctypes keeping its errno
    (c.get_errno() after the call), which _lib's prototypes do not."""
    f = _errno_fns.get(name)
    if f is None:
        f = _errno_fns[name] = c.CFUNCTYPE(restype, *argtypes, use_errno=True)((name, lib))
    return f


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


def open(path: StrPath) -> Trace:  # noqa: A001 (the package's API: tftrace.open)
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

    path: str
    ranks: List[int]
    manifest: Optional[Dict[str, Any]]
    problems: List[str]

    def __init__(self, path: StrPath) -> None:
        self.path = os.fspath(path)
        self._t: Optional[int] = None
        self._lock = threading.Lock()
        self._log: List[Tuple[int, str]] = []
        self._warned: Set[str] = set()
        self.problems = []
        lib = _lib.lib()
        check_layouts(lib)
        msg = _lib.check_version()
        if msg:
            _warn(msg, RuntimeWarning)
        self._l = lib
        self._names = Names(lib)
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
            raise self._open_error("%s: cannot open the trace" % self.path)
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
            _warn(TraceWarning(text))

    def _open_error(self, what):
        """The TraceError for an open that just failed (the library's errno
        set): the reader's messages since (ERROR, WARN), said by the
        exception and not warned about too, else what and the errno."""
        err = c.get_errno()
        msgs = [m for lvl, m in self._log if lvl <= _LOG_WARN and m]
        del self._log[:]
        return TraceError("; ".join(msgs) or "%s: %s" % (what, os.strerror(err) if err else "unknown error"),
                          path=self.path, errno=err or None)

    def close(self) -> None:
        """Frees the trace (idempotent). Methods called afterwards raise TraceError."""
        with self._lock:
            if self._t:
                self._l.tft_trace_close(self._t)
                self._t = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
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
        want = ranks_filter(ranks)
        return [(i, rank) for i, rank in enumerate(self.ranks) if want is None or rank in want]

    @contextlib.contextmanager
    def _opened(self, i, steps):
        """Opens rank file i for the with block: (reader, strings), the reader
        positioned before steps' lower bound; released after, whatever happens."""
        t = self._handle()
        lib = self._l
        r = _errno_fn(lib, "tft_trace_reader", c.c_void_p, [c.c_void_p, c.c_int])(t, i)
        if not r:
            raise self._open_error("%s: cannot open" % self._files[i])
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
        hdr = Rec.from_address
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

    def summary(self) -> Dict[str, Any]:
        """What ``tfdump --json TRACE`` prints, as a dict (ranks, steps,
        records by kind, bytes, integrity, exits, manifest, per-file details;
        the keys are tfdump's). Raises TraceError with tfdump's message when
        it fails, ToolNotFoundError when tfdump cannot be found."""
        self._handle()
        return tool_json("tfdump", ["--json", "--", self.path], self.path, (0,))

    # -- tables --

    def tensors(self, steps: StepsArg = None, ranks: RanksArg = None, name: NameArg = None) -> Table:
        """TENSOR records as a table (DataFrame, or dict of numpy arrays).

        steps: int, (a, b) inclusive, range or iterable; ranks: int or
        iterable of rank ids; name: glob (fnmatch) or compiled regex
        (re.search) on the tensor name. Columns: step, rank, seq, ts, id,
        name, op, scope, dtype, device, shape, mode, numel, nan, pinf, ninf,
        zero, over_fp16, over_bf16, under_fp16, fingerprint, min, max, mean,
        std, l1, l2, absmax (docs/PYTHON.md says which mode makes which valid).
        """
        sel = Steps(steps)
        match = name_matcher(name)
        rows: List[Tuple[Any, ...]] = []
        names = self._names
        with self._lock:
            for i, rank in ([] if sel.empty else self._each_rank(ranks)):
                with self._opened(i, sel) as (r, strings):
                    ops = {}
                    pending = []  # rows whose OP record had not been seen yet
                    matched: Dict[int, bool] = {}
                    for kind, h, addr in self._walk(i, r, OP_TENSOR_KINDS, sel):
                        if kind == REC_OP:
                            o = RecOp.from_address(addr)
                            ops[h.seq] = (strings(o.name), strings(o.scope))
                            continue
                        tr = RecTensor.from_address(addr)
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
                        rows.append(tensor_row(names, h, tr, rank, strings(nid), op))
                    for k in pending:
                        row = rows[k]
                        op = ops.get(row[2])
                        if op is not None:
                            rows[k] = row[:6] + op + row[8:]
        return table(rows, TENSOR_COLS)

    def collectives(self, steps: StepsArg = None, ranks: RanksArg = None) -> Table:
        """COLLECTIVE records (collectives and point-to-point calls, entered
        and finished) as a table. Columns: step, rank, seq, comm, coll_seq,
        type, name, dtype, count, redop, root, tag, rank_in_comm, nranks,
        t_enter, t_exit, phase, result."""
        sel = Steps(steps)
        rows = []
        with self._lock:
            for i, rank in ([] if sel.empty else self._each_rank(ranks)):
                with self._opened(i, sel) as (r, strings):
                    for kind, h, addr in self._walk(i, r, COLLECTIVE_KINDS, sel):
                        rows.append(coll_row(self._names, h, RecCollective.from_address(addr),
                                              rank, strings))
        return table(rows, COLL_COLS)

    def allocations(self, steps: StepsArg = None, ranks: RanksArg = None) -> Table:
        """ALLOC and FREE records as a table. Columns: step, rank, ts, event
        ("alloc"/"free"), ptr, bytes (0 for a free of unknown size), site
        (None for frees), device."""
        sel = Steps(steps)
        rows = []
        with self._lock:
            for i, rank in ([] if sel.empty else self._each_rank(ranks)):
                with self._opened(i, sel) as (r, strings):
                    for kind, h, addr in self._walk(i, r, ALLOC_FREE_KINDS, sel):
                        rows.append(alloc_row(h, addr, rank, strings))
        return table(rows, ALLOC_COLS)

    def steps(self, ranks: RanksArg = None) -> Table:
        """STEP records folded into one row per (rank, step). Columns: rank,
        step, t_begin (ts of its first BEGIN), t_end (ts of its last END),
        duration (t_end - t_begin); None where a record is missing."""
        rows = []
        with self._lock:
            for i, rank in self._each_rank(ranks):
                with self._opened(i, None) as (r, strings):
                    seen: Dict[int, List[Optional[int]]] = {}
                    for kind, h, addr in self._walk(i, r, STEP_KINDS, None):
                        end = RecStep.from_address(addr).phase == 1
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
        return table(out, STEP_COLS)

    def events(self, kinds: Union[str, Iterable[str], None] = None, steps: StepsArg = None,
               ranks: RanksArg = None) -> Iterator[Dict[str, Any]]:
        """Generator of one dict per record (STRING records aside), rank file
        by rank file in file order. kinds: None (all) or names ("tensor",
        "op", "collective", ...). Every dict has rank, step, seq (None when
        the record has none), kind, ts, name; tensor, collective, alloc and
        free dicts have the columns of the tables, the other kinds the keys
        docs/PYTHON.md lists. Reads through its own handle on the trace, so
        it may be interleaved with other calls."""
        want: Any  # ALL_KINDS, or a set of kind numbers
        if kinds is None:
            want = ALL_KINDS
        else:
            if isinstance(kinds, str):
                kinds = [kinds]
            want = set()
            for k in kinds:
                if k not in KIND_BY_NAME:
                    raise ValueError("tftrace: unknown record kind %r (one of %s)"
                                     % (k, ", ".join(sorted(KIND_BY_NAME))))
                want.add(KIND_BY_NAME[k])
        sel = Steps(steps)
        selected = self._each_rank(ranks)
        if sel.empty:
            return
        scan = want if want is ALL_KINDS else frozenset(want | {REC_OP})
        other = Trace(self.path)
        other._warned, other.problems = self._warned, self.problems  # one record of problems
        try:
            for i, rank in selected:
                with other._opened(i, sel) as (r, strings):
                    ops = {}
                    for kind, h, addr in other._walk(i, r, scan, sel):
                        if kind == REC_OP:
                            o = RecOp.from_address(addr)
                            ops[h.seq] = (strings(o.name), strings(o.scope))
                            if REC_OP not in want:
                                continue
                        yield event_dict(self._names, h, addr, rank, strings, ops)
        finally:
            other.close()

    # -- captured tensors (_captures.py) --

    def captures(self, ranks: RanksArg = None) -> Table:
        """The captured tensors (tftrace --capture) as a table, in the order
        ``tfdump --captures --json`` lists them. Columns: rank, step, seq,
        role, id, name, op, dtype, shape, bytes, present, parts, complete."""
        with self._lock:
            caps, _ = _captures.scan(self, ranks, None, None)
        return table([cp.row() for cp in caps], CAPTURE_COLS)

    def captured(self, name: Union[str, int], step: Optional[int] = None, rank: Optional[int] = None,
                 role: Optional[Literal["output", "input", "prior"]] = "output",
                 bf16: Literal["float32", "raw"] = "float32",
                 fp8: Literal["float32", "raw"] = "float32") -> np.ndarray:
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
        return _captures.captured(self, name, step, rank, role, bf16, fp8)


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

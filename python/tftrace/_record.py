"""The recording API (tft.h) for Python programs, over libtftrace.so.

Every function is a cheap no-op when the process is not traced
(``tft_enabled() == 0``: not started under ``tftrace`` and no ``TFT_OUTPUT``).
Nothing here raises on a recording problem: tracing never changes what the
traced program does (a failed record is counted by the C recorder, or lost).

Steps: ``step(n)`` marks the start of training step ``n`` (ending the one
before); it overrides the optimizer-step numbering of ``tftrace --torch``
from its first call on (docs/PYTORCH.md).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

TYPE_CHECKING = False  # (typing is not imported at run time)
if TYPE_CHECKING:
    from typing import Literal

from . import _lib

# enum values of tft_types.h (part of the trace format: never renumbered)
DTYPE = {"f32": 0, "f64": 1, "f16": 2, "bf16": 3, "i32": 4, "i64": 5, "u8": 6, "i8": 7,
         "i16": 8, "u16": 9, "u32": 10, "u64": 11, "bool": 12, "f8e4m3": 13, "f8e5m2": 14}
OP_RUNTIME, OP_GEMM, OP_COLLECTIVE, OP_KERNEL, OP_COPY, OP_OTHER = range(6)
STATS_SHAPE, STATS_HEALTH, STATS_FULL = range(3)
COLL = {"allreduce": 0, "reduce": 1, "broadcast": 2, "allgather": 3, "reduce_scatter": 4,
        "alltoall": 5, "barrier": 6, "send": 7, "recv": 8, "gather": 9, "scatter": 10}
REDOP = {"none": 0, "sum": 1, "prod": 2, "min": 3, "max": 4, "avg": 5, "other": 6}
MAX_NDIM = 8


class CollInfo(ctypes.Structure):
    """tft_coll_info (tft.h): grows only at its end; sz says how far this copy goes."""
    _fields_ = [("sz", ctypes.c_size_t), ("name", ctypes.c_char_p), ("comm", ctypes.c_uint64),
                ("type", ctypes.c_int), ("dtype", ctypes.c_int), ("count", ctypes.c_uint64),
                ("redop", ctypes.c_int), ("root", ctypes.c_int), ("rank", ctypes.c_int),
                ("nranks", ctypes.c_int), ("tag", ctypes.c_int), ("t_enter", ctypes.c_uint64)]


class CommInfo(ctypes.Structure):
    """tft_comm_info (tft.h)."""
    _fields_ = [("sz", ctypes.c_size_t), ("comm", ctypes.c_uint64), ("name", ctypes.c_char_p),
                ("parent", ctypes.c_uint64), ("rank", ctypes.c_int), ("size", ctypes.c_int),
                ("order", ctypes.c_uint), ("n_members", ctypes.c_int),
                ("members", ctypes.POINTER(ctypes.c_int32)), ("flags", ctypes.c_uint)]


_on = None
_state = threading.local()


def enabled() -> bool:
    """True when this process records (the C recorder is on), or will once
    it trains (a process tftrace --torch keeps waiting: docs/PYTORCH.md,
    "Workers and helper processes")."""
    global _on
    if _on is None:
        try:
            lib = _lib.lib()
            _on = bool(lib.tft_enabled()) or _waiting(lib)
        except _lib.TftLibraryError:
            _on = False
    return _on


def _waiting(lib) -> bool:
    f = getattr(lib, "tft_process_waiting", None)
    return bool(f and f())


def _not_a_trainer() -> bool:
    """A process that may record tensors but never trains: a DataLoader
    worker (torch sets its worker info before the worker's first batch) or
    an inductor compile worker."""
    data = sys.modules.get("torch.utils.data")
    try:
        if data is not None and data.get_worker_info() is not None:
            return True
    except Exception:  # noqa: BLE001 (an older or partial torch)
        pass
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and (spec.name or "").startswith("torch._inductor"):
        return True  # python -m torch._inductor...
    path = getattr(main, "__file__", None) or ""
    return "torch/_inductor/" in path.replace(os.sep, "/")  # its compile worker's __main__.py


class _Steps:
    """Who numbers the steps, and the one in progress.

    ``source`` is "optimizer" (tftrace --torch: one optimizer step() = one
    step), "explicit" (``tftrace.step``) or "nvtx" (an NVTX step range seen
    by the C recorder); explicit and NVTX marks switch the optimizer's off.
    """

    def __init__(self):
        self.joined = False   # this process's join is decided (join())
        self.before_end = []  # callables run before a step ends (on the thread that ends it)
        self.before_begin = []  # callables run before a step begins (ensure, explicit)
        self.lock = threading.Lock()
        self.source = "optimizer"
        self.current = 0      # number of the step in progress, or of the next one
        self.open = False     # a step_begin without its step_end yet

    def join(self):
        """Training shows in this process (a module's forward, the loss, an
        optimizer step, a collective, a step mark): a process tftrace
        keeps waiting becomes a rank now, unless it is a worker that only
        loads data or compiles. Decided once per process."""
        self.joined = True
        lib = _lib.lib()
        f = getattr(lib, "tft_process_join", None)
        if f is not None and _waiting(lib) and not _not_a_trainer():
            f()

    def ensure(self):
        """Begins the current step if none is open (optimizer numbering only)."""
        if not self.joined:
            self.join()
        if self.open or self.source != "optimizer":
            return
        self._run(self.before_begin)
        with self.lock:
            if not self.open and self.source == "optimizer":
                _lib.lib().tft_step_begin(self.current)
                self.open = True

    def end_optimizer_step(self):
        """An optimizer step() finished: ends its step (optimizer numbering only)."""
        if self.source != "optimizer":
            return
        self._before_end()
        with self.lock:
            if self.open:
                _lib.lib().tft_step_end(self.current)
                self.open = False
            self.current += 1

    def _before_end(self):
        self._run(self.before_end)

    @staticmethod
    def _run(callables):
        for f in callables:
            try:
                f()
            except Exception:
                pass

    def explicit(self, n, source="explicit"):
        if not self.joined:
            self.join()
        self._run(self.before_begin)
        self._before_end()
        with self.lock:
            lib = _lib.lib()
            if self.open:
                lib.tft_step_end(self.current)
            self.source = source
            self.current = int(n)
            lib.tft_step_begin(self.current)
            self.open = True

    def close(self):
        self._before_end()
        with self.lock:
            if self.open:
                _lib.lib().tft_step_end(self.current)
                self.open = False


steps = _Steps()


def _after_fork():
    """In a forked child: whether it records is the C recorder's answer
    there (under --torch it waits), and its join is still to decide."""
    global _on
    _on = None
    steps.joined = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def step(n: int) -> None:
    """Marks the start of training step n (and the end of the step before).

    From the first call on, steps are numbered by these calls alone (not by
    optimizer steps). A no-op when not traced.
    """
    if enabled():
        steps.explicit(n)


def end_step() -> None:
    """Ends the step in progress (also done at the next step() and at exit)."""
    if enabled():
        steps.close()


class scope:
    """Context manager: records inside it carry NAME in their scope path."""

    def __init__(self, name: str) -> None:
        self.name = name.encode()

    def __enter__(self) -> scope:
        if enabled():
            _lib.lib().tft_scope_push(self.name)
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        if enabled():
            _lib.lib().tft_scope_pop()
        return False


def shape_array(shape):
    """A ctypes int64 array of shape (at most MAX_NDIM entries: callers fold more)."""
    return (ctypes.c_int64 * max(1, len(shape)))(*shape)


def flush() -> None:
    """Pushes this process's records towards the trace (best effort)."""
    if enabled():
        _lib.lib().tft_flush()


_broken: set[str] = set()


def guarded(what):
    """Decorator for recording code that runs inside the traced program
    (hooks, wrappers): an exception in it is reported once on stderr, under
    `what`, and swallowed (the hook returns None), so that a recording
    problem never becomes the program's."""
    def deco(fn):
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 (any recording failure)
                if what not in _broken:
                    _broken.add(what)
                    import sys
                    sys.stderr.write("tftrace: recording %s failed (%s: %s); the program goes on, "
                                     "this may be missing from the trace\n" % (what, type(e).__name__, e))
                return None
        run.__name__ = getattr(fn, "__name__", "hook")
        run.__doc__ = fn.__doc__
        run.__wrapped__ = fn   # its code, for dynamo's skip list (modules.install)
        return run
    return deco

"""An uncaught exception as an EXCEPTION record (FORMAT.md §5.18).

When the program ends with an exception it did not catch, Python prints the
traceback and keeps the exception in ``sys.last_value`` (``sys.last_exc``
since 3.12) before it runs the ``atexit`` functions. One of those writes
the record: the exception's type and first line, the step in progress, the
innermost module whose method was running on the traceback (its path from
the root model, ``model.tok_emb``) and the innermost frames. Nothing is
installed in the program's way: no ``sys.excepthook``, no wrapper, so the
program (and a notebook, a debugger, torchrun's error handling) sees its
exceptions exactly as untraced. An exception the program catches is not
recorded; ``SystemExit`` is not an exception that ends a run badly.
"""

import atexit
import os
import sys
import traceback

from .. import _lib
from .._record import guarded

FRAMES = 5  # innermost frames kept


def _module_path(tb, names):
    """The path of the innermost nn.Module whose method is on traceback tb
    (``self`` of the frame), or None."""
    import torch
    where = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self":
            obj = tb.tb_frame.f_locals.get("self")
            if isinstance(obj, torch.nn.Module):
                where = names.path_of(obj) or where
        tb = tb.tb_next
    return where


_PLUMBING = os.path.join("torch", "nn", "modules", "module.py")  # nn.Module's call machinery


def _frames(tb):
    """The innermost FRAMES frames, "file:line in function", innermost last,
    without nn.Module's own call machinery between a module and the next."""
    frames = [fs for fs in traceback.extract_tb(tb) if not fs.filename.endswith(_PLUMBING)]
    return "\n".join("%s:%d in %s" % (fs.filename, fs.lineno, fs.name) for fs in frames[-FRAMES:])


@guarded("the uncaught exception")
def record_last(names):
    """Writes the EXCEPTION record of the exception the program ended with,
    if it ended with one (run at exit)."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    lib = _lib.lib()
    if exc is None or isinstance(exc, SystemExit) or not hasattr(lib, "tft_exception"):
        return
    tb = exc.__traceback__
    text = str(exc).split("\n", 1)[0]
    where = _module_path(tb, names)
    lib.tft_exception(type(exc).__name__.encode(), text.encode("utf-8", "replace"),
                             where.encode() if where else None, _frames(tb).encode("utf-8", "replace"))


def install(names):
    """Registers the exit-time recording (before the step is closed: atexit
    runs its functions last-registered first)."""
    atexit.register(record_last, names)

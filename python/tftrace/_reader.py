"""Reading tftrace traces from Python: tables of tensors, collectives and
allocations, captured tensors as numpy arrays, and the C tools' summary
and diff as dicts (docs/PYTHON.md is the reference).

Everything reads through libtftrace.so's reader (tft_format.h) with ctypes:
``tft_trace_open_lazy`` opens a trace directory or one rank file,
``tft_trace_reader(i)`` / ``tft_trace_release(i)`` open and close one rank
file at a time, and each record ``tft_reader_next`` hands out is decoded in
place. The reader API is ``tftrace.open``, ``Trace``, ``tftrace.diff`` and
the exceptions; it lives in:

- ``_trace.py``: ``open()`` and ``Trace``, reading rank files record by record;
- ``_layouts.py``: the record kinds, their ctypes Structures (checked
  against the library's sizes) and each record as a table row or a dict;
- ``_tables.py``: the ``steps=`` / ``ranks=`` / ``name=`` filters, and rows
  as a pandas DataFrame or a dict of numpy arrays;
- ``_captures.py``: captured tensors as numpy arrays;
- ``_tools.py``: finding and running tfdump and tfdiff;
- here: the exceptions, the tools' JSON answers, and ``diff()``.

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

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Union

from . import _tools

if TYPE_CHECKING:
    from ._trace import Trace, open  # noqa: F401 (given by __getattr__ below)

__all__ = ["open", "diff", "Trace", "TraceError", "TraceWarning", "ToolNotFoundError"]

ToolNotFoundError = _tools.ToolNotFoundError


class TraceError(Exception):
    """A trace could not be opened or read, or a tool failed on it.

    Attributes: ``path`` (the trace, or None), ``errno`` (when the C library
    set one, else None), ``stderr`` (a tool's, when one failed), ``status``
    (its exit status), ``result`` (what it printed as JSON anyway, else None).
    """

    path: str | None
    errno: int | None
    stderr: str | None
    status: int | None
    result: Any

    def __init__(self, message: str, path: str | None = None, errno: int | None = None,
                 stderr: str | None = None, status: int | None = None, result: Any = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno
        self.stderr = stderr
        self.status = status
        self.result = result


class TraceWarning(UserWarning):
    """A problem the reader reported while reading (damaged chunk, torn tail, odd manifest)."""


# ---- the C tools ------------------------------------------------------------------------

def tool_json(tool, args, path, ok_status):
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
    from ._trace import Trace
    return x.path if isinstance(x, Trace) else os.fspath(x)


def diff(golden: Union[str, os.PathLike[str], Trace], bad: Union[str, os.PathLike[str], Trace],
         **options: Any) -> Dict[str, Any]:
    """What ``tfdiff --json GOLDEN BAD`` prints, as a dict (schema:
    docs/TFDIFF.md). golden, bad: trace paths or Trace objects.

    Keyword options become tfdiff flags: ``rtol=1e-3`` -> ``--rtol 1e-3``,
    ``foo_bar=v`` -> ``--foo-bar v``, True -> the flag alone, False/None ->
    left out; a list/tuple/set/range value is joined with commas
    (``ranks=[0, 2]`` -> ``--ranks 0,2``), except ``steps=(a, b)`` ->
    ``--steps a:b`` (None = open end); ``noise=`` takes a path or a Trace
    (``--noise GOLDEN2``, docs/TFDIFF.md "Round-off"). Exit statuses 0 (match) and 1
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
        if key == "noise":  # --noise GOLDEN2: a path or a Trace, like golden and bad
            val = _trace_path(val)
        elif key == "steps" and isinstance(val, tuple) and len(val) == 2:
            val = "%s:%s" % ("" if val[0] is None else val[0], "" if val[1] is None else val[1])
        elif isinstance(val, (list, tuple, set, frozenset, range)):
            val = ",".join(str(v) for v in (sorted(val) if isinstance(val, (set, frozenset)) else val))
        args += [flag, str(val)]
    g, b = _trace_path(golden), _trace_path(bad)
    args += ["--", g, b]
    return tool_json("tfdiff", args, b, (0, 1))


def __getattr__(name: str) -> Any:
    """open and Trace, which _trace.py defines: imported on first use, as
    _trace imports the errors defined here."""
    if name in ("open", "Trace"):
        from . import _trace
        return getattr(_trace, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

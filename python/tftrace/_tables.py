"""What the table methods of Trace share: their filters (``steps=``,
``ranks=``, ``name=``) and the making of a table from rows (tuples in the
order of a column spec of _layouts.py): a pandas DataFrame when pandas
imports, else a dict of numpy arrays (docs/PYTHON.md, "Tables")."""

from __future__ import annotations

import fnmatch
import numbers
import re
from typing import TYPE_CHECKING, Dict, Iterable, Optional, Tuple, Union

import numpy as np

from ._layouts import STEP_NONE

if TYPE_CHECKING:
    import pandas

# the filters' arguments and the tables, as Trace's methods take and return them
StepsArg = Union[int, Tuple[Optional[int], Optional[int]], range, Iterable[int], None]
RanksArg = Union[int, Iterable[int], None]
NameArg = Union[str, "re.Pattern[str]", None]
Table = Union["pandas.DataFrame", Dict[str, np.ndarray]]

# ---- filters ---------------------------------------------------------------------

class Steps:
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


def ranks_filter(ranks):
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


def name_matcher(name):
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


def table(rows, spec):
    """Rows (tuples in spec order) -> DataFrame (pandas) or dict of numpy arrays."""
    pd = _pd()
    cols = list(zip(*rows)) if rows else [()] * len(spec)
    data = {name: _column(vals, kind, pd) for (name, kind), vals in zip(spec, cols)}
    if pd is None:
        return data
    return pd.DataFrame(data)

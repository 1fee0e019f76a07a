"""tftrace for Python: read traces into pandas/numpy, and record PyTorch.

Reading (over the C reader in libtftrace.so, docs/PYTHON.md)::

    import tftrace
    t = tftrace.open("golden.trace")
    t.tensors(name="loss")            # a pandas DataFrame (numpy arrays without pandas)
    tftrace.diff("golden.trace", "bad.trace")   # what tfdiff --json says

Recording PyTorch needs no code change: ``tftrace --torch -- python train.py``
(docs/PYTORCH.md). A program may still mark steps itself with
``tftrace.step(n)``, or install the PyTorch hooks by hand with
``tftrace.install_torch()``.

``import tftrace`` loads nothing heavy: libtftrace.so is loaded on first use,
pandas only by the reader, torch only by the PyTorch layer.
"""

from ._version import __version__
from ._lib import TftLibraryError, library_path, library_version
from ._record import enabled, step, end_step, scope, flush

# the reader (tftrace/_reader.py), imported on first use
_READER = ("open", "diff", "Trace", "TraceError", "TraceWarning", "ToolNotFoundError")

# For type checkers only (typing is not imported at run time, and the annotations
# below are strings): the types of the annotations, and what __getattr__ gives.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Literal
    from ._reader import ToolNotFoundError, TraceError, TraceWarning, diff
    from ._trace import Trace, open
del TYPE_CHECKING


def install_torch(mode: 'Literal["modules", "ops"]' = "modules") -> bool:
    """Installs the PyTorch recording hooks in this process (what
    ``tftrace --torch`` does when torch is imported); mode "modules" or "ops".
    Returns True when installed, False when not traced."""
    from ._torch import install
    return install(mode)


def __getattr__(name: str) -> "Any":
    if name in _READER:
        from . import _reader
        return getattr(_reader, name)
    raise AttributeError("module 'tftrace' has no attribute %r" % name)


def __dir__() -> "List[str]":
    return sorted(list(globals()) + list(_READER))

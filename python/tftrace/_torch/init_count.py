"""How often the program initialised each parameter before training.

``torch.nn.init``'s functions (``normal_``, ``xavier_uniform_``, ...) and the
Tensor methods init code calls directly (``normal_``, ``uniform_``,
``zero_``, ``fill_``, ``copy_`` are left alone: a load is not an init) are
wrapped to count, per storage address and calling code, the calls the
program makes before its first optimizer step (then the originals are put
back). Calls from inside ``torch.nn`` (a module's own
``reset_parameters``, one init function calling another) are not counted,
and neither is one place's call after another's (nanoGPT's ``_init_weights``
then its scaled init of ``c_proj``): what is counted is the same code writing
the same parameter again, an init method applied per submodule and again
over the model. At a root's first
forward, a parameter written more than once is recorded as the scalar
``init.count.P`` (``tfdump --check``'s ``init-repeat``); the others record
nothing. The wrappers pass every argument through unchanged and return what
the original returns.

docs/PYTORCH.md, "What is recorded".
"""

import functools
import os
import sys

import torch

_FUNCS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
          "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_")
_METHODS = ("normal_", "uniform_")

_counts = {}          # data_ptr -> {calling code: calls by the program}
_saved = []           # (owner, name, original) to put back when training begins
_counting = [True]    # until the first optimizer step
_nn_dir = os.path.dirname(torch.nn.__file__) + os.sep


def _note(t):
    try:
        if not _counting[0] or not isinstance(t, torch.Tensor):
            return
        f = sys._getframe(2)
        if f.f_code.co_filename.startswith(_nn_dir):
            return
        p = t.data_ptr()
        if p:
            by = _counts.setdefault(p, {})
            by[f.f_code] = by.get(f.f_code, 0) + 1
    except Exception:
        pass


def _wrap(fn):
    @functools.wraps(fn)
    def wrapper(tensor, *args, **kwargs):
        _note(tensor)
        return fn(tensor, *args, **kwargs)
    return wrapper


def install():
    import torch.nn.init as init
    for n in _FUNCS:
        fn = getattr(init, n, None)
        if fn is not None and not getattr(fn, "_tft_wrapped", False):
            w = _wrap(fn)
            w._tft_wrapped = True
            _saved.append((init, n, fn))
            setattr(init, n, w)
    for n in _METHODS:
        fn = getattr(torch.Tensor, n, None)
        if fn is not None and not getattr(fn, "_tft_wrapped", False):
            w = _wrap(fn)
            w._tft_wrapped = True
            _saved.append((torch.Tensor, n, fn))
            setattr(torch.Tensor, n, w)


def take(p):
    """The most init calls one place of the program made on parameter p so
    far (forgotten after)."""
    try:
        by = _counts.pop(p.data_ptr(), None)
    except Exception:
        return 0
    return max(by.values()) if by else 0


def training_began():
    """The first optimizer step: counting ends and the Tensor methods are put
    back (nothing of this stays in the training loop's way; a program that
    bound torch.nn.init's functions keeps wrappers that only forward)."""
    if not _counting[0]:
        return
    _counting[0] = False
    _counts.clear()
    for owner, n, fn in _saved:
        if getattr(getattr(owner, n, None), "_tft_wrapped", False):
            setattr(owner, n, fn)
    del _saved[:]

"""Resuming from a checkpoint: a RESUME record, and the step numbering
taken up where the checkpoint left it.

``torch.load`` notes the file it read; ``Module.load_state_dict`` and
``Optimizer.load_state_dict`` note what was restored. At the first step
after them one CHECKPOINT record with action RESUME (FORMAT.md §5.9) is
written: its path the file last read with ``torch.load`` (empty when the
state came from elsewhere), its recipe field what was restored
(``module model; optimizer AdamW (state at step 3)``, or ``...; no optimizer
state``). When the optimizer's state says how many steps it took
(``state['step']`` of Adam, AdamW and the others that count), optimizer
numbering (docs/PYTORCH.md) continues from there: a run resumed at step 3
numbers its steps 3, 4, ... as the uninterrupted run did, so tfdiff aligns
the two without a code change. An optimizer without a step count (plain
SGD) leaves the numbering alone: call ``tftrace.step(n)`` there.

The wrappers keep the wrapped functions' names, signatures and results.
"""

import functools
import os
import threading

import torch

from .. import _lib
from .._record import guarded, steps
from .unseen import unseen

TFT_CKPT_RESUME = 1

_lock = threading.Lock()
loaded = False  # a state was restored (model_state.py: a first forward after it is not before training)
_pending = {"path": None, "models": [], "optimizers": [], "step": None, "read": None}


def _scalar(v):
    """An int from a step count (a number or a one-element tensor), read
    without running a torch op (a CPU tensor through numpy), else None."""
    if isinstance(v, torch.Tensor):
        if v.numel() != 1 or v.device.type != "cpu":
            return None
        v = v.detach().numpy().reshape(()).item()
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def restored_step(opt):
    """The most steps any parameter's restored state counts, None when none does."""
    best = None
    for st in opt.state.values():
        n = _scalar(st.get("step")) if isinstance(st, dict) and "step" in st else None
        if n is not None and (best is None or n > best):
            best = n
    return best


@guarded("a torch.load")
@unseen
def _note_load(f):
    if isinstance(f, (str, bytes, os.PathLike)):
        with _lock:
            _pending["read"] = os.fsdecode(f)


@guarded("a module's load_state_dict")
@unseen
def _note_module(names, module):
    global loaded
    loaded = True
    with _lock:
        _pending["models"].append(names.path_of(module) or type(module).__name__)
        _pending["path"] = _pending["read"]


@guarded("an optimizer's load_state_dict")
@unseen
def _note_optimizer(opt):
    global loaded
    loaded = True
    n = restored_step(opt)
    with _lock:
        _pending["optimizers"].append((type(opt).__name__, n))
        _pending["path"] = _pending["read"]
        if n is not None:
            _pending["step"] = n if _pending["step"] is None else max(n, _pending["step"])
    if n is not None and steps.source == "optimizer":
        if steps.open:
            steps.close()
        steps.current = n


@guarded("a RESUME record")
@unseen
def _flush():
    """Writes the RESUME record of the loads since the last one (before a step begins)."""
    with _lock:
        p = dict(_pending)
        if not p["models"] and not p["optimizers"]:
            return
        _pending.update(models=[], optimizers=[], step=None, path=None)
    what = ["module %s" % m for m in p["models"]]
    what += ["optimizer %s (state at step %d)" % (c, n) if n is not None else "optimizer %s" % c
             for c, n in p["optimizers"]]
    if not p["optimizers"]:
        what.append("no optimizer state")
    step = p["step"] if p["step"] is not None else steps.current
    _lib.lib().tft_checkpoint(TFT_CKPT_RESUME, step, (p["path"] or "").encode(), "; ".join(what).encode())


def _wrap(owner, attr, after):
    """Replaces owner.attr by a wrapper that calls it, then after(args, result)."""
    real = getattr(owner, attr)

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        out = real(*args, **kwargs)
        after(args, kwargs)
        return out
    setattr(owner, attr, wrapper)


def install(names):
    _wrap(torch, "load", lambda a, kw: _note_load(a[0] if a else kw.get("f")))
    _wrap(torch.nn.Module, "load_state_dict", lambda a, kw: _note_module(names, a[0]))
    _wrap(torch.optim.Optimizer, "load_state_dict", lambda a, kw: _note_optimizer(a[0]))
    steps.before_begin.append(_flush)
    steps.before_end.append(_flush)  # (a load at the very end still says so)

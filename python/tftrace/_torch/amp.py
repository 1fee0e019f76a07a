"""Mixed precision and gradient clipping: what a step's numbers were
before the scaler and the clip touched them.

- ``GradScaler.scale(loss)``: the scaled tensor is remembered, so that
  ``backward()`` on it records ``loss`` as the loss the program computed
  (unscaled), and ``amp.scale`` the scale it was multiplied by (recorded at
  each ``GradScaler.step``, before ``update()`` changes it).
- ``GradScaler.step(optimizer)``: when the scaler found inf/NaN gradients
  and skipped ``optimizer.step()``, ``amp.skipped`` (1.0) is recorded and
  the step ends all the same, so the step numbering stays that of a run
  that did not skip (docs/PYTORCH.md, "Steps").
- gradient clipping: ``grad_norm`` (the total norm) and ``grad_norm.max``
  (``max_norm``) each time gradients are clipped by norm, whether through
  ``clip_grad_norm_`` or ``get_total_norm`` + ``clip_grads_with_norm_``
  (what accelerate and the Hugging Face Trainer call; also when they bound
  ``clip_grad_norm_`` before tftrace was loaded: it clips through the
  module's ``_clip_grads_with_norm_``, which is wrapped).

Wrappers keep the names, signatures and results of what they wrap; no torch
op is run for recording (a CPU scale is read through numpy).
"""

import functools

import torch
from torch.utils.weak import WeakIdKeyDictionary

from .._record import guarded, steps
from . import tensors
from .unseen import tracing, unseen

_scaled = WeakIdKeyDictionary()   # scaled loss -> (the unscaled loss, the scaler)


def unscaled(t):
    """The loss t was made from by GradScaler.scale, else t."""
    got = _scaled.get(t)
    return got[0] if got is not None else t


def _wraps(real, fn):
    return functools.wraps(real)(fn)


@guarded("GradScaler's scale")
@unseen
def _note_scaled(out, loss, scaler):
    if isinstance(out, torch.Tensor) and out is not loss:
        _scaled[out] = (loss, scaler)


@guarded("GradScaler's step")
@unseen
def _after_step(scaler, before):
    s = getattr(scaler, "_scale", None)
    if isinstance(s, torch.Tensor):
        tensors.record(b"amp.scale", s)
    if steps.source == "optimizer" and steps.current == before:   # optimizer.step() did not run
        steps.ensure()
        tensors.record_scalar(b"amp.skipped", 1.0)
        steps.end_optimizer_step()


def _wrap_scaler():
    cls = torch.amp.GradScaler
    real_scale, real_step = cls.scale, cls.step

    def scale(self, outputs, *args, **kwargs):
        out = real_scale(self, outputs, *args, **kwargs)
        if isinstance(outputs, torch.Tensor) and getattr(self, "_enabled", False):
            _note_scaled(out, outputs, self)
        return out

    def step(self, optimizer, *args, **kwargs):
        before = steps.current
        out = real_step(self, optimizer, *args, **kwargs)
        if getattr(self, "_enabled", False):
            _after_step(self, before)
        return out

    cls.scale, cls.step = _wraps(real_scale, scale), _wraps(real_step, step)


@guarded("the gradient norm")
@unseen
def _record_clip(max_norm, total_norm):
    if isinstance(total_norm, torch.Tensor) and tracing() is None:
        steps.ensure()
        tensors.record(b"grad_norm", total_norm)
        if isinstance(max_norm, (int, float)):
            tensors.record_scalar(b"grad_norm.max", max_norm)


def _wrap_clip():
    import torch.nn.utils as nu
    import torch.nn.utils.clip_grad as cg
    real = cg._clip_grads_with_norm_

    def clip_grads_with_norm_(parameters, max_norm, total_norm, *args, **kwargs):
        _record_clip(max_norm, total_norm)
        return real(parameters, max_norm, total_norm, *args, **kwargs)

    w = _wraps(real, clip_grads_with_norm_)
    cg._clip_grads_with_norm_ = w       # what clip_grad_norm_ calls
    if getattr(nu, "clip_grads_with_norm_", None) is real:
        nu.clip_grads_with_norm_ = w    # the public name


def install():
    _wrap_scaler()
    _wrap_clip()

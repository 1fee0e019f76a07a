"""Running recording code where the traced program cannot see it.

Recording reads tensors (``data_ptr``, ``shape``, ``is_contiguous``),
registers gradient hooks and, for a tensor that is not contiguous, makes a
copy. Done plainly, the program would see that work: a Tensor subclass with
``__torch_function__`` is called for each attribute read and method, a
``TorchDispatchMode`` the program entered sees the copy's ``aten.clone``,
and ``torch.jit.trace`` warns about what it cannot trace. ``unseen(fn)``
runs fn with torch functions of subclasses disabled and, when any dispatch
mode is active (the program's, or ``--torch ops``'s own OpRecorder), with
the mode stack set aside; ``tracing()`` says whether torch.jit.trace is
running (the hooks then record nothing: what it runs is not training).
docs/PYTORCH.md, "What the program can never observe".
"""

import functools

import torch

try:
    from torch.utils._python_dispatch import _disable_current_modes
    _modes = torch._C._len_torch_dispatch_stack
except (ImportError, AttributeError):  # a torch without them: modes are seen
    _modes = lambda: 0  # noqa: E731
_no_subclass_functions = getattr(torch._C, "DisableTorchFunctionSubclass", None) or torch._C.DisableTorchFunction
tracing = torch._C._get_tracing_state  # None when torch.jit.trace is not running


def unseen(fn):
    """fn, run unseen by the program's torch functions and dispatch modes.

    Keeps fn's name and doc; adds one context manager (two when a mode is
    active) per call."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _no_subclass_functions():
            if _modes():
                with _disable_current_modes():
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)
    return run

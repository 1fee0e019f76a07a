"""The PyTorch recording layer of tftrace (docs/PYTORCH.md).

``install(mode)`` is what ``tftrace --torch`` runs in every Python process
right after ``import torch`` (tftrace/_boot/sitecustomize.py):

- modules (default): global module forward hooks (outputs by module path,
  scopes by nesting), gradient hooks on module outputs, the loss, the
  gradient norm, optimizer-step hooks (steps, parameters, gradients,
  optimizer state), torch.distributed and DDP as collectives (modules.py,
  dist.py), the exception the program ends with, if any (errors.py),
  resuming from a checkpoint (resume.py);
- ops: all of that and every ATen op through a TorchDispatchMode (ops.py).

Installing is idempotent, and does nothing when the process does not record
and will not (a process tftrace --torch keeps waiting, a DataLoader worker or
a Python child of the training, gets the hooks: it becomes a rank if they see
it train, docs/PYTORCH.md "Workers and helper processes").
"""

import atexit
import sys
import threading

from .. import _lib
from .._record import enabled, steps

_installed = None
_lock = threading.Lock()


def install(mode="modules"):
    """Installs the hooks for mode ("modules" or "ops"); returns True when
    installed now or before, False when this process does not record (nor
    waits to)."""
    global _installed
    if mode not in ("modules", "ops"):
        raise ValueError("tftrace: torch mode must be 'modules' or 'ops', not %r" % (mode,))
    if not enabled():
        import os
        if os.environ.get("TFT_OUTPUT") or os.environ.get("TFT_SHM"):
            try:
                _lib.lib()
            except _lib.TftLibraryError as e:
                sys.stderr.write("tftrace: TFT_TORCH is set but PyTorch is not recorded: %s\n" % e)
        return False
    with _lock:
        if _installed is not None:
            return True
        from . import dist, modules
        names = modules.Names()
        handles = modules.install(names)
        dist.install()
        _wrap_nvtx()
        state = {"mode": mode, "handles": handles, "names": names}
        if mode == "ops":
            from .ops import OpRecorder
            rec = OpRecorder(modules.current_module_recorder())
            rec.__enter__()
            state["ops"] = rec
        _installed = state
        atexit.register(steps.close)
        from . import errors, resume
        resume.install(names)
        errors.install(names)  # (runs at exit before steps.close: atexit is last-in, first-out)
        return True


def _wrap_nvtx():
    """An NVTX range named like the step range (TFT_STEP_RANGE, default
    "step") marks steps instead of optimizer steps. Under tftrace the C
    recorder sees torch's NVTX ranges itself (NVTX injection): this layer
    then only stops numbering steps by optimizer steps; without it (no
    injection) it marks them."""
    import os
    try:
        import torch.cuda.nvtx as nvtx
    except Exception:
        return
    name = os.environ.get("TFT_STEP_RANGE", "step")
    injected = "libtftrace" in os.environ.get("NVTX_INJECTION64_PATH", "")
    real_push, real_pop = nvtx.range_push, nvtx.range_pop
    stack = threading.local()

    def number(msg):
        rest = msg[len(name):].lstrip(" _")
        return int(rest) if rest.isdigit() else None

    def range_push(msg, *a, **kw):
        st = getattr(stack, "s", None)
        if st is None:
            st = stack.s = []
        is_step = isinstance(msg, str) and msg.startswith(name) and (
            len(msg) == len(name) or number(msg) is not None)
        st.append(is_step)
        if is_step:
            n = number(msg)
            if injected:
                steps.source = "nvtx"
            else:
                steps.explicit(n if n is not None else (steps.current + 1 if steps.open else steps.current),
                               "nvtx")
        return real_push(msg, *a, **kw)

    def range_pop(*a, **kw):
        st = getattr(stack, "s", None)
        if st and st.pop() and not injected:
            steps.close()
        return real_pop(*a, **kw)

    nvtx.range_push, nvtx.range_pop = range_push, range_pop

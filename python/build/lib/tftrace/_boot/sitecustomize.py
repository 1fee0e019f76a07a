"""tftrace's sitecustomize: records PyTorch in every Python process of a run.

``tftrace --torch`` puts this folder first on PYTHONPATH (and the folder of
the ``tftrace`` package after it) and sets TFT_TORCH=modules|ops. Python
imports ``sitecustomize`` at start-up and finds this one; it

1. runs the sitecustomize it hides, if there is one further down sys.path
   (Debian's, a virtualenv's, the user's own): never shadow the user's;
2. when TFT_TORCH asks for it, arranges that the moment the program imports
   ``torch``, the PyTorch recording hooks are installed (tftrace._torch),
   so a process that never imports torch pays nothing.

Any failure here is reported on stderr once and otherwise ignored: tracing
never stops the traced program from running.
"""

import os
import sys


def _chain_user_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


def _torch_mode():
    v = os.environ.get("TFT_TORCH", "").strip().lower()
    if v in ("", "0", "off", "no", "false"):
        return None
    return "ops" if v == "ops" else "modules"


class _TorchWatcher:
    """A meta-path finder that lets ``import torch`` happen as usual and
    installs the hooks right after torch's own module code has run."""

    def __init__(self, mode):
        self.mode = mode
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            import importlib.util
            spec = importlib.util.find_spec("torch")
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        loader, mode, watcher = spec.loader, self.mode, self
        real_exec = loader.exec_module

        def exec_module(module):
            real_exec(module)
            try:
                sys.meta_path.remove(watcher)
            except ValueError:
                pass
            _install(mode)

        try:
            loader.exec_module = exec_module
        except AttributeError:
            return None
        return spec


def _install(mode):
    try:
        import tftrace
        tftrace.install_torch(mode)
    except Exception as e:  # never stop the program
        sys.stderr.write("tftrace: PyTorch recording not installed: %s: %s\n" % (type(e).__name__, e))


try:
    _chain_user_sitecustomize()
except Exception as _e:
    sys.stderr.write("tftrace: the sitecustomize behind tftrace's failed: %s: %s\n" % (type(_e).__name__, _e))

_mode = _torch_mode()
if _mode:
    if "torch" in sys.modules:
        _install(_mode)
    else:
        sys.meta_path.insert(0, _TorchWatcher(_mode))

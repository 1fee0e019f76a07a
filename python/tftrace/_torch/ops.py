"""``tftrace --torch ops``: every ATen op as a tftrace op, through a TorchDispatchMode.

Each op the dispatcher runs (forward and backward alike) is one op record,
named ``aten.<op>`` (``aten.addmm``, ``aten._softmax``; the overload is
dropped but for in-place and out= forms, whose names end in ``_``), with
the ids of its tensor inputs, in the scope of the module running it; its
tensor outputs are recorded as ``<module path>:<op>`` (``[i]`` for several).
That gives tfdiff's origin analysis the op inside a module where a
difference starts (its inputs equal, its output not).

- Views (``aten.view``, ``aten.transpose``, ``aten.slice``, ...) are recorded
  as what they are: an op whose output has shape and dtype but no statistics
  (its values are its base's, already recorded).
- In-place ops (``aten.add_``) record the mutated tensor after the op, under
  the op's name, and later ops name that record as their input.

- Ops that make uninitialised memory (``aten.empty``, ``empty_like``, ...)
  record shape and dtype only: their bytes are whatever the allocator left.

Under torch.compile the mode is one compilation ignores
(``ignore_compile_internals``: dynamo compiles as if it were not there),
and it records nothing while a compiled module runs, forward or backward
(ModuleRecorder.in_compiled): that module is recorded at its boundary.

The id of the record that last wrote a tensor is kept for as long as the
tensor lives (keyed by its TensorImpl, dropped when it dies: what was seen
depends on the program alone, not on addresses); an op that writes its
arguments (in-place, out=, foreach) records them after it. A tensor the
mode has not seen written (a parameter at its first use, a batch) is
recorded when an op first takes it as an input, so every input id names a
record.
"""

import ctypes
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _lib
from .._record import OP_RUNTIME, guarded, steps
from . import tensors

_SKIP = {"aten::detach", "aten::lift_fresh", "aten::_record_function_enter", "aten::_record_function_enter_new",
         "aten::_record_function_exit"}
_UNINIT = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
           "aten::new_empty_strided", "aten::empty_permuted"}
def _op_name(func):
    return "aten." + func.overloadpacket.__name__


# ops that overwrite the argument they write without reading it: when that
# argument is a first sight (a Parameter wrapping torch.empty), its old bytes
# are garbage, recorded as shape only
_OVERWRITE = {"aten::uniform_", "aten::normal_", "aten::zero_", "aten::fill_", "aten::copy_",
              "aten::random_", "aten::bernoulli_", "aten::exponential_", "aten::geometric_",
              "aten::log_normal_", "aten::cauchy_", "aten::set_", "aten::resize_"}
_written = {}  # OpOverload -> indices of the arguments it writes (in-place, out=)


def _written_args(func):
    w = _written.get(func)
    if w is None:
        w = _written[func] = tuple(i for i, a in enumerate(func._schema.arguments)
                                   if a.alias_info is not None and a.alias_info.is_write)
    return w


class OpRecorder(TorchDispatchMode):
    """Records every ATen op. Entered once per thread that computes (the
    main thread at install; autograd's threads inherit it)."""

    def __init__(self, modules):
        super().__init__()
        self.modules = modules  # ModuleRecorder: the current module path
        self.lib = _lib.lib()
        self.ids = {}   # TensorImpl address (tensor._cdata) -> id of the record that last wrote it,
                        # for live tensors only (an entry goes with its tensor: weakref.finalize)

    def _where(self):
        st = self.modules._stack()
        for x in reversed(st):
            if x is not None:
                return x
        return ""

    def _remember(self, t, tid):
        if not tid:
            return
        k = t._cdata
        if k not in self.ids:
            try:
                weakref.finalize(t, self.ids.pop, k, None)
            except TypeError:
                return
        self.ids[k] = tid

    def _input_id(self, t, where, overwritten=False):
        tid = self.ids.get(t._cdata)
        if tid is None:
            # first sight (a parameter, a batch, a tensor made before install)
            tid = tensors.record((where + ":input") if where else "input", t, shape_only=overwritten)
            self._remember(t, tid)
        return tid

    @classmethod
    def ignore_compile_internals(cls):
        """torch.compile compiles as if this mode were not there (without
        it, dynamo compiles nothing while a dispatch mode is active) and
        turns it off while it compiles."""
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.modules.in_compiled():
            return func(*args, **kwargs)  # a compiled module: its boundary is recorded
        began = self._begin(func, args, kwargs)
        if not began:
            return func(*args, **kwargs)
        try:
            out = func(*args, **kwargs)
            self._outputs(func, args, out, began)
        finally:
            self.lib.tft_op_end()
        return out

    @guarded("an ATen op's inputs")
    def _begin(self, func, args, kwargs):
        """Records the op and its inputs; returns (schema name, output base
        name) or None when the op is not recorded."""
        name = func._schema.name
        if name in _SKIP:
            return None
        steps.ensure()
        where = self._where()
        short = _op_name(func)
        ins = []
        over = name in _OVERWRITE
        for i, a in enumerate(list(args) + list(kwargs.values())):
            if isinstance(a, torch.Tensor):
                ins.append(self._input_id(a, where, over and i == 0))
            elif isinstance(a, (list, tuple)):
                ins.extend(self._input_id(x, where) for x in a if isinstance(x, torch.Tensor))
        ins = ins[:255]
        arr = (ctypes.c_uint64 * max(1, len(ins)))(*ins)
        self.lib.tft_op_begin(short.encode(), OP_RUNTIME, len(ins), arr)
        return name, ((where + ":" + short) if where else short)

    @guarded("an ATen op's outputs")
    def _outputs(self, func, args, out, began):
        name, base = began
        shape_only = func.is_view or name in _UNINIT
        done = set()
        for lname, t in tensors.leaves(out, base, []):
            done.add(t._cdata)
            self._remember(t, tensors.record(lname, t, shape_only=shape_only))
        # what an in-place or out= op wrote, when it does not return it (foreach ops)
        for i in _written_args(func):
            if i < len(args):
                for lname, t in tensors.leaves(args[i], base + ".arg%d" % i, []):
                    if t._cdata not in done:
                        done.add(t._cdata)
                        self._remember(t, tensors.record(lname, t))

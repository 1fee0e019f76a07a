"""Module, loss and optimizer hooks: what ``tftrace --torch`` records by default.

Names (docs/PYTORCH.md has the full table):

- a module's forward outputs: its path from the root model, ``model`` for
  the first root module that has parameters (``model.blocks.0.attn``); other
  root modules (a loss module called on its own) by their class name in
  lower case (``crossentropyloss``). Wrappers that only forward to an inner
  module (DistributedDataParallel, torch.compile's OptimizedModule, FSDP's
  outer wrapper) are transparent: their inner module is the root.
  Several outputs: ``path[i]``, ``path.key`` (tensor leaves, tensors.leaves).
- the gradient of the loss with respect to a module's output, when backward
  reaches it: ``grad.`` + the output's name (a tensor hook on the output).
- the tensor ``backward()`` is called on: ``loss``.
- ``grad_norm`` (and ``grad_norm.max``) whenever gradients are clipped by
  norm, ``amp.scale`` and ``amp.skipped`` of a GradScaler (amp.py).
- at each optimizer step: ``grad.P`` and ``lr`` (of each param group)
  before it, then one op ``<Optimizer>.step`` per parameter (inputs: its
  gradient, its lr, its state before; outputs: ``param.P`` and the
  optimizer state after it: ``adam.m.P``/``adam.v.P`` for Adam and AdamW,
  ``sgd.momentum.P``, ... the table OPTIM_STATE_NAMES), where P is the
  parameter's name in the root model (``param.model.lm_head.weight``).

Scopes follow module nesting (``model/blocks.0/attn``): every record made
inside a module's forward carries it, ATen ops included (``--torch ops``).
"""

import ctypes
import threading

import torch

from .. import _lib
from .._record import OP_OTHER, guarded, steps
from . import tensors

_WRAPPERS = ("DistributedDataParallel", "OptimizedModule", "FullyShardedDataParallel", "DataParallel")

# optimizer state key -> recorded prefix, by optimizer class name; others:
# "<class name in lower case>.<state key>"
OPTIM_STATE_NAMES = {
    "Adam": {"exp_avg": "adam.m", "exp_avg_sq": "adam.v", "max_exp_avg_sq": "adam.vmax"},
    "AdamW": {"exp_avg": "adam.m", "exp_avg_sq": "adam.v", "max_exp_avg_sq": "adam.vmax"},
    "SGD": {"momentum_buffer": "sgd.momentum"},
    "RMSprop": {"square_avg": "rmsprop.v", "momentum_buffer": "rmsprop.momentum", "grad_avg": "rmsprop.gavg"},
    "Adagrad": {"sum": "adagrad.sum"},
}


def _inner(m):
    """The module a transparent wrapper forwards to, else m."""
    for _ in range(4):
        n = type(m).__name__
        if n in _WRAPPERS:
            inner = getattr(m, "module", None) or getattr(m, "_orig_mod", None) or getattr(m, "_fsdp_wrapped_module", None)
            if isinstance(inner, torch.nn.Module):
                m = inner
                continue
        break
    return m


class Names:
    """Module -> path names, by the roots they were called under."""

    def __init__(self):
        self.path = {}        # id(module) -> full path ("model.blocks.0.attn")
        self.rel = {}         # id(module) -> its scope segment ("blocks.0")
        self.roots = {}       # id(root) -> root name
        self.params = {}      # id(param) -> "model.lm_head.weight"
        self.taken = set()    # root names given out

    def root_name(self, m):
        r = self.roots.get(id(m))
        if r is not None:
            return r
        has_params = any(True for _ in m.parameters())
        base = "model" if has_params and "model" not in self.taken else type(m).__name__.lower()
        name, k = base, 1
        while name in self.taken:
            name, k = "%s.%d" % (base, k), k + 1
        self.taken.add(name)
        self.roots[id(m)] = name
        self.index(m, name)
        return name

    def index(self, root, name):
        self.path[id(root)] = name
        self.rel.setdefault(id(root), name)
        for sub, mod in root.named_modules():
            if sub and id(mod) not in self.path:
                self.path[id(mod)] = name + "." + sub
        for pn, p in root.named_parameters():
            self.params.setdefault(id(p), name + "." + pn)

    def path_of(self, m):
        """The path m was given, None when it has none yet."""
        return self.path.get(id(m))

    def name_of(self, m, parent):
        """Full path and scope segment of m called inside parent (a path or None)."""
        p = self.path.get(id(m))
        if p is None and parent is not None:
            # a module that was not in its root's tree when it was indexed
            p = parent + "." + type(m).__name__.lower()
            self.path[id(m)] = p
        if parent is not None and p.startswith(parent + "."):
            seg = p[len(parent) + 1:]
        else:
            seg = p
        return p, seg


class ModuleRecorder:
    """The global module hooks (forward pre/post) and the output-gradient hooks."""

    def __init__(self, names):
        self.names = names
        self.tls = threading.local()
        self.lib = _lib.lib()

    def _stack(self):
        s = getattr(self.tls, "stack", None)
        if s is None:
            s = self.tls.stack = []
        return s

    @guarded("a module's forward (pre-hook)")
    def pre(self, module, args):
        stack = self._stack()
        if type(module).__name__ in _WRAPPERS:
            stack.append(None)        # transparent
            return None
        parent = next((x for x in reversed(stack) if x is not None), None)
        if parent is None:
            path = self.names.root_name(_inner(module))
            seg = path
            if _inner(module) is not module:
                self.names.path[id(module)] = path
        else:
            path, seg = self.names.name_of(module, parent)
        steps.ensure()
        self.lib.tft_scope_push(seg.encode())
        stack.append(path)
        return None

    @guarded("a module's outputs")
    def post(self, module, args, output):
        stack = self._stack()
        if not stack:
            return None
        path = stack.pop()
        if path is None:
            return None
        try:
            if output is not None:
                self.record_output(path, output)
        finally:
            self.lib.tft_scope_pop()
        return None

    def record_output(self, path, output):
        for name, t in tensors.leaves(output, path, []):
            tensors.record(name, t)
            if t.requires_grad and t.grad_fn is not None:
                t.register_hook(_grad_hook("grad." + name))


def _grad_hook(name):
    bname = name.encode()

    @guarded("a gradient")
    def hook(g):
        if g is not None:
            steps.ensure()
            tensors.record(bname, g)
        return None
    return hook


def _state_name(opt_cls, key):
    table = OPTIM_STATE_NAMES.get(opt_cls)
    if table and key in table:
        return table[key]
    return "%s.%s" % (opt_cls.lower(), key)


class OptimizerRecorder:
    """Global optimizer step hooks. Before the step: the gradients and each
    group's lr. After it, one op per parameter, ``<Optimizer>.step``
    (``AdamW.step``): its inputs the parameter's gradient, its group's lr and
    its state as the last step left it, its outputs the parameter and its
    new state; so tfdiff's origin analysis can say which input of an update
    differed (an lr, a moment) rather than stop at the parameter."""

    def __init__(self, names):
        self.names = names
        self.tls = threading.local()
        self.state_ids = {}   # parameter name -> ids of its state records after the last step

    def pname(self, p, gi, pi):
        n = self.names.params.get(id(p))
        return n if n is not None else "group%d.%d" % (gi, pi)

    @guarded("an optimizer step's gradients")
    def pre(self, opt, args, kwargs):
        steps.ensure()
        grads, lrs = {}, {}
        self.tls.before = (grads, lrs)
        for gi, g in enumerate(opt.param_groups):
            for pi, p in enumerate(g["params"]):
                if p.grad is not None:
                    grads[(gi, pi)] = tensors.record("grad." + self.pname(p, gi, pi), p.grad)
            lr = g.get("lr")
            if isinstance(lr, (int, float)):
                lrs[gi] = tensors.record("lr" if gi == 0 else "lr.group%d" % gi,
                                         torch.tensor(float(lr), dtype=torch.float64))

    def post(self, opt, args, kwargs):
        try:
            self.record_after(opt)
        finally:
            steps.end_optimizer_step()

    @guarded("an optimizer step's parameters and state")
    def record_after(self, opt):
        grads, lrs = getattr(self.tls, "before", None) or ({}, {})
        self.tls.before = None
        cls = type(opt).__name__
        lib = _lib.lib()
        name = (cls + ".step").encode()
        began = False
        try:
            for gi, g in enumerate(opt.param_groups):
                for pi, p in enumerate(g["params"]):
                    n = self.pname(p, gi, pi)
                    ins = [i for i in (grads.get((gi, pi)), lrs.get(gi)) if i] + self.state_ids.get(n, [])
                    lib.tft_op_begin(name, OP_OTHER, len(ins), (ctypes.c_uint64 * max(1, len(ins)))(*ins))
                    began = True
                    tensors.record("param." + n, p)
                    st = opt.state.get(p)
                    if not st:
                        continue
                    ids = []
                    for k, v in st.items():
                        if isinstance(v, torch.Tensor) and k != "step" and v.dim() > 0:
                            ids.append(tensors.record(_state_name(cls, k) + "." + n, v))
                    self.state_ids[n] = [i for i in ids if i]
        finally:
            if began:
                lib.tft_op_end()


_current = None


def current_module_recorder():
    """The ModuleRecorder install() made (None before)."""
    return _current


def install(names):
    """Registers the global hooks; returns the handles (kept by the caller)."""
    global _current
    mr = _current = ModuleRecorder(names)
    orc = OptimizerRecorder(names)
    from torch.nn.modules import module as nnm
    import torch.optim.optimizer as optimizer  # (torch.optim deletes its 'optimizer' attribute)
    handles = [
        nnm.register_module_forward_pre_hook(mr.pre),
        nnm.register_module_forward_hook(mr.post, always_call=True),
        optimizer.register_optimizer_step_pre_hook(orc.pre),
        optimizer.register_optimizer_step_post_hook(orc.post),
    ]
    _wrap_backward()
    from . import amp
    amp.install()
    return handles


_in_backward = threading.local()


def _wrap_backward():
    real_tensor_backward = torch.Tensor.backward
    real_autograd_backward = torch.autograd.backward

    from .amp import unscaled

    @guarded("the loss")
    def record_loss(t):
        steps.ensure()
        tensors.record(b"loss", unscaled(t).detach())

    def note_loss(t):
        if getattr(_in_backward, "on", False):
            return False
        _in_backward.on = True
        if isinstance(t, torch.Tensor):
            record_loss(t)
        return True

    def noting(real, loss_of):
        """real, recording loss_of(its first argument) unless a backward is
        already in progress on this thread (Tensor.backward calls
        torch.autograd.backward)."""
        def wrapper(first, *args, **kwargs):
            mine = note_loss(loss_of(first))
            try:
                return real(first, *args, **kwargs)
            finally:
                if mine:
                    _in_backward.on = False
        wrapper.__doc__ = real.__doc__
        return wrapper

    tensor_backward = noting(real_tensor_backward, lambda t: t)
    autograd_backward = noting(real_autograd_backward,
                               lambda ts: ts[0] if isinstance(ts, (list, tuple)) and ts else ts)

    torch.Tensor.backward = tensor_backward
    torch.autograd.backward = autograd_backward

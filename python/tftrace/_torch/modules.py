"""Module, loss and optimizer hooks: what ``tftrace --torch`` records by default.

Names (docs/PYTORCH.md has the full table):

- a module's forward outputs: its path from the root model, ``model`` for
  the first root module that has parameters (``model.blocks.0.attn``); other
  root modules (a loss module called on its own) by their class name in
  lower case (``crossentropyloss``). Wrappers that only forward to an inner
  module (DistributedDataParallel, FSDP's outer wrapper) are transparent:
  their inner module is the root. A compiled module (torch.compile's
  OptimizedModule, or one compiled in place) is recorded at its boundary
  only, under the name its module has: its inputs (``P:input``), outputs
  and output gradients, nothing from inside (docs/PYTORCH.md, "Under
  torch.compile").
  Several outputs: ``path[i]``, ``path.key`` (tensor leaves, tensors.leaves).
- the gradient of the loss with respect to a module's output, when backward
  reaches it: ``grad.`` + the output's name (a tensor hook on the output).
- the tensor ``backward()`` is called on: ``loss``.
- ``clip_grad_norm_``'s result: ``grad_norm``.
- at each optimizer step: ``grad.P`` before it, ``param.P`` and the
  optimizer state after it (``adam.m.P``/``adam.v.P`` for Adam and AdamW,
  ``sgd.momentum.P``, ... the table in optim_names), ``lr`` of each param
  group, where P is the parameter's name in the root model
  (``param.model.lm_head.weight``).

Scopes follow module nesting (``model/blocks.0/attn``): every record made
inside a module's forward carries it, ATen ops included (``--torch ops``).
"""

import bisect
import functools
import threading
import types

import torch

from .. import _lib
from .._record import guarded, steps
from . import tensors

try:
    _compiling = torch.compiler.is_compiling   # a constant (True) to dynamo while it traces
except AttributeError:  # a torch without torch.compiler: nothing is compiled
    def _compiling():
        return False

# the autograd node running on this thread, and the sequence number the
# next node made on this thread gets (both None where torch has neither)
_current_node = getattr(torch._C, "_current_autograd_node", None)
_next_seq = getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", None)

try:
    from torch._C._dynamo.eval_frame import get_eval_frame_callback as _dynamo_on
except ImportError:
    _dynamo_on = None

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


def _is_compiled(m):
    """Whether m's call is compiled: torch.compile(m)'s OptimizedModule, or
    a module compiled in place (m.compile())."""
    return (type(m).__name__ == "OptimizedModule"
            or getattr(m, "_compiled_call_impl", None) is not None)


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
        # the autograd sequence numbers [first, end) of the nodes the last
        # compiled calls made (their backward): autograd numbers the nodes
        # a thread makes in order, so one call's are one range, and calls
        # in order are ranges in order (one forward thread: the usual case)
        self.seq_first = []
        self.seq_end = []

    def _stack(self):
        s = getattr(self.tls, "stack", None)
        if s is None:
            s = self.tls.stack = []
        return s

    def _compiled(self):
        """The compiled module calls this thread is inside, outermost first:
        (the path it records under, the sequence number of the first
        autograd node it makes); (None, 0) for one nested in another."""
        c = getattr(self.tls, "compiled", None)
        if c is None:
            c = self.tls.compiled = []
        return c

    def in_compiled(self):
        """Whether this thread runs a compiled module's forward, or a
        backward node its forward made (ops mode records neither: inside,
        ATen ops are what the compiled code happens to call around its fused
        kernels, not the eager program's)."""
        if self._compiled():
            return True
        if not self.seq_first or _current_node is None:
            return False
        node = _current_node()
        if node is None:
            return False
        n = node._sequence_nr()
        i = bisect.bisect_right(self.seq_first, n) - 1
        return i >= 0 and n < self.seq_end[i]

    def _compiled_range(self, first, end):
        if self.seq_first and first < self.seq_end[-1]:   # another thread's, or numbers reset
            del self.seq_first[:], self.seq_end[:]
        if len(self.seq_first) >= 4096:                   # the oldest half: long since backward
            del self.seq_first[:2048], self.seq_end[:2048]
        self.seq_first.append(first)
        self.seq_end.append(end)

    # pre and post return at once while dynamo traces them (it inlines the
    # hooks of the modules it compiles; is_compiling() is a constant there,
    # so they add nothing to the graph and break nothing) and, run eagerly,
    # record nothing inside a compiled module's call but its boundary (the
    # eager parts of a compiled module, around graph breaks, are not the
    # eager program's: what runs there depends on where dynamo broke).

    def pre(self, module, args):
        if _compiling():
            return None
        if _dynamo_on is not None and _dynamo_on() is not None:
            return self._pre_off(module, args)
        return self._pre(module, args)

    def post(self, module, args, output):
        if _compiling():
            return None
        if _dynamo_on is not None and _dynamo_on() is not None:
            return self._post_off(module, args, output)
        return self._post(module, args, output)

    @guarded("a module's forward (pre-hook)")
    def _pre(self, module, args):
        compiled = self._compiled()
        is_compiled = _is_compiled(module)
        if compiled and not is_compiled:
            return None
        stack = self._stack()
        if compiled:
            compiled.append((None, 0))
            return None
        if not is_compiled and type(module).__name__ in _WRAPPERS:
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
        if is_compiled:
            compiled.append((path, _next_seq() if _next_seq else 0))
            for name, t in tensors.leaves(args, path + ":input", []):
                tensors.record(name, t)
            return None
        stack.append(path)
        return None

    @guarded("a module's outputs")
    def _post(self, module, args, output):
        compiled = self._compiled()
        at_boundary = bool(compiled)
        if at_boundary:
            if not _is_compiled(module):
                return None
            path, first = compiled.pop()
            if path is not None and _next_seq:
                self._compiled_range(first, _next_seq())
        else:
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

    # _pre and _post where dynamo's frame callback is set (inside a compiled
    # call): torch.compiler.disable'd by _for_dynamo, so that dynamo
    # compiles none of the frames they run (a wrapper of some microseconds,
    # paid only there)
    _pre_off = _pre
    _post_off = _post

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
    """Global optimizer step hooks: gradients before, parameters and state after."""

    def __init__(self, names):
        self.names = names

    def pname(self, p, gi, pi):
        n = self.names.params.get(id(p))
        return n if n is not None else "group%d.%d" % (gi, pi)

    @guarded("an optimizer step's gradients")
    def pre(self, opt, args, kwargs):
        steps.ensure()
        for gi, g in enumerate(opt.param_groups):
            for pi, p in enumerate(g["params"]):
                if p.grad is not None:
                    tensors.record("grad." + self.pname(p, gi, pi), p.grad)

    def post(self, opt, args, kwargs):
        try:
            self.record_after(opt)
        finally:
            steps.end_optimizer_step()

    @guarded("an optimizer step's parameters and state")
    def record_after(self, opt):
        cls = type(opt).__name__
        for gi, g in enumerate(opt.param_groups):
            for pi, p in enumerate(g["params"]):
                n = self.pname(p, gi, pi)
                tensors.record("param." + n, p)
                st = opt.state.get(p)
                if not st:
                    continue
                for k, v in st.items():
                    if isinstance(v, torch.Tensor) and k != "step" and v.dim() > 0:
                        tensors.record(_state_name(cls, k) + "." + n, v)
            lr = g.get("lr")
            if isinstance(lr, (int, float)):
                tensors.record("lr" if gi == 0 else "lr.group%d" % gi, torch.tensor(float(lr), dtype=torch.float64))


_current = None


def current_module_recorder():
    """The ModuleRecorder install() made (None before)."""
    return _current


# what _for_dynamo prepares: code objects dynamo must not compile as frames
# of their own, and (object, attribute, function) to torch.compiler.disable
_dynamo_skip = []
_dynamo_disable = []
_dynamo_ready = []


def _for_dynamo():
    """Readies the hooks for dynamo, once, before the first torch.compile
    (importing torch._dynamo costs a second: not paid by eager programs).

    Dynamo compiles a hook that code it skips calls (the root module's own
    _call_impl, a backward() after a graph break) as a frame of its own:
    pre and post would be one more frame each and a recompile per module
    type (the recompile limit). Their code is skipped as a frame (they
    return at once inside a compiled module; dynamo still inlines them, as
    no-ops, into the graphs of the modules it traces), and the recording
    they call there is torch.compiler.disable'd."""
    if _dynamo_ready:
        return
    _dynamo_ready.append(True)
    try:
        from torch._dynamo.eval_frame import skip_code
        for code in _dynamo_skip:
            skip_code(code)
        for obj, attr, fn in _dynamo_disable:
            setattr(obj, attr, torch.compiler.disable(fn))
    except Exception as e:  # noqa: BLE001 (a torch without these: compiled runs may differ)
        import sys
        sys.stderr.write("tftrace: preparing the torch hooks for torch.compile failed (%s: %s); "
                         "compiled code may be recorded differently\n" % (type(e).__name__, e))


def _wrap_compile():
    """torch.compile readies the hooks (_for_dynamo) first; nn.Module.compile
    calls it too."""
    real = getattr(torch, "compile", None)
    if real is None:
        return

    def compile(*args, **kwargs):
        _for_dynamo()
        return real(*args, **kwargs)

    functools.update_wrapper(compile, real)
    torch.compile = compile


def install(names):
    """Registers the global hooks; returns the handles (kept by the caller)."""
    global _current
    mr = _current = ModuleRecorder(names)
    _dynamo_skip.extend((mr.pre.__func__.__code__, mr.post.__func__.__code__))
    _dynamo_disable.extend(((mr, "_pre_off", mr._pre), (mr, "_post_off", mr._post)))
    _wrap_compile()
    # torch.compile(module) warns, at every call, that global hooks fire an
    # extra time for its OptimizedModule: these are tftrace's, which record
    # that module once (as its inner module); the untraced run has no warning
    import warnings
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
                            category=UserWarning)
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
    _wrap_clip()
    return handles


_in_backward = threading.local()


def _wrap_backward():
    real_tensor_backward = torch.Tensor.backward
    real_autograd_backward = torch.autograd.backward

    @guarded("the loss")
    def record_loss(t):
        steps.ensure()
        tensors.record(b"loss", t.detach())

    def note_loss(t):
        if getattr(_in_backward, "on", False):
            return False
        _in_backward.on = True
        if isinstance(t, torch.Tensor):
            record_loss(t)
        return True

    # note_loss inside a compiled function (torch.compiler.disable'd by _for_dynamo)
    note = types.SimpleNamespace(off=note_loss)
    _dynamo_disable.append((note, "off", note_loss))

    def noting(real, loss_of):
        """real, recording loss_of(its first argument) unless a backward is
        already in progress on this thread (Tensor.backward calls
        torch.autograd.backward)."""
        def wrapper(first, *args, **kwargs):
            if _compiling():
                return real(first, *args, **kwargs)  # the graph break it is untraced
            if _dynamo_on is not None and _dynamo_on() is not None:
                mine = note.off(loss_of(first))  # in a compiled function, after its graph break
            else:
                mine = note_loss(loss_of(first))
            try:
                return real(first, *args, **kwargs)
            finally:
                if mine:
                    _in_backward.on = False
        wrapper.__doc__ = real.__doc__
        _dynamo_skip.extend((wrapper.__code__, loss_of.__code__))
        return wrapper

    tensor_backward = noting(real_tensor_backward, lambda t: t)
    autograd_backward = noting(real_autograd_backward,
                               lambda ts: ts[0] if isinstance(ts, (list, tuple)) and ts else ts)

    torch.Tensor.backward = tensor_backward
    torch.autograd.backward = autograd_backward


def _wrap_clip():
    import torch.nn.utils as nu
    import torch.nn.utils.clip_grad as cg
    real = cg.clip_grad_norm_

    @guarded("the gradient norm")
    def record_norm(total):
        if isinstance(total, torch.Tensor):
            steps.ensure()
            tensors.record(b"grad_norm", total.detach())

    def clip_grad_norm_(*args, **kwargs):
        total = real(*args, **kwargs)
        record_norm(total)
        return total

    clip_grad_norm_.__wrapped__ = real
    clip_grad_norm_.__doc__ = real.__doc__
    cg.clip_grad_norm_ = clip_grad_norm_
    nu.clip_grad_norm_ = clip_grad_norm_

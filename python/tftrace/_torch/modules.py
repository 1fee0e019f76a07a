"""Module, loss and optimizer hooks: what ``tftrace --torch`` records by default.

Names (docs/PYTORCH.md has the full table):

- a module's forward outputs: its path from the root model, ``model`` for
  the first root module that has parameters (``model.blocks.0.attn``); other
  root modules (a loss module called on its own) by their class name in
  lower case (``crossentropyloss``; several, made while training: the
  rules in Names). Wrappers that only forward to an inner module
  (DistributedDataParallel, FSDP's outer wrapper) are transparent: their
  inner module is the root. A compiled module (torch.compile's
  OptimizedModule, or one compiled in place) is recorded at its boundary
  only, under the name its module has: its inputs (``P:input``), outputs
  and output gradients, nothing from inside (docs/PYTORCH.md, "Under
  torch.compile").
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

import bisect
import functools
import sys
import threading
import types
import weakref

import torch

from .. import _lib
from .._record import DTYPE, OP_OTHER, guarded, steps
from . import tensors
from . import resume as _resume
from .unseen import tracing, unseen

# the TENSOR context flags (tft_types.h, format 1.7), when the library has the call
_TRAIN, _EVAL, _NO_GRAD = 0x2, 0x4, 0x8
try:
    _CONTEXT = hasattr(_lib.lib(), "tft_tensor_context")
except _lib.TftLibraryError:
    _CONTEXT = False

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


class WeakIds:
    """A map keyed by objects' identity that holds them weakly: an entry
    goes when its object dies, so a later object at the same address never
    finds it. (torch.utils.weak.WeakIdKeyDictionary does the same, but
    makes a reference object at every lookup: this runs for every module
    call.)"""

    def __init__(self):
        self.d = {}  # id(obj) -> (weakref.ref(obj), value)

    def get(self, obj, default=None):
        e = self.d.get(id(obj))
        return e[1] if e is not None and e[0]() is obj else default

    def __contains__(self, obj):
        e = self.d.get(id(obj))
        return e is not None and e[0]() is obj

    def __setitem__(self, obj, value):
        k, d = id(obj), self.d
        e = d.get(k)
        if e is not None and e[0]() is obj:
            d[k] = (e[0], value)
            return

        def gone(r):
            if d.get(k, (None,))[0] is r:
                del d[k]
        d[k] = (weakref.ref(obj, gone), value)

    def setdefault(self, obj, value):
        if obj not in self:
            self[obj] = value
        return self.get(obj)

    def __getitem__(self, obj):
        e = self.d.get(id(obj))
        if e is None or e[0]() is not obj:
            raise KeyError(obj)
        return e[1]


class Names:
    """Module and parameter names, by the roots they were called under.

    Everything is keyed by weak identity (an entry goes with its object), so
    a module or parameter made later never inherits a dead one's name.
    Names depend on the program's order of calls alone, never on addresses
    or on how many instances were made before:

    - the first root module with parameters is ``model``; other roots with
      parameters are named by their class in lower case, ``.1``, ``.2``...
      by order of first call in the run;
    - a root without parameters (a loss module, made each step or not) is
      named by its class in lower case at each call; when another instance
      of that class was called before it in the same step, ``.1``, ``.2``...
      by order of first call in the step;
    - a module inside a root: its attribute path in the root
      (``named_modules``), re-read when a module the root did not hold at
      its last reading is called (a layer added during training; at most
      REREADS times a step after the first); a module the root does not
      hold at all: the caller's path + its class in lower case.
    """

    def __init__(self):
        self.roots = WeakIds()   # root with parameters -> its name
        self.taken = set()       # names of roots with parameters
        self.step_roots = (None, {})  # (step, {base name: [parameterless roots called, weakly]})
        self.trees = WeakIds()   # root -> (step of the last reading, WeakIds module -> "blocks.0.attn",
                                 #         readings before it in that step)
        self.params = WeakIds()  # parameter -> "model.lm_head.weight" (its first root's)

    def root_name(self, m):
        r = self.roots.get(m)
        if r is not None:
            return r
        base = type(m).__name__.lower()
        if not any(True for _ in m.parameters()):
            step, seen = self.step_roots
            if step != steps.current:
                seen = {}
                self.step_roots = (steps.current, seen)
            same = seen.setdefault(base, [])
            k = next((i for i, ref in enumerate(same) if ref() is m), None)
            if k is None:
                k = len(same)
                same.append(weakref.ref(m))
            name = base if k == 0 else "%s.%d" % (base, k)
            if m not in self.trees:
                self.index(m, name)
            return name
        if "model" not in self.taken:
            base = "model"
        name, k = base, 1
        while name in self.taken:
            name, k = "%s.%d" % (base, k), k + 1
        self.taken.add(name)
        self.roots[m] = name
        self.index(m, name)
        return name

    REREADS = 4  # re-readings of a root's tree a step at most (modules it never holds: one each)

    def index(self, root, name):
        """(Re-)reads root's module tree and names its new parameters."""
        tree = WeakIds()
        for sub, mod in root.named_modules():
            if sub:
                tree.setdefault(mod, sub)
        read = self.trees.get(root)
        n = read[2] + 1 if read is not None and read[0] == steps.current else 0
        self.trees[root] = (steps.current, tree, n)
        for pn, p in root.named_parameters():
            if p not in self.params:
                self.params[p] = name + "." + pn

    def path_of(self, m):
        """The path m was last given (a root's name, or its root's name +
        its attribute path), None when it has none yet. A slow path (it
        looks through every root): for reports, not for hooks."""
        r = self.roots.get(m)
        if r is not None:
            return r
        _, seen = self.step_roots
        for refs in seen.values():
            for k, ref in enumerate(refs):
                if ref() is m:
                    base = type(m).__name__.lower()
                    return base if k == 0 else "%s.%d" % (base, k)
        for ref, name in list(self.roots.d.values()):
            root = ref()
            read = self.trees.get(root) if root is not None else None
            sub = read[1].get(m) if read is not None else None
            if sub is not None:
                return name + "." + sub
        return None

    def name_of(self, m, root, root_path, parent):
        """Full path and scope segment of m called inside parent (a path)
        under root (named root_path)."""
        read = self.trees.get(root)
        sub = read[1].get(m) if read is not None else None
        if sub is None and read is not None and (read[0] != steps.current or read[2] < self.REREADS):
            self.index(root, root_path)
            sub = self.trees[root][1].get(m)
        p = root_path + "." + sub if sub is not None else parent + "." + type(m).__name__.lower()
        seg = p[len(parent) + 1:] if p.startswith(parent + ".") else p
        return p, seg


_CALL = torch.nn.Module._call_impl.__code__


def _call_frame():
    """The frame of the Module._call_impl running the hook that calls this
    (a few frames up), or None (hooks called another way)."""
    f = sys._getframe(1)
    for _ in range(12):
        if f is None or f.f_code is _CALL:
            return f
        f = f.f_back
    return None


class ModuleRecorder:
    """The global module hooks (forward pre/post) and the output-gradient hooks.

    Per thread, one entry per module call in progress: ``stack`` its path
    (None for a transparent wrapper; ops.py reads it), ``marks`` (the
    _call_impl frame running it, a weak reference to its root module and
    the root's name). A call that ends by a BaseException (KeyboardInterrupt)
    runs no forward hook: its entries stay, and are popped (their C scopes
    too) by the next hook that finds their frames no longer running above
    it. The frame is held until then (post drops it at a normal end)."""

    def __init__(self, names):
        self.names = names
        self.tls = threading.local()
        self.lib = tensors.hot_lib()
        # the autograd sequence numbers [first, end) of the nodes the last
        # compiled calls made (their backward): autograd numbers the nodes
        # a thread makes in order, so one call's are one range, and calls
        # in order are ranges in order (one forward thread: the usual case)
        self.seq_first = []
        self.seq_end = []
        from .model_state import ModelState
        from .perturb import Perturber
        self.state = ModelState(names, WeakIds)
        self.perturb = Perturber(WeakIds)

    def _stack(self):
        s = getattr(self.tls, "stack", None)
        if s is None:
            s = self.tls.stack = []
            self.tls.marks = []
        return s

    def _pop(self, stack, marks):
        marks.pop()
        if stack.pop() is not None:
            self.lib.tft_scope_pop()

    def _unwind(self, stack, marks, here):
        """Pops the entries whose calls are no longer running above frame here."""
        live = set()
        g = here.f_back
        while marks:
            f = marks[-1][0]
            if f is None:
                return
            while g is not None and id(f) not in live:
                if g.f_code is _CALL:
                    live.add(id(g))
                g = g.f_back
            if id(f) in live:  # (f is held: its id is not reused)
                return
            self._pop(stack, marks)

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
    @unseen
    def _pre(self, module, args):
        compiled = self._compiled()
        is_compiled = _is_compiled(module)
        if compiled and not is_compiled:
            return None
        stack = self._stack()
        marks = self.tls.marks
        here = _call_frame()
        if marks and here is not None:
            self._unwind(stack, marks, here)
        if compiled:
            compiled.append((None, 0))
            return None
        if not is_compiled and type(module).__name__ in _WRAPPERS:
            steps.ensure()            # (what the wrapper does before its module, DDP's syncs, is the step's)
            stack.append(None)        # transparent
            marks.append((here, None, None))
            return None
        parent = next((x for x in reversed(stack) if x is not None), None)
        if parent is None:
            root = _inner(module)
            path = seg = self.names.root_name(root)
            rootref = weakref.ref(root)
            if self.perturb.on and tracing() is None:
                self._perturb(root, path)   # (before anything of the forward, compiled or not)
        else:
            _, rootref, rpath = next(m for m in reversed(marks) if m[1] is not None)
            path, seg = self.names.name_of(module, rootref(), rpath, parent)
        steps.ensure()
        if parent is None and not is_compiled and tracing() is None:
            self._root_state(root, path, args, here)
        self.lib.tft_scope_push(seg.encode())
        if is_compiled:
            compiled.append((path, _next_seq() if _next_seq else 0))
            for name, t in tensors.leaves(args, path + ":input", []):
                tensors.record(name, t)
            return None
        stack.append(path)
        marks.append((here, rootref, path if parent is None else rpath))
        return None

    @guarded("--perturb's flip of the parameters")
    def _perturb(self, root, name):
        """tftrace --perturb: root's parameters flipped at its first forward (perturb.py)."""
        self.perturb.first_forward(root, name)

    @guarded("a root module's inputs, parameters and buffers")
    def _root_state(self, root, name, args, here):
        """A root's forward arguments (keywords from its _call_impl frame),
        its parameters at its first forward and its buffers (model_state.py)."""
        kwargs = here.f_locals.get("kwargs") if here is not None else None
        self.state.inputs(root, name, args, kwargs if isinstance(kwargs, dict) else None)
        self.state.first_forward(root, name, not self.state.trained and not _resume.loaded)

    @guarded("a module's outputs")
    @unseen
    def _post(self, module, args, output):
        compiled = self._compiled()
        if compiled:
            if not _is_compiled(module):
                return None
            path, first = compiled.pop()
            if path is not None and _next_seq:
                self._compiled_range(first, _next_seq())
        else:
            stack = self._stack()
            marks = self.tls.marks
            if not stack:
                return None
            here = _call_frame()
            if here is not None and marks[-1][0] is not here:
                if not any(m[0] is here for m in marks):
                    return None   # a call whose pre-hook pushed nothing
                while marks[-1][0] is not here:  # calls inside it ended by a BaseException it caught
                    self._pop(stack, marks)
            marks.pop()
            path = stack.pop()
        if path is None:
            return None
        try:
            if output is not None and tracing() is None:
                self.record_output(path, output, module)
        finally:
            self.lib.tft_scope_pop()
        return None

    # _pre and _post where dynamo's frame callback is set (inside a compiled
    # call): torch.compiler.disable'd by _for_dynamo, so that dynamo
    # compiles none of the frames they run (a wrapper of some microseconds,
    # paid only there)
    _pre_off = _pre
    _post_off = _post

    def record_output(self, path, output, module=None):
        """Records the tensor leaves of a module's output, in its context:
        training or eval mode, gradient recording on or off (the TENSOR
        flags TRAIN/EVAL/NO_GRAD, FORMAT.md §5.4)."""
        flags = 0
        if module is not None and _CONTEXT:
            flags = (_TRAIN if module.training else _EVAL) | (0 if torch.is_grad_enabled() else _NO_GRAD)
            self.lib.tft_tensor_context(flags)
        try:
            for name, t in tensors.leaves(output, path, []):
                tensors.record(name, t)
                if t.requires_grad and t.grad_fn is not None:
                    t.register_hook(_grad_hook("grad." + name))
        finally:
            if flags:
                self.lib.tft_tensor_context(0)


@guarded("a gradient")
@unseen
def _record_grad(bname, g):
    if g is not None:
        steps.ensure()
        tensors.record(bname, g)


def _grad_hook(name):
    bname = name.encode()

    def hook(g):
        _record_grad(bname, g)
        return None
    return hook


@guarded("the buffers after an optimizer step")
def _buffers_after_step(state):
    state.after_step()


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
        self.opt_index = weakref.WeakKeyDictionary()   # optimizer -> its number, in order of first step

    def pname(self, opt, p, gi, pi):
        """A parameter's name: its module path; else its place in the
        optimizer, "group0.1" (the first optimizer's), "opt1.group0.1" (a
        second one's: the per-layer optimizers of a forward-forward network
        must not share names)."""
        n = self.names.params.get(p)
        if n is not None:
            return n
        k = self.opt_index.get(opt)
        if k is None:
            k = self.opt_index[opt] = len(self.opt_index)
        return ("group%d.%d" % (gi, pi)) if k == 0 else ("opt%d.group%d.%d" % (k, gi, pi))

    @guarded("an optimizer step's gradients")
    def pre(self, opt, args, kwargs):
        if _compiling():  # an optimizer step inside a compiled function: dynamo must see no recording
            return
        steps.ensure()
        grads, lrs = {}, {}
        self.tls.before = (grads, lrs)
        for gi, g in enumerate(opt.param_groups):
            for pi, p in enumerate(g["params"]):
                if p.grad is not None:
                    grads[(gi, pi)] = tensors.record("grad." + self.pname(opt, p, gi, pi), p.grad)
            lr = g.get("lr")
            if isinstance(lr, (int, float)):
                lrs[gi] = tensors.record_scalar(b"lr" if gi == 0 else b"lr.group%d" % gi, float(lr))

    def post(self, opt, args, kwargs):
        if _compiling():
            return
        try:
            self.record_after(opt)
            if _current is not None:
                _buffers_after_step(_current.state)
                _current.perturb.after_step()
        finally:
            steps.end_optimizer_step()

    @guarded("an optimizer step's parameters and state")
    def record_after(self, opt):
        grads, lrs = getattr(self.tls, "before", None) or ({}, {})
        self.tls.before = None
        cls = type(opt).__name__
        lib = tensors.hot_lib()
        name = (cls + ".step").encode()
        began = False
        try:
            for gi, g in enumerate(opt.param_groups):
                for pi, p in enumerate(g["params"]):
                    n = self.pname(opt, p, gi, pi)
                    ins = [i for i in (grads.get((gi, pi)), lrs.get(gi)) if i] + self.state_ids.get(n, [])
                    tensors.op_begin(name, OP_OTHER, ins)
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
    # the recording itself, reached from hooks that run eagerly in a compiled
    # function's graph breaks (an optimizer step, a gradient hook): never a
    # frame dynamo compiles (its recompile limit, and warnings the untraced
    # run does not print)
    _dynamo_skip.extend((tensors.record.__code__, tensors.record_scalar.__code__, tensors._record_slow.__code__,
                         OptimizerRecorder.pre.__code__, OptimizerRecorder.pre.__wrapped__.__code__,
                         OptimizerRecorder.post.__code__, OptimizerRecorder.record_after.__code__))
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
        # (unseen inside: _pre and _post; pre and post themselves stay plain
        # functions for dynamo to skip, and return at once while it traces)
        nnm.register_module_forward_pre_hook(mr.pre),
        nnm.register_module_forward_hook(mr.post, always_call=True),
        optimizer.register_optimizer_step_pre_hook(unseen(orc.pre)),
        optimizer.register_optimizer_step_post_hook(unseen(orc.post)),
    ]
    _wrap_backward()
    from . import amp, init_count
    amp.install()
    init_count.install()
    return handles


_in_backward = threading.local()


def _wrap_backward():
    """Tensor.backward and torch.autograd.backward, recording the loss.

    The wrappers take exactly what the originals take (any argument by
    keyword too) and carry their name, qualname, module, doc and signature
    (functools.wraps; inspect.signature follows __wrapped__)."""
    real_tensor_backward = torch.Tensor.backward
    real_autograd_backward = torch.autograd.backward

    from .amp import unscaled

    @guarded("the loss")
    @unseen
    def record_loss(t):
        if tracing() is None:
            steps.ensure()
            tensors.record(b"loss", unscaled(t))

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
        """real, recording loss_of(its arguments) unless a backward is
        already in progress on this thread (Tensor.backward calls
        torch.autograd.backward)."""
        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            if _compiling():
                return real(*args, **kwargs)  # the graph break it is untraced
            if _dynamo_on is not None and _dynamo_on() is not None:
                mine = note.off(loss_of(args, kwargs))  # in a compiled function, after its graph break
            else:
                mine = note_loss(loss_of(args, kwargs))
            try:
                return real(*args, **kwargs)
            finally:
                if mine:
                    _in_backward.on = False
        _dynamo_skip.extend((wrapper.__code__, loss_of.__code__))
        return wrapper

    def first_tensor(args, kwargs):
        ts = args[0] if args else kwargs.get("tensors")
        return ts[0] if isinstance(ts, (list, tuple)) and ts else ts

    torch.Tensor.backward = noting(real_tensor_backward, lambda a, kw: a[0] if a else kw.get("self"))
    torch.autograd.backward = noting(real_autograd_backward, first_tensor)


"""What a program can observe of tftrace --torch: nothing (docs/PYTORCH.md,
"What the program can never observe"). The CPU tests.

A pytest module; ctest runs one test per case (torch/CMakeLists.txt,
python.torch.api-CASE):

    VENV/bin/python -m pytest test_api.py::test_CASE -s --tftrace T --tfdiff D --tfdump U
        --python PY --pythonpath DIR

Each case runs a small program untraced and traced and requires the same
printed observations, exactly: the signatures and names of the functions
tftrace wraps, the calls a __torch_function__ subclass sees, the ops a
TorchDispatchMode sees, torch.jit.trace's warnings, losses as float.hex.
The scope and names cases read the trace itself: the scope of the records
made after a KeyboardInterrupt caught by the program, and the names of
modules made while training (two runs of one program match in tfdiff).
Every comparison is counted (check()); a case that compared nothing fails.
"""

import json
import os
import shutil
import tempfile

import pytest

import torch_sh  # (this folder)

A = None       # the tools (conftest.py's tools fixture)
WORK = None    # this test's folder
CHECKS = [0]   # comparisons made


@pytest.fixture(autouse=True)
def harness(tools, count_checks):
    global A, WORK
    A = tools
    WORK = tempfile.mkdtemp(prefix="tft-api-")
    CHECKS[0] = 0
    yield
    if not os.environ.get("TFT_KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)
    count_checks(CHECKS[0])


def check(cond, msg):
    CHECKS[0] += 1
    if not cond:
        pytest.fail(msg)


def run(cmd, env=None, ok=(0,)):
    e = {"TFT_PYTHON_DIR": A.pythonpath}
    e.update(env or {})
    return torch_sh.run(cmd, ok=ok, env=e)


def program(name, text):
    path = os.path.join(WORK, name + ".py")
    with open(path, "w") as f:
        f.write(text)
    return path


def traced(prog, name, mode="modules"):
    """Runs prog under tftrace --torch MODE; returns (trace, process)."""
    t = os.path.join(WORK, name + ".trace")
    shutil.rmtree(t, ignore_errors=True)
    return t, run([A.tftrace, "-q", "-o", t, "--torch", mode, "--", A.python, prog])


def same_as_untraced(name, text, modes=("modules",)):
    """The program prints the same traced (each mode) as untraced, and
    nothing about tftrace on stderr; returns (what it printed, the trace
    of its first mode)."""
    prog = program(name, text)
    want = run([A.python, prog]).stdout
    check(want.strip(), "%s printed nothing untraced" % name)
    first = None
    for mode in modes:
        t, p = traced(prog, name + "-" + mode, mode)
        first = first or t
        check(p.stdout == want, "%s under --torch %s printed\n%s\nuntraced\n%s" % (name, mode, p.stdout, want))
        said = [l for l in p.stderr.splitlines() if l.startswith("tftrace")]
        check(not said, "%s under --torch %s: %s" % (name, mode, "\n".join(said)))
    return want, first


def events(t, kind):
    p = run([A.tfdump, "--events", "--json", "--kind", kind, t])
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


# ---------------------------------------------------------------- cases

_API_PROG = r'''
import inspect
import torch
import torch.nn.utils.clip_grad as cg

torch.manual_seed(0)
m = torch.nn.Linear(3, 1)
x = torch.randn(4, 3)
calls = [
    lambda l: torch.autograd.backward(tensors=l),
    lambda l: torch.autograd.backward(tensors=[l], grad_tensors=None, retain_graph=False),
    lambda l: torch.autograd.backward([l]),
    lambda l: l.backward(gradient=None, retain_graph=False),
    lambda l: torch.Tensor.backward(self=l),
    lambda l: torch.Tensor.backward(l, None, False),
]
for call in calls:
    call(m(x).sum())
    print("grad", m.weight.grad.sum().item().hex())
print("norm", torch.nn.utils.clip_grad_norm_(parameters=m.parameters(), max_norm=0.5).item().hex())
print("norm", cg.clip_grad_norm_(m.parameters(), 0.5, norm_type=1.0).item().hex())
for f in (torch.Tensor.backward, torch.autograd.backward, torch.nn.utils.clip_grad_norm_, cg.clip_grad_norm_,
          m(x).sum().backward):
    print(f.__name__, f.__qualname__, f.__module__, len(f.__doc__ or ""), inspect.signature(f))
'''


def test_api():
    """The functions tftrace wraps (Tensor.backward, torch.autograd.backward,
    clip_grad_norm_) take the same arguments, keywords included, and keep
    their names, module, doc and signature."""
    same_as_untraced("api", _API_PROG)


_SUBCLASS_PROG = r'''
import torch

calls = []


class Seen(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        calls.append(getattr(func, "__name__", repr(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(2):
    x = torch.randn(5, 3).as_subclass(Seen)
    loss = torch.nn.functional.mse_loss(m(x), torch.zeros(5, 2))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    n = len(calls)
    print("step", step, "calls", n, " ".join(calls))
    print("loss", float(loss).hex())
    del calls[:]
'''


def test_torch_function():
    """A __torch_function__ subclass sees the program's calls only."""
    same_as_untraced("subclass", _SUBCLASS_PROG)


_MODE_PROG = r'''
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class T(torch.nn.Module):
    def forward(self, x):
        return x.t()  # a view that is not contiguous


torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(3, 4), T())
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(5, 3)
with Log() as log:
    for step in range(2):
        loss = m(x).square().mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
print(len(log.ops), "ops")
print("\n".join(log.ops))
print("loss", float(loss).hex())
'''


def test_dispatch_mode():
    """A TorchDispatchMode the program enters sees its ops only (a
    non-contiguous module output, the loss, the gradient norm, the lr)."""
    same_as_untraced("mode", _MODE_PROG, modes=("modules", "ops"))


_JIT_PROG = r'''
import warnings
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        return torch.relu(self.a(x)).t() @ self.b(self.a(x))


torch.manual_seed(0)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    tm = torch.jit.trace(M(), torch.randn(2, 3))
print(len(w), "warnings")
for x in w:
    print(x.category.__name__, str(x.message).splitlines()[0][:100])
print(tm(torch.ones(2, 3)).sum().item().hex())
'''


def test_jit_trace():
    """torch.jit.trace warns as often traced as untraced (both modes)."""
    same_as_untraced("jit", _JIT_PROG, modes=("modules", "ops"))


_INTERRUPT_PROG = r'''
import torch


class Stop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.armed = False

    def forward(self, x):
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt  # Ctrl-C in a notebook cell
        return x


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.stop = Stop()

    def forward(self, x):
        return self.stop(self.lin(x))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 3)
for step in range(3):
    model.stop.armed = step == 1
    try:
        loss = model(x).square().mean()
    except KeyboardInterrupt:
        print("interrupted")
        continue
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("loss", loss.item().hex())
'''


def test_interrupt():
    """A KeyboardInterrupt raised in a module's forward and caught by the
    program leaves no scope behind: the records after it have the scopes
    of an uninterrupted run."""
    printed, t = same_as_untraced("interrupt", _INTERRUPT_PROG)
    check("interrupted" in printed, "the program was not interrupted: %s" % printed)
    # trace step 1: the interrupted forward, then the program's step 2
    scopes = {(e["step"], e["name"]): e["scope"] for e in events(t, "op")}  # the last of each
    want = {"model.lin": "model/lin", "model.stop": "model/stop", "model": "model", "loss": None,
            "grad.model": None, "SGD.step": None}   # (the optimizer step's op: outside every module)
    for step in (0, 1):
        for name, scope in want.items():
            got = scopes.get((step, name), "(not recorded)")
            check(got == scope, "step %d: %s recorded in scope %r, want %r" % (step, name, got, scope))


_NAMES_PROG = r'''
import sys
import torch



class Lazy(torch.nn.Module):
    def forward(self, x):
        if not hasattr(self, "proj"):  # a layer made at the first forward
            self.proj = torch.nn.Linear(4, 4)
        return self.proj(x)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), Lazy())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
keep = []
x, y = torch.randn(8, 4), torch.randint(0, 4, (8,))
for step in range(4):
    if step == 2:  # a layer added after the first forward
        model.add_module("head", torch.nn.Linear(4, 4))
        opt.add_param_group({"params": model.head.parameters()})
    out = model(x)
    loss = torch.nn.CrossEntropyLoss()(out, y)          # a loss module made each step
    if step % 2:                                        # another one the program keeps
        keep.append(torch.nn.CrossEntropyLoss(label_smoothing=0.1))
        loss = loss + keep[-1](out, y)
    garbage = [torch.nn.Tanh() for _ in range(int(sys.argv[1]) * step)]  # ids taken and freed
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("loss", loss.item().hex())
'''


def test_names():
    """Modules made while training are named by the rules of
    docs/PYTORCH.md, whatever ids they get: two runs that allocate
    differently match in tfdiff."""
    prog = program("names", _NAMES_PROG)
    traces = []
    for k in ("1", "7"):
        t = os.path.join(WORK, "names%s.trace" % k)
        p = run([A.tftrace, "-q", "-o", t, "--torch", "--", A.python, prog, k])
        traces.append(t)
    names = {}
    for e in events(traces[0], "tensor"):
        names.setdefault(e["step"], set()).add(e["name"])
    for step in range(4):
        got = names.get(step, set())
        want = {"model", "model.0", "model.1", "model.2.proj", "crossentropyloss", "loss", "param.model.0.weight"}
        want |= {"crossentropyloss.1"} if step % 2 else set()
        want |= {"model.head", "param.model.head.weight", "grad.model.head"} if step >= 2 else set()
        check(want <= got, "step %d: no %s (recorded: %s)" % (step, sorted(want - got), sorted(got)))
        extra = sorted(n for n in got if n.split(".")[0] in ("model", "crossentropyloss") and n not in want
                       and n != "model.2" and ".input." not in n)   # (a root's inputs: model_state.py)
        check(not extra, "step %d: modules named %s" % (step, extra))
    p = run([A.tfdiff, traces[0], traces[1]], ok=(0, 1))
    check(p.returncode == 0, "two runs of one program differ:\n%s" % p.stdout[-3000:])


_NESTED_PROG = r'''
import warnings
import torch
warnings.filterwarnings("ignore")  # nested tensors are a prototype API
torch.manual_seed(0)


class Pass(torch.nn.Module):
    def forward(self, x):
        return x * 2


m = Pass()
for layout in (torch.strided, torch.jagged):
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=layout)
    out = m(nt)
    print(layout, [tuple(c.shape) for c in out.unbind()], float(sum(c.sum() for c in out.unbind())))
'''


def test_nested():
    """Nested tensors (strided and jagged layouts) as a module's input and
    output: recorded with their shape only (components, regular dimensions,
    0 for the ragged one), the program's output unchanged."""
    _, t = same_as_untraced("nested", _NESTED_PROG)
    ts = [e for e in events(t, "tensor") if e["name"] in ("pass", "pass.input.x")]
    check(len(ts) == 4, "nested tensors recorded: %s, want 4 (input and output, two layouts)" % ts)
    check(all(e["shape"] == [2, 0, 3] for e in ts), "nested shapes %s, want [2, 0, 3]" % [e["shape"] for e in ts])


_VIEWS_PROG = r'''
import os
import torch
torch.manual_seed(0)

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool)


class Views(torch.nn.Module):
    """Returns, per dtype, views that are not contiguous (transposed,
    sliced with a step, expanded, permuted and sliced, empty) each
    followed by its dense copy: the module's output leaves [2k] and
    [2k+1] must get the same statistics."""
    def forward(self, x):
        outs = []
        for dt in DTYPES:
            y = (x * 7).abs().to(dt) if dt in (torch.uint8, torch.bool) else (x * 7).to(dt)
            for v in (y.transpose(0, 2), y[:, ::3, 1:], y[..., 5:6].expand(6, 10, 4),
                      y.permute(2, 0, 1)[1:, :, ::2], y[2], y[:, :0], y[:, 1].t()):
                outs += [v, v.contiguous()]
        big = torch.tensor([1e200, -3e250, 2.0, 7.0], dtype=torch.float64).expand(3, 4).t()
        z = x.new_empty(300, 257).normal_().t()   # larger than the 16 KiB gather buffer
        outs += [big, big.contiguous(), z, z.contiguous()]
        return tuple(outs)


x = torch.randn(6, 10, 12)
x[0, 0, 0] = float("nan")
x[1, 2, 3] = float("inf")
x[4, 5, 6] = 1e6
with torch.no_grad():
    out = Views()(x)
print(len(out), sum(float(o.double().nan_to_num(0.0, 0.0, 0.0).sum()) for o in out))
if os.environ.get("TFT_SHM") and os.environ.get("VIEWS_COUNTS"):   # traced: which path recorded them
    from tftrace._torch import tensors
    with open(os.environ["VIEWS_COUNTS"], "w") as f:
        f.write("%s %s\n" % tensors.fast_module.counts() if tensors.fast_module else "none\n")
'''


def _stats_of(t):
    return {e["name"]: (e["dtype"], e["shape"], e["mode"], e["stats"]) for e in events(t, "tensor")
            if e["name"].startswith("views[")}


def test_views():
    """Tensor views (transposed, strided slices, expanded, permuted, empty;
    every dtype) are recorded in place by the C extension, with statistics
    and fingerprint equal bit for bit to those of their dense copies and to
    the Python path's (TFT_PYREC=0); the program's output is unchanged."""
    prog = program("views", _VIEWS_PROG)
    want = run([A.python, prog]).stdout
    counts = os.path.join(WORK, "counts")
    seen = {}
    for label, env in (("extension", {"VIEWS_COUNTS": counts}), ("python", {"TFT_PYREC": "0"})):
        t = os.path.join(WORK, "views-%s.trace" % label)
        p = run([A.tftrace, "-q", "-o", t, "--torch", "--", A.python, prog],
                env=dict(env, TFT_PYTHON_DIR=A.pythonpath))
        check(p.stdout == want, "views under --torch (%s) printed %r, untraced %r" % (label, p.stdout, want))
        seen[label] = _stats_of(t)
    ext = seen["extension"]
    n = int(want.split()[0])
    check(len(ext) == n, "views: %d output tensors recorded, want %d" % (len(ext), n))
    for k in range(0, n, 2):
        a, b = ext.get("views[%d]" % k), ext.get("views[%d]" % (k + 1))
        check(a is not None and a == b, "views[%d] (a view) recorded %s, its dense copy %s" % (k, a, b))
    check(ext == seen["python"], "the extension's records differ from the Python path's: %s" %
          [k for k in ext if ext[k] != seen["python"].get(k)][:5])
    with open(counts) as f:
        got = f.read().split()
    check(got != ["none"], "the extension _tftrace_rec did not load under --torch")
    check(int(got[0]) >= n and int(got[1]) == 0,
          "extension counts (recorded, declined) = %s: every view should take its path" % got)

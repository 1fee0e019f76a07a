"""torch.compile under tftrace --torch: the CPU tests (docs/PYTORCH.md, "Under torch.compile").

A pytest module; ctest runs one test per case (torch/CMakeLists.txt,
python.torch.compile-CASE):

    VENV/bin/python -m pytest test_compile.py::test_CASE -s --tftrace T --tfdump U --python PY
        --pythonpath DIR (and the other options test_torch.py is given)

Each case runs a small compiled training program (_PROG: a two-block MLP
language model, AdamW, three steps, inductor) untraced and under tftrace,
and checks what a user would notice: the losses bit for bit, the graphs,
graph breaks and frames dynamo reports, and that the trace holds the
compiled module's boundary (its input, its output, the gradient reaching
it, the loss) and nothing from inside it. Inductor's compiled code is
cached (TORCHINDUCTOR_CACHE_DIR, by default under /tmp): a cold cache costs
about 30 s a case on 2 cores, a warm one a few.
"""

import json
import os
import shutil
import tempfile

import pytest

import torch_sh  # (this folder)

A = None      # the tools (conftest.py's tools fixture)
WORK = None   # this test's folder
CHECKS = [0]  # checks made (a test that made none fails)

STEPS = 3

# argv: torch.compile mode, how (module: torch.compile(model); inplace:
# model.compile()), "break" for a graph break inside each block
_PROG = r'''
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

mode, how, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
BREAK = "break" in sys.argv[4:]
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        h = F.gelu(self.fc(self.ln(x)))
        if BREAK:
            torch._dynamo.graph_break()
        return x + self.proj(h)


class Net(nn.Module):
    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
if how == "module":
    run = torch.compile(model, mode=mode)
else:
    model.compile(mode=mode)
    run = model
x = torch.randint(0, 32, (4, 8))
y = torch.randint(0, 32, (4, 8))
for step in range(steps):
    opt.zero_grad()
    logits = run(x)
    loss = F.cross_entropy(logits.view(-1, 32), y.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    print("step %d loss %s" % (step, float(loss.detach()).hex()))
from torch._dynamo.utils import counters
print("dynamo " + json.dumps({k: dict(counters[k]) for k in ("frames", "stats", "graph_break")}, sort_keys=True))
'''


@pytest.fixture(autouse=True)
def harness(tools, count_checks):
    """Sets A and WORK (a fresh folder, kept when TFT_KEEP is set) and counts the checks."""
    global A, WORK
    A = tools
    WORK = tempfile.mkdtemp(prefix="tft-compile-")
    CHECKS[0] = 0
    yield
    if not os.environ.get("TFT_KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)
    count_checks(CHECKS[0])


def check(cond, msg):
    CHECKS[0] += 1
    if not cond:
        pytest.fail(msg)


def run(cmd, timeout=300):
    return torch_sh.run(cmd, timeout=timeout, env={"PYTHONPATH": A.pythonpath})


def needs_cxx():
    """Inductor compiles C++ on the CPU: without a compiler the case skips."""
    if not (os.environ.get("CXX") or any(shutil.which(c) for c in ("g++", "c++", "clang++"))):
        pytest.skip("no C++ compiler for inductor (g++, c++, clang++ or CXX)")


def program(args, mode=None):
    """Runs _PROG with args, untraced (mode None) or under tftrace --torch
    mode; returns (its loss lines, its dynamo counters line, the trace or
    None, its stderr)."""
    prog = os.path.join(WORK, "compiled.py")
    if not os.path.exists(prog):
        with open(prog, "w") as f:
            f.write(_PROG)
    cmd = [A.python, prog] + list(args)
    t = None
    if mode is not None:
        t = os.path.join(WORK, "%s-%s.trace" % (mode, "-".join(args)))
        cmd = [A.tftrace, "-q", "-o", t, "--torch", mode, "--"] + cmd
    p = run(cmd)
    lines = p.stdout.splitlines()
    losses = [l for l in lines if l.startswith("step ")]
    dyn = [l for l in lines if l.startswith("dynamo ")]
    if len(losses) != STEPS or len(dyn) != 1:
        pytest.fail("%s printed no losses or counters:\n%s\n%s" % (" ".join(cmd), p.stdout[-2000:],
                                                                   p.stderr[-2000:]))
    return losses, dyn[0], t, p.stderr


def tensors(t):
    """step -> names of the tensors recorded in it."""
    p = run([A.tfdump, "--events", "--json", "--kind", "tensor", t])
    by_step = {}
    for l in p.stdout.splitlines():
        if l.strip():
            e = json.loads(l)
            by_step.setdefault(e.get("step"), set()).add(e.get("name"))
    return by_step


def same_run(args, modes):
    """The program under each mode against untraced: the losses bit for bit
    and dynamo's counters (frames, graphs, graph breaks) equal; returns the
    traces by mode."""
    needs_cxx()
    base_losses, base_dyn, _, _ = program(args)
    traces = {}
    for mode in modes:
        losses, dyn, t, err = program(args, mode)
        what = "--torch %s %s" % (mode, " ".join(args))
        check(losses == base_losses, "%s: losses differ from untraced:\n%s\nvs\n%s"
              % (what, "\n".join(losses), "\n".join(base_losses)))
        check(dyn == base_dyn, "%s: dynamo's counters differ from untraced:\n%s\nvs\n%s\n%s"
              % (what, dyn, base_dyn, err[-2000:]))
        check("tftrace: recording" not in err, "%s: a recording failed:\n%s" % (what, err[-2000:]))
        check("recompile_limit" not in err and "global hooks" not in err,
              "%s: torch.compile warns:\n%s" % (what, err[-2000:]))
        traces[mode] = t
    print("%s: %s; %s" % (" ".join(args), base_dyn[:200], base_losses[-1]))
    return traces


def boundary_only(t, what, ops=False):
    """Each step of trace t holds the compiled model's boundary (its input,
    output, the gradient reaching it), the loss and the parameters, and
    nothing from inside the model (no submodule, no op of its own)."""
    by_step = tensors(t)
    for step in range(STEPS):
        names = by_step.get(step, set())
        for want in ("model:input[0]", "model", "grad.model", "loss", "param.model.head.weight"):
            check(want in names, "%s, step %d: %s not recorded (have %s)" % (what, step, want, sorted(names)[:40]))
        params = {n[len("param."):] for n in names if n.startswith("param.")}
        inside = sorted(n for n in names if n.startswith(("model.", "model:aten"))
                        or (n.startswith("grad.model.") and n[len("grad."):] not in params)
                        or any(op in n for op in ("aten.mm", "addmm", "gelu", "layer_norm", "embedding")))
        check(not inside, "%s, step %d: recorded from inside the compiled model: %s" % (what, step, inside[:20]))
        if ops:
            check("aten.nll_loss_forward[0]" in names,
                  "%s, step %d: the loss's own ATen ops not recorded" % (what, step))


# ---------------------------------------------------------------- cases


def test_modules():
    """torch.compile(model) under --torch: one graph, no break, as untraced."""
    t = same_run(["default", "module", str(STEPS)], ["modules"])
    boundary_only(t["modules"], "--torch")


def test_ops():
    """torch.compile(model) with a graph break in each block under --torch ops:
    the dispatch mode leaves compilation alone and records neither the
    compiled forward nor its backward."""
    t = same_run(["default", "module", str(STEPS), "break"], ["ops"])
    boundary_only(t["ops"], "--torch ops", ops=True)


def test_reduce_overhead():
    """model.compile(mode="reduce-overhead") (in place) under --torch and
    --torch ops (on the CPU there are no CUDA graphs: inductor as default)."""
    t = same_run(["reduce-overhead", "inplace", str(STEPS)], ["modules", "ops"])
    boundary_only(t["modules"], "--torch, in place")
    boundary_only(t["ops"], "--torch ops, in place", ops=True)

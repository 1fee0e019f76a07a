"""PyTorch recorded with no code change (tftrace --torch): the CPU tests.

A pytest module; ctest runs one test per case (torch/CMakeLists.txt):

    VENV/bin/python -m pytest test_torch.py::test_CASE -s --tftrace T --tfdiff D --tfdump U
        --python PY --gpt GPT --pythonpath DIR --tft-version V [--work DIR [--keep]]

PY is the virtual environment's python with torch (scripts/python-env.sh);
GPT is examples/pytorch/gpt_train.py, an ordinary PyTorch training script
with planted bugs. Each case records golden and bad runs and checks what a
user would read: that tracing leaves the losses bit-identical, that two
golden runs match, that each planted bug is localized by tfdiff to its step
and its module (with --torch ops: its op), and what torchrun + gloo DDP
desyncs look like. Failures name what differed. The helpers use the
module's globals A (the tools, conftest.py) and WORK (the folder for the
traces), which the fixture harness sets for each test.
"""

import json
import os
import re
import shutil
import sys
import tempfile

import pytest

import torch_sh  # (this folder)

A = None     # the tools (conftest.py's tools fixture)
WORK = None  # the folder for this test's traces


@pytest.fixture(autouse=True)
def harness(tools):
    """Sets A and WORK: --work (kept with --keep), else a fresh folder
    removed after the test (both kept when TFT_KEEP is set)."""
    global A, WORK
    A = tools
    WORK = tools.work or tempfile.mkdtemp(prefix="tft-torch-")
    os.makedirs(WORK, exist_ok=True)
    yield
    if not os.environ.get("TFT_KEEP") and not tools.keep:
        shutil.rmtree(WORK, ignore_errors=True)


run = torch_sh.run


def losses(text):
    """The 'step N loss X' / 'rank R step N loss X' lines of a run."""
    got = [l for l in text.splitlines() if re.match(r"^(rank \d+ )?step \d+ loss ", l)]
    if not got:
        pytest.fail("no loss lines in:\n" + text[-2000:])
    return sorted(got)


def trace(name):
    p = os.path.join(WORK, name + ".trace")
    shutil.rmtree(p, ignore_errors=True)
    return p


def record(name, args, mode="modules", torchrun=0, extra=(), ok=(0,), timeout=300):
    """Runs the GPT under tftrace --torch; returns (trace path, process)."""
    t = trace(name)
    prog = [A.python, A.gpt] if not torchrun else \
        [A.python, "-m", "torch.distributed.run", "--nproc_per_node", str(torchrun), A.gpt]
    cmd = [A.tftrace, "-q", "-o", t, "--torch", mode] + list(extra) + ["--"] + prog + list(args)
    if torchrun:
        # gloo's teardown at interpreter exit sometimes aborts a rank that
        # has finished ("terminate called without an active exception",
        # untraced too): that run is retried once, into a fresh trace
        p = run(cmd, timeout=timeout, ok=None)
        if ok is None or p.returncode in ok:
            return t, p
        if "terminate called without an active exception" not in p.stderr:
            pytest.fail("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(cmd), p.returncode, p.stdout[-3000:],
                                                           p.stderr[-3000:]))
        shutil.rmtree(t, ignore_errors=True)
    return t, run(cmd, timeout=timeout, ok=ok)


def peak_rss_mib(cmd):
    """Peak RSS (MiB) of the biggest process cmd ran (a fresh python3
    waits for it, so RUSAGE_CHILDREN holds that command's processes only)."""
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "check=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = run([sys.executable, "-c", code] + list(cmd))
    return int(p.stdout.split()[-1]) / 1024.0


def untraced(args, torchrun=0):
    prog = [A.python, A.gpt] if not torchrun else \
        [A.python, "-m", "torch.distributed.run", "--nproc_per_node", str(torchrun), A.gpt]
    return run(prog + list(args))


def diff(golden, bad, want):
    p = run([A.tfdiff, "--json", golden, bad], ok=(0, 1, 3))
    d = json.loads(p.stdout)
    if want is not None and p.returncode != want:
        pytest.fail("tfdiff %s %s exited %d, want %d: %s" % (golden, bad, p.returncode, want, p.stdout[:3000]))
    return d


def events(t, kind=None):
    cmd = [A.tfdump, "--events", "--json"] + (["--kind", kind] if kind else []) + [t]
    p = run(cmd)
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def tensor_names(t):
    return {e["name"] for e in events(t, "tensor") if "name" in e}


# ---------------------------------------------------------------- cases


def test_golden():
    """Tracing changes nothing (losses, memory); two golden runs match; the
    names are there. Leaves golden.trace in --work for the bug cases."""
    args = ["--steps", "4"]
    base = losses(untraced(args).stdout)
    g1, p1 = record("golden", args)
    if losses(p1.stdout) != base:
        pytest.fail("traced losses differ from untraced:\n%s\nvs\n%s" % (losses(p1.stdout), base))
    g2, _ = record("g2", args)
    d = diff(g1, g2, 0)
    if d["verdict"] != "match":
        pytest.fail("golden vs golden: %s" % d["verdict"])
    names = tensor_names(g1)
    want = ["model.tok_emb", "model.pos_emb", "model.blocks.0.attn", "model.blocks.0.attn.qkv",
            "model.blocks.1.mlp.fc", "model.lm_head", "model", "grad.model.blocks.0.attn",
            "grad.model.lm_head", "loss", "grad_norm", "lr", "param.model.lm_head.weight",
            "grad.model.lm_head.weight", "adam.m.model.lm_head.weight", "adam.v.model.lm_head.weight",
            "param.model.blocks.0.attn.qkv.weight"]
    missing = [n for n in want if n not in names]
    if missing:
        pytest.fail("names missing from the trace: %s (it has e.g. %s)" % (missing, sorted(names)[:30]))
    ev = events(g1)
    steps = sorted({e["step"] for e in ev if e.get("kind") == "step"})
    if steps != [0, 1, 2, 3]:
        pytest.fail("steps %s, want 0..3 (one per optimizer step)" % steps)
    scopes = {e.get("scope") for e in ev if e.get("kind") == "op"}
    if "model/blocks.0/attn/qkv" not in scopes:
        pytest.fail("no scope model/blocks.0/attn/qkv among %s" % sorted(s for s in scopes if s)[:20])
    # the loss recorded is the one printed
    loss0 = [e for e in ev if e.get("kind") == "tensor" and e.get("name") == "loss" and e.get("step") == 0]
    printed = float(base[0].split()[-1])
    if not loss0 or abs(loss0[0]["stats"]["mean"] - printed) > 1e-6 * abs(printed):
        pytest.fail("loss record %s vs printed %s" % (loss0[:1], printed))
    # the notebook's three lines (docs/PYTORCH.md): the loss curve as a DataFrame
    code = ("import sys, tftrace; df = tftrace.open(sys.argv[1]).tensors(name='loss'); "
            "print(type(df).__name__, [int(s) for s in df['step']], ' '.join(repr(float(x)) for x in df['mean']))")
    p = run([A.python, "-c", code, g1], env={"PYTHONPATH": A.pythonpath})
    want = "DataFrame [0, 1, 2, 3] " + " ".join(repr(float(l.split()[-1])) for l in base)
    if p.stdout.strip() != want:
        pytest.fail("tftrace.open().tensors(name='loss') says %r, want %r" % (p.stdout.strip(), want))
    # no retained tensors: the traced run's peak memory within 5% of the untraced one's
    plain = peak_rss_mib([A.python, A.gpt] + args)
    traced = peak_rss_mib([A.tftrace, "-q", "-o", trace("rss"), "--torch", "--", A.python, A.gpt] + args)
    print("peak RSS: untraced %.0f MiB, --torch %.0f MiB (%.3fx)" % (plain, traced, traced / plain))
    if traced > 1.05 * plain:
        pytest.fail("--torch peak RSS %.0f MiB > 1.05 x untraced %.0f MiB" % (traced, plain))


# bug -> (module-mode tensor, ops-mode tensor prefix or None); all planted at step 2
BUGS = {
    "causal-off-by-one": ("model.blocks.0.attn.proj", "model.blocks.0.attn:aten."),
    "no-attn-scale": ("model.blocks.0.attn.proj", "model.blocks.0.attn:aten."),
    "zero-pos-emb": ("model.pos_emb", None),
    "labels-not-shifted": ("input.targets", None),   # the model's input (before: its output)
    "loss-over-padding": ("input.targets", None),    # (the padding's targets)
    "grads-not-zeroed": ("grad_norm", None),
}


def check_bug(golden, bad, bug, want, ops=False):
    d = diff(golden, bad, 1)
    fd = d.get("first_divergence") or pytest.fail("%s: no first divergence: %s" % (bug, json.dumps(d)[:2000]))
    if fd["step"] != 2:
        pytest.fail("%s: first divergence at step %s, want 2 (%s)" % (bug, fd["step"], fd))
    name = fd["tensor"]
    if (ops and not name.startswith(want)) or (not ops and name != want):
        pytest.fail("%s: first divergence in %s, want %s%s" % (bug, name, want, "*" if ops else ""))
    if ops:
        o = d.get("origin") or {}
        if o.get("tensor") != name:
            pytest.fail("%s: origin %s, want the diverging op itself (inputs equal, output not)" % (bug, o))
    print("%-20s step %d  %s  (origin %s)" % (bug, fd["step"], name, (d.get("origin") or {}).get("op")))


def bugs(which):
    args = ["--steps", "4"]
    g = os.path.join(WORK, "golden.trace")
    if not os.path.isdir(g):
        g, _ = record("golden", args)
    for bug in which:
        b, _ = record("b-" + bug, args + ["--bug", bug + "@2"])
        check_bug(g, b, bug, BUGS[bug][0])


def test_bugs_model():
    bugs(["causal-off-by-one", "no-attn-scale", "zero-pos-emb"])


def test_bugs_loss():
    bugs(["labels-not-shifted", "loss-over-padding", "grads-not-zeroed"])


def test_ops():
    """--torch ops: golden vs golden match; the op inside attn that differs."""
    args = ["--steps", "3"]
    g1, p1 = record("og1", args, mode="ops")
    if losses(p1.stdout) != losses(untraced(args).stdout):
        pytest.fail("--torch ops changed the losses")
    g2, _ = record("og2", args, mode="ops")
    if diff(g1, g2, 0)["verdict"] != "match":
        pytest.fail("ops golden vs golden differ")
    ops = {e.get("name") for e in events(g1, "op")}
    for want in ("aten.addmm", "aten._softmax", "aten.native_layer_norm", "aten.embedding"):
        if want not in ops:
            pytest.fail("op %s not recorded (have %s)" % (want, sorted(o for o in ops if o)[:40]))
    for bug in ("causal-off-by-one", "no-attn-scale"):
        b, _ = record("ob-" + bug, args + ["--bug", bug + "@2"], mode="ops")
        check_bug(g1, b, bug, BUGS[bug][1], ops=True)


def collectives(t):
    return [e for e in events(t, "collective")]


def test_ddp():
    """torchrun --nproc_per_node 2, gloo DDP: golden = no desync; losses as untraced."""
    args = ["--steps", "3"]
    base = losses(untraced(args, torchrun=2).stdout)
    g, p = record("dg", args, torchrun=2)
    if losses(p.stdout) != base:
        pytest.fail("DDP: traced losses differ from untraced:\n%s\nvs\n%s" % (losses(p.stdout), base))
    man = json.load(open(os.path.join(g, "manifest.json")))
    ranks = sorted(r["rank"] for r in man["ranks"])
    if ranks != [0, 1]:
        pytest.fail("DDP trace ranks %s, want [0, 1] (torchrun's agent is not a rank)" % ranks)
    chk = run([A.tfdump, "--check", "--json", g], ok=(0, 1))
    j = json.loads(chk.stdout)
    if j.get("desync"):
        pytest.fail("golden DDP run has desyncs: %s" % j["desync"])
    cs = collectives(g)
    names = {(c["rank"], c["name"]) for c in cs}
    for r in (0, 1):
        for n in ("DDP.init", "DDP.allreduce"):
            if (r, n) not in names:
                pytest.fail("rank %d has no %s collective (%s)" % (r, n, sorted(names)))
    comm = {c["comm"] for c in cs}
    if len(comm) != 1:
        pytest.fail("DDP's group should be one communicator, got %s" % comm)


def test_ddp_skip_allreduce():
    """A rank that skips a gradient all-reduce: the hang, and who is missing."""
    args = ["--steps", "4"]
    b, p = record("dsb", args + ["--bug", "skip-allreduce@2"], torchrun=2, extra=["--timeout", "45"],
                  ok=None, timeout=200)
    chk = run([A.tfdump, "--check", "--json", b], ok=(0, 1))
    ds = json.loads(chk.stdout).get("desync") or pytest.fail("no desync found: %s" % chk.stdout[:3000])
    first = ds[0]
    if first["step"] != 2 or first["kind"] != "missing" or first["ranks"] != [1]:
        pytest.fail("first desync %s, want step 2 naming rank 1 (missing)" % first)
    # rank 0's all-reduce failed when rank 1 left (gloo: connection closed):
    # it never completed, so the trace must not say it did
    if "completed" in first["detail"]:
        pytest.fail("a failed all-reduce reported as completed: %s" % first["detail"])
    print("desync:", first["kind"], first["detail"])


def test_ddp_no_param_broadcast():
    """Parameters not broadcast (init_sync=False, seeds differ): a values desync at step 0."""
    args = ["--steps", "2"]
    b, _ = record("dnb", args + ["--bug", "no-param-broadcast"], torchrun=2)
    chk = run([A.tfdump, "--check", "--json", b], ok=(0, 1))
    ds = json.loads(chk.stdout).get("desync") or pytest.fail("no desync in %s" % chk.stdout[:2000])
    v = [x for x in ds if x["kind"] == "values" and x["step"] == 0]
    if not v:
        pytest.fail("no values desync at step 0: %s" % ds)
    if not any("DDP.init" in x["detail"] for x in v):
        pytest.fail("the values desync does not name DDP.init: %s" % v)
    print("desync:", v[0]["detail"])


def test_imports_tftrace():
    """A traced program that imports tftrace itself (tftrace.step marks steps)."""
    args = ["--steps", "3", "--import-tftrace"]
    t, p = record("imp", args)
    if losses(p.stdout) != losses(untraced(["--steps", "3"]).stdout):
        pytest.fail("--import-tftrace changed the losses")
    steps = sorted({e["step"] for e in events(t, "step")})
    if steps != [0, 1, 2]:
        pytest.fail("steps %s with tftrace.step, want [0, 1, 2]" % steps)
    # untraced, importing tftrace does nothing and needs no LD_PRELOAD
    env = {"PYTHONPATH": A.pythonpath}
    run([A.python, A.gpt, "--steps", "1", "--import-tftrace"], env=env)
    p = run([A.python, "-c", "import tftrace; print(tftrace.enabled(), tftrace.library_version())"], env=env)
    if p.stdout.split() != ["False", A.tft_version]:
        pytest.fail("untraced import tftrace: %r" % p.stdout)


def test_grad_accum():
    """Gradient accumulation: several backward passes, one step."""
    t, _ = record("acc", ["--steps", "3", "--grad-accum", "2"])
    ev = events(t, "tensor")
    steps = sorted({e["step"] for e in ev if e["name"] == "param.model.lm_head.weight"})
    if steps != [0, 1, 2]:
        pytest.fail("param records at steps %s, want [0, 1, 2]" % steps)
    n_loss = [sum(1 for e in ev if e["name"] == "loss" and e["step"] == s) for s in range(3)]
    if n_loss != [2, 2, 2]:
        pytest.fail("loss records per step %s, want two (two micro-batches) in each" % n_loss)


def test_sitecustomize():
    """--torch never shadows the program's own sitecustomize."""
    d = tempfile.mkdtemp(dir=WORK)
    with open(os.path.join(d, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    prog = os.path.join(d, "prog.py")
    with open(prog, "w") as f:
        f.write("import os, torch\nprint('user site', os.environ.get('USER_SITECUSTOMIZE_RAN'))\n"
                "m = torch.nn.Linear(4, 2)\nm(torch.ones(3, 4)).sum().backward()\n")
    t = trace("site")
    p = run([A.tftrace, "-q", "-o", t, "--torch", "--", A.python, prog], env={"PYTHONPATH": d})
    if "user site 1" not in p.stdout:
        pytest.fail("the user's sitecustomize did not run under --torch: %r %r" % (p.stdout, p.stderr))
    names = tensor_names(t)
    if "model" not in names or "loss" not in names:
        pytest.fail("hooks not installed next to the user's sitecustomize: %s" % sorted(names))
    # a Python program that never imports torch: untouched, records no tensors
    p = run([A.tftrace, "-q", "-o", trace("notorch"), "--torch", "--", A.python, "-c", "print(6*7)"])
    if p.stdout.strip() != "42" or p.stderr.strip():
        pytest.fail("a program without torch under --torch: %r %r" % (p.stdout, p.stderr))


_DTYPES_PROG = r"""
import sys, torch, tftrace
from tftrace._torch import tensors
torch.manual_seed(0)
x = torch.randn(6, 5, dtype=torch.float64) * 100
x[0, 0], x[0, 1], x[0, 2] = float("nan"), float("inf"), 0.0
cases = {"f32": x.float(), "f64": x, "f16": x.half(), "bf16": x.bfloat16(),
         "i32": x.nan_to_num(0, 0, 0).int(), "i64": x.nan_to_num(0, 0, 0).long(), "u8": x.nan_to_num(0, 0, 0).abs().clamp(0, 255).to(torch.uint8),
         "i8": x.nan_to_num(0, 0, 0).clamp(-128, 127).to(torch.int8), "bool": x > 0,
         "i16": x.nan_to_num(0, 0, 0).to(torch.int16)}
for n in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, n):
        cases[n] = x.clamp(-400, 400).to(getattr(torch, n))
tftrace.step(0)
for name, t in cases.items():
    tensors.record("dt." + name, t)
    tensors.record("nc." + name, t.t())          # not contiguous: a copy, same values
    tensors.record("cc." + name, t.t().contiguous())
tensors.record("zero_d", torch.tensor(3.5))
tensors.record("empty", torch.zeros(0, 4))
tensors.record("ndim10", torch.ones([2] * 10))
tftrace.end_step()
print("ok", len(cases))
"""


def test_tensors():
    """Every torch dtype recorded exactly: statistics against torch's own in
    double precision; a non-contiguous view equals its contiguous copy."""
    d = tempfile.mkdtemp(dir=WORK)
    prog = os.path.join(d, "dt.py")
    with open(prog, "w") as f:
        f.write(_DTYPES_PROG)
    t = trace("dtypes")
    run([A.tftrace, "-q", "-o", t, "--torch", "--", A.python, prog], env={"PYTHONPATH": A.pythonpath})
    recs = {e["name"]: e for e in events(t, "tensor")}
    import torch
    torch.manual_seed(0)
    x = torch.randn(6, 5, dtype=torch.float64) * 100
    x[0, 0], x[0, 1], x[0, 2] = float("nan"), float("inf"), 0.0
    want_dt = {"f32": "f32", "f64": "f64", "f16": "f16", "bf16": "bf16", "i32": "i32", "i64": "i64",
               "u8": "u8", "i8": "i8", "bool": "bool", "i16": "i16",
               "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
    conv = {"f32": x.float(), "f64": x, "f16": x.half(), "bf16": x.bfloat16(),
            "i32": x.nan_to_num(0, 0, 0).int(), "i64": x.nan_to_num(0, 0, 0).long(),
            "u8": x.nan_to_num(0, 0, 0).abs().clamp(0, 255).to(torch.uint8),
            "i8": x.nan_to_num(0, 0, 0).clamp(-128, 127).to(torch.int8), "bool": x > 0,
            "i16": x.nan_to_num(0, 0, 0).to(torch.int16)}
    for n in ("float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, n):
            conv[n] = x.clamp(-400, 400).to(getattr(torch, n))
    for name, tt in conv.items():
        r = recs.get("dt." + name) or pytest.fail("dtype %s not recorded (have %s)" % (name, sorted(recs)))
        if r["dtype"] != want_dt[name] or r["shape"] != [6, 5]:
            pytest.fail("%s recorded as %s %s" % (name, r["dtype"], r["shape"]))
        v = tt.double().flatten()
        fin = v[torch.isfinite(v)]
        st = r["stats"]
        exp = {"nan": int(torch.isnan(v).sum()), "pinf": int((v == float("inf")).sum()),
               "ninf": int((v == float("-inf")).sum()), "zero": int((v == 0).sum())}
        for k, e in exp.items():
            if st[k] != e:
                pytest.fail("%s: %s = %s, torch says %s" % (name, k, st[k], e))
        for k, e in (("min", fin.min()), ("max", fin.max()), ("mean", fin.mean()), ("l1", fin.abs().sum())):
            if abs(st[k] - float(e)) > 1e-9 * max(1.0, abs(float(e))):
                pytest.fail("%s: %s = %r, torch says %r" % (name, k, st[k], float(e)))
        nc, cc = recs["nc." + name], recs["cc." + name]
        if nc["stats"]["fingerprint"] != cc["stats"]["fingerprint"] or nc["shape"] != [5, 6]:
            pytest.fail("%s: a transposed view's record differs from its contiguous copy's" % name)
    for n, shape in (("zero_d", []), ("empty", [0, 4]), ("ndim10", [8, 2, 2, 2, 2, 2, 2, 2])):
        r = recs.get(n) or pytest.fail("%s not recorded" % n)
        if r["shape"] != shape:
            pytest.fail("%s shape %s, want %s" % (n, r["shape"], shape))
    print("dtypes recorded exactly:", ", ".join(sorted(want_dt[n] for n in conv)))


def test_mpirun():
    """tftrace --torch -- mpirun -np 2 python ...: every process recorded, ranks from MPI."""
    t = trace("mpi")
    p = run([A.tftrace, "-q", "-o", t, "--torch", "--", "mpirun", "--allow-run-as-root", "--oversubscribe",
             "-np", "2", A.python, A.gpt, "--steps", "2"], ok=None)
    if p.returncode != 0:
        if "mpirun" in p.stderr and ("not found" in p.stderr or "No such file" in p.stderr):
            pytest.skip("no mpirun")
        pytest.fail("mpirun run exited %d: %s" % (p.returncode, p.stderr[-2000:]))
    man = json.load(open(os.path.join(t, "manifest.json")))
    ranks = sorted(r["rank"] for r in man["ranks"])
    if ranks != [0, 1]:
        pytest.fail("mpirun ranks %s, want [0, 1]" % ranks)
    ev = events(t, "tensor")
    for r in (0, 1):
        steps = sorted({e["step"] for e in ev if e["rank"] == r and e["name"] == "loss"})
        if steps != [0, 1]:
            pytest.fail("rank %d loss records at steps %s" % (r, steps))


_NVTX_PROG = r"""
import torch
m = torch.nn.Linear(4, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for s in range(3):
    torch.cuda.nvtx.range_push("step %d" % (10 + s))
    for micro in range(2):
        opt.zero_grad(); m(torch.ones(3, 4)).sum().backward(); opt.step()
    torch.cuda.nvtx.range_pop()
"""


def test_nvtx_steps():
    """An NVTX 'step N' range numbers the steps (two optimizer steps inside
    each), under tftrace (the C recorder sees the range) and in-process
    without it (TFT_TORCH + TFT_OUTPUT + TFT_LIB: the Python layer does)."""
    d = tempfile.mkdtemp(dir=WORK)
    prog = os.path.join(d, "nv.py")
    with open(prog, "w") as f:
        f.write(_NVTX_PROG)
    t1 = trace("nvtx-launcher")
    run([A.tftrace, "-q", "-o", t1, "--torch", "--", A.python, prog])
    t2 = trace("nvtx-inproc")
    boot = os.path.join(A.pythonpath, "tftrace", "_boot")
    run([A.python, prog], env={"TFT_TORCH": "1", "TFT_OUTPUT": t2, "PYTHONPATH": boot + ":" + A.pythonpath})
    for t in (t1, t2):
        ev = events(t)
        steps = [(e["step"], e.get("phase")) for e in ev if e["kind"] == "step"]
        nums = sorted({s for s, _ in steps})
        if nums != [10, 11, 12] or len(steps) != 6:
            pytest.fail("%s: step records %s, want begin/end of 10, 11, 12" % (os.path.basename(t), steps))
        params = [e["step"] for e in ev if e["kind"] == "tensor" and e["name"] == "param.model.weight"]
        if params != [10, 10, 10, 11, 11, 12, 12]:   # (the first: before training, at the first forward)
            pytest.fail("%s: param records at steps %s" % (os.path.basename(t), params))


def test_check():
    """tfdump --check's detectors (docs/CHECK.md) on PyTorch traces (module
    names): a healthy run has no error or warning; lr 0 gives loss-flat; lr
    1.0 gives loss-rise, update-ratio and (with the clip threshold given)
    clipping active at every step, from grad_norm; grads-not-zeroed gives
    grad-accum on the token embedding's gradient."""
    sm = ["--steps", "30", "--layers", "1", "--d-model", "32", "--heads", "2", "--seq", "16"]

    def check(t, want_rc, *extra):
        p = run([A.tfdump, "--check", "--json"] + list(extra) + [t], ok=(want_rc,))
        fs = json.loads(p.stdout)["findings"]
        print("%s: %s" % (os.path.basename(t), [(f["severity"], f["kind"], f["step"], f["tensor"]) for f in fs]))
        return fs

    g, _ = record("chk_g", sm)
    bad = [f for f in check(g, 0) if f["severity"] in ("error", "warning")]
    if bad:
        pytest.fail("healthy PyTorch run has findings: %s" % bad)
    flat, _ = record("chk_flat", sm + ["--lr", "0"])
    if not [f for f in check(flat, 1) if f["kind"] == "loss-flat" and f["tensor"] == "loss" and f["step"] == 0]:
        pytest.fail("lr 0: no loss-flat finding on loss")
    div, _ = record("chk_div", sm + ["--lr", "1.0"])
    fs = check(div, 1, "--threshold", "clip=1")
    kinds = {f["kind"]: f for f in fs}
    if "loss-rise" not in kinds or kinds["loss-rise"]["tensor"] != "loss":
        pytest.fail("lr 1.0: no loss-rise finding on loss")
    if "update-ratio" not in kinds or not kinds["update-ratio"]["tensor"].startswith("param.model."):
        pytest.fail("lr 1.0: no update-ratio finding on a param.model.* tensor")
    if "clip-always" not in kinds or kinds["clip-always"]["tensor"] != "grad_norm":
        pytest.fail("lr 1.0 with --threshold clip=1: no clip-always note from grad_norm")
    # gradients not zeroed: the token embedding's gradient is sparse (rows of
    # unused tokens are zero); accumulated, its zero count only falls
    acc, _ = record("chk_acc", sm + ["--bug", "grads-not-zeroed"])
    if not [f for f in check(acc, 1) if f["kind"] == "grad-accum" and f["step"] == 1
            and f["tensor"] == "grad.model.tok_emb.weight"]:
        pytest.fail("grads-not-zeroed: no grad-accum finding at step 1 on grad.model.tok_emb.weight")


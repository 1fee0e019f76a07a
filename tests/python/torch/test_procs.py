"""Processes that are not the training are not ranks (tftrace --torch).

A pytest module, run like test_torch.py (torch/CMakeLists.txt: one ctest
per case, python.torch.procs-CASE, with the options of conftest.py):

    VENV/bin/python -m pytest test_procs.py::test_CASE -s --tftrace T --tfdiff D --tfdump U
        --python PY --gpt GPT --pythonpath DIR --tft-version V

The training script is procs_train.py beside this file: a small model
trained through a DataLoader. Its DataLoader workers (forked), the C++
compiler it runs through a shell (as torch.compile's inductor does), a
Python child that imports torch, and torch.compile itself must leave the
trace with one rank: world size 1, golden vs golden MATCH, and no leak
reported in a process that is not the training. A Python child that does
train is a rank of its own. Every comparison is counted (check()); a case
that compared nothing fails.
"""

import json
import os
import shutil
import tempfile

import pytest

import torch_sh  # (this folder)

A = None     # the tools (conftest.py's tools fixture)
WORK = None  # the folder for this test's traces
CHECKS = [0]
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "procs_train.py")


@pytest.fixture(autouse=True)
def harness(tools, count_checks):
    """Sets A and WORK (a fresh folder, removed after the test unless
    TFT_KEEP is set); counts the checks."""
    global A, WORK
    A = tools
    WORK = tempfile.mkdtemp(prefix="tft-procs-")
    CHECKS[0] = 0
    yield
    count_checks(CHECKS[0])
    if not os.environ.get("TFT_KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)


def check(ok, what):
    CHECKS[0] += 1
    if not ok:
        pytest.fail(what)


def run(cmd, timeout=300, ok=(0,), env=None):
    # inductor compiles into a cache of this test's own: a kernel another
    # run left in the shared cache would spare the compiler this test needs
    e = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(WORK, "inductor")}
    e.update(env or {})
    return torch_sh.run(cmd, timeout=timeout, ok=ok, env=e)


def record(name, args, mode="modules"):
    """procs_train.py ARGS under tftrace --torch MODE; returns the trace."""
    t = os.path.join(WORK, name + ".trace")
    p = run([A.tftrace, "-q", "-o", t, "--torch", mode, "--", A.python, SCRIPT] + list(args))
    check("step 0 loss" in p.stdout, "%s: no loss printed: %s" % (name, p.stdout[-1000:]))
    record.out = p.stdout
    return t


def processes(t):
    """The launcher's table of every process of the run (FORMAT.md §2.5):
    (comm, rank) pairs; empty when the build has no BPF support."""
    out = []
    for f in os.listdir(t):
        if f.startswith("processes-") and f.endswith(".json"):
            with open(os.path.join(t, f)) as fh:
                out += [(p["comm"], p["rank"]) for p in json.load(fh)["processes"]]
    return out


def one_rank(t, want=1):
    """The trace has want ranks: in the manifest, in tfdump's summary and
    as rank files; no leak at a rank that is not the training's."""
    with open(os.path.join(t, "manifest.json")) as f:
        man = json.load(f)
    ranks = sorted(r["rank"] for r in man["ranks"])
    files = sorted(f for f in os.listdir(t) if f.startswith("rank-") and f.endswith(".tft"))
    print("%s: manifest ranks %s, files %s, processes %s" % (os.path.basename(t), ranks, files, processes(t)))
    check(ranks == list(range(want)), "%s: manifest ranks %s, want %s (files %s)" % (t, ranks, list(range(want)),
                                                                                   files))
    check(len(files) == want, "%s: %d rank files, want %d: %s" % (t, len(files), want, files))
    p = run([A.tfdump, t])
    check("world size %d " % want in p.stdout and "ranks        %d\n" % want in p.stdout,
          "%s: tfdump's summary:\n%s" % (t, p.stdout[:1500]))
    # exit 1: findings (a Python heap live at exit is reported at the training rank)
    p = run([A.tfdump, "--check", "--json", t], ok=(0, 1))
    leaks = json.loads(p.stdout)["leaks"]
    print("leaks:", [(l["rank"], l["site"]) for l in leaks])
    check(not [l for l in leaks if l["rank"] >= want],
          "%s: tfdump --check reports leaks of processes that are not the training: %s"
          % (t, [(l["rank"], l["site"], l["live_bytes_at_end"]) for l in leaks if l["rank"] >= want]))
    return man


def match(g1, g2):
    p = run([A.tfdiff, "--json", g1, g2], ok=(0, 1, 3))
    d = json.loads(p.stdout)
    check(p.returncode == 0 and d["verdict"] == "match",
          "tfdiff %s %s: exit %d, verdict %s" % (g1, g2, p.returncode, d.get("verdict")))


# ---------------------------------------------------------------- cases


def test_workers():
    """A DataLoader with 2 forked workers: one rank, golden vs golden MATCH,
    no leak of a worker; --torch ops too (a worker's collation runs ATen
    ops under the recorder's dispatch mode, and still does not join)."""
    args = ["--workers", "2", "--steps", "6"]
    plain = run([A.python, SCRIPT] + args).stdout
    g1 = record("workers", args)
    check(record.out == plain, "traced losses differ from untraced:\n%s\nvs\n%s" % (record.out, plain))
    g2 = record("workers2", args)
    one_rank(g1)
    one_rank(g2)
    match(g1, g2)
    ops = record("workers-ops", args, mode="ops")
    one_rank(ops)


def test_helpers():
    """The training process runs g++ (a shell, cc1plus, as, ld below it)
    and a Python child that imports torch: one rank, golden vs golden
    MATCH, no leak of a helper. A child that trains (procs_train.py run by
    procs_train.py) is a rank: two."""
    args = ["--helpers"]
    g1 = record("helpers", args)
    g2 = record("helpers2", args)
    one_rank(g1)
    one_rank(g2)
    match(g1, g2)
    procs = processes(g1)
    if procs:  # with BPF: the helpers ran, and none has a rank
        check({"g++", "cc1plus", "sh"} <= {c for c, _ in procs}, "helpers not seen: %s" % procs)
        check(all(r is None for c, r in procs if c in ("g++", "cc1plus", "as", "ld", "sh", "collect2")),
              "a helper has a rank: %s" % procs)
    two = record("trainer-child", ["--child-trains"])
    one_rank(two, want=2)


def test_compile():
    """torch.compile on the loss: inductor runs g++ (and its cc1plus, as,
    ld) from the training process; the trace has one rank and no leak of
    a compiler."""
    t = record("compile", ["--compile", "--steps", "3"])
    one_rank(t)
    procs = processes(t)
    if procs:
        check("cc1plus" in {c for c, _ in procs}, "inductor ran no compiler (a cached kernel?): %s" % procs)

"""tfdump --check on one trace of each published silent-training-error
class (docs/CHECK.md "PyTorch traces: the silent errors"), and on healthy
programs, written for the test in tests/python/check/zoo.py (CPU, synthetic
data, a tiny GPT-like LM in Hugging Face's convention and a small CNN with
BatchNorm).

Each bug case must give --check's exit status 1 with its finding (kind, and
the severity error or warning); each healthy case exit 0 with no error or
warning. ``healthy-lm`` is also recorded under ``--torch ops`` (masked_fill's
-inf is a mask, not a first non-finite value) and run untraced: its printed
losses are bit-identical traced and untraced.

    VENV/bin/python -m pytest test_check_zoo.py -s --tftrace T --tfdiff D --tfdump U --python PY -k GROUP
"""

import json
import os

import pytest

from torch_sh import run  # (this folder)

ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "check", "zoo.py")

# case -> the finding kinds it must show (error or warning); [] = healthy
BUGS = {
    "opt-frozen-only": ["opt-noop"],
    "opt-wrong-group": ["opt-partial"],
    "frozen-trains": ["frozen-trains"],
    "reinit-many": ["init-repeat"],
    "init-zero": ["init-zero"],
    "eval-dropout": ["eval-nondet"],
    "eval-first": ["eval-far"],
    "zeroed-params": ["param-zeroed"],
    "zeroed-inputs": ["input-zeroed"],
    "labels-preshifted": ["label-preshift"],
    "labels-dtype-crash": ["dtype-change", "crash"],
    "lr-restart": ["lr-restart"],
    "loader-stuck": ["data-stuck"],
    "mask-future": ["mask-future"],
    "detached-hidden": ["no-grad"],
    "loss-bf16": ["loss-precision"],
    "clip-before-unscale": ["clip-scaled"],
    "grads-not-zeroed": ["grad-accum"],
}
HEALTHY = ["healthy-lm", "healthy-lm-noisy", "healthy-pad", "healthy-hfsched", "healthy-zero-pos", "healthy-amp",
           "healthy-vision", "healthy-compile", "ok-frozen", "ok-eval", "ok-amp"]


def record(tools, scratch, case, mode="modules"):
    trace = os.path.join(scratch, "%s.%s.trace" % (case, mode))
    p = run([tools.tftrace, "-q", "--torch", mode, "-o", trace, "--", tools.python, ZOO, "--case", case], ok=None,
            env={"OMP_NUM_THREADS": "1"}, timeout=300)
    assert os.path.isdir(trace), p.stderr[-2000:]
    return trace, p


def check(tools, trace):
    p = run([tools.tfdump, "--check", "--json", trace], ok=(0, 1))
    d = json.loads(p.stdout)
    kinds = {(f["kind"], f["severity"]) for f in d["findings"]}
    print("  %s: exit %d, %s" % (os.path.basename(trace), p.returncode, sorted(kinds)))
    return p.returncode, d, kinds


def judge(tools, scratch, case):
    trace, _ = record(tools, scratch, case)
    rc, d, kinds = check(tools, trace)
    want = BUGS.get(case, [])
    if not want:
        bad = [f for f in d["findings"] if f["severity"] in ("error", "warning")]
        assert rc == 0 and not bad and not d["leaks"] and not d["first_nonfinite"], (rc, bad, d["verdict"])
        return
    assert rc == 1, d["verdict"]
    for k in want:
        assert (k, "error") in kinds or (k, "warning") in kinds, (case, k, kinds)


@pytest.mark.parametrize("case", HEALTHY)
def test_healthy(tools, scratch, case):
    judge(tools, scratch, case)


@pytest.mark.parametrize("case", sorted(BUGS)[:9])
def test_bugs_a(tools, scratch, case):
    judge(tools, scratch, case)


@pytest.mark.parametrize("case", sorted(BUGS)[9:])
def test_bugs_b(tools, scratch, case):
    judge(tools, scratch, case)


def test_ops_and_invisible(tools, scratch):
    """--torch ops on the healthy LM (its causal mask is masked_fill(-inf)):
    exit 0, no first non-finite value; the printed losses equal the
    untraced run's, bit for bit."""
    trace, p = record(tools, scratch, "healthy-lm", mode="ops")
    rc, d, _ = check(tools, trace)
    assert rc == 0 and not d["first_nonfinite"], d["verdict"]
    plain = run([tools.python, ZOO, "--case", "healthy-lm"], env={"OMP_NUM_THREADS": "1"})
    assert p.stdout == plain.stdout and "loss" in plain.stdout, (p.stdout[-500:], plain.stdout[-500:])

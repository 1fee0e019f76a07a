"""An uncaught exception as a record (tftrace --torch, FORMAT.md §5.18).

A small training script raises inside a submodule's forward at a chosen
step. Checked: the traced run fails exactly as the untraced one (its exit
status and its traceback); tfdiff says "BAD raised RuntimeError at step 3
in model.tok_emb: ..." against a golden run, in text and JSON; tfdump's
summary and --events show the record; an exception the program catches, and
sys.exit(), write none.

    VENV/bin/python -m pytest test_errors.py -s --tftrace T --tfdiff D --tfdump U --python PY
"""

import json
import os
import subprocess

import pytest

SCRIPT = r'''
import os, sys, torch
torch.manual_seed(0)
CRASH_AT = int(os.environ.get("CRASH_AT", "-1"))
HOW = os.environ.get("HOW", "raise")

class Emb(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(16, 8)
    def forward(self, x, step):
        if step == CRASH_AT:
            raise RuntimeError("The size of tensor a (33) must match the size of tensor b (32)\nat dimension 1")
        return self.e(x)

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = Emb()
        self.head = torch.nn.Linear(8, 16)
    def forward(self, x, step):
        return self.head(self.tok_emb(x, step))

m = M()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(5):
    x = torch.randint(0, 16, (4, 6))
    if HOW == "caught":
        try:
            m(x, step)
        except RuntimeError as e:
            print("caught", str(e).split("\n")[0])
    logits = m(x, -2 if HOW == "caught" else step)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 16), x.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, "loss", float(loss.detach()).hex())
if HOW == "exit":
    sys.exit(3)
'''

MESSAGE = "The size of tensor a (33) must match the size of tensor b (32)"


@pytest.fixture
def job(tools, scratch):
    path = os.path.join(scratch, "train.py")
    with open(path, "w") as f:
        f.write(SCRIPT)

    def run(name, env, traced=True):
        e = dict(os.environ, **env)
        e.pop("LD_PRELOAD", None)
        t = os.path.join(scratch, name + ".trace")
        cmd = ([tools.tftrace, "-q", "-o", t, "--torch", "--"] if traced else []) + [tools.python, path]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, timeout=300)
        return t, p
    return run


def traceback_of(stderr):
    """The Python traceback a run printed: the program's own frames and the
    exception (nn.Module's call machinery takes another path when global
    module hooks are installed: its frames are left out, as are the
    launcher's own lines)."""
    lines = stderr.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Traceback")), None)
    if start is None:
        return []
    out = []
    for l in lines[start:]:
        if l.startswith(("tftrace", "  pid ")):
            continue
        if l.startswith("  File ") and "train.py" not in l:
            out.append(None)   # a frame of torch's: its lines skipped
            continue
        if l.startswith("    ") and out and out[-1] is None:
            continue
        out.append(l)
    return [l for l in out if l is not None]


def tool(tools, *args, ok=(0,)):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode not in ok:
        pytest.fail("%s exited %d: %s %s" % (" ".join(args), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def exceptions(tools, t):
    out = tool(tools, tools.tfdump, "--events", "--json", "--kind", "exception", t)
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def test_raised(tools, job):
    _, plain = job("plain", {"CRASH_AT": "3"}, traced=False)
    bad, p = job("bad", {"CRASH_AT": "3"})
    golden, g = job("golden", {})
    assert g.returncode == 0, g.stderr[-2000:]
    # the program fails as it does untraced: status, output, traceback
    assert (p.returncode, p.stdout) == (plain.returncode, plain.stdout) == (1, plain.stdout), (p.returncode, p.stderr)
    assert traceback_of(p.stderr) == traceback_of(plain.stderr) != [], (traceback_of(p.stderr), plain.stderr)
    # tfdiff: the cause first, in text and JSON
    text = tool(tools, tools.tfdiff, golden, bad, ok=(1,))
    want = "rank 0: BAD raised RuntimeError at step 3 in model.tok_emb: " + MESSAGE
    assert want in text.splitlines(), text
    assert text.splitlines().index(want) < min(i for i, l in enumerate(text.splitlines()) if "ended early" in l), text
    d = json.loads(tool(tools, tools.tfdiff, "--json", golden, bad, ok=(1,)))
    r = d["ranks"][0]
    assert r["bad_raised"] == {"type": "RuntimeError", "step": 3, "where": "model.tok_emb", "message": MESSAGE}, r
    assert "golden_raised" not in r, r
    # tfdump: the summary line and the record (frames innermost last, no nn.Module plumbing)
    summary = tool(tools, tools.tfdump, bad)
    assert "raised       rank 0: RuntimeError at step 3 in model.tok_emb: " + MESSAGE in summary, summary
    js = json.loads(tool(tools, tools.tfdump, "--json", bad))
    assert js["raised"]["0"]["where"] == "model.tok_emb", js.get("raised")
    ev = exceptions(tools, bad)
    assert len(ev) == 1 and ev[0]["step"] == 3 and ev[0]["message"] == MESSAGE, ev
    frames = ev[0]["frames"].splitlines()
    assert frames[-1].endswith(" in forward") and "train.py:" in frames[-1], frames
    assert not any("torch/nn/modules/module.py" in f for f in frames), frames
    # a run that did not raise has no record, and golden vs golden has no such line
    assert exceptions(tools, golden) == []
    assert "raised" not in tool(tools, tools.tfdump, golden)


@pytest.mark.parametrize("how", ["caught", "exit"])
def test_not_raised(tools, job, how):
    """An exception the program catches, and sys.exit(), are not recorded;
    the output is the untraced one."""
    env = {"CRASH_AT": "1" if how == "caught" else "-1", "HOW": how}
    _, plain = job("plain", env, traced=False)
    t, p = job(how, env)
    assert (p.returncode, p.stdout) == (plain.returncode, plain.stdout), (p.stdout, plain.stdout, p.stderr[-2000:])
    assert p.returncode == (3 if how == "exit" else 0)
    if how == "caught":
        assert "caught The size of tensor a" in p.stdout
    assert exceptions(tools, t) == []

"""A resumed run under tftrace --torch (python/tftrace/_torch/resume.py).

A small AdamW training saves model and optimizer state after step 2; a
second run loads them (torch.load, load_state_dict) and trains steps 3..5.
Checked: tracing changes no output; the resumed trace has one RESUME record
(the file, what was restored) and numbers its steps 3..5 from the
optimizer's state, so tfdiff matches it with the uninterrupted run on steps
3..5; a resume of the model alone says "no optimizer state" and tfdump
--check's ckpt-optim rule reports the optimizer state that was not restored.

    VENV/bin/python -m pytest test_resume.py -s --tftrace T --tfdiff D --tfdump U --python PY
"""

import json
import os

from torch_sh import sh  # (this folder)

SCRIPT = r'''
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.AdamW(m.parameters(), lr=0.01)
ckpt, mode = sys.argv[1], sys.argv[2]   # mode: save | resume | model-only
first = 0
if mode != "save":
    state = torch.load(ckpt)
    m.load_state_dict(state["model"])
    if mode == "resume":
        opt.load_state_dict(state["opt"])
    first = 3
for step in range(first, 6):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(5, 8, generator=g)
    y = torch.randint(0, 4, (5,), generator=g)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, "loss", float(loss.detach()).hex())
    if mode == "save" and step == 2:
        torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, ckpt)
'''


def test_resume(tools, scratch):
    with open(os.path.join(scratch, "train.py"), "w") as f:
        f.write(SCRIPT)
    py = [tools.python, "train.py", "ck.pt"]

    def traced(name, mode):
        return sh([tools.tftrace, "-q", "-o", name + ".trace", "--torch", "--"] + py + [mode], cwd=scratch)

    golden = traced("golden", "save")
    plain = sh(py + ["resume"], cwd=scratch)
    assert traced("resumed", "resume") == plain, "tracing changed the resumed run's output"
    assert plain.splitlines() == golden.splitlines()[3:], (plain, golden)

    def ckpts(t):
        out = sh([tools.tfdump, "--events", "--json", "--kind", "checkpoint", os.path.join(scratch, t)])
        return [json.loads(l) for l in out.splitlines() if l.strip()]
    r = ckpts("resumed.trace")
    assert len(r) == 1 and r[0]["action"] == "resume" and r[0]["step"] == 3 and r[0]["path"] == "ck.pt", r
    assert r[0]["recipe"] == "module Sequential; optimizer AdamW (state at step 3)", r
    assert ckpts("golden.trace") == []

    steps = {json.loads(l)["step"] for l in sh([tools.tfdump, "--events", "--json", "--kind", "step",
                                                os.path.join(scratch, "resumed.trace")]).splitlines()}
    assert steps == {3, 4, 5}, steps
    text = sh([tools.tfdiff, os.path.join(scratch, "golden.trace"), os.path.join(scratch, "resumed.trace")])
    assert text.startswith("tfdiff: MATCH") and "compared steps 3..5 only" in text, text

    # the model alone: said, and --check finds the optimizer state missing
    traced("model-only", "model-only")
    r = ckpts("model-only.trace")
    assert len(r) == 1 and r[0]["recipe"] == "module Sequential; no optimizer state", r
    check = sh([tools.tfdump, "--check", os.path.join(scratch, "model-only.trace")], ok=(0, 1))
    assert "ckpt-optim" in check, check
    assert "ckpt-optim" not in sh([tools.tfdump, "--check", os.path.join(scratch, "resumed.trace")], ok=(0, 1))

"""The optimizer step as ops, and the mode of module outputs, under tftrace --torch (python/tftrace/_torch/modules.py).

A small AdamW training; BAD doubles the learning rate from step 2. Checked:
each optimizer step is one ``AdamW.step`` op per parameter whose inputs are
the parameter's gradient, the group's lr (both recorded before the step) and
its state as the previous step left it, and whose outputs are ``param.P``
and the new state; tfdiff's first divergence is ``lr`` at step 2 (the
cause), not a parameter; tracing changes no output.

    VENV/bin/python -m pytest test_optim.py -s --tftrace T --tfdiff D --tfdump U --python PY
"""

import json
import os
import subprocess

import pytest

SCRIPT = r'''
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.AdamW(m.parameters(), lr=0.01)
for step in range(4):
    if sys.argv[1] == "bad" and step == 2:
        for g in opt.param_groups:
            g["lr"] = 0.02
    g = torch.Generator().manual_seed(step)
    x = torch.randn(5, 8, generator=g)
    y = torch.randint(0, 4, (5,), generator=g)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, "loss", float(loss.detach()).hex())
'''


def sh(args, ok=(0,), cwd=None):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=cwd,
                       timeout=300)
    if p.returncode not in ok:
        pytest.fail("%s exited %d: %s %s" % (" ".join(args), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def test_optimizer_ops(tools, scratch):
    with open(os.path.join(scratch, "train.py"), "w") as f:
        f.write(SCRIPT)
    for name in ("golden", "bad"):
        plain = sh([tools.python, "train.py", name], cwd=scratch)
        out = sh([tools.tftrace, "-q", "-o", name + ".trace", "--torch", "--", tools.python, "train.py", name],
                 cwd=scratch)
        assert out == plain, (name, out, plain)
    ev = [json.loads(l) for l in sh([tools.tfdump, "--events", "--json", "golden.trace"], cwd=scratch).splitlines()]
    by_id = {e["id"]: e for e in ev if e.get("kind") == "tensor"}
    ops = [e for e in ev if e.get("kind") == "op" and e.get("name") == "AdamW.step"]
    assert len(ops) == 4 * 4, "one op per parameter and step: %d" % len(ops)
    prev_state = {}
    for op in ops:
        outs = [e for e in ev if e.get("kind") == "tensor" and e.get("seq") == op["seq"]]
        names = [e["name"] for e in outs]
        p = names[0][len("param."):]
        assert names == ["param." + p, "adam.m." + p, "adam.v." + p], names
        ins = [by_id[i]["name"] for i in op["inputs"]]
        want = ["grad." + p, "lr"] + prev_state.get(p, [])
        assert ins == want, (op["step"], ins, want)
        assert all(by_id[i]["step"] == op["step"] for i in op["inputs"][:2])
        prev_state[p] = ["adam.m." + p, "adam.v." + p]
    d = json.loads(sh([tools.tfdiff, "--json", "golden.trace", "bad.trace"], ok=(1,), cwd=scratch))
    fd = d["first_divergence"]
    assert (fd["step"], fd["tensor"]) == (2, "lr"), fd


MODE_SCRIPT = r'''
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1), torch.nn.Linear(4, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(2):
    m.train()
    loss = m(torch.randn(3, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    m.eval()
    with torch.no_grad():
        m(torch.randn(3, 4))
    m[0].train()          # one submodule in training mode inside an eval model, grad on
    m(torch.randn(3, 4))
'''


def test_mode(tools, scratch):
    """Each module output says its module's mode and whether grad was on
    (TENSOR flags, FORMAT.md §5.4); other records say nothing."""
    with open(os.path.join(scratch, "mode.py"), "w") as f:
        f.write(MODE_SCRIPT)
    sh([tools.tftrace, "-q", "-o", "mode.trace", "--torch", "--", tools.python, "mode.py"], cwd=scratch)
    ev = [json.loads(l) for l in sh([tools.tfdump, "--events", "--json", "--kind", "tensor", "mode.trace"],
                                    cwd=scratch).splitlines()]
    outs = [(e["name"], e.get("training"), e.get("grad")) for e in ev if e["name"].startswith("model")]
    one = [("model.0", True, True), ("model.1", True, True), ("model.2", True, True), ("model", True, True),
           ("model.0", False, False), ("model.1", False, False), ("model.2", False, False), ("model", False, False),
           ("model.0", True, True), ("model.1", False, True), ("model.2", False, True), ("model", False, True)]
    assert outs == one * 2, outs
    others = [e for e in ev if not e["name"].startswith("model")]
    assert others and all("training" not in e and "grad" not in e for e in others), others[:3]
    text = sh([tools.tfdump, "--events", "--kind", "tensor", "mode.trace"], cwd=scratch)
    assert any(l.endswith(" eval no_grad") for l in text.splitlines()), text[:2000]

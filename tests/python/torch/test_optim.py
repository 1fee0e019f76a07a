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

from torch_sh import sh  # (this folder)

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
    """Each module output and the root's inputs say the module's mode and
    whether grad was on (TENSOR flags, FORMAT.md §5.4); other records say
    nothing."""
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
    # the root's inputs say its mode too (a validation batch is told from a
    # training one); every other record says nothing
    ins = [(e.get("training"), e.get("grad")) for e in ev if e["name"].startswith("input")]
    assert ins == [(True, True), (False, False), (False, True)] * 2, ins
    others = [e for e in ev if not e["name"].startswith(("model", "input"))]
    assert others and all("training" not in e and "grad" not in e for e in others), others[:3]
    text = sh([tools.tfdump, "--events", "--kind", "tensor", "mode.trace"], cwd=scratch)
    assert any(l.endswith(" eval no_grad") for l in text.splitlines()), text[:2000]


STATE_SCRIPT = r'''
import torch
torch.manual_seed(0)


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(32, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.head = torch.nn.Linear(8, 32)
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.head(self.bn(self.emb(input_ids).mean(1)))
        return torch.nn.functional.cross_entropy(logits, labels)


m = LM()
m.emb.weight.requires_grad_(False)       # frozen at first
opt = torch.optim.AdamW(m.parameters(), lr=0.01)
for step in range(3):
    if step == 2:
        m.emb.weight.requires_grad_(True)  # unfrozen
    ids = torch.randint(0, 32, (6, 5))
    loss = m(ids, attention_mask=torch.ones(6, 5, dtype=torch.bool), labels=ids[:, 0])
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_model_state(tools, scratch):
    """A root model's inputs by parameter name (an HF-style call with
    keyword labels), its parameters at the first forward and when
    requires_grad changes, its buffers at the first forward and after the
    steps that changed them (model_state.py)."""
    with open(os.path.join(scratch, "state.py"), "w") as f:
        f.write(STATE_SCRIPT)
    sh([tools.tftrace, "-q", "-o", "state.trace", "--torch", "--", tools.python, "state.py"], cwd=scratch)
    ev = [json.loads(l) for l in sh([tools.tfdump, "--events", "--json", "--kind", "tensor", "state.trace"],
                                    cwd=scratch).splitlines()]
    names = [(e["step"], e["name"]) for e in ev]
    for step in (0, 1, 2):
        got = [n for s, n in names if s == step and n.startswith("input.")]
        assert got == ["input.input_ids", "input.attention_mask", "input.labels"], (step, got)
    ids = [e for e in ev if e["name"] == "input.input_ids"]
    assert ids[0]["dtype"] == "i64" and ids[0]["shape"] == [6, 5], ids[0]
    # parameters: all at step 0 before anything else of the model; the frozen one flagged, and again when unfrozen
    emb = [(e["step"], e.get("grad")) for e in ev if e["name"] == "param.model.emb.weight"]
    # (the first forward's, flagged frozen; each step's output of AdamW.step; step 2's first forward, unfrozen)
    assert emb == [(0, False), (0, None), (1, None), (2, None), (2, None)], emb
    first = [n for s, n in names if s == 0][:12]
    assert first[3:8] == ["param.model.emb.weight", "param.model.bn.weight", "param.model.bn.bias",
                          "param.model.head.weight", "param.model.head.bias"], first
    # buffers: the mask once; BatchNorm's running statistics at the first forward and after each step
    bufs = [(s, n) for s, n in names if n.startswith("buffer.")]
    assert [s for s, n in bufs if n == "buffer.model.mask"] == [0], bufs
    assert [s for s, n in bufs if n == "buffer.model.bn.running_mean"] == [0, 0, 1, 2], bufs

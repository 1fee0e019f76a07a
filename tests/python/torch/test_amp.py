"""GradScaler and gradient clipping under tftrace --torch (python/tftrace/_torch/amp.py).

A small training with a GradScaler (on the CPU) clips its gradients by
norm, through clip_grad_norm_ on even steps and get_total_norm +
clip_grads_with_norm_ on odd ones; BAD makes its loss infinite at step 2,
so the scaler skips that optimizer step. Checked: tracing changes no
output; ``loss`` is the unscaled loss the program printed, ``amp.scale``
the scale; ``grad_norm`` and ``grad_norm.max`` once per step whichever way
the clip was made; BAD's skipped step is marked (``amp.skipped``), ends all
the same (steps 0..4 in both), and the scale halves after it.

    VENV/bin/python -m pytest test_amp.py -s --tftrace T --tfdiff D --tfdump U --python PY
"""

import json
import os

from torch_sh import sh  # (this folder)

SCRIPT = r'''
import sys, torch
from torch.nn.utils import clip_grad_norm_, clip_grads_with_norm_, get_total_norm
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
opt = torch.optim.AdamW(m.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
inf_at = int(sys.argv[1])
for step in range(5):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(5, 8, generator=g)
    y = torch.randint(0, 4, (5,), generator=g)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    if step == inf_at:
        loss = loss * float("inf")
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    if step % 2 == 0:
        norm = clip_grad_norm_(m.parameters(), max_norm=1.0)
    else:
        norm = get_total_norm([p.grad for p in m.parameters()])
        clip_grads_with_norm_(m.parameters(), 0.5, norm)
    scaler.step(opt)
    scaler.update()
    print("step", step, "loss", float(loss.detach()).hex(), "norm", float(norm).hex())
'''


def test_amp(tools, scratch):
    with open(os.path.join(scratch, "train.py"), "w") as f:
        f.write(SCRIPT)
    runs = {}
    for name, inf_at in (("golden", "-1"), ("bad", "2")):
        plain = sh([tools.python, "train.py", inf_at], cwd=scratch)
        out = sh([tools.tftrace, "-q", "-o", name + ".trace", "--torch", "--", tools.python, "train.py", inf_at],
                 cwd=scratch)
        assert out == plain, "%s: tracing changed the output:\n%s\nvs\n%s" % (name, out, plain)
        ev = [json.loads(l) for l in sh([tools.tfdump, "--events", "--json", name + ".trace"], cwd=scratch).splitlines()]
        runs[name] = (out.splitlines(), ev)

    def tensors(name, tname):
        return [(e["step"], e["stats"]) for e in runs[name][1] if e.get("kind") == "tensor" and e.get("name") == tname]

    for name in ("golden", "bad"):
        printed, ev = runs[name]
        steps = sorted({e["step"] for e in ev if e.get("kind") == "step"})
        assert steps == [0, 1, 2, 3, 4], (name, steps)
        loss = tensors(name, "loss")
        assert [s for s, _ in loss] == [0, 1, 2, 3, 4], (name, loss)
        for (s, st), line in zip(loss, printed):
            want = float.fromhex(line.split()[3])
            if want == want and abs(want) != float("inf"):
                assert abs(st["mean"] - want) <= 1e-6 * abs(want), (name, s, st["mean"], want, "the scaled loss?")
        norms = tensors(name, "grad_norm")
        assert [s for s, _ in norms] == [0, 1, 2, 3, 4], (name, "grad_norm once per step", norms)
        assert [st["mean"] for _, st in tensors(name, "grad_norm.max")] == [1.0, 0.5, 1.0, 0.5, 1.0], name
        for (s, st), line in zip(norms, printed):
            want = float.fromhex(line.split()[5])
            if want == want and abs(want) != float("inf"):
                assert abs(st["mean"] - want) <= 1e-6 * want, (name, s, st, want)
    scale = {name: [(s, st["mean"]) for s, st in tensors(name, "amp.scale")] for name in runs}
    assert scale["golden"] == [(s, 65536.0) for s in range(5)], scale["golden"]
    assert scale["bad"][:3] == [(0, 65536.0), (1, 65536.0), (2, 65536.0)] and scale["bad"][3][1] == 32768.0, scale
    assert tensors("golden", "amp.skipped") == []
    assert [s for s, _ in tensors("bad", "amp.skipped")] == [2], tensors("bad", "amp.skipped")
    d = json.loads(sh([tools.tfdiff, "--json", "golden.trace", "bad.trace"], ok=(1,), cwd=scratch))
    assert d["first_divergence"]["step"] == 2, d["first_divergence"]

"""python.tensorboard: tfdump --export tensorboard and tfdiff --tensorboard
write event files that TensorBoard's own reader (the tensorboard package)
reads back with the trace's values.

Usage: test_tensorboard.py TFTRACE TFDUMP TFDIFF TFTRAIN

- a golden tftrain run and one with a planted bug (no-warmup: lr at its
  peak from step 0): tfdump's export
  holds loss, lr and grad_norm at every step, equal (as float32) to the
  trace's own records (tftrace.open), per-tensor std/NAME and absmax/NAME,
  and --check's report as a text;
- tfdiff --tensorboard DIR writes DIR/golden and DIR/bad, whose loss curves
  agree at step 0 (the loss before the first update) and part after it,
  and the report as text at the first divergence's step (0, lr);
- a 2-rank trace gives a run per rank; bad arguments exit 2.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
except ImportError:
    print("SKIP: the tensorboard package is not installed for", sys.executable)
    sys.exit(0)
import numpy as np

import tftrace

tftrace_bin, tfdump, tfdiff, tftrain = sys.argv[1:5]
SIZES = {"scalars": 0, "tensors": 0}


def run(*args, ok=(0,)):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.returncode in ok, (args, p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def record(path, *extra):
    run(tftrace_bin, "-q", "-o", path, "--", tftrain, "--steps", "8", *extra)


def trace_scalar(path, name):
    """{step: value} of the first record of name per step, as tfdump's events give it."""
    out = run(tfdump, "--events", "--json", "-k", "tensor", "--name", name, path).stdout
    vals = {}
    for line in out.splitlines():
        r = json.loads(line)
        if r["step"] is None or r["step"] in vals:
            continue
        s = r["stats"]
        vals[r["step"]] = s["min"] if s["numel"] == 1 else s["mean"]
    return vals


with tempfile.TemporaryDirectory() as tmp:
    g, b = os.path.join(tmp, "g.trace"), os.path.join(tmp, "b.trace")
    record(g)
    record(b, "--bug", "no-warmup")

    # tfdump --export tensorboard
    d = os.path.join(tmp, "runs", "golden")
    os.makedirs(os.path.dirname(d))
    run(tfdump, "--export", "tensorboard", d, g)
    files = os.listdir(d)
    assert len(files) == 1 and "tfevents" in files[0], files
    assert oct(os.stat(os.path.join(d, files[0])).st_mode & 0o777) == "0o600", "event file not 0600"
    ea = EventAccumulator(d, size_guidance=SIZES)
    ea.Reload()
    tags = ea.Tags()
    for name in ("loss", "lr", "grad_norm"):
        want = trace_scalar(g, name)
        got = {e.step: e.value for e in ea.Scalars(name)}
        assert sorted(got) == sorted(want) == list(range(8)), (name, sorted(got), sorted(want))
        for s in want:
            assert got[s] == np.float32(want[s]), (name, s, got[s], want[s])
    # a tensor's statistics per step, named as TensorBoard groups them
    ev = [json.loads(l) for l in run(tfdump, "--events", "--json", "-k", "tensor", "--name", "L0.res2", g).stdout.splitlines()]
    first = {}
    for r in ev:
        first.setdefault(r["step"], r)
    got = {e.step: e.value for e in ea.Scalars("std/L0.res2")}
    assert got and all(got[s] == np.float32(first[s]["stats"]["std"]) for s in got), (got, first)
    assert "absmax/L0.res2" in tags["scalars"], tags["scalars"][:20]
    assert not any(t.startswith(("std/adam.", "std/param.")) for t in tags["scalars"]), "optimizer state exported"
    text = ea.Tensors("tftrace/check")[0].tensor_proto.string_val[0].decode()
    assert "OK" in text or "verdict" in text, text[:300]

    # the bad run's check text names its finding
    db = os.path.join(tmp, "runs", "bad")
    run(tfdump, "--export", "tensorboard", db, b)
    eb = EventAccumulator(db, size_guidance=SIZES)
    eb.Reload()
    tb = eb.Tensors("tftrace/check")[0]
    assert "lr" in tb.tensor_proto.string_val[0].decode(), tb.tensor_proto.string_val[0][:400]

    # tfdiff --tensorboard: both runs side by side
    dd = os.path.join(tmp, "diff")
    p = run(tfdiff, "--tensorboard", dd, g, b, ok=(1,))
    assert "DIVERGED" in p.stdout, p.stdout[:500]
    m = EventMultiplexer(size_guidance=SIZES)
    m.AddRunsFromDirectory(dd)
    m.Reload()
    assert sorted(m.Runs()) == ["bad", "golden"], m.Runs()
    lg = {e.step: e.value for e in m.Scalars("golden", "loss")}
    lb = {e.step: e.value for e in m.Scalars("bad", "loss")}
    assert lg[0] == lb[0] and any(lg[s] != lb[s] for s in range(1, 8)), (lg, lb)
    lrg = {e.step: e.value for e in m.Scalars("golden", "lr")}
    lrb = {e.step: e.value for e in m.Scalars("bad", "lr")}
    assert lrg[0] < lrb[0], (lrg, lrb)
    rep = m.Tensors("bad", "tftrace/tfdiff")[0]
    assert "DIVERGED" in rep.tensor_proto.string_val[0].decode() and rep.step == 0, (rep.step, rep.tensor_proto.string_val[0][:300])

    # two ranks: a run per rank
    mp = os.path.join(tmp, "mp.trace")
    if subprocess.run(["sh", "-c", "command -v mpirun"], stdout=subprocess.DEVNULL).returncode == 0:
        env = dict(os.environ, OMPI_MCA_orte_abort_on_non_zero_status="0")
        subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", tftrace_bin, "-q", "-o", mp,
                        "--", tftrain, "--steps", "3"], check=True, env=env, stdout=subprocess.DEVNULL)
        dm = os.path.join(tmp, "mp")
        run(tfdump, "--export", "tensorboard", dm, mp)
        assert sorted(os.listdir(dm)) == ["rank-00000", "rank-00001"], os.listdir(dm)
        run(tfdump, "--rank", "1", "--export", "tensorboard", os.path.join(tmp, "mp1"), mp)
        assert any("tfevents" in f for f in os.listdir(os.path.join(tmp, "mp1")))

    # bad arguments: exit 2 and a message
    p = run(tfdump, "--export", "tensorboard", "-", g, ok=(2,))
    assert "directory" in p.stderr, p.stderr
    open(os.path.join(tmp, "afile"), "w").close()
    p = run(tfdump, "--export", "tensorboard", os.path.join(tmp, "afile"), g, ok=(2,))
    assert "afile" in p.stderr, p.stderr
    p = run(tfdump, "--rank", "5", "--export", "tensorboard", os.path.join(tmp, "x"), g, ok=(2,))
    assert "no rank" in p.stderr, p.stderr
print("PASS")

# --export chrome on a 2-rank synthetic run: the JSON parses and holds what
# a timeline viewer shows: a process per rank, steps enclosing the ops of
# their thread, ops with name, scope and step, collectives linked across
# ranks by flows, kernels on a device track, counters for live bytes, loss
# and grad_norm with the recorded values; --steps and --ranks select.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/c.trace" --ranks 2 --steps 4 >/dev/null
T=$tmp/c.trace
expect_rc 0 "$TFDUMP" --export chrome "$tmp/c.json" "$T"
[ ! -s "$tmp/out" ] || fail "--export to a file printed on stdout"
"$TFDUMP" --events --json --kind tensor --name 'loss' "$T" >"$tmp/loss.jsonl"

pycheck '
import timeline as tl
ev = tl.chrome(sys.argv[1])
for e in ev:
    assert "ph" in e and "pid" in e, e
    if e["ph"] in "XBi":
        assert "tid" in e and "ts" in e and "name" in e, e
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(procs) == [1, 2] and procs[1].startswith("rank 0 ") and procs[2].startswith("rank 1 "), procs
tnames = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
x = [e for e in ev if e["ph"] == "X"]
assert not [e for e in ev if e["ph"] in "BE"], "a complete run has no open slice"
for pid in (1, 2):
    steps = sorted((e for e in x if e["pid"] == pid and e["cat"] == "step"), key=lambda e: e["ts"])
    assert [s["args"]["step"] for s in steps] == [0, 1, 2, 3], steps
    assert [s["name"] for s in steps] == ["step 0", "step 1", "step 2", "step 3"]
    ops = [e for e in x if e["pid"] == pid and e["cat"] == "op"]
    assert len(ops) > 40, len(ops)
    for o in ops:
        if "step" not in o["args"]:
            continue
        st = [s for s in steps if s["args"]["step"] == o["args"]["step"]]
        assert st, o
        s = st[0]
        assert s["tid"] == o["tid"], "an op off its step thread"
        assert tl.ns(s["ts"]) < tl.ns(o["ts"]) and tl.ns(o["ts"]) + tl.ns(o["dur"]) < tl.ns(s["ts"]) + tl.ns(s["dur"]), ("op outside its step", o, s)
    # the ops of a thread never overlap
    ops.sort(key=lambda e: e["ts"])
    for a, b in zip(ops, ops[1:]):
        assert tl.ns(a["ts"]) + tl.ns(a["dur"]) < tl.ns(b["ts"]), ("ops overlap", a, b)
    scopes = {o["args"].get("scope") for o in ops}
    assert "L0/attn" in scopes, scopes
    assert {o["name"] for o in ops} >= {"matmul", "layernorm", "cross_entropy"}, {o["name"] for o in ops}
    assert {o["args"]["kind"] for o in ops} == {"runtime", "gemm", "collective"}, {o["args"]["kind"] for o in ops}

coll = [e for e in x if e["cat"] == "collective"]
by = {}
for c in coll:
    assert c["name"] == "MPI_Allreduce" and c["args"]["type"] == "allreduce", c
    by.setdefault(c["args"]["coll_seq"], {})[c["pid"]] = c
assert sorted(by) == [0, 1, 2, 3] and all(sorted(v) == [1, 2] for v in by.values()), by
# flows: one s on rank 0 and one f on rank 1 per collective, each inside its collective slice
fl = {}
for e in ev:
    if e["ph"] in "sf":
        fl.setdefault(e["id"], []).append(e)
assert len(fl) == 4, fl
def inside(f):
    for c in coll:
        if c["pid"] == f["pid"] and c["tid"] == f["tid"] and tl.ns(c["ts"]) < tl.ns(f["ts"]) < tl.ns(c["ts"]) + tl.ns(c["dur"]):
            return c
    raise AssertionError(("flow event outside any collective slice", f))
for fid, pair in fl.items():
    assert sorted(p["ph"] for p in pair) == ["f", "s"], pair
    s = next(p for p in pair if p["ph"] == "s")
    f = next(p for p in pair if p["ph"] == "f")
    assert s["pid"] == 1 and f["pid"] == 2 and f["bp"] == "e" and s["cat"] == f["cat"] == "flow", pair
    assert s["ts"] <= f["ts"], "the flow ends before it starts: a viewer drops it"
    assert inside(s)["args"]["coll_seq"] == inside(f)["args"]["coll_seq"], "a flow links different collectives"

kern = [e for e in x if e["cat"] == "kernel"]
assert kern and all(tnames[(k["pid"], k["tid"])].startswith("cuda:0 stream ") for k in kern), kern[:2]
assert all(k["args"]["grid"].count(",") == 2 for k in kern)

ctr = [e for e in ev if e["ph"] == "C"]
assert {c["name"] for c in ctr} == {"live bytes", "rss", "loss", "grad_norm"}, {c["name"] for c in ctr}
assert all(c["args"]["host"] >= 0 for c in ctr if c["name"] == "live bytes")
loss = sorted((c["pid"] - 1, c["ts"], c["args"]["value"]) for c in ctr if c["name"] == "loss")
want = [(t["rank"], t["stats"]["min"]) for t in (json.loads(l) for l in open(sys.argv[2]))]
assert [(r, v) for r, _, v in loss] == sorted(want, key=lambda t: t[0]), (loss, want)
ck = [e for e in ev if e["ph"] == "i" and e["cat"] == "checkpoint"]
assert len(ck) == 2 and all(c["name"] == "checkpoint save" for c in ck), ck
ex = [e for e in ev if e["ph"] == "i" and e["cat"] == "process"]
assert sorted(e["name"] for e in ex) == ["exit 0", "exit 0"], ex
' "$tmp/c.json" "$tmp/loss.jsonl"

# --steps A:B: only those steps; --ranks / --rank: only those processes
expect_rc 0 "$TFDUMP" --export chrome "$tmp/s.json" --steps 2:3 "$T"
expect_rc 0 "$TFDUMP" --export chrome "$tmp/r.json" --ranks 1 "$T"
expect_rc 0 "$TFDUMP" --rank 0 --steps 1 --export chrome "$tmp/rs.json" "$T"
pycheck '
import timeline as tl
s = tl.chrome(sys.argv[1])
steps = {e["args"]["step"] for e in s if e["ph"] == "X" and e["cat"] == "step"}
assert steps == {2, 3}, steps
assert {e["args"].get("step") for e in s if e["ph"] == "X"} <= {2, 3}
assert {e["args"]["coll_seq"] for e in s if e["ph"] == "X" and e["cat"] == "collective"} == {2, 3}
r = tl.chrome(sys.argv[2])
assert {e["pid"] for e in r} == {2}, {e["pid"] for e in r}
rs = tl.chrome(sys.argv[3])
assert {e["pid"] for e in rs} == {1}
assert {e["args"]["step"] for e in rs if e["ph"] == "X" and e["cat"] == "step"} == {1}
' "$tmp/s.json" "$tmp/r.json" "$tmp/rs.json"

# OUT "-": the same JSON on stdout
"$TFDUMP" --export chrome - "$T" >"$tmp/stdout.json"
cmp -s "$tmp/stdout.json" "$tmp/c.json" || fail "--export chrome - differs from the file export"
echo PASS

#!/usr/bin/env bash
# run_rec_emit.sh TEST_REC_EMIT TFDUMP — records test_rec_emit's trace and
# checks its device records with tfdump (see test_rec_emit.c).
set -euo pipefail
prog=$1 tfdump=$2
tmp=$(mktemp -d /tmp/tft-recemit-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
TFT_OUTPUT="$tmp/t.trace" "$prog"
"$tfdump" --events --json "$tmp/t.trace" >"$tmp/ev.jsonl"
python3 - "$tmp/ev.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
t = {e["name"]: e for e in ev if e["kind"] == "tensor"}
ops = {e["seq"]: e for e in ev if e["kind"] == "op"}
errs = []
def want(cond, msg):
    if not cond:
        errs.append(msg)
q = t.get("L0.qkv")
want(q is not None, "no L0.qkv tensor")
if q:
    s = q["stats"]
    want(q["device"] == "cuda:3", "L0.qkv device %r" % q["device"])
    want(q["mode"] == "full", "L0.qkv mode %r" % q["mode"])
    want(s["numel"] == 12, "numel %r (from the shape, not the stats)" % s["numel"])
    want(s["mean"] == 0.25 and s["std"] == 0.5 and s["nan"] == 1 and s["min"] == -1.5, "stats %r" % s)
    want(s["fingerprint"] == "1234abcd5678ef90", "fingerprint %r" % s["fingerprint"])
    want(ops[q["seq"]]["name"] == "L0.qkv", "op of L0.qkv")
    want(ops[q["seq"]]["inputs"] == [t["tokens"]["id"]], "L0.qkv inputs %r, tokens id %r" %
         (ops[q["seq"]]["inputs"], t["tokens"]["id"]))
g = t.get("L0.gelu")
want(g is not None and g["mode"] == "health", "L0.gelu mode %r" % (g and g["mode"]))
if g:
    want(g["stats"].get("mean", 0) == 0 and g["stats"]["max"] == 2.5, "health stats %r" % g["stats"])
    want(ops[g["seq"]]["inputs"] == [q["id"]], "L0.gelu inputs %r" % ops[g["seq"]]["inputs"])
c = [e for e in ev if e["kind"] == "collective"]
want(len(c) >= 1, "no collective record")
r = t.get("ncclAllReduce")
want(r is not None and r["device"] == "cuda:3" and r["stats"]["numel"] == 12, "collective result %r" % r)
if c and r:
    want(r["seq"] == c[-1]["seq"], "result seq %r, collective seq %r" % (r["seq"], c[-1]["seq"]))
for e in errs:
    print("FAIL: " + e)
if not errs:
    print("PASS: device records: L0.qkv %s, L0.gelu %s, collective result in op %r" % (q["device"], g["mode"], r["seq"]))
sys.exit(1 if errs else 0)
PY

#!/usr/bin/env bash
# run_threads_case.sh CASE TFTRACE TFDUMP TFDIFF THREADS_PROG
# Records threads_prog (main thread marking steps, 4 worker threads
# recording) three times under CPU load — golden, golden again, and with one
# worker's input changed at step 5 — and checks tfdiff --json field by field:
# golden vs golden = match with every tensor bit-identical; the planted
# change = that worker's tensor at step 5, its origin there, no structural
# difference. threads-names: workers record w<i>.x/h/y; threads-same: every
# worker records x/h/y (replicas of one model).
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 prog=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
args=(--steps 8 --workers 4 --load 2)
want=w2.x
if [ "$case_name" = threads-same ]; then args+=(--same-names); want=x; fi

"$tftrace" -q -o golden.trace -- "$prog" "${args[@]}" >/dev/null
"$tftrace" -q -o again.trace -- "$prog" "${args[@]}" >/dev/null
"$tftrace" -q -o bad.trace -- "$prog" "${args[@]}" --plant 2@5 >/dev/null

# the recording names its threads: 5 of them, each with a switch
nthreads=$("$tfdump" --events --kind thread --json golden.trace |
  python3 -c 'import sys,json; print(len({json.loads(l)["index"] for l in sys.stdin if json.loads(l).get("event")=="switch"}))')
[ "$nthreads" = 5 ] || { echo "FAIL: $nthreads threads named in golden.trace, want 5"; exit 1; }

st=0; "$tfdiff" --json golden.trace again.trace >same.json || st=$?
[ $st = 0 ] || { echo "FAIL: golden vs golden exit $st"; cat same.json; exit 1; }
st=0; "$tfdiff" --json golden.trace bad.trace >bad.json || st=$?
[ $st = 1 ] || { echo "FAIL: golden vs planted exit $st"; cat bad.json; exit 1; }

python3 - "$want" <<'PY'
import json, sys
want = sys.argv[1]
same = json.load(open("same.json"))
bad = json.load(open("bad.json"))
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
r = same["ranks"][0]
if same["verdict"] != "match" or same["first_divergence"] is not None:
    fail("golden vs golden: %s %s" % (same["verdict"], same["first_divergence"]))
if r["inserted"] or r["deleted"] or r.get("structure"):
    fail("golden vs golden structure: %r" % r)
if r["compared"] != 8 * 13 or r["identical"] != r["compared"]:
    fail("golden vs golden: %d compared, %d identical (want 104 bit-identical)" % (r["compared"], r["identical"]))
fd = bad["first_divergence"]
if bad["verdict"] != "diverged" or not fd:
    fail("planted: verdict %s" % bad["verdict"])
if (fd["step"], fd["tensor"], fd["kind"]) != (5, want, "value"):
    fail("planted: first divergence %s at step %s (%s), want %s at step 5" % (fd["tensor"], fd["step"], fd["kind"], want))
o = bad["origin"]
if not o or (o["step"], o["tensor"]) != (5, want):
    fail("planted: origin %r" % o)
rb = bad["ranks"][0]
if rb["inserted"] or rb["deleted"]:
    fail("planted: structure %r" % rb)
if rb["identical"] != 8 * 13 - 4:
    fail("planted: %d identical, want %d (only the worker's x, h, y and the loss differ)" % (rb["identical"], 8 * 13 - 4))
print("ok: golden vs golden match (104 tensors), planted change at step 5", want)
PY

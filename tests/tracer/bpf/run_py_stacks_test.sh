#!/bin/bash
# Python frames in `tftrace stacks` and in --timeout's STACK records
# (tracer/bpf/py_stacks.c, docs/ATTACH.md "Python frames").
# Usage: run_py_stacks_test.sh TFTRACE TFDUMP [TORCH_PYTHON]
#   1. /usr/bin/python3 runs py_hang.py: the main thread sleeps in
#      wait_here (line 19) below outer and main, a thread blocks on a lock
#      in blocked_worker (line 15). `tftrace stacks PID` must show those
#      frames, innermost first, each Python group right above the native
#      _PyEval_EvalFrameDefault that runs it; --json the same.
#   2. The same program under `tftrace --timeout 3`: the STACK records
#      (tfdump --events --kind stack) carry the Python frames.
#   3. Each of python3.10, 3.12, 3.13 found on PATH or in pyenv: both threads' summaries.
#   4. TORCH_PYTHON (a venv with torch): a 2-rank gloo job whose rank 1 never
#      joins the all-reduce: rank 0 in all_reduce below reduce_grads.
# Prints SKIP: and exits 0 where BPF is not permitted (not root) or no
# python3 of a supported version is installed.
set -euo pipefail
tftrace=$1 tfdump=$2 torch_py=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-pystacks.XXXXXX")
chmod 755 "$tmp"
started=
cleanup() {
    for p in $started; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the BPF tests need root (CAP_BPF + CAP_PERFMON)"; exit 0; }
py=/usr/bin/python3
[ -x $py ] && $py -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' \
    || { echo "SKIP: no /usr/bin/python3 of version 3.10 to 3.13"; exit 0; }
cp "$here/py_hang.py" "$here/py_torch_hang.py" "$tmp/"

# hang PYTHON TAG: starts py_hang.py, waits until it is ready; sets pid
hang() {
    rm -f "$tmp/ready.$2"
    timeout -s KILL 120 "$1" "$tmp/py_hang.py" "$tmp/ready.$2" >"$tmp/out.$2" 2>&1 &
    started="$started $!"
    for _ in $(seq 300); do [ -s "$tmp/ready.$2" ] && break; sleep 0.1; done
    [ -s "$tmp/ready.$2" ] || fail "$1 py_hang.py did not start: $(cat "$tmp/out.$2")"
    pid=$(cat "$tmp/ready.$2")    # python's, not timeout's
    started="$started $pid"
    sleep 1    # the main thread inside time.sleep, the worker on the lock
}

# the main thread's summary: the native frames above the innermost Python one, then Python frames only
main_re=" ← py_hang.py:19 in wait_here ← py_hang.py:23 in outer ← py_hang.py:32 in main ← py_hang.py:35 in <module>$"
# (3.10 has no qualified names: "run", not "Thread.run")
worker_tail=" ← py_hang.py:15 in blocked_worker ← threading.py:[0-9]* in \(Thread\.\)\?run ← "
worker_re="thread \"[^\"]*\": .*$worker_tail"

# check_frames FILE: the Python frames sit above the native frame that runs them
check_frames() {
    python3 - "$1" <<'PY' || fail "frame order in $1"
import re, sys
lines = [l.strip() for l in open(sys.argv[1])]
def at(pat):
    for i, l in enumerate(lines):
        if re.search(pat, l):
            return i
    raise SystemExit("no line matching %r in:\n%s" % (pat, "\n".join(lines)))
w, o, m, mod = (at(r"py_hang\.py:%s \(python\)$" % x) for x in
                (r"19 in wait_here", r"23 in outer", r"32 in main", r"35 in <module>"))
assert w < o < m < mod, (w, o, m, mod)
assert "clock_nanosleep" in lines[at(r"#0 ")] and "(python)" not in lines[w - 1], lines[w - 1]
assert "_PyEval_EvalFrameDefault" in lines[mod + 1], lines[mod + 1]
b, run = at(r"py_hang\.py:15 in blocked_worker \(python\)$"), at(r"threading\.py:\d+ in (Thread\.)?run \(python\)$")
assert "_PyEval_EvalFrameDefault" in lines[b + 1] and b + 1 < run, lines[b:run + 1]
PY
}

# 1. tftrace stacks
hang $py deb
st=0; "$tftrace" stacks $pid >"$tmp/text" 2>"$tmp/err" || st=$?
grep -q "BPF is not permitted here" "$tmp/err" && { echo "SKIP: $(cat "$tmp/err")"; exit 0; }
[ $st -eq 0 ] || fail "tftrace stacks exited $st: $(cat "$tmp/err")"
cat "$tmp/text"
grep -q "^  pid $pid: clock_nanosleep ← .*$main_re" "$tmp/text" || fail "no main-thread summary with the Python frames"
grep -q "$worker_re" "$tmp/text" || fail "no worker summary with blocked_worker"
check_frames "$tmp/text"
"$tftrace" stacks --json $pid >"$tmp/json" 2>"$tmp/err" || fail "--json: $(cat "$tmp/err")"
python3 - "$tmp/json" <<'PY' || fail "JSON"
import json, sys
j = json.load(open(sys.argv[1]))
t = [t for t in j["processes"][0]["threads"] if t["main"]][0]
py = [(f["file"].rsplit("/", 1)[-1], f["line"], f["function"]) for f in t["frames"] if f["how"] == "python"]
assert py[:4] == [("py_hang.py", 19, "wait_here"), ("py_hang.py", 23, "outer"), ("py_hang.py", 32, "main"),
                  ("py_hang.py", 35, "<module>")], py
i = [k for k, f in enumerate(t["frames"]) if f["how"] == "python"][-1]
assert t["frames"][i + 1]["function"] == "_PyEval_EvalFrameDefault", t["frames"][i + 1]
assert "note" not in t, t["note"]
PY
kill -KILL $pid

# 2. --timeout's STACK records
st=0; timeout -s KILL 60 "$tftrace" -q --timeout 3 --grace 1 -o "$tmp/t.trace" -- $py "$tmp/py_hang.py" \
    >"$tmp/t.out" 2>"$tmp/t.err" || st=$?
[ $st -eq 143 ] || fail "--timeout: exit $st, want 143: $(cat "$tmp/t.err")"
grep -q "no stacks taken" "$tmp/t.err" && fail "$(grep -m1 "no stacks taken" "$tmp/t.err")"
grep -q "^  pid [0-9]*: clock_nanosleep ← .*$main_re" "$tmp/t.err" || fail "--timeout stderr: $(cat "$tmp/t.err")"
"$tfdump" --events --kind stack "$tmp/t.trace" >"$tmp/stack.txt" || fail "tfdump --events --kind stack"
cat "$tmp/stack.txt"
grep -q "stack pid=[0-9]* tid=[0-9]* main comm=.*: clock_nanosleep ← .*$main_re" "$tmp/stack.txt" \
    || fail "no STACK record with the main thread's Python frames"
grep -q "stack pid=[0-9]* tid=[0-9]* comm=.*$worker_tail" "$tmp/stack.txt" || fail "no worker STACK record"
check_frames "$tmp/stack.txt"

# 3. the other CPython versions installed here
for v in 3.10 3.12 3.13; do
    # on PATH, else a pyenv install (whose shims fail without a version chosen)
    p=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v.*/bin/python$v 2>/dev/null | tail -1 || true)
    command -v python$v >/dev/null && python$v -c pass 2>/dev/null && p=$(command -v python$v)
    [ -n "$p" ] && "$p" -c 'pass' 2>/dev/null || { echo "python$v: not installed, not tested"; continue; }
    echo "python$v: $p"
    hang "$p" "$v"
    "$tftrace" stacks $pid >"$tmp/text.$v" 2>&1 || fail "python$v: tftrace stacks: $(cat "$tmp/text.$v")"
    grep "^  pid" "$tmp/text.$v"
    grep -q "^  pid $pid: .*$main_re" "$tmp/text.$v" || fail "python$v: $(cat "$tmp/text.$v")"
    grep -q "$worker_re" "$tmp/text.$v" || fail "python$v: no worker: $(cat "$tmp/text.$v")"
    kill -KILL $pid
done

# 4. torch: a gloo all-reduce one rank never joins
if [ -z "$torch_py" ] || ! "$torch_py" -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
    echo "no torch python given (TFT_TORCH_PYTHON): the gloo case is not tested"
    exit 0
fi
port=$((29500 + RANDOM % 2000))
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -s KILL 150 \
        "$torch_py" "$tmp/py_torch_hang.py" "$tmp/tready" >"$tmp/torch.$r" 2>&1 &
    started="$started $!"
done
for _ in $(seq 900); do [ -s "$tmp/tready.0" ] && [ -s "$tmp/tready.1" ] && break; sleep 0.1; done
[ -s "$tmp/tready.0" ] && [ -s "$tmp/tready.1" ] || fail "the torch ranks did not start: $(cat "$tmp"/torch.*)"
tp="$(cat "$tmp/tready.0") $(cat "$tmp/tready.1")"
started="$started $tp"
sleep 2    # rank 0 inside all_reduce
"$tftrace" stacks $tp >"$tmp/torch.text" 2>&1 || fail "torch: $(cat "$tmp/torch.text")"
grep -v "^    " "$tmp/torch.text"
grep -q "^  rank 0: .* ← distributed_c10d.py:[0-9]* in all_reduce ← .* ← py_torch_hang.py:18 in reduce_grads ← py_torch_hang.py:24 in <module>$" \
    "$tmp/torch.text" || fail "torch rank 0"
grep -q "^  rank 1: clock_nanosleep ← .* ← py_torch_hang.py:20 in reduce_grads ← py_torch_hang.py:24 in <module>$" \
    "$tmp/torch.text" || fail "torch rank 1"
echo "PASS"

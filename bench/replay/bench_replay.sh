#!/bin/bash
# Time to reach and capture a divergence at step S: `tftrace replay` from the
# nearest checkpoint vs `tftrace replay --from-start`, same traces, same run.
#   bench/replay/bench_replay.sh [BUILD_DIR] [STEPS] [CKPT_EVERY]
# Records GOLDEN and BAD (--bug no-scale@STEPS-10) of the default tftrain
# config with a checkpoint every CKPT_EVERY steps, then replays both ways
# (3 times each, best time) and prints the ratio.
set -euo pipefail
build=${1:-build}
steps=${2:-400}
every=${3:-100}
build=$(cd "$build" && pwd)
tftrace=$build/tracer/tftrace tftrain=$build/runtime/tftrain
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-bench-replay.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
S=$((steps - 10))
common=(--steps "$steps" --eval-every 0 -q)
"$tftrace" -q -o g.trace -- "$tftrain" "${common[@]}" --ckpt-dir g.ckpt --ckpt-every "$every" >/dev/null
"$tftrace" -q -o b.trace -- "$tftrain" "${common[@]}" --ckpt-dir b.ckpt --ckpt-every "$every" \
    --bug "no-scale@$S" >/dev/null
best() { # best wall time of 3 runs of "$@" (exit 1 = tensors differ, expected)
    local b=
    for i in 1 2 3; do
        rm -rf rp
        local t0 t1; t0=$(date +%s.%N)
        "$@" >/dev/null 2>&1 || [ $? = 1 ]
        t1=$(date +%s.%N)
        b=$(python3 -c "import sys; t=$t1-$t0; b='$b'; print(t if not b else min(t, float(b)))")
    done
    echo "$b"
}
ck=$(best "$tftrace" replay -q -o rp g.trace b.trace)
python3 -c "import json; r=json.load(open('rp/replay.json')); print('checkpoint replay: steps', r['golden']['steps_replayed'], r['bad']['steps_replayed'], '-', r['golden']['detail'])"
fs=$(best "$tftrace" replay -q --from-start -o rp g.trace b.trace)
python3 -c "import json; r=json.load(open('rp/replay.json')); print('from-start replay: steps', r['golden']['steps_replayed'], r['bad']['steps_replayed'])"
python3 - "$ck" "$fs" "$S" "$every" <<'PY'
import sys
ck, fs, S, every = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print(f"divergence at step {S}, checkpoints every {every} steps")
print(f"replay from the nearest checkpoint: {ck:.2f} s")
print(f"replay from step 0 (--from-start):  {fs:.2f} s")
print(f"ratio checkpoint / from-start: {ck / fs:.3f}")
PY

#!/usr/bin/env bash
# The main job on a fresh machine: install, build, record a golden and a
# buggy run of the bundled training runtime (tftrain) under tftrace, inspect
# the traces, and show the first tensor where they part.
#   scripts/demo.sh [BUG]     (default causal-offbyone; see tftrain --help)
# (tfdiff, issue 5, will replace the last step with the full analysis.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bug=${1:-causal-offbyone}
if [ ! -x build/tracer/tftrace ] || [ ! -x build/analyzer/tfdump ] || [ ! -x build/runtime/tftrain ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
fi
cmake --build build -j"$(nproc)" >/dev/null
out=${TFT_DEMO_DIR:-demo}
mkdir -p "$out"
tftrace=build/tracer/tftrace tfdump=build/analyzer/tfdump tftrain=build/runtime/tftrain

echo "== record a golden run and a run with --bug $bug"
"$tftrace" -o "$out/golden.trace" -- "$tftrain" --steps 40 --log-every 10 --eval-every 0
"$tftrace" -o "$out/bad.trace" -- "$tftrain" --steps 40 --log-every 10 --eval-every 0 --bug "$bug" || true

echo; echo "== tfdump $out/bad.trace"
"$tfdump" "$out/bad.trace"
echo; echo "== tfdump --verify $out/bad.trace"
"$tfdump" --verify "$out/bad.trace"

echo; echo "== first tensor whose fingerprint differs (golden vs bad)"
"$tfdump" --events --json --kind tensor "$out/golden.trace" >"$out/golden.jsonl"
"$tfdump" --events --json --kind tensor "$out/bad.trace" >"$out/bad.jsonl"
python3 - "$out/golden.jsonl" "$out/bad.jsonl" <<'PY'
import json, sys
g = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
for x, y in zip(g, b):
    if x["stats"].get("fingerprint") != y["stats"].get("fingerprint") or x["shape"] != y["shape"]:
        print(f"step {y['step']} seq {y['seq']} tensor {y['name']} {y['dtype']}{y['shape']}:")
        for k in ("mean", "std", "min", "max", "nan", "zero"):
            print(f"  {k:5} golden {x['stats'].get(k)!r:>24}  bad {y['stats'].get(k)!r:>24}")
        break
else:
    print("no difference")
PY

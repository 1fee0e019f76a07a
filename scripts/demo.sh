#!/usr/bin/env bash
# The main job on a fresh machine: install, build, record a golden and a
# buggy run of the bundled example under tftrace, inspect both traces, and
# show the first tensor where they part.
# (tfdiff, issue 5, will replace the last step with the full analysis.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ ! -x build/tracer/tftrace ] || [ ! -x build/analyzer/tfdump ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
fi
cmake --build build -j"$(nproc)" >/dev/null
out=${TFT_DEMO_DIR:-demo}
mkdir -p "$out"
tftrace=build/tracer/tftrace tfdump=build/analyzer/tfdump toy=build/examples/quickstart/toy_train

echo "== record a golden run and a run with a bug (learning rate 200x from step 20)"
"$tftrace" -o "$out/golden.trace" -- "$toy" --steps 40
"$tftrace" -o "$out/bad.trace" -- "$toy" --steps 40 --bug lr@20 || true

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
    if x["stats"].get("fingerprint") != y["stats"].get("fingerprint"):
        print(f"step {y['step']} seq {y['seq']} tensor {y['name']}:")
        for k in ("mean", "std", "min", "max", "nan"):
            print(f"  {k:5} golden {x['stats'].get(k)!r:>24}  bad {y['stats'].get(k)!r:>24}")
        break
else:
    print("no difference")
PY

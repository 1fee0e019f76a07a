#!/usr/bin/env bash
# tftrain's fused statistics (grad.* in the gradient-norm sweep, adam.m,
# adam.v and param.* in AdamW, attn.scores, attn.probs and gelu in the
# forward; runtime/README.md) record exactly what the
# recorder's own statistics record: every tensor and op record of a traced
# run, all statistics fields at full precision, is the same with the fused
# path (the default) and without it (TFTRAIN_FUSED_STATS=0), in full mode,
# health mode, with TFT_EVERY sampling and with --dtype bf16. tfdiff alone would not do: equal
# fingerprints make it call two records identical whatever their statistics.
set -euo pipefail
tftrain=$1 tftrace=$2 tfdump=$3
tmp=$(mktemp -d /tmp/tft-fused-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# d_model 64: parameters of 1 to 8 statistics blocks and a partial last one
args=(--steps 3 -q --layers 1 --d-model 64 --heads 2 --seq 16 --batch 4 --eval-every 0)
run() { # NAME ENV... : a traced run and its records as JSON lines
  local name=$1; shift
  env "$@" "$tftrace" -q -o "$tmp/$name.trace" -- "$tftrain" "${args[@]}" ${EXTRA:-}
  "$tfdump" --events --json "$tmp/$name.trace" >"$tmp/$name.jsonl"
}
compare() { # A B
  python3 - "$tmp/$1.jsonl" "$tmp/$2.jsonl" <<'PY'
import json, sys
def recs(path):
    out = []
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") in ("tensor", "op"):
            r.pop("ts", None)
            out.append(r)
    return out
a, b = recs(sys.argv[1]), recs(sys.argv[2])
n = sum(1 for r in a if r["kind"] == "tensor" and r.get("mode") != "shape")
for i, (x, y) in enumerate(zip(a, b)):
    if x != y:
        sys.exit(f"FAIL: record {i} differs:\n  fused   {x}\n  unfused {y}")
if len(a) != len(b):
    sys.exit(f"FAIL: {len(a)} records fused, {len(b)} unfused")
if n < 50:
    sys.exit(f"FAIL: only {n} tensors with statistics")
print(f"{len(a)} records identical ({n} tensors with statistics)")
PY
}
run full TFT_STATS=full
run full0 TFT_STATS=full TFTRAIN_FUSED_STATS=0
compare full full0
run health TFT_STATS=health
run health0 TFT_STATS=health TFTRAIN_FUSED_STATS=0
compare health health0
run every TFT_EVERY=2
run every0 TFT_EVERY=2 TFTRAIN_FUSED_STATS=0
compare every every0
# activations rounded to bf16 piece by piece in the fused forward
EXTRA="--dtype bf16" run bf16 TFT_STATS=full
EXTRA="--dtype bf16" run bf160 TFT_STATS=full TFTRAIN_FUSED_STATS=0
compare bf16 bf160
echo PASS fused_stats

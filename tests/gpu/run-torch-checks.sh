#!/bin/bash
# run-torch-checks.sh — tftrace --torch on CUDA (issue 15; docs/GPU.md,
# docs/PYTORCH.md). Run from the repository root on a machine with an NVIDIA
# GPU and PyTorch (python3 imports torch with CUDA), after a build with
# -DTFT_CUDA=ON (TFT_GPU_BUILD_DIR, default build-gpu; run-all.sh builds it
# first through run-gpu-checks.sh):
#
#     bash tests/gpu/run-torch-checks.sh
#
# Checks, each on its own (one failing does not stop the others), on
# examples/pytorch/gpt_train.py --device cuda with deterministic algorithms:
#   golden    recorded twice under --torch: losses as untraced, tfdiff MATCH,
#             tensors on cuda:0 with full statistics (device statistics)
#   syncs     torch.cuda.set_sync_debug_mode: the synchronising calls a step
#             makes traced vs untraced (--sync-debug of the script counts
#             them); and step times traced vs untraced
#   bug       no-attn-scale@2: first divergence at step 2 in model.blocks.0.attn.proj
#   ops       --torch ops: golden vs golden MATCH; the bug localized to an op in attn
#   nccl      torchrun --nproc_per_node 2 on the one GPU with NCCL: the collectives
#             recorded once (the NCCL interposer, not the Python layer), no desync
# Results: one line per check on stdout and in $OUT/torch-results.txt.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 100
B=${TFT_GPU_BUILD_DIR:-$root/build-gpu}
PY=${TFT_GPU_PYTHON:-python3}
G=$root/examples/pytorch/gpt_train.py
T=$B/tracer/tftrace D=$B/analyzer/tfdiff U=$B/analyzer/tfdump
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-torch-gpu.XXXXXX")
results=$tmp/torch-results.txt
failed=0
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
finish() {
    echo "torch total: $failed check(s) failed" | tee -a "$results"
    if [ -n "${OUT:-}" ]; then mkdir -p "$OUT/logs"; cp "$results" "$OUT/"; cp "$tmp"/*.log "$OUT/logs/" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap finish EXIT
res() { echo "$*" | tee -a "$results"; case "$1" in FAIL) failed=$((failed + 1));; esac; }
[ -x "$T" ] || { res "FAIL torch-build no $T (build with -DTFT_CUDA=ON into $B)"; exit 1; }
"$PY" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null || { res "SKIP torch: no CUDA torch"; exit 0; }
args=(--device cuda --steps 4 --size tiny)
losses() { grep -E '^(rank [0-9]+ )?step [0-9]+ loss ' "$1" | sort; }
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

check_golden() {
    "$PY" "$G" "${args[@]}" >"$tmp/u.log" 2>&1 || return 1
    "$T" -q -o "$tmp/g1.trace" --torch -- "$PY" "$G" "${args[@]}" >"$tmp/g1.log" 2>&1 || return 1
    "$T" -q -o "$tmp/g2.trace" --torch -- "$PY" "$G" "${args[@]}" >"$tmp/g2.log" 2>&1 || return 1
    diff <(losses "$tmp/u.log") <(losses "$tmp/g1.log") >"$tmp/golden-losses.log" || { echo "losses differ"; return 1; }
    "$D" --json "$tmp/g1.trace" "$tmp/g2.trace" >"$tmp/golden-diff.json"; [ $? = 0 ] || return 1
    "$U" --events --json --kind tensor --name 'model.blocks.0.attn' "$tmp/g1.trace" >"$tmp/golden-ev.log"
    grep '"device":"cuda:0"' "$tmp/golden-ev.log" | grep '"mode":"full"' | grep '"fingerprint"' >/dev/null ||
        { echo "no cuda:0 tensors with full statistics"; head -2 "$tmp/golden-ev.log"; return 1; }
}
check_syncs() {
    "$PY" "$G" "${args[@]}" --steps 8 --size bench --sync-debug --time-out "$tmp/tu.json" >"$tmp/su.log" 2>&1 || return 1
    "$T" -q -o "$tmp/s.trace" --torch -- "$PY" "$G" "${args[@]}" --steps 8 --size bench --sync-debug \
        --time-out "$tmp/tt.json" >"$tmp/st.log" 2>&1 || return 1
    su=$(grep -c "synchronizing" "$tmp/su.log"); st=$(grep -c "synchronizing" "$tmp/st.log")
    tu=$(json "$tmp/tu.json" "sorted(d['step_s'][2:])[len(d['step_s'][2:])//2]")
    tt=$(json "$tmp/tt.json" "sorted(d['step_s'][2:])[len(d['step_s'][2:])//2]")
    echo "sync warnings untraced $su traced $st; median step untraced ${tu}s traced ${tt}s"
    [ "$st" -le "$su" ]
}
check_bug() {
    "$T" -q -o "$tmp/b.trace" --torch -- "$PY" "$G" "${args[@]}" --bug no-attn-scale@2 >"$tmp/b.log" 2>&1 || return 1
    "$D" --json "$tmp/g1.trace" "$tmp/b.trace" >"$tmp/bug-diff.json"
    fd=$(json "$tmp/bug-diff.json" "(d['first_divergence']['step'], d['first_divergence']['tensor'])")
    echo "first divergence $fd"
    [ "$fd" = "(2, 'model.blocks.0.attn.proj')" ]
}
check_ops() {
    "$T" -q -o "$tmp/o1.trace" --torch ops -- "$PY" "$G" "${args[@]}" --steps 3 >"$tmp/o1.log" 2>&1 || return 1
    "$T" -q -o "$tmp/o2.trace" --torch ops -- "$PY" "$G" "${args[@]}" --steps 3 >"$tmp/o2.log" 2>&1 || return 1
    "$T" -q -o "$tmp/ob.trace" --torch ops -- "$PY" "$G" "${args[@]}" --steps 3 --bug no-attn-scale@2 >"$tmp/ob.log" 2>&1 || return 1
    "$D" --json "$tmp/o1.trace" "$tmp/o2.trace" >"$tmp/ops-gg.json"; [ $? = 0 ] || { echo "ops golden vs golden differ"; return 1; }
    "$D" --json "$tmp/o1.trace" "$tmp/ob.trace" >"$tmp/ops-bug.json"
    fd=$(json "$tmp/ops-bug.json" "(d['first_divergence']['step'], d['first_divergence']['tensor'])")
    echo "ops first divergence $fd"
    case "$fd" in "(2, 'model.blocks.0.attn:aten."*) return 0;; *) return 1;; esac
}
check_nccl() {
    "$T" -q -o "$tmp/n.trace" --timeout 240 --torch -- "$PY" -m torch.distributed.run --nproc_per_node 2 "$G" \
        "${args[@]}" --steps 3 >"$tmp/n.log" 2>&1 || { tail -5 "$tmp/n.log"; return 1; }
    "$U" --check --json "$tmp/n.trace" >"$tmp/nccl-check.json"
    "$U" --events --json --kind collective "$tmp/n.trace" >"$tmp/nccl-coll.log"
    py=$(grep -c '"name":"DDP\.' "$tmp/nccl-coll.log"); nc=$(grep -c '"name":"nccl' "$tmp/nccl-coll.log")
    echo "collective records: NCCL interposer $nc, Python layer $py"
    [ "$nc" -gt 0 ] && [ "$py" = 0 ] && [ "$(json "$tmp/nccl-check.json" "len(d.get('desync') or [])")" = 0 ]
}
for c in golden syncs bug ops nccl; do
    s=$SECONDS
    if msg=$(check_$c 2>&1); then res "PASS torch-$c $((SECONDS - s)) s ${msg//$'\n'/ | }"
    else res "FAIL torch-$c $((SECONDS - s)) s ${msg//$'\n'/ | }"; fi
done
exit $failed

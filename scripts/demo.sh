#!/usr/bin/env bash
# The main job on a fresh machine: install, build, record a golden and a
# buggy run of the bundled training runtime (tftrain) under tftrace, and a
# healthy one apart from golden only by round-off (tftrace --perturb), inspect
# the traces, show with tfdiff that round-off is a match and where the buggy
# run parts and where the bug is (calibrated with --noise), and
# replay both to the divergence to compare the tensors element by element;
# it ends by writing the HTML report (tfdiff --html) and saying where it is.
#   scripts/demo.sh [BUG]     (default causal-offbyone; see tftrain --help)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bug=${1:-causal-offbyone}
if [ ! -x build/tracer/tftrace ] || [ ! -x build/analyzer/tfdiff ] || [ ! -x build/runtime/tftrain ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
fi
cmake --build build -j"$(nproc)" >/dev/null
out=${TFT_DEMO_DIR:-demo}
mkdir -p "$out"
tftrace=build/tracer/tftrace tfdump=build/analyzer/tfdump tftrain=build/runtime/tftrain

echo "== record a golden run and a run with --bug $bug"
# --force: a rerun of the demo replaces the traces of the last one
"$tftrace" --force -o "$out/golden.trace" -- "$tftrain" --steps 40 --log-every 10 --eval-every 0
"$tftrace" --force -o "$out/bad.trace" -- "$tftrain" --steps 40 --log-every 10 --eval-every 0 --bug "$bug" || true

echo; echo "== a healthy run apart from golden only by round-off (tftrace --perturb: the last bit of every parameter"
echo "   flipped at the start): tfdiff tells round-off from a divergence"
"$tftrace" --force -q --perturb -o "$out/golden2.trace" -- "$tftrain" --steps 40 --log-every 40 --eval-every 0 -q
build/analyzer/tfdiff -q "$out/golden.trace" "$out/golden2.trace"

echo; echo "== tfdump $out/bad.trace"
"$tfdump" "$out/bad.trace"
echo; echo "== tfdump --verify $out/bad.trace"
"$tfdump" --verify "$out/bad.trace"

echo; echo "== tfdiff --noise $out/golden2.trace --html $out/report.html $out/golden.trace $out/bad.trace"
st=0
build/analyzer/tfdiff --noise "$out/golden2.trace" --html "$out/report.html" "$out/golden.trace" "$out/bad.trace" || st=$?
[ "$st" -le 1 ] || exit "$st"   # 1 = differences found, which is the point here

echo; echo "== tftrace replay $out/golden.trace $out/bad.trace   (the diverging tensors, element by element)"
rm -rf "$out/replay"
st=0
# --yes: the commands to re-run are the two the demo just recorded
"$tftrace" replay --yes -q -o "$out/replay" "$out/golden.trace" "$out/bad.trace" || st=$?
[ "$st" -le 1 ] || exit "$st"   # 1 = the captured tensors differ

echo
echo "== the HTML report: $(cd "$out" && pwd)/report.html"
echo "   one self-contained page (no network): open it in any browser, e.g. xdg-open $out/report.html"


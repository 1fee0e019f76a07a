#!/usr/bin/env bash
# run_ci_test.sh CI_CHECK TFTRACE TFDIFF TFDUMP TFTRAIN
#
# examples/ci/ci-check.sh as a CI job runs it, on a 6-step tftrain run of the
# small model: --refresh records the golden (in the scratch directory), a
# clean run matches (exit 0, nothing failing), and a run with a planted bug
# (causal-offbyone@3: the causal mask is wrong from step 3) fails with exit
# 1, a JUnit report whose failure names the finding and attaches the
# summary, a Markdown summary with the verdict, and windows of steps 1..5
# that verify, are smaller than the run, hold step 3, and compare as the
# full traces do.
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: $0 CI_CHECK TFTRACE TFDIFF TFDUMP TFTRAIN" >&2; exit 2; }
CI=$1
export TFTRACE=$2 TFDIFF=$3 TFDUMP=$4
TFTRAIN=$5
PY=${PYTHON3:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ci-check-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
TRAIN=("$TFTRAIN" --steps 6 --layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q)

# no golden yet: a clear usage error naming --refresh
rc=0
bash "$CI" --golden golden.trace --out art0 -- "${TRAIN[@]}" >log0 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q -- "--refresh" log0 || { cat log0; fail "without a golden: exit $rc, wanted 2 and a hint"; }

bash "$CI" --refresh --golden golden.trace -- "${TRAIN[@]}" >log1 2>&1 || { cat log1; fail "--refresh failed"; }
"$TFDUMP" --verify golden.trace >/dev/null || fail "the refreshed golden does not verify"

# a clean run: exit 0, no failing case
rc=0
bash "$CI" --golden golden.trace --out ok -- "${TRAIN[@]}" >log2 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat log2; fail "a clean run: exit $rc, wanted 0"; }
grep -q 'failures="0"' ok/tfdiff-junit.xml || fail "a clean run's JUnit report has failures: $(cat ok/tfdiff-junit.xml)"
grep -q "MATCH" ok/tfdiff-summary.md || fail "a clean run's summary lacks MATCH"
[ ! -e ok/run.trace ] && [ ! -e ok/bad-window.trace ] || fail "a clean run should leave no trace behind: $(ls ok)"

# the planted bug: exit 1 and the artifacts
rc=0
KEEP_FULL=1 bash "$CI" --golden golden.trace --out bad --window 2 -- "${TRAIN[@]}" --bug causal-offbyone@3 >log3 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat log3; fail "the planted bug: exit $rc, wanted 1"; }
for f in tfdiff-junit.xml tfdiff-summary.md tfdiff-report.html tfdiff.txt bad-window.trace/manifest.json golden-window.trace/manifest.json; do
    [ -s "bad/$f" ] || fail "bad/$f is missing; the artifacts: $(ls bad)"
done
"$PY" - bad/tfdiff-junit.xml <<'PYEOF'
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot().find("testsuite")
assert int(suite.get("failures")) >= 1, suite.attrib
failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
msg = failed[0].find("failure").get("message")
assert "first divergence" in msg and "step 3" in msg and "L0.attn.mask" in msg, msg
props = {p.get("name"): p.get("value") for p in failed[0].iter("property")}
assert props.get("attachment", "").endswith("tfdiff-report.html"), props
out = failed[0].find("system-out").text
assert out.strip() == "[[ATTACHMENT|%s]]" % props["attachment"], out
PYEOF
grep -q "DIVERGED" bad/tfdiff-summary.md || fail "the summary lacks the verdict: $(cat bad/tfdiff-summary.md)"
grep -q "step 3" bad/tfdiff-summary.md || fail "the summary lacks the divergent step"
grep -q 'Full report: `.*tfdiff-report.html`' bad/tfdiff-summary.md || fail "the summary does not point to the HTML report"
grep -q 'id="verdict" data-status="diverged" data-step="3"' bad/tfdiff-report.html ||
    fail "the HTML report lacks the verdict of step 3: $(grep -o '<p id="verdict[^>]*>' bad/tfdiff-report.html)"
for side in bad golden; do
    "$TFDUMP" --verify "bad/$side-window.trace" >/dev/null || fail "$side-window.trace does not verify"
    "$PY" - "bad/$side-window.trace/manifest.json" <<'PYEOF'
import json, sys
x = json.load(open(sys.argv[1]))["extract"]
assert x["steps"] == [1, 5], x
PYEOF
done
[ -n "$("$TFDUMP" -e -s 3 -k tensor -n L0.attn.mask bad/bad-window.trace)" ] || fail "the window lacks step 3's L0.attn.mask"
win=$(cat bad/bad-window.trace/rank-*.tft | wc -c)
full=$(cat bad/run.trace/rank-*.tft | wc -c)
[ "$win" -lt "$full" ] || fail "the window ($win bytes) is not smaller than the run ($full bytes)"
# the archived pair tells what the full traces told
rc=0
"$TFDIFF" -q --json bad/golden-window.trace bad/bad-window.trace >pair.json || rc=$?
[ "$rc" = 1 ] || fail "the windows compare with exit $rc, wanted 1"
"$PY" - pair.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))["first_divergence"]
assert d["step"] == 3 and d["tensor"] == "L0.attn.mask", d
PYEOF

# a flight-recorder run (--keep-steps 2, 40 steps: older chunks retire): a
# window is narrowed to the steps held in full, and one before them is
# refused (it would pass part of its steps off as whole)
"$TFTRACE" --keep-steps 2 -o keep.trace -- "${TRAIN[@]}" --steps 40 >/dev/null 2>&1 || fail "the --keep-steps run failed"
"$TFDUMP" --extract --steps 20:39 keep.trace keepw.trace 2>err1 || fail "extract of a --keep-steps trace: $(cat err1)"
full=$(grep -oE 'full records from step [0-9]+ only' err1 | grep -oE '[0-9]+' || true)
[ -n "$full" ] && [ "$full" -gt 20 ] || fail "no warning about the narrowed window: $(cat err1)"
"$PY" - keepw.trace/manifest.json "$full" <<'PYEOF' || fail "the narrowed window's manifest"
import json, sys
f = json.load(open(sys.argv[1]))["extract"]["files"][0]
full = int(sys.argv[2])
assert f["narrowed_to"] == full and f["kept_steps"] == [full, 39], f
PYEOF
rc=0
"$TFDIFF" -q --steps 20:39 keep.trace keepw.trace >/dev/null 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "the narrowed window compares with its source with exit $rc"
rc=0
"$TFDUMP" --extract --steps 0:$((full - 1)) keep.trace keepx.trace 2>err2 || rc=$?
[ "$rc" = 2 ] && grep -q "extract steps from $full" err2 && [ ! -e keepx.trace ] || fail "a window before the full steps: exit $rc, $(cat err2)"
echo PASS

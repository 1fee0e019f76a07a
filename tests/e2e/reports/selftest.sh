#!/usr/bin/env bash
# selftest.sh PYTHON3 OUTDIR: browser_check.py can fail (reports.browser-selftest).
#   fixtures/good.html follows the report contract: it must pass;
#   fixtures/bad.html has a console.error, an uncaught exception and an
#   <img> from http://example.invalid: it must fail, naming all three;
#   good.html checked against wrong expectations must fail, naming them
#   (these last two, and good.html again, in one browser: --batch).
# Prints SKIP and exits 0 without chromium (browser_check.py's status 77).
set -uo pipefail
PY=${1:-python3}
out=${2:-${TMPDIR:-/tmp}}
here=$(cd "$(dirname "$0")" && pwd)
check=("$PY" "$here/browser_check.py" --timeout 30)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run() { # run NAME WANT_RC ARGS...: browser_check.py, its output in $out/NAME.log
    local name=$1 want=$2 rc=0
    shift 2
    "${check[@]}" --screenshot "$out/selftest-$name.png" "$@" >"$out/selftest-$name.log" 2>&1 || rc=$?
    sed "s/^/  [$name] /" "$out/selftest-$name.log"
    if [ "$rc" = 77 ]; then
        echo "SKIP: $(grep -m1 '^SKIP' "$out/selftest-$name.log")"
        exit 0
    fi
    [ "$rc" = "$want" ] || fail "$name: browser_check.py exit status $rc, expected $want"
}
expect_line() { # expect_line NAME TEXT: the log of NAME has a FAIL line with TEXT (or any line: -a)
    local pat=FAIL
    [ "$1" = -a ] && { pat=""; shift; }
    grep "^$pat" "$out/selftest-$1.log" | grep -qF -- "$2" || fail "$1: no ${pat:-} line with '$2'"
}

mkdir -p "$out"
run good 0 --status diverged --step 2 --section curves,heatmap,first-divergence --marked --downsampled \
    "$here/fixtures/good.html"
expect_line -a good "screenshot: $out/selftest-good.png"
[ -s "$out/selftest-good.png" ] && head -c 8 "$out/selftest-good.png" | grep -q PNG ||
    fail "good: no PNG at $out/selftest-good.png"

# --batch: three pages in one browser, each in its own tab; the bad page's
# errors must not leak into the good page checked after it
good_args=(--status diverged --step 2 --section curves,heatmap,first-divergence --marked --downsampled)
{
    printf '%q --screenshot %q\n' "$here/fixtures/bad.html" "$out/selftest-bad.png"
    printf '%q --screenshot %q %s\n' "$here/fixtures/good.html" "$out/selftest-after.png" "${good_args[*]}"
    printf '%q --screenshot %q %s\n' "$here/fixtures/good.html" "$out/selftest-wrong.png" \
        "--status match --step 3 --section nonfinite --no-section curves --marked"
} >"$out/selftest.batch"
run batch 1 --batch "$out/selftest.batch"
expect_line batch "bad.html: console: console.error: selftest: a console error"
expect_line batch "bad.html: exception: uncaught exception"
expect_line batch "Error: selftest: an uncaught exception"
expect_line batch "bad.html: network: request to http://example.invalid/x.png"
expect_line batch 'bad.html: dom: external resource named: <img src="http://example.invalid/x.png">'
expect_line batch "good.html: dom: #verdict data-status='diverged', expected 'match'"
expect_line batch "good.html: dom: #verdict data-step='2', expected '3'"
expect_line batch "good.html: dom: no section#nonfinite"
expect_line batch "good.html: dom: section#curves present, expected absent"
expect_line -a batch "PASS good.html"
expect_line -a batch "1 of 3 pages passed"
if grep -q "^FAIL: good.html: \(console\|exception\|network\)" "$out/selftest-batch.log"; then
    fail "batch: console/network failures reported for good.html"
fi

if [ "$failures" != 0 ]; then
    echo "reports.browser-selftest: $failures check(s) failed"
    exit 1
fi
echo "PASS reports.browser-selftest"

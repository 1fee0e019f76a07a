#!/usr/bin/env bash
# selftest.sh PYTHON3 OUTDIR: browser_check.py can fail (reports.browser-selftest).
#   fixtures/good.html follows the report contract: it must pass;
#   fixtures/bad.html has a console.error, an uncaught exception and an
#   <img> from http://example.invalid: it must fail, naming all three;
#   good.html checked against wrong expectations must fail, naming them.
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
expect_line() { # expect_line NAME TEXT: the log of NAME has a line with TEXT
    grep -qF -- "$2" "$out/selftest-$1.log" || fail "$1: no line with '$2'"
}

mkdir -p "$out"
run good 0 --status diverged --step 2 --section curves,heatmap,first-divergence --marked --downsampled \
    "$here/fixtures/good.html"
expect_line good "screenshot: $out/selftest-good.png"
[ -s "$out/selftest-good.png" ] && head -c 8 "$out/selftest-good.png" | grep -q PNG ||
    fail "good: no PNG at $out/selftest-good.png"

run bad 1 "$here/fixtures/bad.html"
expect_line bad "FAIL: console: console.error: selftest: a console error"
expect_line bad "FAIL: exception: uncaught exception"
expect_line bad "Error: selftest: an uncaught exception"
expect_line bad "FAIL: network: request to http://example.invalid/x.png"
expect_line bad 'FAIL: dom: external resource named: <img src="http://example.invalid/x.png">'

run wrong 1 --status match --step 3 --section nonfinite --no-section curves --marked --report diff \
    "$here/fixtures/good.html"
expect_line wrong "FAIL: dom: #verdict data-status='diverged', expected 'match'"
expect_line wrong "FAIL: dom: #verdict data-step='2', expected '3'"
expect_line wrong "FAIL: dom: no section#nonfinite"
expect_line wrong "FAIL: dom: section#curves present, expected absent"
if grep -q "^FAIL: \(console\|exception\|network\)" "$out/selftest-wrong.log"; then
    fail "wrong: console/network failures reported for good.html"
fi

if [ "$failures" != 0 ]; then
    echo "reports.browser-selftest: $failures check(s) failed"
    exit 1
fi
echo "PASS reports.browser-selftest"

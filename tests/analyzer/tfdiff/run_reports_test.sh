#!/usr/bin/env bash
# run_reports_test.sh TFDIFF TFT_SAMPLE
#
# tfdiff --markdown and --junit as a CI job reads them: the Markdown summary
# has the verdict, the first finding, the findings by class and the command
# lines (tfdiff's and the recordings'); '-' writes it to stdout in place of
# the text report; the JUnit failure message is the finding's sentence and
# the failing case attaches the summary (a property and the
# [[ATTACHMENT|path]] line of system-out); a match has no failing case and
# says MATCH; an unwritable path is exit 2 with a message.
set -euo pipefail
tfdiff=$1
sample=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfdiff-reports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
st() { local rc=0; "$@" >out 2>err || rc=$?; echo "$rc"; }

"$sample" g.trace --ranks 2 --steps 8 >/dev/null
"$sample" b.trace --ranks 2 --steps 8 --diverge 1:4 >/dev/null

[ "$(st "$tfdiff" --markdown sum.md --junit j.xml g.trace b.trace)" = 1 ] || fail "diverged: exit $(cat err)"
grep -q "^tfdiff: DIVERGED" out || fail "the text report should still go to stdout"
grep -q "^### tfdiff: .*DIVERGED" sum.md || fail "summary verdict: $(cat sum.md)"
grep -q '^\*\*First finding:\*\* first divergence: rank 1, step 4, seq [0-9]*: L0.qkv' sum.md || fail "summary finding: $(cat sum.md)"
grep -q '^| first divergence | 1 rank |$' sum.md || fail "summary table: $(cat sum.md)"
grep -q '^| leak | 0 |$' sum.md || fail "summary table (leaks): $(cat sum.md)"
grep -q -- "- compare: \`.*tfdiff --markdown sum.md --junit j.xml g.trace b.trace\`" sum.md || fail "summary: tfdiff's command line: $(cat sum.md)"
grep -q -- "- BAD \`b.trace\` recorded by: \`.*--diverge 1:4" sum.md || fail "summary: BAD's recording command: $(cat sum.md)"
python3 - j.xml <<'PYEOF' || fail "junit: $(cat j.xml)"
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot().find("testsuite")
cases = {c.get("name"): c for c in suite.iter("testcase")}
assert int(suite.get("failures")) == 1, suite.attrib
bad = cases["rank 1 divergence"]
msg = bad.find("failure").get("message")
assert msg.startswith("first divergence: rank 1, step 4, seq ") and "L0.qkv" in msg, msg
assert bad.find("failure").text == msg
assert [(p.get("name"), p.get("value")) for p in bad.iter("property")] == [("attachment", "sum.md")]
assert bad.find("system-out").text == "[[ATTACHMENT|sum.md]]"
assert cases["rank 0 divergence"].find("failure") is None and cases["rank 0 divergence"].find("system-out") is None
PYEOF

# '-': the summary on stdout, instead of the text report; no attachment
[ "$(st "$tfdiff" --markdown - --junit j2.xml g.trace b.trace)" = 1 ] || fail "markdown to stdout: exit"
head -1 out | grep -q "^### tfdiff: " || fail "--markdown -: $(head -3 out)"
! grep -q "^tfdiff: DIVERGED" out || fail "--markdown - should replace the text report"
! grep -q "ATTACHMENT\|attachment" j2.xml || fail "no attachment without a report file: $(cat j2.xml)"
grep -q 'message="first divergence: rank 1, step 4' j2.xml || fail "junit message without attachment"

# a match
[ "$(st "$tfdiff" --markdown m.md --junit m.xml g.trace g.trace)" = 0 ] || fail "match: exit"
grep -q "^### tfdiff: .*MATCH" m.md && grep -q "No difference found" m.md || fail "match summary: $(cat m.md)"
grep -q 'failures="0"' m.xml && ! grep -q "<failure" m.xml || fail "match junit: $(cat m.xml)"

# an unwritable summary: exit 2, named
[ "$(st "$tfdiff" --markdown nodir/x.md g.trace b.trace)" = 2 ] || fail "unwritable: exit"
grep -q "nodir/x.md: cannot write the Markdown summary" err || fail "unwritable: $(cat err)"
[ "$(st "$tfdiff" --json --markdown - g.trace b.trace)" = 2 ] || fail "--json with --markdown -: exit"
grep -q "both write to stdout" err || fail "--json with --markdown -: $(cat err)"
"$tfdiff" --help | grep -q -- "--markdown FILE" || fail "--help lacks --markdown"
echo PASS

#!/usr/bin/env bash
# tfdiff on trace directories that hold one rank twice (docs/SECURITY.md,
# "Hostile traces and the analyzers"; issue #13 item 10): a copy of GOLDEN's
# rank file under a second name in BAD was compared against one GOLDEN
# reader from two threads at once (SIGSEGV in zstd, a loop at 100% CPU, or
# GOLDEN blamed). Now: exit 2 every time, naming both files; hard links
# and two runs mixed likewise; a second process of one run is a rank of its
# own and compares.
set -euo pipefail
tfdiff=$1 sample=$2 mk=$3
tmp=$(mktemp -d /tmp/tft-tfdiff-hostile-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
st() { local s=0; timeout 60 "$@" >out.txt 2>err.txt || s=$?; echo $s; }

"$sample" g.trace --ranks 1 --steps 40 >/dev/null
"$sample" o.trace --ranks 1 --steps 40 >/dev/null # another run
mkdir d.trace
cp g.trace/rank-00000.tft d.trace/
cp g.trace/rank-00000.tft d.trace/rank-0.tft
for i in $(seq 20); do
    s=$(st "$tfdiff" -q g.trace d.trace)
    [ "$s" = 2 ] || fail "run $i: exit $s, want 2: $(cat err.txt)"
    grep -q "d.trace/rank-0.tft and d.trace/rank-00000.tft both claim rank 0" err.txt ||
        fail "run $i: the message does not name both files: $(cat err.txt)"
    [ "$(wc -l <err.txt)" = 1 ] || fail "run $i: more than the one message: $(cat err.txt)"
done
# as GOLDEN too
[ "$(st "$tfdiff" -q d.trace g.trace)" = 2 ] || fail "duplicate GOLDEN: $(cat err.txt)"
grep -q "both claim rank 0" err.txt || fail "duplicate GOLDEN message: $(cat err.txt)"

# hard links, many of them: refused at once
mkdir l.trace
cp g.trace/rank-00000.tft l.trace/
for i in $(seq 1000); do ln l.trace/rank-00000.tft "l.trace/rank-7$i.tft"; done
[ "$(st "$tfdiff" -q g.trace l.trace)" = 2 ] || fail "hard links: $(cat err.txt)"
grep -q "are the same file (hard links" err.txt || fail "hard links message: $(cat err.txt)"

# two runs mixed in BAD
mkdir m.trace
cp g.trace/rank-00000.tft m.trace/
cp o.trace/rank-00000.tft m.trace/rank-00000-p9.tft
[ "$(st "$tfdiff" -q g.trace m.trace)" = 2 ] || fail "mixed runs: $(cat err.txt)"
grep -q "belong to different runs" err.txt || fail "mixed runs message: $(cat err.txt)"

# a second process of one run claiming rank 0 (rank-00000-pPID.tft): ranks 0 and 1
"$mk" second s.trace
[ "$(st "$tfdiff" --json s.trace s.trace)" = 0 ] || fail "second process: $(cat out.txt err.txt)"
python3 -c "
import json; r = json.load(open('out.txt'))
assert r['verdict'] == 'match', r['verdict']
assert sorted(k['rank'] for k in r['ranks']) == [0, 1], r['ranks']
" || fail "second process: ranks"
echo PASS

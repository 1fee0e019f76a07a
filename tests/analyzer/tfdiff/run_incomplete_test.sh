#!/usr/bin/env bash
# Lost records are not divergences (issue 13, items 7-8): a BAD whose
# collector stalled (SIGSTOP) and dropped records, and a BAD whose rank file
# holds only its header, give the verdict "incomplete" (exit 3) with the
# reason first, never a false "diverged" or "match"; a real change in what
# was recorded is still "diverged".
set -euo pipefail
tfdiff=$1 tftrace=$2 tftrain=$3 tfdump=$4
tmp=$(mktemp -d /tmp/tft-tfdiff-incomplete-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
run=(--layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q --steps 400)
st() { local s=0; "$@" >out.txt 2>err.txt || s=$?; echo $s; }
json() { python3 -c "import json,sys; r=json.load(open('out.txt')); $1" || fail "json check: $1 ($(head -c 600 out.txt))"; }

"$tftrace" -q -o full.trace -- "$tftrain" "${run[@]}" >/dev/null

# A stalled collector: small rings, the launcher (collector) stopped for 2 s
# once the rank file exists, while the program goes on recording.
stalled() { # OUT [tftrain args...]
  local out=$1; shift
  "$tftrace" -q --ring-kb 64 -o "$out" -- "$tftrain" "${run[@]}" "$@" >/dev/null &
  local pid=$! n=0
  until compgen -G "$out/rank-*.tft" >/dev/null || [ $n -ge 600 ]; do sleep 0.05; n=$((n + 1)); done
  kill -STOP $pid; sleep 2; kill -CONT $pid
  wait $pid || true
}
stalled s.trace
dropped=$("$tfdump" --json s.trace | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropped"])')
[ "$dropped" -gt 0 ] || fail "the stalled run dropped nothing: the test proves nothing"
[ "$(st "$tfdiff" --json full.trace s.trace)" = 3 ] || fail "stalled: exit $(cat out.txt err.txt | head -c 800)"
json "assert r['verdict']=='incomplete', r['verdict']; assert r['first_divergence'] is None, r['first_divergence']"
json "assert any('BAD lost' in x for x in r['incomplete']), r['incomplete']; k=r['ranks'][0]; assert k['bad_dropped']>0 and k['golden_dropped']==0, k"
json "k=r['ranks'][0]; assert k['identical']==k['compared']-k['within_tolerance'], k"
[ "$(st "$tfdiff" full.trace s.trace)" = 3 ] || fail "stalled text exit"
head -2 out.txt | grep "^tfdiff: INCOMPLETE" >/dev/null || fail "text verdict: $(head -3 out.txt)"
sed -n 2p out.txt | grep "^incomplete: rank 0: BAD lost [0-9]* records" >/dev/null || fail "the drops said first: $(head -3 out.txt)"

# dropped records and a real change: still diverged, at the change
stalled sb.trace --bug no-scale
[ "$(st "$tfdiff" --json full.trace sb.trace)" = 1 ] || fail "stalled + bug: exit"
json "d=r['first_divergence']; assert (d['step'],d['tensor'])==(0,'L0.attn.scores'), d; assert r['verdict']=='diverged'"
json "assert any('BAD lost' in x for x in r['incomplete']), r['incomplete']"

# a rank file holding only its header: nothing compared is never a match
mkdir e.trace
head -c 150 full.trace/rank-00000.tft >e.trace/rank-00000.tft
[ "$(st "$tfdiff" --json full.trace e.trace)" = 3 ] || fail "empty BAD: exit $(cat out.txt)"
json "assert r['verdict']=='incomplete' and any('BAD recorded nothing' in x for x in r['incomplete']), r"
[ "$(st "$tfdiff" --json e.trace full.trace)" = 3 ] || fail "empty GOLDEN: exit"
json "assert any('GOLDEN recorded nothing' in x for x in r['incomplete']), r['incomplete']"
# JUnit: a failing 'complete' case
[ "$(st "$tfdiff" --junit j.xml full.trace e.trace)" = 3 ] || fail "junit exit"
grep -q 'name="complete"' j.xml && grep -q "BAD recorded nothing" j.xml || fail "junit: $(cat j.xml)"
echo "PASS tfdiff incomplete (stalled run dropped ${dropped} records)"

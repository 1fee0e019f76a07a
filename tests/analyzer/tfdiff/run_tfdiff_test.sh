#!/usr/bin/env bash
# tfdiff as a user runs it: verdicts and exit statuses, text/JSON/JUnit,
# filters, structural reports, and bad input.
set -euo pipefail
tfdiff=$1 tftrace=$2 tftrain=$3
tmp=$(mktemp -d /tmp/tft-tfdiff-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
small=(--layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q --steps 3)
rec() { local out=$1; shift; "$tftrace" -q -o "$out" -- "$tftrain" "$@" || true; }
rec g.trace "${small[@]}"
rec g2.trace "${small[@]}"
rec b.trace "${small[@]}" --bug no-scale
rec m.trace --layers 1 --d-model 64 --heads 2 --seq 16 --batch 4 --eval-every 0 -q --steps 3
st() { local s=0; "$@" >out.txt 2>err.txt || s=$?; echo $s; }
json() { python3 -c "import json,sys; r=json.load(open('out.txt')); $1" || fail "json check: $1"; }

# the same run twice: match, exit 0
[ "$(st "$tfdiff" g.trace g2.trace)" = 0 ] || fail "golden vs golden: $(cat out.txt err.txt)"
grep -q "MATCH" out.txt || fail "text verdict"
[ "$(st "$tfdiff" --json g.trace g2.trace)" = 0 ] || fail "json golden"
json "assert r['verdict']=='match' and r['first_divergence'] is None and r['leaks']==[] and r['desync']==[]"

# a bug: diverged, exit 1, text names step, tensor and both sides
[ "$(st "$tfdiff" g.trace b.trace)" = 1 ] || fail "bad: exit"
grep -q "first divergence: rank 0, step 0, seq [0-9]*: L0.attn.scores" out.txt || { cat out.txt; fail "text first divergence"; }
grep -q "golden.*bad" out.txt || fail "side by side"
[ "$(st "$tfdiff" --json g.trace b.trace)" = 1 ] || fail "bad json exit"
json "d=r['first_divergence']; assert (d['step'],d['tensor'],d['kind'])==(0,'L0.attn.scores','value'), d; assert r['origin']['tensor']=='L0.attn.scores'; assert 'fingerprint' in d['golden'] and 'mean' in d['bad']"
json "k=r['ranks'][0]; assert k['common_steps']==[0,2] and k['bad_ended_early'] is False"

# filters: a step range after the divergence still finds it (it persists), a name glob
[ "$(st "$tfdiff" --json --name 'grad.*' g.trace b.trace)" = 1 ] || fail "--name exit"
json "assert r['first_divergence']['tensor'].startswith('grad.')"
[ "$(st "$tfdiff" --json --steps 1:2 g.trace b.trace)" = 1 ] || fail "--steps exit"
json "assert r['first_divergence']['step']==1"
[ "$(st "$tfdiff" --json --name 'no-such-*' g.trace b.trace)" = 0 ] || fail "--name matching nothing"

# JUnit
[ "$(st "$tfdiff" --junit j.xml g.trace b.trace)" = 1 ] || fail "junit exit"
python3 -c "import xml.etree.ElementTree as E; t=E.parse('j.xml'); s=t.getroot().find('testsuite'); assert int(s.get('failures'))>=1; assert any(c.find('failure') is not None for c in s.iter('testcase'))" || fail "junit xml"

# different models: one clear structural report, not a cascade
[ "$(st "$tfdiff" --json g.trace m.trace)" = 1 ] || fail "models exit"
json "k=r['ranks'][0]; assert 'model' in k.get('structure','') or r['first_divergence']['kind']=='shape', k"

# bad input: exit 2 with the file named
[ "$(st "$tfdiff" g.trace /nonexistent.trace)" = 2 ] || fail "missing path"
grep -q "/nonexistent.trace" err.txt || fail "missing path message"
mkdir junk.trace && echo garbage > junk.trace/rank-00000.tft
[ "$(st "$tfdiff" g.trace junk.trace)" = 2 ] || fail "garbage"
grep -q "junk.trace" err.txt || fail "garbage message"
cp -r b.trace dmg.trace
f=dmg.trace/rank-00000.tft
size=$(stat -c %s "$f")
printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
[ "$(st "$tfdiff" g.trace dmg.trace)" = 2 ] || fail "damaged input"
grep -q "dmg.trace/rank-00000.tft" err.txt || { cat err.txt; fail "damaged message"; }
# usage errors
for bad in "--bogus g.trace b.trace" "g.trace" "--rtol x g.trace b.trace" "--steps 3:1 g.trace b.trace"; do
  # shellcheck disable=SC2086
  [ "$(st "$tfdiff" $bad)" = 2 ] || fail "usage: $bad"
done
"$tfdiff" --help | grep -- "--junit" >/dev/null || fail "--help"
"$tfdiff" --version | grep "^tfdiff" >/dev/null || fail "--version"
echo "PASS tfdiff"

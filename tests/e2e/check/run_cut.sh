#!/usr/bin/env bash
# Traces that lost records (issue 35, items 3-4; docs/TFDIFF.md "Cut
# traces", docs/CHECK.md "Damage and loss"):
#   - a BAD cut by its recording (the collector SIGKILLed; a full disk) of a
#     program that ran as GOLDEN did: tfdiff says INCOMPLETE (exit 3) and
#     why, never DIVERGED on the missing tail; tfdump --check says the loss
#     first and exits 1;
#   - rank files torn, header-only, or with a damaged chunk: tfdump --check
#     names the damage (exit 1) and no rule reads across a hole (no false
#     dtype- or shape-change); tfdiff --tensors with captures lost to damage
#     exits 3 (incomplete), not 0.
# Usage: run_cut.sh TFTRAIN TFTRACE TFDUMP TFDIFF
set -euo pipefail
tftrain=$1 tftrace=$2 tfdump=$3 tfdiff=$4
PY=${PYTHON3:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-cut.XXXXXX")
mnt= bg=
cleanup() {
    [ -n "$bg" ] && { kill -KILL "$bg" 2>/dev/null || true; }
    [ -n "$mnt" ] && { umount "$mnt" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -qF -- "$2" "$1" || { echo "--- $1"; cat "$1"; fail "$1 lacks '$2'"; }; }
# run WANT CMD...: stdout in out.txt, stderr in err.txt
run() {
    local want=$1 st=0
    shift
    "$@" >out.txt 2>err.txt || st=$?
    [ "$st" = "$want" ] || { echo "--- stdout"; head -40 out.txt; echo "--- stderr"; cat err.txt; fail "exit $st, want $want: $*"; }
}
steps=120
"$tftrace" -q -o golden.trace -- "$tftrain" --steps $steps >golden.out 2>&1

# ---- 1. the collector SIGKILLed while the program runs on ----
"$tftrace" -q -o killed.trace -- "$tftrain" --steps $steps >killed.out 2>&1 &
bg=$!
for _ in $(seq 600); do   # until some steps reached the disk
    sz=$(stat -c %s killed.trace/rank-00000.tft 2>/dev/null || echo 0)
    [ "$sz" -gt 300000 ] && break
    sleep 0.05
done
kill -KILL "$bg"; wait "$bg" 2>/dev/null || true; bg=
for _ in $(seq 600); do pgrep -f "tftrain --steps $steps" >/dev/null || break; sleep 0.1; done
run 3 "$tfdiff" golden.trace killed.trace
has out.txt "INCOMPLETE"
has out.txt "BAD was cut short: its collector died"
! grep -q "DIVERGED\|missing" out.txt || fail "a cut BAD read as a divergence"
run 3 "$tfdiff" --json golden.trace killed.trace
"$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['verdict']=='incomplete' and j['incomplete'], j" out.txt ||
    fail "tfdiff --json: verdict/incomplete"
run 1 "$tfdump" --check killed.trace
head -1 out.txt | grep -q "^damage: the recording was cut short: its collector died" || fail "--check: the loss not said first"
has out.txt "first: damage"

# ---- 2. a full disk (root: a small tmpfs) ----
if [ "$(id -u)" = 0 ] && mkdir small && mount -t tmpfs -o size=700k tmpfs small 2>/dev/null; then
    mnt=$tmp/small
    st=0; "$tftrace" -q -o small/full.trace -- "$tftrain" --steps $steps >full.out 2>full.err || st=$?
    [ $st = 86 ] || { cat full.err; fail "tftrace on a full disk: exit $st, want 86"; }
    run 3 "$tfdiff" golden.trace small/full.trace
    has out.txt "BAD was cut short: records were lost to write errors"
    ! grep -q "DIVERGED" out.txt || fail "a BAD cut by a full disk read as a divergence"
    run 1 "$tfdump" --check small/full.trace
    head -1 out.txt | grep -q "^damage: the recording was cut short: records were lost to write errors" ||
        fail "--check on a full-disk trace: $(head -3 out.txt)"
else
    echo "(the full-disk case needs root and a tmpfs: not run)"
fi

# ---- 3. damaged, torn and header-only rank files ----
"$tfdump" --chunks --json golden.trace | "$PY" -c "
import json, sys
for l in sys.stdin:
    c = json.loads(l)
    print(c['chunk'], c['offset'], c['comp_size'])" >chunks.txt
read -r _ first _ <chunks.txt
read -r _ c2 c2len < <(sed -n 3p chunks.txt)
nchunks=$(wc -l <chunks.txt)
[ "$nchunks" -ge 4 ] || fail "golden has $nchunks chunks, want at least 4"
# each inner chunk damaged in turn (the chunks of the rank file's threads
# interleave: the lost steps are partial): never a rule across the hole
while read -r k off len; do
    [ "$k" -ge 1 ] && [ "$k" -lt $((nchunks - 1)) ] && [ "$k" -le 6 ] || continue
    rm -rf dmg.trace; cp -r golden.trace dmg.trace   # chunk k's compressed bytes overwritten in the middle
    printf 'XXXXXXXXXXXXXXXX' | dd of=dmg.trace/rank-00000.tft bs=1 seek=$((off + len / 2)) conv=notrunc status=none
    run 1 "$tfdump" --check dmg.trace
    has out.txt "damage: rank 0 (dmg.trace/rank-00000.tft) is damaged: chunk $k"
    ! grep -q "dtype-change\|shape-change" out.txt ||
        fail "chunk $k lost: a rule read across it: $(grep -- '-change' out.txt)"
done <chunks.txt
cp -r golden.trace torn.trace
truncate -s $((c2 + c2len / 2)) torn.trace/rank-00000.tft
run 1 "$tfdump" --check torn.trace
has out.txt "damage: rank 0 (torn.trace/rank-00000.tft) is torn"
cp -r golden.trace hdr.trace
truncate -s "$first" hdr.trace/rank-00000.tft
run 1 "$tfdump" --check hdr.trace
has out.txt "it holds no records"
# tfdiff --tensors: BAD's captures partly lost to a damaged chunk: not a clean 0
"$tftrace" -q --capture 'step=2,name=L0.fc;step=60,name=L0.fc' -o cg.trace -- "$tftrain" --steps 80 >/dev/null 2>&1
cp -r cg.trace cb.trace
at=$("$tfdump" --chunks --json cb.trace | "$PY" -c "
import json, sys
c = [json.loads(l) for l in sys.stdin]
x = [k for k in c if k['steps'][0] <= 60 <= k['steps'][1]][-1]
print(x['offset'] + x['comp_size'] // 2)")
printf 'XXXXXXXXXXXXXXXX' | dd of=cb.trace/rank-00000.tft bs=1 seek="$at" conv=notrunc status=none
run 0 "$tfdiff" --tensors cg.trace cg.trace
run 3 "$tfdiff" --tensors cg.trace cb.trace
has out.txt "incomplete: BAD lost captures: cb.trace/rank-00000.tft is damaged"
# the intact golden: no damage line, exit as before
st=0; "$tfdump" --check golden.trace >out.txt 2>err.txt || st=$?
! grep -q "^damage" out.txt || fail "damage reported on an intact trace"
echo PASS

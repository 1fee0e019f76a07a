#!/bin/bash
# html.report: tfdiff --html and tfdump --html as a user runs them (docs/REPORTS.md).
# Records small tftrain runs (GOLDEN, BAD with causal-offbyone; a capture of
# each for --tensors) and checks the pages with check_html.py (Python's
# html.parser): the DOM contract (verdict, sections, marked step), no
# external reference, the escaping of hostile names (mk_html_hostile), the
# size bound, the exit statuses (unchanged by --html; 2 when FILE cannot be
# written), the atomic write, and the JUnit / Markdown pointers to the page.
#   run_html_test.sh TFDIFF TFDUMP TFTRACE TFTRAIN MK_HOSTILE
set -u
TFDIFF=$1 TFDUMP=$2 TFTRACE=$3 TFTRAIN=$4 MK=$5
PY=${PYTHON3:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
CHK=("$PY" "$here/check_html.py")
work=$(mktemp -d "${TMPDIR:-/tmp}/tft-html.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }
check() { "${CHK[@]}" "$@" || fail "check_html.py $*"; }

# the recordings: tftrain's MPI library keeps memory to its exit (LeakSanitizer
# in an ASan build would fail them); tfdiff and tfdump run with the test's
# ASAN_OPTIONS, leak detection included
REC=(env "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1" "$TFTRACE" -q)
SMALL=(--layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q --steps 6)
"${REC[@]}" -o g.trace -- "$TFTRAIN" "${SMALL[@]}" >g.log 2>&1 || fail "recording GOLDEN"
"${REC[@]}" -o b.trace -- "$TFTRAIN" "${SMALL[@]}" --bug causal-offbyone >b.log 2>&1 || fail "recording BAD"

# --- the divergence page; the exit status is the same as without --html
rc0=0; "$TFDIFF" -q g.trace b.trace >plain.txt 2>&1 || rc0=$?
rc=0; "$TFDIFF" -q --html r.html --junit j.xml --markdown m.md g.trace b.trace >text.txt 2>err.txt || rc=$?
[ "$rc" = 1 ] && [ "$rc0" = 1 ] || fail "tfdiff exit $rc with --html, $rc0 without; want 1 and 1"
cmp -s plain.txt text.txt || fail "--html changed the text report"
check r.html --report diff --status diverged --step 0 --sections first-divergence,heatmap,curves \
      --absent nonfinite,leaks,desync,tensors --mark-curves 0 --mark-heatmap 0 --max-bytes 400000 \
      --downsampled no --text-contains "L0.attn.mask" --text-contains "first divergence: rank 0, step 0"
grep -q 'name="attachment" value="r.html"' j.xml || fail "JUnit does not attach r.html"
grep -q '\[\[ATTACHMENT|r.html\]\]' j.xml || fail "JUnit system-out does not name r.html"
grep -q 'Full report: `r.html`' m.md || fail "the Markdown summary does not point to r.html"
ls | grep -q '\.tmp-' && fail "a temporary file was left: $(ls)"

# --- a match: no data-step, no finding sections; an existing FILE is replaced
echo old >r.html
rc=0; "$TFDIFF" -q --html r.html g.trace g.trace >/dev/null 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "tfdiff GOLDEN GOLDEN exit $rc, want 0"
check r.html --report diff --status match --no-step --absent first-divergence,nonfinite,leaks,desync \
      --sections curves,heatmap

# --- hostile names: escaped text, never markup
"$MK" hg.tft golden && "$MK" hb.tft bad || fail "mk_html_hostile"
rc=0; "$TFDIFF" -q --html h.html hg.tft hb.tft >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "tfdiff on the hostile pair: exit $rc, want 1"
check h.html --report diff --status diverged --step 2 --sections first-divergence,leaks,curves,heatmap \
      --mark-heatmap 2 --hostile \
      --text-contains "rank 0: layer 2 output (transformer.h.2) std" \
      --count g.grid:4 --count g.pts:4 --count rect.cbar:1 --text-contains "1 MiB" \
      --text-contains "GOLDEN, step 1: 2.9" --text-contains "BAD, step 4: 1.5"
# every chart has ticks with gridlines and a tooltip per point; memory in
# binary units; the heatmap a colour bar (and tooltips on its cells)
grep -q '<rect x="[0-9.]*" y="[0-9]*" width="[0-9.]*" height="[0-9]*" fill="#[0-9a-f]*"><title>' h.html ||
    fail "the heatmap's cells have no tooltips"
rc=0; "$TFDUMP" --html hd.html hb.tft >/dev/null 2>&1 || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "tfdump --html on the hostile file: exit $rc"
check hd.html --report dump --sections check,curves,memory --hostile

# --- tfdump --html: the single-trace page, --check's status (GOLDEN: nothing
# found; BAD's causal-offbyone is found by --check's detectors, docs/CHECK.md)
rc=0; "$TFDUMP" --html db.html b.trace >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "tfdump --html of causal-offbyone exit $rc, want 1 (mask-future): $(head -2 err.txt)"
check db.html --report dump --status findings --sections check,curves,memory
rc=0; "$TFDUMP" --html d.html g.trace >/dev/null 2>err.txt || rc=$?
[ "$rc" = 0 ] || fail "tfdump --html exit $rc, want 0 (--check finds nothing): $(head -2 err.txt)"
check d.html --report dump --status ok --no-step --sections check,curves,memory --max-bytes 400000 \
      --text-contains "rank 0: loss"

# a command that recorded nothing (a manifest, no rank file): the page says
# so, with --check's status (1), and nothing crashes
mkdir -p none.trace
"${REC[@]}" -o none.trace -- true >/dev/null 2>&1 || fail "recording a command that records nothing"
rc=0; "$TFDUMP" --html dn.html none.trace >/dev/null 2>err.txt || rc=$?
[ "$rc" = 1 ] || fail "tfdump --html of a trace that recorded nothing: exit $rc, want 1: $(head -2 err.txt)"
check dn.html --report dump --text-contains "nothing was recorded"

# --- --tensors: the captured pairs' differences as images with the pattern
CAP=(--capture 'step=0,name=L0.attn.mask')
"${REC[@]}" -o cg.trace "${CAP[@]}" -- "$TFTRAIN" "${SMALL[@]}" --steps 1 >/dev/null 2>&1 || fail "capture GOLDEN"
"${REC[@]}" -o cb.trace "${CAP[@]}" -- "$TFTRAIN" "${SMALL[@]}" --steps 1 --bug causal-offbyone \
    >/dev/null 2>&1 || fail "capture BAD"
rc=0; "$TFDIFF" --tensors --html t.html cg.trace cb.trace >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "tfdiff --tensors --html exit $rc, want 1"
check t.html --report diff --status diverged --step 0 --sections tensors --count svg.tensor-diff:1 \
      --text-contains "only just above the diagonal"

# --- errors: FILE cannot be written -> exit 2, a message, nothing left behind
rc=0; "$TFDIFF" -q --html "$work/no/such/dir/r.html" g.trace b.trace >/dev/null 2>err.txt || rc=$?
[ "$rc" = 2 ] || fail "tfdiff --html into a missing directory: exit $rc, want 2"
grep -q "cannot write the HTML report" err.txt || fail "no clear message: $(cat err.txt)"
rc=0; "$TFDUMP" --html "$work/no/such/dir/d.html" b.trace >/dev/null 2>err.txt || rc=$?
[ "$rc" = 2 ] || fail "tfdump --html into a missing directory: exit $rc, want 2"
grep -q "cannot write the HTML page" err.txt || fail "tfdump: no clear message: $(cat err.txt)"
rc=0; "$TFDUMP" --html x.html --json b.trace >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "tfdump --html --json: exit $rc, want 2 (usage)"
rc=0; "$TFDIFF" --html >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "tfdiff --html without FILE: exit $rc, want 2"
ls | grep -q '\.tmp-' && fail "a temporary file was left: $(ls)"

[ "$failed" = 0 ] && echo "html.report: ok"
exit "$failed"

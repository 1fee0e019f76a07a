#!/bin/bash
# Trainer-shaped programs under tftrace (leak.cmake, numpy.cmake,
# killed.cmake): each case records GOLDEN and BAD runs of an unmodified
# program and asserts what tfdiff --json and tfdump --json / --check --json
# say, field by field (check_json.py). The programs have no steps.
# Usage: run_case.sh CASE TFTRACE TFDUMP TFDIFF PROG
#   leak-keep   PROG = leak_keep: a buffer kept every iteration, nothing
#               else recorded in the loop (docs/TFDIFF.md, leaks at exit)
#   leak-keep-py  PROG unused: leak_keep.py, the same in numpy, freed when
#               CPython exits (the peak rule)
#   np-attention  PROG unused: np_attention.py under /usr/bin/python3, a
#               causal mask off by one
#   killed      PROG = killed_prog: SIGKILL before the first record
# Nothing here depends on timing: verdicts come from record order and
# byte counts.
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 prog=$5
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-trainers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
MiB=1048576

# rc WANT OUT CMD...: runs CMD with stdout in OUT (stderr in OUT.err);
# fails unless it exits with WANT.
rc() {
    local want=$1 out=$2 st=0
    shift 2
    "$@" >"$out" 2>"$out.err" || st=$?
    [ "$st" = "$want" ] || { cat "$out" "$out.err" >&2; fail "exit $st, want $want: $*"; }
}
# rc_any OUT CMD...: the same when the exit status is not the point (0 or 1)
rc_any() {
    local out=$1 st=0
    shift
    "$@" >"$out" 2>"$out.err" || st=$?
    [ "$st" -le 1 ] || { cat "$out" "$out.err" >&2; fail "exit $st: $*"; }
}
# check FILE ASSERTION...: field by field (check_json.py)
check() { python3 "$here/check_json.py" "$@" || fail "$(basename "$1"): see above"; }
# rec TRACE CMD...: records CMD; its stdout must equal the untraced run's
rec() {
    local trace=$1 want st=0
    shift
    want=$("$@" 2>/dev/null) || true
    "$tftrace" -q -o "$trace" -- "$@" >"$trace.out" 2>"$trace.err" || st=$?
    [ "$(cat "$trace.out")" = "$want" ] || fail "results changed under tftrace: $(cat "$trace.out") vs $want"
    echo "$st" >"$trace.rc"
}
# (grep reads all of ldd's output: with pipefail, a grep -q that stops at
# the first match can make ldd die of SIGPIPE and the test say "not
# sanitized" now and then)
sanitized() { ldd "$tftrace" | grep -E 'lib[at]san' >/dev/null; }

case $case_name in
  leak-keep)
    rec "$tmp/none.trace" "$prog" --keep none
    rec "$tmp/last.trace" "$prog" --keep last
    rec "$tmp/all.trace" "$prog" --keep all
    rec "$tmp/died.trace" "$prog" --keep all --die
    [ "$(cat "$tmp/died.trace.rc")" = 137 ] || fail "--die: tftrace exit $(cat "$tmp/died.trace.rc"), want 137"
    if sanitized; then
        echo "SKIP: sanitizer build: its malloc precedes the interposers (outputs checked, nothing to record)"
        exit 0
    fi
    rc 0 "$tmp/all.sum" "$tfdump" --json "$tmp/all.trace"
    check "$tmp/all.sum" "allocs == 14" "frees == 0" "steps == null"

    # tfdiff GOLDEN (frees every snapshot) BAD (keeps all 12): one leak at
    # exit, save_activations, exactly 12 x 4 MiB; the parameters, alive at
    # both ends, are not one
    rc 1 "$tmp/d1.json" "$tfdiff" --json "$tmp/none.trace" "$tmp/all.trace"
    check "$tmp/d1.json" "verdict == diverged" "first_divergence == null" "leaks.# == 1" \
        "leaks[0].rank == 0" "leaks[0].site == save_activations" "leaks[0].how == at-exit" \
        "leaks[0].live_bytes_at_end == $((48 * MiB))" "leaks[0].live_allocs_at_end == 12" \
        "leaks[0].per == allocation" "leaks[0].iterations == 12" "leaks[0].bytes_per_step ~ $((4 * MiB)) 0" \
        "leaks[0].from_step == null" "leaks[0].from_allocation == 0" "leaks[0].first_alloc_step == null" \
        "leaks[0].first_alloc_ns >= 0" \
        "leaks[0].golden_live_bytes_at_end == 0" "leaks[0].golden_live_allocs_at_end == 0" \
        "leaks[0].golden_peak_live_bytes == $((4 * MiB))" "leaks[0].compared_to == golden_end" \
        "ranks[0].golden_steps == null" "ranks[0].bad_exit == {\"code\": 0}" "bad_recorded == true"
    # the oldest snapshot came after the run started and before it ended
    dur=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['duration_ns'])" "$tmp/all.sum")
    check "$tmp/d1.json" "leaks[0].first_alloc_ns < $dur"
    rc 1 "$tmp/d1.txt" "$tfdiff" "$tmp/none.trace" "$tmp/all.trace"
    grep -q "^leak: rank 0, save_activations: 50331648 bytes in 12 blocks live at the end (GOLDEN: 0 bytes in 0 blocks), the oldest allocated [0-9.]* s into the run (no step)$" "$tmp/d1.txt" \
        || fail "tfdiff text: $(cat "$tmp/d1.txt")"
    # GOLDEN keeping the last snapshot: far less, still a leak
    rc 1 "$tmp/d2.json" "$tfdiff" --json "$tmp/last.trace" "$tmp/all.trace"
    check "$tmp/d2.json" "leaks.# == 1" "leaks[0].site == save_activations" \
        "leaks[0].golden_live_bytes_at_end == $((4 * MiB))" "leaks[0].golden_live_allocs_at_end == 1" \
        "leaks[0].live_bytes_at_end == $((48 * MiB))"
    # the same run, and BAD holding less than GOLDEN: no leak
    rc 0 "$tmp/d3.json" "$tfdiff" --json "$tmp/all.trace" "$tmp/all.trace"
    check "$tmp/d3.json" "verdict == match" "leaks.# == 0"
    rc 0 "$tmp/d4.json" "$tfdiff" --json "$tmp/all.trace" "$tmp/none.trace"
    check "$tmp/d4.json" "leaks.# == 0"
    # BAD killed with its 12 snapshots (an OOM kill): its end against the
    # most GOLDEN ever held there (2 snapshots while keeping the last one)
    rc 1 "$tmp/d5.json" "$tfdiff" --json "$tmp/last.trace" "$tmp/died.trace"
    check "$tmp/d5.json" "leaks.# == 1" "leaks[0].site == save_activations" "leaks[0].compared_to == golden_peak" \
        "leaks[0].golden_peak_live_bytes == $((8 * MiB))" "leaks[0].live_bytes_at_end == $((48 * MiB))" \
        "ranks[0].bad_exit == {\"signal\": 9}"
    # ... and against a GOLDEN that held as much: no leak
    rc_any "$tmp/d6.json" "$tfdiff" --json "$tmp/all.trace" "$tmp/died.trace"
    check "$tmp/d6.json" "leaks.# == 0" "ranks[0].bad_exit == {\"signal\": 9}"

    # tfdump --check alone: over its 32 MiB threshold in 12 blocks
    rc 1 "$tmp/c1.json" "$tfdump" --check --json "$tmp/all.trace"
    check "$tmp/c1.json" "leaks.# == 1" "leaks[0].site == save_activations" "leaks[0].how == at-exit" \
        "leaks[0].live_bytes_at_end == $((48 * MiB))" "leaks[0].live_allocs_at_end == 12" \
        "leaks[0].min_bytes == $((32 * MiB))" "leaks[0].from_step == null" "leaks[0].first_alloc_step == null" \
        "leaks[0].iterations == 12" "leaks[0].bytes_per_step ~ $((4 * MiB)) 0" "first_nonfinite == null" \
        "desync.# == 0"
    rc 1 "$tmp/c1.txt" "$tfdump" --check "$tmp/all.trace"
    grep -q "^leak: rank 0, save_activations: 50331648 bytes in 12 blocks live at the end (at least 33554432 bytes: --leak-min-bytes)" "$tmp/c1.txt" \
        || fail "tfdump --check text: $(cat "$tmp/c1.txt")"
    for g in none last; do
        rc 0 "$tmp/c-$g.json" "$tfdump" --check --json "$tmp/$g.trace"
        check "$tmp/c-$g.json" "leaks.# == 0"
    done
    rc 0 "$tmp/c2.json" "$tfdump" --check --json --leak-min-bytes 64M "$tmp/all.trace"
    check "$tmp/c2.json" "leaks.# == 0"
    rc 1 "$tmp/c3.json" "$tfdump" --check --json --leak-min-bytes 40M "$tmp/all.trace"
    check "$tmp/c3.json" "leaks[0].min_bytes == $((40 * MiB))"
    rc 0 "$tmp/c4.json" "$tfdump" --check --json --leak-min-bytes off "$tmp/all.trace"
    check "$tmp/c4.json" "leaks.# == 0"
    rc 2 "$tmp/c5" "$tfdump" --check --leak-min-bytes 4X "$tmp/all.trace"
    grep -q -- "--leak-min-bytes needs a size" "$tmp/c5.err" || fail "bad --leak-min-bytes: $(cat "$tmp/c5.err")"
    ;;
  leak-keep-py)
    # the same in numpy: CPython frees the kept arrays when it exits, so the
    # leak shows in the most numpy held at once, not at the end
    py=/usr/bin/python3
    [ -x $py ] && $py -c "import numpy" 2>/dev/null || { echo "SKIP: numpy missing for $py"; exit 0; }
    rec "$tmp/last.trace" $py "$here/leak_keep.py" --keep last
    rec "$tmp/all.trace" $py "$here/leak_keep.py" --keep all
    if sanitized; then
        echo "SKIP: sanitizer build: its malloc precedes the interposers (outputs checked, nothing to record)"
        exit 0
    fi
    rc 1 "$tmp/d.json" "$tfdiff" --json "$tmp/last.trace" "$tmp/all.trace"
    # 16 kept activations of 4 MiB, plus the step's temporaries, which
    # GOLDEN has too; nothing is live at the end in either
    check "$tmp/d.json" "verdict == diverged" "first_divergence == null" "leaks.# == 1" \
        "leaks[0].site has _multiarray_umath" "leaks[0].how == peak" "leaks[0].compared_to == golden_peak" \
        "leaks[0].live_bytes_at_end == 0" "leaks[0].golden_live_bytes_at_end == 0" \
        "leaks[0].peak_live_allocs >= 16" "leaks[0].peak_live_bytes >= $((64 * MiB))" \
        "leaks[0].golden_peak_live_allocs <= 8" \
        "leaks[0].first_alloc_ns == null" "leaks[0].from_step == null" "leaks[0].from_allocation == null"
    python3 - "$tmp/d.json" <<'PY' || fail "the peak leak's excess"
import json, sys
l = json.load(open(sys.argv[1]))["leaks"][0]
# what BAD held beyond GOLDEN at its peak: most of the 15 activations
# GOLDEN let go (the two peaks fall at different points of a step)
extra = l["peak_live_bytes"] - l["golden_peak_live_bytes"]
assert 12 * (4 << 20) <= extra <= 16 * (4 << 20), (extra, l)
print("extra at the peak:", extra >> 20, "MiB")
PY
    rc 1 "$tmp/d.txt" "$tfdiff" "$tmp/last.trace" "$tmp/all.trace"
    grep -q "^leak: rank 0, _multiarray_umath.*: held up to [0-9]* bytes in [0-9]* blocks at once, [0-9.]* s into the run (no step; GOLDEN: at most [0-9]* bytes in [0-9]* blocks), 0 bytes live at the end$" "$tmp/d.txt" \
        || fail "tfdiff text: $(cat "$tmp/d.txt")"
    rc 0 "$tmp/same.json" "$tfdiff" --json "$tmp/all.trace" "$tmp/all.trace"
    check "$tmp/same.json" "leaks.# == 0"
    rc 0 "$tmp/rev.json" "$tfdiff" --json "$tmp/all.trace" "$tmp/last.trace"
    check "$tmp/rev.json" "leaks.# == 0"
    ;;
  np-attention)
    py=/usr/bin/python3
    [ -x $py ] && $py -c "import numpy" 2>/dev/null || { echo "SKIP: numpy missing for $py"; exit 0; }
    rec "$tmp/g.trace" $py "$here/np_attention.py"
    rec "$tmp/b.trace" $py "$here/np_attention.py" --plant mask
    # which gemm is the first (probabilities @ v): the 5th cblas_sgemm of
    # the run (q, k, v projections, then head 0's scores, then this one);
    # its operands are recorded just before it
    "$tfdump" --events --json -k op,tensor "$tmp/g.trace" >"$tmp/g.ev"
    python3 - "$tmp/g.ev" "$tmp/want.json" <<'PY' || fail "the gemms of the golden run"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
gemms = [e for e in ev if e["kind"] == "op" and e["op_kind"] == "gemm" and e["name"] == "cblas_sgemm"]
assert len(gemms) == 22, ("2 sequences x 11 matmuls", len(gemms))
pv = gemms[4]
ts = {e["id"]: e for e in ev if e["kind"] == "tensor"}
a, b = (ts[i] for i in pv["inputs"])
assert a["shape"] == [24, 24] and b["shape"] == [24, 16], (a["shape"], b["shape"])
json.dump({"pv_seq": pv["seq"], "first_operand_seq": min(a["seq"], b["seq"])}, open(sys.argv[2], "w"))
PY
    lo=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['first_operand_seq'])" "$tmp/want.json")
    hi=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pv_seq'])" "$tmp/want.json")
    rc 1 "$tmp/d.json" "$tfdiff" --json "$tmp/g.trace" "$tmp/b.trace"
    # the first divergence: in that gemm (its probabilities operand, 24 x 24
    # with rows summing to 1, or its 24 x 16 output), no step, window 0
    check "$tmp/d.json" "verdict == diverged" "first_divergence.rank == 0" "first_divergence.step == null" \
        "first_divergence.window == 0" "first_divergence.kind == value" \
        "first_divergence.tensor startswith cblas_sgemm" "first_divergence.seq >= $lo" "first_divergence.seq <= $hi" \
        "first_divergence.bad.shape in [[24, 24], [24, 16]]" "first_divergence.golden.shape in [[24, 24], [24, 16]]" \
        "first_nonfinite == null" "leaks.# == 0" "desync.# == 0" \
        "ranks[0].golden_steps == null" "ranks[0].bad_steps == null" "ranks[0].common_steps == null" \
        "ranks[0].golden_windows == [0, 0]" "ranks[0].common_windows == [0, 0]" "ranks[0].bad_ended_early == false"
    # the text says so without the raw window numbers
    rc 1 "$tmp/d.txt" "$tfdiff" "$tmp/g.trace" "$tmp/b.trace"
    grep -q "^first divergence: rank 0, no step (window 0), seq [0-9]*: cblas_sgemm" "$tmp/d.txt" \
        || fail "tfdiff text: $(head -3 "$tmp/d.txt")"
    grep -q "^    no step (window 0) *cblas_sgemm" "$tmp/d.txt" || fail "the tensors before it: $(cat "$tmp/d.txt")"
    ! grep -q -- "-10995116" "$tmp/d.txt" || fail "raw window step in the text: $(grep -- -10995116 "$tmp/d.txt")"
    rc 0 "$tmp/same.json" "$tfdiff" --json "$tmp/g.trace" "$tmp/g.trace"
    check "$tmp/same.json" "verdict == match" "leaks.# == 0"
    # tfdump --check: a numpy run keeps python's arenas and OpenBLAS's
    # buffer (one block) to its end: no leak
    rc 0 "$tmp/c.json" "$tfdump" --check --json "$tmp/g.trace"
    check "$tmp/c.json" "leaks.# == 0" "first_nonfinite == null" "recorded == true"
    ;;
  killed)
    rec "$tmp/k.trace" "$prog"
    rec "$tmp/ok.trace" "$prog" --train
    rec "$tmp/ka.trace" "$prog" --train --kill-after
    [ "$(cat "$tmp/k.trace.rc")" = 137 ] || fail "tftrace exit $(cat "$tmp/k.trace.rc"), want 137 (SIGKILL)"
    ! ls "$tmp/k.trace"/rank-*.tft >/dev/null 2>&1 || fail "a rank file although nothing was recorded"
    # tfdump: what the manifest knows, nothing recorded, exit 0
    rc 0 "$tmp/s.txt" "$tfdump" "$tmp/k.trace"
    grep -q "^exit         killed by signal 9 (status 137)$" "$tmp/s.txt" || fail "summary: $(cat "$tmp/s.txt")"
    grep -q "^recorded     nothing (no rank file: the command ended before its first record)$" "$tmp/s.txt" \
        || fail "summary: $(cat "$tmp/s.txt")"
    grep -q "^command .*killed_prog$" "$tmp/s.txt" || fail "summary command: $(cat "$tmp/s.txt")"
    grep -q "^duration     [0-9.]* s$" "$tmp/s.txt" || fail "summary duration: $(cat "$tmp/s.txt")"
    rc 0 "$tmp/s.json" "$tfdump" --json "$tmp/k.trace"
    check "$tmp/s.json" "recorded == false" "command_exit == {\"signal\": 9}" "ranks == 0" "records == 0" \
        "files.# == 0" "steps == null" "manifest.exit_status == 137" "manifest.complete == true" \
        "duration_ns >= 0" "manifest.command[-1] has killed_prog"
    rc 1 "$tmp/c.json" "$tfdump" --check --json "$tmp/k.trace"
    check "$tmp/c.json" "recorded == false" "command_exit == {\"signal\": 9}" "leaks.# == 0" "desync.# == 0" \
        "first_nonfinite == null" "unrecorded has nothing was recorded"
    rc 0 "$tmp/v.txt" "$tfdump" --verify "$tmp/k.trace"
    grep -q "^OK: .*nothing was recorded" "$tmp/v.txt" || fail "--verify: $(cat "$tmp/v.txt")"
    rc 0 "$tmp/e.txt" "$tfdump" --events "$tmp/k.trace"
    [ ! -s "$tmp/e.txt" ] || fail "--events printed records: $(head -3 "$tmp/e.txt")"
    grep -q "nothing was recorded" "$tmp/e.txt.err" || fail "--events: $(cat "$tmp/e.txt.err")"
    # tfdiff: BAD recorded nothing: a finding (1); GOLDEN: unusable (2).
    # (Under a sanitizer the interposers record nothing, GOLDEN included.)
    if ! sanitized; then
        rc 1 "$tmp/d.json" "$tfdiff" --json "$tmp/ok.trace" "$tmp/k.trace"
        check "$tmp/d.json" "verdict == diverged" "bad_recorded == false" "bad_command_exit == {\"signal\": 9}" \
            "notes[0] has killed by signal 9" "notes[0] has before its first record" "ranks.# == 0" "leaks.# == 0"
        rc 1 "$tmp/d.txt" "$tfdiff" "$tmp/ok.trace" "$tmp/k.trace"
        grep -q "^BAD recorded nothing: \`.*killed_prog\` was killed by signal 9 after [0-9.]* s, before its first record" \
            "$tmp/d.txt" || fail "tfdiff text: $(cat "$tmp/d.txt")"
    else
        echo "sanitizer build: nothing recorded by the interposers; tfdiff against a recorded GOLDEN not run"
    fi
    rc 2 "$tmp/d2" "$tfdiff" "$tmp/k.trace" "$tmp/ok.trace"
    grep -q "^tfdiff: GOLDEN .*k.trace recorded nothing: .*killed by signal 9" "$tmp/d2.err" \
        || fail "GOLDEN recorded nothing: $(cat "$tmp/d2.err")"
    # the same with a shell that kills itself, the issue's example
    st=0; "$tftrace" -q -o "$tmp/sh.trace" -- sh -c 'kill -9 $$' || st=$?
    [ "$st" = 137 ] || fail "sh -c 'kill -9 \$\$': exit $st"
    rc 0 "$tmp/sh.json" "$tfdump" --json "$tmp/sh.trace"
    check "$tmp/sh.json" "recorded == false" "command_exit == {\"signal\": 9}"
    # killed after its first record: an ordinary trace with its exit
    if ! sanitized; then
        rc 0 "$tmp/ka.json" "$tfdump" --json "$tmp/ka.trace"
        check "$tmp/ka.json" "recorded == true" "allocs == 1" "exit.0 == {\"signal\": 9}" "command_exit == {\"signal\": 9}"
        rc_any "$tmp/dka.json" "$tfdiff" --json "$tmp/ok.trace" "$tmp/ka.trace"
        check "$tmp/dka.json" "bad_recorded == true" "ranks[0].bad_exit == {\"signal\": 9}" "leaks.# == 0"
    fi
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"

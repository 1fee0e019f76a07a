#!/usr/bin/env bash
# bench.harness: bench/run.sh's collection, table, JSON, --compare and
# --update-doc/--check-doc, on fake benchmarks (fake_bench.sh): results that
# meet and miss their goals, malformed BENCH-RESULT lines, a benchmark that
# fails, one that prints nothing, one not present. No figure is timed.
#   run_sh_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-bench-harness.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run=$src/bench/run.sh
reg=$tmp/registry
cat >"$reg" <<'R'
# name | file | command
good      | tests/bench/fake_bench.sh | bash tests/bench/fake_bench.sh good
malformed | -                         | bash tests/bench/fake_bench.sh malformed
failing   | -                         | bash tests/bench/fake_bench.sh failing
silent    | -                         | bash tests/bench/fake_bench.sh silent
absent    | tests/bench/no_such_bench.sh | bash tests/bench/no_such_bench.sh
R
common=(--no-build --build-dir "$tmp/build" --registry "$reg" --results-dir "$tmp/results")

# --list: every benchmark, the absent one marked
"$run" --list --registry "$reg" >"$tmp/list"
grep -q '^absent .*(not present: tests/bench/no_such_bench.sh)' "$tmp/list" || fail "--list: $(cat "$tmp/list")"
[ "$(wc -l <"$tmp/list")" = 5 ] || fail "--list shows $(wc -l <"$tmp/list") benchmarks, expected 5"

# a whole run: exit 1 (a failure and a silent benchmark), the table says what happened
st=0
"$run" "${common[@]}" >"$tmp/out" 2>&1 || st=$?
[ "$st" = 1 ] || fail "run.sh exited $st with a failing benchmark, expected 1: $(cat "$tmp/out")"
row() { grep -E "^$1 " "$tmp/out" || fail "no row $1 in: $(cat "$tmp/out")"; }
row fake.ratio.met | grep -Eq '0\.9× +>= 0\.8× +met$' || fail "met row: $(row fake.ratio.met)"
row fake.delta.missed | grep -Eq '\+350 ns/call +<= 100 ns/call +NOT MET$' || fail "not-met row: $(row fake.delta.missed)"
row fake.nogoal | grep -Eq '\+30 ns/call +— +—$' || fail "value computed from figure - baseline: $(row fake.nogoal)"
row fake.survivor | grep -q ' met$' || fail "the good line among malformed ones: $(row fake.survivor)"
row failing | grep -q 'no result: failed (exit 3) (log: .*/failing.log)' || fail "failing: $(row failing)"
row silent | grep -q 'no result (log: .*/silent.log)' || fail "silent: $(row silent)"
row absent | grep -q 'not present' || fail "absent: $(row absent)"
grep -q 'fake.before.crash' "$tmp/out" && fail "a failed benchmark's results were kept"
[ "$(grep -c 'malformed BENCH-RESULT line' "$tmp/out")" = 3 ] || fail "3 malformed lines expected: $(cat "$tmp/out")"
grep -q 'failing.log' "$tmp/out" || fail "no log path for the failing benchmark"
grep -q '4 figures: 2 met, 1 not met, 1 without a goal; 2 benchmark(s) without a result' "$tmp/out" \
    || fail "summary line: $(tail -5 "$tmp/out")"

# the JSON: one file named DATE-HASH.json, latest.json the same
files=("$tmp"/results/2*.json)
[ ${#files[@]} = 1 ] || fail "expected one results file: ${files[*]}"
[[ ${files[0]##*/} =~ ^[0-9]{8}T[0-9]{6}Z-[0-9a-z]+\.json$ ]] || fail "results file name ${files[0]##*/}"
cmp -s "${files[0]}" "$tmp/results/latest.json" || fail "latest.json differs from ${files[0]}"
"$(command -v /usr/bin/python3 || command -v python3)" - "${files[0]}" <<'PY' || fail "results JSON"
import json, sys
d = json.load(open(sys.argv[1]))
got = {r["id"]: r["met"] for r in d["results"]}
want = {"fake.ratio.met": True, "fake.delta.missed": False, "fake.nogoal": None, "fake.survivor": True}
assert got == want, got
st = {b["name"]: b["status"] for b in d["benchmarks"]}
assert st == {"good": "ok", "malformed": "ok", "failing": "failed (exit 3)", "silent": "no result",
              "absent": "not present"}, st
assert [b["malformed"] for b in d["benchmarks"] if b["name"] == "malformed"] == [3]
assert abs(next(r for r in d["results"] if r["id"] == "fake.nogoal")["value"] - 30) < 1e-9
assert d["date"].endswith("Z") and d["git"] and len(d["loadavg_start"]) == 3
PY
first=${files[0]}

# --only, and a second run for --compare
sed -i 's/fake_bench.sh good$/fake_bench.sh slower/' "$reg"
"$run" "${common[@]/$tmp\/results/$tmp/results2}" --only '^good$' >"$tmp/out2" 2>&1 \
    || fail "--only good exited non-zero: $(cat "$tmp/out2")"
grep -q '^== malformed' "$tmp/out2" && fail "--only ran another benchmark"
"$run" --compare "$first" "$tmp/results2/latest.json" >"$tmp/cmp" || fail "--compare"
grep -Eq '^fake.ratio.met +0\.9× +met +0\.7× +NOT MET +0\.778×$' "$tmp/cmp" || fail "--compare ratio row: $(cat "$tmp/cmp")"
grep -Eq '^fake.delta.missed +\+350 ns/call +NOT MET +\+50 ns/call +met +-300 ns/call$' "$tmp/cmp" \
    || fail "--compare delta row: $(cat "$tmp/cmp")"
grep -Eq '^fake.survivor +1× +met +— +— *$' "$tmp/cmp" || fail "--compare: an id only in A: $(cat "$tmp/cmp")"
"$run" --compare "$first" 2>/dev/null && fail "--compare with one file succeeded"

# --update-doc / --check-doc on a copy of a doc
doc=$tmp/doc.md
printf '# Benchmarks\n\nintro\n\n<!-- bench-table:begin -->\nold table\n<!-- bench-table:end -->\n\n## Other\nkept\n' >"$doc"
"$run" --check-doc --doc "$doc" "$first" >/dev/null 2>&1 && fail "--check-doc passed on a stale table"
"$run" --update-doc --doc "$doc" "$first" >/dev/null || fail "--update-doc"
grep -q 'old table' "$doc" && fail "--update-doc kept the old table"
grep -q '^## Other$' "$doc" && grep -q '^kept$' "$doc" || fail "--update-doc changed the rest of the doc"
grep -q '^| fake.delta.missed | a delta over its goal | 450 ns/call | 100 ns/call | +350 ns/call | <= 100 ns/call | NOT MET |$' "$doc" \
    || fail "doc row: $(cat "$doc")"
"$run" --check-doc --doc "$doc" "$first" >/dev/null || fail "--check-doc failed right after --update-doc"
sed -i 's/| NOT MET |/| met |/' "$doc"
"$run" --check-doc --doc "$doc" "$first" >"$tmp/chk" 2>&1 && fail "--check-doc passed on an edited table"
grep -q 'differs' "$tmp/chk" || fail "--check-doc message: $(cat "$tmp/chk")"
printf '# no markers\n' >"$doc"
"$run" --update-doc --doc "$doc" "$first" >"$tmp/chk" 2>&1 && fail "--update-doc without markers succeeded"
grep -q 'no <!-- bench-table:begin -->' "$tmp/chk" || fail "no-marker message: $(cat "$tmp/chk")"
echo "bench.harness: ok"

# tfdump --extract IN OUT: the window of steps and ranks as a valid, smaller
# trace whose records are those of the source (tfdump --events shows the
# same lines, tfdiff finds no difference over the window), a manifest that
# says what was kept, statistics reduced honestly, and clear usage errors.
# Needs $TFDIFF (the tfdiff program).
source "$(dirname "$0")/lib.sh" "$@"
: "${TFDIFF:?TFDIFF must name the tfdiff program}"

"$SAMPLE" "$tmp/g.trace" --ranks 3 --steps 12 >/dev/null
"$SAMPLE" "$tmp/b.trace" --ranks 3 --steps 12 --diverge 2:5 >/dev/null

# the window: steps 4..6 of ranks 0 and 2
expect_rc 0 "$TFDUMP" --extract --steps 4:6 --ranks 0,2 "$tmp/g.trace" "$tmp/w.trace"
has "$tmp/err" "2 rank files"
expect_rc 0 "$TFDUMP" --verify "$tmp/w.trace"
has_re "$tmp/out" '^OK: .*w\.trace: 2 rank files'
[ -f "$tmp/w.trace/rank-00000.tft" ] && [ -f "$tmp/w.trace/rank-00002.tft" ] && [ ! -e "$tmp/w.trace/rank-00001.tft" ] ||
    fail "the window should hold rank-00000.tft and rank-00002.tft only: $(ls "$tmp/w.trace")"
src_bytes=$(cat "$tmp"/g.trace/rank-0000[02].tft | wc -c)
out_bytes=$(cat "$tmp"/w.trace/rank-*.tft | wc -c)
[ "$out_bytes" -lt $((src_bytes / 2)) ] || fail "3 of 12 steps take $out_bytes bytes, the source's ranks $src_bytes"

# the same records: every kind but THREAD (the writer repeats a thread's
# switch at each chunk start, and chunks end elsewhere)
kinds=step,op,tensor,alloc,free,collective,kernel,checkpoint,process,dropped,capture
for r in 0 2; do
    "$TFDUMP" -e --json -s 4:6 -r $r -k $kinds "$tmp/g.trace" >"$tmp/src.$r"
    "$TFDUMP" -e --json -s 4:6 -r $r -k $kinds "$tmp/w.trace" >"$tmp/out.$r"
    [ -s "$tmp/src.$r" ] || fail "no records of steps 4..6 on rank $r"
    cmp -s "$tmp/src.$r" "$tmp/out.$r" || fail "rank $r: the window's records differ from the source's: $(diff "$tmp/src.$r" "$tmp/out.$r" | head -5)"
done
# nothing of other steps; the process records (start, exit) are kept
"$TFDUMP" -e --json -k step,op,tensor "$tmp/w.trace" >"$tmp/all"
pycheck '
steps = {json.loads(l)["step"] for l in open(sys.argv[1])}
assert steps - {None} == {4, 5, 6}, steps  # and records outside steps
' "$tmp/all"
expect_rc 0 "$TFDUMP" --json "$tmp/w.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["rank_ids"] == [0, 2], s["rank_ids"]
assert s["exit"]["0"] == {"code": 0} and s["exit"]["2"] == {"code": 0}, s["exit"]
assert s["integrity"] == "complete", s
' "$tmp/out"

expect_rc 0 "$TFDUMP" "$tmp/w.trace"
has_re "$tmp/out" '^extract      steps 4\.\.6, ranks 0,2 of /.*/g\.trace$'
# a trace like any other: finished, its world size the run's, no rank missing
has_re "$tmp/out" '^run .* world size 3  \(run finished\)$'
! grep -q "world_size" "$tmp/err" "$tmp/out" || fail "an extract of ranks 0,2 said ranks are missing: $(cat "$tmp/err")"
expect_rc 0 "$TFDUMP" "$tmp/g.trace"
! grep -q '^extract' "$tmp/out" || fail "a recorded trace's summary has an extract line"

# the manifest says where the window came from and what it holds
pycheck '
m = json.load(open(sys.argv[1])); src = json.load(open(sys.argv[2]))
x = m["extract"]
assert m["run_id"] == src["run_id"] == x["source_run_id"], (m["run_id"], x)
assert x["source"].endswith("/g.trace"), x["source"]
assert x["steps"] == [4, 6] and x["ranks"] == [0, 2] and x["stats"] is None, x
assert x["source_ranks"] == 3
assert [r["file"] for r in m["ranks"]] == ["rank-00000.tft", "rank-00002.tft"], m["ranks"]
assert int(x["records_kept"]) < int(x["records_read"]), x
for f in x["files"]:
    assert f["kept_steps"] == [4, 6] and f["source_integrity"] == "complete", f
assert m["format_version"] == src["format_version"]
' "$tmp/w.trace/manifest.json" "$tmp/g.trace/manifest.json"

# tfdiff over the same window: no difference
expect_rc 0 "$TFDIFF" --steps 4:6 --ranks 0,2 "$tmp/g.trace" "$tmp/w.trace"
has "$tmp/out" "MATCH"
# the windows of GOLDEN and BAD around BAD's divergence (rank 2, step 5)
expect_rc 0 "$TFDUMP" --extract --steps 4:6 "$tmp/g.trace" "$tmp/gw.trace"
expect_rc 0 "$TFDUMP" --extract --steps 4:6 "$tmp/b.trace" "$tmp/bw.trace"
expect_rc 1 "$TFDIFF" --json "$tmp/gw.trace" "$tmp/bw.trace"
pycheck '
d = json.load(open(sys.argv[1]))
fd = d["first_divergence"]
assert d["verdict"] == "diverged" and fd["rank"] == 2 and fd["step"] == 5 and fd["tensor"] == "L0.qkv", fd
' "$tmp/out"

# --stats health: no moments; shape: no statistics; the mode says so
expect_rc 0 "$TFDUMP" --extract --stats health --steps 5 --rank 1 "$tmp/g.trace" "$tmp/h.trace"
expect_rc 0 "$TFDUMP" --extract --stats shape --steps 5 -r 1 "$tmp/g.trace" "$tmp/s.trace"
"$TFDUMP" -e --json -k tensor "$tmp/h.trace" >"$tmp/h.ev"
"$TFDUMP" -e --json -k tensor "$tmp/g.trace" -s 5 -r 1 >"$tmp/g.ev"
"$TFDUMP" -e --json -k tensor "$tmp/s.trace" >"$tmp/s.ev"
pycheck '
def load(p):  # the tensors of step 5 (the extracts also hold those outside steps)
    return [t for t in map(json.loads, open(p)) if t["step"] is not None]
h, g, s = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
assert len(h) == len(g) == len(s) > 0, (len(h), len(g), len(s))
assert sum(b["mode"] == "full" for b in g) > len(g) // 2, "the sample records full statistics"
M = {"shape": 0, "health": 1, "full": 2}
for a, b, c in zip(h, g, s):
    assert M[a["mode"]] == min(M[b["mode"]], 1) and c["mode"] == "shape", (a, b, c)
    for k in b["stats"]:
        if k in ("numel", "fingerprint", "min", "max", "nan", "pinf", "ninf", "zero"):
            assert a["stats"][k] == b["stats"][k], (k, a, b)
    assert "mean" not in a["stats"] and "l2" not in a["stats"], a
    assert set(c["stats"]) == {"numel"} and c["shape"] == b["shape"] and c["dtype"] == b["dtype"], c
' "$tmp/h.ev" "$tmp/g.ev" "$tmp/s.ev"
pycheck '
x = json.load(open(sys.argv[1]))["extract"]
assert x["stats"] == "health" and x["ranks"] == [1] and x["steps"] == [5, 5], x
' "$tmp/h.trace/manifest.json"
expect_rc 0 "$TFDIFF" --steps 5 --ranks 1 "$tmp/g.trace" "$tmp/h.trace"
has "$tmp/out" "MATCH"
# against the shape-only extract: every tensor is accounted for, as compared
# by shape and dtype alone (docs/TFDIFF.md)
expect_rc 0 "$TFDIFF" --steps 5 --ranks 1 "$tmp/g.trace" "$tmp/s.trace"
has_re "$tmp/out" '^compared ([0-9]+) tensors on 1 rank: 0 bit-identical, 0 different .*, [0-9]+ by shape and dtype alone'
expect_rc 0 "$TFDIFF" --json --steps 5 --ranks 1 "$tmp/g.trace" "$tmp/s.trace"
pycheck '
j = json.load(open(sys.argv[1]))
assert j["compared"] > 0 and j["shape_only"] == j["compared"] and j["different"] == 0, j
' "$tmp/out"

# a single rank file as IN; no --steps keeps every step
expect_rc 0 "$TFDUMP" --extract "$tmp/g.trace/rank-00001.tft" "$tmp/one.trace"
expect_rc 0 "$TFDUMP" --verify "$tmp/one.trace"
pycheck '
x = json.load(open(sys.argv[1]))["extract"]
assert x["steps"] is None and x["ranks"] == [1], x
' "$tmp/one.trace/manifest.json"

# odd records (a kind this build does not know, undefined strings, odd
# enums) come through as they were; a file of another name becomes rank-00000.tft
"$MK_ODD" "$tmp/odd.tft"
expect_rc 0 "$TFDUMP" --extract "$tmp/odd.tft" "$tmp/oddx.trace"
[ -f "$tmp/oddx.trace/rank-00000.tft" ] || fail "the odd file's extract is not rank-00000.tft: $(ls "$tmp/oddx.trace")"
"$TFDUMP" -e "$tmp/odd.tft" >"$tmp/odd.src"
"$TFDUMP" -e "$tmp/oddx.trace" >"$tmp/odd.out"
cmp -s "$tmp/odd.src" "$tmp/odd.out" || fail "odd records changed: $(diff "$tmp/odd.src" "$tmp/odd.out" | head -5)"
# a torn source: the extract verifies and says how the source read
cp -r "$tmp/g.trace" "$tmp/torn.trace"
f=$tmp/torn.trace/rank-00001.tft
truncate -s $(($(stat -c %s "$f") - 3000)) "$f"
expect_rc 0 "$TFDUMP" --extract --steps 2:5 "$tmp/torn.trace" "$tmp/tornx.trace"
has "$tmp/err" "torn tail"
expect_rc 0 "$TFDUMP" --verify "$tmp/tornx.trace"
pycheck '
fs = json.load(open(sys.argv[1]))["extract"]["files"]
assert [f["source_integrity"] for f in fs] == ["complete", "torn", "complete"], fs
' "$tmp/tornx.trace/manifest.json"

# memory flat in trace length: 8000 steps (about 120 MB of records, 27 MB on
# disk) copied whole within 96 MiB of address space (ulimit -v; not under a
# sanitizer, which reserves the address space)
if [ -z "${TFT_SANITIZE:-}" ]; then
    "$SAMPLE" "$tmp/long.trace" --ranks 1 --steps 8000 >/dev/null
    rc=0
    (ulimit -v 98304 && exec "$TFDUMP" --extract --stats health "$tmp/long.trace" "$tmp/longx.trace") \
        >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" = 0 ] || fail "extract of 8000 steps in 96 MiB: exit $rc: $(cat "$tmp/err")"
    pycheck '
x = json.load(open(sys.argv[1]))["extract"]
assert x["records_kept"] == x["records_read"] and int(x["records_read"]) > 600000, x
' "$tmp/longx.trace/manifest.json"
    rm -rf "$tmp/long.trace" "$tmp/longx.trace"
fi

# usage errors: exit 2, one clear line, nothing written over
expect_rc 2 "$TFDUMP" --extract --steps 4:6 "$tmp/g.trace" "$tmp/w.trace"
has "$tmp/err" "exists and is not empty"
expect_rc 2 "$TFDUMP" --extract --ranks 7 "$tmp/g.trace" "$tmp/none.trace"
has "$tmp/err" "none of its ranks"
expect_rc 2 "$TFDUMP" --extract --ranks 0,x "$tmp/g.trace" "$tmp/none.trace"
has "$tmp/err" "--ranks"
expect_rc 2 "$TFDUMP" --extract --stats full "$tmp/g.trace" "$tmp/none.trace"
has "$tmp/err" "'health' or 'shape'"
expect_rc 2 "$TFDUMP" --extract "$tmp/g.trace"
has "$tmp/err" "IN (the trace) and OUT"
expect_rc 2 "$TFDUMP" --ranks 0 "$tmp/g.trace"
has "$tmp/err" "only applies to --export and --extract"
expect_rc 2 "$TFDUMP" --extract --kind op "$tmp/g.trace" "$tmp/none.trace"
expect_rc 2 "$TFDUMP" --extract --json "$tmp/g.trace" "$tmp/none.trace"
expect_rc 2 "$TFDUMP" --extract "$tmp/missing.trace" "$tmp/none.trace"
[ ! -e "$tmp/none.trace" ] || [ -z "$(ls -A "$tmp/none.trace")" ] || fail "a failed extract left files: $(ls "$tmp/none.trace")"
echo PASS

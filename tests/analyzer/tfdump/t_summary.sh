# The summary of a good 3-rank, 5-step trace, in text and JSON, and of a
# single rank file given as TRACE.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/a.trace" --ranks 3 --steps 5 >/dev/null

expect_rc 0 "$TFDUMP" "$tmp/a.trace"
has_re "$tmp/out" '^ranks +3$'
has_re "$tmp/out" '^steps +0\.\.4$'
has_re "$tmp/out" '^collectives +15 calls$'
has_re "$tmp/out" '^dropped +0$'
has_re "$tmp/out" '^integrity +complete$'
has_re "$tmp/out" '^exit +every rank: code 0$'
has_re "$tmp/out" '^bytes +[0-9]+ on disk \([0-9]+ allocated\), [0-9]+ uncompressed \(ratio [0-9.]+x\)$'
[ ! -s "$tmp/err" ] || fail "a good trace printed warnings: $(cat "$tmp/err")"

expect_rc 0 "$TFDUMP" --json "$tmp/a.trace"
cp "$tmp/out" "$tmp/summary.json"
expect_rc 0 "$TFDUMP" --events --json "$tmp/a.trace"
pycheck '
s = json.load(open(sys.argv[1]))
ev = [json.loads(l) for l in open(sys.argv[2])]
trace = sys.argv[3]
for k in ("ranks", "steps", "records", "records_by_kind", "tensors", "collectives", "allocs",
          "dropped", "bytes", "raw_bytes", "ratio", "integrity", "exit", "problems", "manifest"):
    assert k in s, "missing key " + k
assert s["ranks"] == 3, s["ranks"]
assert s["steps"] == [0, 4], s["steps"]
assert s["integrity"] == "complete", s["integrity"]
assert s["problems"] == [], s["problems"]
assert s["exit"] == {"0": {"code": 0}, "1": {"code": 0}, "2": {"code": 0}}, s["exit"]
assert s["records"] == len(ev), (s["records"], len(ev))
assert s["records"] == sum(s["records_by_kind"].values())
by_kind = {}
for e in ev:
    by_kind[e["kind"]] = by_kind.get(e["kind"], 0) + 1
assert by_kind == s["records_by_kind"], (by_kind, s["records_by_kind"])
# the fixture: per rank and step 1 all-reduce (an ENTER and an EXIT record)
# and 2 step marks; a checkpoint; start + exit + an RSS sample per step;
# params + one activation buffer per step
k = s["records_by_kind"]
assert (k["collective"], k["step"], k["checkpoint"]) == (30, 30, 3), k
assert (k["process"], k["alloc"], k["free"]) == (21, 18, 18), k
assert s["collectives"] == 15 and s["collectives_unfinished"] == [], s["collectives"]
assert s["allocs"] == 18 and s["tensors"] == k["tensor"]
assert s["dropped"] == 0
files = sum(os.path.getsize(os.path.join(trace, f)) for f in os.listdir(trace) if f.endswith(".tft"))
assert s["bytes"] == files, (s["bytes"], files)
assert s["raw_bytes"] > s["bytes"] > 0
assert abs(s["ratio"] - s["raw_bytes"] / s["bytes"]) < 1e-6
m = s["manifest"]
assert m["complete"] is True and m["world_size"] == 3, m
assert re.fullmatch("[0-9a-f]{32}", m["run_id"]), m["run_id"]
assert m["command"][-4:] == ["--ranks", "3", "--steps", "5"], m["command"]
' "$tmp/summary.json" "$tmp/out" "$tmp/a.trace"

# one rank file on its own: one rank, no manifest, same counts as its rank
expect_rc 0 "$TFDUMP" --json "$tmp/a.trace/rank-00001.tft"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["ranks"] == 1 and s["rank_ids"] == [1], s["ranks"]
assert s["manifest"] is None
assert s["steps"] == [0, 4] and s["integrity"] == "complete"
assert s["exit"] == {"1": {"code": 0}}, s["exit"]
assert s["records_by_kind"]["collective"] == 10 and s["collectives"] == 5
' "$tmp/out"
expect_rc 0 "$TFDUMP" "$tmp/a.trace/rank-00001.tft"
has_re "$tmp/out" '^ranks +1$'
has_re "$tmp/out" '^manifest +none$'
echo PASS

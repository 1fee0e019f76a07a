# The last rank file cut in the middle of its last chunk (a writer killed
# mid-write): the summary still works and says "torn"; --verify exits 1 and
# names the file; the records of the intact chunks are still there.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/t.trace" --ranks 2 --steps 12 >/dev/null
F=$tmp/t.trace/rank-00001.tft
"$TFDUMP" --events --json --rank 1 "$tmp/t.trace" >"$tmp/before.jsonl"
"$TFDUMP" --chunks --json --rank 1 "$tmp/t.trace" >"$tmp/chunks.jsonl"
cut=$("$PY" -c '
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])]
assert len(c) >= 2, "the fixture should have several chunks"
last = c[-1]
print(last["offset"] + 8 + 88 + last["comp_size"] // 2)' "$tmp/chunks.jsonl")
truncate -s "$cut" "$F"

expect_rc 0 "$TFDUMP" "$tmp/t.trace"
has_re "$tmp/out" '^integrity +torn$'
has "$tmp/err" "rank-00001.tft"
has "$tmp/err" "torn"

expect_rc 0 "$TFDUMP" --json "$tmp/t.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["integrity"] == "torn", s["integrity"]
assert any("rank-00001.tft" in p for p in s["problems"]), s["problems"]
f = {x["rank"]: x for x in s["files"]}
assert f[0]["integrity"] == "complete" and f[1]["integrity"] == "torn" and not f[1]["closed"], f
' "$tmp/out"

expect_rc 1 "$TFDUMP" --verify "$tmp/t.trace"
has_re "$tmp/out" 'rank-00001\.tft: torn tail at byte [0-9]+'
has_re "$tmp/out" 'rank-00001\.tft: torn: [0-9]+ of [0-9]+ chunks readable'
has_re "$tmp/out" '^FAILED: '

# what the intact chunks held is still readable, in the same order
expect_rc 0 "$TFDUMP" --events --json --rank 1 "$tmp/t.trace"
pycheck '
before = [json.loads(l) for l in open(sys.argv[1])]
after = [json.loads(l) for l in open(sys.argv[2])]
assert 0 < len(after) < len(before), (len(after), len(before))
assert after == before[:len(after)], "the surviving records changed"
' "$tmp/before.jsonl" "$tmp/out"
echo PASS

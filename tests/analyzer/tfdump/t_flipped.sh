# One flipped byte in the middle of a rank file: --verify exits 1 and names
# the file and the chunk holding that byte; the summary says "damaged" but
# still reports the other chunks.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/b.trace" --ranks 2 --steps 12 >/dev/null
F=$tmp/b.trace/rank-00000.tft
"$TFDUMP" --chunks --json --rank 0 "$tmp/b.trace" >"$tmp/chunks.jsonl"
chunk=$("$PY" -c '
import json, os, sys
path, chunks = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
mid = os.path.getsize(path) // 2
b = bytearray(open(path, "rb").read())
b[mid] ^= 0x20
open(path, "wb").write(b)
hit = [c for c in chunks if c["offset"] <= mid < c["offset"] + 8 + 88 + c["comp_size"]]
assert len(hit) == 1, "the middle byte is not inside a chunk"
print(hit[0]["chunk"])' "$F" "$tmp/chunks.jsonl")

expect_rc 1 "$TFDUMP" --verify "$tmp/b.trace"
has_re "$tmp/out" "b\\.trace/rank-00000\\.tft: chunk $chunk .* at byte [0-9]+"
has_re "$tmp/out" 'rank-00000\.tft: damaged: [0-9]+ of [0-9]+ chunks readable'
has_re "$tmp/out" '^FAILED: '

expect_rc 1 "$TFDUMP" --verify --json "$tmp/b.trace"
pycheck '
v = json.load(open(sys.argv[1]))
assert v["ok"] is False and v["integrity"] == "damaged"
f = {x["rank"]: x for x in v["files"]}
assert f[0]["chunks_bad"] == 1 and f[1]["chunks_bad"] == 0, f
' "$tmp/out"

expect_rc 0 "$TFDUMP" --json "$tmp/b.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["integrity"] == "damaged" and s["records"] > 0
assert any("chunk" in p for p in s["problems"]), s["problems"]
' "$tmp/out"
has "$tmp/err" "rank-00000.tft"
echo PASS

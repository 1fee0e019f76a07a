# Input tfdump cannot use: exit 2 and one line on stderr naming the file and
# the problem, for the summary, --events and --verify alike. Damage that
# leaves a usable trace is a warning instead.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/good.trace" --ranks 2 --steps 2 >/dev/null

# bad PATH TEXT: every mode exits 2 with one stderr line naming PATH and TEXT
bad() {
    local mode
    for mode in "" --events --verify "--json" "--chunks"; do
        # shellcheck disable=SC2086
        expect_rc 2 timeout 20 "$TFDUMP" $mode "$1"
        one_line "$tmp/err"
        has "$tmp/err" "tfdump: "
        has "$tmp/err" "$2"
        has "$tmp/err" "$3"
        [ ! -s "$tmp/out" ] || fail "output on stdout for unusable input: $(head -3 "$tmp/out")"
    done
}

bad "$tmp/nope.trace" "$tmp/nope.trace" "No such file"

mkdir "$tmp/garbage.trace"
head -c 4096 /dev/urandom >"$tmp/garbage.trace/rank-00000.tft"
bad "$tmp/garbage.trace" "garbage.trace/rank-00000.tft" "not a tftrace"

: >"$tmp/empty.tft"
bad "$tmp/empty.tft" "empty.tft" "empty"

mkdir "$tmp/nothing.trace"
bad "$tmp/nothing.trace" "nothing.trace" "no rank files"

echo "hello, not a trace" >"$tmp/text.tft"
bad "$tmp/text.tft" "text.tft" "not a tftrace"

head -c 100 "$tmp/good.trace/rank-00000.tft" >"$tmp/short.tft"
bad "$tmp/short.tft" "short.tft" "truncated"

# a FIFO where a rank file should be: refused, not waited on
if mkfifo "$tmp/fifo.tft" 2>/dev/null; then
    mkdir "$tmp/fifo.trace"
    mkfifo "$tmp/fifo.trace/rank-00000.tft"
    bad "$tmp/fifo.tft" "fifo.tft" "not a regular file"
    bad "$tmp/fifo.trace" "fifo.trace/rank-00000.tft" "not a regular file"
fi

# newer major version in the header (u16 at byte 16), checksum left stale:
# the version is checked first
cp "$tmp/good.trace/rank-00000.tft" "$tmp/v9.tft"
printf '\x09\x00' | dd of="$tmp/v9.tft" bs=1 seek=16 conv=notrunc status=none
bad "$tmp/v9.tft" "v9.tft" "upgrade"

cp -r "$tmp/good.trace" "$tmp/m9.trace"
"$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))
m["format_version"] = "9.0"
json.dump(m, open(sys.argv[1], "w"))' "$tmp/m9.trace/manifest.json"
bad "$tmp/m9.trace" "manifest.json" "upgrade"

# usable despite problems: a garbage manifest is skipped with a warning
cp -r "$tmp/good.trace" "$tmp/badman.trace"
echo '{ not json' >"$tmp/badman.trace/manifest.json"
expect_rc 0 "$TFDUMP" "$tmp/badman.trace"
has_re "$tmp/out" '^ranks +2$'
has "$tmp/err" "manifest.json"

# a rank file the manifest lists is gone: damaged, named, --verify fails
cp -r "$tmp/good.trace" "$tmp/lost.trace"
rm "$tmp/lost.trace/rank-00001.tft"
expect_rc 0 "$TFDUMP" --json "$tmp/lost.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["ranks"] == 1 and s["integrity"] == "damaged", (s["ranks"], s["integrity"])
assert any("rank-00001.tft" in p for p in s["problems"]), s["problems"]
' "$tmp/out"
expect_rc 1 "$TFDUMP" --verify "$tmp/lost.trace"
has "$tmp/out" "rank-00001.tft"

# two files claim the same rank (a copy): refused, both named (t_hostile.sh
# has the other cases: hard links, two runs mixed, a second process)
cp -r "$tmp/good.trace" "$tmp/dup.trace"
cp "$tmp/dup.trace/rank-00001.tft" "$tmp/dup.trace/rank-00007.tft"
expect_rc 2 "$TFDUMP" --verify "$tmp/dup.trace"
has "$tmp/err" "rank-00001.tft and "
has "$tmp/err" "rank-00007.tft both claim rank 1"

# a rank that is not in the trace
expect_rc 2 "$TFDUMP" --events --rank 5 "$tmp/good.trace"
has "$tmp/err" "no rank 5"
echo PASS

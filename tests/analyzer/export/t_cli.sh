# --export's command line: usage errors name what to fix (exit 2), an
# unwritable OUT is named, odd records (mk_odd: unknown kinds, undefined
# strings, enumerations out of range) export without a crash, a pipe that
# closes early is a quiet success, --help documents the options.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/c.trace" --ranks 2 --steps 2 >/dev/null
T=$tmp/c.trace
usage() { # usage MESSAGE ARGS...: exit 2 with MESSAGE on stderr
    local msg=$1
    shift
    expect_rc 2 "$TFDUMP" "$@"
    has "$tmp/err" "$msg"
}
usage "FORMAT must be 'chrome', 'perfetto' or 'tensorboard', not 'svg'" --export svg "$tmp/x" "$T"
usage "--export FORMAT needs OUT" --export chrome
usage "--export FORMAT needs OUT" --export chrome --steps 1 "$T"
usage "exclude each other" --export chrome "$tmp/x.json" --events "$T"
usage "missing TRACE" --export chrome "$tmp/x.json"
usage "--ranks only applies to --export" --events --ranks 1 "$T"
usage "--ranks needs ranks and ranges" --export chrome "$tmp/x.json" --ranks 3-1 "$T"
usage "only apply to --events" --export chrome "$tmp/x.json" --name 'L0*' "$T"
usage "no rank of this trace (2 rank files) matches" --export perfetto "$tmp/x" --ranks 5,7 "$T"
[ ! -e "$tmp/x" ] || fail "a refused export left its OUT behind"
usage "$tmp/no/such/dir/x.json: cannot write the export" --export chrome "$tmp/no/such/dir/x.json" "$T"
one_line "$tmp/err"
# OUT over one of the trace's own files: refused, the trace intact
cp "$T/rank-00001.tft" "$tmp/keep.tft"
usage "is a file of the trace" --export chrome "$T/rank-00001.tft" "$T"
usage "is a file of the trace" --export perfetto "$T/manifest.json" "$T"
usage "is a file of the trace" --export perfetto "$T/rank-00001.tft" "$T/rank-00001.tft"
cmp -s "$T/rank-00001.tft" "$tmp/keep.tft" || fail "the export wrote over a rank file"

expect_rc 0 "$TFDUMP" --help
has "$tmp/out" "--export FORMAT OUT"
has "$tmp/out" "--ranks LIST"

[ -x "$MK_ODD" ] || fail "mk_odd not built"
"$MK_ODD" "$tmp/odd.tft"
expect_rc 0 "$TFDUMP" --export chrome "$tmp/odd.json" "$tmp/odd.tft"
expect_rc 0 "$TFDUMP" --export perfetto "$tmp/odd.pftrace" "$tmp/odd.tft"
pycheck '
import timeline as tl
ev = tl.chrome(sys.argv[1])
names = {e.get("name") for e in ev}
assert "weird\nname" in names, names
tl.perfetto_model(tl.perfetto(sys.argv[2], sys.argv[3]))
' "$tmp/odd.json" "$tmp/odd.pftrace" "$PROTO"

# a reader that goes away: no error, exit 0
"$SAMPLE" "$tmp/big.trace" --ranks 2 --steps 40 >/dev/null
set +o pipefail
rc=$( ( "$TFDUMP" --export chrome - "$tmp/big.trace" 2>"$tmp/err"; echo $? >"$tmp/rc") | head -c 100 >/dev/null; cat "$tmp/rc")
set -o pipefail
[ "$rc" = 0 ] || fail "export into a closed pipe exited $rc: $(cat "$tmp/err")"
[ ! -s "$tmp/err" ] || fail "export into a closed pipe printed: $(cat "$tmp/err")"
echo PASS

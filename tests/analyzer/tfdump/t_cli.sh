# The command line: --help, --version, usage errors (exit 2 with a hint),
# and output into a pipe that closes early.
source "$(dirname "$0")/lib.sh" "$@"

expect_rc 0 "$TFDUMP" --help
for opt in --events --verify --chunks --json --rank --steps --name --kind --order --help --version \
           "Exit status"; do
    has "$tmp/out" "$opt"
done
expect_rc 0 "$TFDUMP" -h
has "$tmp/out" "Usage: tfdump"

expect_rc 0 "$TFDUMP" --version
has_re "$tmp/out" '^tfdump \(tftrace\) [0-9]+\.[0-9]+\.[0-9]+ \(trace format [0-9]+\.[0-9]+\)$'

"$SAMPLE" "$tmp/p.trace" --ranks 2 --steps 30 >/dev/null

# usage ERROR-TEXT ARGS...: exit 2, the message and the --help hint on stderr
usage() {
    local text=$1
    shift
    expect_rc 2 "$TFDUMP" "$@"
    has "$tmp/err" "$text"
    has "$tmp/err" "tfdump --help"
    [ ! -s "$tmp/out" ] || fail "usage error printed to stdout"
}
usage "unknown option '--frobnicate'" --frobnicate "$tmp/p.trace"
usage "unknown option '-Z'" -Z "$tmp/p.trace"
usage "missing TRACE" --events
usage "exactly one TRACE" "$tmp/p.trace" "$tmp/p.trace"
usage "needs an argument" --events "$tmp/p.trace" --steps
usage "--steps" --events --steps 5:2 "$tmp/p.trace"
usage "--steps" --events --steps x "$tmp/p.trace"
usage "--rank" --events --rank -1 "$tmp/p.trace"
usage "--kind" --events --kind tensors "$tmp/p.trace"
usage "--order" --events --order random "$tmp/p.trace"
usage "only apply to --events" --steps 1:2 "$tmp/p.trace"
usage "exclude each other" --events --verify "$tmp/p.trace"

# a reader that stops early: no crash, no error message, exit 0
for mode in "--events" "--events --json" "--events --order time" "--chunks"; do
    rc=0
    # shellcheck disable=SC2086
    "$TFDUMP" $mode "$tmp/p.trace" 2>"$tmp/err" | head -1 >"$tmp/out" || rc=$?
    [ "$rc" = 0 ] || fail "tfdump $mode | head -1: exit status $rc"
    [ -s "$tmp/out" ] || fail "tfdump $mode | head -1: no output"
    [ ! -s "$tmp/err" ] || fail "tfdump $mode | head -1: $(cat "$tmp/err")"
done
# ... but a full disk is an error
if [ -w /dev/full ]; then
    rc=0
    "$TFDUMP" --events "$tmp/p.trace" >/dev/full 2>"$tmp/err" || rc=$?
    [ "$rc" = 2 ] || fail "writing to a full disk: exit status $rc, wanted 2"
    has "$tmp/err" "cannot write"
fi
echo PASS

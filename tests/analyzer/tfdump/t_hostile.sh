# Hostile trace directories (docs/SECURITY.md, "Hostile traces and the
# analyzers"): one file per rank — a copy, hard links, a symbolic link, two
# runs mixed are refused naming both files, a second process of one run is
# read as a rank of its own — and what the analyses may cost: the summary
# and --verify hold one rank file at a time, --check's collective windows
# stay within their budget on a crafted trace, and an address-space limit
# that is too small is said as such. Memory is measured with ulimit -v (a
# limit the run either fits in or not: no timing); sanitizer builds reserve
# terabytes of address space, so those parts are skipped there.
source "$(dirname "$0")/lib.sh" "$@"
MK=$MK_ODD # the third program: mk_hostile
sanitized=${TFT_SANITIZE:-}

# limited KIB CMD...: runs CMD under `ulimit -v KIB` (stdout, stderr as expect_rc)
limited() {
    local kib=$1 rc=0
    shift
    (ulimit -v "$kib" && exec "$@") >"$tmp/out" 2>"$tmp/err" || rc=$?
    echo "$rc"
}

# cpu_limited SECONDS CMD...: the same under `ulimit -t` (CPU seconds, not
# wall time: a loaded machine does not change it much); 152 = SIGXCPU
cpu_limited() {
    local secs=$1 rc=0
    shift
    (ulimit -t "$secs" && exec "$@") >"$tmp/out" 2>"$tmp/err" || rc=$?
    echo "$rc"
}

"$SAMPLE" "$tmp/g.trace" --ranks 2 --steps 2 >/dev/null
"$SAMPLE" "$tmp/h.trace" --ranks 2 --steps 2 >/dev/null # another run: another run id

# -- one file per rank ------------------------------------------------------

# a copy under another name (tfdiff's reproducer: rank-00000.tft and rank-0.tft)
mkdir "$tmp/copy.trace"
cp "$tmp/g.trace/rank-00000.tft" "$tmp/copy.trace/"
cp "$tmp/g.trace/rank-00000.tft" "$tmp/copy.trace/rank-0.tft"
for mode in "" --verify --check --events --chunks --captures; do
    expect_rc 2 "$TFDUMP" $mode "$tmp/copy.trace"
    has "$tmp/err" "copy.trace/rank-0.tft and $tmp/copy.trace/rank-00000.tft both claim rank 0"
    has "$tmp/err" "one is a copy of the other; remove one"
    one_line "$tmp/err"
done

# thousands of hard links of one file: refused at the second name, before
# any reader runs out of file descriptors
mkdir "$tmp/links.trace"
cp "$tmp/g.trace/rank-00000.tft" "$tmp/links.trace/"
for i in $(seq 1 3000); do ln "$tmp/links.trace/rank-00000.tft" "$tmp/links.trace/rank-9$i.tft"; done
expect_rc 2 "$TFDUMP" "$tmp/links.trace"
has "$tmp/err" "are the same file (hard links, or a symbolic link)"
one_line "$tmp/err"
expect_rc 2 "$TFDUMP" --check "$tmp/links.trace"
has "$tmp/err" "are the same file"

# a symbolic link to a rank file of the trace
mkdir "$tmp/sym.trace"
cp "$tmp/g.trace/rank-00001.tft" "$tmp/sym.trace/"
ln -s rank-00001.tft "$tmp/sym.trace/rank-00002.tft"
expect_rc 2 "$TFDUMP" --verify "$tmp/sym.trace"
has "$tmp/err" "sym.trace/rank-00001.tft and $tmp/sym.trace/rank-00002.tft are the same file"

# two runs mixed in one directory, both claiming rank 0
mkdir "$tmp/mix.trace"
cp "$tmp/g.trace/rank-00000.tft" "$tmp/mix.trace/"
cp "$tmp/h.trace/rank-00000.tft" "$tmp/mix.trace/rank-00000-p77.tft"
expect_rc 2 "$TFDUMP" "$tmp/mix.trace"
has "$tmp/err" "both claim rank 0 but belong to different runs"
has "$tmp/err" "mix.trace/rank-00000-p77.tft and $tmp/mix.trace/rank-00000.tft"

# a second process of one run given rank 0 (tftrace names its file
# rank-00000-pPID.tft): read as the next free rank, the canonical name keeps 0
"$MK" second "$tmp/second.trace"
expect_rc 0 "$TFDUMP" --json "$tmp/second.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["ranks"] == 2 and s["integrity"] == "complete", (s["ranks"], s["integrity"])
files = {os.path.basename(f["file"]): f["rank"] for f in s["files"]}
assert files == {"rank-00000.tft": 0, "rank-00000-p200.tft": 1}, files
assert s["problems"] == [], s["problems"]
' "$tmp/out"
expect_rc 0 "$TFDUMP" --verify "$tmp/second.trace"

# -- memory ------------------------------------------------------------------

if [ -n "$sanitized" ]; then
    echo "SKIP: memory limits under TFT_SANITIZE=$sanitized (the sanitizer reserves the address space)"
    echo PASS
    exit 0
fi

# 96 rank files of one 4 MiB chunk each: the summary and --verify read them
# one at a time, so 160 MiB of address space is plenty (holding every rank
# file's chunk at once needs more than 400 MiB)
"$MK" wide "$tmp/wide.trace" 96 4096
[ "$(limited 163840 "$TFDUMP" "$tmp/wide.trace")" = 0 ] || fail "summary of 96 ranks in 160 MiB: $(cat "$tmp/err")"
has_re "$tmp/out" '^ranks +96$'
[ "$(limited 163840 "$TFDUMP" --verify "$tmp/wide.trace")" = 0 ] || fail "--verify of 96 ranks in 160 MiB: $(cat "$tmp/err")"
has "$tmp/out" "OK: $tmp/wide.trace: 96 rank files"

# --check reads the rank files one at a time per thread too (their extracts
# for the desyncs go to a temporary file, core_spill.h): 160 MiB is plenty
# where holding every rank file's chunk at once needed more than 400 MiB
[ "$(limited 163840 "$TFDUMP" --check "$tmp/wide.trace")" = 0 ] || fail "--check of 96 ranks in 160 MiB: $(cat "$tmp/err")"
has "$tmp/out" "OK: no non-finite values, leaks or desyncs"
# (less than that is not tried: between what loading tfdump and its
# libraries takes and what one 4 MiB chunk needs there is too little room
# to tell apart reliably; the message for it is dump_nomem's, as above)
# and with more, it runs
[ "$(limited 1048576 "$TFDUMP" --check "$tmp/wide.trace")" = 0 ] || fail "--check in 1 GiB: $(cat "$tmp/err")"

# collectives with sequence numbers spread over the window on 32
# communicators across 1000 ranks (4.5 MB on disk): windows of 4096 calls
# with a slot for each of 1000 rank files took 8.5 GB; the slots are per
# member now, within a 256 MiB budget for all windows together
"$MK" coll "$tmp/coll.trace" 1000 32 8192 1
[ "$(limited 1048576 "$TFDUMP" --check "$tmp/coll.trace")" = 0 ] || fail "--check of the collective trace in 1 GiB: $(cat "$tmp/err")"
has "$tmp/out" "OK: no non-finite values, leaks or desyncs"

# -- time (CPU seconds, with margins of 10x and more) --------------------------

# 4 ranks x 40000 replicated parameters in one step: each record scanned
# the step's parameters (12 s of CPU); now O(1) each (under a second)
"$MK" params "$tmp/params.trace" 4 40000
[ "$(cpu_limited 8 "$TFDUMP" --check "$tmp/params.trace")" = 1 ] || fail "--check of 160000 parameters in 8 CPU s: $(cat "$tmp/err")"
has "$tmp/out" "param.w39999 differs across ranks at step 0"
# 20000 allocation sites, then 100000 steps: every step's end looked at
# every site (11 s); now at the sites that changed (0.1 s)
"$MK" sites "$tmp/sites.trace" 20000 100000
[ "$(cpu_limited 5 "$TFDUMP" --check "$tmp/sites.trace")" = 0 ] || fail "--check of 20000 sites x 100000 steps in 5 CPU s: $(cat "$tmp/err")"
echo PASS

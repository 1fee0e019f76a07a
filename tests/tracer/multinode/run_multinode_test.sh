#!/bin/bash
# Jobs recorded without the tftrace launcher (TFT_OUTPUT: each process
# writes its own rank file) and traces gathered from several nodes
# (docs/MULTINODE.md). Usage:
#   run_multinode_test.sh CASE TFTRACE TFDUMP TFDIFF MN_PROG REC_PROG MN_PLAIN LIBTFTRACE
#   mpirun4      README's line: mpirun -np 4 -x LD_PRELOAD=libtftrace.so -x
#                TFT_OUTPUT=run.trace on an unmodified program; the run id
#                from Open MPI's job id; the same as the launcher records
#   mpi-agree    TFT_RUN_ID=mpi on a program linked with libtftrace: the
#                id agreed through MPI after MPI_Init, rank files opened
#                before it rewritten
#   torchrun     RANK/WORLD_SIZE/TORCHELASTIC_RUN_ID set by hand on 2
#                processes; a third process of another run is refused
#   gather       two "nodes" (unshare --uts, hostnames node-a and node-b)
#                write ranks 0-1 and 2-3 to their own directories;
#                tftrace gather makes one trace with the host per rank;
#                DIR1+DIR2 reads the same; a piece of another run and a
#                rank given twice are refused
#   mixed        mpirun -np 4 where only ranks 2-3 have TFT_OUTPUT: the job
#                ends (no collective only some ranks call), ranks 2-3
#                recorded with their clock estimates
#   clock        mpirun -np 4, ranks 2-3 on "node-b" whose clock is 3 s ahead
#                (TFT_TEST_CLOCK_OFFSET_NS), rank 1 a real straggler at
#                step 11: the offsets estimated within their stated error
#                (< 1 ms), the straggler found on the aligned clock (1.5 s,
#                not 3 s), the timeline aligned
#   clock-step   the same hosts, node-b's clock 3 s ahead and not
#                synchronised until NTP steps it back 0.1 s into the run
#                (TFT_TEST_CLOCK_STEP, TFT_TEST_NTP: test-only), no MPI
#                estimate (TFT_CLOCK_SYNC=0): the straggler found on the hosts'
#                realtime through the CLOCK records after the step (1.5 s,
#                NTP error stated), tfdump's clocks lines and the timeline;
#                with the estimate and the step before MPI_Init the estimate
#                holds (1.5 s: anchored at its own moment); never
#                synchronised: not judged across hosts, but on one host
#   launcher     mpirun -np 2 tftrace -o DIR -- prog (a launcher per rank,
#                one directory): each instance writes its manifest fragment,
#                no manifest lock is taken, tfdump says complete; one
#                tftrace alone still writes manifest.json only, read as before
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 mn_prog=$5 rec_prog=$6 mn_plain=$7 lib=$8
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-multinode.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$tmp"

mpi_n() {
    local n=$1
    shift
    OMPI_MCA_orte_abort_on_non_zero_status=0 mpirun --allow-run-as-root --oversubscribe -np "$n" "$@"
}

# run ids of TRACE's rank files (the header frame: 8 bytes of frame header,
# magic, version, size, then the 16-byte run id), one per line, sorted unique
file_run_ids() {
    python3 - "$1" <<'PY'
import glob, sys
ids = set()
for f in glob.glob(sys.argv[1] + "/rank-*.tft"):
    b = open(f, "rb").read(40)
    ids.add(b[24:40].hex())
print("\n".join(sorted(ids)))
PY
}

# TRACE is one run, complete: one run id in every rank file and the
# manifest, NRANKS rank files, tfdump says complete and verifies
one_complete_run() {
    local tr=$1 nranks=$2 ids sum
    ids=$(file_run_ids "$tr")
    [ "$(echo "$ids" | wc -l)" = 1 ] || fail "$tr: several run ids in the rank files: $ids"
    sum=$("$tfdump" "$tr") || fail "tfdump $tr exited $?: $sum"
    echo "$sum" | grep -q "^run *$ids " || fail "$tr: the manifest's run id is not the files' ($ids): $sum"
    echo "$sum" | grep -q "^integrity *complete$" || fail "$tr: not complete: $sum"
    echo "$sum" | grep -q "^ranks *$nranks$" || fail "$tr: not $nranks ranks: $sum"
    "$tfdump" --verify "$tr" >/dev/null || fail "tfdump --verify $tr"
}

case $case_name in
  mpirun4)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    preload=$lib
    # a sanitized libtftrace needs its runtime first (tftrace does the same)
    asan=$(ldd "$lib" | awk '/libasan|libtsan/ { print $3; exit }')
    [ -n "$asan" ] && preload="$asan:$lib"
    # README's multi-node line, as root in a container
    mpi_n 4 -x LD_PRELOAD="$preload" -x TFT_OUTPUT=run.trace "$mn_plain" >out.txt
    [ "$(cat out.txt)" = 1032 ] || fail "the job computed $(cat out.txt), not 1032"
    one_complete_run run.trace 4
    # the allocation made before MPI_Init is in each rank file (not under a
    # sanitizer, whose malloc comes before the interposers)
    if [ -z "$asan" ]; then
        n=$("$tfdump" --events --kind alloc run.trace | grep -c "bytes=8388608" || true)
        [ "$n" = 4 ] || fail "the 8 MiB allocation recorded on $n ranks, not 4"
    fi
    mpi_n 4 "$tftrace" -q -o launched.trace -- "$mn_plain" >/dev/null
    st=0
    "$tfdiff" launched.trace run.trace >diff.txt 2>&1 || st=$?
    [ "$st" = 0 ] || fail "tfdiff launched.trace run.trace exited $st: $(head -20 diff.txt)"
    ;;
  mpi-agree)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    # TFT_RUN_ID=mpi: the launcher's job id ignored, rank 0's id taken
    # after MPI_Init; the rank files were opened before it (before_init)
    mpi_n 4 -x TFT_OUTPUT=run.trace -x TFT_INTERPOSE=1 -x TFT_RUN_ID=mpi "$mn_prog" 3 >out.txt
    [ "$(cat out.txt)" = 1028 ] || fail "the job computed $(cat out.txt), not 1028"
    one_complete_run run.trace 4
    n=$("$tfdump" --events --name before_init run.trace | grep -c "tensor before_init")
    [ "$n" = 4 ] || fail "before_init recorded on $n ranks, not 4"
    mpi_n 4 -x TFT_INTERPOSE=1 "$tftrace" -q -o launched.trace -- "$mn_prog" 3 >/dev/null
    st=0
    "$tfdiff" launched.trace run.trace >diff.txt 2>&1 || st=$?
    [ "$st" = 0 ] || fail "tfdiff launched.trace run.trace exited $st: $(head -20 diff.txt)"
    ;;
  torchrun)
    # what torchrun gives its workers, set by hand
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 TORCHELASTIC_RUN_ID=job-7 TFT_OUTPUT=run.trace "$rec_prog" threads 1 &
    done
    wait
    one_complete_run run.trace 2
    "$tftrace" -q -o launched.trace -- bash -c "for r in 0 1; do RANK=\$r WORLD_SIZE=2 '$rec_prog' threads 1 & done; wait"
    st=0
    "$tfdiff" launched.trace run.trace >diff.txt 2>&1 || st=$?
    [ "$st" = 0 ] || fail "tfdiff launched.trace run.trace exited $st: $(head -20 diff.txt)"
    # a process of another job writing into the directory: a real mix, refused
    RANK=1 WORLD_SIZE=2 TORCHELASTIC_RUN_ID=job-8 TFT_OUTPUT=run.trace "$rec_prog" threads 1
    st=0
    "$tfdump" run.trace >mix.txt 2>&1 || st=$?
    [ "$st" = 2 ] || fail "tfdump of a mix of two runs exited $st, not 2: $(cat mix.txt)"
    grep -q "belong to different runs" mix.txt || fail "no clear message for the mix: $(cat mix.txt)"
    ;;
  gather)
    unshare --uts true 2>/dev/null || { echo "SKIP: unshare --uts not permitted"; exit 0; }
    # node NAME DIR RANK...: the ranks as one node's processes (torchrun-style environment)
    node() {
        local name=$1 dir=$2
        shift 2
        unshare --uts bash -c 'hostname "$1"; dir=$2 prog=$3; shift 3
            for r in "$@"; do RANK=$r WORLD_SIZE=4 TORCHELASTIC_RUN_ID=job-42 TFT_OUTPUT=$dir "$prog" threads 1 & done
            wait' node "$name" "$dir" "$rec_prog" "$@"
    }
    node node-a a.trace 0 1
    node node-b b.trace 2 3
    "$tftrace" gather all.trace a.trace b.trace >gather.txt || fail "gather exited $?: $(cat gather.txt)"
    one_complete_run all.trace 4
    python3 - all.trace/manifest.json <<'PY' || fail "hosts per rank"
import json, sys
m = json.load(open(sys.argv[1]))
hosts = {r["rank"]: r["host"] for r in m["ranks"]}
assert hosts == {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}, hosts
assert m["complete"] and m["world_size"] == 4, m
PY
    grep -q "rank 2  host node-b" gather.txt || fail "gather's summary lacks the hosts: $(cat gather.txt)"
    # one node's piece alone is short
    "$tfdump" a.trace | grep -q "run did not finish" || fail "a.trace alone reads as finished"
    # the pieces read directly, as one trace
    "$tfdump" a.trace+b.trace | grep -q "^integrity *complete$" || fail "tfdump a.trace+b.trace"
    "$tfdiff" all.trace a.trace+b.trace >diff.txt || fail "tfdiff all.trace a.trace+b.trace: $(cat diff.txt)"
    # a piece of another job, and a rank given twice: refused, nothing written
    RANK=3 WORLD_SIZE=4 TORCHELASTIC_RUN_ID=job-43 TFT_OUTPUT=other.trace "$rec_prog" threads 1
    RANK=1 WORLD_SIZE=4 TORCHELASTIC_RUN_ID=job-42 TFT_OUTPUT=dup.trace "$rec_prog" threads 1
    st=0
    "$tftrace" gather x.trace a.trace other.trace >x.txt 2>&1 || st=$?
    [ "$st" = 2 ] && grep -q "other.trace/rank-00003.tft belongs to run .*: the pieces are not of one run" x.txt ||
        fail "a piece of another run: exit $st, $(cat x.txt)"
    [ ! -e x.trace ] || fail "x.trace written though refused"
    st=0
    "$tftrace" gather y.trace a.trace b.trace dup.trace >y.txt 2>&1 || st=$?
    [ "$st" = 2 ] && grep -q "a.trace/rank-00001.tft and dup.trace/rank-00001.tft both hold rank 1" y.txt ||
        fail "a rank given twice: exit $st, $(cat y.txt)"
    st=0
    "$tftrace" gather all.trace a.trace b.trace >z.txt 2>&1 || st=$?
    [ "$st" = 2 ] && grep -q "all.trace is not empty" z.txt || fail "gather into a full directory: exit $st, $(cat z.txt)"
    ;;
  mixed)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    cat >half.sh <<'SH'
#!/bin/bash
[ "$OMPI_COMM_WORLD_RANK" -ge 2 ] && export TFT_OUTPUT=run.trace
exec "$@"
SH
    chmod +x half.sh
    st=0
    timeout 60 bash -c 'OMPI_MCA_orte_abort_on_non_zero_status=0 mpirun --allow-run-as-root --oversubscribe -np 4 \
        -x TFT_INTERPOSE=1 ./half.sh "$0" 3' "$mn_prog" >out.txt || st=$?
    [ "$st" = 0 ] && [ "$(cat out.txt)" = 1028 ] || fail "the job exited $st (124: hung), printed $(cat out.txt)"
    [ "$(ls run.trace/rank-*.tft | wc -l)" = 2 ] || fail "not 2 rank files: $(ls run.trace)"
    grep -q '"offset_ns"' run.trace/manifest.rank-00003.json || fail "rank 3 has no clock estimate"
    ;;
  clock)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    unshare --uts true 2>/dev/null || { echo "SKIP: unshare --uts not permitted"; exit 0; }
    cat >node.sh <<'SH'
#!/bin/bash
# ranks 0-1 on node-a, 2-3 on node-b, whose clock is 3 s ahead
if [ "$OMPI_COMM_WORLD_RANK" -ge 2 ]; then export TFT_TEST_CLOCK_OFFSET_NS=3000000000 h=node-b; else h=node-a; fi
exec unshare --uts bash -c 'hostname "$0"; exec "$@"' "$h" "$@"
SH
    chmod +x node.sh
    mpi_n 4 -x TFT_OUTPUT=run.trace -x TFT_INTERPOSE=1 ./node.sh "$mn_prog" 14 1 1500 11 >/dev/null
    one_complete_run run.trace 4
    python3 - run.trace <<'PY' || fail "clock offsets"
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/manifest.rank-*.json")):
    r = json.load(open(f))["ranks"][0]
    c = r["clock"]
    off, err = int(c["offset_ns"]), int(c["error_ns"])
    want = 3000000000 if r["rank"] >= 2 else 0
    print("rank %d host %s offset %d ns, error %d ns" % (r["rank"], r["host"], off, err))
    # (the bound: 10 ms; a quiet host gets tens of microseconds, an ASan
    # build on a loaded 2-core machine once 1.4 ms, still right within it)
    assert abs(off - want) <= err and err < 10000000 and c["ref_rank"] == 0, (r, want)
PY
    st=0
    "$tfdump" --check run.trace >check.txt || st=$?
    [ "$st" = 1 ] || fail "tfdump --check exited $st: $(cat check.txt)"
    grep -Eq "straggler at step 11 .*rank 1 entered MPI_Allreduce .* 1\.[4-6][0-9]* s after the median rank .*clocks aligned through MPI, error within" check.txt ||
        fail "no straggler rank 1 at 1.5 s on the aligned clock: $(cat check.txt)"
    # the timeline: every rank's first all-reduce within 0.1 s of the others (3 s apart unaligned)
    "$tfdump" --export chrome tl.json run.trace
    python3 - tl.json <<'PY' || fail "timeline not aligned"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
first = {}
for e in ev:
    if e.get("name") == "MPI_Allreduce" and e.get("ph") in ("X", "B"):
        first[e["pid"]] = min(first.get(e["pid"], e["ts"]), e["ts"])
assert len(first) == 4 and max(first.values()) - min(first.values()) < 100000, first
PY
    ;;
  clock-step)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    unshare --uts true 2>/dev/null || { echo "SKIP: unshare --uts not permitted"; exit 0; }
    # node.sh STEP_MS: ranks 2-3 on node-b, 3 s ahead until STEP_MS ms after
    # their start, when NTP steps the clock back (synchronised from then on);
    # every host reports an NTP bound of 2 ms once synchronised
    cat >node.sh <<'SH'
#!/bin/bash
step_ms=$1
shift
export TFT_TEST_NTP=2000 TFT_CLOCK_PAIRS_MS=20
if [ "$OMPI_COMM_WORLD_RANK" -ge 2 ]; then
    export TFT_TEST_CLOCK_OFFSET_NS=3000000000 TFT_TEST_CLOCK_STEP=$step_ms:-3000000000 h=node-b
else
    h=node-a
fi
exec unshare --uts bash -c 'hostname "$0"; exec "$@"' "$h" "$@"
SH
    chmod +x node.sh
    # 1. no MPI estimate: each host's realtime, followed through the step
    mpi_n 4 -x TFT_OUTPUT=a.trace -x TFT_INTERPOSE=1 -x TFT_CLOCK_SYNC=0 ./node.sh 100 "$mn_prog" 14 1 1500 11 >/dev/null
    one_complete_run a.trace 4
    ! grep -q '"offset_ns"' a.trace/manifest.rank-00002.json || fail "an MPI estimate with TFT_CLOCK_SYNC=0"
    st=0
    "$tfdump" --check a.trace >check.txt || st=$?
    [ "$st" = 1 ] || fail "tfdump --check exited $st: $(cat check.txt)"
    grep -Eq "straggler at step 11 .*rank 1 entered MPI_Allreduce .* 1\.[4-6][0-9]* s after the median rank .*clocks NTP-synchronised, error within 4\.0[0-9]* ms" check.txt ||
        fail "no straggler rank 1 at 1.5 s on the hosts' realtime: $(cat check.txt)"
    "$tfdump" --check --json a.trace >check.json || true
    python3 - check.json <<'PY' || fail "straggler JSON without its clock error"
import json, sys
d = json.load(open(sys.argv[1]))
s = [x for x in d["desync"] if x["kind"] == "straggler"]
assert len(s) == 1 and s[0]["ranks"] == [1] and 4000000 <= s[0]["clock_error_ns"] < 4100000, s
PY
    "$tfdump" a.trace >sum.txt
    grep -Eq "rank 2 on node-b: NTP-synchronised, error within 2\.000 ms; realtime stepped 1 time \(largest -3000\.[0-9]+ ms\)" sum.txt ||
        fail "tfdump's clocks lines: $(cat sum.txt)"
    grep -Eq "rank 0 on node-a: NTP-synchronised, error within 2\.000 ms$" sum.txt || fail "rank 0's clock: $(cat sum.txt)"
    "$tfdump" --export chrome tl.json a.trace
    python3 - tl.json <<'PY' || fail "timeline not aligned through the step"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
first, names = {}, {}
for e in ev:
    if e.get("name") == "MPI_Allreduce" and e.get("ph") in ("X", "B"):
        first[e["pid"]] = min(first.get(e["pid"], e["ts"]), e["ts"])
    if e.get("ph") == "M" and e.get("name") == "process_name":
        names[e["pid"]] = e["args"]["name"]
assert len(first) == 4 and max(first.values()) - min(first.values()) < 100000, first
assert all("clock: its host's realtime" in n for n in names.values()), names
ck = [e for e in ev if e.get("cat") == "clock" and e["args"].get("ntp") == "synchronised"]
assert any(e["args"]["error_ns"] >= 2000000 and e["args"]["step_ns"] < -2900000000 for e in ck), ck
PY
    # 2. with the MPI estimate, the step 0.1 s in, between the rank file's
    #    start and MPI_Init (mn_prog sleeps 0.2 s before it): the estimate is
    #    anchored on the pair of its own moment, not the file's start
    mpi_n 4 -x TFT_OUTPUT=b.trace -x TFT_INTERPOSE=1 ./node.sh 100 "$mn_prog" 14 1 1500 11 >/dev/null
    grep -q '"real_minus_mono_ns"' b.trace/manifest.rank-00002.json || fail "no anchor in rank 2's estimate"
    st=0
    "$tfdump" --check b.trace >check.txt || st=$?
    grep -Eq "straggler at step 11 .*rank 1 entered MPI_Allreduce .* 1\.[4-6][0-9]* s after the median rank .*clocks aligned through MPI" check.txt ||
        fail "with the estimate and a later step: $(cat check.txt)"
    # 3. node-b never synchronised (its step never comes): not judged across
    #    hosts; node-a's own communicator {0,1} on its monotonic clock
    mpi_n 4 -x TFT_OUTPUT=c.trace -x TFT_INTERPOSE=1 -x TFT_CLOCK_SYNC=0 ./node.sh 100000 "$mn_prog" 14 1 1500 11 split >/dev/null
    "$tfdump" --check --json c.trace >check.json || true
    python3 - check.json <<'PY' || fail "stragglers with node-b never synchronised: $(cat check.json)"
import json, re, sys
s = [x for x in json.load(open(sys.argv[1]))["desync"] if x["kind"] == "straggler"]
assert len(s) == 1 and s[0]["ranks"] == [1] and s[0]["members"] == [0, 1] and s[0]["clock_error_ns"] == 0, s
d = s[0]["detail"]
assert "clocks" not in d and re.search(r" 1\.[4-6][0-9]* s after the median", d), s
PY
    "$tfdump" c.trace | grep -q "rank 3 on node-b: not NTP-synchronised: its realtime compares with no other host's" ||
        fail "tfdump does not say node-b is not synchronised"
    ;;
  launcher)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    mpi_n 2 "$tftrace" -q -o l.trace -- "$mn_plain" >/dev/null
    one_complete_run l.trace 2
    [ ! -e l.trace/.manifest.lock ] || fail "the instances took the manifest lock"
    python3 - l.trace <<'PY' || fail "the launchers' fragments"
import json, sys
for r in (0, 1):
    m = json.load(open("%s/manifest.rank-%05d.json" % (sys.argv[1], r)))
    assert m["complete"] and m["world_size"] == 2 and m["exit_status"] == 0, m
    assert [x["rank"] for x in m["ranks"]] == [r] and m["ranks"][0]["file"] == "rank-%05d.tft" % r, m
    c = m["collectors"]
    assert len(c) == 1 and c[0]["done"] and c[0]["pid"] != m["ranks"][0]["pid"], c
snap = json.load(open(sys.argv[1] + "/manifest.json"))
assert sorted(x["rank"] for x in snap["ranks"]) == [0, 1] and len(snap["collectors"]) == 2, snap
PY
    "$tfdump" --json l.trace | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["integrity"] == "complete" and len(d["files"]) == 2, d["integrity"]' || fail "tfdump --json l.trace"
    # one launcher, not a job: manifest.json under its lock, no fragment (as before)
    "$tftrace" -q -o one.trace -- "$rec_prog" threads 1 >/dev/null
    [ -f one.trace/manifest.json ] && ! ls one.trace/manifest.rank-*.json >/dev/null 2>&1 ||
        fail "a single tftrace wrote fragments: $(ls -a one.trace)"
    "$tfdump" one.trace | grep -q "^integrity *complete" || fail "one.trace: $("$tfdump" one.trace)"
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"

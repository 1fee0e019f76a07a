#!/usr/bin/env bash
# Security tests of recording (issue #13, docs/SECURITY.md). Usage:
#   run_security_test.sh CASE TFTRACE TFDUMP SEC_PROG [TFDIFF LIBTFTRACE PYTHON_DIR PYTHON]
# Each case asserts what a user (or an attacker) would notice; each failed
# before the fix it guards. Waits poll for files with a generous limit (a
# loaded 2-core machine), never sleep-and-hope. Cases that need root (a
# tmpfs, another user) say SKIP: without it.
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 prog=$4 tfdiff=${5:-} libtft=${6:-} pydir=${7:-} py=${8:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-security.XXXXXX")
mnt=""
bg=() # background processes this script started: ended (by pid) if it fails
cleanup() {
    touch "$tmp/go" 2>/dev/null || true
    for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -n "$mnt" ] && umount "$mnt" 2>/dev/null || true
    chmod -R u+w "$tmp" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }
# run WANT CMD...: stdout in out.txt, stderr in err.txt, exit status WANT
run() {
    local want=$1 st=0
    shift
    "$@" >out.txt 2>err.txt || st=$?
    if [ "$st" != "$want" ]; then
        echo "--- stdout"; cat out.txt; echo "--- stderr"; cat err.txt
        fail "exit status $st, want $want: $*"
    fi
}
has() { grep -qF -- "$2" "$1" || { echo "--- $1"; cat "$1"; fail "$1 lacks '$2'"; }; }
# wait_for FILE [SECONDS] [PID]: polls until FILE exists (fails at once
# when PID, the process meant to create it, has ended)
wait_for() {
    local i
    for ((i = 0; i < ${2:-60} * 20; i++)); do
        [ -e "$1" ] && return 0
        if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then fail "process $3 ended before $1 appeared"; fi
        sleep 0.05
    done
    fail "timed out waiting for $1"
}
mode_of() { stat -c %a "$1"; }
# an unprivileged user to play the attacker, when we are root and have a tool
as_user=()
if [ "$(id -u)" = 0 ]; then
    if command -v setpriv >/dev/null; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    elif command -v runuser >/dev/null; then as_user=(runuser -u nobody --)
    fi
fi

case $case_name in
  symlink-user)
    # CWE-59, the reproducer: another user prepares a world-writable
    # directory with a rank-00000.tft link to a root-owned 0600 file; root
    # records into it
    [ ${#as_user[@]} -gt 0 ] || { echo "SKIP: needs root and setpriv or runuser to act as another user"; exit 0; }
    printf 'precious\n' >victim
    chmod 600 victim
    chmod 711 "$tmp" # the attacker reaches shared/ (and only that)
    mkdir -m 1777 shared
    "${as_user[@]}" mkdir -m 777 shared/evil.trace
    "${as_user[@]}" sh -c 'echo "{\"format\":\"tftrace\",\"format_version\":\"1.2\",\"complete\":false,\"ranks\":[]}" \
        >shared/evil.trace/manifest.json'
    "${as_user[@]}" ln -s "$tmp/victim" shared/evil.trace/rank-00000.tft
    run 2 "$tftrace" -o shared/evil.trace -- "$prog" touch ran
    has err.txt "belongs to uid 65534"
    [ ! -e ran ] || fail "the command ran in a refused directory"
    # --force does not lift the ownership rule
    run 2 "$tftrace" --force -o shared/evil.trace -- "$prog" touch ran
    [ "$(cat victim)" = precious ] || fail "the victim file was overwritten"
    # nor does the in-process writer take another user's directory
    TFT_OUTPUT=shared/evil.trace RANK=0 run 0 "$prog" touch ran
    has err.txt "belongs to uid 65534"
    [ "$(cat victim)" = precious ] || fail "the in-process writer wrote through the link" ;;

  symlink)
    # links in and as the output directory are never written through
    printf 'precious\n' >victim
    chmod 600 victim
    # a directory of our own with a planted link: refused (not empty) ...
    mkdir -m 777 mine.trace
    ln -s "$tmp/victim" mine.trace/rank-00000.tft
    run 2 "$tftrace" -o mine.trace -- "$prog" touch ran
    [ ! -e ran ] && [ "$(cat victim)" = precious ] || fail "a non-empty directory was recorded into"
    # ... and the in-process writer, which shares directories, creates its
    # file O_EXCL|O_NOFOLLOW beside the link instead of through it
    RANK=0 TFT_OUTPUT=mine.trace run 0 "$prog" touch ran
    [ "$(cat victim)" = precious ] || fail "the in-process writer wrote through rank-00000.tft"
    [ -L mine.trace/rank-00000.tft ] || fail "the planted link was replaced"
    ls mine.trace | grep '^rank-00000-p[0-9]*\.tft$' >/dev/null || fail "no rank file of its own: $(ls mine.trace)"
    # the output directory itself a link: not followed, unless --force
    mkdir real.trace
    ln -s real.trace link.trace
    run 2 "$tftrace" -o link.trace -- "$prog" touch ran2
    has err.txt "symbolic link"
    [ ! -e ran2 ] || fail "ran with a symlinked output directory"
    run 0 "$tftrace" -q --force -o link.trace -- "$prog" touch ran2
    [ -f real.trace/manifest.json ] || fail "--force did not record into the link's target"
    # a link as TFT_OUTPUT: the in-process writer says so in one line, records nothing
    TFT_OUTPUT=link.trace run 0 "$prog" touch ran3
    [ "$(wc -l <err.txt)" = 1 ] && has err.txt "symbolic link" ;;

  nonempty)
    # tftrace -o on a directory holding files deletes nothing, runs nothing
    mkdir v
    echo '{"precious":1}' >v/manifest.json
    echo x >v/rank-00007.tft
    echo notes >v/notes.txt
    run 2 "$tftrace" -o v -- "$prog" touch ran
    has err.txt "is not empty"
    has err.txt "--force"
    [ ! -e ran ] || fail "the command ran"
    [ "$(cat v/manifest.json)" = '{"precious":1}' ] && [ "$(cat v/rank-00007.tft)" = x ] ||
        fail "the directory's files were changed"
    [ "$(ls -A v | sort | tr '\n' ' ')" = "manifest.json notes.txt rank-00007.tft " ] ||
        fail "a refused directory was written to: $(ls -A v)"
    # --force replaces the earlier trace's files, and only those
    run 0 "$tftrace" -q --force -o v -- "$prog" touch ran
    [ -e ran ] && [ ! -e v/rank-00007.tft ] && [ "$(cat v/notes.txt)" = notes ] || fail "--force: $(ls -a v)"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['format']=='tftrace' and m['complete'], m" \
        v/manifest.json
    # TFT_FORCE=1 is --force; an empty directory of our own needs nothing
    TFT_FORCE=1 run 0 "$tftrace" -q -o v -- "$prog" touch ran
    mkdir empty.trace
    run 0 "$tftrace" -q -o empty.trace -- "$prog" touch ran
    # a command that switches user records nothing: tftrace and tfdump say why
    if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
        run 0 "$tftrace" -q -o su.trace -- runuser -u nobody -- "$prog" value 1
        has err.txt "nothing was recorded: the command switches user (runuser)"
        run 0 "$tfdump" su.trace
        has out.txt "the command switches user (runuser)"
    fi ;;

  replay)
    # a trace is a program: replay shows the commands and asks
    "$tftrace" -q -o g.trace -- "$prog" value 1
    "$tftrace" -q -o b.trace -- "$prog" value 2
    python3 - b.trace/manifest.json "$tmp/PWNED" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
i = m["command"].index("--")
m["command"][i + 1:i + 1] = ["sh", "-c", 'id > %s; exec "$0" "$@"' % sys.argv[2]]
json.dump(m, open(sys.argv[1], "w"))
PY
    run 2 "$tftrace" replay -o rp g.trace b.trace </dev/null
    [ ! -e PWNED ] || fail "replay ran a tampered command without asking"
    has err.txt "sh -c 'id > $tmp/PWNED"
    has err.txt "in $tmp"
    has err.txt "--yes"
    # on a terminal it asks: "n" runs nothing, "y" runs both
    python3 - "$tftrace" "$tmp" <<'PY'
import os, pty, subprocess, sys
tftrace, tmp = sys.argv[1], sys.argv[2]
def ask(answer, out):
    m, s = pty.openpty()
    p = subprocess.Popen([tftrace, "replay", "-q", "-o", out, "g.trace", "b.trace"], stdin=s,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp)
    os.close(s)
    os.write(m, answer)
    o, e = p.communicate(timeout=150)
    os.close(m)
    return p.returncode, e.decode()
rc, err = ask(b"n\n", "rp-n")
assert rc == 2 and "Run them? [y/N]" in err and "nothing was run" in err, (rc, err)
assert not os.path.exists(os.path.join(tmp, "PWNED")), "ran after 'n'"
rc, err = ask(b"y\n", "rp-y")
assert rc in (0, 1), (rc, err)
assert os.path.exists(os.path.join(tmp, "PWNED")), "'y' did not run the commands"
os.unlink(os.path.join(tmp, "PWNED"))
PY
    # --yes runs them; a second replay into the same directory needs --force
    run 1 "$tftrace" replay --yes -q -o rp g.trace b.trace
    [ -e PWNED ] || fail "--yes did not run the commands"
    run 2 "$tftrace" replay --yes -q -o rp g.trace b.trace
    has err.txt "--force"
    run 1 "$tftrace" replay --yes --force -q -o rp g.trace b.trace
    # a command recorded with a secret redacted is not run, even with --yes
    "$tftrace" -q -o s.trace -- "$prog" value 2 --api-key=SECRET123
    rm -f PWNED
    run 2 "$tftrace" replay --yes -q -o rp2 g.trace s.trace
    has err.txt "redacted"
    "$tftrace" --help | grep -- "--no-redact" >/dev/null && "$tftrace" replay --help | grep -- "--yes" >/dev/null ||
        fail "--help lacks --no-redact / --yes" ;;

  secrets)
    # values of secret-looking arguments redacted; modes 0600/0700 whatever the umask
    umask 000
    args=(--api-key=SECRET1 --token SECRET2 DB_PASSWORD=SECRET3 https://u:SECRET4@example.org/x
          -client-secret=SECRET5 --keep=visible --tokens-per-step 7)
    run 0 "$tftrace" -q -o s.trace -- "$prog" touch ran "${args[@]}"
    ! grep -rq SECRET s.trace || fail "a secret reached the trace: $(grep -rl SECRET s.trace)"
    python3 - s.trace/manifest.json "${#args[@]}" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
cmd = m["command"]
i = cmd.index("--")
args = cmd[i + 4:]  # after: prog touch ran
assert len(args) == int(sys.argv[2]), ("argv length kept", args)
assert args[0] == "--api-key=<redacted>" and args[1:3] == ["--token", "<redacted>"], args
assert args[3] == "DB_PASSWORD=<redacted>" and args[4] == "https://u:<redacted>@example.org/x", args
assert args[5] == "-client-secret=<redacted>" and args[6] == "--keep=visible", args
assert args[7:] == ["--tokens-per-step", "<redacted>"], args  # the documented rule: a name with TOKEN
assert sorted(m["redacted"]) == [i + 4 + k for k in (0, 2, 3, 4, 5, 8)], (m["redacted"], i)
PY
    [ "$(mode_of s.trace)" = 700 ] && [ "$(mode_of s.trace/manifest.json)" = 600 ] &&
        [ "$(mode_of s.trace/rank-00000.tft)" = 600 ] ||
        fail "modes under umask 000: $(stat -c '%a %n' s.trace s.trace/*)"
    # --no-redact / TFT_NO_REDACT=1 keep them; --mode / TFT_MODE set the bits
    run 0 "$tftrace" -q --no-redact --mode 0640 -o k.trace -- "$prog" touch ran --api-key=SECRET1
    grep -q SECRET1 k.trace/manifest.json || fail "--no-redact redacted"
    [ "$(mode_of k.trace)" = 750 ] && [ "$(mode_of k.trace/manifest.json)" = 640 ] &&
        [ "$(mode_of k.trace/rank-00000.tft)" = 640 ] || fail "--mode 0640: $(stat -c '%a %n' k.trace k.trace/*)"
    TFT_NO_REDACT=1 TFT_MODE=0644 run 0 "$tftrace" -q -o e.trace -- "$prog" touch ran --api-key=SECRET1
    grep -q SECRET1 e.trace/manifest.json && [ "$(mode_of e.trace/rank-00000.tft)" = 644 ] ||
        fail "TFT_NO_REDACT / TFT_MODE"
    run 2 "$tftrace" --mode 0400 -o x.trace -- true
    run 2 "$tftrace" --mode 9 -o x.trace -- true
    # the in-process writer: the same rule, the same modes
    TFT_OUTPUT=ip.trace run 0 "$prog" touch ran --api-key=SECRET1 API_TOKEN=SECRET2
    ! grep -rq SECRET ip.trace || fail "in-process: a secret reached the trace"
    [ "$(mode_of ip.trace)" = 700 ] && [ "$(mode_of ip.trace/manifest.json)" = 600 ] &&
        [ "$(mode_of ip.trace/rank-00000.tft)" = 600 ] || fail "in-process modes: $(stat -c '%a %n' ip.trace ip.trace/*)"
    # URL passwords inside options, a password holding '@', two URLs in one
    # argument: launcher and in-process writer alike
    urls=(--db-url=postgres://user:SECRET6@db/x postgres://user:p@SECRET7@db/x
          "--dbs=mysql://a:SECRET8@h1/x,redis://b:SECRET9@h2" http://nopass@host/x)
    run 0 "$tftrace" -q -o u.trace -- "$prog" touch ran "${urls[@]}"
    TFT_OUTPUT=uip.trace run 0 "$prog" touch ran "${urls[@]}"
    for t in u.trace uip.trace; do
        ! grep -rq SECRET $t || fail "$t: a URL password reached the trace: $(grep -rho '[^"]*SECRET[^"]*' $t | head -3)"
        python3 - $t/manifest.json <<'PY'
import json, sys
cmd = json.load(open(sys.argv[1]))["command"]
i = cmd.index("touch")
args = cmd[i + 2:]
assert args == ["--db-url=postgres://user:<redacted>@db/x", "postgres://user:<redacted>@db/x",
                "--dbs=mysql://a:<redacted>@h1/x,redis://b:<redacted>@h2", "http://nopass@host/x"], args
PY
    done ;;

  lock)
    # a second tftrace on a directory being recorded: exit 2 before its command
    "$tftrace" -q -o same.trace -- "$prog" flood-until "$tmp/go" "$tmp/ready" "$tmp/done" &
    first=$!
    bg+=($first)
    wait_for ready 60 $first
    run 2 "$tftrace" -q -o same.trace -- "$prog" touch ran
    has err.txt "another tftrace (pid $first) is recording into it"
    [ ! -e ran ] || fail "the second command ran"
    touch go
    st=0; wait $first || st=$?
    [ "$st" = 0 ] || fail "the first run: exit $st"
    "$tfdump" --verify same.trace >/dev/null || fail "tfdump --verify"
    "$tfdump" --json same.trace >sum.json
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['problems']==[] and s['ranks']==1, s" sum.json
    # the reproducer: two at once; exactly one records, the other exits 2
    for s in 1 2; do "$tftrace" -q -o two.trace -- "$prog" flood 20000 >/dev/null 2>"err$s.txt" & done
    st1=0 st2=0
    wait %1 || st1=$?
    wait %2 || st2=$?
    [ "$(echo $st1 $st2 | tr ' ' '\n' | sort | tr '\n' ' ')" = "0 2 " ] || fail "exit statuses $st1 $st2, want 0 and 2"
    "$tfdump" --verify two.trace >/dev/null || fail "two.trace damaged"
    "$tfdump" --json two.trace >sum.json
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['problems']==[] and s['ranks']==1, s" sum.json
    # every run its own id: a run recorded again (--force) gets a new one
    id1=$(python3 -c "import json; print(json.load(open('two.trace/manifest.json'))['run_id'])")
    "$tftrace" -q --force -o two.trace -- "$prog" touch ran
    id2=$(python3 -c "import json; print(json.load(open('two.trace/manifest.json'))['run_id'])")
    [ "$id1" != "$id2" ] || fail "the same run id twice: $id1"
    # the instances of one job (its launcher's job id) share the directory;
    # another job, or a second live instance with a rank already there, is refused
    rm -f go ready done
    PMIX_NAMESPACE=job1 PMIX_RANK=0 "$tftrace" -q -o j.trace -- "$prog" flood-until "$tmp/go" "$tmp/ready" "$tmp/done" &
    first=$!
    bg+=($first)
    wait_for ready 60 $first
    PMIX_NAMESPACE=job1 PMIX_RANK=1 run 0 "$tftrace" -q -o j.trace -- "$prog" touch ran1
    PMIX_NAMESPACE=job1 PMIX_RANK=0 run 2 "$tftrace" -q -o j.trace -- "$prog" touch ran0
    PMIX_NAMESPACE=job2 PMIX_RANK=2 run 2 "$tftrace" -q -o j.trace -- "$prog" touch ran2
    [ -e ran1 ] && [ ! -e ran0 ] && [ ! -e ran2 ] || fail "job membership: $(ls ran* 2>/dev/null)"
    touch go
    wait $first || fail "the job's first instance failed"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['complete'] and sorted(r['rank'] for r in m['ranks'])==[0,1], m" \
        j.trace/manifest.json
    "$tfdump" --json j.trace >sum.json
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['problems']==[] and s['ranks']==2, s" sum.json
    # two mpirun jobs: the instances of one share the directory, another job is refused
    if command -v mpirun >/dev/null; then
        mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
        rm -f go ready done ran
        "${mpi[@]}" "$tftrace" -q -o job.trace -- "$prog" flood-until "$tmp/go" "$tmp/ready" "$tmp/done" &
        job=$!
        bg+=($job)
        wait_for ready 60 $job
        st=0; "${mpi[@]}" "$tftrace" -q -o job.trace -- "$prog" touch ran >/dev/null 2>err.txt || st=$?
        [ "$st" != 0 ] && [ ! -e ran ] || fail "a second mpirun job recorded into the first's directory"
        has err.txt "another tftrace"
        touch go
        wait $job || fail "the mpirun job failed"
        python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['complete'] and sorted(r['rank'] for r in m['ranks'])==[0,1], m" \
            job.trace/manifest.json
    else
        echo "(no mpirun: the job part is not run)"
    fi ;;

  diskfull)
    # a full disk: the program unharmed, the user told, the summary exact
    [ "$(id -u)" = 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 0; }
    mkdir small
    mount -t tmpfs -o size=2m tmpfs small 2>/dev/null || { echo "SKIP: mount -t tmpfs not allowed here"; exit 0; }
    mnt=$tmp/small
    run 86 "$tftrace" -o small/x.trace -- "$prog" flood 300000
    cat err.txt
    has out.txt "300000 tensors"
    [ "$(grep -c "write failed: No space" err.txt)" = 1 ] || fail "the write error reported $(grep -c "write failed: No space" err.txt) times"
    has err.txt "x.trace: 1 rank,"
    has err.txt "exit status 86"
    ! grep -q "rank file(s)" err.txt || fail "the old double-counted message"
    n=$(sed -n 's/.*INCOMPLETE: .*: \([0-9]*\) records reached the disk.*/\1/p' err.txt)
    [ -n "$n" ] || fail "no INCOMPLETE line"
    "$tfdump" --json small/x.trace >sum.json 2>/dev/null
    python3 - sum.json "$n" small/x.trace/manifest.json <<'PY'
import json, sys
s, n, m = json.load(open(sys.argv[1])), int(sys.argv[2]), json.load(open(sys.argv[3]))
assert s["records"] == n and n > 0, ("what tftrace said reached the disk", n, "what is there", s["records"])
assert m["complete"] is False and "No space left on device" in m["incomplete"], m
assert m["exit_status"] == 0 and m["ranks"][0]["exit"] == {"code": 0}, m
assert s["manifest"]["incomplete"] == m["incomplete"], s["manifest"]
PY
    "$tfdump" small/x.trace >sum.txt 2>/dev/null
    has sum.txt "trace is INCOMPLETE"
    # the command's own failure wins; --incomplete-status 0 keeps the command's status
    rm -rf small/*
    run 3 "$tftrace" -q -o small/y.trace -- "$prog" flood 300000 3
    rm -rf small/*
    run 0 "$tftrace" -q --incomplete-status 0 -o small/y.trace -- "$prog" flood 300000
    # in-process: exit status untouched, one line on stderr, the manifest says it
    rm -rf small/*
    TFT_OUTPUT=small/z.trace run 0 "$prog" flood 300000
    [ "$(wc -l <err.txt)" = 1 ] || { cat err.txt; fail "in-process: want one line on stderr"; }
    has err.txt "TFT_OUTPUT=small/z.trace: the trace is INCOMPLETE"
    n=$(sed -n 's/.*: \([0-9]*\) records reached the disk.*/\1/p' err.txt)
    "$tfdump" --json small/z.trace >sum.json 2>/dev/null
    python3 - sum.json "$n" small/z.trace/manifest.json <<'PY'
import json, sys
s, n, m = json.load(open(sys.argv[1])), int(sys.argv[2]), json.load(open(sys.argv[3]))
assert s["records"] == n and n > 0, ("said", n, "there", s["records"])
assert m["complete"] is False and "No space left on device" in m["incomplete"], m
PY
    ;;

  nodrop)
    # --no-drop's fallback: a stalled collector (SIGSTOP) makes the program
    # drop after --no-drop-timeout, counted apart; 0 = wait while it lives
    for t in 1 0; do
        rm -f go ready done
        "$tftrace" --no-drop --no-drop-timeout $t --ring-kb 64 -o "n$t.trace" -- \
            "$prog" flood-until "$tmp/go" "$tmp/ready" "$tmp/done" 2>"err$t.txt" &
        col=$!
        bg+=($col)
        wait_for ready 60 $col
        kill -STOP $col
        sleep 3 # the collector stopped; the program waits (t=0) or gives up after 1 s (t=1)
        kill -CONT $col
        touch go
        st=0; wait $col || st=$?
        [ "$st" = 0 ] || { cat "err$t.txt"; fail "--no-drop-timeout $t: exit $st"; }
        read -r _ recorded refused <done
        if [ $t = 1 ]; then
            # (a tensor the program records is two records, its op and itself: counts differ)
            [ "$refused" -gt 0 ] || fail "no drop after the collector stalled"
            n=$(sed -n 's/.*(\([0-9]*\) when --no-drop gave up on a stalled collector.*/\1/p' "err$t.txt")
            [ -n "$n" ] && [ "$n" -ge "$refused" ] ||
                { cat "err$t.txt"; fail "the summary does not count the stalled drops apart"; }
            python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['dropped_stalled']==int(sys.argv[2]), m" \
                "n$t.trace/manifest.json" "$n"
            "$tfdump" "n$t.trace" | grep "($n when --no-drop gave up" >/dev/null || fail "tfdump does not show them"
        else
            [ "$refused" = 0 ] || fail "--no-drop-timeout 0 dropped $refused"
            grep -q " 0 dropped" "err$t.txt" || { cat "err$t.txt"; fail "drops with --no-drop-timeout 0"; }
        fi
    done
    run 2 "$tftrace" --no-drop-timeout x -- true ;;

  manifest)
    # format_version parsed with overflow checks; world_size -1 when unknown
    "$tftrace" -q -o g.trace -- "$prog" touch ran
    for v in 4294967297.1 99999999999999999999.1 -1.0 1.2.3 " 1.2" 1 65536.0; do
        rm -rf "v.trace"; cp -r g.trace v.trace
        python3 -c "import json,sys; p=sys.argv[1]; m=json.load(open(p)); m['format_version']=sys.argv[2]; json.dump(m,open(p,'w'))" \
            v.trace/manifest.json "$v"
        "$tfdump" --json v.trace >sum.json 2>err.txt || fail "tfdump on format_version '$v'"
        has err.txt "is not MAJOR.MINOR"
        python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['manifest'] is None" sum.json ||
            fail "format_version '$v' accepted"
    done
    # a world_size far above the rank files present is flagged
    python3 -c "import json,sys; p=sys.argv[1]; m=json.load(open(p)); m['world_size']=1000000; json.dump(m,open(p,'w'))" \
        g.trace/manifest.json
    "$tfdump" g.trace >sum.txt 2>&1
    has sum.txt "world_size 1000000, but 1 rank file"
    # an unfinished manifest: world size unknown (-1), not 0
    "$tftrace" -q -o u.trace -- "$prog" flood-until "$tmp/go" "$tmp/ready" "$tmp/done" &
    col=$!
    bg+=($col)
    wait_for ready 60 $col
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['world_size']==-1 and not m['complete'], m" \
        u.trace/manifest.json || fail "unfinished manifest"
    "$tfdump" u.trace 2>/dev/null | grep "still recording" >/dev/null || fail "tfdump does not say the run is still recording"
    touch go
    wait $col ;;

  planted)
    # files planted in a trace directory by another user (a shared 1777 or
    # group-writable directory): a FIFO or a link never blocks nor redirects
    # a read (docs/SECURITY.md "Files in a trace directory")
    mkfifo_or_skip() { mkfifo "$1" 2>/dev/null || { echo "SKIP: no mkfifo here"; exit 0; }; }
    # 1. the in-process writer at exit, with a FIFO fragment and a linked one
    mkdir -m 0700 ip.trace
    mkfifo_or_skip ip.trace/manifest.rank-00009.json
    printf '{"x": 1}' >elsewhere.json
    ln -s "$tmp/elsewhere.json" ip.trace/manifest.rank-00008.json
    RANK=0 TFT_OUTPUT=ip.trace run 0 timeout 30 "$prog" touch ran
    [ -e ran ] || fail "the program did not run"
    [ -f ip.trace/manifest.rank-00000.json ] || fail "no fragment of the program's own"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert [r['file'] for r in m['ranks']] == ['rank-00000.tft'], m" \
        ip.trace/manifest.json || fail "manifest.json snapshot missing or holding the planted fragments"
    # 2. the readers: exit 2 naming the file, never a wait
    "$tftrace" -q -o g.trace -- "$prog" touch ran2
    expect_refused() {   # TRACE FILE: every reader of FILE exits 2 naming it (tfdiff reads no process table)
        local t=$1 f=$2
        run 2 timeout 20 "$tfdump" "$t"; has err.txt "$f"; has err.txt "not a regular file"
        run 2 timeout 20 "$tfdump" --check "$t"; has err.txt "$f"
        if [ -n "$tfdiff" ] && [ "${f#processes}" = "$f" ]; then
            run 2 timeout 20 "$tfdiff" g.trace "$t"; has err.txt "$f"; has err.txt "not a regular file"
        fi
    }
    for planted in manifest.json manifest.rank-00003.json processes-4242.json; do
        rm -rf p.trace; cp -r g.trace p.trace
        rm -f "p.trace/$planted"; mkfifo_or_skip "p.trace/$planted"
        expect_refused p.trace "$planted"
        rm -f "p.trace/$planted"; ln -s "$tmp/g.trace/manifest.json" "p.trace/$planted"
        expect_refused p.trace "$planted"
    done
    rm -rf p.trace; cp -r g.trace p.trace; rm p.trace/manifest.json; mkfifo_or_skip p.trace/manifest.json
    mkdir -p gath
    run 2 timeout 20 "$tftrace" gather gath/out.trace p.trace; has err.txt "manifest.json"
    if [ -n "$pydir" ] && [ -n "$libtft" ] && "$py" -c "import numpy" 2>/dev/null; then
        st=0
        TFT_LIB="$libtft" PYTHONPATH="$pydir" timeout 20 "$py" -c "
import sys, tftrace
try:
    tftrace.open(sys.argv[1])
except tftrace.TraceError as e:
    print('refused:', e); sys.exit(2)
print('opened'); sys.exit(0)" p.trace >out.txt 2>err.txt || st=$?
        [ $st = 2 ] || { cat out.txt err.txt; fail "python reader: exit $st on a FIFO manifest.json, want 2"; }
        has out.txt "manifest.json"
    fi ;;

  outputs)
    # every file the analyzers write: never through another user's link at
    # its name (a shared output directory), its own links and /dev/null
    # written through; extracts and exports 0700/0600 whatever the umask,
    # --mode / TFT_MODE otherwise (docs/SECURITY.md "Files the analyzers write")
    [ -n "$tfdiff" ] || { echo "SKIP: needs tfdiff"; exit 0; }
    umask 022
    "$tftrace" -q -o a.trace -- "$prog" value 1
    "$tftrace" -q -o b.trace -- "$prog" value 2
    outs=(j.xml m.md d.html e.json h.html)
    write_all() {   # DIR: each output into DIR; sets st_N to each exit status
        st_j=0; "$tfdiff" --junit "$1/j.xml" a.trace b.trace >/dev/null 2>"$1.err.j" || st_j=$?
        st_m=0; "$tfdiff" --markdown "$1/m.md" a.trace b.trace >/dev/null 2>"$1.err.m" || st_m=$?
        st_d=0; "$tfdiff" --html "$1/d.html" a.trace b.trace >/dev/null 2>"$1.err.d" || st_d=$?
        st_e=0; "$tfdump" --export chrome "$1/e.json" a.trace >/dev/null 2>"$1.err.e" || st_e=$?
        st_h=0; "$tfdump" --html "$1/h.html" a.trace >/dev/null 2>"$1.err.h" || st_h=$?
    }
    if [ ${#as_user[@]} -gt 0 ]; then
        # another user's links to a root-owned file, in a 1777 directory
        chmod 755 "$tmp"; mkdir -m 1777 shared
        printf 'precious\n' >victim; chmod 600 victim
        for f in "${outs[@]}"; do "${as_user[@]}" ln -s "$tmp/victim" "shared/$f"; done
        write_all shared
        [ "$(cat victim)" = precious ] || fail "the victim was overwritten through a planted link"
        for k in j m d e h; do
            v=st_$k; [ "${!v}" = 2 ] || { cat shared.err.$k; fail "output $k through another user's link: exit ${!v}, want 2"; }
            has shared.err.$k "symbolic link of another user"
        done
    else
        echo "(no other user to plant links: that part not run)"
    fi
    # links of one's own are followed; /dev/null is written to, not replaced
    mkdir own; : >own/target
    for f in "${outs[@]}"; do ln -s "$tmp/own/target.$f" "own/$f"; done
    write_all own
    for f in "${outs[@]}"; do [ -s "own/target.$f" ] && [ -L "own/$f" ] || fail "own link $f not written through"; done
    run 0 "$tfdump" --export chrome /dev/null a.trace
    [ -c /dev/null ] || fail "/dev/null is no longer a device"
    # modes: extract and export 0700/0600 under umask 022; --mode and TFT_MODE
    run 0 "$tfdump" --extract a.trace x1.trace
    [ "$(mode_of x1.trace)" = 700 ] || fail "extract directory mode $(mode_of x1.trace), want 700"
    for f in x1.trace/*; do [ "$(mode_of "$f")" = 600 ] || fail "$f mode $(mode_of "$f"), want 600"; done
    run 0 "$tfdump" --export chrome e1.json a.trace
    [ "$(mode_of e1.json)" = 600 ] || fail "export mode $(mode_of e1.json), want 600"
    run 0 "$tfdump" --mode 0640 --extract a.trace x2.trace
    [ "$(mode_of x2.trace)" = 750 ] || fail "extract --mode 0640: directory $(mode_of x2.trace), want 750"
    for f in x2.trace/*; do [ "$(mode_of "$f")" = 640 ] || fail "$f mode $(mode_of "$f"), want 640"; done
    TFT_MODE=0644 run 0 "$tfdump" --export chrome e2.json a.trace
    [ "$(mode_of e2.json)" = 644 ] || fail "export with TFT_MODE=0644: $(mode_of e2.json)"
    run 2 "$tfdump" --mode 0044 --extract a.trace x3.trace
    has err.txt "--mode needs octal permission bits" ;;

  escapes)
    # strings from a trace (tensor names, the command) or a process never
    # reach the output raw: a name that would print "tfdiff: MATCH" over the
    # verdict on a terminal, C1 and bidirectional controls, bytes not UTF-8
    [ -n "$tfdiff" ] || { echo "SKIP: needs tfdiff"; exit 0; }
    evil=$'x\e[2K\r\e[1Atfdiff: MATCH \xc2\x9b31m\xe2\x80\xaeevil\x9b\x07'
    "$tftrace" -q -o a.trace -- "$prog" named "$evil" 1 "$evil"
    "$tftrace" -q -o b.trace -- "$prog" named "$evil" 2 "$evil"
    raw() {   # FILE: fails when it holds ESC, CR, BEL, C1 (U+009B), U+202E or a byte that is not UTF-8
        python3 - "$1" <<'PY' || fail "$1: control characters printed raw: $(od -c "$1" | head -5)"
import sys
d = open(sys.argv[1], "rb").read()
bad = [b"\x1b", b"\r", b"\x07", b"\xc2\x9b", b"\xe2\x80\xae"]
assert not any(b in d for b in bad), [b for b in bad if b in d]
d.decode("utf-8")   # a lone 0x9b byte is not UTF-8
PY
    }
    st=0; "$tfdiff" a.trace b.trace >out.txt 2>err.txt || st=$?
    [ $st = 1 ] || fail "tfdiff exit $st, want 1 (DIVERGED)"
    raw out.txt; has out.txt '\x1b[2K\x0d\x1b[1Atfdiff: MATCH \u009b31m\u202eevil\x9b\x07'
    st=0; "$tfdump" --check a.trace >out.txt 2>err.txt || st=$?; raw out.txt
    run 0 "$tfdump" a.trace; raw out.txt; has out.txt '\x1b[2K'
    run 0 "$tfdump" --events a.trace; raw out.txt
    # JSON: valid, the name intact once parsed (its escapes are JSON's)
    run 0 "$tfdump" --events --json a.trace
    raw out.txt
    python3 -c "
import json, sys
names = [json.loads(l).get('name') or '' for l in open(sys.argv[1], encoding='utf-8')]
assert any('tfdiff: MATCH' in n and 'evil' in n and '\x1b' in n for n in names), names" out.txt || fail "JSON lost the name"
    st=0; "$tfdiff" --json a.trace b.trace >out.txt 2>err.txt || st=$?; raw out.txt
    python3 -c "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))" out.txt || fail "tfdiff --json invalid"
    run 0 "$tfdump" --export chrome e.json a.trace; raw e.json
    python3 -c "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))" e.json || fail "--export chrome: invalid JSON"
    # the replay prompt quotes the recorded command: shown, never obeyed
    st=0; "$tftrace" replay a.trace b.trace </dev/null >out.txt 2>err.txt || st=$?
    raw err.txt
    has err.txt "'\$'\\xe2\\x80\\xae''evil"
    # the launcher's end-of-run summary names the processes' paths
    mkdir -p "d$evil"; cp "$prog" "d$evil/p"
    st=0; "$tftrace" -o c.trace -- "d$evil/p" flood 1 3 >out.txt 2>err.txt || st=$?
    [ $st = 3 ] || fail "tftrace exit $st, want the program's 3"
    raw err.txt
    if grep -q "in the job" err.txt; then has err.txt '\x1b[2K\x0d\x1b[1Atfdiff: MATCH'; fi ;;

  collector-death)
    # tftrace SIGKILLed: the program finishes unharmed, nothing stays in
    # /dev/shm, tfdump says the collector died; with --no-drop too (the
    # program notices the collector is gone instead of waiting forever)
    for nd in "" "--no-drop --no-drop-timeout 0"; do
        rm -f go ready done
        # shellcheck disable=SC2086
        "$tftrace" -q $nd --ring-kb 64 -o "k${nd:+nd}.trace" -- "$prog" flood-until "$tmp/go" "$tmp/ready" "$tmp/done" \
            2>/dev/null &
        col=$!
        bg+=($col)
        wait_for ready 60 $col
        kill -KILL $col
        wait $col 2>/dev/null || true
        touch go
        wait_for done 60
        read -r ok _ <done
        [ "$ok" = ok ] || fail "the program did not finish: $(cat done)"
        if ls /dev/shm | grep "^tftrace-$col-" >/dev/null; then fail "left in /dev/shm: $(ls /dev/shm | grep "^tftrace-$col-")"; fi
        "$tfdump" "k${nd:+nd}.trace" >sum.txt 2>/dev/null || true
        has sum.txt "collector    died: tftrace (pid $col"
        has sum.txt "its collector died"
        python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['world_size']==-1 and not m['complete'], m" \
            "k${nd:+nd}.trace/manifest.json"
    done ;;

  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"

"""Checks the trace of one mpi_life.c case (tfdump --events --json lines)
against what the program printed (mpirun --tag-output lines).
Usage: check_mpi_life.py reuse|threads|bytes OUT EVENTS.json [NEED_REUSE]
NEED_REUSE 0: the reuse case passes without a freed handle handed out again
(ASan builds, whose quarantine holds freed memory back)."""
import collections
import json
import re
import sys

case, out_path, path = sys.argv[1], sys.argv[2], sys.argv[3]
need_reuse = len(sys.argv) < 5 or sys.argv[4] != "0"
recs = [json.loads(line) for line in open(path)]
coll = [r for r in recs if r["kind"] == "collective"]
tensors = {(r["rank"], r["id"]): r for r in recs if r["kind"] == "tensor"}
comms = {}  # (rank, comm id) -> COMM record
for r in recs:
    if r["kind"] == "comm":
        assert (r["rank"], r["comm"]) not in comms, ("a second COMM record for one id", r)
        comms[(r["rank"], r["comm"])] = r
out = collections.defaultdict(list)  # rank -> its stdout lines
for line in open(out_path):
    m = re.match(r"\[\d+,(\d+)\]<stdout>:(.*)", line.rstrip("\n"))
    if m:
        out[int(m.group(1))].append(m.group(2))


def calls_complete():
    """Every ENTER has its EXIT, and each communicator's calls on a rank are
    numbered 0, 1, 2, ... in order."""
    key = lambda r: (r["rank"], r["comm"], r["coll_seq"])
    enters = sorted(key(r) for r in coll if r["phase"] == "enter")
    exits = sorted(key(r) for r in coll if r["phase"] == "exit")
    assert enters == exits, ("calls without exit", set(enters) ^ set(exits))
    seqs = collections.defaultdict(list)
    for r in coll:
        if r["phase"] == "enter":
            seqs[(r["rank"], r["comm"])].append(r["coll_seq"])
    for k, q in seqs.items():
        assert sorted(q) == list(range(len(q))), (k, q)


def check_reuse():
    for rank, lines in out.items():
        want = [l.split(" members ")[1] for l in lines if l.startswith("call ")]
        assert len(want) == 9, lines
        got = [r for r in coll if r["rank"] == rank and r["name"] == "MPI_Allreduce" and r["phase"] == "enter"]
        assert len(got) == len(want), (rank, len(got), want)
        for r, members in zip(got, want):
            c = comms.get((rank, r["comm"]))
            assert c is not None, ("no COMM record for", r)
            named = ",".join(map(str, c["members"]))
            assert named == members, ("rank", rank, "call names", named, "but ran on", members)
            assert r["nranks"] == len(members.split(",")) and c["members"][r["comm_rank"]] == rank, (r, c)
    # the case tests something only when MPI handed out a freed handle again
    reused = any("reused 1" in lines for lines in out.values())
    assert reused or not need_reuse, "MPI never reused a freed handle"
    print("reuse: every call names its own communicator's members")


def check_threads():
    assert "threads ok" in out[0], out
    per_comm = collections.Counter((r["rank"], r["comm"]) for r in coll if r["phase"] == "enter")
    # 3 dups of the world with 2 calls per iteration each, and 20 splits per thread
    big = [n for (rank, c), n in per_comm.items() if n == 2 * 20 + 0]
    assert len(big) == 2 * 3, per_comm
    print("threads:", sum(per_comm.values()), "calls on", len(per_comm), "communicators")


def check_bytes():
    fps = dict(l.split()[1:3] for l in out[1] if l.startswith("fp "))
    bc = [r for r in coll if r["rank"] == 1 and r["name"] == "MPI_Bcast" and r["phase"] == "exit"]
    assert len(bc) == 4, bc
    byte, char, quad, strided = bc
    for r, name, n in ((byte, "byte", 4096), (char, "char", 32), (quad, "quad", 256)):
        assert r["dtype"] == "u8" and r["count"] == n, r
        t = tensors[(1, r["result"])]
        assert t["mode"] == "health" and t["dtype"] == "u8" and t["shape"] == [n], t
        assert t["stats"]["numel"] == n and t["stats"]["fingerprint"] == fps[name], (t, fps)
        assert "mean" not in t["stats"], ("moments of bytes", t)
    t = tensors[(1, byte["result"])]["stats"]
    assert (t["zero"], t["min"], t["max"]) == (17, 0, 250), t
    assert strided["dtype"] == "u8" and strided["count"] == 32 and strided["result"] is None, strided
    rv = [r for r in coll if r["rank"] == 1 and r["name"] == "MPI_Recv" and r["phase"] == "exit"]
    assert len(rv) == 1 and rv[0]["count"] == 48, rv  # 3 of 16 posted quads, in bytes
    print("bytes: fingerprints and counts of byte buffers, no moments")


calls_complete()
{"reuse": check_reuse, "threads": check_threads, "bytes": check_bytes}[case]()

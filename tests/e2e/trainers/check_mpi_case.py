"""What the MPI trainer cases must show (run_mpi_case.sh), field by field.
Usage: check_mpi_case.py CASE DIR
DIR holds golden.check.json, golden.events.json (tfdump --check --json and
--events --json -k comm,collective of the correct run) and, for a planted
bug, bad.check.json, bad.check.txt, bad.events.json and diff.json (tfdiff
--json GOLDEN BAD); each .json of a tool has a .status file with its exit
status. Exits non-zero with the failed assertion."""
import json
import os
import sys

case, d = sys.argv[1], sys.argv[2]
family, mode = case.split("-", 1)


def load(name):
    return json.load(open(os.path.join(d, name)))


def status(name):
    return int(open(os.path.join(d, name + ".status")).read())


def events(name):
    return [json.loads(line) for line in open(os.path.join(d, name))]


def comms_of(evs):
    """rank -> list of COMM records in file order"""
    out = {}
    for e in evs:
        if e["kind"] == "comm":
            out.setdefault(e["rank"], []).append(e)
    return out


def world_id(comms):
    ids = {c["comm"] for cs in comms.values() for c in cs if c["name"] == "MPI_COMM_WORLD"}
    assert len(ids) == 1, ("one MPI_COMM_WORLD id on all ranks", ids)
    return ids.pop()


def check_records(evs):
    """COMM records: one per communicator per rank, before its first
    collective, members as world ranks; collectives on defined ids only."""
    comms = comms_of(evs)
    assert sorted(comms) == [0, 1, 2, 3], ("COMM records on every rank", sorted(comms))
    wid = world_id(comms)
    seen = {}  # rank -> {comm id: record}
    p2p = set()
    for e in evs:
        r = e["rank"]
        if e["kind"] == "comm":
            assert e["comm"] not in seen.setdefault(r, {}), ("COMM twice on rank", r, e)
            seen[r][e["comm"]] = e
            m = e["members"]
            assert m is not None and len(m) == e["size"] and m[e["comm_rank"]] == r, e
            continue
        if e["type"] in ("send", "recv"):
            p2p.add(e["comm"])
            assert e["tag"] >= 0 or e["tag"] == -2, ("a p2p record without its tag", e)
            continue
        c = seen.get(r, {}).get(e["comm"])
        assert c, ("a collective before (or without) the COMM record of its communicator", e)
        assert e["comm_rank"] == c["comm_rank"] and e["nranks"] == c["size"], (e, c)
        assert e["tag"] == -1, ("a collective with a tag", e)
    w = [seen[r][wid] for r in range(4)]
    assert all(c["members"] == [0, 1, 2, 3] and c["order"] == 0 and c["parent"] is None for c in w), w
    assert not p2p & {c for s in seen.values() for c in s}, "point-to-point in a collective sequence space"
    return seen, wid


def by_name(seen, rank, name):
    return [c for c in seen[rank].values() if c["name"] == name]


def check_grid_comms(seen, wid, ran_to_end):
    """rows {0,1} {2,3}, columns {0,2} {1,3}, two dups of the world (a
    COMM record comes with a communicator's first recorded call: a run
    that hung never used the second dup)"""
    rows, cols = {}, {}
    for r in range(4):
        sp = by_name(seen, r, "MPI_Comm_split")
        assert len(sp) == 2, ("two splits on rank", r, sp)
        for c in sp:
            assert c["parent"] == wid and c["order"] == 0 and c["size"] == 2, c
        row = [c for c in sp if c["members"] == [r // 2 * 2, r // 2 * 2 + 1]]
        col = [c for c in sp if c["members"] == [r % 2, r % 2 + 2]]
        assert len(row) == 1 and len(col) == 1, ("row and column of rank", r, sp)
        rows[r], cols[r] = row[0]["comm"], col[0]["comm"]
        dups = sorted(by_name(seen, r, "MPI_Comm_dup"), key=lambda c: c["order"])
        if family == "grid":
            assert [c["order"] for c in dups] == ([0, 1] if ran_to_end else [0]), ("dups of the world", dups)
            assert all(c["members"] == [0, 1, 2, 3] and c["parent"] == wid for c in dups), dups
            assert len({wid} | {c["comm"] for c in dups}) == 1 + len(dups), ("dups share an id", dups)
    # equal on the members, different for disjoint groups
    assert rows[0] == rows[1] != rows[2] == rows[3], rows
    assert cols[0] == cols[2] != cols[1] == cols[3], cols
    assert not set(rows.values()) & set(cols.values()), (rows, cols)
    return rows, cols


def desync(name):
    j = load(name)
    return j["desync"]


def fmt(ds):
    return "\n".join("  [%d] %s %s ranks=%s caused_by=%s: %s" % (
        i, x["kind"], x.get("comm_name"), x["ranks"], x.get("caused_by"), x["detail"]) for i, x in enumerate(ds))


def same_findings(a, b):
    key = lambda x: (x["kind"], x["comm"], x["coll_seq"], x["ranks"], x.get("caused_by"))
    assert [key(x) for x in a] == [key(x) for x in b], ("tfdiff and tfdump --check disagree", fmt(a), fmt(b))


golden = events("golden.events.json")
seen, wid = check_records(golden)
g = desync("golden.check.json")
assert g == [] and status("golden.check.json") == 0, ("findings in the correct run", fmt(g))

if family in ("grid", "mpi4py"):
    rows, cols = check_grid_comms(seen, wid, True)
    if mode == "ok":
        print("grid ok: rows", rows[0], rows[2], "columns", cols[0], cols[1])
        sys.exit(0)
    bad_seen, bad_wid = check_records(events("bad.events.json"))
    assert bad_wid == wid, "the world id changed between runs"
    brows, bcols = check_grid_comms(bad_seen, bad_wid, False)
    assert (brows, bcols) == (rows, cols), "communicator ids are not reproducible across runs"
    ds = desync("bad.check.json")
    assert status("bad.check.json") == 1, "tfdump --check found nothing"
    assert ds, "no finding"
    f = ds[0]
    # the cause first: rank 3's count on column {1,3}, its 4th gradient all-reduce
    assert f["kind"] == "count" and f["comm"] == cols[1] and f["ranks"] == [3], fmt(ds)
    assert f["members"] == [1, 3] and f["comm_name"] == "{1,3}" and f["coll_seq"] == 3, fmt(ds)
    assert f["step"] is None and f["caused_by"] is None and isinstance(f["seq"], int), fmt(ds)
    assert "MPI_Allreduce" in f["detail"] and "communicator {1,3}" in f["detail"], f
    assert "rank 1 count 1024, rank 3 count 512" in f["detail"], f
    # then the hang it caused, if MPI hung: rank 1 stuck, the others in the world's MPI_Allgather
    for x in ds[1:]:
        assert x["kind"] == "missing" and x["caused_by"] == 0, ("only the hang may follow", fmt(ds))
        assert x["comm"] == wid and x["members"] == [0, 1, 2, 3] and x["ranks"] == [1], fmt(ds)
        assert "then ranks 0,2,3 waited in MPI_Allgather" in f["detail"], f
    assert len(ds) <= 2, fmt(ds)
    txt = open(os.path.join(d, "bad.check.txt")).read()
    first = [l for l in txt.splitlines() if l.startswith("desync:")][0]
    assert first.startswith("desync: count") and "communicator {1,3}" in first, txt
    diff = load("diff.json")
    assert status("diff.json") == 1 and diff["verdict"] == "diverged", diff.get("verdict")
    same_findings(diff["desync"], ds)
    print("grid count:", fmt(ds))
    sys.exit(0)

# p2p: a 4-stage pipeline on MPI_COMM_WORLD
p2p_recs = [e for e in golden if e["kind"] == "collective" and e["type"] in ("send", "recv")]
assert {e["tag"] for e in p2p_recs} == {1}, ("every send and receive has tag 1", {e["tag"] for e in p2p_recs})
assert len({e["comm"] for e in p2p_recs}) == 1, "one p2p sequence space for the world"
if mode == "ok":
    print("pipeline ok:", len(p2p_recs), "point-to-point records")
    sys.exit(0)
ds = desync("bad.check.json")
assert status("bad.check.json") == 1 and ds, "tfdump --check found nothing"
for x in ds:
    assert x["comm"] == wid and x["members"] == [0, 1, 2, 3] and x["comm_name"] == "{0-3}", fmt(ds)
f = ds[0]
if mode == "tag":
    # stage 3 waits for tag 1 from stage 2, which sent with tag 7 and went on
    assert f["kind"] == "p2p" and f["ranks"] == [3] and f["peer"] == 2 and f["tag"] == 1, fmt(ds)
    assert f["caused_by"] is None and "MPI_Irecv" in f["detail"], fmt(ds)
    assert "rank 2 sent it 256 x f32 with tag 7; rank 2 is itself waiting in MPI_Allreduce" in f["detail"], f
    assert "then ranks 0,1,2 waited in MPI_Allreduce" in f["detail"], f
    assert len(ds) == 2, fmt(ds)
    h = ds[1]
    assert h["kind"] == "missing" and h["ranks"] == [3] and h["caused_by"] == 0, fmt(ds)
else:
    # stage 2 waits for stage 1, which sent nothing; stage 3 waits for stage 2
    assert f["kind"] == "p2p" and f["ranks"] == [2] and f["peer"] == 1 and f["tag"] == 1, fmt(ds)
    assert f["caused_by"] is None and "MPI_Recv" in f["detail"], fmt(ds)
    assert "rank 1 sent it nothing" in f["detail"] and "MPI_Allreduce" in f["detail"], f
    assert len(ds) == 3, fmt(ds)
    kinds = sorted((x["kind"], x["ranks"], x["caused_by"]) for x in ds[1:])
    assert kinds == [("missing", [2, 3], 0), ("p2p", [3], 0)], fmt(ds)
    p3 = [x for x in ds if x["kind"] == "p2p" and x["ranks"] == [3]][0]
    assert p3["peer"] == 2 and "rank 2 is itself blocked in MPI_Recv" in p3["detail"], p3
diff = load("diff.json")
assert status("diff.json") == 1, "tfdiff found nothing"
same_findings(diff["desync"], ds)
print("pipeline %s:" % mode, fmt(ds))

"""Checks the MPI records of a correct run (tfdump --events --json lines).
Usage: check_mpi_trace.py c|py EVENTS.json
  c   mpi_prog ok: every interposed call present, fields, point-to-point
      sequence spaces, wildcard receives, non-blocking completions, statistics
  py  mpi4py_prog.py ok: the buffer and pickle based calls
Exits non-zero with the failed assertion."""
import json
import sys

prog, path = sys.argv[1], sys.argv[2]
recs = [json.loads(line) for line in open(path)]
coll = [r for r in recs if r["kind"] == "collective"]
tensors = {(r["rank"], r["id"]): r for r in recs if r["kind"] == "tensor"}  # ids are per rank
P2P = ("send", "recv")
WORLD = {r["comm"] for r in coll if r["name"] == "MPI_Barrier" or r["name"] == "MPI_Bcast"}


def exits_match_enters():
    key = lambda r: (r["rank"], r["comm"], r["coll_seq"])
    enters = sorted(key(r) for r in coll if r["phase"] == "enter")
    exits = sorted(key(r) for r in coll if r["phase"] == "exit")
    assert enters == exits, ("calls without exit", set(enters) ^ set(exits))
    assert len(set(enters)) == len(enters), "a (comm, coll_seq) twice on one rank"


def by(rank, name, phase):
    return [r for r in coll if r["rank"] == rank and r["name"] == name and r["phase"] == phase]


def wildcard(rank, name):
    """MPI_ANY_SOURCE receives (peer -1 at the ENTER) and their EXITs."""
    ins = [r for r in by(rank, name, "enter") if r["root"] == -1]
    seqs = {r["coll_seq"] for r in ins}
    return ins, [r for r in by(rank, name, "exit") if r["coll_seq"] in seqs]


def stats_of(r):
    assert r["result"] is not None, r
    return tensors[(r["rank"], r["result"])]["stats"]


def check_c():
    names = {r["name"] for r in coll}
    want = {"MPI_Reduce", "MPI_Allgather", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier",
            "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Alltoall", "MPI_Gather", "MPI_Scatter",
            "MPI_Send", "MPI_Recv", "MPI_Sendrecv", "MPI_Isend", "MPI_Irecv", "MPI_Iallreduce", "MPI_Ibcast",
            "MPI_Ireduce_scatter_block", "MPI_Ibarrier", "MPI_Ialltoall"}
    assert want <= names, ("missing calls", want - names)
    assert {r["rank"] for r in coll} == {0, 1, 2, 3}
    # every request completed (Wait, Test, Waitall, Waitany, Waitsome, Testall, Testsome) or freed
    exits_match_enters()
    # rank identity: the trace's rank is the MPI_COMM_WORLD rank
    assert all(r["comm_rank"] == r["rank"] and r["nranks"] == 4 for r in coll), "rank != MPI rank"
    # point-to-point: their own sequence space, never a collective's
    p2p = {r["comm"] for r in coll if r["type"] in P2P}
    colls = {r["comm"] for r in coll if r["type"] not in P2P}
    assert len(p2p) == 1 and len(colls) == 1 and not p2p & colls, (p2p, colls)
    for rank in range(4):  # per rank 0, 1, 2, ... in call order
        for comm in p2p | colls:
            qs = [r["coll_seq"] for r in coll if r["rank"] == rank and r["comm"] == comm and r["phase"] == "enter"]
            assert qs == list(range(len(qs))), (rank, comm, qs)
    # the collectives' fields
    rsv = by(1, "MPI_Reduce_scatter", "enter")
    assert [(r["count"], r["dtype"], r["op"]) for r in rsv] == [(7, "i32", "sum")], rsv  # sum of recvcounts
    a2a = by(3, "MPI_Alltoall", "enter")
    assert [(r["count"], r["dtype"]) for r in a2a] == [(2, "i32")], a2a
    rsb = by(2, "MPI_Reduce_scatter_block", "exit")[0]
    s = stats_of(rsb)  # rank 2 gets sum over r of r*10 + {4, 5} = {76, 80}
    assert (rsb["count"], s["min"], s["max"]) == (2, 76, 80), (rsb, s)
    sc = by(3, "MPI_Scatter", "exit")[0]  # root 2 scatters i*1.5: rank 3 gets {9, 10.5}
    assert sc["root"] == 2 and (stats_of(sc)["min"], stats_of(sc)["max"]) == (9, 10.5), sc
    g = by(0, "MPI_Gather", "enter")[0]
    assert (g["root"], g["count"], g["type"]) == (1, 1, "gather"), g
    # blocking receives: peer, actual source of MPI_ANY_SOURCE from the status
    ring = [r for r in by(1, "MPI_Recv", "exit") if r["count"] == 5]
    assert len(ring) == 1 and ring[0]["root"] == 0 and stats_of(ring[0])["max"] == 4, ring  # {0..4} from rank 0
    wild_in, wild_out = wildcard(0, "MPI_Recv")
    assert len(wild_in) == 3 and all(r["dtype"] == "i32" for r in wild_in), wild_in
    assert sorted(r["root"] for r in wild_out) == [1, 2, 3], wild_out
    for r in wild_out:  # rank k sent k * 1000
        assert stats_of(r)["min"] == r["root"] * 1000, r
    sr = by(2, "MPI_Sendrecv", "enter")
    assert sorted((r["type"], r["root"]) for r in sr) == [("recv", 1), ("send", 3)], sr
    # non-blocking: ENTER at the call, EXIT at the completion with the result's statistics
    ia = by(3, "MPI_Iallreduce", "exit")
    assert len(ia) == 1 and (ia[0]["count"], ia[0]["dtype"], ia[0]["op"]) == (4, "f64", "sum"), ia
    s = stats_of(ia[0])  # sum over ranks of {r, r + .5, 2r, 1} = {6, 8, 12, 4}
    assert (s["min"], s["max"], s["numel"]) == (4, 12, 4), s
    assert ia[0]["t_exit"] >= ia[0]["t_enter"] > 0, ia
    ib = by(2, "MPI_Ibcast", "exit")
    assert ib and ib[0]["root"] == 1 and (stats_of(ib[0])["min"], stats_of(ib[0])["max"]) == (5, 7), ib
    irs = by(0, "MPI_Ireduce_scatter_block", "exit")  # rank 0 gets sum over r of {0, 1} - r
    assert irs and (stats_of(irs[0])["min"], stats_of(irs[0])["max"]) == (-6, -2), irs
    iw_in, iw_out = wildcard(0, "MPI_Irecv")
    assert len(iw_in) == 3 and all(r["dtype"] == "i64" for r in iw_in), iw_in
    assert sorted(r["root"] for r in iw_out) == [1, 2, 3], iw_out
    for r in iw_out:  # rank k sent k * 7
        assert stats_of(r)["max"] == r["root"] * 7, r
    isends = by(1, "MPI_Isend", "exit")
    assert len(isends) == 4 and all(r["result"] is None for r in isends), isends
    ts = [r for r in by(1, "MPI_Irecv", "exit") if r["dtype"] == "i16"]  # completed by Testsome
    assert len(ts) == 1 and ts[0]["root"] == 0 and stats_of(ts[0])["max"] == 20, ts


def check_py():
    exits_match_enters()
    assert {r["rank"] for r in coll} == {0, 1, 2, 3}
    world = [r for r in coll if r["comm"] == coll[0]["comm"]]
    assert all(r["comm_rank"] == r["rank"] for r in world), "rank != MPI rank"
    for rank in range(4):
        ar = by(rank, "MPI_Allreduce", "exit")
        assert len(ar) >= 4, ar
        for it, r in enumerate(ar[:4]):  # comm.Allreduce of float32 arrays
            assert (r["count"], r["dtype"], r["op"]) == (8, "f32", "sum"), r
            s = stats_of(r)  # sum over ranks of arange(8) + rank + it
            assert (s["min"], s["max"]) == (6 + 4 * it, 34 + 4 * it), (r, s)
        bc = by(rank, "MPI_Bcast", "exit")
        assert bc and (bc[0]["count"], bc[0]["dtype"], bc[0]["root"]) == (4, "f64", 0), bc
        # comm.Irecv / comm.Isend completed by MPI.Request.Waitall
        left, right = (rank + 3) % 4, (rank + 1) % 4
        ir, isend = by(rank, "MPI_Irecv", "exit"), by(rank, "MPI_Isend", "exit")
        assert len(ir) == 1 and (ir[0]["root"], ir[0]["count"], ir[0]["dtype"]) == (left, 3, "i32"), ir
        assert (stats_of(ir[0])["min"], stats_of(ir[0])["max"]) == (left, left), ir
        assert len(isend) == 1 and isend[0]["root"] == right, isend
        assert isend[0]["comm"] == ir[0]["comm"] != bc[0]["comm"], "p2p in the collective sequence"
        # the pickle-based comm.reduce and comm.allreduce left records of their own after that
        last = max(r["ts"] for r in ir + isend)
        after = [r for r in coll if r["rank"] == rank and r["ts"] > last]
        assert after, ("comm.reduce/allreduce not seen on rank", rank)


check_c() if prog == "c" else check_py()
print("MPI records ok:", len(coll), "collective records")

#!/usr/bin/env python3
"""compare.py: compare tftrace traces of tftrain runs at the runtime level.

Stand-in for tfdiff (which does not exist yet) in the bug-zoo tests and in
examples/bugzoo/run.sh. Stdlib only.

A TRACE argument is a trace directory (dumped with `tfdump --events --json`;
the tfdump binary comes from --tfdump or $TFDUMP or PATH) or a file with
tfdump's JSON lines.

Tensor records of GOLDEN and BAD are aligned per rank by (step, name, k):
the k-th record of that name in that step. (Op sequence numbers are global
and shift after a resume, so they only order records, they do not align
them.) The first divergence of a rank is the first BAD record, in program
order (step, seq), whose golden counterpart is missing or differs in dtype,
shape or fingerprint; golden records that BAD lacks (BAD stopped early)
count too, at their place in golden's order.

Subcommands (exit 0 = assertion holds, 1 = it does not, 2 = usage/input):
  diff GOLDEN BAD                  print the first divergence of every rank
  expect-diff GOLDEN BAD --step S --name GLOB[,GLOB..] [--rank R] [--kind K]
                                   the first divergence of rank R (default:
                                   the first rank that diverges) is at step S,
                                   a name matching a GLOB; K: value|shape|missing
  same GOLDEN BAD [--rank R]       no divergence (in --steps, on every rank)
  nonfinite GOLDEN BAD --step S --name NAME
                                   BAD's first tensor with nan>0 or pinf>0 is
                                   (S, NAME); GOLDEN has none
  rank-values TRACE --step S --name NAME (--differ|--equal)
                                   fingerprints of NAME at step S across ranks
  stats-close GOLDEN BAD --rtol X  every aligned tensor's mean and std agree
                                   within X relative (abs floor --atol)
  leak GOLDEN BAD --step S --site SITE --bytes N
                                   BAD has exactly one more alloc record per
                                   step from S on at SITE of N bytes, none
                                   before, none freed; GOLDEN has none at SITE
  coll-hang TRACE --step S --hung R --skipped R2 [--comm NAME]
                                   at step S rank R has a collective enter on
                                   the communicator without a matching exit,
                                   and rank R2 has no enter for that coll_seq
  losses A B --rtol X              compare "step N | loss X" lines of two logs
Common options: --steps A:B (only these steps), --tfdump PATH, -v.
"""

import argparse
import fnmatch
import json
import math
import os
import re
import shutil
import subprocess
import sys


class Fail(Exception):
    pass


# ---- loading -----------------------------------------------------------------

def tfdump_path(args):
    p = args.tfdump or os.environ.get("TFDUMP") or shutil.which("tfdump")
    if not p:
        raise SystemExit("compare.py: tfdump not found: pass --tfdump or set TFDUMP")
    return p


def load(args, path, kinds="tensor"):
    """Records of one trace (directory or JSON-lines file), in (rank, step, seq) order."""
    if os.path.isdir(path):
        cmd = [tfdump_path(args), "--events", "--json", "--kind", kinds, path]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise SystemExit("compare.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
        lines = p.stdout.splitlines()
    else:
        with open(path) as f:
            lines = f.read().splitlines()
    wanted = set(kinds.split(","))
    recs = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as e:
            raise SystemExit("compare.py: %s:%d: not JSON: %s" % (path, i + 1, e))
        if r.get("kind") in wanted:
            recs.append(r)
    lo, hi = args.step_range
    recs = [r for r in recs if r.get("step") is not None and lo <= r["step"] <= hi]
    recs.sort(key=lambda r: (r["rank"], r["step"], r["seq"] if r.get("seq") is not None else -1))
    return recs


def by_rank(recs):
    out = {}
    for r in recs:
        out.setdefault(r["rank"], []).append(r)
    return out


def keyed(recs):
    """(step, name, k) -> record, and the keys in program order."""
    seen, table, order = {}, {}, []
    for r in recs:
        base = (r["step"], r["name"])
        k = seen.get(base, 0)
        seen[base] = k + 1
        key = base + (k,)
        table[key] = r
        order.append(key)
    return table, order


def fp(r):
    return (r.get("stats") or {}).get("fingerprint")


def describe(r):
    if r is None:
        return "-"
    st = r.get("stats") or {}
    return "%s%s fp=%s mean=%s std=%s nan=%s" % (r.get("dtype"), r.get("shape"), st.get("fingerprint"),
                                                 st.get("mean"), st.get("std"), st.get("nan"))


# ---- the first divergence ------------------------------------------------------

def first_divergence(grecs, brecs):
    """First divergence of one rank: dict(step, name, k, kind, golden, bad) or None.

    Candidates are ordered by (step, position within the step): BAD's position
    for records BAD has, golden's for golden records BAD lacks (it stopped
    early). The first candidate wins."""
    gt, gorder = keyed(grecs)
    bt, border = keyed(brecs)
    best = None

    def offer(pos, kind, key, g, b):
        nonlocal best
        if best is None or pos < best[0]:
            best = (pos, kind, key, g, b)

    for order, table, other, mine_is_bad in ((border, bt, gt, True), (gorder, gt, bt, False)):
        ordinal, prev_step = 0, None
        for key in order:
            ordinal = ordinal + 1 if key[0] == prev_step else 0
            prev_step = key[0]
            pos = (key[0], ordinal)
            if best is not None and pos >= best[0]:
                break
            mine, theirs = table[key], other.get(key)
            if theirs is None:
                if mine_is_bad:
                    offer(pos, "extra", key, None, mine)
                else:
                    offer(pos, "missing", key, mine, None)
                break
            if not mine_is_bad:
                continue  # common records were checked from BAD's side
            g, b = theirs, mine
            if g.get("dtype") != b.get("dtype") or g.get("shape") != b.get("shape"):
                offer(pos, "shape", key, g, b)
                break
            if fp(g) != fp(b):
                offer(pos, "value", key, g, b)
                break
    if best is None:
        return None
    _, kind, key, g, b = best
    return {"step": key[0], "name": key[1], "k": key[2], "kind": kind, "golden": g, "bad": b}


def divergences(args, gpath, bpath):
    g = by_rank(load(args, gpath))
    b = by_rank(load(args, bpath))
    out = {}
    for rank in sorted(set(g) | set(b)):
        out[rank] = first_divergence(g.get(rank, []), b.get(rank, []))
    return out


def show(rank, d):
    if d is None:
        return "rank %d: no divergence" % rank
    return ("rank %d: first divergence step %d at %s (%s)\n  golden: %s\n  bad:    %s"
            % (rank, d["step"], d["name"], d["kind"], describe(d["golden"]), describe(d["bad"])))


# ---- subcommands ----------------------------------------------------------------

def cmd_diff(args):
    divs = divergences(args, args.golden, args.bad)
    if not divs:
        print("no tensor records in either trace")
    for rank, d in divs.items():
        print(show(rank, d))
    return 0


def cmd_expect_diff(args):
    divs = divergences(args, args.golden, args.bad)
    if args.rank is not None:
        rank = args.rank
        if rank not in divs:
            raise Fail("rank %d has no tensor records" % rank)
    else:
        diverging = [r for r, d in divs.items() if d is not None]
        if not diverging:
            raise Fail("no divergence on any rank")
        rank = min(diverging, key=lambda r: (divs[r]["step"], r))
    d = divs[rank]
    print(show(rank, d))
    if d is None:
        raise Fail("rank %d: expected a divergence at step %d" % (rank, args.step))
    globs = args.name.split(",")
    if d["step"] != args.step or not any(fnmatch.fnmatchcase(d["name"], gl) for gl in globs):
        raise Fail("rank %d: expected the first divergence at step %d, name %s; got step %d, %s"
                   % (rank, args.step, args.name, d["step"], d["name"]))
    if args.kind and d["kind"] != args.kind:
        raise Fail("rank %d: expected divergence kind %s, got %s" % (rank, args.kind, d["kind"]))
    for other in args.same_rank or []:
        if divs.get(other) is not None:
            raise Fail("expected rank %d identical; %s" % (other, show(other, divs[other])))
        print("rank %d: identical, as expected" % other)
    return 0


def cmd_same(args):
    divs = divergences(args, args.golden, args.bad)
    if not divs:
        raise Fail("no tensor records")
    bad = {r: d for r, d in divs.items() if d is not None and (args.rank is None or r == args.rank)}
    for r, d in divs.items():
        if args.rank is None or r == args.rank:
            print(show(r, d))
    if bad:
        raise Fail("traces differ")
    n = len(load(args, args.golden))
    print("identical: %d tensor records" % n)
    return 0


def nonfinite(r):
    st = r.get("stats") or {}
    return (st.get("nan") or 0) > 0 or (st.get("pinf") or 0) > 0


def cmd_nonfinite(args):
    g = load(args, args.golden)
    b = load(args, args.bad)
    gbad = [r for r in g if nonfinite(r)]
    if gbad:
        raise Fail("golden has non-finite tensors, first: rank %d step %d %s %s"
                   % (gbad[0]["rank"], gbad[0]["step"], gbad[0]["name"], describe(gbad[0])))
    print("golden: no tensor with nan or +inf (%d tensors)" % len(g))
    bbad = [r for r in b if nonfinite(r)]
    if not bbad:
        raise Fail("bad has no tensor with nan or +inf")
    # program order across ranks: by (step, seq), then rank
    first = min(bbad, key=lambda r: (r["step"], r["seq"], r["rank"]))
    print("bad: first non-finite tensor: rank %d step %d %s %s" % (first["rank"], first["step"], first["name"],
                                                                  describe(first)))
    if first["step"] != args.step or first["name"] != args.name:
        raise Fail("expected the first non-finite tensor at step %d %s" % (args.step, args.name))
    return 0


def cmd_rank_values(args):
    recs = [r for r in load(args, args.trace) if r["step"] == args.step and r["name"] == args.name]
    fps = {}
    for r in recs:
        fps.setdefault(r["rank"], fp(r))  # the first record of that name in the step
    print("%s at step %d: %s" % (args.name, args.step, ", ".join("rank %d fp=%s" % kv for kv in sorted(fps.items()))))
    if len(fps) < 2:
        raise Fail("need the tensor on at least 2 ranks, found %d" % len(fps))
    distinct = len(set(fps.values()))
    if args.differ and distinct == 1:
        raise Fail("fingerprints are equal on every rank")
    if args.equal and distinct != 1:
        raise Fail("fingerprints differ across ranks")
    return 0


def rel_close(a, b, rtol, atol):
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def cmd_stats_close(args):
    g = by_rank(load(args, args.golden))
    b = by_rank(load(args, args.bad))
    if set(g) != set(b) or not g:
        raise Fail("ranks differ: %s vs %s" % (sorted(g), sorted(b)))
    n = ndiff = 0
    first = None
    worst = (0.0, None)
    for rank in g:
        gt, gorder = keyed(g[rank])
        bt, border = keyed(b[rank])
        if gorder != border:
            raise Fail("rank %d: the tensor sequences differ" % rank)
        for key in gorder:
            x, y = gt[key], bt[key]
            n += 1
            if fp(x) != fp(y):
                ndiff += 1
                if first is None:
                    first = (rank, key)
            for f in ("mean", "std"):
                a, c = x["stats"].get(f), y["stats"].get(f)
                if not rel_close(a, c, args.rtol, args.atol):
                    raise Fail("rank %d step %d %s: %s %r vs %r beyond rtol %g"
                               % (rank, key[0], key[1], f, a, c, args.rtol))
                if a is not None and c is not None and max(abs(a), abs(c)) > args.atol:
                    err = abs(a - c) / max(abs(a), abs(c))
                    if err > worst[0]:
                        worst = (err, (rank, key[0], key[1], f))
    print("%d tensors, %d with different fingerprints; worst relative mean/std difference %.3g at %s"
          % (n, ndiff, worst[0], worst[1]))
    if first:
        print("first fingerprint difference: rank %d step %d %s" % (first[0], first[1][0], first[1][1]))
    if args.expect_first:
        if first is None:
            raise Fail("expected fingerprints to differ, first at %s" % args.expect_first)
        if first[1][1] != args.expect_first:
            raise Fail("expected the first fingerprint difference at %s" % args.expect_first)
    return 0


def cmd_leak(args):
    def allocs(path):
        recs = load(args, path, kinds="alloc,free")
        return [r for r in recs if r.get("kind") == "alloc" and r.get("name") == args.site], recs
    g, _ = allocs(args.golden)
    b, ball = allocs(args.bad)
    if g:
        raise Fail("golden has %d alloc records at %s" % (len(g), args.site))
    per_step = {}
    for r in b:
        per_step.setdefault((r["rank"], r["step"]), []).append(r)
    steps = sorted({r["step"] for r in load(args, args.golden)})
    ranks = sorted({r["rank"] for r in load(args, args.bad)})
    if not steps or not ranks:
        raise Fail("no steps/ranks in the traces")
    for rank in ranks:
        for s in steps:
            got = per_step.get((rank, s), [])
            want = 1 if s >= args.step else 0
            if len(got) != want:
                raise Fail("rank %d step %d: %d alloc records at %s, expected %d" % (rank, s, len(got), args.site, want))
            for r in got:
                if r.get("bytes") != args.bytes:
                    raise Fail("rank %d step %d: alloc of %r bytes, expected %d" % (rank, s, r.get("bytes"), args.bytes))
    addrs = {(r["rank"], r.get("addr")) for r in b}
    freed = [r for r in ball if r.get("kind") == "free" and (r["rank"], r.get("addr")) in addrs]
    if freed:
        raise Fail("%d of the leaked buffers were freed" % len(freed))
    print("leak: ranks %s, one %d-byte alloc at %s per step from step %d (steps %d..%d), none freed; golden none"
          % (ranks, args.bytes, args.site, args.step, steps[0], steps[-1]))
    return 0


def cmd_coll_hang(args):
    recs = load(args, args.trace, kinds="collective")
    if args.verbose:
        for r in recs:
            print(json.dumps(r))
    mine = [r for r in recs if r["step"] == args.step and (args.comm is None or r.get("comm") == args.comm)]
    def phase(r):
        return r.get("phase") or r.get("event")
    hung = [r for r in mine if r["rank"] == args.hung]
    enters = {r.get("coll_seq"): r for r in hung if phase(r) == "enter"}
    exits = {r.get("coll_seq") for r in hung if phase(r) == "exit"}
    open_ = [cs for cs in enters if cs not in exits]
    if not open_:
        raise Fail("rank %d: every collective at step %d has an exit" % (args.hung, args.step))
    if len(open_) != 1:
        raise Fail("rank %d: %d unfinished collectives at step %d: %s" % (args.hung, len(open_), args.step, open_))
    cs = open_[0]
    e = enters[cs]
    other = [r for r in mine if r["rank"] == args.skipped and r.get("coll_seq") == cs]
    if other:
        raise Fail("rank %d has records for coll_seq %s: %s" % (args.skipped, cs, other))
    if args.count is not None and e.get("count") != args.count:
        raise Fail("the unfinished collective has count %r, expected %d" % (e.get("count"), args.count))
    print("step %d: rank %d entered %s (comm %s, coll_seq %s, count %s) and never left; rank %d never entered it"
          % (args.step, args.hung, e.get("name"), e.get("comm"), cs, e.get("count"), args.skipped))
    return 0


LOSS_RE = re.compile(r"^step\s+(\d+)\s*\|\s*loss\s+([-+0-9.eEnaif]+)")


def cmd_losses(args):
    def read(p):
        out = {}
        with open(p) as f:
            for line in f:
                m = LOSS_RE.match(line)
                if m:
                    out[int(m.group(1))] = float(m.group(2))
        return out
    a, b = read(args.golden), read(args.bad)
    common = sorted(set(a) & set(b))
    if len(common) < args.min_steps:
        raise Fail("only %d common steps with a loss (need %d): %s vs %s" % (len(common), args.min_steps, a, b))
    worst = 0.0
    for s in common:
        err = abs(a[s] - b[s]) / max(abs(a[s]), abs(b[s]), 1e-30)
        worst = max(worst, err)
        print("step %d: loss %.6f vs %.6f (rel %.2e)" % (s, a[s], b[s], err))
        if err > args.rtol:
            raise Fail("step %d: losses differ by %.3g relative, more than %g" % (s, err, args.rtol))
    print("losses agree within %g relative over %d steps (worst %.2e)" % (args.rtol, len(common), worst))
    return 0


# ---- command line ------------------------------------------------------------------

def parse_steps(s):
    if not s:
        return (-(1 << 62), 1 << 62)
    a, _, b = s.partition(":")
    if ":" not in s:
        return (int(a), int(a))
    return (int(a) if a else -(1 << 62), int(b) if b else 1 << 62)


def main(argv):
    p = argparse.ArgumentParser(description="compare tftrain traces (a stand-in for tfdiff)")
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp, two=True):
        if two:
            sp.add_argument("golden")
            sp.add_argument("bad")
        sp.add_argument("--steps", default="")
        sp.add_argument("--tfdump")
        sp.add_argument("-v", "--verbose", action="store_true")
        return sp

    common(sub.add_parser("diff")).set_defaults(fn=cmd_diff)
    sp = common(sub.add_parser("expect-diff"))
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--name", required=True)
    sp.add_argument("--rank", type=int)
    sp.add_argument("--kind", choices=["value", "shape", "missing", "extra"])
    sp.add_argument("--same-rank", type=int, action="append", help="this rank must not diverge")
    sp.set_defaults(fn=cmd_expect_diff)
    sp = common(sub.add_parser("same"))
    sp.add_argument("--rank", type=int)
    sp.set_defaults(fn=cmd_same)
    sp = common(sub.add_parser("nonfinite"))
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--name", required=True)
    sp.set_defaults(fn=cmd_nonfinite)
    sp = common(sub.add_parser("rank-values"), two=False)
    sp.add_argument("trace")
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--name", required=True)
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--differ", action="store_true")
    g.add_argument("--equal", action="store_true")
    sp.set_defaults(fn=cmd_rank_values)
    sp = common(sub.add_parser("stats-close"))
    sp.add_argument("--rtol", type=float, required=True)
    sp.add_argument("--atol", type=float, default=1e-12)
    sp.add_argument("--expect-first", help="the first tensor whose fingerprint differs")
    sp.set_defaults(fn=cmd_stats_close)
    sp = common(sub.add_parser("leak"))
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--site", required=True)
    sp.add_argument("--bytes", type=int, required=True)
    sp.set_defaults(fn=cmd_leak)
    sp = common(sub.add_parser("coll-hang"), two=False)
    sp.add_argument("trace")
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--hung", type=int, required=True)
    sp.add_argument("--skipped", type=int, required=True)
    sp.add_argument("--comm")
    sp.add_argument("--count", type=int)
    sp.set_defaults(fn=cmd_coll_hang)
    sp = common(sub.add_parser("losses"))
    sp.add_argument("--rtol", type=float, required=True)
    sp.add_argument("--min-steps", type=int, default=2)
    sp.set_defaults(fn=cmd_losses)

    args = p.parse_args(argv)
    args.step_range = parse_steps(args.steps)
    try:
        return args.fn(args)
    except Fail as e:
        print("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

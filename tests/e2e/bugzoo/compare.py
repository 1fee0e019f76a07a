#!/usr/bin/env python3
"""compare.py: compare tftrace traces of tftrain runs at the runtime level.

A stand-in for tfdiff (which does not exist yet), used by the bug-zoo tests
(tests/e2e/bugzoo/run_bug.sh) and by examples/bugzoo/run.sh. Stdlib only.

A TRACE argument is either a trace directory (read with `tfdump --events
--json`; tfdump comes from --tfdump, $TFDUMP or PATH) or a file holding the
JSON lines that command prints.

Alignment. Tensor records of GOLDEN and BAD are aligned per rank by
(step, name, k): the k-th tensor of that name in that step. Op sequence
numbers are global and shift after a resume, so they only give the program
order, they do not align. The first divergence of a rank is the first
record in program order (step, then position in the step) that differs in
dtype or shape ("shape"), in fingerprint ("value"), that golden has and BAD
lacks ("missing": BAD stopped early) or that BAD has and golden lacks
("extra"). The result tensors of collectives (records named MPI_Allreduce,
MPI_Bcast: the buffer after the collective, recorded by tft_coll_exit) are
left out unless --collectives is given: the bug zoo names the tensors of
runtime/README.md, "What is recorded" (grad.*, ...), which follow them.

Subcommands (exit 0: the assertion holds; 1: it does not; 2: usage/input):
  diff GOLDEN BAD            print the first divergence of every rank
  expect-diff GOLDEN BAD --step S --name GLOB[,GLOB...] [--rank R]
                             [--kind value|shape|missing|extra] [--same-rank R]
                             the first divergence of rank R (default: the
                             earliest over ranks) is at step S at a name
                             matching a GLOB; --same-rank: rank R has none
  same GOLDEN BAD [--rank R] no divergence at all
  nonfinite GOLDEN BAD --step S --name NAME
                             BAD's first tensor (program order) with nan>0 or
                             pinf>0 is (S, NAME); GOLDEN has none
  no-clip GOLDEN BAD --clip X
                             the first divergence is at the first step where
                             golden's grad_norm > X, at grad.*/adam.*/param.*;
                             when that is step 0, BAD's adam.m.* there is
                             golden's times grad_norm/X (the unclipped step)
  rank-values TRACE --name NAME [--step S] (--differ | --equal)
                             fingerprints of NAME across ranks (at step S, or
                             at every step when --step is left out)
  stats-close GOLDEN BAD --rtol X [--rtol-later Y] [--expect-first NAME]
                             same tensors; mean and std of each agree within
                             X of the tensor's scale, max(|mean|, std) (Y in
                             the steps after the first differing one); with
                             --expect-first, some fingerprint differs and
                             the first such tensor is NAME
  leak GOLDEN BAD --step S --site SITE --bytes N
                             on every rank, BAD has one more alloc at SITE of
                             N bytes than golden in every step from S on and
                             none before; none of them is freed
  coll-hang TRACE --step S --hung R --skipped R2
                             at step S rank R entered an all-reduce on the
                             gradient communicator (the one of the step-0
                             MPI_Bcast) and never left it; rank R2 has no
                             record of that coll_seq
  dp-match ONE MANY --rtol X per step, MANY's mean of the ranks' `loss` and its
                             grad_norm agree with ONE's within X relative
  losses LOG1 LOG2 --rtol X  "step N | loss X" lines of two stdout logs agree
Common options: --steps A:B (only these steps), --names GLOB[,GLOB...] (only
tensors with these names), --collectives, --tfdump PATH.
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


# ---- loading -----------------------------------------------------------------------

_cache = {}


def tfdump_path(args):
    p = args.tfdump or os.environ.get("TFDUMP") or shutil.which("tfdump")
    if not p:
        raise SystemExit("compare.py: tfdump not found: pass --tfdump or set TFDUMP")
    return p


def load_all(args, path):
    """Every record of a trace, as tfdump --events --json prints them."""
    if path in _cache:
        return _cache[path]
    if os.path.isdir(path):
        cmd = [tfdump_path(args), "--events", "--json", path]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if p.returncode != 0:
            raise SystemExit("compare.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
        lines = p.stdout.splitlines()
    else:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise SystemExit("compare.py: %s: %s" % (path, e))
    recs = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except ValueError as e:
            raise SystemExit("compare.py: %s:%d: not JSON: %s" % (path, i + 1, e))
    _cache[path] = recs
    return recs


def in_steps(args, r):
    lo, hi = args.step_range
    return r.get("step") is not None and lo <= r["step"] <= hi


def order_key(r):
    return (r["rank"], r["step"], r["seq"] if r.get("seq") is not None else -1)


def tensors(args, path):
    """Tensor records in (rank, step, seq) order, filtered by --steps/--names;
    collective results left out unless --collectives."""
    recs = load_all(args, path)
    coll_ops = {(r["rank"], r.get("seq")) for r in recs
                if r.get("kind") == "op" and r.get("op_kind") == "collective"}
    out = []
    for r in recs:
        if r.get("kind") != "tensor" or not in_steps(args, r):
            continue
        if not args.collectives and (r["rank"], r.get("seq")) in coll_ops:
            continue
        if args.names and not any(fnmatch.fnmatchcase(r.get("name") or "", g) for g in args.names):
            continue
        out.append(r)
    out.sort(key=order_key)
    return out


def records(args, path, kind):
    return [r for r in load_all(args, path) if r.get("kind") == kind]


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


def stats(r):
    return r.get("stats") or {}


def fp(r):
    return stats(r).get("fingerprint")


def describe(r):
    if r is None:
        return "-"
    st = stats(r)
    return "%s%s fp=%s mean=%.9g std=%.9g nan=%s pinf=%s" % (
        r.get("dtype"), r.get("shape"), st.get("fingerprint"), st.get("mean", float("nan")),
        st.get("std", float("nan")), st.get("nan"), st.get("pinf"))


# ---- the first divergence --------------------------------------------------------------

def first_divergence(grecs, brecs):
    """First divergence of one rank: dict(step, name, k, kind, golden, bad) or None.

    Candidates are ordered by (step, position within the step): BAD's position
    for records BAD has, golden's for golden records BAD lacks."""
    gt, gorder = keyed(grecs)
    bt, border = keyed(brecs)
    best = None
    for order, table, other, is_bad in ((border, bt, gt, True), (gorder, gt, bt, False)):
        ordinal, prev = 0, None
        for key in order:
            ordinal = ordinal + 1 if key[0] == prev else 0
            prev = key[0]
            pos = (key[0], ordinal)
            if best is not None and pos >= best[0]:
                break
            mine, theirs = table[key], other.get(key)
            found = None
            if theirs is None:
                found = ("extra", None, mine) if is_bad else ("missing", mine, None)
            elif is_bad:
                g, b = theirs, mine
                if g.get("dtype") != b.get("dtype") or g.get("shape") != b.get("shape"):
                    found = ("shape", g, b)
                elif fp(g) != fp(b):
                    found = ("value", g, b)
            if found:
                best = (pos, found[0], key, found[1], found[2])
                break
    if best is None:
        return None
    _, kind, key, g, b = best
    return {"step": key[0], "name": key[1], "k": key[2], "kind": kind, "golden": g, "bad": b}


def divergences(args, gpath, bpath):
    g = by_rank(tensors(args, gpath))
    b = by_rank(tensors(args, bpath))
    if not g and not b:
        raise Fail("no tensor records in either trace")
    return {rank: first_divergence(g.get(rank, []), b.get(rank, [])) for rank in sorted(set(g) | set(b))}


def show(rank, d):
    if d is None:
        return "rank %d: no divergence" % rank
    return ("rank %d: first divergence step %d at %s (%s)\n  golden: %s\n  bad:    %s"
            % (rank, d["step"], d["name"], d["kind"], describe(d["golden"]), describe(d["bad"])))


def earliest(divs):
    diverging = [r for r, d in divs.items() if d is not None]
    if not diverging:
        return None
    return min(diverging, key=lambda r: (divs[r]["step"], r))


# ---- subcommands ------------------------------------------------------------------------

def cmd_diff(args):
    for rank, d in divergences(args, args.golden, args.bad).items():
        print(show(rank, d))
    return 0


def cmd_expect_diff(args):
    divs = divergences(args, args.golden, args.bad)
    rank = args.rank if args.rank is not None else earliest(divs)
    if rank is None:
        for r, d in divs.items():
            print(show(r, d))
        raise Fail("no divergence on any rank; expected one at step %d, %s" % (args.step, args.name))
    if rank not in divs:
        raise Fail("rank %d has no tensor records" % rank)
    d = divs[rank]
    print(show(rank, d))
    if d is None:
        raise Fail("rank %d: no divergence; expected one at step %d, %s" % (rank, args.step, args.name))
    globs = args.name.split(",")
    if d["step"] != args.step or not any(fnmatch.fnmatchcase(d["name"], g) for g in globs):
        raise Fail("rank %d: expected the first divergence at step %d, %s; got step %d, %s"
                   % (rank, args.step, args.name, d["step"], d["name"]))
    if args.kind and d["kind"] != args.kind:
        raise Fail("rank %d: expected a divergence of kind %s, got %s" % (rank, args.kind, d["kind"]))
    for other in args.same_rank or []:
        if other not in divs:
            raise Fail("rank %d has no tensor records" % other)
        print(show(other, divs[other]))
        if divs[other] is not None:
            raise Fail("rank %d: expected no divergence" % other)
    return 0


def cmd_same(args):
    divs = divergences(args, args.golden, args.bad)
    if args.rank is not None:
        if args.rank not in divs:
            raise Fail("rank %d has no tensor records" % args.rank)
        divs = {args.rank: divs[args.rank]}
    for r, d in divs.items():
        print(show(r, d))
    if any(d is not None for d in divs.values()):
        raise Fail("the traces differ")
    n = sum(1 for r in tensors(args, args.golden) if r["rank"] in divs)
    print("identical: %d tensor records" % n)
    return 0


def nonfinite(r):
    st = stats(r)
    return (st.get("nan") or 0) > 0 or (st.get("pinf") or 0) > 0


def cmd_nonfinite(args):
    if not tensors(args, args.golden) or not tensors(args, args.bad):
        raise Fail("no tensor records in golden or bad")
    g = [r for r in tensors(args, args.golden) if nonfinite(r)]
    if g:
        raise Fail("golden has non-finite tensors, the first: rank %d step %d %s %s"
                   % (g[0]["rank"], g[0]["step"], g[0]["name"], describe(g[0])))
    print("golden: no tensor with nan or +inf")
    b = [r for r in tensors(args, args.bad) if nonfinite(r)]
    if not b:
        raise Fail("bad has no tensor with nan or +inf")
    first = min(b, key=lambda r: (r["step"], r["seq"], r["rank"]))
    print("bad: the first tensor with nan or +inf: rank %d step %d %s %s"
          % (first["rank"], first["step"], first["name"], describe(first)))
    if first["step"] != args.step or first["name"] != args.name:
        raise Fail("expected the first non-finite tensor at step %d, %s" % (args.step, args.name))
    return 0


def scalar_by_step(args, path, name, rank=None):
    out = {}
    for r in tensors(args, path):
        if r["name"] == name and (rank is None or r["rank"] == rank):
            out.setdefault(r["step"], stats(r).get("mean"))
    return out


def cmd_no_clip(args):
    norms = scalar_by_step(args, args.golden, "grad_norm", rank=0)
    over = sorted(s for s, v in norms.items() if v is not None and v > args.clip)
    if not over:
        raise Fail("golden's grad_norm never exceeds %g (%s): use a larger --lr" % (args.clip, norms))
    s0 = over[0]
    print("golden's grad_norm first exceeds the clip %g at step %d (%.6g)" % (args.clip, s0, norms[s0]))
    args.rank, args.kind, args.same_rank = 0, None, None
    args.step, args.name = s0, "grad.*,adam.*,param.*"
    cmd_expect_diff(args)
    if s0 == 0:
        # m = (1 - beta1) g at the first step: BAD's moments are golden's
        # times norm/clip, the factor the missing clip would have removed
        g = {r["name"]: r for r in tensors(args, args.golden) if r["step"] == 0 and r["name"].startswith("adam.m.")}
        b = {r["name"]: r for r in tensors(args, args.bad) if r["step"] == 0 and r["name"].startswith("adam.m.")}
        want = norms[0] / args.clip
        for name in sorted(g):
            gs, bs = stats(g[name]).get("std"), stats(b[name]).get("std")
            if not gs:
                continue
            ratio = bs / gs
            if abs(ratio - want) > 1e-3 * want:
                raise Fail("step 0 %s: std ratio bad/golden %.6g, expected grad_norm/clip = %.6g" % (name, ratio, want))
        print("step 0: every adam.m.* of BAD is golden's times grad_norm/clip = %.6g (the clip was skipped)" % want)
    bl = scalar_by_step(args, args.bad, "loss", rank=0)
    gl = scalar_by_step(args, args.golden, "loss", rank=0)
    last = max(bl) if bl else None
    if last is not None:
        print("loss at the last step %d: golden %.6g, bad %.6g; BAD non-finite at steps %s"
              % (last, gl.get(last, float("nan")), bl[last],
                 [s for s, v in sorted(bl.items()) if v is None or not math.isfinite(v)]))
    return 0


def cmd_rank_values(args):
    recs = [r for r in tensors(args, args.trace) if r["name"] == args.name
            and (args.step is None or r["step"] == args.step)]
    steps = {}
    for r in recs:
        steps.setdefault(r["step"], {}).setdefault(r["rank"], fp(r))
    if not steps:
        raise Fail("no tensor %s%s" % (args.name, "" if args.step is None else " at step %d" % args.step))
    for s, fps in sorted(steps.items()):
        print("%s step %d: %s" % (args.name, s, ", ".join("rank %d %s" % kv for kv in sorted(fps.items()))))
        if len(fps) < 2:
            raise Fail("step %d: %s recorded on %d rank(s); need 2 or more" % (s, args.name, len(fps)))
        distinct = len(set(fps.values()))
        if args.differ and distinct == 1:
            raise Fail("step %d: %s has the same fingerprint on every rank" % (s, args.name))
        if args.equal and distinct != 1:
            raise Fail("step %d: %s differs across ranks" % (s, args.name))
    return 0


def cmd_stats_close(args):
    g = by_rank(tensors(args, args.golden))
    b = by_rank(tensors(args, args.bad))
    if set(g) != set(b) or not g:
        raise Fail("the ranks differ: %s vs %s" % (sorted(g), sorted(b)))
    n = ndiff = 0
    first = None
    worst = (0.0, None)
    # the step where the first fingerprint differs (on any rank): --rtol holds
    # there and before, --rtol-later after it (differences grow under AdamW)
    first_step = None
    for rank in sorted(g):
        gt, gorder = keyed(g[rank])
        bt, _ = keyed(b[rank])
        for key in gorder:
            if key in bt and fp(gt[key]) != fp(bt[key]):
                first_step = key[0] if first_step is None else min(first_step, key[0])
                break
    for rank in sorted(g):
        gt, gorder = keyed(g[rank])
        bt, border = keyed(b[rank])
        if gorder != border:
            raise Fail("rank %d: the sequences of tensors differ" % rank)
        for key in gorder:
            x, y = stats(gt[key]), stats(bt[key])
            n += 1
            if fp(gt[key]) != fp(bt[key]):
                ndiff += 1
                if first is None:
                    first = (rank, key)
            # the scale of a tensor: its spread or its mean, whichever is larger
            # (a zero-mean tensor's mean is noise at the scale of its std)
            scale = max(abs(x.get("mean", 0)), abs(y.get("mean", 0)), x.get("std", 0), y.get("std", 0))
            for f in ("mean", "std"):
                a, c = x.get(f), y.get(f)
                if a is None or c is None:
                    if a is not c:
                        raise Fail("rank %d step %d %s: %s %r vs %r" % (rank, key[0], key[1], f, a, c))
                    continue
                if math.isnan(a) and math.isnan(c):
                    continue
                err = abs(a - c) / scale if scale > 0 else (0.0 if a == c else float("inf"))
                if err > worst[0]:
                    worst = (err, "rank %d step %d %s %s" % (rank, key[0], key[1], f))
                later = first_step is not None and key[0] > first_step and args.rtol_later is not None
                rtol = args.rtol_later if later else args.rtol
                if not err <= rtol:
                    raise Fail("rank %d step %d %s: %s %.9g vs %.9g: %.3g of the scale %.3g, more than %g"
                               % (rank, key[0], key[1], f, a, c, err, scale, rtol))
    print("%d tensors, %d with another fingerprint; the largest mean/std difference is %.3g of the "
          "tensor's scale (%s)" % (n, ndiff, worst[0], worst[1]))
    if first:
        print("the first fingerprint difference: rank %d step %d %s" % (first[0], first[1][0], first[1][1]))
    if args.expect_first:
        if first is None:
            raise Fail("expected some fingerprint to differ (the first at %s); all are equal" % args.expect_first)
        if first[1][1] != args.expect_first:
            raise Fail("expected the first fingerprint difference at %s" % args.expect_first)
    return 0


def cmd_leak(args):
    def site_allocs(path):
        return [r for r in records(args, path, "alloc") if r.get("site") == args.site and in_steps(args, r)]
    g, b = site_allocs(args.golden), site_allocs(args.bad)
    if g:
        raise Fail("golden has %d alloc records at %s" % (len(g), args.site))
    steps = sorted({r["step"] for r in records(args, args.golden, "step") if in_steps(args, r)})
    ranks = sorted({r["rank"] for r in records(args, args.bad, "step")})
    if not steps or not ranks:
        raise Fail("no step records")
    per = {}
    for r in b:
        per.setdefault((r["rank"], r["step"]), []).append(r)
    for rank in ranks:
        for s in steps:
            got = per.get((rank, s), [])
            want = 1 if s >= args.step else 0
            if len(got) != want:
                raise Fail("rank %d step %d: %d alloc records at %s, expected %d" % (rank, s, len(got), args.site, want))
            for r in got:
                if r.get("bytes") != args.bytes:
                    raise Fail("rank %d step %d: an alloc of %r bytes at %s, expected %d"
                               % (rank, s, r.get("bytes"), args.site, args.bytes))
    ptrs = {(r["rank"], r.get("ptr")) for r in b}
    freed = [r for r in records(args, args.bad, "free") if (r["rank"], r.get("ptr")) in ptrs]
    if freed:
        raise Fail("%d of the buffers allocated at %s were freed" % (len(freed), args.site))
    print("leak: on ranks %s one %d-byte alloc at %s in every step from %d (steps %d..%d), none freed; "
          "golden has none" % (ranks, args.bytes, args.site, args.step, steps[0], steps[-1]))
    return 0


def cmd_coll_hang(args):
    colls = [r for r in records(args, args.trace, "collective")]
    bcast = [r for r in colls if r["rank"] == args.hung and r.get("type") in ("bcast", "broadcast")]
    if not bcast:
        raise Fail("rank %d has no MPI_Bcast (the initial parameters), so the gradient communicator is unknown"
                   % args.hung)
    world = bcast[0].get("comm")
    mine = [r for r in colls if r["step"] == args.step and r.get("comm") == world]
    hung = [r for r in mine if r["rank"] == args.hung]
    enters = {r.get("coll_seq"): r for r in hung if r.get("phase") == "enter"}
    exits = {r.get("coll_seq") for r in hung if r.get("phase") == "exit"}
    open_ = sorted(cs for cs in enters if cs not in exits)
    if len(open_) != 1:
        raise Fail("rank %d: %d unfinished collectives on comm %s at step %d, expected 1: %s"
                   % (args.hung, len(open_), world, args.step, open_))
    cs = open_[0]
    e = enters[cs]
    if e.get("type") != "allreduce":
        raise Fail("the unfinished collective is a %s, not an allreduce" % e.get("type"))
    other = [r for r in colls if r["rank"] == args.skipped and r.get("comm") == world and r.get("coll_seq") == cs]
    if other:
        raise Fail("rank %d has records of coll_seq %s on comm %s: %s" % (args.skipped, cs, world, other))
    print("step %d: rank %d entered %s (comm %s, coll_seq %s, %s x %s) and never left it; rank %d never entered it"
          % (args.step, args.hung, e.get("name"), world, cs, e.get("count"), e.get("dtype"), args.skipped))
    return 0


def cmd_dp_match(args):
    one_loss = scalar_by_step(args, args.golden, "loss", rank=0)
    one_norm = scalar_by_step(args, args.golden, "grad_norm", rank=0)
    many = {}
    for r in tensors(args, args.bad):
        if r["name"] in ("loss", "grad_norm"):
            many.setdefault((r["name"], r["step"]), {}).setdefault(r["rank"], stats(r).get("mean"))
    steps = sorted(one_loss)
    if not steps:
        raise Fail("no loss tensors in %s" % args.golden)
    worst = 0.0
    for s in steps:
        losses = many.get(("loss", s), {})
        norms = many.get(("grad_norm", s), {})
        if len(losses) < 2:
            raise Fail("step %d: the %d-rank run has loss on ranks %s" % (s, len(losses), sorted(losses)))
        # each rank's loss is its sum over the global token count / world
        ml = sum(losses.values()) / len(losses)
        for what, a, c in (("loss", one_loss[s], ml), ("grad_norm", one_norm.get(s), norms.get(0))):
            if a is None or c is None:
                raise Fail("step %d: %s missing" % (s, what))
            err = abs(a - c) / max(abs(a), abs(c), 1e-30)
            worst = max(worst, err)
            print("step %d: %-9s 1 rank %.9g  %d ranks %.9g  rel %.2e" % (s, what, a, len(losses), c, err))
            if err > args.rtol:
                raise Fail("step %d: %s differs by %.3g relative, more than %g" % (s, what, err, args.rtol))
    print("1 rank and %d ranks agree within %g relative over %d steps (worst %.2e)"
          % (len(many.get(("loss", steps[0]), {})), args.rtol, len(steps), worst))
    return 0


LOSS_RE = re.compile(r"^step\s+(\d+)\s*\|\s*loss\s+(\S+)")


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
        raise Fail("only %d common steps with a loss line (need %d)" % (len(common), args.min_steps))
    worst = 0.0
    for s in common:
        err = abs(a[s] - b[s]) / max(abs(a[s]), abs(b[s]), 1e-30)
        worst = max(worst, err)
        print("step %d: loss %.4f vs %.4f (rel %.2e)" % (s, a[s], b[s], err))
        if not err <= args.rtol:
            raise Fail("step %d: the printed losses differ by %.3g relative, more than %g" % (s, err, args.rtol))
    print("printed losses agree within %g relative over %d steps (worst %.2e)" % (args.rtol, len(common), worst))
    return 0


# ---- command line ---------------------------------------------------------------------------

def parse_steps(s):
    big = 1 << 62
    if not s:
        return (-big, big)
    if ":" not in s:
        return (int(s), int(s))
    a, _, b = s.partition(":")
    return (int(a) if a else -big, int(b) if b else big)


def main(argv):
    p = argparse.ArgumentParser(prog="compare.py",
                                description="Compare tftrain traces (a stand-in for tfdiff).",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="cmd")

    def add(name, fn, operands=("golden", "bad")):
        sp = sub.add_parser(name)
        for o in operands:
            sp.add_argument(o)
        sp.add_argument("--steps", default="", help="only steps A:B (A:, :B, A)")
        sp.add_argument("--names", default="", help="only tensors with these names (GLOB,GLOB...)")
        sp.add_argument("--collectives", action="store_true", help="include collective result tensors")
        sp.add_argument("--tfdump", help="the tfdump program (default $TFDUMP, then PATH)")
        sp.set_defaults(fn=fn)
        return sp

    add("diff", cmd_diff)
    sp = add("expect-diff", cmd_expect_diff)
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--name", required=True, help="GLOB[,GLOB...]")
    sp.add_argument("--rank", type=int)
    sp.add_argument("--kind", choices=["value", "shape", "missing", "extra"])
    sp.add_argument("--same-rank", type=int, action="append", help="a rank that must not diverge")
    sp = add("same", cmd_same)
    sp.add_argument("--rank", type=int)
    sp = add("nonfinite", cmd_nonfinite)
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--name", required=True)
    sp = add("no-clip", cmd_no_clip)
    sp.add_argument("--clip", type=float, required=True)
    sp = add("rank-values", cmd_rank_values, operands=("trace",))
    sp.add_argument("--step", type=int)
    sp.add_argument("--name", required=True)
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--differ", action="store_true")
    g.add_argument("--equal", action="store_true")
    sp = add("stats-close", cmd_stats_close)
    sp.add_argument("--rtol", type=float, required=True)
    sp.add_argument("--rtol-later", type=float, help="the tolerance after the first differing step")
    sp.add_argument("--expect-first", help="the first tensor whose fingerprint differs")
    sp = add("leak", cmd_leak)
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--site", required=True)
    sp.add_argument("--bytes", type=int, required=True)
    sp = add("coll-hang", cmd_coll_hang, operands=("trace",))
    sp.add_argument("--step", type=int, required=True)
    sp.add_argument("--hung", type=int, required=True)
    sp.add_argument("--skipped", type=int, required=True)
    sp = add("dp-match", cmd_dp_match)
    sp.add_argument("--rtol", type=float, required=True)
    sp = add("losses", cmd_losses)
    sp.add_argument("--rtol", type=float, required=True)
    sp.add_argument("--min-steps", type=int, default=2)

    args = p.parse_args(argv)
    if not getattr(args, "fn", None):
        p.print_help(sys.stderr)
        return 2
    try:
        args.step_range = parse_steps(args.steps)
    except ValueError:
        p.error("--steps: '%s' is not A:B" % args.steps)
    args.names = [n for n in args.names.split(",") if n]
    try:
        return args.fn(args)
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

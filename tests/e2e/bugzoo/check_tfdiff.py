#!/usr/bin/env python3
"""Asserts what `tfdiff --json GOLDEN BAD` must say for a bug-zoo row.

    check_tfdiff.py REPORT.json [--verdict V] [--first-step N] [--first-tensor GLOBS]
        [--first-kind K] [--first-rank R] [--nonfinite-step N] [--nonfinite-tensor T]
        [--nonfinite-in-golden yes|no] [--leak-site S] [--leak-from N] [--leak-bytes B]
        [--leak-ranks 0,1] [--desync-kind K] [--desync-step N] [--desync-ranks 1]
        [--within-tolerance-min N] [--ended-early] [--origin-tensor GLOBS]

GLOBS: comma-separated fnmatch patterns. Prints the findings; exits 1 on a
failed assertion.
"""
import argparse
import fnmatch
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("report")
for k in ("verdict", "first-tensor", "first-kind", "nonfinite-tensor", "nonfinite-in-golden", "leak-site",
          "leak-ranks", "desync-kind", "desync-ranks", "origin-tensor"):
    ap.add_argument("--" + k)
for k in ("first-step", "first-rank", "nonfinite-step", "leak-from", "leak-bytes", "desync-step",
          "within-tolerance-min"):
    ap.add_argument("--" + k, type=int)
ap.add_argument("--ended-early", action="store_true")
a = ap.parse_args()
rep = json.load(open(a.report))
errs = []


def want(cond, msg):
    if not cond:
        errs.append(msg)


def globs(pats, name):
    return any(fnmatch.fnmatchcase(name or "", p) for p in pats.split(","))


fd = rep.get("first_divergence")
print("verdict:", rep.get("verdict"))
print("first_divergence:", fd and {k: fd[k] for k in ("rank", "step", "seq", "tensor", "kind")})
print("origin:", rep.get("origin") and rep["origin"]["tensor"], " first_nonfinite:", rep.get("first_nonfinite"))
print("leaks:", rep.get("leaks"), " desync:", [(d["kind"], d["step"], d["ranks"]) for d in rep.get("desync", [])])
if a.verdict:
    want(rep.get("verdict") == a.verdict, "verdict %r, want %r" % (rep.get("verdict"), a.verdict))
if a.first_step is not None or a.first_tensor or a.first_kind or a.first_rank is not None:
    want(fd is not None, "no first_divergence")
    if fd:
        if a.first_step is not None:
            want(fd["step"] == a.first_step, "first divergence step %s, want %s" % (fd["step"], a.first_step))
        if a.first_tensor:
            want(globs(a.first_tensor, fd["tensor"]), "first divergence at %s, want %s" % (fd["tensor"], a.first_tensor))
        if a.first_kind:
            want(fd["kind"] == a.first_kind, "first divergence kind %s, want %s" % (fd["kind"], a.first_kind))
        if a.first_rank is not None:
            want(fd["rank"] == a.first_rank, "first divergence rank %s, want %s" % (fd["rank"], a.first_rank))
if a.origin_tensor:
    o = rep.get("origin")
    want(o is not None and globs(a.origin_tensor, o["tensor"]), "origin %r, want %s" % (o and o["tensor"], a.origin_tensor))
if a.nonfinite_step is not None or a.nonfinite_tensor:
    nf = rep.get("first_nonfinite")
    want(nf is not None, "no first_nonfinite")
    if nf:
        if a.nonfinite_step is not None:
            want(nf["step"] == a.nonfinite_step, "first non-finite step %s" % nf["step"])
        if a.nonfinite_tensor:
            want(globs(a.nonfinite_tensor, nf["tensor"]), "first non-finite at %s" % nf["tensor"])
        if a.nonfinite_in_golden:
            want(nf["in_golden"] == (a.nonfinite_in_golden == "yes"), "in_golden %s" % nf["in_golden"])
if a.leak_site:
    leaks = [l for l in rep.get("leaks", []) if l["site"] == a.leak_site]
    want(leaks, "no leak at %s" % a.leak_site)
    ranks = sorted(l["rank"] for l in leaks)
    if a.leak_ranks:
        want(ranks == sorted(int(x) for x in a.leak_ranks.split(",")), "leak on ranks %s" % ranks)
    for l in leaks:
        if a.leak_from is not None:
            want(l["from_step"] == a.leak_from, "leak from step %s, want %s" % (l["from_step"], a.leak_from))
        if a.leak_bytes:
            want(abs(l["bytes_per_step"] - a.leak_bytes) <= 0.1 * a.leak_bytes,
                 "leak %s bytes/step, want ~%s" % (l["bytes_per_step"], a.leak_bytes))
if a.desync_kind:
    ds = [d for d in rep.get("desync", []) if d["kind"] == a.desync_kind]
    want(ds, "no desync of kind %s" % a.desync_kind)
    if ds:
        d = ds[0]
        if a.desync_step is not None:
            want(d["step"] == a.desync_step, "desync step %s, want %s" % (d["step"], a.desync_step))
        if a.desync_ranks:
            want(d["ranks"] == [int(x) for x in a.desync_ranks.split(",")], "desync ranks %s" % d["ranks"])
if a.within_tolerance_min is not None:
    want(rep.get("within_tolerance", 0) >= a.within_tolerance_min, "within_tolerance %s" % rep.get("within_tolerance"))
# every compared tensor is counted somewhere: identical, within tolerance,
# beyond it, by shape alone, or not judged (the text report states each, docs/TFDIFF.md)
parts = sum(rep.get(k, 0) for k in ("identical", "within_tolerance", "different", "unverified", "shape_only"))
want("compared" not in rep or rep["compared"] == parts, "compared %s != identical+within+different+unverified %s" % (rep.get("compared"), parts))
for r in rep.get("ranks", []) if "compared" in rep else []:
    rp = sum(r.get(k, 0) for k in ("identical", "within_tolerance", "different", "unverified", "shape_only"))
    want(r["compared"] == rp, "rank %s: compared %s, parts %s" % (r["rank"], r["compared"], rp))
if rep.get("verdict") == "DIVERGED" and rep.get("first_divergence"):
    want(rep.get("different", 0) > 0, "DIVERGED but no tensor counted as different")
if a.ended_early:
    want(any(r.get("bad_ended_early") for r in rep.get("ranks", [])), "BAD not reported as ending early")
for e in errs:
    print("FAIL:", e)
sys.exit(1 if errs else 0)

#!/usr/bin/env python3
"""check_findings.py JSON [ASSERTIONS]: asserts what `tfdump --check --json`
reported (docs/CHECK.md). Exit 1 with the reasons when an assertion fails.

  --finding KIND@STEP:TENSOR  a finding of this kind at this step whose tensor
                              matches the glob (STEP '*' any; several allowed)
  --rank R                    ... (applies to every --finding) on rank R
  --layer L                   ... naming layer L
  --clean                     no finding of severity error or warning, no
                              non-finite value, leak or desync
  --nonfinite STEP:TENSOR     the first non-finite value there
  --before-nonfinite KIND     the finding KIND's step is before the first
                              non-finite value's
  --verdict TEXT              the verdict starts with TEXT
"""
import argparse
import fnmatch
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--finding", action="append", default=[])
    ap.add_argument("--rank", type=int)
    ap.add_argument("--layer", type=int)
    ap.add_argument("--clean", action="store_true")
    ap.add_argument("--nonfinite")
    ap.add_argument("--before-nonfinite")
    ap.add_argument("--verdict")
    a = ap.parse_args()
    doc = json.load(open(a.json))
    fs = doc.get("findings")
    errs = []
    if not isinstance(fs, list):
        errs.append("no 'findings' array")
        fs = []
    for f in fs:
        print("  finding: %s %s rank %s step %s %s: %s" %
              (f["severity"], f["kind"], f["rank"], f["step"], f["tensor"], f["evidence"][:140]))
    for want in a.finding:
        kind, rest = want.split("@", 1)
        step, tensor = rest.split(":", 1)
        hit = [f for f in fs if f["kind"] == kind and (step == "*" or f["step"] == int(step))
               and fnmatch.fnmatch(f["tensor"], tensor)
               and (a.rank is None or f["rank"] == a.rank)
               and (a.layer is None or f["layer"] == a.layer)]
        if not hit:
            errs.append("no finding %s (rank %s, layer %s)" % (want, a.rank, a.layer))
    if a.clean:
        bad = [f for f in fs if f["severity"] in ("error", "warning")]
        if bad:
            errs.append("findings on a healthy run: %s" % ", ".join("%s@%s:%s" % (f["kind"], f["step"], f["tensor"]) for f in bad))
        if doc.get("first_nonfinite") or doc.get("leaks") or doc.get("desync"):
            errs.append("non-finite, leak or desync on a healthy run")
    nf = doc.get("first_nonfinite")
    if a.nonfinite:
        step, tensor = a.nonfinite.split(":", 1)
        if not nf or nf["step"] != int(step) or not fnmatch.fnmatch(nf["tensor"], tensor):
            errs.append("first non-finite %r, want %s" % (nf, a.nonfinite))
    if a.before_nonfinite:
        g = [f for f in fs if f["kind"] == a.before_nonfinite]
        if not nf:
            errs.append("no non-finite value")
        elif not g:
            errs.append("no %s finding" % a.before_nonfinite)
        elif not g[0]["step"] < nf["step"]:
            errs.append("%s at step %s, not before the first non-finite at step %s" %
                        (a.before_nonfinite, g[0]["step"], nf["step"]))
    if a.verdict and not str(doc.get("verdict", "")).startswith(a.verdict):
        errs.append("verdict %r, want %r..." % (doc.get("verdict"), a.verdict))
    for e in errs:
        print("FAIL: " + e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())

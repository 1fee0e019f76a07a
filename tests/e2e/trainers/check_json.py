#!/usr/bin/env python3
"""Field-by-field assertions on a JSON document (the output of tfdiff --json
or tfdump --check --json / --json), for the trainers tests.

Usage: check_json.py FILE ASSERTION...

An assertion is "PATH OP VALUE" (spaces around OP):
  PATH   keys and indices: leaks[0].site, ranks[0].golden_windows, notes[1];
         [key=value] picks the first list item whose key has that value
         (leaks[site=save_activations].how); PATH.# is a list's length or an
         object's number of keys
  OP     ==  !=  >=  <=  >  <  (numbers, or JSON values for == and !=)
         ~   within a relative tolerance: "PATH ~ 4194304 0.02"
         has  the string contains VALUE; startswith  it begins with VALUE
         in   one of the JSON list VALUE: "PATH in [1, 2]"
  VALUE  JSON (null, true, 12, [3,4], "text"), else a bare string

Prints each assertion with the value found; exits 1 at the first failure,
naming it and the document's part that was looked at. A PATH that does not
exist fails, whatever the assertion: a missing key never passes as null.
"""
import json
import re
import sys

OPS = (" == ", " != ", " >= ", " <= ", " > ", " < ", " ~ ", " has ", " startswith ", " in ")


class Missing(Exception):
    pass


def lookup(doc, path):
    cur = doc
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", path):
        if part == "#":
            if not isinstance(cur, (list, dict)):
                raise Missing(f"{path}: # of a {type(cur).__name__}")
            cur = len(cur)
        elif part.startswith("["):
            inner = part[1:-1]
            if "=" in inner:
                key, want = inner.split("=", 1)
                hits = [x for x in cur if isinstance(x, dict) and str(x.get(key)) == want] \
                    if isinstance(cur, list) else []
                if not hits:
                    raise Missing(f"{path}: no item with {key}={want} in {short(cur)}")
                cur = hits[0]
            else:
                i = int(inner)
                if not isinstance(cur, list) or not -len(cur) <= i < len(cur):
                    raise Missing(f"{path}: no index {i} in {short(cur)}")
                cur = cur[i]
        else:
            if not isinstance(cur, dict) or part not in cur:
                raise Missing(f"{path}: no key '{part}' in {short(cur)}")
            cur = cur[part]
    return cur


def short(x):
    s = json.dumps(x)
    return s if len(s) < 400 else s[:400] + "..."


def value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def check(doc, assertion):
    for op in OPS:
        if op in assertion:
            path, rhs = assertion.split(op, 1)
            op = op.strip()
            break
    else:
        raise SystemExit(f"check_json.py: no operator in '{assertion}'")
    got = lookup(doc, path.strip())
    if op == "~":
        want, tol = rhs.split()
        want, tol = float(want), float(tol)
        ok = isinstance(got, (int, float)) and abs(got - want) <= tol * abs(want)
    elif op == "has":
        ok = isinstance(got, str) and rhs in got
    elif op == "startswith":
        ok = isinstance(got, str) and got.startswith(rhs)
    elif op == "in":
        ok = got in value(rhs)
    elif op in ("==", "!="):
        ok = (got == value(rhs)) == (op == "==")
        if isinstance(got, bool) != isinstance(value(rhs), bool):
            ok = op == "!="  # true == 1 is no match
    else:
        want = float(rhs)
        ok = isinstance(got, (int, float)) and not isinstance(got, bool) and {
            ">=": got >= want, "<=": got <= want, ">": got > want, "<": got < want}[op]
    return ok, got


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    text = open(path).read()
    doc = json.loads(text)
    for a in sys.argv[2:]:
        try:
            ok, got = check(doc, a)
        except Missing as e:
            print(f"FAIL {a}: {e}", file=sys.stderr)
            sys.exit(1)
        if not ok:
            print(f"FAIL {a}: got {short(got)}\n  in {path}: {short(doc)}", file=sys.stderr)
            sys.exit(1)
        print(f"ok   {a}")


if __name__ == "__main__":
    main()

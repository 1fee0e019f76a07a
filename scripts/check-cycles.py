#!/usr/bin/env python3
"""check-cycles.py — calls between source files that go both ways.

Reads the object files of each library (nm), links each undefined symbol
of a file to the file of the same library that defines it, and prints
every group of files that call each other in a circle (file A calls B, B
calls A, possibly through others). Within one library: calls across
libraries follow the rooms' order, which scripts/check-layout.py checks.

A library that interposes functions of others (libtftrace.so defines
malloc, MPI_Allreduce, ...: tracer/lib/interposed.txt) calls them as the
program does, meaning the library it stands in for: with --interposed FILE
("GROUP NAME" lines) those names are not edges.

    scripts/check-cycles.py [--interposed FILE] LISTING
        LISTING: lines "TARGET OBJECT-FILE"; exit 0 none, 1 cycles, 2 usage
"""
import os
import subprocess
import sys


def objects_of(listing):
    """{target: [object files]} from a listing of "TARGET OBJECT" lines
    (tests/e2e/install/CMakeLists.txt writes one with $<TARGET_OBJECTS>)."""
    libs = {}
    with open(listing, encoding="utf-8") as f:
        for line in f:
            parts = line.split(None, 1)
            if len(parts) == 2:
                libs.setdefault(parts[0], []).append(parts[1].strip())
    return libs


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVWtdbr" and kind.isupper():
            defined.add(name)
    return defined, undefined


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def interposed_names(path):
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                names.add(parts[1])
    return names


def main(argv):
    ignore = set()
    if len(argv) == 3 and argv[0] == "--interposed":
        ignore = interposed_names(argv[1])
        argv = argv[2:]
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = 0
    for target, objs in sorted(objects_of(argv[0]).items()):
        syms = {o: symbols(o) for o in objs}
        owner = {}
        for o, (d, _) in syms.items():
            for s in d - ignore:
                owner.setdefault(s, o)
        edges = {o: {owner[s] for s in u if s in owner and owner[s] != o} for o, (_, u) in syms.items()}
        for comp in sccs(sorted(objs), edges):
            bad += 1
            names = [os.path.basename(c)[:-2] for c in comp]  # x.c.o -> x.c
            print("check-cycles: %s: %s call each other" % (target, ", ".join(names)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

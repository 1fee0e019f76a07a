#!/usr/bin/env python3
"""check-layout.py — which room of the source tree may include which.

Every C/CUDA source and header of the library and the programs lives in a
room (docs/ARCHITECTURE.md, "Rooms and what may include what"). This script
resolves each quoted #include of a room's files to the room that holds the
header and fails, naming the file and the line, when the pair is not in
ALLOWED below. System headers (<...>) and headers of the build are ignored.
In the rooms PREFIX names (the analyzer's), every function a .c file
defines without `static` must start with the room's prefix.

    scripts/check-layout.py [ROOT]          exit 0 clean, 1 violations, 2 usage
    scripts/check-layout.py --graph [ROOT]  print the include graph between rooms
"""
import os
import re
import sys

# room -> folder (relative to the root); a file belongs to the longest match
ROOMS = {
    "types": "formats/include/tft_types.h",
    "format-api": "formats/include",
    "format": "formats/src",
    "util": "formats/util",
    "stats": "kernels/stats",
    "ops": "kernels/ops",
    "recorder-api": "tracer/include",
    "lib": "tracer/lib",
    "collect": "tracer/collect",
    "capture": "tracer/capture",
    "cli": "tracer/cli",
    "cuda-plugin": "tracer/cuda",
    "bpf": "tracer/bpf",
    "an-core": "analyzer/core",
    "an-compare": "analyzer/compare",
    "an-leak": "analyzer/leak",
    "an-desync": "analyzer/desync",
    "an-detect": "analyzer/detect",
    "an-html": "analyzer/html",
    "an-report": "analyzer/report",
    "an-export": "analyzer/export",
    "an-tfdump": "analyzer/tfdump",
    "an-tfdiff": "analyzer/tfdiff",
    "runtime": "runtime",
}

# who may include whom (besides itself); the public headers everywhere
PUBLIC = {"types", "format-api", "recorder-api"}
ALLOWED = {
    "types": set(),
    "format-api": {"types"},
    "recorder-api": {"types"},
    "util": {"types", "format-api"},
    "format": PUBLIC | {"util"},
    "stats": {"types", "util"},
    "ops": {"types", "util", "stats"},
    "collect": PUBLIC | {"util", "format", "stats"},
    "capture": PUBLIC | {"util", "stats"},
    "lib": PUBLIC | {"util", "stats", "collect", "capture", "cuda-plugin"},
    "cuda-plugin": PUBLIC | {"util", "stats"},
    "bpf": PUBLIC | {"util"},
    "cli": PUBLIC | {"util", "format", "collect", "capture", "bpf"},
    # the analyzer's rooms, lowest first (docs/ARCHITECTURE.md)
    "an-core": PUBLIC | {"util", "format", "stats"},
    "an-html": PUBLIC | {"util"},
    "an-compare": PUBLIC | {"util", "stats", "an-core"},
    "an-leak": PUBLIC | {"util", "an-core"},
    "an-desync": PUBLIC | {"util", "an-core"},
    "an-detect": PUBLIC | {"util", "an-core"},
    "an-report": PUBLIC | {"util", "an-core", "an-compare", "an-leak", "an-desync", "an-detect", "an-html"},
    "an-export": PUBLIC | {"util", "an-core"},
    "an-tfdump": PUBLIC | {"util", "format", "stats", "runtime", "ops", "an-core", "an-compare", "an-leak",
                           "an-desync", "an-detect", "an-html", "an-report", "an-export"},
    "an-tfdiff": PUBLIC | {"util", "stats", "an-core", "an-compare", "an-leak", "an-desync", "an-detect",
                           "an-html", "an-report", "an-export"},
    "runtime": PUBLIC | {"util", "ops", "stats"},
}
SOURCES = (".c", ".h", ".cu", ".cuh")

# Rooms whose exported (non-static) functions must start with a prefix:
# the analyzer's, where a function's room is read off its name.
PREFIX = {
    "an-core": "core_", "an-compare": "compare_", "an-leak": "leak_", "an-desync": "desync_",
    "an-detect": "detect_", "an-html": "html_", "an-report": "report_", "an-export": "export_",
    "an-tfdump": "dump_", "an-tfdiff": "tfdiff_",
}
# a function definition's first line: a type at column 0, the name, "(" (not a declaration)
DEFINITION = re.compile(r"^(?!static\b|typedef\b|extern\b|return\b|else\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;]*$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(rel):
    best = None
    for name, folder in ROOMS.items():
        if rel == folder or rel.startswith(folder + "/"):
            if best is None or len(folder) > len(ROOMS[best]):
                best = name
    return best


def scan(root):
    headers = {}  # basename -> [rel paths]
    files = []
    for name, folder in ROOMS.items():
        top = os.path.join(root, folder)
        if os.path.isfile(top):
            walk = [(os.path.dirname(top), [], [os.path.basename(top)])]
        else:
            walk = os.walk(top)
        for d, _, names in walk:
            for n in names:
                if n.endswith(SOURCES):
                    rel = os.path.relpath(os.path.join(d, n), root)
                    files.append(rel)
                    headers.setdefault(n, set()).add(rel)
    return sorted(set(files)), headers


def main(argv):
    graph = "--graph" in argv
    args = [a for a in argv if a != "--graph"]
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files, headers = scan(root)
    edges, bad = {}, []
    for rel in files:
        src = room_of(rel)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for ln, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                here = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                cands = [here] if here in headers.get(os.path.basename(inc), ()) else \
                    sorted(headers.get(os.path.basename(inc), ()))
                if not cands:
                    continue  # a header of the build or of a dependency
                dst = room_of(cands[0])
                if dst == src:
                    continue
                edges.setdefault((src, dst), []).append("%s:%d" % (rel, ln))
                if dst not in ALLOWED.get(src, set()):
                    bad.append("%s:%d: %s includes %s (room %s may not include room %s)"
                               % (rel, ln, src, cands[0], src, dst))
    for rel in files:
        want = PREFIX.get(room_of(rel))
        if not want or not rel.endswith(".c"):
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for ln, line in enumerate(f, 1):
                m = DEFINITION.match(line)
                if m and m.group(1) != "main" and not m.group(1).startswith(want):
                    bad.append("%s:%d: %s() does not start with its room's prefix %s" % (rel, ln, m.group(1), want))
    if graph:
        for (s, d), where in sorted(edges.items()):
            print("%-12s -> %-12s %3d  e.g. %s" % (s, d, len(where), where[0]))
    for b in bad:
        print("check-layout: " + b, file=sys.stderr)
    if bad:
        print("check-layout: %d problem(s): includes across the rooms' boundaries, or exported functions "
              "without their room's prefix (docs/ARCHITECTURE.md)" % len(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

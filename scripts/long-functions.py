#!/usr/bin/env python3
"""long-functions.py — the longest C functions of the tree, for keeping
them short enough to read in one screen (docs/CONTRIBUTING.md).

A function is a definition whose name line starts at column 0 and whose
body runs from a "{" to the next "}" at column 0 (the style of this tree,
clang-format's). Lines counted: from the name line to the closing brace.

    scripts/long-functions.py [--min N] [--top K] [PATH...]
        PATH: files or folders (default: the tree's C/CUDA sources outside tests/)
        prints "LINES  FILE:LINE  NAME", longest first; exit 0
"""
import os
import re
import sys

DEF = re.compile(r"^(?!typedef\b|struct\b.*;|enum\b|union\b|#)[A-Za-z_][\w \t\*,()\[\]]*?\b([A-Za-z_]\w*)\s*\(")
ATTR = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*")
SKIP_DIRS = {"tests", "build", ".git"}


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = DEF.match(ATTR.sub("", lines[i]))
        if m and not lines[i].rstrip().endswith(";"):
            j = i
            while j < len(lines) and not lines[j].startswith("{") and j - i < 12:
                if lines[j].rstrip().endswith(";"):
                    break
                j += 1
            if j < len(lines) and lines[j].startswith("{"):
                k = j + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                out.append((k - i + 1, i + 1, m.group(1)))
                i = k + 1
                continue
        i += 1
    return out


def sources(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for d, dirs, names in os.walk(p):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build"))
            for n in sorted(names):
                if n.endswith((".c", ".cu")):
                    yield os.path.join(d, n)


def main(argv):
    mn, top, paths = 0, 30, []
    it = iter(argv)
    for a in it:
        if a == "--min":
            mn = int(next(it))
        elif a == "--top":
            top = int(next(it))
        elif a.startswith("-"):
            print(__doc__.strip(), file=sys.stderr)
            return 2
        else:
            paths.append(a)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not paths:
        paths = [os.path.join(root, d) for d in ("formats", "kernels", "tracer", "analyzer", "runtime", "examples", "bench")]
    rows = []
    for src in sources(paths):
        rel = os.path.relpath(src, root)
        rows += [(n, "%s:%d" % (rel, ln), name) for n, ln, name in functions(src) if n >= mn]
    rows.sort(key=lambda r: -r[0])
    for n, where, name in rows[:top]:
        print("%5d  %-50s %s" % (n, where, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""e2e.docs: the commands the docs show stay true.

Usage: check_doc_commands.py SRC BUILD

1. Every long option a documented command line gives tftrace, tfdump or
   tfdiff (README.md, docs/*.md, examples/*/README.md, python/README.md,
   runtime/README.md; lines of indented or fenced code blocks) is one the
   tool's --help lists (tftrace's subcommands' too): a renamed or removed
   option fails here, naming the file and line.
2. Blocks marked with the line `<!-- doc-test: run -->` just before them are
   run for real, line by line, in an empty directory where `build` is BUILD
   and `examples` the source's examples, with $HOME there too: each line must
   exit with the status its comment says (`# exit 1: ...`), else 0.
"""
import os
import re
import subprocess
import sys
import tempfile

src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
TOOLS = {
    "tftrace": os.path.join(build, "tracer", "tftrace"),
    "tfdump": os.path.join(build, "analyzer", "tfdump"),
    "tfdiff": os.path.join(build, "analyzer", "tfdiff"),
}
SUBCOMMANDS = ["stacks", "attach", "gather", "replay"]


def help_text(tool):
    out = []
    cmds = [[TOOLS[tool], "--help"]]
    if tool == "tftrace":
        cmds += [[TOOLS[tool], sub, "--help"] for sub in SUBCOMMANDS]
    for c in cmds:
        p = subprocess.run(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out.append(p.stdout)
    return "\n".join(out)


def doc_files():
    files = [os.path.join(src, "README.md"), os.path.join(src, "python", "README.md"),
             os.path.join(src, "runtime", "README.md")]
    for d in ("docs",):
        files += sorted(os.path.join(src, d, f) for f in os.listdir(os.path.join(src, d)) if f.endswith(".md"))
    ex = os.path.join(src, "examples")
    files += sorted(os.path.join(ex, d, "README.md") for d in os.listdir(ex)
                    if os.path.isfile(os.path.join(ex, d, "README.md")))
    return [f for f in files if os.path.isfile(f)]


def code_lines(path):
    """(line number, text, block id, marked) of each code line: 4-space
    indented after a blank line, or inside ``` fences."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, fenced, block, marked, prev_blank, in_indent = [], False, 0, False, True, False
    pending_mark = False
    for i, l in enumerate(lines, 1):
        if l.strip().startswith("<!-- doc-test: run -->"):
            pending_mark, in_indent = True, False
            continue
        if l.strip().startswith("```"):
            fenced = not fenced
            if fenced:
                block += 1
                marked, pending_mark = pending_mark, False
            continue
        if fenced:
            out.append((i, l, block, marked))
            continue
        if l.startswith("    ") and (prev_blank or in_indent) and not l.lstrip().startswith(("-", "*", "|")):
            if not in_indent:
                block += 1
                marked, pending_mark = pending_mark, False
            in_indent = True
            out.append((i, l[4:], block, marked))
        else:
            if l.strip():
                in_indent = False
                if not l.strip().startswith("<!--"):
                    pending_mark = False
        prev_blank = not l.strip()
    return out


TOOL_RE = re.compile(r'^(?:\$ )?(?:sudo )?(?:[\w./"$~{}-]*/)?(tftrace|tfdump|tfdiff)"?(?=\s|$)')
helps = {t: help_text(t) for t in TOOLS}
errors, checked, blocks = [], 0, {}
for path in doc_files():
    rel = os.path.relpath(path, src)
    for n, line, block, marked in code_lines(path):
        if marked:
            blocks.setdefault((rel, block), []).append((n, line))
        for seg in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line.strip()):
            m = TOOL_RE.match(seg)
            if not m:
                continue
            tool = m.group(1)
            if re.match(r"^\s*(\w+)?:", seg[m.end():]):
                continue  # a message the tool prints ("tftrace replay: golden: ..."), not a command
            words = seg[m.end():].split()
            for w in words:
                if w == "--" or w.startswith("#"):
                    break
                for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", w):
                    checked += 1
                    if not re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", helps[tool]):
                        errors.append("%s:%d: %s %s: not an option its --help lists: %s" % (rel, n, tool, opt, line.strip()))

# 2. the marked blocks, run
with tempfile.TemporaryDirectory() as tmp:
    os.symlink(build, os.path.join(tmp, "build"))
    os.symlink(os.path.join(src, "examples"), os.path.join(tmp, "examples"))
    env = dict(os.environ, HOME=tmp, PATH=os.pathsep.join(
        [os.path.dirname(TOOLS["tftrace"]), os.path.dirname(TOOLS["tfdump"]), os.environ.get("PATH", "")]))
    for (rel, block), lines in sorted(blocks.items()):
        for n, line in lines:
            cmd = line.strip()
            if not cmd or cmd.startswith("#"):
                continue
            m = re.search(r"#\s*exit (\d+)", cmd)
            want = int(m.group(1)) if m else 0
            p = subprocess.run(["bash", "-c", cmd], cwd=tmp, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            checked += 1
            if p.returncode != want:
                errors.append("%s:%d: exit %d, the doc says %d: %s\n%s" % (rel, n, p.returncode, want, cmd,
                                                                         p.stdout[-1500:]))
        print("ran %s block %d (%d lines)" % (rel, block, len(lines)))

for e in errors:
    print("FAIL:", e)
print("%d option uses and commands checked, %d wrong" % (checked, len(errors)))
sys.exit(1 if errors else 0)

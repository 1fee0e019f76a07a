"""Tests of the Python reader (python/tftrace: _reader.py, _trace.py,
_tables.py, _captures.py, _layouts.py, _tools.py) against the C tools:
every value the reader returns is compared with what tfdump / tfdiff print
for the same trace, on traces recorded here.

A pytest module: one test per case (version errors tools records crafted
mpi capture summary diff), each for the frames that --frame names
(conftest.py: dict forces the dict-of-numpy-arrays path even where pandas
imports; pandas checks the DataFrames). ctest runs one case and frame per
test (tests/python/CMakeLists.txt):

    python -m pytest test_reader.py::test_CASE --frame dict|pandas --tftrace P
        --tfdump P --tfdiff P --tftrain P|none --lib P [--mpi ON|OFF]

A case skips when a prerequisite is missing (numpy; tftrain, except for
version and tools; MPI, for mpi). The helpers below use the module's
globals A (the tools), TMP (the test's scratch folder) and PD (pandas, in a
pandas frame), which the fixture harness sets for each test; check() counts
what a test compared (CHECKS), and a test that compared nothing fails.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

np = pytest.importorskip("numpy", reason="numpy is not installed for %s" % sys.executable)

import tftrace  # noqa: E402 (after the numpy skip)
from tftrace import _tables  # noqa: E402

A = None      # the tools (conftest.py's tools fixture)
TMP = None    # this test's scratch directory
FRAME = None  # "dict" or "pandas"
PD = None     # pandas, in pandas frames
CHECKS = [0]  # comparisons made (a test that compared nothing fails)


@pytest.fixture(autouse=True)
def harness(request, tools, scratch, frame, monkeypatch, count_checks):
    """Sets A, TMP, FRAME and PD for the test, the frame's table path, and counts its checks."""
    global A, TMP, FRAME, PD
    for k in ("TFT_TFDUMP", "TFT_TFDIFF"):  # the tools are found next to the library (test_tools: the rest)
        monkeypatch.delenv(k, raising=False)
    if frame == "pandas":
        try:
            import pandas
        except ImportError:
            if "pandas" in (request.config.getoption("frame") or ()):
                pytest.fail("--frame pandas but pandas does not import in %s" % sys.executable)
            pytest.skip("pandas does not import in %s" % sys.executable)
        PD = pandas
    else:
        PD = None
        monkeypatch.setattr(_tables, "_pandas", False)  # the dict-of-arrays path, whatever is installed
    A, TMP, FRAME = tools, scratch, frame
    CHECKS[0] = 0
    yield
    count_checks(CHECKS[0])


@pytest.fixture
def needs_tftrain(tools):
    if tools.tftrain == "none":
        pytest.skip("no tftrain in this build")


def check(cond, msg):
    CHECKS[0] += 1
    if not cond:
        pytest.fail(msg)


def run(cmd, ok=(0,), env=None, **kw):
    p = subprocess.run([str(x) for x in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env, **kw)
    if p.returncode not in ok:
        pytest.fail("%s exited %d: %s %s" % (" ".join(map(str, cmd)), p.returncode, p.stdout[-2000:],
                                           p.stderr[-2000:]))
    return p


def record(name, cmd, extra=(), env=None):
    """tftrace -o TMP/name -- cmd; returns the trace path."""
    out = os.path.join(TMP, name)
    e = dict(os.environ)
    e.update(env or {})
    run([A.tftrace, "-q", "-o", out] + list(extra) + ["--"] + cmd, env=e)
    return out


def tftrain(name, *args, extra=()):
    return record(name, [A.tftrain, "-q"] + list(args), extra)


def mk_trace(name, extra=("--capture", "name=dt"), env=None):
    return record(name, [sys.executable, os.path.join(HERE, "mk_trace.py"), A.lib], extra, env)


def tfdump_lines(*args):
    p = run([A.tfdump] + list(args))
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def tfdump_json(*args):
    return json.loads(run([A.tfdump] + list(args)).stdout)


# ---- tables as lists of row dicts ------------------------------------------------

def norm(v):
    """A table value as plain Python: None for every kind of missing."""
    if v is None:
        return None
    if PD is not None and v is PD.NA:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def rows_of(table, columns):
    """The rows of a tftrace table; checks its type and its columns first."""
    if FRAME == "pandas":
        check(isinstance(table, PD.DataFrame), "want a DataFrame, got %s" % type(table))
        check(list(table.columns) == list(columns), "columns %s, want %s" % (list(table.columns), columns))
        cols = {k: table[k].tolist() for k in columns}
        n = len(table)
    else:
        check(isinstance(table, dict), "want a dict of arrays, got %s" % type(table))
        check(list(table) == list(columns), "columns %s, want %s" % (list(table), columns))
        n = len(table[columns[0]]) if columns else 0
        for k in columns:
            check(isinstance(table[k], np.ndarray) and table[k].ndim == 1 and len(table[k]) == n,
                  "column %s is not a 1-d array of %d" % (k, n))
        cols = {k: table[k].tolist() for k in columns}
    return [{k: norm(cols[k][i]) for k in columns} for i in range(n)]


def same_value(g, w):
    """Equal; floats within cJSON's printing precision: tfdump prints a double
    with 15 significant digits when that reads back within DBL_EPSILON
    (relative), so its JSON may be an ulp or two off the recorded value."""
    if isinstance(g, float) and isinstance(w, (float, int)) and not isinstance(w, bool):
        return g == w or math.isclose(g, w, rel_tol=4.5e-16, abs_tol=0.0)
    return g == w


def same_row(g, w):
    return g.keys() == w.keys() and all(same_value(g[k], w[k]) for k in g)


def same_rows(got, want, what):
    check(len(got) == len(want), "%s: %d rows, want %d" % (what, len(got), len(want)))
    for i, (g, w) in enumerate(zip(got, want)):
        if not same_row(g, w):
            diff = {k: (g.get(k), w.get(k)) for k in set(g) | set(w) if not same_value(g.get(k), w.get(k))}
            pytest.fail("%s: row %d differs (got, want): %s\n  got  %s\n  want %s" % (what, i, diff, g, w))
        CHECKS[0] += 1


TENSOR_COLS = ["step", "rank", "seq", "ts", "id", "name", "op", "scope", "dtype", "device", "shape",
               "mode", "numel", "nan", "pinf", "ninf", "zero", "over_fp16", "over_bf16", "under_fp16",
               "fingerprint", "min", "max", "mean", "std", "l1", "l2", "absmax"]
STAT_KEYS = ["nan", "pinf", "ninf", "zero", "over_fp16", "over_bf16", "under_fp16", "fingerprint",
             "min", "max", "mean", "std", "l1", "l2", "absmax"]
COLL_COLS = ["step", "rank", "seq", "comm", "coll_seq", "type", "name", "dtype", "count", "redop",
             "root", "tag", "rank_in_comm", "nranks", "t_enter", "t_exit", "phase", "result"]
ALLOC_COLS = ["step", "rank", "ts", "event", "ptr", "bytes", "site", "device"]
STEP_COLS = ["rank", "step", "t_begin", "t_end", "duration"]
CAPTURE_COLS = ["rank", "step", "seq", "role", "id", "name", "op", "dtype", "shape", "bytes",
                "present", "parts", "complete"]


# ---- what tfdump says, in the reader's terms ------------------------------------------

def events_by_rank(trace, ranks):
    """tfdump --events --json --rank R for each rank: file order, as the reader reads."""
    out = []
    for r in ranks:
        out += tfdump_lines("--events", "--json", "--rank", str(r), trace)
    return out


def want_tensor(e, ops):
    st = e["stats"]
    op = ops.get(e["seq"], (None, None))
    row = {"step": e["step"], "rank": e["rank"], "seq": e["seq"], "ts": e["ts"], "id": e["id"],
           "name": e["name"], "op": op[0], "scope": op[1], "dtype": e["dtype"], "device": e["device"],
           "shape": tuple(e["shape"]), "mode": e["mode"], "numel": st["numel"]}
    for k in STAT_KEYS:
        row[k] = st.get(k)
    if row["fingerprint"] is not None:
        row["fingerprint"] = int(row["fingerprint"], 16)
    return row


def want_coll(e):
    return {"step": e["step"], "rank": e["rank"], "seq": e["seq"], "comm": int(e["comm"], 16),
            "coll_seq": e["coll_seq"], "type": e["type"], "name": e["name"], "dtype": e["dtype"],
            "count": e["count"], "redop": e["op"], "root": e["root"], "tag": e["tag"],
            "rank_in_comm": e["comm_rank"], "nranks": e["nranks"], "t_enter": e["t_enter"],
            "t_exit": e["t_exit"], "phase": e["phase"], "result": e["result"]}


def want_alloc(e):
    return {"step": e["step"], "rank": e["rank"], "ts": e["ts"], "event": e["kind"],
            "ptr": int(e["ptr"], 16), "bytes": e["bytes"],
            "site": e.get("site") if e["kind"] == "alloc" else None, "device": e["device"]}


def want_tables(events):
    tensors, colls, allocs, steps = [], [], [], []
    ops, seen, final_ops, rank = {}, {}, {}, None
    for e in events:
        k = e["kind"]
        if e["rank"] != rank:
            ops, rank = {}, e["rank"]
        if k == "op":
            ops[e["seq"]] = (e["name"], e["scope"])
            final_ops[(e["rank"], e["seq"])] = (e["name"], e["scope"])
        elif k == "tensor":
            tensors.append(want_tensor(e, ops))
        elif k == "collective":
            colls.append(want_coll(e))
        elif k in ("alloc", "free"):
            allocs.append(want_alloc(e))
        elif k == "step":
            key = (e["rank"], e["step"])
            if key not in seen:
                seen[key] = {"rank": e["rank"], "step": e["step"], "t_begin": None, "t_end": None}
                steps.append(seen[key])
            if e["phase"] == "end":
                seen[key]["t_end"] = e["ts"]
            elif seen[key]["t_begin"] is None:
                seen[key]["t_begin"] = e["ts"]
    for row in tensors:  # a tensor before its op's record: the op of that seq seen later in its rank
        if row["op"] is None and row["seq"] is not None:
            later = final_ops.get((row["rank"], row["seq"]))
            if later:
                row["op"], row["scope"] = later
    for s in steps:
        b, t = s["t_begin"], s["t_end"]
        s["duration"] = t - b if b is not None and t is not None and t >= b else None
    return tensors, colls, allocs, steps


def want_event(e, ops):
    """A tfdump --events --json object as Trace.events() must give it."""
    k = e["kind"]
    if k == "op":
        ops[e["seq"]] = (e["name"], e["scope"])
    if k == "tensor":
        d = want_tensor(e, ops)
        d.update(kind="tensor", has_data=e["has_data"])
        return d
    if k == "collective":
        d = want_coll(e)
        d.update(kind="collective", ts=e["ts"])
        return d
    if k in ("alloc", "free"):
        d = want_alloc(e)
        d.update(kind=k, seq=e["seq"], name=e["name"])
        if k == "alloc":
            d["stream"] = e["stream"]
        return d
    d = {"rank": e["rank"], "step": e["step"], "seq": e["seq"], "kind": k, "ts": e["ts"], "name": e["name"]}
    rest = {x: v for x, v in e.items() if x not in d}
    if k == "capture":
        rest["shape"] = tuple(rest["shape"])
    elif k == "comm":
        rest["comm"] = int(rest["comm"], 16)
        rest["parent"] = None if rest["parent"] is None else int(rest["parent"], 16)
    elif k == "kernel":
        rest["grid"], rest["block"] = tuple(rest["grid"]), tuple(rest["block"])
    d.update(rest)
    return d


def got_event(d):
    return {k: norm(v) for k, v in d.items()}


# ---- cases -----------------------------------------------------------------------------

def test_version():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    got = run([sys.executable, "-c", "import tftrace; print(tftrace.__version__)"], env=env).stdout.strip()
    lib = run([sys.executable, "-c", "import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); "
               "l.tft_version.restype = ctypes.c_char_p; print(l.tft_version().decode())", A.lib],
              env=env).stdout.strip()
    check(re.fullmatch(r"\d+\.\d+\.\d+", got) is not None, "__version__ %r is not MAJOR.MINOR.PATCH" % got)
    check(got == lib, "tftrace.__version__ %s but the library's tft_version() is %s" % (got, lib))
    dump = run([A.tfdump, "--version"]).stdout
    check((" %s " % got) in dump, "tfdump --version says %r, the package %s" % (dump, got))
    from tftrace import _lib, _layouts
    check(_lib.library_version() == got and _lib.check_version() is None, "library_version/check_version")
    # the package's record kinds come from the library's table (tft_rec_kind): every kind it
    # knows, by its name; string ids in u64 fields at the library's offsets (check_layouts)
    import ctypes
    _layouts.check_layouts(_lib.lib())
    for kind, k in _layouts.KINDS.items():
        check(_lib.lib().tft_rec_kind_name(kind).decode() == k.name, "kind %d is %s here, %s in the library"
              % (kind, k.name, _lib.lib().tft_rec_kind_name(kind).decode()))
        check(k.layout is not None, "kind %s has no Structure in _layouts.LAYOUTS" % k.name)
        fields = dict(k.layout._fields_) if k.layout else {}
        check(all(fields.get(f) is ctypes.c_uint64 for f in k.strings), "%s: string id fields %s, not u64 "
              "fields of %s" % (k.name, k.strings, k.layout))
    check(_layouts.KINDS[_layouts.REC_STACK].strings == ("comm", "summary", "frames", "note"),
          "STACK's strings: %s" % (_layouts.KINDS[_layouts.REC_STACK].strings,))
    check(_layouts.KIND_BY_NAME.get("tensor") == _layouts.REC_TENSOR and "string" not in _layouts.KIND_BY_NAME,
          "KIND_BY_NAME: %s" % _layouts.KIND_BY_NAME)
    # a Structure whose string field sits elsewhere than the library's is refused
    class BadOp(ctypes.Structure):
        _fields_ = [("h", _layouts.Rec), ("scope", ctypes.c_uint64), ("name", ctypes.c_uint64),
                    ("rest", ctypes.c_uint64)]
    check(any("string field" in x for x in _layouts._layout_problems(_lib.lib(), _layouts.REC_OP, BadOp)),
          "a swapped string field passed the layout check")
    g = tftrain("v.trace", "--steps", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no version warning, no problem on an intact trace
        with tftrace.open(g) as t:
            check(t.problems == [], "problems on an intact trace: %s" % t.problems)


@pytest.mark.usefixtures("needs_tftrain")
def test_errors():
    import errno as E
    TraceError = tftrace.TraceError

    def refused(path, *want):
        with pytest.raises(TraceError) as raised:
            tftrace.open(path)
        e = raised.value
        msg = str(e)
        for w in want:
            check(w in msg, "open(%s): %r does not say %r" % (path, msg, w))
        check(e.path == str(path), "TraceError.path %r" % e.path)
        return e

    e = refused(os.path.join(TMP, "missing.trace"), "missing.trace", "No such file or directory")
    check(e.errno == E.ENOENT, "errno %r for a missing path" % e.errno)
    bad = os.path.join(TMP, "garbage.trace")
    os.mkdir(bad)
    with open(os.path.join(bad, "rank-00000.tft"), "wb") as f:
        f.write(b"this is not a trace\n" * 10)
    e = refused(bad, "rank-00000.tft", "not a tftrace rank file")
    check(e.errno == E.EPROTO, "errno %r for garbage" % e.errno)
    refused(os.path.join(bad, "rank-00000.tft"), "not a tftrace rank file")
    empty = os.path.join(TMP, "empty.trace")
    os.mkdir(empty)
    refused(empty, "no rank files")
    fifo = os.path.join(TMP, "rank-fifo.tft")
    os.mkfifo(fifo)
    refused(fifo, "not a regular file")

    # 60 steps: ~3 MB of records, several 1 MiB chunks by size alone (20 steps
    # are just under one chunk, split or not by the collector's timed flush)
    g = tftrain("g.trace", "--steps", "60")
    n_chunks = sum(1 for _ in tfdump_lines("--chunks", "--json", g))
    check(n_chunks >= 2, "want a trace of several chunks, got %d" % n_chunks)
    with tftrace.open(g) as t:
        n_intact = len(rows_of(t.tensors(), TENSOR_COLS))
    cut = os.path.join(TMP, "cut.tft")
    with open(os.path.join(g, "rank-00000.tft"), "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:100])
    refused(cut, "cut.tft")

    # a damaged chunk: its records are lost (a TraceWarning), the others read
    dmg = os.path.join(TMP, "dmg.trace")
    shutil.copytree(g, dmg)
    b = bytearray(data)
    b[len(b) // 3] ^= 0x5A
    with open(os.path.join(dmg, "rank-00000.tft"), "wb") as f:
        f.write(b)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = tftrace.open(dmg)
        n = len(rows_of(t.tensors(), TENSOR_COLS))
    msgs = [str(x.message) for x in w if issubclass(x.category, tftrace._reader.TraceWarning)]
    check(msgs and any("rank-00000.tft" in m and "chunk" in m for m in msgs),
          "no TraceWarning naming the damaged chunk: %s" % msgs)
    # said at the user's line (the caller of tftrace), not inside the package
    where = {os.path.basename(x.filename) for x in w if issubclass(x.category, tftrace._reader.TraceWarning)}
    check(where == {os.path.basename(__file__)}, "TraceWarning said at %s, not at its caller" % where)
    check(t.problems == sorted(set(t.problems), key=t.problems.index) and t.problems,
          "problems %s" % t.problems)
    check(0 < n < n_intact, "damaged trace: %d tensors, intact %d" % (n, n_intact))
    check(t.summary()["integrity"] == "damaged", "summary of the damaged trace")
    t.close()
    check("closed" in repr(t), "repr after close")
    for call in (t.tensors, t.collectives, t.allocations, t.steps, t.summary, t.captures):
        with pytest.raises(TraceError) as raised:
            call()
        check("closed" in str(raised.value), "closed trace: %s" % raised.value)

    # a torn tail (file cut inside its last chunk)
    torn = os.path.join(TMP, "torn.trace")
    shutil.copytree(g, torn)
    with open(os.path.join(torn, "rank-00000.tft"), "wb") as f:
        f.write(data[:int(len(data) * 0.8)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with tftrace.open(torn) as t:
            n = len(rows_of(t.tensors(), TENSOR_COLS))
            check(t.summary()["integrity"] == "torn", "summary of the torn trace")
    check(any(issubclass(x.category, tftrace._reader.TraceWarning) for x in w), "no warning for a torn trace")
    check(0 < n < n_intact, "torn trace: %d tensors, intact %d" % (n, n_intact))

    # a trace removed after it was opened: tfdump's message
    gone = os.path.join(TMP, "gone.trace")
    shutil.copytree(g, gone)
    t = tftrace.open(gone)
    shutil.rmtree(gone)
    with pytest.raises(TraceError) as raised:
        t.summary()
    e = raised.value
    check("gone.trace" in str(e) and e.status == 2 and "tfdump" in e.stderr, "summary of a removed trace: %s" % e)
    with pytest.raises(TraceError) as raised:
        t.tensors()
    check("gone.trace" in str(raised.value), "tensors() of a removed trace: %s" % raised.value)
    t.close()

    with tftrace.open(g) as t:
        for bad_call, exc in ((lambda: t.tensors(steps="x"), TypeError),
                              (lambda: t.tensors(steps=True), TypeError),
                              (lambda: t.tensors(ranks="x"), (TypeError, ValueError)),
                              (lambda: t.tensors(name=3), TypeError),
                              (lambda: t.captured("x", role="bogus"), ValueError),
                              (lambda: t.captured("x", bf16="f16"), ValueError),
                              (lambda: t.captured("x", fp8="u8"), ValueError),
                              (lambda: list(t.events(kinds=["bogus"])), ValueError)):
            with pytest.raises(exc):
                bad_call()
            CHECKS[0] += 1
        with pytest.raises(KeyError) as raised:
            t.captured("L0.attn.probs")
        e = raised.value
        check("no captures" in str(e), "KeyError without captures: %s" % e)
    with pytest.raises(TraceError) as raised:
        tftrace.diff(g, os.path.join(TMP, "missing.trace"))
    e = raised.value
    check(e.status == 2 and "missing.trace" in str(e), "diff with a missing trace: %s (%s)" % (e, e.status))


def test_tools():
    from tftrace import _tools
    got = _tools.find("tfdump")
    check(os.path.realpath(got) == os.path.realpath(A.tfdump), "find(tfdump) = %s, want %s" % (got, A.tfdump))
    got = _tools.find("tfdiff")
    check(os.path.realpath(got) == os.path.realpath(A.tfdiff), "find(tfdiff) = %s, want %s" % (got, A.tfdiff))
    pre = "/x/libtftrace.so.0.2.0:/y/libother.so"
    os.environ["LD_PRELOAD"] = pre
    try:
        env = _tools._child_env()
    finally:
        del os.environ["LD_PRELOAD"]
    check(env.get("LD_PRELOAD") == "/y/libother.so" and env.get("TFT_DISABLE") == "1", "child env %s"
          % {k: env.get(k) for k in ("LD_PRELOAD", "TFT_DISABLE")})

    # lookups in fresh processes (the library is loaded once per process)
    probe = ("import sys, tftrace\nfrom tftrace import _tools\ntry:\n    print(_tools.find(sys.argv[1]))\n"
             "except _tools.ToolNotFoundError as e:\n    print('NOTFOUND', e)\n")

    def find_in(env, tool="tfdump"):
        e = {k: v for k, v in os.environ.items() if k not in ("TFT_TFDUMP", "TFT_TFDIFF", "LD_PRELOAD")}
        e.update(env)
        return run([sys.executable, "-c", probe, tool], env=e).stdout.strip()

    out = find_in({"TFT_TFDUMP": A.tfdump})
    check(out == os.path.abspath(A.tfdump), "TFT_TFDUMP: %s" % out)
    out = find_in({"TFT_TFDUMP": os.path.join(TMP, "nothere")})
    check(out.startswith("NOTFOUND") and "TFT_TFDUMP" in out, "TFT_TFDUMP not executable: %s" % out)
    # an installed layout: PREFIX/lib/libtftrace.so, PREFIX/bin/tfdump
    prefix = os.path.join(TMP, "prefix")
    os.makedirs(os.path.join(prefix, "lib"))
    os.makedirs(os.path.join(prefix, "bin"))
    shutil.copy(A.lib, os.path.join(prefix, "lib", "libtftrace.so"))
    os.symlink(os.path.abspath(A.tfdump), os.path.join(prefix, "bin", "tfdump"))
    out = find_in({"TFT_LIB": os.path.join(prefix, "lib", "libtftrace.so"), "PATH": "/nonexistent"})
    check(out == os.path.join(prefix, "bin", "tfdump"), "installed layout: %s" % out)
    # nowhere: the error names what was tried
    out = find_in({"TFT_LIB": os.path.join(prefix, "lib", "libtftrace.so"), "PATH": "/nonexistent"}, "tfdiff")
    for want in ("NOTFOUND", "TFT_TFDIFF", os.path.join(prefix, "bin", "tfdiff"),
                 os.path.join(prefix, "analyzer", "tfdiff"), "PATH"):
        check(want in out, "tfdiff nowhere: %r lacks %r" % (out, want))
    # on PATH
    pbin = os.path.join(TMP, "pathbin")
    os.mkdir(pbin)
    os.symlink(os.path.abspath(A.tfdiff), os.path.join(pbin, "tfdiff"))
    out = find_in({"TFT_LIB": os.path.join(prefix, "lib", "libtftrace.so"), "PATH": pbin}, "tfdiff")
    check(out == os.path.join(pbin, "tfdiff"), "PATH: %s" % out)


def check_tables(trace):
    """Every table of trace against tfdump --events --json --rank R."""
    with tftrace.open(trace) as t:
        ranks = tfdump_json("--json", trace)["rank_ids"]
        check(t.ranks == ranks, "ranks %s, tfdump %s" % (t.ranks, ranks))
        events = events_by_rank(trace, t.ranks)
        wt, wc, wa, ws = want_tables(events)
        tens = rows_of(t.tensors(), TENSOR_COLS)
        same_rows(tens, wt, "%s tensors" % trace)
        check(len(tens) > 0, "no tensors")
        same_rows(rows_of(t.collectives(), COLL_COLS), wc, "%s collectives" % trace)
        same_rows(rows_of(t.allocations(), ALLOC_COLS), wa, "%s allocations" % trace)
        same_rows(rows_of(t.steps(), STEP_COLS), ws, "%s steps" % trace)
        ops = {}
        got = [got_event(d) for d in t.events()]
        want = []
        for e in events:
            if e["rank"] != (want[-1]["rank"] if want else None):
                ops = {}
            want.append(want_event(e, ops))
        same_rows(got, want, "%s events" % trace)
        for kinds in (["tensor"], ["collective", "step"], "op"):
            ks = [kinds] if isinstance(kinds, str) else kinds
            same_rows([got_event(d) for d in t.events(kinds=kinds)],
                      [w for w in want if w["kind"] in ks], "%s events(kinds=%s)" % (trace, kinds))
        return tens, wc, wa, events


def filtered(rows, steps=None, ranks=None, name=None):
    out = []
    for r in rows:
        if steps is not None and (r["step"] is None or not steps(r["step"])):
            continue
        if ranks is not None and r["rank"] not in ranks:
            continue
        if name is not None and not name(r["name"]):
            continue
        out.append(r)
    return out


@pytest.mark.usefixtures("needs_tftrain")
def test_records():
    # every record kind of mk_trace.py, tensors of every dtype, shape- and
    # health-mode records, a tensor outside any step, scopes, a tagged send
    mk = mk_trace("mk.trace")
    tens, colls, allocs, events = check_tables(mk)
    kinds = {e["kind"] for e in events}
    for k in ("op", "tensor", "alloc", "free", "collective", "checkpoint", "process", "capture", "thread",
              "sync", "comm", "step"):
        check(k in kinds, "mk_trace.py recorded no %s record" % k)
    by = {(r["name"], r["step"]): r for r in tens}
    s = by[("st.shape", 0)]
    check(s["mode"] == "shape" and s["numel"] == 32 and all(s[k] is None for k in STAT_KEYS),
          "a shape-mode tensor: %s" % s)
    s = by[("st.health", 1)]
    check(s["mode"] == "health" and s["nan"] == 1 and s["pinf"] == 2 and s["ninf"] == 3 and s["zero"] == 4
          and s["fingerprint"] == 0xfeedface12345678 and s["min"] == -1.5 and s["max"] == 2.5
          and all(s[k] is None for k in ("mean", "std", "l1", "l2", "absmax", "over_fp16")),
          "a health-mode tensor: %s" % s)
    s = by[("dt.f32", 0)]
    check(s["mode"] == "full" and s["op"] == "dt" and s["scope"] == "blk" and s["shape"] == (3, 50, 200)
          and s["nan"] == 1 and s["pinf"] == 2 and s["ninf"] == 1 and s["dtype"] == "f32"
          and s["device"] == "cpu", "dt.f32: %s" % s)
    check(by[("dt.u64", 1)]["dtype"] == "u64" and by[("dt.scalar", 0)]["shape"] == ()
          and by[("dt.empty", 0)]["numel"] == 0, "dtype/shape columns")
    pre = [r for r in tens if r["name"] == "pre.x"]
    check(len(pre) == 1 and pre[0]["step"] is None and pre[0]["op"] == "pre.x", "a tensor outside steps: %s" % pre)
    send = [r for r in colls if r["phase"] == "exit"]
    check([r["tag"] for r in send] == [7, 8] and send[0]["type"] == "send" and send[0]["root"] == 1
          and send[0]["comm"] == 0x1234abcd5678ef01 and send[0]["result"] is not None,
          "the tagged sends: %s" % send)
    check(any(r["site"] == "mk:buf" and r["bytes"] == 1 << 20 for r in allocs), "the mk:buf allocation")

    # the dict path's dtypes: a column missing values is an object array, else numeric
    t = tftrace.open(mk)
    if FRAME == "dict":
        d = t.tensors()
        check(d["step"].dtype == object and d["nan"].dtype == object and d["min"].dtype == np.float64
              and d["ts"].dtype == np.uint64 and d["rank"].dtype == np.int64, "dict dtypes (mk)")
        d = t.tensors(steps=(0, None))
        check(d["step"].dtype == np.int64 and d["numel"].dtype == np.uint64, "dict dtypes (steps 0:)")
    else:
        d = t.tensors()
        check(str(d["step"].dtype) == "Int64" and str(d["fingerprint"].dtype) == "UInt64"
              and str(d["min"].dtype) == "float64", "DataFrame dtypes: %s" % d.dtypes.to_dict())
    t.close()

    # filters, against the full table and against tfdump's own filters
    g = tftrain("g.trace", "--steps", "4", "--bug", "leak@1")
    tens, colls, allocs, events = check_tables(g)
    check(sum(1 for r in allocs if r["event"] == "alloc" and r["site"] == "tftrain:leak_buffer") >= 2,
          "the leak@1 allocations: %s" % allocs)
    with tftrace.open(g) as t:
        for steps, pred in ((2, lambda s: s == 2), ((1, 2), lambda s: 1 <= s <= 2),
                            ((2, None), lambda s: s >= 2), ((None, 1), lambda s: s <= 1),
                            (range(1, 4, 2), lambda s: s in (1, 3)), (range(0, 2), lambda s: s < 2),
                            ([3, 0], lambda s: s in (0, 3)), (np.int64(3), lambda s: s == 3)):
            want = filtered(tens, steps=pred)
            check(len(want) > 0, "steps=%r selects nothing" % (steps,))
            same_rows(rows_of(t.tensors(steps=steps), TENSOR_COLS), want, "tensors(steps=%r)" % (steps,))
            same_rows(rows_of(t.allocations(steps=steps), ALLOC_COLS), filtered(allocs, steps=pred),
                      "allocations(steps=%r)" % (steps,))
        for steps in ([], (3, 1), range(5, 5), 99):
            check(rows_of(t.tensors(steps=steps), TENSOR_COLS) == [], "steps=%r is not empty" % (steps,))
        same_rows(rows_of(t.tensors(ranks=0), TENSOR_COLS), tens, "ranks=0")
        check(rows_of(t.tensors(ranks=[5]), TENSOR_COLS) == [], "ranks=[5] is not empty")
        same_rows(rows_of(t.tensors(name="L0.attn.*"), TENSOR_COLS),
                  filtered(tens, name=lambda n: n.startswith("L0.attn.")), "name=L0.attn.*")
        same_rows(rows_of(t.tensors(name="loss"), TENSOR_COLS), filtered(tens, name=lambda n: n == "loss"),
                  "name=loss")
        check(len(filtered(tens, name=lambda n: n == "loss")) == 4, "one loss per step")
        same_rows(rows_of(t.tensors(name=re.compile(r"^grad\..*\.w$")), TENSOR_COLS),
                  filtered(tens, name=lambda n: re.match(r"^grad\..*\.w$", n) is not None), "name=regex")
        # tfdump --events --steps A:B --name GLOB --kind tensor selects the same records
        ours = rows_of(t.tensors(steps=(1, 2), name="L1.*"), TENSOR_COLS)
        theirs = tfdump_lines("--events", "--json", "--steps", "1:2", "--name", "L1.*", "--kind", "tensor", g)
        check(len(ours) > 0 and [(r["id"], r["name"]) for r in ours] == [(e["id"], e["name"]) for e in theirs],
              "tensors(steps=(1,2), name='L1.*') vs tfdump --steps 1:2 --name 'L1.*'")

    # a whole trace in shape mode and in health mode
    for mode in ("shape", "health"):
        tr = tftrain("%s.trace" % mode, "--steps", "2", extra=("--stats", mode))
        tens, _, _, _ = check_tables(tr)
        check(all(r["mode"] == mode for r in tens), "--stats %s: modes %s" % (mode, {r["mode"] for r in tens}))


@pytest.mark.usefixtures("needs_tftrain")
def test_mpi():
    if A.mpi != "ON" or not shutil.which("mpirun"):
        pytest.skip("no MPI (built with MPI=%s, mpirun %s)" % (A.mpi, shutil.which("mpirun")))
    out = os.path.join(TMP, "m.trace")
    run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", A.tftrace, "-q", "-o", out,
         "--", A.tftrain, "-q", "--steps", "3"])
    tens, colls, allocs, events = check_tables(out)
    check(sorted({r["rank"] for r in colls}) == [0, 1], "collectives of both ranks")
    check(any(r["type"] == "allreduce" for r in colls) and any(r["type"] == "bcast" for r in colls),
          "allreduce and bcast collectives")
    check(all(r["nranks"] == 2 and r["rank_in_comm"] == r["rank"] for r in colls), "communicator ranks")
    ids = {(r["rank"], r["seq"], r["id"]) for r in tens}
    res = [r for r in colls if r["phase"] == "exit" and r["result"] is not None]
    check(res and all((r["rank"], r["seq"], r["result"]) in ids for r in res),
          "every collective result is a tensor of its rank and op")
    with tftrace.open(out) as t:
        same_rows(rows_of(t.collectives(steps=1), COLL_COLS), filtered(colls, steps=lambda s: s == 1),
                  "collectives(steps=1)")
        same_rows(rows_of(t.collectives(ranks=[1]), COLL_COLS), filtered(colls, ranks={1}),
                  "collectives(ranks=[1])")
        same_rows(rows_of(t.tensors(ranks=1, steps=2), TENSOR_COLS),
                  filtered(tens, ranks={1}, steps=lambda s: s == 2), "tensors(ranks=1, steps=2)")
        check(t.summary() == tfdump_json("--json", out), "summary of the MPI trace")
        check(t.manifest["world_size"] == 2, "manifest world_size")


def npy_of(trace, *args):
    out = os.path.join(TMP, "x.npy")
    if os.path.exists(out):
        os.remove(out)
    run([A.tfdump, "--out", out] + list(args) + [trace])
    return np.load(out)


def same_captures(t, trace, what):
    """t.captures() (t: trace, opened) against tfdump --captures --json; its rows."""
    caps = rows_of(t.captures(), CAPTURE_COLS)
    want = [{"rank": c["rank"], "step": c["step"], "seq": c["seq"], "role": c["role"], "id": c["id"],
             "name": c["name"], "op": c["op"], "dtype": c["dtype"], "shape": tuple(c["shape"]),
             "bytes": c["bytes"], "present": c["present"], "parts": c["parts"],
             "complete": c["complete"]} for c in tfdump_lines("--captures", "--json", trace)]
    same_rows(caps, want, what)
    return caps


def same_array(got, want, what):
    check(isinstance(got, np.ndarray), "%s: not an ndarray: %r" % (what, type(got)))
    check(got.dtype == want.dtype and got.shape == want.shape,
          "%s: %s%s, want %s%s" % (what, got.dtype, got.shape, want.dtype, want.shape))
    check(got.tobytes() == want.tobytes(), "%s: values differ" % what)


@pytest.mark.usefixtures("needs_tftrain")
def test_capture():
    import dtdata
    for shuffled in (True, False):
        tr = mk_trace("mk%d.trace" % shuffled, env={} if shuffled else {"TFT_CAPTURE_SHUFFLE": "0"})
        parts = tfdump_lines("--events", "--json", "--kind", "capture", tr)
        # (one-byte elements and empty parts are never shuffled: nothing to gain)
        check(parts and all(p["shuffled"] == (shuffled and p["n"] > 0
                                              and p["dtype"] not in ("u8", "i8", "bool", "f8e4m3", "f8e5m2"))
                            for p in parts), "parts shuffled=%s" % shuffled)
        with tftrace.open(tr) as t:
            caps = same_captures(t, tr, "captures()")
            check(max(c["parts"] for c in caps) >= 3, "no capture of several parts")
            for step in (0, 1):
                for name in dtdata.arrays(step):
                    got = t.captured(name, step=step)
                    what = "%s@%d (shuffled=%s)" % (name, step, shuffled)
                    same_array(got, dtdata.expected(step, name), what + " vs recorded")
                    same_array(got, npy_of(tr, "--tensor", "%s@%d" % (name, step)), what + " vs tfdump")
            raw = t.captured("dt.bf16", step=1, bf16="raw")
            same_array(raw, dtdata.arrays(1)["dt.bf16"][1], "bf16 raw bits")
            same_array(raw, npy_of(tr, "--raw", "--tensor", "dt.bf16@1"), "bf16 raw vs tfdump --raw")
            for f8 in ("dt.f8e4m3", "dt.f8e5m2"):
                raw = t.captured(f8, step=1, fp8="raw")
                same_array(raw, dtdata.arrays(1)[f8][1], f8 + " raw bytes")
                same_array(raw, npy_of(tr, "--raw", "--tensor", f8 + "@1"), f8 + " raw vs tfdump --raw")
                dec = t.captured(f8, step=1, bf16="raw")  # bf16= leaves fp8 decoded
                check(dec.dtype == np.float32 and np.isnan(dec).sum() == (2 if f8 == "dt.f8e4m3" else 6)
                      and np.isinf(dec).sum() == (0 if f8 == "dt.f8e4m3" else 2), "%s decoded: %s" % (f8, dec))
            first = t.captured("dt.f16")  # no step: the first capture, step 0
            same_array(first, dtdata.expected(0, "dt.f16"), "dt.f16 without step")
            cid = [c for c in caps if c["name"] == "dt.i64" and c["step"] == 1][0]["id"]
            same_array(t.captured(cid), dtdata.expected(1, "dt.i64"), "by tensor id")
            with pytest.raises(KeyError) as raised:
                t.captured("dt.f32", step=5)
            e = raised.value
            check("dt.f32@0 (output)" in str(e) and "dt.u8@1 (output)" in str(e), "KeyError lists: %s" % e)
            with pytest.raises(KeyError) as raised:
                t.captured("dt.f32", rank=3)
            e = raised.value
            check("on rank 3" in str(e) and "dt.f32@0 (output)" in str(e), "KeyError for rank 3: %s" % e)

    # tftrain: inputs and outputs of the attention ops, as tfdump --tensor NAME picks them
    tr = tftrain("c.trace", "--steps", "3", extra=("--capture", "step=1,name=L0.attn.*"))
    with tftrace.open(tr) as t:
        caps = tfdump_lines("--captures", "--json", tr)
        check(len(caps) >= 10, "tftrain captured %d tensors" % len(caps))
        done, n_stats = set(), 0
        tensors = {(r["id"], r["step"]): r for r in rows_of(t.tensors(steps=1), TENSOR_COLS)}
        for c in caps:
            if c["name"] in done or c["role"] == "prior":
                continue
            done.add(c["name"])
            got = t.captured(c["name"], role=None)
            same_array(got, npy_of(tr, "--tensor", c["name"]), "tftrain %s" % c["name"])
            check(got.shape == tuple(c["shape"]), "shape of %s" % c["name"])
            same_array(t.captured(c["name"], role=c["role"], step=1, rank=0), got, "role=%s" % c["role"])
            if c["role"] == "output" and got.dtype.kind == "f":
                n_stats += 1
                rec = tensors[(c["id"], 1)]
                fin = got[np.isfinite(got)]
                check(rec["numel"] == got.size and rec["nan"] == int(np.isnan(got).sum())
                      and rec["min"] == float(fin.min()) and rec["max"] == float(fin.max())
                      and math.isclose(rec["mean"], float(fin.astype(np.float64).mean()), rel_tol=2.0**-49,
                                       abs_tol=2.0**-17 * float(fin.astype(np.float64).std()) + 1e-12),
                      "captured %s disagrees with its recorded statistics (mean within tft_stats.h's float-accumulation bound)" % c["name"])
        check("L0.attn.probs" in done and "tokens" in done and n_stats >= 4,
              "captures seen: %s, %d checked against their statistics" % (sorted(done), n_stats))
        same_array(t.captured("tokens", role="input"), npy_of(tr, "--tensor", "tokens"), "tokens (input)")
        with pytest.raises(KeyError) as raised:
            t.captured("tokens")
        e = raised.value
        check("tokens@1 (input)" in str(e), "KeyError for tokens as an output: %s" % e)


@pytest.mark.usefixtures("needs_tftrain")
def test_summary():
    g = tftrain("g.trace", "--steps", "2")
    mk = mk_trace("mk.trace")
    for tr in (g, mk, os.path.join(g, "rank-00000.tft")):
        with tftrace.open(tr) as t:
            s = t.summary()
            want = tfdump_json("--json", tr)
            check(s == want, "summary of %s differs from tfdump --json" % tr)
            check(s["records"] > 0 and s["tensors"] > 0 and s["integrity"] == "complete", "summary values")
            check(t.ranks == want["rank_ids"], "ranks of %s" % tr)
            if os.path.isdir(tr):
                with open(os.path.join(tr, "manifest.json")) as f:
                    m = json.load(f)
                check(t.manifest == m and t.manifest["run_id"] == s["manifest"]["run_id"], "manifest of %s" % tr)
            else:
                check(t.manifest is None, "a rank file has no manifest")
    # the three-line notebook example of docs/PYTHON.md
    t = tftrace.open(g)
    loss = t.tensors(name="loss")
    rows = rows_of(loss, TENSOR_COLS)
    check([r["step"] for r in rows] == [0, 1] and all(r["mean"] > 0 for r in rows), "loss rows %s" % rows)
    t.close()


@pytest.mark.usefixtures("needs_tftrain")
def test_diff():
    g = tftrain("g.trace", "--steps", "3")
    b = tftrain("b.trace", "--steps", "3", "--bug", "no-scale")

    def tfdiff(*args, ok=(0, 1)):
        return json.loads(run([A.tfdiff, "--json", "-q"] + list(args), ok=ok).stdout)

    d = tftrace.diff(g, b)
    check(d == tfdiff(g, b), "diff(g, b) vs tfdiff --json")
    check(d["verdict"] == "diverged" and d["first_divergence"]["tensor"] == "L0.attn.scores",
          "the no-scale divergence: %s" % d.get("first_divergence"))
    d = tftrace.diff(g, g)
    check(d == tfdiff(g, g) and d["verdict"] == "match", "diff(g, g)")
    with tftrace.open(g) as tg, tftrace.open(b) as tb:
        check(tftrace.diff(tg, tb) == tfdiff(g, b), "diff of Trace objects")
    d = tftrace.diff(g, b, rtol=0, atol=0, name="L0.*", steps=(0, 1), ranks=[0], collectives=True, quiet=False)
    want = tfdiff("--rtol", "0", "--atol", "0", "--name", "L0.*", "--steps", "0:1", "--ranks", "0",
                  "--collectives", g, b)
    check(d == want and d["tolerance"] == {"rtol": 0, "atol": 0, "roundoff": False}, "diff with options vs tfdiff")
    d = tftrace.diff(g, b, steps=(1, None), rtol=0.5)
    check(d == tfdiff("--steps", "1:", "--rtol", "0.5", g, b), "diff(steps=(1, None))")
    # --tensors: the captured tensors element by element (a flag alone changes the whole answer)
    spec = ("--capture", "step=0,name=L0.attn.scores")
    gc = tftrain("gc.trace", "--steps", "1", extra=spec)
    bc = tftrain("bc.trace", "--steps", "1", "--bug", "no-scale", extra=spec)
    d = tftrace.diff(gc, bc, tensors=True)
    check(d == tfdiff("--tensors", gc, bc) and d != tfdiff(gc, bc), "diff(tensors=True) vs tfdiff --tensors")
    check(tftrace.diff(gc, bc, tensors=True, rtol=2.0) == tfdiff("--tensors", "--rtol", "2.0", gc, bc),
          "diff(tensors=True, rtol=2.0)")
    junit = os.path.join(TMP, "j.xml")
    tftrace.diff(g, b, junit=junit)
    check(os.path.getsize(junit) > 0, "junit= wrote nothing")
    with pytest.raises(tftrace.TraceError) as raised:
        tftrace.diff(g, b, no_such_option=3)
    e = raised.value
    check(e.status == 2 and e.stderr, "an unknown option: %s" % e)


@pytest.mark.usefixtures("needs_tftrain")
def test_crafted():
    """A rank file written here with the library's writer (tft_format.h), its
    records packed with struct, not with the reader's Structures: layouts
    the recorder does not produce. A 1.1 COLLECTIVE record (104 bytes, no
    tag) followed by a record whose first bytes would read as a tag; a
    TENSOR before its OP record; an unknown kind; a string id the file never
    defines; modes and devices outside the enumerations; STACK records
    (tftrace --timeout's, FORMAT.md §5.16), one with frames the file never
    defines."""
    import ctypes as c
    import struct
    lib = c.CDLL(A.lib)
    lib.tft_writer_open.restype = c.c_void_p
    lib.tft_writer_open.argtypes = [c.c_char_p, c.c_char_p, c.c_void_p]
    lib.tft_writer_string.restype = c.c_uint64
    lib.tft_writer_string.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t]
    lib.tft_writer_append.argtypes = [c.c_void_p, c.c_char_p]
    lib.tft_writer_close.argtypes = [c.c_void_p]
    NONE = -(1 << 63)
    d = os.path.join(TMP, "crafted.trace")
    os.mkdir(d)
    # tft_file_info: major, minor, run_id[16], rank, world_size, pid, flags, realtime, monotonic, host[64]
    info = struct.pack("<HH16siiiI4xQQ64s", 1, 2, b"\x11" * 16, 0, 1, 4242, 0, 1, 2, b"crafted")
    w = lib.tft_writer_open(os.path.join(d, "rank-00000.tft").encode(), info, None)
    check(bool(w), "tft_writer_open failed")

    def s(text):
        return lib.tft_writer_string(w, text.encode(), len(text.encode()))

    def hdr(kind, length, ts, step, seq, flags=0):
        return struct.pack("<HHIQqq", kind, flags, length, ts, step, seq)

    stats = struct.pack("<9Q7d", 12, 1, 2, 3, 4, 5, 6, 7, 0xabcdef, -1.0, 2.0, 0.5, 0.25, 6.0, 3.0, 2.0)

    def tensor(ts, step, seq, tid, name_id, dtype, dev_kind, dev, mode, shape):
        body = struct.pack("<QQBBhBB2x", tid, name_id, dtype, dev_kind, dev, mode, len(shape))
        body += struct.pack("<8q", *(list(shape) + [0] * (8 - len(shape)))) + stats
        return hdr(4, 32 + len(body), ts, step, seq) + body

    def op(ts, step, seq, name, scope, ins=(), outs=(), attrs=()):
        body = struct.pack("<QQHBBB3x", name, scope, 0, len(ins), len(outs), len(attrs))
        body += struct.pack("<%dQ" % (len(ins) + len(outs)), *(list(ins) + list(outs)))
        body += struct.pack("<%dq" % len(attrs), *attrs)
        return hdr(3, 32 + len(body), ts, step, seq) + body

    def coll(ts, step, seq, typ, tag=None, flags=2):
        body = struct.pack("<7QHBBiii", 0xc0ffee, 3, 64, 10, 20, 0, s("MPI_Send"), typ, 0, 0, 1, 0, 2)
        if tag is not None:
            body += struct.pack("<iI", tag, 0)
        return hdr(7, 32 + len(body), ts, step, seq, flags) + body

    recs = [
        hdr(2, 40, 1, 0, NONE) + struct.pack("<II", 0, 0),                   # step 0 begins
        tensor(2, 0, 5, 1, s("early"), 0, 0, -1, 2, (3, 4)),                  # before op 5's record
        op(3, 0, 5, s("late_op"), s("L9/blk"), ins=(1,), outs=(1, 2), attrs=(-7, 8)),
        coll(4, 0, 6, 7),                                                     # a 1.1 record: no tag
        tensor(5, 0, 6, 2, s("after"), 2, 1, 3, 1, (5,)),                     # its first bytes: kind 4
        coll(6, 0, 7, 8, tag=9, flags=1),                                     # a 1.2 recv, entered
        tensor(7, 0, 8, 3, 0x1234, 3, 5, 2, 7, ()),                          # undefined name, odd mode/device
        hdr(200, 48, 8, 0, NONE) + b"\0" * 16,                               # an unknown kind
        tensor(9, NONE, NONE, 4, s("outside"), 12, 0, -1, 0, (0,)),           # outside steps and ops
        hdr(2, 40, 10, 0, NONE) + struct.pack("<II", 1, 0),                  # step 0 ends
    ]
    # captures: "whole" (i32[6], two parts, the second byte-shuffled), "holed" (its middle part
    # lost: as in tfdump, the bytes counted present stop at the gap)
    whole = np.arange(-3, 3, dtype=np.int32) * 1000003

    def capture(ts, seq, tid, name, total, offset, data, shape, dtype=4, esz=4, shuffle=False):
        if shuffle:
            data = np.frombuffer(data, np.uint8).reshape(-1, esz).T.tobytes()
        body = struct.pack("<QQQIIQBBHI", tid, total, offset, len(data), 0, s(name), dtype, len(shape), 0, 0)
        body += struct.pack("<8q", *(list(shape) + [0] * (8 - len(shape)))) + data
        body += b"\0" * (-len(body) % 8)
        return hdr(12, 32 + len(body), ts, 1, seq, 1 if shuffle else 0) + body

    def stack(ts, pid, tid, source, flags, comm, summary, frames, note, nframes):
        body = struct.pack("<iiIIQQQQ", pid, tid, source, nframes, comm, summary, frames, note)
        return hdr(16, 32 + len(body), ts, NONE, NONE, flags) + body

    frames = ("#0  0x7fe0e964e017 __sched_yield+0x7 (libc.so.6+0xee017)\n"
              "#1  0x7fe0e97ab31a PMPI_Allreduce+0xfa (libmpi.so.40+0x6931a)\n"
              "? #2  0x5630d10e8242 main+0xf2 (mpi_hang+0x1242)\n")
    recs += [
        stack(18, 4242, 4242, 1, 0x1 | 0x2 | 0x4, s("mpi_hang"), s("MPI_Allreduce ← step ← main"), s(frames),
              s("the CFI walk stopped at main"), 3),
        stack(19, 4242, 4250, 3, 0x4, s("async"), 0, 0x5678, 0, 0),     # frames never defined, running
    ]
    raw = whole.tobytes()
    recs += [
        hdr(2, 40, 11, 1, NONE) + struct.pack("<II", 0, 0),
        op(12, 1, 9, s("mk"), 0),
        capture(13, 9, 10, "whole", 24, 0, raw[:8], (2, 3)),
        capture(14, 9, 10, "whole", 24, 8, raw[8:], (2, 3), shuffle=True),
        capture(15, 9, 11, "holed", 24, 0, raw[:8], (6,)),
        capture(16, 9, 11, "holed", 24, 16, raw[16:], (6,)),
        hdr(2, 40, 17, 1, NONE) + struct.pack("<II", 1, 0),
    ]
    for r in recs:
        check(lib.tft_writer_append(w, r) == 0, "tft_writer_append refused record kind %d" % r[0])
    check(lib.tft_writer_close(w) == 0, "tft_writer_close")

    tens, colls, _, events = check_tables(d)
    by = {r["name"]: r for r in tens}
    check(by["early"]["op"] == "late_op" and by["early"]["scope"] == "L9/blk", "a tensor before its op: %s" % by["early"])
    check([r["tag"] for r in colls] == [-1, 9] and [r["phase"] for r in colls] == ["exit", "enter"],
          "tags of a 1.1 send and a 1.2 recv: %s" % colls)
    check(by["after"]["dtype"] == "f16" and by["after"]["device"] == "cuda:3" and by["after"]["mode"] == "health"
          and by["after"]["mean"] is None and by["after"]["fingerprint"] == 0xabcdef, "after: %s" % by["after"])
    odd = by["#0000000000001234"]
    check(odd["mode"] == "?" and odd["device"] == "dev5:2" and odd["shape"] == () and odd["absmax"] == 2.0
          and odd["dtype"] == "bf16", "undefined name, odd mode and device: %s" % odd)
    out = by["outside"]
    check(out["step"] is None and out["seq"] is None and out["op"] is None and out["mode"] == "shape"
          and out["nan"] is None and out["dtype"] == "bool", "outside: %s" % out)
    check(any(e["kind"] == "unknown(200)" for e in events), "tfdump saw the unknown kind")
    check(sum(e["kind"] == "stack" for e in events) == 2, "tfdump saw the stacks")
    with tftrace.open(d) as t:
        unk = [e for e in t.events() if e["kind"] == "unknown(200)"]
        check(len(unk) == 1 and unk[0]["len"] == 48, "events() of the unknown kind: %s" % unk)
        st = list(t.events(kinds="stack"))
        check(len(st) == 2 and st[0]["pid"] == 4242 and st[0]["tid"] == 4242 and st[0]["main"] is True
              and st[0]["snapshot"] == "on-cpu" and st[0]["comm"] == "mpi_hang"
              and st[0]["summary"] == st[0]["name"] == "MPI_Allreduce ← step ← main"
              and st[0]["frames"] == frames.splitlines() and st[0]["note"] == "the CFI walk stopped at main",
              "stack: %s" % st[:1])
        check(st[1]["main"] is False and st[1]["snapshot"] == "running" and st[1]["frames"] == []
              and st[1]["summary"] is None and st[1]["note"] is None, "a stack without frames: %s" % st[1:])
        check(not any(e["kind"].startswith("unknown(16") for e in t.events()), "STACK read as unknown")
        o = [e for e in t.events(kinds="op")]
        check(o[0]["inputs"] == [1] and o[0]["outputs"] == [1, 2] and o[0]["attrs"] == [-7, 8], "op: %s" % o)
        check(t.manifest is None and t.ranks == [0], "a trace without manifest")
        caps = same_captures(t, d, "crafted captures()")
        check([(c["name"], c["complete"], c["present"]) for c in caps] == [("whole", True, 24), ("holed", False, 8)],
              "crafted captures: %s" % caps)
        same_array(t.captured("whole"), whole.reshape(2, 3), "whole (a shuffled second part)")
        same_array(t.captured("whole"), npy_of(d, "--tensor", "whole"), "whole vs tfdump")
        with pytest.raises(tftrace.TraceError) as raised:
            t.captured("holed")
        e = raised.value
        check("incomplete" in str(e) and "8 of 24 bytes" in str(e), "holed: %s" % e)

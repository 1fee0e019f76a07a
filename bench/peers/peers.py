"""Peers side by side: what ltrace, uftrace, a bpftrace uprobe counter and
tftrace each add per intercepted call, on two programs we did not tune for
any of them, each tool next to the untraced program in the same run,
alternated (every round runs untraced and then each tool once), best of REPS
per configuration. Run through bench/peers/bench_peers.sh, which installs
the tools; usage:

  peers.py BUILD_DIR [--reps R] [--only numpy|osu]

Programs (Debian's /usr/bin/python3, numpy over Debian's OpenBLAS, mpi4py
over Debian's Open MPI, OPENBLAS_NUM_THREADS=1):
  numpy  np_loop.py: `a @ b` on 16 x 16 float32 arrays, i.e. one cblas_sgemm
         of libblas.so.3 per matmul. The program times its own loop, so start-
         up and a tool's end-of-run work are not counted.
  osu    mpi4py's OSU broadcast benchmark (demo/osu_bcast.py), fetched at run
         time (TFT_OSU_BCAST=FILE, a clone of mpi4py at TFT_MPI4PY_REPO, or a
         pip install of mpi4py that ships its demos); when none is found, our
         own bcast_loop.py (the same loop: comm.Bcast of MPI.BYTE buffers).
         2 ranks under mpirun; rank 0's microseconds per broadcast of 8 bytes
         and of 1 MiB.
Tools, each on the symbol the program calls (cblas_sgemm, MPI_Bcast):
  ltrace    ltrace -o FILE -e SYMBOL (a breakpoint per call in the library's
            PLT, the call printed to FILE)
  uftrace   uftrace record --no-libcall -P SYMBOL@LIBRARY (dynamic patching
            of the function's entry, no PLT hooks). Debian's uftrace 0.13 does
            not patch PMPI_Bcast's entry (it records nothing there), so for MPI
            the probe is on ompi_coll_tuned_bcast_intra_dec_fixed in
            mca_coll_tuned.so, which Open MPI calls once per broadcast of more
            than 0 bytes.
  bpftrace  bpftrace -e 'uprobe:LIBRARY:SYMBOL /comm == "tftpeer"/ {@calls =
            count();}' -c PROGRAM (a kernel uprobe, counted in a map; the
            program runs as "tftpeer", a symbolic link to python3, so the count
            is its own: a uprobe on a library fires in every process using it)
  tftrace   tftrace --stats shape, and tftrace with the default settings
            (statistics full): the interposers of libtftrace.
Every tool's run is checked to have seen every call (its log, its report, its
count, tfdump's op/collective count); a tool that did not is reported as
skipped, not timed. A tftrace run that dropped records (tfdump's count) is
not counted: the log says so and the next round tries again. Output: a table and one BENCH-RESULT line per figure
(bench/README.md): ids peers.numpy.TOOL, peers.osu.TOOL (8 B broadcasts),
peers.osu1m.TOOL (1 MiB), metric delta, ns per call over untraced, no goal.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
MPIRUN = ["/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
TOOLS = ["ltrace", "uftrace", "bpftrace", "tftrace_shape", "tftrace_full"]
LABEL = {
    "untraced": "untraced",
    "ltrace": "ltrace -e",
    "uftrace": "uftrace -P",
    "bpftrace": "bpftrace uprobe count",
    "tftrace_shape": "tftrace --stats shape",
    "tftrace_full": "tftrace (default: full)",
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def lib_path(soname):
    """The real file of a library the dynamic linker resolves soname to."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m and m.group(1) == soname:
            return os.path.realpath(m.group(2))
    return None


def find_osu(tmp):
    """osu_bcast.py from mpi4py, copied into tmp; (path, where) or (None, why)."""
    env_file = os.environ.get("TFT_OSU_BCAST")
    if env_file and os.path.isfile(env_file):
        shutil.copy(env_file, os.path.join(tmp, "osu_bcast.py"))
        return os.path.join(tmp, "osu_bcast.py"), env_file
    repos = [os.environ.get("TFT_MPI4PY_REPO", ""), "/work/.mirror/mpi4py+mpi4py/repo"]
    for repo in repos:
        if not repo or not os.path.isdir(repo):
            continue
        r = subprocess.run(["git", "-C", repo, "show", "HEAD:demo/osu_bcast.py"], capture_output=True)
        if r.returncode == 0 and r.stdout:
            dst = os.path.join(tmp, "osu_bcast.py")
            with open(dst, "wb") as f:
                f.write(r.stdout)
            return dst, f"{repo} (git HEAD:demo/osu_bcast.py)"
    for d in glob.glob("/usr/local/lib/python3*/dist-packages/mpi4py") + glob.glob(
            "/usr/lib/python3/dist-packages/mpi4py"):
        for cand in (os.path.join(d, "demo", "osu_bcast.py"), os.path.join(d, "..", "demo", "osu_bcast.py")):
            if os.path.isfile(cand):
                shutil.copy(cand, os.path.join(tmp, "osu_bcast.py"))
                return os.path.join(tmp, "osu_bcast.py"), cand
    return None, "mpi4py's demo/osu_bcast.py not found (TFT_OSU_BCAST, TFT_MPI4PY_REPO, pip's mpi4py)"


OSU_DRIVER = """
import sys
sys.path.insert(0, sys.argv[1])
import osu_bcast
n = int(sys.argv[2])
nl = int(sys.argv[3])
osu_bcast.osu_bcast(skip=max(1, n // 10), loop=n, skip_large=max(1, nl // 10), loop_large=nl)
"""


class Runner:
    def __init__(self, build, tmp):
        self.tftrace = os.path.join(build, "tracer", "tftrace")
        self.tfdump = os.path.join(build, "analyzer", "tfdump")
        self.tmp = tmp
        self.env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
        for k in [k for k in self.env if k.startswith("TFT_")]:
            del self.env[k]
        # the program runs as "tftpeer" so the bpftrace counter sees only it
        self.py = os.path.join(tmp, "tftpeer")
        os.symlink(PY, self.py)
        self.n = 0

    def fresh(self, name):
        self.n += 1
        p = os.path.join(self.tmp, f"{name}.{self.n}")
        return p

    def run(self, cmd, timeout=600):
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        return r.stdout + r.stderr

    def summary(self, trace):
        out = subprocess.run([self.tfdump, "--json", trace], capture_output=True, text=True).stdout
        return json.loads(out)


def case_numpy(r, tool, n):
    """ns per matmul of np_loop.py under tool, after checking the tool saw them."""
    prog = [r.py, os.path.join(HERE, "np_loop.py"), str(n)]
    calls = n + 1000
    blas = lib_path("libblas.so.3")
    if tool == "untraced":
        out = r.run(prog)
    elif tool == "ltrace":
        f = r.fresh("ltrace")
        out = r.run(["ltrace", "-o", f, "-e", "cblas_sgemm"] + prog)
        seen = sum(1 for line in open(f) if "cblas_sgemm(" in line)
        check(seen, calls, "ltrace lines of cblas_sgemm")
        os.unlink(f)
    elif tool == "uftrace":
        d = r.fresh("uftrace")
        out = r.run(["uftrace", "record", "-d", d, "--no-libcall", "-P",
                     "cblas_sgemm@" + os.path.basename(blas)] + prog)
        check(uftrace_calls(d, "cblas_sgemm"), calls, "uftrace report calls of cblas_sgemm")
        shutil.rmtree(d)
    elif tool == "bpftrace":
        out = r.run(["bpftrace", "-e", f'uprobe:{blas}:cblas_sgemm /comm == "tftpeer"/ {{ @calls = count(); }}',
                     "-c", " ".join(prog)])
        check(bpf_calls(out), calls, "bpftrace @calls of cblas_sgemm")
    else:
        d = r.fresh("tft")
        mode = ["--stats", "shape"] if tool == "tftrace_shape" else []
        out = r.run([r.tftrace, "-q"] + mode + ["-o", d, "--"] + prog)
        s = r.summary(d)
        shutil.rmtree(d)
        if s.get("dropped", 0):
            raise Dropped(f"tftrace dropped {s['dropped']} records (tfdump)")
        if s.get("ops", 0) < calls:
            raise Skip(f"tfdump ops: {s.get('ops')}, expected at least {calls}")
    m = re.search(r"np_loop ns_per_call ([0-9.]+)", out)
    if not m:
        raise RuntimeError(f"no ns_per_call in np_loop's output: {out[-500:]}")
    return {"small": float(m.group(1))}


def case_osu(r, tool, osu, n, nl):
    """ns per broadcast (8 B and 1 MiB) of rank 0 under tool."""
    if osu:
        drv = os.path.join(r.tmp, "osu_driver.py")
        with open(drv, "w") as f:
            f.write(OSU_DRIVER)
        prog = [r.py, drv, os.path.dirname(osu), str(n), str(nl)]
        # sizes 0..8 KiB use loop+skip, 16 KiB..1 MiB loop_large+skip_large
        calls = 15 * (n + max(1, n // 10)) + 7 * (nl + max(1, nl // 10))
        empty = n + max(1, n // 10)  # the size-0 broadcasts return before the collective
    else:
        prog = [r.py, os.path.join(HERE, "bcast_loop.py"), str(n), str(nl)]
        calls = n + max(1, n // 10) + nl + max(1, nl // 10)
        empty = 0
    rank = "${OMPI_COMM_WORLD_RANK:-0}"
    q = " ".join(f"'{a}'" for a in prog)
    libmpi = lib_path("libmpi.so.40")
    if tool == "untraced":
        out = r.run(MPIRUN + prog)
    elif tool == "ltrace":
        f = r.fresh("ltrace")
        out = r.run(MPIRUN + ["sh", "-c", f"exec ltrace -o {f}.{rank} -e MPI_Bcast {q}"])
        for k in (0, 1):
            seen = sum(1 for line in open(f"{f}.{k}") if "MPI_Bcast(" in line)
            check(seen, calls, f"ltrace lines of MPI_Bcast, rank {k}")
            os.unlink(f"{f}.{k}")
    elif tool == "uftrace":
        d = r.fresh("uftrace")
        fn = "ompi_coll_tuned_bcast_intra_dec_fixed"
        out = r.run(MPIRUN + ["sh", "-c", f"exec uftrace record -d {d}.{rank} --no-libcall "
                              f"-P {fn}@mca_coll_tuned.so {q}"])
        for k in (0, 1):
            check(uftrace_calls(f"{d}.{k}", fn), calls - empty, f"uftrace report calls of {fn}, rank {k}")
            shutil.rmtree(f"{d}.{k}")
    elif tool == "bpftrace":
        out = r.run(["bpftrace", "-e", f'uprobe:{libmpi}:MPI_Bcast /comm == "tftpeer"/ {{ @calls = count(); }}',
                     "-c", " ".join(MPIRUN + prog)])
        check(bpf_calls(out), 2 * calls, "bpftrace @calls of MPI_Bcast (2 ranks)")
    else:
        d = r.fresh("tft")
        mode = ["--stats", "shape"] if tool == "tftrace_shape" else []
        out = r.run(MPIRUN + [r.tftrace, "-q"] + mode + ["-o", d, "--"] + prog)
        s = r.summary(d)
        shutil.rmtree(d)
        if s.get("dropped", 0):
            raise Dropped(f"tftrace dropped {s['dropped']} records (tfdump)")
        # barriers are collectives too: at least every broadcast
        if s.get("collectives", 0) < 2 * calls:
            raise Skip(f"tfdump collectives: {s.get('collectives')}, expected at least {2 * calls}")
    res = {}
    if osu:
        for m in re.finditer(r"^\s*(\d+)\s+([0-9.]+)\s*$", out, re.M):
            if m.group(1) == "8":
                res["small"] = float(m.group(2)) * 1000
            elif m.group(1) == str(1 << 20):
                res["large"] = float(m.group(2)) * 1000
    else:
        for m in re.finditer(r"^bcast (\d+) us_per_call ([0-9.]+)", out, re.M):
            res["small" if m.group(1) == "8" else "large"] = float(m.group(2)) * 1000
    if set(res) != {"small", "large"}:
        raise RuntimeError(f"no broadcast latencies in the output: {out[-800:]}")
    return res


class Skip(Exception):
    """The tool did not see the calls: no figure for it."""


class Dropped(Exception):
    """tftrace dropped records in this run: the round is not counted."""


def check(got, want, what):
    if got != want:
        raise Skip(f"{what}: {got}, expected {want}")


def uftrace_calls(d, fn):
    out = subprocess.run(["uftrace", "report", "-d", d], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) > 1 and f[-1] == fn and f[-2].isdigit():
            return int(f[-2])
    return 0


def bpf_calls(out):
    m = re.search(r"@calls: (\d+)", out)
    return int(m.group(1)) if m else 0


def measure(name, fn, tools, reps):
    """best-of-reps per configuration, alternated; {tool: {"small": ns, ...}}"""
    best, skipped = {}, {}
    for rnd in range(reps):
        for tool in ["untraced"] + tools:
            if tool in skipped:
                continue
            try:
                v = fn(tool)
            except Dropped as e:
                log(f"  round {rnd + 1} {name:6} {tool:14} not counted: {e}")
                continue
            except Skip as e:
                skipped[tool] = str(e)
                log(f"peers.{name}.{tool}: skipped: {e}")
                continue
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                skipped[tool] = f"failed: {e}"
                log(f"peers.{name}.{tool}: failed: {e}")
                continue
            log(f"  round {rnd + 1} {name:6} {tool:14} " + "  ".join(f"{k} {x:10.0f} ns" for k, x in v.items()))
            b = best.setdefault(tool, {})
            for k, x in v.items():
                b[k] = min(b.get(k, x), x)
    return best, skipped


def emit(prefix, what, best, key, tools):
    base = best.get("untraced", {}).get(key)
    rows = []
    for tool in tools:
        fig = best.get(tool, {}).get(key)
        if fig is None or base is None:
            continue
        rec = {"id": f"{prefix}.{tool}", "what": f"{LABEL[tool]}: {what}", "unit": "ns/call",
               "figure": round(fig, 1), "baseline": round(base, 1), "baseline_what": "untraced, same run",
               "metric": "delta", "value": round(fig - base, 1), "goal_op": "<=", "goal": None}
        rows.append(rec)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("TFT_BENCH_REPS", "3")))
    ap.add_argument("--only", choices=["numpy", "osu"])
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tft-bench-peers-")
    try:
        r = Runner(a.build, tmp)
        tools = [t for t in TOOLS if t.startswith("tftrace") or shutil.which(t)]
        for t in TOOLS:
            if t not in tools:
                log(f"peers: {t} not installed: skipped (bench/peers/bench_peers.sh installs it)")
        results = []
        load = os.getloadavg()
        if a.only in (None, "numpy"):
            if subprocess.run([PY, "-c", "import numpy"], capture_output=True).returncode != 0:
                log("peers.numpy: skipped: no numpy for /usr/bin/python3 (apt-get install python3-numpy)")
            else:
                # fewer calls under the slow tools; each figure is per call
                n = {"untraced": 100000, "ltrace": 3000, "uftrace": 20000, "bpftrace": 20000}
                best, _ = measure("numpy", lambda t: case_numpy(r, t, n.get(t, 100000)), tools, a.reps)
                results += emit("peers.numpy", "numpy 16x16 f32 a @ b (cblas_sgemm)", best, "small", tools)
        if a.only in (None, "osu"):
            have = subprocess.run([PY, "-c", "import mpi4py.MPI"], capture_output=True).returncode == 0
            if not (have and os.path.exists(MPIRUN[0])):
                log("peers.osu: skipped: no mpirun or no mpi4py for /usr/bin/python3")
            else:
                osu, where = find_osu(tmp)
                prog = "OSU osu_bcast.py" if osu else "bcast_loop.py"
                log(f"peers.osu: {prog} ({where})")
                # OSU's own loop counts (10,000 small, 100 large), fewer under the slow tools
                n = {"ltrace": (300, 20), "uftrace": (2000, 50), "bpftrace": (2000, 50)}
                default = (10000, 100) if osu else (20000, 100)
                best, _ = measure("osu", lambda t: case_osu(r, t, osu, *n.get(t, default)), tools, a.reps)
                results += emit("peers.osu", f"{prog}, 2 ranks, 8 B MPI_Bcast", best, "small", tools)
                results += emit("peers.osu1m", f"{prog}, 2 ranks, 1 MiB MPI_Bcast", best, "large", tools)
        print(f"\npeers: ns per call over untraced, best of {a.reps} alternated rounds, "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"{'id':30} {'untraced':>10} {'traced':>12} {'delta':>12}")
        for rec in results:
            print(f"{rec['id']:30} {rec['baseline']:10.0f} {rec['figure']:12.0f} {rec['value']:+12.0f}")
        for rec in results:
            print("BENCH-RESULT " + json.dumps(rec, separators=(",", ":")))
        return 0 if results else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

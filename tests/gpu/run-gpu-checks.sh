#!/bin/bash
# run-gpu-checks.sh — the checks of the CUDA side that need a GPU (issue 6;
# docs/GPU.md). Run from the repository root on a machine with an NVIDIA
# GPU, its driver, the CUDA toolkit and PyTorch:
#
#     bash tests/gpu/run-gpu-checks.sh
#
# It configures and builds what it needs (release, -DTFT_CUDA=ON), then runs
# each check on its own (one failing does not stop the others):
#   env        what the machine is (GPU, driver, toolkit, PyTorch)
#   build      configure + build of the needed targets
#   leak       tests/tracer/cuda_interpose/cuda_leak.cu: cudaMalloc without cudaFree
#              from step 2; tfdump --check and tfdiff must name the site
#   cublas     tests/tracer/cuda_interpose/cublas_prog.c: a cuBLAS/cuBLASLt GEMM
#              sequence with a planted difference in step 2; tfdiff must
#              name that GEMM; device statistics checked against the host
#   nccl       tests/tracer/cuda_interpose/nccl_prog.c: a one-rank NCCL all-reduce
#              (torch.distributed when nccl.h was not found): the collective
#              records and their result statistics
#   torch      tests/gpu/torch_train.py recorded three times (twice as is,
#              once with a change at step 3): same losses as untraced, NVTX
#              steps, GEMMs with device statistics, kernels, allocations;
#              tfdiff finds nothing between the two plain runs and step 3
#              in the changed one
# Results: one line per check (PASS/FAIL, seconds, key numbers) on stdout
# and in $OUT/gpu-results.txt when OUT is set, with each check's log under
# $OUT/logs/. Exit status: the number of failed checks (0 = all passed).
# Environment: TFT_GPU_BUILD_DIR (default build-gpu), TFT_GPU_JOBS (16),
# CUDA_ARCH (default: the GPU's, from nvidia-smi; else 90).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 100
B=${TFT_GPU_BUILD_DIR:-$root/build-gpu}
J=${TFT_GPU_JOBS:-16}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-gpu.XXXXXX")
results=$tmp/gpu-results.txt
failed=0
start=$SECONDS

finish() {
    echo "total: $((SECONDS - start)) s, $failed check(s) failed" | tee -a "$results"
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT/logs"
        cp "$results" "$OUT/gpu-results.txt"
        cp "$tmp"/*.log "$OUT/logs/" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap finish EXIT

# check NAME FUNCTION: runs FUNCTION in a subshell (set -e), its output in
# NAME.log; the result line carries the log's last line (the check's summary).
check() {
    local name=$1 fn=$2 t0=$SECONDS st
    # not "( ... ) || st=$?": that would turn set -e off inside
    ( set -eo pipefail; "$fn" ) >"$tmp/$name.log" 2>&1
    st=$?
    if [ "$st" = 0 ]; then
        echo "PASS $name ($((SECONDS - t0)) s): $(tail -n 1 "$tmp/$name.log")" | tee -a "$results"
    else
        failed=$((failed + 1))
        echo "FAIL $name ($((SECONDS - t0)) s, status $st): $(tail -n 3 "$tmp/$name.log" | tr '\n' ' ')" |
            tee -a "$results"
    fi
}

TFTRACE=$B/tracer/tftrace TFDUMP=$B/analyzer/tfdump TFDIFF=$B/analyzer/tfdiff
PROGS=$B/tests/tracer/cuda_interpose
# The launcher gives a traced program NVTX_INJECTION64_PATH and
# CUDA_INJECTION64_PATH (docs/INTERPOSE.md); none may leak in from outside.
unset NVTX_INJECTION64_PATH CUDA_INJECTION64_PATH

# traced NAME CMD...: CMD under tftrace into $tmp/NAME.trace; its stdout
# in $tmp/NAME.out and in the log (the check's set -o pipefail keeps its status)
traced() {
    local name=$1
    shift
    "$TFTRACE" -q --timeout 180 -o "$tmp/$name.trace" -- "$@" | tee "$tmp/$name.out"
}

# untraced NAME CMD...: the same without tftrace and its CUDA/NVTX injection
untraced() {
    local name=$1
    shift
    env -u NVTX_INJECTION64_PATH -u CUDA_INJECTION64_PATH "$@" | tee "$tmp/$name.out"
}

# ---- checks ------------------------------------------------------------------

env_info() {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
    nvcc --version | tail -n 2 || echo "no nvcc on PATH"
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" ||
        echo "no torch"
    echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1); $(nvcc --version | tail -n 1)"
}

build() {
    local arch=${CUDA_ARCH:-}
    if [ -z "$arch" ]; then
        arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
        [ -n "$arch" ] || arch=90
    fi
    export PATH=$PATH:/usr/local/cuda/bin
    cmake -S "$root" -B "$B" -DCMAKE_BUILD_TYPE=Release -DTFT_CUDA=ON -DTFT_BPF=OFF \
        -DTFT_WERROR=OFF -DBUILD_TESTING=ON -DCMAKE_CUDA_ARCHITECTURES="$arch"
    local targets="tftrace tftrace_cuda tftrace_launcher tfdump tfdiff cuda_leak cuda_cublas_prog"
    local help
    help=$(cmake --build "$B" --target help)
    if grep -qw cuda_nccl_prog <<<"$help"; then
        targets="$targets cuda_nccl_prog"
    fi
    # shellcheck disable=SC2086
    cmake --build "$B" -j "$J" --target $targets
    ls -l "$B/tracer/libtftrace-cuda.so"
    echo "built for sm_$arch: $targets"
}

leak() {
    untraced leak0 "$PROGS/cuda_leak" --steps 6
    traced leak_g "$PROGS/cuda_leak" --steps 6
    cmp "$tmp/leak0.out" "$tmp/leak_g.out"
    traced leak_b "$PROGS/cuda_leak" --steps 6 --leak 2
    "$TFDUMP" --events -k alloc,free "$tmp/leak_b.trace" | head -n 8
    "$TFDUMP" --check --json "$tmp/leak_g.trace" >"$tmp/leak_g.json" || true
    "$TFDUMP" --check --json "$tmp/leak_b.trace" >"$tmp/leak_b.json" || true
    local st=0
    "$TFDIFF" --json "$tmp/leak_g.trace" "$tmp/leak_b.trace" >"$tmp/leak_d.json" || st=$?
    python3 - "$tmp/leak_g.json" "$tmp/leak_b.json" "$tmp/leak_d.json" "$st" <<'PY'
import json, sys
g, b, d = (json.load(open(p)) for p in sys.argv[1:4])
assert g["leaks"] == [], ("golden has leaks", g["leaks"])
lb = [l for l in b["leaks"] if l["site"] == "cudaMalloc"]
assert lb, ("tfdump --check found no cudaMalloc leak", b["leaks"])
ld = [l for l in d["leaks"] if l["site"] == "cudaMalloc"]
assert ld, ("tfdiff found no cudaMalloc leak", d["leaks"], "exit", sys.argv[4])
print("leak: tfdump --check: site %s from step %s, %.0f bytes/step; tfdiff exit %s" %
      (lb[0]["site"], lb[0]["from_step"], lb[0]["bytes_per_step"], sys.argv[4]))
PY
}

cublas() {
    untraced cb0 "$PROGS/cuda_cublas_prog"
    traced cb_g "$PROGS/cuda_cublas_prog"
    cmp "$tmp/cb0.out" "$tmp/cb_g.out"
    traced cb_b "$PROGS/cuda_cublas_prog" --plant 2
    local st=0
    "$TFDIFF" --json "$tmp/cb_g.trace" "$tmp/cb_b.trace" >"$tmp/cb_d.json" || st=$?
    "$TFDIFF" "$tmp/cb_g.trace" "$tmp/cb_b.trace" | head -n 20 || true
    "$TFDUMP" --events --json -k tensor,op "$tmp/cb_g.trace" >"$tmp/cb_g.json"
    python3 - "$tmp/cb_g.json" "$tmp/cb_d.json" "$st" <<'PY'
import json, math, sys
recs = list(map(json.loads, open(sys.argv[1])))
d = json.load(open(sys.argv[2]))
assert sys.argv[3] == "1", ("tfdiff exit", sys.argv[3])
fd = d["first_divergence"]
assert fd and fd["step"] == 2 and fd["tensor"].startswith("cublasSgemm"), fd
ts = [r for r in recs if r["kind"] == "tensor"]
names = {t["name"] for t in ts}
for n in ("cublasSgemm", "cublasGemmEx", "cublasSgemmStridedBatched", "cublasLtMatmul"):
    assert n in names, (n, sorted(names))
full = [t for t in ts if t["mode"] == "full" and t["device"].startswith("cuda:")]
assert len(full) == len(ts), ("tensors without device statistics", [t for t in ts if t not in full][:3])
# device statistics of step 1's A (64 x 32, column-major: the first 2048 values) against the host
A = [t for t in ts if t["name"] == "cublasSgemm.A" and t["step"] == 1][0]
v = [((i * 7 + 1) % 13) * 0.125 - 0.5 for i in range(64 * 32)]
mean = sum(v) / len(v)
want = {"min": min(v), "max": max(v), "mean": mean, "l2": math.sqrt(sum(x * x for x in v)),
        "zero": sum(1 for x in v if x == 0)}
for k, w in want.items():
    assert abs(A["stats"][k] - w) <= 1e-9 * max(1, abs(w)), (k, A["stats"][k], w)
sb = [t for t in ts if t["name"] == "cublasSgemmStridedBatched"][0]
assert sb["shape"] == [4, 48, 64], sb["shape"]
print("cublas: %d tensors with device statistics; A of step 1 matches the host; tfdiff: %s at step %d" %
      (len(full), fd["tensor"], fd["step"]))
PY
}

nccl_c() {
    untraced nc0 "$PROGS/cuda_nccl_prog"
    traced nc "$PROGS/cuda_nccl_prog"
    cmp "$tmp/nc0.out" "$tmp/nc.out"
    "$TFDUMP" --events -k collective "$tmp/nc.trace" | head -n 6
    "$TFDUMP" --events --json -k collective,tensor "$tmp/nc.trace" >"$tmp/nc.json"
    python3 - "$tmp/nc.json" <<'PY'
import json, sys
recs = list(map(json.loads, open(sys.argv[1])))
ex = [r for r in recs if r["kind"] == "collective" and r["phase"] == "exit"]
ar = [r for r in ex if r["name"] == "ncclAllReduce"]
assert len(ar) == 6 and all(r["nranks"] == 1 and r["comm_rank"] == 0 and r["count"] == 1024 for r in ar), ar
assert len({r["comm"] for r in ex}) == 1 and [r["coll_seq"] for r in ex] == list(range(len(ex))), ex
res = [t for t in recs if t["kind"] == "tensor" and t["name"] == "ncclAllReduce"]
assert len(res) == 6 and all(t["mode"] == "full" for t in res), res
assert res[0]["stats"]["max"] == 9 and res[0]["stats"]["min"] == 0, res[0]["stats"]
print("nccl: %d collectives (comm %s), %d result tensors with device statistics" % (len(ex), ex[0]["comm"], len(res)))
PY
}

nccl_torch() {
    python3 -c "import torch.distributed as d; assert d.is_nccl_available()"
    untraced nt0 python3 "$root/tests/gpu/torch_train.py" --steps 3 --dist
    traced nt python3 "$root/tests/gpu/torch_train.py" --steps 3 --dist
    cmp "$tmp/nt0.out" "$tmp/nt.out"
    "$TFDUMP" --events --json -k collective "$tmp/nt.trace" >"$tmp/nt.json"
    python3 - "$tmp/nt.json" <<'PY'
import json, sys
ex = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "collective" and r["phase"] == "exit"]
ar = [r for r in ex if r["name"] == "ncclAllReduce"]
assert len(ar) >= 12 and all(r["nranks"] == 1 for r in ar), ex[:4]
print("nccl (torch.distributed): %d ncclAllReduce records" % len(ar))
PY
}

nccl() {
    if [ -x "$PROGS/cuda_nccl_prog" ]; then nccl_c; else nccl_torch; fi
}

torch_check() {
    python3 -c "import torch; assert torch.cuda.is_available()"
    local T=$root/tests/gpu/torch_train.py t0 t1 st=0 st2=0
    t0=$SECONDS
    untraced t0 python3 "$T"
    t1=$SECONDS
    traced t_g python3 "$T"
    local t2=$SECONDS
    cmp "$tmp/t0.out" "$tmp/t_g.out"
    traced t_g2 python3 "$T"
    traced t_b python3 "$T" --change 3
    "$TFDIFF" --json "$tmp/t_g.trace" "$tmp/t_g2.trace" >"$tmp/t_same.json" || st2=$?
    "$TFDIFF" --json "$tmp/t_g.trace" "$tmp/t_b.trace" >"$tmp/t_d.json" || st=$?
    "$TFDIFF" "$tmp/t_g.trace" "$tmp/t_b.trace" | head -n 20 || true
    "$TFDUMP" "$tmp/t_g.trace" | head -n 30
    "$TFDUMP" --events --json "$tmp/t_g.trace" >"$tmp/t_g.json"
    python3 - "$tmp/t_g.json" "$tmp/t_d.json" "$st" "$tmp/t_same.json" "$st2" "$((t1 - t0))" "$((t2 - t1))" <<'PY'
import collections, json, sys
recs = list(map(json.loads, open(sys.argv[1])))
kinds = collections.Counter(r["kind"] for r in recs)
steps = sorted({r["step"] for r in recs if r["kind"] == "step"})
assert steps == list(range(8)), steps
gemms = [r for r in recs if r["kind"] == "op" and r.get("op_kind") == "gemm"]
full = [r for r in recs if r["kind"] == "tensor" and r["mode"] == "full" and r["device"].startswith("cuda")]
assert gemms and full, ("no GEMMs / device statistics", kinds)
assert kinds["kernel"] > 0 and kinds["alloc"] > 0, ("no kernels / allocations", kinds)
scopes = collections.Counter(r["scope"] for r in gemms)
same = json.load(open(sys.argv[4]))
assert sys.argv[5] == "0" and same["first_divergence"] is None, ("two plain runs differ", sys.argv[5], same["first_divergence"])
d = json.load(open(sys.argv[2]))
fd = d["first_divergence"]
assert sys.argv[3] == "1" and fd and fd["step"] == 3, ("tfdiff", sys.argv[3], fd)
print("torch: %d GEMM ops (scopes %s), %d device tensors, %d kernels, %d allocs; plain runs equal; "
      "change found at step %d (%s); untraced %s s, traced %s s" %
      (len(gemms), dict(scopes), len(full), kinds["kernel"], kinds["alloc"], fd["step"], fd["tensor"],
       sys.argv[6], sys.argv[7]))
PY
}

check env env_info
check build build
if [ -x "$TFTRACE" ] && [ -f "$B/tracer/libtftrace-cuda.so" ]; then
    check leak leak
    check cublas cublas
    check nccl nccl
    check torch torch_check
else
    echo "FAIL checks: not built" | tee -a "$results"
    failed=$((failed + 1))
fi
exit "$failed"

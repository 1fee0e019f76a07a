#!/usr/bin/env bash
# Peers side by side (bench/peers/peers.py): the per-call cost of ltrace,
# uftrace, a bpftrace uprobe counter and tftrace on a numpy matmul loop and
# on mpi4py's OSU broadcast benchmark, each against the untraced program in
# the same run. A benchmark, not a test.
#   bench/peers/bench_peers.sh [BUILD_DIR] [--reps R] [--only numpy|osu]
# BUILD_DIR (default build) holds tracer/tftrace and analyzer/tfdump.
# Installs what is missing with apt-get (root only; TFT_PEERS_NO_INSTALL=1
# installs nothing, and a missing tool is then skipped): the peers ltrace,
# uftrace, bpftrace, and the programs' python3-numpy, python3-mpi4py and
# openmpi-bin. bpftrace needs root (uprobes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
[ -x "$build/tracer/tftrace" ] && [ -x "$build/analyzer/tfdump" ] \
    || { echo "bench_peers.sh: $build/tracer/tftrace or $build/analyzer/tfdump missing (build them, or give the build dir)" >&2; exit 2; }
missing=()
command -v ltrace >/dev/null || missing+=(ltrace)
command -v uftrace >/dev/null || missing+=(uftrace)
command -v bpftrace >/dev/null || missing+=(bpftrace)
[ -x /usr/bin/mpirun ] || missing+=(openmpi-bin)
/usr/bin/python3 -c 'import numpy' 2>/dev/null || missing+=(python3-numpy)
/usr/bin/python3 -c 'import mpi4py' 2>/dev/null || missing+=(python3-mpi4py)
if [ ${#missing[@]} -gt 0 ]; then
    if [ -z "${TFT_PEERS_NO_INSTALL:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "bench_peers.sh: installing ${missing[*]} (apt-get)" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
    else
        echo "bench_peers.sh: not installed: ${missing[*]} (skipped; run as root to install them)" >&2
    fi
fi
exec python3 "$here/peers.py" "$build" "$@"

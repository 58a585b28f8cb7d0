#!/usr/bin/env bash
# Instructions per numthunk.bind and free (Python call included), counted by
# callgrind (repeatable whatever else the machine does): the same script
# runs N and 2N binds of a thunk over sum(double *, int) with an array and
# its size() bound, each dropped at once, and the difference divided by N
# is the cost of one.
#
#   bash bench/callgrind_bind.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# the same run twice gives the same count: no hash randomisation, no BLAS
# threads spinning beside it
export PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1
# this tree's numthunk (built in place), not whatever the environment has
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
cat > "$out/bind.py" <<'PY'
import sys
import numpy as np
import numthunk as nt
k = nt._core._kernels()
fn = nt.Function(k["sum"], "double (const double *, int)")
vec = np.arange(4.0)
size = nt.size(vec)
for _ in range(200):                    # warm: plan cache, registry, quarantine
    nt.bind(fn, vec, size)
for _ in range(int(sys.argv[1])):
    t = nt.bind(fn, vec, size)
    del t
PY
count() {  # binds -> total instructions (Ir)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" python "$out/bind.py" "$1" \
        >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
    callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
a=$(count "$n"); b=$(count $((2 * n)))
printf 'instructions per bind and free: %d\n' $(( (b - a) / n ))

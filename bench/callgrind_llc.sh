#!/usr/bin/env bash
# Instructions per LowLevelCallable made and dropped, counted by callgrind
# (repeatable whatever else the machine does): N and 2N calls of one of
#   thunk     t.lowlevelcallable() of a thunk over sum(double *, int)
#   function  Function.lowlevelcallable() of sum itself
#   scipy     SciPy's own LowLevelCallable(capsule) on a ready capsule
# the difference divided by N is the cost of one.
#
#   bash bench/callgrind_llc.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-5000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1
# this tree's numthunk (built in place), not whatever the environment has
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
cat > "$out/llc.py" <<'PY'
import sys
import numpy as np
from scipy import LowLevelCallable
import numthunk as nt
k = nt._core._kernels()
fn = nt.Function(k["sum"], "double (const double *, int)")
t = nt.bind(fn, np.arange(4.0), 4)
capsule = nt._core._capsule(t.address, "double (void)", t)
make = {"thunk": t.lowlevelcallable, "function": fn.lowlevelcallable,
        "scipy": lambda: LowLevelCallable(capsule)}[sys.argv[2]]
for _ in range(200):                    # warm: caches, the SciPy import
    make()
for _ in range(int(sys.argv[1])):
    make()
PY
count() {  # N, way -> total instructions (Ir)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" python "$out/llc.py" "$1" "$2" \
        >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
    callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
for way in thunk function scipy; do
    a=$(count "$n" "$way"); b=$(count $((2 * n)) "$way")
    printf 'instructions per LowLevelCallable (%s): %d\n' "$way" $(( (b - a) / n ))
done

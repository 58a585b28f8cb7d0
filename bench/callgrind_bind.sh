#!/usr/bin/env bash
# Instructions per numthunk.bind and free (Python call included), counted by
# callgrind (repeatable whatever else the machine does): the same script
# runs N and 2N binds of a thunk over sum(double *, int) with an array and
# its size() bound, each dropped at once, and the difference divided by N
# is the cost of one. Three loops:
#   module    the loop at module level (its variables in the module dict,
#             about 1,200 of the count are the loop's own)
#   function  the same loop in a function (fast locals)
#   capi      the C API's numthunk_create and a drop, in a C loop
#             (tests/capi/ntcapi_ext.c, the same target and values)
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
way = sys.argv[2]
if way == "capi":
    sys.path.insert(0, sys.argv[3])
    import ntcapi_ext
    ntcapi_ext.create_psum_loop(vec, size, 200)   # warm, as below
    ntcapi_ext.create_psum_loop(vec, size, int(sys.argv[1]))
    sys.exit()
for _ in range(200):                    # warm: plan cache, registry, quarantine
    nt.bind(fn, vec, size)
if way == "module":
    for _ in range(int(sys.argv[1])):
        t = nt.bind(fn, vec, size)
        del t
else:
    def loop(n):
        for _ in range(n):
            t = nt.bind(fn, vec, size)
            del t
    loop(int(sys.argv[1]))
PY
capi="$(python tests/capi/build_capi.py | tail -n 1)"
count() {  # binds, way -> total instructions (Ir)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" python "$out/bind.py" "$1" "$2" "$capi" \
        >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
    callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
for way in module function capi; do
    a=$(count "$n" "$way"); b=$(count $((2 * n)) "$way")
    printf 'instructions per bind and free (%s): %d\n' "$way" $(( (b - a) / n ))
done

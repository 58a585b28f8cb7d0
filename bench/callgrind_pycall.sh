#!/usr/bin/env bash
# Instructions per call of a thunk from Python (thunk(x)), counted by
# callgrind (repeatable whatever else the machine does): the same script
# makes N and 2N calls and the difference divided by N is the cost of one.
# A call from Python pins the thunk called and every thunk it reaches
# (docs/architecture.md, "In-flight count"), so the rows grow with what the
# thunk uses:
#   plain      hypot(3, x): no thunk below
#   composed   a thunk whose target is the plain one (one below)
#   chain-8    eight thunks, each the target of the next
#
#   bash bench/callgrind_pycall.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
cat > "$out/call.py" <<'PY'
import sys
import numthunk as nt
hypot = nt.Function.from_library("libm.so.6", "hypot", "double (double, double)")
plain = nt.bind(hypot, 3.0, nt.ARG)
way = sys.argv[2]
if way == "plain":
    t, args = plain, (4.0,)
elif way == "composed":
    t, args = nt.bind(plain, nt.ARG), (4.0,)
else:
    t = plain
    for _ in range(7):
        t = nt.bind(t, nt.ARG)
    args = (4.0,)
for _ in range(200):
    t(*args)
def loop(n):
    for _ in range(n):
        t(*args)
loop(int(sys.argv[1]))
PY
count() {  # calls, way -> total instructions (Ir)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" python "$out/call.py" "$1" "$2" \
        >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
    callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
for way in plain composed chain-8; do
    a=$(count "$n" "$way"); b=$(count $((2 * n)) "$way")
    printf 'instructions per call from Python (%s): %d\n' "$way" $(( (b - a) / n ))
done

#!/usr/bin/env bash
# Instructions per pass of a thunk (and of an array) into an @njit function,
# and per call of a thunk from an @njit loop (through its address, and with
# its @cfunc target inlined), counted by callgrind
# (repeatable whatever else the machine does): Python runs the same script
# with nothing measured and with N passes (calls) after compiling
# everything, and the difference divided by N is the cost of one. Each run
# takes a few minutes under callgrind.
#
#   bash bench/callgrind_numba.sh [PASSES] [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
passes="${1:-20000}"
calls="${2:-1000000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# the same run twice gives the same count: no hash randomisation, no BLAS
# threads spinning beside it
export PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1
count() {  # kind n -> total instructions (Ir)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
        python bench/bench_numba.py --count "$1" "$2" >/dev/null 2>&1
    callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
base=$(count none 0)
printf '%-12s %10s\n' kind "instr/each"
for kind in thunk-pass array-pass; do
    printf '%-12s %10d\n' "$kind" $(( ($(count "$kind" "$passes") - base) / passes ))
done
for kind in direct-call thunk-call inline-call; do
    printf '%-12s %10d\n' "$kind" $(( ($(count "$kind" "$calls") - base) / calls ))
done

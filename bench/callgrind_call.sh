#!/usr/bin/env bash
# Instructions per call on the call path, counted by callgrind (repeatable
# whatever else the machine does): each loop kind runs N and 2N calls, and
# the difference divided by N is the cost of one call.
#
#   bash bench/callgrind_call.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-100000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
gcc -O2 -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -Isrc src/engine/choose.c src/engine/native.c \
    src/engine/route.c src/life/quarantine.c src/life/fork.c src/life/released.c src/engine/ffi.c src/kinds.c src/parse/spellings.c src/parse/declarator.c \
    src/plan/plan.c \
    tests/c/test_native.c -o "$out/test_native" -lffi -ldl -lpthread
count() {  # kind calls -> total instructions (Ir)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$out/test_native" loop "$1" "$2" \
        >/dev/null 2>&1
    callgrind_annotate "$out/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
printf '%-14s %12s %14s\n' kind "instr/call" "over direct"
declare -A per
for kind in direct pointer thunk many-direct many-thunk; do
    a=$(count "$kind" "$n"); b=$(count "$kind" $((2 * n)))
    per[$kind]=$(( (b - a) / n ))
done
for kind in direct pointer thunk; do
    printf '%-14s %12d %+14d\n' "$kind" "${per[$kind]}" $(( per[$kind] - per[direct] ))
done
for kind in many-direct many-thunk; do
    printf '%-14s %12d %+14d\n' "$kind" "${per[$kind]}" $(( per[$kind] - per[many-direct] ))
done

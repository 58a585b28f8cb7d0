#!/usr/bin/env bash
# The AArch64 Linux engine, tested without arm hardware: cross-compiles the
# pure-C parts (signature parser, plan builder, engine, executable memory)
# and their C harnesses with Debian's gcc-aarch64-linux-gnu and runs them
# under qemu-user:
#   - tests/c/test_sig.c and the parser fuzz driver;
#   - tests/c/test_native.c: 2,500 random signatures against a recording
#     fixture built by the cross compiler (garbage above narrow arguments,
#     a 32-bit view of narrow ints, rebinding), permuted plans, W^X, the
#     released-thunk trap, BTI-guarded pages, fork, threads, quarantine;
#     then 500 of the signatures again on the mprotect memory policy, and
#     on 16 and 64 KiB pages (qemu's QEMU_PAGESIZE);
#   - Apple's arm64 ABI: the engine on that description (packed stack
#     arguments), on 16 KiB pages as on a Mac, against random signatures
#     whose callees and callers clang compiled for aarch64-macos (zig's,
#     from the ziglang test extra), their assembly carried into ELF by
#     tests/c/macho_to_elf.py;
#   - the emitted code of a few thunks, disassembled: instruction counts.
# Installs what it needs when run as root (apt-get; libffi for arm64 comes
# from Debian's multiarch archive, so arm64 is added as a foreign dpkg
# architecture), otherwise says what is missing. Exits non-zero on any
# failure.
#
#   bash tests/c/aarch64.sh            (NT_AARCH64_KEEP=1 keeps the build dir,
#                                       NT_AARCH64_INSTALL_ONLY=1 installs and exits)
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive

# ------------------------------------------------------------------ tools
CC=aarch64-linux-gnu-gcc
OBJDUMP=aarch64-linux-gnu-objdump
SYSROOT=/usr/aarch64-linux-gnu

find_qemu() {
    command -v qemu-aarch64 || command -v qemu-aarch64-static || true
}

missing=()
command -v "$CC" >/dev/null || missing+=(gcc-aarch64-linux-gnu)
command -v "$OBJDUMP" >/dev/null || missing+=(binutils-aarch64-linux-gnu)
[ -e "$SYSROOT/include/stdio.h" ] || missing+=(libc6-dev-arm64-cross)
[ -n "$(find_qemu)" ] || missing+=(qemu-user)
# the native engine falls back to libffi when executable memory runs out,
# so the harness links the arm64 libffi
dpkg -s libffi-dev:arm64 >/dev/null 2>&1 || missing+=(libffi-dev:arm64)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "aarch64.sh: missing ${missing[*]}; as root:" >&2
        echo "  dpkg --add-architecture arm64 && apt-get update &&" \
             "apt-get install ${missing[*]}" >&2
        exit 1
    fi
    dpkg --print-foreign-architectures | grep -qx arm64 \
        || dpkg --add-architecture arm64
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    # Debian names the emulator package qemu-user (bookworm and later) or
    # only ships qemu-user-static; take whichever the archive has.
    for i in "${!missing[@]}"; do
        if [ "${missing[$i]}" = qemu-user ] \
           && ! apt-cache policy qemu-user | grep -q 'Candidate: [0-9]'; then
            missing[$i]=qemu-user-static
        fi
    done
    echo "aarch64.sh: installing ${missing[*]}" >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
QEMU=$(find_qemu)
[ -n "$QEMU" ] || { echo "aarch64.sh: no qemu-aarch64 after install" >&2; exit 1; }
# NT_AARCH64_INSTALL_ONLY=1: the tools only (.ci/run installs every system
# package before its steps run side by side).
[ "${NT_AARCH64_INSTALL_ONLY:-0}" = 1 ] && exit 0

# The emulated programs run on Debian's multiarch arm64 libc (pulled in by
# libffi8:arm64; /lib/ld-linux-aarch64.so.1), not on the cross sysroot's:
# with QEMU_LD_PREFIX the sysroot's loader would meet the multiarch libc
# that libffi brings, and a forked child hangs. QEMU_CPU=max: every
# feature, BTI among them, which the harness requires to be enforced.
unset QEMU_LD_PREFIX
export QEMU_CPU=max

build=$(mktemp -d "${TMPDIR:-/tmp}/numthunk-aarch64.XXXXXX")
cleanup() {
    if [ "${NT_AARCH64_KEEP:-0}" = 1 ]; then
        echo "aarch64.sh: build kept in $build" >&2
    else
        rm -rf "$build"
    fi
}
trap cleanup EXIT

FLAGS=(-O2 -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE
       -mbranch-protection=standard -Isrc)
step() { printf '== %s\n' "$*"; }

# ------------------------------------------------------------------ build
step "cross-compiling with $($CC -dumpfullversion) for aarch64"
"$CC" "${FLAGS[@]}" src/kinds.c src/parse/spellings.c src/parse/declarator.c tests/c/test_sig.c \
    -o "$build/test_sig" -lffi
"$CC" "${FLAGS[@]}" -DNT_FUZZ_STANDALONE src/kinds.c src/parse/spellings.c src/parse/declarator.c \
    tests/c/fuzz_sig.c -o "$build/fuzz_sig" -lffi
# engine/choose.c includes engine/arch/aarch64.c and the the engine/memory/ files policies on aarch64
"$CC" "${FLAGS[@]}" src/engine/choose.c src/engine/native.c src/engine/route.c src/life/quarantine.c src/life/fork.c src/life/released.c \
    src/engine/ffi.c src/kinds.c src/parse/spellings.c src/parse/declarator.c src/plan/plan.c tests/c/test_native.c \
    -o "$build/test_native" -lffi -ldl -lpthread

# ------------------------------------------------------------------ parser
step "signature parser under $(basename "$QEMU")"
"$QEMU" "$build/test_sig"
"$QEMU" "$build/fuzz_sig" 20000 20261129

# ------------------------------------------------------------------ fixture
# The harness writes the recording fixture (the same signatures it will
# check), the cross compiler builds it: the compiler is the ABI's oracle.
NSIG=2500
SEED=20261129
PARTS=4
step "recording fixture: $NSIG random signatures, $PARTS parts"
"$QEMU" "$build/test_native" writefix "$build/fx" "$NSIG" "$SEED" "$PARTS"
pids=()
for ((p = 0; p < PARTS; p++)); do
    "$CC" -O2 -fPIC -w -mbranch-protection=standard -c "$build/fx.$p.c" \
        -o "$build/fx.$p.o" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$CC" -shared -o "$build/fx.so" "$build"/fx.*.o

# ------------------------------------------------------------------ engine
run_harness() {   # policy, count, log, page size (bytes; default 4096)
    local policy=$1 count=$2 log=$3 page=${4:-4096}
    step "native engine, memory policy ${policy:-default}, $count signatures, $page-byte pages"
    # QEMU_PAGESIZE: the page size the program sees (sysconf, the alignment
    # of mmap), in the harness and in the children it runs through qemu
    if ! NT_FIXTURE_LIB="$build/fx.so" NT_EXEC_WRAPPER="$QEMU" \
         NT_REQUIRE_BTI=1 NUMTHUNK_EXECMEM="$policy" QEMU_PAGESIZE="$page" \
         "$QEMU" "$build/test_native" "$count" "$SEED" >"$log" 2>"$log.err"; then
        cat "$log.err" "$log" >&2
        echo "aarch64.sh: the native engine harness failed" >&2
        return 1
    fi
    # the control call past a landing pad faults on purpose; qemu says so
    grep -v '^qemu: uncaught target signal 4' "$log.err" || true
    grep -q "^engine native-aarch64-linux, memory policy .*, page $page\$" "$log.err" \
        || { echo "aarch64.sh: not the aarch64 engine on $page-byte pages" >&2; return 1; }
    grep -q '^all native engine tests passed$' "$log" \
        || { cat "$log" >&2; return 1; }
    cat "$log"
}
run_harness "" "$NSIG" "$build/native.log"
run_harness mprotect 500 "$build/native-mprotect.log"
# Larger pages, where a block holds more stubs and its slot page is larger:
# 16 KiB (macOS on Apple silicon, Asahi Linux) and 64 KiB (arm64 kernels
# built with them), on both policies.
run_harness "" 500 "$build/native-16k.log" 16384
run_harness mprotect 500 "$build/native-64k-mprotect.log" 65536

# ------------------------------------------------------------------ Apple
# The same random signatures for Apple's arm64 ABI: the harness writes
# them, clang for aarch64-macos compiles them (callees and the callers of
# the thunks: both sides are that compiler's), tests/c/macho_to_elf.py
# carries the assembly into ELF, the cross toolchain links it, and the
# engine runs on the Apple description (test_native.c's "apple"). No
# vectorizing: Apple's vector syntax is not GNU as's, and the calling
# convention does not depend on it.
PY=${PYTHON:-python3}
"$PY" -m ziglang version >/dev/null 2>&1 \
    || { echo "aarch64.sh: $PY -m ziglang is needed (the ziglang test extra)" >&2; exit 1; }
export ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$build/zig-cache}
export ZIG_LOCAL_CACHE_DIR=${ZIG_LOCAL_CACHE_DIR:-$build/zig-cache}
step "Apple arm64 ABI: $NSIG random signatures compiled for aarch64-macos, $PARTS parts"
apple_start=$SECONDS
"$QEMU" "$build/test_native" apple writefix "$build/afx" "$NSIG" "$SEED" "$PARTS"
pids=()
for ((p = 0; p < PARTS; p++)); do
    ( "$PY" -m ziglang cc -target aarch64-macos -S -O2 -g0 -w -fno-vectorize \
          -fno-slp-vectorize "$build/afx.$p.c" -o "$build/afx.$p.macho.s" \
      && "$PY" tests/c/macho_to_elf.py "$build/afx.$p.macho.s" "$build/afx.$p.s" \
      && "$CC" -c "$build/afx.$p.s" -o "$build/afx.$p.o" ) &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
# -Bsymbolic: Apple's code reaches its own globals pc-relative (adrp), which
# an ELF shared object allows only for symbols that bind locally
"$CC" -shared -Wl,-Bsymbolic -o "$build/afx.so" "$build"/afx.*.o
# On 16 KiB pages, as macOS on Apple silicon has them.
step "native engine on the aarch64-apple description, $NSIG signatures, 16 KiB pages"
if ! NT_FIXTURE_LIB="$build/afx.so" QEMU_PAGESIZE=16384 \
     "$QEMU" "$build/test_native" apple "$NSIG" "$SEED" \
     >"$build/apple.log" 2>"$build/apple.log.err"; then
    cat "$build/apple.log.err" "$build/apple.log" >&2
    echo "aarch64.sh: the Apple ABI harness failed" >&2
    exit 1
fi
cat "$build/apple.log.err"
grep -q "^engine native-aarch64-.* on the aarch64-apple ABI, memory policy .*, page 16384\$" \
    "$build/apple.log.err" \
    || { echo "aarch64.sh: not the native engine on 16 KiB pages" >&2; exit 1; }
grep -q '^all native engine tests passed$' "$build/apple.log" \
    || { cat "$build/apple.log" >&2; exit 1; }
cat "$build/apple.log"
echo "Apple ABI pass: $((SECONDS - apple_start)) s (compiling its fixtures included)"

# ------------------------------------------------------------------ counts
# Instructions per call, read from the emitted code: the stub, then the
# handler up to its tail branch (br x17) or, in the frame form, its ret.
step "instructions per call (stub + handler), from the emitted code"
mkdir -p "$build/dump"
NUMTHUNK_EXECMEM=mprotect "$QEMU" "$build/test_native" dump "$build/dump"
disasm() {
    "$OBJDUMP" -D -b binary -m aarch64 "$1" \
        | awk -F'\t' '/^ +[0-9a-f]+:\t/ { print $3 "\t" $4 }'
}
stub_first=$(disasm "$build/dump/sum_bound.stub.bin" | head -1)
[ "$stub_first" = "bti	c" ] \
    || { echo "aarch64.sh: stub does not start with bti c: $stub_first" >&2; exit 1; }
printf '%-18s %5s %8s %8s\n' shape stub handler total
for f in "$build"/dump/*.handler.bin; do
    name=$(basename "$f" .handler.bin)
    nstub=$(disasm "$build/dump/$name.stub.bin" | awk 'END { print NR }')
    nhand=$(disasm "$f" | awk '{ n++ } /^(br\tx17|ret)/ { print n; exit }')
    [ -n "$nhand" ] || { echo "aarch64.sh: no final branch in $name" >&2; exit 1; }
    printf '%-18s %5d %8d %8d\n' "$name" "$nstub" "$nhand" $((nstub + nhand))
    if [ "${NT_AARCH64_VERBOSE:-0}" = 1 ]; then
        disasm "$f" | head -n "$nhand" | sed 's/^/    /'
    fi
done
step "aarch64: all passed"

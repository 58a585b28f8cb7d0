#!/usr/bin/env bash
# The native engine on Windows (Microsoft x64), tested without Windows:
# mingw-w64 builds the engine (engine/choose.c's _WIN64 branch, with the
# Windows memory policies) and tests/c/test_win64.c for Windows, without
# libffi (-DNT_WITHOUT_LIBFFI: none is built for mingw here), and Wine runs
# them:
#   - the signature parser's tests and fuzz driver, where long is 32 bits;
#   - the harness writes the recording fixtures of 1,000 random signatures,
#     mingw-w64 builds them into a DLL (the compiler is the ABI's oracle);
#   - the harness checks every signature through a thunk (bound and
#     forwarded, narrow ints with garbage above them, a rebind each), 3,000
#     permuted plans (cycles of moves), the code and slot pages' protections, and the released-thunk trap, on the
#     dual-view file mapping and again on VirtualProtect-sealed pages;
#   - NUMTHUNK_EXECMEM=none: no native plan, and the fallback says libffi
#     is not built in; NUMTHUNK_EXECMEM=memfd is refused, naming Windows'
#     policies.
# Installs wine64 and gcc-mingw-w64-x86-64 when run as root and missing,
# otherwise says what is missing and fails. Wine runs in a prefix of its
# own under tests/_build (set up on the first run, about ten seconds).
#
#   bash tests/c/win64.sh          (NT_WIN64_KEEP=1 keeps the build dir,
#                                   NT_WIN64_INSTALL_ONLY=1 installs and exits)
set -euo pipefail
cd "$(dirname "$0")/../.."
export DEBIAN_FRONTEND=noninteractive

CC=x86_64-w64-mingw32-gcc
find_wine() {
    command -v wine64 || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; } || true
}
missing=()
command -v "$CC" >/dev/null || missing+=(gcc-mingw-w64-x86-64)
[ -n "$(find_wine)" ] || missing+=(wine64)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "win64.sh: missing ${missing[*]}; as root: apt-get install ${missing[*]}" >&2
        exit 1
    fi
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    echo "win64.sh: installing ${missing[*]}" >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
WINE=$(find_wine)
[ -n "$WINE" ] || { echo "win64.sh: no wine64 after install" >&2; exit 1; }
[ "${NT_WIN64_INSTALL_ONLY:-0}" = 1 ] && exit 0

# A prefix of this tree's own, so that runs of several trees never share
# one, kept outside the tree: a Wine prefix links its drive z: to /, and a
# walk of the tree that follows links (setuptools' manifest, made by every
# sdist and egg_info) would walk the whole file system through it. No
# debug chatter, no display.
mkdir -p tests/_build
tree_id=$(printf '%s' "$PWD" | sha256sum | cut -c1-16)
export WINEPREFIX="${NUMTHUNK_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/numthunk-wine/$tree_id}"
mkdir -p "$(dirname "$WINEPREFIX")"
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" DISPLAY=
build=$(mktemp -d "$PWD/tests/_build/win64.XXXXXX")
cleanup() {
    if [ "${NT_WIN64_KEEP:-0}" = 1 ]; then
        echo "win64.sh: build kept in $build" >&2
    else
        rm -rf "$build"
    fi
}
trap cleanup EXIT
step() { printf '== %s\n' "$*"; }

# src/ includes numthunk's public headers as "../numthunk/include/...": an
# -I of the package's directory finds them from the tree, or beside an
# installed wheel when the tests run outside the tree (NT_PACKAGE_DIR, the
# installed package's directory, as tests/test_core_c.py passes it)
FLAGS=(-O2 -Wall -Wextra -Werror -std=c11 -DNT_WITHOUT_LIBFFI -Isrc -I"${NT_PACKAGE_DIR:-$PWD/numthunk}")
step "building with $($CC -dumpfullversion) for x86_64-w64-mingw32"
# engine/choose.c includes engine/arch/x86_64.c and the Windows policies
"$CC" "${FLAGS[@]}" src/engine/choose.c src/engine/native.c src/engine/route.c \
    src/life/quarantine.c src/life/fork.c src/life/released.c src/engine/ffi.c src/kinds.c src/parse/spellings.c \
    src/parse/declarator.c src/plan/plan.c tests/c/test_win64.c \
    -o "$build/test_win64.exe" -static -lpthread &
wineboot=$!
[ -d "$WINEPREFIX" ] || { "$WINE" wineboot --init >/dev/null 2>&1 || true; }
wait "$wineboot"

NSIG=1000
SEED=20261129
run() { (cd "$build" && "$WINE" ./test_win64.exe "$@"); }

# The parser and its fuzz driver where long is 32 bits (LLP64): every width
# comes from this compiler, and the messages say so.
step "signature parser under Wine (LLP64)"
"$CC" "${FLAGS[@]}" src/kinds.c src/parse/spellings.c src/parse/declarator.c tests/c/test_sig.c \
    -o "$build/test_sig.exe" -static
"$CC" "${FLAGS[@]}" -DNT_FUZZ_STANDALONE src/kinds.c src/parse/spellings.c \
    src/parse/declarator.c tests/c/fuzz_sig.c -o "$build/fuzz_sig.exe" -static
(cd "$build" && "$WINE" ./test_sig.exe && "$WINE" ./fuzz_sig.exe 20000 "$SEED")
step "recording fixture: $NSIG random signatures"
run writefix fx.c "$NSIG" "$SEED"
"$CC" -O2 -w -shared "$build/fx.c" -o "$build/fx.dll"

for policy in filemap virtualprotect; do
    step "native engine, memory policy $policy, $NSIG signatures under Wine"
    if ! NUMTHUNK_EXECMEM=$policy run "$NSIG" "$SEED" fx.dll >"$build/$policy.log" \
           2>"$build/$policy.err"; then
        cat "$build/$policy.err" "$build/$policy.log" >&2
        echo "win64.sh: the harness failed on $policy" >&2
        exit 1
    fi
    cat "$build/$policy.err" "$build/$policy.log"
    grep -q "^engine native-x86_64-win64, memory policy $policy" "$build/$policy.err" \
        || { echo "win64.sh: not the win64 engine on $policy" >&2; exit 1; }
    grep -q '^all native engine tests passed' "$build/$policy.log" || exit 1
done
step "no executable memory; a Linux policy named"
NUMTHUNK_EXECMEM=none run noexecmem
NUMTHUNK_EXECMEM=memfd run linuxpolicy
step "win64: all passed"

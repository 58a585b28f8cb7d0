#!/usr/bin/env bash
# tools/cross.sh TARGET...: compile every C file setup.py builds (its
# SOURCES: src/**/*.c but the platform files engine/choose.c includes) to an
# object for another platform, with -Wall -Wextra -Werror -Wvla -std=c11,
# against that platform's headers. Compiles only: nothing is linked or run.
#
#   aarch64-macos       clang (python -m ziglang cc, macOS's libc headers)
#   x86_64-macos        the same
#   x86_64-windows-gnu  mingw-w64 (x86_64-w64-mingw32-gcc)
#
# The headers, per target:
#   CPython  this interpreter's Include/ (the same on every platform) with
#            the target's pyconfig.h: for Windows CPython's own
#            PC/pyconfig.h, from the source of this CPython's minor version
#            (Debian's python3.X source package, fetched as tools/python.sh
#            fetches 3.13's); for macOS, this machine's pyconfig.h with what
#            Linux has and macOS lacks turned off (both are LP64: the sizes
#            agree), see macos_pyconfig below.
#   NumPy    numpy/_core/include from NumPy's wheel for the target, of the
#            version installed here (pip download --platform).
#   libffi   Debian's ffi.h for the target's architecture (x86_64's, and
#            arm64's from libffi-dev:arm64, which tests/c/aarch64.sh
#            installs), with what libffi's configure writes for the target:
#            X86_WIN64 for Windows (ffi_arg is 64 bits and the ABIs
#            FFI_WIN64/FFI_GNUW64 in ffitarget.h), the trampoline-table
#            closures of arm64 macOS (ffi_closure's layout). ffitarget.h
#            tests __APPLE__ and _WIN32 itself (ffi_cif's extra fields).
#
#   NUMTHUNK_CROSS_CACHE  downloads and derived headers (default
#                         ~/.cache/numthunk-cross), fetched once
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
[ $# -ge 1 ] || { echo "usage: $0 aarch64-macos|x86_64-macos|x86_64-windows-gnu ..." >&2; exit 2; }
say() { echo "cross.sh: $*" >&2; }

cache="${NUMTHUNK_CROSS_CACHE:-$HOME/.cache/numthunk-cross}"
mkdir -p "$cache"
build="$(mktemp -d "${TMPDIR:-/tmp}/numthunk-cross.XXXXXX")"
trap 'rm -rf "$build"' EXIT
export ZIG_GLOBAL_CACHE_DIR="$build/zig" ZIG_LOCAL_CACHE_DIR="$build/zig"

python="${PYTHON:-python}"
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
pyinc="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
npver="$("$python" -c 'import numpy; print(numpy.__version__)')"

# setup.py's SOURCES, the same glob
mapfile -t sources < <("$python" - <<'PY'
import glob
included = set(glob.glob("src/engine/arch/*.c") + glob.glob("src/engine/memory/*.c"))
print("\n".join(sorted(p for p in glob.glob("src/**/*.c", recursive=True) if p not in included)))
PY
)

numpy_include() {  # numpy_include WHEEL-PLATFORM -> NumPy's headers from its wheel
    local dir="$cache/numpy-$npver-$1"
    if [ ! -f "$dir/include/numpy/arrayobject.h" ]; then
        rm -rf "$dir" && mkdir -p "$dir/wheel"
        "$python" -m pip download -q "numpy==$npver" --only-binary=:all: --platform "$1" \
            --python-version "$pyver" --no-deps -d "$dir/wheel" >&2
        "$python" - "$dir" <<'PY'
import glob, os, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(glob.glob(os.path.join(d, "wheel", "*.whl"))[0]) as z:
    for name in z.namelist():
        for top in ("numpy/_core/include/", "numpy/core/include/"):
            if name.startswith(top) and not name.endswith("/"):
                out = os.path.join(d, "include", name[len(top):])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(z.read(name))
PY
    fi
    echo "$dir/include"
}

windows_pyconfig() {  # CPython's PC/pyconfig.h of this minor version
    local out="$cache/pyconfig-windows-$pyver.h"
    if [ ! -s "$out" ]; then
        local package="python$pyver" suite
        case "$pyver" in
            3.11) suite=bookworm ;;
            3.13) suite=trixie ;;
            *) say "no Debian source known for Python $pyver (known: 3.11, 3.13)"; exit 2 ;;
        esac
        local apt_dir="$cache/apt" src="$cache/src-$pyver" uri keyring
        uri="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' \
            /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)"
        [ -n "$uri" ] || uri="$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\2/p' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1)"
        [ -n "$uri" ] || { say "no Debian archive found in the apt sources"; exit 1; }
        keyring=/usr/share/keyrings/debian-archive-keyring.gpg
        mkdir -p "$apt_dir/lists/partial" "$src"
        echo "deb-src [signed-by=$keyring] $uri $suite main" >"$apt_dir/sources.list"
        local apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=-"
            -o APT::Sandbox::User=root -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")
        say "fetching Debian's $package source ($suite) for PC/pyconfig.h"
        apt-get "${apt_opts[@]}" update -qq >&2
        (cd "$src" && apt-get "${apt_opts[@]}" source --download-only "$package" >&2)
        local tarball
        tarball="$(ls "$src"/"${package}"_*.orig.tar.* | head -n1)"
        # 3.11 ships PC/pyconfig.h; 3.13 PC/pyconfig.h.in, whose one
        # placeholder is the free-threading switch (off)
        tar -xf "$tarball" -C "$src" --wildcards --strip-components=1 '*/PC/pyconfig.h*'
        if [ -f "$src/PC/pyconfig.h" ]; then
            cp "$src/PC/pyconfig.h" "$out"
        else
            sed 's/^\(#undef Py_GIL_DISABLED\).*/\1/' "$src/PC/pyconfig.h.in" >"$out"
        fi
        rm -rf "$src"
    fi
    echo "$out"
}

macos_pyconfig() {
    # No macOS CPython's headers come from a registry this machine uses, so
    # this machine's own pyconfig.h stands in, with the features that are
    # Linux's (a glibc or kernel interface macOS does not have) undefined.
    # The public headers read few of its macros: sizes (LP64 on both), and
    # HAVE_* switches for declarations CPython makes itself.
    local out="$build/pyconfig-macos.h"
    grep -v -E '^#define (HAVE_(EPOLL\w*|MEMFD_CREATE|EVENTFD|PRLIMIT|PIPE2|SCHED_SETAFFINITY|LINUX_\w+|SYS_SYSMACROS_H|SYS_EPOLL_H|SYS_EVENTFD_H|SYS_MEMFD_H|GETRANDOM\w*|COPY_FILE_RANGE|SPLICE|PWRITEV2|PREADV2|SENDFILE|FDATASYNC|POSIX_FALLOCATE|POSIX_FADVISE|CLOCK_NANOSLEEP|STAT_TV_NSEC)|MAJOR_IN_SYSMACROS|_GNU_SOURCE|_POSIX_C_SOURCE|_XOPEN_SOURCE\w*) ' \
        "$pyinc/pyconfig.h" >"$out"
    echo "$out"
}

python_include() {  # python_include TARGET PYCONFIG -> an Include/ with it
    local dir="$build/python-$1"
    mkdir -p "$dir"
    cp -r "$pyinc"/. "$dir"/
    cp "$2" "$dir/pyconfig.h"
    echo "$dir"
}

ffi_include() {  # ffi_include TARGET -> a directory with its ffi.h and ffitarget.h
    local dir="$build/ffi-$1" multiarch
    case "$1" in
        aarch64-*) multiarch=aarch64-linux-gnu ;;
        *) multiarch=x86_64-linux-gnu ;;
    esac
    if [ ! -f "/usr/include/$multiarch/ffi.h" ]; then
        [ "$multiarch" = aarch64-linux-gnu ] && NT_AARCH64_INSTALL_ONLY=1 bash tests/c/aarch64.sh >&2
        [ -f "/usr/include/$multiarch/ffi.h" ] || { say "no /usr/include/$multiarch/ffi.h"; exit 1; }
    fi
    mkdir -p "$dir"
    cp "/usr/include/$multiarch/ffitarget.h" "$dir/"
    case "$1" in
        x86_64-windows-gnu)
            sed -e 's/^#ifndef X86_64$/#ifndef X86_WIN64/' -e 's/^#define X86_64$/#define X86_WIN64/' \
                "/usr/include/$multiarch/ffi.h" >"$dir/ffi.h"
            grep -q '^#define X86_WIN64$' "$dir/ffi.h" ||
                { say "ffi.h: the target's define was not found"; exit 1; } ;;
        aarch64-macos)
            # configure's #if @FFI_EXEC_TRAMPOLINE_TABLE@ before each
            # closure struct's trampoline_table fields: 1 on arm64 macOS
            sed -e '/^#if 0$/{N;s/^#if 0\n\(  void \*trampoline_table;\)/#if 1\n\1/;}' \
                "/usr/include/$multiarch/ffi.h" >"$dir/ffi.h"
            [ "$(grep -B1 '^  void \*trampoline_table;' "$dir/ffi.h" | grep -c '^#if 1$')" = 3 ] ||
                { say "ffi.h: the trampoline-table switch was not found"; exit 1; } ;;
        *) cp "/usr/include/$multiarch/ffi.h" "$dir/" ;;
    esac
    echo "$dir"
}

flags=(-std=c11 -O2 -Wall -Wextra -Werror -Wvla)
compile_all() {  # compile_all LABEL COMPILER-AND-FLAGS...: every source to an object
    local label="$1" failed=0 f
    shift
    mkdir -p "$build/obj"
    for f in "${sources[@]}"; do
        if ! "$@" -c "$f" -o "$build/obj/$(echo "$f" | tr / _).o"; then
            say "$label: $f failed"
            failed=$((failed + 1))
        fi
    done
    if [ "$failed" -eq 0 ]; then
        say "$label: ${#sources[@]} files compiled clean"
    else
        say "$label: $failed of ${#sources[@]} files failed"
        status=1
    fi
}
status=0
for target in "$@"; do
    case "$target" in
        aarch64-macos | x86_64-macos)
            cc=("$python" -m ziglang cc -target "$target")
            wheel=macosx_14_0_arm64
            [ "$target" = x86_64-macos ] && wheel=macosx_10_13_x86_64
            pyconfig="$(macos_pyconfig)"
            extra=(-fvisibility=hidden -D_GNU_SOURCE) ;;
        x86_64-windows-gnu)
            command -v x86_64-w64-mingw32-gcc >/dev/null ||
                { say "x86_64-w64-mingw32-gcc not found (apt-get install gcc-mingw-w64-x86-64)"; exit 1; }
            cc=(x86_64-w64-mingw32-gcc)
            wheel=win_amd64
            pyconfig="$(windows_pyconfig)"
            # gcc checks printf formats on mingw against the old msvcrt,
            # which has no %zd; CPython's PyOS_snprintf and the C library
            # of an MSVC build (the UCRT) have it. The formats are checked
            # by the Linux and macOS compiles.
            extra=(-Wno-format) ;;
        *) say "unknown target $target"; exit 2 ;;
    esac
    inc=(-Isrc -I"$(python_include "$target" "$pyconfig")" -I"$(numpy_include "$wheel")"
        -I"$(ffi_include "$target")")
    compile_all "$target" "${cc[@]}" "${flags[@]}" "${extra[@]}" "${inc[@]}"
    if [ "$target" = x86_64-windows-gnu ]; then
        # MSVC itself is not here: portable.h's MSVC spellings (Interlocked
        # atomics, __declspec, INIT_ONCE ...) compiled by clang in its
        # Microsoft mode over mingw-w64's headers, forced by
        # NT_PORTABLE_MSVC, in every file of the core
        compile_all "$target, portable.h's MSVC spellings (clang -fms-extensions)" \
            "$python" -m ziglang cc -target x86_64-windows-gnu -fms-extensions -DNT_PORTABLE_MSVC \
            "${flags[@]}" "${inc[@]}"
    fi
done
cd "$repo"
exit "$status"

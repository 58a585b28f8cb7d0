#!/usr/bin/env bash
# tools/python.sh VERSION [--disable-gil]: print the path of a CPython
# interpreter of that version (3.12 or 3.13), the free-threaded build
# with --disable-gil (3.13 only). An interpreter already on the machine is
# used when it runs and is of the right flavour (python3.13 on PATH, then
# pyenv's); otherwise, for 3.13, Debian's source package of that CPython is
# fetched from the Debian archive this machine's apt already uses, built and
# installed under a cache directory, and reused from there on later calls.
# 3.12 has no source here: no Debian release ships it (bookworm has 3.11,
# trixie 3.13), so it must be on the machine (pyenv's, or python3.12 on
# PATH), and its absence is an error saying so.
#
#   NUMTHUNK_PYTHON_CACHE   where builds go (default ~/.cache/numthunk-python)
#   NUMTHUNK_PYTHON_JOBS    make's parallel jobs (default: the number of cores)
#   NUMTHUNK_PYTHON_BUILD=1 skip the interpreters on the machine, use or
#                           make the cached build
#
# Only the path goes to stdout; progress goes to stderr, the build's output
# to <cache>/<version>[t].log. Needs root for apt-get (build dependencies).
set -euo pipefail

usage() { echo "usage: $0 VERSION [--disable-gil]" >&2; exit 2; }
[ $# -ge 1 ] || usage
version="$1"
shift
gil=1
for arg in "$@"; do
    case "$arg" in
        --disable-gil) gil=0 ;;
        *) usage ;;
    esac
done
say() { echo "python.sh: $*" >&2; }

# What each version is built from: Debian's source package, its suite and
# upstream version.
# 3.12 has none (package empty): only the machine's own is used.
case "$version" in
    3.12) package="" suite="" upstream="" ;;
    3.13) package=python3.13 suite=trixie upstream=3.13.5 ;;
    *) say "no source known for Python $version (known: 3.12, 3.13)"; exit 2 ;;
esac
suffix=""
[ "$gil" = 1 ] || suffix=t
if [ "$gil" = 0 ] && [ "$version" != 3.13 ]; then
    say "--disable-gil: Python $version has no free-threaded build (3.13 has)"
    exit 2
fi

# fits INTERPRETER: it runs, is VERSION, and has the GIL or not as asked;
# and has what a venv with pip and the test dependencies needs.
fits() {
    "$1" - "$version" "$gil" >/dev/null 2>&1 <<'EOF'
import sys, sysconfig
want, gil = sys.argv[1], sys.argv[2] == "1"
assert "%d.%d" % sys.version_info[:2] == want
assert bool(sysconfig.get_config_var("Py_GIL_DISABLED")) == (not gil)
import ctypes, ensurepip, ssl, sqlite3, lzma, bz2, zlib, venv  # noqa: F401
EOF
}

if [ "${NUMTHUNK_PYTHON_BUILD:-0}" != 1 ]; then
    candidates=()
    # python3.13 (or python3.13t) on PATH; a pyenv shim that only says
    # "command not found" fails `fits`.
    if found="$(command -v "python$version$suffix")"; then candidates+=("$found"); fi
    for found in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".*/bin/"python$version$suffix"; do
        [ -x "$found" ] && candidates+=("$found")
    done
    for found in "${candidates[@]}"; do
        if fits "$found"; then
            say "using $found"
            echo "$found"
            exit 0
        fi
    done
fi

if [ -z "$package" ]; then
    say "no working CPython $version on this machine (python$version on PATH, or pyenv's" \
        "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version.*), and no Debian source to build one:" \
        "install it (pyenv install $version, or your distribution's python$version with its" \
        "venv and ssl modules)"
    [ "${NUMTHUNK_PYTHON_BUILD:-0}" != 1 ] || say "(NUMTHUNK_PYTHON_BUILD=1 skipped the machine's own)"
    exit 1
fi

cache="${NUMTHUNK_PYTHON_CACHE:-$HOME/.cache/numthunk-python}"
prefix="$cache/$upstream$suffix"
python="$prefix/bin/python$version$suffix"
log="$cache/$upstream$suffix.log"
mkdir -p "$cache"

# One build per prefix at a time: a second caller waits for the first.
exec 9>"$prefix.lock"
flock 9
if [ -e "$prefix/.complete" ] && fits "$python"; then
    say "using the cached $python"
    echo "$python"
    exit 0
fi

# The build's dependencies: a compiler and the -dev packages whose modules
# pip, venv and the test suite use (ssl, ctypes, sqlite3, lzma, bz2, zlib,
# readline, uuid, dbm, curses, expat).
needed=()
for pkg in gcc make xz-utils libssl-dev zlib1g-dev libbz2-dev libffi-dev liblzma-dev \
    libsqlite3-dev libreadline-dev uuid-dev libgdbm-dev libncurses-dev libexpat1-dev; do
    # by architecture first: with a foreign one added (arm64 for
    # tests/c/aarch64.sh) a bare name of a package installed for both is
    # ambiguous to dpkg
    dpkg -s "$pkg:$(dpkg --print-architecture)" >/dev/null 2>&1 || dpkg -s "$pkg" >/dev/null 2>&1 \
        || needed+=("$pkg")
done
if [ "${#needed[@]}" -gt 0 ]; then
    say "installing ${needed[*]}"
    # another apt-get (a CI step beside a background build) is waited for
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${needed[@]}" >&2
fi

# The source package, from the archive the machine's apt already uses, with
# the suite's deb-src line in a private apt state (the system's sources and
# package lists are left as they are).
tarball="$cache/src/${package}_$upstream.orig.tar.xz"
if [ ! -s "$tarball" ]; then
    archive_uri() {  # the first Debian archive in the apt sources
        local uri
        uri="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' \
            /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)"
        [ -n "$uri" ] || uri="$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\2/p' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1)"
        echo "$uri"
    }
    uri="$(archive_uri)"
    [ -n "$uri" ] || { say "no Debian archive found in the apt sources"; exit 1; }
    apt_dir="$cache/apt"
    mkdir -p "$apt_dir/lists/partial" "$cache/src"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    echo "deb-src [signed-by=$keyring] $uri $suite main" >"$apt_dir/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=-" -o APT::Sandbox::User=root
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")
    say "fetching Debian's $package source ($suite) from $uri"
    apt-get "${apt_opts[@]}" update -qq >&2
    (cd "$cache/src" && apt-get "${apt_opts[@]}" source --download-only "$package" >&2)
    [ -s "$tarball" ] || { say "$tarball did not come with the source package"; exit 1; }
fi

# Build in a fresh tree into an emptied prefix, which is marked complete
# only when the build, the install and the checks passed: a half-made
# prefix is rebuilt, never taken for a good one.
build="$cache/build-$upstream$suffix"
rm -rf "$build" "$prefix"
mkdir -p "$build"
tar -xJf "$tarball" -C "$build" --strip-components=1
configure=(--prefix="$prefix" --with-ensurepip=install)
[ "$gil" = 1 ] || configure+=(--disable-gil)
say "building Python $upstream$suffix in $build (log: $log)"
start=$SECONDS
cpu0="$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)"
(
    cd "$build"
    ./configure "${configure[@]}"
    make -j"${NUMTHUNK_PYTHON_JOBS:-$(nproc)}"
    make install
) >"$log" 2>&1 || {
    say "the build failed; the end of $log:"
    tail -n 40 "$log" >&2
    exit 1
}
cpu1="$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)"
ticks="$(getconf CLK_TCK)"
say "built in $((SECONDS - start)) s wall, $(((cpu1 - cpu0) / ticks)) s CPU"
rm -rf "$build"
if ! fits "$python"; then
    say "the built $python lacks a module pip or venv needs; see $log"
    exit 1
fi
touch "$prefix/.complete"
echo "$python"

#!/usr/bin/env bash
# tools/tsan.sh [PYTHON]: the thread-stress tests (tests/test_threads_stress.py)
# on a free-threaded CPython, numthunk's core built with ThreadSanitizer
# (NUMTHUNK_SANITIZE=thread) and libtsan preloaded into the interpreter.
# Fails on any TSan report not suppressed by tools/tsan.supp.
#
#   PYTHON                   a free-threaded python3.13t (default: tools/python.sh
#                            3.13 --disable-gil, built and cached when missing)
#   NUMTHUNK_TSAN_DIR        where the copy, its venv and the reports go
#                            (default $TMPDIR/numthunk-tsan)
#   NUMTHUNK_STRESS_SECONDS  each stress run's length (default here: 3)
#
# CPython itself is not built with TSan: its own locks are invisible to TSan,
# so the core announces its state lock (src/python/pyapi.h, NT_TSAN_ACQUIRE); the
# race detector then watches the core's own accesses and its atomics (the
# engine's and the quarantine's locks are atomics too: nt_spin in
# src/life/quarantine.h).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
python="${1:-$(tools/python.sh 3.13 --disable-gil)}"
"$python" -c 'import sysconfig, sys; sys.exit(not sysconfig.get_config_var("Py_GIL_DISABLED"))' \
    || { echo "tsan.sh: $python is not a free-threaded CPython" >&2; exit 2; }
work="${NUMTHUNK_TSAN_DIR:-${TMPDIR:-/tmp}/numthunk-tsan}"
mkdir -p "$work"

# A pristine copy of the tree as it stands (committed or not), built in place.
rm -rf "$work/src" "$work"/report.*
mkdir -p "$work/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -x -C "$work/src"
venv="$work/venv"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: numpy pytest hypothesis \
    "setuptools>=77" wheel
cd "$work/src"
NUMTHUNK_SANITIZE=thread NUMTHUNK_WERROR=1 "$venv/bin/python" setup.py -q build_ext --inplace

libtsan="$(gcc -print-file-name=libtsan.so)"
[ -e "$libtsan" ] || { echo "tsan.sh: no libtsan.so for gcc (apt-get install libtsan2)" >&2; exit 2; }
rc=0
# Reports go to files (log_path), the figures to the terminal.
# halt_on_error=0: every report is collected, the run fails after them all.
NUMTHUNK_STRESS_SECONDS="${NUMTHUNK_STRESS_SECONDS:-3}" \
NUMTHUNK_STRESS_REPORT="$work/figures.jsonl" \
TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 second_deadlock_stack=1 suppressions=$repo/tools/tsan.supp log_path=$work/report" \
LD_PRELOAD="$libtsan" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -s \
    tests/test_threads_stress.py || rc=$?
cat "$work/figures.jsonl" 2>/dev/null && rm -f "$work/figures.jsonl"
reports=$(cat "$work"/report.* 2>/dev/null | grep -c "^WARNING: ThreadSanitizer" || true)
if [ "$reports" != 0 ]; then
    cat "$work"/report.*
    echo "tsan.sh: $reports ThreadSanitizer report(s)" >&2
    exit 1
fi
echo "tsan.sh: no ThreadSanitizer report (pytest exit $rc)"
exit "$rc"

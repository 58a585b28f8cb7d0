#!/usr/bin/env bash
# The linter and formatters, over the whole tree:
#
#   tools/format.sh          # check: ruff check, ruff's import order, clang-format --dry-run
#   tools/format.sh --fix    # apply: ruff check --fix, clang-format -i
#
# Python: ruff, configured in pyproject.toml ([tool.ruff]). C: clang-format,
# configured in .clang-format, over src/ (blocks laid out by hand, such as
# aligned tables, sit between `// clang-format off` and `// clang-format on`).
# Exits non-zero when a check fails. .ci/run's lint step runs this script in
# check mode.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
    --fix) fix=1 ;;
    "") ;;
    *) echo "usage: tools/format.sh [--fix]" >&2; exit 2 ;;
esac

command -v ruff >/dev/null || { echo "ruff is needed: pip install ruff" >&2; exit 1; }
command -v clang-format >/dev/null || {
    echo "clang-format is needed: apt-get install clang-format" >&2; exit 1; }

mapfile -t c_files < <(find src -name '*.[ch]' | sort)

rc=0
if [ "$fix" = 1 ]; then
    ruff check --fix . || rc=1
    clang-format -i "${c_files[@]}"
else
    ruff check . || rc=1
    clang-format --dry-run --Werror "${c_files[@]}" || rc=1
fi
exit "$rc"

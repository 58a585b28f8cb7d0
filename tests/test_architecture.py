"""docs/architecture.md, its layout section among it, stays true to
the tree.

- every path the page names (src/..., numthunk/..., tests/..., docs/...,
  tools/..., bench/...) and every file name it writes in backquotes
  (`plan/plan.c`) exists;
- every C name it writes with numthunk's prefixes (nt_*, NT_*, numthunk_*,
  NUMTHUNK_*), anywhere on the page, and every other identifier it writes
  alone in backquotes (`teardown`, `ThunkObject.ctx`), is a word of the
  sources (src/ and the numthunk package);
- the layout (docs/architecture.md) lists every file of src/ and numthunk/,
  once each, and no file that does not exist.

Outside the source tree (.ci/run copies tests/, src/, docs/ and the README
beside an installed wheel) the package's files are the installed ones, and
tools/ and bench/ are not there to check.
"""

import glob
import os
import re

import pytest

import numthunk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_TREE = os.path.exists(os.path.join(ROOT, "pyproject.toml"))
PAGE = os.path.join(ROOT, "docs", "architecture.md")
# The package's files: the checkout's, or the installed ones outside the tree.
PACKAGE = (os.path.join(ROOT, "numthunk") if os.path.isdir(os.path.join(ROOT, "numthunk"))
           else os.path.dirname(os.path.abspath(numthunk.__file__)))
BUILT = re.compile(r"\.(so|pyd|pyc|dylib|dll)$")


def _files(top, prefix):
    """Paths (prefix/...) of the source files under top; nothing built."""
    out = set()
    for d, dirs, names in os.walk(top):
        dirs[:] = [x for x in dirs if x != "__pycache__" and not x.startswith(".")]
        for n in names:
            if not BUILT.search(n):
                rel = os.path.relpath(os.path.join(d, n), top).replace(os.sep, "/")
                out.add(prefix + "/" + rel)
    return out


def _source_files():
    return _files(os.path.join(ROOT, "src"), "src") | _files(PACKAGE, "numthunk")


def _where(path):
    """The file a repository path names here, or None when its top
    directory is not beside the tests (outside the tree)."""
    top, _, rest = path.partition("/")
    if top == "numthunk":
        return os.path.join(PACKAGE, rest)
    if not IN_TREE and not os.path.isdir(os.path.join(ROOT, top)):
        return None
    return os.path.join(ROOT, path)


def _words():
    words = set()
    for path in _source_files():
        top, _, rest = path.partition("/")
        full = os.path.join(PACKAGE if top == "numthunk" else os.path.join(ROOT, "src"), rest)
        with open(full, encoding="utf-8", errors="replace") as f:
            words.update(re.findall(r"\w+", f.read()))
    return words


def _page():
    with open(PAGE, encoding="utf-8") as f:
        return f.read()


_PATH = re.compile(r"(?<![\w/.-])((?:src|numthunk|tests|docs|tools|bench|\.ci)/[\w./<>*-]*[\w>*])")
_SPAN = re.compile(r"`([^`\n]+)`")
_PREFIXED = re.compile(r"\b((?:nt|NT|numthunk|NUMTHUNK)_\w+)\b(?!<)")
_IDENT = re.compile(r"^[A-Za-z_]\w*(?:(?:\.|->)[A-Za-z_]\w*)*(?:\(\))?$")


def test_named_paths_exist():
    missing = []
    for path in sorted(set(_PATH.findall(_page()))):
        # a pattern (tests/test_*.py, src/engine/arch/<arch>.c) names at least one file
        where = _where(re.sub(r"<\w+>", "*", path))
        if where is not None and not glob.glob(where):
            missing.append(path)
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_named_files_exist():
    """A file written by its name alone (`plan/plan.c`, `_numba_ext.py`) is one
    of src/, the package, tests/ or bench/."""
    names = {os.path.basename(p) for p in _source_files()}
    for top in ("tests", "bench"):
        for _d, _dirs, files in os.walk(os.path.join(ROOT, top)):
            names.update(files)
    bare = {s for s in _SPAN.findall(_page())
            if re.fullmatch(r"[\w-]+\.(c|h|py|pyi|pxd|S|sh)", s)}
    if not IN_TREE:
        bare = {s for s in bare if not s.startswith("bench_") and not s.startswith("callgrind_")}
    missing = sorted(bare - names)
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_named_c_identifiers_exist():
    """Every nt_*/NT_*/numthunk_*/NUMTHUNK_* name on the page (a template
    such as nt_arch_<name> aside) is in the sources."""
    words = _words()
    names = set(_PREFIXED.findall(_page()))
    assert names, "the page names no C identifier: the pattern is broken"
    missing = sorted(n for n in names if n not in words)
    assert not missing, f"docs/architecture.md names C identifiers that do not exist: {missing}"


def test_named_identifiers_exist():
    """Every identifier written alone in backquotes (a function, a field,
    `ThunkObject.ctx`, `engine_info()`) is, part by part, in the sources."""
    words = _words()
    missing = []
    for span in sorted(set(_SPAN.findall(_page()))):
        if not _IDENT.match(span) or re.search(r"\.(c|h|py|pyi|pxd|S|sh)$", span):
            continue
        for part in re.split(r"\.|->", span.removesuffix("()")):
            if part not in words:
                missing.append(span)
                break
    assert not missing, f"docs/architecture.md names identifiers the sources lack: {missing}"


def _layout():
    """The paths docs/architecture.md's layout section lists, in order."""
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## The layout\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "docs/architecture.md: no '## The layout' section"
    return re.findall(r"^- `((?:src|numthunk)/[^`]+)`", m.group(1), re.M)


def test_layout_matches_the_tree():
    listed = _layout()
    dupes = sorted({p for p in listed if listed.count(p) > 1})
    assert not dupes, f"docs/architecture.md's layout lists these twice: {dupes}"
    tree = _source_files()
    assert sorted(tree - set(listed)) == [], \
        "files of src/ or numthunk/ missing from docs/architecture.md's layout"
    assert sorted(set(listed) - tree) == [], \
        "docs/architecture.md's layout lists files that do not exist"


STAGES = ("parse", "plan", "convert", "engine", "life", "python")


def test_every_file_of_src_opens_with_its_stage():
    """src/ is the pipeline a folder per stage: each folder is a stage the
    layout section names, and each file's opening comment says where in the
    pipeline it sits, starting with its folder's stage."""
    src = os.path.join(ROOT, "src")
    if not os.path.isdir(src):
        pytest.skip("beside an installed wheel: no src/ to read")
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    assert folders == sorted(STAGES)
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    for stage in STAGES:
        assert f"`src/{stage}/`:" in page, f"the layout section does not name src/{stage}/"
    wrong = []
    for path in sorted(glob.glob(os.path.join(src, "**", "*.[ch]"), recursive=True)):
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            head = f.read().split("*/", 1)[0]
        text = " ".join(line.strip(" *") for line in head.splitlines())
        m = re.search(r"Place in the pipeline: (\w+)", text)
        stage = rel.split("/")[0] if "/" in rel else None
        if m is None or (stage is not None and m.group(1) != stage):
            wrong.append(rel)
    assert not wrong, f"files whose opening comment does not give their stage: {wrong}"

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
- what the page claims of the C where a scan can tell: src/ looks up by
  name no attribute of the package (the names it does look up are
  protocols', each allowed with its reason), C below python/pyapi.h
  includes no Python, engine/choose.c alone reads the environment, and
  every type is a heap type whose objects hold it.

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
# tools/ is the tree's alone: .ci/run copies pyproject.toml and setup.py
# outside it too (tests/test_packaging.py reads them), never tools/.
IN_TREE = os.path.isdir(os.path.join(ROOT, "tools"))
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


def _prose():
    """The page with its line breaks and indents as single spaces."""
    return " ".join(_page().split())


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


# ------------------------------------------------------------ claims, not names
#
# "C looks up no attribute of the package by name" (docs/architecture.md, "The
# C/Python boundary"): every call of src/ that finds an attribute, a method or
# a module from its name passes the name as a literal, and the literal is one
# of these: names of CPython's, ctypes' and DLPack's protocols, never one of
# the package's. What the core reads of the package's objects it reads as C
# structs of its own types (numthunk.Function's fields: src/python/function.c)
# or is handed once (_core._register).
PROTOCOL_NAMES = {
    "__dlpack__": "DLPack: a tensor exports its capsule (convert/dlpack.c)",
    "__dlpack_device__": "DLPack: where a tensor lives (convert/dlpack.c)",
    "__complex__": "CPython's number protocol, looked up on the value's type as "
                   "complex() does (convert/value.c)",
    "_type_": "ctypes: a simple type's format code (convert/value.c)",
    "bit_length": "int's method: the width of a value out of range, for a message "
                  "(convert/value.c)",
    "__qualname__": "the name functools.update_wrapper gives numthunk.bind, by which "
                    "pickle finds a function (python/binder.c)",
}

# CPython's calls that reach an attribute, a method or a module by its name
_LOOKUP = re.compile(r"\b(_?Py\w*(?:Attr|Method|Import)\w*|_PyType_Lookup)\s*\(")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_LITERAL = re.compile(r'^"((?:[^"\\]|\\.)*)"$')


def _arguments(text, start):
    """The top-level arguments of the call whose '(' is at text[start]."""
    depth, args, cur, i = 0, [], "", start
    while i < len(text):
        c = text[i]
        if c == '"':                       # a string literal, whole
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur += text[i:j + 1]
            i = j + 1
            continue
        if c in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return args
        elif c == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    raise ValueError("unclosed call")


def name_lookups(text):
    """(line, function, name or None) for each look-up by name in C text:
    name is the literal it passes, None where the name is not a literal
    (a variable, an interned object: a name the scan cannot read)."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    out = []
    for m in _LOOKUP.finditer(code):
        if m.group(1).startswith(("PyErr_", "Py_tp_")):
            continue                       # PyExc_ImportError's neighbours, slot names
        args = _arguments(code, m.end() - 1)
        name = args[0] if "Import" in m.group(1) and len(args) == 1 else (
            args[1] if len(args) > 1 else "")
        lit = _LITERAL.match(name)
        out.append((code.count("\n", 0, m.start()) + 1, m.group(1),
                    lit.group(1) if lit else None))
    return out


def _need_src():
    if not os.path.isdir(os.path.join(ROOT, "src")):
        pytest.skip("beside an installed wheel: no src/ to read")


def _c_sources():
    _need_src()
    for path in sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            yield os.path.relpath(path, ROOT).replace(os.sep, "/"), f.read()


def test_the_scan_finds_look_ups_by_name():
    """The scan reads what python/binder.c did before numthunk.Function had C
    fields: its slots looked up by a name held in a variable; a literal
    name; a method called by name; a module imported by name; not a name in
    a comment."""
    text = ('static int f(PyObject *function, const char *name) {\n'
            '    PyObject *d = PyObject_GetAttrString((PyObject *)function, name);\n'
            '    PyObject *s = PyObject_GetAttrString(f(a, "b"), "_signature");\n'
            '    PyObject *r = PyObject_CallMethod(v, "resolve", "(O)", x);\n'
            '    /* PyObject_GetAttrString(obj, "in_a_comment") */\n'
            '    PyObject *m = PyImport_ImportModule("numthunk._api");\n'
            '    PyErr_SetString(PyExc_ImportError, "x");\n'
            '}\n')
    assert name_lookups(text) == [(2, "PyObject_GetAttrString", None),
                                  (3, "PyObject_GetAttrString", "_signature"),
                                  (4, "PyObject_CallMethod", "resolve"),
                                  (6, "PyImport_ImportModule", "numthunk._api")]


def test_c_looks_up_no_attribute_of_the_package_by_name():
    found, used = [], set()
    for path, text in _c_sources():
        for line, fn, name in name_lookups(text):
            used.add(name)
            if name not in PROTOCOL_NAMES:
                found.append(f"{path}:{line}: {fn}({name or 'a name that is not a literal'})")
    assert not found, ("C looks up by name what is not a protocol's (read a C struct of "
                       "the core's own type, or have the package hand it over): "
                       + "; ".join(found))
    assert sorted(set(PROTOCOL_NAMES) - used) == [], "allowed names src/ no longer uses"
    assert "C looks up no attribute of the package by name" in _prose()


def _includes(path, seen=None):
    """The quoted #includes of a file of src/, followed through src/'s own
    headers and the files they name."""
    seen = set() if seen is None else seen
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    for inc in re.findall(r'^#include [<"]([^">]+)[">]', text, re.M):
        local = os.path.normpath(os.path.join("src", inc)).replace(os.sep, "/")
        if inc in seen or local in seen:
            continue
        if os.path.exists(os.path.join(ROOT, local)):
            seen.add(local)
            _includes(local, seen)
        else:
            seen.add(inc)
    return seen


def test_c_below_the_python_layer_includes_no_python():
    """The files the page puts below python/pyapi.h (the kind table, the
    parser, the plan, the engines and their memory) include neither
    Python.h nor the Python layer's headers, however indirectly."""
    _need_src()
    m = re.search(r"C below `python/pyapi\.h` \(([^)]*)\)", _prose())
    assert m, "docs/architecture.md no longer says which C is below python/pyapi.h"
    named = ["src/" + f for f in re.findall(r"`([\w/]+\.c)`", m.group(1))]
    assert "src/kinds.c" in named and "src/plan/plan.c" in named, m.group(1)
    assert "the engines" in m.group(1) and "memory" in m.group(1), m.group(1)
    engines = sorted(os.path.relpath(p, ROOT).replace(os.sep, "/")
                     for p in glob.glob(os.path.join(ROOT, "src", "engine", "**", "*.[ch]"),
                                        recursive=True))
    bad = {}
    for path in named + engines:
        python = sorted(i for i in _includes(path)
                        if i in ("Python.h", "structmember.h") or i.startswith("src/python/")
                        or i == "src/life/thunk.h")
        if python:
            bad[path] = python
    assert not bad, f"C below the Python layer includes Python: {bad}"


def test_the_environment_is_read_in_one_place():
    """engine/choose.c is the one reader of the environment (nt_config_get)."""
    readers = sorted(path for path, text in _c_sources()
                     if re.search(r"\b(getenv|secure_getenv|environ)\b", _COMMENT.sub("", text)))
    assert readers == ["src/engine/choose.c"]
    assert "the one reader of the environment" in _prose()


def test_every_type_of_the_core_is_a_heap_type_that_holds_its_module():
    """Each type is made from its spec with the module, no static type; each
    instance holds its type: every traverse function of an object visits
    Py_TYPE(self) and every dealloc drops its type."""
    checked = 0
    for path, text in _c_sources():
        assert not re.search(r"\bPyTypeObject\s+\w+\s*=\s*\{", text), f"{path}: a static type"
        specs = re.findall(r"\bPyType_Spec\s+(\w+)\s*=", text)
        for spec in specs:
            assert re.search(rf"PyType_FromModuleAndSpec\([^;]*&{spec}\b", text) or (
                re.search(r"PyType_FromModuleAndSpec\(module, spec,", text)), (path, spec)
        for m in re.finditer(r"^static \w+ (\w+)_(traverse|dealloc)\([^)]*\)\n\{(.*?)^\}",
                             text, re.S | re.M):
            if m.group(1) == "module":
                continue                   # the module's state, not an object
            checked += 1
            if m.group(2) == "traverse":
                assert "Py_VISIT(Py_TYPE(self))" in m.group(3), (path, m.group(0)[:60])
            else:
                assert re.search(r"Py_DECREF\((type|Py_TYPE\(self\))\)", m.group(3)), \
                    (path, m.group(0)[:60])
    assert checked >= 10, "the scan found too few types: the pattern is broken"

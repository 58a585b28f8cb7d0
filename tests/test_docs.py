"""The documentation's examples run as printed.

Every page of the site (docs/*.md) is run as a reader would follow it: its
code blocks in order, in a fresh directory of its own, the Python blocks
sharing one namespace, as tests/test_readme.py runs the README's. A page
says what a block is with an HTML comment on the line before its fence
(the site does not show it):

    <!-- file: NAME -->      the block is written to NAME (a .pyx, a setup.py,
                             a meson.build, a C file), not run
    <!-- norun: REASON -->  the block is not run, for the REASON given

Unmarked ``python`` blocks are executed; unmarked ``sh`` blocks are run by
bash (``set -eu -o pipefail``) with this interpreter's directory first on
PATH, so ``python`` and ``cython`` are the ones under test. Blocks in other
languages that a reader would run or compile (c, cython, meson, toml, ...)
must be a file or carry a reason; ``text`` and unlabelled blocks are
output and are not run. ``{literalinclude}`` shows a file of examples/,
which tests/test_examples.py runs.

Also here: every public name and every C API function is documented, and
the docstrings' examples run (the site's doctest build runs them again).
"""

import doctest
import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import numthunk as nt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(f for f in os.listdir(DOCS) if f.endswith(".md"))

RUN = {"python", "sh"}
OUTPUT = {"", "text"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)"
                    r"(?P=fence)[ \t]*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*(file|norun):\s*(.*?)\s*-->\s*$")


def blocks(text):
    """(line, language, marker, argument, code) for each fenced block."""
    out = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        lang = m.group("info").strip().split(" ")[0]
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        mark = _MARK.match(before)
        code = m.group("body")
        if m.group("indent"):
            code = re.sub(rf"(?m)^{m.group('indent')}", "", code)
        out.append((line, lang, mark.group(1) if mark else None, mark.group(2) if mark else None,
                    code))
    return out


def _read(page):
    with open(os.path.join(DOCS, page), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_are_marked(page):
    """Nothing is left out silently: a block is run, written, output, a
    directive, or not run with a reason."""
    for line, lang, mark, arg, _code in blocks(_read(page)):
        where = f"{page}:{line} ({lang or 'unlabelled'} block)"
        if lang.startswith("{"):
            assert lang in ("{literalinclude}", "{toctree}", "{eval-rst}", "{note}",
                            "{warning}"), where
            assert mark is None, f"{where}: a marker before a directive means nothing"
            continue
        if mark == "norun":
            assert len(arg) >= 10, f"{where}: norun needs a reason, got {arg!r}"
        elif mark == "file":
            assert re.fullmatch(r"[\w.-]+", arg), f"{where}: file name {arg!r}"
        else:
            assert lang in RUN | OUTPUT, (
                f"{where}: a {lang} block must be written to a file (<!-- file: NAME -->) "
                "or say why it is not run (<!-- norun: REASON -->)")


def _literalincludes(text):
    return re.findall(r"```\{literalinclude\}\s+(\S+)", text)


@pytest.mark.parametrize("page", PAGES)
def test_page_literalincludes_exist(page):
    for path in _literalincludes(_read(page)):
        assert os.path.isfile(os.path.normpath(os.path.join(DOCS, path))), (page, path)


def run_page(page, workdir):
    """Run the page's blocks in order in workdir; return the namespace."""
    namespace = {"__name__": "__docs__"}
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    old_cwd, old_path = os.getcwd(), list(sys.path)
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    try:
        for line, lang, mark, arg, code in blocks(_read(page)):
            where = f"{page}:{line}"
            if mark == "file":
                with open(os.path.join(workdir, arg), "w", encoding="utf-8") as f:
                    f.write(code)
            elif mark == "norun" or lang not in RUN:
                continue
            elif lang == "python":
                # a line number per block, so a traceback names the page line
                exec(compile("\n" * line + code, os.path.join(DOCS, page), "exec"), namespace)
            else:
                p = subprocess.run(["bash", "-c", "set -eu -o pipefail\n" + code], cwd=workdir,
                                   env=env, capture_output=True, text=True, timeout=900)
                assert p.returncode == 0, (f"{where}: sh block failed ({p.returncode})\n"
                                           f"$ {code}\n{p.stdout}{p.stderr}")
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path
    return namespace


@pytest.mark.parametrize("page", [p for p in PAGES
                                  if any(b[1] in RUN and b[2] != "norun"
                                         for b in blocks(_read(p)))])
def test_page_runs(page, tmp_path):
    run_page(page, tmp_path)


# ------------------------------------------------------- what is documented


def _site_text():
    return {page: _read(page) for page in PAGES}


def test_every_public_name_is_in_the_api_reference():
    """api.md documents each name of numthunk.__all__ with autodoc, and the
    site's pages name it."""
    api = _read("api.md")
    documented = set(re.findall(r"^\.\. auto(?:function|class|data):: numthunk\.(\w+)", api, re.M))
    assert set(nt.__all__) <= documented, sorted(set(nt.__all__) - documented)
    assert documented <= set(nt.__all__) | {"Thunk"}, sorted(documented - set(nt.__all__))


def test_every_public_name_has_a_docstring_example():
    for name in nt.__all__:
        doc = _public_doc(name)
        assert doc and ">>> " in doc, f"numthunk.{name} has no docstring example"


def _public_doc(name):
    return getattr(nt, name).__doc__ or ""     # ARG: its type's, as autodoc shows it


def _capi_functions():
    path = os.path.join(os.path.dirname(nt.__file__), "include", "numthunk", "capi.h")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^static inline \w[\w\s*]*?\b(numthunk_\w+)\(", text, re.M), text


def test_every_c_api_function_states_ownership_gil_and_errors():
    """Each function of numthunk/capi.h has a section in the C API reference
    that says what it returns and who owns it, whether it needs the GIL,
    and how it reports an error; capi.h's own comments say the same."""
    names, header = _capi_functions()
    assert len(names) >= 8, names
    capi = _read("capi.md")
    sections = dict(re.findall(r"^### `(numthunk_\w+)`\n(.*?)(?=^#{2,3} |\Z)", capi, re.S | re.M))
    for name in names:
        assert name in sections, f"capi.md has no '### `{name}`' section"
        body = sections[name]
        for field in ("Returns:", "References:", "GIL:", "Errors:"):
            assert f"**{field}**" in body, f"capi.md, {name}: no **{field}**"
    for field in ("References:", "GIL:", "Errors:"):
        # one comment per table member in capi.h
        assert header.count(field) >= len(names) - 1, field


# ------------------------------------------------------- docstring examples


def _doctests():
    finder = doctest.DocTestFinder(recurse=False)
    globs = {"np": np, "nt": nt}
    out = []
    for name in nt.__all__:
        obj = getattr(nt, name)
        doc = _public_doc(name)
        out.append(doctest.DocTestParser().get_doctest(doc, dict(globs), f"numthunk.{name}",
                                                       None, 0))
        if isinstance(obj, type):
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                for test in finder.find(value, f"numthunk.{name}.{attr}", globs=dict(globs)):
                    if test.examples:
                        out.append(test)
    return out


@pytest.mark.parametrize("test", _doctests(), ids=lambda t: t.name)
def test_docstring_examples(test):
    # not verbose whatever sys.argv says (pytest -v), and the report written
    # to the stream of now: during an example sys.stdout is the runner's own
    # capture, and a report written there would be the example's output
    runner = doctest.DocTestRunner(verbose=False,
                                   optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=sys.stdout.write)
    assert runner.failures == 0, f"{test.name}: {runner.failures} example(s) failed (stdout)"
    assert runner.tries > 0 or not test.examples


def test_pages_named_by_messages_exist():
    """Errors and docstrings send the reader to docs/PAGE.md: each page they
    name is one of the site's."""
    package = os.path.dirname(nt.__file__)
    sources = [os.path.join(package, f) for f in os.listdir(package)
               if f.endswith((".py", ".pxd", ".pyi"))]
    sources += glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True)
    sources.append(os.path.join(package, "include", "numthunk", "capi.h"))
    named = set()
    for path in sources:
        with open(path, encoding="utf-8") as f:
            named |= set(re.findall(r"docs/([\w-]+\.md)", f.read()))
    assert {"lifetime.md", "cython.md", "engines.md"} <= named, named
    assert named <= set(PAGES), sorted(named - set(PAGES))

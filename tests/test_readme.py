"""The README's opening example runs as printed, with the results its
comments claim, and so do its other blocks; its two commands are the ones
CI runs; the Python versions it says CI tests are those the package
declares."""

import importlib.metadata
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_opening_example():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    claims = {}
    lines = []
    for line in block.splitlines():
        code, _, comment = line.partition("#")
        code = code.rstrip()
        m = re.match(r"\s*([\d.]+)\b", comment)
        if m and code.strip() in ("thunk()", "run(thunk)"):
            claims[code.strip()] = float(m.group(1))
            code = f"_results[{code.strip()!r}] = {code.strip()}"
        lines.append(code)
    namespace = {"_results": {}}
    exec(compile("\n".join(lines), "README.md", "exec"), namespace)
    assert claims == {"thunk()": 10.0, "run(thunk)": 109.0}
    assert namespace["_results"] == claims


def _readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_readme_blocks_run_in_order():
    """Every Python block, in one namespace, as a reader follows the page
    (the seed problem's factory included)."""
    blocks = re.findall(r"```python\n(.*?)```", _readme(), re.S)
    assert len(blocks) >= 3
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["t"]() == namespace["vec"].sum() == 157.0


def test_readme_commands_are_the_ones_ci_runs():
    """.ci/run runs the README's two commands verbatim (the suite through
    its `tests` wrapper, the main job's output thrown away)."""
    commands = [line for block in re.findall(r"```sh\n(.*?)```", _readme(), re.S)
                for line in block.splitlines() if line.startswith("pip ")]
    assert commands == ["pip install -e . && python -m numthunk",
                        'pip install -e ".[test]" && python -m pytest'], commands
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = [line.strip() for line in f]
    assert ci.count(commands[0] + " >/dev/null") == 2          # 3.11 and 3.13
    assert ci.count(commands[1].replace("python -m pytest", "tests")) == 1
    assert ci.count(commands[1].replace("python -m pytest", "tests -q -p no:cacheprovider")) == 1


@pytest.mark.parametrize("page", ["README.md", os.path.join("docs", "engines.md")])
def test_declared_pythons_are_the_tested_ones(page):
    """requires-python's floor and the version classifiers (read from the
    installed package's metadata) are exactly the Pythons that the
    version tables of the README and the docs say CI tests."""
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    row = re.search(r"^\| Python \| CPython ([\d., ]+) \|", text, re.M)
    assert row, f"{page}: no 'Python' row in the supported-versions table"
    tested = [v.strip() for v in row.group(1).split(",")]
    statuses = re.findall(r"^\| CPython (3\.\d+) \|.*\| tested \|$", text, re.M)
    assert statuses == tested, (statuses, tested)
    meta = importlib.metadata.metadata("numthunk")
    classifiers = [c.rsplit(" :: ", 1)[1] for c in meta.get_all("Classifier")
                   if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert classifiers == tested
    floor = min(tested, key=lambda v: tuple(map(int, v.split("."))))
    assert meta["Requires-Python"] == f">={floor}"


@pytest.mark.parametrize("page", ["README.md", os.path.join("docs", "engines.md")])
def test_free_threaded_row_is_the_declared_one(page):
    """The free-threaded row says tested, with a cp313t wheel, exactly when
    the metadata carries a Free Threading classifier; and .ci/run builds and
    tests that wheel."""
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    row = re.search(r"^\| CPython 3\.13t \(free-threaded\) \|(.*)\|$", text, re.M)
    assert row, f"{page}: no row for CPython 3.13t"
    cells = [c.strip() for c in row.group(1).split(" | ")]
    meta = importlib.metadata.metadata("numthunk")
    declared = [c for c in meta.get_all("Classifier")
                if c.startswith("Programming Language :: Python :: Free Threading :: ")]
    tested = cells[-1].startswith("tested")
    assert tested == bool(declared), (cells, declared)
    assert ("`cp313t` manylinux" in cells[1]) == tested, cells
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    assert ("cp313t" in ci and "tools/tsan.sh" in ci) == tested

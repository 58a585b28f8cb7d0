"""How numthunk is built and shipped. setup.py finds libffi where each
platform keeps it (its own prefix variable, pkg-config, conda, vcpkg,
Homebrew, the system's directories) and, when it cannot, says how to get it
on each platform; the finder is run here over real directory layouts holding
a real ffi.h and libffi, and its answer is built with by gcc. The wheels'
configuration ([tool.cibuildwheel] in pyproject.toml), their workflow
(.github/workflows/wheels.yml), the README's tables and .ci/run agree on
the platforms, the Pythons and the tests run from each installed wheel."""

import ast
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
import yaml

import numthunk as nt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _setup_py():
    """setup.py's imports, constants and functions, without the module-level
    statements that find libffi for this build and call setup()."""
    path = os.path.join(ROOT, "setup.py")
    tree = ast.parse(_read("setup.py"), path)
    keep = [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef))
            or (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant))]
    namespace = {"__name__": "setup_definitions"}
    exec(compile(ast.Module(keep, type_ignores=[]), path, "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def setup_py():
    return _setup_py()


@pytest.fixture(scope="module")
def libffi_files():
    """This machine's ffi.h (with the ffitarget.h it includes) and shared
    libffi, as gcc finds them."""
    proc = subprocess.run(["gcc", "-H", "-fsyntax-only", "-x", "c", "-"],
                          input="#include <ffi.h>\n", capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    headers = [line.split(" ", 1)[1] for line in proc.stderr.splitlines()
               if line.startswith(". ") or line.startswith(".. ")]
    header = next(h for h in headers if os.path.basename(h) == "ffi.h")
    library = subprocess.run(["gcc", "-print-file-name=libffi.so"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert os.path.isabs(library) and os.path.isfile(library), library
    return os.path.dirname(header), [h for h in headers if h.startswith(os.path.dirname(header))
                                     and os.path.basename(h).startswith("ff")], library


def _prefix(libffi_files, include, lib=None, library_name=None):
    """A libffi prefix laid out as a platform keeps it: real copies of ffi.h
    and ffitarget.h in include/, of the shared library as lib/library_name."""
    _, headers, library = libffi_files
    os.makedirs(include, exist_ok=True)
    for header in headers:
        shutil.copy(header, include)
    if lib is not None:
        os.makedirs(lib, exist_ok=True)
        shutil.copy(library, os.path.join(lib, library_name))


@pytest.fixture
def no_pkg_config(monkeypatch, tmp_path):
    """pkg-config, where there is one, knows no libffi (as on a Mac whose
    Homebrew libffi is keg-only): the finder must search the prefixes."""
    empty = tmp_path / "no-pc"
    empty.mkdir()
    monkeypatch.setenv("PKG_CONFIG_LIBDIR", str(empty))
    monkeypatch.setenv("PKG_CONFIG_PATH", str(empty))


CALL_TWICE = r"""
#include <ffi.h>
#include <stdio.h>

static double twice(double x) { return 2.0 * x; }

int main(void)
{
    ffi_cif cif;
    ffi_type *types[1] = { &ffi_type_double };
    double x = 21.25, result = 0.0;
    void *values[1] = { &x };
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, 1, &ffi_type_double, types) != FFI_OK)
        return 1;
    ffi_call(&cif, FFI_FN(twice), &result, values);
    printf("%.2f\n", result);
    return 0;
}
"""


def test_numthunk_libffi_names_the_prefix_built_with(setup_py, libffi_files, tmp_path,
                                                     monkeypatch):
    """NUMTHUNK_LIBFFI's prefix comes before pkg-config's answer, and gcc
    given the finder's directories compiles against that prefix's ffi.h,
    links that prefix's libffi, and the program calls through libffi."""
    prefix = tmp_path / "libffi"
    _prefix(libffi_files, str(prefix / "include"), str(prefix / "lib"), "libffi.so")
    monkeypatch.setenv("NUMTHUNK_LIBFFI", str(prefix))
    include_dirs, library_dirs, libraries = setup_py["find_libffi"]()
    assert (include_dirs, library_dirs, libraries) == (
        [str(prefix / "include")], [str(prefix / "lib")], ["ffi"])

    src = tmp_path / "call.c"
    src.write_text(CALL_TWICE)
    exe = tmp_path / "call"
    cmd = ["gcc", "-H", "-Wl,-t", str(src), "-o", str(exe),
           *[f"-I{d}" for d in include_dirs], *[f"-L{d}" for d in library_dirs],
           *[f"-l{name}" for name in libraries]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    included = [line.split(" ", 1)[1] for line in proc.stderr.splitlines()
                if line.startswith(". ")]
    assert str(prefix / "include" / "ffi.h") in included, included
    linked = proc.stdout + proc.stderr
    assert str(prefix / "lib" / "libffi.so") in linked, linked
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (0, "42.50\n"), run


def test_numthunk_libffi_without_ffi_h_says_what_is_missing(setup_py, libffi_files, tmp_path,
                                                            monkeypatch):
    prefix = tmp_path / "libffi"
    _prefix(libffi_files, str(tmp_path / "elsewhere"), str(prefix / "lib"), "libffi.so")
    monkeypatch.setenv("NUMTHUNK_LIBFFI", str(prefix))
    with pytest.raises(SystemExit) as exc:
        setup_py["find_libffi"]()
    message = str(exc.value)
    assert f"NUMTHUNK_LIBFFI={prefix}: no ffi.h in {prefix / 'include'}" in message, message
    assert "apt-get install libffi-dev" in message


@pytest.mark.usefixtures("no_pkg_config")
def test_conda_on_macos(setup_py, libffi_files, tmp_path):
    """A conda environment's prefix (include/, lib/libffi.dylib) comes
    before Homebrew's on macOS."""
    conda = tmp_path / "conda"
    _prefix(libffi_files, str(conda / "include"), str(conda / "lib"), "libffi.dylib")
    found = setup_py["find_libffi"]({"CONDA_PREFIX": str(conda)}, "darwin")
    assert found == ([str(conda / "include")], [str(conda / "lib")], ["ffi"])


@pytest.mark.usefixtures("no_pkg_config")
def test_conda_on_windows_comes_before_vcpkg(setup_py, libffi_files, tmp_path):
    """conda keeps a Windows environment's C libraries under Library\\."""
    conda, vcpkg = tmp_path / "conda", tmp_path / "vcpkg"
    _prefix(libffi_files, str(conda / "Library" / "include"), str(conda / "Library" / "lib"),
            "ffi.lib")
    base = vcpkg / "installed" / "x64-windows"
    _prefix(libffi_files, str(base / "include"), str(base / "lib"), "ffi.lib")
    environ = {"CONDA_PREFIX": str(conda), "VCPKG_INSTALLATION_ROOT": str(vcpkg)}
    found = setup_py["find_libffi"](environ, "win32")
    assert found == ([str(conda / "Library" / "include")], [str(conda / "Library" / "lib")],
                     ["ffi"])
    del environ["CONDA_PREFIX"]
    assert setup_py["find_libffi"](environ, "win32") == (
        [str(base / "include")], [str(base / "lib")], ["ffi"])


@pytest.mark.usefixtures("no_pkg_config")
@pytest.mark.parametrize("variable", ["VCPKG_ROOT", "VCPKG_INSTALLATION_ROOT"])
@pytest.mark.parametrize("file, name", [("ffi.lib", "ffi"), ("libffi.lib", "libffi")])
def test_vcpkg_on_windows(setup_py, libffi_files, tmp_path, variable, file, name):
    """vcpkg's installed/x64-windows under either root variable; the library
    is linked by the name its file has (ffi.lib now, libffi.lib from the
    port's older builds)."""
    base = tmp_path / "vcpkg" / "installed" / "x64-windows"
    _prefix(libffi_files, str(base / "include"), str(base / "lib"), file)
    found = setup_py["find_libffi"]({variable: str(tmp_path / "vcpkg")}, "win32")
    assert found == ([str(base / "include")], [str(base / "lib")], [name])


@pytest.mark.usefixtures("no_pkg_config")
def test_vcpkg_triplet_and_a_prefix_without_its_library(setup_py, libffi_files, tmp_path):
    """VCPKG_DEFAULT_TRIPLET's tree is looked in first; a tree with ffi.h
    but no library is passed over, for the next one that has both."""
    root = tmp_path / "vcpkg"
    static = root / "installed" / "x64-windows-static"
    _prefix(libffi_files, str(static / "include"), str(static / "lib"), "ffi.lib")
    plain = root / "installed" / "x64-windows"
    _prefix(libffi_files, str(plain / "include"), str(plain / "lib"), "ffi.lib")
    environ = {"VCPKG_ROOT": str(root), "VCPKG_DEFAULT_TRIPLET": "x64-windows-static"}
    assert setup_py["find_libffi"](environ, "win32")[0] == [str(static / "include")]
    os.remove(static / "lib" / "ffi.lib")
    assert setup_py["find_libffi"](environ, "win32") == (
        [str(plain / "include")], [str(plain / "lib")], ["ffi"])


@pytest.mark.usefixtures("no_pkg_config")
def test_nothing_found_says_how_to_get_libffi_on_each_platform(setup_py, libffi_files, tmp_path):
    with pytest.raises(SystemExit) as exc:
        setup_py["find_libffi"]({}, "win32")
    message = str(exc.value)
    assert "none of CONDA_PREFIX, VCPKG_ROOT and VCPKG_INSTALLATION_ROOT is set" in message
    for how in ["apt-get install libffi-dev", "dnf install libffi-devel", "brew install libffi",
                "vcpkg install libffi:x64-windows", "conda install -c conda-forge libffi",
                "NUMTHUNK_LIBFFI=<prefix>"]:
        assert how in message, (how, message)
    # a prefix with the header and no library is named as searched, not taken
    base = tmp_path / "vcpkg" / "installed" / "x64-windows"
    _prefix(libffi_files, str(base / "include"))
    with pytest.raises(SystemExit) as exc:
        setup_py["find_libffi"]({"VCPKG_ROOT": str(tmp_path / "vcpkg")}, "win32")
    assert f"{base / 'include'} (with {base / 'lib'})" in str(exc.value), str(exc.value)


@pytest.mark.usefixtures("no_pkg_config")
def test_linux_looks_in_the_system_directories_first(setup_py, libffi_files, tmp_path):
    """Without pkg-config's answer, Linux takes the first of the system's
    directories that holds ffi.h, as the build always did (no library
    directory: the compiler's own search finds it), and conda's environment
    only after them."""
    conda = tmp_path / "conda"
    _prefix(libffi_files, str(conda / "include"), str(conda / "lib"), "libffi.so")
    multiarch = getattr(sys.implementation, "_multiarch", "")
    system = ["/usr/include", f"/usr/include/{multiarch}", "/usr/local/include",
              "/opt/homebrew/opt/libffi/include", "/usr/local/opt/libffi/include",
              os.path.join(sys.prefix, "include")]
    first = [d for d in system if os.path.exists(os.path.join(d, "ffi.h"))][:1]
    want = ((first, [], ["ffi"]) if first
            else ([str(conda / "include")], [str(conda / "lib")], ["ffi"]))
    assert setup_py["find_libffi"]({"CONDA_PREFIX": str(conda)}, "linux") == want
    # this machine keeps libffi in one of them: the suite builds the core with it
    assert first == [libffi_files[0]] or libffi_files[0] not in system


# The wheels: pyproject.toml, the workflow, the README and .ci/run agree.

def _cibuildwheel():
    return tomllib.loads(_read("pyproject.toml"))["tool"]["cibuildwheel"]


def _workflow():
    return yaml.safe_load(_read(".github", "workflows", "wheels.yml"))


def _platform_rows(text):
    """The README's platform table: {platform: [engine, here, runner]}."""
    head = "| platform | engine | run here (`.ci/run`) | run only on its hosted runner |"
    assert head in text
    table = text.split(head, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    rows = {}
    for line in table:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert len(cells) == 4, line
        rows[cells[0]] = cells[1:]
    return rows


def _tested_pythons(text):
    row = re.search(r"^\| Python \| CPython ([\d., ]+) \|", text, re.M)
    tested = [v.strip() for v in row.group(1).split(",")]
    if re.search(r"^\| CPython 3\.13t \(free-threaded\) \|.*\| tested", text, re.M):
        tested.append("3.13t")
    return tested


def _files(command):
    return re.findall(r"tests/test_\w+\.py", command)


@pytest.mark.parametrize("page", ["README.md", os.path.join("docs", "engines.md")])
def test_wheels_are_built_for_the_tested_pythons(page):
    """cibuildwheel builds a wheel for each Python the page says is tested,
    and .ci/run builds and tests each of them here (cp311 with the
    interpreter the run starts with)."""
    text = _read(page)
    tested = _tested_pythons(text)
    assert tested == ["3.11", "3.12", "3.13", "3.13t"], tested
    tags = ["cp" + v.replace(".", "") for v in tested]
    config = _cibuildwheel()
    assert config["build"] == [f"{tag}-*" for tag in tags]
    assert ("cpython-freethreading" in config.get("enable", [])) == ("cp313t" in tags)
    for tag in tags:
        assert re.search(rf"^\| CPython {tag[2]}\.{tag[3:].rstrip('t')}\S* .*`{tag}` manylinux",
                         text, re.M), tag
    ci = _read(".ci", "run")
    for tag in tags[1:]:
        assert f'numthunk-*{tag}*manylinux*.whl' in ci, tag


@pytest.mark.parametrize("page", ["README.md", os.path.join("docs", "engines.md")])
def test_workflow_builds_each_platform_of_the_table_on_its_runner(page):
    """The workflow's matrix is the platform table's rows, in order, each on
    the runner its row names; it runs cibuildwheel 3 (4 builds no cp313t)
    and keeps the wheels; every runner's OS has its configuration, libffi
    installed before the build."""
    rows = _platform_rows(_read(page))
    workflow = _workflow()
    triggers = workflow.get("on", workflow.get(True))
    assert {"push", "pull_request"} <= set(triggers)
    job = workflow["jobs"]["wheels"]
    matrix = job["strategy"]["matrix"]["include"]
    assert [m["platform"] for m in matrix] == list(rows)
    for m in matrix:
        assert rows[m["platform"]][2].startswith(f"`{m['os']}`: cibuildwheel"), m
    assert job["runs-on"] == "${{ matrix.os }}"
    assert job["strategy"]["fail-fast"] is False
    uses = [step.get("uses", "") for step in job["steps"]]
    build = next(step for step in job["steps"] if step.get("uses", "").startswith(
        "pypa/cibuildwheel@"))
    assert re.fullmatch(r"pypa/cibuildwheel@v3\.\d+\.\d+", build["uses"]), build
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith(
        "actions/upload-artifact@"))
    assert upload["with"]["path"] == build["with"]["output-dir"] + "/*.whl"
    assert uses.index(build["uses"]) < uses.index(upload["uses"])
    config = _cibuildwheel()
    family = {"ubuntu": "linux", "macos": "macos", "windows": "windows"}
    for m in matrix:
        os_config = config[family[m["os"].split("-")[0]]]
        assert "libffi" in str(os_config["before-all"]), m
        assert os_config["archs"] in (["native"], ["AMD64"]), m
    assert ("arm" in matrix[1]["os"], "arm" in matrix[0]["os"]) == (True, False)


def test_wheel_tests_are_the_readmes_and_those_ci_runs_outside_the_tree():
    """Each wheel's test command is the one the README prints; its files
    exist and are those .ci/run runs outside the tree against the cp313
    wheel; 3.13t's are among the files .ci/run runs on 3.13t, with the
    packages .ci/run installs there. The test sources are copied outside
    the tree as .ci/run copies them."""
    config = _cibuildwheel()
    (override,) = [o for o in config["overrides"] if o["select"] == "cp313t-*"]
    text = _read("README.md")
    assert f"`{config['test-command']}`" in text
    assert f"`{override['test-command']}`" in text
    ci = _read(".ci", "run")
    wheel313 = re.search(r"^wheel313_run\(\) \{\n(.*?)^\}", ci, re.M | re.S).group(1)
    assert _files(config["test-command"]) == _files(wheel313)
    for name in _files(config["test-command"]):
        assert os.path.isfile(os.path.join(ROOT, name)), name
    ft_files = _files(re.search(r"^FT_FEATURE_TESTS=\((.*?)\)", ci, re.M | re.S).group(1))
    assert set(_files(override["test-command"])) <= set(ft_files)
    assert override["test-extras"] == [] and config["test-extras"] == ["test"]
    ft_deps = re.search(r"^FT_TEST_DEPS=\((.*?)\)", ci, re.M | re.S).group(1)
    assert override["test-requires"] == [d.strip('"') for d in ft_deps.split()]
    outside = re.search(r"^OUTSIDE_FILES=\((.*?)\)", ci, re.M).group(1).split()
    assert "tests" in config["test-sources"]
    assert set(config["test-sources"]) <= set(outside)


def _this_platform():
    machine = platform.machine().lower()
    arch = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "AArch64", "arm64": "arm64"}
    if sys.platform.startswith("linux"):
        return f"Linux {arch.get(machine, machine)}"
    if sys.platform == "darwin":
        return f"macOS {'arm64' if machine == 'arm64' else arch.get(machine, machine)}"
    if sys.platform == "win32" and machine in ("amd64", "x86_64"):
        return "Windows x64"
    return None


def test_the_engine_the_table_names_for_this_platform_is_the_one_thunks_get():
    """The platform table's engine for the platform this runs on is the
    package's: native where a native engine is available, libffi where it
    is not; a platform with no row has libffi."""
    rows = _platform_rows(_read("README.md"))
    row = rows.get(_this_platform())
    engine = row[0] if row else "libffi"
    info = nt.engine_info()
    assert engine in ("native", "libffi"), (row, "the core does not build here, says the table")
    assert info["native_available"] == (engine == "native"), (engine, info)

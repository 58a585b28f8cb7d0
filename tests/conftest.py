"""Shared fixtures: the C fixture library, compiled by the system compiler
for this test session and loaded with ctypes; and the second compiler, clang,
for the tests that build their fixtures with both."""

import ctypes
import importlib.util
import os
import shlex
import shutil
import sys
import sysconfig

import pytest
from hypothesis import HealthCheck, settings

import numthunk as nt

from ntbuild import compile_shared, install_compiler_shims, own_compiler_caches

# Property-based tests without their own max_examples: a modest budget in
# the normal run; NUMTHUNK_HYPOTHESIS_PROFILE=long for a deeper one.
settings.register_profile("numthunk", max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("NUMTHUNK_HYPOTHESIS_PROFILE", "numthunk"))

# under the sanitizer run, compilers started by name get no preload
install_compiler_shims()
# and every compiler cache is this tree's run's own
own_compiler_caches()

# tests/site checks the built documentation site (docs extras, chromium): it
# runs on its own, `python -m pytest tests/site`. Here too, and not only in
# pyproject.toml's norecursedirs, so that the suite run outside the source
# tree (no pyproject.toml there) leaves it out: its conftest.py would shadow
# this one for the test modules' `from conftest import ...`.
collect_ignore = ["site"]

# Packages with no wheel for a free-threaded CPython of that version (PyPI
# has cp313 wheels of both, no cp313t): on such an interpreter, where the
# package is indeed not installed, a test module or test that imports it
# is skipped saying so. Anywhere else a missing package fails, as always.
NO_FREE_THREADED_WHEEL = {"numba": (3, 13), "cffi": (3, 13)}
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class _NoFreeThreadedWheel:
    """A meta-path finder that turns `import numba` (or cffi) into a skip."""

    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in self.names:
            pytest.skip(f"{top} has no free-threaded wheel for CPython "
                        f"{sys.version_info[0]}.{sys.version_info[1]} (cp"
                        f"{sys.version_info[0]}{sys.version_info[1]}t): the tests "
                        f"that need it run on the other interpreters",
                        allow_module_level=True)
        return None


def _uninstallable():
    if not FREE_THREADED:
        return set()
    return {name for name, version in NO_FREE_THREADED_WHEEL.items()
            if sys.version_info[:2] == version and importlib.util.find_spec(name) is None}


if _uninstallable():
    sys.meta_path.append(_NoFreeThreadedWheel(_uninstallable()))

HERE = os.path.dirname(os.path.abspath(__file__))

# How a test tests, as a marker (pyproject.toml says what each means, and
# --strict-markers refuses any other); registered here as well for the run
# outside the source tree, which has no pyproject.toml.
TECHNIQUES = ("guards", "differential", "leaks", "nomemory", "stress")


def pytest_configure(config):
    for name in TECHNIQUES:
        config.addinivalue_line("markers", f"{name}: how the test tests (pyproject.toml)")

# The engines a test can choose (bind's engine=), and the name each reports
# as a thunk's .engine on this machine. A test that runs on both takes the
# `engine` fixture, or parametrises over ENGINES itself.
ENGINES = ["native", "ffi"]
ENGINE_NAME = {"native": "native-x86_64-sysv", "ffi": "libffi"}


@pytest.fixture(params=ENGINES)
def engine(request):
    """Each engine in turn."""
    return request.param


CLANG_HELP = ("clang is needed: these tests build their fixtures with gcc and with clang, "
              "whose callees rely on the caller's extension of narrow integers. The test "
              "extras bring one (pip install -e \".[test]\" installs the ziglang package, "
              "whose `python -m ziglang cc` is clang); a system clang on PATH is used first "
              "(apt-get install clang); NUMTHUNK_TEST_CLANG names another.")


def clang_command():
    """The clang command line as a list: $NUMTHUNK_TEST_CLANG if set, else `clang`
    on PATH, else the test extras' `python -m ziglang cc`; None if none exists."""
    named = os.environ.get("NUMTHUNK_TEST_CLANG")
    if named:
        cmd = shlex.split(named)
        return cmd if shutil.which(cmd[0]) else None
    if shutil.which("clang"):
        return ["clang"]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "cc"]
    return None


def compiler_command(name):
    """"gcc" or "clang" -> the command line that runs it; fails the test
    (never skips) when it is missing."""
    if name == "clang":
        cmd = clang_command()
        if cmd is None:
            pytest.fail(CLANG_HELP)
        return cmd
    if shutil.which(name) is None:
        pytest.fail(f"{name} is needed: the tests build C fixtures with it "
                    f"(apt-get install {name})")
    return [name]


@pytest.fixture(scope="session")
def fixture_path():
    return compile_shared(os.path.join(HERE, "fixtures", "fixture.c"), "fixture")


@pytest.fixture(scope="session")
def lib(fixture_path):
    return ctypes.CDLL(fixture_path)


@pytest.fixture(scope="session")
def cfn(lib):
    """cfn(name, signature) -> numthunk.Function for a fixture function."""

    def make(name, signature, **kw):
        addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        return nt.Function(addr, signature, owner=lib, name=name, **kw)

    return make


@pytest.fixture
def f_sum(cfn):
    """The fixture's sum, double (const double *, int)."""
    return cfn("f_d_pi", "double (const double *, int)")


@pytest.fixture(scope="session")
def paths():
    """Directories a fresh interpreter needs on its path to unpickle what
    the tests of travel pickle (tests/travel.py)."""
    from travel import fresh_paths

    return fresh_paths()


@pytest.fixture(scope="session")
def ilib():
    """tests/fixtures/interop.c (what foreign libraries hand over), loaded."""
    return ctypes.CDLL(compile_shared(os.path.join(HERE, "fixtures", "interop.c"), "interop"))


@pytest.fixture(scope="session")
def ifn(ilib):
    """ifn(name, signature) -> numthunk.Function for a function of ilib."""

    def make(name, signature):
        addr = ctypes.cast(getattr(ilib, name), ctypes.c_void_p).value
        return nt.Function(addr, signature, owner=ilib, name=name)

    return make


@pytest.fixture(scope="session")
def dllib():
    """tests/fixtures/dlpack_kernels.c (DLTensor kernels), loaded."""
    return ctypes.CDLL(compile_shared(os.path.join(HERE, "fixtures", "dlpack_kernels.c"),
                                      "dlpack_kernels", extra=["-I", nt.get_include()]))


@pytest.fixture(scope="session")
def dlkern(dllib):
    """dlkern(name, signature) -> numthunk.Function for a function of dllib."""
    dl = dllib

    def make(name, signature):
        addr = ctypes.cast(getattr(dl, name), ctypes.c_void_p).value
        return nt.Function(addr, signature, owner=dl, name=name)

    return make


@pytest.fixture(scope="session")
def ntexport():
    """tests/exporters/ntexport.c, built for this interpreter: buffer and
    DLPack exporters of exactly the layouts a test asks for."""
    from ntbuild import build_extension

    header = os.path.join(nt.get_include(), "numthunk", "dlpack.h")
    where = build_extension(os.path.join(HERE, "exporters", "ntexport.c"), "ntexport",
                            include_dirs=[nt.get_include()], depends=[header])
    if where not in sys.path:
        sys.path.insert(0, where)
    import ntexport as mod
    return mod

"""The module numthunk._core: heap types made from specs, module state, and
one core per process (docs/architecture.md, "The C/Python boundary").

The core's registry, engines and quarantine are process-wide, so a second
module object (a second load by importlib, another interpreter) is refused
with an ImportError that says why; the first one goes on working."""

import gc
import importlib
import importlib.util
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import numthunk as nt

HEAPTYPE = 1 << 9
IMMUTABLETYPE = 1 << 8
ONCE = "numthunk._core is already loaded in this process"
TYPES = [nt._core.Signature, nt._core.Thunk, nt._core.Derived, nt._core.Strided,
         nt._core.Address, type(nt.ARG)]


def _sum():
    return nt.Function(nt._core._kernels()["sum"], "double (const double *x, int n)")


def _holds(obj, what):
    """Whether the collector's traversal of obj visits what."""
    return any(r is what for r in gc.get_referents(obj))


@pytest.mark.parametrize("tp", TYPES, ids=lambda t: t.__name__)
def test_the_types_are_immutable_heap_types(tp):
    assert tp.__flags__ & HEAPTYPE and tp.__flags__ & IMMUTABLETYPE
    assert tp.__module__ == "numthunk._core"
    with pytest.raises(TypeError, match="immutable type"):
        tp.extra = 1


class WithDict(nt.Thunk):
    pass


class WithSlots(nt.Thunk):
    __slots__ = ()


@pytest.mark.parametrize("cls", [nt._core.Thunk, nt.Thunk, WithDict, WithSlots])
def test_the_collector_sees_a_thunk_hold_its_type(cls):
    fn = _sum()
    a = np.arange(4.0)
    t = cls(fn._signature, fn.address, (a, nt.size(a)), fn)
    assert _holds(t, type(t)) and _holds(t, a)
    assert t() == 6.0
    # a cycle through the instance and its class is collected
    if cls is WithDict:
        t.me = t
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


def test_the_markers_hold_their_types():
    a = np.arange(3.0)
    for m in [nt.size(a), nt.strided(a), nt.address(1, owner=a)]:
        assert _holds(m, type(m)) and _holds(m, a)


def test_the_module_state_holds_the_types_and_the_registered_hooks():
    for obj in TYPES + [nt.ARG, nt._core._C_API, nt.Thunk]:
        assert _holds(nt._core, obj), obj


def test_reload_keeps_the_one_core():
    core = nt._core
    assert importlib.reload(core) is core
    assert nt.bind(_sum(), np.ones(3), 3)() == 3.0


def test_a_second_load_is_refused():
    spec = importlib.util.spec_from_file_location("numthunk._core", nt._core.__file__)
    second = importlib.util.module_from_spec(spec)
    assert second is not nt._core
    with pytest.raises(ImportError, match="^" + ONCE + r": its registry, engines and "
                       r"quarantine are process-wide"):
        spec.loader.exec_module(second)
    # the first core goes on
    assert sys.modules["numthunk._core"] is nt._core
    assert nt.bind(_sum(), np.ones(2), 2)() == 2.0


def test_a_subinterpreter_is_refused():
    # _xxsubinterpreters (3.11, 3.12) or _interpreters (3.13): the
    # extension's file loaded in a second interpreter of this process
    script = "\n".join([
        "import importlib.util",
        f"spec = importlib.util.spec_from_file_location('numthunk._core', {nt._core.__file__!r})",
        "module = importlib.util.module_from_spec(spec)",
        "spec.loader.exec_module(module)",
    ])
    code = textwrap.dedent(f"""
        import numpy, numthunk
        try:
            import _interpreters as interpreters
        except ImportError:
            import _xxsubinterpreters as interpreters
        interp = interpreters.create()
        try:
            result = interpreters.run_string(interp, {script!r})
        except Exception as exc:       # 3.11, 3.12: RunFailedError
            result = exc
        print("RESULT", result)
        fn = numthunk.Function(numthunk._core._kernels()["sum"], "double (const double *, int)")
        print("FIRST", numthunk.bind(fn, numpy.ones(2), 2)())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT"))
    assert "ImportError" in line, r.stdout
    if sys.version_info >= (3, 12):
        assert "does not support loading in subinterpreters" in line, line
    else:
        assert ONCE in line, line
    assert "FIRST 2.0" in r.stdout

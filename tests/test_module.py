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


class _Pair(tuple):
    """A tuple subclass, as SciPy's LowLevelCallable is."""


def test_capsules_of_address_0_are_refused():
    sig = "double (double)"
    for make in (lambda a: nt._core._capsule(a, sig, None),
                 lambda a: nt._core._lowlevelcallable(_Pair, a, sig, None)):
        with pytest.raises(ValueError) as info:
            make(0)
        assert str(info.value) == "address is 0 (NULL)"
    assert nt._core._capsule_pointer(nt._core._capsule(1, sig, None)) == (1, sig)
    made = nt._core._lowlevelcallable(_Pair, 1, sig, None)
    assert type(made) is _Pair and nt._core._capsule_pointer(made[0]) == (1, sig)


def test_lowlevelcallable_takes_a_tuple_subclass_an_address_a_name_and_an_owner():
    sig = "double (double)"
    for args in [(list, 4096, sig, None), (_Pair(), 4096, sig, None), (int, 4096, sig, None),
                 (_Pair, 4096, sig.encode(), None), (_Pair, 4096, None, None),
                 (_Pair, 4096, sig), (_Pair, 4096, sig, None, None)]:
        with pytest.raises(TypeError) as info:
            nt._core._lowlevelcallable(*args)
        assert str(info.value) == ("_lowlevelcallable(cls, address, name, owner): cls a tuple "
                                   "subclass, name a str")
    for cls in (tuple, _Pair):
        made = nt._core._lowlevelcallable(cls, 4096, sig, None)
        assert type(made) is cls and len(made) == 3 and made[2] is None


def test_capsule_pointer_takes_a_capsule():
    import ctypes

    new = ctypes.pythonapi["PyCapsule_New"]
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    for obj in (None, 4096, "double (double)", (new(4096, None, None),)):
        with pytest.raises(TypeError) as info:
            nt._core._capsule_pointer(obj)
        assert str(info.value) == "expected a PyCapsule"
    assert nt._core._capsule_pointer(new(4096, None, None)) == (4096, None)
    assert nt._core._capsule_pointer(nt._core._capsule(8192, "void (int)", None)) == (8192,
                                                                                      "void (int)")

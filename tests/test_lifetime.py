"""Reference safety: bound objects live as long as the thunk, buffers are
released exactly once, released thunks trap instead of running garbage."""

import ctypes
import gc
import os
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import numthunk as nt

SUM = "double (const double *x, int n)"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=["native", "ffi"])
def engine(request):
    return request.param


def test_bound_array_kept_alive(cfn):
    a = np.array([1.0, 2.0, 3.0])
    ref = weakref.ref(a)
    t = nt.bind(cfn("f_d_pi", SUM), a, nt.size(a))
    del a
    gc.collect()
    assert ref() is not None
    assert t() == 6.0
    del t
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("how", ["release", "del", "context"])
def test_refcount_restored_and_resize_works(cfn, how):
    # NumPy's resize(refcheck=False) skips every check, exported buffers
    # included (a memoryview is no safer): only the default path is pinned.
    a = np.zeros(4)
    before = sys.getrefcount(a)
    fn = cfn("f_d_pi", SUM)
    if how == "context":
        with nt.bind(fn, a, nt.size(a)) as t:
            assert sys.getrefcount(a) > before
            with pytest.raises((ValueError, BufferError)):
                a.resize(10)      # pinned: the held buffer holds a reference
    else:
        t = nt.bind(fn, a, nt.size(a))
        assert sys.getrefcount(a) > before
        with pytest.raises((ValueError, BufferError)):
            a.resize(10)
        if how == "release":
            t.release()
        else:
            del t
            gc.collect()
    assert sys.getrefcount(a) == before
    a.resize(10)
    assert a.shape == (10,)


def test_ctypes_resize_is_not_stopped_by_a_binding(cfn, engine):
    """docs/lifetime.md: ctypes.resize() moves a ctypes array whatever holds
    its buffer, so a binding cannot pin it (the documented hazard, beside
    NumPy's resize(refcheck=False)). Should ctypes ever refuse, this fails
    and the page's sentence goes."""
    arr = (ctypes.c_double * 4)(1.0, 2.0, 3.0, 4.0)
    t = nt.bind(cfn("f_d_pi", SUM), arr, 4, engine=engine)
    assert t() == 10.0
    before = ctypes.addressof(arr)
    ctypes.resize(arr, 8 * 4096)                # allowed while the thunk holds the buffer
    assert ctypes.addressof(arr) != before      # the memory moved: t must not be called now
    t.rebind(0, np.arange(4.0))                 # rebound, it is safe again
    assert t() == 6.0


def test_rebind_keeps_old_buffers_until_reclaim(cfn):
    a, b = np.ones(3), np.ones(5)
    before_a = sys.getrefcount(a)
    t = nt.bind(cfn("f_d_pi", SUM), a, nt.size(a))
    t.rebind(0, b)
    assert t() == 5.0
    assert sys.getrefcount(a) > before_a        # a caller may still read the old context
    t.reclaim()
    assert sys.getrefcount(a) == before_a
    t.release()


def test_target_owner_kept_alive(lib, fixture_path):
    f = ctypes.CDLL(fixture_path).f_d_d
    f.restype = ctypes.c_double
    f.argtypes = [ctypes.c_double]
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    cb = proto(lambda x: x * 3)
    ref = weakref.ref(cb)
    t = nt.bind(cb, 2.0)
    del cb
    gc.collect()
    assert ref() is not None and t() == 6.0
    del t
    gc.collect()
    assert ref() is None


def test_ctypes_view_keeps_thunk_alive(cfn):
    t = nt.bind(cfn("f_d_d", "double (double)"), 4.0)
    ref = weakref.ref(t)
    fn = t.ctypes
    del t
    gc.collect()
    assert ref() is not None
    assert fn() == 4.0


def test_release_waits_for_calls_from_other_threads(engine):
    """release() from one thread while another is inside __call__ (GIL
    released around a nogil target) waits for that call to return, then
    makes further calls fail. The target forwards its argument and holds
    the call open for a while, so the window is real."""
    order = []
    started = threading.Event()

    def body(x):
        started.set()
        time.sleep(0.2)                 # the GIL is free: release() runs now
        order.append("call returns")
        return x * 2

    cb = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(body)
    t = nt.bind(cb, nt.ARG, engine=engine)
    results = []
    th = threading.Thread(target=lambda: results.append(t(21.0)))
    th.start()
    assert started.wait(10)
    t.release()
    order.append("release returns")
    th.join(20)
    assert not th.is_alive()
    assert results == [42.0]
    assert order == ["call returns", "release returns"]
    with pytest.raises(ValueError, match="released"):
        t(1.0)


def test_released_thunk_traps(fixture_path):
    code = f"""
import ctypes, numthunk as nt
lib = ctypes.CDLL({fixture_path!r})
fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, "double (double)")
t = nt.bind(fn, 1.0)
call = ctypes.CFUNCTYPE(ctypes.c_double)(t.address)
assert call() == 1.0
t.release()
call()
print("survived")
"""
    for backend in ("native", "ffi"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**__import__("os").environ, "NUMTHUNK_BACKEND": backend})
        assert out.returncode != 0, backend
        assert "numthunk: called a released thunk" in out.stderr, (backend, out.stderr)
        assert "survived" not in out.stdout


@pytest.mark.parametrize("engine", ["native", "ffi"])
def test_a_temporary_s_address_traps_naming_the_thunk(fixture_path, engine):
    """solver(nt.bind(...).address, ...): the thunk is gone when the
    expression ends, before the solver calls it. The trap names the thunk
    and says what usually causes it."""
    code = f"""
import ctypes, numthunk as nt
lib = ctypes.CDLL({fixture_path!r})
fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, "double (double)")
solver = lib.f_d_Fddi
solver.restype = ctypes.c_double
solver.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
print(hex(fn.address), flush=True)
solver(nt.bind(fn, nt.ARG, engine={engine!r}).address, 0.0, 1.0, 10)
print("survived")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    target = out.stdout.split()[0]
    assert out.returncode == -6, (out.returncode, out.stderr)    # SIGABRT
    assert "survived" not in out.stdout
    lines = out.stderr.splitlines()
    assert lines[0] == ("numthunk: called a released thunk: double (double) over "
                        f"double (double), target at {target}"), out.stderr
    assert "a temporary whose address was kept" in lines[1]
    assert "with nt.bind(...) as t:" in lines[1]
    assert lines[1].endswith(" See docs/lifetime.md."), lines[1]


def test_refusals_of_released_thunks_name_the_page(cfn, engine):
    """Every refusal caused by a released thunk says where the rules are:
    a call, a rebind, a bind of it (as target, its raw address as a
    function pointer, through a thunk that uses it), a call of a thunk that uses it, a copy
    and a pickle."""
    import copy
    import pickle
    see = r" \(see docs/lifetime\.md\)$"
    assert os.path.isfile(os.path.join(ROOT, "docs", "lifetime.md"))
    solver = cfn("f_d_Fddi", "double (double (*)(double), double, double, int)")
    inner = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine=engine)
    outer = nt.bind(inner, 2.0, engine=engine)          # double (void), uses inner
    mid = nt.bind(inner, nt.ARG, engine=engine)         # double (double), uses inner
    address = inner.address
    inner.release()
    with pytest.raises(ValueError, match="^the thunk has been released" + see):
        inner(1.0)
    with pytest.raises(ValueError, match="^the thunk has been released" + see):
        inner.rebind(0, 1.0)
    with pytest.raises(ValueError, match="^this thunk uses a released thunk .* through the "
                                         "target: .*bind again with live thunks" + see):
        outer()
    with pytest.raises(ValueError, match="^the thunk has been released" + see):
        nt.bind(inner, 1.0, engine=engine)
    with pytest.raises(ValueError, match=r"^argument 1 \(.*\) is a released thunk .*" + see):
        nt.bind(solver, nt.address(address), 0.0, 1.0, 10, engine=engine)
    with pytest.raises(ValueError, match=r"^argument 1 \(.*\) uses a released thunk .*" + see):
        nt.bind(solver, mid, 0.0, 1.0, 10, engine=engine)
    with pytest.raises(ValueError, match="^cannot copy a released thunk" + see):
        copy.copy(inner)
    with pytest.raises(pickle.PicklingError, match="^cannot pickle a released thunk" + see):
        pickle.dumps(inner)


def test_the_address_docstring_says_what_holds_a_thunk():
    doc = nt.Thunk.address.__doc__
    assert "does not hold the thunk" in doc and "solver(nt.bind(...).address)" in doc


class Labelled(nt.Thunk):
    """A subclass without __slots__: instances have a __dict__."""


class CoreLabelled(nt._core.Thunk):
    pass


def _make(cls, fn, *values):
    """A new instance in memory that held garbage: a field the allocation
    leaves unset (the __dict__ pointer after the bindings) reads as such."""
    size = sys.getsizeof(cls(fn.csig, fn.address, values, fn))
    junk = [b"\xff" * (size - sys.getsizeof(b"")) for _ in range(64)]
    del junk
    return cls(fn.csig, fn.address, values, fn)


@pytest.mark.parametrize("cls", [Labelled, CoreLabelled])
def test_subclass_without_slots_has_attributes(cfn, cls):
    a = np.arange(4.0)
    t = _make(cls, cfn("f_d_pi", SUM), a, nt.size(a))
    assert t.__dict__ == {}
    t.label = "sum of a"
    t.data = [1, 2]
    assert t.label == "sum of a" and t.__dict__ == {"label": "sum of a", "data": [1, 2]}
    assert t() == 6.0
    del t.label
    assert not hasattr(t, "label")


@pytest.mark.parametrize("cls", [Labelled, CoreLabelled])
def test_subclass_dict_is_traversed_by_the_collector(cfn, cls):
    a = np.arange(4.0)
    t = _make(cls, cfn("f_d_pi", SUM), a, nt.size(a))
    t.me = t                            # a cycle through the instance dict
    ref, ref_a = weakref.ref(t), weakref.ref(a)
    del t, a
    gc.collect()
    assert ref() is None and ref_a() is None

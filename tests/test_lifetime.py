"""A thunk's life: bound objects live as long as the thunk and their
references balance, buffers are released exactly once, a release or reclaim
while a call is in flight (or from inside the target) waits for it, thunks
that nothing holds are collected, released thunks trap instead of running
garbage."""

import ctypes
import gc
import os
import subprocess
import sys
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import numthunk as nt

from conftest import ENGINE_NAME, ENGINES
from thunks import SUM, Index, Owner, bind, count_is, kept, run_bounded, run_py, sum_fn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------- reference counts
#
# First in the file: a missing reference would make later tests crash.


def test_owner_is_counted_and_given_back():
    """A thunk keeps its target (the Function, which keeps its owner) alive."""
    owner = kept(Owner())
    f = kept(nt.Function(sum_fn(), "double (const double *x, int n)", owner=owner))
    arr = kept(np.ones(2))
    gc.collect()
    rf, ro, ra = sys.getrefcount(f), sys.getrefcount(owner), sys.getrefcount(arr)
    t = nt.bind(f, arr, 2)
    assert sys.getrefcount(f) >= rf + 1
    assert t() == 2.0
    del t
    ok_f, got_f = count_is(f, rf)
    ok_a, got_a = count_is(arr, ra)          # repaired before anything is collected
    gc.collect()
    assert ok_f, f"the target's count went from {rf} to {got_f} after bind + del"
    assert ok_a, f"a bound array's count went from {ra} to {got_a} after bind + del"
    assert count_is(owner, ro)[0]


def test_bound_objects_are_counted_and_given_back():
    f = kept(nt.Function(sum_fn(), "double (const double *x, int n)"))
    arr = kept(np.arange(5.0))
    big = kept(10**12 + int("5"))     # a fresh int object, not a shared constant
    gc.collect()
    r_arr, r_n = sys.getrefcount(arr), sys.getrefcount(big)
    t = nt.bind(f, arr, nt.ARG)
    assert sys.getrefcount(arr) >= r_arr + 1      # the binding holds it
    assert t(5) == 10.0
    t.release()
    ok, got = count_is(arr, r_arr)
    gc.collect()
    assert ok, f"a bound array's count went from {r_arr} to {got} after bind + release"
    del t
    gc.collect()
    assert count_is(arr, r_arr)[0]

    f2 = kept(nt.Function(sum_fn(), "int64_t (int64_t)"))
    t2 = nt.bind(f2, big)
    ok, got = count_is(big, r_n + 1)
    assert ok, f"a bound int's count went from {r_n} to {got} with the binding"
    del t2
    gc.collect()
    ok, got = count_is(big, r_n)
    assert ok, f"a bound int's count went from {r_n} to {got} after bind + del"


def test_capsule_keeps_its_thunk_alive():
    f = kept(nt.Function(sum_fn(), "double (const double *x, int n)"))
    t = kept(nt.bind(f, kept(np.ones(3)), 3))
    gc.collect()
    r0 = sys.getrefcount(t)
    llc = t.lowlevelcallable()
    assert sys.getrefcount(t) >= r0 + 1
    del llc
    gc.collect()
    assert count_is(t, r0)[0]
    cap = nt._core._capsule(t.address, "double (void)", t)
    ok, got = count_is(t, r0 + 1)
    assert ok, f"a capsule took {got - r0} references to its owner, not 1"
    del cap
    gc.collect()
    assert count_is(t, r0)[0]


# ---------------------------------------------------------------- bound objects and buffers


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


def _release_during_a_call(call, thunk, started, order):
    """call() in another thread; once its target has set started,
    thunk.release() here, noted in order when it returns. The results of
    the call, which has ended."""
    results = []
    th = threading.Thread(target=lambda: results.append(call()))
    th.start()
    assert started.wait(10)
    thunk.release()
    order.append("release returns")
    th.join(20)
    assert not th.is_alive()
    return results


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
    assert _release_during_a_call(lambda: t(21.0), t, started, order) == [42.0]
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
    for name in ENGINES:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**__import__("os").environ, "NUMTHUNK_ENGINE": name})
        assert out.returncode != 0, name
        assert "numthunk: called a released thunk" in out.stderr, (name, out.stderr)
        assert "survived" not in out.stdout


@pytest.mark.parametrize("engine", ENGINES)
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


@pytest.mark.parametrize("release_first", [False, True])
def test_the_trap_names_its_own_target_when_plans_are_shared(fixture_path, engine, release_first):
    """Two targets of one Signature object share its plans; the trap of a
    released thunk names the target of that thunk (life/released.c nt_plan_what
    keeps one text per target), not the other's. The other target's thunk
    is released first, so the plan already holds a description made for
    the other target when this thunk's is asked for (with `first` alive,
    none is made until this thunk goes)."""
    code = f"""
import ctypes, ctypes.util, numthunk as nt
lib = ctypes.CDLL({fixture_path!r})
libm = ctypes.CDLL(ctypes.util.find_library("m"))
sig = nt.Signature("double (double)")
mine = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, sig)
other = nt.Function(ctypes.cast(libm.cos, ctypes.c_void_p).value, sig)
first = nt.bind(other, nt.ARG, engine={engine!r})     # the shared plan's first target
assert first(0.0) == 1.0
if {release_first!r}:
    first.release()                                   # the plan's description: other's
solver = lib.f_d_Fddi
solver.restype = ctypes.c_double
solver.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
print(hex(mine.address), hex(other.address), flush=True)
solver(nt.bind(mine, nt.ARG, engine={engine!r}).address, 0.0, 1.0, 10)
print("survived")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    target, other = out.stdout.split()[:2]
    assert target != other
    assert out.returncode == -6, (out.returncode, out.stderr)    # SIGABRT
    assert out.stderr.splitlines()[0] == (
        f"numthunk: called a released thunk: double (double) over double (double), "
        f"target at {target}"), out.stderr


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
                                         "target: .*a target cannot be rebound: bind a new "
                                         "thunk over a live one" + see):
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


def test_a_released_thunk_still_describes_itself(cfn, engine):
    """csig is made once (each read is the same Signature) and is a
    description a released thunk keeps: the same whether it was read before
    the release or first after it; the code and the values are what go."""
    fn = cfn("f_d_dpi", "double (double, const double *, int)")
    read, unread = (nt.bind(fn, nt.ARG, np.ones(3), 3, engine=engine) for _ in range(2))
    before = read.csig
    assert read.csig is before and str(before) == "double (double)"
    read.release()
    unread.release()
    assert read.csig is before
    assert unread.csig == before and unread.csig is unread.csig
    assert read.signature == unread.signature == before
    for t in (read, unread):
        with pytest.raises(ValueError, match="^the thunk has been released"):
            _ = t.address
        with pytest.raises(ValueError, match="^the thunk has been released"):
            _ = t.bindings


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


# ---------------------------------------- release and reclaim while a call is in flight


def test_release_while_call_converts_its_arguments(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    assert t(a, 4) == 6.0
    with pytest.raises(ValueError, match="released while its arguments were converted"):
        t(a, Index(4, t.release))
    assert t.released
    with pytest.raises(ValueError, match="released"):
        t(a, 4)
    # the same through a value the package resolves first (arr.ctypes)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    with pytest.raises(ValueError, match="released"):
        t(a.ctypes, Index(4, t.release))
    assert t.released


def test_release_while_rebind_converts(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, 4)
    with pytest.raises(ValueError, match="released while rebind"):
        t.rebind(1, Index(2, t.release))
    assert t.released
    with pytest.raises(ValueError, match="released"):
        t.rebind(1, 2)


def test_reclaim_with_a_call_in_flight_is_deferred(cfn, engine):
    a, b = np.arange(4.0), np.arange(10.0, 14.0)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    holder = bind(engine, cfn("f_d_pi", SUM), a, nt.ARG)
    ref_a = weakref.ref(a)

    def during():
        holder.rebind(0, b)
        holder.reclaim()                # holder has no call in flight: now
        t.reclaim()                     # t is calling: deferred, no error
        return 4

    assert t(b, Index(4, during)) == sum(range(10, 14))
    del a
    gc.collect()
    assert ref_a() is None
    assert holder(4) == sum(range(10, 14))


def test_target_that_releases_its_own_thunk(engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    box = {}

    def body(x):
        box["t"].release()              # deferred until this call returns
        box["released_inside"] = box["t"].released
        return x * 2

    cb = proto(body)
    t = box["t"] = bind(engine, cb, nt.ARG)
    assert run_bounded(lambda: t(3.0)) == 6.0
    assert box["released_inside"] and t.released
    with pytest.raises(ValueError, match="released"):
        t(1.0)
    with pytest.raises(ValueError, match="released"):
        _ = t.address


def test_target_that_reclaims_and_rebinds_its_own_thunk(cfn, engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)
    box = {}

    def body(x, y):
        box["t"].rebind(1, y + 1)
        box["t"].reclaim()
        return x + y

    cb = proto(body)
    t = box["t"] = bind(engine, cb, nt.ARG, 1.0)
    assert run_bounded(lambda: t(1.0)) == 2.0
    assert run_bounded(lambda: t(1.0)) == 3.0


# ---------------------------------------------------------------- garbage collection


def test_function_call_creates_no_garbage(cfn):
    fn_lib = cfn("f_d_d", "double (double)")
    addr, lib = fn_lib.address, fn_lib.owner
    for _ in range(200):                                      # warm up
        nt.Function(addr, "double (double)", owner=lib)(1.0)
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20_000):
            assert nt.Function(addr, "double (double)", owner=lib)(float(i)) == float(i)
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    finally:
        gc.enable()
    assert grown < 512 * 1024, f"{grown} bytes kept by 20,000 calls"


_EXPORT_CYCLE = """
import array, ctypes, gc, sys, weakref
import numpy as np
import numthunk as nt
memset = nt.Function.from_library("libc.so.6", "memset", "void *(void *s, int c, size_t n)")
box = {"memoryview": lambda: memoryview(bytearray(24)),
       "memoryview of an array": lambda: memoryview(np.zeros(3)),
       "array.array": lambda: array.array("d", [0.0] * 3),
       "ctypes array": lambda: (ctypes.c_double * 3)()}[sys.argv[1]]
exporter = box()
t = nt.bind(memset, exporter, 7, 24, engine=sys.argv[2])
if sys.argv[3] == "retired":                  # the export on the retired list
    t.rebind(0, box())
refs = [weakref.ref(t)]
cycle = [exporter, t]
cycle.append(cycle)
del exporter, t, cycle
gc.collect()
assert refs[0]() is None, "the thunk in the cycle was not collected"
print("collected")
"""


@pytest.mark.parametrize("where", ["bound", "retired"])
@pytest.mark.parametrize("exporter", ["memoryview", "memoryview of an array", "array.array",
                                      "ctypes array"])
def test_a_cycle_through_a_bound_buffer_exporter_is_collected(engine, exporter, where):
    # The collector never clears an exporter the thunk holds an export of:
    # a memoryview refuses tp_clear while exported, and its dealloc then
    # crashed.
    r = subprocess.run([sys.executable, "-c", _EXPORT_CYCLE, exporter, engine, where],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "collected", (r.returncode, r.stderr)
    assert "BufferError" not in r.stderr, r.stderr


def test_an_exporter_the_thunk_holds_is_given_back_when_the_cycle_goes(engine):
    memset = nt.Function.from_library("libc.so.6", "memset", "void *(void *s, int c, size_t n)")
    buf = bytearray(8)
    m = memoryview(buf)
    t = bind(engine, memset, m, 5, 8)
    t()
    cycle = [t]
    cycle.append(cycle)
    ref = weakref.ref(t)
    del t, cycle
    gc.collect()
    assert ref() is None
    m.release()                    # no export left: release() would raise BufferError
    assert buf == bytearray([5] * 8)


def test_address_owned_by_its_holder_is_collected(cfn, engine):
    class Holder:
        pass

    h = Holder()
    h.buf = np.zeros(3)
    h.t = bind(engine, cfn("f_p_p", "void *(void *)"), nt.address(h.buf.ctypes.data, owner=h))
    ref_h, ref_t = weakref.ref(h), weakref.ref(h.t)
    del h
    gc.collect()
    assert ref_h() is None and ref_t() is None


def test_callback_closing_over_its_own_thunk_is_collected(engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)

    def make():
        t = None

        def body(x):
            return x + (0.0 if t is None else 1.0)

        cb = proto(body)
        t = bind(engine, cb, nt.ARG)
        return t

    t = make()
    assert t(1.0) == 2.0
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


def test_thunk_rebound_into_itself_is_collected(cfn, engine):
    t = bind(engine, cfn("f_p_p", "void *(void *)"), None)
    t.rebind(0, nt.address(t.address, owner=t))
    assert t() == t.address
    t.reclaim()
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


# ---------------------------------------- values and owners a call still needs


def test_release_inside_the_target_keeps_bound_values_until_it_returns(engine):
    # A call from Python is in flight from before its arguments are
    # converted until it returns: a release() from inside the target is
    # deferred, and the values the thunk holds stay alive while the target
    # still reads them.
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int)
    box = {}

    def body(p, n):
        box["t"].release()
        gc.collect()
        box["alive_inside"] = box["ref"]() is not None
        box["released_inside"] = box["t"].released
        return sum(p[i] for i in range(n))

    cb = proto(body)
    a = np.arange(1.0, 5.0)
    box["ref"] = weakref.ref(a)
    t = box["t"] = nt.bind(cb, a, nt.ARG, engine=engine)
    assert t.engine == ENGINE_NAME[engine]
    del a
    assert t(4) == 10.0
    assert box["alive_inside"], "release() inside the call dropped the bound array"
    assert box["released_inside"] and t.released
    gc.collect()
    assert box["ref"]() is None         # given back once the call returned


def test_address_keeps_its_owner_alive_while_bound(engine, cfn):
    # address(n, owner) holds owner: the memory n points into stays valid
    # while the address, or a thunk bound to it, exists.
    buf = np.arange(3.0)
    ref = weakref.ref(buf)
    addr = nt.address(buf.ctypes.data, owner=buf)
    assert addr.owner is buf
    t = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), addr, nt.ARG,
                engine=engine)
    del buf, addr
    gc.collect()
    assert ref() is not None, "the address did not keep its owner"
    assert t(3) == 3.0
    t.release()
    del t
    gc.collect()
    assert ref() is None


# ------------------------------------------ calls in flight: the last one out
#
# python/thunk.c call_done / thunk_release / thunk_reclaim: with k calls of one
# thunk in flight (its target calls it again), a release() or reclaim()
# from the innermost is carried out when the count falls to 0, not at 1.

NESTED = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int,
                          ctypes.c_int)


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_release_deep_in_nested_calls_waits_for_the_outermost(engine, depth):
    box = {"alive": []}

    def body(p, n, level):
        if level > 0:
            inner = box["t"](level - 1)            # one more call in flight
            gc.collect()
            box["alive"].append(box["ref"]() is not None)   # the inner one released
            return inner + sum(p[i] for i in range(n))
        box["t"].release()
        box["released_inside"] = box["t"].released
        return sum(p[i] for i in range(n))

    cb = NESTED(body)
    a = np.arange(1.0, 5.0)
    box["ref"] = weakref.ref(a)
    t = box["t"] = nt.bind(cb, a, 4, nt.ARG, engine=engine)
    del a
    assert t(depth) == 10.0 * (depth + 1)
    assert box["released_inside"] and t.released
    assert box["alive"] == [True] * depth, "torn down with calls still in flight"
    gc.collect()
    assert box["ref"]() is None                     # the last call out gave it back
    with pytest.raises(ValueError, match="released"):
        t(0)


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_reclaim_deep_in_nested_calls_waits_for_the_outermost(engine, depth):
    """The outer calls still read the array bound when they started: a
    rebind + reclaim() from the innermost keeps it until the last returns."""
    box = {"alive": []}
    b = np.arange(10.0, 14.0)

    def body(p, n, level):
        if level > 0:
            inner = box["t"](level - 1)
            gc.collect()
            box["alive"].append(box["ref"]() is not None)
            return inner + sum(p[i] for i in range(n))
        box["t"].rebind(0, b)
        box["t"].reclaim()
        return sum(p[i] for i in range(n))

    cb = NESTED(body)
    a = np.arange(1.0, 5.0)
    box["ref"] = weakref.ref(a)
    t = box["t"] = nt.bind(cb, a, 4, nt.ARG, engine=engine)
    del a
    assert t(depth) == 10.0 * (depth + 1)
    assert box["alive"] == [True] * depth, "reclaimed with calls still in flight"
    gc.collect()
    assert box["ref"]() is None
    assert t.bindings[0] is b and not t.released
    assert t(0) == 46.0


@pytest.mark.parametrize("engine", ENGINES)
def test_keep_holds_its_object_and_changes_nothing_of_the_target(cfn, engine):
    """bind(..., keep=obj): the thunk's target is the Function as it was,
    every attribute carried (name, nogil, memoryviews, depends, structs,
    signature, address), with obj held as long as the thunk lives."""
    class Held:
        pass

    base = cfn("f_d_pi", "double (const double *x, int n)")
    inner = nt.bind(base, nt.ARG, 1, engine=engine)
    fn = nt.Function(base.address, "double (const struct pt *p, int n)", nogil=False,
                     owner=base, name="pt_named", depends=(inner,), structs={"pt": 8})
    mv = nt.Function(base.address, "double (__Pyx_memviewslice m, int n)",
                     memoryviews={0: "const double[::1]"}, name="mv_named")
    for target, args in ((fn, (np.zeros(2, dtype=[("x", "f8")]), 2)),
                         (mv, (np.arange(3.0), 3))):
        held = Held()
        alive = weakref.ref(held)
        t = nt.bind(target, *args, keep=held, engine=engine)
        kept = t.target
        assert kept.owner == (target, held)
        for attr in ("address", "name", "nogil", "memoryviews", "depends", "structs",
                     "fixed"):
            assert getattr(kept, attr) == getattr(target, attr), attr
        assert kept._signature == target._signature
        del held
        gc.collect()
        assert alive() is not None
        t.release()
        del t, kept
        gc.collect()
        assert alive() is None


# -------------------------------------------- calls in flight through any path
#
# python/thunk.c pin/unpin: a call from Python pins the thunk called and every
# thunk it can reach (its target, bound and declared function values at
# every level, and thunks forwarded to it): release() of any of them from
# another thread waits for the call, from inside it is left to its return,
# and reclaim() is deferred, as for the thunk called itself.

UNARY = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
APPLY = ctypes.CFUNCTYPE(ctypes.c_double, UNARY, ctypes.c_double)(lambda f, x: f(x))
SUMMED = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int,
                          ctypes.c_double)


def _path(engine, inner, name):
    """(thunk to call, its arguments) that reach inner by the path named:
    as a target, as a bound function value, forwarded to one, declared by
    the target, two levels down, and through its own spellings (t.ctypes,
    an int)."""
    apply = nt.Function(ctypes.cast(APPLY, ctypes.c_void_p).value,
                        "double (double (*f)(double), double x)", owner=APPLY)
    if name == "target":
        return nt.bind(inner, nt.ARG, engine=engine), (1.0,)
    if name == "forwarded":
        return nt.bind(apply, nt.ARG, nt.ARG, engine=engine), (inner, 1.0)
    if name == "forwarded int":
        return nt.bind(apply, nt.ARG, nt.ARG, engine=engine), (nt.address(inner.address), 1.0)
    if name == "declared":
        apply = nt.Function(apply.address, apply._signature, owner=APPLY, depends=(inner,))
    value = {"two levels": nt.bind(apply, inner, nt.ARG, engine=engine),
             "ctypes spelling": inner.ctypes}.get(name, inner)
    return nt.bind(apply, value, nt.ARG, engine=engine), (1.0,)


PATHS = ["target", "bound", "forwarded", "forwarded int", "declared", "two levels",
         "ctypes spelling"]


@pytest.mark.parametrize("path", PATHS)
def test_release_of_a_thunk_below_waits_for_a_call_of_another_thread(engine, path):
    """The call is inside inner's target (a sleep with the GIL free) when
    another thread releases inner: release() returns only after the call,
    which read inner's array whole."""
    order, started = [], threading.Event()

    def body(p, n, x):
        started.set()
        time.sleep(0.2)
        total = sum(p[i] for i in range(n))
        order.append("call returns")
        return total + x

    cb = SUMMED(body)
    a = np.arange(1.0, 5.0)
    inner = nt.bind(cb, a, 4, nt.ARG, engine=engine)        # double (double)
    outer, args = _path(engine, inner, path)
    assert _release_during_a_call(lambda: outer(*args), inner, started, order) == [11.0]
    assert order == ["call returns", "release returns"]
    if path not in ("forwarded", "forwarded int"):
        with pytest.raises(ValueError, match="uses a released thunk"):
            outer(*args)


@pytest.mark.parametrize("path", PATHS)
def test_a_target_that_releases_a_thunk_below_keeps_it_until_the_call_returns(engine, path):
    """inner's target releases inner, reached through another thunk: the
    release is left to the outermost call's return, and the bound array is
    read whole meanwhile (a torn-down inner would read freed cells)."""
    box = {}

    def body(p, n, x):
        box["inner"].release()
        gc.collect()
        box["alive_inside"] = box["ref"]() is not None
        box["released_inside"] = box["inner"].released
        return sum(p[i] for i in range(n)) + x

    cb = SUMMED(body)
    a = np.arange(1.0, 5.0)
    box["ref"] = weakref.ref(a)
    inner = box["inner"] = nt.bind(cb, a, 4, nt.ARG, engine=engine)
    del a
    outer, args = _path(engine, inner, path)
    assert outer(*args) == 11.0
    assert box["alive_inside"], "the thunk below was torn down under the running call"
    assert box["released_inside"] and inner.released
    del args
    gc.collect()
    assert box["ref"]() is None, "the last call out did not tear the thunk below down"


@pytest.mark.parametrize("path", PATHS)
def test_reclaim_of_a_thunk_below_waits_for_the_call(engine, path):
    box = {}
    b = np.full(4, 100.0)

    def body(p, n, x):
        box["inner"].rebind(0, b)
        box["inner"].reclaim()
        gc.collect()
        box["alive_inside"] = box["ref"]() is not None
        return sum(p[i] for i in range(n)) + x

    cb = SUMMED(body)
    a = np.arange(1.0, 5.0)
    box["ref"] = weakref.ref(a)
    inner = box["inner"] = nt.bind(cb, a, 4, nt.ARG, engine=engine)
    del a
    outer, args = _path(engine, inner, path)
    assert outer(*args) == 11.0                      # the array of the call's start
    assert box["alive_inside"], "reclaimed under the running call"
    gc.collect()
    assert box["ref"]() is None, "the last call out did not reclaim"
    assert inner.bindings[0] is b and not inner.released


RACE = """
import ctypes, threading, time, numpy as np, numthunk as nt
SUMMED = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int,
                          ctypes.c_double)
cb = SUMMED(lambda p, n, x: sum(p[i] for i in range(n)) + x)
inner = nt.bind(cb, np.arange(1.0, 5.0), 4, nt.ARG, engine={engine!r})
outer = nt.bind(inner, nt.ARG, engine={engine!r})
class Slow:
    # the argument: converting it lets the other thread release inner
    def __float__(self):
        started.set()
        while not inner.released:
            time.sleep(0.001)
        return 1.0
started = threading.Event()
def release():
    started.wait(10)
    inner.release()
th = threading.Thread(target=release)
th.start()
try:
    outer(Slow())
except ValueError as exc:
    print("refused:", exc)
else:
    print("called")
th.join(10)
assert not th.is_alive()
print("done", inner.released)
"""


def test_a_release_racing_a_call_of_a_user_is_a_valueerror_never_the_trap(engine):
    """docs/lifetime.md: a call from Python of a thunk whose dependency is
    released raises ValueError. Released between the call's check and its
    target (while its argument converts), the dependency waits for the
    call, which sees it released and raises; the process never reaches the
    trap."""
    out = run_py(RACE.format(engine=engine))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused: this thunk uses a released thunk (double (double) over double " in out.stdout
    assert "done True" in out.stdout


# ---------------------------------------------------- identity, not addresses
#
# life/commit.c nt_thunk_identify: a spelling that carries its thunk is that
# thunk; a bare address is looked up, and refused when it is a thunk's
# being collected, collected, or of another signature.


def test_a_weakref_callback_of_a_dying_thunk_cannot_bind_it(cfn, engine):
    """A thunk's weakref callbacks run after it left the registry: its
    address, bound from there (an int with signature=, address() for a
    function pointer), is refused as a collected thunk's, and nothing
    holds the freed object."""
    f = cfn("f_d_d", "double (double)")
    solver = cfn("f_d_Fddi", "double (double (*f)(double), double a, double b, int n)")
    got = []
    t = nt.bind(f, nt.ARG, engine=engine)
    addr = t.address

    def callback(_ref):
        for make in (lambda: nt.bind(addr, nt.ARG, signature="double (double)"),
                     lambda: nt.bind(solver, nt.address(addr), 0.0, 1.0, 1)):
            try:
                got.append(make())
            except ValueError as exc:
                got.append(str(exc))

    ref = weakref.ref(t, callback)
    del t
    gc.collect()
    assert ref() is None
    collected = (f"is the address {addr:#x} of a thunk that was released and collected "
                 "(the address still traps); bind a live thunk, and keep it for as long as "
                 "its address is used (see docs/lifetime.md)")
    assert got == ["the target " + collected,
                   "argument 1 (f: double (*)(double)) " + collected]


class _Kept(nt.Thunk):
    """A subclass with a __dict__: CPython clears it before the core's
    dealloc runs, at a reference count of 0."""


def test_python_code_run_by_a_dying_thunk_cannot_bind_it(cfn, engine):
    f = cfn("f_d_d", "double (double)")
    got = []

    class Spy:
        def __del__(self):
            try:
                got.append(nt.bind(self.addr, nt.ARG, signature="double (double)"))
            except ValueError as exc:
                got.append(str(exc))

    t = _Kept(f._signature, f.address, (nt.ARG,), f, True, None, engine)
    spy = Spy()
    addr = spy.addr = t.address
    t.spy = spy
    del spy, t
    gc.collect()
    assert got == [f"the target is the address {addr:#x} of a thunk being collected (its last "
                   "reference is gone); bind a live thunk (see docs/lifetime.md)"]


SPELLINGS_AFTER_REUSE = """
import ctypes, cffi, numpy as np, numthunk as nt
lib = ctypes.CDLL({path!r})
f = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, "double (double)")
solver = nt.Function(ctypes.cast(lib.f_d_Fddi, ctypes.c_void_p).value,
                     "double (double (*f)(double), double a, double b, int n)")
ffi = cffi.FFI()
t = nt.bind(f, nt.ARG, engine={engine!r})
addr = t.address
llc = t.lowlevelcallable()
spellings = {{"the thunk": t, "t.ctypes": t.ctypes, "capsule": llc.function,
             "t.cffi(ffi)": t.cffi(ffi), "t.opaque()": t.opaque(),
             "Function(owner=t)": nt.Function(addr, "double (double)", owner=t),
             "address(owner=t)": nt.address(addr, owner=t)}}
t.release()
kept = []
for k in range(1000):                # one release lets t's address go (quarantine 1)
    u = nt.bind(f, nt.ARG, engine={engine!r})
    if u.address == addr:
        break
    u.release()
    kept.append(u)
assert u.address == addr, "the address was not reused"
assert nt.bind(addr, nt.ARG, signature="double (double)")(2.0) == 2.0   # an int: u now
for name, s in spellings.items():
    for how, make in (("target", lambda: nt.bind(s, 1.0)),
                      ("value", lambda: nt.bind(solver, s, 0.0, 1.0, 1))):
        if name == "address(owner=t)" and how == "target":
            continue                 # not targets
        if name == "the thunk" and how == "target":
            continue                 # refused by the thunk itself (below)
        try:
            make()
        except ValueError as exc:
            assert ("is a released thunk" in str(exc)
                    or str(exc) == "the thunk has been released (see docs/lifetime.md)"), \
                (name, how, str(exc))
        else:
            raise AssertionError(f"{{name}} as a {{how}} bound the thunk now at its address")
try:
    nt.bind(t, 1.0)
except ValueError as exc:
    assert str(exc) == "the thunk has been released (see docs/lifetime.md)", exc
# called from Python, the spellings that check their thunk refuse it too:
# never a call of u, which now holds the address
for name in ("t.ctypes", "t.opaque()", "Function(owner=t)"):
    try:
        got = spellings[name](2.0)
    except ValueError as exc:
        assert ("is a released thunk" in str(exc)
                or str(exc) == "the thunk has been released (see docs/lifetime.md)"), (name, exc)
    else:
        raise AssertionError(f"{{name}} called the thunk now at its address: {{got}}")
print("refused every spelling")
"""


def test_a_released_thunk_s_spellings_never_name_the_thunk_now_at_its_address(fixture_path,
                                                                             engine):
    """A released thunk's address, once the quarantine let it go, serves a
    new thunk; t.ctypes, its LowLevelCallable's capsule, t.cffi(ffi),
    t.opaque(), Function(owner=t) and address(owner=t) made before the
    release still stand for t, and are refused (as a target and as a
    function-pointer value), never bound to the new thunk; the int binds the
    new one, as an int names whatever is at its address."""
    import cffi  # noqa: F401  (the child's; where it has no wheel, conftest skips here)

    out = run_py(SPELLINGS_AFTER_REUSE.format(path=fixture_path, engine=engine),
                 NUMTHUNK_QUARANTINE="1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused every spelling" in out.stdout


RELEASED = "the thunk has been released (see docs/lifetime.md)"


@pytest.mark.parametrize("spelling", ["t.ctypes", "t.opaque()", "Function(owner=t)"])
@pytest.mark.parametrize("released", ["itself", "the thunk it uses"])
def test_a_spelling_of_a_released_thunk_called_from_python_raises(cfn, engine, spelling,
                                                                   released):
    """t.ctypes, t.opaque() and Function(t.address, ..., owner=t), called from
    Python after t is released, or after a thunk t uses is, raise the
    ValueError that t(...) raises: never the trap, which aborts the
    process."""
    f = cfn("f_d_d", "double (double)")
    apply = cfn("f_d_Fd", "double (double (*f)(double), double x)")
    inner = bind(engine, f, nt.ARG)
    t = bind(engine, apply, inner, nt.ARG) if released != "itself" else inner
    s = {"t.ctypes": lambda: t.ctypes, "t.opaque()": t.opaque,
         "Function(owner=t)": lambda: nt.Function(t.address, t.csig, owner=t)}[spelling]()
    assert s(2.5) == 2.5
    with pytest.raises(ValueError) as direct:
        inner.release()
        t(2.5)
    with pytest.raises(ValueError) as exc:
        s(2.5)
    if spelling == "t.ctypes":                  # the words of t(...)
        assert str(exc.value) == str(direct.value)
    else:                                       # those of a thunk over t's address
        assert " a released thunk (double (double) over double (double)" in str(exc.value)
    if released == "itself":
        assert str(direct.value) == RELEASED
    else:
        assert str(direct.value).startswith("this thunk uses a released thunk (double (double) "
                                            "over double (double)"), direct.value


def test_t_ctypes_is_the_prototype_s_function_pointer(cfn, engine):
    """t.ctypes checks its thunk when called from Python, and is still a
    function pointer of the thunk's prototype: ctypes passes it where that
    prototype is declared, and C calls it."""
    f = cfn("f_d_d", "double (double)")
    t = bind(engine, f, nt.ARG)
    c = t.ctypes
    proto = nt.Signature("double (double)").to_ctypes()
    assert isinstance(c, proto) and c._numthunk_owner is t
    assert ctypes.cast(c, ctypes.c_void_p).value == t.address
    libc = ctypes.CDLL(None)
    assert type(t.ctypes) is type(c)                # one class per prototype
    data = np.array([3.0, 1.0, 2.0])
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, compare]
    libc.qsort.restype = None
    double_p = ctypes.POINTER(ctypes.c_double)
    diff = ctypes.CFUNCTYPE(ctypes.c_int, double_p, double_p)(
        lambda a, b: (a[0] > b[0]) - (a[0] < b[0]))
    by_value = bind(engine, diff, nt.ARG, nt.ARG)
    libc.qsort(data.ctypes.data, 3, 8, ctypes.cast(by_value.ctypes, compare))
    assert data.tolist() == [1.0, 2.0, 3.0]


def test_an_int_address_of_a_collected_thunk_in_the_quarantine_is_refused(cfn, engine):
    f = cfn("f_d_d", "double (double)")
    solver = cfn("f_d_Fddi", "double (double (*f)(double), double a, double b, int n)")
    t = nt.bind(f, nt.ARG, engine=engine)
    addr = t.address
    del t
    gc.collect()
    collected = (f"is the address {addr:#x} of a thunk that was released and collected "
                 "(the address still traps); bind a live thunk, and keep it for as long as "
                 "its address is used (see docs/lifetime.md)")
    with pytest.raises(ValueError) as exc:
        nt.bind(addr, nt.ARG, signature="double (double)")
    assert str(exc.value) == "the target " + collected
    with pytest.raises(ValueError) as exc:
        nt.bind(nt.Function(addr, "double (double)"), nt.ARG)
    assert str(exc.value) == "the target " + collected
    for value in (nt.address(addr), ctypes.cast(addr, ctypes.CFUNCTYPE(ctypes.c_double,
                                                                      ctypes.c_double))):
        with pytest.raises(ValueError) as exc:
            nt.bind(solver, value, 0.0, 1.0, 1)
        assert str(exc.value) == "argument 1 (f: double (*)(double)) " + collected
    # forwarded to a call from Python, and rebound
    o = nt.bind(solver, nt.ARG, 0.0, 1.0, 1, engine=engine)
    with pytest.raises(ValueError) as exc:
        o(nt.address(addr))
    assert str(exc.value) == "argument 1 (f: double (*)(double)) " + collected
    live = nt.bind(f, nt.ARG, engine=engine)
    r = nt.bind(solver, live, 0.0, 1.0, 1, engine=engine)
    with pytest.raises(ValueError) as exc:
        r.rebind(0, nt.address(addr))
    assert str(exc.value) == "argument 1 (f: double (*)(double)) " + collected
    assert r.dependencies == (live,)


@pytest.mark.parametrize("how", ["int with signature=", "Function", "address() value",
                                 "ctypes cast value", "forwarded", "rebind",
                                 "Function.lowlevelcallable()", "Function(owner=t) called"])
def test_a_thunk_s_address_under_another_signature_is_refused(cfn, engine, how):
    """The registry knows the thunk at an address and its signature: an
    address bound as a function of another signature is refused, naming
    both (a call would pass the wrong arguments)."""
    f = cfn("f_d_idfl", "double (int a, double b, float c, int64_t d)")
    solver = cfn("f_d_Fddi", "double (double (*f)(double), double a, double b, int n)")
    t = nt.bind(f, nt.ARG, 0.0, 0.0, 0, engine=engine)     # double (int a)
    a = t.address
    unary = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    label = "argument 1 (f: double (*)(double))"
    want = f"is a thunk (at {a:#x}) of signature 'double (int)', not '{{}}': a call through it " \
           "would pass the wrong arguments; give a function of the signature declared, or " \
           "declare the thunk's own"
    with pytest.raises(TypeError) as exc:
        if how == "int with signature=":
            nt.bind(a, nt.ARG, signature="double (double)")
        elif how == "Function":
            nt.bind(nt.Function(a, "double (double)"), nt.ARG)
        elif how == "address() value":
            nt.bind(solver, nt.address(a), 0.0, 1.0, 1)
        elif how == "ctypes cast value":
            nt.bind(solver, ctypes.cast(a, unary), 0.0, 1.0, 1)
        elif how == "forwarded":
            nt.bind(solver, nt.ARG, 0.0, 1.0, 1, engine=engine)(nt.address(a))
        elif how == "Function.lowlevelcallable()":
            nt.Function(a, "double (double)").lowlevelcallable()
        elif how == "Function(owner=t) called":
            nt.Function(a, "double (double)", owner=t)(1.0)
        else:
            good = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG)
            r = nt.bind(solver, good, 0.0, 1.0, 1, engine=engine)
            try:
                r.rebind(0, nt.address(a))
            finally:
                assert r.dependencies == (good,) and r() == 0.5
    target = how.startswith(("int", "Function"))
    assert str(exc.value) == ("the target " if target else label + " ") + want.format(
        "double (double)")
    # its own signature binds, and holds it
    u = nt.bind(a, nt.ARG, signature="double (int)")
    assert u(3) == 3.0 and u.dependencies == (t,)

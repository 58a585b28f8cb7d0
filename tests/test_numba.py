"""Numba: thunks and Functions as first-class function values in nopython
code, signatures both ways, @cfunc targets, and the seeds' idioms.

Run under both engines (NUMTHUNK_ENGINE=native / ffi); every result is
compared with the fixture function called directly or with NumPy."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numba
import numpy as np
import pytest
from numba import carray, cfunc, njit, prange, types
from numba.core import typing

import numthunk as nt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))


@cfunc(types.float64(types.CPointer(types.float64), types.intc))
def c_sum(ptr, n):
    return np.sum(carray(ptr, n))


@njit
def call0(fn):
    return fn()


@njit
def call1(fn, x):
    return fn(x)


@pytest.fixture
def f_sum(cfn):
    return cfn("f_d_pi", "double (const double *, int)")


def run_python(code, env=None, cwd=None):
    """Run code in a fresh interpreter; return its stdout (fails on error)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


# ---------------------------------------------------------------- as an argument


def test_thunk_argument_called_in_njit(f_sum):
    vec = np.array([1.0, 2.0, 3.0, 4.0])
    t = nt.bind(f_sum, vec, nt.size(vec))
    assert call0(t) == 10.0
    vec[0] = 100.0                       # live: the thunk reads the array at call time
    assert call0(t) == 109.0


def test_fresh_thunks_share_one_specialisation(f_sum):
    @njit
    def consumer(fn, k):
        s = 0.0
        for _ in range(k):
            s += fn()
        return s

    for n in range(1, 30):
        arr = np.arange(float(n))
        t = nt.bind(f_sum, arr, nt.size(arr))
        assert consumer(t, 3) == 3 * arr.sum()
    assert len(consumer.signatures) == 1
    (sig,) = consumer.signatures
    assert sig[0] is nt.Signature("double (void)").numba_type() is numba.typeof(t)
    assert sig[0].signature == typing.signature(types.float64)


def test_forwarded_arguments_and_ctypes_pointer(cfn):
    f = cfn("f_d_dpi", "double (double, const double *, int)")
    p = np.array([1.0, 2.0, 3.0])
    t = nt.bind(f, nt.ARG, p, nt.size(p))             # double (double)
    xs = np.linspace(-1, 1, 7)

    @njit
    def evaluate(fn, xs):
        out = np.empty_like(xs)
        for i in range(xs.size):
            out[i] = fn(xs[i])
        return out

    np.testing.assert_allclose(evaluate(t, xs), 1 + 2 * xs + 3 * xs**2)

    # The target itself, a pointer parameter given arr.ctypes from @njit.
    @njit
    def direct(fn, x, p):
        return fn(x, p.ctypes, np.intc(p.size))

    assert direct(f, 2.0, p) == 1 + 4 + 12


def test_function_is_a_numba_value(f_sum):
    vec = np.arange(6.0)

    @njit
    def use(fn, x):
        return fn(x.ctypes, np.intc(x.size))

    assert use(f_sum, vec) == 15.0
    assert f_sum.__wrapper_address__() == f_sum.address
    assert f_sum.signature() == typing.signature(
        types.float64, types.CPointer(types.float64), types.int32)
    assert str(f_sum.signature) == "double (const double *, int)"   # still the C signature


def test_function_with_fixed_parameters_is_called_through_its_thunk(lib, fixture_path):
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    f = nt.Function(addr, "double (const double *, int)", fixed={1: 3}, owner=lib)
    assert str(f.csig) == "double (const double *)"
    assert f.signature() == typing.signature(types.float64, types.CPointer(types.float64))
    assert f.__wrapper_address__() != addr

    @njit
    def use(fn, x):
        return fn(x.ctypes)

    assert use(f, np.arange(5.0)) == 3.0


def test_signature_protocol_of_thunk(f_sum):
    vec = np.ones(3)
    t = nt.bind(f_sum, vec, 3)
    assert t.__wrapper_address__() == t.address
    assert t.signature() == typing.signature(types.float64)
    assert t.signature == t.csig
    assert t._numba_type_ is nt.bind(f_sum, vec, 2)._numba_type_     # cached per signature


def test_tuple_argument(f_sum, cfn):
    a, b = np.arange(3.0), np.arange(5.0)
    ta, tb = nt.bind(f_sum, a, nt.size(a)), nt.bind(f_sum, b, nt.size(b))
    square = nt.bind(cfn("f_d_dpi", "double (double, const double *, int)"), nt.ARG,
                     np.array([0.0, 0.0, 1.0]), 3)

    @njit
    def total(fns):
        s = 0.0
        for f in fns:                    # homogeneous: a UniTuple
            s += f()
        return s

    @njit
    def mixed(pair, x):
        return pair[0]() + pair[1](x)

    assert total((ta, tb)) == 3.0 + 10.0
    assert total((ta, tb, ta)) == 16.0
    assert mixed((tb, square), 3.0) == 10.0 + 9.0


def test_thunk_returned_from_njit_is_the_same_object(f_sum):
    t = nt.bind(f_sum, np.ones(2), 2)

    @njit
    def ident(fn):
        return fn

    assert ident(t) is t


def test_thunk_and_cfunc_unify(f_sum):
    @cfunc(types.float64())
    def seven():
        return 7.0

    t = nt.bind(f_sum, np.arange(4.0), 4)

    @njit
    def choose(flag, x, y):
        g = x if flag else y
        return g()

    assert choose(True, t, seven) == 6.0
    assert choose(False, t, seven) == 7.0


def test_thunk_and_cfunc_of_another_signature_do_not_unify(f_sum):
    """Only a function value of the thunk's own signature meets it: one
    taking an argument is a typing error, never called as the thunk."""
    @cfunc(types.float64(types.float64))
    def half(x):
        return x / 2

    t = nt.bind(f_sum, np.arange(4.0), 4)

    @njit
    def choose(flag, x, y):
        g = x if flag else y
        return g()

    with pytest.raises(numba.core.errors.TypingError):
        choose(True, t, half)


# ---------------------------------------------------------------- holding thunks
# A thunk's Numba value holds a reference, counted by Numba's runtime as an
# array's is: containers, returned values and fields keep the thunk alive.


def _sum_thunks(f_sum, engine, sizes):
    """Thunks over sum(arange(n)) for each n; nothing else refers to them."""
    out = []
    for n in sizes:
        arr = np.arange(float(n))
        out.append(nt.bind(f_sum, arr, nt.size(arr), engine=engine))
    return out


def _tri(n):
    return n * (n - 1) / 2


@njit
def _call_each(fns):
    s = 0.0
    for f in fns:
        s += f()
    return s


def test_typed_list_holds_its_thunks(f_sum, engine):
    lst = numba.typed.List()
    lst.extend(tuple(_sum_thunks(f_sum, engine, (3, 4, 5))))
    refs = [weakref.ref(t) for t in lst]
    gc.collect()
    assert all(r() is not None for r in refs)          # only the list holds them
    assert _call_each(lst) == _tri(3) + _tri(4) + _tri(5)
    assert lst[1] is refs[1]()                          # boxing: the same object
    assert lst[1].engine == nt.bind(f_sum, np.ones(1), 1, engine=engine).engine
    del lst
    gc.collect()
    assert all(r() is None for r in refs)               # and lets them go


def test_typed_list_filled_in_njit_holds_its_thunks(f_sum, engine):
    @njit
    def gather(a, b):
        out = numba.typed.List()
        out.append(a)
        out.append(b)
        out.append(a)
        return out

    lst = gather(*_sum_thunks(f_sum, engine, (4, 6)))
    gc.collect()
    assert _call_each(lst) == 2 * _tri(4) + _tri(6)
    assert lst[0] is lst[2]
    lst.pop(0)
    gc.collect()
    assert _call_each(lst) == _tri(6) + _tri(4)


def test_typed_dict_holds_its_thunks(f_sum, engine):
    d = numba.typed.Dict.empty(types.int64, nt.Signature("double (void)").numba_type())
    for n, t in zip((2, 7), _sum_thunks(f_sum, engine, (2, 7))):
        d[n] = t
    gc.collect()

    @njit
    def call(d, k):
        return d[k]()

    assert call(d, 7) == _tri(7) and call(d, 2) == _tri(2)
    t = d[7]
    assert d[7] is t and t() == _tri(7)
    del d[7]
    gc.collect()
    assert t() == _tri(7)                     # the dict gave its reference back
    ref = weakref.ref(d[2])
    del d
    gc.collect()
    assert ref() is None


def test_thunk_returned_from_njit_outlives_its_container(f_sum, engine):
    @njit
    def pick(fns, i):
        return fns[i]

    lst = numba.typed.List(_sum_thunks(f_sum, engine, (3, 8)))
    t = pick(lst, 1)
    assert t is lst[1]
    del lst
    gc.collect()
    assert t() == _tri(8)
    assert call0(t) == _tri(8)

    @njit
    def pair(f, g):
        return (f, g), f

    a, b = _sum_thunks(f_sum, engine, (2, 5))
    (x, y), z = pair(a, b)
    assert x is a and y is b and z is a


def test_jitclass_field_holds_its_thunk(f_sum, engine):
    from numba.experimental import jitclass

    @jitclass([("f", nt.Signature("double (void)").numba_type()), ("k", types.float64)])
    class Scaled:
        def __init__(self, f, k):
            self.f = f
            self.k = k

        def value(self):
            return self.f() * self.k

    (t,) = _sum_thunks(f_sum, engine, (5,))
    ref = weakref.ref(t)
    obj = Scaled(t, 2.0)
    del t
    gc.collect()
    assert obj.value() == 2 * _tri(5)
    assert obj.f is ref()
    (obj.f,) = _sum_thunks(f_sum, engine, (6,))     # the old one is let go
    gc.collect()
    assert ref() is None
    assert obj.value() == 2 * _tri(6)


def test_structref_field_holds_its_thunk(f_sum, engine):
    from numba.experimental import structref

    class HolderType(types.StructRef):
        def preprocess_fields(self, fields):
            return tuple((name, types.unliteral(t)) for name, t in fields)

    structref.register(HolderType)

    class Holder(structref.StructRefProxy):
        def __new__(cls, f):
            return structref.StructRefProxy.__new__(cls, f)

        @property
        def f(self):
            return _holder_f(self)

    structref.define_proxy(Holder, HolderType, ["f"])

    @njit
    def _holder_f(h):
        return h.f

    @njit
    def run(h):
        return h.f()

    (t,) = _sum_thunks(f_sum, engine, (9,))
    ref = weakref.ref(t)
    h = Holder(t)
    del t
    gc.collect()
    assert run(h) == _tri(9)
    assert h.f is ref()
    del h
    gc.collect()
    assert ref() is None


def test_passing_and_storing_balances_references(f_sum):
    """A million passes into @njit, and a thousand thunks in and out of a
    list: the thunk's reference count and Numba's meminfo count come back
    to where they started."""
    from numba.core.runtime import _nrt_python, rtsys

    @njit
    def take(fn):
        return 0

    @njit
    def roundtrip(lst, fn, k):
        for _ in range(k):
            lst.append(fn)
        s = 0.0
        for _ in range(k):
            s += lst.pop()()
        return s

    (t,) = _sum_thunks(f_sum, None, (4,))
    lst = numba.typed.List([t])
    take(t), roundtrip(lst, t, 1)                      # compiled before counting
    _nrt_python.memsys_enable_stats()
    try:
        gc.collect()
        refs, before = sys.getrefcount(t), rtsys.get_allocation_stats()
        for _ in range(1_000_000):
            take(t)
        assert roundtrip(lst, t, 1000) == 1000 * _tri(4)
        for _ in range(1000):
            lst.append(t)
        for _ in range(1000):
            lst.pop()
        gc.collect()
        after = rtsys.get_allocation_stats()
    finally:
        _nrt_python.memsys_disable_stats()
    assert sys.getrefcount(t) == refs
    assert after.mi_alloc - before.mi_alloc >= 1_000_000
    assert after.mi_alloc - before.mi_alloc == after.mi_free - before.mi_free


def test_numba_function_type_conversion_still_borrows(f_sum):
    """Where a FunctionType is declared, a thunk converts to Numba's own
    (non-owning) function value; calls through it still work."""
    (t,) = _sum_thunks(f_sum, None, (4,))

    @njit(types.float64(types.FunctionType(types.float64())))
    def declared(fn):
        return fn()

    assert declared(t) == _tri(4)


def test_bad_wrapper_address_is_a_python_error(f_sum):
    class Zero(nt.Function):
        __slots__ = ()
        _wrapper_address_ = property(lambda self: 0)

    class NotInt(nt.Function):
        __slots__ = ()
        _wrapper_address_ = property(lambda self: "0x10")

    with pytest.raises(ValueError, match="address is NULL"):
        call0(Zero(f_sum.address, "double (void)"))
    with pytest.raises(TypeError):
        call0(NotInt(f_sum.address, "double (void)"))


RELEASED_IN_LIST = """
    import numba
    from numba import njit
    lst = numba.typed.List([t])
    t.release()
    del t

    @njit
    def run(lst):
        return lst[0]()

    print("calling", flush=True)
    run(lst)
    print("survived", flush=True)
"""


def test_released_thunk_in_a_list_traps_when_called(fixture_path, engine):
    """release() is explicit: a list holding the thunk keeps the object, not
    its code. A call from @njit reaches the trap (documented), never freed
    code."""
    setup = FRESH_SETUP.replace("nt.size(vec))", f"nt.size(vec), engine={engine!r})")
    code = textwrap.dedent(setup.format(path=fixture_path, n=4)) \
        + textwrap.dedent(RELEASED_IN_LIST)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.stdout.split() == ["calling"], proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "numthunk: called a released thunk" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- global, closure


GLOBAL_THUNK = None


@njit
def _use_global():
    return GLOBAL_THUNK()


def test_global(f_sum):
    global GLOBAL_THUNK
    vec = np.arange(4.0)
    GLOBAL_THUNK = nt.bind(f_sum, vec, nt.size(vec))
    try:
        assert _use_global() == 6.0
        vec[:] = 1.0                     # the address is baked in, the data is live
        assert _use_global() == 4.0
        GLOBAL_THUNK.rebind(0, np.full(10, 2.0))    # so is a rebinding (size follows)
        assert _use_global() == 20.0
    finally:
        GLOBAL_THUNK = None              # Numba's IR of _use_global still refers to it


def test_closure(f_sum, cfn):
    def make(fn):
        @njit
        def run(k):
            s = 0.0
            for _ in range(k):
                s += fn()
            return s
        return run

    vec = np.arange(5.0)
    t = nt.bind(f_sum, vec, nt.size(vec))
    run = make(t)
    assert run(2) == 20.0
    vec[0] = 10.0
    assert run(2) == 40.0
    # a Function as a closure value, called with a pointer from nopython code
    f = cfn("f_d_pi", "double (const double *, int)")

    @njit
    def direct(x):
        return f(x.ctypes, np.intc(x.size))

    assert direct(np.arange(4.0)) == 6.0


def test_global_and_closure_thunks_are_held_by_the_code(f_sum, engine):
    """Compiled code keeps a global's or a closure variable's address: the
    thunk is held as long as the code (for ever)."""
    def make(fn):
        @njit
        def run():
            return fn()
        return run

    (t,) = _sum_thunks(f_sum, engine, (6,))
    ref = weakref.ref(t)
    run = make(t)
    assert run() == _tri(6)
    del t
    gc.collect()
    assert ref() is not None
    assert run() == _tri(6)

    @njit
    def boxed():
        return _HELD_GLOBAL, _HELD_GLOBAL()

    globals()["_HELD_GLOBAL"] = nt.bind(f_sum, np.arange(3.0), 3, engine=engine)
    g = _HELD_GLOBAL
    assert boxed() == (g, _tri(3)) and boxed()[0] is g
    globals()["_HELD_GLOBAL"] = None        # the compiled code still has the old one
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is not None and boxed()[1] == _tri(3)


_HELD_GLOBAL = None


def _captured_set(cf):
    from numthunk import _numba
    return {id(t) for t in _numba.captured(cf)}


def test_cfunc_depends_on_the_thunks_its_code_captured(f_sum, engine):
    """A @cfunc's Function lists, as ``depends``, the thunks compiled into
    its code or into the @njit functions it calls, for the core to record
    on every thunk bound over it."""
    from numthunk._api import as_function

    a, b, c = _sum_thunks(f_sum, engine, (2, 3, 4))
    fixed = nt.Function(f_sum.address, "double (const double *, int)", fixed={1: 2},
                        owner=f_sum)

    @njit
    def helper(x):
        return b() + x

    def make(k):
        @cfunc(types.float64(types.float64))
        def outer(x):
            return a() + helper(x) + k() + fixed(np.ones(2).ctypes)
        return outer

    outer = make(c)
    fn = as_function(outer)
    assert fn.depends == (a, c, fixed._call_thunk, b)
    assert {id(t) for t in fn.depends} == _captured_set(outer) - {id(fixed)} \
        | {id(fixed._call_thunk)}
    t = nt.bind(outer, nt.ARG, engine=engine)
    assert t(1.0) == _tri(2) + _tri(3) + 1.0 + _tri(4) + 2.0
    assert as_function(outer) is fn and as_function(outer, nogil=False).depends == fn.depends

    @cfunc(types.float64(types.float64))
    def plain(x):
        return x

    assert as_function(plain).depends == ()
    assert nt.Function(f_sum.address, "double (const double *, int)").depends == ()
    assert nt.Function(f_sum.address, "double (void)", depends=a).depends == (a,)
    assert nt.bind(outer, nt.ARG, keep=np.ones(1)).target.depends == fn.depends
    with pytest.raises(TypeError, match="depends= takes a tuple of thunks, got int"):
        nt.Function(f_sum.address, "double (void)", depends=3)
    with pytest.raises(TypeError, match="depends= takes thunks, got a Function"):
        nt.Function(f_sum.address, "double (void)", depends=[f_sum])


_PAIR = ()


def test_cfunc_depends_through_a_global_tuple_and_released_globals(f_sum):
    """Every item of a global tuple of thunks is compiled in and recorded;
    a released thunk cannot be compiled in."""
    from numthunk._api import as_function

    global _PAIR
    _PAIR = tuple(_sum_thunks(f_sum, None, (3, 5)))

    @cfunc(types.float64())
    def both():
        s = 0.0
        for f in _PAIR:
            s += f()
        return s

    assert both.ctypes() == _tri(3) + _tri(5)
    assert as_function(both).depends == _PAIR
    _PAIR[0].release()

    @njit
    def first():
        return _PAIR[0]()

    with pytest.raises(numba.core.errors.TypingError, match="compiled in as a global or "
                       "closure variable: the thunk has been released"):
        first()
    _PAIR = ()


# ---------------------------------------------------------------- parallel


def test_parallel_prange(f_sum, cfn):
    vec = np.arange(10.0)
    t = nt.bind(f_sum, vec, nt.size(vec))
    poly = nt.bind(cfn("f_d_dpi", "double (double, const double *, int)"), nt.ARG,
                   np.array([1.0, -1.0, 0.5]), 3)

    @njit(parallel=True)
    def fill(fn, g, xs):
        out = np.empty(xs.size)
        tid = np.empty(xs.size, np.int64)
        for i in prange(xs.size):
            out[i] = fn() + g(xs[i])
            tid[i] = numba.get_thread_id()
        return out, tid

    xs = np.linspace(0, 1, 20_001)
    got, tid = fill(t, poly, xs)
    np.testing.assert_allclose(got, 45.0 + 1 - xs + 0.5 * xs**2)
    if numba.get_num_threads() > 1:
        assert len(set(tid.tolist())) > 1      # the thunks ran on several threads


# ---------------------------------------------------------------- fresh processes


FRESH_SETUP = """
    import ctypes, sys
    import numpy as np
    import numthunk as nt
    assert "numba" not in sys.modules, "import numthunk imported numba"
    lib = ctypes.CDLL({path!r})
    f = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value,
                    "double (const double *, int)", owner=lib)
    vec = np.arange({n}.0)
    t = nt.bind(f, vec, nt.size(vec))
    _ = t.address, t.csig, t()
    assert "numba" not in sys.modules, "making and calling a thunk imported numba"
"""


def test_first_thing_numba_compiles_takes_a_thunk(fixture_path):
    out = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + """
    from numba import njit

    @njit
    def first(fn):
        return fn()

    print(first(t))
    """)
    assert out.split() == ["6.0"]


def test_first_thing_numba_compiles_uses_a_global_thunk(fixture_path):
    out = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + """
    from numba import njit
    G = t

    @njit
    def first():
        return G() + 1.0

    print(first())
    """)
    assert out.split() == ["7.0"]


def test_cache_reused_in_a_second_process(fixture_path, tmp_path):
    (tmp_path / "consumer.py").write_text(textwrap.dedent("""
        from numba import njit

        @njit(cache=True)
        def run(fn, k):
            s = 0.0
            for _ in range(k):
                s += fn()
            return s
    """))
    use = f"""
    sys.path.insert(0, {str(tmp_path)!r})
    import consumer
    print(consumer.run(t, 2), sum(consumer.run.stats.cache_hits.values()),
          sum(consumer.run.stats.cache_misses.values()))
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + use, env=env).split()
    assert first == ["12.0", "0", "1"]                 # compiled and saved
    # Another process, another thunk (another address, another array).
    second = run_python(FRESH_SETUP.format(path=fixture_path, n=5) + use, env=env).split()
    assert second == ["20.0", "1", "0"]                # loaded from the cache


def test_cache_of_a_consumer_that_keeps_thunks(fixture_path, tmp_path):
    """A cached consumer whose value outlives the call (a list it fills):
    the cache holds code, not this process's thunks or meminfos."""
    (tmp_path / "keeper.py").write_text(textwrap.dedent("""
        from numba import njit, typed

        @njit(cache=True)
        def keep(fn, k):
            out = typed.List()
            for _ in range(k):
                out.append(fn)
            return out
    """))
    use = f"""
    import gc, weakref
    sys.path.insert(0, {str(tmp_path)!r})
    import keeper
    lst = keeper.keep(t, 3)
    ref = weakref.ref(t)
    del t
    gc.collect()
    print(sum(f() for f in lst), lst[0] is lst[2] is ref(),
          sum(keeper.keep.stats.cache_hits.values()))
    del lst
    gc.collect()
    print(ref() is None)
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + use, env=env).split()
    assert first == ["18.0", "True", "0", "True"]
    second = run_python(FRESH_SETUP.format(path=fixture_path, n=5) + use, env=env).split()
    assert second == ["30.0", "True", "1", "True"]


# ---------------------------------------------------------------- signatures


NUMBA_SIG = types.float64(types.CPointer(types.float64), types.intc)


@pytest.mark.parametrize("spec", [
    NUMBA_SIG,
    "float64(CPointer(float64), intc)",
    "(float64*, int32) -> float64",
    str(NUMBA_SIG),
])
def test_numba_signatures_accepted(spec, f_sum):
    sig = nt.Signature(spec)
    assert sig == nt.Signature("double (double *, int)")
    assert sig.to_numba() == NUMBA_SIG
    # wherever a signature is taken
    fn = nt.Function(f_sum.address, spec)
    vec = np.arange(4.0)
    assert nt.bind(fn, vec, nt.size(vec))() == 6.0
    assert nt.bind(f_sum.address, vec, nt.size(vec), signature=spec)() == 6.0


@pytest.mark.parametrize("text, c", [
    ("void(voidptr, intp, uintp, boolean, int8, uint16)",
     "void (void *, int64_t, uint64_t, bool, int8_t, uint16_t)"),
    ("float32(CPointer(CPointer(int64)))", "float (int64_t **)"),
    ("(int32, float64) -> none", "void (int, double)"),
    ("float64(FunctionType[float64(float64)], float64)", "double (double (*)(double), double)"),
    ("complex128(complex128)", "double complex (double complex)"),
])
def test_numba_string_forms(text, c):
    # the core's parser reads Numba's text itself (src/parse/declarator.c)
    assert nt._core.Signature(text) == nt._core.Signature(c)
    assert nt.Signature(text) == nt.Signature(c)


@pytest.mark.parametrize("c, numba_sig", [
    ("double (double)", types.float64(types.float64)),
    ("void (void)", types.void()),
    ("int64_t (const int *, size_t, char, bool)",
     types.int64(types.CPointer(types.int32), types.uint64, types.int8, types.boolean)),
    ("void (void *, void **)", types.void(types.voidptr, types.CPointer(types.voidptr))),
    # a C function pointer is a pointer at the ABI level, not Numba's
    # three-pointer function-value struct
    ("double (double (*)(double), double)", types.float64(types.voidptr, types.float64)),
    ("double complex (double complex *)",
     types.complex128(types.CPointer(types.complex128))),
])
def test_to_numba(c, numba_sig):
    assert nt.Signature(c).to_numba() == numba_sig


def test_lowlevelcallable_takes_a_numba_signature(cfn):
    from scipy import integrate

    t = nt.bind(cfn("f_d_dpi", "double (double, const double *, int)"), nt.ARG,
                np.array([1.0, 0.0, 3.0]), 3)
    llc = t.lowlevelcallable(types.float64(types.float64))
    assert llc.signature == "double (double)"          # what SciPy compares
    assert integrate.quad(llc, 0.0, 1.0)[0] == pytest.approx(2.0)


def test_to_ctypes():
    proto = nt.Signature("float64(CPointer(float64), intc)").to_ctypes()
    assert proto._restype_ is ctypes.c_double
    assert proto._argtypes_ == (ctypes.POINTER(ctypes.c_double), ctypes.c_int32)


def test_signature_errors_name_the_problem():
    from numthunk import _numba
    with pytest.raises(ValueError, match="arrays") as info:
        nt.Signature("float64(float64[:], intc)")
    assert str(info.value).endswith("\n    float64(float64[:], intc)\n" + " " * 19 + "^")
    with pytest.raises(ValueError, match="unknown type name 'foo'") as info:
        nt.Signature("float64(CPointer(float64), foo)")
    assert str(info.value).endswith("foo)\n" + " " * 31 + "^")
    with pytest.raises(ValueError, match="no return type"):
        _numba.signature_to_c(typing.signature(None, types.float64))
    with pytest.raises(TypeError, match="argument 1: Numba type 'array\\(float64, 1d, C\\)' "
                                        "is an array"):
        nt.Signature(typing.signature(types.float64, types.float64[::1]))
    with pytest.raises(TypeError, match="float complex.*packed"):
        nt.Signature("double (float complex)").to_numba()


def test_numba_signatures_without_a_c_form_are_refused_through_signature_and_bind(cfn):
    addr = cfn("f_d_d", "double (double a)").address
    no_return = typing.signature(None, types.float64)
    for make in (lambda s: nt.Signature(s), lambda s: nt.bind(addr, 1.0, signature=s)):
        with pytest.raises(ValueError, match=r"^Numba signature \(float64,\) -> None has no "
                                             r"return type: a C signature needs one \(write "
                                             r"e\.g\. float64\(float64\) or void\(float64\)\)$"):
            make(no_return)
        for sig, where in [(typing.signature(types.float64, types.unicode_type), "argument 1"),
                           (typing.signature(types.float64, types.float64, types.pyobject),
                            "argument 2"),
                           (typing.signature(types.unicode_type, types.float64), "return type")]:
            with pytest.raises(TypeError, match=rf"^{where}: Numba type '\w+' has no C "
                                                r"equivalent numthunk supports$"):
                make(sig)
    assert str(nt.Signature(typing.signature(types.none, types.float64))) == "void (double)"
    assert str(nt.Signature(typing.signature(types.void, types.float64))) == "void (double)"
    assert nt.bind(addr, 2.5, signature=typing.signature(types.float64, types.float64))() == 2.5


def test_a_protocol_signature_outliving_its_function_says_so(cfn):
    t = nt.bind(cfn("f_d_d", "double (double a)"), nt.ARG)
    fn = cfn("f_d_d", "double (double a)")
    sigs = (t.signature, fn.signature)
    want = typing.signature(types.float64, types.float64)
    assert [s() for s in sigs] == [want, want]
    del t, fn
    gc.collect()
    for s in sigs:
        with pytest.raises(ReferenceError, match="^the function this signature belongs to no "
                                                 "longer exists$"):
            s()
        assert str(s) == "double (double)"      # still the C signature it was


def test_unsupported_signature_cannot_be_a_numba_value(lib, monkeypatch):
    """The TypeError says why; Numba's hasattr probe of _numba_type_ gets
    False, not an exception that CPython 3.13 would print as ignored."""
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    f = nt.Function(addr, "double (__Pyx_memviewslice, int)",
                    memoryviews={0: "double[::1]"})
    # a thunk that forwards a float complex, which Numba passes as two floats
    t = nt.bind(nt.Function(addr, "double (float complex, int)"), nt.ARG, 3)
    for obj, what in ((f, "__Pyx_memviewslice.*bind it"), (t, "complex64 as two separate")):
        assert not hasattr(obj, "_numba_type_")
        with pytest.raises(TypeError, match=f"cannot be a Numba function value.*{what}"):
            call0(obj)
        with pytest.raises(TypeError, match=f"cannot be a Numba function value.*{what}"):
            numba.typeof(obj)
        with pytest.raises(AttributeError, match=f"^no Numba type: .*{what}"):
            obj._numba_type_  # noqa: B018  (what Numba's probe reads)
    assert unraisable == []
    ok = nt.bind(nt.Function(addr, "double (double complex, int)"), nt.ARG, 3)
    assert str(ok._numba_type_) == "numthunk.Thunk[(complex128,) -> float64]"


def test_released_thunk_is_refused_not_called(f_sum):
    t = nt.bind(f_sum, np.ones(3), 3)
    assert call0(t) == 3.0
    t.release()
    with pytest.raises(Exception, match="released"):
        call0(t)


@njit
def _apply(g, f, x):
    return g(f, x)


@pytest.mark.parametrize("how", ["njit", "typed.List", "jitclass", "function pointer"])
@pytest.mark.parametrize("over", ["C", "@cfunc"])
def test_a_released_thunk_never_typed_says_it_was_released(cfn, engine, how, over):
    """A released thunk met by Numba for the first time: over a @cfunc
    (whose type would inline the target, from a context there no longer
    is) as over C code, typing gives the uniform type and unboxing says
    the thunk has been released, never Numba's "non-precise type
    pyobject"."""
    from numba.experimental import jitclass

    if over == "@cfunc":
        @cfunc(types.float64(types.float64, types.float64))
        def scale(k, x):
            return k * x
        t = nt.bind(scale, 2.0, nt.ARG, engine=engine)
    else:
        t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine=engine)
    assert t(1.5) == (3.0 if over == "@cfunc" else 1.5)
    t.release()
    with pytest.raises(ValueError) as info:
        if how == "njit":
            call1(t, 1.0)
        elif how == "typed.List":
            numba.typed.List().append(t)
        elif how == "jitclass":
            @jitclass([("f", nt.Signature("double (double)").numba_type())])
            class Holder:
                def __init__(self, f):
                    self.f = f
            Holder(t)
        else:
            _apply(cfn("f_d_Fd", "double (double (*f)(double), double x)"), t, 1.0)
    assert str(info.value) == "the thunk has been released (see docs/lifetime.md)"


# ---------------------------------------------------------------- @cfunc targets


def test_cfunc_target_signature_read_from_it():
    vec = np.array([1.0, 2.0, 3.0, 4.0])
    t = nt.bind(c_sum, vec, nt.size(vec))
    assert t.target_signature == nt.Signature("double (double *, int)")
    assert t() == 10.0
    assert call0(t) == 10.0


def test_cfunc_forwarding_from_njit():
    @cfunc(types.float64(types.float64, types.CPointer(types.float64), types.intc))
    def poly(x, p, n):
        c = carray(p, n)
        s = 0.0
        for i in range(n - 1, -1, -1):
            s = s * x + c[i]
        return s

    p = np.array([1.0, 0.0, 2.0])
    t = nt.bind(poly, nt.ARG, p, nt.size(p))
    assert t.csig == nt.Signature("double (double)")
    assert call1(t, 3.0) == 19.0


# ---------------------------------------------------------------- seeds' idioms


def test_arr_ctypes_is_accepted_where_seeds_write_it():
    vec = np.array([1.0, 2.0, 3.0, 4.0])
    # compiled(arr.ctypes, np.intc(size)), as in the seeds' fixed factory
    t = nt.bind(c_sum, vec.ctypes, np.intc(vec.size))
    assert t() == 10.0
    assert nt.bind(c_sum, vec.ctypes, nt.size(vec.ctypes))() == 10.0
    vec[1] = 20.0
    assert t() == 28.0 and call0(t) == 28.0     # the array behind arr.ctypes, live
    with pytest.raises(TypeError, match="int32|float32|dtype"):
        nt.bind(c_sum, np.ones(4, np.float32).ctypes, 4)


def test_numba_cfunc_closure_is_stale_numthunk_is_live():
    def make_sum_numba(arr):                    # the seeds' factory
        size = np.intc(arr.size)
        compiled = c_sum

        @cfunc(types.float64())
        def thunk():
            return compiled(arr.ctypes, size)
        return thunk

    vec = np.array([1.0, 2.0, 3.0, 4.0])
    nb = make_sum_numba(vec)
    t = nt.bind(c_sum, vec, nt.size(vec))
    proto = ctypes.CFUNCTYPE(ctypes.c_double)
    assert proto(nb.address)() == proto(t.address)() == 10.0
    vec[0] = 100.0
    # Numba froze the array into the compiled code as a constant: what it
    # does today (numba issue 7249). If this starts to fail, Numba changed.
    assert proto(nb.address)() == 10.0
    assert proto(t.address)() == 109.0
    assert call0(t) == 109.0


# ---------------------------------------------------------------- narrow integers


def test_narrow_int_arguments_from_njit_are_extended(cfn):
    """Numba's first-class calls pass i8/i16 without extending them to 32
    bits; Clang-built callees read the whole register. numthunk's calls of
    thunks and Functions extend them, and the thunk re-extends (native
    engine) or converts through libffi's types (ffi engine) whoever calls."""
    trusting8 = cfn("f_l_cl_trusting", "int64_t (int8_t, int64_t)")
    trusting16 = cfn("f_l_Sl_trusting", "int64_t (uint16_t, int64_t)")

    @njit
    def via_thunk8(fn, n):
        s = 0
        for i in range(n):
            s += fn(np.int8(i))
        return s

    @njit
    def direct8(fn, n):
        s = 0
        for i in range(n):
            s += fn(np.int8(i), 3)
        return s

    @njit
    def via_thunk16(fn, n):
        s = 0
        for i in range(n):
            s += fn(np.uint16(i * 37))
        return s

    n = 1000
    expect8 = 3 * sum(int(np.int8(np.uint8(i % 256))) for i in range(n))
    expect16 = 3 * sum((i * 37) % 65536 for i in range(n * 10))
    t8 = nt.bind(trusting8, nt.ARG, 3)
    t16 = nt.bind(trusting16, nt.ARG, 3)
    assert via_thunk8(t8, n) == expect8
    assert via_thunk16(t16, n * 10) == expect16
    assert direct8(trusting8, n) == expect8            # the target itself, extended

    # The hazard is real through Numba's own function values (an explicit
    # FunctionType): the callee sees the unextended register. If this
    # starts to fail, Numba began extending narrow ints.
    numba_fn = types.FunctionType(types.int64(types.int8, types.int64))

    @njit(types.int64(numba_fn, types.int64))
    def via_numba(fn, n):
        s = 0
        for i in range(n):
            s += fn(np.int8(i), 3)
        return s

    assert via_numba(trusting8, n) != expect8


def test_narrow_int_returns_and_bool(cfn):
    t = nt.bind(cfn("f_l_cCsSB", "int64_t (int8_t, uint8_t, int16_t, uint16_t, bool)"),
                nt.ARG, nt.ARG, nt.ARG, nt.ARG, nt.ARG)

    @njit
    def run(fn, n):
        s = 0
        for i in range(n):
            s += fn(np.int8(i), np.uint8(i), np.int16(i * 300), np.uint16(i * 300),
                    i % 3 == 0)
        return s

    def ref(i):
        a, b = int(np.int8(np.uint8(i % 256))), i % 256
        c, d = int(np.int16(np.uint16(i * 300 % 65536))), i * 300 % 65536
        return a * 1000003 + b * 10007 + c * 101 + d * 3 + (i % 3 == 0)

    assert run(t, 500) == sum(ref(i) for i in range(500))
    back = nt.bind(cfn("f_c_c", "int8_t (int8_t)"), nt.ARG)
    assert call1(back, np.int8(-5)) == -5


def test_engine_under_test_is_the_requested_one(f_sum):
    forced = os.environ.get("NUMTHUNK_ENGINE")
    t = nt.bind(f_sum, np.ones(2), 2)
    if forced == "ffi":
        assert t.engine == "libffi"
    elif forced == "native":
        assert t.engine.startswith("native")


# ---------------------------------------------------------------- inlined Numba targets
# A thunk over a Numba @cfunc has a Numba type of its own target and binding
# layout: @njit code calls the target's compiled function directly (LLVM
# inlines it), loading the bound values from the thunk's current context.

f8 = types.float64


@cfunc(f8(f8, f8, f8))
def c_affine(a, b, x):
    return a * x + b


@cfunc(f8(f8, f8, f8))
def c_affine_too(a, b, x):                  # another target, same signature
    return a * x - b


@cfunc(f8(f8, types.CPointer(f8), types.intc))
def c_weighted(x, p, n):
    s = 0.0
    for i in range(n):
        s += p[i] * x ** i
    return s


@njit
def call_many(fn, x, k):
    s = 0.0
    for _ in range(k):
        s += fn(x)
    return s


LIBM_POW = nt.Function.from_library("libm.so.6", "pow", "double (double, double)")


def _uniform(text="double (double)"):
    return nt.Signature(text).numba_type()


def test_inline_type_per_target_and_layout(f_sum):
    from numthunk._numba_ext import InlineThunkType, ThunkType

    t1 = nt.bind(c_affine, 2.0, 1.0, nt.ARG)
    t2 = nt.bind(c_affine, -5.0, 0.5, nt.ARG)
    ty = numba.typeof(t1)
    assert type(ty) is InlineThunkType and "inline c_affine#" in str(ty)
    assert numba.typeof(t2) is ty                           # values do not matter
    assert ty.opaque is _uniform() and ty.signature == _uniform().signature
    # another target, another binding pattern: other types of one signature
    other = numba.typeof(nt.bind(c_affine_too, 2.0, 1.0, nt.ARG))
    pattern = numba.typeof(nt.bind(c_affine, 2.0, nt.ARG, 3.0))
    assert len({ty, other, pattern}) == 3
    assert other.opaque is pattern.opaque is _uniform()
    # C targets, composed thunks, Functions and opaque() keep the uniform type
    c_thunk = nt.bind(f_sum, np.ones(2), 2)
    assert type(numba.typeof(c_thunk)) is ThunkType
    assert numba.typeof(nt.bind(t1, nt.ARG)) is _uniform()
    assert numba.typeof(t1.target) is _uniform("double (double, double, double)")
    assert numba.typeof(t1.opaque()) is _uniform()
    # what the core says about the layout
    cell, values, slots = t1._inline_layout()
    assert values == 32 and cell > 0
    assert slots == (("bound", "float64", 0), ("bound", "float64", 8), ("arg", "float64", 0))


def test_a_cfunc_behind_another_function_is_not_inlined(engine):
    """_api._numba_target: a thunk inlines its @cfunc only when the Function
    it binds is the @cfunc as it is. A Function at the @cfunc's address
    with fixed= (or memoryviews=) changes what the address is called with,
    so its thunks keep the uniform type and are called through their
    address, with the fixed value in place; the same address and signature
    without them inlines."""
    from numthunk._numba_ext import InlineThunkType

    sig = "double (double, double, double)"
    fixed = nt.Function(c_affine.address, sig, fixed={0: 2.0}, owner=c_affine)
    assert str(fixed.csig) == "double (double, double)"
    t = nt.bind(fixed, 1.0, nt.ARG, engine=engine)           # 2 * x + 1
    assert numba.typeof(t) is _uniform()
    assert call1(t, 3.0) == t(3.0) == 7.0
    plain = nt.Function(c_affine.address, sig, owner=c_affine)
    u = nt.bind(plain, 2.0, 1.0, nt.ARG, engine=engine)
    assert type(numba.typeof(u)) is InlineThunkType
    assert call1(u, 3.0) == 7.0


def test_a_forwarded_parameter_numba_types_otherwise_is_called_through_the_address():
    """A @cfunc parameter typed CPointer(void) is C's void *, which Numba
    code passes as voidptr: a thunk that forwards it keeps the uniform type
    (an inlined call would hand an i8** where the target takes i8*); bound,
    the same parameter inlines."""
    from numba import types

    from numthunk._numba_ext import InlineThunkType

    @numba.cfunc(types.float64(types.float64, types.CPointer(types.void)))
    def plus_one(x, p):
        return x + 1.0

    @numba.cfunc(types.voidptr(types.voidptr))
    def same(p):
        return p

    pointer = nt.bind(same, nt.address(8))
    fwd = nt.bind(plus_one, nt.ARG, nt.ARG)
    assert numba.typeof(fwd) is _uniform("double (double, void *)")

    @numba.njit
    def through(t, make, x):
        return t(x, make())

    assert through(fwd, pointer, 2.0) == 3.0
    bound = nt.bind(plus_one, nt.ARG, nt.address(8))
    assert type(numba.typeof(bound)) is InlineThunkType
    assert call1(bound, 2.0) == 3.0


def test_inline_call_is_inlined(engine):
    t = nt.bind(c_affine, 2.0, 1.0, nt.ARG, engine=engine)
    opaque = t.opaque()
    assert call_many(t, 3.0, 4) == call_many(opaque, 3.0, 4) == 28.0
    ir_inline = call_many.inspect_llvm(call_many.signatures[0])
    ir_opaque = call_many.inspect_llvm(call_many.signatures[1])

    def calls(ir):
        body = ir[ir.index("define"):]
        body = body[:body.index("\n}\n")]       # the consumer itself
        return [line for line in body.splitlines() if " call " in line]

    # through the address: an indirect call in the loop; inlined: no call
    # of the target at all, its arithmetic in the consumer
    assert any("call double %" in c for c in calls(ir_opaque))
    assert not any("c_affine" in c or "call double" in c for c in calls(ir_inline))
    body = ir_inline[ir_inline.index("define"):]
    assert "fmul double" in body[:body.index("\n}\n")]


def test_inline_sees_rebind_and_no_recompilation(engine):
    p = np.array([1.0, 2.0])
    t = nt.bind(c_weighted, nt.ARG, p, nt.size(p), engine=engine)
    assert call_many(t, 2.0, 1) == 1.0 + 4.0
    p[1] = 3.0                                      # the array's data, live
    assert call_many(t, 2.0, 1) == 1.0 + 6.0
    q = np.array([1.0, 0.0, 1.0])
    t.rebind(1, q)                                  # size(p) follows: 3
    assert call_many(t, 2.0, 1) == 1.0 + 4.0
    t.rebind(2, 1)                                  # a scalar
    assert call_many(t, 2.0, 1) == 1.0
    t.reclaim()
    others = [nt.bind(c_weighted, nt.ARG, np.full(n, 1.0), n, engine=engine)
              for n in range(1, 11)]
    assert [call_many(o, 2.0, 1) for o in others] == [2.0 ** n - 1 for n in range(1, 11)]
    inline_sigs = [s for s in call_many.signatures if "c_weighted" in str(s[0])]
    assert len(inline_sigs) == 1                    # one specialisation for all of them


_RELEASED_INLINE = """
import ctypes, os
import numba
from numba import cfunc, njit
from numba.types import float64 as f8
import numthunk as nt

engine = os.environ["NT_TEST_ENGINE"]


@cfunc(f8(f8, f8, f8))
def c_affine(a, b, x):
    return a * x + b


@cfunc(f8(f8, f8, f8))
def c_affine_too(a, b, x):
    return a * x - b


@njit
def call(lst, x):
    return lst[0](x)


def raises_released(f, *args):
    try:
        f(*args)
    except ValueError as exc:
        assert "the thunk has been released (see docs/lifetime.md)" in str(exc), exc
        return True
    return False


t = nt.bind(c_affine, 2.0, 1.0, nt.ARG, engine=engine)


# a field of the thunk's own (inline) type: a typed.List's items have the
# uniform type, called through the address
@numba.experimental.jitclass([("f", numba.typeof(t))])
class Holder:
    def __init__(self, f):
        self.f = f


held = Holder(t)
read_cell = ctypes.c_void_p.from_address(id(t) + t._inline_layout()[0])
assert read_cell.value is not None
address = t.address
t.release()
assert read_cell.value is None                  # reads as released


@njit
def run(h, x):
    return h.f(x)


assert raises_released(run, held, 1.0)
# Enough releases for the entry to leave the quarantine: its address now
# serves new thunks, the released one still raises.
reused = None
for _ in range(40_000):
    u = nt.bind(c_affine_too, 0.0, 7.0, nt.ARG, engine=engine)
    if u.address == address:
        reused = u
        break
    u.release()
assert reused is not None and reused(1.0) == -7.0, "the released entry was not reused"
assert raises_released(run, held, 1.0)
assert call(numba.typed.List([reused]), 1.0) == -7.0
print("ok")
"""


def test_inline_released_thunk_raises_never_calls(engine):
    """A container holds the thunk object: after release() an inlined call
    raises (the thunk's own context cell reads NULL), also once the
    released entry has left the quarantine and serves another thunk. In a
    fresh process: whether libffi hands a freed closure's address out again
    within the loop depends on what its allocator was given back before."""
    assert run_python(_RELEASED_INLINE, env={"NT_TEST_ENGINE": engine}).strip() == "ok"


INLINE_CACHE_TARGET = """
from numba import cfunc, types

@cfunc(types.float64(types.float64, types.CPointer(types.float64), types.intc))
def poly(x, p, n):
    s = 0.0
    for i in range(n - 1, -1, -1):
        s = s * x + p[i]
    return s{extra}
"""

INLINE_CACHE_CONSUMER = """
from numba import njit

@njit(cache=True)
def midpoint(f, a, b, n):
    h = (b - a) / n
    s = 0.0
    for i in range(n):
        s += f(a + (i + 0.5) * h)
    return s * h
"""

INLINE_CACHE_USE = """
import sys
sys.path.insert(0, {dir!r})
import numpy as np, numba, numthunk as nt
import target, consumer
p = np.array({coefs})
f = nt.bind(target.poly, nt.ARG, p, nt.size(p))
assert "inline poly#" in str(numba.typeof(f))
first = consumer.midpoint(f, 0.0, 2.0, 1000)
p[0] += 1.0                                   # live data
f.rebind(1, np.array({coefs}) * 2.0)          # live binding
print(round(first, 6) + 0.0, round(consumer.midpoint(f, 0.0, 2.0, 1000), 6) + 0.0,
      sum(consumer.midpoint.stats.cache_hits.values()),
      sum(consumer.midpoint.stats.cache_misses.values()))
"""


def test_inline_cache_in_fresh_processes(tmp_path, engine):
    """The cache holds the consumer with the target's code linked in, for
    the target's fingerprint: a fresh process loads it for its own thunk
    (other address, other values); changed target code is compiled anew."""
    (tmp_path / "target.py").write_text(INLINE_CACHE_TARGET.format(extra=""))
    (tmp_path / "consumer.py").write_text(INLINE_CACHE_CONSUMER)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMTHUNK_ENGINE": engine}

    def run(coefs):
        code = INLINE_CACHE_USE.format(dir=str(tmp_path), coefs=coefs)
        return run_python(code, env=env, cwd=str(tmp_path)).split()

    # integral over [0, 2] of 1 + 3x^2 is 10, of 0.5 - x is -1
    assert run([1.0, 0.0, 3.0]) == ["9.999998", "19.999996", "0", "1"]
    assert run([0.5, -1.0]) == ["-1.0", "-2.0", "1", "0"]           # from the cache
    # the same consumer, a target whose code changed: not the cached code
    (tmp_path / "target.py").write_text(INLINE_CACHE_TARGET.format(extra=" + 1.0"))
    assert run([0.5, -1.0]) == ["1.0", "0.0", "0", "1"]
    assert run([0.5, -1.0]) == ["1.0", "0.0", "1", "0"]


CACHED_TARGETS = """
import math
import numpy as np
from numba import cfunc, njit, types

f8 = types.float64


@njit(cache=True)
def helper(x):
    return 2.0 * x + 1.0


@cfunc(f8(f8, f8), cache=True)
def with_math(k, x):
    return math.exp(k * x) + math.cos(x)


@cfunc(f8(f8, f8), cache=True)
def with_numpy(k, x):
    return np.sinh(k * x) + np.arctan2(x, k)


@cfunc(f8(f8, f8), cache=True)
def with_njit(k, x):
    return helper(k * x)
"""

CACHED_USE = """
import sys
sys.path.insert(0, {dir!r})
import numba, numthunk as nt
import targets, consumer
fps = []
for name in ("with_math", "with_numpy", "with_njit"):
    t = nt.bind(getattr(targets, name), 0.5, nt.ARG)
    fps.append(numba.typeof(t).fingerprint[:16])
    print(name, round(consumer.run(t, 0.25), 9))
s = consumer.run.stats
print("fingerprints", *fps)
print("hits", sum(s.cache_hits.values()), "misses", sum(s.cache_misses.values()))
"""


def test_inline_cache_key_is_the_same_for_a_cached_target(tmp_path, engine):
    """A cache=True @cfunc that calls math, NumPy or @njit functions is
    compiled by the first process and loaded from Numba's cache by the
    next: its thunk's type (the fingerprint of the code a consumer links) is
    the same both ways, so the second process already finds the cached
    consumer (three fresh processes: compiled, then loaded twice)."""
    (tmp_path / "targets.py").write_text(CACHED_TARGETS)
    (tmp_path / "consumer.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef run(f, x):\n    return f(x) + 1.0\n")
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMTHUNK_ENGINE": engine}
    code = CACHED_USE.format(dir=str(tmp_path))
    runs = [run_python(code, env=env, cwd=str(tmp_path)).splitlines() for _ in range(3)]
    import math
    want = [f"with_math {round(math.exp(0.125) + math.cos(0.25) + 1.0, 9)}",
            f"with_numpy {round(np.sinh(0.125) + np.arctan2(0.25, 0.5) + 1.0, 9)}",
            f"with_njit {round(2.0 * 0.125 + 1.0 + 1.0, 9)}"]
    for out in runs:
        assert out[:3] == want
    assert runs[0][3] == runs[1][3] == runs[2][3]          # the fingerprints
    assert [out[4] for out in runs] == ["hits 0 misses 3", "hits 3 misses 0",
                                        "hits 3 misses 0"]


def test_inline_type_survives_pickling():
    import pickle

    ty = numba.typeof(nt.bind(c_affine, 2.0, 1.0, nt.ARG))
    assert ty._target is not None
    state = ty.__getstate__()
    assert "_target" not in state                   # this process's library
    assert pickle.loads(pickle.dumps(ty)) is ty     # interned: the live type


def test_inline_mixed_containers():
    from numba import literal_unroll, typed

    a = nt.bind(c_affine, 2.0, 1.0, nt.ARG)         # 2x + 1
    b = nt.bind(c_affine_too, 2.0, 1.0, nt.ARG)     # 2x - 1
    c = nt.bind(LIBM_POW, nt.ARG, 2.0)              # a C target: x ** 2

    @njit
    def unrolled(fns, x):
        s = 0.0
        for f in literal_unroll(fns):
            s += f(x)
        return s

    @njit
    def by_constant(fns, k, x):
        if k == 0:
            return fns[0](x)
        if k == 1:
            return fns[1](x)
        return fns[2](x)

    assert unrolled((a, b, c), 3.0) == 7.0 + 5.0 + 9.0
    assert [by_constant((a, b, c), k, 3.0) for k in range(3)] == [7.0, 5.0, 9.0]

    @njit
    def by_index(fns, k, x):
        return fns[k](x)

    # indexed at run time: over one target a UniTuple of the inline type;
    # over several, the items as the uniform type (opaque() or not)
    a2 = nt.bind(c_affine, 10.0, 0.0, nt.ARG)
    assert [by_index((a, a2), k, 3.0) for k in range(2)] == [7.0, 30.0]
    mixed = (a.opaque(), b.opaque(), c)
    assert [by_index(mixed, k, 3.0) for k in range(3)] == [7.0, 5.0, 9.0]
    assert [by_index((a, b, c), k, 3.0) for k in range(3)] == [7.0, 5.0, 9.0]

    @njit
    def choose(flag, f, g, x):
        h = f if flag else g                 # unified: the uniform type
        return h(x)

    assert choose(True, a, b, 3.0) == 7.0 and choose(False, a, b, 3.0) == 5.0
    assert choose(True, a, c, 3.0) == 7.0 and choose(False, a, c, 3.0) == 9.0

    @cfunc(f8(f8))
    def triple(x):
        return 3.0 * x

    assert choose(True, a, triple, 3.0) == 7.0 and choose(False, a, triple, 3.0) == 9.0

    # a typed.List of the uniform type takes them all, and gives them back
    lst = typed.List.empty_list(_uniform())
    for t in (a, b, c):
        lst.append(t)

    @njit
    def call_all(fns, x):
        return [f(x) for f in fns]

    assert call_all(lst, 3.0) == [7.0, 5.0, 9.0]
    assert lst[0] is a and lst[1] is b
    # a list typed by its first item has the uniform type too (a container's
    # item type is the type of any value it may hold): it takes another
    # target's thunk
    same = typed.List([a, a2])
    assert same._list_type.item_type is _uniform()
    same.append(b)
    assert call_all(same, 3.0) == [7.0, 30.0, 5.0]

    @numba.experimental.jitclass([("f", _uniform())])
    class Holder:
        def __init__(self, f):
            self.f = f

    assert Holder(a).f(3.0) == 7.0 and Holder(c).f(3.0) == 9.0



def test_a_thunk_called_in_njit_takes_its_arguments_by_position_and_count():
    f = nt.bind(LIBM_POW, nt.ARG, 2.0)                  # double (double)

    @njit
    def by_keyword(f):
        return f(a=2.0)

    @njit
    def with_two(f):
        return f(2.0, 3.0)

    @njit
    def with_none(f):
        return f()

    with pytest.raises(numba.core.errors.TypingError,
                       match=r"numthunk\.Thunk\[\(float64,\) -> float64\]: a C function takes "
                             "no keyword arguments"):
        by_keyword(f)
    for call, n in ((with_two, 2), (with_none, 0)):
        with pytest.raises(numba.core.errors.TypingError,
                           match=rf"numthunk\.Thunk\[\(float64,\) -> float64\] takes 1 "
                                 rf"argument\(s\), got {n}"):
            call(f)
    assert call1(f, 3.0) == f(3.0) == 9.0


def test_a_function_typed_list_refuses_a_thunk_of_another_signature(cfn):
    one = cfn("f_d_d", "double (double a)")
    two = LIBM_POW
    lst = numba.typed.List.empty_list(types.FunctionType(types.float64(types.float64)))
    lst.append(one)
    with pytest.warns(numba.core.errors.NumbaTypeSafetyWarning), \
            pytest.raises(numba.core.errors.TypingError,
                          match=r"cannot convert numthunk\.Thunk\[\(float64, float64\) -> "
                                r"float64\] to FunctionType\[float64\(float64\)\]: the "
                                r"signatures differ"):
        lst.append(two)
    assert len(lst) == 1 and call1(lst[0], 2.5) == 2.5


def test_thunk_passed_for_a_function_pointer(cfn):
    """A thunk's parameter that is a C function pointer takes a thunk or
    Function of that signature from @njit code: its address, the caller's
    value holding it for the call."""
    integrate = cfn("f_d_Fddi", "double (double (*)(double), double, double, int)")
    over01 = nt.bind(integrate, nt.ARG, 0.0, 1.0, 1000)      # double (double (*)(double))
    line = nt.bind(c_affine, 2.0, 1.0, nt.ARG)              # inline type
    square = nt.bind(LIBM_POW, nt.ARG, 2.0)                  # uniform type

    @njit
    def run(q, f):
        return q(f)

    assert run(over01, line) == pytest.approx(2.0)
    assert run(over01, line.opaque()) == pytest.approx(2.0)
    assert run(over01, square) == pytest.approx(1.0 / 3.0)

    @njit
    def run_target(integrate, f):
        return integrate(f, 0.0, 2.0, 100)

    assert run_target(integrate, square) == pytest.approx(8.0 / 3.0, rel=1e-4)
    with pytest.raises(numba.core.errors.TypingError,
                       match=r"argument 1: expected a function \(float64,\) -> float64, got "
                             r"a thunk or Function \(float64, float64\) -> float64"):
        run(over01, nt.bind(c_affine, 1.0, nt.ARG, nt.ARG))
    with pytest.raises(numba.core.errors.TypingError,
                       match="argument 1 is a C function pointer .* not float64"):
        run(over01, 3.0)
    # the parameters' function types tell thunk types apart
    assert numba.typeof(over01) != nt.Signature("double (void *)").numba_type()


def _closure(k):
    @cfunc(f8(f8, f8))
    def shifted(a, x):
        return a * x + k
    return shifted


def test_inline_types_follow_the_compiled_code():
    """Two @cfuncs from one Python function with different constants
    compiled in are different targets; the same code is the same one."""
    one, two, again = _closure(1.0), _closure(2.0), _closure(1.0)
    t1, t2, t3 = (nt.bind(cf, 3.0, nt.ARG) for cf in (one, two, again))
    assert numba.typeof(t1) != numba.typeof(t2)
    assert numba.typeof(t1) == numba.typeof(t3)
    assert [call_many(t, 2.0, 1) for t in (t1, t2, t3)] == [7.0, 8.0, 7.0]


def test_targets_that_stay_called_through_the_address(cfn):
    """Code holding this process's addresses (a ctypes function compiled
    in) would make a cached consumer unsafe: such a @cfunc keeps the
    uniform type; so do thunks over thunks (composed: documented)."""
    fabs = ctypes.CDLL(None).fabs
    fabs.restype, fabs.argtypes = ctypes.c_double, [ctypes.c_double]

    @cfunc(f8(f8, f8))
    def via_ctypes(a, x):
        return a * fabs(x)

    t = nt.bind(via_ctypes, 2.0, nt.ARG)
    assert numba.typeof(t) is _uniform()
    assert call_many(t, -3.0, 2) == 12.0
    inner = nt.bind(c_affine, 2.0, nt.ARG, nt.ARG)
    outer = nt.bind(inner, 1.0, nt.ARG)
    assert numba.typeof(outer) is _uniform() and call_many(outer, 3.0, 1) == 7.0
    # keep= and a signature= that spells the target's own still inline
    kept = nt.bind(c_affine, 2.0, 1.0, nt.ARG, keep=np.ones(1))
    spelled = nt.bind(c_affine, 2.0, 1.0, nt.ARG, signature="double (double, double, double)")
    assert numba.typeof(kept) is numba.typeof(spelled) is \
        numba.typeof(nt.bind(c_affine, 0.0, 0.0, nt.ARG))


def test_functions_owned_by_a_pair_are_no_kept_cfunc(cfn):
    """Only keep='s own pair (the Function, what is kept) is looked through
    for a @cfunc: a Function whose owner is any other pair of objects, or a
    pair whose first item is no Function, is called through the address."""
    plain = cfn("f_d_d", "double (double)")
    for owner in ((plain.owner, "f_d_d"), (1, 2), (c_affine, None), (None, plain)):
        fn = nt.Function(plain.address, "double (double)", owner=owner)
        t = nt.bind(fn, nt.ARG)
        assert numba.typeof(t) is _uniform(), owner
        assert call1(t, 2.5) == 2.5
    kept = nt.bind(c_affine, 2.0, 1.0, nt.ARG, keep=(1, 2))
    assert numba.typeof(kept) is numba.typeof(nt.bind(c_affine, 0.0, 0.0, nt.ARG))
    assert call1(kept, 3.0) == 7.0


def test_inline_target_exception_is_handled_as_its_c_entry_handles_it():
    """Inlining changes no result: an exception in the target is printed
    as unraisable and the call returns 0, as through the address."""
    @cfunc(f8(f8, f8))
    def checked(a, x):
        if x < 0.0:
            raise ValueError("negative")
        return a * x

    t = nt.bind(checked, 2.0, nt.ARG)
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_type)
    try:
        inline = call_many(t, -1.0, 1), call_many(t, 3.0, 1)
        opaque = call_many(t.opaque(), -1.0, 1), call_many(t.opaque(), 3.0, 1)
    finally:
        sys.unraisablehook = old
    assert inline == opaque == (0.0, 6.0)
    assert seen == [ValueError, ValueError]


@cfunc(types.int64(types.int8, types.uint16, types.boolean, types.float32, types.int32,
                   types.complex128, types.CPointer(types.int64)))
def c_narrow(a, b, c, d, e, z, p):
    return a * 1_000_000 + b * 10 + (7 if c else 0) + int(d * 4) + e + int(z.imag) + p[0]


@pytest.mark.parametrize("forward", [(), (0, 1, 2), (3, 4, 5, 6)])
def test_inline_loads_every_kind_as_its_cell_holds_it(forward):
    """Bound cells hold narrow ints extended to 64 bits, a float in its low
    bytes, complex values in 16 bytes: the inlined call reads each as the
    target's type, and gives what the call through the address gives."""
    values = [-3, 65535, True, 2.5, -40, 1 + 9j, np.array([1], dtype=np.int64)]
    args = [nt.ARG if i in forward else v for i, v in enumerate(values)]
    t = nt.bind(c_narrow, *args)
    assert "inline c_narrow#" in str(numba.typeof(t))
    fwd = tuple(values[i] for i in forward)

    @njit
    def go(f, *a):
        return f(*a)

    expect = -3_000_000 + 655_350 + 7 + 10 - 40 + 9 + 1
    assert go(t, *fwd) == go(t.opaque(), *fwd) == expect
    values[6][0] = 2                                # read through the pointer, live
    assert go(t, *fwd) == expect + 1


def test_inline_in_prange_and_as_a_global():
    t = nt.bind(c_affine, 2.0, 1.0, nt.ARG)

    @njit(parallel=True)
    def fill(f, n):
        out = np.empty(n)
        for i in prange(n):
            out[i] = f(float(i))
        return out

    np.testing.assert_array_equal(fill(t, 8), 2.0 * np.arange(8.0) + 1.0)

    @njit
    def use_global(x):
        return _GLOBAL_INLINE(x)

    _GLOBAL_INLINE.rebind(0, 3.0)
    assert use_global(2.0) == 7.0
    _GLOBAL_INLINE.rebind(0, 5.0)               # compiled in, still live
    assert use_global(2.0) == 11.0


_GLOBAL_INLINE = nt.bind(c_affine, 1.0, 1.0, nt.ARG)


def test_njit_function_as_a_target_says_how():
    @njit
    def plain(a, x):
        return a * x

    with pytest.raises(TypeError, match="@njit function .*plain.* has no C entry.*@cfunc"):
        nt.bind(plain, 2.0, nt.ARG, signature="double (double, double)")


# ---------------------------------------------- foreign layouts from @njit code
# tests/exporters/ntexport.c exports exactly the layout asked for: buffers
# NumPy never makes (negative, odd and non-element strides, suboffsets) and
# DLPack tensors with a byte_offset. A thunk bound to them is called from
# @njit code; a C kernel reads the memory as described and NumPy's
# as_strided view of the same bytes is the oracle.

X_SUM = "double (const double *p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0, " \
        "ptrdiff_t s1)"


@njit
def _twice(fn):
    return fn() + fn()


def _strided_view(raw, offset, shape, strides):
    base = raw[offset // raw.itemsize:]
    return np.lib.stride_tricks.as_strided(base, shape, strides)


@pytest.mark.parametrize("shape, strides, offset", [
    ((3, 4), (-120, 24), 240),      # rows backwards, every third element
    ((4, 3), (8, 40), 0),           # column-major-like, odd row pitch in elements
    ((2, 5), (96, -16), 64),        # columns backwards
    ((1, 4), (12, 8), 0),           # an axis of one: its stride is never used
])
def test_foreign_strided_buffer_read_from_njit(ntexport, engine, shape, strides, offset):
    raw = np.arange(64.0)
    buf = ntexport.Buffer(raw, "d", 8, shape, strides, offset=offset)
    kern = nt.Function(ntexport.kernels["nt_x_sum"], X_SUM)
    t = nt.bind(kern, nt.strided(buf), ord("d"), nt.shape(buf, 0), nt.shape(buf, 1),
                nt.stride(buf, 0), nt.stride(buf, 1), engine=engine)
    want = _strided_view(raw, offset, shape, strides).sum()
    assert call0(t) == want and _twice(t) == 2 * want
    raw[:] *= 2.0                    # the thunk reads the exporter's memory live
    assert call0(t) == 2 * want
    assert buf.exports == 1          # held by the binding, released with it
    t.release()
    assert buf.exports == 0


def test_foreign_buffers_refused_at_bind_leave_the_njit_consumer_as_it_was(ntexport, engine):
    """Suboffsets (PIL-style indirection) and a stride that is no multiple
    of the element's alignment, on an axis longer than one, are refused at
    bind and at rebind naming the parameter; the thunk @njit code calls
    keeps what it had."""
    raw = np.arange(64.0)
    kern = nt.Function(ntexport.kernels["nt_x_sum"], X_SUM)
    good = ntexport.Buffer(raw, "d", 8, (2, 3), (48, 8))
    t = nt.bind(kern, nt.strided(good), ord("d"), 2, 3, 48, 8, engine=engine)
    assert call0(t) == raw[[0, 1, 2, 6, 7, 8]].sum()
    rows = np.array([raw[8:].ctypes.data, raw[16:].ctypes.data], dtype=np.uintp)
    label = r"^argument 1 \(p: const double \*\): "
    for bad, exc, text in [
            (ntexport.Buffer(rows, "d", 8, (2, 3), (8, 8), suboffsets=(0, -1)), TypeError,
             "indirect buffers \\(PIL-style suboffsets\\) are not supported"),
            (ntexport.Buffer(raw, "d", 8, (2, 3), (48, 12)), ValueError,
             "the buffer's data is not aligned to 8 bytes"),
            (ntexport.Buffer(raw, "d", 8, (2, 3), (44, 8)), ValueError,
             "the buffer's data is not aligned to 8 bytes")]:
        with pytest.raises(exc, match=label + text):
            nt.bind(kern, nt.strided(bad), ord("d"), 2, 3, 8, 8, engine=engine)
        with pytest.raises(exc, match=label + text):
            t.rebind(0, nt.strided(bad))
        assert bad.exports == 0
        assert call0(t) == raw[[0, 1, 2, 6, 7, 8]].sum()


@pytest.fixture(scope="module")
def dl_kernels():
    from conftest import compile_shared

    here = os.path.dirname(os.path.abspath(__file__))     # beside an installed wheel too
    path = compile_shared(os.path.join(here, "fixtures", "dlpack_kernels.c"),
                          "dlpack_kernels", extra=["-I", nt.get_include()])
    return ctypes.CDLL(path)


@pytest.mark.parametrize("byte_offset", [0, 8, 24, 7, 9])
@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_tensor_with_byte_offset_from_njit(ntexport, dl_kernels, engine, byte_offset,
                                                  versioned):
    """byte_offset is folded into the data pointer (whole elements), and one
    byte off either side is refused at bind: never seen by @njit code."""
    raw = np.arange(16.0)
    exporter = ntexport.Tensor(raw, 2, 64, (2, 3), (1, 4), byte_offset=byte_offset,
                               versioned=versioned)
    addr = ctypes.cast(dl_kernels.dl_sum_f64, ctypes.c_void_p).value
    fn = nt.Function(addr, "double (const DLTensor *t)", owner=dl_kernels)
    if byte_offset % 8:
        with pytest.raises(ValueError, match=r"^argument 1 \(t: const DLTensor \*\): the "
                                             r"array's data is not aligned to 8 bytes"):
            nt.bind(fn, exporter, engine=engine)
        assert exporter.exported == exporter.deleted == 1
        return
    t = nt.bind(fn, exporter, engine=engine)
    want = _strided_view(raw, byte_offset, (2, 3), (8, 32)).sum()
    assert call0(t) == want and _twice(t) == 2 * want
    raw[:] += 1.0
    assert call0(t) == want + 6
    t.release()
    gc.collect()
    assert exporter.deleted == exporter.exported == 1


@pytest.mark.parametrize("override", [{"nogil": False}, {"signature": "double (double x)"},
                                      {"signature": "double (double)", "nogil": True}])
def test_a_cfunc_resolved_with_options_keeps_no_function_for_later(override):
    """A @cfunc keeps its Function only when its own signature and GIL
    policy made it: one made with signature= or nogil= is not given to a
    later bind that names neither."""
    @cfunc(types.float64(types.float64))
    def halve(x):
        return x / 2.0

    from numthunk._api import as_function

    first = as_function(halve, **override)
    assert first.nogil is override.get("nogil", True)
    assert first.signature == nt.Signature(override.get("signature", "double (double)"))
    own = as_function(halve)
    assert own is not first and own.nogil is True
    assert own.signature == nt.Signature("double (double)") and own.signature.names == (None,)
    assert as_function(halve) is own and nt.bind(halve, 3.0)() == 1.5
    assert nt.bind(halve, nt.ARG).nogil is True

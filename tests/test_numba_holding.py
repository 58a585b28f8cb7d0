"""Numba: what holds a thunk. Its Numba value holds a reference, counted by
Numba's runtime as an array's is: typed containers, returned values,
jitclass and structref fields keep the thunk alive; compiled code holds
the thunks it reads as globals and closure variables, and a @cfunc
depends on those its code captured."""

import gc
import sys
import weakref

import numba
import numpy as np
import pytest
from numba import cfunc, njit, types

import numthunk as nt

from numba_kernels import call0

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

"""Numba's first-class function tests, with numthunk's objects as kinds of
function value.

Adapted from Numba's own ``numba/tests/test_function_type.py`` (class
``TestFunctionType``, the same in Numba 0.59 and 0.68; Numba is
BSD-2-Clause licensed). Each of its tests takes a small Python function
(``a(i) = i + 1``), turns it into one kind of function value with a
decorator (``mk_cfunc_func``, ``njit_func``, ``mk_wap_func``, ...), and runs
a consumer with ``jit(nopython=True)`` and ``jit(forceobj=True)``, comparing
with the plain Python functions. What was adapted:

- written for pytest: the kinds and the jit options are parameters, not
  ``subTest`` loops; each test keeps Numba's list of kinds for it, and the
  numthunk kinds join every list that holds ``mk_cfunc_func`` (a numthunk
  object is a function value of a fixed signature, as a @cfunc is);
- the numthunk kinds: a ``Function`` at a @cfunc's address (C code to
  numthunk), a thunk over that C code, a thunk over the @cfunc itself
  (inlined, with a Numba type of its own target), the same thunk's
  ``opaque()`` and a thunk over a SciPy ``LowLevelCallable``;
- a returned function value is compared by identity (``is``): numthunk's
  objects take no ``pyfunc`` attribute, and Numba gives the same object
  back;
- added, where Numba's tests use one kind for every function in a test:
  the same consumers with a numthunk object and each of Numba's kinds
  (@cfunc, @njit with and without a signature, a protocol object) mixed,
  in both orders: they meet as Numba's FunctionType, as a @cfunc and an
  @njit function do.
"""

import ctypes

import pytest
from numba import cfunc, int64, jit, njit, types

import numthunk as nt

pytestmark = pytest.mark.filterwarnings(
    "ignore::numba.core.errors.NumbaExperimentalFeatureWarning")

SIG = int64(int64)
JIT_OPTS = [dict(nopython=True), dict(forceobj=True)]


# ---------------------------------------------------------------- kinds


class WAP(types.WrapperAddressProtocol):
    """Numba's example of its Wrapper Address Protocol."""

    def __init__(self, func, sig):
        self.pyfunc = func
        self.cfunc = cfunc(sig)(func)
        self.sig = sig

    def __wrapper_address__(self):
        return self.cfunc._wrapper_address

    def signature(self):
        return self.sig

    def __call__(self, *args, **kwargs):
        return self.pyfunc(*args, **kwargs)


def _c_function(func):
    """The @cfunc of func as C code: a numthunk Function at its address."""
    cf = cfunc(SIG)(func)
    return nt.Function(cf.address, "int64_t (int64_t)", owner=cf)


def _llc(func):
    """A LowLevelCallable over a C function taking a trailing void *: the
    thunk over it binds that pointer."""
    @cfunc(int64(int64, types.voidptr))
    def with_data(i, data):
        return func(i)

    fn = nt.Function(with_data.address, "int64_t (int64_t, void *)", owner=with_data)
    return fn.lowlevelcallable(user_data=ctypes.c_void_p(8))


KINDS = {
    # Numba's
    "cfunc": lambda func: cfunc(SIG)(func),
    "njit": lambda func: njit(func),
    "njit_with_sig": lambda func: jit(SIG, nopython=True)(func),
    "wap": lambda func: WAP(func, SIG),
    # numthunk's
    "Function": _c_function,
    "thunk_over_c": lambda func: nt.bind(_c_function(func), nt.ARG),
    "thunk_over_cfunc": lambda func: nt.bind(cfunc(SIG)(njit(func)), nt.ARG),
    "opaque": lambda func: nt.bind(cfunc(SIG)(njit(func)), nt.ARG).opaque(),
    "llc": lambda func: nt.bind(_llc(njit(func)), nt.ARG),
}
NUMTHUNK = ["Function", "thunk_over_c", "thunk_over_cfunc", "opaque", "llc"]


def kinds(*numba_kinds):
    """Numba's kinds for a test, with numthunk's where a @cfunc is one."""
    return list(numba_kinds) + (NUMTHUNK if "cfunc" in numba_kinds else [])


def mixed(numba_kinds):
    """(numthunk kind, Numba kind) and the reverse, for every pair."""
    pairs = []
    for ours in NUMTHUNK:
        for theirs in numba_kinds:
            pairs += [(ours, theirs), (theirs, ours)]
    return pairs


def _jit(opts):
    return jit(**opts)


# ---------------------------------------------------------------- Numba's tests


def a(i):
    return i + 1


def b(i):
    return i + 2


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_in_(kind, opts):
    """Function is passed in as an argument."""
    def foo(f):
        return 0

    assert _jit(opts)(foo)(KINDS[kind](a)) == foo(a)


def a_i64(i):
    return i + 1234567


def a_f64(i):
    return i + 1.5


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_in_call_(kind, opts):
    """Function is passed in as an argument and called (the float64
    variant is Numba's, with its own kinds: numthunk's signature here is
    int64(int64))."""
    def foo(f):
        return f(123)

    assert _jit(opts)(foo)(KINDS[kind](a_i64)) == foo(a_i64)


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_in_call_out(kind, opts):
    """Function is passed in as an argument, called, and returned."""
    def foo(f):
        f(123)
        return f

    a_ = KINDS[kind](a)
    assert _jit(opts)(foo)(a_) is a_


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "wap", "njit_with_sig"))
def test_in_seq_call(kind, opts):
    """Functions are passed in as arguments, used as tuple items, and
    called."""
    def foo(f, g):
        r = 0
        for f_ in (f, g):
            r = r + f_(r)
        return r

    assert _jit(opts)(foo)(KINDS[kind](a), KINDS[kind](b)) == foo(a, b)


def _mkfoo_seq(b_):
    def foo(f):
        r = 0
        for f_ in (f, b_):
            r = r + f_(r)
        return r
    return foo


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit_with_sig", "wap"))
def test_in_ns_seq_call(kind, opts):
    """Functions are passed in as an argument and via namespace scoping
    (mixed pathways), used as tuple items, and called."""
    assert _jit(opts)(_mkfoo_seq(KINDS[kind](b)))(KINDS[kind](a)) == _mkfoo_seq(b)(a)


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_ns_call(kind, opts):
    """Function is passed in via namespace scoping and called."""
    def mkfoo(a_):
        def foo():
            return a_(123)
        return foo

    assert _jit(opts)(mkfoo(KINDS[kind](a)))() == mkfoo(a)()


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_ns_out(kind, opts):
    """Function is passed in via namespace scoping and returned."""
    def mkfoo(a_):
        def foo():
            return a_
        return foo

    a_ = KINDS[kind](a)
    assert _jit(opts)(mkfoo(a_))() is a_


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_ns_call_out(kind, opts):
    """Function is passed in via namespace scoping, called, and then
    returned."""
    def mkfoo(a_):
        def foo():
            a_(123)
            return a_
        return foo

    a_ = KINDS[kind](a)
    assert _jit(opts)(mkfoo(a_))() is a_


def _choose(a, b, choose_left):
    if choose_left:
        r = a(1)
    else:
        r = b(2)
    return r


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_in_choose(kind, opts):
    """Functions are passed in as arguments and called conditionally."""
    foo = _jit(opts)(_choose)
    a_, b_ = KINDS[kind](a), KINDS[kind](b)
    assert foo(a_, b_, True) == _choose(a, b, True)
    assert foo(a_, b_, False) == _choose(a, b, False)
    assert foo(a_, b_, True) != _choose(a, b, False)


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_ns_choose(kind, opts):
    """Functions are passed in via namespace scoping and called
    conditionally."""
    def mkfoo(a_, b_):
        def foo(choose_left):
            if choose_left:
                r = a_(1)
            else:
                r = b_(2)
            return r
        return foo

    foo = _jit(opts)(mkfoo(KINDS[kind](a), KINDS[kind](b)))
    assert foo(True) == mkfoo(a, b)(True)
    assert foo(False) == mkfoo(a, b)(False)
    assert foo(True) != mkfoo(a, b)(False)


def _choose_out(a, b, choose_left):
    if choose_left:
        return a
    else:
        return b


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "njit", "njit_with_sig", "wap"))
def test_in_choose_out(kind, opts):
    """Functions are passed in as arguments and returned conditionally."""
    foo = _jit(opts)(_choose_out)
    a_, b_ = KINDS[kind](a), KINDS[kind](b)
    assert foo(a_, b_, True) is a_
    assert foo(a_, b_, False) is b_


def _choose_func_value(a, b, choose_left):
    if choose_left:
        f = a
    else:
        f = b
    return f(1)


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "wap", "njit", "njit_with_sig"))
def test_in_choose_func_value(kind, opts):
    """Functions are passed in as arguments, selected conditionally and
    called."""
    foo = _jit(opts)(_choose_func_value)
    a_, b_ = KINDS[kind](a), KINDS[kind](b)
    assert foo(a_, b_, True) == _choose_func_value(a, b, True)
    assert foo(a_, b_, False) == _choose_func_value(a, b, False)


def _pick(funcs, i):
    f = funcs[i]
    r = f(123)
    return r


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "wap", "njit_with_sig"))
def test_in_pick_func_call(kind, opts):
    """Functions are passed in as items of tuple argument, retrieved via
    indexing, and called."""
    foo = _jit(opts)(_pick)
    funcs = (KINDS[kind](a), KINDS[kind](b))
    assert foo(funcs, 0) == _pick((a, b), 0)
    assert foo(funcs, 1) == _pick((a, b), 1)
    assert foo(funcs, 0) != _pick((a, b), 1)


def _iter(funcs, n):
    r = 0
    for i in range(n):
        f = funcs[i]
        r = r + f(r)
    return r


@pytest.mark.parametrize("opts", JIT_OPTS)
@pytest.mark.parametrize("kind", kinds("cfunc", "wap", "njit_with_sig"))
def test_in_iter_func_call(kind, opts):
    """Functions are passed in as items of tuple argument, retrieved via
    indexing, and called within a variable for-loop."""
    foo = _jit(opts)(_iter)
    assert foo((KINDS[kind](a), KINDS[kind](b)), 2) == _iter((a, b), 2)


# ---------------------------------------------------------------- mixed kinds


def _seq(f, g):
    r = 0
    for f_ in (f, g):
        r = r + f_(r)
    return r


@pytest.mark.parametrize("first, second", mixed(["cfunc", "njit", "njit_with_sig", "wap"]))
def test_mixed_seq_call(first, second):
    """A numthunk object and a Numba function value in one tuple, looped
    over (Numba's own test_in_seq_call, two kinds)."""
    foo = njit(_seq)
    assert foo(KINDS[first](a), KINDS[second](b)) == _seq(a, b)


@pytest.mark.parametrize("first, second", mixed(["cfunc", "njit", "njit_with_sig", "wap"]))
def test_mixed_ns_seq_call(first, second):
    """One passed in, the other a global of the consumer."""
    foo = njit(_mkfoo_seq(KINDS[second](b)))
    assert foo(KINDS[first](a)) == _mkfoo_seq(b)(a)


@pytest.mark.parametrize("first, second", mixed(["cfunc", "njit", "njit_with_sig", "wap"]))
def test_mixed_pick_and_iter(first, second):
    """A tuple of both, indexed at run time."""
    funcs = (KINDS[first](a), KINDS[second](b))
    assert [njit(_pick)(funcs, i) for i in (0, 1)] == [_pick((a, b), i) for i in (0, 1)]
    assert njit(_iter)(funcs, 2) == _iter((a, b), 2)


@pytest.mark.parametrize("first, second", mixed(["cfunc", "njit", "njit_with_sig", "wap"]))
def test_mixed_choose_func_value(first, second):
    """One variable holding either, by a branch."""
    foo = njit(_choose_func_value)
    a_, b_ = KINDS[first](a), KINDS[second](b)
    assert foo(a_, b_, True) == _choose_func_value(a, b, True)
    assert foo(a_, b_, False) == _choose_func_value(a, b, False)


@pytest.mark.parametrize("first, second", mixed(["cfunc", "njit", "njit_with_sig", "wap"]))
def test_mixed_list(first, second):
    """A list of both, built in @njit code."""
    @njit
    def foo(f, g):
        return [h(10) for h in [f, g]]

    assert foo(KINDS[first](a), KINDS[second](b)) == [a(10), b(10)]

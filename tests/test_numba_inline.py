"""Numba: a thunk over a Numba @cfunc has a Numba type of its own target and
binding layout: @njit code calls the target's compiled function directly
(LLVM inlines it), loading the bound values from the thunk's current
context. The type per target, rebinds seen without recompiling, released
thunks refused, mixed containers, every kind loaded as its cell holds
it."""

import ctypes
import sys

import numba
import numpy as np
import pytest
from numba import cfunc, njit, prange, types

import numthunk as nt

from numba_kernels import call1, uniform
from thunks import run_python

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


def test_inline_type_per_target_and_layout(f_sum):
    from numthunk._numba_ext import InlineThunkType, ThunkType

    t1 = nt.bind(c_affine, 2.0, 1.0, nt.ARG)
    t2 = nt.bind(c_affine, -5.0, 0.5, nt.ARG)
    ty = numba.typeof(t1)
    assert type(ty) is InlineThunkType and "inline c_affine#" in str(ty)
    assert numba.typeof(t2) is ty                           # values do not matter
    assert ty.opaque is uniform() and ty.signature == uniform().signature
    # another target, another binding pattern: other types of one signature
    other = numba.typeof(nt.bind(c_affine_too, 2.0, 1.0, nt.ARG))
    pattern = numba.typeof(nt.bind(c_affine, 2.0, nt.ARG, 3.0))
    assert len({ty, other, pattern}) == 3
    assert other.opaque is pattern.opaque is uniform()
    # C targets, composed thunks, Functions and opaque() keep the uniform type
    c_thunk = nt.bind(f_sum, np.ones(2), 2)
    assert type(numba.typeof(c_thunk)) is ThunkType
    assert numba.typeof(nt.bind(t1, nt.ARG)) is uniform()
    assert numba.typeof(t1.target) is uniform("double (double, double, double)")
    assert numba.typeof(t1.opaque()) is uniform()
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
    assert numba.typeof(t) is uniform()
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
    assert numba.typeof(fwd) is uniform("double (double, void *)")

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
    lst = typed.List.empty_list(uniform())
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
    assert same._list_type.item_type is uniform()
    same.append(b)
    assert call_all(same, 3.0) == [7.0, 30.0, 5.0]

    @numba.experimental.jitclass([("f", uniform())])
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
                             r"no keyword arguments: pass a by position, f\(\.\.\.\)"):
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
    assert numba.typeof(t) is uniform()
    assert call_many(t, -3.0, 2) == 12.0
    inner = nt.bind(c_affine, 2.0, nt.ARG, nt.ARG)
    outer = nt.bind(inner, 1.0, nt.ARG)
    assert numba.typeof(outer) is uniform() and call_many(outer, 3.0, 1) == 7.0
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
        assert numba.typeof(t) is uniform(), owner
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

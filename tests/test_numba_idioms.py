"""Numba's idioms for function values, with thunks over several @cfunc
targets of one signature (each with a type of its own, so that a single
call inlines its target): loops over tuples, tuples indexed at run time,
untyped typed.List and typed.Dict, and thunks meeting Numba's own function
values (@cfunc, @njit) in tuples, lists and branches.

Every call is checked against the same arithmetic in Python, on both
engines (the thunks' engine is the `engine` fixture)."""

import numba
import numpy as np
import pytest
from numba import cfunc, literal_unroll, njit, prange, typed, types
from numba.core.errors import TypingError

import numthunk as nt
from numthunk._numba_ext import ChoiceThunkType, InlineThunkType

from numba_kernels import uniform

f8 = types.float64

pytestmark = pytest.mark.filterwarnings(
    "ignore::numba.core.errors.NumbaExperimentalFeatureWarning")


@cfunc(f8(f8, f8))
def c_plus(k, x):
    return x + k


@cfunc(f8(f8, f8))
def c_times(k, x):
    return x * k


@cfunc(f8(f8))
def c_square(x):
    return x * x


@njit
def j_half(x):
    return x / 2.0


@njit
def j_count(x):                      # returns int64 of its own
    return 3


@njit
def j_pair(x):                       # cannot return a float64
    return (x, x)


def _thunks(engine):
    """Three thunks of one signature over two targets, and what each
    computes."""
    plus = nt.bind(c_plus, 1.0, nt.ARG, engine=engine)
    times = nt.bind(c_times, 3.0, nt.ARG, engine=engine)
    plus10 = nt.bind(c_plus, 10.0, nt.ARG, engine=engine)
    return (plus, times, plus10), (lambda x: x + 1.0, lambda x: 3.0 * x, lambda x: x + 10.0)


@njit
def loop_over_built_tuple(f, g, x):
    s = 0.0
    for h in (f, g):
        s = s * 2.0 + h(x)
    return s


@njit
def loop_over_tuple(fns, x):
    s = 0.0
    for h in fns:
        s = s * 2.0 + h(x)
    return s


@njit
def pick(fns, k, x):
    return fns[k](x)


@njit
def pick_in_loop(fns, x):
    s = 0.0
    for k in range(len(fns)):
        s = s * 2.0 + fns[k](x)
    return s


def test_thunks_over_several_targets_have_types_of_their_own(engine):
    (plus, times, plus10), _ = _thunks(engine)
    assert type(numba.typeof(plus)) is InlineThunkType
    assert numba.typeof(plus) is numba.typeof(plus10)
    assert numba.typeof(plus) != numba.typeof(times)
    assert isinstance(numba.typeof((plus, times)), types.Tuple)     # heterogeneous


def test_loop_over_a_tuple_of_thunks_over_several_targets(engine):
    (plus, times, plus10), (p, t, p10) = _thunks(engine)
    assert loop_over_built_tuple(plus, times, 2.0) == 2.0 * p(2.0) + t(2.0) == 12.0
    assert loop_over_built_tuple(times, plus, 2.0) == 2.0 * t(2.0) + p(2.0)
    assert loop_over_tuple((plus, times, plus10), 2.0) == 4 * p(2.0) + 2 * t(2.0) + p10(2.0)
    # a thunk over C code (the uniform type) among them
    pow2 = nt.bind(nt.Function.from_library("libm.so.6", "pow", "double (double, double)"),
                   nt.ARG, 2.0, engine=engine)
    assert loop_over_tuple((plus, pow2, times), 3.0) == 4 * 4.0 + 2 * 9.0 + 9.0


def test_tuple_of_thunks_over_several_targets_indexed_at_run_time(engine):
    (plus, times, plus10), funcs = _thunks(engine)
    fns = (plus, times, plus10)
    assert [pick(fns, k, 2.0) for k in range(3)] == [f(2.0) for f in funcs]
    assert [pick(fns, k, 2.0) for k in (-1, -3)] == [funcs[-1](2.0), funcs[-3](2.0)]
    assert pick(fns, numba.uint8(1), 2.0) == funcs[1](2.0)
    assert pick_in_loop(fns, 2.0) == 4 * 3.0 + 2 * 6.0 + 12.0
    with pytest.raises(IndexError):
        pick(fns, 3, 2.0)


def test_a_single_thunk_call_stays_inlined(engine):
    """Typing tuples of thunks takes nothing from a call of one thunk: its
    target's code is still inlined (no call through an address)."""
    (plus, times, _), _ = _thunks(engine)

    @njit
    def twice(f, x):
        return f(f(x))

    assert twice(plus, 1.0) == 3.0 and twice(times, 1.0) == 9.0
    ir = twice.inspect_llvm(twice.signatures[0])
    body = ir[ir.index("define"):]
    body = body[:body.index("\n}\n")]
    assert not [line for line in body.splitlines() if "call double" in line]
    assert "fadd double" in body


@pytest.mark.parametrize("fill", ["python", "njit"])
def test_untyped_typed_list_takes_thunks_over_several_targets(engine, fill):
    (plus, times, plus10), funcs = _thunks(engine)

    @njit
    def gather(a, b, c):
        lst = typed.List()
        lst.append(a)
        lst.append(b)
        lst.append(c)
        return lst

    @njit
    def call_all(lst, x):
        return [f(x) for f in lst]

    if fill == "python":
        lst = typed.List()
        for t in (plus, times, plus10):
            lst.append(t)
    else:
        lst = gather(plus, times, plus10)
    assert lst._list_type.item_type is uniform()
    assert call_all(lst, 2.0) == [f(2.0) for f in funcs]
    assert lst[1] is times                              # the same object back
    lst2 = typed.List([times, plus])                    # typed by its first item
    assert call_all(lst2, 2.0) == [6.0, 3.0]


def test_a_typed_list_refuses_a_thunk_of_another_signature_saying_so(engine):
    (plus, _, _), _ = _thunks(engine)
    two = nt.bind(c_plus, nt.ARG, nt.ARG, engine=engine)       # double (double, double)
    lst = typed.List([plus])
    with pytest.raises(TypingError, match="the signatures differ"):
        lst.append(two)
    assert list(lst) == [plus]


def test_untyped_typed_dict_takes_thunks_over_several_targets(engine):
    (plus, times, plus10), funcs = _thunks(engine)

    @njit
    def call(d, k, x):
        return d[k](x)

    d = typed.Dict()
    d["plus"] = plus
    d["times"] = times
    d["plus10"] = plus10
    assert [call(d, k, 2.0) for k in ("plus", "times", "plus10")] == [f(2.0) for f in funcs]
    assert d["times"] is times


def test_branch_over_thunks_over_several_targets(engine):
    (plus, times, _), _ = _thunks(engine)

    @njit
    def choose(flag, f, g, x):
        h = f if flag else g
        return h(x)

    assert choose(True, plus, times, 2.0) == 3.0 and choose(False, plus, times, 2.0) == 6.0


@pytest.mark.parametrize("other", ["cfunc", "njit"])
def test_thunks_unify_with_numba_function_values(engine, other):
    """A thunk and a @cfunc or @njit function of its signature meet as
    Numba's FunctionType, in whichever order, in a tuple (loop and run-time
    index), a list and a branch."""
    (plus, times, _), (p, t, _) = _thunks(engine)
    fn, ref = (c_square, lambda x: x * x) if other == "cfunc" else (j_half, lambda x: x / 2.0)

    @njit
    def in_list(f, g, h, x):
        return [k(x) for k in [f, g, h]]

    @njit
    def choose(flag, f, g, x):
        h = f if flag else g
        return h(x)

    x = 3.0
    for order, refs in (((plus, fn, times), (p, ref, t)), ((fn, plus, times), (ref, p, t))):
        want = [r(x) for r in refs]
        assert loop_over_tuple(order, x) == (want[0] * 2.0 + want[1]) * 2.0 + want[2]
        assert [pick(order, k, x) for k in range(3)] == want
        assert in_list(*order, x) == want
        assert loop_over_built_tuple(order[0], order[1], x) == 2.0 * want[0] + want[1]
    assert choose(True, plus, fn, x) == p(x) and choose(False, plus, fn, x) == ref(x)
    assert choose(True, fn, times, x) == ref(x) and choose(False, fn, times, x) == t(x)


def test_njit_function_unifies_where_it_compiles_for_the_signature(engine):
    """An @njit function meets a thunk as Numba's FunctionType when it
    compiles for the thunk's signature (an int64 result converted to the
    float64 the signature returns, as Numba compiles it); one that cannot
    return a float64 does not unify."""
    (plus, _, _), _ = _thunks(engine)
    assert loop_over_built_tuple(plus, j_half, 2.0) == 2.0 * 3.0 + 1.0
    # j_count returns an int64 of its own: Numba compiles it for the
    # signature as returning float64 (newer Numba), or keeps its own result
    # type (0.59: Literal[int]); only the first can be called as the
    # signature's function
    sig = numba.types.float64(numba.types.float64)
    exact = (numba.typeof(j_count).dispatcher.get_compile_result(sig).signature.return_type
             == numba.types.float64)
    if exact:
        assert loop_over_built_tuple(plus, j_count, 2.0) == 2.0 * 3.0 + 3.0
    else:
        with pytest.raises(TypingError, match="mixes thunks with values they do not unify"):
            loop_over_built_tuple(plus, j_count, 2.0)
    with pytest.raises(TypingError, match="mixes thunks with values they do not unify with"):
        loop_over_built_tuple(plus, j_pair, 2.0)


def test_a_tuple_that_cannot_be_one_type_says_what_to_write(engine):
    (plus, _, _), _ = _thunks(engine)
    two = nt.bind(c_plus, nt.ARG, nt.ARG, engine=engine)       # double (double, double)
    with pytest.raises(TypingError) as info:
        loop_over_built_tuple(plus, two, 2.0)
    lines = [line for line in str(info.value).splitlines()
             if line.strip() and not line.startswith("Failed in nopython mode pipeline")]
    assert "numba.literal_unroll" in lines[0], lines[0]
    # indexed at run time: Numba's own report of a failed getitem would
    # come first, with this among its candidates' reasons
    with pytest.raises(TypingError) as info:
        pick((plus, two), 0, 2.0)
    lines = [line for line in str(info.value).splitlines()
             if line.strip() and not line.startswith("Failed in nopython mode pipeline")]
    assert "numba.literal_unroll" in lines[0], lines[0]

    @njit
    def by_constant(fns, x):
        return fns[0](x) + fns[1](x, x)

    assert by_constant((plus, two), 2.0) == 3.0 + 4.0


def _calls_through_an_address(dispatcher, sig_index=0):
    ir = dispatcher.inspect_llvm(dispatcher.signatures[sig_index])
    body = ir[ir.index("define"):]
    body = body[:body.index("\n}\n")]
    return [line for line in body.splitlines() if "call double %" in line]


def test_thunks_over_one_target_in_a_tuple_stay_inlined(engine):
    """A tuple of thunks over one target (a UniTuple of their own type),
    indexed at run time or looped over, calls the target's code inlined:
    its items keep their type."""
    (plus, _, plus10), _ = _thunks(engine)

    @njit
    def pick_one(fns, k, x):
        return fns[k](x)

    @njit
    def each(fns, x):
        s = 0.0
        for f in fns:
            s = s * 2.0 + f(x)
        return s

    assert [pick_one((plus, plus10), k, 2.0) for k in (0, 1)] == [3.0, 12.0]
    assert each((plus, plus10), 2.0) == 2 * 3.0 + 12.0
    assert not _calls_through_an_address(pick_one)
    assert not _calls_through_an_address(each)
    # over several targets, the item picked at run time is a switch over
    # the index, each case inlined
    (plus, times, _), _ = _thunks(engine)
    assert pick_one((plus, times), 1, 2.0) == 6.0
    assert not _calls_through_an_address(pick_one, 1)
    # looped over, the items are of the uniform type: a call through the address
    assert each((plus, times), 2.0) == 2 * 3.0 + 6.0
    assert _calls_through_an_address(each, 1)


# ---------------------------------------------------------------- a choice at run time


@njit
def integrate_choice(fns, k, n):
    f = fns[k]                          # picked once, called in the loop
    s = 0.0
    for i in range(n):
        s += f(i + 0.5)
    return s


def test_a_choice_at_run_time_calls_each_target_inlined(engine):
    """fns[k] over thunks over several @cfuncs (a thunk over C code among
    them too) is a switch over k, each case the item's own call: every
    index (negative and unsigned too) computes its item's result, and no
    inlined item is called through its address."""
    (plus, times, plus10), funcs = _thunks(engine)
    fns = (plus, times, plus10)
    for k in range(-3, 3):
        assert integrate_choice(fns, k, 4) == sum(funcs[k](i + 0.5) for i in range(4))
    assert integrate_choice(fns, numba.uint8(1), 4) == sum(funcs[1](i + 0.5) for i in range(4))
    assert "choice of" in str(integrate_choice.overloads[integrate_choice.signatures[0]]
                              .type_annotation.typemap["f"])
    assert not _calls_through_an_address(integrate_choice)
    for k in (3, -4):
        with pytest.raises(IndexError):
            integrate_choice(fns, k, 4)
    # with a thunk over C code among them: its case is a call through its address
    pow2 = nt.bind(nt.Function.from_library("libm.so.6", "pow", "double (double, double)"),
                   nt.ARG, 2.0, engine=engine)
    mixed = (plus, pow2, times)
    assert [integrate_choice(mixed, k, 3) for k in range(3)] == [
        sum(f(i + 0.5) for i in range(3)) for f in (funcs[0], lambda x: x * x, funcs[1])]
    assert len(_calls_through_an_address(integrate_choice, -1)) == 1


def test_a_choice_at_run_time_sees_rebinds(engine):
    (plus, times, plus10), _ = _thunks(engine)
    fns = (plus, times, plus10)
    assert [integrate_choice(fns, k, 1) for k in range(3)] == [1.5, 1.5, 10.5]
    compiled = len(integrate_choice.signatures)
    plus.rebind(0, 5.0)
    times.rebind(0, -2.0)
    assert [integrate_choice(fns, k, 1) for k in range(3)] == [5.5, -1.0, 10.5]
    assert len(integrate_choice.signatures) == compiled          # nothing compiled again


def test_a_choice_is_the_picked_thunk_where_a_thunk_is_stored(engine):
    """Returned, stored in a typed.List or passed where Numba's FunctionType
    is wanted, the choice is the item it picked."""
    (plus, times, plus10), _ = _thunks(engine)
    fns = (plus, times, plus10)

    @njit
    def picked(fns, k):
        return fns[k]

    @njit
    def listed(fns, k):
        out = typed.List()
        out.append(fns[k])
        out.append(fns[0])
        return out

    assert [picked(fns, k) for k in (0, 1, 2, -1)] == [plus, times, plus10, plus10]
    assert all(picked(fns, k) is fns[k] for k in range(3))
    got = listed(fns, 1)
    assert got[0] is times and got[0](2.0) == 6.0 and got[1] is plus

    @njit
    def through_function_type(fns, k, x):
        g = fns[k] if k >= 0 else c_square
        return g(x)

    assert through_function_type(fns, 1, 2.0) == 6.0
    assert through_function_type(fns, -1, 3.0) == 9.0


@njit
def call_one(f, x):
    return f(x)


def test_a_choice_passed_to_an_njit_function_is_called_there(engine):
    """helper(fns[k], x): the helper is compiled for the choice (its calls
    a switch, each target inlined), also in a prange body; its Python
    entry, which no Python value reaches with a choice, still builds, and
    the helper stays callable with thunks from Python."""
    (plus, times, plus10), funcs = _thunks(engine)
    fns = (plus, times, plus10)

    @njit
    def through_helper(fns, k, x):
        return call_one(fns[k], x)

    @njit(parallel=True)
    def in_prange(fns, n):
        out = np.zeros(n)
        for i in prange(n):
            out[i] = call_one(fns[i % 3], float(i))
        return out

    assert [through_helper(fns, k, 2.0) for k in range(-3, 3)] == \
        [funcs[k](2.0) for k in range(-3, 3)]
    assert list(in_prange(fns, 6)) == [funcs[i % 3](float(i)) for i in range(6)]
    assert any(isinstance(sig[0], ChoiceThunkType) for sig in call_one.signatures)
    assert not _calls_through_an_address(through_helper)
    assert call_one(times, 2.0) == funcs[1](2.0)


def test_a_choice_among_the_items_of_a_tuple(engine):
    """A tuple holding a choice, indexed at run time (a choice among a
    choice and thunks), looped over, or unrolled by literal_unroll (where
    Numba indexes the tuple with each item's own type, the choice's
    included), calls what each item picked."""
    (plus, times, plus10), (p, t, p10) = _thunks(engine)
    fns = (plus, times)

    @njit
    def nested(fns, k, m, x):
        return (fns[k], plus10)[m](x)

    @njit
    def looped(fns, k, x):
        s = 0.0
        for g in (fns[k], plus10):
            s = s * 2.0 + g(x)
        return s

    @njit
    def unrolled(fns, k, x):
        s = 0.0
        for g in literal_unroll((fns[k], plus10)):
            s = s * 2.0 + g(x)
        return s

    @njit
    def unrolled_pairs(fns, k, x):
        s = 0.0
        for pair in literal_unroll(((fns[k], plus10), (plus10, fns[k]))):
            a, b = pair
            s = s * 2.0 + a(b(x))
        return s

    picked = (p, t)
    for k in range(2):
        f = picked[k]
        assert [nested(fns, k, m, 2.0) for m in range(2)] == [f(2.0), p10(2.0)]
        assert looped(fns, k, 2.0) == unrolled(fns, k, 2.0) == 2.0 * f(2.0) + p10(2.0)
        assert unrolled_pairs(fns, k, 2.0) == 2.0 * f(p10(2.0)) + p10(f(2.0))
    assert not _calls_through_an_address(nested)
    assert not _calls_through_an_address(unrolled)


CHOICE_RELEASED = """
import numba
from numba import cfunc, njit, types
import numthunk as nt

f8 = types.float64
engine = {engine!r}


@cfunc(f8(f8, f8))
def c_plus(k, x):
    return x + k


@cfunc(f8(f8, f8))
def c_times(k, x):
    return x * k


fns = (nt.bind(c_plus, 1.0, nt.ARG, engine=engine), nt.bind(c_times, 3.0, nt.ARG, engine=engine))


@numba.experimental.jitclass([("fns", numba.typeof(fns))])
class Holder:
    def __init__(self, fns):
        self.fns = fns


@njit
def call(h, k, x):
    return h.fns[k](x)


held = Holder(fns)
assert [call(held, k, 2.0) for k in (0, 1)] == [3.0, 6.0]
fns[1].release()
try:
    call(held, 1, 2.0)
except ValueError as exc:
    assert "the thunk has been released" in str(exc), exc
else:
    raise AssertionError("a released thunk ran")
assert call(held, 0, 2.0) == 3.0
print("ok")
"""


def test_a_choice_refuses_a_released_thunk(engine):
    """The released item's case raises ValueError (its context reads NULL)
    and never calls its target; the other items still run."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", CHOICE_RELEASED.format(engine=engine)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# ---------------------------------------------------------------- pointer arguments


@cfunc(types.void(types.CPointer(f8), types.CPointer(f8), f8))
def c_axpy(x, y, a):
    for i in range(3):
        y[i] += a * x[i]


@njit
def axpy_ctypes(f, x, y, z, n):
    for _ in range(n):
        f(x.ctypes, y.ctypes)
        f(z.ctypes, x.ctypes)
        f(z.ctypes, y.ctypes)
    return y


@njit
def axpy_ctypes_before_reassigning(f, x, y, z):
    p = y.ctypes
    y = z                               # p still points to the first array
    f(x.ctypes, p)
    return y


def test_ctypes_arguments_of_an_inlined_call_take_no_reference_in_the_loop(engine):
    """f(x.ctypes, y.ctypes) passes the arrays' data pointers: the calls
    write into y, see a rebind, and the loop holds no reference to the
    arrays (no NRT_incref left in the compiled code's loop: the .ctypes
    values are the arrays, borrowed for the call)."""
    import numpy as np

    def want(a, x, y, z, n):
        for _ in range(n):
            y += a * x
            x += a * z
            y += a * z
        return y

    f = nt.bind(c_axpy, nt.ARG, nt.ARG, 2.0, engine=engine)
    args = np.array([1.0, 2.0, 3.0]), np.zeros(3), np.array([0.5, -1.0, 4.0])
    expected = want(2.0, *(a.copy() for a in args), 3)
    assert list(axpy_ctypes(f, *args, 3)) == list(expected)
    f.rebind(2, -1.0)
    expected = want(-1.0, *(a.copy() for a in args), 1)
    assert list(axpy_ctypes(f, *args, 1)) == list(expected)
    ir = axpy_ctypes.inspect_llvm(axpy_ctypes.signatures[0])
    body = ir[ir.index("define"):]
    body = body[:body.index("\n}\n")]
    increfs = [line.strip() for line in body.splitlines() if "NRT_incref" in line]
    assert len(increfs) == len(set(increfs)), increfs      # each argument's once, on entry
    # a name given another array between .ctypes and the call: the first one
    x, y, z = np.array([1.0, 2.0, 3.0]), np.zeros(3), np.full(3, 7.0)
    out = axpy_ctypes_before_reassigning(f, x, y, z)
    assert out is z and list(z) == [7.0, 7.0, 7.0] and list(y) == [-1.0, -2.0, -3.0]
    # a non-contiguous array's .ctypes (left as it is) passes its data
    # pointer: the target writes the three doubles there
    base = np.zeros(6)
    axpy_ctypes(f, x * 0.0, base[::2], x, 1)
    assert list(base) == [-1.0, -2.0, -3.0, 0.0, 0.0, 0.0]

"""Numba: thunks and Functions as first-class function values in nopython
code (arguments, tuples, unification, prange), @cfunc targets,
the seeds' idioms, narrow integers, and foreign layouts read from @njit
code. The other files of Numba's: test_numba_holding.py (what
holds a thunk: Numba's values, globals, closures), test_numba_signatures.py, test_numba_inline.py
(thunks over @cfunc targets inlined), test_numba_processes.py
(fresh processes, Numba's cache), test_numba_function_type.py and
test_numba_idioms.py.

Run under both engines (NUMTHUNK_ENGINE=native / ffi); every result is
compared with the fixture function called directly or with NumPy."""

import ctypes
import gc
import os

import numba
import numpy as np
import pytest
from numba import carray, cfunc, njit, prange, types
from numba.core import typing

import numthunk as nt

from numba_kernels import c_sum, call0, call1

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

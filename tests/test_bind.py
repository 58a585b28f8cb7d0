"""bind(): targets, bound values of every kind, forwarding, live bindings.

Each result is compared with a direct call of the same fixture function, so
the C compiler is the oracle."""

import array
import ctypes
import math
import platform
import re
import struct
import sys

import cffi
import numpy as np
import pytest

import numthunk as nt

from thunks import Index

SCALARS = [
    # (function, C type, values)
    ("f_B_B", "bool", [True, False]),
    ("f_c_c", "int8_t", [-128, -1, 0, 127]),
    ("f_C_C", "uint8_t", [0, 200, 255]),
    ("f_s_s", "int16_t", [-32768, -5, 32767]),
    ("f_S_S", "uint16_t", [0, 65535]),
    ("f_i_i", "int", [-2**31, -7, 2**31 - 1]),
    ("f_I_I", "unsigned int", [0, 2**32 - 1]),
    ("f_l_l", "int64_t", [-2**63, -1, 2**63 - 1]),
    ("f_L_L", "uint64_t", [0, 2**64 - 1]),
    ("f_f_f", "float", [1.5, -0.25, 3.4028234663852886e38]),
    ("f_d_d", "double", [1e308, -2.5, float("inf")]),
]


def test_long_double_scalars_bind_as_double_up_to_its_range(cfn, engine):
    """convert/value.c as_double: a NumPy long double binds and forwards as the
    double it rounds to, infinities and NaN included; a finite one beyond
    DBL_MAX (x87's 80-bit long double holds them) is refused, not sent as
    inf. A float parameter takes the ones a float holds."""
    f = cfn("f_d_d", "double (double)")
    g = cfn("f_f_f", "float (float)")
    big = np.finfo(np.float64).max
    for v in (1.5, -0.25, big, -big, 5e-324, float("inf"), float("-inf")):
        ld = np.longdouble(v)
        assert nt.bind(f, ld, engine=engine)() == v
        assert nt.bind(f, nt.ARG, engine=engine)(ld) == v
    assert math.isnan(nt.bind(f, np.longdouble("nan"), engine=engine)())
    for v in (1.5, -0.25, 3.4028234663852886e38):
        assert nt.bind(g, np.longdouble(v), engine=engine)() == v
        assert nt.bind(g, nt.ARG, engine=engine)(np.longdouble(v)) == v
    assert np.finfo(np.longdouble).max > big, "x86-64's long double is wider than double"
    for beyond in (np.longdouble(big) * 2, -np.longdouble(big) * 2):
        assert np.isfinite(beyond)
        with pytest.raises(OverflowError, match=r"^argument 1 \(double\): .* is too large "
                                                r"for a C double"):
            nt.bind(f, beyond, engine=engine)
        with pytest.raises(OverflowError, match=r"is too large for a C double"):
            nt.bind(f, nt.ARG, engine=engine)(beyond)


@pytest.mark.parametrize("name, ctype, values", SCALARS)
def test_scalar_roundtrip_bound_and_forwarded(cfn, name, ctype, values):
    fn = cfn(name, f"{ctype} ({ctype})")
    fwd = nt.bind(fn, nt.ARG)
    assert str(fwd.csig) == f"{ctype} ({ctype})"
    for v in values:
        bound = nt.bind(fn, v)
        assert str(bound.csig) == f"{ctype} (void)"
        assert bound() == v
        assert fwd(v) == v
        assert bound.ctypes() == v
        assert fwd.ctypes(v) == v


def test_numpy_scalars_are_checked_by_value(cfn):
    fn = cfn("f_c_c", "int8_t (int8_t)")
    assert nt.bind(fn, np.int64(-5))() == -5
    with pytest.raises(OverflowError, match="argument 1"):
        nt.bind(fn, np.int64(300))
    assert (nt.bind(cfn("f_f_f", "float (float)"), np.float64(0.1))()
            == struct.unpack("f", struct.pack("f", 0.1))[0])


def test_narrow_ints_reach_callee_extended(cfn):
    fn = cfn("f_l_cCsSB", "int64_t (int8_t, uint8_t, int16_t, uint16_t, bool)")

    def expected(a, b, c, d, e):
        return a * 1000003 + b * 10007 + c * 101 + d * 3 + (1 if e else 0)

    for args in [(-1, 255, -32768, 65535, True), (-128, 0, 32767, 0, False), (5, 6, -7, 8, True)]:
        assert nt.bind(fn, *args)() == expected(*args)
        assert nt.bind(fn, *([nt.ARG] * 5))(*args) == expected(*args)
        assert nt.bind(fn, args[0], nt.ARG, args[2], nt.ARG, nt.ARG)(args[1], args[3], args[4]) \
            == expected(*args)


def test_mixed_and_many_parameters(cfn):
    fn = cfn("f_d_idfl", "double (int, double, float, int64_t)")
    assert nt.bind(fn, 3, nt.ARG, 0.5, nt.ARG)(1.25, 10) == 3 + 1.25 + 0.5 + 10
    many = cfn("f_d_iiiiiiiidddddddddd",
               "double (" + ", ".join(["int"] * 8 + ["double"] * 10) + ")")
    vals = list(range(1, 9)) + [0.5 * k for k in range(1, 11)]
    expected = sum(v * (i + 1) for i, v in enumerate(vals))
    assert many(*vals) == expected
    # every other parameter bound: forwarded ones land on the stack or in registers
    args = [v if i % 2 else nt.ARG for i, v in enumerate(vals)]
    t = nt.bind(many, *args)
    assert t(*[v for i, v in enumerate(vals) if i % 2 == 0]) == expected
    assert t.ctypes(*[v for i, v in enumerate(vals) if i % 2 == 0]) == expected
    assert nt.bind(many, *vals)() == expected


def test_recorder_sees_what_was_bound(lib, cfn):
    fn = cfn("rec_d_idcpfl", "double (int, double, int8_t, void *, float, int64_t)")
    buf = np.zeros(3)
    t = nt.bind(fn, -7, nt.ARG, -3, buf, nt.ARG, 2**40)
    t(2.5, 0.75)
    rec = (ctypes.c_uint64 * 16).in_dll(lib, "rec_args")
    assert ctypes.c_int64(rec[0]).value == -7
    assert struct.unpack("d", struct.pack("Q", rec[1]))[0] == 2.5
    assert ctypes.c_int64(rec[2]).value == -3
    assert rec[3] == buf.ctypes.data
    assert struct.unpack("f", struct.pack("I", rec[4]))[0] == 0.75
    assert rec[5] == 2**40


def test_seed_sum_is_live(cfn):
    vec = np.array([1.0, 2.0, 3.0, 4.0])
    t = nt.bind(cfn("f_d_pi", "double (const double *, int)"), vec, nt.size(vec))
    assert str(t.csig) == "double (void)"
    fn = ctypes.CFUNCTYPE(ctypes.c_double)(t.address)
    assert fn() == 10.0
    vec[0] = 100.0
    assert fn() == 109.0
    assert t() == 109.0


def test_derived_values(cfn):
    a = np.arange(12.0).reshape(3, 4)
    fn = cfn("f_d_pzzzz", "double (const double *, ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t)")
    expected = sum(a[i, j] * (i + 1) for i in range(3) for j in range(4))
    t = nt.bind(fn, a, nt.shape(a, 0), nt.shape(a, 1), nt.stride(a, 0), nt.stride(a, 1))
    assert t() == expected
    # a non-contiguous view through strided(): the kernel takes strides
    view = a[::2, ::-1]
    t = nt.bind(fn, nt.strided(view), nt.shape(view, 0), nt.shape(view, 1),
                nt.stride(view, 0), nt.stride(view, 1))
    assert t() == sum(view[i, j] * (i + 1) for i in range(2) for j in range(4))
    # element strides and negative axes
    ints = cfn("f_l_l", "int64_t (int64_t)")
    assert nt.bind(ints, nt.stride(a, -2, elements=True))() == 4
    assert nt.bind(ints, nt.shape(a, -1))() == 4
    assert nt.bind(ints, nt.size(a))() == 12


def test_fortran_style_refs(cfn):
    fn = cfn("f_v_ppppp", "void (const int *, const double *, double *, const int *, int *)")
    x = np.arange(6.0)
    info = nt.ref(0, "int")
    t = nt.bind(fn, nt.ref(3, "int"), nt.ref(2.0, "double"), x, nt.ref(2, "int"), info)
    t()
    assert list(x) == [0.0, 1.0, 4.0, 3.0, 8.0, 5.0]
    assert info.value == 3
    with pytest.raises(OverflowError):
        nt.ref(2**31, "int")
    with pytest.raises(TypeError, match="argument 1"):
        nt.bind(fn, nt.ref(3, "long"), nt.ref(2.0, "double"), x, nt.ref(2, "int"), info)


def test_function_pointer_parameter_composes_thunks(cfn):
    integrand = cfn("f_d_dpi", "double (double, const double *, int)")
    p = np.array([1.0, 0.0, 3.0])         # 1 + 3x^2, integral over [0, 1] = 2
    f = nt.bind(integrand, nt.ARG, p, nt.size(p))
    quad = cfn("f_d_Fddi", "double (double (*)(double), double, double, int)")
    assert abs(nt.bind(quad, f, 0.0, 1.0, 1000)() - 2.0) < 1e-5
    with pytest.raises(TypeError, match="expected a function 'double \\(double\\)'"):
        nt.bind(quad, cfn("f_d_d", "double (double)") and nt.bind(integrand, nt.ARG, nt.ARG, 3),
                0.0, 1.0, 10)


def test_pointer_values(cfn, lib):
    fn = cfn("f_p_p", "void *(void *)")
    assert nt.bind(fn, None)() == 0
    assert nt.bind(fn, nt.address(0x1234))() == 0x1234
    c = (ctypes.c_double * 4)()
    assert nt.bind(fn, ctypes.cast(c, ctypes.POINTER(ctypes.c_double)))() == ctypes.addressof(c)
    assert nt.bind(fn, ctypes.c_void_p(0xbeef))() == 0xbeef
    ffi = cffi.FFI()
    buf = ffi.new("double[4]")
    assert nt.bind(fn, buf)() == int(ffi.cast("uintptr_t", buf))
    a = np.zeros(3)
    assert nt.bind(fn, a.ctypes)() == a.ctypes.data
    # typed foreign pointers are checked against the parameter
    sum_ = cfn("f_d_pi", "double (const double *, int)")
    ip = (ctypes.c_int * 2)()
    with pytest.raises(TypeError, match="argument 1"):
        nt.bind(sum_, ctypes.cast(ip, ctypes.POINTER(ctypes.c_int)), 2)
    with pytest.raises(TypeError, match="argument 1"):
        nt.bind(sum_, ffi.new("int[2]"), 2)
    assert nt.bind(sum_, ffi.cast("double *", buf), 4)() == 0.0


def test_any_buffer_exporter(cfn):
    count = cfn("f_i_Pi", "int (const char *, int)")
    assert nt.bind(count, b"banana", 6)() == 3
    assert nt.bind(count, bytearray(b"aaa"), 3)() == 3
    import array
    ints = cfn("f_i_pii", "int (const int *, int)")
    arr = array.array("i", [1, 2, 3])
    assert nt.bind(ints, arr, nt.size(arr))() == 6
    assert nt.bind(ints, memoryview(np.arange(4, dtype=np.intc)), 4)() == 6
    longs = cfn("f_l_plz", "int64_t (const int64_t *, int64_t, size_t)")
    q = np.arange(4, dtype=np.int64)
    assert q.__array_interface__["typestr"][1:] == "i8"
    assert nt.bind(longs, q, 2, nt.size(q))() == 12
    assert nt.bind(longs, (ctypes.c_long * 3)(1, 2, 3), 1, 3)() == 6


@pytest.mark.parametrize("make", [
    "ctypes", "cffi", "capsule", "function", "int", "thunk",
])
def test_targets(make, lib, cfn, fixture_path):
    vec = np.array([1.0, 2.0, 3.0])
    sig = "double (const double *, int)"
    if make == "ctypes":
        f = lib.f_d_pi
        f.restype = ctypes.c_double
        f.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int]
        t = nt.bind(f, vec, 3)
    elif make == "cffi":
        ffi = cffi.FFI()
        ffi.cdef("double f_d_pi(const double *, int);")
        clib = ffi.dlopen(fixture_path)
        t = nt.bind(clib.f_d_pi, vec, 3)
    elif make == "capsule":
        capsule = nt._core._capsule(cfn("f_d_pi", sig).address, "double (double const *, int)",
                                    None)
        t = nt.bind(capsule, vec, 3)
        assert not t.nogil      # capsules (Cython) need the GIL unless told otherwise
    elif make == "function":
        t = nt.bind(cfn("f_d_pi", sig), vec, 3)
    elif make == "int":
        t = nt.bind(cfn("f_d_pi", sig).address, vec, 3, signature=sig)
    else:
        inner = nt.bind(cfn("f_d_pi", sig), nt.ARG, 3)
        t = nt.bind(inner, vec)
    assert t() == 6.0
    assert t.ctypes() == 6.0


def test_numba_cfunc_target_seed_case():
    from numba import carray, cfunc, njit
    from numba.types import CPointer, float64, intc

    @cfunc(float64(CPointer(float64), intc))
    def c_sum(ptr, n):
        return np.sum(carray(ptr, n))

    vec = np.array([1.0, 2.0, 3.0, 4.0])
    t = nt.bind(c_sum, vec, nt.size(vec))
    assert str(t.csig) == "double (void)"
    assert ctypes.CFUNCTYPE(ctypes.c_double)(t.address)() == 10.0
    fn = t.ctypes

    @njit
    def loop(k):
        s = 0.0
        for _ in range(k):
            s += fn()
        return s

    assert loop(3) == 30.0
    vec[0] = 100.0
    assert loop(2) == 2 * 109.0
    assert t() == 109.0


def test_scipy_quad_lowlevelcallable(cfn):
    from scipy import integrate

    integrand = cfn("f_d_dpi", "double (double, const double *, int)")
    p = np.array([1.0, 0.0, 3.0])
    f = nt.bind(integrand, nt.ARG, p, nt.size(p))
    llc = f.lowlevelcallable()
    value, _err = integrate.quad(llc, 0.0, 1.0)
    assert abs(value - 2.0) < 1e-12
    p[0] = 2.0                                     # live: 2 + 3x^2 -> 3
    assert abs(integrate.quad(llc, 0.0, 1.0)[0] - 3.0) < 1e-12
    with pytest.raises(ValueError, match="does not match"):
        f.lowlevelcallable(signature="double (double, void *)")


def test_release_and_context_manager(cfn):
    fn = cfn("f_d_d", "double (double)")
    with nt.bind(fn, 2.0) as t:
        assert t() == 2.0
    assert t.released
    with pytest.raises(ValueError, match="released"):
        t()
    with pytest.raises(ValueError, match="released"):
        _ = t.address
    t.release()                      # idempotent
    assert "released" in repr(t)


def test_repr_shows_signature_and_bindings(cfn):
    vec = np.zeros(4)
    t = nt.bind(cfn("f_d_pi", "double (const double *, int)"), vec, nt.size(vec))
    r = repr(t)
    assert "double (void)" in r and "f_d_pi" in r and "size(" in r and "float64" in r


def test_function_is_callable(cfn):
    assert cfn("f_d_idfl", "double (int, double, float, int64_t)")(1, 2.0, 3.0, 4) == 10.0


def test_gil_policy(cfn):
    fn = cfn("f_d_d", "double (double)")
    assert nt.bind(fn, 1.0).nogil
    assert not nt.bind(nt.Function(fn.address, fn.signature, nogil=False), 1.0).nogil


def test_each_kind_of_target_has_its_documented_gil_policy_by_default(engine):
    """docs/threads.md: nogil is True by default for Function(...),
    Function.from_library, an int with signature=, ctypes and cffi
    functions and the core's Thunk(); False for capsules. Read back from
    the Function, the thunk, and the target itself: PyGILState_Check says
    whether the call from Python kept the GIL."""
    addr = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    sig = "int (void)"
    functions = [
        ("Function", nt.Function(addr, sig), True),
        ("from_library", nt.Function.from_library(ctypes.pythonapi, "PyGILState_Check", sig),
         True),
    ]
    for name, fn, nogil in functions:
        assert fn.nogil is nogil and fn() == int(not nogil), name
    targets = functions + [
        ("ctypes", ctypes.cast(addr, ctypes.CFUNCTYPE(ctypes.c_int)), True),
        ("cffi", cffi.FFI().cast("int (*)(void)", addr), True),
        ("capsule", nt._core._capsule(addr, sig, None), False),
    ]
    for name, target, nogil in targets:
        t = nt.bind(target, engine=engine)
        assert (t.nogil, t.target.nogil, t()) == (nogil, nogil, int(not nogil)), name
    t = nt.bind(addr, engine=engine, signature=sig)
    assert (t.nogil, t.target.nogil, t()) == (True, True, 0)
    t = nt._core.Thunk(nt.Signature(sig), addr, (), engine=engine)
    assert (t.nogil, t()) == (True, 0)
    t = nt._core.Thunk(nt.Signature(sig), addr, (), None, False, engine=engine)
    assert (t.nogil, t()) == (False, 1)


def test_unpack_gives_the_dims_and_with_strides_their_bytes_by_default(cfn, engine):
    """unpack(arr): the array and its shape; strides=True appends the
    strides in bytes (elements=True: in elements), and takes a
    non-contiguous array. Read back by kernels: f_d_pzzzz takes byte
    strides; an identity of ints reads each value alone."""
    a = np.arange(24.0).reshape(4, 6)
    view = a[::2, 1::2]                             # 2 x 3, strides (96, 16)
    dims = nt.unpack(a)
    assert len(dims) == 3 and dims[0] is a
    ints = cfn("f_l_l", "int64_t (int64_t)")
    read = [nt.bind(ints, d, engine=engine)() for d in dims[1:]]
    assert read == [4, 6]
    pzzzz = cfn("f_d_pzzzz", "double (const double *, ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t)")
    want = sum(view[i, j] * (i + 1) for i in range(2) for j in range(3))
    assert nt.bind(pzzzz, *nt.unpack(view, strides=True), engine=engine)() == want
    for elements, strides in ((False, [96, 16]), (True, [12, 2])):
        dims = nt.unpack(view, strides=True, elements=elements)
        assert len(dims) == 5
        read = [nt.bind(ints, d, engine=engine)() for d in dims[1:]]
        assert read == [2, 3] + strides, elements
    with pytest.raises(ValueError, match="contiguous"):
        nt.bind(pzzzz, *nt.unpack(view), 0, 0, engine=engine)


def test_one_byte_bytes_for_char(cfn):
    """LAPACK-style character flags: b'N' binds to a char (by value or ref)."""
    fn = cfn("f_c_c", "char (char)")
    assert nt.bind(fn, b"N")() == ord("N")
    assert nt.ref(b"T", "char").value == ord("T")
    with pytest.raises(TypeError, match="argument 1"):
        nt.bind(fn, b"NT")
    with pytest.raises(TypeError, match="argument 1"):
        nt.bind(cfn("f_i_i", "int (int)"), b"N")


def test_numba_spelled_signature_works_with_scipy(cfn):
    """Numba spellings print as C: SciPy compares the C text exactly."""
    from scipy import integrate

    addr = cfn("f_d_dpi", "double (double, const double *, int)").address
    f = nt.Function(addr, "float64(float64, CPointer(float64), intc)")
    t = nt.bind(f, nt.ARG, np.array([1.0, 0.0, 3.0]), 3)
    assert str(t.csig) == "double (double)"
    assert abs(integrate.quad(t.lowlevelcallable(), 0.0, 1.0)[0] - 2.0) < 1e-12


# ---------------------------------------------------------------- the package's hooks
# The core hands values it does not convert (ref() cells, ctypes and cffi
# pointers, functions) to the callables numthunk registers once
# (numthunk._core._register). Whatever such a hook raises reaches the
# caller as it is: an AttributeError from deep inside one is not taken for
# "no hook".

SUM = "double (const double *x, int n)"


def _lost_cell(ref):
    raise ref.error


class _LostRef(nt.Ref):
    """A ref() cell whose storage is gone: the resolve step's read of it
    raises from two calls down."""

    __slots__ = ("error",)

    @property
    def cell(self):
        return _lost_cell(self)


def _lost(error):
    r = _LostRef.__new__(_LostRef)
    r.error = error
    return r


@pytest.mark.parametrize("error", [AttributeError("the cell was never loaded"),
                                   LookupError("the cell was never loaded")])
def test_an_exception_inside_the_resolve_step_reaches_the_caller(cfn, error):
    fn = cfn("f_d_pi", SUM)
    with pytest.raises(type(error), match="^the cell was never loaded$"):
        nt.bind(fn, _lost(error), 1)
    fwd = nt.bind(fn, nt.ARG, 1)
    with pytest.raises(type(error), match="^the cell was never loaded$"):
        fwd(_lost(error))
    bound = nt.bind(fn, nt.ref(2.5, "double"), 1)
    with pytest.raises(type(error), match="^the cell was never loaded$"):
        bound.rebind(0, _lost(error))
    assert bound() == 2.5                       # the refused rebind changed nothing
    # the same hooks run for the package's subclasses
    class Mine(nt.Thunk):
        pass
    with pytest.raises(type(error), match="^the cell was never loaded$"):
        Mine(fn._signature, fn.address, (_lost(error), 1), fn)
    assert Mine(fn._signature, fn.address, (nt.ref(4.0, "double"), 1), fn)() == 4.0


def test_the_core_type_alone_resolves_nothing(cfn):
    # numthunk._core.Thunk is not the package's class: foreign values reach
    # the converter, which refuses them by name; it has no Numba type
    fn = cfn("f_d_pi", SUM)
    with pytest.raises(TypeError, match=r"^argument 1 \(x: const double \*\): .*Ref"):
        nt._core.Thunk(fn._signature, fn.address, (nt.ref(1.0, "double"), 1), fn)
    core = nt._core.Thunk(fn._signature, fn.address, (np.ones(2), 2), fn)
    with pytest.raises(TypeError, match=r"^argument 1 \(x: const double \*\): .*Ref"):
        core.rebind(0, nt.ref(1.0, "double"))
    with pytest.raises(AttributeError, match="has no Numba type"):
        core._numba_type_  # noqa: B018  (the getter raises)
    assert not hasattr(core, "_numba_type_") and core() == 2.0


def test_register_refuses_what_is_not_a_hook(cfn):
    fn = cfn("f_d_pi", SUM)
    hooks = dict(thunk_class=nt.Thunk, resolve_values=len, resolve_call=len,
                 resolve_rebind=len, numba_type=len)
    # thunk_class= is a type, not any callable: what is neither is refused
    # as no subclass too (not as a hook that is not callable)
    for not_a_class in (int, 3, None, len):
        with pytest.raises(TypeError) as info:
            nt._core._register(**dict(hooks, thunk_class=not_a_class))
        assert str(info.value) == ("_register(): thunk_class= must be a subclass of "
                                   "numthunk._core.Thunk")
    with pytest.raises(TypeError, match="resolve_call= must be callable, not int"):
        nt._core._register(**dict(hooks, resolve_call=3))
    with pytest.raises(TypeError, match="needs numba_type="):
        nt._core._register(**{k: v for k, v in hooks.items() if k != "numba_type"})
    # the refused calls left the package's hooks in place
    assert nt.bind(fn, nt.ref(3.0, "double"), 1)() == 3.0


def _with_hooks(**changed):
    """The package's hooks with some replaced: a context that registers
    them, and the package's own again on the way out."""
    import contextlib

    from numthunk import _api

    own = dict(thunk_class=nt.Thunk, resolve_values=nt.Thunk._resolve_values,
               resolve_call=nt.Thunk._resolve_call, resolve_rebind=_api._resolve_rebind,
               numba_type=nt.Thunk._make_numba_type)

    @contextlib.contextmanager
    def registered():
        nt._core._register(**dict(own, **changed))
        try:
            yield own
        finally:
            nt._core._register(**own)
    return registered()


def test_resolve_values_must_give_back_a_tuple_of_as_many_values(cfn):
    fn = cfn("f_d_pi", SUM)
    message = "the package's resolve_values must return a tuple of the same length"
    for result in (lambda v: list(v), lambda v: v[:1], lambda v: v + (1,), lambda v: None):
        def hook(sig, values, owner, result=result):
            return result(nt.Thunk._resolve_values(sig, values, owner))
        with _with_hooks(resolve_values=hook):
            with pytest.raises(TypeError) as info:
                nt.bind(fn, nt.ref(2.0, "double"), 1)
            assert str(info.value) == message
            assert nt.bind(fn, np.ones(2), 2)() == 2.0      # nothing to resolve: not called
    # a tuple of the same length is taken
    seen = []
    def counted(sig, values, owner):
        seen.append(len(values))
        return nt.Thunk._resolve_values(sig, values, owner)
    with _with_hooks(resolve_values=counted):
        assert nt.bind(fn, nt.ref(2.0, "double"), 1)() == 2.0
    assert seen == [2]
    assert nt.bind(fn, nt.ref(3.0, "double"), 1)() == 3.0   # the package's hook is back


def test_values_the_core_knows_never_reach_the_package_resolver(cfn):
    """Arrays, buffers, None, ints, address(), strided() and the derived
    values are the core's own, to take or refuse by name, for pointer,
    function-pointer and typed-memoryview parameters: only foreign
    objects (ctypes, cffi, ref(), thunks as function pointers) go to the
    package's resolve_values, a call into Python on each bind."""
    a = np.arange(4.0)
    ptr = cfn("f_d_pi", SUM)
    fnp = cfn("f_i_F", "int (int (*f)(void))")
    gil_check = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    # a typed memoryview parameter (never called: bound only)
    mview = nt.Function(0x1000, "void (__Pyx_memviewslice)", memoryviews={0: "double[:]"})
    own = [(ptr, a), (ptr, bytearray(32)), (ptr, memoryview(a)), (ptr, None), (ptr, 5),
           (ptr, nt.address(a.ctypes.data)), (ptr, nt.strided(a)), (ptr, nt.size(a)),
           (ptr, nt.shape(a, 0)), (ptr, nt.stride(a, 0)),
           (fnp, None), (fnp, 5), (fnp, nt.address(gil_check)), (fnp, nt.strided(a)),
           (fnp, nt.size(a)), (fnp, nt.shape(a, 0)), (fnp, nt.stride(a, 0)),
           (mview, a), (mview, memoryview(a)), (mview, a[::2]), (mview, nt.strided(a[::-1])),
           (mview, bytearray(32))]

    def outcome(fn, v):
        try:
            t = nt.bind(fn, v, 4) if fn is ptr else nt.bind(fn, v)
        except Exception as e:
            return type(e), str(e)
        return t() if fn is ptr and v is a else "bound"

    expected = [outcome(fn, v) for fn, v in own]
    assert expected[0] == 6.0 and expected[4][0] is TypeError      # taken; refused
    assert expected[-5:-1] == ["bound"] * 4 and expected[-1][0] is TypeError   # uint8 buffer
    assert expected[7] == (TypeError, "argument 1 (x: const double *): size(), shape() "
                           "and stride() bind integer parameters only")
    seen = []

    def counted(sig, values, owner):
        seen.append(values)
        return nt.Thunk._resolve_values(sig, values, owner)
    with _with_hooks(resolve_values=counted):
        assert [outcome(fn, v) for fn, v in own] == expected
        assert seen == []
        x = ctypes.c_double(2.5)
        assert nt.bind(ptr, ctypes.pointer(x), 1)() == 2.5   # foreign: resolved
        assert nt.bind(fnp, seven := ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 7))() == 7
        assert len(seen) == 2 and seen[1][0] is seven


def test_resolve_call_must_give_back_a_tuple(cfn):
    fn = cfn("f_d_pi", SUM)
    t = nt.bind(fn, nt.ARG, 1)
    for result in (list, lambda args: None, lambda args: iter(args)):
        def hook(thunk, args, result=result):
            return result(nt.Thunk._resolve_call(thunk, args))
        with _with_hooks(resolve_call=hook):
            with pytest.raises(TypeError) as info:
                t(nt.ref(2.0, "double"))
            assert str(info.value) == "the package's resolve_call must return a tuple"
            assert t(np.array([4.0])) == 4.0                # nothing to resolve: not called
    with _with_hooks(resolve_call=lambda thunk, args: nt.Thunk._resolve_call(thunk, args)):
        assert t(nt.ref(2.0, "double")) == 2.0
    assert t(nt.ref(5.0, "double")) == 5.0


# ---------------------------------------------------------------- one label


@pytest.mark.parametrize("names", [True, False])
def test_python_and_core_messages_label_a_parameter_alike(fixture_path, names):
    """The core formats a parameter's label (nt_param_label); the package's
    own messages read it (Signature._label), numbered from 1 alike."""
    import pickle

    sig = "void (double *x, double v, int n)" if names else "void (double *, double, int)"
    fn = nt.Function.from_library(fixture_path, "f_v_pdi", sig)
    label = fn.csig._label(0)
    assert label == ("argument 1 (x: double *)" if names else "argument 1 (double *)")
    assert fn.csig._label(2) == ("argument 3 (n: int)" if names else "argument 3 (int)")
    messages = []
    # the core: a buffer of the wrong element type
    with pytest.raises(TypeError) as exc:
        nt.bind(fn, np.zeros(3, dtype=np.float32), 1.0, 3)
    messages.append(str(exc.value))
    # Python (numthunk._foreign): a ctypes pointer to the wrong type
    with pytest.raises(TypeError) as exc:
        nt.bind(fn, ctypes.pointer(ctypes.c_int(1)), 1.0, 3)
    messages.append(str(exc.value))
    # Python (numthunk._recipe): pickling refuses a raw address
    t = nt.bind(fn, nt.address(4096), 1.0, 3)
    with pytest.raises(pickle.PicklingError) as exc:
        pickle.dumps(t)
    messages.append(str(exc.value).removeprefix("cannot pickle the thunk: "))
    for m in messages:
        assert m.startswith((label + ":", label + " is bound")), m


def test_function_pointer_messages_label_alike(cfn):
    fn = cfn("f_d_Fd", "double (double (*f)(double), double x)")
    label = fn.csig._label(0)
    assert label == "argument 1 (f: double (*)(double))"
    with pytest.raises(TypeError) as core:          # the core: not a function
        nt.bind(fn, 1.5, nt.ARG)
    wrong = cfn("f_i_i", "int (int)")
    with pytest.raises(TypeError) as python:        # Python: a function of another type
        nt.bind(fn, wrong, nt.ARG)
    for exc in (core.value, python.value):
        assert str(exc).startswith(label + ":"), exc
    with pytest.raises(IndexError):
        fn.csig._label(2)
    with pytest.raises(IndexError):
        fn.csig._label(-1)

# ---- bind()'s fast path (a Function, no keywords) and the keywords beside it


def test_bind_signature_shows_its_keywords():
    import inspect
    sig = inspect.signature(nt.bind)
    assert list(sig.parameters) == ["target", "args", "signature", "nogil", "engine", "keep"]
    assert all(sig.parameters[k].kind is inspect.Parameter.KEYWORD_ONLY
               and sig.parameters[k].default is None
               for k in ("signature", "nogil", "engine", "keep"))


def test_bind_refuses_an_unknown_keyword_by_name():
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    with pytest.raises(TypeError, match=r"^bind\(\) got an unexpected keyword argument 'engin'$"):
        nt.bind(fn, np.arange(2.0), 2, engin="ffi")


def test_bind_fast_path_and_keyword_path_make_the_same_thunk():
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    vec = np.arange(5.0)
    fast = nt.bind(fn, vec, nt.size(vec))
    slow = nt.bind(fn, vec, nt.size(vec), engine="auto")
    assert type(fast) is type(slow) is nt.Thunk
    assert fast() == slow() == 10.0
    assert fast.engine == slow.engine and fast.nogil == slow.nogil
    assert fast.target is slow.target is fn
    # a Function with fixed values leaves the fast path: they are still bound
    fixed = nt.Function(fn.address, fn.csig, fixed={1: 3})
    assert nt.bind(fixed, vec)() == 3.0


def test_bind_is_the_package_function_by_name_doc_and_signature():
    import inspect
    assert nt.bind.__name__ == "bind" and nt.bind.__module__ == "numthunk._api"
    assert nt.bind.__doc__.startswith("Bind ``args``") and ">>> " in nt.bind.__doc__
    assert inspect.signature(nt.bind) == inspect.signature(nt.bind.__wrapped__)
    assert inspect.isfunction(nt.bind.__wrapped__)


def test_bind_travels_by_name_as_a_function_does():
    """pickle (every protocol, and cloudpickle, which Dask uses), copy and
    deepcopy take numthunk.bind by its name: the same object comes back. A
    task that calls nt.bind is pickled with it."""
    import copy
    import pickle

    import cloudpickle
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(nt.bind, proto)
        assert b"_Binder" not in data
        assert pickle.loads(data) is nt.bind
    assert cloudpickle.loads(cloudpickle.dumps(nt.bind)) is nt.bind
    assert pickle.loads(pickle.dumps([nt.bind, nt.bind]))[1] is nt.bind
    assert copy.copy(nt.bind) is nt.bind and copy.deepcopy(nt.bind) is nt.bind
    assert repr(nt.bind).startswith("<function bind at 0x")
    fresh = nt._core._Binder(nt.bind.__wrapped__, nt.Function, nt.Thunk)
    assert repr(fresh).startswith("<numthunk._core._Binder at 0x")
    with pytest.raises((AttributeError, pickle.PicklingError)):
        pickle.dumps(fresh)                # no name to be found by
    fresh.__qualname__ = 7
    with pytest.raises(TypeError, match="__qualname__ must be a str"):
        pickle.dumps(fresh)


def test_bind_fast_path_reads_the_function_as_it_is_now(cfn):
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    vec = np.arange(5.0)
    assert nt.bind(fn, vec, 5).nogil is True
    fn.nogil = False                       # the fields are read at each bind
    assert nt.bind(fn, vec, 5).nogil is False
    fn.depends = (nt.bind(fn, vec, 2),)    # read at each bind too
    assert nt.bind(fn, vec, 3).dependencies == fn.depends
    # another function at another address, under another signature
    other = cfn("f_i_pii", "int (const int *, int)")
    ivec = np.arange(5, dtype=np.int32) * 3
    fn.address, fn._signature = other.address, other._signature
    t = nt.bind(fn, ivec, 3)
    assert t.target_signature == other._signature and t() == 9
    fn._signature = "int (const int *, int)"   # not a Signature: the Python path's error
    with pytest.raises(TypeError, match=r"_new_thunk\(type, signature"):
        nt.bind(fn, ivec, 3)
    fn._signature = other._signature
    del fn.memoryviews                     # an unset field: the Python path's error
    with pytest.raises(AttributeError, match="memoryviews"):
        nt.bind(fn, ivec, 3)

    class Sub(nt.Function):                # not exactly Function: the Python path
        pass
    sub = Sub(fn.address, fn.csig)
    assert nt.bind(sub, ivec, 4)() == 18


FUNCTION_FIELDS = ("_signature", "address", "nogil", "memoryviews", "depends", "fixed",
                   "_carried")


def test_function_keeps_what_bind_reads_in_the_core_type():
    """numthunk.Function subclasses numthunk._core.Function, whose C fields
    are what bind() reads (src/python/function.c): the package's class
    shadows none of them, and each reads, writes and deletes as the slot it
    was (any value; unset, an AttributeError naming it)."""
    base = nt._core.Function
    assert nt.Function.__bases__ == (base,)
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    for name in FUNCTION_FIELDS:
        assert name in vars(base) and name not in vars(nt.Function), name
        value = getattr(fn, name)
        marker = object()
        setattr(fn, name, marker)
        assert getattr(fn, name) is marker
        delattr(fn, name)
        with pytest.raises(AttributeError, match=name):
            getattr(fn, name)
        with pytest.raises(AttributeError, match=name):
            delattr(fn, name)
        setattr(fn, name, value)
    assert not hasattr(fn, "__dict__")
    with pytest.raises(AttributeError):
        fn.other = 1
    with pytest.raises(TypeError, match="takes no arguments"):
        base(1)
    bare = base()                          # every field unset
    assert all(not hasattr(bare, name) for name in FUNCTION_FIELDS)


def test_function_fields_are_visited_by_the_collector():
    """A cycle through a field of the core's Function (fixed holding the
    Function) is collected: the fields are traversed and cleared."""
    import gc
    import weakref
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    fn.depends = [fn]
    gone = weakref.ref(fn)
    assert gc.get_referents(fn).count(fn.depends) == 1
    del fn
    gc.collect()
    assert gone() is None


def test_binder_takes_a_subclass_of_the_core_function():
    """The Function class _Binder reads is one of the core's Function type,
    whatever its names: a class with slots of the same names is refused."""
    class Lookalike:
        __slots__ = FUNCTION_FIELDS
    for bad in (int, object, Lookalike):
        with pytest.raises(TypeError, match=r"function_class: a subclass of "
                                            r"numthunk\._core\.Function"):
            nt._core._Binder(lambda *a: None, bad, nt.Thunk)
    with pytest.raises(TypeError, match="thunk_class"):
        nt._core._Binder(lambda *a: None, nt.Function, int)
    calls = []
    binder = nt._core._Binder(lambda *a, **k: calls.append((a, k)) or "fallback",
                              nt.Function, nt.Thunk)
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    assert binder(fn, np.arange(3.0), 3)() == 3.0 and calls == []
    assert binder(fn, np.arange(3.0), 3, engine="ffi") == "fallback"
    assert binder(1, 2) == "fallback"
    assert calls == [((fn, calls[0][0][1], 3), {"engine": "ffi"}), ((1, 2), {})]
    # the core's type itself: a Function whose fields are unset goes to the fallback
    bare = nt._core._Binder(lambda *a: "fallback", nt._core.Function, nt.Thunk)
    assert bare(nt._core.Function(), 1) == "fallback"


def test_new_thunk_checks_its_arguments():
    fn = nt.Function(nt._core._kernels()["sum"], "double (const double *, int)")
    good = (nt.Thunk, fn._signature, fn.address, (np.arange(2.0), 2), fn, True, {}, None, (),
            None)
    assert nt._core._new_thunk(*good)() == 1.0
    for bad in (good[:9], (object,) + good[1:], good[:1] + ("x",) + good[2:],
                good[:3] + ([1.0, 2],) + good[4:]):
        with pytest.raises(TypeError, match=r"_new_thunk\(type, signature"):
            nt._core._new_thunk(*bad)
    with pytest.raises(ValueError, match="target address is 0"):
        nt._core._new_thunk(nt.Thunk, fn._signature, 0, (np.arange(2.0), 2), fn, True, {},
                            None, (), None)


# ------------------------------------------------ integer guards at their edges
#
# convert/value.c store_int / store_long / store_char_byte / convert_int: each
# width's range checked at min-1, min, min+1, max-1, max, max+1 and at the
# 64-bit edges (where PyLong_AsLongLongAndOverflow overflows), for every
# input form that reaches the check: int, __index__ object, NumPy scalar,
# bool, and bytes for the 8-bit kinds; bound and forwarded, on both engines.

ENGINES = ["native", "ffi"]

INT_KINDS = [
    # (fixture, C type, bits, signed)
    ("f_c_c", "int8_t", 8, True), ("f_C_C", "uint8_t", 8, False),
    ("f_s_s", "int16_t", 16, True), ("f_S_S", "uint16_t", 16, False),
    ("f_i_i", "int32_t", 32, True), ("f_I_I", "uint32_t", 32, False),
    ("f_l_l", "int64_t", 64, True), ("f_L_L", "uint64_t", 64, False),
]


def int_forms(v):
    """v in every form an integer parameter takes: int, __index__, and each
    NumPy scalar type that holds it."""
    out = [v, Index(v)]
    for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
              np.uint64):
        info = np.iinfo(t)
        if info.min <= v <= info.max:
            out.append(t(v))
    return out


def int_range(bits, signed):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def edge_values(bits, signed):
    lo, hi = int_range(bits, signed)
    near = {lo - 1, lo, lo + 1, hi - 1, hi, hi + 1}
    # the 64-bit edges: where the C API's long long overflows, and past u64
    wide = {-2**63 - 1, -2**63, -1, 0, 2**63 - 1, 2**63, 2**64 - 1, 2**64}
    return sorted(near | wide)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, ctype, bits, signed", INT_KINDS)
def test_integer_range_at_every_edge_in_every_form(cfn, engine, name, ctype, bits, signed):
    fn = cfn(name, f"{ctype} ({ctype} x)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    lo, hi = int_range(bits, signed)
    label = re.escape(f"argument 1 (x: {ctype}): ")
    for v in edge_values(bits, signed):
        for form in int_forms(v):
            if lo <= v <= hi:
                assert nt.bind(fn, form, engine=engine)() == v, (form, ctype)
                assert fwd(form) == v, (form, ctype)
                continue
            text = (f"{v} is negative but C {ctype} is unsigned" if v < 0 and not signed
                    else f"{v} does not fit in a {bits}-bit {'' if signed else 'unsigned '}"
                         f"C {ctype}")
            with pytest.raises(OverflowError, match="^" + label + re.escape(text)):
                nt.bind(fn, form, engine=engine)
            with pytest.raises(OverflowError, match="^" + label + re.escape(text)):
                fwd(form)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, ctype, bits, signed", INT_KINDS)
def test_booleans_bind_every_integer_kind_as_0_and_1(cfn, engine, name, ctype, bits, signed):
    fn = cfn(name, f"{ctype} ({ctype} x)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for form, v in ((True, 1), (False, 0), (np.True_, 1), (np.False_, 0)):
        assert nt.bind(fn, form, engine=engine)() == v
        assert fwd(form) == v


@pytest.mark.parametrize("engine", ENGINES)
def test_c_bool_takes_0_and_1_in_every_form_and_nothing_else(cfn, engine):
    fn = cfn("f_B_B", "bool (bool x)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for v in (0, 1):
        for form in int_forms(v) + [bool(v), np.bool_(v)]:
            assert nt.bind(fn, form, engine=engine)() is bool(v), form
            assert fwd(form) is bool(v), form
    label = re.escape("argument 1 (x: bool): ")
    for v in (2, 3, 255, 256, 2**63, 2**64):
        for form in int_forms(v):
            with pytest.raises(OverflowError,
                               match="^" + label + f"{v} is not a valid C bool"):
                nt.bind(fn, form, engine=engine)
            with pytest.raises(OverflowError, match="^" + label):
                fwd(form)
    for v in (-1, -2**63 - 1):
        for form in int_forms(v):
            with pytest.raises(OverflowError,
                               match="^" + label + f"{v} is negative but C bool is unsigned"):
                nt.bind(fn, form, engine=engine)
            with pytest.raises(OverflowError, match="^" + label):
                fwd(form)


# plain char is signed on x86 and unsigned on AArch64 (the psABIs' choice)
CHAR_SIGNED = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
BYTE_KINDS = [("f_c_c", "int8_t", True), ("f_C_C", "uint8_t", False),
              ("f_c_c", "signed char", True), ("f_C_C", "unsigned char", False),
              ("f_c_c" if CHAR_SIGNED else "f_C_C", "char", CHAR_SIGNED)]


class _Real(float):
    pass


# every float-like form: Python's float and complex (and a subclass), and
# each NumPy floating and complex scalar type
FLOATLIKE = [1.5, _Real(2.0), 1j, 3 + 0j, np.float16(1.0), np.float32(1.0), np.float64(-2.0),
             np.longdouble(2.0), np.complex64(1.0), np.complex128(1j), np.clongdouble(2.0)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, ctype", [(k[0], k[1]) for k in INT_KINDS] + [("f_B_B", "bool")])
def test_float_like_values_are_refused_for_integers_by_name(cfn, engine, name, ctype):
    """convert/value.c index_of: a float or complex value, Python's or NumPy's of
    any width, is no integer (none is truncated), and the message says so
    with the value, bound and forwarded; where an int of its value binds."""
    fn = cfn(name, f"{ctype} ({ctype} x)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for bad in FLOATLIKE:
        # the type's C name: NumPy's scalar types are numpy.NAME
        tp_name = ("numpy." if isinstance(bad, np.generic) else "") + type(bad).__name__
        text = (f"argument 1 (x: {ctype}): expected an integer, got {tp_name} {bad!r} (no "
                "silent truncation: convert it explicitly if that is what you mean)")
        for make in (lambda v: nt.bind(fn, v, engine=engine), fwd):
            with pytest.raises(TypeError) as info:
                make(bad)
            assert str(info.value) == text, bad
    assert nt.bind(fn, 1, engine=engine)() == 1 and fwd(1) == 1


class _IndexStr(str):
    def __index__(self):
        return 3


class _IndexBytes(bytes):
    def __index__(self):
        return 3


class _IndexByteArray(bytearray):
    def __index__(self):
        return 3


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, ctype", [(k[0], k[1]) for k in INT_KINDS] + [("f_B_B", "bool")])
def test_text_is_no_integer_even_with_an_index_method(cfn, engine, name, ctype):
    """convert/value.c index_of: no text is read as a number, a str, bytes or
    bytearray subclass with __index__ neither; the message names its type,
    bound and forwarded."""
    fn = cfn(name, f"{ctype} ({ctype} x)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for bad in (_IndexStr("7"), _IndexBytes(b"77"), _IndexByteArray(b"77")):
        want = f"argument 1 (x: {ctype}): expected an integer, got {type(bad).__name__}"
        for make in (lambda v: nt.bind(fn, v, engine=engine), fwd):
            with pytest.raises(TypeError) as info:
                make(bad)
            assert str(info.value) == want
    assert nt.bind(fn, Index(1), engine=engine)() == 1      # __index__ alone is an integer


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, ctype, signed", BYTE_KINDS)
def test_one_byte_bytes_keep_the_sign_of_their_kind(cfn, engine, name, ctype, signed):
    """store_char_byte: a byte is the 8-bit kind's value, sign-extended for a
    signed kind (b'\\xff' is -1 in an int8_t), bound and forwarded."""
    fn = cfn(name, f"{ctype} ({ctype} x)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for byte in (0x00, 0x01, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF):
        want = byte - 256 if signed and byte >= 0x80 else byte
        assert nt.bind(fn, bytes([byte]), engine=engine)() == want, byte
        assert fwd(bytes([byte])) == want, byte
    label = re.escape(f"argument 1 (x: {ctype}): expected an integer, got ")
    for bad in (b"", b"NT", bytearray(b"N"), "N"):
        with pytest.raises(TypeError, match="^" + label + type(bad).__name__):
            nt.bind(fn, bad, engine=engine)
        with pytest.raises(TypeError, match="^" + label + type(bad).__name__):
            fwd(bad)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, fixture", [("int16_t", "f_s_s"), ("uint16_t", "f_S_S"),
                                            ("int", "f_i_i"), ("int64_t", "f_l_l"),
                                            ("bool", "f_B_B")])
def test_bytes_bind_no_wider_kind(cfn, engine, ctype, fixture):
    fn = cfn(fixture, f"{ctype} ({ctype} x)")
    with pytest.raises(TypeError, match=r"^argument 1 \(x: " + ctype + r"\): expected an "
                                        r"integer, got bytes"):
        nt.bind(fn, b"N", engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_narrow_values_arrive_extended_in_every_form(lib, cfn, engine):
    """Five narrow parameters at their edges, each form: what the callee
    computes from them equals a direct ctypes call (the extension the
    caller owes is made whatever form the value came in)."""
    fn = cfn("f_l_cCsSB", "int64_t (int8_t a, uint8_t b, int16_t c, uint16_t d, bool e)")
    oracle = lib.f_l_cCsSB
    oracle.restype = ctypes.c_int64
    oracle.argtypes = [ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16,
                       ctypes.c_bool]
    fwd = nt.bind(fn, nt.ARG, nt.ARG, nt.ARG, nt.ARG, nt.ARG, engine=engine)
    rows = [(-128, 255, -32768, 65535, 1), (-1, 128, -1, 32768, 0), (127, 0, 32767, 0, 1),
            (-128, 0, -32768, 0, 0)]
    for row in rows:
        want = oracle(*row)
        a, b, c, d, e = row
        for forms in [(a, b, c, d, e), (np.int8(a), np.uint8(b), np.int16(c), np.uint16(d),
                                        np.bool_(e)),
                      (Index(a), Index(b), Index(c), Index(d), bool(e)),
                      (bytes([a & 0xFF]), bytes([b]), c, d, e)]:
            assert nt.bind(fn, *forms, engine=engine)() == want, forms
            assert fwd(*forms) == want, forms


# ------------------------------------- pointer values and marker axes at their edges

PTR_BITS = 8 * ctypes.sizeof(ctypes.c_void_p)



def _numpy_bool_is_an_index():
    import operator
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            operator.index(np.True_)
        except TypeError:
            return False
    return True


# NumPy's bools where they are no integers: NumPy 1.x still takes np.bool_
# as an index (deprecated), as numthunk then does; from NumPy 2 it is none.
NUMPY_BOOLS = () if _numpy_bool_is_an_index() else (np.True_,)

def test_address_takes_every_pointer_value_and_no_other():
    """convert/markers.c nt_pointer_value: 0 and 2**bits - 1 accepted in every form,
    -1 and 2**bits refused naming address() and the range; bool refused."""
    top = (1 << PTR_BITS) - 1
    for v in (0, 1, top - 1, top):
        for form in int_forms(v):
            assert nt.address(form).value == v, form
    for v in (-1, top + 1, -2**63 - 1, 2**70):
        for form in int_forms(v):
            with pytest.raises(OverflowError,
                               match=rf"^address\(\) -?0x[0-9a-f]+ is not a valid pointer value "
                                     rf"\(0 to 2\*\*{PTR_BITS} - 1\)"):
                nt.address(form)
    for bad in (True, *NUMPY_BOOLS, 1.0, "1", b"1"):
        with pytest.raises(TypeError, match=r"^address\(\) must be an integer"):
            nt.address(bad)


def test_address_reads_back_what_it_was_given():
    """convert/markers.c address getters: value, owner and nogil as given (nogil
    defaults to True: a bare address needs no GIL)."""
    owner = np.zeros(1)
    for kw, nogil in (({}, True), ({"nogil": True}, True), ({"nogil": False}, False)):
        a = nt.address(4096, owner, **kw)
        assert a.value == 4096 and a.owner is owner and a.nogil is nogil, kw
    assert nt.address(8).owner is None and nt.address(8).nogil is True


@pytest.mark.parametrize("engine", ENGINES)
def test_address_at_the_top_of_the_range_reaches_the_target(cfn, engine):
    fn = cfn("f_p_p", "void *(void *p)")
    top = (1 << PTR_BITS) - 1
    for v in (0, 1, top - 1, top):
        assert nt.bind(fn, nt.address(v), engine=engine)() == v
    with pytest.raises(TypeError, match=r"^argument 1 \(p: void \*\): a bare int is not "
                                        r"accepted as a pointer"):
        nt.bind(fn, top, engine=engine)


def test_target_address_in_every_form(cfn):
    """python/thunk.c's target address goes through the same check."""
    f = cfn("f_d_d", "double (double a)")
    sig = f._signature
    for form in int_forms(f.address):
        assert nt.Thunk(sig, form, (2.5,))() == 2.5
    for v in (-1, (1 << PTR_BITS)):
        for form in int_forms(v):
            with pytest.raises(OverflowError, match=r"^target address -?0x[0-9a-f]+ is not a "
                                                    r"valid pointer value"):
                nt.Thunk(sig, form, (1.0,))
    with pytest.raises(TypeError, match="^target address must be an integer, not bool"):
        nt.Thunk(sig, True, (1.0,))


MAX_AXES = 64


def test_marker_axes_at_the_edges_in_every_form():
    """convert/markers.c: -64 <= axis < 64 accepted (checked against the array when
    bound), one past either end refused naming the marker."""
    a = np.zeros((2, 3))
    for make in (nt.shape, nt.stride):
        name = make.__name__
        for v in (-MAX_AXES, -MAX_AXES + 1, -1, 0, MAX_AXES - 2, MAX_AXES - 1):
            for form in int_forms(v):
                assert make(a, form).axis == v, (name, form)
        for v in (-MAX_AXES - 1, MAX_AXES, -2**63 - 1, 2**63):
            for form in int_forms(v):
                with pytest.raises(ValueError,
                                   match=rf"^{name}\(\): axis {v} is out of range \(an array "
                                         rf"has at most 64 dimensions: -64 <= axis < 64\)"):
                    make(a, form)
        for bad in (True, *NUMPY_BOOLS, 1.0):
            with pytest.raises(TypeError, match=rf"^{name}\(\): axis must be an integer"):
                make(a, bad)


@pytest.mark.parametrize("engine", ENGINES)
def test_marker_axes_against_the_array_at_the_edges(cfn, engine):
    """convert/value.c derived_value: -ndim <= axis < ndim, in every form."""
    fn = cfn("f_l_l", "int64_t (int64_t n)")
    a = np.zeros((2, 3, 5))
    for v, want in ((-3, 2), (-1, 5), (0, 2), (2, 5)):
        for form in int_forms(v):
            assert nt.bind(fn, nt.shape(a, form), engine=engine)() == want
            assert nt.bind(fn, nt.stride(a, form), engine=engine)() == a.strides[v]
    for v in (-4, 3):
        with pytest.raises(ValueError, match=rf"^argument 1 \(n: int64_t\): shape\(arr, {v}\) "
                                             rf"asks for axis {v} but the array has 3 "
                                             rf"dimensions$"):
            nt.bind(fn, nt.shape(a, v), engine=engine)
    # the count in words, for 0, 1 and 2 dimensions
    for arr, words in ((np.float64(1.0), "0 dimensions"), (np.zeros(2), "1 dimension"),
                       (np.zeros((2, 2)), "2 dimensions")):
        for make in (nt.shape, nt.stride):
            with pytest.raises(ValueError, match=rf"axis {arr.ndim} but the array has {words}$"):
                nt.bind(fn, make(arr, arr.ndim), engine=engine)


# ------------------------------------- bound narrow values in every form, as seen by a
# callee that trusts its caller: fixtures/trust_x86_64.S returns the whole
# register it was given. The cell a bound narrow value is kept in holds it
# extended to 64 bits, whatever form it came in (store_int, store_char_byte).

NARROW_FORMS = [
    # C type, value, the low 32 bits the callee must see, forms of the value
    ("int8_t", -1, 0xFFFFFFFF, [-1, np.int8(-1), np.int64(-1), Index(-1), b"\xff"]),
    ("int8_t", -128, 0xFFFFFF80, [-128, np.int8(-128), Index(-128), b"\x80"]),
    ("int8_t", 127, 0x7F, [127, np.uint8(127), Index(127), b"\x7f"]),
    ("uint8_t", 255, 0xFF, [255, np.uint8(255), np.int16(255), Index(255), b"\xff"]),
    ("uint8_t", 128, 0x80, [128, np.uint8(128), Index(128), b"\x80"]),
    ("int16_t", -1, 0xFFFFFFFF, [-1, np.int16(-1), np.int8(-1), Index(-1)]),
    ("int16_t", -32768, 0xFFFF8000, [-32768, np.int16(-32768), Index(-32768)]),
    ("uint16_t", 65535, 0xFFFF, [65535, np.uint16(65535), Index(65535)]),
    ("bool", True, 1, [True, np.True_, 1, Index(1), np.uint64(1)]),
    ("int8_t", 1, 1, [True, np.True_]),
    ("uint16_t", 0, 0, [False, np.False_, 0, Index(0)]),
]


@pytest.mark.skipif(platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
                    reason="the trusting callees are x86-64 System V assembly")
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, value, low32, forms", NARROW_FORMS,
                         ids=[f"{r[0]}={r[1]}" for r in NARROW_FORMS])
def test_bound_narrow_values_arrive_extended_in_every_form(engine, ctype, value, low32, forms):
    import ntbuild

    tlib = ntbuild.load("trust_x86_64.S", "trust")
    for callee, sig, before in (("trust_rdi", f"uint64_t ({ctype} v)", []),
                                ("trust_rsi", f"uint64_t (int64_t a, {ctype} v)", [7])):
        f = nt.Function(ntbuild.address(tlib, callee), sig, owner=tlib, name=callee)
        for form in forms:
            t = nt.bind(f, *before, form, engine=engine)
            got = ctypes.CFUNCTYPE(ctypes.c_uint64)(t.address)()
            assert got & 0xFFFFFFFF == low32, (callee, ctype, form, hex(got))


# ------------------------------------------ indexes of parameters at their edges

def test_rebind_index_at_the_edges_in_every_form(cfn):
    """python/thunk.c param_index: 0 .. nargs - 1 in every integer form, nargs and
    -1 refused naming the range, bool refused."""
    t = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), np.arange(4.0), 4)
    for form in int_forms(1):
        t.rebind(form, 2)
        assert t() == 1.0 and t.bindings[1] == 2
    for form in int_forms(0):
        t.rebind(form, np.arange(10.0, 14.0))
        assert t() == 21.0
    for v in (-1, 2, 2**63, -2**63 - 1):
        for form in int_forms(v):
            with pytest.raises(IndexError, match=rf"^parameter index {v} out of range \(the "
                                                 rf"target has 2 parameters: 0 to 1\)"):
                t.rebind(form, 3)
    for bad in (True, *NUMPY_BOOLS):
        with pytest.raises(TypeError, match="by its index .int. or its name .str."):
            t.rebind(bad, 3)


@pytest.mark.parametrize("nargs", [0, 1, 2, 3])
def test_rebind_index_out_of_range_counts_the_parameters_in_words(nargs):
    """python/thunk.c param_index: 'has 0 parameters' (no range), 'has 1
    parameter: 0 to 0', 'has 2 parameters: 0 to 1', ..., for nargs and -1,
    as fixed= words it; nargs - 1 itself is taken."""
    sig = nt.Signature(f"void ({', '.join(['int'] * nargs) or 'void'})")
    t = nt.bind(nt.Function(nt._core._kernels()["sum"], sig), *range(nargs))   # never called
    plural = "" if nargs == 1 else "s"
    span = f": 0 to {nargs - 1}" if nargs else ""
    for key in (nargs, -1):
        with pytest.raises(IndexError, match=re.escape(
                f"parameter index {key} out of range (the target has {nargs} "
                f"parameter{plural}{span})") + "$"):
            t.rebind(key, 7)
    if nargs:
        t.rebind(nargs - 1, 7)
        assert t.bindings[-1] == 7


@pytest.mark.parametrize("ndim, ok", [(0, False), (1, True), (8, True), (9, False)])
def test_memoryview_declaration_ndim_at_the_edges(cfn, ndim, ok):
    """python/memviews.c parse_mvspec: 1 <= ndim <= 8 (NT_MEMVIEW_MAX_DIMS); the
    parameter index 0 .. nargs - 1."""
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    sig = nt.Signature("double (__Pyx_memviewslice, int)")
    arr = np.zeros((1,) * max(ndim, 1))
    spec = {0: ("double", ndim, None, False)}
    if ok:
        t = nt.Thunk(sig, addr, (arr, 0), None, True, spec)
        assert str(t.csig) == "double (void)" and t.bindings[0] is arr
    else:
        with pytest.raises(ValueError, match=r"^memoryview 0: ndim must be 1\.\.8$"):
            nt.Thunk(sig, addr, (arr, 0), None, True, spec)
    for key in (-1, 2):
        with pytest.raises(ValueError, match=rf"^memoryview declaration for parameter {key}, "
                                             rf"out of range \(the signature has 2 parameters: "
                                             rf"0 to 1\)"):
            nt.Thunk(sig, addr, (arr, 0), None, True, {key: ("double", 1, None, False)})
    with pytest.raises(ValueError, match=r"^memoryview declaration for parameter 1, which is "
                                         r"not a __Pyx_memviewslice parameter"):
        nt.Thunk(sig, addr, (arr, 0), None, True, {1: ("double", 1, None, False)})


def test_forwarded_values_the_core_reads_itself_run_no_python(cfn, engine):
    # an address, None, an array, strided(): the core converts them without
    # asking the package (no Python call on the way)
    first = cfn("f_d_pi", "double (const double *x, int n)")
    arr = np.arange(3.0)
    three = nt.bind(first, nt.ARG, 3, engine=engine)
    none = nt.bind(first, nt.ARG, 0, engine=engine)
    class Sub(np.ndarray):
        pass

    # other buffers too: a memoryview, array.array, an ndarray subclass
    cases = [(three, nt.address(arr.ctypes.data)), (three, arr),
             (three, nt.strided(arr)), (none, None), (three, memoryview(arr)),
             (three, array.array("d", [0.0, 1.0, 2.0])), (three, arr.view(Sub))]
    for t, value in cases:
        t(value)                                    # anything made once, made now
        calls = []

        def profile(frame, event, arg, calls=calls):
            if event == "call":
                calls.append(frame.f_code.co_name)

        sys.setprofile(profile)
        try:
            result = t(value)
        finally:
            sys.setprofile(None)
        assert calls == [], (value, calls)
        assert result == (3.0 if t is three else 0.0)


# ------------------------------------------ tuples the core fills, under the debug allocator

# Every tuple the core builds item by item (a thunk's bindings, its
# signature's types and names, _describe(), _inline_layout()'s slots), for
# 0 to 6 parameters bound or forwarded in every pattern, in a process whose
# allocator guards each block: a write one past a tuple ends it ("bad
# trailing pad byte") when the tuple is freed.
DEBUG_ALLOCATOR = """
import gc, itertools, sys
import numpy as np
import numthunk as nt
addr = nt._core._kernels()["sum"]               # never called
kinds = ["int", "double", "signed char", "const double *"]
values = {"int": 3, "double": 2.5, "signed char": -4, "const double *": np.arange(3.0)}
checked = 0
for engine in ("native", "ffi") if nt.engine_info()["native_available"] else ("ffi",):
    for n in range(7):
        types = [kinds[i % len(kinds)] for i in range(n)]
        sig = nt.Signature("void (" + (", ".join(f"{t} p{i}" for i, t in enumerate(types))
                                       or "void") + ")")
        for mask in range(2 ** n):
            forwarded = [mask >> i & 1 for i in range(n)]
            args = [nt.ARG if f else values[t] for f, t in zip(forwarded, types)]
            t = nt.bind(nt.Function(addr, sig), *args, engine=engine)
            cell, offset, slots = t._inline_layout()
            assert len(slots) == n, (slots, n)
            fwd = 0
            for i, (how, kind, where) in enumerate(slots):
                assert how == ("arg" if forwarded[i] else "bound"), (slots, mask)
                assert kind == sig._describe()[1][i][0], (slots, i)
                if forwarded[i]:
                    assert where == fwd, (slots, i)
                    fwd += 1
            assert len(t.bindings) == n and len(t.csig.argtypes) == fwd
            assert len(t.csig.names) == fwd and len(t.csig._describe()[1]) == fwd
            assert t.target_signature.names == tuple(f"p{i}" for i in range(n))
            for i, f in enumerate(forwarded):
                if not f:
                    t.rebind(f"p{i}", values[types[i]])
            t.release()
            checked += 1
            del t, slots
    gc.collect()
print(checked)
"""


def test_tuples_the_core_fills_are_whole_under_the_debug_allocator():
    from thunks import run_py

    out = run_py(DEBUG_ALLOCATOR, PYTHONMALLOC="debug")
    assert out.returncode == 0, out.stderr[-3000:]
    engines = 2 if nt.engine_info()["native_available"] else 1
    assert int(out.stdout) == engines * (2 ** 7 - 1)

"""Numba: signatures both ways (Numba's types and string forms to C text and
back, to ctypes), the refusals of those without a C form, and a released
thunk refused where Numba meets it."""

import ctypes
import gc
import sys

import numba
import numpy as np
import pytest
from numba import cfunc, njit, types
from numba.core import typing

import numthunk as nt

from numba_kernels import call0, call1

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
    # the Numba adapter reads Numba's text as C (numthunk/_numba_sig.py); the
    # core's parser reads C only (src/parse/declarator.c)
    assert nt.Signature(text) == nt.Signature(c) == nt._core.Signature(c)
    with pytest.raises(ValueError):
        nt._core.Signature(text)


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


@pytest.mark.parametrize("owner", ["owner=t", "no owner"])
def test_a_function_of_another_signature_at_a_thunk_s_address_is_refused_at_unboxing(
        engine, owner):
    """A Function declared with a signature other than the thunk's at its
    address, passed to @njit code, is refused naming both as bind()
    refuses it: Numba would call the thunk with the wrong arguments. The
    thunk's own signature is called; so is a Function over C code."""
    hypot = nt.Function.from_library("libm.so.6", "hypot", "double (double a, double b)")
    t = nt.bind(hypot, 3.0, nt.ARG, engine=engine)
    kw = {"owner": t} if owner == "owner=t" else {}
    wrong = nt.Function(t.address, "double (double, double)", **kw)
    with pytest.raises(TypeError) as info:
        _call2(wrong, 1.0, 2.0)
    assert str(info.value) == (f"the target is a thunk (at {t.address:#x}) of signature "
                               "'double (double)', not 'double (double, double)': a call "
                               "through it would pass the wrong arguments; give a function "
                               "of the signature declared, or declare the thunk's own")
    assert call1(nt.Function(t.address, "double (double x)", **kw), 4.0) == 5.0
    assert _call2(hypot, 6.0, 8.0) == 10.0


@njit
def _call2(f, x, y):
    return f(x, y)


@pytest.mark.parametrize("spelling", ["thunk", "t.opaque()", "Function(owner=t)",
                                      "fixed Function(owner=t)"])
def test_a_thunk_that_uses_a_released_thunk_is_refused_at_unboxing(cfn, engine, spelling):
    """A thunk whose target (or bound function value) was released, passed
    to @njit code as the thunk or as a Function that stands for it, is
    refused at unboxing as t(...) refuses it: the call would reach the
    released thunk's trap, which aborts the process."""
    f = cfn("f_d_d", "double (double)")
    apply = cfn("f_d_Fd", "double (double (*f)(double), double x)")
    inner = nt.bind(f, nt.ARG, engine=engine)
    t = nt.bind(apply, inner, nt.ARG, engine=engine)
    fn = {"thunk": t, "t.opaque()": t.opaque(),
          "Function(owner=t)": nt.Function(t.address, t.csig, owner=t),
          "fixed Function(owner=t)": nt.Function(t.address, t.csig, owner=t,
                                                 fixed={0: 1.5})}[spelling]

    def call():
        return call0(fn) if spelling.startswith("fixed") else call1(fn, 1.5)

    assert call() == 1.5
    inner.release()
    with pytest.raises(ValueError) as info:
        call()
    assert " a released thunk (double (double) over double (double)" in str(info.value)

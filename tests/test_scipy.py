"""SciPy's LowLevelCallable consumers take a thunk whose types match,
whatever form its signature came in: a C target and a Numba @cfunc target for
each of quad, nquad, dblquad, tplquad, ndimage.generic_filter,
generic_filter1d and geometric_transform, checked against SciPy run on a
Python function."""

import ctypes
import os
import weakref

import cffi
import numba
import numpy as np
import pytest
from numba import cfunc, types
from scipy import LowLevelCallable, integrate, ndimage

import numthunk as nt
from numthunk._signature import scipy_text

from conftest import HERE

# -------------------------------------------------- one text per type


_FILTER_FORMS = [
    "int (double *, intptr_t, double *, void *)",
    "intc(CPointer(float64), intp, CPointer(float64), voidptr)",
    "int32(CPointer(float64), int64, CPointer(float64), voidptr)",
    "(float64*, int64, float64*, void*) -> int32",
    types.intc(types.CPointer(types.float64), types.intp, types.CPointer(types.float64),
               types.voidptr),
    types.int32(types.CPointer(types.float64), types.int64, types.CPointer(types.float64),
                types.voidptr),
    ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_ssize_t,
                     ctypes.POINTER(ctypes.c_double), ctypes.c_void_p),
    ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_double), ctypes.c_int64,
                     ctypes.POINTER(ctypes.c_double), ctypes.c_void_p),
    cffi.FFI().typeof("int(*)(double *, intptr_t, double *, void *)"),
]


@pytest.mark.parametrize("form", _FILTER_FORMS, ids=range(len(_FILTER_FORMS)))
def test_one_text_per_type_whatever_the_form(form):
    assert str(nt.Signature(form)) == "int (double *, intptr_t, double *, void *)"


def test_c_names_keep_their_spelling_but_scipy_text_is_by_type():
    sig = nt.Signature("long (const double *, npy_intp, Py_ssize_t *, int32_t, void *)")
    assert str(sig) == "long (const double *, npy_intp, Py_ssize_t *, int32_t, void *)"
    assert scipy_text(sig) == "intptr_t (double *, intptr_t, intptr_t *, int, void *)"


def test_numba_string_signature_override_becomes_c_text(ifn):
    t = nt.bind(ifn("poly_at", "double (double, const double *, int)"), nt.ARG,
                np.array([1.0, 2.0]), 2)
    llc = t.lowlevelcallable(signature="float64(float64)")
    assert llc.signature == "double (double)"
    llc = t.lowlevelcallable(signature="(float64) -> float64")
    assert llc.signature == "double (double)"
    with pytest.raises(ValueError, match="does not match"):
        t.lowlevelcallable(signature="float64(float64, voidptr)")


# -------------------------------------------------- making the callable


# private function objects (ctypes.pythonapi's are shared by every module,
# argtypes included)
_get_name = ctypes.pythonapi["PyCapsule_GetName"]
_get_name.restype, _get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_get_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_get_context = ctypes.pythonapi["PyCapsule_GetContext"]
_get_context.restype, _get_context.argtypes = ctypes.c_void_p, [ctypes.py_object]


def _consumer_view(llc):
    """What SciPy's consumers (ccallback.h) read of a LowLevelCallable: the
    first item's name and pointer, and its context as the user data."""
    item = tuple.__getitem__(llc, 0)
    name = _get_name(item)
    return name.decode(), _get_pointer(item, name), _get_context(item)


def _scipy_made(address, text, user_data=None):
    return LowLevelCallable(nt._core._capsule(address, text, None), user_data)


def test_lowlevelcallable_is_what_scipy_makes_of_the_capsule(ifn):
    t = nt.bind(ifn("poly_at", "double (double, const double *, int)"), nt.ARG,
                np.array([1.0, 2.0]), 2)
    llc = t.lowlevelcallable()
    ref = _scipy_made(t.address, "double (double)")
    assert type(llc) is LowLevelCallable
    assert _consumer_view(llc)[:2] == _consumer_view(ref)[:2] == ("double (double)", t.address)
    # no user data given: the callback's void * is NULL (SciPy's constructor
    # would pass the capsule's context, which is numthunk's own holder)
    assert _consumer_view(llc)[2] is None
    assert _consumer_view(ref)[2] is not None
    assert llc.signature == ref.signature == "double (double)"
    assert llc.user_data is None
    assert nt._core._capsule_pointer(llc.function) == (t.address, "double (double)")
    assert integrate.quad(llc, 0.0, 1.0)[0] == pytest.approx(2.0)   # 1 + 2x


def test_a_parameter_s_own_const_is_no_part_of_the_scipy_text(ifn):
    """double (const double x) is the function type double (double) (C17
    6.7.6.3): SciPy, which compares text, gets the unqualified text of a
    target whose parameters and result are declared const; what a pointer
    points to is left out as before."""
    own = "const double (const double x, const double *const c, const int n)"
    poly = ifn("poly_at", own)
    assert str(poly.signature) == "const double (const double, const double *const, const int)"
    assert scipy_text(poly.signature) == "double (double, double *, int)"
    assert _consumer_view(poly.lowlevelcallable())[0] == "double (double, double *, int)"
    t = nt.bind(poly, nt.ARG, np.array([1.0, 2.0]), 2)
    assert str(t.csig) == "const double (const double)"
    assert t.lowlevelcallable().signature == "double (double)"
    assert integrate.quad(t.lowlevelcallable(), 0.0, 1.0)[0] == pytest.approx(2.0)   # 1 + 2x
    assert scipy_text(nt.Signature("void (double *const *, const int)")) == "void (double **, int)"


def test_lowlevelcallable_with_user_data_passes_it_on(ifn):
    # double (double, void *): quad hands the callback the user data
    t = nt.bind(ifn("poly_at", "double (double, const double *, int)"), nt.ARG,
                np.array([1.0, 2.0]), 2)
    data = ctypes.c_double(7.0)
    llc = t.lowlevelcallable(user_data=ctypes.cast(ctypes.pointer(data), ctypes.c_void_p))
    assert _consumer_view(llc)[2] == ctypes.addressof(data)
    assert llc.user_data is not None


def test_lowlevelcallable_keeps_its_thunk(ifn):
    import gc
    t = nt.bind(ifn("poly_at", "double (double, const double *, int)"), nt.ARG,
                np.array([3.0, 0.0, 1.0]), 3)
    llc = t.lowlevelcallable()
    del t
    gc.collect()
    assert integrate.quad(llc, 0.0, 3.0)[0] == pytest.approx(9.0 + 9.0)   # 3x + x^3/3


def test_lowlevelcallable_keeps_the_name_after_the_thunk_s_capsule_goes(ifn):
    # the first item has its own copy of the name
    t = nt.bind(ifn("poly_at", "double (double, const double *, int)"), nt.ARG,
                np.array([1.0]), 1)
    item = tuple.__getitem__(t.lowlevelcallable(), 0)
    gc_items = [t.lowlevelcallable() for _ in range(50)]   # reuse freed memory
    del gc_items
    assert _get_name(item) == b"double (double)"


def test_function_lowlevelcallable(ifn):
    poly = ifn("poly_at", "double (double, const double *, int)")
    llc = poly.lowlevelcallable()
    assert _consumer_view(llc) == ("double (double, double *, int)", poly.address, None)
    # a Function with fixed parameters: through its call thunk, which it keeps
    c = np.array([0.0, 0.0, 3.0])
    fixed = nt.Function(poly.address, "double (double, const double *, int)",
                        owner=poly, fixed={1: c, 2: 3})
    llc = fixed.lowlevelcallable()
    assert llc.signature == "double (double)"
    assert _consumer_view(llc)[1] == fixed._thunk().address
    del fixed
    assert integrate.quad(llc, 0.0, 1.0)[0] == pytest.approx(1.0)    # 3x^2
    c[2] = 6.0                                                       # live
    assert integrate.quad(llc, 0.0, 1.0)[0] == pytest.approx(2.0)


def test_function_lowlevelcallable_checks_its_signature(ifn):
    poly = ifn("poly_at", "double (double, const double *, int)")
    named = "double (double x, const double *c, int n)"
    llc = poly.lowlevelcallable(signature=named)
    assert llc.signature == "double (double, const double *, int)"
    with pytest.raises(ValueError, match="does not match the function's"):
        poly.lowlevelcallable(signature="double (double)")


# -------------------------------------------------- the consumers


def _llc(t):
    llc = t.lowlevelcallable()
    assert isinstance(llc, LowLevelCallable)
    return llc


def _quad_targets(ifn):
    coeffs = np.array([0.5, -1.0, 3.0, 0.25])
    c_target = nt.bind(ifn("poly_at", "double (double, const double *, int)"),
                       nt.ARG, coeffs, nt.size(coeffs))

    @cfunc(types.float64(types.float64, types.CPointer(types.float64), types.intc))
    def nb_poly(x, c, n):
        acc = 0.0
        for k in range(n - 1, -1, -1):
            acc = acc * x + c[k]
        return acc

    nb_target = nt.bind(nb_poly, nt.ARG, coeffs, nt.size(coeffs))
    return coeffs, {"C": c_target, "numba": nb_target}


@pytest.mark.parametrize("which", ["C", "numba"])
def test_quad(ifn, which):
    coeffs, targets = _quad_targets(ifn)
    t = targets[which]
    assert str(t.csig) == "double (double)"
    got, _ = integrate.quad(_llc(t), -1.0, 2.0)
    ref, _ = integrate.quad(lambda x: np.polynomial.polynomial.polyval(x, coeffs), -1.0, 2.0)
    exact = np.polynomial.polynomial.Polynomial(coeffs).integ()
    assert got == pytest.approx(ref, rel=1e-13)
    assert got == pytest.approx(exact(2.0) - exact(-1.0), rel=1e-13)


def _prod_targets(ifn, w):
    c_target = nt.bind(ifn("weighted_prod", "double (const double *, int, double *)"),
                       w, nt.ARG, nt.ARG)

    @cfunc(types.float64(types.CPointer(types.float64), types.intc,
                         types.CPointer(types.float64)))
    def nb_prod(w, n, x):
        acc = 1.0
        for i in range(n):
            acc *= 1.0 + w[i] * x[i]
        return acc

    return {"C": c_target, "numba": nt.bind(nb_prod, w, nt.ARG, nt.ARG)}


def _prod_ref(w, *xs):
    return float(np.prod(1.0 + np.asarray(w[:len(xs)]) * np.asarray(xs)))


@pytest.mark.parametrize("which", ["C", "numba"])
def test_nquad(ifn, which):
    w = np.array([0.5, 2.0, -0.25])
    t = _prod_targets(ifn, w)[which]
    assert str(t.csig) == "double (int, double *)"
    ranges = [(0.0, 1.0), (-1.0, 0.5), (0.0, 2.0)]
    got, _ = integrate.nquad(_llc(t), ranges)
    ref, _ = integrate.nquad(lambda *x: _prod_ref(w, *x), ranges)
    exact = np.prod([(b - a) + wi * (b * b - a * a) / 2 for wi, (a, b) in zip(w, ranges)])
    assert got == pytest.approx(ref, rel=1e-12)
    assert got == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("which", ["C", "numba"])
def test_dblquad(ifn, which):
    w = np.array([0.5, 2.0])
    t = _prod_targets(ifn, w)[which]
    # dblquad calls func(y, x): y is x[0] for the C function
    got, _ = integrate.dblquad(_llc(t), 0.0, 1.0, lambda x: -x, lambda x: x * x)
    ref, _ = integrate.dblquad(lambda y, x: _prod_ref(w, y, x), 0.0, 1.0,
                               lambda x: -x, lambda x: x * x)
    assert got == pytest.approx(ref, rel=1e-12)
    assert got != pytest.approx(integrate.dblquad(lambda y, x: 1.0, 0.0, 1.0, lambda x: -x,
                                                  lambda x: x * x)[0], rel=1e-3)


@pytest.mark.parametrize("which", ["C", "numba"])
def test_tplquad(ifn, which):
    w = np.array([0.5, 2.0, -0.75])
    t = _prod_targets(ifn, w)[which]
    got, _ = integrate.tplquad(_llc(t), 0.0, 1.0, 0.0, 2.0, -1.0, 1.0)
    ref, _ = integrate.tplquad(lambda z, y, x: _prod_ref(w, z, y, x), 0.0, 1.0, 0.0, 2.0,
                               -1.0, 1.0)
    exact = (2.0 + 0) * (2.0 + w[1] * 2.0) * (1.0 + w[2] * 0.5)
    assert got == pytest.approx(ref, rel=1e-12)
    assert got == pytest.approx(exact, rel=1e-12)


def _filter_targets(ifn, w):
    c_target = nt.bind(ifn("filter_weighted",
                           "int (const double *, double *, intptr_t, double *, void *)"),
                       w, nt.ARG, nt.ARG, nt.ARG, nt.ARG)

    @cfunc(types.intc(types.CPointer(types.float64), types.CPointer(types.float64), types.intp,
                      types.CPointer(types.float64), types.voidptr))
    def nb_filter(w, buf, n, out, data):
        acc = 0.0
        for i in range(n):
            acc += w[i] * buf[i]
        out[0] = acc
        return 1

    return {"C": c_target, "numba": nt.bind(nb_filter, w, nt.ARG, nt.ARG, nt.ARG, nt.ARG)}


@pytest.mark.parametrize("which", ["C", "numba"])
def test_generic_filter(ifn, which):
    rng = np.random.default_rng(5)
    image = rng.standard_normal((9, 11))
    w = np.array([1.0, -2.0, 0.5, 3.0, 0.25, -1.0, 2.0, 0.0, 1.5])
    t = _filter_targets(ifn, w)[which]
    assert scipy_text(t.csig) == "int (double *, intptr_t, double *, void *)"
    got = ndimage.generic_filter(image, _llc(t), size=3)
    ref = ndimage.generic_filter(image, lambda buf: float(np.dot(w, buf)), size=3)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)
    assert not np.allclose(got, ndimage.uniform_filter(image, 3))


# what a call from Python that passes arrays for scalars is told (convert/value.c)
SCIPY_HINT = ("; a thunk or Function called from Python takes one value per parameter. A SciPy "
              "routine that calls its function with arrays takes t.lowlevelcallable() instead, "
              "of a signature it lists: ndimage.generic_filter 'int (double *, intptr_t, double "
              "*, void *)', generic_filter1d 'int (double *, intptr_t, double *, intptr_t, void "
              "*)', geometric_transform 'int (intptr_t *, double *, int, int, void *)' "
              "(docs/scipy.md)")


def test_a_thunk_itself_given_to_ndimage_says_to_pass_its_lowlevelcallable(cfn, engine):
    """Given the thunk rather than a LowLevelCallable, SciPy calls it as a
    Python function, with an array (generic_filter) or a tuple of
    coordinates (geometric_transform): the refusal says the value is no
    scalar and names the signatures docs/scipy.md lists for these."""
    t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine=engine)
    image = np.arange(12.0).reshape(3, 4)
    for call, got in ((lambda: ndimage.generic_filter(image, t, size=3),
                       "a numpy.ndarray of shape (9,)"),
                      (lambda: ndimage.geometric_transform(image, t), "a tuple of 2 items")):
        with pytest.raises(TypeError) as info:
            call()
        assert str(info.value) == (f"argument 1 (double): expected a real number, got {got}, "
                                   f"which is not a scalar{SCIPY_HINT}")
    with open(os.path.join(HERE, "..", "docs", "scipy.md")) as f:
        table = f.read()
    for sig in ("int (double *, intptr_t, double *, void *)",
                "int (double *, intptr_t, double *, intptr_t, void *)",
                "int (intptr_t *, double *, int, int, void *)"):
        assert f"'{sig}'" in SCIPY_HINT and f"`{sig}`" in table     # the message as the docs


def test_quad_of_the_thunk_itself_is_the_slow_path_the_docs_steer_from(cfn, engine):
    """quad(t) works (SciPy calls the thunk through Python per point) and
    gives quad(t.lowlevelcallable())'s value; the class's help, the first
    example of docs/scipy.md and the README point to the fast form."""
    t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine=engine)
    fast = integrate.quad(t.lowlevelcallable(), 0.0, 2.0, full_output=1)
    slow = integrate.quad(t, 0.0, 2.0, full_output=1)
    assert fast[:2] == slow[:2] and fast[2]["neval"] == slow[2]["neval"]
    # (words, not lines: CPython 3.13 strips a docstring's indentation)
    assert "SciPy routines (``quad``, ``ndimage``) take ``t.lowlevelcallable()``" in \
        " ".join(nt.Thunk.__doc__.split())
    with open(os.path.join(HERE, "..", "docs", "scipy.md")) as f:
        page = f.read()
    first = page[page.index("```python"):]
    first = first[:first.index("```\n", 3)]
    assert "integrate.quad(f.lowlevelcallable(), 0.0, 1.0)" in first
    assert "Pass `t.lowlevelcallable()`, not `t`." in page[:page.index("```python")]
    with open(os.path.join(HERE, "..", "README.md")) as f:
        assert "(pass `t.lowlevelcallable()`: `quad(t, ...)` calls the thunk through" in f.read()


def _filter1d_targets(ifn, scale):
    c_target = nt.bind(ifn("filter1d_scaled_sum",
                           "int (double, double *, intptr_t, double *, intptr_t, void *)"),
                       scale, nt.ARG, nt.ARG, nt.ARG, nt.ARG, nt.ARG)

    @cfunc(types.intc(types.float64, types.CPointer(types.float64), types.intp,
                      types.CPointer(types.float64), types.intp, types.voidptr))
    def nb_filter1d(scale, inp, inlen, out, outlen, data):
        window = inlen - outlen + 1
        for i in range(outlen):
            acc = 0.0
            for j in range(window):
                acc += inp[i + j]
            out[i] = scale * acc
        return 1

    return {"C": c_target,
            "numba": nt.bind(nb_filter1d, scale, nt.ARG, nt.ARG, nt.ARG, nt.ARG, nt.ARG)}


@pytest.mark.parametrize("which", ["C", "numba"])
def test_generic_filter1d(ifn, which):
    rng = np.random.default_rng(6)
    image = rng.standard_normal((5, 17))
    t = _filter1d_targets(ifn, 0.5)[which]
    got = ndimage.generic_filter1d(image, _llc(t), filter_size=4)

    def ref_fn(inp, out):
        out[:] = 0.5 * np.convolve(inp, np.ones(4), mode="valid")

    ref = ndimage.generic_filter1d(image, ref_fn, filter_size=4)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got, 0.5 * 4 * ndimage.uniform_filter1d(image, 4, axis=-1),
                               rtol=1e-12, atol=1e-12)


def _transform_targets(ifn, shift):
    c_target = nt.bind(ifn("transform_shift",
                           "int (const double *, intptr_t *, double *, int, int, void *)"),
                       shift, nt.ARG, nt.ARG, nt.ARG, nt.ARG, nt.ARG)

    @cfunc(types.intc(types.CPointer(types.float64), types.CPointer(types.intp),
                      types.CPointer(types.float64), types.intc, types.intc, types.voidptr))
    def nb_shift(shift, oc, ic, orank, irank, data):
        for i in range(irank):
            ic[i] = oc[i] - shift[i]
        return 1

    return {"C": c_target, "numba": nt.bind(nb_shift, shift, nt.ARG, nt.ARG, nt.ARG, nt.ARG,
                                            nt.ARG)}


@pytest.mark.parametrize("which", ["C", "numba"])
def test_geometric_transform(ifn, which):
    rng = np.random.default_rng(7)
    image = rng.standard_normal((8, 10))
    shift = np.array([1.25, -0.5])
    t = _transform_targets(ifn, shift)[which]
    assert scipy_text(t.csig) == "int (intptr_t *, double *, int, int, void *)"
    got = ndimage.geometric_transform(image, _llc(t), order=1)
    ref = ndimage.geometric_transform(image, lambda oc: (oc[0] - 1.25, oc[1] + 0.5), order=1)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got, ndimage.shift(image, shift, order=1), rtol=1e-12,
                               atol=1e-12)


# -------------------------------------------------- a LowLevelCallable as a target


def _plus1_cython(user_data=None):
    """SciPy's own Cython callback, exported through __pyx_capi__:
    double plus1_cython(double a, int *error_flag, void *user_data), which
    returns a + 1, or a + *(double *)user_data when user_data is not NULL."""
    from scipy._lib import _ccallback_c

    return LowLevelCallable.from_cython(_ccallback_c, "plus1_cython", user_data)


@numba.njit
def _call_llc(t, x):
    return t(x)


def test_lowlevelcallable_is_a_target_with_its_user_data_bound(engine):
    import gc

    step = ctypes.c_double(2.5)
    llc = _plus1_cython(ctypes.cast(ctypes.pointer(step), ctypes.c_void_p))
    flag = np.zeros(1, np.intc)
    t = nt.bind(llc, nt.ARG, flag, engine=engine)
    assert str(t.csig) == "double (double)"
    assert str(t.target.csig) == "double (double, int *)"       # user_data fixed
    assert t(1.0) == 3.5 and _call_llc(t, 1.0) == 3.5
    step.value = 10.0                                          # read through the pointer
    assert _call_llc(t, 1.0) == 11.0
    # the thunk holds the LowLevelCallable, which holds its user data
    assert t.target.owner is llc
    ref = weakref.ref(step)
    del llc, step
    gc.collect()
    assert ref() is not None and _call_llc(t, 1.0) == 11.0 and flag[0] == 0
    del t
    gc.collect()
    assert ref() is None
    # no user data: NULL is bound, the callback's own default
    plain = nt.bind(_plus1_cython(), nt.ARG, flag, engine=engine)
    assert _call_llc(plain, 1.0) == 2.0 and plain(5.0) == 6.0


def test_lowlevelcallable_of_each_form_is_a_target(engine):
    """A LowLevelCallable made from a capsule, a ctypes function, a cffi
    function or a numthunk Function: its function, with its user data bound
    where the signature ends with void *, and as it is where it does not."""
    from scipy._lib import _ccallback_c, _test_ccallback

    step = ctypes.c_double(0.25)
    data = ctypes.cast(ctypes.pointer(step), ctypes.c_void_p)
    flag = np.zeros(1, np.intc)
    capsule = _ccallback_c.__pyx_capi__["plus1_cython"]
    address = ctypes.cast(_ccallback_c.plus1_ctypes, ctypes.c_void_p).value
    ffi = cffi.FFI()
    forms = {
        "capsule": LowLevelCallable(capsule, data),
        "ctypes": LowLevelCallable(_ccallback_c.plus1_ctypes, data),
        "cffi": LowLevelCallable(ffi.cast("double (*)(double, int *, void *)", address), data),
        "Function": nt.Function(address, "double (double, int *, void *)")
                      .lowlevelcallable(user_data=data),
    }
    for form, llc in forms.items():
        t = nt.bind(llc, nt.ARG, flag, engine=engine)
        assert str(t.csig) == "double (double)", form
        assert (t(1.0), _call_llc(t, 1.0)) == (1.25, 1.25), form
    # a C capsule of SciPy's tests: plus1b(a, b) = a + b + *user_data
    plus1b = LowLevelCallable(_test_ccallback.test_get_plus1b_capsule(), data)
    assert _call_llc(nt.bind(plus1b, nt.ARG, 2.0, flag, engine=engine), 1.0) == 3.25
    # no trailing void *: the function as it is, user data unused
    pow_ = nt.Function.from_library("libm.so.6", "pow", "double (double, double)")
    llc = nt.bind(pow_, nt.ARG, 2.0, engine=engine).lowlevelcallable(user_data=data)
    square = nt.bind(llc, nt.ARG, engine=engine)
    assert str(square.csig) == "double (double)" and _call_llc(square, 3.0) == 9.0
    assert nt.bind(llc, 4.0, engine=engine)() == 16.0
    assert flag[0] == 0


def test_lowlevelcallable_target_in_quad(engine):
    """A thunk over a LowLevelCallable gives SciPy a LowLevelCallable
    again: quad integrates plus1 with its user data."""
    step = ctypes.c_double(2.0)
    flag = np.zeros(1, np.intc)
    t = nt.bind(_plus1_cython(ctypes.cast(ctypes.pointer(step), ctypes.c_void_p)),
                nt.ARG, flag, engine=engine)
    got, _ = integrate.quad(t.lowlevelcallable(), 0.0, 1.0)
    assert got == pytest.approx(2.5)

"""DLTensor * parameters: a whole array passed as one DLPack descriptor.

The kernels (tests/fixtures/dlpack_kernels.c) are compiled against
numthunk.get_include() and read the descriptor with the public header's
helpers; NumPy computes what they must return. Arrays come through the
buffer protocol, and objects that offer only __dlpack__ (versioned and
legacy) through their capsules. Every case runs on both engines.
"""

import ctypes
import gc
import os
import re
import struct
import sys
import weakref

import numba
import numpy as np
import pytest
import scipy.integrate
from hypothesis import event, given, settings
from hypothesis import strategies as st
from numba import njit

import numthunk as nt

from conftest import ENGINES
from layouts import OnlyDL, foreign_layouts, swapped

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def kern(dlkern):
    return dlkern


class LegacyDL:
    """An exporter from before the versioned protocol: __dlpack__() takes
    no keywords and returns a 'dltensor' capsule; no __dlpack_device__."""

    def __init__(self, arr):
        self.arr = arr
        self.calls = 0

    def __dlpack__(self):
        self.calls += 1
        return self.arr.__dlpack__()


class OnDevice(OnlyDL):
    """An exporter whose data lives on another device (CUDA:0)."""

    def __dlpack_device__(self):
        return (2, 0)


def _numpy_exports(make, **kw):
    """Whether this NumPy's own __dlpack__ exports what make() builds (older
    releases refuse bool and read-only arrays and know no max_version)."""
    try:
        make().__dlpack__(**kw)
    except (TypeError, BufferError, ValueError):
        return False
    return True


def _read_only(a):
    a.flags.writeable = False
    return a


NUMPY_DL_BOOL = _numpy_exports(lambda: np.zeros(2, dtype=np.bool_))
NUMPY_DL_READ_ONLY = (_numpy_exports(lambda: _read_only(np.zeros(2)), max_version=(1, 0))
                      or _numpy_exports(lambda: _read_only(np.zeros(2))))
NUMPY_DL_VERSIONED = _numpy_exports(lambda: np.zeros(2), max_version=(1, 0), copy=True)


class CopyingDL(OnlyDL):
    """An exporter that hands out a copy whatever it is asked."""

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(max_version=kw.get("max_version"), copy=True)


def arrays():
    a = np.arange(24, dtype=np.float64).reshape(4, 6) * 1.5 - 7.0
    return {
        "1-D": np.linspace(-3.0, 5.0, 11),
        "2-D": a,
        "strided": a[:, ::2],
        "transposed": a.T,
        "sliced": a[1:3, 5:0:-2],
        "fortran": np.asfortranarray(a),
        "3-D": np.arange(60, dtype=np.float64).reshape(3, 4, 5)[::2, 1:, ::-1],
        "0-d": np.array(4.25),
        "empty": np.zeros((3, 0)),
    }


# ---------------------------------------------------------------- the header


def test_header_helpers_on_hand_made_descriptors(dllib):
    # NULL strides (compact row-major), a nonzero byte_offset, a transposed
    # view and an empty tensor, checked by the C compiler's own arithmetic
    assert dllib.dl_helpers_selftest() == 0


def test_get_include_has_the_headers():
    inc = nt.get_include()
    for rel in ("dlpack.h", "capi.h"):
        assert os.path.isfile(os.path.join(inc, "numthunk", rel)), rel
    # the .pxd files sit in the package, where `cimport numthunk.capi` finds them
    pkg = os.path.dirname(nt.__file__)
    for rel in ("capi.pxd", "dlpack.pxd"):
        assert os.path.isfile(os.path.join(pkg, rel)), rel


# ---------------------------------------------------------------- signatures


def test_signature_spellings():
    assert str(nt.Signature("double (const DLTensor *t)")) == "double (const DLTensor *)"
    # Cython's capsule spelling of the same parameter
    assert nt.Signature("double (DLTensor const *)") == nt.Signature("double (const DLTensor *)")
    assert str(nt.Signature("int64_t (DLTensor *, double)")) == "int64_t (DLTensor *, double)"
    assert nt.Signature("double (DLTensor *)") != nt.Signature("double (const DLTensor *)")


def test_by_value_descriptor_is_refused_at_parse():
    for text in ("double (DLTensor t)", "DLTensor (double)", "void (void (*)(DLTensor))"):
        with pytest.raises(ValueError, match="DLTensor is passed by pointer"):
            nt.Signature(text)


# ---------------------------------------------------------------- sums


@pytest.mark.parametrize("name", list(arrays()))
def test_sum_from_python(kern, engine, name):
    arr = arrays()[name]
    t = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), arr, engine=engine)
    assert t() == pytest.approx(arr.sum(), abs=1e-12)


@pytest.mark.parametrize("name", list(arrays()))
@pytest.mark.parametrize("wrap", [OnlyDL, LegacyDL])
def test_sum_through_dlpack_only_exporters(kern, engine, name, wrap):
    arr = arrays()[name]
    obj = wrap(arr)
    assert not hasattr(obj, "__buffer__") and not isinstance(obj, np.ndarray)
    t = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), obj, engine=engine)
    assert t() == pytest.approx(arr.sum(), abs=1e-12)
    if wrap is OnlyDL:
        # the versioned protocol was asked for, and no copy allowed; an
        # array that speaks it (NumPy >= 2.1) was not asked again without
        assert obj.asked["max_version"][0] == 1 and obj.asked["copy"] is False
        assert (obj.kw == obj.asked) == NUMPY_DL_VERSIONED
    else:
        assert obj.calls == 1


@pytest.mark.parametrize("wrap", [lambda a: a, memoryview, OnlyDL, LegacyDL])
@pytest.mark.parametrize("name", ["2-D", "strided", "transposed", "sliced", "3-D", "0-d"])
def test_descriptor_fields(kern, name, wrap):
    arr = arrays()[name]
    out = np.full(8 + 2 * max(arr.ndim, 1), -99, dtype=np.int64)
    t = nt.bind(kern("dl_describe", "int64_t (const DLTensor *, int64_t *)"), wrap(arr), out)
    assert t() == arr.ndim
    dev_type, dev_id, ndim, code, bits, lanes, byte_offset, contig = out[:8]
    assert (dev_type, dev_id) == (1, 0)                 # kDLCPU, 0
    assert ndim == arr.ndim and (code, bits, lanes) == (2, 64, 1)
    assert byte_offset == 0
    assert list(out[8:8 + ndim]) == list(arr.shape)
    # strides count elements, never bytes
    assert list(out[8 + ndim:8 + 2 * ndim]) == [s // arr.itemsize for s in arr.strides]
    assert bool(contig) == (arr.flags.c_contiguous or arr.size == 0)


def test_descriptor_points_at_the_live_array(kern):
    a = np.arange(30, dtype=np.float64).reshape(5, 6)
    view = a[1:, ::-2]
    addr = kern("dl_element_address", "uintptr_t (const DLTensor *, const int64_t *)")
    index = np.array([2, 1], dtype=np.int64)
    t = nt.bind(addr, view, index)
    expected = view.__array_interface__["data"][0] + 2 * view.strides[0] + 1 * view.strides[1]
    assert t() == expected
    s = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), view)
    before = s()
    a[2, 5] += 100.0            # an element of the view: the binding sees it
    assert s() == before + 100.0 == view.sum()


DTYPES = [
    (np.int8, 0, 8), (np.int16, 0, 16), (np.int32, 0, 32), (np.int64, 0, 64),
    (np.uint8, 1, 8), (np.uint16, 1, 16), (np.uint32, 1, 32), (np.uint64, 1, 64),
    (np.float16, 2, 16), (np.float32, 2, 32), (np.float64, 2, 64),
    (np.complex64, 5, 64), (np.complex128, 5, 128), (np.bool_, 6, 8),
]


@pytest.mark.parametrize("dtype,code,bits", DTYPES)
@pytest.mark.parametrize("wrap", [lambda a: a, memoryview, OnlyDL])
def test_dtype_codes(kern, dtype, code, bits, wrap):
    arr = (np.arange(12) % 5).astype(dtype).reshape(3, 4)[:, 1:]
    out = np.zeros(12, dtype=np.int64)
    if wrap is OnlyDL and dtype is np.bool_ and not NUMPY_DL_BOOL:
        # the exporter's own refusal reaches the caller unchanged
        with pytest.raises(TypeError, match="DLPack only supports"):
            nt.bind(kern("dl_describe", "int64_t (const DLTensor *, int64_t *)"), wrap(arr), out)
        return
    nt.bind(kern("dl_describe", "int64_t (const DLTensor *, int64_t *)"), wrap(arr), out)()
    assert tuple(out[3:6]) == (code, bits, 1)
    assert list(out[10:12]) == [s // arr.itemsize for s in arr.strides]
    if dtype is not np.float16:
        total = nt.bind(kern("dl_sum_any", "double (const DLTensor *)"), wrap(arr))()
        assert total == float(arr.real.astype(np.float64).sum() if arr.dtype.kind == "c"
                              else arr.astype(np.float64).sum())


NATIVE_HALF = ["e", "@e", "=e", "<e" if sys.byteorder == "little" else ">e"]
OTHER_HALF = [">e", "!e"] if sys.byteorder == "little" else ["<e"]


@pytest.mark.parametrize("fmt", NATIVE_HALF + OTHER_HALF + ["ee", "e2", "2e", "Ze", "u", "<u",
                                         "x"])
def test_half_precision_buffers_in_native_order_are_float16(kern, ntexport, fmt):
    # NumPy writes float16 as 'e'; other exporters may put the byte order
    # first: float16 is native 'e' with or without it, nothing else is
    data = np.arange(6, dtype=np.float16)
    buf = ntexport.Buffer(data, fmt, 2, (6,), (2,))
    describe = kern("dl_describe", "int64_t (const DLTensor *t, int64_t *)")
    out = np.zeros(12, dtype=np.int64)
    if fmt in NATIVE_HALF:
        nt.bind(describe, buf, out)()
        assert tuple(out[2:6]) == (1, 2, 16, 1)
        return
    with pytest.raises(TypeError, match=r"argument 1 \(t: const DLTensor \*\): (the array's "
                                        rf"element format '{re.escape(fmt)}' cannot be described "
                                        r"by a DLTensor|the buffer is in non-native byte order)"):
        nt.bind(describe, buf, out)


@pytest.mark.parametrize("itemsize", [1, 4, 8])
def test_half_precision_format_with_items_of_another_size_is_refused(kern, ntexport, itemsize):
    # 'e' is two bytes: an exporter that says otherwise describes no float16
    data = np.zeros(6 * itemsize, dtype=np.uint8)
    buf = ntexport.Buffer(data, "e", itemsize, (6,), (itemsize,))
    describe = kern("dl_describe", "int64_t (const DLTensor *t, int64_t *)")
    with pytest.raises(TypeError, match=r"argument 1 \(t: const DLTensor \*\): the array's "
                                        r"element format 'e' cannot be described by a DLTensor"):
        nt.bind(describe, buf, np.zeros(12, dtype=np.int64))


def test_kernel_checks_the_dtype(kern):
    # numthunk describes any dtype it can; the kernel decides what it takes
    s = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), np.arange(4, dtype=np.float32))
    assert np.isnan(s())


# ---------------------------------------------------------------- writing


@pytest.mark.parametrize("wrap", [lambda a: a, OnlyDL, LegacyDL])
def test_non_const_descriptor_writes_through(kern, engine, wrap):
    a = np.arange(20, dtype=np.float64).reshape(4, 5)
    expected = a.copy()
    expected[::2, 1::2] *= -3.0
    t = nt.bind(kern("dl_scale", "int64_t (DLTensor *, double)"), wrap(a[::2, 1::2]), nt.ARG,
                engine=engine)
    assert t(-3.0) == 4
    np.testing.assert_array_equal(a, expected)


# ---------------------------------------------------------------- refused


def test_read_only_refused_for_non_const(kern):
    a = np.arange(6.0)
    a.flags.writeable = False
    scale = kern("dl_scale", "int64_t (DLTensor *t, double)")
    with pytest.raises(ValueError, match=r"argument 1 \(t: DLTensor \*\): .*read-only.*"
                                         r"const DLTensor \*"):
        nt.bind(scale, a, nt.ARG)
    assert nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), a)() == a.sum()
    if not NUMPY_DL_READ_ONLY:
        # this NumPy exports no read-only array: its refusal reaches the caller
        with pytest.raises(TypeError, match="writeable"):
            nt.bind(scale, OnlyDL(a), nt.ARG)
        return
    with pytest.raises(ValueError, match=r"argument 1 \(t: DLTensor \*\): .*read-only"):
        nt.bind(scale, OnlyDL(a), nt.ARG)      # the versioned flag says read-only
    # const DLTensor * takes it
    assert nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), OnlyDL(a))() == a.sum()


def test_other_device_refused_naming_it(kern):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(ValueError, match=r"argument 1 \(t: const DLTensor \*\): the array is "
                                         r"on device CUDA:0 \(DLPack device type 2\)"):
        nt.bind(fn, OnDevice(np.arange(3.0)))


@pytest.mark.skipif(not NUMPY_DL_VERSIONED,
                    reason="this NumPy cannot export a versioned DLPack capsule, the only "
                           "kind that carries the is-copied flag")
def test_exported_copy_refused(kern):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(ValueError, match="exported a copy"):
        nt.bind(fn, CopyingDL(np.arange(3.0)))


@pytest.mark.parametrize("arr,match", [
    (np.array([1, "a"], dtype=object), "format 'O' cannot be described"),
    (np.zeros(3, dtype=[("x", "f8"), ("y", "i4")]), "cannot be described"),
    (np.zeros(3, dtype=">f8" if np.little_endian else "<f8"), "non-native byte order"),
    (np.zeros(3, dtype="datetime64[s]"), "does not export a strided buffer"),
])
def test_undescribable_arrays_refused(kern, arr, match):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(TypeError, match=r"argument 1 \(t: const DLTensor \*\): .*" + match):
        nt.bind(fn, arr)


@pytest.mark.parametrize("base", [np.array([1, "a", None], dtype=object),
                                  np.zeros(2, dtype=[("x", "f8"), ("o", "O")])])
def test_a_memoryview_cast_from_python_objects_is_no_tensor(kern, base):
    """A memoryview cast to bytes of a buffer of Python objects describes
    a uint8 tensor of references: refused naming the format it was cast
    from, as a pointer refuses it."""
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(TypeError, match=r"^argument 1 \(t: const DLTensor \*\): a memoryview "
                       r"cast to format 'B' from a buffer that holds Python objects"):
        nt.bind(fn, memoryview(base).cast("B"))


@pytest.mark.parametrize("error", [BufferError, TypeError, ValueError])
def test_a_refused_buffer_is_named_with_the_exporter_s_reason_as_cause(kern, ntexport, error):
    """convert/dlpack.c get_view: an exporter that refuses its buffer with
    BufferError, TypeError or ValueError is named as the parameter's, its
    exception the cause; anything else passes as it was raised."""
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    buf = ntexport.Buffer(bytearray(24), "d", 8, (3,), (8,))
    assert nt.bind(fn, buf)() == 0.0

    def refusing(exc):
        def refuse():
            raise exc
        return refuse

    raised = error("the exporter's own reason")
    buf.on_get = refusing(raised)
    with pytest.raises(TypeError) as info:
        nt.bind(fn, buf)
    assert re.fullmatch(r"argument 1 \(t: const DLTensor \*\): ntexport\.Buffer object does "
                        r"not export a strided buffer \(the exporter's own reason\)",
                        str(info.value)), str(info.value)
    assert info.value.__cause__ is raised
    raised = KeyboardInterrupt("stop")
    buf.on_get = refusing(raised)
    with pytest.raises(KeyboardInterrupt) as info:
        nt.bind(fn, buf)
    assert info.value is raised
    assert buf.exports == 0


def test_byte_strides_that_are_not_whole_elements_refused(kern):
    rec = np.zeros(4, dtype=[("x", "f8"), ("y", "i4")])     # 12-byte records
    x = rec["x"]
    assert x.strides == (12,)
    with pytest.raises(ValueError, match=r"stride of 12 bytes, not a whole number of "
                                         r"8-byte elements; DLTensor strides count elements"):
        nt.bind(kern("dl_sum_f64", "double (const DLTensor *t)"), x)


@pytest.mark.parametrize("ctype,pad", [("c16", "f8"), ("c8", "f4")])
def test_aligned_complex_strides_that_are_not_whole_elements_refused(kern, ctype, pad):
    # aligned (a complex's alignment is half its size) yet 1.5 elements apart:
    # no DLTensor stride says that, through NumPy's fast path or the buffer's
    rec = np.zeros(4, dtype=[("z", ctype), ("w", pad)])
    z = rec["z"]
    assert z.flags.aligned and z.strides[0] * 2 == 3 * z.itemsize
    fn = kern("dl_describe", "int64_t (const DLTensor *, int64_t *)")
    out = np.zeros(10, dtype=np.int64)
    for arr in (z, memoryview(z)):
        with pytest.raises(ValueError, match=rf"stride of {z.strides[0]} bytes, not a whole "
                                             rf"number of {z.itemsize}-byte elements"):
            nt.bind(fn, arr, out)
    assert not out.any()


def test_non_array_refused(kern):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(TypeError, match=r"argument 1 \(t: const DLTensor \*\): cannot bind a "
                                        r"list object"):
        nt.bind(fn, [1.0, 2.0])
    with pytest.raises(TypeError, match=r"a buffer can be bound to a single-level pointer "
                                        r"\(T \*\) only, not to DLTensor \*\*"):
        nt.bind(nt.Function(fn.address, "double (DLTensor **)"), np.zeros(2))


# ---------------------------------------------------------------- rebind, lifetime


@pytest.mark.parametrize("wrap", [lambda a: a, OnlyDL])
def test_rebind_to_another_shape_is_seen(kern, engine, wrap):
    out = np.zeros(12, dtype=np.int64)
    d = nt.bind(kern("dl_describe", "int64_t (const DLTensor *t, int64_t *)"),
                wrap(np.zeros(4)), out, engine=engine)
    s = nt.bind(kern("dl_sum_f64", "double (const DLTensor *t)"), wrap(np.ones(4)),
                engine=engine)
    address = s.address
    assert d() == 1 and out[8] == 4 and s() == 4.0
    b = np.arange(6.0).reshape(2, 3).T
    d.rebind(0, wrap(b))
    s.rebind("t", wrap(b))
    assert d() == 2 and list(out[8:12]) == [3, 2, 1, 3]
    assert s() == b.sum() and s.address == address


def test_descriptor_keeps_its_source_alive_until_release(kern):
    fn = kern("dl_sum_f64", "double (const DLTensor *)")
    a = np.arange(5.0)
    ref = weakref.ref(a)
    t = nt.bind(fn, a)
    del a
    gc.collect()
    assert ref() is not None and t() == 10.0
    t.release()
    gc.collect()
    assert ref() is None


def test_bound_array_cannot_be_resized(kern):
    # the descriptor points into the array: NumPy must not reallocate it
    fn = kern("dl_sum_f64", "double (const DLTensor *)")
    a = np.arange(5.0)
    t = nt.bind(fn, a)
    with pytest.raises(ValueError):
        a.resize(1000)
    assert t() == 10.0
    t.release()
    del t
    gc.collect()
    a.resize(1000)          # released: nothing holds it any more
    assert a.shape == (1000,)


def test_consumed_dlpack_tensor_is_deleted_at_release(kern):
    # the versioned capsule's deleter drops NumPy's reference to the array
    fn = kern("dl_sum_f64", "double (const DLTensor *)")
    a = np.arange(5.0)
    ref = weakref.ref(a)
    t = nt.bind(fn, OnlyDL(a))
    del a
    gc.collect()
    assert ref() is not None and t() == 10.0
    t.release()
    gc.collect()
    assert ref() is None


def test_rebind_retires_the_old_descriptor_until_reclaim(kern):
    fn = kern("dl_sum_f64", "double (const DLTensor *)")
    a = np.arange(5.0)
    ref = weakref.ref(a)
    t = nt.bind(fn, LegacyDL(a))
    del a
    t.rebind(0, np.ones(3))
    gc.collect()
    assert ref() is not None          # a late caller may still read the old context
    assert t() == 3.0
    t.reclaim()
    gc.collect()
    assert ref() is None


# ---------------------------------------------------------------- Numba, SciPy


@njit
def _rows(fn, n):
    out = np.empty(n)
    for i in range(n):
        out[i] = fn(i)
    return out


@njit
def _call0(fn):
    return fn()


@pytest.mark.parametrize("name", ["2-D", "strided", "transposed", "sliced"])
@pytest.mark.parametrize("wrap", [lambda a: a, OnlyDL])
def test_njit_calls_descriptor_thunks(kern, engine, name, wrap):
    arr = arrays()[name]
    rows = nt.bind(kern("dl_row_sum", "double (const DLTensor *, int64_t)"), wrap(arr), nt.ARG,
                   engine=engine)
    # the descriptor is bound, not forwarded: the thunk takes only the row
    assert str(rows.csig) == "double (int64_t)"
    np.testing.assert_allclose(_rows(rows, arr.shape[0]), arr.sum(axis=1), atol=1e-12)
    total = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), wrap(arr), engine=engine)
    assert _call0(total) == pytest.approx(arr.sum(), abs=1e-12)


def test_njit_sees_rebind(kern):
    s = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), np.ones(3))
    assert _call0(s) == 3.0
    s.rebind(0, np.arange(10.0).reshape(2, 5)[:, ::2])
    assert _call0(s) == np.arange(10.0).reshape(2, 5)[:, ::2].sum()


@pytest.mark.parametrize("wrap", [lambda a: a, OnlyDL, LegacyDL])
def test_quad_integrand_with_bound_coefficients(kern, engine, wrap):
    coef = np.array([0.5, -2.0, 3.0, 0.25, 9.0, 1.0])[::-1][::1]    # reversed view
    f = nt.bind(kern("dl_poly", "double (double x, const DLTensor *c)"), nt.ARG, wrap(coef),
                engine=engine)
    assert str(f.csig) == "double (double)"
    got, _err = scipy.integrate.quad(f.lowlevelcallable(), -1.0, 2.0)
    antideriv = np.polynomial.polynomial.polyint(coef)
    expected = (np.polynomial.polynomial.polyval(2.0, antideriv)
                - np.polynomial.polynomial.polyval(-1.0, antideriv))
    assert got == pytest.approx(expected, rel=1e-12)


def test_numba_type_of_a_forwarded_descriptor_is_a_pointer(kern):
    # forwarding the descriptor is allowed too: Numba sees a void pointer
    t = nt.bind(kern("dl_dot", "double (const DLTensor *, const DLTensor *)"), np.ones(3), nt.ARG)
    assert str(t.csig) == "double (const DLTensor *)"
    assert t.signature().args == (numba.types.voidptr,)


@pytest.mark.parametrize("wrap", [lambda a: a, OnlyDL])
def test_function_called_from_python_with_a_descriptor(kern, wrap):
    # a forwarded DLTensor * from Python: the descriptor lives for the call
    arr = arrays()["sliced"]
    fn = kern("dl_sum_f64", "double (const DLTensor *)")
    assert fn(wrap(arr)) == pytest.approx(arr.sum(), abs=1e-12)
    scale = kern("dl_scale", "int64_t (DLTensor *, double)")
    a = np.ones((3, 3))
    assert scale(wrap(a[::2, ::2]), 4.0) == 4 and a.sum() == 4 * 4.0 + 5


# ---------------------------------------------------------------- exporters that fail


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    pass


_VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Versioned))
_Versioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                       ("manager_ctx", ctypes.c_void_p), ("deleter", _VERSIONED_DELETER),
                       ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]

# Private function objects (indexing makes a new one; attribute access on
# ctypes.pythonapi returns one shared by every module, whose argtypes another
# test may have set to py_object)
_capsule_new = ctypes.pythonapi["PyCapsule_New"]
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _unconsumed_capsule_destructor(capsule):
    # DLPack: a capsule nobody consumed deletes its tensor (Python code here)
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        m = ctypes.cast(_capsule_pointer(capsule, b"dltensor_versioned"),
                        ctypes.POINTER(_Versioned))
        m.contents.deleter(m)


class PythonDeleterDL:
    """A DLPack exporter written with ctypes, as small producers are: its
    deleter and its capsule destructor are Python code, which runs while
    numthunk reports a refusal. ``tensor`` sets DLTensor fields, ``**head``
    the managed tensor's (major, flags)."""

    def __init__(self, arr, same_capsule=False, tensor=(), **head):
        self.arr, self.tensor, self.head = arr, dict(tensor), head
        self.deleted = 0
        self.same_capsule, self.capsule = same_capsule, None

    def __dlpack__(self, **kw):
        if self.same_capsule and self.capsule is not None:
            return self.capsule
        a = self.arr
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        strides = (ctypes.c_int64 * a.ndim)(*[s // a.itemsize for s in a.strides])
        m = _Versioned(major=self.head.get("major", 1), minor=0, flags=self.head.get("flags", 0))
        m.dl_tensor = _DLTensor(data=a.ctypes.data, device=_DLDevice(1, 0), ndim=a.ndim,
                                dtype=_DLDataType(2, 64, 1), shape=shape, strides=strides)
        for k, v in self.tensor.items():
            setattr(m.dl_tensor, k, v)

        def deleter(_p):
            self.deleted += 1                      # Python code, run by the deleter
            self.keep = None

        m.deleter = _VERSIONED_DELETER(deleter)
        self.keep = (m, shape, strides, m.deleter)
        capsule = _capsule_new(ctypes.addressof(m), b"dltensor_versioned",
                               ctypes.cast(_unconsumed_capsule_destructor, ctypes.c_void_p))
        if self.same_capsule:
            self.capsule = capsule
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case,exc,match", [
    (dict(tensor={"device": _DLDevice(2, 0)}), ValueError, "on device CUDA:0"),
    (dict(flags=1 << 1), ValueError, "exported a copy"),                 # IS_COPIED
    (dict(major=2), TypeError, "exported a DLPack 2.0 tensor"),          # not consumed
    (dict(tensor={"ndim": -1}), ValueError, "ndim is negative"),          # not consumed
    (dict(tensor={"dtype": _DLDataType(2, 64, 4)}), TypeError, "lanes 4"),
])
def test_refusal_survives_an_exporter_whose_deleter_runs_python(kern, engine, case, exc, match):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    src = PythonDeleterDL(np.arange(4.0), **case)
    with pytest.raises(exc, match=r"argument 1 \(t: const DLTensor \*\): .*" + match):
        nt.bind(fn, src, engine=engine)
    gc.collect()
    assert src.deleted == 1                     # deleted exactly once, by numthunk or the capsule
    good = PythonDeleterDL(np.arange(4.0))
    t = nt.bind(fn, good, engine=engine)
    assert t() == 6.0 and good.deleted == 0
    t.release()
    assert good.deleted == 1


class RaisingDL:
    def __init__(self, exc):
        self.exc = exc

    def __dlpack__(self, **kw):
        raise self.exc

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_failing_dlpack_exporters_name_the_parameter(kern, engine):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    label = r"argument 1 \(t: const DLTensor \*\): "
    with pytest.raises(TypeError, match=label + r"RaisingDL.__dlpack__\(\) raised") as info:
        nt.bind(fn, RaisingDL(ValueError("no export today")), engine=engine)
    assert isinstance(info.value.__cause__, ValueError)
    for exc in (KeyboardInterrupt, MemoryError):
        with pytest.raises(exc):
            nt.bind(fn, RaisingDL(exc()), engine=engine)

    class NotCallable:
        __dlpack__ = 5

    with pytest.raises(TypeError, match=label + r".*NotCallable.__dlpack__ is of type int, "
                                              "not a method"):
        nt.bind(fn, NotCallable(), engine=engine)

    class BadDevice(OnlyDL):
        def __dlpack_device__(self):
            raise RuntimeError("device lost")

    with pytest.raises(TypeError, match=label + r"BadDevice.__dlpack_device__\(\) raised"):
        nt.bind(fn, BadDevice(np.zeros(2)), engine=engine)
    # a capsule handed out twice: the second one is consumed already
    twice = PythonDeleterDL(np.arange(3.0), same_capsule=True)
    assert nt.bind(fn, twice, engine=engine)() == 3.0
    with pytest.raises(TypeError, match=label + r".*returned a capsule named "
                                              r"'used_dltensor_versioned'.*already consumed"):
        nt.bind(fn, twice, engine=engine)


class LookupRaisingDL:
    """An object whose __dlpack__ attribute cannot even be looked up."""

    def __init__(self, exc):
        self.exc, self.lookups = exc, 0

    @property
    def __dlpack__(self):
        self.lookups += 1
        raise self.exc


@pytest.mark.parametrize("engine", ENGINES)
def test_a_dlpack_lookup_that_raises_is_seen_at_bind_and_rebind(kern, engine):
    """Looking up __dlpack__ may raise: an interrupt, MemoryError or
    RecursionError goes through bind() and rebind() unchanged; any other
    error is the parameter's TypeError with it as the cause. A failed
    rebind changes nothing."""
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    label = r"^argument 1 \(t: const DLTensor \*\): reading LookupRaisingDL.__dlpack__ raised"
    t = nt.bind(fn, np.arange(4.0), engine=engine)
    for exc in (KeyboardInterrupt, MemoryError, RecursionError):
        with pytest.raises(exc):
            nt.bind(fn, LookupRaisingDL(exc()), engine=engine)
        v = LookupRaisingDL(exc())
        with pytest.raises(exc):
            t.rebind("t", v)
        assert v.lookups == 1          # nothing runs after it
    for how in (lambda v: nt.bind(fn, v, engine=engine), lambda v: t.rebind("t", v)):
        with pytest.raises(TypeError, match=label) as info:
            how(LookupRaisingDL(ValueError("no lookup today")))
        assert isinstance(info.value.__cause__, ValueError)
    assert t() == 6.0


class CapsuleDL(OnlyDL):
    """An exporter whose __dlpack__ returns a capsule of the given name
    (None: a capsule without a name) over a placeholder pointer."""

    def __init__(self, name):
        super().__init__(np.zeros(1))
        self.name = name

    def __dlpack__(self, **kw):
        return _capsule_new(self.arr.ctypes.data, self.name, None)


@pytest.mark.parametrize("engine", ENGINES)
def test_capsules_of_other_names_are_named_in_the_refusal(kern, engine):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    label = r"argument 1 \(t: const DLTensor \*\): CapsuleDL.__dlpack__\(\) returned a capsule "
    for name, shown in [(b"tensor", "'tensor'"), (b"dltensor_", "'dltensor_'"), (None, "NULL"),
                        (b"used_dltensor", "'used_dltensor'")]:
        with pytest.raises(TypeError, match=label + f"named {shown}, not 'dltensor' or "
                                                    "'dltensor_versioned'") as info:
            nt.bind(fn, CapsuleDL(name), engine=engine)
        # only a used_ name says the tensor was consumed already
        assert ("already consumed" in str(info.value)) == (name == b"used_dltensor")


@pytest.mark.parametrize("version", [None, (1, 0)])
def test_a_tensor_capsule_is_no_function(cfn, engine, version):
    """A DLPack capsule where a function goes (a function-pointer value,
    bound, forwarded or rebound, or a target, signature= given or not) is
    named for what it is; read as a function's capsule, its name would be
    taken for a signature ("unknown type name 'dltensor'")."""
    if version and not NUMPY_DL_VERSIONED:
        pytest.skip("this NumPy cannot export a versioned DLPack capsule")
    arr = np.arange(3.0)
    capsule = arr.__dlpack__(max_version=version) if version else arr.__dlpack__()
    name = "dltensor_versioned" if version else "dltensor"
    tensor = f"a DLPack tensor capsule ('{name}', what an array's __dlpack__() returns)"
    instead = ("a function's capsule is named by its C signature (t.lowlevelcallable().function "
               "is one), and an array goes to a 'const DLTensor *' parameter (docs/dlpack.md)")
    apply = cfn("f_d_Fd", "double (double (*f)(double), double x)")
    t = nt.bind(apply, nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine=engine), nt.ARG,
                engine=engine)
    fwd = nt.bind(apply, nt.ARG, nt.ARG, engine=engine)
    for give in (lambda: nt.bind(apply, capsule, 1.0, engine=engine),
                 lambda: fwd(capsule, 1.0), lambda: t.rebind(0, capsule)):
        with pytest.raises(TypeError) as info:
            give()
        assert str(info.value) == (f"argument 1 (f: double (*)(double)): {tensor} holds an "
                                   f"array, not a function; {instead}")
    assert t(2.0) == 2.0
    for options in ({}, {"signature": "double (double)"}):
        with pytest.raises(TypeError) as info:
            nt.bind(capsule, 1.0, engine=engine, **options)
        assert str(info.value) == (f"cannot use {tensor} as a target: it holds an array, not a "
                                   f"function; {instead}")
    assert f'capsule object "{name}" at' in repr(capsule)             # not consumed


class DeviceDL(OnlyDL):
    """An exporter whose __dlpack_device__ answers what it is given."""

    def __init__(self, arr, device):
        super().__init__(arr)
        self.device = device

    def __dlpack_device__(self):
        return self.device


class Interrupting:
    def __index__(self):
        raise KeyboardInterrupt


class Device(tuple):
    pass


@pytest.mark.parametrize("engine", ENGINES)
def test_dlpack_device_answers_other_than_two_ints_are_refused(kern, engine):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    for device in ([1, 0], "ab", b"ab", {1: 0, 2: 0}, (1,), (1, 0, 0), ("1", 0), (1.0, 0),
                   (1, None), (2**70, 0), (1, -2**70), None):
        with pytest.raises(TypeError, match=r"argument 1 \(t: const DLTensor \*\): "
                                            r"__dlpack_device__\(\) of DeviceDL must return "
                                            r"\(device_type, device_id\) as two ints"):
            nt.bind(fn, DeviceDL(np.ones(3), device), engine=engine)
    for device in [(Interrupting(), 0), (1, Interrupting())]:
        with pytest.raises(KeyboardInterrupt):
            nt.bind(fn, DeviceDL(np.ones(3), device), engine=engine)
    # a tuple of a subclass, and ints of one, are a tuple of two ints
    assert nt.bind(fn, DeviceDL(np.ones(3), Device((1, 0))), engine=engine)() == 3.0
    assert nt.bind(fn, DeviceDL(np.ones(3), (np.int64(1), np.int32(0))), engine=engine)() == 3.0


@pytest.mark.parametrize("device, name", [((-1, 3), "unknown:3"), ((-1, 0), "unknown:0"),
                                          ((2, 3), "CUDA:3"), ((2, -1), "CUDA:-1")])
def test_a_device_answer_of_minus_one_is_read_whole(kern, device, name):
    """-1 is an int like any other in __dlpack_device__()'s answer (not
    the C API's error value): both parts are read and named."""
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(ValueError, match=rf"the array is on device {re.escape(name)} \(DLPack "
                                         rf"device type {device[0]}\)"):
        nt.bind(fn, DeviceDL(np.ones(3), device))


def test_strided_is_refused_for_a_descriptor(kern):
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    with pytest.raises(TypeError, match=r"argument 1 \(t: const DLTensor \*\): a DLTensor "
                                        r"carries its array's strides itself"):
        nt.bind(fn, nt.strided(np.zeros((3, 4))[:, ::2]))
    assert nt.bind(fn, np.ones((3, 4))[:, ::2])() == 6.0


class ProbeDL:
    """An object that records every time its __dlpack__ is looked up."""

    def __init__(self):
        self.looked = 0

    @property
    def __dlpack__(self):
        self.looked += 1
        raise AttributeError("__dlpack__")


@pytest.mark.parametrize("engine", ENGINES)
def test_arguments_beyond_the_forwarded_count_are_not_read(kern, engine):
    # the first parameter is a descriptor: a value past the thunk's own
    # parameters is refused by count, never converted (nor looked at) as if
    # it were one of the target's parameters
    total = nt.bind(kern("dl_sum_f64", "double (const DLTensor *t)"), np.ones(3), engine=engine)
    rows = nt.bind(kern("dl_row_sum", "double (const DLTensor *t, int64_t i)"),
                   np.ones((2, 3)), nt.ARG, engine=engine)
    cases = [(total, (), "takes 0 arguments, got 1"), (rows, (0,), "takes 1 argument, got 2")]
    for t, before, text in cases:
        probe = ProbeDL()
        with pytest.raises(TypeError, match=text):
            t(*before, probe)
        assert probe.looked == 0
        for extra in (np.ones(3), total, ctypes.CFUNCTYPE(ctypes.c_double)(lambda: 1.0)):
            with pytest.raises(TypeError, match=text):
                t(*before, extra)
    with pytest.raises(TypeError, match="takes 1 argument, got 0"):
        rows()
    # and too few: a descriptor parameter with no value is not read either
    dot = nt.bind(kern("dl_dot", "double (const DLTensor *a, const DLTensor *b)"), nt.ARG,
                  nt.ARG, engine=engine)
    for values in [(), (np.ones(3),)]:
        with pytest.raises(TypeError, match=f"takes 2 arguments, got {len(values)}"):
            dot(*values)
    assert dot(np.ones(3), np.ones(3)) == 3.0
    assert total() == 3.0 and rows(1) == 3.0


# ---------------------------------------------------------------- exporters written for the test
#
# ntexport.Tensor (tests/exporters/ntexport.c) exports exactly the tensor
# asked for: any dtype code, bits and lanes, a nonzero byte_offset, negative
# and zero strides, NULL strides, empty axes, any device, the versioned or
# the legacy capsule, any version and flags, with or without keywords and
# __dlpack_device__. What numthunk must do is worked out here from the
# description alone (docs/dlpack.md); an accepted tensor is read by the
# kernels against the bytes read here with struct.

DL_SUPPORTED = {(0, 8): "b", (0, 16): "h", (0, 32): "i", (0, 64): "q",
                (1, 8): "B", (1, 16): "H", (1, 32): "I", (1, 64): "Q",
                (2, 16): "e", (2, 32): "f", (2, 64): "d", (5, 64): "f", (5, 128): "d",
                (6, 8): "?"}
DL_REFUSED = [(0, 1), (0, 4), (0, 128), (1, 24), (2, 8), (2, 128), (3, 64), (4, 16),
              (5, 32), (2, 0), (6, 1), (6, 16), (7, 8), (12, 8), (17, 4), (255, 64)]
DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
           10: "ROCm", 13: "CUDAManaged", 14: "OneAPI", 18: "Trn", 99: "unknown"}


@st.composite
def dl_tensors(draw):
    supported = draw(st.integers(0, 5)) > 0
    code, bits = draw(st.sampled_from(sorted(DL_SUPPORTED) if supported else DL_REFUSED))
    lanes = draw(st.sampled_from([1] * 8 + [2, 4]))
    size = max(1, bits * lanes // 8)
    ndim = draw(st.integers(0, 3))
    shape = [draw(st.integers(0, 4)) for _ in range(ndim)]
    null_strides = draw(st.booleans())
    strides = None if null_strides else [draw(st.integers(-3, 3)) for _ in range(ndim)]
    estr = strides if strides is not None else list(c_strides_elems(shape))
    empty = 0 in shape
    lo = 0 if empty else sum(min(0, (n - 1) * s) for n, s in zip(shape, estr)) * size
    hi = 0 if empty else sum(max(0, (n - 1) * s) for n, s in zip(shape, estr)) * size
    byte_offset = draw(st.sampled_from([0, 0, size, 3 * size, 1, size + 2]))
    data_offset = 16 - lo + draw(st.sampled_from([0, 0, 0, 8, 4, 1]))
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 0x40, data_offset + byte_offset + hi + size + 16, dtype=np.uint8)
    device = draw(st.sampled_from([1] * 30 + sorted(DEVICES)))
    reported = draw(st.sampled_from([device] * 5 + [1]))
    version = draw(st.sampled_from([(1, 0)] * 4 + [(1, 1)] * 8 + [(1, 7), (0, 8), (2, 0)]))
    flags = draw(st.sampled_from([0, 0, 0, 1, 2, 4]))
    return dict(code=code, bits=bits, lanes=lanes, size=size, shape=shape, strides=strides,
                estr=estr, byte_offset=byte_offset, data_offset=data_offset, raw=raw,
                device=device, reported=reported, version=version, flags=flags,
                versioned=draw(st.booleans()), keywords=draw(st.sampled_from([True] * 3
                                                                            + [False])),
                has_device=draw(st.sampled_from([True] * 3 + [False])),
                const=draw(st.booleans()), engine=draw(st.sampled_from(ENGINES)))


def c_strides_elems(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return reversed(out)


def dl_verdict(d):
    """(exception, message pattern) numthunk must raise, or None."""
    def device_refusal(t):
        name = DEVICES.get(t, "unknown")
        return ValueError, rf"the array is on device {name}:0 \(DLPack device type {t}\)"

    if d["has_device"] and d["reported"] != 1:
        return device_refusal(d["reported"])
    versioned = d["versioned"] and d["keywords"]      # the legacy call has no max_version
    if versioned:
        if d["version"][0] != 1:
            return TypeError, (rf"ntexport\.Tensor exported a DLPack {d['version'][0]}\."
                               rf"{d['version'][1]} tensor; numthunk reads version 1\.x")
        if d["flags"] & 2:
            return ValueError, r"ntexport\.Tensor exported a copy of its data"
        if d["flags"] & 1 and not d["const"]:
            return ValueError, r"the array is read-only but the parameter is a non-const"
    if d["device"] != 1:
        return device_refusal(d["device"])
    if d["lanes"] != 1 or (d["code"], d["bits"]) not in DL_SUPPORTED:
        return TypeError, (rf"DLPack dtype \(code {d['code']}, bits {d['bits']}, lanes "
                           rf"{d['lanes']}\) is not passed on")
    align = min(8, d["size"] // 2 if d["code"] == 5 else d["size"])
    address = d["raw"].ctypes.data + d["data_offset"] + d["byte_offset"]
    if 0 not in d["shape"] and address % align:
        return ValueError, rf"the array's data is not aligned to {align} bytes"
    return None


def dl_elements(d):
    """The elements the tensor describes, in row-major order, as the
    kernel's dl_sum_any adds them (complex: the real part)."""
    raw = d["raw"].tobytes()
    code = DL_SUPPORTED[(d["code"], d["bits"])]
    base = d["data_offset"] + d["byte_offset"]
    out = []
    for index in np.ndindex(*d["shape"]):
        pos = base + d["size"] * sum(i * s for i, s in zip(index, d["estr"]))
        out.append(float(struct.unpack_from("=" + code, raw, pos)[0]))
    return out


@settings(deadline=None)
@given(dl_tensors())
def test_foreign_dlpack_tensors_bind_or_are_refused(kern, ntexport, d):
    exporter = ntexport.Tensor(
        d["raw"], d["code"], d["bits"], tuple(d["shape"]),
        None if d["strides"] is None else tuple(d["strides"]), lanes=d["lanes"],
        data_offset=d["data_offset"], byte_offset=d["byte_offset"], device=(d["device"], 0),
        reported_device=(d["reported"], 0), versioned=d["versioned"], version=d["version"],
        flags=d["flags"], keywords=d["keywords"], has_device=d["has_device"])
    T = "const DLTensor *" if d["const"] else "DLTensor *"
    ndim = len(d["shape"])
    out = np.full(8 + 2 * max(ndim, 1), -99, dtype=np.int64)
    describe = kern("dl_describe", f"int64_t ({T} t, int64_t *out)")
    verdict = dl_verdict(d)
    event(f"refused: {verdict[1][:40]}" if verdict else "bound")
    if verdict is not None:
        with pytest.raises(verdict[0], match=rf"^argument 1 \(t: {re.escape(T)}\): "
                                             rf"{verdict[1]}"):
            nt.bind(describe, exporter, out, engine=d["engine"])
        assert exporter.deleted == exporter.exported, "a refused tensor was not deleted"
        return
    t = nt.bind(describe, exporter, out, engine=d["engine"])
    assert exporter.exported == 1 and exporter.deleted == 0      # held while bound
    assert t() == ndim
    # what the kernel sees: normalised (docs/dlpack.md)
    assert list(out[:8]) == [1, 0, ndim, d["code"], d["bits"], 1, 0,
                             int(out[7])]
    assert list(out[8:8 + ndim]) == d["shape"]
    assert list(out[8 + ndim:8 + 2 * ndim]) == list(d["estr"])
    at = kern("dl_element_address", f"uintptr_t ({T} t, const int64_t *index)")
    zero = np.zeros(max(ndim, 1), dtype=np.int64)
    assert nt.bind(at, exporter, zero, engine=d["engine"])() == \
        d["raw"].ctypes.data + d["data_offset"] + d["byte_offset"]
    if d["bits"] != 16 or d["code"] != 2:         # dl_sum_any reads no float16
        total = 0.0
        for v in dl_elements(d):
            total += v
        got = nt.bind(kern("dl_sum_any", f"double ({T} t)"), exporter, engine=d["engine"])()
        assert got == total
    t.release()
    gc.collect()
    assert exporter.deleted == exporter.exported, "a released tensor was not deleted"
    kwargs = exporter.last_kwargs
    if d["keywords"]:
        assert kwargs == {"max_version": (1, 1), "copy": False}
    else:
        assert kwargs == {}


@pytest.mark.parametrize("byte_offset, refused", [(0, False), (7, True), (8, False),
                                                  (9, True), (24, False)])
def test_byte_offset_is_folded_into_data(kern, ntexport, byte_offset, refused):
    """byte_offset at, and one byte either side of, whole float64 elements."""
    raw = np.arange(8.0)
    exporter = ntexport.Tensor(raw, 2, 64, (2, 2), (1, 2), byte_offset=byte_offset)
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    if refused:
        with pytest.raises(ValueError, match=r"^argument 1 \(t: const DLTensor \*\): the "
                                             r"array's data is not aligned to 8 bytes"):
            nt.bind(fn, exporter)
        assert exporter.deleted == 1
        return
    first = byte_offset // 8
    assert nt.bind(fn, exporter)() == raw[first] + raw[first + 2] + raw[first + 1] \
        + raw[first + 3]


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2,)])
@pytest.mark.parametrize("byte_offset, refused", [(0, False), (1, True), (7, True), (8, False)])
def test_one_element_is_enough_to_check_alignment(kern, ntexport, shape, byte_offset, refused):
    """convert/dlpack.c fill_from_dltensor: alignment is checked when the tensor has
    any element: a 0-d tensor and one of a single element, as one of two."""
    raw = np.arange(4.0)
    exporter = ntexport.Tensor(raw, 2, 64, shape, None, byte_offset=byte_offset)
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    if refused:
        with pytest.raises(ValueError, match=r"^argument 1 \(t: const DLTensor \*\): the "
                                             r"array's data is not aligned to 8 bytes"):
            nt.bind(fn, exporter)
        assert exporter.deleted == exporter.exported == 1
        return
    first = byte_offset // 8
    want = raw[first] + (raw[first + 1] if shape == (2,) else 0.0)
    assert nt.bind(fn, exporter)() == want


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5), (2, 0, 3)])
def test_empty_axes_are_bound_whatever_the_data(kern, ntexport, shape):
    """No element is read: an empty tensor binds even with NULL data or a
    data pointer no element could be aligned to."""
    for base, offset in ((None, 0), (np.zeros(4), 3)):
        exporter = ntexport.Tensor(base, 2, 64, shape, None, byte_offset=offset)
        out = np.zeros(8 + 2 * len(shape), dtype=np.int64)
        t = nt.bind(kern("dl_describe", "int64_t (const DLTensor *t, int64_t *out)"),
                    exporter, out)
        assert t() == len(shape) and list(out[8:8 + len(shape)]) == list(shape)
        assert nt.bind(kern("dl_sum_f64", "double (const DLTensor *t)"), exporter)() == 0.0


@pytest.mark.parametrize("ndim", [-1, -2**31])
@pytest.mark.parametrize("versioned", [True, False])
def test_negative_ndim_is_refused(kern, ntexport, ndim, versioned):
    exporter = ntexport.Tensor(np.zeros(4), 2, 64, (), None, ndim=ndim, versioned=versioned)
    with pytest.raises(ValueError, match=r"^argument 1 \(t: const DLTensor \*\): DLPack "
                                         r"ndim is negative"):
        nt.bind(kern("dl_sum_f64", "double (const DLTensor *t)"), exporter)
    assert exporter.deleted == exporter.exported == 1


@pytest.mark.parametrize("extent", [-1, 0, 1])
def test_negative_extent_is_refused(kern, ntexport, extent):
    exporter = ntexport.Tensor(np.zeros(8), 2, 64, (2, extent), None)
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    if extent < 0:
        with pytest.raises(ValueError, match=r"DLPack shape\[1\] is negative \(-1\)"):
            nt.bind(fn, exporter)
    else:
        assert nt.bind(fn, exporter)() == 0.0
    gc.collect()
    assert exporter.deleted == exporter.exported == 1


@pytest.mark.parametrize("code, bits", sorted(DL_SUPPORTED) + DL_REFUSED)
@pytest.mark.parametrize("lanes", [1, 2])
def test_every_dtype_code(kern, ntexport, code, bits, lanes):
    """Every (code, bits) numthunk passes on, and what it refuses, one lane
    or two, named in the refusal."""
    exporter = ntexport.Tensor(np.zeros(8), code, bits, (2,), None, lanes=lanes)
    out = np.zeros(10, dtype=np.int64)
    fn = kern("dl_describe", "int64_t (const DLTensor *t, int64_t *out)")
    if lanes == 1 and (code, bits) in DL_SUPPORTED:
        assert nt.bind(fn, exporter, out)() == 1
        assert list(out[3:6]) == [code, bits, 1]
    else:
        with pytest.raises(TypeError, match=rf"DLPack dtype \(code {code}, bits {bits}, "
                                            rf"lanes {lanes}\) is not passed on"):
            nt.bind(fn, exporter, out)
    gc.collect()
    assert exporter.deleted == exporter.exported == 1


@pytest.mark.parametrize("major, minor, ok", [(0, 9, False), (1, 0, True), (1, 1, True),
                                               (1, 2, True), (2, 0, False)])
def test_versions_read(kern, ntexport, major, minor, ok):
    """1.x is read, minor versions past 1.1 too (they add, never change);
    other major versions are refused before anything else is read."""
    exporter = ntexport.Tensor(np.arange(3.0), 2, 64, (3,), None, version=(major, minor))
    fn = kern("dl_sum_f64", "double (const DLTensor *t)")
    if ok:
        t = nt.bind(fn, exporter)
        assert t() == 3.0
        t.release()
    else:
        with pytest.raises(TypeError, match=rf"exported a DLPack {major}\.{minor} tensor"):
            nt.bind(fn, exporter)
    assert exporter.deleted == exporter.exported == 1


@pytest.mark.parametrize("device", [2, 3, 13, 99])
@pytest.mark.parametrize("where", ["both", "tensor only", "query only"])
def test_non_cpu_devices_are_refused(kern, ntexport, device, where):
    """The device __dlpack_device__ reports, and the one the tensor itself
    carries: either one not CPU is refused, naming it."""
    tensor_dev = 1 if where == "query only" else device
    reported = 1 if where == "tensor only" else device
    exporter = ntexport.Tensor(np.zeros(3), 2, 64, (3,), None, device=(tensor_dev, 5),
                               reported_device=(reported, 5))
    name = DEVICES.get(device, "unknown")
    with pytest.raises(ValueError, match=rf"on device {name}:5 \(DLPack device type "
                                         rf"{device}\); a DLTensor bound here must be in CPU"):
        nt.bind(kern("dl_sum_f64", "double (const DLTensor *t)"), exporter)
    assert exporter.deleted == exporter.exported


@pytest.mark.parametrize("flags", [1, 2, 3, 4])
@pytest.mark.parametrize("const", [True, False])
def test_versioned_flags(kern, ntexport, flags, const):
    exporter = ntexport.Tensor(np.arange(4.0), 2, 64, (4,), None, flags=flags)
    fn = kern("dl_sum_f64", f"double ({'const ' if const else ''}DLTensor *t)")
    if flags & 2:
        with pytest.raises(ValueError, match="exported a copy of its data"):
            nt.bind(fn, exporter)
    elif flags & 1 and not const:
        with pytest.raises(ValueError, match="the array is read-only"):
            nt.bind(fn, exporter)
    else:
        assert nt.bind(fn, exporter)() == 6.0
    gc.collect()
    assert exporter.deleted == exporter.exported == 1


@settings(deadline=None)
@given(st.data())
def test_foreign_buffers_as_descriptors(kern, ntexport, data):
    """A buffer exporter's layout, bound to a DLTensor parameter: the
    descriptor's strides in elements, or a refusal (strides that are not
    whole elements, data not aligned, a format a DLTensor cannot carry)."""
    lay = data.draw(foreign_layouts())
    shape, itemsize = lay["shape"], lay["itemsize"]
    strides = lay["strides"]
    buf = ntexport.Buffer(lay["raw"], None if lay["null_format"] else lay["format"], itemsize,
                          shape,
                          None if lay["null_strides"] else strides, offset=lay["offset"],
                          readonly=lay["readonly"], honour=lay["honour"])
    T = "const DLTensor *" if lay["const"] else "DLTensor *"
    out = np.full(12, -99, dtype=np.int64)
    fn = kern("dl_describe", f"int64_t ({T} t, int64_t *out)")
    fmt = "B" if lay["null_format"] else lay["format"]   # no format: unsigned bytes
    size = struct.calcsize(fmt)
    address = lay["raw"].ctypes.data + lay["offset"]
    if itemsize != size:
        err = TypeError, rf"the array's element format '{re.escape(fmt)}' cannot be described"
    elif swapped(lay) and size > 1:
        err = TypeError, rf"the buffer is in non-native byte order \(format '{re.escape(fmt)}'\)"
    elif lay["readonly"] and not lay["const"]:
        err = ValueError, r"the array is read-only"
    elif any(s % itemsize for s in strides):
        err = ValueError, r"axis \d has a stride of -?\d+ bytes, not a whole number"
    elif address % size or any(n > 1 and s % size for n, s in zip(shape, strides)):
        err = ValueError, rf"the buffer's data is not aligned to {size} bytes"
    else:
        err = None
    event(f"refused: {err[1][:30]}" if err else "bound")
    if err is not None:
        with pytest.raises(err[0], match=rf"^argument 1 \(t: {re.escape(T)}\): {err[1]}"):
            nt.bind(fn, buf, out, engine=lay["engine"])
        assert buf.exports == 0
        return
    t = nt.bind(fn, buf, out, engine=lay["engine"])
    assert t() == len(shape) and buf.exports == 1
    ndim = len(shape)
    assert list(out[8:8 + ndim]) == list(shape)
    assert list(out[8 + ndim:8 + 2 * ndim]) == [s // itemsize for s in strides]
    t.release()
    assert buf.exports == 0


@pytest.mark.parametrize("versioned", [True, False])
def test_a_managed_tensor_without_a_deleter_is_read_and_never_deleted(kern, ntexport, engine,
                                                                      versioned):
    """DLPack lets a producer that keeps the memory alive itself export a
    managed tensor whose deleter is NULL: it is read like any other, and
    when the thunk lets it go nobody calls a deleter (there is none)."""
    import gc

    arr = np.arange(6.0)
    for deleter in (True, False):
        exporter = ntexport.Tensor(arr, 2, 64, (6,), versioned=versioned, deleter=deleter)
        t = nt.bind(kern("dl_sum_f64", "double (const DLTensor *)"), exporter, engine=engine)
        assert t() == 15.0
        arr[0] = 10.0
        assert t() == 25.0                               # the memory itself, live
        arr[0] = 0.0
        t.release()
        del t
        gc.collect()
        assert (exporter.exported, exporter.deleted) == (1, int(deleter))

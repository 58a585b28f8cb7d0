"""numthunk's C API (numthunk/capi.h, the numthunk._core._C_API capsule) and
its Cython declarations (numthunk/capi.pxd, numthunk/dlpack.pxd).

A C extension and a Cython module in tests/capi/ are compiled against
numthunk.get_include() for this session; they make thunks of their own
kernels from C, call them through their addresses, rebind and release
them. Results are compared with NumPy; errors with what numthunk.bind says
for the same values.
"""

import ctypes
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import weakref

import numpy as np
import pytest
import scipy.integrate
from numba import njit

import numthunk as nt

from layouts import OnlyDL
from ntbuild import compiler_env

HERE = os.path.dirname(os.path.abspath(__file__))


def _builder():
    spec = importlib.util.spec_from_file_location(
        "ntcapi_build", os.path.join(HERE, "capi", "build_capi.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def built():
    path = _builder().build()
    if path not in sys.path:
        sys.path.insert(0, path)
    import ntcapi_cy
    import ntcapi_ext

    return ntcapi_ext, ntcapi_cy


@pytest.fixture(scope="module")
def ext(built):
    return built[0]


@pytest.fixture(scope="module")
def cy(built):
    return built[1]


def layouts():
    a = np.arange(35, dtype=np.float64).reshape(5, 7) / 4.0 - 3.0
    return [np.linspace(0.0, 1.0, 9), a, a[:, ::3], a.T, a[1:4, 6:0:-2], np.zeros((2, 0))]


# ---------------------------------------------------------------- the capsule


def test_capsule_is_exported():
    cap = nt._core._C_API
    assert type(cap).__name__ == "PyCapsule"
    assert "numthunk._core._C_API" in repr(cap)


def test_extension_sees_the_version(ext):
    assert ext.capi_version >= 1


# ---------------------------------------------------------------- C extension


@pytest.mark.parametrize("k", range(6))
def test_c_extension_sums_descriptors(ext, k):
    arr = layouts()[k]
    t = ext.make_sum(arr)
    assert isinstance(t, nt.Thunk) and ext.is_thunk(t) and not ext.is_thunk(arr)
    assert ext.call0(t) == pytest.approx(arr.sum(), abs=1e-12)
    assert t() == ext.call0(t)                  # the same thunk from Python
    t2 = ext.make_sum(OnlyDL(arr))
    assert ext.call0(t2) == pytest.approx(arr.sum(), abs=1e-12)


@pytest.mark.parametrize("flags,name", [(2, "libffi"), (4, "native")])
def test_engine_flags(ext, flags, name):
    t = ext.create_flags(np.ones(4), flags)
    assert name in t.engine and ext.call0(t) == 4.0


@pytest.mark.parametrize("flags,engine", [(0, None), (0, "auto"), (2, "ffi"), (2, "libffi"),
                                          (4, "native")])
def test_engine_flags_are_engine_names(ext, flags, engine):
    # the flags go through the parser engine= goes through: the same engine
    t = ext.create_flags(np.ones(4), flags)
    by_name = nt.bind(nt.Function(ext.kernel_address("sum"), "double (const DLTensor *)"),
                      np.ones(4), engine=engine)
    assert t.engine == by_name.engine and ext.call0(t) == by_name() == 4.0


def test_engine_flags_refused(ext):
    with pytest.raises(ValueError, match="^numthunk_create: NUMTHUNK_ENGINE_FFI and "
                                         "NUMTHUNK_ENGINE_NATIVE exclude each other$"):
        ext.create_flags(np.ones(4), 2 | 4)
    for bad in (8, 0x10, 0x80000000):
        with pytest.raises(ValueError, match=f"^numthunk_create: unknown flags {bad | 2:#x}$"):
            ext.create_flags(np.ones(4), bad | 2)


def test_forwarded_and_bound_scalars(ext):
    f = ext.make_affine(2.5, -1.0)
    assert str(f.csig) == "double (double)" and f.csig.names == ("x",)
    for x in (0.0, 1.5, -3.25):
        assert ext.call1(f, x) == 2.5 * x - 1.0
    # a C API thunk is an ordinary thunk: SciPy and Numba take it
    got, _ = scipy.integrate.quad(f.lowlevelcallable(), 0.0, 2.0)
    assert got == pytest.approx(2.5 * 2.0 - 2.0)

    @njit
    def twice(fn, x):
        return fn(fn(x))

    assert twice(f, 1.0) == 2.5 * (2.5 * 1.0 - 1.0) - 1.0


def test_values_are_checked_like_bind(ext):
    # the same value, the same message as numthunk.bind gives
    psum = nt.Function(ext.kernel_address("psum"), "double (const double *p, int n)")
    bad = [
        (np.arange(3, dtype=np.float32), 3),        # wrong dtype
        (np.arange(3.0), 2**31),                    # int overflow
        (np.arange(6.0)[::2], 3),                   # not contiguous
        (np.arange(3.0), 2.0),                      # float for int
    ]
    for p, n in bad:
        with pytest.raises(Exception) as from_c:
            ext.make_psum(p, n)
        with pytest.raises(Exception) as from_py:
            nt.bind(psum, p, n)
        assert type(from_c.value) is type(from_py.value)
        assert str(from_c.value) == str(from_py.value)
    assert ext.call0(ext.make_psum(np.arange(4.0), 4)) == 6.0
    # foreign objects are resolved as bind() resolves them
    v = np.arange(5.0)
    assert ext.call0(ext.make_psum(v.ctypes, 5)) == 10.0
    assert ext.call0(ext.make_psum(v.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), 5)) == 10.0
    with pytest.raises(TypeError) as from_c:
        ext.make_psum(v.astype(np.int32).ctypes.data_as(ctypes.POINTER(ctypes.c_int)), 5)
    with pytest.raises(TypeError) as from_py:
        nt.bind(psum, v.astype(np.int32).ctypes.data_as(ctypes.POINTER(ctypes.c_int)), 5)
    assert str(from_c.value) == str(from_py.value)


def test_read_only_and_device_refused_through_c(ext):
    ro = np.arange(3.0)
    ro.flags.writeable = False

    class Cuda(OnlyDL):
        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(ValueError, match="device CUDA:0"):
        ext.make_sum(Cuda(np.arange(3.0)))
    with pytest.raises(ValueError, match="numthunk_dltensor: the array is read-only"):
        ext.dltensor_sum(ro, True)
    assert ext.dltensor_sum(ro, False)[0] == 3.0


def test_bad_calls_raise(ext):
    with pytest.raises(ValueError, match=r"expected '\)'|column|\^"):
        ext.signature("double (double")
    assert str(ext.signature("double (const DLTensor *)")) == "double (const DLTensor *)"
    with pytest.raises(TypeError, match="takes 1 argument, got 2"):
        ext.create_count(2)
    with pytest.raises(ValueError, match=r"numthunk_create: nvalues is -1; it counts the "
                                         r"values, one per target parameter \(0 or more\)"):
        ext.create_count(-1)
    for bad in ([1.0, 2.0], 3, None):
        with pytest.raises(TypeError, match=rf"numthunk_dltensor: {type(bad).__name__} is "
                                            r"neither a buffer nor a DLPack exporter \(it has no "
                                            r"__dlpack__\)"):
            ext.dltensor_sum(bad)
    with pytest.raises(ValueError, match="exclude each other"):
        ext.create_flags(np.ones(2), 6)
    with pytest.raises(ValueError, match="unknown flags"):
        ext.create_flags(np.ones(2), 8)
    with pytest.raises(TypeError, match="expected a numthunk Thunk"):
        ext.call0(np.ones(2))
    t = ext.make_sum(np.ones(2))
    ext.release(t)
    assert t.released
    with pytest.raises(ValueError, match="released"):
        ext.call0(t)


def test_a_non_thunk_is_named_by_its_type_through_c(ext):
    """python/capi.c check_thunk: numthunk_address, numthunk_release and
    numthunk_rebind given anything but a Thunk raise TypeError naming the
    function and the object's type, and NULL as NULL."""
    t = ext.make_sum(np.ones(2))
    assert ext.address_of(t) == t.address
    for bad, name in ((np.ones(2), "numpy.ndarray"), (3, "int"), ("t", "str"),
                      (None, "NULL"), (nt.Signature("double (void)"), "Signature")):
        with pytest.raises(TypeError) as info:
            ext.address_of(bad)
        assert str(info.value) == f"numthunk_address: expected a numthunk Thunk, got {name}"
        if bad is None:
            continue
        with pytest.raises(TypeError) as info:
            ext.release(bad)
        assert str(info.value) == f"numthunk_release: expected a numthunk Thunk, got {name}"
        with pytest.raises(TypeError) as info:
            ext.rebind(bad, 0, np.ones(2))
        assert str(info.value) == f"numthunk_rebind: expected a numthunk Thunk, got {name}"
    assert not t.released and ext.call0(t) == 2.0


def test_null_text_and_null_value_are_refused_through_c(ext):
    """python/capi.c: numthunk_signature(NULL), numthunk_rebind(t, i, NULL) and
    numthunk_dltensor with a NULL object or out are ValueErrors naming the
    function; empty text reaches the parser, and a
    value is taken."""
    with pytest.raises(ValueError) as info:
        ext.signature(None)
    assert str(info.value) == "numthunk_signature: text is NULL"
    with pytest.raises(ValueError, match="^empty signature"):
        ext.signature("")
    assert str(ext.signature("void (void)")) == "void (void)"
    t = ext.make_sum(np.ones(2))
    for i in (0, 5):
        with pytest.raises(ValueError) as info:
            ext.rebind_null(t, i)
        assert str(info.value) == "numthunk_rebind: value is NULL"
    with pytest.raises(TypeError, match="^numthunk_rebind: expected a numthunk Thunk"):
        ext.rebind_null(np.ones(2), 0)
    assert ext.call0(t) == 2.0                 # the refused rebind changed nothing
    ext.rebind(t, 0, np.ones(3))
    assert ext.call0(t) == 3.0
    # numthunk_dltensor: a NULL object or a NULL place for the tensor
    arr = np.ones(3)
    for obj, null_out in ((None, False), (arr, True), (None, True)):
        with pytest.raises(ValueError) as info:
            ext.dltensor_null(obj, null_out)
        assert str(info.value) == "numthunk_dltensor: obj and out must not be NULL"
    assert ext.dltensor_null(arr, False) is not None


def test_create_takes_only_a_numthunk_signature(ext):
    """python/capi.c capi_create: the signature is a numthunk Signature (from
    numthunk_signature or numthunk.Signature); NULL, its text, a ctypes
    prototype, a cffi type or any other object is a TypeError before
    anything is read."""
    import cffi

    arr = np.arange(4.0)
    text = "double (const DLTensor *)"
    t = ext.create_sig(ext.signature(text), arr)
    assert ext.call0(t) == 6.0
    t = ext.create_sig(nt.Signature(text), arr)
    assert ext.call0(t) == 6.0 and str(t.target_signature) == text
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p)
    for bad in (None, text, text.encode(), proto, cffi.FFI().typeof("double(*)(void *)"),
                nt.Signature(text).numba_type(), arr, 0):
        with pytest.raises(TypeError, match=r"^numthunk_create: signature must be a numthunk "
                                            r"Signature \(numthunk_signature\(text\)\)$"):
            ext.create_sig(bad, arr)


def test_value_counts_at_their_edges_through_c(ext):
    """python/capi.c capi_create: nvalues -1, and values NULL with nvalues 1 or
    more, are refused before anything is read; 0 with NULL values gets as
    far as the count check (the target takes 1), as 0, 2 and 3 values do."""
    with pytest.raises(ValueError, match=r"^numthunk_create: nvalues is -1"):
        ext.create_null(-1)
    for n in (1, 2, 3):
        with pytest.raises(ValueError, match=rf"^numthunk_create: values is NULL but nvalues "
                                             rf"is {n}$"):
            ext.create_null(n)
    with pytest.raises(TypeError, match=r"takes 1 argument, got 0 \(pass numthunk.ARG"):
        ext.create_null(0)
    for n in (0, 2, 3):
        with pytest.raises(TypeError, match=rf"takes 1 argument, got {n} "):
            ext.create_count(n)


def test_rebind_and_lifetime_through_c(ext):
    a = np.arange(4.0)
    ref = weakref.ref(a)
    t = ext.make_sum(a)
    address = t.address
    del a
    gc.collect()
    assert ref() is not None and ext.call0(t) == 6.0
    b = np.arange(12.0).reshape(3, 4)[:, 1::2]
    ext.rebind(t, 0, b)
    assert ext.call0(t) == b.sum() and t.address == address
    t.reclaim()
    gc.collect()
    assert ref() is None                       # the old descriptor let go of it
    ext.release(t)


def _sum_fn():
    return nt.Function(nt._core._kernels()["sum"], "double (const double *x, int n)")


def test_c_rebind_resolves_a_foreign_value(ext):
    # numthunk_rebind is the C rebind: a ctypes pointer goes through the
    # package's registered resolve step as it does for Thunk.rebind
    a, b = np.arange(4.0), np.arange(4.0) * 3.0
    t = nt.bind(_sum_fn(), a, 4)
    address = t.address
    p = b.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    ext.rebind(t, 0, p)
    assert t() == b.sum() and t.address == address
    ext.rebind(t, 0, a)
    assert t() == a.sum()
    # a thunk of a user subclass that overrides rebind: the C rebind, not
    # the override
    class Mine(nt.Thunk):
        def rebind(self, key, value):
            raise AssertionError("the C API called the Python method")
    fn = _sum_fn()
    m = Mine(fn._signature, fn.address, (a, 4), fn)
    ext.rebind(m, 0, p)
    assert m() == b.sum()


class _LostRef(nt.Ref):
    __slots__ = ()

    @property
    def cell(self):
        raise AttributeError("the cell was never loaded")


def _refusals(fn):
    a = np.arange(4.0)
    released = nt.bind(fn, a, 4)
    released.release()
    return [
        (nt.bind(fn, nt.ARG, 4), 0, a),                       # forwarded
        (nt.bind(fn, a, 4), 0, nt.ARG),                       # ARG
        (nt.bind(fn, a, 4), 2, a),                            # index out of range
        (nt.bind(fn, a, 4), -1, a),
        (nt.bind(fn, a, 4), 0, np.arange(4, dtype=np.int32).ctypes.data_as(
            ctypes.POINTER(ctypes.c_int))),                   # pointee mismatch
        (nt.bind(fn, a, 4), 0, _LostRef.__new__(_LostRef)),   # the hook's own error
        (nt.bind(fn, a, 4), 1, "4"),
        (released, 0, a),
    ]


def test_c_rebind_refuses_as_thunk_rebind_does(ext):
    fn = _sum_fn()
    for (t, i, v), (t2, _, _) in zip(_refusals(fn), _refusals(fn)):
        with pytest.raises(Exception) as by_method:
            t.rebind(i, v)
        with pytest.raises(Exception) as by_capi:
            ext.rebind(t2, i, v)
        assert type(by_capi.value) is type(by_method.value), (i, v)
        assert str(by_capi.value) == str(by_method.value), (i, v)
    with pytest.raises(AttributeError, match="^the cell was never loaded$"):
        ext.rebind(nt.bind(fn, np.ones(2), 2), 0, _LostRef.__new__(_LostRef))
    with pytest.raises(TypeError, match="numthunk_rebind: expected a numthunk Thunk"):
        ext.rebind(np.ones(2), 0, 1)


def test_dltensor_function(ext):
    for arr in layouts():
        total, ndim, shape, strides = ext.dltensor_sum(arr)
        assert total == pytest.approx(arr.sum(), abs=1e-12)
        assert (ndim, shape) == (arr.ndim, arr.shape)
        if arr.size:        # an empty array's strides are whatever its exporter says
            assert strides == tuple(s // arr.itemsize for s in arr.strides)


def test_owner_keeps_the_extension_alive(ext):
    t = ext.make_sum(np.ones(3))
    assert t.target is ext


# ---------------------------------------------------------------- Cython


@pytest.mark.parametrize("k", range(6))
def test_cython_sums_descriptors(cy, k):
    arr = layouts()[k]
    t = cy.make_sum(arr)
    assert isinstance(t, nt.Thunk) and cy.is_thunk(t)
    assert cy.call0(t) == pytest.approx(arr.sum(), abs=1e-12)
    ndim, shape, strides = cy.dltensor_shape(arr)
    assert (ndim, shape) == (arr.ndim, arr.shape)
    if arr.size:
        assert strides == tuple(s // arr.itemsize for s in arr.strides)


@pytest.mark.parametrize("flags", [0, 2, 4])
def test_cython_poly_thunk_under_quad(cy, flags):
    coef = np.array([1.0, -0.5, 0.25, 2.0])
    f = cy.make_poly(coef[::-1].copy()[::-1], flags)
    x = 0.75
    assert cy.call1(f, x) == pytest.approx(np.polynomial.polynomial.polyval(x, coef))
    got, _ = scipy.integrate.quad(f.lowlevelcallable(), 0.0, 1.0)
    anti = np.polynomial.polynomial.polyint(coef)
    assert got == pytest.approx(np.polynomial.polynomial.polyval(1.0, anti))
    cy.rebind(f, 1, np.array([3.0]))
    assert cy.call1(f, x) == 3.0
    cy.release(f)
    assert f.released


def test_cython_cdef_api_kernel_through_numthunk_cython(cy):
    # the capsule name Cython writes for a const DLTensor * parameter
    assert cy.__pyx_capi__["cy_poly"].__repr__().find("double (double, DLTensor const *)") > 0
    poly = nt.cython(cy, "cy_poly")
    coef = np.array([0.0, 1.0, 1.0])
    f = nt.bind(poly, nt.ARG, OnlyDL(coef))
    got, _ = scipy.integrate.quad(f.lowlevelcallable(), 0.0, 3.0)
    assert got == pytest.approx(9.0 / 2.0 + 27.0 / 3.0)


# ---------------------------------------------------------------- headers


def test_header_compiles_as_cxx(tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    assert cxx is not None, "a C++ compiler is needed to check the headers in C++"
    src = tmp_path / "use.cpp"
    src.write_text('#include "numthunk/capi.h"\n'
                   'double f(const DLTensor *t) { int64_t i[1] = {0};\n'
                   '  return NT_DL_AT(double, t, i) + (double)nt_dl_numel(t); }\n')
    subprocess.run([cxx, "-std=c++11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                    "-I", nt.get_include(), "-I", sysconfig.get_paths()["include"], str(src)],
                   check=True, env=compiler_env())


def test_hand_made_descriptor_through_address(ext):
    # DLTensor described independently by ctypes' layout rules, filled by
    # hand (byte_offset 8, row stride 2) and passed as address(): the
    # extension's kernel reads it field by field
    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64)]

    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert ctypes.sizeof(DLTensor) == 48
    data = np.arange(6.0) ** 2
    shape = (ctypes.c_int64 * 2)(2, 2)
    strides = (ctypes.c_int64 * 2)(2, 1)
    t = DLTensor(data.ctypes.data, DLDevice(1, 0), 2, DLDataType(2, 64, 1),
                 ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                 ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 8)
    fn = nt.Function(ext.kernel_address("sum"), "double (const DLTensor *)")
    thunk = nt.bind(fn, nt.address(ctypes.addressof(t), owner=(t, shape, strides, data)))
    assert thunk() == data[1] + data[2] + data[3] + data[4]
    # a ctypes pointer is a pointer, not an array to describe: its value is bound
    thunk = nt.bind(fn, ctypes.c_void_p(ctypes.addressof(t)))
    assert thunk() == data[1] + data[2] + data[3] + data[4]
    assert ext.call0(ext.make_sum(ctypes.c_void_p(ctypes.addressof(t)))) == thunk()


@pytest.mark.parametrize("header", ["capi", "dlpack"])
def test_missing_c_include_path_says_what_to_pass(tmp_path, header):
    """A Cython module that cimports numthunk's .pxd files, built without
    numthunk.get_include() on the C include path, stops with a message
    naming the header, what to pass and the page (instead of the
    compiler's bare "No such file"); with the path, the same module builds."""
    pxd_dir = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))
    (tmp_path / "incmod.pyx").write_text(
        "# cython: language_level=3\n"
        f"from numthunk cimport {header}\n"
        "def f():\n    return 1\n")
    c_file = tmp_path / "incmod.c"
    subprocess.run([sys.executable, "-m", "cython", "-I", pxd_dir, str(tmp_path / "incmod.pyx"),
                    "-o", str(c_file)], check=True, env=compiler_env())
    cc = os.environ.get("CC", "gcc")
    base = [cc, "-fsyntax-only", "-I", sysconfig.get_paths()["include"], str(c_file)]
    out = subprocess.run(base, capture_output=True, text=True, env=compiler_env())
    assert out.returncode != 0
    first = next(line for line in out.stderr.splitlines() if "error" in line)
    assert "#error" in first and "numthunk/" in first, out.stderr
    assert ("is not on the C include path: give the C compiler the directory "
            "numthunk.get_include() returns") in first
    assert "see docs/cython.md, Building against the C API" in first
    assert os.path.isfile(os.path.join(HERE, os.pardir, "docs", "cython.md"))
    ok = subprocess.run(base + ["-I", nt.get_include()],
                        capture_output=True, text=True, env=compiler_env())
    assert ok.returncode == 0, ok.stderr


class _CAPI(ctypes.Structure):
    # the head of numthunk_CAPI (numthunk/include/numthunk/capi.h)
    _fields_ = [("version", ctypes.c_uint), ("size", ctypes.c_uint),
                ("signature", ctypes.c_void_p), ("create", ctypes.c_void_p)]


@pytest.mark.parametrize("engine_flag", [0, 0x2, 0x4])
def test_capi_needs_gil_flag_keeps_the_gil_for_the_target(engine_flag):
    # numthunk_create(..., NUMTHUNK_NEEDS_GIL): a call from Python keeps the
    # GIL for the target; without the flag (the default, with an engine flag
    # or none) the call releases it. The target is CPython's own
    # PyGILState_Check, which says which.
    get = ctypes.pythonapi["PyCapsule_GetPointer"]   # private: its argtypes are ours alone
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    api = _CAPI.from_address(get(nt._core._C_API, b"numthunk._core._C_API"))
    create = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_ssize_t, ctypes.py_object,
                               ctypes.c_uint)(api.create)
    sig = nt._core.Signature("int (void)")
    target = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    with_gil = create(sig, target, None, 0, None, 0x1 | engine_flag)
    without = create(sig, target, None, 0, None, engine_flag)
    assert with_gil() == 1, "NUMTHUNK_NEEDS_GIL: the target ran without the GIL"
    assert without() == 0
    assert (with_gil.nogil, without.nogil) == (False, True)

"""Thunks that travel by pickle, as recipes: each kind of target (a library
symbol, a @cfunc, a Cython or cffi function, a composed thunk, ...)
pickled here and called in a fresh interpreter, its values the originals;
identity kept within one pickle, cloudpickle, workers binding their own
copy. The other files of travel's: test_travel_library.py (where a
function's library and symbol are found: Function.from_library, the
loader), test_travel_refusals.py (what cannot travel, and unpickling that
fails), test_travel_copy.py (copy, deepcopy, the fields that travel),
test_travel_generated.py (generated bindings through every trip) and
test_travel_parallel.py (Dask and process pools)."""

import copy
import ctypes
import ctypes.util
import math
import pickle

import numpy as np
import pytest

import numthunk as nt

from travel import BLAS, FDDI, POLY, STRIDED, SUM, run_fresh

# ------------------------------------------------------------------ cases


def _cases(fixture_path, lib):
    """{name: (object, probe, expected)}: every kind of target and of bound
    value. ``expected`` is the probe evaluated here, after pickling."""
    import cffi
    import ntk_cy.mview
    import ntk_cy.scalar
    import ntk_travel_cffi

    import travel_kernels as k

    made = {}

    def case(name, obj, probe):
        made[name] = (obj, probe)

    p = np.array([1.0, -2.0, 0.5])
    libfn = nt.Function.from_library(fixture_path, "f_d_dpi", POLY)
    case("from_library path", nt.bind(libfn, nt.ARG, p, nt.size(p)), "t(1.5)")
    case("from_library 'm' (a Function)", nt.Function.from_library("m", "cos", "double (double)"),
         "t(0.5)")
    case("from_library CDLL", nt.bind(nt.Function.from_library(lib, "f_d_pi", SUM), p,
                                      nt.size(p)), "t()")

    cf = lib.f_d_dpi
    cf.argtypes = [ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int]
    cf.restype = ctypes.c_double
    case("ctypes CDLL function", nt.bind(cf, nt.ARG, p, nt.size(p)), "t(2.0)")
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    case("ctypes prototype((name, CDLL))", nt.bind(proto(("f_d_d", lib)), nt.ARG), "t(-4.5)")
    renamed = proto(("f_d_d", lib))
    renamed.__name__ = "f_d_pi"                 # lib has an f_d_pi: another function
    case("ctypes function renamed (travels by its symbol)", nt.bind(renamed, nt.ARG), "t(3.5)")

    ffi = cffi.FFI()
    ffi.cdef("double f_d_dpi(double x, const double *p, int n);")
    flib = ffi.dlopen(fixture_path)
    case("cffi ABI lib.f", nt.bind(flib.f_d_dpi, nt.ARG, p, nt.size(p)), "t(-1.0)")
    api = ntk_travel_cffi
    case("cffi API module function",
         nt.bind(api.ffi.addressof(api.lib, "poly"), nt.ARG, p, nt.size(p)), "t(3.0)")
    case("cffi API lib.f", nt.bind(api.lib.poly, nt.ARG, p, nt.size(p)), "t(-0.5)")

    a = np.arange(12.0).reshape(3, 4)
    out = np.zeros(3)
    rowsums = nt.cython(ntk_cy.mview, "rowsums",
                        memoryviews={0: "const double[:, ::1]", 1: "double[::1]"})
    case("cython memoryviews", nt.bind(rowsums, a, out), "(t(), t.bindings[1].tolist())[1]")
    case("cython fused cpdef", nt.bind(nt.cython("ntk_cy.scalar", "twice", fused=1), nt.ARG),
         "t(2.5)")
    case("cython cpdef (a Function)", nt.cython(ntk_cy.scalar, "hypot2"), "t(3.0, 4.0)")

    q = np.array([1.5, 0.3, 2.0, -0.2])
    case("numba cfunc", nt.bind(k.damped, nt.ARG, q, nt.size(q)), "t(0.7)")
    case("numba cfunc, qualified name", nt.bind(k.Namespace.cube, nt.ARG), "t(1.5)")

    inner = nt.bind(libfn, nt.ARG, p, nt.size(p))
    case("thunk as target", nt.bind(inner, 0.25), "t()")
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    case("thunk as function-pointer value", nt.bind(fddi, inner, 0.0, 1.0, 1000), "t()")
    case("cfunc as function-pointer value", nt.bind(fddi, k.square, nt.ARG, nt.ARG, 100),
         "t(0.0, 2.0)")
    case("cffi API lib.f as function-pointer value",
         nt.bind(fddi, api.lib.twice, nt.ARG, nt.ARG, 100), "t(0.0, 2.0)")
    case("thunk of thunk as value",
         nt.bind(fddi, nt.bind(nt.bind(k.damped, nt.ARG, q, nt.size(q)), nt.ARG),
                 nt.ARG, 1.0, 50), "t(0.0)")

    base = np.arange(30.0).reshape(5, 6)
    view = base[::2, 1::2]                      # not contiguous: the pickle copies it
    sfn = nt.Function.from_library(fixture_path, "f_d_pzzzz", STRIDED)
    st = nt.bind(sfn, nt.strided(view), nt.shape(view, 0), nt.shape(view, 1),
                 nt.stride(view, 0), nt.stride(view, 1))
    case("strided view and its markers", st, "t()")
    case("markers read the pointer's array",
         st, "all(b.obj is t.bindings[0].obj for b in t.bindings[1:])")

    x = np.array([1.0, 2.0, 3.0, 4.0])
    n, alpha = nt.ref(4, "int"), nt.ref(3.0, "double")
    blas = nt.bind(nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS),
                   n, alpha, x, nt.ref(2, "int"), nt.ref(-7, "int"))
    n.value = 2                                 # a ref travels with its current value
    alpha.value = 10.0
    case("refs with their values", blas,
         "(t(), [np.ravel(getattr(b, 'cell', b))[0].item() "
         "for b in (t.bindings[4], t.bindings[1])], t.bindings[2].tolist())[1:]")

    s = np.array([1.0, 2.0])
    rb = nt.bind(nt.Function.from_library(fixture_path, "f_d_pi", SUM), s, nt.size(s))
    rb.rebind("x", np.array([5.0, 6.0, 7.0]))  # rebind state travels as it is now
    case("rebind state", rb, "t()")
    case("rebind by name after the trip", rb,
         "(t.rebind('x', np.ones(9)), t(), t.bindings[0] is t.bindings[1].obj)[1:]")
    case("the same array, one object",
         nt.bind(nt.Function.from_library(fixture_path, "f_d_pi", SUM), s, nt.size(s)),
         "t.bindings[0] is t.bindings[1].obj")
    case("libffi engine", nt.bind(libfn, nt.ARG, p, nt.size(p), engine="ffi"),
         "(t.engine, t(0.5))")
    return made


@pytest.fixture(scope="module")
def fresh(paths, fixture_path, lib, tmp_path_factory):
    """Each case pickled here, unpickled and probed in one fresh interpreter."""
    made = _cases(fixture_path, lib)
    cases = {name: (obj, probe) for name, (obj, probe) in made.items()}
    blobs = {name: pickle.dumps(obj) for name, (obj, _probe) in made.items()}
    # expected: the probe on a copy unpickled in this process (the values
    # themselves are checked against the originals below)
    expected = {name: eval(probe, {"np": np, "t": pickle.loads(blobs[name])})
                for name, (_obj, probe) in made.items()}
    got = run_fresh(cases, paths, tmp_path_factory.mktemp("travel"))
    return made, expected, got


KINDS = [
    "from_library path", "from_library 'm' (a Function)", "from_library CDLL",
    "ctypes CDLL function", "ctypes prototype((name, CDLL))",
    "ctypes function renamed (travels by its symbol)", "cffi ABI lib.f",
    "cffi API module function", "cffi API lib.f", "cffi API lib.f as function-pointer value",
    "cython memoryviews", "cython fused cpdef", "cython cpdef (a Function)",
    "numba cfunc", "numba cfunc, qualified name", "thunk as target",
    "thunk as function-pointer value", "cfunc as function-pointer value",
    "thunk of thunk as value", "strided view and its markers",
    "markers read the pointer's array", "refs with their values", "rebind state",
    "rebind by name after the trip", "the same array, one object", "libffi engine",
]


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_in_a_fresh_interpreter(fresh, kind):
    made, expected, got = fresh
    assert set(made) == set(KINDS)
    assert got[kind] == expected[kind]


def test_round_trip_values_are_the_originals(fresh, fixture_path):
    """What the fresh interpreter computed is what the original thunk computes."""
    made, _expected, got = fresh
    p = np.array([1.0, -2.0, 0.5])

    def poly(x):
        return p[0] + p[1] * x + p[2] * x * x

    assert got["from_library path"] == poly(1.5) == made["from_library path"][0](1.5)
    # libm's cos is the oracle: NumPy may compute cos with its own SIMD code,
    # which differs in the last bit on some CPUs.
    assert got["from_library 'm' (a Function)"] == math.cos(0.5)
    assert got["ctypes CDLL function"] == poly(2.0)
    assert got["ctypes prototype((name, CDLL))"] == -4.5
    assert got["ctypes function renamed (travels by its symbol)"] == 3.5
    assert got["cffi ABI lib.f"] == poly(-1.0)
    assert got["cffi API module function"] == poly(3.0)
    assert got["cffi API lib.f"] == poly(-0.5)
    assert abs(got["cffi API lib.f as function-pointer value"] - 4.0) < 1e-9   # of 2x on [0, 2]
    assert got["cython memoryviews"] == [6.0, 22.0, 38.0]
    assert got["cython fused cpdef"] == 5.0
    assert got["cython cpdef (a Function)"] == 25.0
    assert got["numba cfunc"] == made["numba cfunc"][0](0.7)
    assert got["numba cfunc, qualified name"] == 1.5 ** 3
    assert got["thunk as target"] == poly(0.25)
    assert got["thunk as function-pointer value"] == made["thunk as function-pointer value"][0]()
    assert abs(got["cfunc as function-pointer value"] - 8.0 / 3.0) < 1e-3
    view = np.arange(30.0).reshape(5, 6)[::2, 1::2]
    assert got["strided view and its markers"] == sum(
        view[i, j] * (i + 1) for i in range(view.shape[0]) for j in range(view.shape[1]))
    assert got["markers read the pointer's array"] is True
    # n = 2, alpha = 10, incx = 2: x[0] and x[2] scaled; info = n
    assert got["refs with their values"] == ([2, 10.0], [10.0, 2.0, 30.0, 4.0])
    assert got["rebind state"] == 18.0
    assert got["rebind by name after the trip"] == (9.0, True)
    assert got["the same array, one object"] is True
    assert got["libffi engine"] == ("libffi", poly(0.5))


def test_the_worker_binds_its_own_copy(fixture_path):
    """Live binding is per process: the unpickled thunk holds its own array."""
    a = np.array([1.0, 2.0, 3.0])
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_pi", SUM), a, nt.size(a))
    t2 = pickle.loads(pickle.dumps(t))
    a[0] = 100.0
    assert t() == 105.0
    assert t2() == 6.0
    assert t2.bindings[0] is not a and t2.address != t.address
    t2.bindings[0][1] = 20.0                    # and it is live in its own process
    assert t2() == 24.0


def test_none_bound_to_a_pointer_travels_as_none(fixture_path):
    fn = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    t = nt.bind(fn, None, 0.0, 1.0, 0)
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        assert u.bindings == (None, 0.0, 1.0, 0) and math.isnan(u())


def test_one_pickle_keeps_identity_between_thunks():
    """Two thunks in one pickle sharing an array share its copy; ref cells
    too (the pickle memo)."""
    import travel_kernels as k

    p = np.array([1.0, 0.5, 2.0, 0.0])
    t1 = nt.bind(k.damped, nt.ARG, p, nt.size(p))
    t2 = nt.bind(k.damped, nt.ARG, p, nt.size(p))
    u1, u2 = pickle.loads(pickle.dumps((t1, t2)))
    assert u1.bindings[1] is u2.bindings[1] is u1.bindings[2].obj
    assert u1.target is u2.target
    u1.bindings[1][0] = 0.0
    assert u2(0.3) == 0.3 * 0.0 + 0.0


def test_cloudpickle_takes_the_same_recipe(fixture_path):
    import cloudpickle

    p = np.array([2.0, 3.0])
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_dpi", POLY), nt.ARG, p, nt.size(p))
    u = cloudpickle.loads(cloudpickle.dumps(t))
    assert u(2.0) == 8.0 and u.bindings[1] is u.bindings[2].obj


def test_unpickled_targets_are_shared_in_a_process(fixture_path):
    """Unpickling resolves a target once while a Function made from it lives."""
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    a = np.ones(3)
    blob = pickle.dumps(nt.bind(fn, a, nt.size(a)))
    u1, u2 = pickle.loads(blob), pickle.loads(blob)
    assert u1.target is u2.target
    assert u1.target.address == fn.address and u1() == 3.0

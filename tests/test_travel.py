"""Thunks that travel: Function.from_library, pickling by recipe (each kind
of target pickled here and called in a fresh interpreter), the refusals of
raw addresses, copy and deepcopy."""

import copy
import ctypes
import gc
import hashlib
import importlib.util
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numthunk as nt
from numthunk._recipe import PicklingRefused
from ntbuild import no_preload

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))
BUILD = os.path.join(HERE, "_build")

SUM = "double (const double *x, int n)"
POLY = "double (double x, const double *p, int n)"
FDDI = "double (double (*f)(double), double a, double b, int n)"
STRIDED = "double (const double *x, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0, ptrdiff_t s1)"
BLAS = "void (const int *n, const double *alpha, double *x, const int *incx, int *info)"


# ------------------------------------------------------------------ builds


def _cython_kernels():
    spec = importlib.util.spec_from_file_location(
        "ntk_build_kernels", os.path.join(HERE, "cython", "build_kernels.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path, _seconds = mod.build()
    if path not in sys.path:
        sys.path.insert(0, path)
    return path


CFFI_SOURCE = """
static double twice(double x) { return 2 * x; }
double poly(double x, const double *p, int n)
{
    double s = 0, xk = 1;
    for (int i = 0; i < n; i++) { s += p[i] * xk; xk *= x; }
    return s;
}
"""
CFFI_CDEF = "double twice(double x); double poly(double x, const double *p, int n);"


def _cffi_module():
    """A cffi API-mode module, compiled once per source under tests/_build."""
    import cffi

    key = hashlib.sha256((CFFI_SOURCE + CFFI_CDEF + sys.version).encode()).hexdigest()[:16]
    where = os.path.join(BUILD, "cffi", key)
    name = "ntk_travel_cffi"
    if not any(f.startswith(name) and f.endswith(".so") for f in os.listdir(where)) \
            if os.path.isdir(where) else True:
        ffi = cffi.FFI()
        ffi.cdef(CFFI_CDEF)
        ffi.set_source(name, CFFI_SOURCE)
        with no_preload():
            ffi.compile(tmpdir=where)
    if where not in sys.path:
        sys.path.insert(0, where)
    return where


@pytest.fixture(scope="module")
def paths():
    """Directories a fresh interpreter needs on its path: numthunk, tests/
    (travel_kernels), the Cython kernels, the cffi module."""
    return [ROOT, HERE, _cython_kernels(), _cffi_module()]


def fresh_env(paths):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]]
                                                 if env.get("PYTHONPATH") else []))
    return env


# A fresh interpreter: unpickle each case and evaluate its probe with `t`
# the unpickled object. Results (or the error) go back as a pickle.
RUNNER = textwrap.dedent("""
    import pickle, sys, traceback
    import numpy as np
    with open(sys.argv[1], "rb") as f:
        cases = pickle.load(f)
    out = {}
    for name, (data, probe) in cases.items():
        try:
            t = pickle.loads(data)
            out[name] = ("ok", eval(probe, {"np": np, "t": t}))
        except BaseException:
            out[name] = ("error", traceback.format_exc())
    with open(sys.argv[2], "wb") as f:
        pickle.dump(out, f)
""")


def run_fresh(cases, paths, tmp):
    """{name: (object, probe)} -> {name: probe's value in a fresh interpreter}."""
    blobs = {name: (pickle.dumps(obj), probe) for name, (obj, probe) in cases.items()}
    src, dst = tmp / "cases.pickle", tmp / "results.pickle"
    src.write_bytes(pickle.dumps(blobs))
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(src), str(dst)],
                          env=fresh_env(paths), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = pickle.loads(dst.read_bytes())
    errors = {k: v[1] for k, v in results.items() if v[0] != "ok"}
    assert not errors, "\n".join(f"{k}:\n{v}" for k, v in errors.items())
    return {k: v[1] for k, v in results.items()}


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

    ffi = cffi.FFI()
    ffi.cdef("double f_d_dpi(double x, const double *p, int n);")
    flib = ffi.dlopen(fixture_path)
    case("cffi ABI lib.f", nt.bind(flib.f_d_dpi, nt.ARG, p, nt.size(p)), "t(-1.0)")
    api = ntk_travel_cffi
    case("cffi API module function",
         nt.bind(api.ffi.addressof(api.lib, "poly"), nt.ARG, p, nt.size(p)), "t(3.0)")

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
         "(t.backend, t(0.5))")
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
    "ctypes CDLL function", "ctypes prototype((name, CDLL))", "cffi ABI lib.f", "cffi API module function",
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
    assert got["from_library 'm' (a Function)"] == np.cos(0.5)
    assert got["ctypes CDLL function"] == poly(2.0)
    assert got["ctypes prototype((name, CDLL))"] == -4.5
    assert got["cffi ABI lib.f"] == poly(-1.0)
    assert got["cffi API module function"] == poly(3.0)
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


# ------------------------------------------------------------ from_library


def test_from_library_spellings(fixture_path, lib, tmp_path, monkeypatch):
    direct = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    rel = os.path.relpath(fixture_path)
    for spelling in (fixture_path, pathlib.Path(fixture_path), rel, lib,
                     os.fsencode(fixture_path)):
        fn = nt.Function.from_library(spelling, "f_d_pi", SUM)
        assert fn.address == direct, spelling
        assert fn.name == "f_d_pi" and str(fn.signature) == "double (const double *, int)"
        assert fn(np.array([1.0, 2.0]), 2) == 3.0
    libm = ctypes.CDLL("libm.so.6")
    cos = ctypes.cast(libm.cos, ctypes.c_void_p).value
    for spelling in ("m", "libm.so.6", libm):
        fn = nt.Function.from_library(spelling, "cos", "double (double)")
        assert fn.address == cos and fn(0.0) == 1.0
    # a relative path is recorded as the file loaded: it unpickles from any cwd
    fn = nt.Function.from_library(rel, "f_d_pi", SUM)
    monkeypatch.chdir(tmp_path)
    assert pickle.loads(pickle.dumps(fn)).address == direct


def test_from_library_records_names_as_names(fixture_path):
    """A name the loader resolves travels as the name (the other machine's
    loader finds its own copy); a path travels as the absolute path."""
    assert nt.Function.from_library("libm.so.6", "cos", "double (double)")._recipe == \
        ("symbol", "libm.so.6", "cos")
    assert nt.Function.from_library("m", "cos", "double (double)")._recipe[1] == "libm.so.6"
    rec = nt.Function.from_library(os.path.relpath(fixture_path), "f_d_pi", SUM)._recipe
    assert rec == ("symbol", os.path.abspath(fixture_path), "f_d_pi")


def test_from_library_missing_library():
    with pytest.raises(OSError, match=r"cannot load library 'ntk_no_such_lib' for symbol "
                                      r"'f_x'.*find_library"):
        nt.Function.from_library("ntk_no_such_lib", "f_x", "double (double)")
    with pytest.raises(OSError, match=r"cannot load library './nope/libx.so' for symbol "
                                      r"'f_x': no such file '.*/nope/libx.so'"):
        nt.Function.from_library("./nope/libx.so", "f_x", "double (double)")


def test_from_library_missing_symbol(fixture_path):
    with pytest.raises(OSError) as info:
        nt.Function.from_library(os.path.relpath(fixture_path), "f_no_such", SUM)
    msg = str(info.value)
    assert "symbol 'f_no_such' not found" in msg
    assert repr(os.path.relpath(fixture_path)) in msg
    assert f"(loaded from {os.path.abspath(fixture_path)})" in msg
    with pytest.raises(OSError, match=r"symbol 'no_such_fn' not found in library 'm' "
                                      r"\(loaded from /\S*libm\.so\.6\)"):
        nt.Function.from_library("m", "no_such_fn", "double (double)")


def test_from_library_bad_arguments(fixture_path):
    with pytest.raises(TypeError, match="library must be a path, a library name or a "
                                        "ctypes.CDLL, got int"):
        nt.Function.from_library(3, "f_d_pi", SUM)
    with pytest.raises(TypeError, match="symbol must be a non-empty str"):
        nt.Function.from_library(fixture_path, b"f_d_pi", SUM)
    with pytest.raises(ValueError):
        nt.Function.from_library(fixture_path, "f_d_pi", "double (double")


def test_from_library_keeps_the_library(fixture_path):
    """The CDLL is the Function's owner and the thunk holds the Function."""
    lib = ctypes.CDLL(fixture_path)
    fn = nt.Function.from_library(lib, "f_d_pi", SUM, nogil=False)
    assert fn.owner is lib and fn.nogil is False
    a = np.array([4.0, 5.0])
    t = nt.bind(fn, a, nt.size(a))
    del fn, lib
    gc.collect()
    assert t.target.owner._name == fixture_path and t() == 9.0
    assert pickle.loads(pickle.dumps(t)).nogil is False


# ------------------------------------------------------------ refusals


def test_refuse_raw_address_target(lib):
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    a = np.ones(2)
    for obj in (nt.Function(addr, SUM), nt.bind(nt.Function(addr, SUM), a, 2),
                nt.bind(addr, a, 2, signature=SUM)):
        with pytest.raises(pickle.PicklingError,
                           match=r"raw address \(Function\(address, signature\)\).*"
                                 r"Function\.from_library\(library, symbol, signature\)"):
            pickle.dumps(obj)


def test_refuse_bound_address(fixture_path):
    a = np.ones(3)
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_pi", SUM),
                nt.address(a.ctypes.data, owner=a), 3)
    with pytest.raises(PicklingRefused, match=r"argument 1 \(x: const double \*\) is bound "
                                              r"to a raw address\(0x[0-9a-f]+\).*bind the "
                                              r"array itself"):
        pickle.dumps(t)
    with pytest.raises(pickle.PicklingError, match=r"cannot pickle address\(0x2a\)"):
        pickle.dumps(nt.address(42))


def test_refuse_bound_pointers(fixture_path):
    import cffi

    a = np.ones(3)
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    ffi = cffi.FFI()
    for ptr, what in ((a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), "LP_c_double"),
                      (ffi.cast("double *", a.ctypes.data), "_CDataBase")):
        t = nt.bind(fn, ptr, 3)
        with pytest.raises(PicklingRefused, match=rf"argument 1 \(x: const double \*\) is "
                                                  rf"bound to a {what} pointer.*NumPy array"):
            pickle.dumps(t)
    # arr.ctypes is the array: it travels as the array
    t = nt.bind(fn, a.ctypes, nt.size(a.ctypes))
    u = pickle.loads(pickle.dumps(t))
    assert isinstance(u.bindings[0], np.ndarray) and u.bindings[0] is u.bindings[1].obj
    assert u() == 3.0


def test_refuse_capsule_target(lib):
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    cap = nt._core._capsule(addr, "double (double *, int)", None)
    t = nt.bind(cap, np.ones(2), 2)
    with pytest.raises(PicklingRefused, match=r"a capsule holds a raw address; for a Cython "
                                              r"function use numthunk\.cython\(module, name\)"):
        pickle.dumps(t)


def test_refuse_ctypes_callback_and_pointer_from_address(lib, fixture_path):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    cb = proto(lambda x: x + 1.0)
    t = nt.bind(cb, nt.ARG)
    assert t(1.0) == 2.0
    with pytest.raises(PicklingRefused, match=r"ctypes callback .* Numba @cfunc defined at "
                                              r"the top level of an importable module"):
        pickle.dumps(t)
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    t = nt.bind(fddi, cb, 0.0, 1.0, 10)
    with pytest.raises(PicklingRefused, match=r"argument 1 \(f: double \(\*\)\(double\)\) is "
                                              r"bound to .*ctypes callback"):
        pickle.dumps(t)
    raw = proto(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value)
    with pytest.raises(PicklingRefused, match=r"made from an address, not a function of a "
                                              r"CDLL.*Function\.from_library"):
        pickle.dumps(nt.bind(raw, nt.ARG))


def test_refuse_cffi_callback():
    import cffi

    ffi = cffi.FFI()
    cb = ffi.callback("double(double)", lambda x: 3 * x)
    t = nt.bind(cb, nt.ARG)
    assert t(2.0) == 6.0
    with pytest.raises(PicklingRefused, match=r"Function\.from_library"):
        pickle.dumps(t)


def test_refuse_cfunc_not_importable():
    from numba import cfunc
    from numba.types import float64

    @cfunc(float64(float64))
    def local(x):
        return x

    with pytest.raises(PicklingRefused, match=r"defined inside a function.*top level of an "
                                              r"importable module"):
        pickle.dumps(nt.bind(local, nt.ARG))


def test_refuse_released_thunk(fixture_path):
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_d", "double (double)"), 1.0)
    t.release()
    with pytest.raises(pickle.PicklingError, match="released thunk"):
        pickle.dumps(t)
    with pytest.raises(ValueError, match="released thunk"):
        copy.copy(t)


def test_unpickling_a_missing_cfunc_names_it(fixture_path, tmp_path, paths):
    """The other process cannot import the @cfunc: the error says where it
    looked and why."""
    import travel_kernels as k

    data = pickle.dumps(nt.bind(k.square, nt.ARG))
    (tmp_path / "t.pickle").write_bytes(data)
    env = fresh_env([ROOT])                     # numthunk, but not tests/
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, "-c",
                           "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read())",
                           str(tmp_path / "t.pickle")], env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode != 0
    assert "cannot find the @cfunc travel_kernels.square in this process" in proc.stderr
    assert "No module named 'travel_kernels'" in proc.stderr


def test_unpickling_checks_the_signature(fixture_path):
    """A target found again with another signature is refused, not called."""
    import travel_kernels as k

    blob = pickle.dumps(nt.bind(k.square, nt.ARG))
    saved = k.square
    try:
        k.square = k.damped
        with pytest.raises(TypeError, match=r"has the signature 'double \(double, double \*, "
                                            r"int\)' in this process; the pickled thunk was "
                                            r"made for 'double \(double\)'"):
            nt._recipe._functions.clear()
            pickle.loads(blob)
    finally:
        k.square = saved


# ------------------------------------------------------------ copy


def cell_value(bound):
    """A ref()'s value as bound (the Ref, or the cell bind() made of it)."""
    return np.ravel(getattr(bound, "cell", bound))[0].item()


def test_copy_shares_the_bound_objects(fixture_path):
    a = np.array([1.0, 2.0])
    r = nt.ref(0, "int")
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    t = nt.bind(fn, a, nt.size(a))
    c = copy.copy(t)
    assert c is not t and c.address != t.address and c.target is fn
    assert c.bindings[0] is a
    a[0] = 10.0
    assert c() == t() == 12.0                   # live on the same array
    blas = nt.bind(nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS),
                   nt.ref(1, "int"), nt.ref(2.0, "double"), a, nt.ref(1, "int"), r)
    copy.copy(blas)()
    assert r.value == 1 and a[0] == 20.0
    assert copy.copy(fn) is fn and copy.deepcopy(fn) is fn


def test_deepcopy_copies_arrays_and_refs(fixture_path):
    a = np.array([1.0, 2.0, 3.0, 4.0])
    info = nt.ref(0, "int")
    blas = nt.bind(nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS),
                   nt.ref(4, "int"), nt.ref(2.0, "double"), a, nt.ref(1, "int"), info)
    d = copy.deepcopy(blas)
    d()
    assert cell_value(d.bindings[4]) == 4 and info.value == 0
    assert d.bindings[2].tolist() == [2.0, 4.0, 6.0, 8.0] and a.tolist() == [1.0, 2.0, 3.0, 4.0]
    view = np.arange(30.0).reshape(5, 6)[::2, 1::2]
    st = nt.bind(nt.Function.from_library(fixture_path, "f_d_pzzzz", STRIDED),
                 nt.strided(view), nt.shape(view, 0), nt.shape(view, 1),
                 nt.stride(view, 0), nt.stride(view, 1))
    d = copy.deepcopy(st)
    assert d() == st()
    assert all(b.obj is d.bindings[0].obj for b in d.bindings[1:])
    assert d.bindings[0].obj is not view


def test_deepcopy_shares_addresses_and_functions(fixture_path):
    import travel_kernels as k

    a = np.ones(3)
    ad = nt.address(a.ctypes.data, owner=a)
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_pi", SUM), ad, 3)
    d = copy.deepcopy(t)
    assert d.bindings[0] is ad and d() == 3.0
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    q = np.array([1.0, 0.0, 0.0, 0.0])
    inner = nt.bind(k.damped, nt.ARG, q, nt.size(q))
    for value in (k.square, inner):
        t = nt.bind(fddi, value, 0.0, 1.0, 100)
        d = copy.deepcopy(t)
        assert d() == t()
        bound = getattr(d.bindings[0], "owner", d.bindings[0])     # address() made by bind
        if value is inner:                      # a bound thunk is copied with its arrays
            assert isinstance(bound, nt.Thunk) and bound is not inner
            q[0] = 2.0
            assert d() != t()
        else:
            assert bound is k.square
    assert copy.deepcopy(ad) is not ad and copy.deepcopy(ad).owner is a


def test_out_of_band_buffers_misaligned_and_read_only(fixture_path):
    """Protocol 5 with out-of-band buffers, as Dask sends arrays: each buffer
    arrives as a read-only view of a received frame, at any alignment. The
    unpickled thunk binds an aligned, writeable copy, one per array."""
    import travel_kernels as k

    p = np.array([1.5, 0.3, 2.0, -0.2])
    a = np.arange(30.0).reshape(5, 6)           # contiguous: out of band
    thunks = [nt.bind(k.damped, nt.ARG, p, nt.size(p)),
              nt.bind(nt.Function.from_library(fixture_path, "f_d_pzzzz", STRIDED),
                      nt.strided(a), nt.shape(a, 0), nt.shape(a, 1),
                      nt.stride(a, 0), nt.stride(a, 1))]
    buffers = []
    data = pickle.dumps(thunks, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 2
    frames = [bytes(1) + bytes(b.raw()) for b in buffers]      # off by one byte
    received = [memoryview(f)[1:] for f in frames]
    u = pickle.loads(data, buffers=received)
    assert u[0](0.7) == thunks[0](0.7)
    assert u[1]() == thunks[1]()
    arr = u[0].bindings[1]
    assert arr.flags.aligned and arr.flags.writeable and arr is u[0].bindings[2].obj
    assert all(b.obj is u[1].bindings[0].obj for b in u[1].bindings[1:])
    arr[0] = 0.0                                 # live on its own copy
    assert u[0](0.7) == -0.2 * 0.7


def test_function_fields_travel(lib):
    """Parameter names (function-pointer ones too), nogil, name and fixed
    values, arrays among them, come back as they were."""
    fddi = nt.Function(ctypes.cast(lib.f_d_Fddi, ctypes.c_void_p).value, FDDI, owner=lib,
                       name="f_d_Fddi", nogil=False)
    u = pickle.loads(pickle.dumps(fddi))
    assert u.signature.names == ("f", "a", "b", "n") and u.signature == fddi.signature
    assert u.nogil is False and u.name == "f_d_Fddi" and u.address == fddi.address
    a = np.array([1.0, 2.0, 3.0])
    fixed = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value, SUM, owner=lib,
                        name="f_d_pi", fixed={0: a, 1: nt.size(a)})
    u = pickle.loads(pickle.dumps(fixed))
    assert u() == 6.0 and u.fixed[0] is u.fixed[1].obj and u.fixed[0] is not a


def test_arg_is_one_object_everywhere():
    assert pickle.loads(pickle.dumps(nt.ARG)) is nt.ARG
    assert copy.copy(nt.ARG) is nt.ARG and copy.deepcopy(nt.ARG) is nt.ARG


# ------------------------------------------------------------ names that are no functions


@pytest.mark.parametrize("symbol,why", [
    ("rec_args", r"'rec_args' is a data symbol \(STT_OBJECT\), not a function"),
    ("rec_count", r"'rec_count' is a data symbol \(STT_OBJECT\)"),
    ("f_table", r"'f_table' is a data symbol \(STT_OBJECT\)"),
    ("tls_counter", r"its address 0x[0-9a-f]+ is in no loaded object's code \(a thread-local "
                    r"variable\?\)"),
])
def test_from_library_refuses_variables(fixture_path, symbol, why):
    with pytest.raises(TypeError, match=rf"Function.from_library\(.*, '{symbol}'\): {why}.*; "
                                        "only a function can be a target"):
        nt.Function.from_library(fixture_path, symbol, "double (double)")


def test_from_library_takes_functions_and_ifuncs_not_libc_variables():
    with pytest.raises(TypeError, match="'environ' is a data symbol"):
        nt.Function.from_library("libc.so.6", "environ", "double (double)")
    # glibc's memcpy and strlen are GNU indirect functions: the loader
    # resolves them to an implementation, which is code
    memcpy = nt.Function.from_library("libc.so.6", "memcpy", "void *(void *, void *, size_t)")
    strlen = nt.Function.from_library("libc.so.6", "strlen", "size_t (const char *)")
    src, dst = np.arange(4.0), np.zeros(4)
    nt.bind(memcpy, dst, src, 32)()
    assert dst.tolist() == src.tolist()
    assert nt.bind(strlen, np.frombuffer(b"numthunk\0", dtype=np.uint8))() == 8


def test_from_library_refuses_nul_in_names(fixture_path):
    with pytest.raises(ValueError, match=r"the symbol name has a NUL byte at 3 \(the loader "
                                         "would read only the part before it\\)"):
        nt.Function.from_library(fixture_path, "f_d\0_pi", SUM)
    with pytest.raises(ValueError, match="the library name has a NUL byte"):
        nt.Function.from_library(fixture_path + "\0.so", "f_d_pi", SUM)


def test_unpickling_a_symbol_that_became_a_variable_is_refused(fixture_path):
    """The other process's library may define the name as a variable: the
    recipe is checked there as from_library checks it here."""
    with pytest.raises(TypeError, match=r"symbol 'rec_count' of library .* in this process: "
                                        r"'rec_count' is a data symbol"):
        nt._recipe._function_from_recipe(("symbol", fixture_path, "rec_count"),
                                          "double (double)", True, "rec_count", None, None)


def test_unpickling_a_cffi_function_checks_its_declared_type(paths):
    """A cffi API-mode module declares its functions' types: a pickle made
    for another signature is refused (a library symbol declares none)."""
    import ntk_travel_cffi as api

    t = nt.bind(api.lib.twice, nt.ARG)
    blob = pickle.dumps(t)
    nt._recipe._functions.clear()
    assert pickle.loads(blob)(1.5) == 3.0
    with pytest.raises(TypeError, match=r"has the signature 'double \(double\)' in this "
                                        r"process; the pickled thunk was made for "
                                        r"'float \(float\)'"):
        nt._recipe._function_from_recipe(("cffi", "ntk_travel_cffi", "twice"),
                                          "float (float)", True, "twice", None, None)


def test_pickling_a_thunk_bound_to_a_memoryview_is_refused_by_name(fixture_path):
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    t = nt.bind(fn, memoryview(np.arange(3.0)), 3)
    assert t() == 3.0
    with pytest.raises(PicklingRefused, match=r"argument 1 \(x: const double \*\) is bound to a "
                                              r"memoryview, which pickle cannot carry; bind a "
                                              "NumPy array"):
        pickle.dumps(t)
    assert pickle.loads(pickle.dumps(nt.bind(fn, np.arange(3.0), 3)))() == 3.0


class LabelledThunk(nt.Thunk):
    """A subclass with a __dict__, importable: pickle finds it by name."""


def test_a_subclass_keeps_its_class_and_attributes(fixture_path):
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    a = np.arange(4.0)
    t = LabelledThunk(fn.signature, fn.address, (a, nt.size(a)), fn)
    t.label = ["four"]
    shallow, deep, pickled = copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))
    for c in (shallow, deep, pickled):
        assert type(c) is LabelledThunk and c is not t
        assert c.label == ["four"] and c() == 6.0
    assert shallow.bindings[0] is a and shallow.label is t.label
    assert deep.bindings[0] is not a and deep.label is not t.label

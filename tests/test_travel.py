"""Thunks that travel: Function.from_library, pickling by recipe (each kind
of target pickled here and called in a fresh interpreter), the refusals of
raw addresses, copy and deepcopy."""

import copy
import ctypes
import ctypes.util
import gc
import hashlib
import importlib.util
import math
import os
import pathlib
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import numthunk as nt
from numthunk._recipe import PicklingRefused

from conftest import ENGINES
from ntbuild import BUILD, no_preload

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))

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


def test_library_paths_without_dlinfo_come_from_the_cdll_name(fixture_path, monkeypatch):
    # a C library without dlinfo (the loader's own answer): the path is the
    # name the CDLL was opened with, absolute where it names a file by path;
    # the process itself (no name) and a bare name stay as they are
    from numthunk import _loader
    dladdr, _dlinfo, dladdr1, phdr = _loader._dl()
    monkeypatch.setattr(_loader, "_dl_functions", (dladdr, None, dladdr1, phdr))
    assert _loader.loaded_path(ctypes.CDLL(None)) is None
    rel = os.path.relpath(fixture_path)
    assert os.sep in rel
    assert _loader.loaded_path(ctypes.CDLL(rel)) == os.path.abspath(fixture_path)
    assert _loader.loaded_path(ctypes.CDLL("libm.so.6")) == "libm.so.6"


_DL_NAMES = ("dladdr", "dlinfo", "dladdr1", "dl_iterate_phdr")


def _cdll_hiding(hidden):
    """A ctypes.CDLL whose libraries lack the loader functions hidden(name)
    names: as a C library without them (glibc before 2.34 keeps them in
    libdl; musl has no dladdr1 or dlinfo)."""
    class CDLL(ctypes.CDLL):
        def __getattr__(self, sym):
            if sym in hidden(self._name):
                raise AttributeError(sym)
            return super().__getattr__(sym)
    return CDLL


def test_loader_functions_come_from_libdl_or_not_at_all(fixture_path, monkeypatch):
    # each of the four is taken from the first of the C library and libdl
    # that has it, and is None where neither has it; without them the
    # loader's answers degrade to what the CDLL says of itself
    from numthunk import _loader
    libdl = ctypes.util.find_library("dl")
    assert libdl is not None
    lib = ctypes.CDLL(fixture_path)
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    path = _loader.loaded_path(lib)          # as the C library's dlinfo says
    monkeypatch.setattr(_loader, "_dl_functions", None)
    monkeypatch.setattr(_loader.ctypes, "CDLL",
                        _cdll_hiding(lambda name: _DL_NAMES if name is None else ()))
    found = _loader._dl()
    assert all(f is not None for f in found)
    assert [f.__name__ for f in found] == list(_DL_NAMES)
    assert _loader.loaded_path(lib) == path
    # libdl without dlinfo and dladdr1, the C library without any
    monkeypatch.setattr(_loader, "_dl_functions", None)
    monkeypatch.setattr(_loader.ctypes, "CDLL", _cdll_hiding(
        lambda name: _DL_NAMES if name is None else ("dlinfo", "dladdr1")))
    dladdr, dlinfo, dladdr1, phdr = _loader._dl()
    assert dlinfo is None and dladdr1 is None and dladdr is not None and phdr is not None
    assert _loader.dladdr(addr)[1] == "f_d_pi"
    # none at all: no path from the loader, no symbol check, no lookup
    monkeypatch.setattr(_loader, "_dl_functions", None)
    monkeypatch.setattr(_loader.ctypes, "CDLL", _cdll_hiding(lambda name: _DL_NAMES))
    assert _loader._dl() == (None, None, None, None)
    assert _loader.dladdr(addr) is None
    assert _loader.code_symbol_problem(addr) is None
    rel = os.path.relpath(fixture_path)
    assert _loader.loaded_path(ctypes.CDLL(rel)) == os.path.abspath(fixture_path)


def test_a_dladdr_answer_without_a_file_name_is_no_answer(fixture_path, monkeypatch):
    # a C library's dladdr may report success and leave dli_fname NULL (the
    # fields are its to fill): the loader takes that as not found, as it
    # takes a failure, and a found one as the file and symbol
    from numthunk import _loader
    real = _loader._dl()
    addr = ctypes.cast(ctypes.CDLL(fixture_path).f_d_pi, ctypes.c_void_p).value
    assert _loader.dladdr(addr)[1] == "f_d_pi"
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_loader._DlInfo))
    for answer in (1, 0):
        quiet = proto(lambda _address, _info, answer=answer: answer)   # fills nothing
        monkeypatch.setattr(_loader, "_dl_functions", (quiet, *real[1:]))
        assert _loader.dladdr(addr) is None, answer


def _lowest_mapping(path):
    """The lowest address this process maps the file at (/proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        return min(int(line.split("-")[0], 16) for line in maps
                   if line.rstrip().endswith(" " + path))


def _load_segments(path, base):
    """[(start, end, executable)] of the PT_LOAD program headers of an ELF64
    file, read from the file itself, relocated by base."""
    with open(path, "rb") as f:
        elf = f.read()
    assert elf[:4] == b"\x7fELF" and elf[4] == 2, "an ELF64 file"
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    out = []
    for k in range(phnum):
        p_type, p_flags, _off, vaddr, _paddr, _filesz, memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", elf, phoff + k * phentsize)
        if p_type == 1:                                   # PT_LOAD
            out.append((base + vaddr, base + vaddr + memsz, bool(p_flags & 1)))
    return out


def test_segments_are_found_by_their_bounds(fixture_path):
    # _segment_of (dl_iterate_phdr) against the file's own program headers:
    # each loaded segment holds its first and last byte, and neither the
    # byte before it nor the one past its end (unless a neighbour does)
    from numthunk import _loader
    lib = ctypes.CDLL(fixture_path)
    info = _loader._DlInfo()
    assert _loader._dl()[0](ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value,
                            ctypes.byref(info))
    segments = _load_segments(fixture_path, info.dli_fbase)
    assert any(x for _s, _e, x in segments) and not all(x for _s, _e, x in segments)
    name = os.fsdecode(info.dli_fname)
    for start, end, executable in segments:
        assert _loader._segment_of(start) == (name, executable)
        assert _loader._segment_of(end - 1) == (name, executable)
        for outside in (start - 1, end):
            if not any(s <= outside < e for s, e, _x in segments):
                found = _loader._segment_of(outside)
                assert found is None or found[0] != name, hex(outside)


def test_the_segments_of_the_program_itself_are_named_the_program():
    # the loader gives the executable no name: its segments, read from the
    # file and placed where /proc/self/maps shows it, are "the program"
    from numthunk import _loader
    exe = os.path.realpath(sys.executable)
    placed = _load_segments(exe, 0)
    base = _lowest_mapping(exe) - (min(s for s, _e, _x in placed) & ~0xFFF)
    for start, end, executable in _load_segments(exe, base):
        assert _loader._segment_of(start) == ("the program", executable)
        assert _loader._segment_of(end - 1) == ("the program", executable)


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


def test_from_library_file_that_is_no_library(fixture_path, tmp_path):
    text = tmp_path / "libntk_text.so"
    text.write_text("not a shared library\n")
    with pytest.raises(OSError, match=rf"^Function\.from_library\({re.escape(repr(str(text)))}, "
                                      rf"'f_d_d'\): cannot load library "
                                      rf"{re.escape(repr(str(text)))} for symbol 'f_d_d': .*"
                                      r"(invalid ELF header|file too short)"):
        nt.Function.from_library(str(text), "f_d_d", "double (double)")
    lib = tmp_path / "libntk_copy.so"
    lib.write_bytes(pathlib.Path(fixture_path).read_bytes())
    assert nt.Function.from_library(str(lib), "f_d_d", "double (double)")(1.5) == 1.5


CTOR_SOURCE = """
#include <stdio.h>
#include <stdlib.h>

/* writes "ran" to the file $NTK_CTOR_MARK names, if set, when loaded */
__attribute__((constructor)) static void mark(void)
{
    const char *path = getenv("NTK_CTOR_MARK");
    FILE *f = path != NULL ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fputs("ran", f);
        fclose(f);
    }
}

double ctor_twice(double x) { return 2 * x; }
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_unpickling_opens_the_library_and_runs_its_constructors(tmp_path, engine):
    """What docs/travel.md warns of: pickle.loads alone, nothing called,
    loads the library the pickle names, and its constructor runs; the
    warning stands before the page's first example, and in from_library's
    help."""
    from ntbuild import compile_shared

    src = tmp_path / "ctor.c"
    src.write_text(CTOR_SOURCE)
    path = compile_shared(str(src), "ntk_ctor")
    fn = nt.Function.from_library(path, "ctor_twice", "double (double)")
    data = pickle.dumps((fn, nt.bind(fn, 1.5, engine=engine)))
    mark = tmp_path / "mark"
    env = dict(os.environ, NTK_CTOR_MARK=str(mark),
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c",
                           "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                          input=data, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert mark.read_text() == "ran"
    mark.unlink()
    proc = subprocess.run([sys.executable, "-c", "import numthunk"], env=env, timeout=120)
    assert proc.returncode == 0 and not mark.exists()      # the pickle, not the import
    with open(os.path.join(HERE, os.pardir, "docs", "travel.md")) as f:
        page = f.read()
    warning = page.index("```{warning}\nUnpickling a thunk or a `Function` runs code")
    assert warning < page.index("```python")
    assert "runs its constructors" in nt.Function.from_library.__doc__


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


def test_address_owned_by_a_function_travels_only_as_that_function(lib, fixture_path):
    """A function-pointer parameter bound to a Function with fixed
    parameters travels as that Function; an address() of another function
    that merely names it as owner is a raw address, refused."""
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    p = np.array([1.0, 2.0])
    poly = nt.Function(ctypes.cast(lib.f_d_dpi, ctypes.c_void_p).value, POLY, owner=lib,
                       name="f_d_dpi", fixed={1: p, 2: nt.size(p)})
    t = nt.bind(fddi, poly, 0.0, 1.0, 100)
    assert pickle.loads(pickle.dumps(t))() == t() == pytest.approx(2.0)
    other = nt.Function.from_library(fixture_path, "f_d_d", "double (double a)")
    t = nt.bind(fddi, nt.address(other.address, owner=poly), 0.0, 1.0, 100)
    assert t() == pytest.approx(0.5)
    with pytest.raises(PicklingRefused, match=r"argument 1 \(f: double \(\*\)\(double\)\) is "
                                              r"bound to a raw address\(0x[0-9a-f]+\)"):
        pickle.dumps(t)


def test_a_function_owned_by_a_cdll_travels_by_the_symbol_at_its_address(lib):
    """owner=CDLL: the Function's name if the library gives that name its
    address, else the exported symbol the loader finds there; an address
    that starts no symbol, or an owner numthunk cannot name, is refused."""
    addr = ctypes.cast(lib.f_d_d, ctypes.c_void_p).value
    for name in ("f_d_d", None, "f_d_pi", "no_such_symbol"):
        fn = nt.Function(addr, "double (double a)", owner=lib, name=name)
        u = pickle.loads(pickle.dumps(fn))
        assert u.address == addr and u(3.5) == 3.5
        t = pickle.loads(pickle.dumps(nt.bind(fn, nt.ARG)))
        assert t(-2.0) == -2.0
    heap = np.zeros(2)
    for where in (addr + 1, heap.ctypes.data):    # inside f_d_d; in no library
        inside = nt.Function(where, "double (double a)", owner=lib, name="f_d_d")
        with pytest.raises(PicklingRefused, match=r"numthunk does not know how to name a "
                                                  r"function owned by a 'CDLL' object"):
            pickle.dumps(inside)
    keep_like = nt.Function(addr, "double (double a)", owner=lib, name="f_d_d")
    for owner in (types.SimpleNamespace(f_d_d=lib.f_d_d), [keep_like, lib], (keep_like,),
                  (lib, keep_like), (1, 2)):
        fn = nt.Function(addr, "double (double a)", owner=owner, name="f_d_d")
        with pytest.raises(PicklingRefused, match=rf"numthunk does not know how to name a "
                                                  rf"function owned by a "
                                                  rf"'{type(owner).__name__}' object"):
            pickle.dumps(fn)


def test_an_address_owned_by_no_function_is_a_raw_address(fixture_path):
    # owner= keeps the memory alive; it names nothing another process has
    a = np.ones(3)
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    t = nt.bind(fn, nt.address(a.ctypes.data, owner=a), 3)
    assert t() == 3.0
    with pytest.raises(PicklingRefused, match=r"argument 1 \(x: const double \*\) is bound to "
                                              r"a raw address\(0x[0-9a-f]+\)"):
        pickle.dumps(t)


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


def test_refuse_capsule_target(lib, fixture_path):
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    cap = nt._core._capsule(addr, "double (double *, int)", None)
    t = nt.bind(cap, np.ones(2), 2)
    with pytest.raises(PicklingRefused, match=r"a capsule holds a raw address; for a Cython "
                                              r"function use numthunk\.cython\(module, name\)"):
        pickle.dumps(t)
    # as a function-pointer value: refused as the capsule it is, not as a raw address
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    cap = nt._core._capsule(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, "double (double)",
                            None)
    t = nt.bind(fddi, cap, 0.0, 1.0, 10)
    assert t() == pytest.approx(0.5)
    with pytest.raises(PicklingRefused, match=r"^cannot pickle the thunk: argument 1 \(f: double "
                                              r"\(\*\)\(double\)\) is bound to the function at "
                                              r"0x[0-9a-f]+ 'double \(double\)': a capsule holds"):
        pickle.dumps(t)


def test_refuse_keep(fixture_path):
    # keep= holds what the target reads through pointers set up here: the
    # refusal says so, for a library function that would travel without it
    fn = nt.Function.from_library(fixture_path, "f_d_pi", "double (const double *, int)")
    a = np.ones(3)
    assert pickle.loads(pickle.dumps(nt.bind(fn, a, 3)))() == 3.0
    t = nt.bind(fn, a, 3, keep=[a])
    with pytest.raises(PicklingRefused, match=r"it was bound with keep=, which holds memory "
                                              r"the target reads through pointers"):
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

    with pytest.raises(PicklingRefused, match=r"the @cfunc test_refuse_cfunc_not_importable"
                                              r"\.<locals>\.local is defined inside a function"
                                              r".*top level of an importable module$"):
        pickle.dumps(nt.bind(local, nt.ARG))
    # a function made by exec without __name__ in its globals has no module;
    # one whose __qualname__ was emptied, no name
    for attr, value, msg in (("__module__", None, r"the @cfunc test_refuse_cfunc_not_importable"
                                                  r"\.<locals>\.local is in no module \(its "
                                                  r"__module__ is None\)"),
                             ("__qualname__", "", r"the @cfunc <.*> has no __qualname__")):
        @cfunc(float64(float64))
        def local(x):
            return x

        setattr(local._pyfunc, attr, value)
        with pytest.raises(PicklingRefused, match=msg + r".*top level of an importable module$"):
            pickle.dumps(nt.bind(local, nt.ARG))


def test_refuse_released_thunk(fixture_path):
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_d", "double (double)"), 1.0)
    t.release()
    with pytest.raises(pickle.PicklingError, match="released thunk"):
        pickle.dumps(t)
    with pytest.raises(ValueError, match="released thunk"):
        copy.copy(t)
    with pytest.raises(ValueError, match=r"^cannot copy a released thunk \(see "
                                         r"docs/lifetime\.md\)$"):
        copy.deepcopy(t)


def test_refuse_a_function_owned_by_an_object_numthunk_cannot_name(lib, fixture_path):
    addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
    for owner, what in (([lib], "list"), (np.ones(2), "ndarray"), ("libfixture", "str")):
        fn = nt.Function(addr, SUM, owner=owner, name="f_d_pi")
        with pytest.raises(PicklingRefused, match=rf"^cannot pickle the function f_d_pi "
                                                  rf"'double \(const double \*, int\)': "
                                                  rf"numthunk does not know how to name a "
                                                  rf"function owned by a '{what}' object in "
                                                  rf"another process; name the function instead"):
            pickle.dumps(fn)
    named = nt.Function(addr, SUM, owner=lib, name="f_d_pi")
    assert pickle.loads(pickle.dumps(nt.bind(named, np.ones(3), 3)))() == 3.0


def test_refuse_a_thunk_whose_target_is_no_function(lib):
    addr = ctypes.cast(lib.f_d_d, ctypes.c_void_p).value
    sig = nt.Signature("double (double a)")
    t = nt.Thunk(sig, addr, (2.0,), lib)
    assert t() == 2.0
    with pytest.raises(PicklingRefused, match=r"^cannot pickle the thunk: its target is a CDLL, "
                                              r"not a numthunk\.Function$"):
        pickle.dumps(t)
    fn = nt.Function(addr, sig, owner=lib, name="f_d_d")
    assert pickle.loads(pickle.dumps(nt.Thunk(sig, addr, (2.0,), fn)))() == 2.0


CFUNC_MODULE = """\
from numba import cfunc, types


@cfunc(types.float64(types.float64))
def sq(x):
    return x * x


@cfunc(types.float64(types.float64))
def cube(x):
    return x * x * x


def plain(x):
    return x
"""


def test_a_cfunc_travels_only_as_the_module_attribute_it_is(tmp_path, monkeypatch):
    """Pickling finds the @cfunc again by its module and name (refused when
    that name is gone or is another @cfunc); unpickling checks the same."""
    (tmp_path / "ntk_travel_cfmod.py").write_text(CFUNC_MODULE)
    spec = importlib.util.spec_from_file_location("ntk_travel_cfmod",
                                                  tmp_path / "ntk_travel_cfmod.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "ntk_travel_cfmod", mod)    # imported until the test ends
    spec.loader.exec_module(mod)
    sq = mod.sq
    label = r"^cannot pickle the thunk: the function sq 'double \(double\)': "
    del mod.sq
    with pytest.raises(PicklingRefused, match=label + r"the @cfunc cannot be found as "
                                              r"ntk_travel_cfmod\.sq \(module "
                                              r"'ntk_travel_cfmod' has no attribute 'sq'\); "
                                              r"define it at the top level"):
        pickle.dumps(nt.bind(sq, nt.ARG))
    mod.sq = mod.cube
    with pytest.raises(PicklingRefused, match=label + r"ntk_travel_cfmod\.sq is not this "
                                              r"@cfunc \(it was redefined or made by a "
                                              r"factory\)"):
        pickle.dumps(nt.bind(sq, nt.ARG))
    mod.sq = sq
    blob = pickle.dumps(nt.bind(sq, nt.ARG))
    back = pickle.loads(blob)
    assert back(3.0) == 9.0
    del back
    gc.collect()                        # no unpickled Function of it is left to reuse
    mod.sq = mod.plain
    with pytest.raises(TypeError, match=r"^ntk_travel_cfmod\.sq is a function, not a Numba "
                                        r"@cfunc, in this process$"):
        pickle.loads(blob)
    del mod.sq
    with pytest.raises(AttributeError, match=r"^cannot find the @cfunc ntk_travel_cfmod\.sq in "
                                             r"this process \(AttributeError: module "
                                             r"'ntk_travel_cfmod' has no attribute 'sq'\); a "
                                             r"@cfunc travels by name"):
        pickle.loads(blob)


def test_refuse_cffi_pointers_to_code_under_no_exported_name(fixture_path, lib, paths):
    import cffi
    import ntk_travel_cffi as api

    ffi = cffi.FFI()
    # in the cffi module, but at an address no name of its lib has (its
    # module init function); in a library, one byte into f_d_d: never called
    init = ctypes.cast(ctypes.CDLL(api.__file__).PyInit_ntk_travel_cffi, ctypes.c_void_p).value
    f_d_d = ctypes.cast(lib.f_d_d, ctypes.c_void_p).value
    label = r"^cannot pickle the thunk: the function at 0x[0-9a-f]+ 'double \(double\)': "
    with pytest.raises(PicklingRefused, match=label + r"the function is in the cffi module "
                                              r"ntk_travel_cffi, but no name of "
                                              r"ntk_travel_cffi\.lib has its address$"):
        pickle.dumps(nt.bind(ffi.cast("double(*)(double)", init), nt.ARG))
    with pytest.raises(PicklingRefused, match=label + r"the function is in \S+ but not under an "
                                              r"exported name there; use Function\.from_library"
                                              r"\(library, symbol, ffi\.typeof\(f\)\)$"):
        pickle.dumps(nt.bind(ffi.cast("double(*)(double)", f_d_d + 1), nt.ARG))
    # the library's first byte (its ELF header): in the file, under no symbol
    base = _lowest_mapping(os.path.realpath(fixture_path))
    assert nt._loader.dladdr(base)[1] is None
    with pytest.raises(PicklingRefused, match=label + r"the function is in \S+ but not under an "
                                              r"exported name there"):
        pickle.dumps(nt.bind(ffi.cast("double(*)(double)", base), nt.ARG))
    # the exact addresses of an exported function and of a lib function travel
    assert pickle.loads(pickle.dumps(nt.bind(ffi.cast("double(*)(double)", f_d_d), 2.5)))() == 2.5
    twice = api.ffi.addressof(api.lib, "twice")
    assert pickle.loads(pickle.dumps(nt.bind(ffi.cast("double(*)(double)", twice), 2.5)))() == 5.0


CFFI_OTHER_CDEF = "double poly(double x, const double *p, int n);"


def test_a_cffi_function_is_located_past_modules_that_only_look_like_its_module(paths,
                                                                             monkeypatch):
    """The module of a cffi function found by its file is an imported cffi
    module with ffi and lib: a module without a file, one of that file
    without lib, or whose ffi is no cffi one, is passed over."""
    import ntk_travel_cffi as api

    fakes = {"nt_fake_no_file": dict(ffi=api.ffi, lib=api.lib),
             "nt_fake_no_lib": dict(__file__=api.__file__, ffi=api.ffi),
             "nt_fake_ffi": dict(__file__=api.__file__, ffi=object(), lib=api.lib)}
    for name, attrs in fakes.items():          # imported after the real one
        mod = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(mod, k, v)
        monkeypatch.setitem(sys.modules, name, mod)
    poly = api.ffi.addressof(api.lib, "poly")
    assert nt._recipe.locate(nt._api.as_function(poly)) == ("cffi", "ntk_travel_cffi", "poly")
    p = np.array([1.0, 2.0])
    t = pickle.loads(pickle.dumps(nt.bind(poly, nt.ARG, p, nt.size(p))))
    assert t(3.0) == 7.0


def test_unpickling_where_the_library_or_name_is_gone_says_so(fixture_path, tmp_path, paths):
    """Another process without the library file, with a library of that path
    that lacks the symbol, or with a cffi module of that name that lacks the
    function: each refusal names what is missing."""
    import cffi

    from ntbuild import compile_shared

    gone, other = tmp_path / "libntk_gone.so", tmp_path / "libntk_other.so"
    for where in (gone, other):
        where.write_bytes(pathlib.Path(fixture_path).read_bytes())
    blobs = {}
    for key, where in (("gone", gone), ("other", other)):
        fn = nt.Function.from_library(str(where), "f_d_d", "double (double)")
        assert fn(1.5) == 1.5
        blobs[key] = pickle.dumps(nt.bind(fn, nt.ARG))
    import ntk_travel_cffi as api
    blobs["cffi"] = pickle.dumps(nt.bind(api.lib.twice, nt.ARG))
    # the files change under new inodes: this process keeps its mappings
    os.remove(gone)
    interop = compile_shared(os.path.join(HERE, "fixtures", "interop.c"), "interop")
    (tmp_path / "swap.so").write_bytes(pathlib.Path(interop).read_bytes())
    os.replace(tmp_path / "swap.so", other)
    # a cffi module of the same name without twice()
    ffi = cffi.FFI()
    ffi.cdef(CFFI_OTHER_CDEF)
    ffi.set_source("ntk_travel_cffi", CFFI_SOURCE)
    with no_preload():
        ffi.compile(tmpdir=str(tmp_path / "cffi"))
    for key, blob in blobs.items():
        (tmp_path / f"{key}.pickle").write_bytes(blob)
    code = textwrap.dedent("""
        import pickle, sys
        for key in ("gone", "other", "cffi"):
            try:
                pickle.loads(open(f"{key}.pickle", "rb").read())
                print(key, "loaded")
            except Exception as exc:
                print(key, type(exc).__name__, exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code],
                          env=fresh_env([ROOT, str(tmp_path / "cffi")]), capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert out["gone"].startswith(f"OSError cannot load library {str(gone)!r} for symbol "
                                  "'f_d_d' in this process: "), out["gone"]
    assert out["other"] == (f"OSError symbol 'f_d_d' not found in library {str(other)!r} "
                            f"(loaded from {other}) in this process"), out["other"]
    assert out["cffi"] == ("AttributeError the cffi module ntk_travel_cffi has no function "
                           "'twice' in this process"), out["cffi"]
    # in this process, which has them, the same pickles load
    for key in ("other", "cffi"):
        assert pickle.loads(blobs[key])(2.0) == (2.0 if key == "other" else 4.0)


def test_unpickling_an_unknown_recipe_is_refused(fixture_path):
    fn = nt.Function.from_library(fixture_path, "f_d_d", "double (double)")
    blob = pickle.dumps(nt.bind(fn, 2.0))
    assert blob.count(b"symbol") == 1 and pickle.loads(blob)() == 2.0
    # a pickle made by a numthunk that names its targets another way
    with pytest.raises(pickle.UnpicklingError, match=r"^unknown numthunk target recipe "
                                                     r"'symbal'$"):
        pickle.loads(blob.replace(b"symbol", b"symbal"))


def test_unpickling_a_subclass_that_is_no_longer_a_thunk_is_refused(fixture_path, monkeypatch):
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    a = np.arange(4.0)
    blob = pickle.dumps(LabelledThunk(fn.signature, fn.address, (a, nt.size(a)), fn))
    assert type(pickle.loads(blob)) is LabelledThunk
    # the class the pickle names is something else in this process
    monkeypatch.setattr(sys.modules[LabelledThunk.__module__], "LabelledThunk", dict)
    with pytest.raises(pickle.UnpicklingError, match=r"^<class 'dict'> is not a subclass of "
                                                     r"numthunk\.Thunk$"):
        pickle.loads(blob)


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
        with pytest.raises(TypeError, match=r"^the target square has the signature 'double "
                                            r"\(double, double \*, int\)' in this process; the "
                                            r"pickled thunk was made for 'double \(double\)'"):
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
    # aligned, writeable buffers (bytearrays): bound as they come, no copy
    frames = [bytearray(b.raw()) for b in buffers]
    u = pickle.loads(data, buffers=frames)
    arr = u[0].bindings[1]
    assert np.shares_memory(arr, np.frombuffer(frames[0], dtype=np.uint8))
    assert np.shares_memory(u[1].bindings[0].obj, np.frombuffer(frames[1], dtype=np.uint8))
    frames[0][:8] = np.float64(0.0).tobytes()
    assert u[0](0.7) == -0.2 * 0.7 and u[1]() == thunks[1]()
    # aligned but read-only (bytes), or writeable but misaligned: copied
    for frames in ([bytes(b.raw()) for b in buffers],
                   [memoryview(bytearray(1) + bytearray(b.raw()))[1:] for b in buffers]):
        u = pickle.loads(data, buffers=frames)
        arr = u[0].bindings[1]
        assert arr.flags.aligned and arr.flags.writeable and arr is u[0].bindings[2].obj
        assert not np.shares_memory(arr, np.frombuffer(frames[0], dtype=np.uint8))
        assert u[0](0.7) == thunks[0](0.7) and u[1]() == thunks[1]()


def test_function_fields_travel(lib):
    """Parameter names (function-pointer ones too), nogil, name and fixed
    values, arrays among them, come back as they were."""
    fddi = nt.Function(ctypes.cast(lib.f_d_Fddi, ctypes.c_void_p).value, FDDI, owner=lib,
                       name="f_d_Fddi", nogil=False)
    u = pickle.loads(pickle.dumps(fddi))
    assert u.signature.names == ("f", "a", "b", "n") and u.signature == fddi.signature
    assert u.nogil is False and u.name == "f_d_Fddi" and u.address == fddi.address
    assert type(u.owner) is ctypes.CDLL and u.owner._name == lib._name   # keeps it loaded
    pt = nt.Function(fddi.address, "double (const struct pt *p)", owner=lib, name="f_d_Fddi",
                     structs={"pt": 16})
    u = pickle.loads(pickle.dumps(pt))
    assert u.structs == pt.structs == {"pt": 16} and u.signature == pt.signature
    a = np.array([1.0, 2.0, 3.0])
    fixed = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value, SUM, owner=lib,
                        name="f_d_pi", fixed={0: a, 1: nt.size(a)})
    u = pickle.loads(pickle.dumps(fixed))
    assert u() == 6.0 and u.fixed[0] is u.fixed[1].obj and u.fixed[0] is not a


@pytest.mark.parametrize("text", [
    "double (double (*const f)(double), int n)",
    "double (double (*f)(double (*)(int)), int n)",
    "double (double (*const f)(double (*const)(int)), int n)",
    "void (const double *const p, double (*const)(double), int last)",
    "void (int, double (*g)(double), const struct pt *const q)",
])
def test_parameter_names_travel_beside_any_function_pointer(lib, text):
    """Every name comes back, beside function pointers that are const,
    that take function pointers, or that have no name of their own."""
    sig = nt.Signature(text)
    fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, sig, owner=lib,
                     name="f_d_d")
    u = pickle.loads(pickle.dumps(fn))
    assert u.signature == sig and u.signature.names == sig.names
    assert str(u.signature) == str(sig)


def test_the_cache_of_signature_texts_is_bounded(lib):
    """Named signature texts are remembered for 1024 signatures, no more."""
    nt._recipe._sig_texts.clear()
    addr = ctypes.cast(lib.f_d_d, ctypes.c_void_p).value
    for k in range(1100):
        fn = nt.Function(addr, f"double (double x{k})", owner=lib, name="f_d_d")
        u = pickle.loads(pickle.dumps(fn))
        assert u.signature.names == (f"x{k}",)
        assert len(nt._recipe._sig_texts) == min(k + 1, 1024)


def test_a_function_pickle_names_one_global_and_carries_c_text(lib):
    """The signature travels as C text, with its parameter names when it
    has them: the one class or function a Function's pickle names is the
    rebuilding function (no numthunk class the other side must import)."""
    import pickletools

    for text in ("double (const double *, int)", SUM):
        fn = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value, text, owner=lib,
                         name="f_d_pi")
        data = pickle.dumps(fn)
        ops = list(pickletools.genops(data))
        strings = [arg for op, arg, _ in ops if op.name.endswith("UNICODE")]
        globals_ = [op for op, _, _ in ops if "GLOBAL" in op.name]
        assert len(globals_) == 1 and strings[:2] == ["numthunk._recipe", "_function_from_recipe"]
        carried = fn.__reduce__()[1][1]
        assert type(carried) is str and carried in strings
        again = nt.Signature(carried)
        assert again == fn.signature and again.names == fn.signature.names
        u = pickle.loads(data)
        assert u.signature == fn.signature and u.signature.names == fn.signature.names


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


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "aarch64"),
                    reason="the fixture's label is written in x86-64 and AArch64 assembly")
def test_from_library_takes_a_code_symbol_without_a_type():
    """An assembly label without .type is an STT_NOTYPE symbol: in a code
    segment it is a function, taken and called (a data symbol of no type
    would not be in one)."""
    import ntbuild

    path = ntbuild.compile_shared(os.path.join(os.path.dirname(__file__), "fixtures",
                                               "notype.c"), "notype")
    out = subprocess.run(["readelf", "--dyn-syms", "-W", path], capture_output=True,
                         text=True)
    if out.returncode == 0:             # binutils, where it is: the fixture is what it says
        assert re.search(r"\bNOTYPE\s+GLOBAL\s+DEFAULT\s+\d+\s+nt_notype_twice\b",
                         out.stdout), out.stdout
    f = nt.Function.from_library(path, "nt_notype_twice", "long (long)")
    assert nt.bind(f, nt.ARG)(21) == 42
    assert pickle.loads(pickle.dumps(nt.bind(f, 5)))() == 10


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
    with pytest.raises(TypeError, match=r"^the target twice has the signature 'double "
                                        r"\(double\)' in this process; the pickled thunk was "
                                        r"made for 'float \(float\)'"):
        nt._recipe._function_from_recipe(("cffi", "ntk_travel_cffi", "twice"),
                                          "float (float)", True, "twice", None, None)
    # a Function without a name is named by its recipe
    with pytest.raises(TypeError, match=r"^the target \('ntk_travel_cffi', 'twice'\) has "):
        nt._recipe._function_from_recipe(("cffi", "ntk_travel_cffi", "twice"),
                                          "float (float)", True, None, None, None)


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


# ------------------------------------------------------------ generated round trips
#
# Bindings drawn by hypothesis: every marker (ARG, size, shape(axis),
# stride(axis, elements=), strided, address(n, owner=), ref(value, ctype)),
# arrays of every dtype, order and contiguity, read-only and misaligned,
# scalars of every C type at and near their edges in every input form, on
# either engine, several thunks sharing arrays, through pickle (in band,
# and protocol 5 out of band with the buffers handed back writable,
# read-only, misaligned), copy.copy and copy.deepcopy. After the trip every
# binding's options read back as they were, and every thunk computes what
# NumPy computes from the arrays it now holds (and what the original
# computed from its own).

KIND_CTYPE = {np.dtype(k): v for k, v in {
    "?": "bool", "i1": "int8_t", "u1": "uint8_t", "i2": "int16_t", "u2": "uint16_t",
    "i4": "int32_t", "u4": "uint32_t", "i8": "int64_t", "u8": "uint64_t", "f4": "float",
    "f8": "double", "c8": "float complex", "c16": "double complex"}.items()}
SUM2 = "double ({T} p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0, ptrdiff_t s1)"
SUMN = "double ({T} p, int code, {N} n)"
COUNT_TYPES = ["size_t", "int", "int64_t", "uint32_t", "ptrdiff_t", "unsigned long"]
INT_EDGES = {"int8_t": (-2**7, 2**7 - 1, "f_c_c"), "uint8_t": (0, 2**8 - 1, "f_C_C"),
             "int16_t": (-2**15, 2**15 - 1, "f_s_s"), "uint16_t": (0, 2**16 - 1, "f_S_S"),
             "int32_t": (-2**31, 2**31 - 1, "f_i_i"), "uint32_t": (0, 2**32 - 1, "f_I_I"),
             "int64_t": (-2**63, 2**63 - 1, "f_l_l"), "uint64_t": (0, 2**64 - 1, "f_L_L")}
FLT_MAX = float(np.finfo(np.float32).max)
DBL_MAX = float(np.finfo(np.float64).max)


class Index:
    """An integer by __index__ (pickled by this module's name)."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v

    def __eq__(self, other):
        return isinstance(other, Index) and other.v == self.v

    __hash__ = None


def struct_code(dt):
    """The struct-module code nt_x_sum reads a dtype's elements with."""
    if dt.kind == "b":
        return "?"
    if dt.kind == "c":
        return "F" if dt.itemsize == 8 else "D"
    if dt.kind in "iu":
        c = {1: "b", 2: "h", 4: "i", 8: "q"}[dt.itemsize]
        return c.upper() if dt.kind == "u" else c
    return {4: "f", 8: "d"}[dt.itemsize]


def element_value(x):
    """What nt_x_sum adds for one element (complex: real + 10 imag)."""
    if isinstance(x, (complex, np.complexfloating)):
        return float(x.real) + 10.0 * float(x.imag)
    return float(x)


def numpy_sum(arr):
    """The elements of arr in row-major order, added as the kernel adds them."""
    s = 0.0
    for x in np.asarray(arr).reshape(-1) if arr.ndim else [arr[()]]:
        s += element_value(x)
    return s


@st.composite
def any_array(draw, aligned=True):
    dt = draw(st.sampled_from(list(KIND_CTYPE)))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    n = int(np.prod(shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(dt)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True
                            ).astype(dt)
    elif dt.kind == "f":
        flat = rng.normal(size=n).astype(dt)
    else:
        flat = (rng.normal(size=n) + 1j * rng.normal(size=n)).astype(dt)
    if not aligned:
        raw = np.zeros(n * dt.itemsize + 1, dtype=np.uint8)
        arr = raw[1:].view(dt).reshape(shape)
        arr[...] = flat.reshape(shape)
        return arr
    order = draw(st.sampled_from("CF"))
    arr = np.array(flat.reshape(shape), order=order)
    how = draw(st.sampled_from(["whole", "whole", "sliced", "reversed", "transposed"]))
    if how == "sliced" and arr.shape[0] > 1:
        arr = arr[::2]
    elif how == "reversed":
        arr = arr[::-1]
    elif how == "transposed":
        arr = arr.T
    if draw(st.booleans()):
        arr.flags.writeable = False
    return arr


class Case:
    """One thunk of a generated binding: how to call it and what it must
    return, both worked out from the bindings of the thunk at hand (so they
    hold for a copy as for the original)."""

    def __init__(self, thunk, call, expect, picklable=True, note=""):
        self.thunk, self.call, self.expect = thunk, call, expect
        self.picklable, self.note = picklable, note


def _fwd(t):
    return [i for i, v in enumerate(t.bindings) if v is nt.ARG]


def _array_of(v):
    return v.obj if isinstance(v, STRIDED_T) else v


@st.composite
def sum_cases(draw, lib, arrays):
    """nt_x_sum over one array: the pointer bound (as the array, strided(),
    address(owner=)) or forwarded; n0, n1, s0, s1 and the code bound as
    ints, NumPy ints, __index__ objects, markers, or forwarded."""
    shared = arrays and draw(st.booleans())
    misaligned = not shared and draw(st.integers(0, 5)) == 0
    arr = (draw(st.sampled_from(arrays)) if shared else
           draw(any_array(aligned=not misaligned)))
    arrays.append(arr)
    code = struct_code(arr.dtype)
    contiguous = arr.flags.c_contiguous
    how = draw(st.sampled_from(["array", "strided", "strided", "address", "ARG"]
                               if contiguous else ["strided", "strided", "address", "ARG"]))
    ctype = "void" if not arr.flags.aligned else draw(st.sampled_from(
        [KIND_CTYPE[arr.dtype], "void"]))
    const = not arr.flags.writeable or draw(st.booleans())
    T = f"{'const ' if const else ''}{ctype} *"
    elements = draw(st.booleans()) and ctype != "void"
    name = "nt_x_sum_elems" if elements else "nt_x_sum"
    fn = nt.Function.from_library(lib, name, SUM2.format(T=T), nogil=draw(st.booleans()))
    p = {"array": arr, "strided": nt.strided(arr), "ARG": nt.ARG,
         "address": nt.address(arr.ctypes.data, owner=arr)}[how]
    shape2 = arr.shape + (1,) * (2 - arr.ndim)
    strides2 = arr.strides + (0,) * (2 - arr.ndim)
    dense = arr.flags.c_contiguous or arr.flags.f_contiguous   # strides survive a trip
    ints = []
    for k in range(4):
        axis = k % 2
        literal = (shape2 if k < 2 else strides2)[axis]
        if elements and k >= 2:
            literal //= arr.itemsize
        forms = ["ARG", "int", "np", "index"] if (k < 2 or dense) and how != "ARG" else ["ARG"]
        # deepcopy shares a raw address but copies the arrays of the
        # markers: a stride marker on the owner describes the copy, whose
        # strides are its own unless the owner is dense
        if axis < arr.ndim and how != "ARG" and (k < 2 or dense or how != "address"):
            forms += ["marker"] * 3
        form = draw(st.sampled_from(forms))
        if form == "marker":
            neg = draw(st.booleans())
            ax = axis - arr.ndim if neg else axis
            ints.append(nt.shape(arr, ax) if k < 2 else
                        nt.stride(arr, ax, elements=True) if elements else
                        draw(st.sampled_from([nt.stride(arr, ax),
                                              nt.stride(arr, ax, elements=False)])))
        elif form == "ARG":
            ints.append(nt.ARG)
        else:
            ints.append({"int": int, "np": np.int64, "index": Index}[form](literal))
    code_v = draw(st.sampled_from([ord(code), np.int32(ord(code)), nt.ARG]))
    engine = draw(st.sampled_from([None, *ENGINES]))
    t = nt.bind(fn, p, code_v, *ints, engine=engine)

    def described(t):
        b = t.bindings
        a = arr if b[0] is nt.ARG else b[0]
        return a if isinstance(a, np.ndarray) else _array_of(a) if not isinstance(
            a, nt.Address) else a.owner

    def call(t):
        a = described(t)
        s2 = a.shape + (1,) * (2 - a.ndim)
        st2 = a.strides + (0,) * (2 - a.ndim)
        if elements:
            st2 = tuple(s // a.itemsize for s in st2)
        # a forwarded pointer takes strided() as a bound one does
        p = a if a.flags.c_contiguous else nt.strided(a)
        full = [p, ord(code), s2[0], s2[1], st2[0], st2[1]]
        return [full[i] for i in _fwd(t)]

    return Case(t, call, lambda t: numpy_sum(described(t)), picklable=how != "address",
                note=f"{name} {T} {how}")


@st.composite
def count_cases(draw, lib, arrays):
    """nt_x_sum_n over a C-contiguous array, n = size(arr) in any integer type."""
    arr = np.ascontiguousarray(draw(any_array()))
    arrays.append(arr)
    code = struct_code(arr.dtype)
    ntype = draw(st.sampled_from(COUNT_TYPES))
    T = f"const {KIND_CTYPE[arr.dtype]} *"
    fn = nt.Function.from_library(lib, "nt_x_sum_n", SUMN.format(T=T, N=ntype))
    n = draw(st.sampled_from([nt.size(arr), nt.size(arr), arr.size, nt.ARG]))
    t = nt.bind(fn, arr, ord(code), n, engine=draw(st.sampled_from([None, "ffi"])))
    return Case(t, lambda t: [t.bindings[0].size] if t.bindings[2] is nt.ARG else [],
                lambda t: numpy_sum(t.bindings[0]), note=f"nt_x_sum_n {T} {ntype}")


@st.composite
def ref_cases(draw, lib):
    """A scalar by pointer: ref(value, ctype) of every C type, at its edges."""
    ctype = draw(st.sampled_from(sorted(KIND_CTYPE.values())))
    dt = {v: k for k, v in KIND_CTYPE.items()}[ctype]
    if dt.kind in "iu":
        lo, hi, _ = INT_EDGES[ctype]
        value = draw(st.sampled_from([lo, lo + 1, 0, 1, hi - 1, hi]))
    elif dt.kind == "b":
        value = draw(st.booleans())
    elif dt.kind == "f":
        big = FLT_MAX if dt.itemsize == 4 else DBL_MAX
        value = draw(st.sampled_from([0.0, -0.0, 1.5, -big, big, 1e-30]))
    else:
        value = complex(draw(st.sampled_from([0.0, 1.5, -2.25])),
                        draw(st.sampled_from([0.0, -0.5, 3.0])))
    r = nt.ref(value, ctype)
    code = struct_code(dt)
    fn = nt.Function.from_library(lib, "nt_x_sum", SUM2.format(T=f"const {ctype} *"))
    t = nt.bind(fn, r, ord(code), 1, 1, 0, 0)
    return Case(t, lambda t: [], lambda t: 0.0 + element_value(t.bindings[0][0]),  # a sum
                note=f"ref({value!r}, {ctype!r})")


@st.composite
def scalar_cases(draw, fixture_path):
    """A scalar by value at and near its type's edges, bound as an int, a
    NumPy scalar, an __index__ object, bytes (for a char), a bool."""
    ctype = draw(st.sampled_from(sorted(INT_EDGES) + ["bool", "float", "double",
                                                      "double complex"]))
    if ctype in INT_EDGES:
        lo, hi, name = INT_EDGES[ctype]
        v = draw(st.sampled_from([lo, lo + 1, -1 if lo else 0, 0, 1, hi - 1, hi]))
        forms = [int, Index, lambda x: np.dtype(ctype.replace("_t", "")).type(x)]
        if ctype in ("int8_t", "uint8_t"):
            forms.append(lambda x: bytes([x & 0xFF]))
        value = draw(st.sampled_from(forms))(v)
        want = v
    elif ctype == "bool":
        name, value = "f_B_B", draw(st.sampled_from([True, False, np.True_, 0, 1]))
        want = bool(value)
    elif ctype == "float":
        name = "f_f_f"
        value = draw(st.sampled_from([FLT_MAX, -FLT_MAX, 1e-45, -0.0, np.float32(1.5)]))
        want = float(np.float32(value))
    elif ctype == "double":
        name = "f_d_d"
        value = draw(st.sampled_from([DBL_MAX, -DBL_MAX, 5e-324, -0.0, np.float64(2.5)]))
        want = float(value)
    else:
        name = "f_d_D"
        value = draw(st.sampled_from([complex(1.5, -2.0), np.complex128(3 + 4j), 2.0]))
        want = complex(value).real + 10.0 * complex(value).imag
    sig = {"bool": "bool (bool v)", "float": "float (float v)", "double": "double (double v)",
           "double complex": "double (double complex v)"}.get(ctype, f"{ctype} ({ctype} v)")
    fn = nt.Function.from_library(fixture_path, name, sig)
    forwarded = draw(st.booleans())
    t = nt.bind(fn, nt.ARG if forwarded else value,
                engine=draw(st.sampled_from([None, *ENGINES])))
    return Case(t, lambda t: [value] if forwarded else [], lambda t: want,
                note=f"{ctype} {type(value).__name__} {value!r}")


@st.composite
def blas_cases(draw, fixture_path):
    """Fortran style: every scalar a ref(), x written in place, info back."""
    n = draw(st.integers(0, 4))
    inc = draw(st.integers(1, 2))
    x = np.arange(1.0, 2.0 + n * inc)
    alpha = draw(st.sampled_from([2.0, -0.5]))
    fn = nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS)
    t = nt.bind(fn, nt.ref(n, "int"), nt.ref(alpha, "double"), x, nt.ref(inc, "int"),
                nt.ref(-7, "int"))

    def expect(t):
        b = t.bindings
        xs = b[2].copy()
        xs[:n * inc:inc] *= alpha
        return (xs.tolist(), n)

    def run(t, args):
        t(*args)
        b = t.bindings
        return (b[2].tolist(), int(b[4][0]))

    case = Case(t, lambda t: [], expect, note=f"blas n={n} inc={inc}")
    case.run = run
    return case


@st.composite
def travel_cases(draw, lib, fixture_path):
    arrays = []
    makers = [lambda: sum_cases(lib, arrays), lambda: sum_cases(lib, arrays),
              lambda: count_cases(lib, arrays), lambda: ref_cases(lib),
              lambda: scalar_cases(fixture_path), lambda: blas_cases(fixture_path)]
    n = draw(st.integers(1, 3))
    return [draw(draw(st.sampled_from(makers))()) for _ in range(n)]


TRIPS = ["pickle", "pickle2", "oob-writable", "oob-read-only", "oob-misaligned",
         "oob-misaligned-writable", "copy", "deepcopy"]


def _trip(thunks, how):
    if how == "copy":
        return [copy.copy(t) for t in thunks]
    if how == "deepcopy":
        return copy.deepcopy(thunks)
    if how in ("pickle", "pickle2"):
        return pickle.loads(pickle.dumps(thunks, protocol=5 if how == "pickle" else 2))
    buffers = []
    data = pickle.dumps(thunks, protocol=5, buffer_callback=buffers.append)
    raw = [bytes(b.raw()) for b in buffers]
    given = {"oob-writable": [bytearray(r) for r in raw],
             "oob-read-only": raw,
             "oob-misaligned": [memoryview(b"\0" + r)[1:] for r in raw],
             "oob-misaligned-writable": [memoryview(bytearray(b"\0" + r))[1:] for r in raw],
             }[how]
    return pickle.loads(data, buffers=given)


DERIVED = type(nt.size(np.zeros(1)))
STRIDED_T = type(nt.strided(np.zeros(1)))


def _same_value(a, b):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, float) and a == 0.0:
        return b == 0.0 and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def _check_bindings(orig, copy_, how, seen):
    """Every binding's options read back: markers with their kind, axis and
    elements, on the array the pointer holds; scalars as they were."""
    for i, (a, b) in enumerate(zip(orig.bindings, copy_.bindings)):
        where = f"binding {i} after {how}: {a!r} -> {b!r}"
        if a is nt.ARG:
            assert b is nt.ARG, where
            continue
        assert type(b) is type(a), where
        if isinstance(a, DERIVED):
            assert (b.kind, b.axis, b.elements) == (a.kind, a.axis, a.elements), where
            a_obj, b_obj = a.obj, b.obj
        elif isinstance(a, STRIDED_T):
            a_obj, b_obj = a.obj, b.obj
        elif isinstance(a, nt.Address):
            assert how in ("copy", "deepcopy"), where
            assert b.value == a.value and b.owner is a.owner, where
            continue
        elif isinstance(a, np.ndarray):
            a_obj, b_obj = a, b
        elif isinstance(a, Index):
            assert b.v == a.v, where
            continue
        else:
            assert _same_value(a, b) and type(a) is type(b), where
            continue
        # the array behind it: the same values; one object per original
        assert b_obj.dtype == a_obj.dtype and b_obj.shape == a_obj.shape, where
        assert np.array_equal(b_obj, a_obj, equal_nan=True), where
        if how == "copy":
            assert b_obj is a_obj, where
        else:
            assert b_obj.flags.writeable and b_obj.flags.aligned, where
            assert not np.shares_memory(b_obj, a_obj), where
        twin = seen.setdefault(id(a_obj), b_obj)
        assert twin is b_obj, f"{where}: one array came back as two"


@settings(deadline=None)
@given(st.data(), st.sampled_from(TRIPS))
def test_generated_bindings_survive_every_trip(ntexport, fixture_path, data, how):
    lib = ntexport.__file__
    cases = data.draw(travel_cases(lib, fixture_path))
    thunks = [c.thunk for c in cases]
    event(f"{how}: " + ", ".join(c.note.split(" ")[0] for c in cases))
    if how not in ("copy", "deepcopy") and not all(c.picklable for c in cases):
        with pytest.raises(pickle.PicklingError, match=r"argument 1 \(p: .*\) is bound to a "
                                                       r"raw address"):
            _trip(thunks, how)
        return
    before = [getattr(c, "run", lambda t, a: t(*a))(c.thunk, c.call(c.thunk)) for c in cases]
    copies = _trip(thunks, how)
    seen = {}
    for c, t, u, b in zip(cases, thunks, copies, before):
        assert u is not t and u.address != t.address
        _check_bindings(t, u, how, seen)
        assert str(u.csig) == str(t.csig) and u.target_signature == t.target_signature
        assert u.nogil == t.nogil and u.target.name == t.target.name
        if t.engine == "libffi":
            assert u.engine == "libffi"
        want = c.expect(u)
        got = getattr(c, "run", lambda t, a: t(*a))(u, c.call(u))
        assert _same_value(got, want), (c.note, got, want)
        if not hasattr(c, "run"):               # (a BLAS call writes its inputs)
            assert _same_value(got, b), (c.note, got, b)

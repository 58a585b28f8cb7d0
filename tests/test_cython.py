"""numthunk.cython: functions from Cython modules' __pyx_capi__.

The kernels in tests/cython/ are compiled once per session (Cython from
PyPI, see tests/cython/build_kernels.py); SciPy's cython_blas,
cython_lapack and cython_special are the third-party modules. Each kernel is
called through a thunk from Python and from an @njit loop, and compared
with NumPy. Run under NUMTHUNK_ENGINE=native and =ffi.
"""

import importlib
import importlib.util
import os
import re
import sys
import time

import numba
import numpy as np
import pytest

import numthunk as nt
from numthunk import _cython

from ntbuild import crashed

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_builder():
    spec = importlib.util.spec_from_file_location(
        "ntk_build_kernels", os.path.join(HERE, "cython", "build_kernels.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def kernels():
    """The compiled test kernels: an object with the modules as attributes."""
    start = time.perf_counter()
    path, compiled = _load_builder().build()
    if path not in sys.path:
        sys.path.insert(0, path)
    import ntk_cy.mview
    import ntk_cy.ptr
    import ntk_cy.scalar
    import ntk_seed

    class K:
        scalar = ntk_cy.scalar
        ptr = ntk_cy.ptr
        mview = ntk_cy.mview
        seed = ntk_seed
        build_dir = path
        seconds = time.perf_counter() - start
        compile_seconds = compiled

    how = f"compiled in {compiled:.1f} s" if compiled else "reused"
    sys.stderr.write(f"\n[cython kernels: {how} at {path}]\n")
    return K


@pytest.fixture(scope="module")
def S(kernels):
    return kernels.scalar


@pytest.fixture(scope="module")
def P(kernels):
    return kernels.ptr


@pytest.fixture(scope="module")
def M(kernels):
    return kernels.mview


def test_kernel_build_is_cached(kernels):
    path, seconds = _load_builder().build()
    assert path == kernels.build_dir and seconds == 0.0
    assert os.path.exists(os.path.join(path, "ntk_cy", "types.pxd"))


# ------------------------------------------------------------ scalars


def test_scalar_signatures(S):
    expect = {
        "add": "double (double, double)",
        "mul_ll": "long long (long long, long long)",
        "umax": "unsigned long long (unsigned long long, unsigned long long)",
        "is_pos": "int (double)",
        "bump": "void (void)",
        "bumps": "int (void)",
        "sum_const": "double (const double *, int)",
        "fill": "void (double *const, Py_ssize_t, double)",
        "cmul": "double complex (double complex, double complex)",
        "cscale_f": "float complex (float complex, float)",
        "apply_twice": "double (double (*)(double), double)",
        "apply_t": "double (double (*)(double), double)",
        "half": "double (double)",
    }
    for name, text in expect.items():
        fn = nt.cython(S, name)
        assert isinstance(fn, nt.Function)
        assert fn.csig == nt.Signature(text), name
        assert fn.nogil is False and fn.name == f"ntk_cy.scalar.{name}"


def test_module_by_name(S):
    fn = nt.cython("ntk_cy.scalar", "add", nogil=True)
    assert fn.nogil is True and fn(1.25, 2.0) == 3.25


def test_scalar_calls(S):
    add = nt.cython(S, "add")
    assert add(1.5, 2.25) == 3.75
    assert nt.bind(add, nt.ARG, 10.0)(0.5) == 10.5
    mul = nt.cython(S, "mul_ll")
    assert mul(3_000_000_000, 3) == 9_000_000_000
    umax = nt.cython(S, "umax")
    assert umax(2**64 - 1, 5) == 2**64 - 1
    with pytest.raises(OverflowError):
        umax(-1, 5)
    is_pos = nt.cython(S, "is_pos")
    assert is_pos(2.0) == 1 and is_pos(-2.0) == 0
    bump, bumps = nt.cython(S, "bump"), nt.cython(S, "bumps")
    before = bumps()
    t = nt.bind(bump)
    t()
    t()
    assert bumps() == before + 2
    assert nt.cython(S, "half")(3.0) == 1.5


def test_pointer_const_forms(S):
    x = np.arange(6.0)
    sc = nt.cython(S, "sum_const")
    assert nt.bind(sc, x, nt.size(x))() == x.sum()
    ro = x.copy()
    ro.flags.writeable = False
    assert nt.bind(sc, ro, 6)() == x.sum()
    fill = nt.cython(S, "fill")
    out = np.zeros(4)
    nt.bind(fill, out, nt.size(out), nt.ARG)(2.5)
    assert (out == 2.5).all()
    with pytest.raises(ValueError, match="read-only"):
        nt.bind(fill, ro, 6, 1.0)


def test_complex(S, P):
    cmul = nt.cython(S, "cmul")
    assert cmul(1 + 2j, 3 - 1j) == (1 + 2j) * (3 - 1j)
    t = nt.bind(cmul, nt.ARG, 2j)
    assert t(1.5 - 1j) == (1.5 - 1j) * 2j
    cs = nt.cython(S, "cscale_f")
    assert cs(1 + 2j, 3.0) == 3 + 6j
    z = (np.arange(5) + 1j * np.arange(5)[::-1]).astype(np.complex128)
    csum = nt.cython(P, "csum")
    assert csum.csig == nt.Signature("double complex (const double complex *, npy_intp)")
    assert nt.bind(csum, z, nt.size(z))() == z.sum()


# ------------------------------------------------------------ typedefs


def test_numpy_and_package_typedefs(P):
    dot = nt.cython(P, "dot")
    assert dot.csig == nt.Signature("double (const double *, const double *, npy_intp)")
    x, y = np.linspace(0, 1, 7), np.arange(7.0)
    assert nt.bind(dot, x, y, nt.size(x))() == pytest.approx(x @ y)
    # REAL -> real_t -> cnp.float64_t and weight_t -> cnp.int32_t live in
    # ntk_cy/types.pxd, a module with no .so of its own.
    wsum = nt.cython(P, "wsum")
    assert wsum.csig == nt.Signature("double (const double *, const int32_t *, long long)")
    w = np.array([1, -2, 3, 0, 5, 1, 1], dtype=np.int32)
    assert nt.bind(wsum, x, w, nt.size(x))() == pytest.approx(x @ w)
    with pytest.raises(TypeError):
        nt.bind(wsum, x, w.astype(np.int64), 7)
    # COUNT -> SIZE -> cnp.intp_t: a chain inside ptr.pyx itself.
    ca = nt.cython(P, "count_above")
    assert ca.csig == nt.Signature("npy_intp (const float *, npy_intp, float)")
    f = np.array([0.5, 2, 3, -1, 7], dtype=np.float32)
    assert nt.bind(ca, f, nt.size(f), nt.ARG)(1.0) == (f > 1).sum()


def test_user_typedefs_win(P):
    # By the full mangled name and by the short name.
    dot = nt.cython(P, "dot", typedefs={"__pyx_t_5numpy_intp_t": "int64_t"})
    assert dot.csig == nt.Signature("double (const double *, const double *, int64_t)")
    dot = nt.cython(P, "dot", typedefs={"intp_t": "long"})
    assert dot.csig == nt.Signature("double (const double *, const double *, long)")
    # A chain through the user's own names.
    wsum = nt.cython(P, "wsum", typedefs={"REAL": "MYREAL", "MYREAL": "double"})
    assert str(wsum.csig).startswith("double (const double *")


def test_unknown_typedef_without_sources(P, monkeypatch):
    """A wheel that ships no .pxd: the error names the typedef and how to
    supply it; supplying it works."""
    monkeypatch.setattr(_cython, "_source_files", lambda *a, **k: [])
    with pytest.raises(TypeError) as exc:
        nt.cython(P, "wsum")
    msg = str(exc.value)
    assert "__pyx_t_6ntk_cy_5types_" in msg and "typedefs={'" in msg
    assert "no .pxd or .pyx of ntk_cy.types" in msg
    assert msg.endswith("(see docs/cython.md, 'Signatures and typedefs')"), msg
    wsum = nt.cython(P, "wsum", typedefs={"REAL": "double", "weight_t": "int32_t",
                                          "__pyx_t_6ntk_cy_5types_index_t": "long long"})
    assert wsum.csig == nt.Signature("double (const double *, const int32_t *, long long)")
    # NumPy's typedefs are built in: no source needed.
    assert nt.cython(P, "dot").csig.nargs == 3


def test_unknown_typedef_in_source(P, tmp_path, monkeypatch):
    pxd = tmp_path / "types.pxd"
    pxd.write_text("ctypedef double REAL\n")
    monkeypatch.setattr(_cython, "_source_files",
                        lambda modname, hint=None: [str(pxd)] if modname == "ntk_cy.types" else [])
    with pytest.raises(TypeError, match=r"unknown typedef '__pyx_t_6ntk_cy_5types_weight_t'.*"
                                        r"no ctypedef of it in .*types.pxd"):
        nt.cython(P, "wsum")


def test_demangle():
    assert _cython._demangle("__pyx_t_5numpy_float64_t") == ("numpy", "float64_t")
    assert _cython._demangle("__pyx_t_5scipy_6linalg_11cython_blas_d") == (
        "scipy.linalg.cython_blas", "d")
    assert _cython._demangle("__pyx_t_double_complex") is None
    assert _cython._demangle("__pyx_t_9short") is None


FAKE_DEFS = """\
cimport numpy as cnp
from numpy cimport (
    float32_t as f4,
    int16_t,
)
from libc.stdint cimport uint16_t
ctypedef cnp.float64_t real          # a comment
ctypedef real scalar
ctypedef f4 single
ctypedef int16_t short_t
ctypedef uint16_t u16
ctypedef double complex cplx
ctypedef unsigned long long ull
ctypedef double *dptr
ctypedef struct point:
    double x
ctypedef fused anyreal:
    float
    double
ctypedef double (*callback_t)(double x, void *data) noexcept nogil
ctypedef loop_b loop_a
ctypedef loop_a loop_b
"""

FAKE_MOD_PXD = """\
from .defs cimport real as R
from . cimport defs
ctypedef R myreal
ctypedef defs.single sgl
cdef extern from "ext.h":
    ctypedef double ext_real "ext_real_t"
"""

FAKE_MOD_PYX = """\
cdef api void take(defs.real[:, ::1] a,
                   int n,   # a comment
                   const defs.single[:] b) noexcept nogil:
    pass
"""


@pytest.fixture
def fake_module(tmp_path, monkeypatch, S):
    """A module object named fakepkg.mod whose .pxd/.pyx sit in a package on
    sys.path, with capsules named by the signatures under test (the address
    is a real function's; none of these is called)."""
    import types

    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "defs.pxd").write_text(FAKE_DEFS)
    (pkg / "mod.pxd").write_text(FAKE_MOD_PXD)
    (pkg / "mod.pyx").write_text(FAKE_MOD_PYX)
    monkeypatch.syspath_prepend(str(tmp_path))
    addr = nt.cython(S, "add").address

    def make(**sigs):
        mod = types.ModuleType("fakepkg.mod")
        mod.__file__ = str(pkg / "mod.cpython-311-x86_64-linux-gnu.so")
        mod.__pyx_capi__ = {k: nt._core._capsule(addr, v, None) for k, v in sigs.items()}
        return mod

    return make


def test_typedef_resolution_from_sources(fake_module):
    D = "__pyx_t_7fakepkg_4defs_"
    M = "__pyx_t_7fakepkg_3mod_"
    mod = fake_module(
        a=f"{D}scalar ({D}single, {D}short_t, {D}u16)",
        b=f"{D}cplx ({D}ull, {D}dptr, {D}dptr const *)",
        c=f"void ({D}callback_t, void *)",
        d=f"double ({M}myreal, {M}sgl)",
        e="ext_real_t (ext_real_t)",
        f=f"void ({D}loop_a)",
        g=f"void ({D}point)",
        h=f"void ({D}nothing_here)",
        take="void (__Pyx_memviewslice, int, __Pyx_memviewslice)",
    )
    expect = {
        "a": "double (float, int16_t, uint16_t)",
        "b": "double complex (unsigned long long, double *, double *const *)",
        "c": "void (double (*)(double, void *), void *)",
        "d": "double (double, float)",
        "e": "double (double)",
    }
    for name, text in expect.items():
        assert nt.cython(mod, name).csig == nt.Signature(text), name
    with pytest.raises(TypeError, match="refers back to itself"):
        nt.cython(mod, "f")
    # a ctypedef struct is an opaque struct: through a pointer only
    with pytest.raises(TypeError, match=rf"'{D}point' passed by value is not supported"):
        nt.cython(mod, "g")
    with pytest.raises(TypeError, match=r"typedefs=\{'nothing_here': '<C type>'\}"):
        nt.cython(mod, "h")
    assert nt.cython(mod, "h", typedefs={"nothing_here": np.int16}).csig == nt.Signature(
        "void (int16_t)")
    with pytest.raises(TypeError, match="typedefs must map names"):
        nt.cython(mod, "h", typedefs={"nothing_here": object()})
    # memoryview dtypes through the module's cimports; the declarations in
    # the error are copied from mod.pyx
    with pytest.raises(TypeError, match=r"mod.pyx declares them: memoryviews=\{0: "
                                        r"'defs.real\[:, ::1\]', 2: 'const defs.single\[:\]'\}"):
        nt.cython(mod, "take")
    fn = nt.cython(mod, "take", memoryviews={0: "defs.real[:, ::1]", 2: "const sgl[:]"})
    assert fn.memoryviews == {0: ("double", 2, "C", False), 2: ("float", 1, None, True)}


def test_struct_pointers_take_declared_layouts(fake_module):
    D = "__pyx_t_7fakepkg_4defs_"
    mod = fake_module(p=f"double ({D}point *, int)")
    point = np.dtype([("x", "f8")])            # defs.pxd: ctypedef struct point: double x
    bare = nt.cython(mod, "p")
    with pytest.raises(TypeError, match=rf"argument 1 \({D}point \*\): a structured array, "
                                        r"but numthunk knows no layout of struct point"):
        nt.bind(bare, np.zeros(3, dtype=point), 3)
    fn = nt.cython(mod, "p", structs={"point": point})
    assert fn.structs == {"point": 8}
    nt.bind(fn, np.zeros(3, dtype=point), 3)   # bound, not called
    with pytest.raises(TypeError, match="items are 16 bytes, but struct point is declared 8"):
        nt.bind(fn, np.zeros(3, dtype=[("x", "f8"), ("y", "f8")]), 3)
    with pytest.raises(TypeError, match="a buffer of format 'd', which has no struct layout"):
        nt.bind(fn, np.zeros(3), 3)


def test_unsupported_types_refused(fake_module):
    # capsule names as Cython 3.3 writes them
    mod = fake_module(obj="PyObject *(PyObject *, PyObject *)",
                      ctuple="__pyx_ctuple_double__and_int (double)",
                      ext="double (struct BoxObject *)",
                      st="double (struct pt, struct pt *)",
                      ld="long double (long double)")
    for name, what in (("obj", "Python objects"), ("ctuple", "C tuple"),
                       ("ext", r"struct or extension type \('struct BoxObject'\)"),
                       ("st", "struct pt"), ("ld", "long double")):
        with pytest.raises(TypeError, match=f"{what}.*numthunk does not support"):
            nt.cython(mod, name)


def test_typedefs_and_memoryview_dtypes_numthunk_cannot_use_are_refused(fake_module):
    D = "__pyx_t_7fakepkg_4defs_"
    mod = fake_module(h=f"void ({D}nothing_here)",
                      cbp=f"void ({D}callback_t *)",
                      cb=f"void ({D}callback_t, void *)",
                      take="void (__Pyx_memviewslice, int, __Pyx_memviewslice)")
    where = "numthunk.cython(fakepkg.mod, 'take')"
    # a typedef to a dtype that is no C number: refused as no C type
    for bad in (np.dtype(">i2"), np.dtype("M8[s]"), np.str_, np.dtype([("x", "f8")])):
        with pytest.raises(TypeError, match=r"^typedefs must map names \(str\) to C types "
                                            r"\(str\) or NumPy dtypes"):
            nt.cython(mod, "h", typedefs={"nothing_here": bad})
    assert nt.cython(mod, "h", typedefs={"nothing_here": np.dtype("<i2")}).csig == \
        nt.Signature("void (int16_t)")
    # a C type numthunk has no kind for, reached through a typedef
    with pytest.raises(TypeError, match=r"^numthunk.cython\(fakepkg.mod, 'h'\): C type "
                                        r"'long double' is not supported by numthunk$"):
        nt.cython(mod, "h", typedefs={"nothing_here": "long double"})
    assert nt.cython(mod, "h", typedefs={"nothing_here": "double"}).csig == \
        nt.Signature("void (double)")
    # a function pointer typedef: a parameter of its own only
    with pytest.raises(TypeError, match=r"^numthunk.cython\(fakepkg.mod, 'cbp'\): function "
                                        rf"pointer typedef '{D}callback_t' is supported only "
                                        r"as a parameter type of its own$"):
        nt.cython(mod, "cbp")
    assert nt.cython(mod, "cb").csig == nt.Signature("void (double (*)(double, void *), "
                                                     "void *)")
    # memoryview dtypes: no function pointer typedef, no pointer, no long double
    good = {0: "defs.real[:, ::1]", 2: "const sgl[:]"}
    with pytest.raises(TypeError, match=rf"^{re.escape(where)}: 'defs.callback_t' is a function "
                                        r"pointer typedef; it is supported as a parameter of "
                                        r"its own, not inside another type \(memoryview 0: "
                                        r"'defs.callback_t\[:, ::1\]'\)$"):
        nt.cython(mod, "take", memoryviews={**good, 0: "defs.callback_t[:, ::1]"})
    with pytest.raises(TypeError, match=rf"^{re.escape(where)}: memoryview 0 "
                                        r"\('defs.dptr\[:, ::1\]'\): dtype 'defs.dptr' is a "
                                        r"pointer type$"):
        nt.cython(mod, "take", memoryviews={**good, 0: "defs.dptr[:, ::1]"})
    with pytest.raises(TypeError, match=rf"^{re.escape(where)}: C type 'long double' is not "
                                        r"supported by numthunk \(memoryview 2: "):
        nt.cython(mod, "take", memoryviews={**good, 2: "long double[:]"})
    assert nt.cython(mod, "take", memoryviews=good).memoryviews == {
        0: ("double", 2, "C", False), 2: ("float", 1, None, True)}


def test_a_capsule_without_a_name_is_refused(S):
    import ctypes
    import types

    new = ctypes.pythonapi["PyCapsule_New"]   # a private function object: its argtypes are ours
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    addr = nt.cython(S, "add").address
    mod = types.ModuleType("fakepkg.unnamed")
    mod.name = b"double (double, double)"      # kept alive with the module
    mod.__pyx_capi__ = {"f": new(addr, None, None), "g": new(addr, mod.name, None)}  # never called
    with pytest.raises(TypeError, match=r"^numthunk.cython\(fakepkg.unnamed, 'f'\): the capsule "
                                        r"has no name \(Cython names it by the function's C "
                                        r"signature\)$"):
        nt.cython(mod, "f")
    assert nt.cython(mod, "g").csig == nt.Signature("double (double, double)")


def test_the_function_name_must_be_text(S):
    for bad in (3, b"add", None, ("add",)):
        with pytest.raises(TypeError, match=rf"^numthunk.cython\(ntk_cy.scalar, "
                                            rf"{re.escape(repr(bad))}\): the function name must "
                                            r"be a str$"):
            nt.cython(S, bad)
    assert nt.cython(S, "add").name == "ntk_cy.scalar.add"


def test_versioned_pxd_includes_and_star_cimports(tmp_path, monkeypatch, S):
    """The .pxd read is the one Cython itself reads (Cython's own
    find_versioned_file is the oracle): a versioned __init__.cython-NN.pxd
    up to the installed Cython's version over the plain stub, as NumPy 2.5
    ships them; its `include`s and `from X cimport *` lines are followed."""
    import types

    from Cython.Utils import find_versioned_file

    now = _cython._cython_version()
    pkg = tmp_path / "vpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    # the stub older Cythons read; its typedef differs so that a wrong pick shows
    (pkg / "__init__.pxd").write_text("DEF err = int('Cython too old')\nctypedef float real\n")
    (pkg / "__init__.cython-30.pxd").write_text(
        'include "vtypes.pxi"\nfrom vpkg.base cimport *\nctypedef real scalar\n')
    # a header for a Cython newer than the installed one: not read
    (pkg / f"__init__.cython-{now + 1}.pxd").write_text("ctypedef char real\n")
    # included twice and including itself: read once
    (pkg / "vtypes.pxi").write_text('include "vtypes.pxi"\nctypedef double real\n')
    (pkg / "base.pxd").write_text("from vpkg.deep cimport *\nctypedef int idx_t\n")
    (pkg / "deep.pxd").write_text("from vpkg.base cimport *\nctypedef long long big_t\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    addr = nt.cython(S, "add").address
    mod = types.ModuleType("vpkg")
    mod.__file__ = str(pkg / "__init__.py")
    mod.__path__ = [str(pkg)]
    P = "__pyx_t_4vpkg_"
    mod.__pyx_capi__ = {
        "f": nt._core._capsule(addr, f"{P}scalar ({P}real, {P}idx_t, {P}big_t)", None),
        "g": nt._core._capsule(addr, f"void ({P}missing_t)", None)}

    chosen = find_versioned_file(str(pkg), "__init__", ".pxd")
    assert chosen == str(pkg / "__init__.cython-30.pxd")
    assert _cython._source_files("vpkg", mod) == [chosen]
    # not imported (no module to ask): the package found on sys.path
    importlib.invalidate_caches()
    assert "vpkg" not in sys.modules and _cython._source_files("vpkg", None) == [chosen]
    assert nt.cython(mod, "f").csig == nt.Signature("double (double, int, long long)")
    with pytest.raises(TypeError, match=r"unknown typedef '__pyx_t_4vpkg_missing_t'.*"
                                        r"no ctypedef of it in .*__init__.cython-30.pxd"):
        nt.cython(mod, "g")
    # a Cython older than 3.0 reads the stub, as NumPy 2.5's stub intends
    monkeypatch.setattr(_cython, "_cython_version", lambda: 29)
    # (positional: Cython 3.0's cached wrapper takes no keywords)
    old = find_versioned_file(str(pkg), "__init__", ".pxd", 29)
    assert _cython._source_files("vpkg", mod) == [old] == [str(pkg / "__init__.pxd")]
    assert nt.cython(mod, "g", typedefs={"missing_t": "int"}).csig == nt.Signature(
        "void (int)")
    # without Cython installed: the newest header, the one its module's
    # Cython was at least as new as
    monkeypatch.setattr(_cython, "_cython_version", lambda: None)
    assert _cython._source_files("vpkg", mod) == [str(pkg / f"__init__.cython-{now + 1}.pxd")]


def test_a_module_whose_origin_is_no_file_is_looked_for_on_sys_path(tmp_path, monkeypatch):
    """A built-in or frozen module's spec has an origin that is no path
    ('built-in', 'frozen'): it names no directory (not the working one),
    and its .pxd is looked for on sys.path as for a .pxd-only module."""
    import importlib.util
    assert importlib.util.find_spec("itertools").origin == "built-in"
    on_path, cwd = tmp_path / "on_path", tmp_path / "cwd"
    on_path.mkdir()
    cwd.mkdir()
    for d in (on_path, cwd):
        (d / "itertools.pxd").write_text("ctypedef double real\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", [str(on_path), *sys.path])
    assert _cython._source_files("itertools") == [str(on_path / "itertools.pxd")]


def test_top_level_pxd_only_module_found_on_sys_path(tmp_path, monkeypatch, S):
    """A top-level module with only a .pxd (no spec to find) is looked for in
    every sys.path directory, and an empty entry is the working directory."""
    import types

    on_path, cwd = tmp_path / "on_path", tmp_path / "cwd"
    on_path.mkdir()
    cwd.mkdir()
    (on_path / "ntq_topdefs.pxd").write_text("ctypedef double real\n")
    (cwd / "ntq_cwddefs.pxd").write_text("ctypedef int idx_t\n")
    monkeypatch.syspath_prepend(str(on_path))
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    assert _cython._source_files("ntq_topdefs") == [str(on_path / "ntq_topdefs.pxd")]
    assert _cython._source_files("ntq_cwddefs") == [os.path.join(os.getcwd(),
                                                                 "ntq_cwddefs.pxd")]
    assert _cython._source_files("ntq_nowhere_defs") == []
    addr = nt.cython(S, "add").address
    mod = types.ModuleType("ntq_topuser")
    mod.__pyx_capi__ = {"f": nt._core._capsule(
        addr, "__pyx_t_11ntq_topdefs_real (__pyx_t_11ntq_cwddefs_idx_t)", None)}
    assert nt.cython(mod, "f").csig == nt.Signature("double (int)")


# ------------------------------------------------------------ cpdef, fused, optional


def test_cpdef_skip_dispatch_hidden(S):
    h = nt.cython(S, "hypot2")
    assert h.signature.nargs == 3 and h.fixed == {2: 0}
    assert h.csig == nt.Signature("double (double, double)")
    assert h(3.0, 4.0) == 25.0
    t = nt.bind(h, nt.ARG, 2.0)
    assert t.csig == nt.Signature("double (double)") and t(1.0) == 5.0
    with pytest.raises(TypeError, match="takes 2 argument"):
        nt.bind(h, 1.0, 2.0, 0)


def test_fused(S):
    with pytest.raises(TypeError, match=r"fused function.*\n.*fused=0: float \(float\)"
                                        r"\n.*fused=1: double \(double\)"):
        nt.cython(S, "twice")
    f0 = nt.cython(S, "twice", fused=0)
    assert f0.csig == nt.Signature("float (float)") and f0(1.25) == 2.5
    assert nt.cython(S, "twice", fused=("double",)).csig == nt.Signature("double (double)")
    assert nt.cython(S, "twice", fused="double").name == "ntk_cy.scalar.__pyx_fuse_1twice"
    assert nt.cython(S, "twice", fused="float (float)").csig == nt.Signature("float (float)")
    # Newer Cython (3.3 does, 3.0 does not) also exports 'twice[double]';
    # where it does, the key works as a name.
    if "twice[double]" in S.__pyx_capi__:
        assert nt.cython(S, "twice[double]")(4.0) == 8.0
    with pytest.raises(TypeError, match="no specialisation fused=.5"):
        nt.cython(S, "twice", fused=5)
    with pytest.raises(TypeError, match="no specialisation of 'twice' matches"):
        nt.cython(S, "twice", fused=("int",))
    with pytest.raises(TypeError, match="exports no fused specialisation of 'add'"):
        nt.cython(S, "add", fused=0)


def test_fused_memoryview_after_a_plain_parameter(S):
    """The fused type of a memoryview declared after a parameter of a plain
    type ('double k, const real[::1] x'): each specialisation reads the
    array as its own element type, and refuses the other's."""
    x = np.arange(1.0, 5.0)
    for index, ctype, dtype, other in ((0, "float", np.float32, np.float64),
                                       (1, "double", np.float64, np.float32)):
        f = nt.cython(S, "scaled_sum", fused=index)
        assert f.csig == nt.Signature(f"{ctype} (double, __Pyx_memviewslice)")
        assert f.memoryviews == {1: (ctype, 1, "C", True)}
        assert nt.bind(f, 0.5, x.astype(dtype))() == 5.0
        with pytest.raises(TypeError, match="memoryview is declared"):
            nt.bind(f, 0.5, x.astype(other))


def test_fused_memoryview_declared_by_the_user_must_agree_with_the_specialisation(S):
    """memoryviews= for a fused memoryview: the specialisation's own element
    type (in any layout) is taken as declared; the fused type's name takes
    the specialisation's; another element type is refused, naming both."""
    x = np.arange(1.0, 5.0)
    for index, ctype, other, dtype in ((0, "float", "double", np.float32),
                                       (1, "double", "float", np.float64)):
        mine = nt.cython(S, "scaled_sum", fused=index, memoryviews={1: f"{ctype}[:]"})
        assert mine.memoryviews == {1: (ctype, 1, None, False)}
        assert nt.bind(mine, 0.5, x.astype(dtype))() == 5.0
        assert nt.cython(S, "scaled_sum", fused=index,
                         memoryviews={1: f"const {ctype}[::1]"}).memoryviews == {
            1: (ctype, 1, "C", True)}
        assert nt.cython(S, "scaled_sum", fused=index,
                         memoryviews={1: "real[::1]"}).memoryviews == {1: (ctype, 1, "C", True)}
        with pytest.raises(TypeError) as info:
            nt.cython(S, "scaled_sum", fused=index, memoryviews={1: f"{other}[::1]"})
        assert str(info.value) == (
            f"numthunk.cython(ntk_cy.scalar, 'scaled_sum'): memoryviews={{1: '{other}[::1]'}} "
            f"contradicts the chosen specialisation __pyx_fuse_{index}scaled_sum, whose "
            f"memoryview 1 is {ctype}[...] (real = {ctype}, C {ctype}); declare "
            f"'{ctype}[::1]' or leave it out")


def test_fused_takes_indexes_and_types_not_bools(S):
    for bad in (True, False, (True,), (0, True), 1.5, (1.5,), None.__class__):
        with pytest.raises(TypeError, match=r"fused= takes an index \(int\), a tuple of "
                                            r"indexes, a C signature or a tuple of parameter "
                                            r"types \(str\), not .*\n.*fused=0: float"):
            nt.cython(S, "twice", fused=bad)
    assert nt.cython(S, "twice", fused=(1,)).csig == nt.Signature("double (double)")
    # a list names parameter types; indexes go in a tuple
    for bad in ([1], [0, 1], ["double", 1]):
        with pytest.raises(TypeError, match=r"^fused= takes an index, a tuple of indexes, a C "
                                            r"signature or a tuple of parameter types$"):
            nt.cython(S, "twice", fused=bad)
    assert nt.cython(S, "twice", fused=["double"]).csig == nt.Signature("double (double)")


def test_capsule_name_that_is_not_utf8_is_refused():
    import ctypes
    import types

    new = ctypes.pythonapi["PyCapsule_New"]   # a private function object: its argtypes are ours
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = b"double (\xff\xfe)"               # kept alive with the module below
    mod = types.ModuleType("fakepkg.latin")
    mod.__pyx_capi__ = {"f": new(0x1000, name, None)}   # never called
    mod.name = name
    with pytest.raises(TypeError, match=r"numthunk.cython\(fakepkg.latin, 'f'\): the capsule's "
                                        r"name b'double \(\\xff\\xfe\)' is not UTF-8 text"):
        nt.cython(mod, "f")
    with pytest.raises(ValueError, match="is not UTF-8 text; a target capsule is named by its C "
                                         "signature"):
        nt.bind(mod.__pyx_capi__["f"], 1.0)


def test_a_function_keeps_its_module_and_capsule_alive(S):
    """The Function nt.cython makes owns its module and the capsule it read
    (the code lives while they do): a module no longer in sys.modules, nor
    anywhere else, lives while the Function or a thunk over it does."""
    import gc
    import types
    import weakref

    mod = types.ModuleType("ntk_cy.gone")
    capsule = S.__pyx_capi__["add"]
    mod.__pyx_capi__ = {"add": capsule}
    fn = nt.cython(mod, "add")
    assert fn.owner[0] is mod and fn.owner[1] is capsule and len(fn.owner) == 2
    t = nt.bind(fn, nt.ARG, 2.0)
    gone = weakref.ref(mod)
    del mod, fn
    gc.collect()
    assert gone() is not None and t(1.5) == 3.5
    del t
    gc.collect()
    assert gone() is None


def test_optional_args_refused(S):
    with pytest.raises(TypeError, match="optional arguments.*struct __pyx_opt_args.*"
                                        "docs/cython.md"):
        nt.cython(S, "with_default")


def test_fused_by_types_says_why_a_specialisation_cannot_be_taken(fake_module):
    """Chosen by types, a specialisation numthunk refuses (optional
    arguments, long double) is no match; when nothing else matches, the
    error says why each one was refused instead of "no specialisation
    matches"."""
    opt = "struct __pyx_fuse_{}__pyx_opt_args_7fakepkg_3mod_f *__pyx_optional_args"
    mod = fake_module(__pyx_fuse_0f=f"float (float, int __pyx_skip_dispatch, {opt.format(0)})",
                      __pyx_fuse_1f=f"double (double, int __pyx_skip_dispatch, {opt.format(1)})",
                      __pyx_fuse_0g="long double (long double)",
                      __pyx_fuse_1g="double (double)")
    with pytest.raises(TypeError, match=r"no specialisation of 'f' matches "
                                        r"fused=\('double',\): numthunk can take none of "
                                        r"them:\n  fused=0: the function has optional "
                                        r"arguments.*\n  fused=1: the function has optional "
                                        r"arguments.*docs/cython.md"):
        nt.cython(mod, "f", fused=("double",))
    with pytest.raises(TypeError, match=r"no specialisation of 'g' matches fused=\('float',\):"
                                        r"\n.*\n  fused=1: double \(double\)\nof which "
                                        r"numthunk cannot take:\n  fused=0: .*long double"):
        nt.cython(mod, "g", fused=("float",))
    assert nt.cython(mod, "g", fused="double").csig == nt.Signature("double (double)")


# ------------------------------------------------------------ GIL, exceptions


def test_exception_reaches_python_caller(S):
    cs = nt.cython(S, "checked_sqrt")
    assert cs.nogil is False
    assert cs(6.25) == 2.5
    with pytest.raises(ValueError, match="negative input -1.0"):
        cs(-1.0)
    t = nt.bind(cs, -4.0)
    assert t.nogil is False
    with pytest.raises(ValueError, match="negative input -4.0"):
        t()
    # The error does not stick: the next call is clean.
    assert nt.bind(cs, 9.0)() == 3.0


def test_exception_from_njit_surfaces_late(S):
    """docs/cython.md: Numba does not check for an exception after a call
    through a function pointer; the error value flows on and Python reports
    it when the @njit function returns."""
    cs = nt.bind(nt.cython(S, "checked_sqrt"), nt.ARG)

    @numba.njit
    def plus_one(f, x):
        return f(x) + 1.0

    assert plus_one(cs, 4.0) == 3.0
    with pytest.raises(SystemError, match="returned a result with an exception set") as exc:
        plus_one(cs, -4.0)
    assert isinstance(exc.value.__cause__, ValueError)


# ------------------------------------------------------------ function pointers


def test_function_pointer_parameters_compose(S):
    apply_twice, square, add = (nt.cython(S, n) for n in ("apply_twice", "square", "add"))
    assert nt.bind(apply_twice, square, nt.ARG)(3.0) == 81.0
    plus1 = nt.bind(add, nt.ARG, 1.0)                   # a thunk double(double)
    assert nt.bind(apply_twice, plus1, 5.0)() == 7.0
    # thunks all the way down: apply_twice(apply_twice(square, .)) is double(double)
    inner = nt.bind(apply_twice, square, nt.ARG)
    assert nt.bind(apply_twice, inner, nt.ARG)(2.0) == 2.0 ** 16
    apply_t = nt.cython(S, "apply_t")                   # through a fn-pointer typedef
    assert nt.bind(apply_t, plus1, nt.ARG)(1.0) == 3.0
    with pytest.raises(TypeError, match=r"expected a function 'double \(double\)'"):
        nt.bind(apply_twice, add, 1.0)


# ------------------------------------------------------------ by reference


def test_fortran_style_by_reference(P):
    axpy = nt.cython(P, "axpy_f")
    assert axpy.csig == nt.Signature(
        "void (char *, int *, double *, double *, int *, double *, int *, int *)")
    x = np.arange(8.0)
    y = np.ones(8)
    trans, n, alpha, info = (nt.ref(ord("N"), "char"), nt.ref(4, "int"),
                             nt.ref(2.0, "double"), nt.ref(99, "int"))
    t = nt.bind(axpy, trans, n, alpha, x, nt.ref(2, "int"), y, nt.ref(1, "int"), info)
    t()
    expect = np.ones(8)
    expect[:4] += 2.0 * x[::2]
    assert info.value == 0
    np.testing.assert_array_equal(y, expect)
    # The cells are live: change them between calls.
    trans.value = ord("M")
    alpha.value = 0.5
    t()
    expect[:4] -= 0.5 * x[::2]
    np.testing.assert_array_equal(y, expect)
    trans.value = ord("X")
    t()
    assert info.value == -1
    trans.value = ord("N")
    n.value = -3
    t()
    assert info.value == -2


# ------------------------------------------------------------ memoryviews


def test_memoryview_1d(M):
    s = nt.cython(M, "sum1d", memoryviews={0: "double[:]"})
    x = np.arange(30.0)
    assert nt.bind(s, x)() == x.sum()
    assert nt.bind(s, x[::3])() == x[::3].sum()          # strided 1-D
    assert nt.bind(s, x[::-2])() == x[::-2].sum()        # negative stride
    sc = nt.cython(M, "sum1d_c", memoryviews={0: "const double[::1]"})
    ro = x.copy()
    ro.flags.writeable = False
    assert nt.bind(sc, ro)() == x.sum()
    with pytest.raises(ValueError, match="C-contiguous"):
        nt.bind(sc, x[::2])
    # forwarded: the slice is built per call from the array given
    t = nt.bind(sc, nt.ARG)
    assert t(np.ones(5)) == 5.0


def test_memoryview_rebound_is_the_new_array_whole(M):
    """A rebound typed memoryview is the new array's whole slice (its data,
    shape and strides), however it differs from the one before."""
    s = nt.cython(M, "sum1d", memoryviews={0: "double[:]"})
    x = np.arange(30.0)
    t = nt.bind(s, x)
    for v in (np.ones(3), x[::3], x[::-2], np.arange(7.0), x[5:6], x):
        t.rebind(0, v)
        assert t() == v.sum()
    rs = nt.cython(M, "rowsums", memoryviews={0: "const double[:, ::1]", 1: "double[::1]"})
    a, out = np.arange(20.0).reshape(4, 5), np.zeros(4)
    t = nt.bind(rs, a, out)
    for b in (np.ones((2, 3)), np.arange(12.0).reshape(6, 2)):
        t.rebind(0, b)
        t.rebind(1, out := np.zeros(b.shape[0]))
        t()
        assert (out == b.sum(axis=1)).all()


def test_memoryview_takes_what_stands_for_an_array(M):
    """A typed-memoryview parameter takes what a pointer parameter takes for
    an array: arr.ctypes (the array itself is bound), a ctypes array, a
    Strided, and a ref's one-element cell; bound and live."""
    import ctypes

    s = nt.cython(M, "sum1d", memoryviews={0: "double[:]"})
    x = np.arange(5.0)
    t = nt.bind(s, x.ctypes)
    assert t.bindings[0] is x and t() == 10.0
    x[0] = 100.0
    assert t() == 110.0
    c = (ctypes.c_double * 3)(1.0, 2.0, 4.0)
    assert nt.bind(s, c)() == 7.0
    assert nt.bind(s, nt.strided(x[::2]))() == 100.0 + 2.0 + 4.0
    r = nt.ref(2.5, "double")
    t = nt.bind(s, r)
    assert t() == 2.5
    r.value = -1.0
    assert t() == -1.0


def test_memoryview_2d_contiguous_rows(M):
    rs = nt.cython(M, "rowsums", memoryviews={0: "const double[:, ::1]", 1: "double[::1]"})
    a = np.arange(20.0).reshape(4, 5)
    out = np.zeros(4)
    t = nt.bind(rs, a, out)
    t()
    np.testing.assert_array_equal(out, a.sum(axis=1))
    a *= 2                                               # live binding
    t()
    np.testing.assert_array_equal(out, a.sum(axis=1))
    with pytest.raises(ValueError, match="C-contiguous"):
        nt.bind(rs, np.asfortranarray(a), out)


def test_memoryview_2d_strided_typedef_dtype(M):
    rs = nt.cython(M, "rowsums_strided", memoryviews={0: "REAL[:, :]", 1: "REAL[:]"})
    big = np.arange(60.0).reshape(6, 10)
    a = big[1::2, ::3]
    out = np.zeros(6)[::2]
    t = nt.bind(rs, a, out, nt.ARG)
    t(0.5)
    np.testing.assert_array_equal(out, 0.5 * a.sum(axis=1))
    ft = np.asfortranarray(big)                          # F order is just strides here
    out2 = np.zeros(6)
    nt.bind(rs, ft, out2, 1.0)()
    np.testing.assert_array_equal(out2, big.sum(axis=1))


def test_memoryview_slicing_numpy_typedef(M):
    cp = nt.cython(M, "count_pos", memoryviews={0: "const cnp.int64_t[:]"})
    assert cp.csig == nt.Signature("int64_t (__Pyx_memviewslice, Py_ssize_t)")
    v = np.array([1, -1, 2, 3, -5, 8], dtype=np.int64)
    t = nt.bind(cp, v, nt.ARG)
    assert [t(k) for k in range(6)] == [(v[k:] > 0).sum() for k in range(6)]
    # the same declaration through other spellings
    for decl in ("const np.int64_t[:]", "const int64_t[:]", "const long[:]",
                 ("int64", 1, None, True)):
        assert nt.bind(nt.cython(M, "count_pos", memoryviews={0: decl}), v, 0)() == 4


def test_memoryview_subslice_passed_on(M):
    eo = nt.cython(M, "every_other", memoryviews={0: "const double[:]"})
    x = np.arange(11.0)
    assert nt.bind(eo, x)() == x[::2].sum()
    assert nt.bind(eo, x[1::3])() == x[1::3][::2].sum()


def test_memoryview_declarations_for_other_parameters_list_the_memoryviews(M, S):
    # a declaration for a parameter that is no typed memoryview names the
    # ones that are, or says there are none
    with pytest.raises(TypeError, match=r"parameter 1 of '.*' is not a typed memoryview "
                                        r"\(those are parameters \[0\]\)"):
        nt.cython(M, "count_pos", memoryviews={0: "int64_t[:]", 1: "int64_t[:]"})
    with pytest.raises(TypeError, match=r"parameter 0 of '.*' is not a typed memoryview "
                                        r"\(those are parameters none\)"):
        nt.cython(S, "add", memoryviews={0: "double[:]"})


def test_memoryview_transpose_crashes_as_documented(kernels):
    """docs/cython.md: transposing a slice built by numthunk dereferences its
    NULL memview: the child process dies of a signal."""
    import subprocess

    code = (
        "import sys, numpy as np, numthunk as nt\n"
        f"sys.path.insert(0, {kernels.build_dir!r})\n"
        "import ntk_cy.mview as M\n"
        "fn = nt.cython(M, 'transposed_corner', memoryviews={0: 'double[:, :]'})\n"
        "t = nt.bind(fn, np.arange(6.0).reshape(2, 3))\n"
        "print('calling', flush=True)\n"
        "t()\n"
        "print('survived', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(nt.__file__)), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert "calling" in proc.stdout and "survived" not in proc.stdout
    assert crashed(proc), (proc.returncode, proc.stderr[-2000:])


def test_memoryview_bad_inputs(M):
    s = nt.cython(M, "sum1d", memoryviews={0: "double[:]"})
    with pytest.raises(TypeError, match=r"declared float64.*float32|declared double.*float"):
        nt.bind(s, np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="declared 1-dimensional.*2 dimensions"):
        nt.bind(s, np.ones((2, 2)))
    ro = np.ones(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        nt.bind(s, ro)
    with pytest.raises(TypeError) as exc:
        nt.cython(M, "rowsums")
    msg = str(exc.value)
    assert "parameter(s) 0, 1" in msg and "typed memoryviews" in msg
    assert "memoryviews={0: 'const double[:, ::1]', 1: 'double[::1]'}" in msg
    with pytest.raises(TypeError, match=r"parameter\(s\) 1 "):
        nt.cython(M, "rowsums", memoryviews={0: "const double[:, ::1]"})
    with pytest.raises(TypeError, match="parameter 1 .* is not a typed memoryview"):
        nt.cython(M, "count_pos", memoryviews={0: "int64_t[:]", 1: "int64_t[:]"})
    with pytest.raises(TypeError, match="unknown typedef 'NOPE'"):
        nt.cython(M, "sum1d", memoryviews={0: "NOPE[:]"})
    with pytest.raises(ValueError, match="each axis must be"):
        nt.cython(M, "sum1d", memoryviews={0: "double[2]"})
    for bad in ("double", "double[:", "[:]"):
        with pytest.raises(ValueError, match=rf"^memoryview declaration {re.escape(repr(bad))}: "
                                             r"expected e\.g\. 'double\[:, ::1\]'$"):
            nt.cython(M, "sum1d", memoryviews={0: bad})
    for bad in ("double[:, ::1, :]", "double[::1, ::1]", "double[::1, :, ::1]"):
        with pytest.raises(ValueError, match=rf"^memoryview declaration {re.escape(repr(bad))}: "
                                             r"'::1' must be the first or the last axis$"):
            nt.cython(M, "sum1d", memoryviews={0: bad})
    for good, contig in (("double[::1]", "C"), ("double[::1, :]", "F"), ("double[:, ::1]", "C"),
                         ("double[:]", None)):
        assert nt.Function(0x1000, "void (__Pyx_memviewslice)",
                           memoryviews={0: good}).memoryviews[0][2] == contig
    assert nt.cython(M, "sum1d", memoryviews={0: "double[:]"})(np.arange(4.0)) == 6.0
    with pytest.raises(TypeError, match="0-based parameter indexes"):
        nt.cython(M, "sum1d", memoryviews={"x": "double[:]"})


def test_bad_modules_and_names(S):
    import json

    with pytest.raises(TypeError, match="has no __pyx_capi__"):
        nt.cython(json, "dumps")
    with pytest.raises(TypeError, match="has no __pyx_capi__"):
        nt.cython("numthunk", "bind")
    with pytest.raises(TypeError, match=r"has no function 'ad'.*similar: add"):
        nt.cython(S, "ad")
    with pytest.raises(TypeError, match="has no function 'nope'"):
        nt.cython(S, "nope")
    with pytest.raises(ModuleNotFoundError):
        nt.cython("no_such_module_xyz", "f")
    with pytest.raises(TypeError, match="expected a module"):
        nt.cython(3, "f")


# ------------------------------------------------------------ the seed's kernel


def _options_reference(y_error, x, x_pads, x_active, indexes, i_start, i_start_by_x,
                       i_stop_by_x, error, delta):
    n = x.shape[0]
    new_error = np.empty((n, 2))
    new_sign = np.zeros((n, 2), dtype=np.int8)
    t = np.concatenate([np.arange(a, b) for a, b in indexes])
    tt = t - i_start
    for i in range(n):
        if not x_active[i]:
            new_error[i] = -1
            continue
        inside = (tt >= i_start_by_x[i]) & (tt < i_stop_by_x[i])
        d = np.where(inside, delta * x[i, np.clip(tt, 0, x.shape[1] - 1)] * x_pads[i], 0.0)
        yp, yn = y_error[t] - d, y_error[t] + d
        if error == 1:
            new_error[i] = np.abs(yp).sum(), np.abs(yn).sum()
        else:
            new_error[i] = (yp ** 2).sum(), (yn ** 2).sum()
        new_sign[i] = 1, -1
    return new_error, new_sign


@pytest.fixture
def options_data():
    rng = np.random.default_rng(2)
    n_stims, n_times, i_start = 5, 40, 3
    return dict(
        y_error=rng.normal(size=n_times + i_start),
        x=rng.normal(size=(n_stims, n_times)),
        x_pads=rng.uniform(0.5, 1.5, n_stims),
        x_active=np.array([1, 0, 1, 1, 1], dtype=np.int8),
        indexes=np.array([[3, 15], [20, 43]], dtype=np.int64),
        i_start=i_start,
        i_start_by_x=np.array([0, 0, 5, 2, 10], dtype=np.int64),
        i_stop_by_x=np.array([40, 40, 30, 38, 20], dtype=np.int64),
    )


SEED_MEMVIEWS = {0: "FLOAT64[:]", 1: "FLOAT64[:,:]", 2: "FLOAT64[:]", 3: "INT8[:]",
                 4: "INT64[:,:]", 6: "INT64[:]", 7: "INT64[:]", 10: "FLOAT64[:,:]",
                 11: "INT8[:,:]"}


def _seed_args(d, error, delta):
    return (d["y_error"], d["x"], d["x_pads"], d["x_active"], d["indexes"], d["i_start"],
            d["i_start_by_x"], d["i_stop_by_x"], error, delta)


def test_seed_memoryview_core(kernels, options_data):
    core = nt.cython(kernels.seed, "_generate_options", memoryviews=SEED_MEMVIEWS)
    d = options_data
    new_error = np.zeros((5, 2))
    new_sign = np.zeros((5, 2), dtype=np.int8)
    t = nt.bind(core, d["y_error"], d["x"], d["x_pads"], d["x_active"], d["indexes"],
                d["i_start"], d["i_start_by_x"], d["i_stop_by_x"], nt.ARG, nt.ARG,
                new_error, new_sign)
    assert t.csig == nt.Signature("void (int, double)")
    for error, delta in ((1, 0.1), (2, 0.25)):
        t(error, delta)
        ref_e, ref_s = _options_reference(*_seed_args(d, error, delta))
        np.testing.assert_allclose(new_error, ref_e, rtol=1e-12)
        np.testing.assert_array_equal(new_sign, ref_s)


def test_seed_pointer_wrapper(kernels, options_data):
    wrap = nt.cython(kernels.seed, "generate_options")
    assert wrap.csig.nargs == 25
    d = options_data
    new_error = np.zeros((5, 2))
    new_sign = np.zeros((5, 2), dtype=np.int8)
    arrays = (d["y_error"], d["x"], d["x_pads"], d["x_active"], d["indexes"],
              d["i_start_by_x"], d["i_stop_by_x"], new_error, new_sign)
    dims = [dim for a in arrays for dim in nt.unpack(a)[1:]]
    t = nt.bind(wrap, d["y_error"], d["x"], d["x_pads"], d["x_active"], d["indexes"],
                d["i_start"], d["i_start_by_x"], d["i_stop_by_x"], nt.ARG, nt.ARG,
                new_error, new_sign, *dims)
    assert t.csig == nt.Signature("void (int, double)")
    t(2, 0.3)
    ref_e, ref_s = _options_reference(*_seed_args(d, 2, 0.3))
    np.testing.assert_allclose(new_error, ref_e, rtol=1e-12)
    np.testing.assert_array_equal(new_sign, ref_s)
    # a wrong dtype is refused at bind time (the seed's ctypes route would not notice)
    with pytest.raises(TypeError, match="argument 4"):
        nt.bind(wrap, d["y_error"], d["x"], d["x_pads"], d["x_active"].astype(np.int64),
                d["indexes"], 0, d["i_start_by_x"], d["i_stop_by_x"], 1, 0.1,
                new_error, new_sign, *dims)


def test_unpack():
    a = np.zeros((3, 4))
    p, d0, d1 = nt.unpack(a)
    assert p is a and repr(d0) == "shape(array[float64, 3x4], 0)" and repr(d1).endswith(", 1)")
    p, d0, s0 = nt.unpack(np.zeros(7)[::2], strides=True, elements=True)
    assert repr(p).startswith("strided(") and repr(s0).endswith("0, elements=True)")
    assert len(nt.unpack(np.zeros((2, 2, 2)), strides=True)) == 7
    assert nt.unpack(a.ctypes)[1].obj is a
    assert "unpack" in nt.__all__


# ------------------------------------------------------------ from @njit


@numba.njit
def _call_n(f, n):
    for _ in range(n):
        f()


@numba.njit
def _sum_over(f, xs):
    s = 0.0
    for x in xs:
        s += f(x)
    return s


@numba.njit
def _each(f, xs):
    for x in xs:
        f(x)


@numba.njit
def _seed_loop(t, errors, deltas, out, new_error):
    for k in range(errors.shape[0]):
        t(errors[k], deltas[k])
        out[k] = new_error.sum()


def test_njit_scalars_and_cpdef(S):
    add = nt.bind(nt.cython(S, "add"), nt.ARG, 1.5)
    xs = np.arange(10.0)
    assert _sum_over(add, xs) == (xs + 1.5).sum()
    h = nt.bind(nt.cython(S, "hypot2"), nt.ARG, 2.0)     # cpdef: skip_dispatch hidden
    assert _sum_over(h, xs) == (xs ** 2 + 4).sum()
    sq = nt.cython(S, "square")                          # a Function, not only thunks
    assert _sum_over(sq, xs) == (xs ** 2).sum()
    cm = nt.bind(nt.cython(S, "cmul"), nt.ARG, 2 - 1j)   # double complex in and out

    @numba.njit
    def csum(f, zs):
        s = 0j
        for z in zs:
            s += f(z)
        return s

    zs = np.array([1 + 1j, 2 - 3j, -0.5j])
    assert csum(cm, zs) == (zs * (2 - 1j)).sum()


def test_njit_pointer_and_by_reference(P):
    x, y = np.arange(6.0), np.linspace(1, 2, 6)
    dot = nt.bind(nt.cython(P, "dot"), x, y, nt.size(x))

    @numba.njit
    def twice(f):
        return f() + f()

    assert twice(dot) == pytest.approx(2 * (x @ y))
    yy = np.zeros(6)
    info = nt.ref(7, "int")
    axpy = nt.bind(nt.cython(P, "axpy_f"), nt.ref(ord("N"), "char"), nt.ref(6, "int"),
                   nt.ref(0.5, "double"), x, nt.ref(1, "int"), yy, nt.ref(1, "int"), info)
    _call_n(axpy, 4)
    np.testing.assert_allclose(yy, 4 * 0.5 * x)
    assert info.value == 0


def test_njit_memoryviews(M):
    a = np.arange(12.0).reshape(3, 4)
    out = np.zeros(3)
    rs = nt.bind(nt.cython(M, "rowsums", memoryviews={0: "const double[:, ::1]",
                                                       1: "double[::1]"}), a, out)
    _call_n(rs, 3)
    np.testing.assert_array_equal(out, a.sum(axis=1))
    big = np.arange(40.0).reshape(4, 10)
    out2 = np.zeros(4)
    rss = nt.bind(nt.cython(M, "rowsums_strided", memoryviews={0: "REAL[:, :]",
                                                                1: "REAL[:]"}),
                  big[:, ::2], out2, nt.ARG)
    _each(rss, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(out2, 2.0 * big[:, ::2].sum(axis=1))
    s1 = nt.bind(nt.cython(M, "sum1d", memoryviews={0: "double[:]"}), big[1, ::3])

    @numba.njit
    def call(f):
        return f()

    assert call(s1) == big[1, ::3].sum()
    v = np.array([1, -1, 2, 3, -5, 8], dtype=np.int64)
    cp = nt.bind(nt.cython(M, "count_pos", memoryviews={0: "const cnp.int64_t[:]"}), v, nt.ARG)

    @numba.njit
    def tails(f, n):
        out = np.empty(n, np.int64)
        for k in range(n):
            out[k] = f(k)
        return out

    np.testing.assert_array_equal(tails(cp, 6), [(v[k:] > 0).sum() for k in range(6)])


def test_njit_seed_both_ways(kernels, options_data):
    d = options_data
    errors = np.array([1, 2, 1], dtype=np.intc)
    deltas = np.array([0.1, 0.2, 0.3])
    expect = np.array([_options_reference(*_seed_args(d, e, dl))[0].sum()
                       for e, dl in zip(errors, deltas)])
    for name in ("_generate_options", "generate_options"):
        new_error = np.zeros((5, 2))
        new_sign = np.zeros((5, 2), dtype=np.int8)
        head = (d["y_error"], d["x"], d["x_pads"], d["x_active"], d["indexes"], d["i_start"],
                d["i_start_by_x"], d["i_stop_by_x"], nt.ARG, nt.ARG, new_error, new_sign)
        if name == "_generate_options":
            fn = nt.cython(kernels.seed, name, memoryviews=SEED_MEMVIEWS)
            t = nt.bind(fn, *head)
        else:
            fn = nt.cython(kernels.seed, name)
            arrays = [a for a in head if isinstance(a, np.ndarray)]
            t = nt.bind(fn, *head, *[dim for a in arrays for dim in nt.unpack(a)[1:]])
        out = np.zeros(3)
        _seed_loop(t, errors, deltas, out, new_error)
        np.testing.assert_allclose(out, expect, rtol=1e-12)


def test_njit_through_ctypes_global(S, P):
    """The other route into nopython code: the thunk's ctypes function as a
    global (Numba's ExternalFunctionPointer)."""
    x = np.arange(5.0)
    dot_c = nt.bind(nt.cython(P, "dot"), x, x, nt.size(x)).ctypes
    add_c = nt.bind(nt.cython(S, "hypot2"), nt.ARG, 1.0).ctypes

    @numba.njit
    def run(n):
        s = 0.0
        for i in range(n):
            s += dot_c() + add_c(float(i))
        return s

    assert run(3) == 3 * (x @ x) + sum(i * i + 1 for i in range(3))


# ------------------------------------------------------------ SciPy's Cython modules


def test_scipy_cython_blas():
    from scipy.linalg import cython_blas

    ddot = nt.cython(cython_blas, "ddot")
    assert ddot.csig == nt.Signature("double (int *, double *, int *, double *, int *)")
    x, y = np.linspace(-1, 1, 9), np.arange(9.0)
    one = nt.ref(1, "int")
    t = nt.bind(ddot, nt.ref(9, "int"), x, one, y, one)
    assert t() == pytest.approx(x @ y)
    t2 = nt.bind(ddot, nt.ref(5, "int"), x, nt.ref(2, "int"), y, nt.ref(2, "int"))
    assert t2() == pytest.approx(x[::2] @ y[::2])
    assert _call_twice_njit(t) == pytest.approx(2 * (x @ y))

    daxpy = nt.cython("scipy.linalg.cython_blas", "daxpy")
    yy = y.copy()
    alpha = nt.ref(0.5, "double")
    ta = nt.bind(daxpy, nt.ref(9, "int"), alpha, x, one, yy, one)
    ta()
    np.testing.assert_allclose(yy, y + 0.5 * x)
    alpha.value = -1.0
    _call_n(ta, 2)
    np.testing.assert_allclose(yy, y + 0.5 * x - 2 * x)

    zdotc = nt.cython(cython_blas, "zdotc")
    z = np.array([1 + 2j, 3 - 1j, -2j])
    w = np.array([2 - 1j, 1j, 4 + 0j])
    tz = nt.bind(zdotc, nt.ref(3, "int"), z, one, w, one)
    assert tz() == pytest.approx(np.vdot(z, w))


@numba.njit
def _call_twice_njit(f):
    return f() + f()


def test_scipy_cython_lapack_info_readback():
    from scipy.linalg import cython_lapack

    dgesv = nt.cython(cython_lapack, "dgesv")
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4)) + 4 * np.eye(4)
    b = rng.normal(size=4)
    af, bf = np.asfortranarray(a), b.copy()
    ipiv = np.zeros(4, dtype=np.intc)
    info = nt.ref(-99, "int")
    n = nt.ref(4, "int")
    t = nt.bind(dgesv, n, nt.ref(1, "int"), nt.strided(af), n, ipiv, bf, n, info)
    t()
    assert info.value == 0
    np.testing.assert_allclose(bf, np.linalg.solve(a, b))
    # singular: LAPACK reports it through info
    sing = np.asfortranarray(np.ones((4, 4)))
    bf2 = b.copy()
    nt.bind(dgesv, n, nt.ref(1, "int"), nt.strided(sing), n, ipiv, bf2, n, info)()
    assert info.value > 0
    dlamch = nt.cython(cython_lapack, "dlamch")
    assert nt.bind(dlamch, nt.ref(ord("E"), "char"))() == np.finfo(float).eps / 2


def test_scipy_cython_special():
    import scipy.special as sc
    from scipy.special import cython_special

    gammainc = nt.cython(cython_special, "gammainc")         # cpdef
    assert gammainc.csig == nt.Signature("double (double, double)")
    assert gammainc(2.0, 1.5) == pytest.approx(sc.gammainc(2.0, 1.5))
    g = nt.cython(cython_special, "gamma", fused=("double",))
    assert g(4.5) == pytest.approx(sc.gamma(4.5))
    gz = nt.cython(cython_special, "gamma", fused="double complex")
    assert gz(1 + 1j) == pytest.approx(sc.gamma(1 + 1j))
    cheb = nt.cython(cython_special, "eval_chebyc", fused=("long", "double"))
    assert cheb.name.endswith("__pyx_fuse_1_1eval_chebyc")
    assert cheb(3, 0.5) == pytest.approx(sc.eval_chebyc(3, 0.5))
    if "__pyx_fuse_2_1eval_chebyc" in cython_special.__pyx_capi__:   # not in SciPy 1.10
        assert nt.cython(cython_special, "eval_chebyc", fused=(2, 1)).csig == nt.Signature(
            "double (Py_ssize_t, double)")
    xs = np.linspace(0.5, 3, 6)
    assert _sum_over(nt.bind(g, nt.ARG), xs) == pytest.approx(sc.gamma(xs).sum())
    with pytest.raises(TypeError, match="optional arguments"):
        nt.cython(cython_special, "spherical_jn", fused=1)
    with pytest.raises(TypeError, match=r"no specialisation of 'spherical_jn' matches .*"
                                        r"numthunk can take none of them:\n  fused=0: the "
                                        r"function has optional arguments"):
        nt.cython(cython_special, "spherical_jn", fused=("long", "double"))
    with pytest.raises(TypeError, match=r"fused function.*\n.*fused=\(0, 0\)"):
        nt.cython(cython_special, "eval_chebyc")


def test_scipy_quad_over_a_cython_kernel(S):
    """A Cython kernel with a bound parameter, handed to SciPy as a
    LowLevelCallable: the thunk is the integrand."""
    import scipy.special as sc
    from scipy import integrate
    from scipy.special import cython_special

    h = nt.bind(nt.cython(S, "hypot2"), nt.ARG, 2.0)         # x*x + 4
    value, _ = integrate.quad(h.lowlevelcallable(), 0.0, 3.0)
    assert value == pytest.approx(9.0 + 12.0)
    g = nt.bind(nt.cython(cython_special, "gammainc", nogil=True), 2.0, nt.ARG)
    value, _ = integrate.quad(g.lowlevelcallable(), 0.0, 1.0)
    expect, _ = integrate.quad(lambda x: sc.gammainc(2.0, x), 0.0, 1.0)
    assert value == pytest.approx(expect)

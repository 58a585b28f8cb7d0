"""What cannot travel is refused when pickled, naming why: raw addresses,
bound pointers, capsules, ctypes and cffi callbacks, @cfuncs that are not
importable, released thunks, functions owned by objects numthunk cannot
name, a memoryview bound; and unpickling that cannot succeed says so (the
library or name gone, an unknown recipe, a subclass that is no longer a
thunk, a missing @cfunc, a changed signature)."""

import copy
import ctypes
import ctypes.util
import gc
import importlib.util
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import numthunk as nt
from numthunk._recipe import PicklingRefused

from ntbuild import no_preload
from travel import (
    CFFI_SOURCE,
    FDDI,
    HERE,
    POLY,
    ROOT,
    SUM,
    LabelledThunk,
    fresh_env,
    lowest_mapping,
)

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
    base = lowest_mapping(os.path.realpath(fixture_path))
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


def test_pickling_a_thunk_bound_to_a_memoryview_is_refused_by_name(fixture_path):
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    t = nt.bind(fn, memoryview(np.arange(3.0)), 3)
    assert t() == 3.0
    with pytest.raises(PicklingRefused, match=r"argument 1 \(x: const double \*\) is bound to a "
                                              r"memoryview, which pickle cannot carry; bind a "
                                              "NumPy array"):
        pickle.dumps(t)
    assert pickle.loads(pickle.dumps(nt.bind(fn, np.arange(3.0), 3)))() == 3.0

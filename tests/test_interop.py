"""Interop with software numthunk did not write: a cffi API-mode module
compiled here, ctypes, NumPy's BitGenerator C interface, struct pointers and
the one rule every foreign pointer follows (pointee checked, the value bound
is what the pointer points at)."""

import ctypes
import gc
import os
import re
import sys
import weakref

import cffi
import numpy as np
import pytest

import numthunk as nt
from numthunk._api import as_function

from conftest import ENGINES, HERE
from ntbuild import BUILD, no_preload

_CDEF = """
    struct pt { double x; double y; };
    typedef struct { double a; double b; } Box;
    double scale(double x, double k);
    double pt_dot(const struct pt *p, double a, double b);
    double box_sum(const Box *b);
    double apply_twice(double (*f)(double), double x);
    double cabs2(double _Complex z, int k);
    double first_of(const double *p);
    double halve(double x);
    double halve_again(double x);
"""

_SOURCE = r"""
    #include <complex.h>
    struct pt { double x; double y; };
    typedef struct { double a; double b; } Box;
    double scale(double x, double k) { return x * k; }
    double pt_dot(const struct pt *p, double a, double b) { return p->x * a + p->y * b; }
    double box_sum(const Box *b) { return b->a + b->b; }
    double apply_twice(double (*f)(double), double x) { return f(f(x)); }
    double cabs2(double _Complex z, int k)
    { return k * (creal(z) * creal(z) + cimag(z) * cimag(z)); }
    double first_of(const double *p) { return p[0]; }
    double halve(double x) { return x / 2; }
    double halve_again(double x) { return x / 4; }
"""


@pytest.fixture(scope="module")
def api():
    """A cffi API-mode extension module, compiled for this test run."""
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    ffi.set_source("_nt_cffi_api", _SOURCE)
    out = os.path.join(BUILD, "cffi_api")
    os.makedirs(out, exist_ok=True)
    with no_preload():
        ffi.compile(tmpdir=out, verbose=False)
    sys.path.insert(0, out)
    try:
        import _nt_cffi_api as mod
    finally:
        sys.path.remove(out)
    return mod


class Pt(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("y", ctypes.c_double)]


Pt.__name__ = "pt"


# -------------------------------------------------- cffi


def test_cffi_api_function_is_a_target(api):
    assert type(api.lib.scale).__name__ == "builtin_function_or_method"
    t = nt.bind(api.lib.scale, nt.ARG, 2.5)
    assert str(t.csig) == "double (double)"
    for x in (0.0, -3.0, 1e300, 7.25):
        assert t(x) == api.lib.scale(x, 2.5)
    assert as_function(api.lib.scale).name == "scale"


def test_cffi_api_function_is_a_function_pointer_value(api):
    """lib.f of a compiled cffi module binds a function-pointer parameter as
    it is a target: its declared type checked, the module's function
    called through the pointer, the object held in bindings."""
    t = nt.bind(api.lib.apply_twice, api.lib.halve, nt.ARG)
    assert t(6.0) == 1.5 == api.lib.apply_twice(api.ffi.addressof(api.lib, "halve"), 6.0)
    assert t.bindings[0].owner is api.lib.halve
    t.rebind(0, api.lib.halve_again)
    assert t(6.0) == 0.375
    with pytest.raises(TypeError, match=r"^argument 1 \(double \(\*\)\(double\)\): expected "
                                        r"a function 'double \(double\)', got "
                                        r"'double \(double, double\)'$"):
        nt.bind(api.lib.apply_twice, api.lib.scale, 1.0)


def test_cffi_api_struct_pointer_function(api):
    fn = as_function(api.lib.pt_dot)
    # cffi keeps no const in its types
    assert str(fn.csig) == "double (struct pt *, double, double)"
    p = api.ffi.new("struct pt *", [2.0, -3.0])
    t = nt.bind(api.lib.pt_dot, p, nt.ARG, nt.ARG)
    assert t(1.5, 4.0) == api.lib.pt_dot(p, 1.5, 4.0) == 2.0 * 1.5 - 3.0 * 4.0
    # a typedef'd struct prints as cffi wrote it
    assert str(as_function(api.lib.box_sum).csig) == "double (Box *)"
    box = api.ffi.new("Box *", [1.25, 2.5])
    assert nt.bind(api.lib.box_sum, box)() == api.lib.box_sum(box) == 3.75
    with pytest.raises(TypeError, match=r"argument 1 \(Box \*\).*struct pt"):
        nt.bind(api.lib.box_sum, p)


def test_thunk_cffi_pointer_keeps_the_thunk_alive(api):
    t = nt.bind(api.lib.scale, nt.ARG, 3.0)
    ref = weakref.ref(t)
    fp = t.cffi(api.ffi)
    assert api.ffi.typeof(fp) is api.ffi.typeof("double(*)(double)")
    del t
    gc.collect()
    assert ref() is not None                  # held by the cdata
    assert fp(2.0) == 6.0
    # a cffi function taking a function pointer takes it
    assert api.lib.apply_twice(fp, 1.5) == 13.5
    del fp
    gc.collect()
    assert ref() is None


def test_thunk_cffi_signature_types(api, ifn):
    f = ifn("filter_weighted", "int (const double *, double *, npy_intp, double *, void *)")
    t = nt.bind(f, np.ones(3), nt.ARG, nt.ARG, nt.ARG, nt.ARG)
    fp = t.cffi(api.ffi)
    assert api.ffi.typeof(fp) is api.ffi.typeof("int(*)(double *, intptr_t, double *, void *)")
    buf = api.ffi.new("double[3]", [1.0, 2.0, 4.0])
    out = api.ffi.new("double *")
    assert fp(buf, 3, out, api.ffi.NULL) == 1
    assert out[0] == 7.0


@pytest.mark.parametrize("engine", ENGINES)
def test_thunk_cffi_pointer_spells_complex_and_bool_as_cffi_does(fixture_path, engine):
    """cffi reads no "double complex" or "float complex": a thunk's types
    reach it as _Complex, a bare parameter type as one with a qualifier."""
    ffi = cffi.FFI()
    fn = nt.Function.from_library(fixture_path, "f_d_D", "double (double complex z)")
    fp = nt.bind(fn, nt.ARG, engine=engine).cffi(ffi)
    assert ffi.typeof(fp) is ffi.typeof("double(*)(double _Complex)")
    fn = nt.Function.from_library(fixture_path, "f_B_B", "bool (bool a)")
    fp = nt.bind(fn, nt.ARG, engine=engine).cffi(ffi)
    assert ffi.typeof(fp) is ffi.typeof("_Bool(*)(_Bool)")
    assert fp(True) is True and fp(False) is False
    fn = nt.Function.from_library(fixture_path, "f_d_pi", "double (const double *x, int n)")
    fp = nt.bind(fn, nt.ARG, 2, engine=engine).cffi(ffi)
    assert ffi.typeof(fp) is ffi.typeof("double(*)(double *)")
    assert fp(ffi.new("double[2]", [1.5, 2.0])) == 3.5


def test_cffi_complex_parameters(api):
    fn = as_function(api.lib.cabs2)
    assert str(fn.csig) == "double (double complex, int)"
    z = complex(1.5, -2.0)
    t = nt.bind(api.lib.cabs2, z, nt.ARG)
    assert t(3) == 3 * abs(z) ** 2
    ffi = cffi.FFI()
    with pytest.raises(ValueError, match="variadic"):
        nt.Signature(ffi.typeof("int(*)(const char *, ...)"))


# -------------------------------------------------- struct pointers


def test_struct_pointer_forms_parse_and_print_back(api):
    assert str(nt.Signature("double (const struct pt *p, double)")) == \
        "double (const struct pt *, double)"
    assert str(nt.Signature("double (S *, union U **)", {"S": "struct S"})) == \
        "double (S *, union U **)"
    assert nt.Signature("void (S *)", {"S": "struct S"}) == nt.Signature("void (struct S *)")
    assert nt.Signature("void (struct S *)") != nt.Signature("void (struct T *)")
    assert nt.Signature("void (struct S *)") != nt.Signature("void (void *)")
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(Pt))
    assert str(nt.Signature(proto)) == "double (struct pt *)"
    assert str(nt.Signature(api.ffi.typeof("double(*)(struct pt *, Box *)"))) == \
        "double (struct pt *, Box *)"
    for bad, msg in [("void (struct S)", "passed by value"), ("struct S (void)", "by value"),
                     ("void (struct *)", "struct name"), ("void (enum E *)", "'enum'")]:
        with pytest.raises(ValueError, match=msg):
            nt.Signature(bad)


def test_struct_pointer_binds_none_address_ctypes_cffi(ifn, api):
    null = ifn("pt_is_null", "int (const struct pt *)")
    assert nt.bind(null, None)() == 1
    p = Pt(2.0, 3.0)
    assert nt.bind(null, nt.address(ctypes.addressof(p)))() == 0
    dot = ifn("pt_dot", "double (const struct pt *, double, double)")
    assert nt.bind(dot, nt.address(ctypes.addressof(p)), 1.0, 10.0)() == 32.0
    t = nt.bind(dot, ctypes.pointer(p), nt.ARG, nt.ARG)
    assert t(1.0, 10.0) == 32.0
    p.x = 5.0                                  # live: the pointer, not a copy
    assert t(1.0, 10.0) == 35.0
    cp = api.ffi.new("struct pt *", [4.0, 0.5])
    assert nt.bind(dot, cp, 2.0, 2.0)() == 9.0
    t.rebind(0, cp)
    assert t(2.0, 2.0) == 9.0


@pytest.mark.parametrize("engine", ENGINES)
def test_foreign_pointers_keep_their_pointee_alive(ifn, api, engine):
    # a ctypes pointer or a cffi cdata bound, forwarded or rebound is held
    # by the thunk: what it points to lives while the thunk does, whoever
    # else lets go of it
    dot = ifn("pt_dot", "double (const struct pt *, double, double)")
    fwd = nt.bind(dot, nt.ARG, 1.0, 10.0, engine=engine)

    def ctypes_pt():
        p = Pt(2.0, 3.0)
        return ctypes.pointer(p), weakref.ref(p)

    def cffi_pt():
        cp = api.ffi.new("struct pt *", [2.0, 3.0])
        return cp, weakref.ref(cp)

    for make in (ctypes_pt, cffi_pt):
        p, alive = make()
        t = nt.bind(dot, p, 1.0, 10.0, engine=engine)
        q, rebound = make()
        r = nt.bind(dot, nt.address(0), 1.0, 10.0, engine=engine)
        r.rebind(0, q)
        del p, q
        gc.collect()
        assert alive() is not None and rebound() is not None
        assert t() == 32.0 and r() == 32.0 and fwd(*make()[:1]) == 32.0
        t.release()
        r.release()
        gc.collect()
        assert alive() is None and rebound() is None


@pytest.mark.parametrize("engine", ENGINES)
def test_pointers_to_struct_pointers_take_no_buffer(ilib, engine):
    # struct pt ** is no struct pointer: a buffer, declared struct or not,
    # is refused for its level of indirection, by bind, the core and a call
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    fn = nt.Function(addr, "double (const struct pt **p, int n)", structs={"pt": PT},
                     owner=ilib)
    fwd = nt.bind(fn, nt.ARG, 3, engine=engine)
    text = (r"argument 1 \(p: const struct pt \*\*\): a buffer can be bound to a single-level "
            r"pointer \(T \*\) only, not to const struct pt \*\*")
    for value in (np.zeros(3), _points(), bytearray(48), memoryview(_points()),
                  (Pt * 3)()):
        with pytest.raises(TypeError, match=text):
            nt.bind(fn, value, 3, engine=engine)
        with pytest.raises(TypeError, match=text):
            nt._core.Thunk(fn._signature, addr, (value, 3), engine=engine)
        with pytest.raises(TypeError, match=text):
            fwd(value)


@pytest.mark.parametrize("engine", ENGINES)
def test_ctypes_pointers_forwarded_or_rebound_to_data_pointers_are_read_through(cfn, engine):
    # a ctypes pointer exports a buffer of its own bytes: forwarded to a
    # call, or rebound, it is still the pointer's value that goes, not taken
    # for an array
    first = cfn("f_d_pi", "double (const double *x, int n)")
    arr = (ctypes.c_double * 3)(1.0, 2.0, 4.0)
    one = nt.bind(first, nt.ARG, 1, engine=engine)
    three = nt.bind(first, nt.ARG, 3, engine=engine)
    assert one(ctypes.pointer(ctypes.c_double(2.5))) == 2.5
    assert three(ctypes.cast(arr, ctypes.POINTER(ctypes.c_double))) == 7.0
    assert three(ctypes.c_void_p(ctypes.addressof(arr))) == 7.0
    y = ctypes.c_double(7.5)
    bound = nt.bind(first, ctypes.pointer(ctypes.c_double(1.5)), 1, engine=engine)
    assert bound() == 1.5
    bound.rebind(0, ctypes.pointer(y))
    assert bound() == 7.5


def test_struct_pointer_pointee_checked(ifn, api):
    dot = ifn("pt_dot", "double (const struct pt *, double, double)")

    class Other(ctypes.Structure):
        _fields_ = [("x", ctypes.c_double)]

    for bad, what in [(ctypes.pointer(Other(1.0)), "struct Other"),
                      (ctypes.pointer(ctypes.c_double(1.0)), "double"),
                      (api.ffi.new("Box *"), "struct Box"),
                      (api.ffi.new("double[2]"), "double")]:
        with pytest.raises(TypeError, match=rf"argument 1 \(const struct pt \*\).*points to "
                                            rf"{what}, the parameter to struct pt"):
            nt.bind(dot, bad, 1.0, 1.0)


# A struct pointer takes a buffer only with a declared layout of that struct:
# a bare buffer's length says nothing about it, and pt_sum reads n structs.

PT = np.dtype([("x", "f8"), ("y", "f8")])
PT_SUM = "double (const struct pt *p, int n)"
LABEL = r"argument 1 \(p: const struct pt \*\): "


def _points():
    return np.array([(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)], dtype=PT)


@pytest.mark.parametrize("engine", ENGINES)
def test_struct_pointer_refuses_bare_buffers(ifn, engine):
    total = ifn("pt_sum", PT_SUM)
    for bad, fmt in [(np.ones(6), "'d'"), (b"\0" * 48, "'B'"), (bytearray(48), "'B'"),
                     (np.zeros(3, "V16"), "'16x'"), (memoryview(np.ones(6)), "'d'"),
                     (nt.strided(np.ones(12)[::2]), "'d'")]:
        with pytest.raises(TypeError, match=LABEL + f"a buffer of format {fmt}, which has no "
                                                    r"struct layout; declare the struct once, "
                                                    r"numthunk.Function\(\.\.\., structs="):
            nt.bind(total, bad, 3, engine=engine)
    with pytest.raises(TypeError, match=LABEL + "a structured array, but numthunk knows no "
                                                "layout of struct pt"):
        nt.bind(total, _points(), 3, engine=engine)
    # the core refuses a bare buffer too, without the package's resolution
    with pytest.raises(TypeError, match=LABEL + "a buffer of format 'd' has no declared layout"):
        nt._core.Thunk(total._signature, total.address, (np.ones(6), 3), engine=engine)


@pytest.mark.parametrize("fmt", ["T{>(16)B:b:}", "T{>B:a:>(15)c:b:}", "T{!16s:s:}",
                                 "T{>T{(8)B:a:}:p:(2)4x:q:}", "T{>2b:a:(14)?:b:}"])
def test_struct_pointer_takes_one_byte_fields_in_either_byte_order(ilib, ntexport, fmt):
    # byte order means nothing to a field of one byte: an exporter that
    # writes '>' or '!' before bytes, sub-arrays, pads, chars or a nested
    # struct of them describes native memory
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": 16}, owner=ilib)
    buf = ntexport.Buffer(np.zeros(48, dtype=np.uint8), fmt, 16, (3,), (16,))
    assert nt.bind(total, buf, 3)() == 0.0


NATIVE = "<" if sys.byteorder == "little" else ">"


@pytest.mark.parametrize("order", ["", "@", "=", "<", ">", "!"])
def test_struct_pointer_takes_a_struct_format_after_any_byte_order(ilib, ntexport, order):
    # a byte-order character may open the whole format, before its T{: the
    # buffer is a struct's all the same; the order then holds for the fields
    # (native ones read, the other order refused by its field)
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": 16}, owner=ilib)
    raw = np.array([1.0, 2.0, 3.0, 4.0])
    buf = ntexport.Buffer(raw.view(np.uint8), order + "T{d:x:d:y:}", 16, (2,), (16,))
    if order in ("", "@", "=", NATIVE):
        assert nt.bind(total, buf, 2)() == 10.0
    else:
        with pytest.raises(TypeError, match=LABEL + "the struct's field 'x' is in non-native"):
            nt.bind(total, buf, 2)
    tiny = ntexport.Buffer(np.zeros(32, dtype=np.uint8), order + "T{(16)B:b:}", 16, (2,), (16,))
    assert nt.bind(total, tiny, 2)() == 0.0


@pytest.mark.parametrize("fmt, field", [
    ("T{O(8)B:a:@d:x:}", None), ("T{O(8)B:a:=d:x:}", None), ("T{O(8)B:a:^d:x:}", None),
    ("T{O(8)B:a:Nd:x:}", None), ("T{O(8)B:a:d:x:}", "x"), ("T{=(8)B:a:OH:h:(3)H:x:}", "h"),
    ("T{OQ:q:d:x:}", "q"), ("T{Oz:p:d:x:}", "p"), ("T{Oa:a:(15)x:}", "a"),
    ("T{OA:a:(15)x:}", "a"), ("T{OZd:z:}", "z")])
def test_struct_byte_order_holds_until_the_next_order_character(ilib, ntexport, fmt, field):
    # O: the other byte order, N: this host's written out; '@', '=' and '^'
    # are native too. Any code but the one-byte ones (upper or lower case,
    # one numthunk does not know) after the other order is refused by name
    fmt = fmt.replace("O", OTHER).replace("N", NATIVE)
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": 16}, owner=ilib)
    buf = ntexport.Buffer(np.zeros(48, dtype=np.uint8), fmt, 16, (3,), (16,))
    if field is None:
        assert nt.bind(total, buf, 3)() == 0.0
    else:
        with pytest.raises(TypeError, match=LABEL + f"the struct's field '{field}' is in "
                                                    "non-native byte order"):
            nt.bind(total, buf, 3)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", [PT, Pt, 16, "cffi"], ids=["dtype", "ctypes", "size", "cffi"])
def test_struct_pointer_takes_a_declared_layout(ilib, api, engine, layout):
    if layout == "cffi":
        layout = api.ffi.typeof("struct pt")
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": layout}, owner=ilib)
    a = _points()
    t = nt.bind(total, a, nt.size(a), engine=engine)
    assert t() == 21.0
    a["x"][0] = 10.0                            # live: the array, not a copy
    assert t() == 30.0
    with pytest.raises(TypeError, match=LABEL + r"the array's items are 8 bytes, but struct pt "
                                                r"is declared 16 bytes"):
        nt.bind(total, np.zeros(3, dtype=[("x", "f8")]), 3, engine=engine)
    with pytest.raises(TypeError, match=LABEL + "a buffer of format 'd'"):
        t.rebind(0, np.ones(6))
    t.rebind(0, np.ones(2, dtype=PT))
    assert t() == 4.0                          # size() followed the new array
    fwd = nt.bind(total, nt.ARG, 3, engine=engine)
    assert fwd(_points()) == 21.0
    with pytest.raises(TypeError, match=LABEL + "a buffer of format 'd'"):
        fwd(np.ones(6))
    with pytest.raises(TypeError, match=LABEL + r"the array's items are 8 bytes"):
        nt.bind(total, np.zeros(3, dtype=[("x", "f8")]).ctypes, 3, engine=engine)
    assert nt.bind(total, a.ctypes, 3, engine=engine)() == 30.0
    assert total(_points(), 3) == 21.0          # the Function called from Python
    with pytest.raises(TypeError, match=LABEL + "a buffer of format 'd'"):
        total(np.ones(6), 3)
    assert nt.bind(total, _points(), 3, keep=ilib, engine=engine)() == 21.0


OTHER = ">" if sys.byteorder == "little" else "<"


class PtOther(ctypes.BigEndianStructure if sys.byteorder == "little"
              else ctypes.LittleEndianStructure):
    _fields_ = [("x", ctypes.c_double), ("y", ctypes.c_double)]


PtOther.__name__ = "pt"


@pytest.mark.parametrize("engine", ENGINES)
def test_struct_pointer_refuses_fields_in_the_other_byte_order(ilib, engine):
    # a swapped double read as a native one is a silently wrong value: the
    # first field in the other order is named, whichever follows it (NumPy
    # writes the order once for a run of fields)
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": PT}, owner=ilib)
    for fields, name in [((OTHER, OTHER), "x"), (("=", OTHER), "y"), ((OTHER, "="), "x")]:
        swapped = _points().astype([("x", fields[0] + "f8"), ("y", fields[1] + "f8")])
        with pytest.raises(TypeError, match=LABEL + f"the struct's field '{name}' is in "
                                                    "non-native byte order"):
            nt.bind(total, swapped, 3, engine=engine)
        native = swapped.astype(swapped.dtype.newbyteorder("="))
        assert nt.bind(total, native, 3, engine=engine)() == 21.0
    nested = np.zeros(3, dtype=[("p", [("x", OTHER + "f8"), ("y", OTHER + "f8")])])
    with pytest.raises(TypeError, match=LABEL + "the struct's field 'x' is in non-native"):
        nt.bind(total, nested, 3, engine=engine)
    # fields of one byte read the same in either order
    tiny = nt.Function(addr, PT_SUM, structs={"pt": 16}, owner=ilib)
    bytes16 = np.zeros(3, dtype=[("b", OTHER + "u1", (16,))])
    assert nt.bind(tiny, bytes16, 3, engine=engine)() == 0.0
    fwd = nt.bind(total, nt.ARG, 3, engine=engine)
    with pytest.raises(TypeError, match=LABEL + "the struct's field 'x' is in non-native"):
        fwd((PtOther * 3)(PtOther(1.0, 2.0), PtOther(3.0, 4.0), PtOther(5.0, 6.0)))
    with pytest.raises(TypeError, match=LABEL + "the struct's field 'x' is in non-native"):
        nt.bind(total, PtOther(1.0, 2.0), 1, engine=engine)
    assert fwd((Pt * 3)(Pt(1.0, 2.0), Pt(3.0, 4.0), Pt(5.0, 6.0))) == 21.0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", ["numpy", "ctypes"])
def test_forwarded_foreign_struct_values_are_checked_against_the_declaration(ilib, engine,
                                                                            layout):
    """A forwarded struct pointer called with a foreign value (arr.ctypes, a
    ctypes array of structures): the call resolves it against the target's
    structs= declaration, as bind and rebind do."""
    decl = PT if layout == "numpy" else Pt
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": decl}, owner=ilib)
    fwd = nt.bind(total, nt.ARG, 3, engine=engine)
    assert fwd(_points().ctypes) == 21.0
    pts = (Pt * 3)(Pt(1.0, 2.0), Pt(3.0, 4.0), Pt(5.0, 6.0))
    assert fwd(pts) == 21.0
    with pytest.raises(TypeError, match=LABEL + r"the array's items are 8 bytes, but struct pt "
                                                r"is declared 16 bytes"):
        fwd(np.zeros(3, dtype=[("x", "f8")]).ctypes)

    class Small(ctypes.Structure):
        _fields_ = [("x", ctypes.c_double)]

    with pytest.raises(TypeError, match=LABEL):
        fwd((Small * 3)())


@pytest.mark.parametrize("engine", ENGINES)
def test_struct_pointer_takes_ctypes_structures_by_name(ifn, engine):
    total = ifn("pt_sum", PT_SUM)
    pts = (Pt * 3)(Pt(1.0, 2.0), Pt(3.0, 4.0), Pt(5.0, 6.0))
    assert nt.bind(total, pts, 3, engine=engine)() == 21.0
    assert nt.bind(total, Pt(7.0, 8.0), 1, engine=engine)() == 15.0

    class Other(ctypes.Structure):
        _fields_ = [("x", ctypes.c_double)]

    with pytest.raises(TypeError, match=LABEL + "a ctypes Other_Array_3 holds struct Other, "
                                                "the parameter points to struct pt"):
        nt.bind(total, (Other * 3)(), 3, engine=engine)
    addr = total.address
    small = nt.Function(addr, PT_SUM, structs={"pt": 8})
    with pytest.raises(TypeError, match=LABEL + "ctypes struct pt is 16 bytes, but the target "
                                                "declares struct pt as 8 bytes"):
        nt.bind(small, pts, 3, engine=engine)


class num(ctypes.Union):                                        # noqa: N801 (C's name)
    _fields_ = [("d", ctypes.c_double), ("i", ctypes.c_int64)]


NUM_SUM = "double (const union num *u, int n, int tag)"
NUM_LABEL = r"argument 1 \(u: const union num \*\): "


@pytest.mark.parametrize("engine", ENGINES)
def test_union_pointer_takes_ctypes_unions_by_name(ifn, engine):
    # ctypes exports a Union's buffer as bytes, with no layout: an instance
    # binds by its address (kept alive, read live), an array by its items'
    # class, both checked by name and size like a Structure
    total = ifn("num_sum", NUM_SUM)
    one = num(d=2.5)
    t = nt.bind(total, one, 1, 0, engine=engine)
    assert t() == 2.5
    one.i = 7
    assert nt.bind(total, one, 1, 1, engine=engine)() == 7.0
    one.d = -1.25
    assert t() == -1.25                       # live: the union as it is now
    many = (num * 3)(num(d=1.0), num(d=2.0), num(d=4.5))
    assert nt.bind(total, many, 3, 0, engine=engine)() == 7.5
    many[1].i = 40
    many[0].i, many[2].i = 1, 2
    assert nt.bind(total, many, 3, 1, engine=engine)() == 43.0
    fwd = nt.bind(total, nt.ARG, 1, 1, engine=engine)
    assert fwd(num(i=9)) == fwd(ctypes.pointer(num(i=9))) == 9.0
    ref = weakref.ref(one)
    del one
    gc.collect()
    assert ref() is not None and t() == -1.25  # the thunk holds the union
    t.release()
    gc.collect()
    assert ref() is None

    class other(ctypes.Union):                                  # noqa: N801
        _fields_ = [("d", ctypes.c_double)]

    with pytest.raises(TypeError, match=NUM_LABEL + "a ctypes other holds union other, the "
                                                    "parameter points to union num$"):
        nt.bind(total, other(), 1, 0, engine=engine)
    with pytest.raises(TypeError, match=NUM_LABEL + "a ctypes pt holds struct pt, the "
                                                    "parameter points to union num$"):
        nt.bind(total, Pt(), 1, 0, engine=engine)
    small = nt.Function(total.address, NUM_SUM, structs={"num": 4})
    with pytest.raises(TypeError, match=NUM_LABEL + "ctypes union num is 8 bytes, but the "
                                                    "target declares union num as 4 bytes$"):
        nt.bind(small, num(), 1, 0, engine=engine)
    # a union's bytes carry no layout: the same memory as a plain buffer, or
    # through strided(), is refused, and the message names a ctypes Union
    for value, fmt in ((bytearray(8), "'B'"), (nt.strided(many), "'B'")):
        with pytest.raises(TypeError, match=NUM_LABEL + rf"a buffer of format {fmt}.*a ctypes "
                                                        r"Union named num \(an instance or an "
                                                        r"array\), a cffi 'union num \*'"):
            nt.bind(total, value, 1, 0, engine=engine)
    with pytest.raises(TypeError, match=NUM_LABEL + r"a buffer of format 'B' has no declared "
                                                    r"layout for union num; .* a ctypes Union "
                                                    r"named num"):
        nt._core.Thunk(total._signature, total.address, (bytearray(8), 1, 0), engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_ctypes_and_cffi_signatures_declare_their_structs(ilib, api, engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(Pt), ctypes.c_int)
    total = proto(ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value)
    assert nt.bind(total, _points(), 3, engine=engine)() == 21.0
    with pytest.raises(TypeError, match=r"argument 1 \(struct pt \*\): the array's items are 8 "
                                        r"bytes, but struct pt is declared 16 bytes"):
        nt.bind(total, np.zeros(3, dtype=[("x", "f8")]), 3, engine=engine)
    dot = nt.bind(api.lib.pt_dot, np.array([(2.0, 3.0)], dtype=PT), nt.ARG, nt.ARG,
                  engine=engine)
    assert dot(1.0, 10.0) == 32.0
    box = np.array([(1.5, 2.5)], dtype=[("a", "f8"), ("b", "f8")])
    assert nt.bind(api.lib.box_sum, box, engine=engine)() == 4.0
    with pytest.raises(TypeError, match=r"the array's items are 24 bytes, but struct Box is "
                                        r"declared 16 bytes"):
        nt.bind(api.lib.box_sum, np.zeros(1, dtype=[("a", "f8"), ("b", "f8"), ("c", "f8")]))


def test_struct_declarations_are_checked_and_travel(ilib):
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    for bad, exc, text in [({"pt": "double"}, TypeError, "expected a struct layout"),
                           ({"pt": 0}, ValueError, "must be positive"),
                           ({"pt": True}, TypeError, "got bool"),
                           ({3: PT}, TypeError, "keys are struct names"),
                           ([PT], TypeError, "structs= must be a dict")]:
        with pytest.raises(exc, match=text):
            nt.Function(addr, PT_SUM, structs=bad)
    assert nt.Function(addr, PT_SUM, structs={"struct pt": PT}).structs == {"pt": 16}
    import pickle
    path = ilib._name
    fn = nt.Function.from_library(path, "pt_sum", PT_SUM, structs={"pt": PT})
    again = pickle.loads(pickle.dumps(nt.bind(fn, _points(), 3)))
    assert again() == 21.0 and again.target.structs == {"pt": 16}


# A pointer takes plain data only. Items that hold Python objects, at any
# depth of a struct (a field, a nested struct's, a sub-array's), are refused
# for struct pointers and void * alike: the core reads them in the buffer's
# format (convert/buffer.c nt_check_plain), the package in a ctypes type, whose
# Union or packed Structure exports bytes (numthunk._foreign).

REST = ": C code cannot read or write them; bind an array of plain data"
VOID_SUM = "double (void *p, int n)"


def _ways(fn, engine):
    """A thunk of fn(p, n) bound to (None, 0), and every way a value v
    meets parameter p: bound, rebound in that thunk, forwarded, passed to
    fn called from Python."""
    t = nt.bind(fn, None, 0, engine=engine)
    fwd = nt.bind(fn, nt.ARG, 0, engine=engine)
    return t, (lambda v: nt.bind(fn, v, 0, engine=engine), lambda v: t.rebind(0, v), fwd,
               lambda v: fn(v, 0))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fields, path", [
    ([("x", "f8"), ("o", "O")], "o"),
    ([("o", "O"), ("y", "f8")], "o"),
    ([("x", "f8"), ("s", [("i", "i4"), ("o", "O")])], "s.o"),
    ([("x", "f4"), ("s", "O", (3,))], "s"),
    ([("p", [("v", "f8"), ("a", "O", (2,))], (2,))], "p.a"),
    ([("a", [("b", [("c", "O")])]), ("z", "f8")], "a.b.c"),
    ([("q", [("y", "f8"), ("n", [("w", "i8")])]), ("o", "O")], "o"),
], ids=["field", "first", "nested", "subarray", "nested-subarray", "deep", "after-a-struct"])
def test_struct_pointer_refuses_python_objects_at_any_depth(ilib, engine, fields, path):
    dt = np.dtype(fields)
    assert dt.hasobject
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": dt}, owner=ilib)
    void = nt.Function(addr, VOID_SUM, owner=ilib)
    objects = np.zeros(2, dtype=dt)
    for fn, label in [(total, LABEL), (void, r"argument 1 \(p: void \*\): ")]:
        t, ways = _ways(fn, engine)
        # (NumPy writes the format of each array: '=' where it sees a field
        # off its alignment)
        for value, array in [(objects, objects), (objects[:1], objects[:1]),
                             (memoryview(objects), objects), (objects.ctypes, objects),
                             (nt.strided(objects[::2]), objects[::2])]:
            text = (label + re.escape(f"the struct's field '{path}' holds Python objects "
                                      f"(format '{memoryview(array).format}')" + REST) + "$")
            for how in ways:
                with pytest.raises(TypeError, match=text):
                    how(value)
        assert t.bindings[0] is None and t() == 0.0


@pytest.mark.parametrize("fmt, text", [
    ("T{dO}", "a field of the struct holds Python objects (format 'T{dO}')"),
    ("T{d:x:<O:o:}", "the struct's field 'o' holds Python objects (format 'T{d:x:<O:o:}')"),
    ("T{d:x:T{O}:s:}", "a field of the struct holds Python objects (format 'T{d:x:T{O}:s:}')"),
    ("T{d:O:T{d:y:O:o:}:s:}",
     "the struct's field 's.o' holds Python objects (format 'T{d:O:T{d:y:O:o:}:s:}')"),
])
def test_struct_pointer_refuses_python_objects_from_any_exporter(ilib, ntexport, fmt, text):
    # an exporter's own struct formats: an unnamed field is refused
    # unnamed, and a field named O (':O:') is a name, not an object
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": 16}, owner=ilib)
    buf = ntexport.Buffer(np.zeros(48, dtype=np.uint8), fmt, 16, (3,), (16,))
    with pytest.raises(TypeError, match=LABEL + re.escape(text + REST) + "$"):
        nt.bind(total, buf, 3)
    assert buf.exports == 0
    named = ntexport.Buffer(np.ones(6), "T{d:O:d:y:}", 16, (3,), (16,))
    assert nt.bind(total, named, 3)() == 6.0


@pytest.mark.parametrize("engine", ENGINES)
def test_structs_of_plain_data_bind_at_any_depth(ilib, engine):
    # no objects, no refusal: nested structs and sub-arrays of doubles are
    # struct pt's 16 bytes, read by pt_sum through struct pt * and void *
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    void = nt.Function(addr, VOID_SUM, owner=ilib)
    for fields in (PT, [("p", [("x", "f8"), ("y", "f8")])], [("xy", "f8", (2,))],
                   [("p", [("v", "f8")], (2,))],
                   np.dtype({"names": ["x", "y"], "formats": ["f8", "f8"], "offsets": [0, 8],
                             "itemsize": 16}, align=True)):
        dt = np.dtype(fields)
        a = np.frombuffer(np.arange(1.0, 7.0).tobytes(), dtype=dt).copy()
        total = nt.Function(addr, PT_SUM, structs={"pt": dt}, owner=ilib)
        for fn in (total, void):
            assert nt.bind(fn, a, 3, engine=engine)() == 21.0
            assert nt.bind(fn, nt.ARG, 3, engine=engine)(a) == 21.0
            t = nt.bind(fn, a[:1], 1, engine=engine)
            t.rebind(0, a[1:])
            assert t() == 7.0


class ObjUnion(ctypes.Union):
    _fields_ = [("d", ctypes.c_double), ("o", ctypes.py_object)]


class ObjPacked(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("tag", ctypes.c_char), ("o", ctypes.py_object)]


class ObjInner(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("u", ObjUnion)]


class ObjPt(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("o", ctypes.py_object)]


ObjPt.__name__ = "pt"


@pytest.mark.parametrize("engine", ENGINES)
def test_ctypes_values_holding_python_objects_are_refused(ilib, cfn, engine):
    # ctypes exports a Union and a packed Structure as bytes ('B'), and a
    # pointer's pointee not at all: the package looks at their types
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": 16}, owner=ilib)
    void = nt.Function(addr, VOID_SUM, owner=ilib)
    cases = [(ObjUnion(), "a ctypes ObjUnion holds Python objects (field 'o')"),
             ((ObjUnion * 2)(), "a ctypes ObjUnion_Array_2 holds Python objects (field 'o')"),
             (ObjPacked(), "a ctypes ObjPacked holds Python objects (field 'o')"),
             (ObjInner(), "a ctypes ObjInner holds Python objects (field 'u.o')"),
             ((ctypes.py_object * 3)(), "a ctypes py_object_Array_3 holds Python objects"),
             (nt.strided((ObjInner * 2)()),
              "a ctypes ObjInner_Array_2 holds Python objects (field 'u.o')"),
             (ObjPt(), "a ctypes pt holds Python objects (field 'o')"),
             (ctypes.pointer(ObjPt()), "a ctypes LP_pt points to Python objects (field 'o')")]
    # pointers to other pointees are refused by struct pt * for those
    pointers = [(ctypes.pointer(ctypes.py_object(1)), "a ctypes LP_py_object points to Python "
                                                      "objects"),
                (ctypes.pointer(ObjInner()), "a ctypes LP_ObjInner points to Python objects "
                                             "(field 'u.o')")]
    for fn, label in [(total, LABEL), (void, r"argument 1 \(p: void \*\): ")]:
        t, ways = _ways(fn, engine)
        for value, what in cases + (pointers if fn is void else []):
            instead = "a pointer to" if "points to" in what else "an array of"
            text = label + re.escape(f"{what}: C code cannot read or write them; bind "
                                     f"{instead} plain data") + "$"
            for how in ways:
                with pytest.raises(TypeError, match=text):
                    how(value)
        assert t.bindings[0] is None and t() == 0.0
    # a ctypes value of plain data binds as before: its own address goes
    ident = cfn("f_p_p", "void *(void *p)")
    for plain in (num(d=1.5), (num * 2)(), Pt(1.0, 2.0), (ctypes.c_double * 2)()):
        assert nt.bind(ident, plain, engine=engine)() == ctypes.addressof(plain)
        assert nt.bind(ident, nt.ARG, engine=engine)(plain) == ctypes.addressof(plain)
    assert nt.bind(void, (Pt * 3)(Pt(1.0, 2.0), Pt(3.0, 4.0), Pt(5.0, 6.0)), 3,
                   engine=engine)() == 21.0


# A struct buffer is aligned for its struct as a T * buffer is for T: to its
# most aligned field (convert/buffer.c nt_struct_align), as the C compiler lays the
# struct out, but no more than divides the item size (a packed struct's is
# 1). NumPy calls a structured array aligned anywhere unless its dtype was
# made with align=True, so the refusal says to copy it.

def _misaligned(dt, n=3):
    """n items of dt one byte past an aligned address."""
    raw = np.zeros(dt.itemsize * n + 8, dtype=np.uint8)
    base = (-raw.ctypes.data) % 8
    view = raw[base + 1:base + 1 + dt.itemsize * n].view(dt)
    assert view.ctypes.data % 8 == 1 and view.flags.aligned == (dt.alignment == 1)
    return view


def _not_aligned(align):
    return (LABEL + rf"the buffer's data is not aligned to {align} bytes, the alignment of its "
            r"struct's most aligned field \(address 0x[0-9a-f]+\); copy it, e.g. arr\.copy\(\)$")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dt", [PT, np.dtype([("x", "f8"), ("y", "f8")], align=True)],
                         ids=["align=False", "align=True"])
def test_struct_pointer_refuses_a_misaligned_array(ilib, engine, dt):
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value
    total = nt.Function(addr, PT_SUM, structs={"pt": dt}, owner=ilib)
    odd = _misaligned(dt)
    odd[:] = _points()
    t = nt.bind(total, _points(), 3, engine=engine)
    fwd = nt.bind(total, nt.ARG, 3, engine=engine)
    for value in (odd, memoryview(odd), odd.ctypes, nt.strided(odd),
                  (Pt * 3).from_buffer(odd.view(np.uint8))):
        for how in (lambda v: nt.bind(total, v, 3, engine=engine), lambda v: t.rebind(0, v),
                    fwd, lambda v: total(v, 3)):
            with pytest.raises(ValueError, match=_not_aligned(8)):
                how(value)
    # a T * refuses the same memory as doubles, as it did
    with pytest.raises(ValueError, match=r"the buffer's data is not aligned to 8 bytes"):
        nt.bind(nt.Function(addr, "double (const double *p, int n)"), odd.view("f8"), 3)
    # the aligned array, and a copy of the misaligned one, are read
    assert t() == 21.0 and fwd(_points()) == 21.0
    assert nt.bind(total, odd.copy(), 3, engine=engine)() == 21.0
    # an array whose stride is not a multiple of 8 steps off it too
    raw = np.zeros(16 * 4, dtype=np.uint8)
    skewed = np.ndarray((2,), dtype=dt, buffer=raw, strides=(20,))
    with pytest.raises(ValueError, match=_not_aligned(8)):
        nt.bind(total, nt.strided(skewed), 2, engine=engine)


LONG_DOUBLE = ctypes.alignment(ctypes.c_longdouble)


@pytest.mark.parametrize("fmt, itemsize, align", [
    ("T{d:x:d:y:}", 16, 8), ("T{<d:x:<d:y:}", 16, 8), ("T{b:a:xxxi:i:}", 8, 4),
    ("T{B:a:=d:b:}", 9, 1), ("T{(16)B:b:}", 16, 1), ("T{T{h:a:h:b:}:p:(2)i:q:}", 12, 4),
    ("T{Zf:z:}", 8, 4), ("T{Zd:z:}", 16, 8), ("T{e:h:}", 2, 2), ("T{3w:s:}", 12, 4),
    ("T{d:x:i:y:}", 12, 4), ("T{P:p:}", 8, 8), ("T{?:a:c:b:}", 2, 1),
    ("T{b:a:(15)x:g:g:}", 32, LONG_DOUBLE)])
def test_struct_alignment_is_that_of_its_most_aligned_field(ntexport, fmt, itemsize, align):
    # the buffer's own layout says what the struct needs: its items bind at
    # a multiple of it, and are refused half of it past one
    fn = nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const struct pt *p)",
                     structs={"pt": itemsize})
    raw = np.zeros(itemsize * 4 + 64, dtype=np.uint8)
    base = (-raw.ctypes.data) % 32
    for offset in (base, base + align):
        buf = ntexport.Buffer(raw, fmt, itemsize, (2,), (itemsize,), offset=offset)
        assert nt.bind(fn, buf)() == raw.ctypes.data + offset
    if align > 1:
        buf = ntexport.Buffer(raw, fmt, itemsize, (2,), (itemsize,), offset=base + align // 2)
        with pytest.raises(ValueError, match=_not_aligned(align)):
            nt.bind(fn, buf)
        assert buf.exports == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_packed_struct_is_read_at_any_address(ilib, engine):
    # struct pk is packed: a double at offset 1, 9 bytes. Its items are
    # aligned to 1, so an odd address is as good as any (pk_sum reads it)
    addr = ctypes.cast(ilib.pk_sum, ctypes.c_void_p).value
    pk = np.dtype([("tag", "u1"), ("v", "f8")])
    assert pk.itemsize == 9
    fn = nt.Function(addr, "double (const struct pk *p, int n)", structs={"pk": pk}, owner=ilib)
    odd = _misaligned(pk, 4)
    odd["v"] = [0.5, 1.5, 2.5, 3.5]
    odd["tag"] = 7
    assert nt.bind(fn, odd, nt.size(odd), engine=engine)() == 8.0
    assert nt.bind(fn, nt.ARG, 2, engine=engine)(odd[1:]) == 4.0


# -------------------------------------------------- foreign pointers


def test_c_wchar_p_passes_the_string(ifn):
    wide_len = ifn("wide_len", "size_t (const void *)")
    s = ctypes.c_wchar_p("hello, world")
    assert nt.bind(wide_len, s)() == 12


def test_pointer_to_pointer_from_ctypes_and_cffi(ifn, api):
    rows_sum = ifn("rows_sum", "double (double **, int, int)")
    r0 = (ctypes.c_double * 3)(1.0, 2.0, 3.0)
    r1 = (ctypes.c_double * 3)(4.0, 5.0, 6.5)
    dp = ctypes.POINTER(ctypes.c_double)
    rows = (dp * 2)(ctypes.cast(r0, dp), ctypes.cast(r1, dp))
    assert nt.bind(rows_sum, ctypes.cast(rows, ctypes.POINTER(dp)), 2, 3)() == 21.5
    keep = [api.ffi.new("double[3]", [1.0, 2.0, 3.0]), api.ffi.new("double[3]", [4.0, 5.0, 6.5])]
    crows = api.ffi.new("double *[2]", keep)
    assert nt.bind(rows_sum, crows, 2, 3)() == 21.5
    with pytest.raises(TypeError, match=r"points to double, the parameter to double \*"):
        nt.bind(rows_sum, ctypes.cast(r0, dp), 1, 3)


# Pointers at every depth, ctypes' and cffi's, against pointer parameters
# at every depth. The oracle walks the foreign type itself: each POINTER
# level (each '*') is one level; c_void_p and c_char_p are one level over
# void and char. A typed pointer is taken where C converts it without a
# cast: the same pointee at the same depth, or void * (which takes any);
# a bare c_void_p value is an address, taken by any pointer parameter.
_LEAVES = {"void": ctypes.c_void_p, "double": ctypes.c_double, "int": ctypes.c_int,
           "char": ctypes.c_char_p}


def _ctypes_pointee(t):
    depth = 0
    while isinstance(t, type) and issubclass(t, ctypes._Pointer):
        depth, t = depth + 1, t._type_
    base = {ctypes.c_void_p: "void", ctypes.c_char_p: "char"}.get(t)
    if base is not None:
        return base, depth + 1
    return {ctypes.c_double: "double", ctypes.c_int: "int"}[t], depth


def _taken(pointee, param):
    (base, depth), (pbase, pdepth) = pointee, param
    return (pbase, pdepth) == ("void", 1) or (base, depth) == (pbase, pdepth)


@pytest.mark.parametrize("leaf", list(_LEAVES))
def test_ctypes_and_cffi_pointers_at_every_depth_meet_parameters_at_every_depth(leaf):
    ffi = cffi.FFI()
    x = ctypes.c_double(1.5)
    addr = ctypes.addressof(x)
    for k in range(4):
        t = _LEAVES[leaf]
        for _ in range(k):
            t = ctypes.POINTER(t)
        if k == 0 and leaf in ("double", "int"):
            continue                                   # a scalar, no pointer
        given = _ctypes_pointee(t)
        cdecl = f"{leaf} {'*' * given[1]}"
        values = [("ctypes", ctypes.cast(addr, t)), ("cffi", ffi.cast(cdecl, addr))]
        if t is ctypes.c_void_p:
            values = [("ctypes", ctypes.c_void_p(addr))]   # an address: any pointer
        for pbase in _LEAVES:
            for pdepth in range(1, 5):
                fn = nt.Function(0x1000, f"void ({pbase} {'*' * pdepth})")   # never called
                for how, v in values:
                    want = t is ctypes.c_void_p or _taken(given, (pbase, pdepth))
                    try:
                        t_ = nt.bind(fn, v)
                    except TypeError as e:
                        assert not want, (how, cdecl, pbase, pdepth, str(e))
                        assert "argument 1" in str(e) and "points to" in str(e), str(e)
                    else:
                        assert want, (how, cdecl, pbase, pdepth)
                        assert t_.bindings[0].value == addr


def test_types_without_a_module_name_bind():
    # np.ctypeslib makes ctypes array types whose __module__ is None
    arr = np.arange(4, dtype=np.int32)
    c_arr = np.ctypeslib.as_ctypes(arr)
    fn = nt.Function(0x1000, "void (const int32_t *)")
    assert nt.bind(fn, c_arr).bindings[0] is c_arr


def test_pointee_checked_for_typed_pointers(api):
    first = as_function(api.lib.first_of)
    with pytest.raises(TypeError, match=r"argument 1 \(double \*\): a ctypes c_char_p "
                                        r"points to (char|int8_t)"):
        nt.bind(first, ctypes.c_char_p(b"abcdefgh"))
    with pytest.raises(TypeError, match=r"a cffi 'struct pt \*' points to struct pt"):
        nt.bind(first, api.ffi.new("struct pt *"))
    d = ctypes.c_double(2.5)
    assert nt.bind(first, ctypes.pointer(d))() == 2.5
    assert nt.bind(first, ctypes.c_void_p(ctypes.addressof(d)))() == 2.5   # untyped
    assert nt.bind(first, api.ffi.new("double *", 4.5))() == 4.5


def test_cffi_values_that_are_no_pointer_are_refused_for_pointer_parameters(api):
    first = as_function(api.lib.first_of)
    pt = api.ffi.new("struct pt *", [1.0, 2.0])
    for bad, cname in [(api.ffi.cast("int", 3), "int"), (api.ffi.cast("double", 2.5), "double"),
                       (pt[0], "struct pt")]:
        with pytest.raises(TypeError, match=rf"^argument 1 \(double \*\): expected a pointer, "
                                            rf"got cffi '{cname}'$"):
            nt.bind(first, bad)
    assert nt.bind(first, api.ffi.new("double[2]", [6.5, 1.0]))() == 6.5
    assert nt.bind(first, api.ffi.cast("double *", pt))() == 1.0


def test_cffi_objects_that_are_no_function_are_no_target(api):
    for bad, cname in [(api.ffi.new("double *"), "double *"),
                       (api.ffi.new("struct pt *"), "struct pt *"),
                       (api.ffi.cast("int", 3), "int")]:
        with pytest.raises(TypeError, match=rf"^cffi object of type '{re.escape(cname)}' is not "
                                            r"a function$"):
            nt.bind(bad, nt.ARG, 2.0)
    fp = api.ffi.addressof(api.lib, "scale")
    assert nt.bind(fp, nt.ARG, 2.0)(1.5) == 3.0


def test_cffi_objects_that_are_no_function_are_no_function_pointer_value(api, fixture_path):
    """A cffi data pointer, NULL, a value, an array or a type bound to a
    function-pointer parameter is refused naming the parameter, bound,
    forwarded and rebound; a cffi function of another type by its type."""
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi",
                                    "double (double (*f)(double), double a, double b, int n)")
    label = r"^argument 1 \(f: double \(\*\)\(double\)\): "
    halve = api.ffi.addressof(api.lib, "halve")
    t = nt.bind(fddi, halve, 0.0, 2.0, 100)
    fwd = nt.bind(fddi, nt.ARG, 0.0, 2.0, 100)
    bad = [(api.ffi.new("double *"), "double *"), (api.ffi.NULL, "void *"),
           (api.ffi.cast("int", 3), "int"), (api.ffi.new("double[2]"), "double[2]"),
           (api.ffi.new("struct pt *"), "struct pt *")]
    for obj, cname in bad:
        msg = label + (r"a cffi data pointer or value cannot be bound to a function pointer "
                       rf"\(got cffi '{re.escape(cname)}'\)$")
        with pytest.raises(TypeError, match=msg):
            nt.bind(fddi, obj, 0.0, 2.0, 100)
        with pytest.raises(TypeError, match=msg):
            fwd(obj)
        with pytest.raises(TypeError, match=msg):
            t.rebind("f", obj)
    with pytest.raises(TypeError, match=label + r"cannot bind a _cffi_backend.CType object"):
        nt.bind(fddi, api.ffi.typeof("double(*)(double)"), 0.0, 2.0, 100)
    with pytest.raises(TypeError, match=r"^cannot use a 'CType' object as a target"):
        nt.bind(api.ffi.typeof("double(*)(double)"), nt.ARG)
    other = api.ffi.addressof(api.lib, "scale")          # double (double, double)
    with pytest.raises(TypeError, match=label + r"expected a function 'double \(double\)', "
                                                r"got 'double \(double, double\)'"):
        nt.bind(fddi, other, 0.0, 2.0, 100)
    assert abs(t() - 1.0) < 1e-9 and abs(fwd(api.lib.halve) - 1.0) < 1e-9   # x / 2 on [0, 2]


@pytest.mark.parametrize("nogil", [None, True, False])
def test_a_cffi_function_takes_the_gil_policy_given(api, nogil):
    """nogil= for a cffi target (it declares none): True unless given."""
    from numthunk._api import as_function

    for target in (api.ffi.addressof(api.lib, "halve"), api.lib.halve):
        fn = as_function(target, nogil=nogil)
        assert fn.nogil is (True if nogil is None else nogil)
        t = nt.bind(target, nt.ARG) if nogil is None else nt.bind(target, nt.ARG, nogil=nogil)
        assert t.nogil is fn.nogil and t(3.0) == 1.5


def test_methods_that_only_look_like_a_cffi_lib_function_are_no_target(api, cfn):
    """lib.f of a compiled cffi module is a builtin method of its Lib: a
    method of the module's ffi, or of a Python class named Lib, is none."""
    class Lib:
        def f(self):
            return 0.0

    fdf = cfn("f_d_Fd", "double (double (*f)(double), double x)")
    for obj in (api.ffi.new, Lib().f):
        name = type(obj).__name__
        with pytest.raises(TypeError, match=rf"^cannot use a '{name}' object as a target"):
            nt.bind(obj, nt.ARG)
        with pytest.raises(TypeError, match=rf"^argument 1 \(f: double \(\*\)\(double\)\): "
                                            rf"cannot bind a {name} object"):
            nt.bind(fdf, obj, 1.0)
    assert nt.bind(fdf, api.lib.halve, 3.0)() == 1.5


def test_cffi_api_function_whose_module_is_not_imported_by_name(api, monkeypatch):
    scale = api.lib.scale
    assert nt.bind(scale, nt.ARG, 2.0)(1.5) == 3.0
    # the module loaded outside sys.modules: lib.f cannot find its ffi
    monkeypatch.delitem(sys.modules, "_nt_cffi_api")
    with pytest.raises(TypeError, match=r"^cffi function 'scale': its module '_nt_cffi_api' has "
                                        r"no 'ffi' to take its address with; pass "
                                        r"module\.ffi\.addressof\(module\.lib, name\)$"):
        nt.bind(scale, nt.ARG, 2.0)
    # what the message asks for
    assert nt.bind(api.ffi.addressof(api.lib, "scale"), nt.ARG, 2.0)(1.5) == 3.0


def test_thunk_cffi_refuses_a_forwarded_memoryview(api, ilib):
    addr = ctypes.cast(ilib.pt_sum, ctypes.c_void_p).value       # never called
    fn = nt.Function(addr, "double (__Pyx_memviewslice a, int n)", memoryviews={0: "double[::1]"})
    t = nt.bind(fn, nt.ARG, 3)
    with pytest.raises(TypeError, match=r"^thunk\.cffi\(\): the signature "
                                        r"double \(__Pyx_memviewslice\) has a Cython memoryview "
                                        r"parameter, which cffi cannot declare$"):
        t.cffi(api.ffi)
    bound = nt.bind(fn, np.ones(3), nt.ARG)               # the memoryview bound: int forwarded
    assert api.ffi.typeof(bound.cffi(api.ffi)) is api.ffi.typeof("double(*)(int)")


# -------------------------------------------------- lifetimes


def test_bit_generator_binds_its_state_and_is_held():
    bg = np.random.PCG64(1234)
    t = nt.bind(bg.ctypes.next_double, bg)
    assert str(t.csig) == "double (void)"
    del bg
    gc.collect()
    got = [t() for _ in range(6)]
    ref = np.random.Generator(np.random.PCG64(1234)).random(6)
    assert got == list(ref)
    with pytest.raises(TypeError, match="binds to a void \\* parameter"):
        nt.bind(nt.Function(1, "double (double *)"), np.random.PCG64(1))


def test_keep_holds_objects_for_the_thunks_life(ifn):
    class Holder:
        pass

    holder = Holder()
    holder.data = np.array([1.5, 2.0])
    ref = weakref.ref(holder)
    first = ifn("rows_sum", "double (double **, int, int)")
    # memory the target reads that no bound argument owns
    pts = (ctypes.c_void_p * 1)(holder.data.ctypes.data)
    t = nt.bind(first, nt.address(ctypes.addressof(pts)), 1, 2, keep=(holder, pts))
    del holder, pts
    gc.collect()
    assert ref() is not None
    assert t() == 3.5
    del t
    gc.collect()
    assert ref() is None


# -------------------------------------------------- Cython (SciPy's modules)


def test_fused_by_types_skips_long_double_siblings():
    from scipy.special import cython_special, expit, log_expit

    for name, ref in (("expit", expit), ("log_expit", log_expit)):
        f64 = nt.cython(cython_special, name, fused=("double",))
        assert str(f64.csig) == "double (double)"
        f32 = nt.cython(cython_special, name, fused="float (float)")
        assert str(f32.csig) == "float (float)"
        t = nt.bind(f64, nt.ARG)
        for x in (-30.0, -1.5, 0.0, 2.25, 40.0):
            assert t(x) == ref(x)
        assert nt.bind(f32, nt.ARG)(0.75) == ref(np.float32(0.75))
    with pytest.raises(TypeError, match="long double"):
        nt.cython(cython_special, "expit", fused=2)


def test_ctypedef_struct_pointer_is_opaque_brentq():
    from numba import cfunc, types
    from scipy import optimize
    from scipy.optimize.cython_optimize import _zeros

    brentq = nt.cython(_zeros, "brentq")
    mangled = "__pyx_t_5scipy_8optimize_15cython_optimize_6_zeros_zeros_full_output"
    assert str(brentq.csig) == (f"double (double (*)(double, void *), double, double, void *, "
                                f"double, double, int, {mangled} *)")

    @cfunc(types.float64(types.float64, types.voidptr))
    def cubic(x, args):
        return x ** 3 - 2.0 * x - 5.0

    class zeros_full_output(ctypes.Structure):
        _fields_ = [("funcalls", ctypes.c_int), ("iterations", ctypes.c_int),
                    ("error_num", ctypes.c_int), ("root", ctypes.c_double)]

    out = zeros_full_output()
    t = nt.bind(brentq, cubic, nt.ARG, nt.ARG, None, 1e-12, 1e-12, 100, ctypes.pointer(out))
    root = t(2.0, 3.0)
    ref = optimize.brentq(lambda x: x ** 3 - 2 * x - 5, 2.0, 3.0, xtol=1e-12, rtol=1e-12,
                          full_output=True)
    assert root == ref[0] == out.root
    assert out.funcalls == ref[1].function_calls and out.error_num == 0
    assert nt.bind(brentq, cubic, 2.0, 3.0, None, 1e-12, 1e-12, 100, None)() == root

    class other(ctypes.Structure):
        _fields_ = [("x", ctypes.c_double)]

    with pytest.raises(TypeError, match="points to struct other, the parameter to struct "
                                        "zeros_full_output"):
        nt.bind(brentq, cubic, 2.0, 3.0, None, 1e-12, 1e-12, 100, ctypes.pointer(other()))


def test_fused_memoryview_element_type_from_specialisation():
    from scipy.linalg import _cythonized_array_utils as m
    from scipy.linalg import issymmetric

    name = "is_sym_her_real_c_internal"
    rng = np.random.default_rng(3)
    for index, dtype in ((9, np.float64), (8, np.float32), (2, np.int32), (7, np.uint64)):
        f = nt.cython(m, name, fused=index)
        for a in (np.array([[1, 2], [2, 1]], dtype=dtype),
                  np.array([[1, 2], [3, 1]], dtype=dtype),
                  (rng.integers(0, 3, (4, 4)) + rng.integers(0, 3, (4, 4)).T).astype(dtype)):
            a = a + a.T if index == 2 else a
            assert bool(nt.bind(f, a)()) == issymmetric(a)
        with pytest.raises(TypeError, match="memoryview is declared"):
            nt.bind(f, np.eye(2, dtype=np.complex128))
    # the declaration the source gives is accepted as it stands
    f = nt.cython(m, name, fused=8, memoryviews={0: "np_numeric_t[:, ::1]"})
    assert f.memoryviews[0][0] == "float"
    with pytest.raises(TypeError, match=r"contradicts the chosen specialisation.*"
                                        r"declare 'float\[:, ::1\]'"):
        nt.cython(m, name, fused=8, memoryviews={0: "double[:, ::1]"})
    assert nt.cython(m, name, fused=8, memoryviews={0: "float[:, ::1]"}).memoryviews[0][0] \
        == "float"
    with pytest.raises(TypeError, match="long double"):
        nt.cython(m, name, fused=10)


def test_cython_complex_prints_as_cython_names():
    from scipy.special import cython_special, gamma

    g = nt.cython(cython_special, "gamma", fused="double complex")
    assert str(g.csig) == "__pyx_t_double_complex (__pyx_t_double_complex)"
    assert nt.bind(g, nt.ARG)(0.5 + 1j) == gamma(0.5 + 1j)


# -------------------------------------------------- Numba


def test_njit_thunk_pointer_parameter_takes_an_array(ifn):
    from numba import njit
    from numba.core.errors import TypingError

    rows_sum = ifn("poly_at", "double (double, const double *, int)")
    t = nt.bind(rows_sum, nt.ARG, nt.ARG, nt.ARG)

    @njit
    def run(f, x, c):
        return f(x, c, c.size)          # c.size: int64 to int, as a C call converts

    c = np.array([1.0, -2.0, 0.5])
    assert run(t, 2.0, c) == np.polynomial.polynomial.polyval(2.0, c)
    c2d = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert run(t, 1.0, c2d) == 10.0     # its data pointer, C order
    with pytest.raises(TypingError, match="argument 2: cannot pass array\\(int64, 1d, C\\) as "):
        run(t, 2.0, np.arange(3))
    with pytest.raises(TypingError, match="C- or F-contiguous"):
        run(t, 2.0, np.arange(6.0)[::2])


def test_njit_mixed_tuple_of_thunk_and_cfunc_with_literal_unroll(ifn):
    """A thunk has numthunk's own Numba type (it holds the thunk; Numba's
    FunctionType holds nothing), so a tuple of a thunk and a @cfunc is
    heterogeneous: literal_unroll iterates it with each item's own type, and
    a plain loop iterates it as Numba's FunctionType, which both convert to
    (on every supported Numba, 0.59 included)."""
    from numba import cfunc, literal_unroll, njit, types

    coeffs = np.array([1.0, 1.0, 1.0])
    t = nt.bind(ifn("poly_at", "double (double, const double *, int)"), nt.ARG, coeffs, 3)

    @cfunc(types.float64(types.float64))
    def cube(x):
        return x * x * x

    @njit
    def total(fns, x):
        s = 0.0
        for f in literal_unroll(fns):
            s += f(x)
        return s

    assert total((t, cube), 2.0) == 7.0 + 8.0
    assert total((cube, t, t), 3.0) == 27.0 + 13.0 + 13.0

    @njit
    def plain(fns, x):
        s = 0.0
        for f in fns:
            s += f(x)
        return s

    assert plain((t, t), 2.0) == 14.0       # same type: a uniform tuple
    assert plain((t, cube), 2.0) == 7.0 + 8.0
    assert plain((cube, t, t), 3.0) == 27.0 + 13.0 + 13.0


# -------------------------------------------------- recipes


RECIPES = [("cffi-ctypes.md", "### A `qsort` comparator with a bound parameter"),
           ("cffi-ctypes.md", "### Random numbers from NumPy's generators"),
           ("numba.md", "## A thunk and a `@cfunc` in one tuple")]


@pytest.mark.parametrize("page, heading", RECIPES, ids=[h for _, h in RECIPES])
def test_recipes_run_on_their_own(page, heading):
    """Each recipe of the guides is one block that runs as printed, copied
    alone into a fresh namespace (tests/test_docs.py runs it again in the
    order of its page)."""
    import re
    with open(os.path.join(os.path.dirname(HERE), "docs", page), encoding="utf-8") as f:
        text = f.read()
    section = re.split(r"^#{2,3} ", text.split("\n" + heading + "\n", 1)[1], maxsplit=1,
                       flags=re.M)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, (page, heading, len(blocks))
    exec(compile(blocks[0], f"docs/{page} ({heading})", "exec"), {})


# -------------------------------------------------- errors that say what happened


def test_nul_byte_in_signature_or_typedef_refused():
    for text in ("double (int)\0junk", "double (int\0 x)", "\0"):
        with pytest.raises(ValueError, match="NUL byte at column"):
            nt.Signature(text)
    with pytest.raises(ValueError, match="NUL byte in the type"):
        nt.Signature("double (T)", {"T": "int\0junk"})
    with pytest.raises(ValueError, match="NUL byte in the name"):
        nt.Signature("double (T)", {"T\0": "int"})
    from scipy.special import cython_special
    with pytest.raises(ValueError, match="NUL byte"):
        nt.cython(cython_special, "expit", fused="double (double)\0")


def test_function_address_out_of_range_refused():
    for bad in (-5, 2**64, -(2**63)):
        with pytest.raises(OverflowError, match="Function address .* is not a valid pointer"):
            nt.Function(bad, "void (void)")
    assert nt.Function(np.uint64(2**63), "void (void)").address == 2**63
    with pytest.raises(OverflowError, match="address\\(\\) .* is not a valid pointer"):
        nt.address(-5)


def test_integer_arguments_are_not_truncated():
    a = np.ones((2, 3))
    for call in (lambda: nt.address(1.9), lambda: nt.shape(a, 1.9),
                 lambda: nt.stride(a, 0.5), lambda: nt.shape(a, True)):
        with pytest.raises(TypeError, match="must be an integer"):
            call()
    assert nt.address(np.int64(16)).value == 16
    assert nt.shape(a, np.intp(1)).axis == 1


def test_bad_keyword_types_name_the_public_api(ifn):
    f = ifn("poly_at", "double (double, const double *, int)")
    for engine in (b"ffi", 3):
        with pytest.raises(TypeError, match=r"bind\(\): engine= must be a str \('native', "
                                            r"'ffi', 'libffi' or 'auto'\) or None") as exc:
            nt.bind(f, nt.ARG, np.ones(2), 2, engine=engine)
        assert "Thunk()" not in str(exc.value)


def test_datetime64_array_names_the_parameter(ifn):
    f = ifn("poly_at", "double (double, const double *, int)")
    with pytest.raises(TypeError, match=r"argument 2 \(const double \*\).*datetime64"):
        nt.bind(f, nt.ARG, np.array(["2020-01-01"], dtype="datetime64[D]"), 1)


def test_longdouble_beyond_double_refused(ifn):
    f = ifn("poly_at", "double (double, const double *, int)")
    with pytest.raises(OverflowError, match=r"argument 1 \(double\)"):
        nt.bind(f, np.longdouble("1e4000"), np.ones(2), 2)


def test_index_and_float_exceptions_are_chained(ifn):
    f = ifn("poly_at", "double (double, const double *, int)")

    class BadIndex:
        def __index__(self):
            raise KeyError("from __index__")

    class BadFloat:
        def __float__(self):
            raise KeyError("from __float__")

    with pytest.raises(TypeError, match=r"argument 3 \(int\)") as exc:
        nt.bind(f, nt.ARG, np.ones(2), BadIndex())
    assert isinstance(exc.value.__cause__, KeyError)
    with pytest.raises(TypeError, match=r"argument 1 \(double\)") as exc:
        nt.bind(f, BadFloat(), np.ones(2), 2)
    assert isinstance(exc.value.__cause__, KeyError)

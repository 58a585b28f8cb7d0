"""Type tables tested whole, each against an oracle that is not numthunk:

- every row of the kind table (src/kinds.c, _core.kinds) against the C
  compiler (sizeof, _Alignof, limits), ctypes, cffi, Numba, NumPy, the
  struct module and DLPack's header, and each name it gives a foreign
  library mapped there and back; its C-only columns (libffi types,
  widening, cells) by tests/c/test_kinds.c against libffi and the compiler;
- every ctypes type against ctypes' own sizeof and signedness;
- every NumPy Cython typedef (the ctypedef lines of the installed NumPy's
  .pxd that Cython reads) against what numthunk's Cython resolver gives;
- every C spelling in the parser's table (src/parse/spellings.c) against the C
  compiler's sizeof, signedness and floatness, and every NumPy or Numba
  name in it against NumPy's or Numba's own type;
- every Numba scalar type against its bitwidth and signedness;
- every integer kind's extension in Numba's calls of thunks and Functions
  against clang's caller of the same prototype (both LLVM IRs).
"""

import ctypes
import os
import re
import struct
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import numthunk as nt
from numthunk import _cffi, _cython, _numba

import ntbuild

pytestmark = pytest.mark.differential

HERE = os.path.dirname(os.path.abspath(__file__))


def kind_of(size, signed, is_float=False, is_complex=False, is_bool=False):
    if is_bool:
        return "bool"
    if is_complex:
        return {8: "complex64", 16: "complex128"}.get(size, f"complex{8 * size}?")
    if is_float:
        return {4: "float32", 8: "float64"}.get(size, f"float{8 * size}?")
    return f"{'' if signed else 'u'}int{8 * size}"


def ctypes_kind(ct):
    if ct is ctypes.c_bool:
        return "bool"
    if ct in (ctypes.c_float, ctypes.c_double):
        return kind_of(ctypes.sizeof(ct), True, is_float=True)
    return kind_of(ctypes.sizeof(ct), ct(-1).value < 0)


def described(sig, i=0):
    return nt.Signature(sig)._describe()[1][i]


# ------------------------------------------------------------ the kind table

KINDS = list(nt._core.kinds.values())
ROOT = os.path.join(HERE, os.pardir)


def kind_ids(rows):
    return [k.name for k in rows]


def kind_id(k):
    return k.name


def is_int(k):
    return isinstance(k.max, int)


def numpy_letter(k):
    """NumPy's kind letter for a row: what NumPy calls its class."""
    if k.name == "bool":
        return "b"
    if is_int(k):
        return "i" if k.signed else "u"
    return "c" if k.formats[0].startswith("Z") else "f"


def test_kind_table_is_the_scalar_kinds():
    assert kind_ids(KINDS) == ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                               "int64", "uint64", "float32", "float64", "complex64",
                               "complex128"]
    assert all(name == k.name for name, k in nt._core.kinds.items())
    assert all(isinstance(k, nt._core.Kind) for k in KINDS)


def test_kind_table_c_columns(tmp_path):
    """tests/c/test_kinds.c: libffi types, widening, cells, float rounding,
    C text, PEP 3118 codes and DLPack codes, in C, under AddressSanitizer
    and UBSan (a lookup one past a table's end is an error)."""
    exe = tmp_path / "test_kinds"
    src = os.path.join(ROOT, "src")
    subprocess.run([ntbuild.compiler(), "-Wall", "-Wextra", "-Werror", "-std=c11",
                    "-D_GNU_SOURCE", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{src}",
                    # src/ includes "../numthunk/include/...": outside the tree
                    # it resolves from the installed package's directory
                    f"-I{os.path.dirname(os.path.abspath(nt.__file__))}",
                    *(os.path.join(src, f)
                      for f in ("kinds.c", "parse/spellings.c", "parse/declarator.c")),
                    os.path.join(HERE, "c", "test_kinds.c"), "-o", str(exe), "-lffi", "-lm"],
                   check=True, env=ntbuild.compiler_env())
    out = subprocess.run([str(exe)], capture_output=True, text=True,
                         env=ntbuild.compiler_env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all kind table tests passed" in out.stdout


KIND_PROBE = r"""
#include <complex.h>
#include <float.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MINOF(T) _Generic((T)0, _Bool: 0, char: CHAR_MIN, signed char: SCHAR_MIN, \
    short: SHRT_MIN, int: INT_MIN, long: LONG_MIN, long long: LLONG_MIN, default: 0)
#define MAXOF(T) _Generic((T)0, _Bool: 1, char: CHAR_MAX, signed char: SCHAR_MAX, \
    unsigned char: UCHAR_MAX, short: SHRT_MAX, unsigned short: USHRT_MAX, int: INT_MAX, \
    unsigned int: UINT_MAX, long: LONG_MAX, unsigned long: ULONG_MAX, long long: LLONG_MAX, \
    unsigned long long: ULLONG_MAX, default: 0)
#define FMAXOF(T) _Generic((T)0, float: FLT_MAX, double: DBL_MAX, float _Complex: FLT_MAX, \
    double _Complex: DBL_MAX, default: 0.0)
#define ROW(NAME, T) printf("%s|%zu|%zu|%d|%d|%lld|%llu|%.17g\n", NAME, sizeof(T), \
    _Alignof(T), creall((T)-1) < 0, creall((T)0.5) == 0.5L, (long long)MINOF(T), \
    (unsigned long long)MAXOF(T), (double)FMAXOF(T))

int main(void)
{
%ROWS%
    return 0;
}
"""


def test_kind_rows_against_the_compiler(tmp_path):
    """Each row's size, alignment, signedness and range are those of its C
    text, as this compiler has them (sizeof, _Alignof, <limits.h>, <float.h>)."""
    src = tmp_path / "kinds.c"
    src.write_text(KIND_PROBE.replace("%ROWS%", "\n".join(
        f'    ROW("{k.name}", {k.c});' for k in KINDS)))
    exe = tmp_path / "kinds"
    subprocess.run([ntbuild.compiler(), "-std=gnu11", "-w", "-o", str(exe), str(src)],
                   check=True, env=ntbuild.compiler_env())
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                         env=ntbuild.compiler_env()).stdout
    rows = {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}
    assert list(rows) == kind_ids(KINDS)
    for k in KINDS:
        size, align, signed, is_float, lo, hi, fmax = rows[k.name]
        assert (int(size), int(align)) == (k.size, k.align), k
        assert (signed == "1") == k.signed, k
        assert (is_float == "1") == (not is_int(k)), k
        if is_int(k):
            assert (int(lo), int(hi)) == (k.min, k.max), k
        else:
            assert (float(fmax), -float(fmax)) == (k.max, k.min), k


@pytest.mark.parametrize("k", [k for k in KINDS if k.ctypes], ids=kind_id)
def test_kind_ctypes_both_ways(k):
    ct = getattr(ctypes, k.ctypes)
    assert (ctypes.sizeof(ct), ctypes.alignment(ct)) == (k.size, k.align)
    if is_int(k) and k.name != "bool":
        assert (ct(-1).value < 0) == k.signed
    # ctypes' class -> numthunk's kind, and the kind -> the class
    assert described(ctypes.CFUNCTYPE(None, ct))[0] == k.name
    assert nt.Signature(f"void ({k.c})").to_ctypes()._argtypes_[0] is ct


@pytest.mark.parametrize("k", [k for k in KINDS if not k.ctypes], ids=kind_id)
def test_kinds_without_a_ctypes_class(k):
    assert not is_int(k) and k.formats[0].startswith("Z")    # complex: no ctypes ABI
    with pytest.raises(TypeError, match="no ctypes equivalent"):
        nt.Signature(f"void ({k.c})").to_ctypes()


@pytest.mark.parametrize("k", KINDS, ids=kind_id)
def test_kind_cffi_both_ways(k):
    import cffi

    ffi = cffi.FFI()
    t = ffi.typeof(k.cffi)
    assert t.kind == "primitive" and (ffi.sizeof(t), ffi.alignof(t)) == (k.size, k.align)
    if is_int(k) and k.name != "bool":
        assert (int(ffi.cast(t, -1)) < 0) == k.signed
    # cffi's type -> numthunk's kind and its C text, and the kind's C text ->
    # the text cffi reads
    text = _cffi.type_text(t)
    assert described(f"void ({text})")[0] == k.name
    assert str(nt.Signature(f"void ({text})")) == f"void ({k.c})"
    assert ffi.typeof(_cffi.cffi_text(k.c)) is t
    assert ffi.typeof(_cffi.cffi_text(f"{k.c} *")) is ffi.typeof(f"{k.cffi} *")


@pytest.mark.parametrize("k", KINDS, ids=kind_id)
def test_kind_numba_both_ways(k):
    import numba
    from numba.core import types

    t = getattr(types, k.numba)
    assert numba.from_dtype(np.dtype(k.dtype)) == t
    if k.name == "bool":
        assert isinstance(t, types.Boolean)
    else:
        assert t.bitwidth == 8 * k.size
        assert getattr(t, "signed", True) == k.signed
    # Numba's type -> numthunk's kind, and the kind -> Numba's type
    assert described(f"void ({_numba.type_to_c(t)})")[0] == k.name
    if k.name != "complex64":          # refused as a Numba value (see type_from_desc)
        assert _numba.type_from_desc(described(f"void ({k.c})")) == t


@pytest.mark.parametrize("k", KINDS, ids=kind_id)
def test_kind_numpy_both_ways(k):
    d = np.dtype(k.dtype)
    assert (d.name, d.itemsize, d.alignment) == (k.name, k.size, k.align)
    assert d.kind == numpy_letter(k)
    if k.name == "bool":
        assert (k.min, k.max) == (0, 1)
    elif is_int(k):
        assert (np.iinfo(d).min, np.iinfo(d).max) == (k.min, k.max)
    else:
        assert (float(np.finfo(d).min), float(np.finfo(d).max)) == (k.min, k.max)
    # the dtype ref() holds a value in, and an array of it bound to the kind
    # (ndarray and buffer paths)
    assert nt.ref(1, k.c).cell.dtype == d
    f = nt.Function(0x1000, f"void (const {k.c} *)")
    for arr in (np.zeros(3, d), memoryview(np.zeros(3, d))):
        assert nt.bind(f, arr).address != 0


NUMPY_NUMBERS = "?" + np.typecodes["AllInteger"] + np.typecodes["AllFloat"]


@pytest.mark.parametrize("char", NUMPY_NUMBERS)
def test_numpy_number_dtypes_bind_to_the_kind_of_their_class_and_size(char):
    """Every NumPy number dtype binds to the one kind of its class and size,
    and to no other; those without one (half, long double) to none."""
    d = np.dtype(char)
    want = [k.name for k in KINDS if numpy_letter(k) == d.kind and k.size == d.itemsize]
    assert len(want) <= 1
    for k in KINDS:
        f = nt.Function(0x1000, f"void (const {k.c} *)")
        for arr in (np.zeros(3, d), memoryview(np.zeros(3, d))):
            if k.name in want:
                nt.bind(f, arr)
            else:
                with pytest.raises(TypeError, match=r"^argument 1 .*expected a buffer of"):
                    nt.bind(f, arr)


# The struct module's codes by NumPy's class letters ('c' is char, of the
# platform's signedness: either integer class); 'P' is a pointer.
CODE_CLASS = {"?": "b", "c": "iu", "b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
              "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
              "e": "f", "f": "f", "d": "f", "P": ""}


@pytest.mark.parametrize("code", sorted(CODE_CLASS))
def test_buffer_codes_bind_to_the_kind_of_their_class_and_size(code):
    """A buffer of each struct-module code binds to the kind that lists it,
    the one of the code's class and native size, and to no other kind."""
    size = struct.calcsize("@" + code)
    want = [k for k in KINDS if numpy_letter(k) in CODE_CLASS[code] and k.size == size
            and (code != "c" or code in k.formats)]
    assert [k for k in KINDS if code in k.formats] == want
    assert len(want) == (0 if code in "eP" else 1)
    # memoryview.cast knows no 'e': NumPy's float16 exports it
    view = (memoryview(np.zeros(4, code)) if code == "e"
            else memoryview(bytearray(4 * size)).cast(code))
    for k in KINDS:
        f = nt.Function(0x1000, f"void (const {k.c} *)")
        if k in want:
            nt.bind(f, view)
        else:
            with pytest.raises(TypeError, match="expected a buffer of"):
                nt.bind(f, view)


@pytest.mark.parametrize("k", KINDS, ids=kind_id)
def test_kind_formats_against_the_struct_module(k):
    parts = 2 if numpy_letter(k) == "c" else 1
    prefix = "Z" if parts == 2 else ""
    for fmt in k.formats:
        assert fmt.startswith(prefix) and parts * struct.calcsize("@" + fmt[-1]) == k.size
    if parts == 2:
        assert memoryview(np.zeros(1, k.dtype)).format in k.formats   # NumPy's 'Zf'
    # standard sizes ('=', '<', '>', '!'): every code of the row's class and
    # of its standard size, whatever the native one ('l' is 4 bytes there)
    letter = "f" if parts == 2 else numpy_letter(k)
    want = tuple(prefix + c for c in "?bBhHiIlLqQfd"
                 if CODE_CLASS[c] == letter and parts * struct.calcsize("=" + c) == k.size)
    assert tuple(f for f in k.std_formats if f[-1] != "c") == want
    assert ("c" in "".join(k.std_formats)) == ("c" in "".join(k.formats))


def test_kind_dlpack_codes_against_the_header():
    with open(os.path.join(nt.get_include(), "numthunk", "dlpack.h")) as fh:
        codes = {name: int(v) for name, v in re.findall(r"\b(kDL\w+) = (\d+)U", fh.read())}
    for k in KINDS:
        want = ("kDLBool" if k.name == "bool" else
                ("kDLInt" if k.signed else "kDLUInt") if is_int(k) else
                "kDLComplex" if k.formats[0].startswith("Z") else "kDLFloat")
        assert k.dlpack == (codes[want], 8 * k.size), k


# ------------------------------------------------------------ ctypes

CTYPES_SCALARS = [
    "c_bool", "c_byte", "c_ubyte", "c_short", "c_ushort", "c_int", "c_uint", "c_long",
    "c_ulong", "c_longlong", "c_ulonglong", "c_size_t", "c_ssize_t", "c_int8", "c_uint8",
    "c_int16", "c_uint16", "c_int32", "c_uint32", "c_int64", "c_uint64", "c_float", "c_double",
]


@pytest.mark.parametrize("name", CTYPES_SCALARS)
def test_ctypes_scalar(name):
    ct = getattr(ctypes, name)
    want = ctypes_kind(ct)
    proto = ctypes.CFUNCTYPE(ct, ct, ctypes.POINTER(ct))
    ret, args = nt.Signature(proto)._describe()
    assert ret[0] == want, (name, ret)
    assert args[0][0] == want, (name, args[0])
    assert args[1][:3] == ("pointer", want, 1), (name, args[1])
    # and back: the prototype numthunk makes has the same width and signedness
    back = nt.Signature(f"void ({args[0][4]})").to_ctypes()._argtypes_[0]
    assert ctypes_kind(back) == want, (name, back)


def test_ctypes_others():
    assert described(ctypes.CFUNCTYPE(None, ctypes.c_void_p))[:3] == ("pointer", "void", 1)
    char = described(ctypes.CFUNCTYPE(None, ctypes.c_char_p))
    assert char[0] == "pointer" and char[1] in ("int8", "uint8") and char[2] == 1
    assert described(ctypes.CFUNCTYPE(None, ctypes.c_char))[0] in ("int8", "uint8")
    pp = described(ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_ulong))))
    assert pp[:3] == ("pointer", ctypes_kind(ctypes.c_ulong), 2)
    for bad in (ctypes.c_longdouble, ctypes.c_wchar, ctypes.c_wchar_p):
        with pytest.raises(TypeError, match="argtypes\\[0\\]"):
            nt.Signature(ctypes.CFUNCTYPE(None, bad))


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("base, kind, ct", [("void", "void", None),
                                            ("double", "float64", ctypes.c_double),
                                            ("int16_t", "int16", ctypes.c_int16),
                                            ("uint64_t", "uint64", ctypes.c_uint64)])
def test_pointers_of_every_depth_to_ctypes_and_back(base, kind, ct, depth):
    """to_ctypes: void * is c_void_p, each further level a POINTER of it;
    T * is POINTER(T) at each depth. The prototype reads back as the
    signature it came from."""
    sig = nt.Signature(f"void ({base} {'*' * depth}, const {base} {'*' * depth})")
    want = ctypes.c_void_p if ct is None else ctypes.POINTER(ct)
    for _ in range(depth - 1):
        want = ctypes.POINTER(want)
    proto = sig.to_ctypes()
    assert proto._argtypes_ == (want, want) and proto._restype_ is None
    assert described(proto)[:3] == ("pointer", kind, depth)
    # (ctypes has no const; it spells int16_t as short)
    assert nt.Signature(proto) == nt.Signature(f"void ({base} {'*' * depth}, {base} "
                                               f"{'*' * depth})")


@pytest.mark.parametrize("name", [n for n in CTYPES_SCALARS if n not in ("c_float", "c_double")])
def test_ctypes_function_target_takes_its_whole_range(lib, name):
    """A ctypes function whose argtypes say the type: its full range binds
    and comes back, one past either end is refused."""
    ct = getattr(ctypes, name)
    if ct is ctypes.c_bool:
        lo, hi, fix = 0, 1, "f_B_B"
    else:
        bits = 8 * ctypes.sizeof(ct)
        signed = ct(-1).value < 0
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        fix = {1: "c", 2: "s", 4: "i", 8: "l"}[bits // 8]
        fix = f"f_{fix if signed else fix.upper()}_{fix if signed else fix.upper()}"
    f = getattr(ctypes.CDLL(lib._name), fix)
    f.argtypes, f.restype = [ct], ct
    for v in (lo, hi):
        assert nt.bind(f, v)() == v, (name, v)
        assert nt.bind(f, nt.ARG)(v) == v, (name, v)
    for v in (lo - 1, hi + 1):
        with pytest.raises(OverflowError, match=r"^argument 1 \("):
            nt.bind(f, v)


# ------------------------------------------------------------ NumPy's Cython typedefs

# C words of the ctypedef lines -> ctypes oracle (None: numthunk refuses it)
C_WORDS = {
    "signed char": ctypes.c_byte, "unsigned char": ctypes.c_ubyte,
    "signed short": ctypes.c_short, "unsigned short": ctypes.c_ushort, "short": ctypes.c_short,
    "signed int": ctypes.c_int, "unsigned int": ctypes.c_uint, "int": ctypes.c_int,
    "signed long": ctypes.c_long, "unsigned long": ctypes.c_ulong, "long": ctypes.c_long,
    "signed long long": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong,
    "long long": ctypes.c_longlong,
    "float": ctypes.c_float, "double": ctypes.c_double,
    "float complex": "complex64", "double complex": "complex128",
    "long double": None, "long double complex": None,
}


def numpy_pxd():
    """The numpy/__init__*.pxd that Cython itself reads for the installed
    NumPy and Cython (NumPy 2.5's __init__.pxd is a stub for Cython < 3;
    its header is __init__.cython-30.pxd)."""
    from Cython.Utils import find_versioned_file

    d = os.path.dirname(np.__file__)
    found = find_versioned_file(d, "__init__", ".pxd")
    assert found, f"NumPy's __init__.pxd is missing from {d}"
    return found


def test_numpy_pxd_is_the_one_cython_reads():
    assert _cython._source_files("numpy", np) == [numpy_pxd()]
    assert _cython._Resolver(np, None, "numpy typedefs").source("numpy").files == [numpy_pxd()]


def pxd_typedefs(path):
    """name -> C words, for every `ctypedef <words> <name>` of scalar types."""
    out = {}
    with open(path) as fh:
        for line in fh:
            m = re.match(r"^\s*ctypedef\s+([A-Za-z_][\w ]*?)\s+([A-Za-z_]\w*)\s*(#.*)?$", line)
            if m and not m.group(1).startswith(("struct", "enum", "class", "union")):
                out[m.group(2)] = m.group(1)
    return out


# Names that a .pxd declares inside `cdef extern` with a stand-in type
# (NumPy 1.x: `ctypedef int Py_intptr_t`): Cython uses the C header's
# definition, so the oracle does too.
EXTERN_TRUTH = {"Py_intptr_t": ctypes.c_ssize_t, "Py_uintptr_t": ctypes.c_size_t}


def expected_from_pxd(defs, name, seen=()):
    if name in EXTERN_TRUTH:
        return ctypes_kind(EXTERN_TRUTH[name])
    words = " ".join(defs[name].split())
    if words in C_WORDS:
        o = C_WORDS[words]
        if o is None or isinstance(o, str):
            return o
        return ctypes_kind(o)
    if words in defs and words not in seen:
        return expected_from_pxd(defs, words, seen + (name,))
    return "?"   # something else (a struct): not a scalar typedef


def test_numpy_cython_typedefs():
    pxd = numpy_pxd()
    defs = pxd_typedefs(pxd)
    # the table must be the one we think it is
    for name in ("float_t", "double_t", "int64_t", "uintp_t", "npy_intp", "complex128_t"):
        assert name in defs, (pxd, name)
    resolver = _cython._Resolver(np, None, "numpy typedefs")
    checked = 0
    for name in sorted(defs):
        want = expected_from_pxd(defs, name)
        if want == "?":
            continue
        if want is None:
            with pytest.raises(_cython.CythonError, match="long double"):
                resolver.lookup("numpy", name, set(), name)
            continue
        text = resolver.lookup("numpy", name, set(), name)
        got = described(f"void ({text})")[0]
        assert got == want, f"{pxd}: ctypedef {defs[name]} {name} resolved to {text!r} ({got})"
        checked += 1
    assert checked >= 30


# NumPy 1.x's numpy/__init__.pxd declares four names that NumPy 2 dropped,
# which modules compiled against NumPy 1 keep in their capsules; its lines
# (NumPy 1.23.2: `ctypedef npy_long int_t`, ...) and its npy_ types:
NUMPY1_ONLY = {"int_t": "npy_long", "long_t": "npy_longlong", "uint_t": "npy_ulong",
               "ulong_t": "npy_ulonglong"}
NUMPY1_NPY = {"npy_long": "signed long", "npy_longlong": "signed long long",
              "npy_ulong": "unsigned long", "npy_ulonglong": "unsigned long long"}


def c_words_of(defs, name):
    """The C words a chain of the .pxd's ctypedefs ends in, or None."""
    seen = set()
    while name in defs and name not in seen:
        seen.add(name)
        name = " ".join(defs[name].split())
    return name if name in C_WORDS else None


def test_every_numpy_typedef_the_table_knows_is_numpy_s_with_its_c_spelling():
    """Each name of _cython.NUMPY_TYPEDEFS is declared by the installed
    NumPy's .pxd or by NumPy 1.x's, and resolves to the very C type that
    declares it, spelling and all (long_t is long long, not long, though
    both are 64 bits on LP64), whatever NumPy is installed."""
    defs = pxd_typedefs(numpy_pxd())
    resolver = _cython._Resolver(np, None, "numpy typedefs")
    spelled = 0
    for name, text in _cython.NUMPY_TYPEDEFS.items():
        assert name in defs or name in NUMPY1_ONLY or name in EXTERN_TRUTH, name
        if name in NUMPY1_ONLY:
            words = NUMPY1_NPY[NUMPY1_ONLY[name]]
        else:
            words = c_words_of(defs, name)
        if words is None or C_WORDS[words] is None or isinstance(C_WORDS[words], str):
            continue                                  # a typedef of NumPy's own, or complex
        got = resolver.lookup("numpy", name, set(), name)
        assert got == text
        want = nt.Signature(f"void ({words.removeprefix('signed ')})")
        assert nt.Signature(f"void ({got})") == want, (name, got, words)
        if got in C_WORDS:
            # a C type word, not an exact-width or NumPy name: the same words
            assert str(nt.Signature(f"void ({got})")) == str(want), (name, got, words)
            spelled += 1
    assert spelled >= len(NUMPY1_ONLY) + 4


def pxd_fnptrs(path):
    """name -> (return words, [parameter words]) for every
    `ctypedef <ret> (*<name>)(<params>)` of the .pxd."""
    out = {}
    with open(path) as fh:
        for m in re.finditer(r"^\s*ctypedef\s+([\w ]+?)\s*\(\s*\*\s*(\w+)\s*\)\s*\(([^)]*)\)",
                             fh.read(), re.M):
            params = [re.sub(r"\b(noexcept|nogil)\b", "", p).strip()
                      for p in m.group(3).split(",") if p.strip()]
            out[m.group(2)] = (m.group(1), params)
    return out


def test_numpy_cython_function_pointer_typedefs():
    """Each of NumPy's function-pointer typedefs, as a capsule names it
    (mangled), resolves to its own declaration's types, or is refused
    naming the struct it needs (NpyIter)."""
    fps = pxd_fnptrs(numpy_pxd())
    assert "PyUFuncGenericFunction" in fps, fps
    resolver = _cython._Resolver(np, None, "numpy typedefs")
    resolved = 0
    for name, (ret, params) in sorted(fps.items()):
        mangled = f"__pyx_t_5numpy_{name}"        # as Cython mangles it
        assert _cython._demangle(mangled) == ("numpy", name)
        if any(re.search(r"\bNpyIter\b", p) for p in params):
            with pytest.raises(_cython.CythonError, match="unknown typedef 'NpyIter'"):
                resolver.fnptr(mangled)
            continue
        # the oracle: the pxd's own words (unnamed parameters, NumPy's names)
        want = nt.Signature(f"void ({ret} (*)({', '.join(params) or 'void'}))")
        assert nt.Signature(f"void ({resolver.fnptr(mangled)})") == want, name
        resolved += 1
    assert resolved >= 1


# ------------------------------------------------------------ the C spelling table


def spellings():
    """(name, C text to compile) for every entry of nt_spellings in src/parse/spellings.c."""
    path = os.path.join(HERE, os.pardir, "src", "parse", "spellings.c")
    with open(path) as fh:
        text = fh.read()
    table = text[text.index("nt_spellings[] = {"):]
    table = table[:table.index("};")]
    rows = re.findall(r'\{\s*"([^"]+)"\s*,\s*[^{}]+?\}', table)
    assert len(rows) > 80, rows
    # C names only: NumPy's and Numba's are the Numba adapter's (see below)
    return [(name, name) for name in rows
            if name not in ("void", "__Pyx_memviewslice", "DLTensor")]  # not scalars


def non_c_spellings():
    """The NumPy and Numba names the Numba adapter reads as typedefs of
    their kind's C text (numthunk/_numba_sig.py): its short names (f8),
    none, byte and voidptr aside."""
    from numthunk import _numba_sig

    return sorted(n for n in _numba_sig.NAMES
                  if n not in _numba_sig._SHORT and n not in ("byte", "voidptr"))


C_PROBE = r"""
#include <Python.h>
#include <numpy/npy_common.h>
#include <complex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef int bint;                                  /* Cython's bint */
typedef float _Complex __pyx_t_float_complex;      /* Cython's complex typedefs */
typedef double _Complex __pyx_t_double_complex;

#define IS_COMPLEX(T) _Generic((T)0, float _Complex: 1, double _Complex: 1, \
                               long double _Complex: 1, default: 0)
#define ROW(NAME, T) printf("%s|%zu|%d|%d|%d|%d\n", NAME, sizeof(T), \
    creall((T)-1) < 0, creall((T)0.5) == 0.5L, IS_COMPLEX(T), creall((T)2) == 1)

int main(void)
{
%ROWS%
    return 0;
}
"""


def test_c_spellings_against_the_compiler(tmp_path):
    rows = spellings()
    body = "\n".join(f'    ROW("{name}", {c});' for name, c in rows)
    src = tmp_path / "probe.c"
    src.write_text(C_PROBE.replace("%ROWS%", body))
    exe = tmp_path / "probe"
    cc = ntbuild.compiler()
    incs = [f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}"]
    subprocess.run([cc, "-std=gnu11", "-w", *incs, "-o", str(exe), str(src)], check=True,
                   env=ntbuild.compiler_env())
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                         env=ntbuild.compiler_env()).stdout
    seen = 0
    for line in out.splitlines():
        name, size, signed, is_float, is_complex, is_bool = line.split("|")
        size = int(size)
        want = kind_of(size, signed == "1", is_float == "1", is_complex == "1",
                       is_bool == "1" and size == 1)
        got = described(f"void ({name})")[0]
        assert got == want, f"{name}: C says {want}, numthunk parses {got}"
        seen += 1
    assert seen == len(rows)


@pytest.mark.parametrize("name", non_c_spellings())
def test_numpy_and_numba_spellings_against_their_library(name):
    """A NumPy or Numba type name means what NumPy (or Numba) says, and
    prints as the C text of its kind."""
    from numba.core import types

    if name == "boolean":
        want = "bool" if isinstance(getattr(types, name), types.Boolean) else "?"
    else:
        d = np.dtype(name)
        want = kind_of(d.itemsize, d.kind == "i", d.kind == "f", d.kind == "c", d.kind == "b")
    got = described(f"void ({name})")[0]
    assert got == want, f"{name}: NumPy/Numba say {want}, numthunk parses {got}"
    assert str(nt.Signature(f"void ({name})")) == f"void ({nt._core.kinds[got].c})"


# ------------------------------------------------------------ Numba scalar types


def test_numba_scalar_types_round_trip():
    import numba
    from numba import types

    checked = 0
    for t in sorted(types.number_domain | {types.boolean}, key=str):
        if isinstance(t, types.Boolean):
            want = "bool"
        elif isinstance(t, types.Integer):
            want = kind_of(t.bitwidth // 8, t.signed)
        elif isinstance(t, types.Float):
            want = kind_of(t.bitwidth // 8, True, is_float=True)
        elif isinstance(t, types.Complex):
            want = kind_of(t.bitwidth // 8, True, is_complex=True)
        else:
            continue
        sig = nt.Signature(numba.void(t, types.CPointer(t)))
        arg, ptr = sig._describe()[1]
        assert arg[0] == want, (t, arg)
        assert ptr[:3] == ("pointer", want, 1), (t, ptr)
        if want != "complex64":        # Numba's float complex return is not a C ABI value
            back = nt.Signature(f"{arg[4]} ({arg[4]})").to_numba()
            assert back.args[0] == t and back.return_type == t, (t, back)
        checked += 1
    assert checked >= 12
    assert sys.modules["numba"] is numba


# ------------------------------------------------------------ argument extension

INTEGER_KINDS = [k for k in KINDS if is_int(k)]


def clang_extensions(tmp_path, rows):
    """{C text: 'signext' | 'zeroext' | ''}: how clang's caller passes one
    argument of each type (its declaration's parameter attribute)."""
    from conftest import compiler_command

    src = tmp_path / "ext.c"
    src.write_text("#include <stdbool.h>\n#include <stdint.h>\n" + "".join(
        f"void f{i}({k.c});\nvoid g{i}({k.c} a) {{ f{i}(a); }}\n" for i, k in enumerate(rows)))
    out = tmp_path / "ext.ll"
    subprocess.run([*compiler_command("clang"), "-S", "-emit-llvm", "-O1", "-o", str(out),
                    str(src)], check=True, capture_output=True, env=ntbuild.compiler_env())
    found = {}
    for m in re.finditer(r"declare .*@f(\d+)\((.*)\)", out.read_text()):
        attrs = {"signext", "zeroext"} & set(m.group(2).split())
        found[rows[int(m.group(1))].c] = attrs.pop() if attrs else ""
    assert len(found) == len(rows)
    return found


def calls_through(ir, pointer):
    """The argument lists of the calls in LLVM IR through one pointer: called
    as it is (opaque pointers) or through a bitcast of it to a function
    pointer type (the typed pointers of Numba's older LLVM)."""
    names = {pointer} | set(re.findall(
        r"(%\S+) = bitcast \S+ " + re.escape(pointer) + r" to ", ir))
    return [m.group(2) for m in re.finditer(r"call .*?(%[\w.]+)\((.*)\)", ir)
            if m.group(1) in names]


def test_numba_calls_extend_each_integer_kind_as_clang_does(tmp_path):
    """A call of a thunk or Function from nopython code gives each integer
    argument the extension clang's own caller gives it (the ABI the callee
    relies on): read from the LLVM IR of both."""
    import numba

    want = clang_extensions(tmp_path, INTEGER_KINDS)
    assert want["int8_t"] == "signext" and want["int"] == ""      # the oracle reads

    @numba.njit
    def call(fn, x):
        fn(x)

    f = nt.Function(0x1000, "void (void)")
    for k in INTEGER_KINDS:
        for fn in (nt.Function(f.address, f"void ({k.c})"),
                   nt.bind(nt.Function(f.address, f"void ({k.c})"), nt.ARG)):
            sig = (numba.typeof(fn), getattr(numba, k.numba))
            call.compile(sig)                  # compiled only: the address is not code
            calls = calls_through(call.inspect_llvm(sig), "%arg.fn.0")
            assert len(calls) == 1, (k, calls)
            attrs = {"signext", "zeroext"} & set(calls[0].split())
            assert (attrs.pop() if attrs else "") == want[k.c], (k, type(fn), calls[0])

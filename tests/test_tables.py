"""Type tables tested whole, each against an oracle that is not numthunk:

- every ctypes type against ctypes' own sizeof and signedness;
- every NumPy Cython typedef (the ctypedef lines of the installed NumPy's
  .pxd that Cython reads) against what numthunk's Cython resolver gives;
- every C spelling in the parser's table (src/types.c) against the C
  compiler's sizeof, signedness and floatness;
- every Numba scalar type against its bitwidth and signedness.
"""

import ctypes
import os
import re
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import numthunk as nt
from numthunk import _cython

import ntbuild

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


# ------------------------------------------------------------ the C spelling table


def spellings():
    """(name, C text to compile) for every entry of nt_spellings in src/types.c."""
    path = os.path.join(HERE, os.pardir, "src", "types.c")
    with open(path) as fh:
        text = fh.read()
    table = text[text.index("nt_spellings[] = {"):]
    table = table[:table.index("};")]
    rows = re.findall(r'\{\s*"([^"]+)"\s*,\s*[^,]+,\s*(NULL|"[^"]*")\s*\}', table)
    assert len(rows) > 80, rows
    out = []
    for name, c_name in rows:
        if name in ("void", "voidptr", "__Pyx_memviewslice", "DLTensor"):  # not scalars
            continue
        out.append((name, name if c_name == "NULL" else c_name.strip('"')))
    return out


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

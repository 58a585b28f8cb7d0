"""Conversion of values to C: range and edge checks, buffers, pointers.

Exact edges, as explicit examples, not hoped-for draws:

- Every integer spelling at min, max (accepted) and min-1, max+1 (refused),
  bound and forwarded (the thunk's Python call path), on both engines.
  Widths and signedness come from ctypes, never from numthunk.
- float at FLT_MAX and at FLT_MAX + half an ulp (the first value that rounds
  to infinity), both signs; double and complex parts likewise.
- Buffers whose base is aligned but whose stride is not a multiple of the
  element's alignment (packed structured fields, strided views).
- Every pointer kind against every NumPy dtype: only its own is accepted.
- Value cells next to each other: complex cells among bound scalars, in
  registers and on the stack; every value must arrive.

And properties over random values: an integer either reaches the callee
unchanged or is refused with OverflowError (never truncated); a float
reaches a float parameter rounded to nearest as C does, or is refused when
beyond FLT_MAX; random objects never crash a bind.
"""

import ctypes
import math
import re
import struct
import sys

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import numthunk as nt

import ntbuild
from conftest import ENGINES
from layouts import (
    FOREIGN,
    c_strides,
    flat2,
    foreign_layouts,
    pep3118_c_contiguous,
    read_elements,
    swapped,
)

# C spelling -> ctypes type with the same width and signedness (the oracle)
INT_SPELLINGS = {
    "bool": ctypes.c_bool, "_Bool": ctypes.c_bool,
    "signed char": ctypes.c_byte, "unsigned char": ctypes.c_ubyte,
    "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8, "npy_int8": ctypes.c_int8, "npy_bool": ctypes.c_ubyte,
    "npy_byte": ctypes.c_byte, "npy_ubyte": ctypes.c_ubyte,
    "short": ctypes.c_short, "unsigned short": ctypes.c_ushort, "short int": ctypes.c_short,
    "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16, "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16, "npy_short": ctypes.c_short, "npy_ushort": ctypes.c_ushort,
    "int": ctypes.c_int, "unsigned int": ctypes.c_uint, "signed": ctypes.c_int,
    "unsigned": ctypes.c_uint, "intc": ctypes.c_int, "uintc": ctypes.c_uint,
    "bint": ctypes.c_int, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
    "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "npy_int": ctypes.c_int,
    "npy_uint": ctypes.c_uint,
    "long": ctypes.c_long, "unsigned long": ctypes.c_ulong, "long int": ctypes.c_long,
    "long long": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong,
    "PY_LONG_LONG": ctypes.c_longlong, "unsigned PY_LONG_LONG": ctypes.c_ulonglong,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64, "npy_long": ctypes.c_long, "npy_ulong": ctypes.c_ulong,
    "npy_longlong": ctypes.c_longlong, "npy_ulonglong": ctypes.c_ulonglong,
    "size_t": ctypes.c_size_t, "ssize_t": ctypes.c_ssize_t, "Py_ssize_t": ctypes.c_ssize_t,
    "Py_hash_t": ctypes.c_ssize_t, "npy_intp": ctypes.c_ssize_t,
    "npy_uintp": ctypes.c_size_t, "intp": ctypes.c_ssize_t, "uintp": ctypes.c_size_t,
    "intptr_t": ctypes.c_ssize_t, "uintptr_t": ctypes.c_size_t, "ptrdiff_t": ctypes.c_ssize_t,
}
assert ctypes.sizeof(ctypes.c_void_p) == ctypes.sizeof(ctypes.c_size_t)


def int_range(ct):
    if ct is ctypes.c_bool:
        return 0, 1
    bits = 8 * ctypes.sizeof(ct)
    if ct(-1).value < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def identity_fixture(ct):
    """The fixture T f(T) for this width and signedness."""
    if ct is ctypes.c_bool:
        return "f_B_B"
    size, signed = ctypes.sizeof(ct), ct(-1).value < 0
    return {(1, True): "f_c_c", (1, False): "f_C_C", (2, True): "f_s_s", (2, False): "f_S_S",
            (4, True): "f_i_i", (4, False): "f_I_I", (8, True): "f_l_l",
            (8, False): "f_L_L"}[size, signed]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("spelling", sorted(INT_SPELLINGS))
def test_integer_edges(cfn, engine, spelling):
    ct = INT_SPELLINGS[spelling]
    lo, hi = int_range(ct)
    fn = cfn(identity_fixture(ct), f"{spelling} ({spelling})")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for v in (lo, lo + 1, hi - 1, hi):
        assert nt.bind(fn, v, engine=engine)() == v, (spelling, v)
        assert fwd(v) == v, (spelling, v)
        if hi < 2**63:
            assert nt.bind(fn, np.int64(v), engine=engine)() == v
    for v in (lo - 1, hi + 1, lo - 2**70, hi + 2**70):
        with pytest.raises(OverflowError, match=r"^argument 1 \(") as info:
            nt.bind(fn, v, engine=engine)
        assert str(v) in str(info.value)
        with pytest.raises(OverflowError, match=r"^argument 1 \("):
            fwd(v)
    for v in (lo - 1, hi + 1):
        if -2**63 <= v < 2**63:
            with pytest.raises(OverflowError, match=r"^argument 1 \("):
                nt.bind(fn, np.int64(v), engine=engine)


FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
FLT_EDGE = float.fromhex("0x1.ffffffp+127")          # FLT_MAX + half an ulp: rounds to inf
FLT_BELOW = math.nextafter(FLT_EDGE, 0.0)             # the largest that rounds to FLT_MAX
DBL_MAX = float.fromhex("0x1.fffffffffffffp+1023")
assert FLT_MAX == 3.4028234663852886e38
with np.errstate(over="ignore"):
    assert float(np.float32(FLT_BELOW)) == FLT_MAX and np.isinf(np.float32(FLT_EDGE))


def as_float32(v):
    return float(np.float32(v))


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("engine", ENGINES)
def test_float_edges(cfn, engine):
    fn = cfn("f_f_f", "float (float)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    ok = [FLT_MAX, FLT_BELOW, -FLT_MAX, -FLT_BELOW, 1e-45, -1e-46, 0.1,
          np.float32(FLT_MAX), np.float64(FLT_BELOW), math.inf, -math.inf, math.nan]
    for v in ok:
        want = as_float32(v)
        assert same(nt.bind(fn, v, engine=engine)(), want), v
        assert same(fwd(v), want), v
    bad = [FLT_EDGE, -FLT_EDGE, math.nextafter(FLT_EDGE, math.inf), 1e39, -1e39, DBL_MAX,
           np.float64(FLT_EDGE), np.float64(-FLT_EDGE), 2**128]
    for v in bad:
        with pytest.raises(OverflowError, match=r"^argument 1 \(float\): .* beyond the range "
                                                r"of a C float"):
            nt.bind(fn, v, engine=engine)
        with pytest.raises(OverflowError, match=r"^argument 1 \(float\)"):
            fwd(v)


@pytest.mark.parametrize("engine", ENGINES)
def test_double_edges(cfn, engine):
    fn = cfn("f_d_d", "double (double)")
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for v in [DBL_MAX, -DBL_MAX, 5e-324, math.inf, -math.inf, math.nan, 2**1023,
              np.float64(DBL_MAX), np.float32(FLT_MAX)]:
        assert same(nt.bind(fn, v, engine=engine)(), float(v)), v
        assert same(fwd(v), float(v)), v
    for v in [2**1024, -2**1024, 10**400]:
        with pytest.raises(OverflowError, match=r"^argument 1 \(double\)"):
            nt.bind(fn, v, engine=engine)
        with pytest.raises(OverflowError, match=r"^argument 1 \(double\)"):
            fwd(v)


@pytest.fixture(scope="module")
def cells():
    return ntbuild.load("cells.c", "cells")


def cfunc(lib, name, sig):
    return nt.Function(ntbuild.address(lib, name), sig, owner=lib, name=name)


@pytest.mark.parametrize("engine", ENGINES)
def test_complex_parts_at_the_edges(cells, engine):
    zf = cfunc(cells, "id_F", "float complex (float complex)")
    fwd = nt.bind(zf, nt.ARG, engine=engine)
    for re_, im in [(FLT_MAX, 0.0), (0.0, FLT_MAX), (-FLT_BELOW, FLT_BELOW),
                    (FLT_BELOW, -FLT_MAX), (math.inf, -math.inf)]:
        want = complex(as_float32(re_), as_float32(im))
        assert nt.bind(zf, complex(re_, im), engine=engine)() == want
        assert fwd(complex(re_, im)) == want
    for re_, im in [(FLT_EDGE, 0.0), (0.0, FLT_EDGE), (-FLT_EDGE, 1.0), (1.0, -FLT_EDGE),
                    (1e39, 0.0), (0.0, -1e39)]:
        with pytest.raises(OverflowError, match=r"^argument 1 \(float complex\): .* beyond the "
                                                r"range of a C float"):
            nt.bind(zf, complex(re_, im), engine=engine)
        with pytest.raises(OverflowError, match=r"^argument 1 \(float complex\)"):
            fwd(complex(re_, im))
    zd = cfunc(cells, "id_Z", "double complex (double complex)")
    for z in [complex(DBL_MAX, -DBL_MAX), complex(-math.inf, 5e-324), complex(FLT_EDGE, 1e39)]:
        assert nt.bind(zd, z, engine=engine)() == z
        assert nt.bind(zd, nt.ARG, engine=engine)(z) == z


# ------------------------------------------------------------ value cells


def recorded(cells, n_d, n_i):
    d = (ctypes.c_double * 64).in_dll(cells, "rec")
    i = (ctypes.c_int64 * 64).in_dll(cells, "rec_i")
    out = list(d[:n_d]), list(i[:n_i])
    ctypes.memset(d, 0xFF, ctypes.sizeof(d))       # NaNs: stale values cannot pass
    ctypes.memset(i, 0xFF, ctypes.sizeof(i))
    return out


def all_bind_patterns(n):
    """Every parameter bound; every one forwarded; each one forwarded alone;
    each one bound alone."""
    yield [True] * n
    yield [False] * n
    for k in range(n):
        yield [j != k for j in range(n)]
        yield [j == k for j in range(n)]


def run_patterns(cells, name, sig, values, expect_d, expect_i, engine):
    f = cfunc(cells, name, sig)
    recorded(cells, 0, 0)
    for bound in all_bind_patterns(len(values)):
        args = [v if b else nt.ARG for v, b in zip(values, bound)]
        t = nt.bind(f, *args, engine=engine)
        t(*[v for v, b in zip(values, bound) if not b])
        got = recorded(cells, len(expect_d), len(expect_i))
        assert got == (expect_d, expect_i), f"bound pattern {bound}"


@pytest.mark.parametrize("engine", ENGINES)
def test_complex_cells_next_to_other_values(cells, engine):
    z = complex(1.25, -2.5)
    run_patterns(cells, "rec_Zdl", "void (double complex, double, int64_t)",
                 [z, 3.75, -123456789012345], [1.25, -2.5, 3.75], [-123456789012345], engine)
    run_patterns(cells, "rec_Fdl", "void (float complex, double, int64_t)",
                 [complex(0.5, -8.0), 9.5, 2**62 + 3], [0.5, -8.0, 9.5], [2**62 + 3], engine)
    run_patterns(cells, "rec_lZFZd",
                 "void (int64_t, double complex, float complex, double complex, double)",
                 [-7, complex(1.5, 2.5), complex(-3.5, 4.5), complex(5.5, -6.5), 7.5],
                 [1.5, 2.5, -3.5, 4.5, 5.5, -6.5, 7.5], [-7], engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_complex_cells_among_many_parameters(cells, engine):
    sig = ("void (int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double, double, "
           "double, double, double, double, double, double complex, int64_t, int64_t, double, "
           "float complex, double, int64_t, double complex)")
    ints = [-(k + 1) * 1000003 for k in range(9)]
    dbls = [k + 0.125 for k in range(10)]
    z, w, y = complex(11.5, -12.5), complex(13.25, -14.75), complex(-15.5, 16.5)
    values = ints[:6] + dbls[:8] + [z, ints[6], ints[7], dbls[8], w, dbls[9], ints[8], y]
    expect_d = dbls + [z.real, z.imag, w.real, w.imag, y.real, y.imag]
    run_patterns(cells, "rec_many", sig, values, expect_d, ints, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_rebind_replaces_every_cell_whole(cells, engine):
    """Each parameter of a thunk with every cell size (8-byte scalars,
    float complex, double complex; in registers and on the stack) rebound
    in turn, by index and by name: each call receives every new value whole
    (both parts of a complex value) and every other value as it was."""
    sig = ("void (int64_t a1, int64_t a2, int64_t a3, int64_t a4, int64_t a5, int64_t a6, "
           "double d1, double d2, double d3, double d4, double d5, double d6, double d7, "
           "double d8, double complex z, int64_t a7, int64_t a8, double d9, float complex w, "
           "double d10, int64_t a9, double complex y)")
    f = cfunc(cells, "rec_many", sig)
    names = f.signature.names
    ints = [-(k + 1) * 1000003 for k in range(9)]
    dbls = [k + 0.125 for k in range(10)]
    cplx = [complex(11.5, -12.5), complex(13.25, -14.75), complex(-15.5, 16.5)]

    def values(ints, dbls, cplx):
        z, w, y = cplx
        return ints[:6] + dbls[:8] + [z, ints[6], ints[7], dbls[8], w, dbls[9], ints[8], y]

    now = values(ints, dbls, cplx)
    t = nt.bind(f, *now, engine=engine)
    recorded(cells, 0, 0)
    new = values([v * 7 - 1 for v in ints], [v * -3.5 for v in dbls],
                 [complex(-c.imag * 2, c.real * 4) for c in cplx])
    for i in range(len(now)):
        t.rebind(names[i] if i % 2 else i, new[i])
        now[i] = new[i]
        t()
        z, w, y = now[14], now[18], now[21]
        want_i = now[:6] + [now[15], now[16], now[20]]
        want_d = now[6:14] + [now[17], now[19], z.real, z.imag, w.real, w.imag, y.real, y.imag]
        assert recorded(cells, len(want_d), len(want_i)) == (want_d, want_i), (i, names[i])


# ------------------------------------------------------------ alignment by stride

ALIGNED_KINDS = [("int16_t", "<i2"), ("uint16_t", "<u2"), ("int32_t", "<i4"),
                 ("float", "<f4"), ("int64_t", "<i8"), ("double", "<f8"),
                 ("uint64_t", "<u8")]


def packed_field(np_type, n=5):
    """Field 'v' of a packed record {v, one byte}: the base is aligned (offset
    0 of a fresh allocation), the stride (itemsize + 1) is not."""
    rec = np.zeros(n, dtype=np.dtype([("v", np_type), ("pad", "u1")], align=False))
    v = rec["v"]
    assert v.ctypes.data % np.dtype(np_type).itemsize == 0
    assert v.strides[0] == np.dtype(np_type).itemsize + 1
    return v


def odd_stride_view(np_type, n=4):
    """An ndarray on aligned memory with a stride of 1.5 elements."""
    size = np.dtype(np_type).itemsize
    raw = np.zeros(n * 2 * size, dtype=np.uint8)
    return np.ndarray((n,), dtype=np_type, buffer=raw, strides=(size + size // 2,))


@pytest.mark.parametrize("ctype, np_type", ALIGNED_KINDS, ids=[k[0] for k in ALIGNED_KINDS])
def test_stride_not_a_multiple_of_alignment_is_refused(ctype, np_type):
    fn = nt.Function(0x1000, f"void (const {ctype} *x)")
    for make in (packed_field, odd_stride_view):
        arr = make(np_type)
        for obj in (arr, memoryview(arr)):
            for wrap in (lambda a: a, nt.strided):
                with pytest.raises(ValueError, match=r"^argument 1 \(x: const .*\): the "
                                                     r"buffer's data is not aligned"):
                    nt.bind(fn, wrap(obj))
    # the stride is fine, the base is not
    raw = np.zeros(8 * 8 + 1, dtype=np.uint8)
    off = raw[1:1 + 8 * np.dtype(np_type).itemsize].view(np_type)
    for wrap in (lambda a: a, nt.strided):
        with pytest.raises(ValueError, match="not aligned"):
            nt.bind(fn, wrap(off))


def test_an_axis_of_one_element_has_no_stride_to_align(cfn, ntexport):
    """The alignment of a stride matters only where the axis steps: an axis
    of 0 or 1 elements may state any stride; one of 2 may not. NumPy's own
    arrays, and exporters that state the odd stride as given."""
    fn = cfn("f_d_pi", "double (const double *x, int n)")
    base = np.arange(8.0) + 5.0
    for n in (0, 1, 2):
        arr = np.lib.stride_tricks.as_strided(base, shape=(n,), strides=(3,))
        exported = ntexport.Buffer(base, "d", 8, (n,), (3,), honour=False)
        for obj in (arr, memoryview(arr), exported):
            for wrap in (lambda a: a, nt.strided):
                if n == 2:
                    with pytest.raises(ValueError, match=r"^argument 1 \(x: const double \*\): "
                                                         r"the buffer's data is not aligned"):
                        nt.bind(fn, wrap(obj), n)
                else:
                    assert nt.bind(fn, wrap(obj), n)() == 5.0 * n
    for two in (np.lib.stride_tricks.as_strided(base, shape=(2, 1), strides=(16, 3)),
                ntexport.Buffer(base, "d", 8, (2, 1), (16, 3))):
        assert nt.bind(fn, nt.strided(two), 1)() == 5.0   # the 1-element axis's stride is free


def test_aligned_strides_are_accepted(cfn):
    """Strides that are multiples of the alignment, contiguous or not."""
    fn = cfn("f_d_pzzzz", "double (const double *x, ptrdiff_t n0, ptrdiff_t n1, "
                          "ptrdiff_t s0, ptrdiff_t s1)")
    base = np.arange(12.0)
    rec = np.zeros(4, dtype=np.dtype([("v", "<f8"), ("pad", "u1")], align=True))
    rec["v"] = [1.0, 2.0, 3.0, 4.0]
    for arr in (base[::2], base[1::3], base.reshape(3, 4)[:, 1], rec["v"],
                np.ndarray((3,), dtype="<f8", buffer=np.arange(12.0), strides=(24,))):
        assert arr.strides[0] % 8 == 0
        want = sum(float(x) * (i + 1) for i, x in enumerate(arr))
        for obj in (arr, memoryview(arr)):
            t = nt.bind(fn, nt.strided(obj), nt.size(arr), 1, nt.stride(arr, 0), 0)
            assert t() == want
            assert nt.bind(fn, nt.strided(obj), nt.ARG, 1, nt.ARG, 0)(len(arr), arr.strides[0]) \
                == want
        with pytest.raises(ValueError, match="not C-contiguous"):
            nt.bind(fn, arr, 1, 1, 8, 0)


# ------------------------------------------------------------ dtype by kind

POINTEE = {
    "bool": "?", "int8_t": "i1", "uint8_t": "u1", "int16_t": "i2", "uint16_t": "u2",
    "int32_t": "i4", "uint32_t": "u4", "int64_t": "i8", "uint64_t": "u8",
    "float": "f4", "double": "f8", "float complex": "c8", "double complex": "c16",
}
DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8", "c8", "c16",
          "intc", "uintc", "long", "ulong", "longlong", "ulonglong", "intp", "uintp",
          "byte", "ubyte", "short", "ushort"]


@pytest.mark.parametrize("fmt, itemsize, ctype", [
    # a standard-size 'l'/'L' (order given) is 4 bytes...
    ("<l", 4, "int32_t"), ("=l", 4, "int32_t"), ("<L", 4, "uint32_t"), ("!L", 4, "uint32_t"),
    # ... but an exporter that states the native long's 8 bytes (as ctypes
    # did) is believed: a C long
    ("<l", 8, "int64_t"), ("=l", 8, "int64_t"), ("<L", 8, "uint64_t"), ("=L", 8, "uint64_t"),
    # no other code is: '<q' is 8 bytes whatever, '<i' 4
    ("<q", 8, "int64_t"), ("<i", 4, "int32_t")])
def test_long_codes_take_the_itemsize_the_exporter_states(ntexport, fmt, itemsize, ctype):
    size = 8 if "64" in ctype else 4
    values = np.array([1, 2, 3], dtype=f"{'u' if ctype[0] == 'u' else 'i'}{size}")
    if fmt[0] in "!>" and sys.byteorder == "little":
        values = values.byteswap()
    buf = ntexport.Buffer(values.view(np.uint8), fmt, itemsize, (3,), (itemsize,))
    fn = nt.Function(0x1000, f"void (const {ctype} *x)")
    if fmt[0] in "!>" and sys.byteorder == "little" and itemsize > 1:
        with pytest.raises(TypeError, match=r"non-native byte order"):
            nt.bind(fn, buf)
        return
    assert nt.bind(fn, buf).bindings[0] is buf
    other = "int32_t" if "64" in ctype else "int64_t"
    with pytest.raises(TypeError, match=r"^argument 1 \(x: const " + other + r" \*\): expected a "
                                        r"buffer of"):
        nt.bind(nt.Function(0x1000, f"void (const {other} *x)"), buf)
    # the read-through: the kernel gets the exporter's bytes
    t = nt.bind(nt.Function(ntexport.kernels["nt_x_addr"], f"uintptr_t (const {ctype} *p)"), buf)
    assert t() == values.ctypes.data


@pytest.mark.parametrize("ctype", sorted(POINTEE))
def test_pointer_takes_its_own_dtype_only(ctype):
    fn = nt.Function(0x1000, f"void (const {ctype} *x)")
    wfn = nt.Function(0x1000, f"void ({ctype} *x)")
    own = np.dtype(POINTEE[ctype])
    for name in DTYPES:
        dt = np.dtype(name)
        arr = np.zeros(4, dtype=dt)
        if dt == own:
            assert nt.bind(fn, arr).bindings[0] is arr
            assert nt.bind(wfn, arr).bindings[0] is arr
            ro = np.frombuffer(bytes(4 * dt.itemsize), dtype=dt)
            assert nt.bind(fn, ro).bindings[0] is ro
            with pytest.raises(ValueError, match=r"^argument 1 \(x: .*\): the buffer is read-only"):
                nt.bind(wfn, ro)
            # ctypes arrays export '<code' formats: same verdict
            if dt.kind in "iu" and dt.itemsize > 1:
                c_arr = np.ctypeslib.as_ctypes(arr)
                assert nt.bind(fn, c_arr).address
        else:
            with pytest.raises(TypeError, match=r"^argument 1 \(x: const .*\): expected a "
                                                r"buffer of"):
                nt.bind(fn, arr)


# ------------------------------------------------------------ plain data only
#
# A pointer takes plain data: where the items are Python objects (NumPy's
# dtype object, format 'O'), a kernel that writes a number overwrites a
# reference, and what it reads is an address. Every buffer a pointer binds
# is refused for them (convert/buffer.c nt_check_plain), whatever exported it,
# whatever the pointee, however it is bound. Objects inside structs are in
# test_interop.py, with the struct pointers.

# pointer parameter -> a plain array it takes
PLAIN_POINTEES = {"void *": "u1", "const void *": "f8", "char *": "i1", "const char *": "u1",
                  "unsigned char *": "u1", "double *": "f8", "const int64_t *": "i8",
                  "uintptr_t *": "u8"}


def _object_buffers(ntexport):
    """(buffer of Python objects, the format it exports) from every exporter."""
    arr = np.array([1, "a", None, 2.5], dtype=object)
    raw = np.zeros(32, dtype=np.uint8)      # never read: refused first
    return [(arr, "O"), (arr.reshape(2, 2), "O"), (np.empty((), dtype=object), "O"),
            (np.empty(0, dtype=object), "O"), (memoryview(arr), "O"), (arr.ctypes, "O"),
            (nt.strided(arr[::2]), "O"), (nt.strided(arr.reshape(2, 2).T), "O"),
            (ntexport.Buffer(raw, "O", 8, (4,), (8,)), "O"),
            (ntexport.Buffer(raw, "<O", 8, (4,), (8,)), "<O"),
            (ntexport.Buffer(raw, "@O", 8, (), ()), "@O")]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype", sorted(PLAIN_POINTEES))
def test_pointers_refuse_buffers_of_python_objects(ntexport, engine, ctype):
    fn = nt.Function(ntexport.kernels["nt_x_addr"], f"uintptr_t ({ctype} p)")
    plain = np.zeros(4, dtype=PLAIN_POINTEES[ctype])
    t = nt.bind(fn, plain, engine=engine)
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    ways = {"bind": lambda v: nt.bind(fn, v, engine=engine), "rebind": lambda v: t.rebind(0, v),
            "forwarded": fwd, "call": fn,
            "core": lambda v: nt._core.Thunk(fn._signature, fn.address, (v,), engine=engine)}
    for value, fmt in _object_buffers(ntexport):
        text = (f"argument 1 (p: {ctype}): a buffer of Python objects (format '{fmt}', as a "
                "NumPy array of dtype object exports): C code cannot read or write them; bind "
                "an array of plain data")
        for way, how in ways.items():
            if way == "core" and type(value).__name__ == "_ctypes":
                continue        # arr.ctypes is the package's to resolve
            with pytest.raises(TypeError) as info:
                how(value)
            assert str(info.value) == text, (way, value)
    # the plain array stays bound, and the kernel reads it
    assert t.bindings[0] is plain and t() == plain.ctypes.data
    assert fwd(plain) == plain.ctypes.data
    assert nt.bind(fn, plain.ctypes, engine=engine)() == plain.ctypes.data


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype", ["void *", "const unsigned char *", "const double *"])
def test_a_memoryview_cast_from_python_objects_is_refused(ntexport, engine, ctype):
    """mv.cast("B") (or to "d", "Q") of a buffer of Python objects exports
    their references as plain bytes: refused by every way a pointer is
    bound, naming the format it was cast from, as the buffer itself is;
    a cast of plain data binds."""
    fn = nt.Function(ntexport.kernels["nt_x_addr"], f"uintptr_t ({ctype} p)")
    code = "d" if "double" in ctype else "B"
    t = nt.bind(fn, np.zeros(4).view(code), engine=engine)
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    ways = {"bind": lambda v: nt.bind(fn, v, engine=engine), "rebind": lambda v: t.rebind(0, v),
            "forwarded": fwd, "call": fn}
    objects = np.array([1, "a", None, 2.5], dtype=object)
    fields = np.zeros(2, dtype=[("x", "f8"), ("o", "O")])
    for base, master in [(objects, "O"), (fields, "T{d:x:O:o:}")]:
        for value in (memoryview(base).cast("B").cast(code),
                      memoryview(memoryview(base).cast("B"))[8:].cast(code)):
            text = (f"argument 1 (p: {ctype}): a memoryview cast to format '{code}' from a "
                    f"buffer that holds Python objects (format '{master}'): C code cannot "
                    "read or write them; bind an array of plain data")
            for way, how in ways.items():
                with pytest.raises(TypeError) as info:
                    how(value)
                assert str(info.value) == text, way
    plain = np.arange(4.0)
    cast = memoryview(plain).cast("B").cast(code)
    assert nt.bind(fn, cast, engine=engine)() == plain.ctypes.data
    assert fwd(cast) == plain.ctypes.data


# ------------------------------------------------------------ foreign buffer exporters
#
# Buffers from tests/exporters/ntexport.c, which exports exactly the layout
# asked for: any format and itemsize it states, negative, zero and odd byte
# strides, read-only or not, NULL format or strides, request flags honoured
# or ignored. What numthunk must do is worked out here from the layout alone
# (the rules of docs/binding.md), and an accepted buffer is read by a C
# kernel at the bound address with the described strides, against the
# bytes read here with struct.

KERNEL_SUM = ("double ({T} p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0, "
              "ptrdiff_t s1)")


def foreign_verdict(lay):
    """(exception type, message pattern), or None if the bind must succeed."""
    code, itemsize, shape = lay["code"], lay["itemsize"], lay["shape"]
    strides = None if lay["null_strides"] else lay["strides"]
    size = struct.calcsize(code)
    # the element type: the format names it, its size must be the stated itemsize
    # (no format: unsigned bytes)
    fmt = "B" if lay["null_format"] else code
    if fmt != code or itemsize != size:
        return TypeError, r"expected a buffer of"
    if swapped(lay) and size > 1:
        return TypeError, rf"the buffer is in non-native byte order \(format '{lay['format']}'\)"
    if lay["readonly"] and not lay["const"]:
        return ValueError, r"the buffer is read-only"
    address = lay["raw"].ctypes.data + lay["offset"]
    if address % size or any(n > 1 and s % size for n, s in zip(shape, strides or ())):
        return ValueError, r"not aligned"
    length = itemsize * math.prod(shape)
    if not lay["strided"] and not pep3118_c_contiguous(shape, strides, itemsize, length):
        return ValueError, r"not C-contiguous"
    return None


@pytest.mark.parametrize("order", ["", "@", "=", "<", ">", "!"])
@pytest.mark.parametrize("code", sorted(FOREIGN))
def test_every_byte_order_prefix_of_every_code(ntexport, code, order):
    """Each code under each byte-order prefix, row by row: the host's order
    ('', '@', '=' and the host's own of '<' and '>', '!' being big) is read
    as is; the other is refused for elements wider than a byte."""
    raw = np.random.default_rng(ord(code)).integers(0, 0x40, 32, dtype=np.uint8)
    size = struct.calcsize(order + code)
    buf = ntexport.Buffer(raw, order + code, size, (32 // size,))
    T = f"const {FOREIGN[code]} *"
    kern = nt.Function(ntexport.kernels["nt_x_sum"], KERNEL_SUM.format(T=T))
    host = "<" if sys.byteorder == "little" else ">"
    if order in ("<", ">", "!") and order != host and size > 1:
        message = (rf"^argument 1 \(p: {re.escape(T)}\): the buffer is in non-native byte "
                   rf"order \(format '{order}{code}'\)")
        with pytest.raises(TypeError, match=message):
            nt.bind(kern, buf, ord(code), 32 // size, 1, size, 0)
        assert buf.exports == 0
        return
    t = nt.bind(kern, buf, ord(code), 32 // size, 1, size, 0)
    want = 0.0
    for v in read_elements(raw.tobytes(), code, 0, (32 // size,), (size,)):
        want += float(v)         # in the kernel's order (sum() compensates from 3.12 on)
    assert t() == want
    t.release()
    assert buf.exports == 0


@settings(deadline=None)
@given(foreign_layouts())
def test_foreign_buffer_layouts_bind_or_are_refused(ntexport, lay):
    code, shape, strides = lay["code"], lay["shape"], lay["strides"]
    ctype = FOREIGN[code]
    T = f"{'const ' if lay['const'] else ''}{ctype} *"
    fmt = None if lay["null_format"] else lay["format"]
    buf = ntexport.Buffer(lay["raw"], fmt, lay["itemsize"],
                          shape, None if lay["null_strides"] else strides,
                          offset=lay["offset"], readonly=lay["readonly"],
                          honour=lay["honour"])
    value = nt.strided(buf) if lay["strided"] else buf
    kern = nt.Function(ntexport.kernels["nt_x_sum"], KERNEL_SUM.format(T=T))
    n0, n1, s0, s1 = flat2(shape, strides)
    verdict = foreign_verdict(lay)
    event(f"refused: {verdict[1]}" if verdict else "bound")
    if verdict is not None:
        with pytest.raises(verdict[0], match=rf"^argument 1 \(p: {re.escape(T)}\): "
                                             rf".*{verdict[1]}"):
            nt.bind(kern, value, ord(code), n0, n1, s0, s1, engine=lay["engine"])
        assert buf.exports == 0, "a refused buffer was not released"
        return
    t = nt.bind(kern, value, ord(code), n0, n1, s0, s1, engine=lay["engine"])
    assert buf.exports == 1                  # held while bound
    raw = lay["raw"].tobytes()
    want = 0.0
    for v in read_elements(raw, code, lay["offset"], shape, strides):
        want += float(v)
    assert t() == want
    addr = nt.Function(ntexport.kernels["nt_x_addr"], f"uintptr_t ({T} p)")
    assert nt.bind(addr, value, engine=lay["engine"])() == lay["raw"].ctypes.data + lay["offset"]
    t.release()
    assert buf.exports == 0


@st.composite
def derived_cases(draw):
    lay = draw(foreign_layouts())
    ndim = len(lay["shape"])
    kind = draw(st.sampled_from(["size", "shape", "stride"]))
    axis = draw(st.integers(-ndim - 1, ndim))
    return lay, kind, axis, draw(st.booleans())


@settings(deadline=None)
@given(derived_cases())
def test_size_shape_stride_of_foreign_buffers(ntexport, cfn, case):
    """size(), shape() and stride() of any layout: the values the layout
    states, or a refusal naming the axis (or the 0-byte element)."""
    lay, kind, axis, elements = case
    shape, itemsize = lay["shape"], lay["itemsize"]
    strides = c_strides(shape, itemsize) if lay["null_strides"] else lay["strides"]
    buf = ntexport.Buffer(lay["raw"], None if lay["null_format"] else lay["format"], itemsize,
                          shape, None if lay["null_strides"] else lay["strides"],
                          offset=lay["offset"], readonly=lay["readonly"],
                          honour=lay["honour"])
    marker = (nt.size(buf) if kind == "size" else nt.shape(buf, axis) if kind == "shape"
              else nt.stride(buf, axis, elements=elements))
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    ndim = len(shape)
    if kind == "size":
        want = math.prod(shape)
    elif not -ndim <= axis < ndim:
        with pytest.raises(ValueError, match=rf"^argument 1 \(v: int64_t\): {kind}\(arr, "
                                             rf"{axis}\) asks for axis {axis} but the array "
                                             rf"has {ndim} dimensions?$") as info:
            nt.bind(ident, marker, engine=lay["engine"])
        assert str(info.value).endswith("dimension" if ndim == 1 else "dimensions")
        assert buf.exports == 0
        return
    elif kind == "shape":
        want = shape[axis]
    elif not elements:
        want = strides[axis]
    elif itemsize == 0:
        with pytest.raises(ValueError, match=r"elements are 0 bytes long"):
            nt.bind(ident, marker, engine=lay["engine"])
        return
    elif strides[axis] % itemsize:
        with pytest.raises(ValueError, match=rf"stride {strides[axis]} bytes of axis "
                                             rf"{axis % ndim} is not a whole number of "
                                             rf"{itemsize}-byte elements"):
            nt.bind(ident, marker, engine=lay["engine"])
        return
    else:
        want = strides[axis] // itemsize
    assert nt.bind(ident, marker, engine=lay["engine"])() == want
    assert buf.exports == 0                  # read at bind time, not held


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", [(5,), (2, 3), (3, 1, 4), (2, 3, 4, 5)])
def test_strides_of_a_buffer_exported_without_them_are_c_order(ntexport, cfn, engine, shape):
    """A C-contiguous buffer may export no strides (NULL): each axis's
    stride is then the item size times the extents after it, in bytes and
    in elements, at every axis counted from either end."""
    itemsize = 4
    raw = np.zeros(math.prod(shape) * itemsize, dtype=np.uint8)
    buf = ntexport.Buffer(raw, "i", itemsize, shape, None)
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    for axis in range(len(shape)):
        want = itemsize * math.prod(shape[axis + 1:])
        for spelled in (axis, axis - len(shape)):
            assert nt.bind(ident, nt.stride(buf, spelled), engine=engine)() == want
            assert nt.bind(ident, nt.stride(buf, spelled, elements=True),
                           engine=engine)() == want // itemsize
    assert buf.exports == 0


def test_stride_in_elements_of_zero_byte_elements_is_refused(cfn):
    """An empty structured dtype has 0-byte elements: no stride counts them
    (NumPy's own arrays, read without a buffer export)."""
    a = np.zeros(3, dtype=np.dtype([]))
    assert a.itemsize == 0
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    with pytest.raises(ValueError, match=r"^argument 1 \(v: int64_t\): stride\(arr, 0, "
                                         r"elements=True\) of an array whose elements are 0 "
                                         r"bytes long"):
        nt.bind(ident, nt.stride(a, 0, elements=True))
    assert nt.bind(ident, nt.stride(a, 0))() == 0
    assert nt.bind(ident, nt.size(a))() == 3


def _pil_rows(n=3, m=4):
    """PIL-style rows: an array of row pointers, and the rows."""
    rows = [np.arange(m, dtype=np.float64) + 10.0 * i for i in range(n)]
    return np.array([r.ctypes.data for r in rows], dtype=np.uintp), rows


@pytest.mark.parametrize("suboffsets, indirect", [((0, -1), True), ((8, -1), True),
                                                  ((-1, 0), True), ((-1, -1), False),
                                                  ((-2, -1), False)])
def test_indirect_buffers_are_refused_wherever_bound(ntexport, cfn, suboffsets, indirect):
    """Suboffsets >= 0 mean "follow a pointer" (PIL): such a buffer has no
    single data pointer, and numthunk refuses it for every parameter that
    reads one, naming the parameter; a negative suboffset is direct."""
    ptrs, rows = _pil_rows()
    buf = ntexport.Buffer(ptrs, "d", 8, (3, 4), (8, 8), suboffsets=suboffsets)
    kern = nt.Function(ntexport.kernels["nt_x_sum"], KERNEL_SUM.format(T="const double *"))
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    binds = [lambda: nt.bind(kern, buf, ord("d"), 3, 4, 8, 8),
             lambda: nt.bind(kern, nt.strided(buf), ord("d"), 3, 4, 8, 8),
             lambda: nt.bind(nt.Function(ntexport.kernels["nt_x_addr"],
                                         "uintptr_t (const void *p)"), buf),
             lambda: nt.bind(ident, nt.size(buf)),
             lambda: nt.bind(ident, nt.shape(buf, 1)),
             lambda: nt.bind(ident, nt.stride(buf, 0))]
    for make in binds:
        if indirect:
            with pytest.raises(TypeError, match=r"^argument 1 \(.*\): indirect buffers "
                                                r"\(PIL-style suboffsets\) are not supported"):
                make()
        else:
            # direct memory: the same rules as without suboffsets (CPython
            # calls a buffer with suboffsets non-contiguous)
            try:
                t = make()
            except ValueError as exc:
                assert "not C-contiguous" in str(exc) or "not aligned" in str(exc)
            else:
                t.release()
        assert buf.exports == 0
    del rows


@pytest.mark.parametrize("ndim", [1, 2])
def test_exporter_without_a_shape_is_refused(ntexport, cfn, ndim):
    """An exporter that ignores PyBUF_ND and gives no shape for an n-d
    buffer: refused (never read as if it had one)."""
    raw = np.zeros(64, dtype=np.uint8)
    buf = ntexport.Buffer(raw, "d", 8, None, None, ndim=ndim, len=16, honour=False)
    kern = nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const double *p)")
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    for make in (lambda: nt.bind(kern, buf), lambda: nt.bind(kern, nt.strided(buf)),
                 lambda: nt.bind(ident, nt.size(buf))):
        with pytest.raises(ValueError, match=rf"^argument 1 \(.*\): the ntexport.Buffer buffer "
                                             rf"is {ndim}-dimensional but has no shape"):
            make()
    assert buf.exports == 0
    # 0-dimensional: no shape is right
    scalar = ntexport.Buffer(raw, "d", 8, None, None, ndim=0, len=8)
    assert nt.bind(kern, scalar)() == raw.ctypes.data
    assert nt.bind(ident, nt.size(scalar))() == 1


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_exporter_length_must_match_shape_and_itemsize(ntexport, cfn, delta):
    """len = itemsize x the elements (PEP 3118), exactly: one byte more or
    less is an exporter describing memory it does not have."""
    raw = np.zeros(128, dtype=np.uint8)
    buf = ntexport.Buffer(raw, "d", 8, (3, 4), (32, 8), len=96 + delta)
    kern = nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const double *p)")
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    for make in (lambda: nt.bind(kern, buf), lambda: nt.bind(ident, nt.size(buf))):
        if delta:
            with pytest.raises(ValueError, match=rf"says it is {96 + delta} bytes long, but "
                                                 r"its shape and itemsize \(8 bytes\) make 96"):
                make()
        else:
            make().release()
    assert buf.exports == 0


@pytest.mark.parametrize("field, value, match", [
    ("shape", (3, -4), r"has a negative extent -4 on axis 1"),
    ("shape", (-1,), r"has a negative extent -1 on axis 0"),
    ("shape", (2**62, 4), r"make more than 9223372036854775807"),
    ("shape", (2**62, 4, 0), None),              # an empty axis: 0 bytes, whatever the rest
    ("itemsize", -8, r"has a negative ndim, itemsize or length"),
    ("itemsize", -1, r"has a negative ndim, itemsize or length"),   # the edge
    ("ndim", -1, r"has a negative ndim, itemsize or length"),
    ("len", -1, r"has a negative ndim, itemsize or length"),
])
def test_exporter_counts_that_describe_no_memory_are_refused(ntexport, cfn, field, value,
                                                             match):
    raw = np.zeros(64, dtype=np.uint8)
    kw = dict(base=raw, format="d", itemsize=8, shape=(2,), strides=(8,), honour=False)
    kw[field] = value
    if field == "shape":
        kw["strides"] = (8,) * len(value)
        kw["len"] = 0 if 0 in value else 16
    if field == "ndim":
        kw["shape"], kw["strides"] = None, None
    if field == "itemsize":
        kw["len"] = 16  # only the itemsize is negative: its own check refuses it
    buf = ntexport.Buffer(**kw)
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    kern = nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const void *p)")
    for make in (lambda: nt.bind(ident, nt.size(buf)), lambda: nt.bind(kern, nt.strided(buf))):
        if match is None:
            make().release()
        else:
            with pytest.raises(ValueError, match=rf"^argument 1 \(.*\): the ntexport.Buffer "
                                                 rf"buffer .*{match}"):
                make()
    assert buf.exports == 0


@pytest.mark.parametrize("shape, length", [((2**62, 4), 8), ((4, 2**62), 32), ((2**62, 4), 0),
                                           ((3, 2**61, 2**61), 24)])
def test_exporter_shapes_past_any_length_are_refused_whatever_len_says(ntexport, cfn, shape,
                                                                       length):
    # the product of the extents passes PY_SSIZE_T_MAX: no len describes it,
    # not even the product as far as it was taken before it overflowed
    raw = np.zeros(64, dtype=np.uint8)
    buf = ntexport.Buffer(raw, "d", 8, shape, (8,) * len(shape), len=length, honour=False)
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    kern = nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const void *p)")
    for make in (lambda: nt.bind(ident, nt.size(buf)), lambda: nt.bind(kern, nt.strided(buf))):
        with pytest.raises(ValueError, match=rf"^argument 1 \(.*\): the ntexport.Buffer buffer "
                                             rf"says it is {length} bytes long, but its shape "
                                             r"and itemsize \(8 bytes\) make more than "
                                             r"9223372036854775807"):
            make()
    assert buf.exports == 0


INTS = [("f_c_c", "int8_t", -2**7, 2**7 - 1), ("f_C_C", "uint8_t", 0, 2**8 - 1),
        ("f_s_s", "int16_t", -2**15, 2**15 - 1), ("f_S_S", "uint16_t", 0, 2**16 - 1),
        ("f_i_i", "int", -2**31, 2**31 - 1), ("f_I_I", "unsigned int", 0, 2**32 - 1),
        ("f_l_l", "int64_t", -2**63, 2**63 - 1), ("f_L_L", "uint64_t", 0, 2**64 - 1)]


@pytest.mark.parametrize("name, ctype, lo, hi", INTS, ids=[r[1] for r in INTS])
def test_integers_arrive_unchanged_or_are_refused(cfn, name, ctype, lo, hi):
    fn = cfn(name, f"{ctype} ({ctype} v)")
    fwd = nt.bind(fn, nt.ARG)

    @settings(max_examples=300, deadline=None)
    @given(st.one_of(st.integers(lo - 2**65, hi + 2**65), st.integers(lo - 3, lo + 3),
                     st.integers(hi - 3, hi + 3)))
    def check(v):
        if lo <= v <= hi:
            assert nt.bind(fn, v)() == v
            assert fwd(v) == v
            assert nt.bind(fn, np.int64(v) if -2**63 <= v < 2**63 else v)() == v
        else:
            with pytest.raises(OverflowError, match=f"argument 1 \\(v: {ctype}\\)"):
                nt.bind(fn, v)
            with pytest.raises(OverflowError):
                fwd(v)

    check()


def test_floats_round_as_c_does(cfn):
    fn = cfn("f_f_f", "float (float x)")
    flt_max = struct.unpack("f", struct.pack("I", 0x7F7FFFFF))[0]

    @settings(max_examples=500, deadline=None)
    @given(st.floats(allow_nan=False, width=64))
    def check(x):
        limit = float.fromhex("0x1.ffffffp+127")   # FLT_MAX plus half an ulp: rounds to inf
        if math.isfinite(x) and abs(x) >= limit:
            with pytest.raises(OverflowError, match="argument 1 \\(x: float\\)"):
                nt.bind(fn, x)
            return
        expected = np.float32(x).item()  # round to nearest even, as C's conversion
        got = nt.bind(fn, x)()
        assert got == expected or (math.isnan(got) and math.isnan(expected))
        assert abs(got) <= flt_max or math.isinf(x)

    check()


_ODD = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.complex_numbers(),
                 st.text(max_size=4), st.binary(max_size=4), st.lists(st.integers(), max_size=3),
                 st.just(np.zeros(3)), st.just(np.zeros(3, dtype=np.int32)),
                 st.just(np.zeros((2, 2))[:, 0]), st.just(object()), st.just(nt.ARG),
                 st.just(nt.size(np.zeros(2))), st.just(nt.address(16)))


@settings(max_examples=400, deadline=None)
@given(_ODD, _ODD)
def test_any_objects_bind_or_raise_cleanly(cfn, a, b):
    fn = cfn("f_d_pi", "double (const double *x, int n)")
    try:
        t = nt.bind(fn, a, b)
    except (TypeError, ValueError, OverflowError) as exc:
        assert "argument" in str(exc) or "takes" in str(exc)
        return
    # Bound: only what the parameters allow, kept as given.
    pointer_ok = a is nt.ARG or a is None or isinstance(a, nt.Address) or (
        isinstance(a, np.ndarray) and a.dtype == np.float64 and a.flags.c_contiguous)
    int_ok = b is nt.ARG or isinstance(b, nt._api._Derived) or (
        isinstance(b, int) and -2**31 <= b < 2**31)
    assert pointer_ok and int_ok, (a, b)
    assert all(x is y for x, y in zip(t.bindings, (a, b)))
    # Calls that read only what was bound give the sum the C function gives.
    if isinstance(a, np.ndarray) and b is not nt.ARG:
        n = 2 if isinstance(b, nt._api._Derived) else int(b)
        if 0 <= n <= a.size:
            assert t() == a[:n].sum()
    elif a is nt.ARG and b is nt.ARG:
        assert t(np.arange(3.0), 3) == 3.0
    t.release()


# ------------------------------------------------------------ arrays for scalars

CALL_HINT = ("; a thunk or Function called from Python takes one value per parameter. A SciPy "
             "routine that calls its function with arrays takes t.lowlevelcallable() instead, of "
             "a signature it lists: ndimage.generic_filter 'int (double *, intptr_t, double *, "
             "void *)', generic_filter1d 'int (double *, intptr_t, double *, intptr_t, void *)', "
             "geometric_transform 'int (intptr_t *, double *, int, int, void *)' "
             "(docs/scipy.md)")


@pytest.mark.parametrize("engine", ENGINES)
def test_an_array_for_a_scalar_is_no_scalar(cfn, engine):
    """An array or a sequence for a scalar parameter is refused as no
    scalar, by its shape or count of items; from a call, with what SciPy
    routines take instead (they call a Python function with arrays). A
    0-dimensional array is a scalar."""
    import array

    cases = [("f_d_d", "double (double)", "a real number"),
             ("f_i_i", "int32_t (int32_t)", "an integer"),
             ("f_d_D", "double (double complex)", "a complex number")]
    values = [(np.zeros((2, 3)), "a numpy.ndarray of shape (2, 3)"),
              (np.arange(1.0), "a numpy.ndarray of shape (1,)"),
              ([1.0, 2.0], "a list of 2 items"), ((1,), "a tuple of 1 item"),
              (array.array("d", [1.0, 2.0, 3.0]), "an array.array of 3 items"),
              (range(0), "a range of 0 items")]
    for name, sig, expected in cases:
        fn = cfn(name, sig)
        label = f"argument 1 ({sig[sig.index('(') + 1:-1]})"
        fwd = nt.bind(fn, nt.ARG, engine=engine)
        for value, shown in values:
            refusal = f"{label}: expected {expected}, got {shown}, which is not a scalar"
            with pytest.raises(TypeError) as info:
                fwd(value)
            assert str(info.value) == refusal + CALL_HINT
            with pytest.raises(TypeError) as info:
                nt.bind(fn, value, engine=engine)
            assert str(info.value) == refusal
        assert fwd(np.array(3)) == 3 and nt.bind(fn, np.array(3), engine=engine)() == 3

"""Conversion at the edges of its checks, on both engines where a thunk is
called:

- real values at the edges of C float and double (convert/value.c
  to_float, as_double, refuse_overflow_to_inf) in every form a real
  parameter takes: float, int, an object with __index__, an object with
  __float__, NumPy scalars, Decimal. The edge of float is FLT_MAX + half
  an ulp (it rounds to inf); the edge of double for an int is DBL_MAX +
  half an ulp (2**1024 - 2**970). Bound and forwarded; the integer widths'
  edges in every form are in test_bind.py;
- buffer exporters at the edges of the checks that stop numthunk reading
  memory an exporter does not have (convert/buffer.c nt_view_check:
  itemsize x the extents, computed without overflow, must be the length
  given; at most PY_SSIZE_T_MAX bytes), and of a typed memoryview's
  dimensions (convert/value.c check_memview, NT_MEMVIEW_MAX_DIMS = 8). No
  memory past the real buffer is read: sizes are bound, and pointers only
  taken;
- typed-memoryview declarations as the core takes them, (dtype, ndim,
  contig, const), at the edges of their checks (python/memviews.c
  parse_mvspec): the contiguity is exactly "C", "F" or None; the
  contiguity each declares is enforced on the buffer (convert/value.c).
  The ndim and index edges are in test_bind.py. These thunks are made,
  never called.
"""

import decimal
import functools
import math
import struct
import sys

import numpy as np
import pytest

import numthunk as nt

from thunks import Index, bind

pytestmark = pytest.mark.guards

# ------------------------------------------------------------ real values

FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
FLT_EDGE = float.fromhex("0x1.ffffffp+127")          # rounds to inf as a float
FLT_BELOW = math.nextafter(FLT_EDGE, 0.0)             # the largest that rounds to FLT_MAX
DBL_MAX = float.fromhex("0x1.fffffffffffffp+1023")
DBL_EDGE_INT = 2 ** 1024 - 2 ** 970                   # an int from here converts to inf


class Real:
    """A number known by its __float__ only."""

    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v

    def __repr__(self):
        return f"Real({self.v!r})"


def _forms(v):
    """v (a float or an int) in every form that holds it exactly."""
    out = [v]
    if isinstance(v, int):
        out.append(Index(v))
        if abs(v) < DBL_EDGE_INT:
            out.append(float(v))
        if -2 ** 63 <= v < 2 ** 64:
            out.append(np.int64(v) if v < 2 ** 63 else np.uint64(v))
    else:
        out += [Real(v), np.float64(v), decimal.Decimal(v)]
        if math.isfinite(v) and abs(v) <= FLT_MAX and float(np.float32(v)) == v:
            out.append(np.float32(v))
    return [f for f in out if f is not None]


def _check(engine, fn, v, want):
    fwd = bind(engine, fn, nt.ARG)
    for form in _forms(v):
        assert bind(engine, fn, form)() == want, form
        assert fwd(form) == want, form


def _refused(engine, fn, v, ctype):
    fwd = bind(engine, fn, nt.ARG)
    for form in _forms(v):
        with pytest.raises(OverflowError, match=rf"^argument 1 \({ctype}\): .*(beyond the range "
                                                rf"of a C {ctype}|too large for a C {ctype})"):
            bind(engine, fn, form)
        with pytest.raises(OverflowError, match=rf"^argument 1 \({ctype}\)"):
            fwd(form)


@pytest.mark.parametrize("sign", [1, -1])
def test_float_at_the_rounding_edge_in_every_form(cfn, engine, sign):
    fn = cfn("f_f_f", "float (float)")
    for v in (FLT_MAX, FLT_BELOW, math.nextafter(FLT_MAX, 0.0)):
        _check(engine, fn, sign * v, sign * float(np.float32(v)))
    for v in (FLT_EDGE, math.nextafter(FLT_EDGE, math.inf), 2.0 ** 128):
        _refused(engine, fn, sign * v, "float")


@pytest.mark.parametrize("sign", [1, -1])
def test_float_from_ints_at_the_rounding_edge(cfn, engine, sign):
    """An int is converted to double first (exactly, below 2**53 ulps),
    then checked against the float edge as a double is."""
    fn = cfn("f_f_f", "float (float)")
    below, edge = int(FLT_BELOW), int(FLT_EDGE)
    assert float(below) == FLT_BELOW and float(edge) == FLT_EDGE
    _check(engine, fn, sign * int(FLT_MAX), sign * FLT_MAX)
    _check(engine, fn, sign * below, sign * FLT_MAX)
    _refused(engine, fn, sign * edge, "float")
    _refused(engine, fn, sign * (edge + 1), "float")


@pytest.mark.parametrize("sign", [1, -1])
def test_double_from_ints_at_the_rounding_edge(cfn, engine, sign):
    fn = cfn("f_d_d", "double (double)")
    _check(engine, fn, sign * int(DBL_MAX), sign * DBL_MAX)
    _check(engine, fn, sign * (DBL_EDGE_INT - 1), sign * DBL_MAX)   # rounds down to DBL_MAX
    _refused(engine, fn, sign * DBL_EDGE_INT, "double")
    _refused(engine, fn, sign * (DBL_EDGE_INT + 1), "double")
    _refused(engine, fn, sign * 2 ** 1024, "double")


def test_values_that_convert_to_inf_without_being_inf_are_refused(cfn, engine):
    """A __float__ or a Decimal beyond DBL_MAX gives inf: refused as the
    int is; a value that is infinite itself passes as inf."""
    fn = cfn("f_d_d", "double (double)")
    for big in (decimal.Decimal("1e400"), decimal.Decimal("-1e400")):
        with pytest.raises(OverflowError, match=r"too large for a C double \(it converts to "
                                                r"-?inf\)"):
            bind(engine, fn, big)
        with pytest.raises(OverflowError) as info:
            bind(engine, cfn("f_f_f", "float (float)"), big)
        assert str(info.value) == (f"argument 1 (float): {big!r} is too large for a C float (it "
                                   f"converts to {'-' if big < 0 else ''}inf)")
    for inf in (math.inf, -math.inf, decimal.Decimal("Infinity"), np.float64(-math.inf),
                np.float32(math.inf)):
        assert bind(engine, fn, inf)() == float(inf)
    f = cfn("f_f_f", "float (float)")
    for inf in (math.inf, decimal.Decimal("-Infinity"), np.float64(-math.inf)):
        assert bind(engine, f, inf)() == float(inf)


# ---------------------------------------------------------------- huge values in messages

DIGITS_401 = "1" + "0" * 31 + "... (401 digits)"          # 10**400, cut (convert/value.c show)
BITS_16610 = "an int of 16610 bits"                         # 10**5000: past str()'s limit


@pytest.mark.parametrize("sig, fixture, refusal", [
    ("int32_t (int32_t)", "f_i_i",
     "does not fit in a 32-bit C int32_t (range -2147483648..2147483647)"),
    ("uint64_t (uint64_t)", "f_L_L",
     "does not fit in a 64-bit unsigned C uint64_t (range 0..18446744073709551615)"),
    ("double (double)", "f_d_d", "is too large for a C double"),
    ("float (float)", "f_f_f", "is too large for a C float"),      # not "C double"
    ("double (double complex)", "f_d_D",
     "does not fit in a C double complex (its parts are C doubles, max 1.7976931348623157e+308)"
     ": OverflowError: int too large to convert to float"),
])
def test_a_huge_int_is_shown_cut(cfn, engine, sig, fixture, refusal):
    """10**400 is shown by its first digits and its count of digits, not
    all 401 of them; 10**5000, which str() refuses to write, by its bits
    (the message is still the OverflowError, not str()'s ValueError).
    Bound and forwarded, for integer, real and complex parameters alike
    (a forwarded complex runs on libffi whatever the engine asked)."""
    fn = cfn(fixture, sig)
    ctype = sig[sig.index("(") + 1:-1]
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for value, shown in ((10 ** 400, DIGITS_401), (10 ** 5000, BITS_16610)):
        for call in (functools.partial(nt.bind, fn, value, engine=engine),
                     functools.partial(fwd, value)):
            with pytest.raises(OverflowError) as info:
                call()
            assert str(info.value) == f"argument 1 ({ctype}): {shown} {refusal}"


def test_a_huge_value_of_another_type_is_shown_cut(cfn, engine):
    """Any repr past 80 characters is cut to its first 32 and "..."; one
    up to 80 is shown whole (np.clongdouble's longest)."""
    fn = cfn("f_d_d", "double (double)")
    with pytest.raises(OverflowError) as info:
        bind(engine, fn, decimal.Decimal(10 ** 400))
    assert str(info.value) == ("argument 1 (double): Decimal('10000000000000000000000... "
                               "is too large for a C double (it converts to inf)")
    whole = decimal.Decimal("1." + "0" * 62 + "E+400")
    cut = decimal.Decimal("1." + "0" * 63 + "E+400")
    assert (len(repr(whole)), len(repr(cut))) == (80, 81)
    with pytest.raises(OverflowError) as info:
        bind(engine, fn, whole)
    assert str(info.value) == (f"argument 1 (double): {whole!r} is too large for a C double "
                               "(it converts to inf)")
    with pytest.raises(OverflowError) as info:
        bind(engine, fn, cut)
    assert str(info.value) == ("argument 1 (double): Decimal('1." + "0" * 21 + "... is too "
                               "large for a C double (it converts to inf)")


# ------------------------------------------------------------ buffers

MAX = sys.maxsize                     # PY_SSIZE_T_MAX


def _buffer(ntexport, itemsize, shape, length):
    raw = np.zeros(64, dtype=np.uint8)
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[itemsize]
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.insert(0, step)
        step = step * n if n else step
    return ntexport.Buffer(raw, fmt, itemsize, tuple(shape), tuple(strides), len=length,
                           honour=False)


@pytest.mark.parametrize("itemsize, shape", [
    (1, (MAX,)),                                  # exactly PY_SSIZE_T_MAX bytes
    (1, (MAX // 2, 2)),                           # MAX - 1
    (1, (MAX // 2 + 1, 2)),                       # MAX + 1
    (8, (MAX // 8 - 1,)),
    (8, (MAX // 8,)),                             # MAX - 7
    (8, (MAX // 8 + 1,)),                         # MAX + 1
    (2, (3, MAX // 6)),
    (2, (3, MAX // 6 + 1)),                       # the product crosses on the last axis
    (4, (2 ** 30, 2 ** 31 - 1)),
    (4, (2 ** 30, 2 ** 31)),                      # 2**63
])
def test_a_length_at_the_top_of_ssize_t_is_taken_and_one_past_refused(ntexport, cfn, itemsize,
                                                                      shape):
    elements = 1
    for n in shape:
        elements *= n
    nbytes = elements * itemsize
    fits = nbytes <= MAX
    buf = _buffer(ntexport, itemsize, shape, nbytes if fits else 0)
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    kern = nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const void *p)")
    if fits:
        assert nt.bind(ident, nt.size(buf))() == elements
        assert nt.bind(kern, nt.strided(buf))() == buf.address
    else:
        for make in (lambda: nt.bind(ident, nt.size(buf)),
                     lambda: nt.bind(kern, nt.strided(buf))):
            with pytest.raises(ValueError, match=rf"^argument 1 \(.*\): the ntexport.Buffer "
                                                 rf"buffer says it is 0 bytes long, but its "
                                                 rf"shape and itemsize \({itemsize} bytes\) "
                                                 rf"make more than {MAX}$"):
                make()
    assert buf.exports == 0


@pytest.mark.parametrize("delta", [-1, 1])
def test_a_length_at_the_top_of_ssize_t_must_still_match(ntexport, cfn, delta):
    buf = _buffer(ntexport, 1, (MAX - 1,), MAX - 1 + delta)
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    with pytest.raises(ValueError, match=rf"says it is {MAX - 1 + delta} bytes long, but its "
                                         rf"shape and itemsize \(1 bytes\) make {MAX - 1}$"):
        nt.bind(ident, nt.size(buf))
    assert buf.exports == 0


@pytest.mark.parametrize("ctype, bits", [("int32_t", 32), ("uint32_t", 32), ("int64_t", 64)])
def test_a_size_at_the_top_of_the_parameter_s_range(ntexport, cfn, ctype, bits):
    """size() of a buffer of 2**31 - 1, 2**31, 2**32 elements into
    int32_t, uint32_t and int64_t parameters: the count fits or is refused
    by the parameter's own range."""
    fn = {"int32_t": ("f_i_i", "int32_t (int32_t v)"),
          "uint32_t": ("f_I_I", "uint32_t (uint32_t v)"),
          "int64_t": ("f_l_l", "int64_t (int64_t v)")}[ctype]
    f = cfn(*fn)
    top = (1 << (bits - 1)) - 1 if ctype.startswith("int") else (1 << bits) - 1
    for n in (top - 1, top, top + 1):
        if n >= MAX:
            continue
        buf = _buffer(ntexport, 1, (n,), n)
        if n <= top:
            assert nt.bind(f, nt.size(buf))() == n
        else:
            with pytest.raises(OverflowError, match=rf"^argument 1 \(v: {ctype}\): .*{n}.* does "
                                                    rf"not fit"):
                nt.bind(f, nt.size(buf))
        assert buf.exports == 0


@pytest.mark.parametrize("ndim", [1, 7, 8])
def test_a_memoryview_of_up_to_8_dimensions_and_a_buffer_of_one_more(cfn, ndim):
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    sig = nt.Signature("double (__Pyx_memviewslice, int)")
    spec = {0: ("double", ndim, None, False)}
    arr = np.zeros((2,) + (1,) * (ndim - 1))
    t = nt.Thunk(sig, addr, (arr, 0), None, True, spec)
    assert t.bindings[0] is arr
    more = np.zeros((2,) + (1,) * ndim)
    with pytest.raises(ValueError, match=rf"the memoryview is declared {ndim}-dimensional, got "
                                         rf"a buffer with {ndim + 1} dimensions"):
        nt.Thunk(sig, addr, (more, 0), None, True, spec)


def _rational():
    try:
        from numpy._core._rational_tests import rational
    except ImportError:                           # NumPy 1.x
        from numpy.core._rational_tests import rational
    return rational


def test_array_kinds_by_type_number_at_the_edges_of_the_table(cfn):
    """convert/value.c array_kind keeps the kind of each built-in type number
    below 32 (kind_of_type[32]); float16 (number 23, a number type with no
    C kind) and a user-defined dtype (number 256, past the table) are
    refused naming the parameter; the built-in number arrays bind to void *."""
    f = cfn("f_d_pi", "double (const double *x, int n)")
    assert nt.bind(f, np.arange(3.0), 3)() == 3.0
    half = np.ones(2, dtype=np.float16)
    assert half.dtype.num == 23
    g = cfn("f_p_p", "void *(uint16_t *p)")
    with pytest.raises(TypeError, match=r"^argument 1 \(p: uint16_t \*\): expected a buffer of "
                                         r"uint16 for uint16_t \*, got format 'e'"):
        nt.bind(g, half)
    user = np.array([1, 2], dtype=_rational())
    assert user.dtype.num >= 256
    for sig in ("void *(int64_t *p)", "void *(void *p)"):
        with pytest.raises(TypeError, match=r"^argument 1 \(p: .*\): numpy.ndarray object does "
                                             r"not support the buffer protocol"):
            nt.bind(cfn("f_p_p", sig), user)
    for code in np.typecodes["AllInteger"] + "fd?":
        a = np.zeros(2, dtype=code)
        if a.dtype.num < 32:
            assert nt.bind(cfn("f_p_p", "void *(void *p)"), a)() == a.ctypes.data


# 7 divides PY_SSIZE_T_MAX (2**63 - 1 = 7 * 1317624576693539401): exactly
# PY_SSIZE_T_MAX elements, whichever axis comes first
@pytest.mark.parametrize("shape", [(MAX,), (3, MAX // 3), (MAX // 2, 2), (MAX // 2 + 1, 2),
                                   (7, MAX // 7), (MAX // 7, 7), (7, MAX // 7 + 1),
                                   (2 ** 62, 4), (2 ** 32, 2 ** 31), (3, MAX // 3 + 1),
                                   (0, 2 ** 62, 4), (2 ** 62, 4, 0)])
def test_size_of_zero_byte_elements_past_ssize_t_max_is_refused(ntexport, cfn, shape):
    """convert/value.c derived_value: the shape's product is bounded by the bytes
    for elements of one byte or more (nt_view_check, NumPy); elements of 0
    bytes bound nothing, and size() of more than PY_SSIZE_T_MAX of them
    wrapped (2**32 x 2**31 gave -2**63). An exporter and NumPy's own
    zero-byte dtype alike."""
    elements = 1
    for n in shape:
        elements *= n
    ident = cfn("f_l_l", "int64_t (int64_t v)")
    buf = ntexport.Buffer(np.zeros(8), "V0", 0, shape, (0,) * len(shape), len=0, honour=False)
    arrays = [buf]
    try:
        arrays.append(np.empty(shape, dtype=np.dtype([])))
    except ValueError:                            # a NumPy that refuses the shape
        pass
    for arr in arrays:
        if elements <= MAX:
            assert nt.bind(ident, nt.size(arr))() == elements
        else:
            with pytest.raises(OverflowError, match=rf"^argument 1 \(v: int64_t\): size\(arr\) "
                                                    rf"of an array of more than {MAX} elements"):
                nt.bind(ident, nt.size(arr))
        assert nt.bind(ident, nt.shape(arr, 0))() == shape[0]
    assert buf.exports == 0


# ------------------------------------------------------------ typed memoryviews

SIG = "double (__Pyx_memviewslice, int)"


def _make(cfn, arr, contig):
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    spec = {0: ("double", arr.ndim, contig, False)}
    return nt.Thunk(nt.Signature(SIG), addr, (arr, 0), None, True, spec)


@pytest.mark.parametrize("contig", ["C", "F", None])
def test_contiguity_c_f_and_none_are_taken(cfn, contig):
    arr = np.zeros((2, 3), order="F" if contig == "F" else "C")
    t = _make(cfn, arr, contig)
    assert t.bindings[0] is arr


@pytest.mark.parametrize("contig", ["c", "f", "A", "K", "CF", "FC", "C ", " C", "", "C\0",
                                    "\u0043\u0301", b"C", b"F", bytearray(b"C"), 0, 67, 1.0,
                                    True, False, ["C"], ("C",)])
def test_any_other_contiguity_is_refused_naming_the_parameter_and_value(cfn, contig):
    arr = np.zeros((2, 3))
    want = (f"memoryview 0: contig must be 'C', 'F' or None, got "
            f"{type(contig).__name__} {contig!r}")
    with pytest.raises(ValueError) as info:
        _make(cfn, arr, contig)
    assert str(info.value) == want


@pytest.mark.parametrize("contig, order, ok", [("C", "C", True), ("C", "F", False),
                                              ("F", "F", True), ("F", "C", False),
                                              (None, "C", True), (None, "F", True)])
def test_the_declared_contiguity_is_the_one_checked(cfn, contig, order, ok):
    arr = np.zeros((2, 3), order=order)
    if ok:
        assert _make(cfn, arr, contig).bindings[0] is arr
    else:
        name = "C" if contig == "C" else "Fortran"
        with pytest.raises(ValueError, match=rf"memoryview is declared {name}-contiguous but "
                                             r"the buffer is not"):
            _make(cfn, arr, contig)


def test_a_declaration_of_the_wrong_shape_is_refused_before_its_contiguity(cfn):
    arr = np.zeros(3)
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    for spec in (("double", 1, "C"), ("double", 1, "C", False, 0), ("double", "1", "C", False)):
        with pytest.raises(TypeError):
            nt.Thunk(nt.Signature(SIG), addr, (arr, 0), None, True, {0: spec})


@pytest.mark.parametrize("dtype", ["double *", "double **", "const double *", "void *",
                                   "void", "bool *", "int (*)(int)", "DLTensor *"])
def test_a_dtype_that_is_not_a_scalar_is_refused(cfn, dtype):
    arr = np.zeros(3)
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    with pytest.raises(ValueError) as info:
        nt.Thunk(nt.Signature(SIG), addr, (arr, 0), None, True, {0: (dtype, 1, None, False)})
    assert str(info.value) == f"memoryview 0 dtype '{dtype}' is not a scalar type"
    # the same declaration through Function's memoryviews=, as the user writes it
    fn = nt.Function(addr, SIG, memoryviews={0: f"{dtype}[:]"})
    with pytest.raises(ValueError, match=r"is not a scalar type"):
        nt.bind(fn, arr, 0)


@pytest.mark.parametrize("dtype", sorted(nt._core.kinds))
def test_every_scalar_kind_is_a_dtype(cfn, dtype):
    """The core takes a dtype as C text, the kind's; the package reads
    the kind's name as well (numthunk/_numba_sig.py), as C."""
    arr = np.zeros(3, dtype=nt._core.kinds[dtype].dtype)
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    c = nt._core.kinds[dtype].c
    t = nt.Thunk(nt.Signature(SIG), addr, (arr, 0), None, True, {0: (c, 1, None, False)})
    assert t.bindings[0] is arr
    fn = nt.Function(addr, SIG, memoryviews={0: f"{dtype}[:]"})
    assert fn.memoryviews == {0: (c, 1, None, False)}
    assert nt.bind(fn, arr, 0).bindings[0] is arr


def test_a_pointer_is_no_array_for_a_memoryview(cfn, ntexport):
    """A raw pointer where Cython takes a typed memoryview (the crash the
    hand-written T * wrappers guard against) is refused as a pointer, in
    every form that exports one (one pointer-sized item of format '&<d',
    as a ctypes pointer has, 'P' as a c_void_p has, or 'z', after any
    byte-order character); an array of another dtype is named by it."""
    import ctypes

    arr = np.arange(3.0)
    fn = nt.Function(cfn("f_d_pi", "double (const double *x, int n)").address, SIG,
                     memoryviews={0: "double[::1]"})
    pointers = [arr.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                ctypes.pointer(ctypes.c_int(1)), ctypes.c_void_p(arr.ctypes.data),
                *(ntexport.Buffer(bytearray(8), fmt, 8, (), ())
                  for fmt in ("&d", "<&d", "@&d", "P", "@P", "=P", "!P", ">&i", "z"))]
    for p in pointers:
        with pytest.raises(TypeError, match=r"^argument 1 \(__Pyx_memviewslice\): the memoryview "
                                            r"is declared float64, got a pointer \(format '.*'\), "
                                            r"not an array: a typed memoryview takes the array "
                                            r"itself"):
            nt.bind(fn, p, 3)
    for other, fmt in [(np.arange(3, dtype=np.int32), "i"), (np.zeros(2, "S8"), "8s")]:
        with pytest.raises(TypeError, match=rf"got a buffer of (int32|an unsupported type) "
                                            rf"\(format '{fmt}'\)$"):
            nt.bind(fn, other, 3)
    assert nt.bind(fn, arr, 3).bindings[0] is arr                 # never called


def test_a_buffer_of_python_objects_is_refused(cfn):
    """Items that are Python objects are refused before the dtype is read
    (convert/buffer.c nt_check_plain), by every way a memoryview is bound: an object
    array has the size of a double, and a struct of one object field
    too."""
    fn = nt.Function(cfn("f_d_pi", "double (const double *x, int n)").address, SIG,
                     memoryviews={0: "double[:]"})
    arr = np.zeros(3)
    t = nt.bind(fn, arr, 3)
    fwd = nt.bind(fn, nt.ARG, 3)
    rest = "C code cannot read or write them; bind an array of plain data"
    for value, text in [
            (np.array([1.0, "a", None], dtype=object),
             "a buffer of Python objects (format 'O', as a NumPy array of dtype object exports)"),
            (np.zeros(3, dtype=[("o", "O")]),
             "the struct's field 'o' holds Python objects (format 'T{O:o:}')")]:
        for how in (lambda v: nt.bind(fn, v, 3), lambda v: t.rebind(0, v), fwd):
            with pytest.raises(TypeError) as info:
                how(value)
            assert str(info.value) == f"argument 1 (__Pyx_memviewslice): {text}: {rest}"
    assert t.bindings[0] is arr

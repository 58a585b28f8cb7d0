"""Buffer exporters at the edges of the checks that stop numthunk reading
memory an exporter does not have (convert/buffer.c nt_view_check: itemsize x the
extents, computed without overflow, must be the length given; at most
PY_SSIZE_T_MAX bytes), and of a typed memoryview's dimensions (convert/value.c
check_memview, NT_MEMVIEW_MAX_DIMS = 8). No memory past the real buffer is
read: sizes are bound, and pointers only taken."""

import sys

import numpy as np
import pytest

import numthunk as nt

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

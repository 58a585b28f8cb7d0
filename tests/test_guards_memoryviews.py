"""Typed-memoryview declarations as the core takes them, (dtype, ndim,
contig, const), at the edges of their checks (life/commit.c parse_mvspec): the
contiguity is exactly "C", "F" or None; the contiguity each declares is
enforced on the buffer (convert/value.c). The ndim and index edges are in
test_bind.py. The thunks here are made, never called."""

import numpy as np
import pytest

import numthunk as nt

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
    arr = np.zeros(3, dtype=nt._core.kinds[dtype].dtype)
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    t = nt.Thunk(nt.Signature(SIG), addr, (arr, 0), None, True, {0: (dtype, 1, None, False)})
    assert t.bindings[0] is arr


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

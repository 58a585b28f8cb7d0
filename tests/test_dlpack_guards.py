"""A DLPack tensor's size at its edge (convert/dlpack.c fill_from_dltensor): its
elements, at most INT64_MAX bytes of them, unless an extent is 0. A shape
whose product passes it describes no memory, and its count wrapped: the
alignment check was skipped and the compact strides wrapped with it. The
tensor is bound, never read (ntexport.Tensor, a DLPack exporter of
exactly the layout asked for)."""

import numpy as np
import pytest

import numthunk as nt

pytestmark = pytest.mark.guards

MAX = 2 ** 63 - 1


def _addr(ntexport):
    return nt.Function(ntexport.kernels["nt_x_addr"], "uintptr_t (const DLTensor *t)")


@pytest.mark.parametrize("shape", [
    (MAX // 8,),                          # MAX - 7 bytes
    (MAX // 8 // 4, 4),
    (2 ** 30, 2 ** 30, 2 ** 2),           # 2**62 elements: 2**65 bytes
    (MAX // 8 + 1,),                      # 2**63 bytes
    (2 ** 62, 4),                         # 2**64 elements: the count wrapped to 0
    (2 ** 32, 2 ** 31),                   # 2**63 elements: wrapped negative
    (2 ** 31, 2 ** 31, 2),
    (3, MAX // 24 + 1),                   # crossing on the last axis
])
@pytest.mark.parametrize("byte_offset", [0, 3])
def test_a_tensor_past_int64_max_bytes_is_refused_and_one_within_checked(ntexport, shape,
                                                                         byte_offset):
    raw = np.zeros(4)
    exporter = ntexport.Tensor(raw, 2, 64, shape, None, byte_offset=byte_offset)
    elements = 1
    for n in shape:
        elements *= n
    fits = elements * 8 <= MAX
    if not fits:
        with pytest.raises(ValueError, match=r"^argument 1 \(t: const DLTensor \*\): DLPack "
                                             rf"shape and dtype make more than {MAX} bytes"):
            nt.bind(_addr(ntexport), exporter)
    elif byte_offset % 8:
        with pytest.raises(ValueError, match=r"the array's data is not aligned to 8 bytes"):
            nt.bind(_addr(ntexport), exporter)
    else:
        assert nt.bind(_addr(ntexport), exporter)() != 0
    assert exporter.exported == 1


@pytest.mark.parametrize("shape", [(0, 2 ** 62, 4), (2 ** 62, 4, 0), (2 ** 62, 0, 2 ** 62)])
def test_an_empty_tensor_binds_whatever_its_other_extents(ntexport, shape):
    """Nothing is read from a tensor with an empty axis (as for buffers,
    convert/buffer.c nt_view_check)."""
    exporter = ntexport.Tensor(None, 2, 64, shape, None, byte_offset=3)
    t = nt.bind(_addr(ntexport), exporter)
    t.release()


@pytest.mark.parametrize("bits, code, shape", [
    (8, 1, (MAX,)),                       # uint8: exactly INT64_MAX bytes
    (8, 1, (MAX // 2 + 1, 2)),            # 2**63
    (16, 0, (MAX // 2,)),                 # int16: MAX - 1
    (16, 0, (MAX // 2 + 1,)),
    (128, 5, (MAX // 16,)),               # complex128
    (128, 5, (MAX // 16 + 1,)),
])
def test_the_size_counts_the_dtype_s_bytes(ntexport, bits, code, shape):
    exporter = ntexport.Tensor(np.zeros(4), code, bits, shape, None)
    elements = 1
    for n in shape:
        elements *= n
    if elements * (bits // 8) <= MAX:
        nt.bind(_addr(ntexport), exporter).release()
    else:
        with pytest.raises(ValueError, match=rf"make more than {MAX} bytes"):
            nt.bind(_addr(ntexport), exporter)



@pytest.mark.parametrize("code", [0, 1, 2, 4, 5, 6])
@pytest.mark.parametrize("bits", [0, 1, 7, 12, 24, 255])
def test_a_dtype_of_no_kind_s_width_is_refused(ntexport, code, bits):
    """convert/dlpack.c kind_of_dtype: a kind matches a DLPack dtype by code and
    bits; a width no kind has (0 bits, fewer than 8, not a whole byte, the
    widest a DLDataType holds) is no kind's, whatever its code, and refused
    naming the dtype."""
    exporter = ntexport.Tensor(np.zeros(4), code, bits, (2,), None)
    with pytest.raises(TypeError, match=rf"^argument 1 \(t: const DLTensor \*\): DLPack dtype "
                                        rf"\(code {code}, bits {bits}, lanes 1\) is not passed on"):
        nt.bind(_addr(ntexport), exporter)
    assert exporter.exported == exporter.deleted == 1


@pytest.mark.parametrize("shape, dtype", [((0,), "f8"), ((0, 3), "c16"), ((2,), "f8"),
                                          ((3, 0), "i4")])
def test_an_ndarray_numpy_calls_aligned_is_taken_only_if_its_data_is(shape, dtype):
    """NumPy calls an empty array aligned whatever its data pointer; the
    ndarray fast path of a DLTensor * (convert/dlpack.c from_ndarray) takes what
    the buffer path takes, and that one refuses data a kind's alignment
    does not divide, empty or not."""
    fn = nt.Function(0x1000, "double (const DLTensor *t)")          # never called
    for offset in (0, 1, 3, 4):
        a = np.ndarray(shape, dtype=dtype, buffer=bytearray(64), offset=offset)
        align = np.dtype(dtype).alignment
        if (a.ctypes.data % align) == 0:
            assert nt.bind(fn, a).bindings[0] is a
            continue
        for v in (a, memoryview(a)):
            with pytest.raises(ValueError, match=rf"data is not aligned to {align} bytes"):
                nt.bind(fn, v)

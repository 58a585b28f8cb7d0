"""Layouts for the buffer exporter of tests/exporters/ntexport.c, drawn by
hypothesis: any element format and stated itemsize, 0 to 2 dimensions,
negative, zero and odd byte strides, a base at any alignment, NULL format
or strides, any byte-order prefix, read-only or not, request flags honoured
or ignored; and what
such a layout holds, read with struct (the tests' oracle)."""

import struct
import sys

import numpy as np
from hypothesis import strategies as st

from conftest import ENGINES

FOREIGN = {"b": "int8_t", "B": "uint8_t", "h": "int16_t", "H": "uint16_t", "i": "int32_t",
           "I": "uint32_t", "q": "int64_t", "Q": "uint64_t", "f": "float", "d": "double",
           "?": "bool"}


def c_strides(shape, itemsize):
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def pep3118_c_contiguous(shape, strides, itemsize, length):
    """PyBuffer_IsContiguous(view, 'C') of CPython, for a direct buffer."""
    if length == 0 or strides is None:
        return True
    step = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1 and s != step:
            return False
        step *= n
    return True


def swapped(lay):
    """Whether the layout's format states the other byte order than the
    host's (struct's rules: '<' little, '>' and '!' big)."""
    order = "" if lay["null_format"] else lay["order"]
    return order in ("<", ">", "!") and (order == "<") != (sys.byteorder == "little")


def read_elements(raw, code, offset, shape, strides):
    """The elements a layout describes, read from the bytes in row-major order."""
    n0, n1, s0, s1 = flat2(shape, strides)
    return [struct.unpack_from("=" + code, raw, offset + i * s0 + j * s1)[0]
            for i in range(n0) for j in range(n1)]


def flat2(shape, strides):
    """(n0, n1, s0, s1) of a 0-, 1- or 2-dimensional layout."""
    shape, strides = tuple(shape) + (1, 1), tuple(strides) + (0, 0)
    return shape[0], shape[1], strides[0], strides[1]


@st.composite
def foreign_layouts(draw):
    code = draw(st.sampled_from(sorted(FOREIGN)))
    size = struct.calcsize(code)
    itemsize = draw(st.sampled_from([size] * 6 + [1, 2 * size, 0]))
    ndim = draw(st.integers(0, 2))
    shape = tuple(draw(st.integers(0, 4)) for _ in range(ndim))
    contiguous = draw(st.booleans())
    strides = c_strides(shape, itemsize) if contiguous else tuple(
        draw(st.integers(-3 * size, 3 * size)) for _ in range(ndim))
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides)) if all(shape) else 0
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) if all(shape) else 0
    offset = 8 - lo + draw(st.sampled_from([0] * 3 + list(range(1, size))))
    raw = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(
        0, 0x40, offset + hi + max(itemsize, size) + 8, dtype=np.uint8)   # finite floats
    # a byte-order prefix: native ('', '@', '='), or little, big or network
    # ('<', '>', '!'); the codes drawn have the same size either way
    order = draw(st.sampled_from(["", "", "", "@", "=", "<", ">", "!"]))
    return dict(
        code=code, order=order, format=order + code, itemsize=itemsize, shape=shape,
        strides=strides, offset=offset, raw=raw,
        null_format=draw(st.sampled_from([False] * 5 + [True])),
        null_strides=contiguous and draw(st.booleans()),
        readonly=draw(st.booleans()), honour=draw(st.booleans()),
        const=draw(st.booleans()), strided=draw(st.booleans()),
        engine=draw(st.sampled_from(ENGINES)))


class OnlyDL:
    """An array seen through DLPack alone (no buffer protocol), in the
    versioned protocol: the capsule path of a DLTensor parameter. It
    forwards to the array, and keeps the keywords of its last call and of
    its last call with keywords (only the last: the leak tests call it many
    times). An array from before NumPy 2.1 refuses the versioned keywords
    with TypeError, and the consumer then calls again without them: `kw`
    is then {} and `asked` what was asked first."""

    def __init__(self, arr):
        self.arr = arr
        self.kw = None
        self.asked = None

    def __dlpack__(self, **kw):
        self.kw = kw
        if kw:
            self.asked = kw
        return self.arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()

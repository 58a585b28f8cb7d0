"""Generated round trips: bindings drawn by hypothesis through pickle,
out-of-band pickle buffers, copy and deepcopy, each thunk then computing
what NumPy computes from the arrays it holds."""

import copy
import math
import pickle

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import numthunk as nt

from conftest import ENGINES
from thunks import Index
from travel import BLAS

# ------------------------------------------------------------ generated round trips
#
# Bindings drawn by hypothesis: every marker (ARG, size, shape(axis),
# stride(axis, elements=), strided, address(n, owner=), ref(value, ctype)),
# arrays of every dtype, order and contiguity, read-only and misaligned,
# scalars of every C type at and near their edges in every input form, on
# either engine, several thunks sharing arrays, through pickle (in band,
# and protocol 5 out of band with the buffers handed back writable,
# read-only, misaligned), copy.copy and copy.deepcopy. After the trip every
# binding's options read back as they were, and every thunk computes what
# NumPy computes from the arrays it now holds (and what the original
# computed from its own).

KIND_CTYPE = {np.dtype(k): v for k, v in {
    "?": "bool", "i1": "int8_t", "u1": "uint8_t", "i2": "int16_t", "u2": "uint16_t",
    "i4": "int32_t", "u4": "uint32_t", "i8": "int64_t", "u8": "uint64_t", "f4": "float",
    "f8": "double", "c8": "float complex", "c16": "double complex"}.items()}
SUM2 = "double ({T} p, int code, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0, ptrdiff_t s1)"
SUMN = "double ({T} p, int code, {N} n)"
COUNT_TYPES = ["size_t", "int", "int64_t", "uint32_t", "ptrdiff_t", "unsigned long"]
INT_EDGES = {"int8_t": (-2**7, 2**7 - 1, "f_c_c"), "uint8_t": (0, 2**8 - 1, "f_C_C"),
             "int16_t": (-2**15, 2**15 - 1, "f_s_s"), "uint16_t": (0, 2**16 - 1, "f_S_S"),
             "int32_t": (-2**31, 2**31 - 1, "f_i_i"), "uint32_t": (0, 2**32 - 1, "f_I_I"),
             "int64_t": (-2**63, 2**63 - 1, "f_l_l"), "uint64_t": (0, 2**64 - 1, "f_L_L")}
FLT_MAX = float(np.finfo(np.float32).max)
DBL_MAX = float(np.finfo(np.float64).max)


def struct_code(dt):
    """The struct-module code nt_x_sum reads a dtype's elements with."""
    if dt.kind == "b":
        return "?"
    if dt.kind == "c":
        return "F" if dt.itemsize == 8 else "D"
    if dt.kind in "iu":
        c = {1: "b", 2: "h", 4: "i", 8: "q"}[dt.itemsize]
        return c.upper() if dt.kind == "u" else c
    return {4: "f", 8: "d"}[dt.itemsize]


def element_value(x):
    """What nt_x_sum adds for one element (complex: real + 10 imag)."""
    if isinstance(x, (complex, np.complexfloating)):
        return float(x.real) + 10.0 * float(x.imag)
    return float(x)


def numpy_sum(arr):
    """The elements of arr in row-major order, added as the kernel adds them."""
    s = 0.0
    for x in np.asarray(arr).reshape(-1) if arr.ndim else [arr[()]]:
        s += element_value(x)
    return s


@st.composite
def any_array(draw, aligned=True):
    dt = draw(st.sampled_from(list(KIND_CTYPE)))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    n = int(np.prod(shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind == "b":
        flat = rng.integers(0, 2, n).astype(dt)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True
                            ).astype(dt)
    elif dt.kind == "f":
        flat = rng.normal(size=n).astype(dt)
    else:
        flat = (rng.normal(size=n) + 1j * rng.normal(size=n)).astype(dt)
    if not aligned:
        raw = np.zeros(n * dt.itemsize + 1, dtype=np.uint8)
        arr = raw[1:].view(dt).reshape(shape)
        arr[...] = flat.reshape(shape)
        return arr
    order = draw(st.sampled_from("CF"))
    arr = np.array(flat.reshape(shape), order=order)
    how = draw(st.sampled_from(["whole", "whole", "sliced", "reversed", "transposed"]))
    if how == "sliced" and arr.shape[0] > 1:
        arr = arr[::2]
    elif how == "reversed":
        arr = arr[::-1]
    elif how == "transposed":
        arr = arr.T
    if draw(st.booleans()):
        arr.flags.writeable = False
    return arr


class Case:
    """One thunk of a generated binding: how to call it and what it must
    return, both worked out from the bindings of the thunk at hand (so they
    hold for a copy as for the original)."""

    def __init__(self, thunk, call, expect, picklable=True, note=""):
        self.thunk, self.call, self.expect = thunk, call, expect
        self.picklable, self.note = picklable, note


def _fwd(t):
    return [i for i, v in enumerate(t.bindings) if v is nt.ARG]


def _array_of(v):
    return v.obj if isinstance(v, STRIDED_T) else v


@st.composite
def sum_cases(draw, lib, arrays):
    """nt_x_sum over one array: the pointer bound (as the array, strided(),
    address(owner=)) or forwarded; n0, n1, s0, s1 and the code bound as
    ints, NumPy ints, __index__ objects, markers, or forwarded."""
    shared = arrays and draw(st.booleans())
    misaligned = not shared and draw(st.integers(0, 5)) == 0
    arr = (draw(st.sampled_from(arrays)) if shared else
           draw(any_array(aligned=not misaligned)))
    arrays.append(arr)
    code = struct_code(arr.dtype)
    contiguous = arr.flags.c_contiguous
    how = draw(st.sampled_from(["array", "strided", "strided", "address", "ARG"]
                               if contiguous else ["strided", "strided", "address", "ARG"]))
    ctype = "void" if not arr.flags.aligned else draw(st.sampled_from(
        [KIND_CTYPE[arr.dtype], "void"]))
    const = not arr.flags.writeable or draw(st.booleans())
    T = f"{'const ' if const else ''}{ctype} *"
    elements = draw(st.booleans()) and ctype != "void"
    name = "nt_x_sum_elems" if elements else "nt_x_sum"
    fn = nt.Function.from_library(lib, name, SUM2.format(T=T), nogil=draw(st.booleans()))
    p = {"array": arr, "strided": nt.strided(arr), "ARG": nt.ARG,
         "address": nt.address(arr.ctypes.data, owner=arr)}[how]
    shape2 = arr.shape + (1,) * (2 - arr.ndim)
    strides2 = arr.strides + (0,) * (2 - arr.ndim)
    dense = arr.flags.c_contiguous or arr.flags.f_contiguous   # strides survive a trip
    ints = []
    for k in range(4):
        axis = k % 2
        literal = (shape2 if k < 2 else strides2)[axis]
        if elements and k >= 2:
            literal //= arr.itemsize
        forms = ["ARG", "int", "np", "index"] if (k < 2 or dense) and how != "ARG" else ["ARG"]
        # deepcopy shares a raw address but copies the arrays of the
        # markers: a stride marker on the owner describes the copy, whose
        # strides are its own unless the owner is dense
        if axis < arr.ndim and how != "ARG" and (k < 2 or dense or how != "address"):
            forms += ["marker"] * 3
        form = draw(st.sampled_from(forms))
        if form == "marker":
            neg = draw(st.booleans())
            ax = axis - arr.ndim if neg else axis
            ints.append(nt.shape(arr, ax) if k < 2 else
                        nt.stride(arr, ax, elements=True) if elements else
                        draw(st.sampled_from([nt.stride(arr, ax),
                                              nt.stride(arr, ax, elements=False)])))
        elif form == "ARG":
            ints.append(nt.ARG)
        else:
            ints.append({"int": int, "np": np.int64, "index": Index}[form](literal))
    code_v = draw(st.sampled_from([ord(code), np.int32(ord(code)), nt.ARG]))
    engine = draw(st.sampled_from([None, *ENGINES]))
    t = nt.bind(fn, p, code_v, *ints, engine=engine)

    def described(t):
        b = t.bindings
        a = arr if b[0] is nt.ARG else b[0]
        return a if isinstance(a, np.ndarray) else _array_of(a) if not isinstance(
            a, nt.Address) else a.owner

    def call(t):
        a = described(t)
        s2 = a.shape + (1,) * (2 - a.ndim)
        st2 = a.strides + (0,) * (2 - a.ndim)
        if elements:
            st2 = tuple(s // a.itemsize for s in st2)
        # a forwarded pointer takes strided() as a bound one does
        p = a if a.flags.c_contiguous else nt.strided(a)
        full = [p, ord(code), s2[0], s2[1], st2[0], st2[1]]
        return [full[i] for i in _fwd(t)]

    return Case(t, call, lambda t: numpy_sum(described(t)), picklable=how != "address",
                note=f"{name} {T} {how}")


@st.composite
def count_cases(draw, lib, arrays):
    """nt_x_sum_n over a C-contiguous array, n = size(arr) in any integer type."""
    arr = np.ascontiguousarray(draw(any_array()))
    arrays.append(arr)
    code = struct_code(arr.dtype)
    ntype = draw(st.sampled_from(COUNT_TYPES))
    T = f"const {KIND_CTYPE[arr.dtype]} *"
    fn = nt.Function.from_library(lib, "nt_x_sum_n", SUMN.format(T=T, N=ntype))
    n = draw(st.sampled_from([nt.size(arr), nt.size(arr), arr.size, nt.ARG]))
    t = nt.bind(fn, arr, ord(code), n, engine=draw(st.sampled_from([None, "ffi"])))
    return Case(t, lambda t: [t.bindings[0].size] if t.bindings[2] is nt.ARG else [],
                lambda t: numpy_sum(t.bindings[0]), note=f"nt_x_sum_n {T} {ntype}")


@st.composite
def ref_cases(draw, lib):
    """A scalar by pointer: ref(value, ctype) of every C type, at its edges."""
    ctype = draw(st.sampled_from(sorted(KIND_CTYPE.values())))
    dt = {v: k for k, v in KIND_CTYPE.items()}[ctype]
    if dt.kind in "iu":
        lo, hi, _ = INT_EDGES[ctype]
        value = draw(st.sampled_from([lo, lo + 1, 0, 1, hi - 1, hi]))
    elif dt.kind == "b":
        value = draw(st.booleans())
    elif dt.kind == "f":
        big = FLT_MAX if dt.itemsize == 4 else DBL_MAX
        value = draw(st.sampled_from([0.0, -0.0, 1.5, -big, big, 1e-30]))
    else:
        value = complex(draw(st.sampled_from([0.0, 1.5, -2.25])),
                        draw(st.sampled_from([0.0, -0.5, 3.0])))
    r = nt.ref(value, ctype)
    code = struct_code(dt)
    fn = nt.Function.from_library(lib, "nt_x_sum", SUM2.format(T=f"const {ctype} *"))
    t = nt.bind(fn, r, ord(code), 1, 1, 0, 0)
    return Case(t, lambda t: [], lambda t: 0.0 + element_value(t.bindings[0][0]),  # a sum
                note=f"ref({value!r}, {ctype!r})")


@st.composite
def scalar_cases(draw, fixture_path):
    """A scalar by value at and near its type's edges, bound as an int, a
    NumPy scalar, an __index__ object, bytes (for a char), a bool."""
    ctype = draw(st.sampled_from(sorted(INT_EDGES) + ["bool", "float", "double",
                                                      "double complex"]))
    if ctype in INT_EDGES:
        lo, hi, name = INT_EDGES[ctype]
        v = draw(st.sampled_from([lo, lo + 1, -1 if lo else 0, 0, 1, hi - 1, hi]))
        forms = [int, Index, lambda x: np.dtype(ctype.replace("_t", "")).type(x)]
        if ctype in ("int8_t", "uint8_t"):
            forms.append(lambda x: bytes([x & 0xFF]))
        value = draw(st.sampled_from(forms))(v)
        want = v
    elif ctype == "bool":
        name, value = "f_B_B", draw(st.sampled_from([True, False, np.True_, 0, 1]))
        want = bool(value)
    elif ctype == "float":
        name = "f_f_f"
        value = draw(st.sampled_from([FLT_MAX, -FLT_MAX, 1e-45, -0.0, np.float32(1.5)]))
        want = float(np.float32(value))
    elif ctype == "double":
        name = "f_d_d"
        value = draw(st.sampled_from([DBL_MAX, -DBL_MAX, 5e-324, -0.0, np.float64(2.5)]))
        want = float(value)
    else:
        name = "f_d_D"
        value = draw(st.sampled_from([complex(1.5, -2.0), np.complex128(3 + 4j), 2.0]))
        want = complex(value).real + 10.0 * complex(value).imag
    sig = {"bool": "bool (bool v)", "float": "float (float v)", "double": "double (double v)",
           "double complex": "double (double complex v)"}.get(ctype, f"{ctype} ({ctype} v)")
    fn = nt.Function.from_library(fixture_path, name, sig)
    forwarded = draw(st.booleans())
    t = nt.bind(fn, nt.ARG if forwarded else value,
                engine=draw(st.sampled_from([None, *ENGINES])))
    return Case(t, lambda t: [value] if forwarded else [], lambda t: want,
                note=f"{ctype} {type(value).__name__} {value!r}")


@st.composite
def blas_cases(draw, fixture_path):
    """Fortran style: every scalar a ref(), x written in place, info back."""
    n = draw(st.integers(0, 4))
    inc = draw(st.integers(1, 2))
    x = np.arange(1.0, 2.0 + n * inc)
    alpha = draw(st.sampled_from([2.0, -0.5]))
    fn = nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS)
    t = nt.bind(fn, nt.ref(n, "int"), nt.ref(alpha, "double"), x, nt.ref(inc, "int"),
                nt.ref(-7, "int"))

    def expect(t):
        b = t.bindings
        xs = b[2].copy()
        xs[:n * inc:inc] *= alpha
        return (xs.tolist(), n)

    def run(t, args):
        t(*args)
        b = t.bindings
        return (b[2].tolist(), int(b[4][0]))

    case = Case(t, lambda t: [], expect, note=f"blas n={n} inc={inc}")
    case.run = run
    return case


@st.composite
def travel_cases(draw, lib, fixture_path):
    arrays = []
    makers = [lambda: sum_cases(lib, arrays), lambda: sum_cases(lib, arrays),
              lambda: count_cases(lib, arrays), lambda: ref_cases(lib),
              lambda: scalar_cases(fixture_path), lambda: blas_cases(fixture_path)]
    n = draw(st.integers(1, 3))
    return [draw(draw(st.sampled_from(makers))()) for _ in range(n)]


TRIPS = ["pickle", "pickle2", "oob-writable", "oob-read-only", "oob-misaligned",
         "oob-misaligned-writable", "copy", "deepcopy"]


def _trip(thunks, how):
    if how == "copy":
        return [copy.copy(t) for t in thunks]
    if how == "deepcopy":
        return copy.deepcopy(thunks)
    if how in ("pickle", "pickle2"):
        return pickle.loads(pickle.dumps(thunks, protocol=5 if how == "pickle" else 2))
    buffers = []
    data = pickle.dumps(thunks, protocol=5, buffer_callback=buffers.append)
    raw = [bytes(b.raw()) for b in buffers]
    given = {"oob-writable": [bytearray(r) for r in raw],
             "oob-read-only": raw,
             "oob-misaligned": [memoryview(b"\0" + r)[1:] for r in raw],
             "oob-misaligned-writable": [memoryview(bytearray(b"\0" + r))[1:] for r in raw],
             }[how]
    return pickle.loads(data, buffers=given)


DERIVED = type(nt.size(np.zeros(1)))
STRIDED_T = type(nt.strided(np.zeros(1)))


def _same_value(a, b):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, float) and a == 0.0:
        return b == 0.0 and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def _check_bindings(orig, copy_, how, seen):
    """Every binding's options read back: markers with their kind, axis and
    elements, on the array the pointer holds; scalars as they were."""
    for i, (a, b) in enumerate(zip(orig.bindings, copy_.bindings)):
        where = f"binding {i} after {how}: {a!r} -> {b!r}"
        if a is nt.ARG:
            assert b is nt.ARG, where
            continue
        assert type(b) is type(a), where
        if isinstance(a, DERIVED):
            assert (b.kind, b.axis, b.elements) == (a.kind, a.axis, a.elements), where
            a_obj, b_obj = a.obj, b.obj
        elif isinstance(a, STRIDED_T):
            a_obj, b_obj = a.obj, b.obj
        elif isinstance(a, nt.Address):
            assert how in ("copy", "deepcopy"), where
            assert b.value == a.value and b.owner is a.owner, where
            continue
        elif isinstance(a, np.ndarray):
            a_obj, b_obj = a, b
        elif isinstance(a, Index):
            assert b.v == a.v, where
            continue
        else:
            assert _same_value(a, b) and type(a) is type(b), where
            continue
        # the array behind it: the same values; one object per original
        assert b_obj.dtype == a_obj.dtype and b_obj.shape == a_obj.shape, where
        assert np.array_equal(b_obj, a_obj, equal_nan=True), where
        if how == "copy":
            assert b_obj is a_obj, where
        else:
            assert b_obj.flags.writeable and b_obj.flags.aligned, where
            assert not np.shares_memory(b_obj, a_obj), where
        twin = seen.setdefault(id(a_obj), b_obj)
        assert twin is b_obj, f"{where}: one array came back as two"


@settings(deadline=None)
@given(st.data(), st.sampled_from(TRIPS))
def test_generated_bindings_survive_every_trip(ntexport, fixture_path, data, how):
    lib = ntexport.__file__
    cases = data.draw(travel_cases(lib, fixture_path))
    thunks = [c.thunk for c in cases]
    event(f"{how}: " + ", ".join(c.note.split(" ")[0] for c in cases))
    if how not in ("copy", "deepcopy") and not all(c.picklable for c in cases):
        with pytest.raises(pickle.PicklingError, match=r"argument 1 \(p: .*\) is bound to a "
                                                       r"raw address"):
            _trip(thunks, how)
        return
    before = [getattr(c, "run", lambda t, a: t(*a))(c.thunk, c.call(c.thunk)) for c in cases]
    copies = _trip(thunks, how)
    seen = {}
    for c, t, u, b in zip(cases, thunks, copies, before):
        assert u is not t and u.address != t.address
        _check_bindings(t, u, how, seen)
        assert str(u.csig) == str(t.csig) and u.target_signature == t.target_signature
        assert u.nogil == t.nogil and u.target.name == t.target.name
        if t.engine == "libffi":
            assert u.engine == "libffi"
        want = c.expect(u)
        got = getattr(c, "run", lambda t, a: t(*a))(u, c.call(u))
        assert _same_value(got, want), (c.note, got, want)
        if not hasattr(c, "run"):               # (a BLAS call writes its inputs)
            assert _same_value(got, b), (c.note, got, b)

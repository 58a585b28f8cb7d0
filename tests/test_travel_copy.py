"""Thunks copied: copy.copy shares the bound objects, copy.deepcopy copies
arrays and refs and shares addresses and functions; out-of-band pickle
buffers (misaligned, read-only); the fields of a Function that travel
(names, the C text, one global), and a subclass's class and attributes."""

import copy
import ctypes
import ctypes.util
import pickle

import numpy as np
import pytest

import numthunk as nt

from travel import BLAS, FDDI, STRIDED, SUM, LabelledThunk

# ------------------------------------------------------------ copy


def cell_value(bound):
    """A ref()'s value as bound (the Ref, or the cell bind() made of it)."""
    return np.ravel(getattr(bound, "cell", bound))[0].item()


def test_copy_shares_the_bound_objects(fixture_path):
    a = np.array([1.0, 2.0])
    r = nt.ref(0, "int")
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    t = nt.bind(fn, a, nt.size(a))
    c = copy.copy(t)
    assert c is not t and c.address != t.address and c.target is fn
    assert c.bindings[0] is a
    a[0] = 10.0
    assert c() == t() == 12.0                   # live on the same array
    blas = nt.bind(nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS),
                   nt.ref(1, "int"), nt.ref(2.0, "double"), a, nt.ref(1, "int"), r)
    copy.copy(blas)()
    assert r.value == 1 and a[0] == 20.0
    assert copy.copy(fn) is fn and copy.deepcopy(fn) is fn


def test_deepcopy_copies_arrays_and_refs(fixture_path):
    a = np.array([1.0, 2.0, 3.0, 4.0])
    info = nt.ref(0, "int")
    blas = nt.bind(nt.Function.from_library(fixture_path, "f_v_ppppp", BLAS),
                   nt.ref(4, "int"), nt.ref(2.0, "double"), a, nt.ref(1, "int"), info)
    d = copy.deepcopy(blas)
    d()
    assert cell_value(d.bindings[4]) == 4 and info.value == 0
    assert d.bindings[2].tolist() == [2.0, 4.0, 6.0, 8.0] and a.tolist() == [1.0, 2.0, 3.0, 4.0]
    view = np.arange(30.0).reshape(5, 6)[::2, 1::2]
    st = nt.bind(nt.Function.from_library(fixture_path, "f_d_pzzzz", STRIDED),
                 nt.strided(view), nt.shape(view, 0), nt.shape(view, 1),
                 nt.stride(view, 0), nt.stride(view, 1))
    d = copy.deepcopy(st)
    assert d() == st()
    assert all(b.obj is d.bindings[0].obj for b in d.bindings[1:])
    assert d.bindings[0].obj is not view


def test_deepcopy_shares_addresses_and_functions(fixture_path):
    import travel_kernels as k

    a = np.ones(3)
    ad = nt.address(a.ctypes.data, owner=a)
    t = nt.bind(nt.Function.from_library(fixture_path, "f_d_pi", SUM), ad, 3)
    d = copy.deepcopy(t)
    assert d.bindings[0] is ad and d() == 3.0
    fddi = nt.Function.from_library(fixture_path, "f_d_Fddi", FDDI)
    q = np.array([1.0, 0.0, 0.0, 0.0])
    inner = nt.bind(k.damped, nt.ARG, q, nt.size(q))
    for value in (k.square, inner):
        t = nt.bind(fddi, value, 0.0, 1.0, 100)
        d = copy.deepcopy(t)
        assert d() == t()
        bound = getattr(d.bindings[0], "owner", d.bindings[0])     # address() made by bind
        if value is inner:                      # a bound thunk is copied with its arrays
            assert isinstance(bound, nt.Thunk) and bound is not inner
            q[0] = 2.0
            assert d() != t()
        else:
            assert bound is k.square
    assert copy.deepcopy(ad) is not ad and copy.deepcopy(ad).owner is a


def test_out_of_band_buffers_misaligned_and_read_only(fixture_path):
    """Protocol 5 with out-of-band buffers, as Dask sends arrays: each buffer
    arrives as a read-only view of a received frame, at any alignment. The
    unpickled thunk binds an aligned, writeable copy, one per array."""
    import travel_kernels as k

    p = np.array([1.5, 0.3, 2.0, -0.2])
    a = np.arange(30.0).reshape(5, 6)           # contiguous: out of band
    thunks = [nt.bind(k.damped, nt.ARG, p, nt.size(p)),
              nt.bind(nt.Function.from_library(fixture_path, "f_d_pzzzz", STRIDED),
                      nt.strided(a), nt.shape(a, 0), nt.shape(a, 1),
                      nt.stride(a, 0), nt.stride(a, 1))]
    buffers = []
    data = pickle.dumps(thunks, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 2
    frames = [bytes(1) + bytes(b.raw()) for b in buffers]      # off by one byte
    received = [memoryview(f)[1:] for f in frames]
    u = pickle.loads(data, buffers=received)
    assert u[0](0.7) == thunks[0](0.7)
    assert u[1]() == thunks[1]()
    arr = u[0].bindings[1]
    assert arr.flags.aligned and arr.flags.writeable and arr is u[0].bindings[2].obj
    assert all(b.obj is u[1].bindings[0].obj for b in u[1].bindings[1:])
    arr[0] = 0.0                                 # live on its own copy
    assert u[0](0.7) == -0.2 * 0.7
    # aligned, writeable buffers (bytearrays): bound as they come, no copy
    frames = [bytearray(b.raw()) for b in buffers]
    u = pickle.loads(data, buffers=frames)
    arr = u[0].bindings[1]
    assert np.shares_memory(arr, np.frombuffer(frames[0], dtype=np.uint8))
    assert np.shares_memory(u[1].bindings[0].obj, np.frombuffer(frames[1], dtype=np.uint8))
    frames[0][:8] = np.float64(0.0).tobytes()
    assert u[0](0.7) == -0.2 * 0.7 and u[1]() == thunks[1]()
    # aligned but read-only (bytes), or writeable but misaligned: copied
    for frames in ([bytes(b.raw()) for b in buffers],
                   [memoryview(bytearray(1) + bytearray(b.raw()))[1:] for b in buffers]):
        u = pickle.loads(data, buffers=frames)
        arr = u[0].bindings[1]
        assert arr.flags.aligned and arr.flags.writeable and arr is u[0].bindings[2].obj
        assert not np.shares_memory(arr, np.frombuffer(frames[0], dtype=np.uint8))
        assert u[0](0.7) == thunks[0](0.7) and u[1]() == thunks[1]()


def test_function_fields_travel(lib):
    """Parameter names (function-pointer ones too), nogil, name and fixed
    values, arrays among them, come back as they were."""
    fddi = nt.Function(ctypes.cast(lib.f_d_Fddi, ctypes.c_void_p).value, FDDI, owner=lib,
                       name="f_d_Fddi", nogil=False)
    u = pickle.loads(pickle.dumps(fddi))
    assert u.signature.names == ("f", "a", "b", "n") and u.signature == fddi.signature
    assert u.nogil is False and u.name == "f_d_Fddi" and u.address == fddi.address
    assert type(u.owner) is ctypes.CDLL and u.owner._name == lib._name   # keeps it loaded
    pt = nt.Function(fddi.address, "double (const struct pt *p)", owner=lib, name="f_d_Fddi",
                     structs={"pt": 16})
    u = pickle.loads(pickle.dumps(pt))
    assert u.structs == pt.structs == {"pt": 16} and u.signature == pt.signature
    a = np.array([1.0, 2.0, 3.0])
    fixed = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value, SUM, owner=lib,
                        name="f_d_pi", fixed={0: a, 1: nt.size(a)})
    u = pickle.loads(pickle.dumps(fixed))
    assert u() == 6.0 and u.fixed[0] is u.fixed[1].obj and u.fixed[0] is not a


@pytest.mark.parametrize("text", [
    "double (double (*const f)(double), int n)",
    "double (double (*f)(double (*)(int)), int n)",
    "double (double (*const f)(double (*const)(int)), int n)",
    "void (const double *const p, double (*const)(double), int last)",
    "void (int, double (*g)(double), const struct pt *const q)",
])
def test_parameter_names_travel_beside_any_function_pointer(lib, text):
    """Every name comes back, beside function pointers that are const,
    that take function pointers, or that have no name of their own."""
    sig = nt.Signature(text)
    fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, sig, owner=lib,
                     name="f_d_d")
    u = pickle.loads(pickle.dumps(fn))
    assert u.signature == sig and u.signature.names == sig.names
    assert str(u.signature) == str(sig)


def test_the_cache_of_signature_texts_is_bounded(lib):
    """Named signature texts are remembered for 1024 signatures, no more."""
    nt._recipe._sig_texts.clear()
    addr = ctypes.cast(lib.f_d_d, ctypes.c_void_p).value
    for k in range(1100):
        fn = nt.Function(addr, f"double (double x{k})", owner=lib, name="f_d_d")
        u = pickle.loads(pickle.dumps(fn))
        assert u.signature.names == (f"x{k}",)
        assert len(nt._recipe._sig_texts) == min(k + 1, 1024)


def test_a_function_pickle_names_one_global_and_carries_c_text(lib):
    """The signature travels as C text, with its parameter names when it
    has them: the one class or function a Function's pickle names is the
    rebuilding function (no numthunk class the other side must import)."""
    import pickletools

    for text in ("double (const double *, int)", SUM):
        fn = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value, text, owner=lib,
                         name="f_d_pi")
        data = pickle.dumps(fn)
        ops = list(pickletools.genops(data))
        strings = [arg for op, arg, _ in ops if op.name.endswith("UNICODE")]
        globals_ = [op for op, _, _ in ops if "GLOBAL" in op.name]
        assert len(globals_) == 1 and strings[:2] == ["numthunk._recipe", "_function_from_recipe"]
        carried = fn.__reduce__()[1][1]
        assert type(carried) is str and carried in strings
        again = nt.Signature(carried)
        assert again == fn.signature and again.names == fn.signature.names
        u = pickle.loads(data)
        assert u.signature == fn.signature and u.signature.names == fn.signature.names


def test_arg_is_one_object_everywhere():
    assert pickle.loads(pickle.dumps(nt.ARG)) is nt.ARG
    assert copy.copy(nt.ARG) is nt.ARG and copy.deepcopy(nt.ARG) is nt.ARG


def test_a_subclass_keeps_its_class_and_attributes(fixture_path):
    fn = nt.Function.from_library(fixture_path, "f_d_pi", SUM)
    a = np.arange(4.0)
    t = LabelledThunk(fn.signature, fn.address, (a, nt.size(a)), fn)
    t.label = ["four"]
    shallow, deep, pickled = copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))
    for c in (shallow, deep, pickled):
        assert type(c) is LabelledThunk and c is not t
        assert c.label == ["four"] and c() == 6.0
    assert shallow.bindings[0] is a and shallow.label is t.label
    assert deep.bindings[0] is not a and deep.label is not t.label

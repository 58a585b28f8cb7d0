"""Behaviour the other files did not pin down: each test here fails under a
realistic one-line bug of the core (see tools/mutate.py)."""

import ctypes
import gc
import weakref

import numpy as np
import pytest

import numthunk as nt

BACKEND = {"native": "native-x86_64-sysv", "ffi": "libffi"}


@pytest.fixture(params=sorted(BACKEND))
def engine(request):
    return request.param


def test_release_inside_the_target_keeps_bound_values_until_it_returns(engine):
    # A call from Python is in flight from before its arguments are
    # converted until it returns: a release() from inside the target is
    # deferred, and the values the thunk holds stay alive while the target
    # still reads them.
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int)
    box = {}

    def body(p, n):
        box["t"].release()
        gc.collect()
        box["alive_inside"] = box["ref"]() is not None
        box["released_inside"] = box["t"].released
        return sum(p[i] for i in range(n))

    cb = proto(body)
    a = np.arange(1.0, 5.0)
    box["ref"] = weakref.ref(a)
    t = box["t"] = nt.bind(cb, a, nt.ARG, engine=engine)
    assert t.backend == BACKEND[engine]
    del a
    assert t(4) == 10.0
    assert box["alive_inside"], "release() inside the call dropped the bound array"
    assert box["released_inside"] and t.released
    gc.collect()
    assert box["ref"]() is None         # given back once the call returned


def test_address_keeps_its_owner_alive_while_bound(engine, cfn):
    # address(n, owner) holds owner: the memory n points into stays valid
    # while the address, or a thunk bound to it, exists.
    buf = np.arange(3.0)
    ref = weakref.ref(buf)
    addr = nt.address(buf.ctypes.data, owner=buf)
    assert addr.owner is buf
    t = nt.bind(cfn("f_d_pi", "double (const double *x, int n)"), addr, nt.ARG,
                engine=engine)
    del buf, addr
    gc.collect()
    assert ref() is not None, "the address did not keep its owner"
    assert t(3) == 3.0
    t.release()
    del t
    gc.collect()
    assert ref() is None


class _CAPI(ctypes.Structure):
    # the head of numthunk_CAPI (numthunk/include/numthunk/capi.h)
    _fields_ = [("version", ctypes.c_uint), ("size", ctypes.c_uint),
                ("signature", ctypes.c_void_p), ("create", ctypes.c_void_p)]


@pytest.mark.parametrize("engine_flag", [0x2, 0x4])
def test_capi_needs_gil_flag_keeps_the_gil_for_the_target(engine_flag):
    # numthunk_create(..., NUMTHUNK_NEEDS_GIL): a call from Python keeps the
    # GIL for the target; without the flag the call releases it. The target
    # is CPython's own PyGILState_Check, which says which.
    get = ctypes.pythonapi["PyCapsule_GetPointer"]   # private: its argtypes are ours alone
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    api = _CAPI.from_address(get(nt._core._C_API, b"numthunk._core._C_API"))
    create = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_ssize_t, ctypes.py_object,
                               ctypes.c_uint)(api.create)
    sig = nt._core.Signature("int (void)")
    target = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    with_gil = create(sig, target, None, 0, None, 0x1 | engine_flag)
    without = create(sig, target, None, 0, None, engine_flag)
    assert with_gil() == 1, "NUMTHUNK_NEEDS_GIL: the target ran without the GIL"
    assert without() == 0

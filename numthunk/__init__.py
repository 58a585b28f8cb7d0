"""numthunk: C function pointers that already know some of their arguments.

``numthunk.bind(target, *args)`` turns a C function (a Numba ``@cfunc``, a
ctypes or cffi function, a capsule, a Cython ``cdef api`` function or a bare
address with its signature) plus NumPy arrays and scalars into a new C
function pointer (``.address``) with every dtype and integer width checked,
live bindings, and the cost of a direct call.

``import numthunk`` needs only NumPy; Numba, SciPy, Cython and cffi are
imported when an object of theirs is used.
"""

from . import _core
from ._api import (
    ARG, Address, Function, Ref, Thunk, address, bind, ref, shape, size, stride, strided,
)
from ._signature import Signature
from ._cython import unpack
from . import _recipe

backend_info = _core.backend_info

__version__ = "0.1.0"

__all__ = [
    "ARG", "Address", "Function", "Ref", "Signature", "Thunk", "address", "backend_info",
    "bind", "cython", "get_include", "ref", "shape", "size", "stride", "strided", "unpack",
]


def cython(module, name, **options):
    """A target from a Cython module's ``__pyx_capi__`` (see numthunk._cython)."""
    from ._cython import cython_function
    # the call is recorded on the Function: another process repeats it
    return _recipe.remember_cython(cython_function(module, name, **options), module, name,
                                   options)


def get_include():
    """The directory of numthunk's C headers: ``numthunk/dlpack.h`` (DLTensor
    and inline helpers for kernels), ``numthunk/capi.h`` (the C API), and the
    ``.pxd`` files for Cython. Pass it to the compiler with ``-I``."""
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")

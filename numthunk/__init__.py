"""numthunk: C function pointers that already know some of their arguments.

``numthunk.bind(target, *args)`` turns a C function (a Numba ``@cfunc``, a
ctypes or cffi function, a capsule, a Cython ``cdef api`` function or a bare
address with its signature) plus NumPy arrays and scalars into a new C
function pointer (``.address``) with every dtype and integer width checked,
live bindings, and the cost of a direct call.

``import numthunk`` needs only NumPy; Numba, SciPy, Cython and cffi are
imported when an object of theirs is used.
"""

from . import _core, _recipe
from ._api import (
    ARG,
    Address,
    Function,
    Ref,
    Thunk,
    address,
    bind,
    ref,
    shape,
    size,
    stride,
    strided,
    unpack,
)
from ._signature import Signature

engine_info = _core.engine_info

__version__ = "0.1.0"

__all__ = [
    "ARG", "Address", "Function", "Ref", "Signature", "Thunk", "address", "bind",
    "cython", "engine_info", "get_include", "ref", "shape", "size", "stride", "strided", "unpack",
]


def cython(module, name, **options):
    """A :class:`Function` for ``module.__pyx_capi__[name]``: a ``cdef api``
    function, or a ``cdef``/``cpdef`` function declared in the module's
    ``.pxd``; its signature is read from the capsule, with Cython's mangled
    typedefs resolved.

    ``module``: the module or its dotted name. Options: ``typedefs``
    (``{name: C type}`` for typedef names numthunk cannot find),
    ``memoryviews`` (``{index: 'const double[:, ::1]'}`` for each typed
    memoryview parameter), ``nogil`` (``True`` only for functions declared
    ``nogil``: otherwise calls from Python hold the GIL and re-raise an
    exception the function left set), ``fused`` (a fused function's
    specialisation: an index such as ``1`` or ``(2, 0)``, parameter types
    such as ``("double",)``, or a whole signature). A ``cpdef``'s hidden
    ``__pyx_skip_dispatch`` parameter is bound to 0. See docs/cython.md.

    >>> gammainc = nt.cython("scipy.special.cython_special", "gammainc")
    >>> gammainc.csig
    Signature('double (double, double)')
    >>> g = nt.bind(gammainc, 1.0, nt.ARG)
    >>> import math
    >>> abs(g(2.0) - (1 - math.exp(-2.0))) < 1e-12       # regularised: 1 - e^-x
    True
    >>> nt.cython("scipy.special.cython_special", "gamma", fused=("double",))(5.0)
    24.0
    """
    # the call is recorded on the Function: another process repeats it
    return _recipe.cython(module, name, options)


def get_include():
    """The directory of numthunk's C headers, ``numthunk/dlpack.h`` (DLTensor
    and inline helpers for kernels) and ``numthunk/capi.h`` (the C API):
    pass it to the C compiler with ``-I``. Cython's ``.pxd`` files
    (``numthunk/capi.pxd``, ``numthunk/dlpack.pxd``) are not there: Cython
    finds them in the directory that holds the ``numthunk`` package (see
    docs/cython.md, "Building against the C API").

    >>> import os
    >>> sorted(os.listdir(os.path.join(nt.get_include(), "numthunk")))
    ['capi.h', 'dlpack.h']
    """
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def backend_info():
    """Deprecated: the old name of :func:`engine_info`, which it returns;
    warns (``DeprecationWarning``). Removed in the next release."""
    import warnings
    warnings.warn("numthunk.backend_info() is deprecated: use numthunk.engine_info() "
                  "(the same dict)", DeprecationWarning, stacklevel=2)
    return engine_info()


def _warn_old_engine_variable():
    # the core read NUMTHUNK_BACKEND, the old name of NUMTHUNK_ENGINE (unset);
    # the environment, not engine_info(), whose memory policy would start now
    import os
    if not os.environ.get("NUMTHUNK_ENGINE") and os.environ.get("NUMTHUNK_BACKEND"):
        import warnings
        warnings.warn("NUMTHUNK_BACKEND is deprecated: set NUMTHUNK_ENGINE instead "
                      "(the same values)", DeprecationWarning, stacklevel=3)

_warn_old_engine_variable()

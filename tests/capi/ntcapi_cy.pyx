# cython: language_level=3
"""A Cython module that uses numthunk's C API and DLPack header: kernels
taking `const DLTensor *`, thunks made with numthunk_create, called through
their addresses; and a `cdef api` kernel that numthunk.cython() binds."""

from cpython.object cimport PyObject
from libc.math cimport NAN
from libc.stdint cimport int64_t

from numthunk cimport capi
from numthunk.dlpack cimport (DLTensor, kDLFloat, nt_dl_dtype_is, nt_dl_next, nt_dl_numel,
                              nt_dl_ptr)

capi.numthunk_import_capi()

cdef object SUM_SIG = capi.numthunk_signature(b"double (const DLTensor *t)")
cdef object POLY_SIG = capi.numthunk_signature(b"double (double x, const DLTensor *c)")


cdef double cy_sum(const DLTensor *t) noexcept nogil:
    cdef int64_t index[32]
    cdef double s = 0.0
    cdef int d
    if not nt_dl_dtype_is(t, kDLFloat, 64) or t.ndim > 32:
        return NAN
    if nt_dl_numel(t) == 0:
        return 0.0
    for d in range(t.ndim):
        index[d] = 0
    while True:
        s += (<double *>nt_dl_ptr(t, index))[0]
        if not nt_dl_next(t, index):
            break
    return s


cdef api double cy_poly(double x, const DLTensor *c) noexcept nogil:
    """c[0] + c[1] x + ... for a 1-D float64 descriptor."""
    cdef double r = 0.0
    cdef int64_t k
    if not nt_dl_dtype_is(c, kDLFloat, 64) or c.ndim != 1:
        return NAN
    k = c.shape[0] - 1
    while k >= 0:
        r = r * x + (<double *>nt_dl_ptr(c, &k))[0]
        k -= 1
    return r


def make_sum(arr):
    """A thunk of double (void) summing arr (any float64 layout)."""
    cdef PyObject *values[1]
    values[0] = <PyObject *>arr
    return capi.numthunk_create(SUM_SIG, <void *>cy_sum, values, 1, NULL, 0)


def make_poly(coef, unsigned int flags=0):
    """A thunk of double (double): x forwarded, the coefficients bound."""
    cdef PyObject *values[2]
    values[0] = NULL
    values[1] = <PyObject *>coef
    return capi.numthunk_create(POLY_SIG, <void *>cy_poly, values, 2, NULL, flags)


def call0(thunk):
    cdef double (*f)() noexcept nogil
    cdef double r
    f = <double (*)() noexcept nogil>capi.numthunk_address(thunk)
    with nogil:
        r = f()
    return r


def call1(thunk, double x):
    cdef double (*f)(double) noexcept nogil
    f = <double (*)(double) noexcept nogil>capi.numthunk_address(thunk)
    return f(x)


def rebind(thunk, Py_ssize_t i, value):
    capi.numthunk_rebind(thunk, i, value)


def release(thunk):
    capi.numthunk_release(thunk)


def is_thunk(obj):
    return capi.numthunk_check(obj)


def dltensor_shape(obj):
    """(ndim, shape, strides) of the DLTensor numthunk builds for obj."""
    cdef DLTensor *t
    keep = capi.numthunk_dltensor(obj, 0, &t)
    return t.ndim, tuple(t.shape[d] for d in range(t.ndim)), \
        tuple(t.strides[d] for d in range(t.ndim))

# cython: language_level=3
"""Pointer kernels with NumPy and package typedefs, and a Fortran-style one."""
cimport numpy as cnp

ctypedef cnp.intp_t SIZE
ctypedef SIZE COUNT

cdef api cnp.float64_t dot(const cnp.float64_t *x, const cnp.float64_t *y,
                           cnp.intp_t n) noexcept nogil:
    cdef cnp.float64_t s = 0
    cdef cnp.intp_t i
    for i in range(n):
        s += x[i] * y[i]
    return s

cdef REAL wsum(const REAL *x, const weight_t *w, index_t n) noexcept nogil:
    cdef REAL s = 0
    cdef index_t i
    for i in range(n):
        s += x[i] * w[i]
    return s

cdef api COUNT count_above(const cnp.float32_t *x, COUNT n, cnp.float32_t t) noexcept nogil:
    cdef COUNT i, c = 0
    for i in range(n):
        if x[i] > t:
            c += 1
    return c

cdef cnp.complex128_t csum(const cnp.complex128_t *x, cnp.intp_t n) noexcept nogil:
    cdef cnp.complex128_t s = 0
    cdef cnp.intp_t i
    for i in range(n):
        s += x[i]
    return s

cdef api void axpy_f(char *trans, int *n, REAL *alpha, REAL *x, int *incx,
                     REAL *y, int *incy, int *info) noexcept nogil:
    """Fortran style: every scalar by pointer. y += alpha*x ('N') or
    y -= alpha*x ('M'); info = 0, or -k for a bad argument k."""
    cdef int i
    cdef REAL sign
    if trans[0] == b'N':
        sign = 1
    elif trans[0] == b'M':
        sign = -1
    else:
        info[0] = -1
        return
    if n[0] < 0:
        info[0] = -2
        return
    for i in range(n[0]):
        y[i * incy[0]] += sign * alpha[0] * x[i * incx[0]]
    info[0] = 0

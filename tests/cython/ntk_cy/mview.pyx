# cython: language_level=3
# cython: boundscheck=False, wraparound=False
"""Typed-memoryview kernels: they index and slice rows in nogil code."""
cimport numpy as cnp
from ntk_cy.types cimport REAL

cdef api double sum1d(double[:] x) noexcept nogil:
    cdef double s = 0
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        s += x[i]
    return s

cdef api double sum1d_c(const double[::1] x) noexcept nogil:
    cdef double s = 0
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        s += x[i]
    return s

cdef api void rowsums(const double[:, ::1] a, double[::1] out) noexcept nogil:
    cdef const double[::1] row
    cdef Py_ssize_t i, j
    cdef double s
    for i in range(a.shape[0]):
        row = a[i]
        s = 0
        for j in range(row.shape[0]):
            s += row[j]
        out[i] = s

cdef api void rowsums_strided(REAL[:, :] a, REAL[:] out, REAL scale) noexcept nogil:
    cdef REAL[:] row
    cdef Py_ssize_t i, j
    cdef REAL s
    for i in range(a.shape[0]):
        row = a[i, :]
        s = 0
        for j in range(row.shape[0]):
            s += row[j]
        out[i] = scale * s

cdef api cnp.int64_t count_pos(const cnp.int64_t[:] x, Py_ssize_t start) noexcept nogil:
    cdef const cnp.int64_t[:] tail = x[start:]
    cdef cnp.int64_t c = 0
    cdef Py_ssize_t i
    for i in range(tail.shape[0]):
        if tail[i] > 0:
            c += 1
    return c

cdef double _sum_strided(const double[:] x) noexcept nogil:
    cdef double s = 0
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        s += x[i]
    return s

cdef api double every_other(const double[:] x) noexcept nogil:
    # a strided sub-slice, handed on to another cdef function
    return _sum_strided(x[::2])

cdef api double transposed_corner(double[:, :] a) noexcept nogil:
    # .T reads the memview object, which a slice built by numthunk does not
    # have: tests call this only in a child process, to show the crash.
    cdef double[:, :] t = a.T
    return t[0, t.shape[1] - 1]

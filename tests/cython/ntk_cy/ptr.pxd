cimport numpy as cnp
from ntk_cy.types cimport REAL, index_t, weight_t

# Declared in the .pxd (exported like scipy's cython_blas) rather than
# 'cdef api', which refuses typedefs of plain C types such as index_t.
cdef REAL wsum(const REAL *x, const weight_t *w, index_t n) noexcept nogil
cdef cnp.complex128_t csum(const cnp.complex128_t *x, cnp.intp_t n) noexcept nogil

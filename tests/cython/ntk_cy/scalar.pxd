ctypedef fused real:
    float
    double

# Declared here, so exported in __pyx_capi__ like cdef api functions.
cpdef double hypot2(double x, double y) noexcept nogil
cpdef real twice(real x) noexcept nogil
cdef real scaled_sum(double k, const real[::1] x) noexcept nogil
cdef double with_default(double x, double y=*) noexcept nogil

ctypedef double (*unary_t)(double) noexcept nogil
cdef double apply_t(unary_t f, double x) noexcept nogil

cdef extern from *:
    """
    typedef double ntk_real_t;
    """
    ctypedef double real_c "ntk_real_t"

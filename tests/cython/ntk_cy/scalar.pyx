# cython: language_level=3
"""Scalar kernels: builtin C types in Cython's capsule spelling."""

cdef int _bumps = 0

cdef api double add(double a, double b) noexcept nogil:
    return a + b

cdef api long long mul_ll(long long a, long long b) noexcept nogil:
    return a * b

cdef api unsigned long long umax(unsigned long long a, unsigned long long b) noexcept nogil:
    return a if a > b else b

cdef api bint is_pos(double x) noexcept nogil:
    return x > 0

cdef api double complex cmul(double complex a, double complex b) noexcept nogil:
    return a * b

cdef api float complex cscale_f(float complex a, float s) noexcept nogil:
    return a * s

cdef api void bump() noexcept nogil:
    global _bumps
    _bumps += 1

cdef api int bumps() noexcept nogil:
    return _bumps

cdef api double checked_sqrt(double x) except? -1.0:
    # Needs the GIL to raise; not noexcept, so the exception propagates.
    if x < 0:
        raise ValueError(f"checked_sqrt: negative input {x}")
    return x ** 0.5

cdef api double sum_const(const double *x, int n) noexcept nogil:
    cdef double s = 0
    cdef int i
    for i in range(n):
        s += x[i]
    return s

cdef api void fill(double * const x, Py_ssize_t n, double v) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        x[i] = v

cdef api double apply_twice(double (*f)(double) noexcept nogil, double x) noexcept nogil:
    return f(f(x))

cdef api double square(double x) noexcept nogil:
    return x * x

cdef double with_default(double x, double y=2.0) noexcept nogil:
    return x * y

cpdef double hypot2(double x, double y) noexcept nogil:
    return x * x + y * y

cpdef real twice(real x) noexcept nogil:
    return 2 * x

cdef real scaled_sum(double k, const real[::1] x) noexcept nogil:
    # a fused memoryview after a parameter of a plain type
    cdef real s = 0
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        s += x[i]
    return <real>(k * s)

cdef double apply_t(unary_t f, double x) noexcept nogil:
    return f(x) + 1

cdef api real_c half(real_c x) noexcept nogil:
    return x / 2

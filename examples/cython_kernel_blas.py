"""SciPy's Cython BLAS and LAPACK kernels as thunks, from Python and @njit.

scipy.linalg.cython_blas / cython_lapack export Fortran-style functions in
their __pyx_capi__: every scalar by pointer. numthunk.cython reads the
capsule, resolves the module's typedefs (``d`` is ``double``) from its .pxd,
and numthunk.ref holds the by-reference scalars.

    python examples/cython_kernel_blas.py
"""

import numba
import numpy as np
from scipy.linalg import cython_blas, cython_lapack

import numthunk as nt

ddot = nt.cython(cython_blas, "ddot")
print(ddot)                      # double (int *, double *, int *, double *, int *)

x = np.linspace(0.0, 1.0, 1000)
y = np.cos(x)
one = nt.ref(1, "int")
dot_xy = nt.bind(ddot, nt.ref(x.size, "int"), x, one, y, one)   # double (void)


@numba.njit
def mean_of_calls(f, calls):
    acc = 0.0
    for _ in range(calls):
        acc += f()               # a direct call through the thunk's address
    return acc / calls


print("ddot:", dot_xy(), "numpy:", x @ y)
assert np.isclose(dot_xy(), x @ y)
y[:] = np.sin(x)                 # bindings are live: the next call sees it
print("after y = sin(x), from @njit:", mean_of_calls(dot_xy, 40), "numpy:", x @ y)
assert np.isclose(mean_of_calls(dot_xy, 40), x @ y)

# LAPACK: solve A z = b in place; info is read back after the call.
rng = np.random.default_rng(1)
a = np.asfortranarray(rng.normal(size=(5, 5)) + 5 * np.eye(5))
b = rng.normal(size=5)
z, ipiv, info = b.copy(), np.zeros(5, dtype=np.intc), nt.ref(-1, "int")
n = nt.ref(5, "int")
solve = nt.bind(nt.cython(cython_lapack, "dgesv"), n, nt.ref(1, "int"),
                nt.strided(a.copy(order="F")), n, ipiv, z, n, info)
solve()
print("dgesv info:", info.value, "max error:", np.abs(z - np.linalg.solve(a, b)).max())
assert info.value == 0 and np.allclose(z, np.linalg.solve(a, b))

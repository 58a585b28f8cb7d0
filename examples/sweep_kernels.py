"""The kernel and the task of examples/dask_sweep.py, in a module of their
own: a thunk travels as a recipe, and the recipe of a Numba @cfunc is its
module and name, so each worker must be able to import this module.

    python examples/sweep_kernels.py       # the integrand at a few points
"""

import math

from numba import carray, cfunc
from numba.types import CPointer, float64, intc
from scipy import integrate


@cfunc(float64(float64, CPointer(float64), intc))
def damped(x, p, n):
    """A damped oscillation with drift: p[0] exp(-p[1] x) cos(p[2] x) + p[3] x."""
    c = carray(p, n)
    return c[0] * math.exp(-c[1] * x) * math.cos(c[2] * x) + c[3] * x


@cfunc(float64(float64, CPointer(float64), intc))
def series(x, p, n):
    """A heavier integrand: sum over k < p[4] of p[0] exp(-p[1] k x) cos(p[2] k x) / k^2,
    plus p[3] x."""
    c = carray(p, n)
    s = 0.0
    for k in range(1, int(c[4]) + 1):
        s += c[0] * math.exp(-c[1] * k * x) * math.cos(c[2] * k * x) / (k * k)
    return s + c[3] * x


def integrate_all(thunks, a=0.0, b=5.0):
    """A worker's task: integrate each ``double (double)`` thunk over [a, b]."""
    return [integrate.quad(t.lowlevelcallable(), a, b, limit=200)[0] for t in thunks]


if __name__ == "__main__":
    import numpy as np

    import numthunk as nt

    p = np.array([1.0, 0.5, 3.0, 0.1])
    f = nt.bind(damped, nt.ARG, p, nt.size(p))
    for x in (0.0, 1.0, 2.0):
        print(f"f({x}) = {f(x):.6f}")
    assert f(0.0) == 1.0

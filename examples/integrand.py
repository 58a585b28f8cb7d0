"""A parameterised integrand: one compiled kernel, many parameter sets.

The kernel takes the point and the parameters, ``double f(double x, const
double *p, int n)`` (here the polynomial p[0] + p[1] x + p[2] x^2 + ...).
Binding a parameter array gives a ``double (double)`` function for each
parameter set, without compiling anything: SciPy's ``quad`` calls it as a
LowLevelCallable (no Python per evaluation), and @njit code takes it as
an argument.

    python examples/integrand.py
"""

import numpy as np
from numba import carray, cfunc, njit
from numba.types import CPointer, float64, intc
from scipy import integrate

import numthunk as nt


@cfunc(float64(float64, CPointer(float64), intc))
def poly(x, p, n):
    c = carray(p, n)
    s = 0.0
    for i in range(n - 1, -1, -1):
        s = s * x + c[i]
    return s


@njit
def midpoint(f, a, b, n):
    """Integrate any ``double (double)`` function value over [a, b]."""
    h = (b - a) / n
    s = 0.0
    for i in range(n):
        s += f(a + (i + 0.5) * h)
    return s * h


def exact(p, a, b):
    return sum(c * (b ** (k + 1) - a ** (k + 1)) / (k + 1) for k, c in enumerate(p))


def main():
    a, b = 0.0, 2.0
    for p in ([1.0, 0.0, 3.0], [0.5, -1.0], [2.0, 0.0, 0.0, 1.0]):
        params = np.array(p)
        f = nt.bind(poly, nt.ARG, params, nt.size(params))    # double (double)
        q, _ = integrate.quad(f.lowlevelcallable(), a, b)
        m = midpoint(f, a, b, 20_000)
        print(f"p = {p}: quad {q:.10f}, @njit midpoint {m:.10f}, exact {exact(p, a, b):.10f}")
        assert abs(q - exact(p, a, b)) < 1e-10
        assert abs(m - exact(p, a, b)) < 1e-6
    # every thunk had the same signature: the consumer was compiled once
    assert len(midpoint.signatures) == 1

    # live parameters: change them in place, the same function follows
    params = np.array([1.0, 1.0])
    f = nt.bind(poly, nt.ARG, params, nt.size(params))
    before = integrate.quad(f.lowlevelcallable(), a, b)[0]
    params[1] = 0.0
    after = integrate.quad(f.lowlevelcallable(), a, b)[0]
    print(f"live parameters: {before:.6f} -> {after:.6f}")
    assert abs(before - 4.0) < 1e-12 and abs(after - 2.0) < 1e-12


if __name__ == "__main__":
    main()

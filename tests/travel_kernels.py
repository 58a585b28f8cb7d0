"""Kernels and tasks for the tests of thunks that travel to other processes.

Importable by name (tests/ is on the workers' path): a Numba @cfunc travels
as its module and qualified name, and worker processes import this module
to find it again, as they import the task functions.
"""

import math
import os

import numpy as np
from numba import carray, cfunc
from numba.types import CPointer, float64, intc
from scipy import integrate


@cfunc(float64(float64, CPointer(float64), intc))
def damped(x, p, n):
    """p[0] exp(-p[1] x) cos(p[2] x) + p[3] x (n == 4)."""
    c = carray(p, n)
    return c[0] * math.exp(-c[1] * x) * math.cos(c[2] * x) + c[3] * x


@cfunc(float64(float64))
def square(x):
    return x * x


class Namespace:
    """A @cfunc reached through a qualified name (Namespace.cube)."""

    @cfunc(float64(float64))
    def cube(x):
        return x * x * x


def parameter_sets(n, seed=11):
    rng = np.random.default_rng(seed)
    return rng.uniform([0.5, 0.1, 0.5, -1.0], [2.0, 1.5, 6.0, 1.0], size=(n, 4))


def integrate_all(thunks, a=0.0, b=5.0):
    """The worker's task: quad over each thunk (a double (double) integrand)."""
    return [integrate.quad(t.lowlevelcallable(), a, b, limit=200)[0] for t in thunks]


def chunks(seq, k):
    return [seq[i:i + k] for i in range(0, len(seq), k)]


def integrate_where(thunks, a=0.0, b=5.0):
    """integrate_all, and the process that ran it."""
    return os.getpid(), integrate_all(thunks, a, b)

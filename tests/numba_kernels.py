"""Numba values shared by the tests of Numba's (test_numba*.py): a @cfunc
over the sum of an array, @njit callers of a function value, and the
uniform Numba type of a signature (that of every thunk it is not inlined
for)."""

import numpy as np
from numba import carray, cfunc, njit, types

import numthunk as nt


@cfunc(types.float64(types.CPointer(types.float64), types.intc))
def c_sum(ptr, n):
    return np.sum(carray(ptr, n))


@njit
def call0(fn):
    return fn()


@njit
def call1(fn, x):
    return fn(x)


def uniform(text="double (double)"):
    return nt.Signature(text).numba_type()

"""The seeds' CalcBox.make_sum factory, with numthunk.

The usual version compiles a Numba @cfunc closure per call of make_sum
(tens of milliseconds each), and the closure freezes the array into the
compiled code: after ``vec[0] = 100`` it still returns the old sum. With
numthunk, make_sum binds the array to the one compiled kernel in
microseconds, the thunk reads the array when it is called, and the array
stays alive (and cannot be resized) while the thunk lives.

    python examples/calcbox.py
"""

import ctypes
import time

import numpy as np
from numba import carray, cfunc, njit
from numba.types import CPointer, float64, intc

import numthunk as nt


class CalcBox:
    def __init__(self, buf):
        self.buf = buf

    # C signature: double func(double *input, int n)
    c_sig = float64(CPointer(float64), intc)

    @staticmethod
    @cfunc(c_sig)
    def c_sum(ptr, n):
        return np.sum(carray(ptr, n))

    def make_sum(self):
        """A C function ``double (void)`` returning the sum of the buffer."""
        # nt.size() is checked against the C int at bind time and re-read
        # by rebind(); arr.ctypes, as the seeds pass it, works too.
        return nt.bind(type(self).c_sum, self.buf, nt.size(self.buf))


def make_sum_numba(arr):
    """The seeds' fixed factory, for comparison: one compilation per call."""
    compiled = CalcBox.c_sum
    size = np.intc(arr.size)

    @cfunc(float64())
    def thunk():
        return compiled(arr.ctypes, size)
    return thunk


@njit
def total(fn, times):
    """A nopython consumer: the thunk is an ordinary function argument."""
    s = 0.0
    for _ in range(times):
        s += fn()
    return s


def main():
    vec = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float64)
    box = CalcBox(vec)

    thunk = box.make_sum()
    t0 = time.perf_counter()
    box.make_sum()                         # the first one read c_sum's signature
    made = time.perf_counter() - t0
    t0 = time.perf_counter()
    old = make_sum_numba(vec)
    compiled = time.perf_counter() - t0

    C0 = ctypes.CFUNCTYPE(ctypes.c_double)
    fn = C0(thunk.address)                 # what C callers get: a plain address
    print("Sum:", fn())
    assert fn() == C0(old.address)() == 10.0

    vec[0] = 100.0
    print("after vec[0] = 100: numthunk", fn(), "| Numba cfunc closure", C0(old.address)())
    assert fn() == 109.0                   # live data
    assert thunk() == 109.0                # callable from Python too
    assert total(thunk, 3) == 327.0        # and from @njit code

    print(f"make_sum: numthunk {made * 1e6:.0f} µs, Numba cfunc closure "
          f"{compiled * 1e3:.0f} ms")


if __name__ == "__main__":
    main()

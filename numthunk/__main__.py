"""python -m numthunk: the founding problem, solved, with a timing table.

A C kernel ``double sum(double *x, int n)`` (a Numba @cfunc when Numba is
installed, else the reference kernel shipped in the extension) is bound to
an array; the thunk is called through its C address, from Numba's nopython
code, after the array changes, and with bad input. Then it is timed against
the alternatives people use today.
"""

import ctypes
import statistics
import sys
import time

import numpy as np

import numthunk as nt
from numthunk._api import as_function


def _median_time(fn, repeat=5, number=1):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def _fmt(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:9.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:9.2f} µs"
    return f"{seconds * 1e9:9.2f} ns"


def _kernel():
    """(target for bind, description, numba module or None)."""
    try:
        import numba
        from numba import carray, cfunc
        from numba.types import CPointer, float64, intc
    except ImportError:
        addr = nt._core._kernels()["sum"]
        return nt.Function(addr, "double sum(const double *x, int n)", name="sum"), \
            "reference kernel in numthunk._core (Numba is not installed)", None

    @cfunc(float64(CPointer(float64), intc))
    def c_sum(ptr, n):
        return np.sum(carray(ptr, n))

    return c_sum, "Numba @cfunc float64(CPointer(float64), intc)", numba


def main(out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"numthunk {nt.__version__}: engine {nt.engine_info()['engine']}, "
      f"memory {nt.engine_info()['memory_policy']}")
    target, what, numba = _kernel()
    p(f"kernel: double sum(double *x, int n), a {what}")

    vec = np.array([1.0, 2.0, 3.0, 4.0])
    thunk = nt.bind(target, vec, nt.size(vec))
    loop, make_closure, closure = _demo(p, target, numba, vec, thunk)
    p("\ntiming (median of 5; this machine, this run)")
    rows = _timing(target, numba, vec, thunk, loop, make_closure, closure)
    width = max(len(r[0]) for r in rows)
    p(f"  {'what':<{width}}  {'cost':>12}")
    for name, sec in rows:
        p(f"  {name:<{width}}  {_fmt(sec):>12}")
    p("\nfull benchmarks: python bench/bench_call.py (in the source tree)")
    return 0


def _demo(p, target, numba, vec, thunk):
    """The thunk called, live binding and refusals shown; (the @njit loop,
    the closure maker, a closure), the Numba parts None without Numba."""
    loop = make_closure = closure = None
    p(f"\nthunk = nt.bind(c_sum, vec, nt.size(vec))\n  {thunk!r}")
    call = ctypes.CFUNCTYPE(ctypes.c_double)(thunk.address)
    p(f"  called through .address with ctypes:  {call()}")
    if numba is not None:
        @numba.njit
        def loop(fn, k):
            s = 0.0
            for _ in range(k):
                s += fn()
            return s

        p(f"  from an @njit loop (3 calls):          {loop(thunk, 3)}")
    vec[0] = 100.0
    p(f"  after vec[0] = 100 (live binding):     {call()}")
    if numba is not None:
        from numba import cfunc
        from numba.types import float64

        def make_closure(arr):     # what users write today (the seeds' fix)
            size = np.intc(arr.size)

            @cfunc(float64())
            def thunk_closure():
                return target(arr.ctypes, size)

            return thunk_closure

        closure = make_closure(vec)
        before = closure.ctypes()
        vec[1] = 50.0
        after = closure.ctypes()
        p(f"  after vec[1] = 50: numthunk thunk {thunk()}, the Numba closure {after}"
          f"{'  <- STALE: Numba froze the array at compile time' if after == before else ''}")
    try:
        nt.bind(target, vec.astype(np.float32), 3_000_000_000)
    except (TypeError, OverflowError) as exc:
        p(f"  bad input is refused at bind time:\n    {type(exc).__name__}: {exc}")
    try:
        nt.bind(target, vec, 3_000_000_000)
    except OverflowError as exc:
        p(f"    {type(exc).__name__}: {exc}")
    return loop, make_closure, closure


def _timing(target, numba, vec, thunk, loop, make_closure, closure):
    """(what, seconds) rows of the timing table."""
    rows = []
    n_make = 2000
    make = _median_time(lambda: [nt.bind(target, vec, nt.size(vec)) for _ in range(n_make)],
                        repeat=5) / n_make
    rows.append(("make a thunk: numthunk.bind", make))

    if numba is not None:
        rows.append(("make a thunk: Numba cfunc closure (compile)",
                     _median_time(lambda: make_closure(vec), repeat=3)))

    def py_callback_make():
        arr = vec
        ptr = arr.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        kernel = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double),
                                  ctypes.c_int)(as_function(target).address)
        return ctypes.CFUNCTYPE(ctypes.c_double)(lambda: kernel(ptr, arr.size)), kernel

    pycb, _keep = py_callback_make()
    rows.append(("make a thunk: ctypes Python callback",
                 _median_time(py_callback_make, repeat=5, number=200)))

    k = 1_000_000
    kern = nt._core._kernels()
    c_loop = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_long)(kern["call_loop"])
    direct_loop = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_int, ctypes.c_long)(kern["direct_loop"])
    target_addr = as_function(target).address
    rows.append(("call from a C loop: direct sum(x, n)",
                 _median_time(lambda: direct_loop(target_addr, vec.ctypes.data, vec.size, k)) / k))
    rows.append(("call from a C loop: numthunk thunk",
                 _median_time(lambda: c_loop(thunk.address, k)) / k))
    kc = 20_000
    rows.append(("call from a C loop: ctypes Python callback",
                 _median_time(lambda: c_loop(ctypes.cast(pycb, ctypes.c_void_p).value, kc)) / kc))
    if numba is not None:
        rows.append(("call from @njit loop: numthunk thunk (argument)",
                     _median_time(lambda: loop(thunk, k)) / k))
        rows.append(("call from @njit loop: Numba cfunc closure",
                     _median_time(lambda: loop(closure, k)) / k))
    return rows


if __name__ == "__main__":
    sys.exit(main())

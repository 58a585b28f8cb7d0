"""Call cost, creation cost and memory per thunk, measured in one run.

    python bench/bench_call.py [--quick]

Call cost: 10^7 calls of a ``double (void)`` thunk over ``double sum(double
*, int)`` bound to a 4-element array, from an @njit loop and from a C loop
(no Numba: the pure engine figure), against calling the target directly.
Also a many-argument target (stack arguments). Ratios are medians of
several repetitions in the same run.

Creation: numthunk.bind vs making a Numba cfunc closure. Memory: RSS
growth over 10^5 thunks, beyond the bound objects (one array and one
size() marker shared by all of them).
"""

import ctypes
import gc
import statistics
import sys
import time

import numpy as np

import numthunk as nt

QUICK = "--quick" in sys.argv
REPEAT = 5 if QUICK else 7
CALLS = 10**6 if QUICK else 10**7


def median(fn, repeat=REPEAT):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def table(title, rows, base=None):
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    print(f"  {'':<{width}}  {'per call':>10}  {'ratio':>7}")
    for name, sec in rows:
        ratio = f"{sec / base:6.2f}x" if base else ""
        print(f"  {name:<{width}}  {sec * 1e9:8.2f} ns  {ratio:>7}")


def main():
    try:
        import numba
    except ImportError:          # no Numba wheel (free-threaded 3.13): the rest
        numba = None
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"numthunk {nt.__version__}, numba {numba.__version__ if numba else 'none'}, "
          f"numpy {np.__version__}; Python {sys.version.split()[0]}"
          f"{'' if gil else ' without the GIL'}; "
          f"engines: native={nt.engine_info()['native_available']} "
          f"memory={nt.engine_info()['memory_policy']}; {CALLS:.0e} calls, median of {REPEAT}")
    vec = np.array([1.0, 2.0, 3.0, 4.0])
    if numba is not None:
        numba_tables(vec)
    else:
        print("\n(no Numba: the @njit tables, the cfunc closures and bind(@cfunc) are left out)")
    kern = nt._core._kernels()
    csum = nt.Function(kern["sum"], "double (const double *, int)")
    c_tables(vec, kern, csum)
    python_table(vec, kern, csum)
    creation(vec, csum, numba)


def numba_tables(vec):
    from numba import carray, cfunc, njit
    from numba.types import CPointer, float64, intc

    @cfunc(float64(CPointer(float64), intc))
    def c_sum(ptr, n):
        return np.sum(carray(ptr, n))

    direct = c_sum.ctypes
    native = nt.bind(c_sum, vec, nt.size(vec), engine="native")
    ffi = nt.bind(c_sum, vec, nt.size(vec), engine="ffi")

    @cfunc(float64())
    def closure():
        return direct(vec.ctypes, np.intc(4))

    pyproto = ctypes.CFUNCTYPE(ctypes.c_double)
    ptr = vec.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    pycb = pyproto(lambda: direct(ptr, 4))

    @njit
    def loop_direct(arr, k):
        s = 0.0
        n = np.intc(arr.size)
        for _ in range(k):
            s += direct(arr.ctypes, n)
        return s

    @njit
    def loop_fn(fn, k):
        s = 0.0
        for _ in range(k):
            s += fn()
        return s

    # the engines: the thunks called through their addresses (as they are,
    # thunks over a @cfunc are called inline: bench/bench_inline.py)
    native_addr, ffi_addr = native.opaque(), ffi.opaque()
    assert loop_direct(vec, 3) == loop_fn(native_addr, 3) == loop_fn(ffi_addr, 3) == 30.0
    assert loop_fn(native, 3) == loop_fn(closure, 3) == 30.0
    few = max(CALLS // 500, 1000)

    k = CALLS
    d = median(lambda: loop_direct(vec, k)) / k
    rows = [
        ("direct: sum(arr.ctypes, n) in the loop", d),
        ("numthunk native thunk (argument)", median(lambda: loop_fn(native_addr, k)) / k),
        ("numthunk libffi thunk (argument)", median(lambda: loop_fn(ffi_addr, k)) / k),
        ("numthunk thunk, @cfunc inlined (argument)", median(lambda: loop_fn(native, k)) / k),
        ("Numba cfunc closure (argument)", median(lambda: loop_fn(closure, k)) / k),
    ]
    pyfn = nt.Function(ctypes.cast(pycb, ctypes.c_void_p).value, "double (void)", owner=pycb)
    rows.append(("ctypes Python callback (argument)", median(lambda: loop_fn(pyfn, few)) / few))
    table("call cost from an @njit loop (double (void) over sum(double *, int), 4 elements)",
          rows, d)



def c_tables(vec, kern, csum):
    k = CALLS
    few = max(CALLS // 500, 1000)
    pyproto = ctypes.CFUNCTYPE(ctypes.c_double)
    ptr = vec.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    direct = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_int)(kern["sum"])
    pycb = pyproto(lambda: direct(ptr, 4))
    c_loop = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_long)(kern["call_loop"])
    direct_loop = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_int, ctypes.c_long)(kern["direct_loop"])
    cn = nt.bind(csum, vec, 4, engine="native")
    cf = nt.bind(csum, vec, 4, engine="ffi")
    assert (c_loop(cn.address, 10) == c_loop(cf.address, 10)
            == direct_loop(kern["sum"], vec.ctypes.data, 4, 10))
    d = median(lambda: direct_loop(kern["sum"], vec.ctypes.data, 4, k)) / k
    table("call cost from a C loop (no Numba): the engine alone", [
        ("direct: sum(x, 4)", d),
        ("numthunk native thunk", median(lambda: c_loop(cn.address, k)) / k),
        ("numthunk libffi thunk", median(lambda: c_loop(cf.address, k)) / k),
        ("ctypes Python callback",
         median(lambda: c_loop(ctypes.cast(pycb, ctypes.c_void_p).value, few)) / few),
    ], d)

    many_sig = "double (" + ", ".join(["int"] * 8 + ["double"] * 10) + ")"
    many = nt.Function(kern["many"], many_sig)
    args = [1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5]
    mn = nt.bind(many, *args, engine="native")
    mf = nt.bind(many, *args, engine="ffi")
    many_loop = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p,
                                 ctypes.c_long)(kern["direct_many_loop"])
    assert c_loop(mn.address, 3) == c_loop(mf.address, 3) == many_loop(kern["many"], 3)
    d = median(lambda: many_loop(kern["many"], k)) / k
    table("many arguments (8 int + 10 double, all bound: stack arguments), from a C loop", [
        ("direct", d),
        ("numthunk native thunk", median(lambda: c_loop(mn.address, k)) / k),
        ("numthunk libffi thunk", median(lambda: c_loop(mf.address, k)) / k),
    ], d)



def python_table(vec, kern, csum):
    """A call from Python: thunk() against the target called through ctypes
    (without a GIL, the state lock's cost is here)."""
    k = CALLS // 10
    direct = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p, ctypes.c_int)(kern["sum"])
    p = vec.ctypes.data
    cn = nt.bind(csum, vec, 4, engine="native")
    cf = nt.bind(csum, vec, 4, engine="ffi")
    args = nt.bind(csum, nt.ARG, nt.ARG, engine="native")

    def loop(f, *a):
        for _ in range(k):
            f(*a)
    d = median(lambda: loop(direct, p, 4)) / k
    table("call cost from Python (a for loop; the target through ctypes is the base)", [
        ("ctypes: sum(p, 4)", d),
        ("numthunk native thunk()", median(lambda: loop(cn)) / k),
        ("numthunk libffi thunk()", median(lambda: loop(cf)) / k),
        ("numthunk native thunk(arr, 4), converted", median(lambda: loop(args, vec, 4)) / k),
    ], d)


def creation(vec, fn, numba):
    # ---- creation
    n_make = 20_000 if not QUICK else 5_000
    size = nt.size(vec)
    make_fn = median(lambda: [nt.bind(fn, vec, size) for _ in range(n_make)]) / n_make
    make_ffi = median(lambda: [nt.bind(fn, vec, size, engine="ffi")
                               for _ in range(n_make)]) / n_make
    print("\ncreation cost")
    print(f"  numthunk.bind(Function, arr, size(arr)), native  {make_fn * 1e6:9.2f} µs")
    print(f"  numthunk.bind(Function, ...), libffi             {make_ffi * 1e6:9.2f} µs")
    if numba is not None:
        from numba import carray, cfunc
        from numba.types import CPointer, float64, intc

        @cfunc(float64(CPointer(float64), intc))
        def c_sum(ptr, n):
            return np.sum(carray(ptr, n))
        direct = c_sum.ctypes
        make_native = median(lambda: [nt.bind(c_sum, vec, size) for _ in range(n_make)]) / n_make

        def make_closure():
            @cfunc(float64())
            def thunk_closure():
                return direct(vec.ctypes, np.intc(4))
            return thunk_closure

        closure_time = median(make_closure, repeat=3)
        print(f"  numthunk.bind(@cfunc, arr, size(arr)), native    {make_native * 1e6:9.2f} µs")
        print(f"  Numba cfunc closure (compile)                    {closure_time * 1e6:9.2f} µs"
              f"   ({closure_time / make_fn:,.0f}x)")

    # ---- memory
    n_mem = 100_000
    gc.collect()
    before = rss_bytes()
    keep = [nt.bind(fn, vec, size) for _ in range(n_mem)]
    gc.collect()
    after = rss_bytes()
    per = (after - before) / n_mem
    print(f"\nmemory: RSS growth over {n_mem:,} thunks: {(after - before) / 2**20:.1f} MiB, "
          f"{per:.0f} bytes per thunk (target <= 512)")
    del keep


if __name__ == "__main__":
    main()

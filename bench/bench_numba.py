"""Thunks in Numba nopython code: call cost and the cost of passing one in.

    python bench/bench_numba.py [--quick]

Call cost: an @njit consumer that takes the thunk as an argument and calls
it 10^7 times (``double (void)`` over the seed kernel ``double sum(double *,
int)`` bound to a 4-element array), against the same loop calling the
target directly (as a ctypes global, address baked in, and as a
first-class function argument), for both engines: the thunk called
through its address (``t.opaque()``: the engine), and as it is (its
target is a @cfunc, so @njit code calls it inline; bench/bench_inline.py
measures that against hand-inlined code).

Passing cost: calling an @njit function that takes one argument and
returns, with a thunk, an array, a Numba @cfunc and a plain Wrapper
Address Protocol object (Numba's own unboxing path) as that argument.
Figures are medians of several repetitions in the same run.

    python bench/bench_numba.py --count KIND N

runs N passes or calls of one KIND (thunk-pass, array-pass, direct-call,
thunk-call through the address, inline-call) after compiling everything,
untimed: bench/callgrind_numba.sh counts their instructions under
callgrind, whatever the machine's load.
"""

import statistics
import sys
import time

import numpy as np

import numthunk as nt

QUICK = "--quick" in sys.argv
REPEAT = 5 if QUICK else 9
CALLS = 10**6 if QUICK else 10**7
PASSES = 20_000 if QUICK else 100_000


def median(fn, repeat=REPEAT):
    """Median wall-clock and CPU (process) time of fn(). On a shared machine
    the CPU time is the steadier figure: it leaves out time the process
    spent waiting for a core."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(wall), statistics.median(cpu)


def kernels():
    """The seed kernel as a @cfunc, its array, and the @njit consumers:
    a loop calling the target directly (a ctypes global: address baked
    in), a loop calling a function argument with the array, a loop
    calling a thunk, and a function that only takes its argument."""
    from numba import carray, cfunc, njit
    from numba.types import CPointer, float64, intc

    @cfunc(float64(CPointer(float64), intc))
    def c_sum(ptr, n):
        return np.sum(carray(ptr, n))

    vec = np.array([1.0, 2.0, 3.0, 4.0])
    direct = c_sum.ctypes

    @njit
    def loop_global(arr, k):
        s = 0.0
        m = np.intc(arr.size)
        for _ in range(k):
            s += direct(arr.ctypes, m)
        return s

    @njit
    def loop_target(fn, arr, k):
        s = 0.0
        m = np.intc(arr.size)
        for _ in range(k):
            s += fn(arr.ctypes, m)
        return s

    @njit
    def loop_thunk(fn, k):
        s = 0.0
        for _ in range(k):
            s += fn()
        return s

    @njit
    def take(x):
        return 0

    return c_sum, vec, loop_global, loop_target, loop_thunk, take


def count(kind, n):
    """The work bench/callgrind_numba.sh counts: everything is compiled
    first, so runs with n = 0 and n = N differ by the N passes or calls."""
    c_sum, vec, loop_global, _, loop_thunk, take = kernels()
    thunk = nt.bind(c_sum, vec, nt.size(vec), engine="native")
    opaque = thunk.opaque()
    take(thunk), take(vec), loop_thunk(opaque, 1), loop_thunk(thunk, 1), loop_global(vec, 1)
    if kind == "thunk-pass":
        for _ in range(n):
            take(thunk)
    elif kind == "array-pass":
        for _ in range(n):
            take(vec)
    elif kind == "direct-call":
        loop_global(vec, n)
    elif kind == "thunk-call":
        loop_thunk(opaque, n)
    elif kind == "inline-call":
        loop_thunk(thunk, n)
    elif kind != "none":
        raise SystemExit(f"--count: unknown kind {kind!r}")


def main():
    if "--count" in sys.argv:
        i = sys.argv.index("--count")
        count(sys.argv[i + 1], int(sys.argv[i + 2]))
        return
    import numba
    from numba.core.types import WrapperAddressProtocol

    print(f"numthunk {nt.__version__}, numba {numba.__version__}, numpy {np.__version__}; "
          f"{CALLS:.0e} calls, {PASSES:.0e} passes, median of {REPEAT}")

    c_sum, vec, loop_global, loop_target, loop_thunk, take = kernels()
    target = nt.Function(c_sum.address, "double (const double *, int)", owner=c_sum)
    thunks = {e: nt.bind(c_sum, vec, nt.size(vec), engine=e) for e in ("native", "ffi")}

    assert loop_global(vec, 3) == loop_target(target, vec, 3) == 30.0
    for t in thunks.values():
        assert loop_thunk(t, 3) == loop_thunk(t.opaque(), 3) == 30.0
    k = CALLS
    rows = [
        ("target, direct call (ctypes global)", median(lambda: loop_global(vec, k))),
        ("target as a function argument", median(lambda: loop_target(target, vec, k))),
    ]
    for t in thunks.values():
        opaque = t.opaque()
        rows.append((f"thunk ({t.engine}) through its address",
                     median(lambda: loop_thunk(opaque, k))))  # noqa: B023 (run at once)
    inline = thunks["native"]
    rows.append(("thunk as it is: the @cfunc inlined", median(lambda: loop_thunk(inline, k))))
    base = rows[0][1]
    w = max(len(r[0]) for r in rows)
    print(f"\ncall cost from an @njit loop, {k:.0e} calls "
          "(double (void) over sum(double *, int), 4 elements)")
    print(f"  {'':<{w}}  {'wall/call':>10}  {'ratio':>6}  {'CPU/call':>10}  {'ratio':>6}")
    for name, (wall, cpu) in rows:
        print(f"  {name:<{w}}  {wall / k * 1e9:7.2f} ns  {wall / base[0]:5.2f}x"
              f"  {cpu / k * 1e9:7.2f} ns  {cpu / base[1]:5.2f}x")

    # ---- passing a value into an @njit function
    class PlainWAP(WrapperAddressProtocol):
        """What a protocol object without _numba_type_ costs."""

        def __init__(self, thunk):
            self.thunk = thunk

        def __wrapper_address__(self):
            return self.thunk.address

        def signature(self):
            return self.thunk.signature()

    thunk = next(iter(thunks.values()))
    values = [
        ("array (float64, 1-D)", vec),
        ("numthunk Thunk", thunk),
        ("numthunk Function", target),
        ("Numba @cfunc", c_sum),
        ("plain protocol object (Numba's path)", PlainWAP(thunk)),
    ]
    for _, v in values:
        take(v)
    # a thunk and a Function each have numthunk's type of their signature
    assert {(numba.typeof(thunk),), (numba.typeof(target),)} <= set(take.signatures)

    @numba.njit
    def nothing():
        return 0

    def run(v):
        if v is None:
            for _ in range(PASSES):
                nothing()
        else:
            for _ in range(PASSES):
                take(v)

    # Round-robin repetitions, so a noisy neighbour hits every row alike.
    cases = [("(no argument)", None)] + values
    times = {name: ([], []) for name, _ in cases}
    for _ in range(REPEAT):
        for name, v in cases:
            t0, c0 = time.perf_counter(), time.process_time()
            run(v)
            times[name][1].append((time.process_time() - c0) / PASSES)
            times[name][0].append((time.perf_counter() - t0) / PASSES)
    per = {name: (statistics.median(w), statistics.median(c)) for name, (w, c) in times.items()}
    floor = per["(no argument)"]
    w = max(len(v[0]) for v in values)
    print(f"\ncost of passing a value into an @njit function (take(x): return 0), "
          f"{PASSES:.0e} calls;\nthe call itself with no argument: {floor[0] * 1e6:.2f} µs wall, "
          f"{floor[1] * 1e6:.2f} µs CPU")
    print(f"  {'argument':<{w}}  {'wall/call':>9}  {'CPU/call':>9}  {'CPU beyond the call':>19}")
    for name, _ in values:
        wall, cpu = per[name]
        print(f"  {name:<{w}}  {wall * 1e6:6.2f} µs  {cpu * 1e6:6.2f} µs  "
              f"{(cpu - floor[1]) * 1e6:16.2f} µs")


if __name__ == "__main__":
    main()

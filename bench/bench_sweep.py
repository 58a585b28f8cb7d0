"""A parameter sweep under scipy.integrate.quad: what each way of giving
quad a new parameter set costs (docs/scipy.md, "Sweeping parameters").

    python bench/bench_sweep.py [--quick]

The integrand is a @cfunc ``double (double x, const double *c, int n)``
(a polynomial of 4 coefficients: quad's own work per integral is small, so
the cost of making the callable shows). For each of 5,000 parameter sets:

- new: ``nt.bind(poly, nt.ARG, c, nt.size(c))`` and a new
  ``LowLevelCallable`` per set;
- rebind: one thunk and one LowLevelCallable; ``t.rebind("c", c)`` per set
  and ``t.reclaim()`` every 256 sets;
- in place: one thunk over one array; ``buf[:] = c`` per set (same length);
- quad alone: the integral with one callable and no change, the floor.

Then what making a callable costs alone, per call (best of 7 runs of
20,000): ``t.lowlevelcallable()``, ``Function.lowlevelcallable()``,
SciPy's ``LowLevelCallable(capsule)`` on a ready capsule (SciPy's own
constructor, for scale) and ``nt.bind`` of the integrand.

Median of 7 runs of the whole sweep, in one process; ratios against "new".
"""

import statistics
import sys
import time
import timeit

import numpy as np
from numba import cfunc
from numba.types import CPointer, float64, intc
from scipy import LowLevelCallable, integrate

import numthunk as nt
from numthunk._api import as_function

QUICK = "--quick" in sys.argv
SETS = 500 if QUICK else 5000
REPEAT = 3 if QUICK else 7


@cfunc(float64(float64, CPointer(float64), intc))
def poly(x, c, n):
    s = 0.0
    for i in range(n - 1, -1, -1):
        s = s * x + c[i]
    return s


def params():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(4) for _ in range(SETS)]


def new_per_set(ps):
    out = []
    for c in ps:
        f = nt.bind(poly, nt.ARG, c, nt.size(c))
        out.append(integrate.quad(f.lowlevelcallable(), 0.0, 1.0)[0])
    return out


def rebind_per_set(ps):
    t = nt.bind(poly, nt.ARG, ps[0], nt.size(ps[0]))
    llc = t.lowlevelcallable()
    out = []
    for k, c in enumerate(ps):
        t.rebind(1, c)
        out.append(integrate.quad(llc, 0.0, 1.0)[0])
        if k % 256 == 255:
            t.reclaim()
    t.reclaim()
    return out


def in_place(ps):
    buf = np.empty(4)
    t = nt.bind(poly, nt.ARG, buf, nt.size(buf))
    llc = t.lowlevelcallable()
    out = []
    for c in ps:
        buf[:] = c
        out.append(integrate.quad(llc, 0.0, 1.0)[0])
    return out


def quad_alone(ps):
    t = nt.bind(poly, nt.ARG, ps[0], nt.size(ps[0]))
    llc = t.lowlevelcallable()
    return [integrate.quad(llc, 0.0, 1.0)[0] for _c in ps]


def bare_llc_per_set(ps):
    # what lowlevelcallable() adds: SciPy's own constructor, per set
    t = nt.bind(poly, nt.ARG, ps[0], nt.size(ps[0]))
    fn = t.lowlevelcallable().function
    return [integrate.quad(LowLevelCallable(fn), 0.0, 1.0)[0] for _c in ps]


def main():
    ps = params()
    expect = new_per_set(ps)
    assert rebind_per_set(ps) == expect and in_place(ps) == expect
    ways = [("new thunk + LowLevelCallable per set", new_per_set),
            ("one thunk, rebind per set, reclaim/256", rebind_per_set),
            ("one thunk, array written in place", in_place),
            ("quad alone (one callable, no change)", quad_alone),
            ("  (a new LowLevelCallable per set only)", bare_llc_per_set)]
    times = {name: [] for name, _ in ways}
    for _ in range(REPEAT):
        for name, fn in ways:
            t0 = time.perf_counter()
            fn(ps)
            times[name].append(time.perf_counter() - t0)
    print(f"numthunk {nt.__version__}; {SETS} integrals of a 4-term polynomial, median of "
          f"{REPEAT}")
    base = statistics.median(times[ways[0][0]])
    print(f"  {'':42s} {'per set':>10s} {'speed-up':>9s}")
    for name, _ in ways:
        m = statistics.median(times[name])
        print(f"  {name:42s} {m / SETS * 1e6:8.2f} µs {base / m:8.2f}x")


def making():
    t = nt.bind(poly, nt.ARG, np.arange(4.0), 4)
    fn = as_function(poly)
    capsule = t.lowlevelcallable().function
    c = np.arange(4.0)
    ways = [("t.lowlevelcallable()", t.lowlevelcallable),
            ("Function.lowlevelcallable()", fn.lowlevelcallable),
            ("SciPy's LowLevelCallable(capsule)", lambda: LowLevelCallable(capsule)),
            ("nt.bind(poly, nt.ARG, c, 4)", lambda: nt.bind(poly, nt.ARG, c, 4))]
    n = 2000 if QUICK else 20000
    print(f"  making a callable, best of 7 x {n}")
    for name, fn_ in ways:
        best = min(timeit.repeat(fn_, number=n, repeat=7)) / n
        print(f"  {name:42s} {best * 1e6:8.2f} µs")


if __name__ == "__main__":
    main()
    making()

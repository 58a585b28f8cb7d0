"""Thunks over Numba @cfuncs called from @njit code: the target inlined,
against the same code written as @njit functions and inlined by hand.

    python bench/bench_inline.py [--quick] [--ir NAME]

Three kernels, each timed in several spellings and containers in one run
(round-robin repetitions, the fastest CPU time of each row; ratios to the
hand-inlined row):

- RK4: 10^6 steps of a 3-variable right-hand side (Lorenz with a damping
  term) with 4 bound parameters, ``void (double t, double *u, double *du)``,
  called with the arrays, with their ``.ctypes``, through a small @njit
  helper, and through the address;
- midpoint: a midpoint-rule integral of ``a / (1 + b x^2)``, 10^7
  evaluations, 2 bound parameters;
- choice: one of 4 integrands chosen by a run-time value (10^7
  evaluations for each choice), against an ``if/elif`` over 4 @njit
  functions: a tuple of 4 inlining thunks over 4 @cfuncs chosen with
  constant indices in the same ``if/elif``; indexed at run time: the same
  tuple (a switch over the index, each case inlined), a tuple of 4 thunks
  over one @cfunc that switches on a bound int, an untyped typed.List and
  typed.Dict of the 4 thunks, and a tuple of their ``t.opaque()``.

"hand" passes the parameters as arguments (not compile-time constants);
"inline" is the thunk over the @cfunc as it is; "opaque" the same thunk as
``t.opaque()``, called through its address (the engine). After the timing
each inline thunk is rebound and its result checked against the hand
version with the new value. Last, the compile time of a fresh consumer
with 1 and with 10 distinct thunks over the same target.

``--ir NAME`` (rk4, rk4-ctypes, midpoint, choice, choice-index) prints the
inline consumer's optimised LLVM IR instead.
"""

import math
import sys
import time

import numpy as np

import numthunk as nt

QUICK = "--quick" in sys.argv
REPEAT = 3 if QUICK else 7
STEPS = 10**5 if QUICK else 10**6
EVALS = 10**6 if QUICK else 10**7


def kernels():
    from numba import cfunc, njit, types

    f8, ptr = types.float64, types.CPointer(types.float64)

    # ---- RK4: one right-hand side, compiled as a @cfunc and as @njit
    def lorenz(t, u, du, sigma, rho, beta, damping):
        x, y, z = u[0], u[1], u[2]
        du[0] = sigma * (y - x) - damping * x
        du[1] = x * (rho - z) - y
        du[2] = x * y - beta * z

    k = {"lorenz_c": cfunc(types.void(f8, ptr, ptr, f8, f8, f8, f8))(lorenz)}
    rhs = njit(lorenz)

    @njit
    def rk4_hand(u0, h, n, sigma, rho, beta, damping):
        u, w = u0.copy(), np.empty(3)
        k1, k2, k3, k4 = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
        t = 0.0
        for _ in range(n):
            rhs(t, u, k1, sigma, rho, beta, damping)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k1[j]
            rhs(t + 0.5 * h, w, k2, sigma, rho, beta, damping)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k2[j]
            rhs(t + 0.5 * h, w, k3, sigma, rho, beta, damping)
            for j in range(3):
                w[j] = u[j] + h * k3[j]
            rhs(t + h, w, k4, sigma, rho, beta, damping)
            for j in range(3):
                u[j] += h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
            t += h
        return u

    @njit
    def rk4_thunk(f, u0, h, n):
        u, w = u0.copy(), np.empty(3)
        k1, k2, k3, k4 = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
        t = 0.0
        for _ in range(n):
            f(t, u, k1)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k1[j]
            f(t + 0.5 * h, w, k2)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k2[j]
            f(t + 0.5 * h, w, k3)
            for j in range(3):
                w[j] = u[j] + h * k3[j]
            f(t + h, w, k4)
            for j in range(3):
                u[j] += h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
            t += h
        return u

    @njit
    def rk4_ctypes(f, u0, h, n):
        # Numba's idiom for pointer parameters: arr.ctypes
        u, w = u0.copy(), np.empty(3)
        k1, k2, k3, k4 = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
        t = 0.0
        for _ in range(n):
            f(t, u.ctypes, k1.ctypes)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k1[j]
            f(t + 0.5 * h, w.ctypes, k2.ctypes)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k2[j]
            f(t + 0.5 * h, w.ctypes, k3.ctypes)
            for j in range(3):
                w[j] = u[j] + h * k3[j]
            f(t + h, w.ctypes, k4.ctypes)
            for j in range(3):
                u[j] += h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
            t += h
        return u

    @njit
    def apply(f, t, u, du):
        f(t, u, du)

    @njit
    def rk4_helper(f, u0, h, n):
        # through a small @njit helper
        u, w = u0.copy(), np.empty(3)
        k1, k2, k3, k4 = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
        t = 0.0
        for _ in range(n):
            apply(f, t, u, k1)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k1[j]
            apply(f, t + 0.5 * h, w, k2)
            for j in range(3):
                w[j] = u[j] + 0.5 * h * k2[j]
            apply(f, t + 0.5 * h, w, k3)
            for j in range(3):
                w[j] = u[j] + h * k3[j]
            apply(f, t + h, w, k4)
            for j in range(3):
                u[j] += h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
            t += h
        return u

    # ---- integrands: f(x, a, b), as @cfuncs and as @njit functions
    def lorentz(x, a, b):
        return a / (1.0 + b * x * x)

    def parabola(x, a, b):
        return a * x * x + b

    def root(x, a, b):
        return a * math.sqrt(x + b)

    def saturating(x, a, b):
        return a * x / (b + x)

    pys = (lorentz, parabola, root, saturating)
    k["integrands_c"] = [cfunc(f8(f8, f8, f8))(f) for f in pys]
    g0, g1, g2, g3 = (njit(f) for f in pys)

    def by_kind(x, kind, a, b):
        if kind == 0:
            return a / (1.0 + b * x * x)
        if kind == 1:
            return a * x * x + b
        if kind == 2:
            return a * math.sqrt(x + b)
        return a * x / (b + x)

    k["by_kind_c"] = cfunc(f8(f8, types.intc, f8, f8))(by_kind)

    @njit
    def mid_hand(lo, hi, n, a, b):
        h = (hi - lo) / n
        s = 0.0
        for i in range(n):
            s += g0(lo + (i + 0.5) * h, a, b)
        return s * h

    @njit
    def mid_thunk(f, lo, hi, n):
        h = (hi - lo) / n
        s = 0.0
        for i in range(n):
            s += f(lo + (i + 0.5) * h)
        return s * h

    @njit
    def choice_hand(kind, lo, hi, n, a, b):
        h = (hi - lo) / n
        s = 0.0
        for i in range(n):
            x = lo + (i + 0.5) * h
            if kind == 0:
                s += g0(x, a, b)
            elif kind == 1:
                s += g1(x, a, b)
            elif kind == 2:
                s += g2(x, a, b)
            else:
                s += g3(x, a, b)
        return s * h

    @njit
    def choice_constant(fns, kind, lo, hi, n):
        h = (hi - lo) / n
        s = 0.0
        for i in range(n):
            x = lo + (i + 0.5) * h
            if kind == 0:
                s += fns[0](x)
            elif kind == 1:
                s += fns[1](x)
            elif kind == 2:
                s += fns[2](x)
            else:
                s += fns[3](x)
        return s * h

    @njit
    def choice_index(fns, kind, lo, hi, n):
        h = (hi - lo) / n
        s = 0.0
        f = fns[kind]
        for i in range(n):
            s += f(lo + (i + 0.5) * h)
        return s * h

    k.update(rk4_hand=rk4_hand, rk4_thunk=rk4_thunk, rk4_ctypes=rk4_ctypes,
             rk4_helper=rk4_helper, mid_hand=mid_hand, mid_thunk=mid_thunk,
             choice_hand=choice_hand, choice_constant=choice_constant,
             choice_index=choice_index)
    return k


PARAMS = (10.0, 28.0, 8.0 / 3.0, 0.01)      # sigma, rho, beta, damping
U0 = np.array([1.0, 1.0, 1.0])
H = 1e-3
A, B = 2.0, 3.0


def fastest(cases, repeat=REPEAT):
    """The fastest CPU time of each case, repetitions round-robin so that
    a noisy neighbour hits every case alike (CPU-bound code: the fastest
    run is the one least disturbed)."""
    times = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            c0 = time.process_time()
            fn()
            times[name].append(time.process_time() - c0)
    return {name: min(v) for name, v in times.items()}


def check(got, want, what):
    if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
        raise SystemExit(f"{what}: {got} != {want}")


def compile_times(k, make, calls):
    """CPU ms to compile a fresh consumer with the first thunk, then for 9
    more distinct thunks over the same target (and its signatures)."""
    from numba import njit

    thunks = [make(i) for i in range(10)]
    consumer = njit(k["mid_thunk"].py_func)
    t0 = time.process_time()
    calls(consumer, thunks[0])
    first = time.process_time() - t0
    t0 = time.process_time()
    for t in thunks[1:]:
        calls(consumer, t)
    rest = time.process_time() - t0
    return first * 1e3, rest * 1e3, len(consumer.signatures)


def main():
    import numba

    k = kernels()
    if "--ir" in sys.argv:
        name = sys.argv[sys.argv.index("--ir") + 1]
        show_ir(k, name)
        return
    print(f"numthunk {nt.__version__}, numba {numba.__version__}, numpy {np.__version__}; "
          f"fastest CPU time of {REPEAT}, round-robin; ratios to the hand-inlined row")
    rhs = nt.bind(k["lorenz_c"], nt.ARG, nt.ARG, nt.ARG, *PARAMS)
    integrand = nt.bind(k["integrands_c"][0], nt.ARG, A, B)
    fns = tuple(nt.bind(cf, nt.ARG, A, B) for cf in k["integrands_c"])
    kinds = tuple(nt.bind(k["by_kind_c"], nt.ARG, i, A, B) for i in range(4))
    opaque = tuple(t.opaque() for t in fns)
    for t in (rhs, integrand) + fns + kinds:
        assert "; inline " in str(numba.typeof(t)), numba.typeof(t)

    import numba.typed

    rk4_hand, rk4_thunk = k["rk4_hand"], k["rk4_thunk"]
    rk4_ctypes, rk4_helper = k["rk4_ctypes"], k["rk4_helper"]
    # run-time choice: the containers docs/numba.md shows
    lst = numba.typed.List()
    dct = numba.typed.Dict()
    for i, t in enumerate(fns):
        lst.append(t)
        dct[i] = t
    containers = {"tuple[k]": fns, "one target": kinds, "typed.List": lst,
                  "typed.Dict": dct, "opaque tuple": opaque}
    mid_hand, mid_thunk = k["mid_hand"], k["mid_thunk"]
    c_hand, c_const, c_index = k["choice_hand"], k["choice_constant"], k["choice_index"]
    # compile everything, and check that every version computes the same
    check(rk4_thunk(rhs, U0, H, 10), rk4_hand(U0, H, 10, *PARAMS), "rk4")
    check(rk4_thunk(rhs.opaque(), U0, H, 10), rk4_hand(U0, H, 10, *PARAMS), "rk4 opaque")
    check(rk4_ctypes(rhs, U0, H, 10), rk4_hand(U0, H, 10, *PARAMS), "rk4 .ctypes")
    check(rk4_helper(rhs, U0, H, 10), rk4_hand(U0, H, 10, *PARAMS), "rk4 helper")
    check(mid_thunk(integrand, 0.0, 1.0, 100), mid_hand(0.0, 1.0, 100, A, B), "midpoint")
    check(mid_thunk(integrand.opaque(), 0.0, 1.0, 100), mid_hand(0.0, 1.0, 100, A, B),
          "midpoint opaque")
    for i in range(4):
        want = c_hand(i, 0.0, 1.0, 100, A, B)
        check(c_const(fns, i, 0.0, 1.0, 100), want, "choice constant")
        for name, box in containers.items():
            check(c_index(box, i, 0.0, 1.0, 100), want, f"choice {name}")

    r = fastest({
        "hand": lambda: rk4_hand(U0, H, STEPS, *PARAMS),
        "arrays": lambda: rk4_thunk(rhs, U0, H, STEPS),
        ".ctypes": lambda: rk4_ctypes(rhs, U0, H, STEPS),
        "helper": lambda: rk4_helper(rhs, U0, H, STEPS),
        "opaque": lambda: rk4_thunk(rhs.opaque(), U0, H, STEPS),
    })
    print(f"\nRK4, {STEPS:.0e} steps, 4 bound: spellings of the call f(t, u, k)")
    _rows(r, {"arrays": "f(t, u, k1): the arrays, inline",
              ".ctypes": "f(t, u.ctypes, k1.ctypes), inline",
              "helper": "apply(f, t, u, k1), a small @njit helper, inline",
              "opaque": "f.opaque(): through the address"})
    r = fastest({
        "hand": lambda: mid_hand(0.0, 1.0, EVALS, A, B),
        "inline": lambda: mid_thunk(integrand, 0.0, 1.0, EVALS),
        "opaque": lambda: mid_thunk(integrand.opaque(), 0.0, 1.0, EVALS),
    })
    print(f"\nmidpoint, {EVALS:.0e} evaluations")
    _rows(r, {"inline": "the thunk", "opaque": "f.opaque(): through the address"})
    cases = {}
    for i in range(4):
        cases[("hand", i)] = lambda i=i: c_hand(i, 0.0, 1.0, EVALS, A, B)
        cases[("constant", i)] = lambda i=i: c_const(fns, i, 0.0, 1.0, EVALS)
        for name, box in containers.items():
            cases[(name, i)] = lambda i=i, box=box: c_index(box, i, 0.0, 1.0, EVALS)
    each = fastest(cases)
    names = ["hand", "constant"] + list(containers)
    r = {name: sum(each[(name, i)] for i in range(4)) for name in names}
    print(f"\nchoice of 4 integrands at run time, {EVALS:.0e} evaluations each "
          "(hand: if/elif over 4 @njit functions)")
    _rows(r, {"constant": "tuple of 4 thunks over 4 @cfuncs, constant indices in the if/elif",
              "tuple[k]": "the same tuple indexed at run time: a switch, inline",
              "one target": "4 thunks over one @cfunc switching on a bound int",
              "typed.List": "untyped typed.List() of the 4 thunks",
              "typed.Dict": "untyped typed.Dict() of the 4 thunks, int keys",
              "opaque tuple": "tuple of their t.opaque(), indexed at run time"})

    # live: a rebind between runs is seen by the compiled consumers
    rhs.rebind(6, 0.5)
    check(rk4_thunk(rhs, U0, H, 1000), rk4_hand(U0, H, 1000, *PARAMS[:3], 0.5), "rk4 rebind")
    integrand.rebind(1, 5.0)
    check(mid_thunk(integrand, 0.0, 1.0, 1000), mid_hand(0.0, 1.0, 1000, 5.0, B),
          "midpoint rebind")
    for t in fns:
        t.rebind(2, 7.0)                # b
    for t in kinds:
        t.rebind(3, 7.0)                # b
    for i in range(4):
        want = c_hand(i, 0.0, 1.0, 1000, A, 7.0)
        check(c_const(fns, i, 0.0, 1.0, 1000), want, "choice rebind")
        check(c_index(fns, i, 0.0, 1.0, 1000), want, "choice tuple[k] rebind")
        check(c_index(kinds, i, 0.0, 1.0, 1000), want, "choice one target rebind")
    print("\nrebinds between runs: seen by every inline consumer (results checked)")

    print("\ncompile time (CPU) of a fresh midpoint consumer, thunks over one @cfunc")
    cf = k["integrands_c"][0]
    for label, make in (("inline", lambda i: nt.bind(cf, nt.ARG, float(i), B)),
                        ("opaque", lambda i: nt.bind(cf, nt.ARG, float(i), B).opaque())):
        first, rest, nsig = compile_times(k, make, lambda c, t: c(t, 0.0, 1.0, 10))
        print(f"  {label:<7} 1 thunk: {first:7.1f} ms   10 thunks: {first + rest:7.1f} ms "
              f"({nsig} compiled specialisation{'s' if nsig != 1 else ''})")


def _rows(r, labels):
    hand = r["hand"]
    print(f"  {'hand-inlined @njit':<66} {hand * 1e3:7.1f} ms")
    for name, label in labels.items():
        print(f"  {name:<13} {label:<52} {r[name] / hand:6.3f}x")


def show_ir(k, name):
    rhs = nt.bind(k["lorenz_c"], nt.ARG, nt.ARG, nt.ARG, *PARAMS)
    integrand = nt.bind(k["integrands_c"][0], nt.ARG, A, B)
    fns = tuple(nt.bind(cf, nt.ARG, A, B) for cf in k["integrands_c"])
    runs = {
        "rk4": (k["rk4_thunk"], lambda f: f(rhs, U0, H, 1)),
        "rk4-ctypes": (k["rk4_ctypes"], lambda f: f(rhs, U0, H, 1)),
        "midpoint": (k["mid_thunk"], lambda f: f(integrand, 0.0, 1.0, 1)),
        "choice": (k["choice_constant"], lambda f: f(fns, 0, 0.0, 1.0, 1)),
        "choice-index": (k["choice_index"], lambda f: f(fns, 0, 0.0, 1.0, 1)),
    }
    if name not in runs:
        raise SystemExit(f"--ir: one of {', '.join(runs)}")
    consumer, run = runs[name]
    run(consumer)
    ir = consumer.inspect_llvm(consumer.signatures[0])
    body = ir[ir.index("define"):]
    print(body[:body.index("\n}\n") + 2])


if __name__ == "__main__":
    main()

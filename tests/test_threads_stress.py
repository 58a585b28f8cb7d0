"""Thunks under real parallelism: calls from 8 Python threads at once while
other threads rebind, reclaim and release; composed chains built, called,
rebound and released; bind() from many threads. Every result must be the
result of one complete binding (a rebind seen half done would pair an
array with another array's length), and nothing may crash. On a
free-threaded CPython (3.13t) the threads run truly at once; with the GIL,
the nogil targets still run at once and the rest interleaves.

NUMTHUNK_STRESS_SECONDS sets each run's length (default 1.5 s per engine
and scenario); NUMTHUNK_STRESS_REPORT names a file that gets one JSON line
of figures per run (tools/tsan.sh and .ci/run print them).
"""

import itertools
import json
import os
import random
import sys
import sysconfig
import threading
import time

import numpy as np
import pytest

import numthunk as nt

pytestmark = pytest.mark.stress

SECONDS = float(os.environ.get("NUMTHUNK_STRESS_SECONDS", "1.5"))
CALLERS = 8
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

SUM = "double (const double *x, int n)"
POLY = "double (double x, const double *p, int n)"
APPLY = "double (double (*f)(double), double x)"
X = 2.0


@pytest.fixture(params=["native", "ffi"])
def engine(request):
    return request.param


def arrays_with_unique_sums(count):
    """count arrays of distinct lengths whose full sums differ from each
    other and from every sum of another array's length of them: a torn
    rebind (this array, another's length) cannot pass for a complete one."""
    arrays = [np.full(k + 2, 1000.0 * (k + 1) + 1.0) for k in range(count)]
    whole = {float(a.sum()) for a in arrays}
    torn = {float(a[:len(b)].sum()) for a in arrays for b in arrays
            if len(b) < len(a)}
    assert len(whole) == count and not whole & torn
    return arrays, whole


def polys_with_unique_values(count):
    """Coefficient arrays whose polynomials at X differ, complete or cut to
    another one's length."""
    coeffs = [np.full(k + 1, 1000.0 * (k + 1) + 1.0) for k in range(count)]

    def poly(c, n):
        return float(sum(c[i] * X ** i for i in range(n)))

    whole = {poly(c, len(c)) for c in coeffs}
    torn = {poly(c, len(d)) for c in coeffs for d in coeffs if len(d) < len(c)}
    assert len(whole) == count and not whole & torn
    return coeffs, whole


class Run:
    """The threads of one stress run, their counts and their failures."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.deadline = None        # set once every thread has started
        self.lock = threading.Lock()
        self.counts = {"calls": 0, "rebinds": 0, "reclaims": 0, "releases": 0,
                       "binds": 0, "chains": 0, "refused": 0}
        self.failures = []
        self.threads = []

    def going(self):
        return time.monotonic() < self.deadline and len(self.failures) < 20

    def add(self, **counts):
        with self.lock:
            for k, v in counts.items():
                self.counts[k] += v

    def fail(self, what):
        with self.lock:
            self.failures.append(what)

    def spawn(self, body, *args):
        def guarded():
            try:
                self.barrier.wait()
                body(*args)
            except BaseException as e:      # a failure, not a dead thread
                self.fail(f"{body.__name__}: {type(e).__name__}: {e}")
        th = threading.Thread(target=guarded, name=body.__name__)
        self.threads.append(th)

    def run(self, name):
        # thread starts are slow while others run: all start, then all go
        start = time.monotonic()
        self.barrier = threading.Barrier(len(self.threads) + 1)
        for th in self.threads:
            th.start()
        self.deadline = time.monotonic() + self.seconds
        self.barrier.wait()
        for th in self.threads:
            th.join()
        figures = dict(self.counts, scenario=name, threads=len(self.threads),
                       seconds=round(time.monotonic() - start, 2),
                       failures=len(self.failures),
                       free_threaded=FREE_THREADED,
                       gil_enabled=getattr(sys, "_is_gil_enabled", lambda: True)())
        report = os.environ.get("NUMTHUNK_STRESS_REPORT")
        if report:
            with open(report, "a") as f:
                f.write(json.dumps(figures) + "\n")
        sys.stderr.write(f"\n[stress {json.dumps(figures)}]\n")
        assert not self.failures, self.failures[:5]
        return figures


def pause():
    """A caller's breath between batches of calls: with a GIL, or one lock
    taken by every call, the threads that rebind, release and bind would
    otherwise get their turn seldom (a question of fairness, not of
    correctness, and not what this test measures)."""
    time.sleep(0.0002)


def released_refusal(e):
    """The ValueError of a call or rebind that met a release: expected when
    threads race release()."""
    return isinstance(e, ValueError) and "released" in str(e)


def test_calls_rebinds_reclaims_releases(cfn, engine):
    arrays, whole = arrays_with_unique_sums(8)
    fn = cfn("f_d_pi", SUM)

    def make():
        a = random.choice(arrays)
        return nt.bind(fn, a, nt.size(a), engine=engine)

    # the thunks in use; the releaser replaces them while callers call
    slots = [make() for _ in range(4)]
    run = Run(SECONDS)

    def caller():
        n = refused = 0
        while run.going():
            for _ in range(50):
                t = slots[random.randrange(len(slots))]
                try:
                    r = t()
                except ValueError as e:
                    if not released_refusal(e):
                        raise
                    refused += 1
                    continue
                n += 1
                if r not in whole:
                    run.fail(f"torn call: {r!r} is no complete binding's sum")
            pause()
        run.add(calls=n, refused=refused)

    def rebinder():
        n = 0
        while run.going():
            t = slots[random.randrange(len(slots))]
            try:
                t.rebind(0, random.choice(arrays))
                n += 1
            except ValueError as e:
                if not released_refusal(e):
                    raise
        run.add(rebinds=n)

    def reclaimer():
        n = 0
        while run.going():
            t = slots[random.randrange(len(slots))]
            try:
                t.reclaim()
                n += 1
            except ValueError as e:
                if not released_refusal(e):
                    raise
            time.sleep(0.0005)
        run.add(reclaims=n)

    def releaser():
        n = 0
        while run.going():
            k = random.randrange(len(slots))
            old, slots[k] = slots[k], make()
            old.release()
            assert old.released
            n += 1
            time.sleep(0.001)
        run.add(releases=n, binds=n)

    for _ in range(CALLERS):
        run.spawn(caller)
    for _ in range(2):
        run.spawn(rebinder)
    run.spawn(reclaimer)
    run.spawn(releaser)
    figures = run.run(f"calls/{engine}")
    assert figures["calls"] > 0 and figures["rebinds"] > 0 and figures["releases"] > 0
    for t in slots:
        assert t() in whole
        t.release()


def test_composed_chains(cfn, engine):
    coeffs, whole = polys_with_unique_values(6)
    poly, apply = cfn("f_d_dpi", POLY), cfn("f_d_Fd", APPLY)

    def leaf():
        c = random.choice(coeffs)
        return nt.bind(poly, nt.ARG, c, nt.size(c), engine=engine)

    leaves = [leaf() for _ in range(3)]
    top = nt.bind(apply, leaves[0], nt.ARG, engine=engine)
    run = Run(SECONDS)

    def caller():
        n = refused = 0
        while run.going():
            for _ in range(50):
                try:
                    r = top(X)
                except ValueError as e:
                    if not released_refusal(e):
                        raise
                    refused += 1
                    continue
                n += 1
                if r not in whole:
                    run.fail(f"torn composed call: {r!r}")
            pause()
        run.add(calls=n, refused=refused)

    def leaf_rebinder():
        # the leaves' coefficients change under the composed calls
        n = 0
        while run.going():
            c = random.choice(coeffs)
            random.choice(leaves).rebind(1, c)
            n += 1
        run.add(rebinds=n)

    def top_rebinder():
        # the function-pointer parameter moves between leaves: the
        # dependency graph changes under the calls
        n = 0
        while run.going():
            top.rebind(0, random.choice(leaves))
            n += 1
            time.sleep(0.0002)
        run.add(rebinds=n)

    def chain_builder():
        # chains of 1 to 4 levels built, called from here, released in a
        # random order: a thunk above a released one refuses its calls
        n = releases = 0
        while run.going():
            c = random.choice(coeffs)
            chain = [nt.bind(poly, nt.ARG, c, nt.size(c), engine=engine)]
            for _ in range(random.randrange(4)):
                chain.append(nt.bind(apply, chain[-1], nt.ARG, engine=engine))
            want = float(sum(c[i] * X ** i for i in range(len(c))))
            if chain[-1](X) != want:
                run.fail(f"chain of {len(chain)}: {chain[-1](X)!r} != {want!r}")
            order = chain[:]
            random.shuffle(order)
            for t in order:
                t.release()
                releases += 1
                if chain[-1] is not t:
                    with pytest.raises(ValueError, match="released"):
                        chain[-1](X)
            n += 1
        run.add(chains=n, releases=releases, binds=n)

    for _ in range(CALLERS):
        run.spawn(caller)
    run.spawn(leaf_rebinder)
    run.spawn(top_rebinder)
    for _ in range(2):
        run.spawn(chain_builder)
    figures = run.run(f"chains/{engine}")
    assert figures["calls"] > 0 and figures["chains"] > 0
    assert top(X) in whole
    top.release()
    for t in leaves:
        t.release()


def test_bind_from_many_threads(cfn, engine):
    arrays, whole = arrays_with_unique_sums(8)
    fn = cfn("f_d_pi", SUM)
    void = nt.Signature("double (void)")
    run = Run(SECONDS)
    counter = itertools.count()

    def binder():
        n = calls = 0
        while run.going():
            a = arrays[next(counter) % len(arrays)]
            # a Function, then an address with signature=: the plan cache of
            # one Signature and the registry are shared by every thread
            t = nt.bind(fn, a, nt.size(a), engine=engine)
            u = nt.bind(t.address, signature=void, engine=engine)
            if t() != float(a.sum()) or u() != float(a.sum()):
                run.fail(f"bind: {t()!r}, {u()!r} != {float(a.sum())!r}")
            assert t in u.dependencies
            u.release()
            t.release()
            n += 2
            calls += 2
        run.add(binds=n, calls=calls, releases=n)

    for _ in range(CALLERS):
        run.spawn(binder)
    figures = run.run(f"bind/{engine}")
    assert figures["binds"] > 0


@pytest.mark.skipif(not FREE_THREADED, reason="the GIL exists on this interpreter")
def test_import_leaves_the_gil_disabled():
    import subprocess
    out = subprocess.run([sys.executable, "-c",
                          "import sys, numthunk; print(sys._is_gil_enabled())"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr

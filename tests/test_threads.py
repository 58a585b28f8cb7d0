"""Threads and fork: thunks created, called, rebound and released from
several threads at once, a release that waits for a call in another thread,
and a fork while a call is in flight. Threaded cases are bounded in time and
check that no thread is left hanging."""

import ctypes
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import numthunk as nt

from thunks import MIXED, SUM, Index, bind, run_py

NATIVE = nt.engine_info()["native_available"]


def test_release_from_another_thread_while_call_converts(cfn, engine):
    a = np.ones(1000)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    converting = threading.Event()

    def slow():
        converting.set()
        time.sleep(0.2)             # the GIL is free: release() runs now

    results, errors = [], []

    def call():
        try:
            results.append(t(a, Index(1000, slow)))
        except ValueError as exc:
            errors.append(str(exc))

    th = threading.Thread(target=call)

    def release_when_converting():
        assert converting.wait(10)
        t.release()

    rel = threading.Thread(target=release_when_converting)
    try:
        th.start()
        rel.start()
    finally:
        th.join(20)
        rel.join(20)
    assert not th.is_alive() and not rel.is_alive()
    assert results == []            # the call gave up: it saw the release
    assert errors == ["the thunk was released while its arguments were converted "
                      "(see docs/lifetime.md)"]
    assert t.released


def test_release_from_another_thread_while_rebind_converts(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, 4)
    converting = threading.Event()
    errors = []

    def slow():
        converting.set()
        time.sleep(0.2)

    def rebind():
        try:
            t.rebind("n", Index(2, slow))
        except ValueError as exc:
            errors.append(str(exc))

    th = threading.Thread(target=rebind)
    th.start()
    assert converting.wait(10)
    t.release()
    th.join(20)
    assert not th.is_alive()
    assert errors and "released" in errors[0]


def test_rebinds_from_two_threads_are_both_kept(cfn, engine):
    t = bind(engine, cfn("f_d_idfl", MIXED), 1, 2.0, 3.0, 4)
    converting = threading.Event()

    def slow():
        converting.set()
        time.sleep(0.2)

    th = threading.Thread(target=lambda: t.rebind("a", Index(10, slow)))
    th.start()
    assert converting.wait(10)
    t.rebind("d", 100)                  # while the other rebind converts
    th.join(20)
    assert not th.is_alive()
    assert t() == 10 + 2.0 + 3.0 + 100


IN_CALL = """
import ctypes, os, signal, sys, threading, time, numthunk as nt
started, finish = threading.Event(), threading.Event()

def body(x):
    started.set()
    finish.wait(30)
    return x

cb = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(body)
t = nt.bind(cb, nt.ARG, engine=ENGINE)
results = []
th = threading.Thread(target=lambda: results.append(t(1.0)))
th.start()
assert started.wait(10)
"""


def run_script(code, timeout=60):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout)


def test_fork_while_another_thread_is_in_a_call(engine):
    """In the child, the other thread's call does not exist: release() must
    not wait for it (it did, for ever)."""
    code = IN_CALL.replace("ENGINE", repr(engine)) + """
pid = os.fork()
if pid == 0:
    t0 = time.monotonic()
    t.release()
    os._exit(0 if t.released and time.monotonic() - t0 < 5 else 3)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    status = "hung"
finish.set()
th.join(10)
print(status if status == "hung" else os.waitstatus_to_exitcode(status), results)
"""
    out = run_script(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "[1.0]"], out.stdout + out.stderr


def test_ctrl_c_stops_a_release_that_waits(engine):
    """release() waits for a call in another thread; Ctrl-C stops the wait
    with KeyboardInterrupt, and the call, when it returns, tears down."""
    code = IN_CALL.replace("ENGINE", repr(engine)) + """
# Python's own handler, as in an interactive session (a run started in the
# background inherits SIGINT ignored, and so does this child)
signal.signal(signal.SIGINT, signal.default_int_handler)
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
threading.Timer(6.0, finish.set).start()       # ends the wait the slow way
t0 = time.monotonic()
try:
    t.release()
    what = "returned"
except KeyboardInterrupt:
    what = "interrupted"
elapsed = time.monotonic() - t0
released = t.released
finish.set()
th.join(10)
try:
    t(1.0)
    after = "called"
except ValueError:
    after = "refused"
print(what, elapsed < 3, released, results, after)
"""
    out = run_script(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["interrupted", "True", "True", "[1.0]", "refused"], \
        out.stdout + out.stderr


def test_thread_stress(cfn, engine, lib):
    """Several threads create thunks and call them from C with the GIL
    released, rebind, reclaim and release them, while they also share one
    thunk that each calls from Python, rebinds and reclaims. Bounded."""
    integrate = cfn("f_d_Fddi", "double (double (*)(double), double, double, int)")
    poly = cfn("f_d_dpi", "double (double x, const double *p, int n)")
    c_quad = lib.f_d_Fddi
    c_quad.restype = ctypes.c_double
    c_quad.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
    shared_p = np.array([1.0, 0.0, 3.0])
    shared = bind(engine, poly, nt.ARG, shared_p, nt.size(shared_p))
    deadline = time.monotonic() + 3.0
    failures = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            while time.monotonic() < deadline:
                p = rng.random(3)
                f = bind(engine, poly, nt.ARG, p, nt.size(p))
                # from C, GIL released by ctypes: integral of p0 + p1 x + p2 x^2
                got = c_quad(f.address, 0.0, 1.0, 200)
                exact = p[0] + p[1] / 2 + p[2] / 3
                if abs(got - exact) > 1e-4:
                    failures.append(("c", got, exact))
                q = rng.random(5)
                f.rebind(1, q)          # size(p) follows: n = 5
                got = c_quad(f.address, 0.0, 1.0, 200)
                exact = sum(q[k] / (k + 1) for k in range(5))
                if abs(got - exact) > 1e-4:
                    failures.append(("rebind", got, exact))
                f.reclaim()
                g = bind(engine, integrate, f, 0.0, 1.0, nt.ARG)
                if abs(g(200) - exact) > 1e-4:
                    failures.append(("composed", g(200), exact))
                g.release()
                f.release()
                # the shared thunk: calls from Python race with rebinds
                x = float(rng.random())
                v = shared(x)
                if not np.isfinite(v):
                    failures.append(("shared", v))
                new = rng.random(int(rng.integers(1, 6)))
                shared.rebind(1, new)
                shared.reclaim()
        except Exception as exc:          # reported below
            failures.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not any(th.is_alive() for th in threads), "a worker hung"
    assert failures == []
    shared.release()


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
def test_fork_create_and_call_in_parent_and_child():
    out = run_py("""
        import ctypes, os, numpy as np, numthunk as nt
        k = nt._core._kernels()
        f = nt.Function(k["sum"], "double (const double *, int)")
        a = np.arange(4.0)
        before = nt.bind(f, a, 4)
        call = ctypes.CFUNCTYPE(ctypes.c_double)
        pid = os.fork()
        if pid == 0:
            ok = call(before.address)() == 6.0
            mine = [nt.bind(f, np.full(4, float(i)), 4) for i in range(2000)]
            ok &= all(call(t.address)() == 4.0 * i for i, t in enumerate(mine))
            ok &= call(before.address)() == 6.0
            os._exit(0 if ok else 3)
        theirs = [nt.bind(f, np.full(4, float(i)), 4) for i in range(2000)]
        ok = all(call(t.address)() == 4.0 * i for i, t in enumerate(theirs))
        _, status = os.waitpid(pid, 0)
        print("parent", ok, "child", os.waitstatus_to_exitcode(status))
        """, NUMTHUNK_ENGINE="native")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "parent True child 0", out.stdout + out.stderr


def test_threads_create_call_rebind_release(cfn, lib):
    """Creating, calling (from C, GIL released by ctypes), rebinding and
    releasing from several threads at once."""
    fn = cfn("f_d_pi", "double (const double *x, int n)")
    call = ctypes.CFUNCTYPE(ctypes.c_double)
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(300):
                a = rng.random(8)
                t = nt.bind(fn, a, nt.size(a))
                c = call(t.address)
                for _ in range(5):
                    if abs(c() - a.sum()) > 1e-12:
                        errors.append("wrong sum")
                b = rng.random(3)
                t.rebind(0, b)
                if abs(c() - b.sum()) > 1e-12:
                    errors.append("wrong sum after rebind")
                t.release()
        except Exception as exc:  # reported below with the thread's failure
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_rebind_is_atomic_for_concurrent_callers(cfn):
    """A caller racing with rebind sees all old or all new values: the sum
    of an array bound with its own size is always one of the two sums."""
    fn = cfn("f_d_pi", "double (const double *x, int n)")
    a, b = np.ones(1000), np.full(10, 7.0)
    t = nt.bind(fn, a, nt.size(a))
    call = ctypes.CFUNCTYPE(ctypes.c_double)(t.address)
    seen = set()
    stop = threading.Event()

    def caller():
        while not stop.is_set():
            seen.add(call())

    th = threading.Thread(target=caller)
    th.start()
    for i in range(2000):
        t.rebind(0, b if i % 2 == 0 else a)
    stop.set()
    th.join()
    assert seen <= {1000.0, 70.0}, seen
    t.reclaim()

"""State changes that run Python code in the middle: __call__ with
forwarded values, rebind, release, reclaim and garbage collection, on both
engines. Deterministic cases go through reentrancy (an __index__ that
releases or rebinds, a target that calls back into Python); threaded ones
are bounded in time and check that no thread is left hanging."""

import ctypes
import gc
import os
import subprocess
import sys
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import numthunk as nt

SUM = "double (const double *x, int n)"
MIXED = "double (int a, double b, float c, int64_t d)"
ENGINES = ["native", "ffi"]
BACKEND = {"native": "native-x86_64-sysv", "ffi": "libffi"}


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


def bind(engine, fn, *args):
    t = nt.bind(fn, *args, engine=engine)
    assert t.backend == BACKEND[engine]
    return t


class Index:
    """An integer whose conversion runs Python code first."""

    def __init__(self, value, action):
        self.value, self.action = value, action

    def __index__(self):
        self.action()
        return self.value


def run_bounded(fn, timeout=20):
    """Run fn in a thread; a hang is a failure, not a stuck test run."""
    out, err = [], []

    def body():
        try:
            out.append(fn())
        except BaseException as exc:    # reported in the main thread
            err.append(exc)

    th = threading.Thread(target=body, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "the operation hung"
    if err:
        raise err[0]
    return out[0]


# ---------------------------------------------------------------- 1: release during a call


def test_release_while_call_converts_its_arguments(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    assert t(a, 4) == 6.0
    with pytest.raises(ValueError, match="released while its arguments were converted"):
        t(a, Index(4, t.release))
    assert t.released
    with pytest.raises(ValueError, match="released"):
        t(a, 4)
    # the same through a value the package resolves first (arr.ctypes)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    with pytest.raises(ValueError, match="released"):
        t(a.ctypes, Index(4, t.release))
    assert t.released


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


# ---------------------------------------------------------------- 2: release during rebind


def test_release_while_rebind_converts(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, 4)
    with pytest.raises(ValueError, match="released while rebind"):
        t.rebind(1, Index(2, t.release))
    assert t.released
    with pytest.raises(ValueError, match="released"):
        t.rebind(1, 2)


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


# ---------------------------------------------------------------- 3: no lost rebind


def test_nested_rebind_is_not_lost(cfn, engine):
    t = bind(engine, cfn("f_d_idfl", MIXED), 1, 2.0, 3.0, 4)
    t.rebind("a", Index(10, lambda: t.rebind("d", 100)))
    assert t() == 10 + 2.0 + 3.0 + 100
    assert [v for v in t.bindings][3] == 100


def test_nested_rebind_then_reclaim_reads_no_freed_array(cfn, engine):
    a, b = np.arange(4.0), np.arange(10.0, 20.0)
    ref_a = weakref.ref(a)
    t = bind(engine, cfn("f_d_pi", SUM), a, 4)
    t.rebind("n", Index(2, lambda: t.rebind("x", b)))
    assert t.bindings[0] is b
    t.reclaim()
    del a
    gc.collect()
    assert ref_a() is None              # a is gone, and the thunk does not read it
    assert t() == 10.0 + 11.0


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


def test_reclaim_with_a_call_in_flight_is_deferred(cfn, engine):
    a, b = np.arange(4.0), np.arange(10.0, 14.0)
    t = bind(engine, cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    holder = bind(engine, cfn("f_d_pi", SUM), a, nt.ARG)
    ref_a = weakref.ref(a)

    def during():
        holder.rebind(0, b)
        holder.reclaim()                # holder has no call in flight: now
        t.reclaim()                     # t is calling: deferred, no error
        return 4

    assert t(b, Index(4, during)) == sum(range(10, 14))
    del a
    gc.collect()
    assert ref_a() is None
    assert holder(4) == sum(range(10, 14))


# ---------------------------------------------------------------- 4: a target releases its thunk


def test_target_that_releases_its_own_thunk(engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
    box = {}

    def body(x):
        box["t"].release()              # deferred until this call returns
        box["released_inside"] = box["t"].released
        return x * 2

    cb = proto(body)
    t = box["t"] = bind(engine, cb, nt.ARG)
    assert run_bounded(lambda: t(3.0)) == 6.0
    assert box["released_inside"] and t.released
    with pytest.raises(ValueError, match="released"):
        t(1.0)
    with pytest.raises(ValueError, match="released"):
        t.address


def test_target_that_reclaims_and_rebinds_its_own_thunk(cfn, engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)
    box = {}

    def body(x, y):
        box["t"].rebind(1, y + 1)
        box["t"].reclaim()
        return x + y

    cb = proto(body)
    t = box["t"] = bind(engine, cb, nt.ARG, 1.0)
    assert run_bounded(lambda: t(1.0)) == 2.0
    assert run_bounded(lambda: t(1.0)) == 3.0


# ---------------------------------------------------------------- 5: derived values follow


def _forms():
    return {
        "ndarray": lambda a: a,
        "ctypes": lambda a: a.ctypes,
        "memoryview": lambda a: memoryview(a),
        "ctypes-array": lambda a: (ctypes.c_double * a.size).from_buffer(a),
    }


@pytest.mark.parametrize("form", list(_forms()))
def test_size_follows_rebind_in_any_form(cfn, engine, form):
    wrap = _forms()[form]
    a, b = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_pi", SUM), wrap(a), nt.size(wrap(a)))
    assert t() == 6.0
    t.rebind(0, wrap(b))
    assert t() == b.sum()               # n followed: all 100 elements
    t.rebind("x", wrap(a))
    assert t() == 6.0


def test_size_of_one_form_follows_the_array_bound_in_another(cfn, engine):
    a, b = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_pi", SUM), memoryview(a), nt.size(a))
    t.rebind(0, b.ctypes)
    assert t() == b.sum()


def test_derived_value_of_another_array_does_not_follow(cfn, engine):
    a, b, c = np.arange(4.0), np.arange(100.0), np.arange(3.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, nt.size(c))
    t.rebind(0, b)
    assert t() == b[:3].sum()


def test_rebind_to_a_pointer_with_a_follower_is_refused(cfn, engine):
    a = np.arange(4.0)
    t = bind(engine, cfn("f_d_pi", SUM), a, nt.size(a))
    with pytest.raises(TypeError, match="argument 2 \\(n: int\\) holds size\\(\\) of the array"):
        t.rebind(0, nt.address(a.ctypes.data))
    assert t() == 6.0


PIPI = "double (const double *x, int n, const double *y, int m)"
IIPP = "double (int n, int m, const double *x, const double *y)"   # x + 10 y


def test_same_array_twice_each_size_follows_its_own_parameter(cfn, engine):
    a, big, other = np.arange(4.0), np.arange(100.0), np.arange(7.0)
    t = bind(engine, cfn("f_d_pipi", PIPI), a, nt.size(a), a, nt.size(a))
    t.rebind(0, big)                    # moves n only: m stays 4
    assert t() == big.sum() + a.sum()
    assert t.bindings[1].obj is big and t.bindings[3].obj is a
    t.rebind(2, other)
    assert t() == big.sum() + other.sum()
    t.rebind("x", a)
    assert t() == a.sum() + other.sum()


def test_sizes_before_their_arrays_pair_by_position(cfn, engine):
    a, big = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_iipp", IIPP), nt.size(a), nt.size(a), a, a)
    t.rebind(2, big)                    # x: the first size follows
    assert t() == big.sum() + 10 * a.sum()
    t.rebind(3, big[:50].copy())        # y: the second one
    assert t() == big.sum() + 10 * big[:50].sum()


def test_one_size_of_an_array_bound_twice_follows_the_buffer_before_it(cfn, engine):
    a, big = np.arange(4.0), np.arange(100.0)
    t = bind(engine, cfn("f_d_pipi", PIPI), a, nt.size(a), a, 2)
    t.rebind(2, big)                    # y: n was bound beside x, and stays
    assert t() == a.sum() + big[:2].sum()
    t.rebind(0, big)                    # x: n follows
    assert t() == big.sum() + big[:2].sum()


def test_a_size_follows_the_buffer_holding_its_array_object(cfn, engine):
    a, big = np.arange(4.0), np.arange(100.0)
    # x holds a memoryview of a, y holds a itself: size(a) was made from a
    t = bind(engine, cfn("f_d_pipi", PIPI), memoryview(a), 2, a, nt.size(a))
    t.rebind(0, big)
    assert t() == big[:2].sum() + a.sum()
    t.rebind(2, big)
    assert t() == big[:2].sum() + big.sum()


def test_kernel_reads_each_array_by_its_own_size_under_asan(engine):
    """The issue's case: one array bound to two pointer parameters, each with
    its size(); after rebind(0, big) the kernel reads n elements of x and m
    of y. Built with AddressSanitizer, a read past y is a report."""
    from conftest import HERE, compile_shared
    from ntbuild import compiler_env
    cc = os.environ.get("CC") or "gcc"
    path = compile_shared(os.path.join(HERE, "fixtures", "fixture.c"), "fixture",
                          compiler=cc, extra=["-fsanitize=address", "-g"], label="asan")
    runtime = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True, env=compiler_env()).stdout.strip()
    assert os.path.isabs(runtime), f"{cc} has no AddressSanitizer runtime: {runtime!r}"
    code = f"""
import ctypes, numpy as np, numthunk as nt
lib = ctypes.CDLL({path!r})
fn = nt.Function(ctypes.cast(lib.f_d_pipi, ctypes.c_void_p).value, {PIPI!r}, owner=lib)
a, big = np.arange(4.0), np.arange(100.0)
t = nt.bind(fn, a, nt.size(a), a, nt.size(a), engine={engine!r})
t.rebind(0, big)
print(t())
"""
    env = {**os.environ, "LD_PRELOAD": runtime, "ASAN_OPTIONS": "detect_leaks=0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "AddressSanitizer" not in out.stderr, out.stderr[-3000:]
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout) == sum(range(100)) + 6.0


# ---------------------------------------------------------------- 6: garbage collection


def test_function_call_creates_no_garbage(cfn):
    fn_lib = cfn("f_d_d", "double (double)")
    addr, lib = fn_lib.address, fn_lib.owner
    for _ in range(200):                                      # warm up
        nt.Function(addr, "double (double)", owner=lib)(1.0)
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20_000):
            assert nt.Function(addr, "double (double)", owner=lib)(float(i)) == float(i)
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    finally:
        gc.enable()
    assert grown < 512 * 1024, f"{grown} bytes kept by 20,000 calls"


def test_address_owned_by_its_holder_is_collected(cfn, engine):
    class Holder:
        pass

    h = Holder()
    h.buf = np.zeros(3)
    h.t = bind(engine, cfn("f_p_p", "void *(void *)"), nt.address(h.buf.ctypes.data, owner=h))
    ref_h, ref_t = weakref.ref(h), weakref.ref(h.t)
    del h
    gc.collect()
    assert ref_h() is None and ref_t() is None


def test_callback_closing_over_its_own_thunk_is_collected(engine):
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)

    def make():
        t = None

        def body(x):
            return x + (0.0 if t is None else 1.0)

        cb = proto(body)
        t = bind(engine, cb, nt.ARG)
        return t

    t = make()
    assert t(1.0) == 2.0
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


def test_thunk_rebound_into_itself_is_collected(cfn, engine):
    t = bind(engine, cfn("f_p_p", "void *(void *)"), None)
    t.rebind(0, nt.address(t.address, owner=t))
    assert t() == t.address
    t.reclaim()
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


# ---------------------------------------------------------------- 7: composed thunk depth


def test_composed_depth_is_bounded_for_libffi(cfn):
    t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine="ffi")
    chain = [t]
    for _ in range(127):
        chain.append(nt.bind(chain[-1], nt.ARG, engine="ffi"))
    assert chain[-1].chain == 127
    with pytest.raises(ValueError, match=r"chain of 129 thunks.*at most 128 levels on the "
                                         r"engines in this chain \(libffi: 128"):
        nt.bind(chain[-1], nt.ARG, engine="ffi")
    with pytest.raises(ValueError, match="at most 128 levels"):
        nt.bind(chain[-1], nt.ARG, engine="native")    # a libffi thunk is in the chain
    # the deepest allowed chain runs on a 256 KiB thread stack
    threading.stack_size(256 * 1024)
    try:
        assert run_bounded(lambda: chain[-1](2.5)) == 2.5
    finally:
        threading.stack_size(0)


def test_composed_depth_of_native_chains(cfn):
    t = nt.bind(cfn("f_d_d", "double (double)"), nt.ARG, engine="native")
    chain = [t]
    for _ in range(1023):
        chain.append(nt.bind(chain[-1], nt.ARG, engine="native"))
    assert chain[-1].chain == 1023
    with pytest.raises(ValueError, match=r"at most 1024 levels .*native-[\w-]+: 1024"):
        nt.bind(chain[-1], nt.ARG, engine="native")
    threading.stack_size(256 * 1024)
    try:
        assert run_bounded(lambda: chain[-1](2.5)) == 2.5
    finally:
        threading.stack_size(0)


# ---------------------------------------------------------------- fork, signals

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


# ---------------------------------------------------------------- the core without the package


def test_core_works_without_the_python_package(fixture_path):
    code = f"""
import ctypes, numpy as np
from numthunk import _core
lib = ctypes.CDLL({fixture_path!r})
addr = ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value
sig = _core.Signature("double (const double *x, int n)")
a = np.arange(5.0)
t = _core.Thunk(sig, addr, (a, _core.Derived("size", a)))
assert t() == 10.0
f = _core.Thunk(sig, addr, (_core.ARG, _core.ARG))
assert f(a, 3) == 3.0
t.rebind(0, np.arange(3.0)); assert t() == 3.0
print("ok")
"""
    # numthunk/__init__ imports the package; load the extension on its own
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(nt.__file__)), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c",
                          "import importlib.util, sys, os\n"
                          "import numthunk._core\n" + code],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---------------------------------------------------------------- stress


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

"""The engines: W^X, fork, threads, rebind atomicity, slot reuse.

Process-wide properties are checked in subprocesses, so that nothing else
the test process loaded (libffi closures, JITs) muddies them."""

import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import numthunk as nt

NATIVE = nt.backend_info()["native_available"]


def run_py(code, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)


def test_backend_info_names_engine_and_policy():
    info = nt.backend_info()
    assert info["fallback_engine"] == "libffi"
    assert info["engine"] in ("libffi", "native-x86_64-sysv")
    assert info["memory_policy"]
    out = run_py("import numthunk; print(numthunk.backend_info()['engine'])", NUMTHUNK_BACKEND="ffi")
    assert out.stdout.strip() == "libffi"
    bad = run_py("import numthunk", NUMTHUNK_BACKEND="fast")
    assert bad.returncode != 0 and "NUMTHUNK_BACKEND=fast" in bad.stderr


W_X_CHECK = """
import ctypes, numpy as np, numthunk as nt
k = nt._core._kernels()
f = nt.Function(k["sum"], "double (const double *, int)")
arrays = [np.full(4, float(i)) for i in range(3000)]
thunks = [nt.bind(f, a, 4) for a in arrays]
thunks += [nt.bind(f, nt.ARG, nt.ARG), nt.bind(f, arrays[0], nt.ARG)]
assert all(t.backend != "libffi" for t in thunks), {t.backend for t in thunks}
call = ctypes.CFUNCTYPE(ctypes.c_double)
assert call(thunks[7].address)() == 28.0
for t in thunks[:1000]:
    t.release()
rwx = []
with open("/proc/self/maps") as fh:
    for line in fh:
        perms = line.split()[1]
        if "w" in perms and "x" in perms:
            rwx.append(line.strip())
print("RWX", len(rwx))
for line in rwx:
    print(line)
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform: every plan runs on libffi")
@pytest.mark.parametrize("policy", ["", "memfd", "mprotect"])
def test_no_writable_executable_mapping(policy):
    out = run_py(W_X_CHECK, NUMTHUNK_BACKEND="native", NUMTHUNK_EXECMEM=policy)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("RWX 0"), out.stdout


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
        """, NUMTHUNK_BACKEND="native")
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


def test_no_reuse_keeps_addresses_unique():
    out = run_py("""
        import numthunk as nt
        k = nt._core._kernels()
        f = nt.Function(k["sum"], "double (const double *, int)")
        import numpy as np
        a = np.ones(4)
        seen = set()
        for engine in ("native", "ffi"):
            for _ in range(20000):
                t = nt.bind(f, a, 4, engine=engine)
                seen.add(t.address)
                t.release()
        print(len(seen))
        """, NUMTHUNK_NO_REUSE="1")
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == 40000 if NATIVE else int(out.stdout) >= 20000


def test_quarantine_delays_reuse():
    """Freed slots wait before reuse: the next thousands of thunks never
    get an address released just before."""
    k = nt._core._kernels()
    f = nt.Function(k["sum"], "double (const double *, int)")
    a = np.ones(4)
    for engine in (["native", "ffi"] if NATIVE else ["ffi"]):
        t = nt.bind(f, a, 4, engine=engine)
        released = t.address
        t.release()
        fresh = [nt.bind(f, a, 4, engine=engine) for _ in range(4000)]
        assert released not in {x.address for x in fresh}, engine


@pytest.mark.parametrize("engine", ["native", "ffi"])
def test_same_results_on_both_engines(cfn, engine):
    if engine == "native" and not NATIVE:
        pytest.skip("no native engine on this platform")
    many = cfn("f_d_iiiiiiiidddddddddd", "double (" + ", ".join(["int"] * 8 + ["double"] * 10) + ")")
    vals = list(range(-4, 4)) + [0.25 * k for k in range(10)]
    expected = sum(v * (i + 1) for i, v in enumerate(vals))
    rng = np.random.default_rng(1)
    for _ in range(200):
        mask = rng.random(18) < 0.5
        args = [nt.ARG if m else v for m, v in zip(mask, vals)]
        t = nt.bind(many, *args, engine=engine)
        fwd = [v for m, v in zip(mask, vals) if m]
        assert t(*fwd) == expected
        assert t.ctypes(*fwd) == expected
        assert t.backend == ("libffi" if engine == "ffi" else "native-x86_64-sysv")

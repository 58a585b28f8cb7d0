"""Properties whose violation must show as a failed assertion of its own,
not as a crash or a hang somewhere else: no writable+executable mapping
even after the code memory grows, rsp aligned at the target's entry when
the handler builds a frame, and reference counts that balance."""

import ctypes
import gc
import os
import platform
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numthunk as nt

import ntbuild

NATIVE = nt.backend_info()["native_available"]
X86_64_LINUX = platform.machine() == "x86_64" and sys.platform.startswith("linux")


def run_py(code, **env):
    # the child imports the numthunk this process tested, and ntbuild
    path = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__))),
                            os.path.dirname(os.path.abspath(__file__)),
                            os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": path, **env},
                          timeout=300)


# ---------------------------------------------------------------- reference counts
#
# First in the file: a missing reference would make later tests crash.
# Each check repairs a count that came out short before asserting, so the
# failure is reported as such instead of crashing the test process when the
# object is freed twice later.


def count_is(obj, want):
    """sys.getrefcount(obj) == want (the caller's own reference included)."""
    got = sys.getrefcount(obj) - 1          # minus this function's argument
    for _ in range(want - got):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return got == want, got


class Owner:
    pass


# Every object these tests hand to numthunk also sits here, never freed, so
# a reference missing in one place shows as a count that is off by one in
# the test that looks at it, not as a crash in the next test.
KEEP = []


def kept(*objs):
    KEEP.extend(objs)
    return objs[0] if len(objs) == 1 else objs


def _sum_fn():
    return nt._core._kernels()["sum"]


def test_owner_is_counted_and_given_back():
    """A thunk keeps its target (the Function, which keeps its owner) alive."""
    owner = kept(Owner())
    f = kept(nt.Function(_sum_fn(), "double (const double *x, int n)", owner=owner))
    arr = kept(np.ones(2))
    gc.collect()
    rf, ro, ra = sys.getrefcount(f), sys.getrefcount(owner), sys.getrefcount(arr)
    t = nt.bind(f, arr, 2)
    assert sys.getrefcount(f) >= rf + 1
    assert t() == 2.0
    del t
    ok_f, got_f = count_is(f, rf)
    ok_a, got_a = count_is(arr, ra)          # repaired before anything is collected
    gc.collect()
    assert ok_f, f"the target's count went from {rf} to {got_f} after bind + del"
    assert ok_a, f"a bound array's count went from {ra} to {got_a} after bind + del"
    assert count_is(owner, ro)[0]


def test_bound_objects_are_counted_and_given_back():
    f = kept(nt.Function(_sum_fn(), "double (const double *x, int n)"))
    arr = kept(np.arange(5.0))
    big = kept(10**12 + int("5"))     # a fresh int object, not a shared constant
    gc.collect()
    r_arr, r_n = sys.getrefcount(arr), sys.getrefcount(big)
    t = nt.bind(f, arr, nt.ARG)
    assert sys.getrefcount(arr) >= r_arr + 1      # the binding holds it
    assert t(5) == 10.0
    t.release()
    ok, got = count_is(arr, r_arr)
    gc.collect()
    assert ok, f"a bound array's count went from {r_arr} to {got} after bind + release"
    del t
    gc.collect()
    assert count_is(arr, r_arr)[0]

    f2 = kept(nt.Function(_sum_fn(), "int64_t (int64_t)"))
    t2 = nt.bind(f2, big)
    ok, got = count_is(big, r_n + 1)
    assert ok, f"a bound int's count went from {r_n} to {got} with the binding"
    del t2
    gc.collect()
    ok, got = count_is(big, r_n)
    assert ok, f"a bound int's count went from {r_n} to {got} after bind + del"


def test_rebind_counts_the_new_value_and_gives_back_the_old():
    f = kept(nt.Function(_sum_fn(), "double (const double *x, int n)"))
    a, b = kept(np.arange(3.0), np.arange(4.0))
    gc.collect()
    ra, rb = sys.getrefcount(a), sys.getrefcount(b)
    t = nt.bind(f, a, 3)
    t.rebind(0, b)
    assert t() == 3.0                              # b[:3] summed
    assert sys.getrefcount(b) >= rb + 1
    # a stays pinned while a racing caller may still read the old values
    t.release()
    ok_a, got_a = count_is(a, ra)
    ok_b, got_b = count_is(b, rb)
    gc.collect()
    assert (ok_a, ok_b) == (True, True), f"counts {got_a}/{ra} and {got_b}/{rb} after release"
    del t
    gc.collect()
    assert count_is(a, ra)[0] and count_is(b, rb)[0]


def test_capsule_keeps_its_thunk_alive():
    f = kept(nt.Function(_sum_fn(), "double (const double *x, int n)"))
    t = kept(nt.bind(f, kept(np.ones(3)), 3))
    gc.collect()
    r0 = sys.getrefcount(t)
    llc = t.lowlevelcallable()
    assert sys.getrefcount(t) >= r0 + 1
    del llc
    gc.collect()
    assert count_is(t, r0)[0]
    cap = nt._core._capsule(t.address, "double (void)", t)
    ok, got = count_is(t, r0 + 1)
    assert ok, f"a capsule took {got - r0} references to its owner, not 1"
    del cap
    gc.collect()
    assert count_is(t, r0)[0]


# ---------------------------------------------------------------- W^X

# Many distinct plan shapes (which of 20 parameters are bound) give many
# handlers: far more code than one chunk of executable memory holds, so new
# chunks and new stub blocks are mapped while the test runs.
W_X_GROW = """
import ctypes, random, numthunk as nt, ntbuild
lib = ntbuild.load("trust_x86_64.S", "trust")
addr = ntbuild.address(lib, "entry_misalign")
sig = "uint64_t (" + ", ".join(["int64_t"] * 10 + ["double"] * 10) + ")"
f = nt.Function(addr, sig)
def maps():
    with open("/proc/self/maps") as fh:
        return [l.split() for l in fh]
before = sum("x" in m[1] for m in maps())
rng = random.Random(7)
patterns = rng.sample(range(1 << 20), 1500)
thunks = []
for p in patterns:
    args = [nt.ARG if p >> i & 1 else (i if i < 10 else i + 0.5) for i in range(20)]
    thunks.append(nt.bind(f, *args))
assert all(t.backend == "native-x86_64-sysv" for t in thunks), {t.backend for t in thunks}
# some of them run (and their target sees an aligned stack)
bad = []
for t, p in list(zip(thunks, patterns))[::37]:
    types = [ctypes.c_int64 if i < 10 else ctypes.c_double for i in range(20) if p >> i & 1]
    vals = [i if i < 10 else i + 0.5 for i in range(20) if p >> i & 1]
    if ctypes.CFUNCTYPE(ctypes.c_uint64, *types)(t.address)(*vals) != 0:
        bad.append(p)
assert not bad, bad
after = [m for m in maps() if "x" in m[1]]
rwx = [" ".join(m) for m in maps() if "w" in m[1] and "x" in m[1]]
print("POLICY", nt.backend_info()["memory_policy"])
print("NEWEXEC", len(after) - before)
print("RWX", len(rwx))
for line in rwx:
    print(line)
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
@pytest.mark.parametrize("policy, name", [("memfd", "memfd-pwrite"),
                                          ("mprotect", "mprotect-sealed")])
def test_no_writable_executable_mapping_as_code_memory_grows(policy, name):
    out = run_py(W_X_GROW, NUMTHUNK_BACKEND="native", NUMTHUNK_EXECMEM=policy)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"POLICY {name}", out.stdout
    # more than one new executable mapping: the code memory did grow
    assert int(lines[1].split()[1]) >= 2, out.stdout
    assert lines[2] == "RWX 0", out.stdout


# ---------------------------------------------------------------- stack alignment


@pytest.mark.skipif(not X86_64_LINUX, reason="the alignment probe is x86-64 assembly")
@pytest.mark.parametrize("engine", ["native", "ffi"])
def test_target_entered_with_aligned_stack(engine):
    """Targets with 1..5 stack parameters, some forwarded, some bound, so
    the handler takes its frame form with both parities of stack slots;
    the probe returns (rsp + 8) % 16 at its entry: 0 when aligned."""
    if engine == "native" and not NATIVE:
        pytest.fail("the native engine is missing on x86-64 Linux")
    lib = ntbuild.load("trust_x86_64.S", "trust")
    addr = ntbuild.address(lib, "entry_misalign")
    rng = random.Random(3)
    checked = 0
    for nint in range(6, 12):
        for ndbl in (0, 3, 9, 10):
            sig = "uint64_t (" + ", ".join(["int64_t"] * nint + ["double"] * ndbl) + ")"
            f = nt.Function(addr, sig)
            n = nint + ndbl
            for fwd_mask in [0, (1 << n) - 1, 1, 1 << (n - 1)] + [rng.getrandbits(n) for _ in range(4)]:
                args = [nt.ARG if fwd_mask >> i & 1 else (i if i < nint else i + 0.25)
                        for i in range(n)]
                t = nt.bind(f, *args, engine=engine)
                types = [ctypes.c_int64 if i < nint else ctypes.c_double
                         for i in range(n) if fwd_mask >> i & 1]
                vals = [i if i < nint else i + 0.25 for i in range(n) if fwd_mask >> i & 1]
                got = ctypes.CFUNCTYPE(ctypes.c_uint64, *types)(t.address)(*vals)
                assert got == 0, f"{sig}, forwarded mask {fwd_mask:#x}: rsp misaligned by {got}"
                assert t(*vals) == 0
                checked += 1
    assert checked == 6 * 4 * 8



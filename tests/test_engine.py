"""The engines: names, W^X as the code memory grows, the stack alignment a
target is entered with, narrow integers for callees that trust their
caller, memory policies and slot reuse. (Threads and fork: test_threads.py.)

Process-wide properties are checked in subprocesses, so that nothing else
the test process loaded (libffi closures, JITs) muddies them."""

import ctypes
import os
import platform
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numthunk as nt

import ntbuild
from conftest import ENGINES
from thunks import run_py

NATIVE = nt.engine_info()["native_available"]
X86_64_LINUX = platform.machine() == "x86_64" and sys.platform.startswith("linux")


def test_engine_info_names_engine_and_policy():
    info = nt.engine_info()
    assert info["fallback_engine"] == "libffi"
    assert info["engine"] in ("libffi", "native-x86_64-sysv")
    assert info["memory_policy"]
    out = run_py("import numthunk; print(numthunk.engine_info()['engine'])",
                 NUMTHUNK_ENGINE="ffi")
    assert out.stdout.strip() == "libffi"
    bad = run_py("import numthunk", NUMTHUNK_ENGINE="fast")
    assert bad.returncode != 0 and "NUMTHUNK_ENGINE='fast'" in bad.stderr


# ---------------------------------------------------------------------------
# The old names (Thunk.backend, backend_info(), NUMTHUNK_BACKEND) still work
# for one release, each with a DeprecationWarning naming the new one.

def test_backend_info_is_engine_info_and_warns():
    with pytest.warns(DeprecationWarning, match=r"use numthunk\.engine_info\(\)") as rec:
        old = nt.backend_info()
    assert rec[0].filename == __file__          # points at the caller
    assert old == nt.engine_info()
    assert set(old) == {"config", "engine", "fallback_engine", "fallbacks", "memory_policy",
                        "native_available"}
    assert "backend_info" not in nt.__all__ and "engine_info" in nt.__all__


def test_thunk_backend_is_engine_and_warns(engine):
    k = nt._core._kernels()
    f = nt.Function(k["sum"], "double (const double *, int)")
    t = nt.bind(f, np.ones(3), 3, engine=engine)
    with pytest.warns(DeprecationWarning, match=r"use Thunk\.engine") as rec:
        old = t.backend
    assert rec[0].filename == __file__
    assert old == t.engine == engine_for(engine, None)
    t.release()
    with pytest.raises(ValueError), pytest.warns(DeprecationWarning):
        t.backend  # noqa: B018


OLD_NAME_CHECK = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import numpy as np, numthunk as nt
    import numthunk                              # again: no second warning
k = nt._core._kernels()
t = nt.bind(nt.Function(k["sum"], "double (const double *, int)"), np.ones(3), 3)
print(repr((nt.engine_info()["engine"], nt.engine_info()["config"]["engine_from"], t.engine,
            [(w.category.__name__, str(w.message)) for w in caught])))
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_engine_variable_makes_the_default(engine):
    out = run_py(OLD_NAME_CHECK, NUMTHUNK_ENGINE=engine)
    assert out.returncode == 0, out.stderr
    want = engine_for(engine, None)
    assert eval(out.stdout) == (want, "NUMTHUNK_ENGINE", want, [])


@pytest.mark.parametrize("engine", ENGINES)
def test_old_engine_variable_still_read_and_warns_once(engine):
    out = run_py(OLD_NAME_CHECK, NUMTHUNK_BACKEND=engine)
    assert out.returncode == 0, out.stderr
    want = engine_for(engine, None)
    got, source, thunk_engine, caught = eval(out.stdout)
    assert (got, source, thunk_engine) == (want, "NUMTHUNK_BACKEND", want)
    assert caught == [("DeprecationWarning", "NUMTHUNK_BACKEND is deprecated: set "
                       "NUMTHUNK_ENGINE instead (the same values)")]


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engine_variables_equal_is_fine(engine):
    out = run_py(OLD_NAME_CHECK, NUMTHUNK_ENGINE=engine, NUMTHUNK_BACKEND=engine)
    assert out.returncode == 0, out.stderr
    want = engine_for(engine, None)
    assert eval(out.stdout) == (want, "NUMTHUNK_ENGINE", want, [])


@pytest.mark.parametrize("new, old", [("ffi", "native"), ("native", "ffi"), ("ffi", "libffi")])
def test_both_engine_variables_different_fail_the_import(new, old):
    out = run_py("import numthunk", NUMTHUNK_ENGINE=new, NUMTHUNK_BACKEND=old)
    assert out.returncode != 0, out.stdout
    assert (f"ImportError: NUMTHUNK_ENGINE={new} and NUMTHUNK_BACKEND={old} differ: set "
            "NUMTHUNK_ENGINE only") in out.stderr, out.stderr


def test_bad_engine_variable_names_it():
    out = run_py("import numthunk", NUMTHUNK_ENGINE="fast", NUMTHUNK_BACKEND="")
    assert out.returncode != 0
    assert f"ImportError: NUMTHUNK_ENGINE='fast': {EXPECTED}" in out.stderr, out.stderr
    out = run_py("import numthunk", NUMTHUNK_BACKEND="fast")
    assert f"ImportError: NUMTHUNK_BACKEND='fast': {EXPECTED}" in out.stderr, out.stderr


# ---------------------------------------------------------------------------
# Engine names: one parser for NUMTHUNK_ENGINE, engine= of bind() and
# Thunk(), and the C API's flags (tests/test_capi.py). What a thunk reports
# (t.engine) and engine_info() stay the engines' own names.

NAMES = ["native", "ffi", "libffi", "auto"]
REFUSED = ["fast", "Native", "FFI", "LIBFFI", " ffi", "ffi ", "native-x86_64-sysv", "lib ffi",
           "none", "default"]
EXPECTED = "expected 'native', 'ffi', 'libffi' or 'auto'"
NATIVE_NAME = "native-x86_64-sysv"


def engine_for(name, default):
    """The engine a thunk gets when asked for name; default: for 'auto'."""
    if name in ("ffi", "libffi") or (name == "native" and not NATIVE):
        return "libffi"
    return NATIVE_NAME if name == "native" else default


ENV_CHECK = """
import numpy as np, numthunk as nt
k = nt._core._kernels()
f = nt.Function(k["sum"], "double (const double *, int)")
t = nt.bind(f, np.ones(3), 3)
print(repr((nt.engine_info()["engine"], nt.engine_info()["config"]["engine"], t.engine, t())))
"""


@pytest.mark.parametrize("name", NAMES + [""])   # "": unset, so auto
def test_engine_names_in_the_environment(name):
    out = run_py(ENV_CHECK, NUMTHUNK_ENGINE=name)
    if name == "native" and not NATIVE:
        assert out.returncode != 0 and "NUMTHUNK_ENGINE='native': this platform has no " \
            "native engine" in out.stderr, out.stderr
        return
    assert out.returncode == 0, out.stderr
    engine, configured, thunk_engine, value = eval(out.stdout)
    want = engine_for(name or "auto", NATIVE_NAME if NATIVE else "libffi")
    assert (engine, configured, thunk_engine, value) == (want, name or "auto", want, 3.0)


@pytest.mark.parametrize("name", REFUSED + ["ffi\t"])
def test_engine_names_refused_in_the_environment(name):
    out = run_py("import numthunk", NUMTHUNK_ENGINE=name)
    assert out.returncode != 0, out.stdout
    assert f"ImportError: NUMTHUNK_ENGINE='{name}': {EXPECTED}" in out.stderr, out.stderr


@pytest.mark.parametrize("name", NAMES + [None])
def test_engine_names_in_bind_and_thunk(name):
    k = nt._core._kernels()
    f = nt.Function(k["sum"], "double (const double *, int)")
    default = nt.bind(f, np.ones(3), 3).engine
    want = engine_for(name or "auto", default)
    assert nt.bind(f, np.ones(3), 3, engine=name).engine == want
    t = nt._core.Thunk(f._signature, f.address, (np.ones(3), 3), engine=name)
    assert (t.engine, t()) == (want, 3.0)
    # by position, as bind() passes it
    t = nt._core.Thunk(f._signature, f.address, (np.ones(3), 3), f, True, None, name)
    assert t.engine == want


def test_engine_names_refused_in_bind_and_thunk():
    k = nt._core._kernels()
    f = nt.Function(k["sum"], "double (const double *, int)")
    for name in REFUSED + ["", "ffi\x00", "native\x00junk", "ffi\u00e9"]:
        message = re.escape(f"engine={name!r}: {EXPECTED}")
        with pytest.raises(ValueError, match=f"^{message}$"):
            nt.bind(f, np.ones(3), 3, engine=name)
        with pytest.raises(ValueError, match=f"^{message}$"):
            nt._core.Thunk(f._signature, f.address, (np.ones(3), 3), engine=name)
        with pytest.raises(ValueError, match=f"^{message}$"):
            nt._core.Thunk(f._signature, f.address, (np.ones(3), 3), f, True, None, name)
    for name in (b"ffi", 1, ["ffi"]):
        with pytest.raises(TypeError, match=r"engine= must be a str \('native', 'ffi', 'libffi' "
                                            r"or 'auto'\) or None, not"):
            nt._core.Thunk(f._signature, f.address, (np.ones(3), 3), engine=name)
        with pytest.raises(TypeError, match=r"^bind\(\): engine= must be a str \('native', "
                                            r"'ffi', 'libffi' or 'auto'\) or None, not"):
            nt.bind(f, np.ones(3), 3, engine=name)


W_X_CHECK = """
import ctypes, numpy as np, numthunk as nt
k = nt._core._kernels()
f = nt.Function(k["sum"], "double (const double *, int)")
arrays = [np.full(4, float(i)) for i in range(3000)]
thunks = [nt.bind(f, a, 4) for a in arrays]
thunks += [nt.bind(f, nt.ARG, nt.ARG), nt.bind(f, arrays[0], nt.ARG)]
assert all(t.engine != "libffi" for t in thunks), {t.engine for t in thunks}
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


@pytest.mark.skipif(not NATIVE,
                    reason="no native engine on this platform: every plan runs on libffi")
@pytest.mark.parametrize("policy", ["", "memfd", "mprotect"])
def test_no_writable_executable_mapping(policy):
    out = run_py(W_X_CHECK, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM=policy)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("RWX 0"), out.stdout


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


def test_quarantine_holds_exactly_its_size(engine):
    """life/quarantine.c nt_quarantine_push: an entry leaves when the ring holds
    more than config['quarantine'] (32768): its address does not come back
    after quarantine - 1 further releases, and does after quarantine (the
    slot freed last is the next one given out). A fresh process: the ring
    starts empty."""
    out = run_py("""
        import numpy as np
        import numthunk as nt
        k = nt._core._kernels()
        f = nt.Function(k["sum"], "double (const double *, int)")
        a = np.ones(4)
        q = nt.engine_info()["config"]["quarantine"]
        for n in (q - 1, q):
            x = nt.bind(f, a, 4, engine=ENGINE)
            released = x.address
            x.release()
            for _ in range(n):
                nt.bind(f, a, 4, engine=ENGINE).release()
            t = nt.bind(f, a, 4, engine=ENGINE)
            assert t() == 4.0
            print(q, n, t.address == released)
            t.release()
        """.replace("ENGINE", repr(engine)))
    assert out.returncode == 0, out.stderr
    q = 32768
    assert out.stdout.split() == [str(q), str(q - 1), "False", str(q), str(q), "True"]


# life/quarantine.c's ring of released entries, oldest out first: while it grows
# from its first 1024 entries to past the quarantine, and after its head
# has gone round the ring (pops start once the quarantine is full; the ring
# then holds the quarantine in a capacity of the next power of two above
# it). In a fresh process every thunk is made and released at once, so the
# address the quarantine lets out is the next one given: thunk j gets thunk
# j - q - 1's address (native: the slot given back last is taken first;
# libffi: its allocator takes the closure freed last, but not always).
QUARANTINE_ORDER = """
import numpy as np
import numthunk as nt
k = nt._core._kernels()
f = nt.Function(k["sum"], "double (const double *, int)")
a = np.arange(8.0)
q = nt.engine_info()["config"]["quarantine"]
cap = 1024
while cap <= q:
    cap *= 2
n = q + 1 + 2 * cap + 1000               # the head goes round twice
addresses, last = [], {}
gaps = []                               # for each reuse: releases since its last one
for j in range(n):
    t = nt.bind(f, a, j % 8, engine=ENGINE)
    if j % 97 == 0:
        assert t() == sum(range(j % 8)), j
    if t.address in last:
        gaps.append(j - last[t.address])
    last[t.address] = j
    addresses.append(t.address)
    t.release()
fifo = all(addresses[j] == addresses[j - q - 1] for j in range(q + 1, n))
print(q, n, len(set(addresses[:q + 1])), min(gaps), len(gaps), fifo)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_the_quarantine_lets_addresses_out_in_release_order(engine):
    out = run_py(QUARANTINE_ORDER.replace("ENGINE", repr(engine)))
    assert out.returncode == 0, out.stderr[-3000:]
    q, n, first, shortest, reused, fifo = out.stdout.split()
    q, n = int(q), int(n)
    assert int(first) == q + 1                      # nothing came back too soon
    assert int(shortest) == q + 1                   # never before q later releases
    if engine == "native":
        assert (int(reused), fifo) == (n - q - 1, "True")
    else:
        assert int(reused) > (n - q - 1) * 9 // 10


@pytest.mark.parametrize("engine", ENGINES)
def test_same_results_on_both_engines(cfn, engine):
    if engine == "native" and not NATIVE:
        pytest.skip("no native engine on this platform")
    many = cfn("f_d_iiiiiiiidddddddddd",
               "double (" + ", ".join(["int"] * 8 + ["double"] * 10) + ")")
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
        assert t.engine == ("libffi" if engine == "ffi" else "native-x86_64-sysv")


# ---------------------------------------------------------------------------
# More than 64 parameters: the bind pattern leaves its stack buffer
# (life/commit.c take_plan), the plan cache compares whole patterns, and most
# values go on the stack. Generated C targets, compiled here: the compiler
# is the oracle (a direct ctypes call of the same function).

MANY_TYPES = [("int", ctypes.c_int), ("double", ctypes.c_double), ("int8_t", ctypes.c_int8),
              ("float", ctypes.c_float), ("int64_t", ctypes.c_int64),
              ("uint16_t", ctypes.c_uint16)]
MANY_COUNTS = (64, 65, 128, 129)


def many_value(i):
    """Parameter i's value: exact in its C type and in a double sum."""
    c, _ = MANY_TYPES[i % len(MANY_TYPES)]
    v = (i % 7) - 3 if c not in ("uint16_t",) else 60000 + i
    return v + 0.25 if c in ("double", "float") else v


@pytest.fixture(scope="module")
def many_params(tmp_path_factory):
    """{n: (Function, ctypes function)} for double f_many_<n>(...), which
    returns the sum of (i + 1) * a_i: every parameter's position counts."""
    src = ["#include <stdint.h>"]
    for n in MANY_COUNTS:
        params = ", ".join(f"{MANY_TYPES[i % 6][0]} a{i}" for i in range(n))
        body = " + ".join(f"{i + 1}.0 * a{i}" for i in range(n))
        src.append(f"double f_many_{n}({params}) {{ return {body}; }}")
    path = tmp_path_factory.mktemp("many") / "many_params.c"
    path.write_text("\n".join(src) + "\n")
    lib = ctypes.CDLL(ntbuild.compile_shared(str(path), "many_params"))
    out = {}
    for n in MANY_COUNTS:
        fn = getattr(lib, f"f_many_{n}")
        fn.restype = ctypes.c_double
        fn.argtypes = [MANY_TYPES[i % 6][1] for i in range(n)]
        sig = "double (" + ", ".join(MANY_TYPES[i % 6][0] for i in range(n)) + ")"
        out[n] = (nt.Function(ctypes.cast(fn, ctypes.c_void_p).value, sig), fn)
    return out


@pytest.mark.parametrize("n", MANY_COUNTS)
@pytest.mark.parametrize("engine", ENGINES)
def test_binds_over_64_parameters(many_params, engine, n):
    """64, 65, 128 and 129 parameters of six C types, bound and forwarded
    in every pattern drawn, on both engines: each thunk returns what the
    compiled function returns called directly. Two patterns that differ
    only past the 64th parameter are two plans; a value past it rebinds.
    The native engine takes at most 128 parameters (abi.max_args); with
    129 a thunk asked of it is libffi's (docs/engines.md)."""
    if engine == "native" and not NATIVE:
        pytest.skip("no native engine on this platform")
    thunk_engine = NATIVE_NAME if engine == "native" and n <= 128 else "libffi"
    f, direct = many_params[n]
    vals = [many_value(i) for i in range(n)]
    expected = direct(*vals)
    assert expected == sum((i + 1) * v for i, v in enumerate(vals))     # exact
    rng = np.random.default_rng(n)
    masks = [np.ones(n, bool), np.zeros(n, bool)] + [rng.random(n) < 0.5 for _ in range(20)]
    for mask in masks:
        t = nt.bind(f, *[nt.ARG if m else v for m, v in zip(mask, vals)], engine=engine)
        fwd = [v for m, v in zip(mask, vals) if m]
        assert t(*fwd) == expected
        assert t.ctypes(*fwd) == expected
        assert t.engine == thunk_engine
    # the last parameter alone differs: bound in one, forwarded in the other
    last = n - 1
    bound = nt.bind(f, *vals, engine=engine)
    fwd_last = nt.bind(f, *vals[:last], nt.ARG, engine=engine)
    assert bound.engine == fwd_last.engine == thunk_engine
    assert bound() == expected and fwd_last(vals[last]) == expected
    assert fwd_last(vals[last] + 1) == expected + n
    assert bound() == expected
    # a bound value past the 64th rebinds in place, address kept
    address = bound.address
    bound.rebind(last, vals[last] + 2)
    assert bound() == expected + 2 * n and bound.address == address
    assert fwd_last(vals[last]) == expected


# ---------------------------------------------------------------------------
# A late call to a released thunk whose plan is gone reaches the trap.

STALE_CALL = """
import ctypes, gc, numpy as np, numthunk as nt
k = nt._core._kernels()
a = np.arange(4.0)
f = nt.Function(k["sum"], "double (const double *, int)")
t = nt.bind(f, a, 4, engine=ENGINE)
call = ctypes.CFUNCTYPE(ctypes.c_double)
assert call(t.address)() == 6.0
addr = t.address
t.release()
del t, f
gc.collect()
# Whatever the plan used is free now: fill freed heap blocks with garbage so
# that reading one of them goes wrong visibly.
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
for size in range(8, 1024, 8):
    for _ in range(8):
        p = libc.malloc(size)
        ctypes.memset(p, 0xAB, size)
print("calling", hex(k["sum"]), flush=True)
call(addr)()
print("returned", flush=True)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_late_call_after_plan_freed_traps(engine):
    if engine == "native" and not NATIVE:
        pytest.skip("no native engine on this platform")
    out = run_py(STALE_CALL.replace("ENGINE", repr(engine)))
    said, target = out.stdout.split()
    assert said == "calling", out.stdout + out.stderr
    assert out.returncode == -6, (out.returncode, out.stderr)   # SIGABRT, not SIGSEGV
    # the description outlives the plan, which went with the Function
    first, advice = out.stderr.strip().split("\n")
    assert first == ("numthunk: called a released thunk: double (void) over "
                     f"double (const double *, int), target at {target}"), out.stderr
    assert "a temporary whose address was kept" in advice, out.stderr


# ---------------------------------------------------------------------------
# Executable memory: fallback from one policy to the next, then to libffi.

MANY_THUNKS = """
import ctypes, resource, signal, numpy as np, numthunk as nt
# A small file size limit: memfd writes fail with EFBIG (SIGXFSZ ignored,
# else it would kill the process instead).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (__LIMIT__, __LIMIT__))
k = nt._core._kernels()
f = nt.Function(k["sum"], "double (const double *, int)")
call = ctypes.CFUNCTYPE(ctypes.c_double)
arrays = [np.full(4, float(i)) for i in range(__N__)]
thunks = [nt.bind(f, arr, nt.size(arr), engine="native") for arr in arrays]
# new shapes after the fallback: fresh handlers
g = nt.Function(k["sum"], "double (const double *, long)")
more = [nt.bind(g, arr, 4, engine="native") for arr in arrays[:50]]
bad = [i for i, t in enumerate(thunks) if call(t.address)() != 4.0 * i]
bad += [i for i, t in enumerate(more) if call(t.address)() != 4.0 * i]
# rebind and release work whichever engine an entry ended on
for i in (0, __N__ // 2, __N__ - 1):
    thunks[i].rebind(0, arrays[1])
    bad += [] if call(thunks[i].address)() == 4.0 else ["rebind %d" % i]
for t in thunks[::2]:
    t.release()
again = [nt.bind(f, arr, 4, engine="native") for arr in arrays[:2000]]
bad += [i for i, t in enumerate(again) if call(t.address)() != 4.0 * i]
with open("/proc/self/maps") as fh:
    rwx = [line for line in fh if "w" in line.split()[1] and "x" in line.split()[1]]
info = nt.engine_info()
# what each thunk reports is the engine its own entry runs on
info["thunk_engines"] = (thunks[1].engine, again[-1].engine)
# and a chain of composed thunks is bounded by the engines of its entries
chain = [again[-1]]
try:
    while len(chain) < 300:
        chain.append(nt.bind(chain[-1], engine="native"))
    info["chain"] = len(chain)
except ValueError as exc:
    info["chain"] = (len(chain), str(exc).split(";")[1])
bad += [] if call(chain[-1].address)() == 4.0 * 1999 else ["chain"]
print(repr((bad, rwx, info)))
"""


def run_many(limit, n, **env):
    code = MANY_THUNKS.replace("__LIMIT__", str(limit)).replace("__N__", str(n))
    # the engine new thunks get by default is what engine_info reports
    out = run_py(code, NUMTHUNK_ENGINE="auto", **env)
    assert out.returncode == 0, out.stderr[-3000:]
    bad, rwx, info = eval(out.stdout)
    assert bad == [], bad[:20]
    return info, rwx


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
def test_memfd_refused_under_file_size_limit_falls_back_to_sealed_pages():
    info, rwx = run_many(256 * 1024, 30000, NUMTHUNK_EXECMEM="auto")
    assert rwx == [], rwx
    assert info["engine"] == "native-x86_64-sysv", info
    assert info["memory_policy"] == "mprotect-sealed", info
    assert info["thunk_engines"] == ("native-x86_64-sysv",) * 2, info
    assert info["chain"] == 300, info
    assert len(info["fallbacks"]) == 1, info
    assert info["fallbacks"][0].startswith("memfd-pwrite: "), info
    assert "File too large" in info["fallbacks"][0], info


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
def test_no_memory_policy_left_new_thunks_go_to_libffi():
    # memfd only (NUMTHUNK_EXECMEM=memfd): once the file cannot grow, no
    # policy is left and the new entries of native plans are libffi closures
    # (whose memory is libffi's: some builds map it writable+executable).
    info, _ = run_many(256 * 1024, 30000, NUMTHUNK_EXECMEM="memfd")
    assert info["engine"] == "libffi", info
    assert info["memory_policy"] == "libffi closures", info
    assert info["thunk_engines"] == ("native-x86_64-sysv", "libffi"), info
    # entries on libffi, whatever their plans: libffi's chain limit
    assert info["chain"][0] == 128 and "at most 128 levels" in info["chain"][1], info
    assert info["config"]["execmem"] == "memfd", info
    assert [r.split(":")[0] for r in info["fallbacks"]] == [
        "memfd-pwrite", "no executable-memory policy left"], info
    assert "File too large" in info["fallbacks"][0], info


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
@pytest.mark.parametrize("policy", ["memfd", "mprotect"])
def test_execmem_forces_one_policy(policy):
    out = run_py("""
        import numthunk as nt, numpy as np
        k = nt._core._kernels()
        t = nt.bind(nt.Function(k["sum"], "double (const double *, int)"), np.ones(3), 3)
        print(t.engine, t(), repr(nt.engine_info()))
        """, NUMTHUNK_EXECMEM=policy, NUMTHUNK_ENGINE="auto")
    assert out.returncode == 0, out.stderr
    thunk_engine, value, info = out.stdout.split(" ", 2)
    info = eval(info)
    assert (thunk_engine, value) == ("native-x86_64-sysv", "3.0")
    assert info["memory_policy"].startswith(policy) and info["fallbacks"] == [], info
    assert info["config"]["execmem"] == policy


def test_execmem_none_means_libffi_for_new_thunks():
    """NUMTHUNK_EXECMEM=none: no executable-memory policy at all, the state a
    system that refuses every kind of executable mapping leaves us in."""
    out = run_py("""
        import numthunk as nt, numpy as np
        k = nt._core._kernels()
        f = nt.Function(k["sum"], "double (const double *, int)")
        ts = [nt.bind(f, np.ones(3), 3, engine=e) for e in ("native", "auto", "ffi")]
        print(repr(([t.engine for t in ts], [t() for t in ts], nt.engine_info())))
        """, NUMTHUNK_EXECMEM="none")
    assert out.returncode == 0, out.stderr
    backends, values, info = eval(out.stdout)
    assert backends == ["libffi"] * 3 and values == [3.0] * 3
    assert info["engine"] == "libffi" and info["memory_policy"] == "libffi closures", info
    if NATIVE:
        assert info["fallbacks"] == [
            "NUMTHUNK_EXECMEM=none: no executable memory: new thunks use libffi"], info


def test_configuration_is_read_once_and_reported_whole():
    out = run_py("import numthunk; print(repr(numthunk.engine_info()['config']))",
                 NUMTHUNK_ENGINE="ffi", NUMTHUNK_EXECMEM="mprotect", NUMTHUNK_NO_REUSE="1")
    assert out.returncode == 0, out.stderr
    cfg = eval(out.stdout)
    assert cfg["engine"] == "ffi" and cfg["execmem"] == "mprotect" and cfg["no_reuse"] is True
    assert cfg["quarantine"] >= 8192
    bad = run_py("import numthunk", NUMTHUNK_EXECMEM="rwx")
    assert bad.returncode != 0 and "NUMTHUNK_EXECMEM=rwx" in bad.stderr, bad.stderr


def test_with_nothing_configured_engine_info_reports_the_defaults():
    """No NUMTHUNK_* variable set at all (not even empty): the engine
    'auto', the memory policy 'auto' (memfd first: where the system refuses
    it, the sealed pages, the fallback saying why), addresses reused after
    32,768 releases; new thunks, with engine= left out, run on the engine
    reported."""
    code = textwrap.dedent("""
        import numpy as np, numthunk as nt
        k = nt._core._kernels()
        t = nt.bind(nt.Function(k["sum"], "double (const double *, int)"), np.ones(3), 3)
        print(repr((nt.engine_info(), t.engine, t())))
        """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMTHUNK_")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(nt.__file__)),
                                         os.environ.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    info, thunk_engine, value = eval(out.stdout)
    assert info["config"] == {"engine": "auto", "engine_from": "default", "execmem": "auto",
                              "no_reuse": False, "quarantine": 32768}
    assert info["fallback_engine"] == "libffi" and info["native_available"] is NATIVE
    assert (thunk_engine, value) == (info["engine"], 3.0)
    if not NATIVE:
        assert info["engine"] == "libffi"
        return
    assert info["engine"] == NATIVE_NAME
    if info["fallbacks"]:                       # memfd refused here: said so
        assert info["memory_policy"] == "mprotect-sealed", info
        assert info["fallbacks"][0].startswith("memfd-pwrite: "), info
    else:
        assert info["memory_policy"] == "memfd-pwrite", info


def test_no_reuse_takes_yes_or_no_and_refuses_the_rest():
    code = "import numthunk; print(numthunk.engine_info()['config']['no_reuse'])"
    for value, want in [("1", True), ("true", True), ("YES", True), ("0", False),
                        ("false", False), ("No", False), ("", False)]:
        out = run_py(code, NUMTHUNK_NO_REUSE=value)
        assert out.returncode == 0 and out.stdout.strip() == str(want), (value, out.stderr)
    for value in ("maybe", "2", "on", "yes please"):
        bad = run_py(code, NUMTHUNK_NO_REUSE=value)
        assert bad.returncode != 0, value
        assert f"NUMTHUNK_NO_REUSE={value}: expected 1, true, yes" in bad.stderr, bad.stderr


HANDLER_CHURN = """
import gc, os, time
import numthunk as nt
addr = nt._core._kernels()["sum"]        # never called
K = 17                                   # 2**17 distinct plan shapes (int/double)
N = N_SHAPES

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

marks = {}
t0 = time.perf_counter()
for n in range(N):
    types = ["double" if (n >> k) & 1 else "int" for k in range(K)]
    sig = nt.Signature("void (" + ", ".join(types) + ")")
    t = nt.bind(nt.Function(addr, sig), *([nt.ARG] * K))
    assert t.engine != "libffi"
    t.release()
    del t, sig                          # the plan, and so its handler, goes
    if n + 1 in (N // 2, N):
        gc.collect()
        marks[n + 1] = rss()
print(marks[N // 2], marks[N], round(time.perf_counter() - t0, 1))
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
@pytest.mark.parametrize("policy", ["memfd", "mprotect"])
def test_handler_cache_stays_flat_over_distinct_shapes(policy):
    """120,000 thunks of distinct plan shapes, each released: a handler no
    plan uses leaves after the quarantine and its code goes back to the
    policy, so memory stops growing once the quarantine is full (it grew by
    about 21 MB over such a run when handlers were never freed)."""
    n = 120_000
    # under ASan, its own quarantine of freed memory would be the growth seen
    asan = os.environ.get("ASAN_OPTIONS", "")
    out = run_py(HANDLER_CHURN.replace("N_SHAPES", str(n)),
                 NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM=policy,
                 ASAN_OPTIONS=":".join(filter(None, [asan, "quarantine_size_mb=0"])))
    assert out.returncode == 0, out.stderr[-3000:]
    half, full, _seconds = out.stdout.split()
    growth = int(full) - int(half)
    assert growth < 3 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over the second half"


# What the scripts below share, run in a fresh interpreter: the memory
# files' descriptors, every small shape (1 to 4 parameters of four kinds,
# each bound or forwarded: 4680 patterns), and enough releases to push what
# waits in the quarantine out of it.
ENGINE_PRELUDE = """
import ctypes, gc, itertools, os, tempfile
import numpy as np
import numthunk as nt
kernels = nt._core._kernels()
addr = kernels["sum"]                   # never called with these signatures

def memory_files():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:numthunk"):
                out.append(int(fd))
        except OSError:
            pass                        # the descriptor listdir itself used
    return sorted(out)

def small_patterns():
    for k in range(1, 5):
        for types in itertools.product(["int", "double", "signed char", "unsigned short"],
                                       repeat=k):
            sig = nt.Signature("void (" + ", ".join(types) + ")")
            for mask in range(2 ** k):
                yield sig, [nt.ARG if mask >> i & 1 else 0 for i in range(k)]

def churn():
    f = nt.Function(addr, "void (int)")  # one shape: one handler, kept
    for _ in range(nt.engine_info()["config"]["quarantine"] + 5000):
        nt.bind(f, 1).release()
"""


# Small handlers (a few parameters: 8 to 32 bytes of code, the smallest size
# class of engine/memory/memfd.c) made, their plans dropped, pushed out of the
# quarantine by more releases, then made again: the second round takes the
# blocks the first gave back, so the memory file does not grow.
SMALL_HANDLERS_AGAIN = ENGINE_PRELUDE + """
def code_file_size():
    (fd,) = memory_files()
    return os.fstat(fd).st_size

def small_shapes():
    n = 0
    for sig, given in small_patterns():
        t = nt.bind(nt.Function(addr, sig), *given)
        assert t.engine != "libffi"
        t.release()
        del t                           # its plan goes: the handler waits in quarantine
        n += 1
    return n

made = small_shapes()
churn()                                 # the small handlers left: their blocks are spare
before = code_file_size()
again = small_shapes()
print(made, again, before, code_file_size())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not NATIVE,
                    reason="memfd is Linux's; the native engine places handlers")
def test_small_handlers_made_again_reuse_the_blocks_given_back():
    out = run_py(SMALL_HANDLERS_AGAIN, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM="memfd")
    assert out.returncode == 0, out.stderr[-3000:]
    made, again, before, after = map(int, out.stdout.split())
    assert made == again == 4680
    # about 1500 distinct handlers of 64-byte blocks: more than one 64 KiB chunk
    assert after == before, f"the memory file grew by {after - before} bytes"


ONE_MEMORY_FILE = """
import ctypes, os
import numthunk as nt

def memory_files():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:numthunk")
        except OSError:
            pass                        # the descriptor listdir itself used
    return n

libc = ctypes.CDLL(None)
libc.lseek.restype = ctypes.c_long
f = nt.Function(ctypes.cast(libc.abs, ctypes.c_void_p).value, "int (int)")
before = memory_files()
# errno is EINVAL (lseek's whence) when the engine opens its file: a stale
# errno is no failure of memfd_create, the file is opened once and kept
assert libc.lseek(0, 0, 99) == -1
t = nt.bind(f, -3)
print(before, memory_files(), t())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not NATIVE,
                    reason="memfd is Linux's; the native engine places handlers")
def test_the_memory_file_is_opened_once_whatever_errno_held():
    out = run_py(ONE_MEMORY_FILE, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM="memfd")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["0", "1", "3"]


# A forked child closes its copy of the parent's memory file (here at
# descriptor 0); its first new shape is placed in a memory file of its own,
# never through the parent's descriptor number, which a file the child
# opened holds by then, and needs no fallback.
FORK_CLOSES_FILE_ZERO = ENGINE_PRELUDE + """
libc = ctypes.CDLL(None)
labs = ctypes.cast(libc.labs, ctypes.c_void_p).value
f = nt.Function(labs, "long (long)")
os.close(0)                             # the memory file gets descriptor 0
t = nt.bind(f, -3)
assert memory_files() == [0]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    # the child's copy of the parent's file is closed, descriptor 0 too
    before = len(memory_files())
    u = nt.bind(f, -4)                  # the parent's shape: no code placed
    # descriptor 0 again, a file of the child's; then a new shape, whose
    # code goes to a memory file of the child's own, never through 0
    with tempfile.TemporaryFile() as mine:
        mine.write(b"12345")
        mine.flush()
        v = nt.bind(nt.Function(labs, "long (long, double, int)"), -5, 1.5, 2)
        info = nt.engine_info()
        os.write(w, f"{before} {t()} {u()} {v()} {mine.fileno()} "
                    f"{os.fstat(mine.fileno()).st_size} {len(memory_files())} "
                    f"{info['memory_policy']} {len(info['fallbacks'])}".encode())
    os._exit(0)
os.close(w)
child = os.read(r, 200).decode()
os.waitpid(pid, 0)
print(child, len(memory_files()), t())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not NATIVE,
                    reason="memfd is Linux's; the native engine places handlers")
def test_a_forked_child_closes_the_memory_file_at_descriptor_zero():
    out = run_py(FORK_CLOSES_FILE_ZERO, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM="memfd")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["0", "3", "4", "5", "0", "5", "1", "memfd-pwrite", "0",
                                  "1", "3"]


# Two thunks of one shape share one handler, counted once for each: the
# first released and gone, its handler must stay for the second, however
# many releases pass and however many handlers are made after (they take
# the blocks that handlers given back leave).
SHARED_HANDLER_KEPT = ENGINE_PRELUDE + """
x = np.arange(5.0)
# two signatures, so two plans (a signature keeps its plans) of one shape
s1, s2 = (nt.Signature(f"double (const double *{p}, int n)") for p in "ab")
first = nt.bind(nt.Function(kernels["sum"], s1), x, 5)
second = nt.bind(nt.Function(kernels["sum"], s2), x, 4)
assert first.engine != "libffi" and (first(), second()) == (10.0, 6.0)
first.release()
del first, s1                           # its plan goes; second's uses the handler
gc.collect()
churn()
made = [nt.bind(nt.Function(addr, sig), *given) for sig, given in small_patterns()]
f = nt.Function(kernels["sum"], "double (const double *, int)")
print(second(), nt.bind(f, x, 3)(), len(made))
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform (handlers are its)")
@pytest.mark.parametrize("policy", ["memfd", "mprotect"])
def test_a_shared_handler_stays_while_any_thunk_of_its_shape_lives(policy):
    out = run_py(SHARED_HANDLER_KEPT, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM=policy)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[:2] == ["6.0", "3.0"]


# A handler whose last plan went waits in the quarantine; a plan of its
# shape made meanwhile takes it back. Kept by that plan when its time comes,
# it stays (and leaves a full quarantine after that plan goes); dropped
# again while it waits, it waits once more, is taken back again, and stays.
# Then new handlers take every block that was given back: a handler freed
# too early is overwritten, and its thunk computes something else, or
# crashes.
HANDLER_TAKEN_BACK = ENGINE_PRELUDE + """
x = np.arange(6.0)
def over(name, *args):
    # one shape per binding pattern; the names make each its own plan
    sig = nt.Signature(f"double (const double *{name}, int n)")
    return sig, nt.bind(nt.Function(kernels["sum"], sig), *args)

s, t = over("a", x, 5)                  # both bound
assert t() == 10.0 and t.engine != "libffi"
del s, t; gc.collect()                 # its plan went: the handler waits
s_kept, kept = over("b", x, 4)          # taken back
churn()                                 # its time came while a plan had it

s, t = over("c", x, nt.ARG)             # another shape: the count forwarded
assert t(3) == 3.0
del s, t; gc.collect()                 # waits
s, t = over("d", x, nt.ARG)             # taken back ...
assert t(2) == 1.0
del s, t; gc.collect()                 # ... and dropped while it waits
churn()                                 # its first time: it waits once more
s_again, again = over("e", x, nt.ARG)   # taken back during its second wait
churn()                                 # its second time came while a plan had it

made = [nt.bind(nt.Function(addr, sig), *given) for sig, given in small_patterns()]
f = nt.Function(kernels["sum"], "double (const double *, int)")
print(kept(), again(5), again(6), nt.bind(f, x, 3)(), len(made))
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform (handlers are its)")
@pytest.mark.parametrize("policy", ["memfd", "mprotect"])
def test_a_handler_taken_back_from_the_quarantine_stays_while_its_plan_lives(policy):
    out = run_py(HANDLER_TAKEN_BACK, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM=policy)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["6.0", "10.0", "15.0", "3.0", "4680"]


# Handler code waits in the quarantine's code ring, in the order its last
# plans went, and its blocks in the memory file then serve new handlers of
# their size: the file grows only for new code. Three rounds, each measured:
#  - the ring grows while its head is not at its start: 3000 handlers wait
#    (the ring grows to 4096 entries, head at 0); 500 of them leave; 2000
#    more come, so the ring fills with its oldest entry at 500 and its
#    newest wrapped round to the start, and grows. Those that waited first
#    still leave first: after as many releases again as the rest of the
#    first 3000 need, their blocks serve 3000 new handlers (the 2000 that
#    came later wait on). Out of order, the first would wait behind the 2000
#    and the new handlers need about 160 KiB more;
#  - the 2000 leave in turn, every one of them, and serve 2000 new handlers;
#  - 2000 handlers taken back from the ring by new plans of their shapes,
#    kept while their time comes, then dropped, wait again and leave.
CODE_RING = ENGINE_PRELUDE + """
K = 14                                  # 2**14 shapes: each its own handler, all of one size

def shapes(lo, hi):
    out = []
    for n in range(lo, hi):
        types = ["double" if (n >> k) & 1 else "int" for k in range(K)]
        sig = nt.Signature("void (" + ", ".join(types) + ")")
        t = nt.bind(nt.Function(addr, sig), *([nt.ARG] * K))
        assert t.engine != "libffi"
        t.release()
        out.append(sig)                 # the signature keeps the plan, and its handler
    return out

def releases(n):
    f = nt.Function(addr, "void (int)")
    for _ in range(n):
        nt.bind(f, 1).release()

q = nt.engine_info()["config"]["quarantine"]
first, second = shapes(0, 3000), shapes(3000, 5000)
(fd,) = memory_files()                  # made with the first handler

def grown(since):
    return os.fstat(fd).st_size - since

del first
gc.collect()                            # 3000 handlers wait
releases(q + 250)                       # two leave per release from q on: 500 left
del second
gc.collect()                            # 2000 more: the ring grows, its head at 500
releases(1300)                          # the first 3000 have all left by now
size = os.fstat(fd).st_size
third = shapes(5000, 8000)
print(grown(size))
releases(q + 1000)                      # the 2000 leave too
size = os.fstat(fd).st_size
fourth = shapes(8000, 10000)
print(grown(size))
again = shapes(10000, 12000)
del again
gc.collect()                            # 2000 wait
again = shapes(10000, 12000)            # taken back by plans of their shapes
releases(q + 1000)                      # their time came while plans had them
del again
gc.collect()                            # they wait again
releases(q + 1000)
size = os.fstat(fd).st_size
fifth = shapes(12000, 14000)
print(grown(size))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not NATIVE,
                    reason="memfd is Linux's; the native engine places handlers")
def test_handler_code_leaves_the_code_ring_in_order_and_its_blocks_serve_again():
    out = run_py(CODE_RING, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM="memfd")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["0", "0", "0"], "the memory file grew (bytes per round)"


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


# ---------------------------------------------------------------- W^X as code memory grows

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
assert all(t.engine == "native-x86_64-sysv" for t in thunks), {t.engine for t in thunks}
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
print("POLICY", nt.engine_info()["memory_policy"])
print("NEWEXEC", len(after) - before)
print("RWX", len(rwx))
for line in rwx:
    print(line)
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
@pytest.mark.parametrize("policy, name", [("memfd", "memfd-pwrite"),
                                          ("mprotect", "mprotect-sealed")])
def test_no_writable_executable_mapping_as_code_memory_grows(policy, name):
    out = run_py(W_X_GROW, NUMTHUNK_ENGINE="native", NUMTHUNK_EXECMEM=policy)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"POLICY {name}", out.stdout
    # more than one new executable mapping: the code memory did grow
    assert int(lines[1].split()[1]) >= 2, out.stdout
    assert lines[2] == "RWX 0", out.stdout


# ---------------------------------------------------------------- stack alignment


@pytest.mark.skipif(not X86_64_LINUX, reason="the alignment probe is x86-64 assembly")
@pytest.mark.parametrize("engine", ENGINES)
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
            masks = [0, (1 << n) - 1, 1, 1 << (n - 1)] + [rng.getrandbits(n) for _ in range(4)]
            for fwd_mask in masks:
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


# ---------------------------------------------------------------- callees that trust their caller
#
# Narrow integers reach a callee that trusts its caller, on both engines,
# whichever compilers are installed.
#
# The callees (fixtures/trust_x86_64.S) are assembly that returns the
# register or stack slot it was given, all 64 bits. The thunk's own caller is
# ctypes with uint64_t parameters, so it puts garbage above the narrow value,
# as Numba does (it does not extend i8/i16). The property: for bool, (u)int8
# and (u)int16 the callee sees the value extended to 32 bits (what GCC and
# Clang assume of a register argument); for (u)int32 the low 32 bits are the
# value (the psABI leaves the upper half undefined, and no compiler reads
# it). A narrow value in a stack slot is read with its own width by both
# compilers (`movsx eax, word ptr [rsp + 8]`), so there only the type's own
# bits are checked: libffi writes just those bytes of the slot. Bound narrow
# values are checked the same way.

TRUSTING = pytest.mark.skipif(not X86_64_LINUX,
                              reason="the trusting callees are x86-64 System V assembly")

# C type, bits, signed, values at and near both edges
NARROW = [
    ("bool", 1, False, [False, True]),
    ("uint8_t", 8, False, [0, 1, 127, 128, 255]),
    ("int8_t", 8, True, [-128, -1, 0, 1, 127]),
    ("uint16_t", 16, False, [0, 1, 0x7FFF, 0x8000, 0xFFFF]),
    ("int16_t", 16, True, [-32768, -1, 0, 1, 32767]),
    ("uint32_t", 32, False, [0, 1, 2**31, 2**32 - 1]),
    ("int32_t", 32, True, [-2**31, -1, 0, 2**31 - 1]),
]
GARBAGE = [0xDEADBEEFCAFEF00D, 0xFFFFFFFFFFFFFFFF, 0x8000000000000000, 0x0123456789ABCDEF]
MASK32 = 0xFFFFFFFF


@pytest.fixture(scope="module")
def tlib():
    return ntbuild.load("trust_x86_64.S", "trust")


def fn(tlib, name, sig):
    return nt.Function(ntbuild.address(tlib, name), sig, owner=tlib, name=name)


def raw(v, bits, garbage):
    """v in the low `bits` bits, garbage above."""
    width = 8 if bits == 1 else bits
    mask = (1 << width) - 1
    return (garbage & ~mask & 0xFFFFFFFFFFFFFFFF) | (int(v) & mask)


def extended32(v):
    """What a trusting callee reads in the low 32 bits."""
    return int(v) & MASK32


def check(got, v, ctype, bits=32):
    mask = MASK32 if bits == 32 else (1 << (8 if bits == 1 else bits)) - 1
    assert got & mask == extended32(v) & mask, (
        f"{ctype} {v!r}: callee saw {got:#018x}, its low bits should be "
        f"{extended32(v) & mask:#010x} (mask {mask:#x})")


def engine_or_skip(engine):
    if engine == "native" and not NATIVE:
        pytest.fail("the native engine is missing on x86-64 Linux")


# Target layouts: where the narrow parameter sits, which callee returns it,
# and the target signature around it. "moved": bound values before it, so
# the handler moves the thunk's argument to another register or slot.
def layouts(ctype):
    six = ", ".join(["int64_t"] * 6)
    seven = ", ".join(["int64_t"] * 7)
    return [
        # id, callee, signature, values bound before the narrow one (None: forwarded)
        ("in-place-rdi", "trust_rdi", f"uint64_t ({ctype})", []),
        ("rdi-to-rsi", "trust_rsi", f"uint64_t (int64_t, {ctype})", [7]),
        ("rdi-to-r9", "trust_r9", f"uint64_t ({', '.join(['int64_t'] * 5)}, {ctype})",
         [1, 2, 3, 4, 5]),
        ("in-place-stack", "trust_stack0", f"uint64_t ({six}, {ctype})", [None] * 6),
        ("rdi-to-stack", "trust_stack0", f"uint64_t ({six}, {ctype})", [1, 2, 3, 4, 5, 6]),
        ("rsi-to-stack1", "trust_stack1", f"uint64_t ({seven}, {ctype})",
         [None] + [2, 3, 4, 5, 6, 7]),
        ("stack-to-stack1", "trust_stack1", f"uint64_t ({seven}, {ctype})",
         [1] + [None] * 6),
    ]


@TRUSTING
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, bits, signed, values", NARROW, ids=[r[0] for r in NARROW])
def test_forwarded_narrow_arrives_extended(tlib, engine, ctype, bits, signed, values):
    engine_or_skip(engine)
    for lid, callee, sig, before in layouts(ctype):
        f = fn(tlib, callee, sig)
        args = [nt.ARG if b is None else b for b in before] + [nt.ARG]
        t = nt.bind(f, *args, engine=engine)
        assert t.engine == ("libffi" if engine == "ffi" else "native-x86_64-sysv"), lid
        nfwd = sum(a is nt.ARG for a in args)
        call = ctypes.CFUNCTYPE(ctypes.c_uint64, *[ctypes.c_uint64] * nfwd)(t.address)
        for v in values:
            for g in GARBAGE:
                # the other forwarded int64 values carry garbage too: they must
                # arrive whole (they are not narrow)
                others = [(g ^ (0x1111 * (k + 1))) & 0xFFFFFFFFFFFFFFFF for k in range(nfwd - 1)]
                got = call(*others, raw(v, bits, g))
                check(got, v, f"{lid}: {ctype}", bits if "stack" in callee else 32)


@TRUSTING
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, bits, signed, values", NARROW, ids=[r[0] for r in NARROW])
def test_bound_narrow_arrives_extended(tlib, engine, ctype, bits, signed, values):
    engine_or_skip(engine)
    for lid, callee, sig, before in layouts(ctype):
        f = fn(tlib, callee, sig)
        for v in values:
            args = [nt.ARG if b is None else b for b in before] + [v]
            t = nt.bind(f, *args, engine=engine)
            nfwd = sum(a is nt.ARG for a in args)
            call = ctypes.CFUNCTYPE(ctypes.c_uint64, *[ctypes.c_uint64] * nfwd)(t.address)
            got = call(*[0xFEDCBA9876543210] * nfwd)
            check(got, v, f"bound {lid}: {ctype}", bits if "stack" in callee else 32)


@TRUSTING
@pytest.mark.parametrize("engine", ENGINES)
def test_forwarded_int64_neighbours_arrive_whole(tlib, engine):
    """The extension touches the narrow parameter only."""
    engine_or_skip(engine)
    f = fn(tlib, "trust_rsi", "uint64_t (int16_t, int64_t)")
    t = nt.bind(f, nt.ARG, nt.ARG, engine=engine)
    call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)(t.address)
    for g in GARBAGE:
        assert call(raw(-1, 16, g), g) == g


@TRUSTING
def test_shapes_that_differ_only_by_extension_get_their_own(tlib):
    """int16 and uint16 forwarded the same way have the same moves but not
    the same extension: each thunk must extend as its own type says,
    whichever was made first."""
    for order in (["int16_t", "uint16_t", "int8_t", "uint8_t", "bool"],
                  ["bool", "uint8_t", "int8_t", "uint16_t", "int16_t"]):
        for ctype in order:
            bits, v = {"int16_t": (16, -2), "uint16_t": (16, 0xFFFE), "int8_t": (8, -2),
                       "uint8_t": (8, 0xFE), "bool": (1, True)}[ctype]
            for engine in (["native"] if NATIVE else []) + ["ffi"]:
                f = fn(tlib, "trust_rsi", f"uint64_t (int64_t, {ctype})")
                t = nt.bind(f, 3, nt.ARG, engine=engine)
                got = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(t.address)(
                    raw(v, bits, GARBAGE[0]))
                check(got, v, f"{engine} {ctype}")


MEMFD_SHIM_RUN = """
import ctypes, numpy as np, numthunk as nt
shim = ctypes.CDLL(None)                 # the preloaded shim is in the global scope
info = nt._core.engine_info()
libm = ctypes.CDLL("libm.so.6")
cos = nt.Function(ctypes.cast(libm.cos, ctypes.c_void_p).value, "double (double)")
t = nt.bind(cos, 0.0, engine="native")
with_exec = ctypes.c_int()
calls = shim.memfd_calls(ctypes.byref(with_exec))
print(repr((info["memory_policy"], info["fallbacks"], t(),
            t.engine, calls, with_exec.value)))
"""


PWRITE_SHIM_RUN = """
import ctypes, numthunk as nt
shim = ctypes.CDLL(None)
libm = ctypes.CDLL("libm.so.6")
cos = nt.Function(ctypes.cast(libm.cos, ctypes.c_void_p).value, "double (double)")
ts = [nt.bind(cos, 0.0, engine="native") for _ in range(50)]
mid = [nt.bind(cos, nt.ARG, engine="native") for _ in range(3)]
info = nt._core.engine_info()
print(repr((info["memory_policy"], info["fallbacks"], sum(t() for t in ts), mid[2](0.0),
            ts[0].engine, shim.pwrite_calls())))
"""


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd is Linux's")
@pytest.mark.parametrize("mode", ["eintr", "short"])
def test_code_written_by_pwrite_survives_interrupts_and_short_writes(mode):
    """engine/memory/memfd.c write_all: a pwrite interrupted by a signal (EINTR) is
    tried again, and one that writes part of the code goes on from where it
    stopped; the memory-file policy stands and every thunk runs."""
    shim = ntbuild.compile_shared(os.path.join(os.path.dirname(__file__), "fixtures",
                                               "memfd_einval.c"),
                                  "memfd_einval")
    env = {"LD_PRELOAD": " ".join(filter(None, [os.environ.get("LD_PRELOAD"), shim])),
           "NUMTHUNK_ENGINE": "auto", "NUMTHUNK_EXECMEM": "memfd-pwrite",
           "NT_SHIM_PWRITE": mode}
    out = run_py(PWRITE_SHIM_RUN, **env)
    assert out.returncode == 0, out.stderr[-3000:]
    policy, fallbacks, total, value, thunk_engine, pwrites = eval(out.stdout)
    assert (policy, fallbacks, total, value) == ("memfd-pwrite", [], 50.0, 1.0)
    assert thunk_engine == "native-x86_64-sysv" and pwrites >= 2


@pytest.mark.skipif(not NATIVE, reason="no native engine on this platform")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd is Linux's")
@pytest.mark.parametrize("mode", ["no MFD_EXEC", "none"])
def test_a_kernel_without_mfd_exec_still_gets_a_memory_file(mode):
    """Before Linux 6.3 memfd_create refuses MFD_EXEC with EINVAL: the file
    is made again without it (engine/memory/memfd.c open_file), and the memfd policy
    stands. A kernel with no memfd at all leaves the sealed-pages policy,
    the fallback saying why. memfd_create is a shim here (LD_PRELOAD)."""
    shim = ntbuild.compile_shared(os.path.join(os.path.dirname(__file__), "fixtures",
                                               "memfd_einval.c"),
                                  "memfd_einval")
    # after a sanitizer's runtime, which must come first
    env = {"LD_PRELOAD": " ".join(filter(None, [os.environ.get("LD_PRELOAD"), shim])),
           "NUMTHUNK_ENGINE": "auto", "NUMTHUNK_EXECMEM": "auto"}
    if mode == "none":
        env["NT_SHIM_MEMFD"] = "none"
    out = run_py(MEMFD_SHIM_RUN, **env)
    assert out.returncode == 0, out.stderr[-3000:]
    policy, fallbacks, value, thunk_engine, calls, with_exec = eval(out.stdout)
    assert value == 1.0 and thunk_engine == "native-x86_64-sysv"
    if mode == "none":
        assert policy == "mprotect-sealed" and len(fallbacks) == 1, (policy, fallbacks)
        assert fallbacks[0] == "memfd-pwrite: refused by the system at start", fallbacks
        assert with_exec == 1 and calls == 2          # with the flag, then without
    else:
        assert policy == "memfd-pwrite" and fallbacks == [], (policy, fallbacks)
        assert with_exec == 1 and calls == 2

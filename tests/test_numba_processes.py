"""Numba in fresh processes: the first thing Numba compiles takes a thunk,
a released thunk in a typed list traps when @njit code calls it, and
Numba's cache (cache=True) is reused by a second process, for plain
consumers and for consumers of inlined @cfunc targets (keyed on the
target's code)."""

import textwrap

import numpy as np

from thunks import run_py, run_python

RELEASED_IN_LIST = """
    import numba
    from numba import njit
    lst = numba.typed.List([t])
    t.release()
    del t

    @njit
    def run(lst):
        return lst[0]()

    print("calling", flush=True)
    run(lst)
    print("survived", flush=True)
"""


def test_released_thunk_in_a_list_traps_when_called(fixture_path, engine):
    """release() is explicit: a list holding the thunk keeps the object, not
    its code. A call from @njit reaches the trap (documented), never freed
    code."""
    setup = FRESH_SETUP.replace("nt.size(vec))", f"nt.size(vec), engine={engine!r})")
    code = textwrap.dedent(setup.format(path=fixture_path, n=4)) \
        + textwrap.dedent(RELEASED_IN_LIST)
    proc = run_py(code)
    assert proc.stdout.split() == ["calling"], proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "numthunk: called a released thunk" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- fresh processes


FRESH_SETUP = """
    import ctypes, sys
    import numpy as np
    import numthunk as nt
    assert "numba" not in sys.modules, "import numthunk imported numba"
    lib = ctypes.CDLL({path!r})
    f = nt.Function(ctypes.cast(lib.f_d_pi, ctypes.c_void_p).value,
                    "double (const double *, int)", owner=lib)
    vec = np.arange({n}.0)
    t = nt.bind(f, vec, nt.size(vec))
    _ = t.address, t.csig, t()
    assert "numba" not in sys.modules, "making and calling a thunk imported numba"
"""


def test_first_thing_numba_compiles_takes_a_thunk(fixture_path):
    out = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + """
    from numba import njit

    @njit
    def first(fn):
        return fn()

    print(first(t))
    """)
    assert out.split() == ["6.0"]


def test_first_thing_numba_compiles_uses_a_global_thunk(fixture_path):
    out = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + """
    from numba import njit
    G = t

    @njit
    def first():
        return G() + 1.0

    print(first())
    """)
    assert out.split() == ["7.0"]


def test_cache_reused_in_a_second_process(fixture_path, tmp_path):
    (tmp_path / "consumer.py").write_text(textwrap.dedent("""
        from numba import njit

        @njit(cache=True)
        def run(fn, k):
            s = 0.0
            for _ in range(k):
                s += fn()
            return s
    """))
    use = f"""
    sys.path.insert(0, {str(tmp_path)!r})
    import consumer
    print(consumer.run(t, 2), sum(consumer.run.stats.cache_hits.values()),
          sum(consumer.run.stats.cache_misses.values()))
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + use, env=env).split()
    assert first == ["12.0", "0", "1"]                 # compiled and saved
    # Another process, another thunk (another address, another array).
    second = run_python(FRESH_SETUP.format(path=fixture_path, n=5) + use, env=env).split()
    assert second == ["20.0", "1", "0"]                # loaded from the cache


def test_cache_of_a_consumer_that_keeps_thunks(fixture_path, tmp_path):
    """A cached consumer whose value outlives the call (a list it fills):
    the cache holds code, not this process's thunks or meminfos."""
    (tmp_path / "keeper.py").write_text(textwrap.dedent("""
        from numba import njit, typed

        @njit(cache=True)
        def keep(fn, k):
            out = typed.List()
            for _ in range(k):
                out.append(fn)
            return out
    """))
    use = f"""
    import gc, weakref
    sys.path.insert(0, {str(tmp_path)!r})
    import keeper
    lst = keeper.keep(t, 3)
    ref = weakref.ref(t)
    del t
    gc.collect()
    print(sum(f() for f in lst), lst[0] is lst[2] is ref(),
          sum(keeper.keep.stats.cache_hits.values()))
    del lst
    gc.collect()
    print(ref() is None)
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(FRESH_SETUP.format(path=fixture_path, n=4) + use, env=env).split()
    assert first == ["18.0", "True", "0", "True"]
    second = run_python(FRESH_SETUP.format(path=fixture_path, n=5) + use, env=env).split()
    assert second == ["30.0", "True", "1", "True"]


INLINE_CACHE_TARGET = """
from numba import cfunc, types

@cfunc(types.float64(types.float64, types.CPointer(types.float64), types.intc))
def poly(x, p, n):
    s = 0.0
    for i in range(n - 1, -1, -1):
        s = s * x + p[i]
    return s{extra}
"""

INLINE_CACHE_CONSUMER = """
from numba import njit

@njit(cache=True)
def midpoint(f, a, b, n):
    h = (b - a) / n
    s = 0.0
    for i in range(n):
        s += f(a + (i + 0.5) * h)
    return s * h
"""

INLINE_CACHE_USE = """
import sys
sys.path.insert(0, {dir!r})
import numpy as np, numba, numthunk as nt
import target, consumer
p = np.array({coefs})
f = nt.bind(target.poly, nt.ARG, p, nt.size(p))
assert "inline poly#" in str(numba.typeof(f))
first = consumer.midpoint(f, 0.0, 2.0, 1000)
p[0] += 1.0                                   # live data
f.rebind(1, np.array({coefs}) * 2.0)          # live binding
print(round(first, 6) + 0.0, round(consumer.midpoint(f, 0.0, 2.0, 1000), 6) + 0.0,
      sum(consumer.midpoint.stats.cache_hits.values()),
      sum(consumer.midpoint.stats.cache_misses.values()))
"""


def test_inline_cache_in_fresh_processes(tmp_path, engine):
    """The cache holds the consumer with the target's code linked in, for
    the target's fingerprint: a fresh process loads it for its own thunk
    (other address, other values); changed target code is compiled anew."""
    (tmp_path / "target.py").write_text(INLINE_CACHE_TARGET.format(extra=""))
    (tmp_path / "consumer.py").write_text(INLINE_CACHE_CONSUMER)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMTHUNK_ENGINE": engine}

    def run(coefs):
        code = INLINE_CACHE_USE.format(dir=str(tmp_path), coefs=coefs)
        return run_python(code, env=env, cwd=str(tmp_path)).split()

    # integral over [0, 2] of 1 + 3x^2 is 10, of 0.5 - x is -1
    assert run([1.0, 0.0, 3.0]) == ["9.999998", "19.999996", "0", "1"]
    assert run([0.5, -1.0]) == ["-1.0", "-2.0", "1", "0"]           # from the cache
    # the same consumer, a target whose code changed: not the cached code
    (tmp_path / "target.py").write_text(INLINE_CACHE_TARGET.format(extra=" + 1.0"))
    assert run([0.5, -1.0]) == ["1.0", "0.0", "0", "1"]
    assert run([0.5, -1.0]) == ["1.0", "0.0", "1", "0"]


CACHED_TARGETS = """
import math
import numpy as np
from numba import cfunc, njit, types

f8 = types.float64


@njit(cache=True)
def helper(x):
    return 2.0 * x + 1.0


@cfunc(f8(f8, f8), cache=True)
def with_math(k, x):
    return math.exp(k * x) + math.cos(x)


@cfunc(f8(f8, f8), cache=True)
def with_numpy(k, x):
    return np.sinh(k * x) + np.arctan2(x, k)


@cfunc(f8(f8, f8), cache=True)
def with_njit(k, x):
    return helper(k * x)
"""

CACHED_USE = """
import sys
sys.path.insert(0, {dir!r})
import numba, numthunk as nt
import targets, consumer
fps = []
for name in ("with_math", "with_numpy", "with_njit"):
    t = nt.bind(getattr(targets, name), 0.5, nt.ARG)
    fps.append(numba.typeof(t).fingerprint[:16])
    print(name, round(consumer.run(t, 0.25), 9))
s = consumer.run.stats
print("fingerprints", *fps)
print("hits", sum(s.cache_hits.values()), "misses", sum(s.cache_misses.values()))
"""


def test_inline_cache_key_is_the_same_for_a_cached_target(tmp_path, engine):
    """A cache=True @cfunc that calls math, NumPy or @njit functions is
    compiled by the first process and loaded from Numba's cache by the
    next: its thunk's type (the fingerprint of the code a consumer links) is
    the same both ways, so the second process already finds the cached
    consumer (three fresh processes: compiled, then loaded twice)."""
    (tmp_path / "targets.py").write_text(CACHED_TARGETS)
    (tmp_path / "consumer.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef run(f, x):\n    return f(x) + 1.0\n")
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMTHUNK_ENGINE": engine}
    code = CACHED_USE.format(dir=str(tmp_path))
    runs = [run_python(code, env=env, cwd=str(tmp_path)).splitlines() for _ in range(3)]
    import math
    want = [f"with_math {round(math.exp(0.125) + math.cos(0.25) + 1.0, 9)}",
            f"with_numpy {round(np.sinh(0.125) + np.arctan2(0.25, 0.5) + 1.0, 9)}",
            f"with_njit {round(2.0 * 0.125 + 1.0 + 1.0, 9)}"]
    for out in runs:
        assert out[:3] == want
    assert runs[0][3] == runs[1][3] == runs[2][3]          # the fingerprints
    assert [out[4] for out in runs] == ["hits 0 misses 3", "hits 3 misses 0",
                                        "hits 3 misses 0"]

"""Thunk creation through the C API (numthunk/capi.h) next to numthunk.bind.

    python bench/bench_capi.py [--quick]

The C extension tests/capi/ntcapi_ext.c (built against numthunk.get_include()
into tests/_build/capi) makes thunks of its own kernels in a C loop; the
same targets and values go through numthunk.bind in a Python loop. Two
bindings: a DLTensor descriptor (`double (const DLTensor *)` bound to a
2-D array) and a plain pointer and size (`double (const double *, int)`).
Each thunk is made and dropped (dealloc included), or made and kept in a
list (creation alone). Per-thunk times are medians of several repetitions.
"""

import gc
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

import numthunk as nt

QUICK = "--quick" in sys.argv
REPEAT = 5 if QUICK else 9
N = 10**4 if QUICK else 5 * 10**4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_extension():
    path = os.path.join(ROOT, "tests", "capi", "build_capi.py")
    spec = importlib.util.spec_from_file_location("ntcapi_build", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.path.insert(0, mod.build())
    import ntcapi_ext
    return ntcapi_ext


def per_thunk(fn):
    times = []
    for _ in range(REPEAT):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / N


def main():
    ext = load_extension()
    arr = np.arange(12.0).reshape(3, 4)[:, ::2]
    vec = np.arange(4.0)
    n = 4
    dl_fn = nt.Function(ext.kernel_address("sum"), "double (const DLTensor *)", owner=ext)
    p_fn = nt.Function(ext.kernel_address("psum"), "double (const double *, int)", owner=ext)
    assert nt.bind(dl_fn, arr)() == ext.make_sum(arr)() == arr.sum()
    assert nt.bind(p_fn, vec, n)() == ext.make_psum(vec, n)() == vec.sum()

    def bind_dl_drop():
        for _ in range(N):
            nt.bind(dl_fn, arr)

    def bind_p_drop():
        for _ in range(N):
            nt.bind(p_fn, vec, n)

    def bind_dl_keep():
        return [nt.bind(dl_fn, arr) for _ in range(N)]

    rows = [
        ("DLTensor *, made and dropped", per_thunk(bind_dl_drop),
         per_thunk(lambda: ext.create_drop_loop(arr, N))),
        ("DLTensor *, made and kept", per_thunk(bind_dl_keep),
         per_thunk(lambda: ext.create_list(arr, N))),
        ("double *, int, made and dropped", per_thunk(bind_p_drop),
         per_thunk(lambda: ext.create_psum_loop(vec, n, N))),
    ]
    info = nt.engine_info()
    print(f"numthunk {nt.__version__}, numpy {np.__version__}; engine {info['engine']}; "
          f"{N} thunks per run, median of {REPEAT}")
    width = max(len(r[0]) for r in rows)
    print(f"\n  {'creation per thunk':<{width}}  {'nt.bind':>10}  {'C API':>10}  {'ratio':>6}")
    for name, py, c in rows:
        print(f"  {name:<{width}}  {py * 1e6:7.2f} us  {c * 1e6:7.2f} us  {c / py:5.2f}x")


if __name__ == "__main__":
    main()

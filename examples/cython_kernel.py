"""A Cython kernel called from @njit code, with arrays and their dims.

Cython kernels that nopython code can call take each array as a pointer
plus its dimensions (a typed memoryview is a 208-byte struct passed by
value, which Numba cannot build). ``numthunk.cython`` reads such a
``cdef api`` function from the module's ``__pyx_capi__``; the result is a
Numba function value as it is, and binding the arrays and their shapes
gives a thunk that @njit code calls with the remaining scalars only.

The kernel is compiled here from the source below with Cython and the
system C compiler (about a second, cached between runs).

    python examples/cython_kernel.py
"""

import hashlib
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np
from numba import njit

import numthunk as nt

KERNEL = '''
# cython: language_level=3, boundscheck=False, wraparound=False

cdef api double weighted_row_sums(double *out, const double *a, Py_ssize_t n0,
                                  Py_ssize_t n1, const double *w, double scale) noexcept nogil:
    """out[i] = scale * sum_j a[i, j] w[j] for a C-contiguous (n0, n1) array a;
    returns the sum of out."""
    cdef Py_ssize_t i, j
    cdef double s, total = 0
    for i in range(n0):
        s = 0
        for j in range(n1):
            s += a[i * n1 + j] * w[j]
        out[i] = scale * s
        total += out[i]
    return total
'''


def build_kernel():
    """Compile KERNEL once per source and Python version; import it."""
    import Cython

    key = hashlib.sha256(f"{KERNEL}{Cython.__version__}{sys.version}".encode()).hexdigest()[:12]
    where = os.path.join(tempfile.gettempdir(), f"numthunk-example-{key}")
    name = "nt_example_kernel"
    ext = os.path.join(where, name + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    if not os.path.exists(ext):
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, name + ".pyx"), "w") as f:
            f.write(KERNEL)
        # the compilers get the environment without a library preloaded into
        # this interpreter (a sanitizer runtime, in numthunk's sanitizer tests)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        subprocess.run([sys.executable, "-m", "cython", "-3", name + ".pyx"], cwd=where,
                       check=True, env=env)
        cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
        link = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
        tmp = f"{ext}.{os.getpid()}.tmp"
        subprocess.run([*cc, "-O2", "-shared", "-fPIC", "-w",
                        "-I", sysconfig.get_paths()["include"], name + ".c", "-o", tmp, *link],
                       cwd=where, check=True, env=env)
        os.replace(tmp, ext)
    spec = importlib.util.spec_from_file_location(name, ext)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@njit
def with_dims(kernel, out, a, w, scale):
    """The kernel itself is a function value: pass pointers and dims."""
    return kernel(out.ctypes, a.ctypes, a.shape[0], a.shape[1], w.ctypes, scale)


@njit
def sweep(bound, scales):
    """A thunk with the arrays and dims bound: only the scale is left."""
    best = -np.inf
    for s in scales:
        best = max(best, bound(s))
    return best


def main():
    mod = build_kernel()
    kernel = nt.cython(mod, "weighted_row_sums", nogil=True)
    print(kernel)

    rng = np.random.default_rng(0)
    a = rng.standard_normal((50, 8))
    w = rng.standard_normal(8)
    out = np.empty(a.shape[0])

    total = with_dims(kernel, out, a, w, 2.0)
    np.testing.assert_allclose(out, 2.0 * a @ w)
    assert np.isclose(total, (2.0 * a @ w).sum())

    # Bind the arrays and their dimensions (checked: dtype, the C
    # Py_ssize_t); the thunk is double (double scale).
    bound = nt.bind(kernel, out, a, nt.shape(a, 0), nt.shape(a, 1), w, nt.ARG)
    print(bound)
    scales = np.linspace(-1.0, 1.0, 11)
    best = sweep(bound, scales)
    assert np.isclose(best, max(s * (a @ w).sum() for s in scales))
    # live: the thunk sees the arrays as they are at call time
    a *= 0.5
    assert np.isclose(sweep(bound, scales), best / 2)
    print("best weighted total:", best, "after a *= 0.5:", sweep(bound, scales))

    # Mismatched dtypes are refused when binding, not discovered as garbage.
    try:
        nt.bind(kernel, out, a.astype(np.float32), nt.shape(a, 0), nt.shape(a, 1), w, nt.ARG)
    except TypeError as e:
        print("refused:", e)
    else:
        raise AssertionError("a float32 array was bound to a double * parameter")


if __name__ == "__main__":
    main()

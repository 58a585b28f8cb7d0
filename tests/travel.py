"""What the tests of travel (test_travel*.py) share: the signatures they
bind, the Cython and cffi modules built for them, the directories and
environment of a fresh interpreter and the runner that unpickles there, a
Thunk subclass pickle finds by name, and where a file is mapped."""

import hashlib
import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap

import numthunk as nt

from ntbuild import BUILD, no_preload

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__)))

SUM = "double (const double *x, int n)"
POLY = "double (double x, const double *p, int n)"
FDDI = "double (double (*f)(double), double a, double b, int n)"
STRIDED = "double (const double *x, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t s0, ptrdiff_t s1)"
BLAS = "void (const int *n, const double *alpha, double *x, const int *incx, int *info)"


# ------------------------------------------------------------------ builds


def _cython_kernels():
    spec = importlib.util.spec_from_file_location(
        "ntk_build_kernels", os.path.join(HERE, "cython", "build_kernels.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path, _seconds = mod.build()
    if path not in sys.path:
        sys.path.insert(0, path)
    return path


CFFI_SOURCE = """
static double twice(double x) { return 2 * x; }
double poly(double x, const double *p, int n)
{
    double s = 0, xk = 1;
    for (int i = 0; i < n; i++) { s += p[i] * xk; xk *= x; }
    return s;
}
"""
CFFI_CDEF = "double twice(double x); double poly(double x, const double *p, int n);"


def _cffi_module():
    """A cffi API-mode module, compiled once per source under tests/_build."""
    import cffi

    key = hashlib.sha256((CFFI_SOURCE + CFFI_CDEF + sys.version).encode()).hexdigest()[:16]
    where = os.path.join(BUILD, "cffi", key)
    name = "ntk_travel_cffi"
    if not any(f.startswith(name) and f.endswith(".so") for f in os.listdir(where)) \
            if os.path.isdir(where) else True:
        ffi = cffi.FFI()
        ffi.cdef(CFFI_CDEF)
        ffi.set_source(name, CFFI_SOURCE)
        with no_preload():
            ffi.compile(tmpdir=where)
    if where not in sys.path:
        sys.path.insert(0, where)
    return where


def fresh_paths():
    """Directories a fresh interpreter needs on its path: numthunk, tests/
    (travel_kernels), the Cython kernels, the cffi module (conftest's
    `paths` fixture)."""
    return [ROOT, HERE, _cython_kernels(), _cffi_module()]


def fresh_env(paths):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]]
                                                 if env.get("PYTHONPATH") else []))
    return env


# A fresh interpreter: unpickle each case and evaluate its probe with `t`
# the unpickled object. Results (or the error) go back as a pickle.
RUNNER = textwrap.dedent("""
    import pickle, sys, traceback
    import numpy as np
    with open(sys.argv[1], "rb") as f:
        cases = pickle.load(f)
    out = {}
    for name, (data, probe) in cases.items():
        try:
            t = pickle.loads(data)
            out[name] = ("ok", eval(probe, {"np": np, "t": t}))
        except BaseException:
            out[name] = ("error", traceback.format_exc())
    with open(sys.argv[2], "wb") as f:
        pickle.dump(out, f)
""")


def run_fresh(cases, paths, tmp):
    """{name: (object, probe)} -> {name: probe's value in a fresh interpreter}."""
    blobs = {name: (pickle.dumps(obj), probe) for name, (obj, probe) in cases.items()}
    src, dst = tmp / "cases.pickle", tmp / "results.pickle"
    src.write_bytes(pickle.dumps(blobs))
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(src), str(dst)],
                          env=fresh_env(paths), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = pickle.loads(dst.read_bytes())
    errors = {k: v[1] for k, v in results.items() if v[0] != "ok"}
    assert not errors, "\n".join(f"{k}:\n{v}" for k, v in errors.items())
    return {k: v[1] for k, v in results.items()}


def lowest_mapping(path):
    """The lowest address this process maps the file at (/proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        return min(int(line.split("-")[0], 16) for line in maps
                   if line.rstrip().endswith(" " + path))


class LabelledThunk(nt.Thunk):
    """A subclass with a __dict__, importable: pickle finds it by name."""

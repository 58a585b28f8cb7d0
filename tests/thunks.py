"""Helpers shared by the tests of a thunk's life (test_lifetime.py,
test_rebind.py, test_threads.py, test_composition.py): reentrant values,
bounded runs, and reference counts that are checked without crashing."""

import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import numthunk as nt

from conftest import ENGINE_NAME

SUM = "double (const double *x, int n)"
MIXED = "double (int a, double b, float c, int64_t d)"


def bind(engine, target, *args, **kw):
    """nt.bind on the given engine, which must be the one the thunk runs on."""
    t = nt.bind(target, *args, engine=engine, **kw)
    assert t.engine == ENGINE_NAME[engine]
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


# Reference counts. Each check repairs a count that came out short before
# asserting, so the failure is reported as such instead of crashing the test
# process when the object is freed twice later.


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


def sum_fn():
    """The core's own sum kernel, double (const double *x, int n)."""
    return nt._core._kernels()["sum"]


def run_py(code, **env):
    # the child imports the numthunk this process tested, and ntbuild
    path = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(nt.__file__))),
                            os.path.dirname(os.path.abspath(__file__)),
                            os.environ.get("PYTHONPATH", "")])
    inherited = dict(os.environ)
    if "NUMTHUNK_ENGINE" in env or "NUMTHUNK_BACKEND" in env:
        # an engine asked for here replaces the one this process was given
        # under either name (both set and different fail the import)
        inherited.pop("NUMTHUNK_ENGINE", None)
        inherited.pop("NUMTHUNK_BACKEND", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**inherited, "PYTHONPATH": path, **env},
                          timeout=300)

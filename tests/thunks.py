"""Helpers shared by the test files, kept here once: binding on an engine,
integers known by __index__ (reentrant ones too), bounded runs, reference
counts that are checked without crashing, and fresh interpreters that
import the numthunk under test."""

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
    """An integer known by its __index__ only (as operator.index sees it);
    with an action, its conversion runs that Python code first. Equal to an
    Index of the same value, so that one survives a round trip by pickle
    (by this module's name) or deepcopy as equal."""

    def __init__(self, v, action=None):
        self.v, self.action = v, action

    def __index__(self):
        if self.action is not None:
            self.action()
        return self.v

    def __repr__(self):
        return f"Index({self.v})"

    def __eq__(self, other):
        return isinstance(other, Index) and other.v == self.v

    __hash__ = None


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


def run_python(code, env=None, cwd=None):
    """Run code in a fresh interpreter (as run_py does); return its stdout,
    failing on an error."""
    proc = run_py(code, cwd=cwd, **(env or {}))
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def run_py(code, cwd=None, **env):
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
                          cwd=cwd, timeout=300)

"""Nothing a thunk takes outlives it. Every form of bound value, and every
operation that makes or remakes a thunk (bind, rebind, pickling, copy,
composition, lowlevelcallable), run tens of thousands of times, leaves no
memory behind in Python's allocators (tracemalloc) or in C's (glibc's
mallinfo2), gives back each reference it took, and releases each buffer
export (a bytearray resizes again).

Released code waits in a quarantine of 32,768 releases before its memory is
reused (src/engine/choose.c, QUARANTINE), so each measurement first runs past it:
growth after that is a leak, not a queue filling."""

import array
import copy
import ctypes
import gc
import pickle
import sys
import tracemalloc

import numpy as np
import pytest

import numthunk as nt

from conftest import ENGINES
from layouts import OnlyDL

pytestmark = pytest.mark.leaks

WARM = 40_000              # past the quarantine (32,768 releases)
RUNS = 4_000               # measured after it
BYTES_PER_RUN = 4          # a leak is at least one 16-byte block a run
BOUND = RUNS * BYTES_PER_RUN
WINDOWS = 6                # windows of RUNS steps that may show a high-water mark


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


# glibc's (2.33 and later); elsewhere malloc goes unmeasured and the tests
# check Python's allocators, references and exports alone
_MALLINFO2 = getattr(ctypes.CDLL(None), "mallinfo2", None) if sys.platform == "linux" else None
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _Mallinfo2


def _malloc_in_use():
    if _MALLINFO2 is None:
        return 0
    info = _MALLINFO2()
    return info.uordblks + info.hblkhd


def _window(step, measure):
    """What measure() grows by over RUNS steps."""
    before = measure()
    for _ in range(RUNS):
        step()
    return measure() - before


def _traced():
    return tracemalloc.get_traced_memory()[0]


def _windows(step, measure):
    """The growth of up to WINDOWS consecutive windows, until one keeps less
    than the bound."""
    grown = [_window(step, measure)]
    while grown[-1] >= BOUND and len(grown) < WINDOWS:
        grown.append(_window(step, measure))
    return grown


def _growth(step):
    """Bytes kept over RUNS steps after WARM, by Python's allocators and by
    malloc, measured apart (tracemalloc's own tables live in malloc): for
    each, every window's growth, up to the first that keeps less than the
    bound.

    A leak keeps its bytes in every window. What grows for a while and then
    stops is a high-water mark, not a leak: seen on CPython 3.13 with the
    libffi engine, malloc kept 0 to 99 kB in one window of 4,000 pickle
    round trips in twenty, and 0 in the next. The collector runs once,
    before the first window, and is off from there on: a collection empties
    CPython's free lists, which the next window fills again (110 kB of
    deepcopies' tuples and dicts on 3.13), and a step's garbage must go by
    reference counting alone."""
    for _ in range(WARM):
        step()
    gc.collect()
    gc.disable()
    try:
        by_malloc = _windows(step, _malloc_in_use)
        tracemalloc.start()
        try:
            by_python = _windows(step, _traced)
        finally:
            tracemalloc.stop()
    finally:
        gc.enable()
    return by_python, by_malloc


@pytest.fixture(scope="module")
def fns(cfn, dlkern):
    return {
        "sum": cfn("f_d_pi", "double (const double *x, int n)"),
        "isum": cfn("f_i_pii", "int (const int *x, int n)"),
        "count": cfn("f_i_Pi", "int (const char *s, int n)"),
        "mixed": cfn("f_d_idfl", "double (int a, double b, float c, int64_t d)"),
        "cplx": cfn("f_d_D", "double (double complex z)"),
        "strided": cfn("f_d_pzzzz", "double (const double *x, ptrdiff_t n0, ptrdiff_t n1, "
                                    "ptrdiff_t s0, ptrdiff_t s1)"),
        "refs": cfn("f_v_ppppp", "void (const int *n, const double *alpha, double *x, "
                                 "const int *incx, int *info)"),
        "apply": cfn("f_d_Fd", "double (double (*f)(double), double x)"),
        "ident": cfn("f_d_d", "double (double)"),
        "dl": dlkern("dl_sum_f64", "double (const DLTensor *t)"),
    }


def _cases(fns, engine):
    """name -> (step, objects whose reference counts must come back); each
    step makes a thunk, checks a call against NumPy or Python, drops it."""
    a = np.arange(6.0)
    m = np.arange(12.0).reshape(3, 4)
    view = m[::2, ::-1]
    ints = array.array("i", [1, 2, 3])
    raw = bytearray(b"banana")
    cbuf = (ctypes.c_double * 3)(1.0, 2.0, 3.0)
    only = OnlyDL(a)
    inner = nt.bind(fns["ident"], nt.ARG, engine=engine)
    x = np.zeros(4)
    e = engine
    weighted = float(sum(view[i].sum() * (i + 1) for i in range(view.shape[0])))

    def sum_array():
        assert nt.bind(fns["sum"], a, nt.size(a), engine=e)() == 15.0

    def forwarded():
        assert nt.bind(fns["sum"], nt.ARG, nt.ARG, engine=e)(a, 6) == 15.0

    def scalars():
        assert nt.bind(fns["mixed"], 1, nt.ARG, np.float32(0.5), 2, engine=e)(2.0) == 5.5

    def complex_value():
        assert nt.bind(fns["cplx"], 3 + 4j, engine=e)() == 43.0   # re + 10 im

    def strided():
        t = nt.bind(fns["strided"], nt.strided(view), nt.shape(view, 0), nt.shape(view, 1),
                    nt.stride(view, 0), nt.stride(view, 1), engine=e)
        assert t() == weighted

    def exporters():
        assert nt.bind(fns["isum"], ints, nt.size(ints), engine=e)() == 6
        assert nt.bind(fns["count"], raw, 6, engine=e)() == 3
        assert nt.bind(fns["count"], memoryview(raw)[1:], 5, engine=e)() == 3
        assert nt.bind(fns["sum"], cbuf, 3, engine=e)() == 6.0

    def dlpack():
        assert nt.bind(fns["dl"], a, engine=e)() == 15.0
        assert nt.bind(fns["dl"], memoryview(m)[1:], engine=e)() == 60.0
        assert nt.bind(fns["dl"], only, engine=e)() == 15.0

    def refs():
        info = nt.ref(0, "int")
        nt.bind(fns["refs"], nt.ref(2, "int"), nt.ref(2.0, "double"), x, nt.ref(1, "int"),
                info, engine=e)()
        assert info.value == 2       # n, as the kernel reports it

    def rebind():
        t = nt.bind(fns["sum"], a, 6, engine=e)
        t.rebind(0, m)
        t.rebind(1, 12)
        assert t() == 66.0

    def compose():
        assert nt.bind(fns["apply"], inner, nt.ARG, engine=e)(2.5) == 2.5

    def pickled():
        t = nt.bind(fns["sum"], a, nt.size(a), engine=e)
        assert pickle.loads(pickle.dumps(t, protocol=5))() == 15.0

    def copied():
        t = nt.bind(fns["sum"], a, nt.size(a), engine=e)
        assert copy.copy(t)() == copy.deepcopy(t)() == 15.0

    def low_level():
        t = nt.bind(fns["ident"], nt.ARG, engine=e)
        assert t.lowlevelcallable().function is not None

    def refused():
        # the refusals' paths give back what they took too
        try:
            nt.bind(fns["sum"], m[:, ::2], 6, engine=e)
        except ValueError:
            pass
        else:
            raise AssertionError("a non-contiguous array was bound")
        try:
            nt.bind(fns["isum"], a, 6, engine=e)
        except TypeError:
            pass
        else:
            raise AssertionError("doubles were bound to int *")

    held = (a, m, view, ints, raw, cbuf, only, inner, x)
    steps = dict(sum_array=sum_array, forwarded=forwarded, scalars=scalars,
                 complex_value=complex_value, strided=strided, exporters=exporters,
                 dlpack=dlpack, refs=refs, rebind=rebind, compose=compose, pickled=pickled,
                 copied=copied, low_level=low_level, refused=refused)
    return steps, held


CASES = ["sum_array", "forwarded", "scalars", "complex_value", "strided", "exporters",
         "dlpack", "refs", "rebind", "compose", "pickled", "copied", "low_level", "refused"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", CASES)
def test_nothing_is_kept(fns, engine, case):
    steps, held = _cases(fns, engine)
    step = steps[case]
    counts = [sys.getrefcount(o) for o in held]
    by_python, by_malloc = _growth(step)
    gc.collect()
    assert [sys.getrefcount(o) for o in held] == counts, "a bound object's reference was kept"
    assert by_python[-1] < BOUND, \
        f"{case}: Python's allocators kept {by_python} bytes in windows of {RUNS} runs"
    assert by_malloc[-1] < BOUND, f"{case}: malloc kept {by_malloc} bytes in windows of {RUNS} runs"
    raw = held[4]
    raw.extend(b"!")          # no buffer export of it is left
    del raw[-1]

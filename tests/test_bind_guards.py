"""The argument counts of the core's entry points at their edges:
Thunk(...) by position (python/thunk.c parse_new_args: 3 to 9 read without
keyword parsing, more refused by it), _new_thunk (exactly 10), and a
thunk's call (exactly as many arguments as it forwards, none by keyword),
with one fewer and one more each time. On both engines."""

import numpy as np
import pytest

import numthunk as nt
from numthunk import _core

from thunks import bind

pytestmark = pytest.mark.guards

SIG3 = "double (const double *x, int n)"


def _sum(cfn):
    return cfn("f_d_pi", SIG3)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 9])
def test_thunk_by_position_with_3_to_9_arguments(cfn, engine, n):
    fn = _sum(cfn)
    a = np.arange(4.0)
    full = (fn._signature, fn.address, (a, 4), fn, True, None, engine, None, None)
    t = _core.Thunk(*full[:n])
    assert t() == 6.0
    assert t.bindings == (a, 4)
    if n > 6:
        assert t.engine.startswith("native" if engine == "native" else "libffi")
    # the same by keyword (the slow path) gives the same thunk
    names = ("signature", "address", "args", "owner", "nogil", "memviews", "engine", "via",
             "carried")
    k = _core.Thunk(*full[:2], **dict(zip(names[2:n], full[2:n])))
    assert k() == 6.0 and k.bindings == (a, 4)


def test_thunk_by_position_with_2_or_10_arguments_is_refused(cfn):
    fn = _sum(cfn)
    full = (fn._signature, fn.address, (np.arange(4.0), 4), fn, True, None, None, None, None)
    with pytest.raises(TypeError, match=r"Thunk\(\) missing required argument 'args' \(pos 3\)"):
        _core.Thunk(*full[:2])
    with pytest.raises(TypeError, match=r"Thunk\(\) takes at most 9 arguments \(10 given\)"):
        _core.Thunk(*full, None)


@pytest.mark.parametrize("n", [3, 9])
def test_thunk_by_position_checks_its_signature_and_tuple(cfn, n):
    fn = _sum(cfn)
    full = [fn._signature, fn.address, (np.arange(4.0), 4), fn, True, None, None, None, None]
    for at, bad in ((0, SIG3), (2, [np.arange(4.0), 4])):
        args = list(full[:n])
        args[at] = bad
        with pytest.raises(TypeError, match=r"^Thunk\(signature, address, args: tuple, \.\.\.\)$"):
            _core.Thunk(*args)


@pytest.mark.parametrize("n", [0, 1, 9, 11, 12])
def test_new_thunk_takes_exactly_10_arguments(cfn, n):
    fn = _sum(cfn)
    good = (nt.Thunk, fn._signature, fn.address, (np.arange(2.0), 2), fn, True, {}, None, (),
            None)
    assert _core._new_thunk(*good)() == 1.0
    args = (good + (None, None))[:n]
    with pytest.raises(TypeError, match=r"^_new_thunk\(type, signature, address"):
        _core._new_thunk(*args)


@pytest.mark.parametrize("nfwd", [0, 1, 2])
def test_a_call_takes_exactly_the_forwarded_count(cfn, engine, nfwd):
    fn = _sum(cfn)
    a = np.arange(4.0)
    values = [(a, 3), (a, nt.ARG), (nt.ARG, nt.ARG)][nfwd]
    args = [(), (3,), (a, 3)][nfwd]
    t = bind(engine, fn, *values)
    assert t(*args) == 3.0
    for wrong in (args[:-1] if nfwd else None, args + (1,)):
        if wrong is None:
            continue
        plural = "" if nfwd == 1 else "s"
        with pytest.raises(TypeError, match=rf"^the thunk takes {nfwd} argument{plural}, "
                                            rf"got {len(wrong)}"):
            t(*wrong)
    with pytest.raises(TypeError, match="^a thunk takes positional arguments only$"):
        t(*args, x=1)
    assert t(*args, **{}) == 3.0                  # an empty keyword dict is no keyword

"""Properties of checked conversion, over random values: an integer either
reaches the callee unchanged or is refused with OverflowError (never
truncated); a float reaches a float parameter rounded to nearest as C does,
or is refused when beyond FLT_MAX; random objects never crash a bind."""

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numthunk as nt

INTS = [("f_c_c", "int8_t", -2**7, 2**7 - 1), ("f_C_C", "uint8_t", 0, 2**8 - 1),
        ("f_s_s", "int16_t", -2**15, 2**15 - 1), ("f_S_S", "uint16_t", 0, 2**16 - 1),
        ("f_i_i", "int", -2**31, 2**31 - 1), ("f_I_I", "unsigned int", 0, 2**32 - 1),
        ("f_l_l", "int64_t", -2**63, 2**63 - 1), ("f_L_L", "uint64_t", 0, 2**64 - 1)]


@pytest.mark.parametrize("name, ctype, lo, hi", INTS, ids=[r[1] for r in INTS])
def test_integers_arrive_unchanged_or_are_refused(cfn, name, ctype, lo, hi):
    fn = cfn(name, f"{ctype} ({ctype} v)")
    fwd = nt.bind(fn, nt.ARG)

    @settings(max_examples=300, deadline=None)
    @given(st.one_of(st.integers(lo - 2**65, hi + 2**65), st.integers(lo - 3, lo + 3),
                     st.integers(hi - 3, hi + 3)))
    def check(v):
        if lo <= v <= hi:
            assert nt.bind(fn, v)() == v
            assert fwd(v) == v
            assert nt.bind(fn, np.int64(v) if -2**63 <= v < 2**63 else v)() == v
        else:
            with pytest.raises(OverflowError, match=f"argument 1 \\(v: {ctype}\\)"):
                nt.bind(fn, v)
            with pytest.raises(OverflowError):
                fwd(v)

    check()


def test_floats_round_as_c_does(cfn):
    fn = cfn("f_f_f", "float (float x)")
    flt_max = struct.unpack("f", struct.pack("I", 0x7F7FFFFF))[0]

    @settings(max_examples=500, deadline=None)
    @given(st.floats(allow_nan=False, width=64))
    def check(x):
        limit = float.fromhex("0x1.ffffffp+127")   # FLT_MAX plus half an ulp: rounds to inf
        if math.isfinite(x) and abs(x) >= limit:
            with pytest.raises(OverflowError, match="argument 1 \\(x: float\\)"):
                nt.bind(fn, x)
            return
        expected = np.float32(x).item()  # round to nearest even, as C's conversion
        got = nt.bind(fn, x)()
        assert got == expected or (math.isnan(got) and math.isnan(expected))
        assert abs(got) <= flt_max or math.isinf(x)

    check()


_ODD = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.complex_numbers(),
                 st.text(max_size=4), st.binary(max_size=4), st.lists(st.integers(), max_size=3),
                 st.just(np.zeros(3)), st.just(np.zeros(3, dtype=np.int32)),
                 st.just(np.zeros((2, 2))[:, 0]), st.just(object()), st.just(nt.ARG),
                 st.just(nt.size(np.zeros(2))), st.just(nt.address(16)))


@settings(max_examples=400, deadline=None)
@given(_ODD, _ODD)
def test_any_objects_bind_or_raise_cleanly(cfn, a, b):
    fn = cfn("f_d_pi", "double (const double *x, int n)")
    try:
        t = nt.bind(fn, a, b)
    except (TypeError, ValueError, OverflowError) as exc:
        assert "argument" in str(exc) or "takes" in str(exc)
        return
    # Bound: only what the parameters allow, kept as given.
    pointer_ok = a is nt.ARG or a is None or isinstance(a, nt.Address) or (
        isinstance(a, np.ndarray) and a.dtype == np.float64 and a.flags.c_contiguous)
    int_ok = b is nt.ARG or isinstance(b, nt._api._Derived) or (
        isinstance(b, int) and -2**31 <= b < 2**31)
    assert pointer_ok and int_ok, (a, b)
    assert all(x is y for x, y in zip(t.bindings, (a, b)))
    # Calls that read only what was bound give the sum the C function gives.
    if isinstance(a, np.ndarray) and b is not nt.ARG:
        n = 2 if isinstance(b, nt._api._Derived) else int(b)
        if 0 <= n <= a.size:
            assert t() == a[:n].sum()
    elif a is nt.ARG and b is nt.ARG:
        assert t(np.arange(3.0), 3) == 3.0
    t.release()

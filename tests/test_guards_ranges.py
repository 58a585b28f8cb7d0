"""Real values at the edges of C float and double (convert.c to_float,
as_double, refuse_overflow_to_inf) in every form a real parameter takes:
float, int, an object with __index__, an object with __float__, NumPy
scalars, Decimal. The edge of float is FLT_MAX + half an ulp (it rounds to
inf); the edge of double for an int is DBL_MAX + half an ulp (2**1024 -
2**970). Bound and forwarded, on both engines; the integer widths' edges
in every form are in test_bind.py."""

import decimal
import math
import struct

import numpy as np
import pytest

import numthunk as nt

from thunks import bind

FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
FLT_EDGE = float.fromhex("0x1.ffffffp+127")          # rounds to inf as a float
FLT_BELOW = math.nextafter(FLT_EDGE, 0.0)             # the largest that rounds to FLT_MAX
DBL_MAX = float.fromhex("0x1.fffffffffffffp+1023")
DBL_EDGE_INT = 2 ** 1024 - 2 ** 970                   # an int from here converts to inf


class Index:
    """An integer known by its __index__ only."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v

    def __repr__(self):
        return f"Index({self.v})"


class Real:
    """A number known by its __float__ only."""

    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v

    def __repr__(self):
        return f"Real({self.v!r})"


def _forms(v):
    """v (a float or an int) in every form that holds it exactly."""
    out = [v]
    if isinstance(v, int):
        out.append(Index(v))
        if abs(v) < DBL_EDGE_INT:
            out.append(float(v))
        if -2 ** 63 <= v < 2 ** 64:
            out.append(np.int64(v) if v < 2 ** 63 else np.uint64(v))
    else:
        out += [Real(v), np.float64(v), decimal.Decimal(v)]
        if math.isfinite(v) and abs(v) <= FLT_MAX and float(np.float32(v)) == v:
            out.append(np.float32(v))
    return [f for f in out if f is not None]


def _check(engine, fn, v, want):
    fwd = bind(engine, fn, nt.ARG)
    for form in _forms(v):
        assert bind(engine, fn, form)() == want, form
        assert fwd(form) == want, form


def _refused(engine, fn, v, ctype):
    fwd = bind(engine, fn, nt.ARG)
    for form in _forms(v):
        with pytest.raises(OverflowError, match=rf"^argument 1 \({ctype}\): .*(beyond the range "
                                                rf"of a C {ctype}|too large for a C {ctype})"):
            bind(engine, fn, form)
        with pytest.raises(OverflowError, match=rf"^argument 1 \({ctype}\)"):
            fwd(form)


@pytest.mark.parametrize("sign", [1, -1])
def test_float_at_the_rounding_edge_in_every_form(cfn, engine, sign):
    fn = cfn("f_f_f", "float (float)")
    for v in (FLT_MAX, FLT_BELOW, math.nextafter(FLT_MAX, 0.0)):
        _check(engine, fn, sign * v, sign * float(np.float32(v)))
    for v in (FLT_EDGE, math.nextafter(FLT_EDGE, math.inf), 2.0 ** 128):
        _refused(engine, fn, sign * v, "float")


@pytest.mark.parametrize("sign", [1, -1])
def test_float_from_ints_at_the_rounding_edge(cfn, engine, sign):
    """An int is converted to double first (exactly, below 2**53 ulps),
    then checked against the float edge as a double is."""
    fn = cfn("f_f_f", "float (float)")
    below, edge = int(FLT_BELOW), int(FLT_EDGE)
    assert float(below) == FLT_BELOW and float(edge) == FLT_EDGE
    _check(engine, fn, sign * int(FLT_MAX), sign * FLT_MAX)
    _check(engine, fn, sign * below, sign * FLT_MAX)
    _refused(engine, fn, sign * edge, "float")
    _refused(engine, fn, sign * (edge + 1), "float")


@pytest.mark.parametrize("sign", [1, -1])
def test_double_from_ints_at_the_rounding_edge(cfn, engine, sign):
    fn = cfn("f_d_d", "double (double)")
    _check(engine, fn, sign * int(DBL_MAX), sign * DBL_MAX)
    _check(engine, fn, sign * (DBL_EDGE_INT - 1), sign * DBL_MAX)   # rounds down to DBL_MAX
    _refused(engine, fn, sign * DBL_EDGE_INT, "double")
    _refused(engine, fn, sign * (DBL_EDGE_INT + 1), "double")
    _refused(engine, fn, sign * 2 ** 1024, "double")


def test_values_that_convert_to_inf_without_being_inf_are_refused(cfn, engine):
    """A __float__ or a Decimal beyond DBL_MAX gives inf: refused as the
    int is; a value that is infinite itself passes as inf."""
    fn = cfn("f_d_d", "double (double)")
    for big in (decimal.Decimal("1e400"), decimal.Decimal("-1e400")):
        with pytest.raises(OverflowError, match=r"too large for a C double \(it converts to "
                                                r"-?inf\)"):
            bind(engine, fn, big)
    for inf in (math.inf, -math.inf, decimal.Decimal("Infinity"), np.float64(-math.inf),
                np.float32(math.inf)):
        assert bind(engine, fn, inf)() == float(inf)
    f = cfn("f_f_f", "float (float)")
    for inf in (math.inf, decimal.Decimal("-Infinity"), np.float64(-math.inf)):
        assert bind(engine, f, inf)() == float(inf)

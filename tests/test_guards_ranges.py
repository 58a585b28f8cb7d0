"""Real values at the edges of C float and double (convert/value.c to_float,
as_double, refuse_overflow_to_inf) in every form a real parameter takes:
float, int, an object with __index__, an object with __float__, NumPy
scalars, Decimal. The edge of float is FLT_MAX + half an ulp (it rounds to
inf); the edge of double for an int is DBL_MAX + half an ulp (2**1024 -
2**970). Bound and forwarded, on both engines; the integer widths' edges
in every form are in test_bind.py."""

import decimal
import functools
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
        with pytest.raises(OverflowError) as info:
            bind(engine, cfn("f_f_f", "float (float)"), big)
        assert str(info.value) == (f"argument 1 (float): {big!r} is too large for a C float (it "
                                   f"converts to {'-' if big < 0 else ''}inf)")
    for inf in (math.inf, -math.inf, decimal.Decimal("Infinity"), np.float64(-math.inf),
                np.float32(math.inf)):
        assert bind(engine, fn, inf)() == float(inf)
    f = cfn("f_f_f", "float (float)")
    for inf in (math.inf, decimal.Decimal("-Infinity"), np.float64(-math.inf)):
        assert bind(engine, f, inf)() == float(inf)


# ---------------------------------------------------------------- huge values in messages

DIGITS_401 = "1" + "0" * 31 + "... (401 digits)"          # 10**400, cut (convert/value.c show)
BITS_16610 = "an int of 16610 bits"                         # 10**5000: past str()'s limit


@pytest.mark.parametrize("sig, fixture, refusal", [
    ("int32_t (int32_t)", "f_i_i",
     "does not fit in a 32-bit C int32_t (range -2147483648..2147483647)"),
    ("uint64_t (uint64_t)", "f_L_L",
     "does not fit in a 64-bit unsigned C uint64_t (range 0..18446744073709551615)"),
    ("double (double)", "f_d_d", "is too large for a C double"),
    ("float (float)", "f_f_f", "is too large for a C float"),      # not "C double"
    ("double (double complex)", "f_d_D",
     "does not fit in a C double complex (its parts are C doubles, max 1.7976931348623157e+308)"
     ": OverflowError: int too large to convert to float"),
])
def test_a_huge_int_is_shown_cut(cfn, engine, sig, fixture, refusal):
    """10**400 is shown by its first digits and its count of digits, not
    all 401 of them; 10**5000, which str() refuses to write, by its bits
    (the message is still the OverflowError, not str()'s ValueError).
    Bound and forwarded, for integer, real and complex parameters alike
    (a forwarded complex runs on libffi whatever the engine asked)."""
    fn = cfn(fixture, sig)
    ctype = sig[sig.index("(") + 1:-1]
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for value, shown in ((10 ** 400, DIGITS_401), (10 ** 5000, BITS_16610)):
        for call in (functools.partial(nt.bind, fn, value, engine=engine),
                     functools.partial(fwd, value)):
            with pytest.raises(OverflowError) as info:
                call()
            assert str(info.value) == f"argument 1 ({ctype}): {shown} {refusal}"


def test_a_huge_value_of_another_type_is_shown_cut(cfn, engine):
    """Any repr past 80 characters is cut to its first 32 and "..."; one
    up to 80 is shown whole (np.clongdouble's longest)."""
    fn = cfn("f_d_d", "double (double)")
    with pytest.raises(OverflowError) as info:
        bind(engine, fn, decimal.Decimal(10 ** 400))
    assert str(info.value) == ("argument 1 (double): Decimal('10000000000000000000000... "
                               "is too large for a C double (it converts to inf)")
    whole = decimal.Decimal("1." + "0" * 62 + "E+400")
    cut = decimal.Decimal("1." + "0" * 63 + "E+400")
    assert (len(repr(whole)), len(repr(cut))) == (80, 81)
    with pytest.raises(OverflowError) as info:
        bind(engine, fn, whole)
    assert str(info.value) == (f"argument 1 (double): {whole!r} is too large for a C double "
                               "(it converts to inf)")
    with pytest.raises(OverflowError) as info:
        bind(engine, fn, cut)
    assert str(info.value) == ("argument 1 (double): Decimal('1." + "0" * 21 + "... is too "
                               "large for a C double (it converts to inf)")

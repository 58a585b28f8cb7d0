"""Numba's signature syntax, read by the Numba adapter (numthunk/_numba_sig.py)
as C for the core's parser, which reads C only.

tests/numba_signatures.json holds what the core made of Numba's text when
its own parser read that syntax (src/parse/declarator.c as of commit
8f81b9b): for each text the Signature's str() and parameter names, or the
exception and its whole message, caret included. The texts are every
Numba-syntax string of the tests of that commit (tests/*.py and the C
parser's own tests), every Numba name as result and parameter in either
form, and signatures generated at random (nested CPointer, FunctionType,
pointers, consts, names) with each of their prefixes and one-character
damage; with a set of typedefs; and one type for ref(). The adapter must
give the same answers: the same canonical text, the same equality and
hash, the same refusal at the same column of the user's text.
"""

import json
import os

import pytest

import numthunk as nt

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "numba_signatures.json"), encoding="utf-8") as _f:
    RECORDED = json.load(_f)


def _signature_result(text, typedefs=None):
    try:
        sig = nt.Signature(text, typedefs=typedefs)
    except Exception as e:
        return [text, type(e).__name__, str(e)]
    return [text, str(sig), list(sig.names)]


def _check(want, typedefs=None):
    got = _signature_result(want[0], typedefs)
    assert got == want
    if isinstance(want[2], list):
        # the same signature as the C text it prints: equal, same hash
        sig, back = nt.Signature(want[0], typedefs=typedefs), nt.Signature(want[1])
        assert sig == back and hash(sig) == hash(back)


@pytest.mark.parametrize("k", range(len(RECORDED["signatures"])))
def test_numba_text_reads_as_the_core_read_it(k):
    _check(RECORDED["signatures"][k])


@pytest.mark.parametrize("k", range(len(RECORDED["with_typedefs"])))
def test_numba_text_with_typedefs_reads_as_the_core_read_it(k):
    """A caller's typedef of a short name (f8) wins over Numba's; a
    typedef's value may be Numba's text."""
    _check(RECORDED["with_typedefs"][k], RECORDED["typedefs"])


@pytest.mark.parametrize("k", range(len(RECORDED["types"])))
def test_a_ref_of_a_numba_type_is_what_it_was(k):
    text, want, value = RECORDED["types"][k]
    try:
        r = nt.ref(1, text)
    except Exception as e:
        assert [type(e).__name__, str(e)] == [want, value]
    else:
        assert [str(r.cell.dtype), repr(r.value)] == [want, value]


def test_the_recorded_set_reaches_every_form():
    texts = [r[0] for r in RECORDED["signatures"]]
    parsed = [r for r in RECORDED["signatures"] if isinstance(r[2], list)]
    assert len(texts) > 3000 and len(parsed) > 1500
    for form in ("CPointer(", "FunctionType[", "->", "voidptr", "none", "f8", "c16", "intp",
                 "bool_", "byte"):
        assert sum(form in r[0] for r in parsed) >= 10, form
    for name in ("float64", "int32", "intp", "uintc", "complex64", "bool_", "boolean", "byte",
                 "voidptr", "none", "f8", "i4", "u1", "c16", "b1"):
        assert any(f"{name}({name})" == t for t in texts), name
    messages = {r[2].split("\n")[0] for r in RECORDED["signatures"] if r[1] == "ValueError"}
    assert len(messages) > 100

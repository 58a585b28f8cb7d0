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

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numthunk as nt
from numthunk import _numba_sig

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
    for name in _numba_sig.NAMES:
        assert any(f"{name}({name})" == t for t in texts), name
    messages = {r[2].split("\n")[0] for r in RECORDED["signatures"] if r[1] == "ValueError"}
    assert len(messages) > 100


# ------------------------------------------------------------ the translation


@pytest.mark.parametrize("text, c", [
    ("float64(CPointer(float64), intc)", "double (double *, int)"),
    ("voidptr(voidptr)", "void *(void *)"),
    ("int32(CPointer(CPointer(int8)), CPointer(voidptr))", "int (int8_t **, void **)"),
    ("void(const CPointer(float64))", "void (double *const)"),
    ("void(CPointer(const float64)*)", "void (const double **)"),
    ("boolean(bool_, complex128, complex64, uint64, byte)",
     "bool (bool, double complex, float complex, uintptr_t, unsigned char)"),
    ("float32 (float32, intp, uintp, uintc)", "float (float, intptr_t, uintptr_t, unsigned int)"),
    ("void(voidptr, intp, uintp, boolean, int8, uint16)",
     "void (void *, intptr_t, uintptr_t, bool, int8_t, uint16_t)"),
    ("(float64*, int32) -> float64", "double (double *, int)"),
    ("(CPointer(float64), int32) -> float64", "double (double *, int)"),
    ("(int32, float64) -> none", "void (int, double)"),
    ("() -> none", "void (void)"),
    ("(double x, int n)->double", "double (double, int)"),
    ("float64(FunctionType[float64(float64)], float64)", "double (double (*)(double), double)"),
    ("float64(float64(float64), float64)", "double (double (*)(double), double)"),
    ("(FunctionType[none(i4)]) -> f8", "double (void (*)(int))"),
    ("f8(f4, i1, i2, i4, i8, u1, u2, u4, u8, b1, c8, c16)",
     "double (float, int8_t, int16_t, int, intptr_t, uint8_t, uint16_t, unsigned int, "
     "uintptr_t, bool, float complex, double complex)"),
    ("void (FunctionType[f8(f8)] const)", "void (double (*const)(double))"),
    ("void (FunctionType[f8(f8)] const g, int n)", "void (double (*const)(double), int)"),
    ("void (FunctionType[f8(FunctionType[f8(f8)])])", "void (double (*)(double (*)(double)))"),
])
def test_numba_forms_print_as_c(text, c):
    """What the C parser's tests read in Numba's syntax (tests/c/test_sig.c
    before the syntax moved here): the C text the adapter hands the core,
    and the canonical form."""
    c_text, typedefs, _cols = _numba_sig.translate(text)
    assert nt._core.Signature(c_text, typedefs) == nt._core.Signature(c)
    assert str(nt.Signature(text)) == c
    with pytest.raises(ValueError):
        nt._core.Signature(text)          # the core's parser reads C only


@pytest.mark.parametrize("text, column, message", [
    ("(float64) -> ", 13, "expected a type, got end of input"),
    ("(float64)", 9, "expected '->' and the return type, got end of input"),
    ("(float64) float64", 10, "expected '->' and the return type, got 'float64'"),
    ("(float64, ) -> float64", 10, "expected a type, got ')'"),
    ("float64(float64) -> float64", 17, "unexpected '->' after the signature"),
    ("(float64) -> float64 (", 21, "unexpected '(' after the signature"),
    ("float64(float64[:], intc)", 15, "arrays ('[]') are not supported; use a pointer"),
    ("float64(CPointer(float64), foo)", 27, "unknown type name 'foo'"),
    ("void (FunctionType(float64))", 18, "expected '[' after FunctionType, got '('"),
    ("void (FunctionType[float64(float64)", 35, "expected ']', got end of input"),
    ("void (FunctionType[float64 float64])", 27,
     "expected '(' and the parameters of the function type, got 'float64'"),
    ("void (FunctionType[float64(float64)] *)", 37,
     "pointers to function pointers are not supported"),
    ("FunctionType[float64(float64)](void)", 0,
     "a function pointer as the return type is not supported"),
    ("(DLTensor) -> void", 1, "DLTensor is passed by pointer: write 'const DLTensor *' "
     "(or 'DLTensor *' if the kernel writes the data)"),
    ("() -> DLTensor", 6, "DLTensor is passed by pointer: write 'const DLTensor *' "
     "(or 'DLTensor *' if the kernel writes the data)"),
    ("(float64) - float64", 10,
     "expected '->' and the return type, got unexpected character '-'"),
    ("void (CPointer(FunctionType[f8(f8)]))", 35,
     "pointers to function pointers are not supported"),
    ("void (FunctionType[f8(f8)](int))", 27,
     "a function returning a function pointer is not supported"),
    ("void (FunctionType[FunctionType[f8()](i4)])", 38,
     "a function returning a function pointer is not supported"),
    ("void (FunctionType[f8(f8)] volatile)", 27, "'volatile' is not supported"),
    ("void (FunctionType[f8(f8)] struct)", 27,
     "'struct' types are not supported; pass a pointer as void *"),
    ("void (FunctionType[f8(f8)] const x, int x)", 36,
     "parameter 2 is named 'x' as parameter 1 is: parameter names must differ"),
    ("void (FunctionType[f8(f8)] int)", 27, "'int' cannot follow the type name 'FunctionType'"),
    ("void (FunctionType[f8(f8) x])", 26, "expected ']', got 'x'"),
    ("(FunctionType[f8(f8)] f) -> FunctionType[f8()]", 28,
     "a function pointer as the return type is not supported"),
    ("int (CPointer)", 13, "expected '(' after CPointer, got ')'"),
    ("int (CPointer(float64 x))", 22, "expected ')', got 'x'"),
    ("int (CPointer())", 14, "expected a type, got ')'"),
    ("void (int a, CPointer(flaot64) a)", 22, "unknown type name 'flaot64'"),
    ("void (int a, CPointer(float64) a)", 13,
     "parameter 2 is named 'a' as parameter 1 is: parameter names must differ"),
    ("void (f8, (none, i4) -> f8)", 10, "expected a type, got '('"),
])
def test_numba_forms_are_refused_at_the_users_column(text, column, message):
    """The parser's refusal of the translation, or the adapter's of what
    only Numba's syntax can get wrong: the parser's words, the caret under
    the user's text."""
    with pytest.raises(ValueError) as info:
        nt.Signature(text)
    lines = str(info.value).split("\n")
    assert lines[0] == message
    assert lines[1] == "    " + text
    assert lines[2] == "    " + " " * column + "^"


def test_numba_names_are_typedefs_a_caller_may_shadow_only_when_short():
    """f8, i4, none: a Cython module's own `ctypedef float f8` keeps its
    meaning; float64, intp, voidptr: refused as a typedef's name, as the
    parser refuses its own names."""
    assert str(nt.Signature("f8 (f8, i4)", typedefs={"f8": "float"})) == "float (float, int)"
    assert str(nt.Signature("f8 (f8, i4)")) == "double (double, int)"
    for name in ("float64", "intp", "voidptr", "CPointer", "FunctionType"):
        with pytest.raises(ValueError, match=f"^typedef '{name}' would redefine a type name"):
            nt.Signature("double (double)", typedefs={name: "float"})
    # a typedef's value in Numba's syntax
    sig = nt.Signature("void (REAL *, dp)", typedefs={"REAL": "float64", "dp": "CPointer(f8)"})
    assert str(sig) == "void (double *, double *)"
    with pytest.raises(ValueError, match=r"^typedef REAL = float6: unknown type name 'float6'"):
        nt.Signature("void (REAL)", typedefs={"REAL": "float6"})


def test_text_without_numba_syntax_reaches_the_core_as_written():
    for text in ("double (double *, int)", "void (const struct pt *p, npy_intp n)",
                 "int (*)(int)", ""):
        c_text, typedefs, cols = _numba_sig.translate(text)
        assert (c_text, typedefs, cols) == (text, None, None)
    c_text, typedefs, cols = _numba_sig.translate("double (float64 x)")
    assert c_text == "double (float64 x)" and typedefs == {"float64": "double"}


def test_a_memoryview_dtype_and_a_ref_in_numba_names():
    assert nt.ref(3, "int32").cell.dtype == np.int32
    assert nt.ref(1.5, "f8").value == 1.5
    with pytest.raises(ValueError) as info:
        nt.ref(1, "unsigned int64")
    assert str(info.value).split("\n")[0] == ("'int64' is a type name: it cannot follow "
                                             "'unsigned', nor name a parameter")
    with pytest.raises(TypeError, match=r"^'CPointer\(float64\)' is not a scalar C type$"):
        nt.ref(1, "CPointer(float64)")
    from numthunk._cython import parse_memview
    assert parse_memview("const float64[:, ::1]") == ("double", 2, "C", True)
    assert parse_memview(("intc", 1, None, False)) == ("int", 1, None, False)


# ------------------------------------------------------------ generated: Numba and C side by side

_C_OF = dict(_numba_sig.NAMES)
_SCALARS = sorted(n for n in _C_OF if n not in ("none", "voidptr"))


def _types(depth=3):
    """(Numba text, C type text as base + declarator) pairs."""
    base = st.sampled_from(_SCALARS + ["double", "int", "npy_intp", "voidptr"]).map(
        lambda n: (n, _C_OF.get(n, n), ""))
    if depth == 0:
        return base

    def pointer(t):
        n, b, d = t
        if d.startswith("(*"):
            return t                       # no pointers to function pointers
        return (f"CPointer({n})", b, "*" + d)

    def function(rp):
        (rn, rb, rd), params = rp
        if rd.startswith("(*"):
            return (rn, rb, rd)
        pn = ", ".join(p[0] for p in params)
        pc = ", ".join(_decl(p) for p in params) or "void"
        return (f"FunctionType[{rn}({pn})]", _decl((rn, rb, rd)), f"(*)({pc})")

    inner = _types(depth - 1)
    return st.one_of(base, inner.map(pointer),
                     st.tuples(inner, st.lists(inner, max_size=3)).map(function))


def _decl(t):
    n, b, d = t
    if d.startswith("(*"):
        return f"{b} {d}"
    return f"{b} {d}".strip()


@settings(max_examples=300, deadline=None)
@given(st.tuples(_types(), st.lists(_types(), max_size=4)), st.booleans())
def test_generated_numba_signatures_equal_their_c(sig, arrow):
    (rn, rb, rd), params = sig
    if rd.startswith("(*"):
        rn, rb, rd = "float64", "double", ""
    names = ", ".join(p[0] for p in params)
    numba = f"({names}) -> {rn}" if arrow else f"{rn}({names})"
    c = f"{_decl((rn, rb, rd))} ({', '.join(_decl(p) for p in params) or 'void'})"
    a, b = nt.Signature(numba), nt.Signature(c)
    assert a == b and hash(a) == hash(b) and str(a) == str(b)


# ------------------------------------------------------------ fuzzed: never anything but a refusal

_VOCAB = ["float64", "f8", "i4", "none", "voidptr", "intp", "double", "int", "unsigned", "const",
          "struct S", "x", "CPointer", "FunctionType", "(", ")", "[", "]", "*", ",", "->", "-",
          "...", " ", "CPointer(", "FunctionType[", "(float64)", "-> f8", "$", "\t", "void"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_VOCAB), max_size=30))
def test_any_text_in_numba_syntax_parses_or_is_refused_at_a_column_of_it(words):
    """Token soups of both syntaxes (tests/c/fuzz_sig.c fuzzes the C parser
    alone): a Signature, or the parser's ValueError whose caret is under
    the text as written; never another exception."""
    text = " ".join(words)
    try:
        sig = nt.Signature(text)
    except ValueError as e:
        lines = str(e).split("\n")
        assert len(lines) == 3 and lines[1] == "    " + text, lines
        assert lines[2].endswith("^") and len(lines[2]) - 5 <= len(text)
    else:
        assert nt.Signature(str(sig)) == sig

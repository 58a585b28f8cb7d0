"""numthunk.Signature: parsing, canonical form, conversions."""

import ctypes
import operator
import re
import subprocess
import sys

import cffi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numthunk as nt


@pytest.mark.parametrize("text, canonical", [
    ("double (double *, int)", "double (double *, int)"),
    ("void(const double* x, Py_ssize_t n)", "void (const double *, Py_ssize_t)"),
    ("double (double const *, int)", "double (const double *, int)"),
    ("double (double *const , int)", "double (double *const, int)"),
    ("void (void)", "void (void)"),
    ("void ()", "void (void)"),
    ("int (double *, npy_intp, double *, void *)", "int (double *, npy_intp, double *, void *)"),
    ("double (int, double *, void *)", "double (int, double *, void *)"),
    ("unsigned PY_LONG_LONG (PY_LONG_LONG)", "unsigned PY_LONG_LONG (PY_LONG_LONG)"),
    ("double sum(double *x, int n)", "double (double *, int)"),
    ("double (double (*)(double), double)", "double (double (*)(double), double)"),
    ("float64(CPointer(float64), intc)", "double (double *, int)"),
    ("int32 (intp, uint8, boolean, int64)", "int (intptr_t, uint8_t, bool, intptr_t)"),
])
def test_parse_canonical(text, canonical):
    assert str(nt.Signature(text)) == canonical


def test_parts_and_names():
    sig = nt.Signature("void(const double* x, Py_ssize_t n)")
    assert sig.restype == "void"
    assert sig.argtypes == ("const double *", "Py_ssize_t")
    assert sig.names == ("x", "n")
    assert sig.nargs == 2


def test_equality_is_structural():
    assert nt.Signature("double (double *, int)") == nt.Signature("double(double* x, int n)")
    assert nt.Signature("long (long)") == nt.Signature("int64_t (int64_t)")
    assert nt.Signature("double (double *)") != nt.Signature("double (float *)")
    assert nt.Signature("double (const double *)") != nt.Signature("double (double *)")
    assert hash(nt.Signature("int (int)")) == hash(nt.Signature("int32_t (intc)"))


@pytest.mark.parametrize("left, right, equal", [
    # a parameter's or the result's own const is no part of the function type
    ("double (const double)", "double (double)", True),
    ("const double (double)", "double (double)", True),
    ("double (double *const)", "double (double *)", True),
    ("void (const double *const x)", "void (const double *)", True),
    ("void (double (*const f)(double))", "void (double (*)(double))", True),
    ("void (double (*f)(const double))", "void (double (*)(double))", True),
    ("int (const long, const signed char)", "int (int64_t, int8_t)", True),
    # what a pointer points to still counts, at every depth
    ("double (const double *)", "double (double *)", False),
    ("void (double *const *)", "void (double **)", False),
    ("void (const double **)", "void (double **)", False),
    ("void (double (*f)(const double *))", "void (double (*)(double *))", False),
    ("double (const double)", "float (float)", False),
])
def test_equality_is_c_s_compatibility_of_function_types(left, right, equal):
    a, b = nt.Signature(left), nt.Signature(right)
    assert (a == b, b == a, a != b) == (equal, equal, not equal)
    if equal:
        assert hash(a) == hash(b)
    assert str(a) == str(nt.Signature(left))         # the text keeps what was written


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge])
def test_signatures_are_equal_or_not_but_have_no_order(op):
    a, b = nt.Signature("int (int)"), nt.Signature("int32_t (intc)")
    for other in (b, nt.Signature("double (double)"), "int (int)", 1):
        with pytest.raises(TypeError, match="not supported"):
            op(a, other)
    # with something else, == and != are identity's: never the text's
    assert a != "int (int)" and not (a == "int (int)") and a != str(a)
    assert (a == b, a != b, b == a) == (True, False, True)


def test_hash_follows_equality_and_tells_signatures_apart():
    """Equal signatures hash alike, however spelled; distinct ones (every
    pair of scalar kinds, pointer depths and constness, function pointers
    of other signatures, parameter counts) hash apart, so that a dict or
    a cache keyed by signatures does not degrade into one bucket."""
    texts = set()
    kinds = sorted(nt._core.kinds)
    for r in kinds[:6]:
        for a in kinds:
            texts.add(f"{r} ({a})")
            texts.add(f"{r} ({a} *, {a})")
    for depth in range(1, 5):
        texts.add("void (double " + "*" * depth + ")")
        texts.add("void (const double " + "*" * depth + ")")
    for k in range(8):
        texts.add("void (" + ", ".join(["int"] * k) + ")" if k else "void (void)")
        texts.add(f"double (double (*f)({', '.join(['double'] * (k + 1))}))")
    sigs = {nt.Signature(t) for t in texts}
    assert len(sigs) == len(texts) > 150             # all distinct as signatures
    hashes = {hash(sig) for sig in sigs}
    assert len(hashes) == len(sigs)
    for t in texts:
        respelled = nt.Signature(t.replace(" (", "(").replace(", ", " ,"))
        assert respelled == nt.Signature(t) and hash(respelled) == hash(nt.Signature(t))
    assert -1 not in hashes


def test_platform_widths():
    widths = {"long": ctypes.sizeof(ctypes.c_long), "int": 4, "short": 2,
              "ssize_t": ctypes.sizeof(ctypes.c_ssize_t), "size_t": ctypes.sizeof(ctypes.c_size_t)}
    for name, size in widths.items():
        kind = nt.Signature(f"void ({name})")._describe()[1][0][0]
        assert kind.endswith(str(size * 8)), (name, kind)


@pytest.mark.parametrize("text, column, message", [
    ("double (int, ...)", 13, "variadic"),
    ("double (FLOAT64 *, int)", 8, "unknown type name 'FLOAT64'"),
    ("double (double *, int", 21, ""),
    ("", 0, ""),
    ("double (void, int)", None, "void"),
    ("long double (double)", 0, "long double"),
])
def test_parse_errors_point_at_the_column(text, column, message):
    with pytest.raises(ValueError) as info:
        nt.Signature(text)
    msg = str(info.value)
    assert message in msg
    lines = msg.splitlines()
    assert lines[-2].strip() == text.strip() or text == ""
    if column is not None:
        assert lines[-1].index("^") - 4 == column


def test_typedefs():
    sig = nt.Signature("FLOAT64 (FLOAT64 *, INT8)",
                       typedefs={"FLOAT64": "double", "INT8": "int8_t"})
    assert str(sig) == "double (double *, int8_t)"


@pytest.mark.parametrize("target", ["ssize_t", "npy_intp", "size_t", "Py_ssize_t", "uintptr_t",
                                    "int8_t", "double", "unsigned long long"])
def test_a_typedef_keeps_the_spelling_it_names(target):
    """A typedef to a named spelling prints as that spelling (ssize_t stays
    ssize_t, not the intptr_t of its kind), as the spelling itself does."""
    sig = nt.Signature("X (X *, X)", typedefs={"X": target})
    own = str(nt.Signature(f"{target} ({target} *, {target})"))
    assert str(sig) == own
    assert own.startswith(target)


def test_from_ctypes_prototype_class_and_instance():
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.c_int)
    assert str(nt.Signature(proto)) == "double (double *, int)"
    fn = proto(lambda p, n: 0.0)
    assert nt.Signature(fn) == nt.Signature("double (double *, int)")
    with pytest.raises(TypeError, match="no C equivalent"):
        nt.Signature(ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_wchar_p))


def test_from_cffi():
    ffi = cffi.FFI()
    assert str(nt.Signature(ffi.typeof("double(*)(double *, int)"))) == "double (double *, int)"
    assert str(nt.Signature(ffi.typeof("void(*)(int64_t, float)"))) == "void (int64_t, float)"


def test_cffi_types_that_are_no_function_or_have_no_c_text_are_refused():
    ffi = cffi.FFI()
    ffi.cdef("struct pt { double x, y; }; enum colour { RED, GREEN };")
    for text, cname in [("int *", "int *"), ("double", "double"), ("struct pt", "struct pt"),
                        ("double[3]", "double[3]")]:
        with pytest.raises(TypeError, match=rf"^cffi type '{re.escape(cname)}' is not a "
                                            r"function type$"):
            nt.Signature(ffi.typeof(text))
    for text, cname in [("double(*)(struct pt)", "struct pt"), ("struct pt(*)(double)",
                                                                 "struct pt"),
                        ("int(*)(enum colour)", "enum colour")]:
        with pytest.raises(TypeError, match=rf"^cffi type '{cname}' has no C equivalent "
                                            r"numthunk supports$"):
            nt.Signature(ffi.typeof(text))
    assert str(nt.Signature(ffi.typeof("double(*)(struct pt *)"))) == "double (struct pt *)"
    assert str(nt.Signature(ffi.typeof("double(*)(double *)"))) == "double (double *)"


def test_what_is_no_signature_is_refused_by_its_type():
    for bad, name in [(3, "int"), (b"double (double)", "bytes"), (None, "NoneType"),
                      (["double", "double"], "list"), (ctypes.c_double, "PyCSimpleType")]:
        with pytest.raises(TypeError, match=rf"^cannot make a C signature from '{name}': "
                                            r"expected C text, a ctypes prototype, a cffi "
                                            r"function type or a Numba signature$"):
            nt.Signature(bad)
    assert nt.Signature("double (double)").nargs == 1


def test_typedefs_apply_to_text_only():
    sig = nt.Signature("REAL (REAL *x)", typedefs={"REAL": "double"})
    with pytest.raises(TypeError, match=r"^typedefs apply to C text only$"):
        nt.Signature(sig, typedefs={"REAL": "float"})
    for again in (nt.Signature(sig), nt.Signature(sig, typedefs={}),
                  nt.Signature(sig, typedefs=None)):
        assert again == sig and str(again) == "double (double *)" and again.names == ("x",)
    assert str(nt.Signature("REAL (REAL *x)", typedefs={"REAL": "float"})) == "float (float *)"


def test_to_ctypes_roundtrip():
    sig = nt.Signature("double (double *, int, int8_t, void *)")
    proto = sig.to_ctypes()
    assert proto._restype_ is ctypes.c_double
    assert nt.Signature(proto) == sig


_TYPES = ["int", "double", "float", "int8_t", "uint16_t", "long", "unsigned long long",
          "bool", "void *", "const double *", "double **", "npy_intp", "size_t",
          "double (*)(double)", "char *"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["void", "double", "int", "float *"]),
       st.lists(st.sampled_from(_TYPES), max_size=12))
def test_format_parse_roundtrip(ret, args):
    text = f"{ret} ({', '.join(args) or 'void'})"
    sig = nt.Signature(text)
    again = nt.Signature(str(sig))
    assert again == sig
    assert str(again) == str(sig)
    assert sig.nargs == len(args)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="abcdefint ()*,.;[]{}0123456789void const unsigned long", max_size=40))
def test_parser_never_crashes(text):
    """Any text parses into a signature that prints and parses back to
    itself, or is refused with a ValueError that points at the column."""
    try:
        sig = nt.Signature(text)
    except ValueError as exc:
        lines = str(exc).split("\n")
        assert len(lines) == 3 and lines[2].strip() == "^", str(exc)
        assert lines[1] == "    " + text
        return
    again = nt.Signature(str(sig))
    assert again == sig and str(again) == str(sig)
    assert sig.nargs == len(sig.argtypes)


def test_copy_keeps_names():
    sig = nt.Signature("double (double x, int __pyx_skip_dispatch)")
    assert nt.Signature(sig).names == ("x", "__pyx_skip_dispatch")
    assert nt.Function(0x1000, sig).csig.names == ("x", "__pyx_skip_dispatch")
    with pytest.raises(TypeError, match="C text"):
        nt._core.Signature(3)


def test_duplicate_parameter_names_are_refused():
    with pytest.raises(ValueError, match=r"parameter 2 is named 'x' as parameter 1 is") as info:
        nt.Signature("double (double x, int x)")
    assert str(info.value).splitlines()[2] == "    " + " " * 18 + "^"
    with pytest.raises(ValueError, match="parameter 3 is named 'n'"):
        nt.Signature("void (double (*f)(double n, int k, float n))")
    # unnamed parameters and the same name in different lists are fine
    assert nt.Signature("double (double, double, double (*)(double x), int x)").nargs == 4


def _spelling_table():
    """The names of src/parse/spellings.c's spelling table, in its order."""
    import os

    from conftest import HERE
    path = os.path.join(os.path.dirname(HERE), "src", "parse", "spellings.c")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("const nt_spelling nt_spellings[] = {"):]
    return re.findall(r'^    \{ "([^"]+)", NT_', table[:table.index("\n};")], flags=re.M)


def test_no_name_of_the_spelling_table_can_be_a_typedef():
    # every one-word name the parser knows, the table's first (void) and
    # last included, is refused as a typedef's name by the same message
    names = [n for n in _spelling_table() if " " not in n]
    assert names[0] == "void" and len(names) > 25
    # and Numba's names, typedefs the Numba adapter gives (its short names,
    # f8, i4, none, give way to a typedef of the caller's)
    from numthunk import _numba_sig
    numba = sorted(n for n in _numba_sig.NAMES if len(n) > 3 and n != "none")
    assert {"float64", "intp", "voidptr", "complex128", "bool_"} <= set(numba)
    for name in names + numba + ["CPointer", "FunctionType"]:
        with pytest.raises(ValueError) as info:
            nt.Signature("double (double)", {name: "float"})
        assert str(info.value).split("\n")[0] == (
            f"typedef '{name}' would redefine a type name numthunk knows; a typedef names a "
            "new type (give it another name)"), name


def test_a_typedef_cannot_redefine_a_known_name():
    for name in ("double", "int", "float64", "intc", "size_t", "Py_ssize_t", "CPointer"):
        with pytest.raises(ValueError, match=f"typedef '{name}' would redefine a type name"):
            nt.Signature("double (double)", {name: "float"})
    for name in ("const", "struct", "volatile", "typedef", "return"):
        with pytest.raises(ValueError, match=f"typedef '{name}': a C keyword"):
            nt.Signature("double (double)", {name: "float"})
    for name in ("", "my type", "2x", "a*b", "x-y", "_ok but not"):
        with pytest.raises(ValueError) as info:
            nt.Signature("double (double)", {name: "float"})
        assert str(info.value) == f"typedef name '{name}' is not a C identifier"
    for name in ("_", "_2x", "x_y_Z9"):
        assert str(nt.Signature(f"double ({name})", {name: "float"})) == "double (float)"
    # a new name works, and wins nowhere else
    assert str(nt.Signature("REAL (REAL *)", {"REAL": "double"})) == "double (double *)"
    with pytest.raises(ValueError, match="typedef 'double' would redefine"):
        nt._core.Signature("double (double)", {"double": "float"})


# ------------------------------------------------ the parser's limits, at the edge
# parse/declarator.c: MAX_NEST (function pointers and CPointer), MAX_DEPTH ('*' levels),
# MAX_ARGS (parameters), MAX_TAG_LEN (struct names as kept: "struct S"),
# each taken at the limit and refused one past it with a ValueError that
# says which limit.


def _fnptr_nest(levels):
    """A signature `levels` deep: levels - 1 function pointers inside."""
    t = "int"
    for _ in range(levels - 1):
        t = f"int (*)({t})"
    return f"int ({t})"


def test_function_pointers_nest_64_levels_and_no_more():
    sig = nt.Signature(_fnptr_nest(64))
    assert str(sig) == _fnptr_nest(64) and sig.nargs == 1
    with pytest.raises(ValueError, match=r"^signature nested too deeply \(at most 64 levels\)"):
        nt.Signature(_fnptr_nest(65))
    with pytest.raises(ValueError, match=r"^signature nested too deeply"):
        nt.Signature(_fnptr_nest(2000))


def _cpointers(k):
    return "int64(" + "CPointer(" * k + "int64" + ")" * k + ")"


def test_cpointer_nesting_is_refused_cleanly_however_deep():
    """Numba's CPointer(...) is read by the C parser, each a level of its 64:
    63 pointers inside the signature's own level, and any deeper text gets
    the parser's error with its caret, never a RecursionError."""
    # Numba's int64 is intptr_t on LP64 (the C parser's row for it)
    assert str(nt.Signature(_cpointers(63))) == "intptr_t (intptr_t " + "*" * 63 + ")"
    for k in (64, 65, 1000, 20_000):
        with pytest.raises(ValueError, match=r"^type nested too deeply \(at most 64 levels\)"):
            nt.Signature(_cpointers(k))


def _function_types(k):
    t = "int64"
    for _ in range(k):
        t = f"FunctionType[int64({t})]"
    return f"int64({t})"


def test_numba_function_types_nest_to_the_same_64_levels():
    """Numba's FunctionType[R(A)] counts two levels, its brackets and its
    parameter list: 31 inside the signature's own level are 63, taken; the
    32nd's parameter list would be the 65th, and is refused by the
    signature's message, however deep the text goes."""
    inner = "intptr_t"
    for _ in range(31):
        inner = f"intptr_t (*)({inner})"
    assert str(nt.Signature(_function_types(31))) == f"intptr_t ({inner})"
    for k in (32, 33, 1000):
        with pytest.raises(ValueError) as info:
            nt.Signature(_function_types(k))
        assert str(info.value).split("\n")[0] == "signature nested too deeply (at most 64 levels)"


def test_pointer_depth_255_and_no_more():
    sig = nt.Signature("int (int " + "*" * 255 + " p)")
    assert str(sig) == "int (int " + "*" * 255 + ")"
    with pytest.raises(ValueError, match=r"^too many levels of pointers \(at most 255\)"):
        nt.Signature("int (int " + "*" * 256 + " p)")


def _params_of_length(total, head, tail):
    """A parameter list that makes head + list + tail exactly total characters long."""
    last = {3: "int", 4: "char", 0: "float", 1: "double", 2: "int16_t"}   # length % 5 -> type
    room = total - len(head) - len(tail)
    k = (room - 3) // 5                   # k leading "int, " (5 each), then one type of 3..7
    while len(last[(room - 5 * k) % 5]) != room - 5 * k:
        k -= 1
    return ", ".join(["int"] * k + [last[(room - 5 * k) % 5]])


@pytest.mark.parametrize("length", [510, 511, 512, 513, 1023, 1024, 1025])
def test_texts_at_the_edge_of_the_stack_buffer_are_whole(length):
    # str and argtypes format into 512 bytes first and into the heap when
    # the text does not fit: each length around the edge comes back whole.
    text = "void (" + _params_of_length(length, "void (", ")") + ")"
    assert len(text) == length
    sig = nt.Signature(text)
    assert str(sig) == text and repr(sig) == f"Signature({text!r})"
    fn = "void (*)(" + _params_of_length(length, "void (*)(", ")") + ")"
    assert len(fn) == length
    sig = nt.Signature(f"int (int, {fn})")
    assert sig.argtypes == ("int", fn)


def test_65535_parameters_and_no_more():
    text = "void (" + ", ".join(["int"] * 65535) + ")"
    sig = nt.Signature(text)
    assert sig.nargs == 65535 and sig.argtypes == ("int",) * 65535
    assert str(sig) == text and repr(sig) == f"Signature({text!r})"   # past the stack buffer
    with pytest.raises(ValueError, match=r"^too many parameters \(at most 65535\)"):
        nt.Signature("void (" + ", ".join(["int"] * 65536) + ")")


@pytest.mark.parametrize("space", [" ", "\t", "\n", "\r", "\v", "\f"])
def test_every_c_space_separates_tokens(space):
    """parse/declarator.c is_space: the six characters C's isspace() takes, alone or
    repeated, wherever a space may stand; characters Python alone counts as
    space (\x1c-\x1f, \x85, \xa0) are refused, naming the byte."""
    text = space.join(["", "unsigned", "long", "*", "(", "const", "double", "*", "x", ",",
                       "struct", "S", "*", ")", ""])
    sig = nt.Signature(text)
    assert str(sig) == "unsigned long *(const double *, struct S *)"
    assert sig == nt.Signature(text.replace(space, space * 3))
    for other in ("\x1c", "\x1f", "\x85", "\xa0"):
        with pytest.raises(ValueError, match=r"unexpected (byte 0x|character)"):
            nt.Signature(f"double{other}(double)")


def test_a_stray_character_is_named_as_printed_or_by_its_byte():
    """parse/declarator.c fail_token: a character the parser has no token for is quoted
    when it prints (0x20 to 0x7e), else named by its byte (below 0x20,
    0x7f, and UTF-8's bytes past 0x7f), with the caret at its column."""
    head = "expected '(' and the parameter list, got unexpected "
    seen = 0
    for code in range(1, 0x80):
        c = chr(code)
        try:
            nt.Signature(f"double{c}(double)")
        except ValueError as exc:
            first, _text, caret = str(exc).split("\n")
            if "unexpected" not in first:
                continue
            want = f"character '{c}'" if 0x20 <= code < 0x7F else f"byte 0x{code:02x}"
            assert first == head + want, code
            assert caret == " " * (4 + 6) + "^", code
            seen += 1
    assert seen > 40                     # the controls, and '!', '$', '@', '`', '~' ...
    for text, byte in (("\x85", 0xC2), ("\xa0", 0xC2), ("\u00e9", 0xC3), ("\u2028", 0xE2)):
        with pytest.raises(ValueError, match=rf"^{re.escape(head)}byte 0x{byte:02x}\n"):
            nt.Signature(f"double{text}(double)")


@pytest.mark.parametrize("kw, longest", [("struct", 248), ("union", 249)])
@pytest.mark.parametrize("space", [" ", "   ", "\t"])
def test_struct_names_up_to_255_characters_as_kept(kw, longest, space):
    """'struct S' is kept with one space whatever the text had: the limit is
    on that, 255 characters, and the message gives the longest name."""
    name = "s" * longest
    assert str(nt.Signature(f"void ({kw}{space}{name} *p)")) == f"void ({kw} {name} *)"
    with pytest.raises(ValueError, match=rf"^struct name longer than {longest} characters"):
        nt.Signature(f"void ({kw}{space}{name}s *p)")


@pytest.mark.parametrize("tag", ["struct pt", "union num"])
def test_typedef_struct_names_up_to_255_characters(tag):
    """A typedef'd struct prints as the typedef's name, kept in the pool of
    struct names: 255 characters are taken (and 254), 256 refused naming
    the typedef, its name cut after 64 characters."""
    for n in (254, 255):
        name = "N" * n
        sig = nt.Signature(f"{name} *({name} *p, {name} **q)", typedefs={name: tag})
        assert str(sig) == f"{name} *({name} *, {name} **)"
    name = "N" * 256
    with pytest.raises(ValueError, match=r"^typedef 'N{64}\.\.\.': too many struct names, "
                                         r"or too long\n"):
        nt.Signature(f"void ({name} *p)", typedefs={name: tag})


def test_4096_distinct_struct_names_and_no_more():
    """parse/declarator.c intern_tag: the process-wide pool keeps 4096 distinct struct and
    union names ("struct S" and "union S" are two). The 4096th new name is
    taken and prints back; the 4097th is refused with MemoryError, as a
    struct, a union or a typedef'd struct's name, and nothing else changes:
    names already kept still parse. In a fresh process (the pool never
    shrinks; importing numthunk keeps none)."""
    code = r"""
import numthunk as nt
sigs = [nt.Signature(f"void (struct S{k} *)") for k in range(4095)]
last = nt.Signature("void (union S0 *p)")              # the 4096th name
print(str(sigs[0]), str(sigs[4094]), str(last), sep="|")
for text in ("void (struct T *)", "void (union T *)", "struct S0 *(union T *)"):
    try:
        nt.Signature(text)
    except MemoryError as e:
        print(type(e).__name__, e, sep="|")
try:
    nt.Signature("void (T *)", typedefs={"T": "struct S1"})
except ValueError as e:
    print(type(e).__name__, str(e).splitlines()[0], sep="|")
again = nt.Signature("union S0 *(struct S4094 *, struct S0 *)")
print(str(again), again == nt.Signature("union S0 *(struct S4094 *, struct S0 *)"), sep="|")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    full = "MemoryError|too many distinct struct names (at most 4096)"
    assert out.stdout.splitlines() == [
        "void (struct S0 *)|void (struct S4094 *)|void (union S0 *)",
        full, full, full,
        "ValueError|typedef 'T': too many struct names, or too long",
        "union S0 *(struct S4094 *, struct S0 *)|True",
    ], out.stdout


@pytest.mark.parametrize("text, message, column", [
    ("double (double) ...", "variadic functions ('...') are not supported", 16),
    ("double (double) [3]", "arrays ('[]') are not supported; use a pointer", 16),
    ("double (double) x", "unexpected 'x' after the signature", 16),
])
def test_what_follows_a_whole_signature_is_named(text, message, column):
    """parse/declarator.c expect_end: '...' and '[' after the signature say what C
    feature they are, anything else is 'unexpected'; the caret is under it."""
    with pytest.raises(ValueError) as info:
        nt.Signature(text)
    lines = str(info.value).splitlines()
    assert lines[0] == message
    assert lines[-1].index("^") - 4 == column


@pytest.mark.parametrize("words", ["unsigned", "signed", "long", "short", "long long",
                                   "unsigned long", "int", "char", "unsigned char"])
@pytest.mark.parametrize("name", ["int64", "uint8", "intc", "intp", "float64", "size_t",
                                  "int64_t", "ssize_t", "MYINT", "i8", "f8", "none"])
def test_a_type_name_after_type_words_is_refused_not_read_as_a_name(words, name):
    """'unsigned int64' would otherwise read as an unsigned int named int64:
    32 bits where 64 were meant. Named or not, in a parameter or a return."""
    typedefs = {"MYINT": "int64_t"}
    for text in (f"void ({words} {name})", f"void (double, {words} {name} x)",
                 f"{words} {name} (void)"):
        with pytest.raises(ValueError, match=rf"'{name}' is a type name: it cannot follow "
                                             rf"'{words.split()[0]}', nor name a parameter"):
            nt.Signature(text, typedefs=typedefs)
    # a name that is no type name is a parameter's name, as before
    sig = nt.Signature(f"void ({words} {name.lower()}_)", typedefs=typedefs)
    assert sig.names == (f"{name.lower()}_",)
    # after a type name, another type name is still read as a name (the type is whole)
    assert nt.Signature(f"void (float64 {name})", typedefs=typedefs).names == (name,)


def test_py_long_long_follows_a_lone_unsigned_only():
    """Cython's 'unsigned PY_LONG_LONG' is one type (unsigned long long);
    after any other type words PY_LONG_LONG is a type name out of place."""
    for text in ("unsigned PY_LONG_LONG", "const unsigned PY_LONG_LONG",
                 "unsigned const PY_LONG_LONG"):
        sig = nt.Signature(f"void ({text} x)")
        same = nt.Signature(f"void ({text.replace('PY_LONG_LONG', 'long long')} x)")
        assert sig.names == ("x",) and sig == same
    for words in ("unsigned long", "unsigned int", "unsigned short", "signed", "long", "int"):
        with pytest.raises(ValueError, match=rf"'PY_LONG_LONG' is a type name: it cannot "
                                             rf"follow '{words.split()[0]}'"):
            nt.Signature(f"void ({words} PY_LONG_LONG)")


def test_a_typedef_of_a_struct_or_union_keeps_its_name():
    """A typedef'd struct prints as its typedef name, a typedef of a union
    pointer as the union: never as the void of a tag lost on the way."""
    sig = nt.Signature("void (X *, Y, const X *)", typedefs={"X": "struct pt", "Y": "union u *"})
    assert str(sig) == "void (X *, union u *, const X *)"
    assert sig == nt.Signature("void (X *, union u *, const X *)", typedefs={"X": "struct pt"})
    assert sig != nt.Signature("void (void *, void *, const void *)")


def _first_line_and_column(text):
    with pytest.raises(ValueError) as info:
        nt.Signature(text)
    lines = str(info.value).splitlines()
    assert lines[-2] == "    " + text
    return lines[0], lines[-1].index("^") - 4


@pytest.mark.parametrize("text, message, column, neighbour", [
    ("", "empty signature", 0, "void (void)"),
    ("   ", "empty signature", 0, "void ()"),
    ("long double (double)", "long double is not supported", 0, "double (double)"),
    ("void (long double x)", "long double is not supported", 6, "void (double x)"),
    # '*' after a function pointer read whole (Numba's spelling) / inside its declarator
    ("void (FunctionType[float64(float64)] *)", "pointers to function pointers are not supported",
     37, "void (FunctionType[float64(float64)])"),
    ("void (int (**)(int))", "pointers to function pointers are not supported", 12,
     "void (int (*)(int))"),
    ("void (int (* const *f)(int))", "pointers to function pointers are not supported", 19,
     "void (int (* const f)(int))"),
    # a parameter of function type whose return type is a function pointer
    ("void (FunctionType[f8(f8)](int))",
     "a function returning a function pointer is not supported", 27, "void (f8 (int))"),
    ("FunctionType[float64(float64)](void)",
     "a function pointer as the return type is not supported", 0, "CPointer(float64)(void)"),
    ("(int) -> FunctionType[f8()]", "a function pointer as the return type is not supported",
     9, "(FunctionType[f8()]) -> int"),
])
def test_parser_refusals_name_the_construct_next_to_what_is_accepted(text, message, column,
                                                                     neighbour):
    assert _first_line_and_column(text) == (message, column)
    nt.Signature(neighbour)


def test_signature_typedefs_must_be_a_dict_of_str_to_str():
    for typedefs in ([("T", "int")], (("T", "int"),), "T=int"):
        with pytest.raises(TypeError) as info:
            nt.Signature("void (T)", typedefs)
        assert str(info.value) == "typedefs must be a dict of name -> C type"
    for typedefs in ({"T": 3}, {b"T": "int"}, {1: "int"}, {"T": b"int"}):
        with pytest.raises(TypeError) as info:
            nt.Signature("void (T)", typedefs)
        assert str(info.value) == "typedefs must map str names to str C types"
    assert str(nt.Signature("void (T)", {"T": "int"})) == "void (int)"


def test_core_signature_takes_c_text_only():
    for text in (b"void (void)", None, 3):
        with pytest.raises(TypeError) as info:
            nt._core.Signature(text)
        assert str(info.value) == f"Signature() takes C text, not {type(text).__name__}"
    assert str(nt._core.Signature("void (void)")) == "void (void)"


class _MySignature(nt.Signature):
    """A subclass at module level, so that pickle finds it by name."""


@pytest.mark.parametrize("text", ["void (void)", "double (const double *x, int n)",
                                  "struct pt *(union num **u, double (*f)(double), const char *)",
                                  "int64_t (T, T *)"])
def test_signatures_travel_by_pickle_copy_and_deepcopy(text):
    """A Signature reduces to its class and its canonical text: every trip
    gives back an equal one of the same class, with the same hash, text,
    names and types (a typedef's name is resolved before the trip)."""
    import copy
    import pickle

    for cls in (nt.Signature, _MySignature):
        sig = cls(text, typedefs={"T": "int64_t"}) if "T" in text else cls(text)
        trips = [pickle.loads(pickle.dumps(sig, protocol=p))
                 for p in range(pickle.HIGHEST_PROTOCOL + 1)]
        trips += [copy.copy(sig), copy.deepcopy(sig)]
        for back in trips:
            assert type(back) is cls and back == sig and hash(back) == hash(sig)
            assert (str(back), back.restype, back.argtypes, back.nargs) == \
                   (str(sig), sig.restype, sig.argtypes, sig.nargs)
        assert sig.__reduce__() == (cls, (str(sig),))


def test_the_first_struct_name_of_a_process_describes_as_no_spelling():
    """_describe() gives a struct pointer's spelling as "" (struct names
    are no C type words): the first struct name a process interns, whose
    index is one past the spelling table's last row, included."""
    from thunks import run_py

    out = run_py("""
import numthunk as nt
sig = nt.Signature("void (struct first_of_all *p, double *q)")
print(repr(sig._describe()[1][0][4]), repr(sig._describe()[1][1][4]))
""")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["''", "'double'"]

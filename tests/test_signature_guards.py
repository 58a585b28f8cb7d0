"""A signature at the edges of its fixed limits:

- the parser's smaller limits (parse/declarator.c): the words of a type
  name (MAX_WORDS = 6, the size of the array they are kept in) and the
  longest token a message quotes whole (QUOTE_MAX = 64; past it the quote
  ends in "..."). The larger ones (nesting, pointer depth, parameter
  count, struct names) are in test_signature.py;
- the plan cache of a Signature object (plan/plan.c nt_plan_cache_get:
  NT_PLAN_CACHE = 8 binding patterns per engine request are kept with the
  Signature; a thunk of any further pattern owns its plan and frees it
  with itself), and what outlives an owned plan: the description a
  released thunk's address traps with. On both engines.
"""

import ctypes
import itertools

import pytest

import numthunk as nt

from conftest import ENGINES
from thunks import bind, run_py

pytestmark = pytest.mark.guards

# ------------------------------------------------------------ the parser

QUOTE_MAX = 64


def _refusal(text):
    with pytest.raises(ValueError) as info:
        nt.Signature(text)
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("words, error", [
    ("unsigned long long int", None),
    ("const unsigned long long int", None),                          # const is no word
    ("unsigned long long int int", "unknown type name 'unsigned long long int int'"),
    ("unsigned unsigned long long int int",                          # 6: kept, then unknown
     "unknown type name 'unsigned unsigned long long int int'"),
    ("unsigned unsigned long long int int int", "too many words in a type name"),   # 7
    ("long long long long long long long long", "too many words in a type name"),
])
def test_six_words_of_a_type_name_are_read_and_a_seventh_refused(words, error):
    if error is None:
        assert nt.Signature(f"void ({words})").argtypes[0].endswith("unsigned long long int")
    else:
        assert _refusal(f"void ({words} x)") == error


@pytest.mark.parametrize("length", [1, QUOTE_MAX - 1, QUOTE_MAX, QUOTE_MAX + 1, 1000])
def test_a_quoted_token_is_whole_up_to_64_bytes_then_cut_with_dots(length):
    name = ("Q" + "abcdefghij" * 100)[:length]
    quoted = name if length <= QUOTE_MAX else name[:QUOTE_MAX] + "..."
    assert _refusal(f"void ({name})") == f"unknown type name '{quoted}'"
    assert _refusal(f"void (int a {name})") == f"expected ',' or ')', got '{quoted}'"
    assert _refusal(f"void ({name} int)") == f"'int' cannot follow the type name '{quoted}'"


def _of_length(head, length):
    """head + '(double, ..., int, ...)' of exactly `length` characters."""
    for b in range(8):
        a, rest = divmod(length - len(head) - 5 * b, 8)
        if rest == 0 and a >= 0 and a + b > 0:
            text = head + "(" + ", ".join(["double"] * a + ["int"] * b) + ")"
            assert len(text) == length
            return text
    raise AssertionError(length)


@pytest.mark.parametrize("length", [510, 511, 512, 513, 2000])
def test_signature_text_around_its_512_byte_buffer_is_whole(length):
    """python/signature.c signature_str and format_type write into 512 bytes and
    take a buffer of their own when the text needs more."""
    text = _of_length("double ", length)
    sig = nt.Signature(text)
    assert str(sig) == text
    assert repr(sig) == f"Signature({text!r})"
    fp = _of_length("double (*)", length)
    param = nt.Signature(f"void ({fp.replace('(*)', '(*f)')})")
    assert param.argtypes[0] == fp
    assert str(param) == f"void ({fp})"


# ------------------------------------------------------------ the plan cache

CACHE = 8                                   # numthunk.h NT_PLAN_CACHE
SIG = "int64_t (int8_t a, uint8_t b, int16_t c, uint16_t d, bool e)"
VALUES = (-3, 200, -300, 60000, True)


def _direct(lib):
    f = lib.f_l_cCsSB
    f.restype = ctypes.c_int64
    f.argtypes = [ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16, ctypes.c_bool]
    return f(*VALUES)


def _thunk(engine, fn, pattern):
    """pattern[i]: parameter i forwarded; the others bound to VALUES."""
    bound = [nt.ARG if fwd else v for fwd, v in zip(pattern, VALUES)]
    t = bind(engine, fn, *bound)
    return t, [v for fwd, v in zip(pattern, VALUES) if fwd]


PATTERNS = list(itertools.product((0, 1), repeat=5))


@pytest.mark.parametrize("first", [CACHE - 1, CACHE, CACHE + 1, len(PATTERNS)])
def test_patterns_past_the_cache_own_their_plans_and_all_run(cfn, lib, engine, first):
    """`first` patterns made on one Signature object (the cache holds the
    first 8), then all 32 made again and kept, then those past the cache
    dropped in turn: every thunk computes what the C function does."""
    fn = cfn("f_l_cCsSB", SIG)
    want = _direct(lib)
    early = [_thunk(engine, fn, p) for p in PATTERNS[:first]]
    for t, args in early:
        assert t(*args) == want
    kept = [_thunk(engine, fn, p) for p in PATTERNS]
    for t, args in kept:
        assert t(*args) == want
        assert len(t.csig.argtypes) == len(args)
    # the thunks that own their plans go first, the cached plans stay
    for t, _ in early[CACHE:]:
        t.release()
    del early[CACHE:]
    for t, args in kept + early:
        assert t(*args) == want
    for t, _ in kept[CACHE:]:
        t.release()
    for t, args in kept[:CACHE] + early:
        assert t(*args) == want
    # and made once more after the owned plans went
    again = [_thunk(engine, fn, p) for p in reversed(PATTERNS)]
    for t, args in again:
        assert t(*args) == want


def test_each_engine_request_has_its_own_cache_entries(cfn, lib):
    """The cache is keyed by pattern and engine request: the same pattern
    asked of both engines gives a thunk on each."""
    fn = cfn("f_l_cCsSB", SIG)
    want = _direct(lib)
    thunks = []
    for p in PATTERNS[:CACHE + 2]:
        for engine in ENGINES:
            t, args = _thunk(engine, fn, p)        # bind() checks the engine it runs on
            thunks.append((t, args))
    for t, args in thunks:
        assert t(*args) == want


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cached", [CACHE - 1, CACHE])
def test_the_trap_of_a_thunk_whose_plan_went_with_it_names_it(fixture_path, engine, cached):
    """A temporary's address called after it is gone: with 8 other patterns
    cached first, its plan was its own and was freed with it; the trap
    still names what it was (its description outlives the plan). With 7,
    its plan is the cache's."""
    code = f"""
import ctypes, itertools, numthunk as nt
lib = ctypes.CDLL({fixture_path!r})
fn = nt.Function(ctypes.cast(lib.f_d_idfl, ctypes.c_void_p).value,
                 "double (int a, double b, float c, int64_t d)")
mine = (0, 1, 0, 0)
others = [p for p in itertools.product((0, 1), repeat=4) if p != mine][:{cached}]
keep = [nt.bind(fn, *[nt.ARG if f else 1 for f in p], engine={engine!r}) for p in others]
solver = lib.f_d_Fddi
solver.restype = ctypes.c_double
solver.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
print(hex(fn.address), flush=True)
solver(nt.bind(fn, 1, nt.ARG, 2.0, 3, engine={engine!r}).address, 0.0, 1.0, 10)
print("survived")
"""
    out = run_py(code)
    target = out.stdout.split()[0]
    assert out.returncode == -6, (out.returncode, out.stderr)    # SIGABRT
    assert "survived" not in out.stdout
    assert out.stderr.splitlines()[0] == (
        "numthunk: called a released thunk: double (double) over double (int, double, float, "
        f"int64_t), target at {target}"), out.stderr

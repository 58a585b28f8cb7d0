"""The signature parser's smaller fixed limits at their edges (parse/declarator.c):
the words of a type name (MAX_WORDS = 6, the size of the array they are
kept in) and the longest token a message quotes whole (QUOTE_MAX = 64;
past it the quote ends in "..."). The larger ones (nesting, pointer depth,
parameter count, struct names) are in test_signature.py."""

import pytest

import numthunk as nt

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

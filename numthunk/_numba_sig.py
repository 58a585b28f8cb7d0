"""Numba's signature text read as C: the Numba adapter's translator.

The core's parser reads C declarations only (src/parse/declarator.c). Numba
writes the same types in its own syntax, and users paste it:

- its names, ``float64``, ``intp``, ``voidptr``, ``none`` and the short
  ``f8``, ``i4``, ``c16``: here they are typedefs handed to the parser
  with the text (``typedef double float64;``), so a name keeps every rule
  of a type name (``unsigned int64`` is refused, ``float64 x`` names x);
- ``CPointer(T)``: ``T *``;
- ``FunctionType[R(A)]``: ``R (*)(A)``, a const or a name after it moved
  into the declarator (``R (*const f)(A)``);
- the form ``str()`` of a Numba signature gives, ``(A) -> R``: ``R (A)``.

A function type where a parameter stands, ``R(A)``, is C already (a
parameter of function type is a function pointer, C17 6.7.6.3).

Each character of the C text keeps the column of the user's character it
came from, so the parser's refusals point into the user's text with the
parser's own messages; what only this syntax can get wrong (a missing
``(`` after CPointer, a FunctionType as the result) is refused here in the
parser's words. Text with none of these constructs goes to the parser as
written.
"""

import re

from . import _core

__all__ = ["NAMES", "translate", "translate_type", "type_call", "remap", "parse_error"]

# Numba's and NumPy's names of C types: each a typedef of the C text the
# core prints for its kind (the kind table's column, src/kinds.c), so a
# signature that used them prints as C, as SciPy compares it. The kind
# names (int8 .. complex128) are the table's rows; these others name the
# kind of a C spelling.
_SPELLING_OF = {
    "intp": "intptr_t", "uintp": "uintptr_t", "intc": "int", "uintc": "unsigned int",
    "bool_": "bool", "boolean": "bool", "b1": "bool",
    "i1": "int8_t", "i2": "int16_t", "i4": "int32_t", "i8": "int64_t",
    "u1": "uint8_t", "u2": "uint16_t", "u4": "uint32_t", "u8": "uint64_t",
    "f4": "float", "f8": "double", "c8": "float complex", "c16": "double complex",
}
# Numba's short names and `none` come after a caller's typedefs: a
# Cython module's own `ctypedef double f8` keeps its meaning.
_SHORT = frozenset(("none", "b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8",
                    "c8", "c16"))


def _names():
    names = {name: row.c for name, row in _core.kinds.items() if name != "bool"}  # C's own
    for name, c in _SPELLING_OF.items():
        kind = _core.Signature(f"void ({c})")._describe()[1][0][0]
        names[name] = _core.kinds[kind].c
    names["byte"] = "unsigned char"
    names["none"] = "void"
    names["voidptr"] = "void *"
    return names


NAMES = _names()
_LONG = frozenset(NAMES) - _SHORT

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z_0-9]*)|(->|\.\.\.)|(.)|$)", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SYNTAX = re.compile(r"\bCPointer\b|\bFunctionType\b|^\s*\(")
_ARROW = re.compile(r"\s*\(")

MAX_NEST = 64     # parse/declarator.c's MAX_NEST; CPointer( and FunctionType[ count a level each
QUOTE_MAX = 64

_TYPE_WORDS = frozenset(("void", "char", "short", "int", "long", "float", "double", "signed",
                         "unsigned", "_Bool", "bool", "_Complex", "complex"))
_UNSUPPORTED = frozenset(("volatile", "restrict", "__restrict", "__restrict__", "_Atomic"))
_AGGREGATES = frozenset(("struct", "union", "enum"))
_OTHER = frozenset(("const", "typedef", "static", "extern", "register", "auto", "inline",
                    "sizeof", "return", "if", "else", "for", "while", "do", "switch", "case",
                    "default", "break", "continue", "goto"))
_RESERVED = _TYPE_WORDS | _UNSUPPORTED | _AGGREGATES | _OTHER


class _Refusal(Exception):
    """A refusal at column col, made when the parser has read up to column
    at (a result's refusal is made after its whole type)."""

    def __init__(self, msg, col, at=None):
        super().__init__(msg)
        self.msg, self.col, self.at = msg, col, col if at is None else at


class _Tok:
    __slots__ = ("kind", "text", "start")

    def __init__(self, kind, text, start):
        self.kind, self.text, self.start = kind, text, start


def _tokens(text):
    toks, pos = [], 0
    while True:
        m = _TOKEN.match(text, pos)
        start = m.start(1) if m.group(1) else m.start(2) if m.group(2) else (
            m.start(3) if m.group(3) is not None else len(text))
        if m.group(1):
            toks.append(_Tok("id", m.group(1), start))
        elif m.group(2):
            toks.append(_Tok(m.group(2), m.group(2), start))
        elif m.group(3) is not None:
            toks.append(_Tok(m.group(3), m.group(3), start))
        else:
            toks.append(_Tok("end", "", len(text)))
            return toks
        pos = m.end()


def _quote(s):
    return s[:QUOTE_MAX] + ("..." if len(s) > QUOTE_MAX else "")


def _got(tok, expected):
    """The parser's refusal of an unexpected token (declarator.c fail_token)."""
    if tok.kind == "...":
        return _Refusal("variadic functions ('...') are not supported", tok.start)
    if tok.kind == "[":
        return _Refusal("arrays ('[]') are not supported; use a pointer", tok.start)
    if tok.kind == "end":
        return _Refusal(f"expected {expected}, got end of input", tok.start)
    if tok.kind not in ("id", "(", ")", "*", ",", "]", "->"):
        c = tok.text
        if " " <= c < "\x7f":
            return _Refusal(f"expected {expected}, got unexpected character '{c}'", tok.start)
        if ord(c) < 0x80:
            return _Refusal(f"expected {expected}, got unexpected byte 0x{ord(c):02x}",
                            tok.start)
        return _Refusal(f"expected {expected}, got unexpected byte "
                        f"0x{c.encode()[0]:02x}", tok.start)
    return _Refusal(f"expected {expected}, got '{_quote(tok.text)}'", tok.start)


class _Fn:
    """A function pointer read from FunctionType[R(A)]: R's pieces, the
    pieces between '(*' and ')' (stars, const, a name), A's pieces."""

    __slots__ = ("ret", "inner", "params", "start")

    def __init__(self, ret, params, start):
        self.ret, self.inner, self.params, self.start = ret, [], params, start

    def pieces(self):
        return (_pieces(self.ret) + [(" (*", self.start)] + self.inner + [(")", self.start)]
                + self.params)


def _pieces(t):
    return t.pieces() if isinstance(t, _Fn) else t


class _Reader:
    def __init__(self, text, typedefs=None, tds=None):
        self.text = text
        self.typedefs = typedefs if isinstance(typedefs, dict) else {}
        self.tds = tds
        self.toks = _tokens(text)
        self.i = 0
        self.out = []        # (C text, user column) pieces
        self.nest = 0
        self.outer = None    # where the outermost construct being read starts

    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def enter(self, tok, what):
        self.nest += 1
        if self.nest > MAX_NEST:
            raise _Refusal(f"{what} nested too deeply (at most {MAX_NEST} levels)", tok.start)

    # ---- C text, passed through; Numba's types where a type starts
    def stream(self, out, closers):
        """Tokens up to an unmatched closer (not taken) or the end."""
        start = True
        while True:
            tok = self.peek()
            if tok.kind == "end" or (tok.kind in closers):
                return
            if start and self.numba_type_ahead():
                t = self.numba_type(allow_name=True)
                out.extend(_pieces(t))
                start = False
                continue
            self.take()
            if tok.kind == "(":
                # a parameter list counts a level, as the parser counts it;
                # '(*' opens a declarator, not a list
                if self.peek().kind != "*":
                    out.extend(self.params(tok, whole=False))
                    start = False
                    continue
                out.append(("(", tok.start))
                self.stream(out, (")",))
                close = self.peek()
                if close.kind == ")":
                    self.take()
                    out.append((")", close.start))
                start = False
                continue
            out.append((tok.text, tok.start))
            start = tok.kind == ","

    def params(self, open_, whole=True):
        """A parameter list, its '(' taken: its pieces up to its ')'. A
        list cut short is refused (whole) or left to the parser. A refusal
        inside it comes after the parser's refusal of a parameter before."""
        self.enter(self.peek(), "signature")
        params = [("(", open_.start)]
        try:
            self.stream(params, (")",))
        except _Refusal as r:
            depth, cut = 0, 1
            for k, (p, _col) in enumerate(params):
                depth += p.count("(") - p.count(")")
                if p == "," and depth == 1:
                    cut = k
            try:
                self.check(params[:cut] + [(")", r.col)])
            except _Refusal as early:
                if early.at < r.at:
                    raise early from None
            raise
        close = self.peek()
        if close.kind != ")":
            if not whole:
                self.nest -= 1
                return params
            self.check(params)                 # the parser says what is missing
            raise _got(close, "a type" if params[-1][0] in ("(", ",") else "',' or ')'")
        self.take()
        self.nest -= 1
        return params + [(")", close.start)]

    def numba_type_ahead(self):
        k = 0
        while self.peek(k).text == "const" and self.peek(k).kind == "id":
            k += 1
        t = self.peek(k)
        return t.kind == "id" and t.text in ("CPointer", "FunctionType")

    def numba_type(self, allow_name=False, result=False, inner=False):
        """const* CPointer(T) | FunctionType[R(A)], then what the parser
        reads after a type name: consts, '*'s and, in a parameter, a name."""
        consts = []
        outer = self.outer is None
        if outer:
            self.outer = self.peek().start
        while self.peek().text == "const" and self.peek().kind == "id":
            consts.append(self.take())
        head = self.take()
        if head.text == "CPointer":
            t = self.cpointer()
        else:
            t = self.function_type(head)
        if outer:
            self.outer = None
        # the specifier goes on: more consts, no type words
        while True:
            tok = self.peek()
            if tok.kind != "id":
                break
            if tok.text == "const":
                consts.append(self.take())
            elif tok.text in _UNSUPPORTED:
                raise _Refusal(f"'{tok.text}' is not supported", tok.start)
            elif tok.text in _AGGREGATES:
                raise _Refusal(f"'{tok.text}' types are not supported; pass a pointer as "
                               "void *", tok.start)
            elif tok.text in _TYPE_WORDS:
                raise _Refusal(f"'{tok.text}' cannot follow the type name '{head.text}'",
                               tok.start)
            elif tok.text in _OTHER:
                raise _got(tok, "a type")
            else:
                break
        if isinstance(t, _Fn):
            for c in consts:
                t.inner.append(("const", c.start))
            return self.fn_declarator(t, allow_name, result, inner)
        for c in consts:
            t.append(("const", c.start))
        while True:                            # the type's '*'s and consts
            tok = self.peek()
            if tok.kind == "*" or (tok.kind == "id" and tok.text == "const"):
                t.append((tok.text, tok.start))
            elif tok.kind == "id" and tok.text in _UNSUPPORTED:
                raise _Refusal(f"'{tok.text}' is not supported", tok.start)
            else:
                return t
            self.take()

    def cpointer(self):
        tok = self.peek()
        if tok.kind != "(":
            raise _got(tok, "'(' after CPointer")
        self.take()
        self.enter(tok, "type")
        t = self.inner_type()
        close = self.peek()
        if close.kind != ")":
            self.check_type(t, close)
            raise _got(close, "')'")
        self.take()
        self.nest -= 1
        if isinstance(t, _Fn):
            raise _Refusal("pointers to function pointers are not supported", close.start)
        return t + [("*", close.start)]

    def inner_type(self):
        """The type inside CPointer( ) or FunctionType[ ], or a result: a
        specifier (type words, or one name, and consts), then '*'s and
        consts, as the parser reads a type (no name)."""
        if self.numba_type_ahead():
            return self.numba_type(inner=True)
        out = []
        named = words = stars = False
        while True:
            tok = self.peek()
            if tok.kind == "*":
                stars = True
            elif tok.kind != "id":
                break
            elif tok.text == "const" or tok.text in _UNSUPPORTED:
                pass
            elif stars:
                break
            elif tok.text in _AGGREGATES:
                out.append((tok.text, tok.start))
                self.take()
                tok = self.peek()
                if tok.kind != "id":
                    break
                named = True
            elif tok.text in _TYPE_WORDS or tok.text in _OTHER:
                words = True
            elif named or (words and tok.text not in NAMES and tok.text not in self.typedefs):
                break
            else:
                named = True
            out.append((tok.text, tok.start))
            self.take()
        if all(t in ("const", "*") or t in _UNSUPPORTED for t, _c in out):
            raise _got(self.peek(), "a type")
        return out

    def function_type(self, head):
        tok = self.peek()
        if tok.kind != "[":
            raise _got(tok, "'[' after FunctionType")
        self.take()
        self.enter(tok, "type")
        ret = self.inner_type()
        tok = self.peek()
        if tok.kind != "(":
            self.check_type(ret, tok)
            raise _got(tok, "'(' and the parameters of the function type")
        self.take()
        first = self.peek()
        if isinstance(ret, _Fn):
            raise _Refusal("a function returning a function pointer is not supported",
                           first.start)
        self.check_type(ret, tok)
        params = self.params(tok)
        self.check(params)
        tok = self.peek()
        if tok.kind != "]":
            raise _got(tok, "']'")
        self.take()
        self.nest -= 1
        return _Fn(ret, params, head.start)

    def fn_declarator(self, fn, allow_name, result=False, inner=False):
        """'*'s and consts after FunctionType[...] go inside its '(*...)'
        (the parser refuses a '*' there as it refused it here), then its
        name."""
        while True:
            tok = self.peek()
            if tok.kind == "*":
                raise _Refusal("pointers to function pointers are not supported", tok.start)
            elif tok.kind == "id" and tok.text == "const":
                fn.inner.append(("const", tok.start))
            elif tok.kind == "id" and tok.text in _UNSUPPORTED:
                raise _Refusal(f"'{tok.text}' is not supported", tok.start)
            else:
                break
            self.take()
        tok = self.peek()
        if result:
            return fn
        if allow_name and tok.kind == "id":
            if tok.text in _RESERVED:
                raise _got(tok, "a name")
            fn.inner.append((tok.text, tok.start))
            self.take()
            tok = self.peek()
        if tok.kind == "(" and not inner:
            self.take()
            raise _Refusal("a function returning a function pointer is not supported",
                           self.peek().start)
        return fn

    # ---- whole signatures
    def signature(self):
        first = self.peek()
        if first.kind == "(":
            return self.arrow()
        if self.numba_type_ahead():
            t = self.numba_type(result=True)
            if isinstance(t, _Fn):
                raise _Refusal("a function pointer as the return type is not supported",
                               first.start, self.peek().start)
            self.out.extend(t)
        self.stream(self.out, ())
        return self.out

    def arrow(self):
        """(A) -> R, what str() of a Numba signature gives: R (A)."""
        params = self.params(self.take())
        tok = self.peek()
        if tok.kind != "->":
            self.check(params)
            raise _got(tok, "'->' and the return type")
        self.take()
        first = self.peek()
        if first.kind == "end":
            self.check(params)
            raise _got(first, "a type")
        if self.numba_type_ahead():
            ret = self.numba_type(result=True)
            if isinstance(ret, _Fn):
                self.check(params)
                raise _Refusal("a function pointer as the return type is not supported",
                               first.start, self.peek().start)
        else:
            try:
                ret = self.inner_type()
            except _Refusal:
                self.check(params)
                raise
        tok = self.peek()
        if tok.kind != "end":
            self.check(params)
            self.check(params, ret)
            if tok.kind in ("...", "["):
                raise _got(tok, "")
            raise _Refusal(f"unexpected '{_quote(tok.text)}' after the signature", tok.start)
        self.out = ret + [(" ", first.start)] + params
        return self.out

    def check_type(self, t, after):
        """The parser's refusal of a type, if it has one, before what
        follows the type is refused."""
        if not isinstance(t, _Fn):
            self.check([("(", after.start)] + t + [(")", after.start)])

    def check(self, params, ret=None):
        """The parser reads the parameters (and result) before what follows
        them: their own refusal comes first."""
        pieces = (ret if ret else [("void", 0)]) + [(" ", 0)] + params
        text, cols = _join(pieces, len(self.text))
        try:
            _core.Signature(text, self.tds)
        except ValueError as e:
            msg, col = _caret(_remap(e, text, cols, self.text))
            raise _Refusal(msg, col) from None


def _caret(err):
    """(message, column) of the core's ValueError with a caret."""
    lines = str(err).split("\n")
    if len(lines) >= 3 and lines[-1].endswith("^"):
        return "\n".join(lines[:-2]), len(lines[-1]) - 5
    return str(err), -1


def _join(pieces, end):
    """C text and the user's column of each character: pieces apart by a
    space (the space at the next piece's column)."""
    parts, cols = [], []
    for s, col in pieces:
        if parts:
            parts.append(" ")
            cols.append(col)
        parts.append(s)
        cols.extend([col] * len(s))
    cols.append(end)
    return "".join(parts), cols


def _typedefs_for(text, user=None):
    """The typedefs of Numba's names that text uses (a caller's own
    typedef of a short name wins)."""
    tds = {}
    for name in set(_IDENT.findall(text)) & NAMES.keys():
        if user is None or name not in user:
            tds[name] = NAMES[name]
    return tds


def _remap(err, c_text, cols, user_text):
    """The core's refusal of the C text, its caret moved to the user's."""
    msg = str(err)
    tail = f"\n    {c_text}\n    "
    k = msg.rfind(tail)
    if k < 0 or not msg.endswith("^"):
        return err
    col = cols[min(len(msg) - len(tail) - k - 1, len(cols) - 1)]
    if re.match(r"parameter \d+ is named ", msg):
        col = _param_start(user_text, col)      # the parser's column: the parameter's
    return parse_error(msg[:k], col, user_text)


_OPENED = re.compile(r"(?:\bconst\s+)*\b(?:CPointer\s*\(|FunctionType\s*\[)(?:\s*const\b)*\s*$")


def _param_start(text, col):
    """The column where the parameter whose type's first word is at col
    starts: before the CPointer( and FunctionType[ around that word."""
    while (m := _OPENED.search(text, 0, col)) is not None:
        col = m.start()
    return col


def parse_error(msg, col, text):
    """The core's ValueError: message, the text, a caret under column col
    (the message alone for a refusal of no column)."""
    if col < 0:
        return ValueError(msg)
    col = min(col, len(text))
    return ValueError(f"{msg}\n    {text}\n    {' ' * col}^")


def check_typedef_names(typedefs):
    """Numba's names are no typedef's (the parser's own check, in its words,
    for the names it now reads as typedefs)."""
    if not isinstance(typedefs, dict):
        return
    for name in typedefs:
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            return
        if name in _LONG or name in ("CPointer", "FunctionType"):
            raise ValueError(f"typedef '{name}' would redefine a type name numthunk knows; "
                             "a typedef names a new type (give it another name)")


# translate()'s answers for text without typedefs: a loop that binds with
# signature= text asks for the same few again and again
_translated = {}
_TRANSLATED = 256


def translate(text, typedefs=None, _head=False):
    """(C text, typedefs, columns) the core parses for a signature written
    in C or in Numba's syntax (columns: of each character of the C text in
    text; None when the text goes as written); raises the parser's
    ValueError with a caret in text."""
    if typedefs is None and not _head:
        done = _translated.get(text)
        if done is None:
            done = _translate(text, None, False)
            if len(_translated) >= _TRANSLATED:
                _translated.clear()
            _translated[text] = done
        return done
    return _translate(text, typedefs, _head)


def _translate(text, typedefs, _head):
    if typedefs is not None and not isinstance(typedefs, dict):
        tds = typedefs                         # the core says what it takes
    else:
        tds = _typedefs_for(text, typedefs)
    if isinstance(typedefs, dict):
        check_typedef_names(typedefs)
        merged = {}
        for k, v in typedefs.items():
            try:
                merged[k] = translate_type(v)[0] if isinstance(v, str) else v
            except ValueError as e:
                raise ValueError(f"typedef {k} = {v}: {_caret(e)[0]}") from None
        merged.update(tds)
        tds = merged
    if "CPointer" not in text and "FunctionType" not in text and not _ARROW.match(text):
        return text, tds or None, None
    r = _Reader(text, typedefs, tds or None)
    try:
        pieces = r.signature()
    except _Refusal as e:
        if _head:
            raise
        raise _first_refusal(e, text, typedefs, r.outer) from None
    c_text, cols = _join(pieces, len(text))
    return c_text, tds or None, cols


def _first_refusal(e, text, typedefs, outer=None):
    """The parser reads left to right: of this refusal and one in the text
    before it, the earlier is the one to raise. The text before it is cut
    where the construct being read starts, and only a refusal before the
    cut counts (the cut's own end of input is no fault of the text)."""
    end = e.at if outer is None else min(e.at, outer)
    head = text[:end]
    early = None
    if head.strip():
        translated = None
        try:
            translated = translate(head, typedefs, _head=True)
            _core.Signature(translated[0], translated[1])
        except _Refusal as r:
            early = (r.msg, r.col) if r.at < end else None
        except ValueError as err:
            if translated is not None:
                err = remap(err, head, translated[0], translated[2])
            msg, col = _caret(err)
            early = (msg, col) if 0 <= col < end else None
    return parse_error(*(early or (e.msg, e.col)), text)


def translate_type(text):
    """(C text, columns) for one type in either syntax (a typedef's value,
    a ref()'s or a memoryview's C type), Numba's names replaced by their C
    text; columns None when the text is C already."""
    if not isinstance(text, str) or not (_SYNTAX.search(text)
                                         or set(_IDENT.findall(text)) & NAMES.keys()):
        return text, None
    r = _Reader(text, None, _typedefs_for(text) or None)
    try:
        pieces = _pieces(r.numba_type()) if r.numba_type_ahead() else []
        r.stream(pieces, ())
    except _Refusal as e:
        raise parse_error(e.msg, e.col, text) from None
    _refuse_name_after_words(r.toks, text)
    pieces = [(NAMES.get(p, p), col) for p, col in pieces]
    return _join(pieces, len(text))


def _refuse_name_after_words(toks, text):
    """'unsigned int64' is refused as the parser refuses a type name after
    type words (its typedefs are not given for one type's text)."""
    words = []
    for tok in toks:
        if tok.kind != "id" or tok.text in _UNSUPPORTED:
            words = []
        elif tok.text in _TYPE_WORDS:
            words.append(tok.text)
        elif tok.text in NAMES and words:
            raise parse_error(f"'{tok.text}' is a type name: it cannot follow '{words[0]}', "
                              "nor name a parameter", tok.start, text)
        elif tok.text != "const":
            words = []


def type_call(fn, text, *args):
    """fn(C text of the type text, *args), a refusal's caret in text."""
    c_text, cols = translate_type(text)
    try:
        return fn(c_text, *args)
    except ValueError as e:
        if cols is None:
            raise
        raise remap(e, text, c_text, cols) from None
    except TypeError as e:
        if cols is None or f"'{c_text}'" not in str(e):
            raise
        raise TypeError(str(e).replace(f"'{c_text}'", f"'{text}'", 1)) from None


def refusal(err, text, c_text, cols, typedefs):
    """The core's refusal of a signature's translation, in the user's words:
    the caret in text, a typedef's value as the user wrote it."""
    if isinstance(typedefs, dict):
        msg = str(err)
        for k, v in typedefs.items():
            try:
                t = translate_type(v)[0] if isinstance(k, str) and isinstance(v, str) else v
            except ValueError:
                continue
            if t != v and msg.startswith(f"typedef {k} = {t}: "):
                return ValueError(f"typedef {k} = {v}: " + msg[len(f"typedef {k} = {t}: "):])
    return remap(err, text, c_text, cols)


def remap(err, text, c_text, cols):
    """The core's refusal of c_text (the translation of text), as the
    refusal of text."""
    if cols is None:
        if c_text != text:
            return err
        cols = list(range(len(text) + 1))
    return _remap(err, c_text, cols, text)

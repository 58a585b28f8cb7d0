"""Signatures: C text, ctypes prototypes, cffi function types and Numba
signatures all become one parsed :class:`Signature` (the C core's type).

Each library's text is its adapter's (numthunk._ctypes, numthunk._cffi,
numthunk._numba, all below this module); this one only dispatches.
"""

import ctypes

from . import _cffi, _core, _ctypes, _numba, _numba_sig

__all__ = ["Signature", "ctypes_prototype", "scipy_text", "param_label"]


def param_label(sig, i):
    """'argument 2 (x: const double *)': the core's own label of parameter i
    (0-based) of sig, for messages the package raises."""
    return sig._label(i)


def _is_numba_signature(obj):
    mod = type(obj).__module__
    return mod.startswith("numba.") and hasattr(obj, "args") and hasattr(obj, "return_type")


class Signature(_core.Signature):
    """A parsed C function signature.

    ``Signature("double (double *, int)")``, or from a ctypes prototype
    (``CFUNCTYPE`` class or instance), a cffi function type or pointer, or a
    Numba signature (``float64(CPointer(float64), intc)``) or its string.
    ``str()`` gives the canonical C form that SciPy and Cython compare.
    ``typedefs``: ``{name: C type}`` for names the text uses. Signatures
    are equal when C calls them compatible function types: names and
    spellings aside, and a parameter's or the result's own ``const`` aside
    (``double (const double x)`` is ``double (double)``); what a pointer
    points to counts.

    >>> sig = nt.Signature("double (const REAL *x, int n)", typedefs={"REAL": "double"})
    >>> str(sig), sig.names, sig.nargs
    ('double (const double *, int)', ('x', 'n'), 2)
    >>> sig == nt.Signature("float64(CPointer(float64), intc)")   # the pointee's const counts
    False
    >>> nt.Signature("double (FLOAT64 *, int)")
    Traceback (most recent call last):
    ...
    ValueError: unknown type name 'FLOAT64'
        double (FLOAT64 *, int)
                ^
    """

    __slots__ = ()

    def __new__(cls, spec, typedefs=None):
        if isinstance(spec, _core.Signature):
            if typedefs:
                raise TypeError("typedefs apply to C text only")
            return super().__new__(cls, spec)
        if isinstance(spec, str):
            # C text, or Numba's read as C by the Numba adapter
            _refuse_nul(spec, typedefs)
            text, tds, cols = _numba_sig.translate(spec, typedefs)
            try:
                return super().__new__(cls, text, tds)
            except ValueError as e:
                if text == spec and tds is typedefs:
                    raise
                raise _numba_sig.refusal(e, spec, text, cols, typedefs) from None
        if isinstance(spec, type) and issubclass(spec, ctypes._CFuncPtr):
            return super().__new__(cls, _ctypes.prototype_text(spec))
        if isinstance(spec, ctypes._CFuncPtr):
            return super().__new__(cls, _ctypes.function_text(spec))
        if _cffi.is_cffi(spec):
            return super().__new__(cls, *_cffi.signature_text(spec))
        if _is_numba_signature(spec):
            return super().__new__(cls, _numba.signature_to_c(spec))
        raise TypeError(f"cannot make a C signature from {type(spec).__name__!r}: expected "
                        "C text, a ctypes prototype, a cffi function type or a Numba signature")

    def to_ctypes(self):
        """A ``ctypes.CFUNCTYPE`` prototype for this signature."""
        return ctypes_prototype(self)

    def to_numba(self):
        """The Numba signature (``numba.core.typing.Signature``)."""
        return _numba.signature_from_c(self)

    def numba_type(self):
        """The Numba type of a thunk (or Function) of this signature, what
        ``numba.typeof(thunk)`` gives: for a jitclass or structref field,
        ``typed.List.empty_list(...)`` or an explicit ``@njit`` signature.
        A value of this type holds its thunk (docs/numba.md).

        >>> nt.Signature("double (double x)").numba_type()
        numthunk.Thunk[(float64,) -> float64]
        """
        return _numba.function_type(self)


def _refuse_nul(text, typedefs):
    """C reads text up to a NUL byte: refuse one rather than parse a prefix."""
    if "\0" in text:
        raise ValueError(f"signature {text!r}: NUL byte at column {text.index(chr(0))}")
    if isinstance(typedefs, dict):
        for k, v in typedefs.items():
            for part in (k, v):
                if isinstance(part, str) and "\0" in part:
                    raise ValueError(f"typedef {k!r}: {v!r}: NUL byte in "
                                     f"{'the name' if part is k else 'the type'}")


def ctypes_prototype(sig):
    """``ctypes.CFUNCTYPE`` for a :class:`Signature`."""
    return _ctypes.prototype(sig)


# The C text of each kind _describe() reports, the kind table's one C text
# ("int", "intptr_t", "double"), which the core prints as written.
_KIND_TEXT = {**{k: row.c for k, row in _core.kinds.items()},
              "memoryview slice": "__Pyx_memviewslice"}


def _kind_type_text(desc, written):
    kind, base, depth, _const, _spelling, fn = desc
    if kind == "function pointer":
        return _kind_fn_text(fn, pointer=True) if fn is not None else written
    if kind == "pointer":
        if base == "void":
            # void * or an opaque struct pointer: its own text
            return written
        # no const: SciPy passes "double *" and compares text, and a target
        # that promises not to write through the pointer takes one as well
        return _KIND_TEXT.get(base, base) + " " + "*" * depth
    # a parameter's or the result's own const is no part of the function's
    # type (Signature equality leaves it out too): SciPy asks for "double
    # (double)" of a target declared double (const double x)
    return _KIND_TEXT.get(kind, kind)


def _kind_fn_text(sig, pointer=False):
    ret, args = sig._describe()
    text_args = ", ".join(_kind_type_text(d, w) for d, w in zip(args, sig.argtypes)) or "void"
    ret_text = _kind_type_text(ret, sig.restype)
    return f"{ret_text} (*)({text_args})" if pointer else f"{ret_text} ({text_args})"


# scipy_text's answers by the signature's own text (spellings included: a
# typedef'd void pointer prints as written): a parameter sweep asks for the
# same few on every LowLevelCallable it makes.
_scipy_texts = {}
_SCIPY_TEXTS = 256


def scipy_text(sig):
    """The signature as SciPy's LowLevelCallable consumers compare it: each
    type by what it is, not how it was written ("int" for a 32-bit C int,
    "intptr_t" for a pointer-sized integer, whatever typedef or Numba name
    the signature used)."""
    key = str(sig)
    text = _scipy_texts.get(key)
    if text is None:
        text = str(Signature(_kind_fn_text(sig)))
        if len(_scipy_texts) >= _SCIPY_TEXTS:
            _scipy_texts.clear()
        _scipy_texts[key] = text
    return text

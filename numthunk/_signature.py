"""Signatures: C text, ctypes prototypes, cffi function types and Numba
signatures all become one parsed :class:`Signature` (the C core's type)."""

import ctypes

from . import _core

__all__ = ["Signature", "ctypes_type_text", "ctypes_prototype"]


def _int_text(ct):
    # ctypes aliases its integer classes by width (c_int64 is c_long on
    # LP64), so the class cannot say which C name was meant: the kind
    # table's integer of its width and signedness gives the one text the
    # core prints for that width ("int", "intptr_t").
    size, signed = ctypes.sizeof(ct), ct(-1).value < 0
    top = (1 << (8 * size - signed)) - 1
    return next(k.c for k in _core.kinds.values()
                if k.size == size and k.signed == signed and k.max == top)


# ctypes classes by identity; aliases (c_int32 is c_int on most platforms)
# resolve to the first entry that matches: the char and short classes by
# their C names, the classes ctypes aliases by width, then the kind table's
# own classes (c_bool, c_float, c_double, the exact-width integers).
_CTYPES_NAMES = [
    (ctypes.c_char, "char"),
    (ctypes.c_byte, "signed char"),
    (ctypes.c_ubyte, "unsigned char"),
    (ctypes.c_short, "short"),
    (ctypes.c_ushort, "unsigned short"),
    *((ct, _int_text(ct)) for ct in (ctypes.c_int, ctypes.c_uint, ctypes.c_long,
                                     ctypes.c_ulong, ctypes.c_longlong, ctypes.c_ulonglong,
                                     ctypes.c_ssize_t, ctypes.c_size_t)),
    *((getattr(ctypes, k.ctypes), k.c) for k in _core.kinds.values() if k.ctypes),
    (ctypes.c_void_p, "void *"),
    (ctypes.c_char_p, "char *"),
]


def ctypes_type_text(ct, where="type"):
    """C text for a ctypes type: c_double -> 'double', POINTER(c_int) -> 'int *'."""
    if ct is None:
        return "void"
    for cls, name in _CTYPES_NAMES:
        if ct is cls:
            return name
    if isinstance(ct, type) and issubclass(ct, ctypes._Pointer):
        inner = ct._type_
        if isinstance(inner, type) and issubclass(inner, (ctypes.Structure, ctypes.Union)):
            # an opaque struct pointer: the struct is known by name only
            kw = "union" if issubclass(inner, ctypes.Union) else "struct"
            return f"{kw} {inner.__name__} *"
        return ctypes_type_text(inner, where) + " *"
    if isinstance(ct, type) and issubclass(ct, ctypes._CFuncPtr):
        ret = ctypes_type_text(ct._restype_, where)
        args = ", ".join(ctypes_type_text(a, where) for a in ct._argtypes_) or "void"
        return f"{ret} (*)({args})"
    raise TypeError(f"{where}: ctypes type {getattr(ct, '__name__', ct)!r} has no C "
                    "equivalent numthunk supports")


def _ctypes_text(restype, argtypes):
    if argtypes is None:
        raise TypeError("the ctypes function has no argtypes: set fn.argtypes and "
                        "fn.restype so its C signature is known")
    ret = ctypes_type_text(restype, "restype")
    args = [ctypes_type_text(a, f"argtypes[{i}]") for i, a in enumerate(argtypes)]
    return f"{ret} ({', '.join(args) or 'void'})"


def _ctypes_sig_text(proto):
    """A CFUNCTYPE prototype (class)."""
    return _ctypes_text(proto._restype_, getattr(proto, "_argtypes_", None))


def _ctypes_fn_sig_text(fn):
    """A ctypes function pointer instance: its own argtypes/restype win."""
    argtypes = fn.argtypes
    if argtypes is None:
        argtypes = getattr(type(fn), "_argtypes_", None)
    return _ctypes_text(fn.restype, argtypes)


def _cffi_type_text(ct, typedefs=None):
    kind = ct.kind
    if kind == "void":
        return "void"
    if kind == "primitive":
        return _C_OF_CFFI.get(ct.cname, ct.cname)
    if kind in ("pointer", "array"):
        item = ct.item
        if item.kind == "function":
            return _cffi_fn_text(item, pointer=True, typedefs=typedefs)
        if item.kind in ("struct", "union"):
            # an opaque struct pointer; a typedef'd name ("S") is declared
            # as a struct so that it prints back as cffi wrote it
            if not item.cname.startswith(("struct ", "union ")) and typedefs is not None:
                typedefs[item.cname] = f"{item.kind} {item.cname}"
            return item.cname + " *"
        return _cffi_type_text(item, typedefs) + " *"
    if kind == "function":
        return _cffi_fn_text(ct, pointer=True, typedefs=typedefs)
    raise TypeError(f"cffi type {ct.cname!r} has no C equivalent numthunk supports")


# The C text cffi reads for the core's where they differ (_Bool, float
# _Complex), from the kind table, and back: with the names cffi 2.0 prints
# for the complex types.
CFFI_OF_C = {k.c: k.cffi for k in _core.kinds.values() if k.cffi != k.c}
_C_OF_CFFI = {cffi_name: c for c, cffi_name in CFFI_OF_C.items()}
_C_OF_CFFI.update({"_cffi_float_complex_t": "float complex",
                   "_cffi_double_complex_t": "double complex"})


def _cffi_fn_text(ct, pointer=False, typedefs=None):
    # cffi marks a function with complex parameters or result as variadic
    # (its own calls go through libffi's variadic path); its type text shows
    # whether there is a real '...'.
    if ct.ellipsis and "..." in ct.cname:
        raise ValueError(f"variadic functions are not supported: {ct.cname}")
    ret = _cffi_type_text(ct.result, typedefs)
    args = ", ".join(_cffi_type_text(a, typedefs) for a in ct.args) or "void"
    return f"{ret} (*)({args})" if pointer else f"{ret} ({args})"


def _is_cffi(obj):
    return type(obj).__module__ == "_cffi_backend"


def _cffi_sig_text(obj):
    import _cffi_backend

    ct = obj if type(obj).__name__ in ("CType", "__CType") else _cffi_backend.typeof(obj)
    if ct.kind == "pointer" and ct.item.kind == "function":
        ct = ct.item
    if ct.kind != "function":
        raise TypeError(f"cffi type {ct.cname!r} is not a function type")
    typedefs = {}
    return _cffi_fn_text(ct, typedefs=typedefs), typedefs or None


def _is_numba_signature(obj):
    mod = type(obj).__module__
    return mod.startswith("numba.") and hasattr(obj, "args") and hasattr(obj, "return_type")


class Signature(_core.Signature):
    """A parsed C function signature.

    ``Signature("double (double *, int)")``, or from a ctypes prototype
    (``CFUNCTYPE`` class or instance), a cffi function type or pointer, or a
    Numba signature (``float64(CPointer(float64), intc)``) or its string.
    ``str()`` gives the canonical C form that SciPy and Cython compare.
    ``typedefs``: ``{name: C type}`` for names the text uses.

    >>> sig = nt.Signature("double (const REAL *x, int n)", typedefs={"REAL": "double"})
    >>> str(sig), sig.names, sig.nargs
    ('double (const double *, int)', ('x', 'n'), 2)
    >>> sig == nt.Signature("float64(CPointer(float64), intc)")   # const aside: no
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
            _refuse_nul(spec, typedefs)
            try:
                return super().__new__(cls, spec, typedefs)
            except ValueError as exc:
                # typedefs are C's: text given with them is C text
                text = None if typedefs else _numba_string_to_c(spec)
                if text is None:
                    raise exc from None
                return super().__new__(cls, text)
        if isinstance(spec, type) and issubclass(spec, ctypes._CFuncPtr):
            return super().__new__(cls, _ctypes_sig_text(spec))
        if isinstance(spec, ctypes._CFuncPtr):
            return super().__new__(cls, _ctypes_fn_sig_text(spec))
        if _is_cffi(spec):
            return super().__new__(cls, *_cffi_sig_text(spec))
        if _is_numba_signature(spec):
            from . import _numba
            return super().__new__(cls, _numba.signature_to_c(spec))
        raise TypeError(f"cannot make a C signature from {type(spec).__name__!r}: expected "
                        "C text, a ctypes prototype, a cffi function type or a Numba signature")

    def to_ctypes(self):
        """A ``ctypes.CFUNCTYPE`` prototype for this signature."""
        return ctypes_prototype(self)

    def to_numba(self):
        """The Numba signature (``numba.core.typing.Signature``)."""
        from . import _numba
        return _numba.signature_from_c(self)

    def numba_type(self):
        """The Numba type of a thunk (or Function) of this signature, what
        ``numba.typeof(thunk)`` gives: for a jitclass or structref field,
        ``typed.List.empty_list(...)`` or an explicit ``@njit`` signature.
        A value of this type holds its thunk (docs/numba.md).

        >>> nt.Signature("double (double x)").numba_type()
        numthunk.Thunk[(float64,) -> float64]
        """
        from . import _numba
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


def _numba_string_to_c(text):
    """'float64(CPointer(float64), intc)'-style text that the C parser did not
    take: ask Numba, when it is installed, what it means."""
    if "->" not in text and "(" not in text:
        return None
    from . import _numba
    try:
        return _numba.string_to_c(text)
    except (ImportError, ValueError, TypeError, RecursionError):
        # Not Numba's either (or Numba is not installed, or its parser
        # recursed too deep for text nested past the C parser's limit): the
        # C parser's error, with its caret, is the one to show.
        return None


_CTYPES_OF_KIND = {k.name: getattr(ctypes, k.ctypes) for k in _core.kinds.values() if k.ctypes}


def _ctypes_of(desc):
    kind, base, depth, _const, _spelling, fn = desc
    if kind == "void":
        return None
    if kind in _CTYPES_OF_KIND:
        return _CTYPES_OF_KIND[kind]
    if kind == "pointer":
        if base == "void" and depth == 1:
            return ctypes.c_void_p
        t = ctypes.c_void_p if base == "void" else _CTYPES_OF_KIND.get(base)
        if t is None:
            return ctypes.c_void_p
        for _ in range(depth - (1 if base == "void" else 0)):
            t = ctypes.POINTER(t)
        return t
    if kind == "function pointer":
        return ctypes_prototype(fn) if fn is not None else ctypes.c_void_p
    raise TypeError(f"C type {kind!r} has no ctypes equivalent (complex and struct values "
                    "cannot cross ctypes)")


def ctypes_prototype(sig):
    """``ctypes.CFUNCTYPE`` for a :class:`Signature`."""
    ret, args = sig._describe()
    return ctypes.CFUNCTYPE(_ctypes_of(ret), *[_ctypes_of(a) for a in args])


# NumPy/Numba names of the kinds _describe() reports: the core's table
# prints each as its one C text ("int", "intptr_t", "double").
_KIND_TEXT = {"bool": "bool_", "memoryview slice": "__Pyx_memviewslice"}


def _kind_type_text(desc, written):
    kind, base, depth, const, _spelling, fn = desc
    if kind == "function pointer":
        return _kind_fn_text(fn, pointer=True) if fn is not None else written
    if kind == "pointer":
        if base == "void":
            # void * or an opaque struct pointer: its own text
            return written
        # no const: SciPy passes "double *" and compares text, and a target
        # that promises not to write through the pointer takes one as well
        return _KIND_TEXT.get(base, base) + " " + "*" * depth
    return ("const " if const else "") + _KIND_TEXT.get(kind, kind)


def _kind_fn_text(sig, pointer=False):
    ret, args = sig._describe()
    text_args = ", ".join(_kind_type_text(d, w) for d, w in zip(args, sig.argtypes)) or "void"
    ret_text = _kind_type_text(ret, sig.restype)
    return f"{ret_text} (*)({text_args})" if pointer else f"{ret_text} ({text_args})"


def scipy_text(sig):
    """The signature as SciPy's LowLevelCallable consumers compare it: each
    type by what it is, not how it was written ("int" for a 32-bit C int,
    "intptr_t" for a pointer-sized integer, whatever typedef or Numba name
    the signature used)."""
    return str(Signature(_kind_fn_text(sig)))

"""ctypes adapter: C text of ctypes types and function pointers, prototypes
from signatures, what ctypes pointer objects point to, the structs a
ctypes function declares, where a ctypes type holds Python objects.

Below numthunk._signature (which reads the text this module writes): it
imports nothing of the package but the core, and works on the core's
Signature (``_describe()``, ``argtypes``). ctypes is in the standard
library: importing it costs nothing ``import numthunk`` does not pay.
"""

import ctypes

from . import _core

__all__ = ["type_text", "prototype_text", "function_text", "prototype", "POINTERS",
           "is_function", "address_of", "pointee", "declared_structs", "struct_of",
           "objects_in"]


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


# ---------------------------------------------------------------- C text


def type_text(ct, where="type"):
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
        return type_text(inner, where) + " *"
    if isinstance(ct, type) and issubclass(ct, ctypes._CFuncPtr):
        ret = type_text(ct._restype_, where)
        args = ", ".join(type_text(a, where) for a in ct._argtypes_) or "void"
        return f"{ret} (*)({args})"
    raise TypeError(f"{where}: ctypes type {getattr(ct, '__name__', ct)!r} has no C "
                    "equivalent numthunk supports")


def _text(restype, argtypes):
    if argtypes is None:
        raise TypeError("the ctypes function has no argtypes: set fn.argtypes and "
                        "fn.restype so its C signature is known")
    ret = type_text(restype, "restype")
    args = [type_text(a, f"argtypes[{i}]") for i, a in enumerate(argtypes)]
    return f"{ret} ({', '.join(args) or 'void'})"


def prototype_text(proto):
    """C text of a CFUNCTYPE prototype (class)."""
    return _text(proto._restype_, getattr(proto, "_argtypes_", None))


def function_text(fn):
    """C text of a ctypes function pointer instance: its own argtypes and
    restype win over its class's."""
    argtypes = fn.argtypes
    if argtypes is None:
        argtypes = getattr(type(fn), "_argtypes_", None)
    return _text(fn.restype, argtypes)


# ---------------------------------------------------------------- prototypes


_CTYPES_OF_KIND = {k.name: getattr(ctypes, k.ctypes) for k in _core.kinds.values() if k.ctypes}


def _ctypes_of(desc):
    kind, base, depth, _const, _spelling, fn = desc
    if kind == "void":
        return None
    if kind in _CTYPES_OF_KIND:
        return _CTYPES_OF_KIND[kind]
    if kind == "pointer":
        # void * is c_void_p; T * is POINTER(T); each further level a POINTER
        t = ctypes.c_void_p if base == "void" else _CTYPES_OF_KIND.get(base)
        if t is None:
            return ctypes.c_void_p
        for _ in range(depth - (1 if base == "void" else 0)):
            t = ctypes.POINTER(t)
        return t
    if kind == "function pointer":
        return prototype(fn) if fn is not None else ctypes.c_void_p
    raise TypeError(f"C type {kind!r} has no ctypes equivalent (complex and struct values "
                    "cannot cross ctypes)")


def prototype(sig):
    """``ctypes.CFUNCTYPE`` for a signature (the core's or numthunk's)."""
    ret, args = sig._describe()
    return ctypes.CFUNCTYPE(_ctypes_of(ret), *[_ctypes_of(a) for a in args])


def thunk_pointer(proto, thunk):
    """``t.ctypes``: a function pointer of ``proto`` to the thunk's address
    that holds the thunk (``_numthunk_owner``). Called from Python it first
    reads the thunk's ``_wrapper_address_``, so that a thunk released, or
    one that uses a released thunk, raises ValueError as ``thunk(...)``
    does, instead of reaching the trap (or, once the quarantine let the
    address go, another thunk). ctypes does not count the call: a release
    from another thread during it is the caller's to prevent, as for C."""
    cls = _thunk_pointer_types.get(proto)
    if cls is None:
        cls = type(proto)(proto.__name__, (proto,), {
            "_argtypes_": proto._argtypes_, "_restype_": proto._restype_,
            "_flags_": proto._flags_, "__call__": _checked_call,
            "__module__": __name__})
        cls = _thunk_pointer_types.setdefault(proto, cls)
    fn = cls(thunk.address)
    fn._numthunk_owner = thunk
    return fn


def _checked_call(self, *args, **kwargs):
    _ = self._numthunk_owner._wrapper_address_      # ValueError once a call would trap
    return ctypes._CFuncPtr.__call__(self, *args, **kwargs)


# prototype -> its subclass for t.ctypes (ctypes.CFUNCTYPE keeps its
# prototypes for ever too)
_thunk_pointer_types = {}


# ---------------------------------------------------------------- targets


def is_function(obj):
    """Whether obj is a ctypes function pointer (a target)."""
    return isinstance(obj, ctypes._CFuncPtr)


def address_of(obj):
    """The address a ctypes function pointer or pointer holds (0 for NULL),
    read from the object's own buffer. Not ``ctypes.cast``: that is a
    foreign call, which turns any error in converting its argument (a
    MemoryError too) into ``ctypes.ArgumentError``."""
    return ctypes.c_void_p.from_address(ctypes.addressof(obj)).value or 0


# ---------------------------------------------------------------- pointers
#
# A pointee is (base, depth, struct), as numthunk._foreign checks them.

POINTERS = (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p)


def _kind_of_c(text):
    try:
        return _core.Signature(f"void ({text})")._describe()[1][0][0]
    except ValueError:
        return None      # a C type the core does not model (wchar_t, ...)


def _wchar_kind():
    # wchar_t: a 32-bit int on Linux and macOS, a 16-bit unsigned on Windows
    return "int32" if ctypes.sizeof(ctypes.c_wchar) == 4 else "uint16"


def _leaf(t, depth):
    if t is ctypes.c_void_p:
        return ("void", depth + 1, None)
    if t is ctypes.c_char_p:
        return (_leaf(ctypes.c_char, 0)[0], depth + 1, None)
    if t is ctypes.c_wchar_p:
        return (_wchar_kind(), depth + 1, None)
    if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)):
        return ("void", depth, t.__name__)
    try:
        kind = _kind_of_c(type_text(t))
    except TypeError:
        kind = None
    return (kind or f"ctypes {getattr(t, '__name__', t)}", depth, None)


def pointee(obj):
    """(pointee, address, what) of a ctypes pointer object."""
    if isinstance(obj, ctypes.c_void_p):
        given = ("void", 1, None)
    elif isinstance(obj, ctypes.c_char_p):
        given = ("int8" if _kind_of_c("char") == "int8" else "uint8", 1, None)
    elif isinstance(obj, ctypes.c_wchar_p):
        given = (_wchar_kind(), 1, None)
    else:
        depth = 0
        t = type(obj)
        while isinstance(t, type) and issubclass(t, ctypes._Pointer):
            depth += 1
            t = t._type_
        given = _leaf(t, depth)
    return given, address_of(obj), f"a ctypes {type(obj).__name__}"


# ---------------------------------------------------------------- structs


def declared_structs(target, found):
    """Add {struct name: size} for the structs a ctypes function's parameters
    point to, as its own types declare them."""
    for t in target.argtypes or getattr(type(target), "_argtypes_", None) or ():
        while isinstance(t, type) and issubclass(t, ctypes._Pointer):
            t = t._type_
        if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)):
            found[t.__name__] = ctypes.sizeof(t)


def struct_of(obj):
    """The Structure or Union class of a ctypes instance or array of them."""
    t = type(obj)
    while issubclass(t, ctypes.Array):  # an array's _type_ is a ctypes type
        t = t._type_
    if issubclass(t, (ctypes.Structure, ctypes.Union)):
        return t
    return None


def objects_in(t):
    """Where ctypes type t holds Python objects (``py_object``) at any depth
    of its Structure, Union and array fields: the field's path ('s.o'), ''
    for t itself (or its items), None where it holds none."""
    if not isinstance(t, type):
        return None
    if issubclass(t, ctypes._SimpleCData):
        return "" if t._type_ == "O" else None
    if issubclass(t, ctypes.Array):
        return objects_in(t._type_)
    if issubclass(t, (ctypes.Structure, ctypes.Union)):
        for field in getattr(t, "_fields_", ()):
            path = objects_in(field[1])
            if path is not None:
                return field[0] + ("." + path if path else "")
    return None

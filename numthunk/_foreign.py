"""Foreign pointers: objects of other libraries that hold a C pointer.

One rule for all of them: the pointee type is checked against the
parameter's, and the value bound is the address the pointer holds (never the
bytes of the object that holds it). They resolve, in Python and before the
core is touched, to :class:`numthunk.address` values whose owner is the
foreign object, so the thunk keeps it alive:

- ctypes ``POINTER(T)`` instances (any depth), ``c_void_p``, ``c_char_p``,
  ``c_wchar_p``;
- cffi pointers and arrays (``ffi.new``, ``ffi.cast``, struct pointers);
- NumPy ``BitGenerator`` objects, for a ``void *`` parameter: their C state
  (``bg.ctypes.state``), the first argument of the ``bitgen_t`` functions
  (``next_double(void *state)``).

What each library's pointer holds and points to is its adapter's
(numthunk._ctypes, numthunk._cffi); the rule, the struct checks and the
refusal of ctypes memory that holds Python objects are here. cffi is
imported only when one of its objects shows up.
"""

import ctypes

from . import _cffi, _core, _ctypes, _cython
from ._signature import Signature, param_label, scipy_text

__all__ = ["is_foreign", "resolve", "refuse_objects", "struct_size", "declared_structs",
           "resolve_struct", "cffi_pointer"]

Address = _core.Address
_CTYPES_POINTERS = _ctypes.POINTERS


def is_foreign(obj):
    """Whether obj is a pointer object this module resolves (a cheap test)."""
    mod = type(obj).__module__ or ""    # None for some made-up ctypes types
    if mod == "_cffi_backend":
        return True
    if isinstance(obj, _CTYPES_POINTERS):
        return True
    return mod.startswith("numpy.random") and _is_bit_generator(obj)


def _is_bit_generator(obj):
    import numpy as np
    return isinstance(obj, np.random.BitGenerator)


# ---------------------------------------------------------------- pointees
#
# A pointee is (base, depth, struct): base a kind name from the core
# ("float64", "int8", "void"), depth the number of '*' of the pointer, and
# struct the struct's name ("pt" for "struct pt" or a typedef "pt") when the
# pointee is a struct, else None.


def _strip_struct(name):
    """The struct's own name: without 'struct ', and a Cython-mangled typedef
    ('__pyx_t_5scipy_..._zeros_full_output') as its .pxd names it."""
    for prefix in ("struct ", "union "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name.startswith("__pyx_t_"):
        d = _cython._demangle(name)
        if d is not None:
            name = d[1]
    return name


def _param_pointee(sig, i):
    kind, base, depth, _const, _spelling, _fn = sig._describe()[1][i]
    if kind != "pointer":
        return None
    struct = None
    if base == "void":
        words = [w for w in sig.argtypes[i].replace("*", " ").split() if w != "const"]
        text = " ".join(words)
        if text != "void":
            struct = _strip_struct(text)
    return (base, depth, struct)


def _aggregate_word(sig, i):
    """'union' where parameter i of sig points to a union by that word, else
    'struct' (a struct, or a typedef's name)."""
    words = [w for w in sig.argtypes[i].replace("*", " ").split() if w != "const"]
    return "union" if words[:1] == ["union"] else "struct"


def _c_name(kind):
    """A kind's C text ('int32' -> 'int'); void (no parameter: "void
    (void)") and what the core does not model, as given."""
    try:
        types = Signature(f"void ({kind})").argtypes
    except ValueError:
        return kind
    return types[0] if types else kind


def _pointee_text(p, word="struct"):
    """What a pointer points to: 'double', 'struct pt', 'double *'; word is
    the aggregate's ('union' for a union)."""
    base, depth, struct = p
    name = f"{word} {struct}" if struct else _c_name(base)
    return name + (" " + "*" * (depth - 1) if depth > 1 else "")


def _compatible(param, given):
    pbase, pdepth, pstruct = param
    gbase, gdepth, gstruct = given
    if (pbase, pdepth, pstruct) == ("void", 1, None):
        return True                 # void *: any data pointer
    if (gbase, gdepth, gstruct) == ("void", 1, None):
        return True                 # an untyped pointer: the caller vouches
    if pdepth != gdepth:
        return False
    if pstruct is not None or gstruct is not None:
        return pstruct == gstruct
    return pbase == gbase


# ---------------------------------------------------------------- resolve


def resolve(obj, sig, i):
    """An ``address`` (owner: obj) for a foreign pointer bound to parameter i
    of sig, after the pointee check; None when obj is not a foreign pointer
    or the parameter is not a data pointer (the core reports those)."""
    param = _param_pointee(sig, i)
    if param is None:
        return None
    if _cffi.is_cffi(obj):
        try:
            found = _cffi.pointee(obj, _strip_struct)
        except TypeError as exc:
            raise TypeError(f"{param_label(sig, i)}: {exc}") from None
        if found is None:
            return None     # a function pointer: for function-pointer parameters
        given, value, what = found
    elif isinstance(obj, _CTYPES_POINTERS):
        given, value, what = _ctypes.pointee(obj)
    elif _is_bit_generator(obj):
        if param != ("void", 1, None):
            raise TypeError(f"{param_label(sig, i)}: a NumPy {type(obj).__name__} binds to a "
                            "void * parameter (its C state, the first argument of bitgen_t's "
                            "next_* functions)")
        return Address(obj.ctypes.state.value, owner=obj)
    else:
        return None
    if not _compatible(param, given):
        raise TypeError(f"{param_label(sig, i)}: {what} points to {_pointee_text(given)}, "
                        f"the parameter to {_pointee_text(param, _aggregate_word(sig, i))}; pass "
                        "numthunk.address(...) to bind a pointer value as it is")
    if isinstance(obj, ctypes._Pointer):
        _refuse_objects_in(type(obj)._type_, sig, i, f"{what} points to",
                           "bind a pointer to plain data")
    return Address(value, owner=obj)


# ---------------------------------------------------------------- plain data
#
# A pointer takes plain data only: where the memory holds Python objects, a
# kernel that writes a number overwrites a reference, and what it reads is
# an address. The core refuses a buffer whose format shows them (convert/buffer.c
# nt_check_plain: NumPy's dtype object, an object field at any depth); a
# ctypes value is looked at here, by its type, as ctypes exports a Union or
# a packed Structure as bytes and a pointer's pointee not at all.


def _refuse_objects_in(t, sig, i, what, instead):
    path = _ctypes.objects_in(t)
    if path is not None:
        where = f" (field '{path}')" if path else ""
        raise TypeError(f"{param_label(sig, i)}: {what} Python objects{where}: C code cannot "
                        f"read or write them; {instead}")


def refuse_objects(obj, sig, i):
    """Refuses a ctypes Structure, Union or array (or ``strided()`` of one)
    that holds Python objects, bound to data pointer parameter i of sig."""
    inner = obj.obj if type(obj).__name__ == "Strided" else obj
    if isinstance(inner, (ctypes.Structure, ctypes.Union, ctypes.Array)):
        _refuse_objects_in(type(inner), sig, i, f"a ctypes {type(inner).__name__} holds",
                           "bind an array of plain data")


# ---------------------------------------------------------------- structs
#
# A ``struct S *`` parameter takes a buffer only when its items are declared
# to be S, with S's size where numthunk knows it: a bare buffer's length
# says nothing about the struct, and a kernel reading S from a too-short
# buffer reads past its end. Declarations (``structs``: name -> size in
# bytes) come from a ``Function(..., structs=...)`` and from the ctypes or
# cffi types a target's signature was read from.


def struct_size(layout, what):
    """The size in bytes of one struct declaration: a NumPy dtype, a ctypes
    Structure or Union class, a cffi struct type, or an int."""
    import numpy as np
    if isinstance(layout, bool):
        raise TypeError(f"{what}: expected a struct layout, got bool")
    if isinstance(layout, int):
        if layout <= 0:
            raise ValueError(f"{what}: a struct's size must be positive, got {layout}")
        return layout
    if isinstance(layout, np.dtype):
        return layout.itemsize
    if isinstance(layout, type) and issubclass(layout, (ctypes.Structure, ctypes.Union)):
        return ctypes.sizeof(layout)
    size = _cffi.struct_size(layout)
    if size is not None:
        return size
    raise TypeError(f"{what}: expected a struct layout (a NumPy dtype, a ctypes Structure "
                    f"class, a cffi struct type or a size in bytes), got "
                    f"{type(layout).__name__} {layout!r}")


def declared_structs(target):
    """{struct name: size} for the structs a ctypes or cffi function's
    parameters point to, as its own types declare them; None if none."""
    found = {}
    if _ctypes.is_function(target):
        _ctypes.declared_structs(target, found)
    elif _cffi.is_cffi(target):
        _cffi.declared_structs(target, found, _strip_struct)
    return found or None


def resolve_struct(obj, sig, i, structs):
    """A buffer (or ``strided(buffer)``) bound to a ``struct S *`` parameter:
    obj itself after the checks, or an ``address`` for a ctypes Union (whose
    buffer carries no layout). ``structs``: the target's declarations."""
    param = _param_pointee(sig, i)
    if param is None or param[2] is None or param[1] != 1:
        return obj
    name = param[2]
    what = param_label(sig, i)
    declared = (structs or {}).get(name)
    # the parameter's own word for its pointee: 'union num', or 'struct pt'
    # (also for a typedef's name)
    pointee = f"{_aggregate_word(sig, i)} {name}"
    inner = obj.obj if type(obj).__name__ == "Strided" else obj
    ct = _ctypes.struct_of(inner)
    if ct is not None:
        held = f"{'union' if issubclass(ct, ctypes.Union) else 'struct'} {ct.__name__}"
        if ct.__name__ != name:
            raise TypeError(f"{what}: a ctypes {type(inner).__name__} holds {held}, the "
                            f"parameter points to {pointee}")
        if declared is not None and declared != ctypes.sizeof(ct):
            raise TypeError(f"{what}: ctypes {held} is {ctypes.sizeof(ct)} bytes, but "
                            f"the target declares {pointee} as {declared} bytes")
        if issubclass(ct, ctypes.Union) and inner is obj:
            # ctypes exports a Union's buffer as bytes ('B'), with no layout
            # the core could check: its address, the Union its owner
            return Address(ctypes.addressof(inner), owner=inner)
        return obj
    try:
        view = memoryview(inner)
    except TypeError:
        return obj              # not a buffer: the core says what it takes
    with view:
        fmt, itemsize = view.format or "B", view.itemsize
    structured = fmt.lstrip("@=<>!").startswith("T{")
    if structured and declared is not None:
        if itemsize != declared:
            raise TypeError(f"{what}: the array's items are {itemsize} bytes, but struct "
                            f"{name} is declared {declared} bytes: it would be read past "
                            "its end, or misread")
        return obj
    given = (f"a structured array, but numthunk knows no layout of {pointee}"
             if structured else f"a buffer of format {fmt!r}, which has no struct layout")
    ctypes_class = "Union" if pointee.startswith("union ") else "Structure"
    raise TypeError(f"{what}: {given}; declare the struct once, "
                    f"numthunk.Function(..., structs={{'{name}': dtype}}) (a NumPy dtype, a "
                    f"ctypes Structure or a cffi type), and bind a NumPy structured array of "
                    f"it; or bind a ctypes {ctypes_class} named {name} (an instance or an "
                    f"array), a cffi '{pointee} *', or numthunk.address(p)")


# ---------------------------------------------------------------- cffi


def cffi_pointer(thunk, ffi):
    """A cffi function pointer to the thunk's address that keeps the thunk
    alive as long as the cdata lives."""
    return _cffi.pointer(thunk, ffi, Signature(scipy_text(thunk.csig)))

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

ctypes and cffi are imported only when one of their objects shows up.
"""

import ctypes

__all__ = ["is_foreign", "resolve", "param_label", "cffi_api_pointer", "cffi_pointer",
           "struct_size", "declared_structs", "resolve_struct"]

_CTYPES_POINTERS = (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p)


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


def param_label(sig, i):
    """'argument 2 (x: const double *)', as the core writes it."""
    name = sig.names[i]
    ctype = sig.argtypes[i]
    return f"argument {i + 1} ({name}: {ctype})" if name else f"argument {i + 1} ({ctype})"


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
        from ._cython import _demangle
        d = _demangle(name)
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


def _kind_of_c(text):
    from ._signature import Signature
    try:
        return Signature(f"void ({text})")._describe()[1][0][0]
    except ValueError:
        return None      # a C type the core does not model (wchar_t, ...)


def _ctypes_pointee(obj):
    """The pointee of a ctypes pointer object."""
    if isinstance(obj, ctypes.c_void_p):
        return ("void", 1, None)
    if isinstance(obj, ctypes.c_char_p):
        return ("int8" if _kind_of_c("char") == "int8" else "uint8", 1, None)
    if isinstance(obj, ctypes.c_wchar_p):
        return (_wchar_kind(), 1, None)
    depth = 0
    t = type(obj)
    while isinstance(t, type) and issubclass(t, ctypes._Pointer):
        depth += 1
        t = t._type_
    return _ctypes_leaf(t, depth)


def _wchar_kind():
    # wchar_t: a 32-bit int on Linux and macOS, a 16-bit unsigned on Windows
    return "int32" if ctypes.sizeof(ctypes.c_wchar) == 4 else "uint16"


def _ctypes_leaf(t, depth):
    if t is ctypes.c_void_p:
        return ("void", depth + 1, None)
    if t is ctypes.c_char_p:
        return (_ctypes_leaf(ctypes.c_char, 0)[0], depth + 1, None)
    if t is ctypes.c_wchar_p:
        return (_wchar_kind(), depth + 1, None)
    if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)):
        return ("void", depth, t.__name__)
    from ._signature import ctypes_type_text
    try:
        kind = _kind_of_c(ctypes_type_text(t))
    except TypeError:
        kind = None
    return (kind or f"ctypes {getattr(t, '__name__', t)}", depth, None)


def _cffi_pointee(ct):
    """The pointee of a cffi pointer or array type."""
    depth = 1
    item = ct.item
    while item.kind == "pointer":
        depth += 1
        item = item.item
    if item.kind == "void":
        return ("void", depth, None)
    if item.kind in ("struct", "union"):
        return ("void", depth, _strip_struct(item.cname))
    if item.kind == "primitive":
        return (_kind_of_c(item.cname) or f"cffi {item.cname}", depth, None)
    return (f"cffi {item.cname}", depth, None)


def _c_name(kind):
    from ._signature import Signature
    try:
        return Signature(f"void ({kind})").argtypes[0]
    except ValueError:
        return kind


def _pointee_text(p):
    """What a pointer points to: 'double', 'struct pt', 'double *'."""
    base, depth, struct = p
    name = f"struct {struct}" if struct else _c_name(base)
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
    from ._api import Address

    param = _param_pointee(sig, i)
    if param is None:
        return None
    if type(obj).__module__ == "_cffi_backend":
        import _cffi_backend as backend
        ct = backend.typeof(obj)
        if ct.kind not in ("pointer", "array"):
            raise TypeError(f"{param_label(sig, i)}: expected a pointer, got cffi {ct.cname!r}")
        if ct.kind == "pointer" and ct.item.kind == "function":
            return None     # a function pointer: for function-pointer parameters
        given = _cffi_pointee(ct)
        value = int(backend.cast(backend.new_primitive_type("uintptr_t"), obj))
        what = f"a cffi {ct.cname!r}"
    elif isinstance(obj, _CTYPES_POINTERS):
        given = _ctypes_pointee(obj)
        value = ctypes.cast(obj, ctypes.c_void_p).value or 0
        what = f"a ctypes {type(obj).__name__}"
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
                        f"the parameter to {_pointee_text(param)}; pass "
                        "numthunk.address(...) to bind a pointer value as it is")
    return Address(value, owner=obj)


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
    if type(layout).__module__ == "_cffi_backend" and type(layout).__name__ in ("CType",
                                                                                "__CType"):
        import _cffi_backend
        return _cffi_backend.sizeof(layout)
    raise TypeError(f"{what}: expected a struct layout (a NumPy dtype, a ctypes Structure "
                    f"class, a cffi struct type or a size in bytes), got "
                    f"{type(layout).__name__} {layout!r}")


def declared_structs(target):
    """{struct name: size} for the structs a ctypes or cffi function's
    parameters point to, as its own types declare them; None if none."""
    found = {}
    if isinstance(target, ctypes._CFuncPtr):
        for t in target.argtypes or getattr(type(target), "_argtypes_", None) or ():
            while isinstance(t, type) and issubclass(t, ctypes._Pointer):
                t = t._type_
            if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)):
                found[t.__name__] = ctypes.sizeof(t)
    elif type(target).__module__ == "_cffi_backend":
        import _cffi_backend
        ct = _cffi_backend.typeof(target)
        if ct.kind == "pointer":
            ct = ct.item
        for a in getattr(ct, "args", ()) if ct.kind == "function" else ():
            while a.kind in ("pointer", "array"):
                a = a.item
            if a.kind in ("struct", "union"):
                try:
                    found[_strip_struct(a.cname)] = _cffi_backend.sizeof(a)
                except Exception:      # an opaque struct: no size to check
                    pass
    return found or None


def _ctypes_struct_of(obj):
    """The Structure or Union class of a ctypes instance or array of them."""
    t = type(obj)
    while isinstance(t, type) and issubclass(t, ctypes.Array):
        t = t._type_
    if isinstance(t, type) and issubclass(t, (ctypes.Structure, ctypes.Union)):
        return t
    return None


def resolve_struct(obj, sig, i, structs):
    """A buffer (or ``strided(buffer)``) bound to a ``struct S *`` parameter:
    obj itself after the checks, or an ``address`` for a ctypes Union (whose
    buffer carries no layout). ``structs``: the target's declarations."""
    from ._api import Address
    param = _param_pointee(sig, i)
    if param is None or param[2] is None or param[1] != 1:
        return obj
    name = param[2]
    what = param_label(sig, i)
    declared = (structs or {}).get(name)
    inner = obj.obj if type(obj).__name__ == "Strided" else obj
    ct = _ctypes_struct_of(inner)
    if ct is not None:
        if ct.__name__ != name:
            raise TypeError(f"{what}: a ctypes {type(inner).__name__} holds struct "
                            f"{ct.__name__}, the parameter points to struct {name}")
        if declared is not None and declared != ctypes.sizeof(ct):
            raise TypeError(f"{what}: ctypes struct {name} is {ctypes.sizeof(ct)} bytes, but "
                            f"the target declares struct {name} as {declared} bytes")
        if issubclass(ct, ctypes.Union) and inner is obj:
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
    given = ("a structured array, but numthunk knows no layout of struct " + name
             if structured else f"a buffer of format {fmt!r}, which has no struct layout")
    raise TypeError(f"{what}: {given}; declare the struct once, "
                    f"numthunk.Function(..., structs={{'{name}': dtype}}) (a NumPy dtype, a "
                    f"ctypes Structure or a cffi type), and bind a NumPy structured array of "
                    f"it; or bind a ctypes Structure named {name} (an instance or an array), a "
                    f"cffi '{_pointee_text(param)} *', or numthunk.address(p)")


# ---------------------------------------------------------------- cffi


def cffi_api_pointer(obj):
    """For ``lib.f`` of a compiled (API-mode) cffi module, a
    builtin_function_or_method whose ``__self__`` is the module's ``lib``:
    the module's ``ffi.addressof(lib, name)``, a function pointer cdata of
    the declared type. None for anything else."""
    lib = getattr(obj, "__self__", None)
    if type(lib).__module__ != "_cffi_backend" or type(lib).__name__ != "Lib":
        return None
    import sys
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    ffi = getattr(module, "ffi", None)
    if ffi is None:
        raise TypeError(f"cffi function {obj.__name__!r}: its module "
                        f"{getattr(obj, '__module__', '?')!r} has no 'ffi' to take its "
                        "address with; pass module.ffi.addressof(module.lib, name)")
    return ffi.addressof(lib, obj.__name__)


def _cffi_type_of(text):
    """The text cffi reads for the core's C text ("_Bool *" for "bool *")."""
    from ._signature import CFFI_OF_C

    for core, cffi_name in CFFI_OF_C.items():
        if text == core or text.startswith(core + " ") or text.startswith("const " + core):
            return text.replace(core, cffi_name, 1)
    return text


def cffi_pointer(thunk, ffi):
    """A cffi function pointer to the thunk's address that keeps the thunk
    alive as long as the cdata lives (ffi.gc ties the thunk to it)."""
    from ._signature import scipy_text, Signature

    sig = Signature(scipy_text(thunk.csig))
    if "__Pyx_memviewslice" in str(sig):
        raise TypeError(f"thunk.cffi(): the signature {thunk.csig} has a Cython memoryview "
                        "parameter, which cffi cannot declare")
    args = ", ".join(_cffi_type_of(a) for a in sig.argtypes) or "void"
    ctype = ffi.typeof(f"{_cffi_type_of(sig.restype)}(*)({args})")
    ptr = ffi.cast(ctype, thunk.address)
    # the destructor closes over the thunk: it lives as long as the cdata
    return ffi.gc(ptr, lambda _cdata, _owner=thunk: None)

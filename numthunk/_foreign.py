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

__all__ = ["is_foreign", "resolve", "param_label", "cffi_api_pointer", "cffi_pointer"]

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


# C text cffi reads for the core's names of the same types
_CFFI_NAMES = {"bool": "_Bool", "float complex": "float _Complex",
               "double complex": "double _Complex"}


def _cffi_type_of(text):
    for core, cffi_name in _CFFI_NAMES.items():
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

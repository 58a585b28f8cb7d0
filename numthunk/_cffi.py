"""cffi adapter: C text of cffi types and functions, the names cffi reads
for the core's C text, what cffi pointers point to, the structs a cffi
function declares, API-mode ``lib.f`` functions, and cffi pointers to
thunks.

Below numthunk._signature (which reads the text this module writes): it
imports nothing of the package but the core. cffi's backend is imported
only when one of its objects shows up.
"""

import weakref

from . import _core

__all__ = ["CFFI_OF_C", "type_text", "signature_text", "cffi_text", "is_cffi", "is_cdata",
           "is_function", "address_of", "function_address", "cname", "is_api_function",
           "api_pointer", "pointer", "pointee", "struct_size", "declared_structs"]


# The C text cffi reads for the core's where they differ (_Bool, float
# _Complex), from the kind table, and back: with the names cffi 2.0 prints
# for the complex types.
CFFI_OF_C = {k.c: k.cffi for k in _core.kinds.values() if k.cffi != k.c}
_C_OF_CFFI = {cffi_name: c for c, cffi_name in CFFI_OF_C.items()}
_C_OF_CFFI.update({"_cffi_float_complex_t": "float complex",
                   "_cffi_double_complex_t": "double complex"})


def is_cffi(obj):
    """Whether obj is an object of cffi's backend (cdata, ctype, ...)."""
    return type(obj).__module__ == "_cffi_backend"


# ---------------------------------------------------------------- C text


def type_text(ct, typedefs=None):
    """C text of a cffi type; a typedef'd struct name it meets is added to
    ``typedefs`` (as ``struct name``)."""
    kind = ct.kind
    if kind == "void":
        return "void"
    if kind == "primitive":
        return _C_OF_CFFI.get(ct.cname, ct.cname)
    if kind in ("pointer", "array"):
        item = ct.item
        if item.kind == "function":
            return _fn_text(item, pointer=True, typedefs=typedefs)
        if item.kind in ("struct", "union"):
            # an opaque struct pointer; a typedef'd name ("S") is declared
            # as a struct so that it prints back as cffi wrote it
            if not item.cname.startswith(("struct ", "union ")) and typedefs is not None:
                typedefs[item.cname] = f"{item.kind} {item.cname}"
            return item.cname + " *"
        return type_text(item, typedefs) + " *"
    if kind == "function":
        return _fn_text(ct, pointer=True, typedefs=typedefs)
    raise TypeError(f"cffi type {ct.cname!r} has no C equivalent numthunk supports")


def _fn_text(ct, pointer=False, typedefs=None):
    # cffi marks a function with complex parameters or result as variadic
    # (its own calls go through libffi's variadic path); its type text shows
    # whether there is a real '...'.
    if ct.ellipsis and "..." in ct.cname:
        raise ValueError(f"variadic functions are not supported: {ct.cname}")
    ret = type_text(ct.result, typedefs)
    args = ", ".join(type_text(a, typedefs) for a in ct.args) or "void"
    return f"{ret} (*)({args})" if pointer else f"{ret} ({args})"


def signature_text(obj):
    """(C text, typedefs or None) of a cffi function type, function or
    function pointer."""
    import _cffi_backend

    ct = obj if type(obj).__name__ in ("CType", "__CType") else _cffi_backend.typeof(obj)
    if ct.kind == "pointer" and ct.item.kind == "function":
        ct = ct.item
    if ct.kind != "function":
        raise TypeError(f"cffi type {ct.cname!r} is not a function type")
    typedefs = {}
    return _fn_text(ct, typedefs=typedefs), typedefs or None


def cffi_text(text):
    """The text cffi reads for the core's C text ("_Bool *" for "bool *")."""
    for core, cffi_name in CFFI_OF_C.items():
        if text == core or text.startswith(core + " ") or text.startswith("const " + core):
            return text.replace(core, cffi_name, 1)
    return text


# ---------------------------------------------------------------- targets


def is_cdata(obj):
    """Whether obj is a cffi cdata: a C value, pointer or function (not a
    type, an ffi or a lib)."""
    if type(obj).__module__ != "_cffi_backend":
        return False
    import _cffi_backend
    return isinstance(obj, _cffi_backend._CDataBase)


def is_function(v):
    """Whether v is a cffi function or function pointer."""
    if not is_cdata(v):
        return False
    import _cffi_backend
    ct = _cffi_backend.typeof(v)
    return ct.kind == "function" or (ct.kind == "pointer" and ct.item.kind == "function")


def address_of(obj):
    """The address a cffi pointer (or function) holds."""
    import _cffi_backend
    return int(_cffi_backend.cast(_cffi_backend.new_primitive_type("uintptr_t"), obj))


def function_address(target):
    """The address of a cffi function or function pointer; TypeError for
    any other cdata."""
    if not is_function(target):
        raise TypeError(f"cffi object of type {cname(target)!r} is not a function")
    return address_of(target)


def cname(obj):
    """The C type of a cdata, as cffi spells it."""
    import _cffi_backend
    return _cffi_backend.typeof(obj).cname


def is_api_function(obj):
    """Whether obj is ``lib.f`` of a compiled (API-mode) cffi module: a
    builtin_function_or_method whose ``__self__`` is the module's ``lib``."""
    lib = getattr(obj, "__self__", None)
    return type(lib).__module__ == "_cffi_backend" and type(lib).__name__ == "Lib"


def api_pointer(obj):
    """For ``lib.f`` of a compiled (API-mode) cffi module, the module's
    ``ffi.addressof(lib, name)``: a function pointer cdata of the declared
    type. None for anything else."""
    if not is_api_function(obj):
        return None
    lib = obj.__self__
    import sys
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    ffi = getattr(module, "ffi", None)
    if ffi is None:
        raise TypeError(f"cffi function {obj.__name__!r}: its module "
                        f"{getattr(obj, '__module__', '?')!r} has no 'ffi' to take its "
                        "address with; pass module.ffi.addressof(module.lib, name)")
    return ffi.addressof(lib, obj.__name__)


def pointer(thunk, ffi, sig):
    """A cffi function pointer to the thunk's address, of ``sig`` (the
    thunk's signature as SciPy spells it), that keeps the thunk alive as
    long as the cdata lives (ffi.gc ties the thunk to it)."""
    if "__Pyx_memviewslice" in str(sig):
        raise TypeError(f"thunk.cffi(): the signature {thunk.csig} has a Cython memoryview "
                        "parameter, which cffi cannot declare")
    args = ", ".join(cffi_text(a) for a in sig.argtypes) or "void"
    ctype = ffi.typeof(f"{cffi_text(sig.restype)}(*)({args})")
    ptr = ffi.cast(ctype, thunk.address)
    # the destructor closes over the thunk: it lives as long as the cdata
    cdata = ffi.gc(ptr, lambda _cdata, _owner=thunk: None)
    # and the cdata is known as the thunk's (owner_of), by identity: cdata
    # compare and hash by the address they hold, which a new thunk may
    # hold once this one is released and its address reused
    key = id(cdata)
    _owners[key] = (weakref.ref(cdata, lambda _r, key=key: _owners.pop(key, None)), thunk)
    return cdata


# id(cdata) -> (weak reference to the cdata, its thunk), for thunk.cffi(ffi)
_owners = {}


def owner_of(cdata):
    """The thunk a cdata was made for by ``thunk.cffi(ffi)``, or None."""
    entry = _owners.get(id(cdata))
    if entry is None or entry[0]() is not cdata:
        return None
    return entry[1]


# ---------------------------------------------------------------- pointers


def _kind_of_c(text):
    try:
        return _core.Signature(f"void ({text})")._describe()[1][0][0]
    except ValueError:
        return None


def pointee(obj, strip_struct):
    """(pointee, address, what) of a cffi pointer or array; None for a
    function pointer (for function-pointer parameters). ``strip_struct``
    gives a struct's own name. TypeError for cdata that is no pointer."""
    import _cffi_backend
    ct = _cffi_backend.typeof(obj)
    if ct.kind not in ("pointer", "array"):
        raise TypeError(f"expected a pointer, got cffi {ct.cname!r}")
    if ct.kind == "pointer" and ct.item.kind == "function":
        return None
    depth = 1
    item = ct.item
    while item.kind == "pointer":
        depth += 1
        item = item.item
    if item.kind == "void":
        given = ("void", depth, None)
    elif item.kind in ("struct", "union"):
        given = ("void", depth, strip_struct(item.cname))
    elif item.kind == "primitive":
        given = (_kind_of_c(item.cname) or f"cffi {item.cname}", depth, None)
    else:
        given = (f"cffi {item.cname}", depth, None)
    return given, address_of(obj), f"a cffi {ct.cname!r}"


# ---------------------------------------------------------------- structs


def struct_size(layout):
    """The size of a cffi struct type, or None when layout is no cffi type."""
    if is_cffi(layout) and type(layout).__name__ in ("CType", "__CType"):
        import _cffi_backend
        return _cffi_backend.sizeof(layout)
    return None


def declared_structs(target, found, strip_struct):
    """Add {struct name: size} for the structs a cffi function's parameters
    point to, as its own types declare them."""
    import _cffi_backend
    ct = _cffi_backend.typeof(target)
    if ct.kind == "pointer":
        ct = ct.item
    for a in getattr(ct, "args", ()) if ct.kind == "function" else ():
        while a.kind in ("pointer", "array"):
            a = a.item
        if a.kind in ("struct", "union"):
            try:
                found[strip_struct(a.cname)] = _cffi_backend.sizeof(a)
            except Exception:      # an opaque struct: no size to check
                pass

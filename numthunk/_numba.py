"""Numba adapter: signatures both ways, @cfunc targets, and thunks as
first-class functions in nopython code.

A Thunk or a Function is a Numba value of numthunk's own type,
``ThunkType`` (numthunk._numba_ext): called like a function, and held by
reference wherever Numba keeps it. It also follows Numba's Wrapper Address
Protocol (``__wrapper_address__()``, ``signature()``), so it converts to
Numba's ``FunctionType`` where code declares one. Two things make passing
a thunk fast and robust:

- ``_numba_type_`` returns a type cached on the thunk: the type of its C
  signature, or for a thunk over a Numba ``@cfunc`` the type that inlines
  that target (:func:`inline_type`, one per target and binding layout), so
  passing a thunk into an ``@njit`` function does not rebuild its type on
  every call (Numba reads ``_numba_type_`` before anything else);
- the first time a thunk meets Numba, :func:`register` imports
  numthunk._numba_ext (the type, its lowerings and Numba's own
  first-class-function support, which Numba loads only on first use) and
  registers the classes, so a thunk may be the very first thing Numba
  compiles.

This module imports Numba only inside functions: ``import numthunk`` never
imports Numba. It imports nothing of the package but the core: numthunk._api
names the classes to register (set_classes) and numthunk._signature asks it
for C text, so there is no import cycle.
"""

import re
import threading

from . import _core

__all__ = ["type_to_c", "signature_to_c", "type_from_desc",
           "signature_from_c", "function_type", "captured", "register", "set_classes"]

# From the core's kind table: Numba's name for a kind (str(t) of a Numba
# scalar type is that name, "bool" for boolean) and its C text.
_SCALAR_C = {k.numba: k.c for k in _core.kinds.values()}
_SCALAR_C.update({"bool": "bool", "none": "void"})
# complex64 is refused as a Numba value (see type_from_desc)
_KIND_NUMBA = {k.name: k.numba for k in _core.kinds.values() if k.name != "complex64"}


# ---------------------------------------------------------------- Numba -> C


def type_to_c(t, where="type"):
    """C text for a Numba type: float64 -> 'double', CPointer(intc) -> 'int *'."""
    from numba.core import types

    if isinstance(t, types.CPointer):
        return type_to_c(t.dtype, where) + " *"
    if isinstance(t, types.RawPointer):
        return "void *"
    if isinstance(t, types.FunctionType):
        sig = t.signature
        # no parameters: "()", which the core reads as "(void)"
        args = ", ".join(type_to_c(a, where) for a in sig.args)
        return f"{type_to_c(sig.return_type, where)} (*)({args})"
    if isinstance(t, types.NoneType):
        return "void"
    if isinstance(t, (types.Boolean, types.Integer, types.Float, types.Complex)):
        text = _SCALAR_C.get(str(t))
        if text is not None:
            return text
    if isinstance(t, types.Array):
        raise TypeError(f"{where}: Numba type {str(t)!r} is an array; in a C signature an "
                        "array is CPointer(dtype) plus its sizes (bind the array itself: "
                        "numthunk checks its dtype)")
    raise TypeError(f"{where}: Numba type {str(t)!r} has no C equivalent numthunk supports")


def signature_to_c(sig):
    """C text for a Numba ``Signature`` such as ``float64(CPointer(float64), intc)``."""
    if sig.return_type is None:
        raise ValueError(f"Numba signature {sig} has no return type: a C signature needs one "
                         "(write e.g. float64(float64) or void(float64))")
    ret = type_to_c(sig.return_type, "return type")
    args = [type_to_c(a, f"argument {i + 1}") for i, a in enumerate(sig.args)]
    return f"{ret} ({', '.join(args)})"           # "()": no parameters, as "(void)"


# Numba's signature text ("float64(CPointer(float64), intc)", the form
# str() gives, "(float64*, int32) -> float64", FunctionType[...]) is read
# as C by _numba_sig.py, for the core's C parser: no Numba needed.


# ---------------------------------------------------------------- C -> Numba


def type_from_desc(desc, where=None):
    """The Numba type of one entry of ``Signature._describe()``; ``where``
    starts a refusal's message (a parameter's label, "argument 1 (z: float
    complex)"; by default the type's spelling).

    C function pointers become ``voidptr``: a Numba ``FunctionType`` value is
    a three-pointer struct, not a C function pointer, so declaring one where
    C takes a pointer would shift every later argument."""
    from numba.core import types

    kind, base, depth, _const, spelling, _fn = desc
    if where is None:
        where = f"type ({spelling})"
    if kind == "void":
        return types.void
    if kind in _KIND_NUMBA:
        return getattr(types, _KIND_NUMBA[kind])
    if kind == "pointer":
        if base == "void":
            t = types.voidptr
            depth -= 1
        elif base in _KIND_NUMBA or base == "complex64":
            t = types.complex64 if base == "complex64" else getattr(types, _KIND_NUMBA[base])
        else:
            return types.voidptr
        for _ in range(depth):
            t = types.CPointer(t)
        return t
    if kind == "function pointer":
        return types.voidptr
    if kind == "complex64":
        raise TypeError(f"{where}: Numba passes a complex64 as two separate "
                        "floats, C passes 'float complex' packed in one register; bind it, "
                        "or use a pointer")
    raise TypeError(f"{where}: a C {kind} has no Numba equivalent; bind it so "
                    "that the thunk takes only scalars and pointers")


def signature_from_c(sig):
    """The Numba signature of a numthunk Signature."""
    from numba.core import typing

    ret, args = sig._describe()
    return typing.signature(
        type_from_desc(ret, f"return type ({ret[4]})"),
        *[type_from_desc(a, sig._label(i)) for i, a in enumerate(args)])


# ---------------------------------------------------------------- function values


function_types = {}         # numthunk Signature -> ThunkType
_lock = threading.Lock()
_registered = False


def function_type(csig):
    """numthunk's Numba type of a function with C signature ``csig``
    (``numthunk._numba_ext.ThunkType``), cached per signature (this is what
    ``_numba_type_`` returns for thunks over C code, and the uniform type
    every thunk of the signature converts to)."""
    ft = function_types.get(csig)
    if ft is not None:
        return ft
    register()
    from ._numba_ext import ThunkType

    try:
        nbsig = signature_from_c(csig)
    except TypeError as exc:
        raise TypeError(f"a function '{csig}' cannot be a Numba function value: {exc}") \
            from None
    ft = ThunkType(nbsig, _function_pointers(csig))
    with _lock:
        return function_types.setdefault(csig, ft)


def _function_pointers(csig):
    """(index, what a function passed there must be) for each C
    function-pointer parameter of csig (ThunkType.function's text)."""
    out = []
    for i, desc in enumerate(csig._describe()[1]):
        if desc[0] == "function pointer":
            try:
                text = function_type(desc[5]).function
            except TypeError:
                text = f"C {desc[5]}"       # no Numba value has it: never matches
            out.append((i, text))
    return tuple(out)


# ---------------------------------------------------------------- inlined targets


class _InlineTarget:
    """What numthunk knows of a @cfunc whose code a consumer may link and
    inline: its fingerprint (a hash of its compiled code, the same in
    every process that compiles the same code), its Numba signature, its C
    entry's symbol and library, and the types made for it (per binding
    layout). Kept on the @cfunc object."""

    __slots__ = ("fingerprint", "sig", "address", "library", "wrapper", "name", "types")


# Numba gives every compiled function a unique id, which its symbol
# carries as an ABI tag ("B2v17"): the only part of a function's code that
# differs between two processes compiling the same source.
_UID_TAG = re.compile(r"B\d+v\d+")
_SYMBOL = re.compile(r"@(?:\"[^\"]*\"|[-\w.$]+)")


def _fingerprint(module, wrapper, nbsig):
    import hashlib

    # the module's header names it (the function's name; Numba's cache
    # drops it): only the code counts
    text = "\n".join(line for line in str(module).splitlines()
                     if not line.startswith("; ModuleID"))
    text = _SYMBOL.sub(lambda m: _UID_TAG.sub("", m.group(0)), text)
    h = hashlib.sha256()
    for part in (str(nbsig), _UID_TAG.sub("", wrapper), text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _as_cached(module):
    """The module as Numba's cache gives it back: Numba keeps a library's
    code for linking as bitcode, and LLVM's reading of bitcode drops or
    renumbers attributes (``mustprogress`` on the declarations of
    intrinsics such as ``llvm.exp.f64``): read through bitcode once, the
    text is the same whether the target was compiled here or loaded."""
    import llvmlite.binding as llvm

    return llvm.parse_bitcode(module.as_bitcode())


def _inlinable(t):
    """A Numba type whose value the thunk's context holds the way Numba
    lays it out (scalars and pointers; 8-byte cells, little-endian)."""
    from numba.core import types

    return isinstance(t, (types.Boolean, types.Integer, types.Float, types.Complex,
                          types.CPointer, types.RawPointer))


# the kind the core stores for a Numba type (see numthunk.h: nt_kind)
def _kind_of(t):
    from numba.core import types

    if isinstance(t, (types.CPointer, types.RawPointer)):
        return "pointer"
    return "bool" if isinstance(t, types.Boolean) else str(t)


def inline_target(cfunc):
    """The _InlineTarget of a Numba @cfunc, or None when its code cannot be
    linked into a consumer: no IR Numba can link, code holding this
    process's addresses (ctypes or cffi functions, thunks or large arrays
    compiled in: a cached consumer would keep them), or parameters numthunk
    cannot lay out as Numba does."""
    info = getattr(cfunc, "_numthunk_inline", None)
    if info is not None:
        return info or None
    info = _make_inline_target(cfunc)
    try:
        cfunc._numthunk_inline = info or False
    except AttributeError:
        pass
    return info


def _make_inline_target(cfunc):
    import sys

    from numba.core import types

    nbsig = cfunc._sig
    if sys.byteorder != "little" or not all(_inlinable(a) for a in nbsig.args) \
            or not (nbsig.return_type == types.void or _inlinable(nbsig.return_type)):
        return None
    library = getattr(cfunc, "_library", None)
    wrapper = getattr(cfunc, "_wrapper_name", None)
    if library is None or wrapper is None or not wrapper.startswith("cfunc."):
        return None
    try:
        if library.has_dynamic_globals:
            return None
        # what a consumer links: the target's code (also when Numba loaded
        # it from its cache), which the fingerprint hashes
        module = library._get_module_for_linking()
        if module.get_function(wrapper[len("cfunc."):]).is_declaration:
            return None
        fingerprint = _fingerprint(_as_cached(module), wrapper, nbsig)
    except Exception:                           # no IR to link or inspect
        return None
    info = _InlineTarget()
    info.fingerprint = fingerprint
    info.sig = nbsig
    info.address = cfunc.address
    info.library = library
    info.wrapper = wrapper
    info.name = getattr(cfunc, "__qualname__", None) or getattr(cfunc, "__name__", "cfunc")
    info.types = {}
    return info


def inline_type(thunk, cfunc, opaque):
    """The Numba type of ``thunk``, whose target is the @cfunc ``cfunc`` (with
    its own signature): an InlineThunkType (calls inline the target), or
    None where it must stay ``opaque`` (calls through its address)."""
    info = inline_target(cfunc)
    if info is None or thunk.target_address != info.address:
        return None
    layout = thunk._inline_layout()
    t = info.types.get(layout)
    if t is None:
        t = info.types[layout] = _make_inline_type(info, layout, opaque) or False
    return t or None


def _make_inline_type(info, layout, opaque):
    from ._numba_ext import InlineThunkType

    tsig, fwd = info.sig, []
    for t, (src, kind, _where) in zip(tsig.args, layout[2]):
        if kind != _kind_of(t):
            return None                         # not laid out as Numba's type
        if src == "arg":
            fwd.append(t)
    if tuple(fwd) != tuple(opaque.signature.args) \
            or tsig.return_type != opaque.signature.return_type:
        return None
    t = InlineThunkType(opaque, info.fingerprint, info.name, tsig, layout)
    if getattr(t, "_target", None) is None:
        # also when an equal type read from a cache index came first
        t._target = (info.library, info.wrapper)
    return t


def captured(cfunc):
    """The Thunks and Functions compiled as constants (globals, closure
    variables) into a Numba ``@cfunc``'s code or into the code of the
    functions it calls, in the order met (see numthunk._numba_ext)."""
    if not _registered:
        return ()           # no thunk has met Numba: none was compiled in
    from ._numba_ext import captured_by
    return captured_by(getattr(cfunc, "_library", None))


class NoNumbaType(AttributeError):
    """``_numba_type_`` of a function whose signature has no Numba
    equivalent. An AttributeError, since Numba's dispatcher probes the
    attribute with hasattr (numthunk._api._numba_type_of); Numba's typeof
    then raises the TypeError that says why. Any other error in making a
    type, an AttributeError included, is a fault and is raised as it is."""


def _typeof_numthunk(val, c):
    try:
        return val._numba_type_
    except NoNumbaType:
        return function_type(val.csig)     # raises, saying why


_classes = ()


def set_classes(*classes):
    """The classes whose instances are Numba function values (numthunk._api
    names Thunk and Function at import: this module never imports it)."""
    global _classes
    _classes = classes


def register():
    """Make Thunk and Function Numba function values (done once, lazily)."""
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        # _numba_ext defines our type and its lowerings; it also imports
        # numba.experimental.function_type (Numba's FunctionType model,
        # boxing and unboxing, which Numba itself loads only on first use of
        # a function value: numba issues 8282, 9680, "non-precise type
        # pyobject"), for thunks that meet a @cfunc or a FunctionType.
        from numba.core.registry import cpu_target
        from numba.core.types import WrapperAddressProtocol
        from numba.core.typing.typeof import typeof_impl

        from . import _numba_ext  # noqa: F401

        # This may run in the middle of a compilation (typing a global
        # thunk): the CPU target reads new lowerings (our constants, casts,
        # calls) now, as its lookup of a constant never refreshes, and the
        # typing context our templates (tuples of thunks).
        cpu_target.target_context.refresh()
        cpu_target.typing_context.refresh()

        for cls in _classes:
            # Numba's FunctionType (a thunk passed where a signature
            # declares one) reads the address through this protocol.
            WrapperAddressProtocol.register(cls)
            # More specific than the WAP entry, which would rebuild the
            # FunctionType from signature() on every call.
            typeof_impl.register(cls)(_typeof_numthunk)
        _registered = True

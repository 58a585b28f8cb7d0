"""Numba adapter: signatures both ways and @cfunc targets.

Imported only when a Numba object shows up, so ``import numthunk`` never
imports Numba.
"""

_SCALAR_C = {
    "boolean": "bool", "bool": "bool",
    "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
    "int32": "int", "uint32": "unsigned int", "int64": "int64_t", "uint64": "uint64_t",
    "float32": "float", "float64": "double",
    "complex64": "float complex", "complex128": "double complex",
    "none": "void", "void": "void",
}

_KIND_NUMBA = {
    "bool": "boolean", "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
    "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "float32": "float32", "float64": "float64", "complex64": "complex64",
    "complex128": "complex128",
}


def type_to_c(t, where="type"):
    """C text for a Numba type: float64 -> 'double', CPointer(intc) -> 'int *'."""
    from numba.core import types

    if isinstance(t, types.CPointer):
        return type_to_c(t.dtype, where) + " *"
    if isinstance(t, types.RawPointer) or t == types.voidptr:
        return "void *"
    if isinstance(t, types.FunctionType):
        sig = t.signature
        args = ", ".join(type_to_c(a, where) for a in sig.args) or "void"
        return f"{type_to_c(sig.return_type, where)} (*)({args})"
    name = str(t)
    if name in _SCALAR_C:
        return _SCALAR_C[name]
    raise TypeError(f"{where}: Numba type {name!r} has no C equivalent numthunk supports "
                    "(arrays cross as CPointer(dtype) plus their sizes)")


def signature_to_c(sig):
    """C text for a Numba ``Signature`` such as ``float64(CPointer(float64), intc)``."""
    ret = type_to_c(sig.return_type, "return type")
    args = [type_to_c(a, f"argument {i + 1}") for i, a in enumerate(sig.args)]
    return f"{ret} ({', '.join(args) or 'void'})"


def string_to_c(text):
    """C text for Numba's string form of a signature ('float64(CPointer(float64), intc)'
    or '(float64*, int32) -> float64'); raises if Numba cannot read it."""
    from numba.core import sigutils

    sig = sigutils._parse_signature_string(text)
    if isinstance(sig, tuple):
        raise ValueError(f"{text!r} has no return type")
    return signature_to_c(sig)


def cfunc_signature(cfunc):
    """The numthunk Signature of a Numba @cfunc object."""
    from ._signature import Signature

    return Signature(signature_to_c(cfunc._sig))


def type_from_desc(desc):
    from numba.core import types

    kind, base, depth, _const, _spelling, fn = desc
    if kind == "void":
        return types.void
    if kind in _KIND_NUMBA:
        return getattr(types, _KIND_NUMBA[kind])
    if kind == "pointer":
        if base == "void":
            t = types.voidptr
            depth -= 1
        else:
            t = getattr(types, _KIND_NUMBA[base])
        for _ in range(depth):
            t = types.CPointer(t)
        return t
    if kind == "function pointer":
        return types.FunctionType(signature_from_c(fn)) if fn is not None else types.voidptr
    raise TypeError(f"C type {kind!r} has no Numba equivalent")


def signature_from_c(sig):
    """The Numba signature of a numthunk Signature."""
    from numba.core import typing

    ret, args = sig._describe()
    return typing.signature(type_from_desc(ret), *[type_from_desc(a) for a in args])

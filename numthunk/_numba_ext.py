"""Numba extension: a thunk (or Function) as a Numba value that holds it.

``ThunkType`` is numthunk's own Numba type of a C function value of one
signature. Its data model is the call address, the Python object and an
NRT meminfo that owns a reference to that object, made at unboxing by
``NRT_meminfo_new_from_pyobject`` (the meminfo's destructor drops the
reference under the GIL), as Numba holds a NumPy Generator. So wherever
Numba keeps a value (``typed.List``, ``typed.Dict``, tuples, jitclass and
structref fields, a value returned from ``@njit``), Numba's reference
counting keeps the thunk alive, and boxing gives back the same object.

Calls are direct calls through the address (no check, no indirection).
Where a ``numba.types.FunctionType`` of the same signature is wanted (a
thunk and a ``@cfunc`` in one ``if``/``else``, an explicit signature), a
thunk converts to it; that value, like every Numba function value, holds
nothing.

A thunk compiled in as a constant (a global or closure variable) is held
for ever (the machine code holding its address is never freed) and is
recorded against the code library being compiled, so numthunk can tell
which thunks a ``@cfunc``'s code uses (:func:`captured_by`).

Imported by ``numthunk._numba.register()`` only (and by pickle, when a
cached ``@njit(cache=True)`` consumer is loaded): it imports Numba.
"""

import threading

from llvmlite import ir
from numba.core import cgutils, errors, types, typing
from numba.core.imputils import lower_builtin, lower_cast, lower_constant
from numba.core.typeconv import Conversion
from numba.extending import NativeValue, box, models, register_model, unbox
import numba.experimental.function_type  # noqa: F401  (FunctionType's model, for the cast)


class ThunkType(types.Callable):
    """A C function at a fixed address with a known signature, held by
    reference: a numthunk Thunk or Function in nopython code. One type per
    signature, so new thunks do not recompile their consumers."""

    def __init__(self, signature):
        self.signature = signature
        self.nargs = len(signature.args)
        super().__init__(name=f"numthunk.Thunk[{signature}]")

    def get_call_type(self, context, args, kws):
        # A call of a thunk converts its arguments as a call of a C function
        # does in Numba (ctypes/cffi functions, @cfunc): any implicit
        # conversion Numba knows, unsafe ones included (int64 -> int32,
        # int64 -> float64); and a contiguous array of dtype T where the
        # thunk takes T * passes its data pointer (lower_cast below).
        if kws:
            raise errors.TypingError(f"{self}: a C function takes no keyword arguments")
        sig = self.signature
        if len(args) != self.nargs:
            raise errors.TypingError(f"{self} takes {self.nargs} argument(s), "
                                     f"got {len(args)}")
        for i, (atype, want) in enumerate(zip(args, sig.args)):
            atype = types.unliteral(atype)
            if _array_to_pointer(atype, want):
                continue
            if context.can_convert(fromty=atype, toty=want) is None:
                raise errors.TypingError(
                    f"argument {i + 1}: cannot pass {atype} as {want}"
                    + (" (an array must be C- or F-contiguous and of the pointer's dtype)"
                       if isinstance(atype, types.Array) else ""))
        # the receiver: lowering gets the thunk's value first (_call below)
        return typing.Signature(sig.return_type, sig.args, recvr=self)

    def get_call_signatures(self):
        return [self.signature], False

    def get_impl_key(self, sig):
        return type(self)

    def can_convert_to(self, typingctx, other):
        if type(other) is types.FunctionType and other.signature == self.signature:
            return Conversion.safe
        return None

    def unify(self, typingctx, other):
        # A thunk and a Numba function value of the same signature (a
        # @cfunc, another protocol object) meet as Numba's FunctionType.
        if type(other) is types.FunctionType and other.signature == self.signature:
            return other
        return None


class ThunkFunctionType(types.FunctionType):
    """The type numthunk gave thunks before ``ThunkType`` (a non-owning
    FunctionType). Kept so that an index of Numba's cache written then
    still unpickles: its entries match no value now and are recompiled."""


def _array_to_pointer(atype, want):
    return (isinstance(atype, types.Array) and isinstance(want, types.CPointer)
            and atype.dtype == want.dtype and atype.layout in ("C", "F"))


@register_model(ThunkType)
class ThunkModel(models.StructModel):
    """(address, the Thunk or Function object, the meminfo holding it).
    The meminfo is NULL for a constant: compiled-in thunks are held for
    ever (_hold)."""

    def __init__(self, dmm, fe_type):
        members = [
            ("addr", types.voidptr),
            ("parent", types.voidptr),
            ("meminfo", types.MemInfoPointer(types.voidptr)),
        ]
        super().__init__(dmm, fe_type, members)


# ---------------------------------------------------------------- calls


@lower_builtin(ThunkType, ThunkType, types.VarArg(types.Any))
def _call(context, builder, sig, args):
    # A direct call through the address, nothing else on the path.
    fnty = sig.args[0]
    value = cgutils.create_struct_proxy(fnty)(context, builder, value=args[0])
    nbsig = fnty.signature
    llret = context.get_value_type(nbsig.return_type)
    llargs = [context.get_value_type(a) for a in nbsig.args]
    fptr = builder.bitcast(value.addr, ir.FunctionType(llret, llargs).as_pointer())
    # Narrow integers and bools are extended to 32 bits, as C callers do
    # (x86-64 and AArch64 callees built by Clang rely on it); Numba's own
    # calls through function values leave the upper bits as they are.
    ext = {i: (_extension(a),) for i, a in enumerate(nbsig.args) if _extension(a)}
    res = builder.call(fptr, args[1:], arg_attrs=ext or None)
    if nbsig.return_type == types.void:
        return context.get_dummy_value()
    return res


def _extension(t):
    if isinstance(t, types.Boolean):
        return "zeroext"
    if isinstance(t, types.Integer) and t.bitwidth < 32:
        return "signext" if t.signed else "zeroext"
    return None


@lower_cast(types.Array, types.CPointer)
def _array_data_pointer(context, builder, fromty, toty, val):
    # reached only from a thunk call (_array_to_pointer): Numba itself
    # has no Array -> CPointer conversion
    ary = context.make_array(fromty)(context, builder, value=val)
    return builder.bitcast(ary.data, context.get_value_type(toty))


@lower_cast(ThunkType, types.FunctionType)
def _to_function_type(context, builder, fromty, toty, val):
    value = cgutils.create_struct_proxy(fromty)(context, builder, value=val)
    fn = cgutils.create_struct_proxy(toty)(context, builder)
    if "c_addr" in context.data_model_manager[toty]._fields:
        fn.c_addr = value.addr
        fn.py_addr = value.parent
        fn.jit_addr = ir.Constant(context.get_value_type(types.voidptr), None)
    else:       # Numba 0.59's model: (addr, pyaddr)
        fn.addr = value.addr
        fn.pyaddr = value.parent
    return fn._getvalue()


# ---------------------------------------------------------------- Python <-> Numba


@unbox(ThunkType)
def _unbox(typ, obj, c):
    builder = c.builder
    value = cgutils.create_struct_proxy(typ)(c.context, builder)
    voidptr = c.context.get_value_type(types.voidptr)
    addr = cgutils.alloca_once_value(builder, ir.Constant(voidptr, None))
    meminfo = cgutils.alloca_once_value(
        builder, ir.Constant(c.context.get_value_type(types.MemInfoPointer(types.voidptr)),
                             None))
    # Thunk._wrapper_address_ is the C address getter (it refuses a
    # released thunk); Function's is a property (its call thunk's address
    # when it has fixed parameters).
    addr_obj = c.pyapi.object_getattr_string(obj, "_wrapper_address_")
    with builder.if_then(cgutils.is_not_null(builder, addr_obj), likely=True):
        builder.store(c.pyapi.long_as_voidptr(addr_obj), addr)
        c.pyapi.decref(addr_obj)
    is_error = cgutils.is_null(builder, builder.load(addr))
    with builder.if_else(is_error, likely=False) as (failed, ok):
        with failed:
            # an attribute error, a conversion error, or an address of 0
            with builder.if_then(cgutils.is_null(builder, c.pyapi.err_occurred())):
                c.pyapi.err_set_string("PyExc_ValueError",
                                       f"{typ}: the function's address is NULL")
        with ok:
            # The meminfo owns a reference to obj; Numba's refcounting of
            # the value (and of every container it goes into) owns the
            # meminfo.
            builder.store(c.pyapi.nrt_meminfo_new_from_pyobject(
                ir.Constant(voidptr, None), obj), meminfo)
    value.addr = builder.load(addr)
    value.parent = builder.bitcast(obj, voidptr)
    value.meminfo = builder.load(meminfo)
    return NativeValue(value._getvalue(), is_error=is_error)


@box(ThunkType)
def _box(typ, val, c):
    # the same Python object; boxing consumes the value's reference
    value = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    obj = c.builder.bitcast(value.parent, c.pyapi.pyobj)
    c.pyapi.incref(obj)
    c.context.nrt.decref(c.builder, typ, val)
    return obj


# ---------------------------------------------------------------- compiled-in thunks


_lock = threading.Lock()
_held = {}          # id -> Thunk or Function compiled into code as a constant


@lower_constant(ThunkType)
def _constant(context, builder, typ, pyval):
    # A global or closure variable: its address is compiled in (a dynamic
    # address: Numba refuses to cache such code). The machine code is never
    # freed, so the object is held for ever. It is also recorded against
    # the library being compiled (the function being lowered, or the
    # function an inlined callee is lowered into): a @cfunc's library,
    # with the libraries it links (the @njit functions it calls), then
    # lists every thunk its code uses (captured_by).
    try:
        addr = pyval._wrapper_address_
    except Exception as exc:                # a released thunk
        raise errors.NumbaValueError(f"{typ} compiled in as a global or closure "
                                     f"variable: {exc}") from None
    with _lock:
        _held[id(pyval)] = pyval
        lib = context.active_code_library
        captures = getattr(lib, "_numthunk_captures", None)
        if captures is None:
            captures = lib._numthunk_captures = {}
        captures[id(pyval)] = pyval
    value = cgutils.create_struct_proxy(typ)(context, builder)
    value.addr = context.add_dynamic_addr(builder, addr, info=str(typ))
    value.parent = context.add_dynamic_addr(builder, id(pyval), info=type(pyval).__name__)
    value.meminfo = ir.Constant(context.get_value_type(types.MemInfoPointer(types.voidptr)),
                                None)
    return value._getvalue()


def captured_by(library):
    """The objects (Thunks, Functions) compiled as constants into the code
    of ``library`` and of the libraries it links, in the order met."""
    out, seen, todo = {}, set(), [library]
    while todo:
        lib = todo.pop()
        if lib is None or id(lib) in seen:
            continue
        seen.add(id(lib))
        out.update(getattr(lib, "_numthunk_captures", {}))
        todo.extend(reversed(list(getattr(lib, "_linking_libraries", ()))))
    return tuple(out.values())

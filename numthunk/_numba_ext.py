"""Numba extension: the type of a thunk (or Function) as a Numba function value.

``ThunkFunctionType`` is a ``numba.types.FunctionType`` with the same data
model (the struct Numba calls through: ``c_addr`` since Numba 0.60,
``addr`` in 0.59); typing
and lowering of calls, boxing, and lowering of a global or closure value
(through the Wrapper Address Protocol) are Numba's own. Only unboxing is
ours: Numba's unboxing of a protocol object imports a module, unpickles the
signature and calls two Python functions per argument (~7 µs); a thunk
knows its address, so one method call does.

Imported by ``numthunk._numba.register()`` only (and by pickle, when a
cached ``@njit(cache=True)`` consumer is loaded): it imports Numba.
"""

from llvmlite import ir
import numba.experimental.function_type  # noqa: F401  (FunctionType model, box, lower_constant)
from numba.core import cgutils, errors, types
from numba.core.imputils import lower_cast
from numba.core.typeconv import Conversion
from numba.experimental.function_type import FunctionModel
from numba.extending import NativeValue, register_model, unbox


class ThunkFunctionType(types.FunctionType):
    """A C function at a fixed address with a known signature: a numthunk
    Thunk or Function passed to or captured by nopython code."""

    def can_convert_to(self, typingctx, other):
        if type(other) is types.FunctionType and other.key == self.key:
            return Conversion.safe
        return None

    def unify(self, typingctx, other):
        # A thunk and a Numba function value of the same signature (cfunc,
        # another protocol object) meet as Numba's FunctionType.
        if isinstance(other, types.FunctionType) and not isinstance(
                other, types.UndefinedFunctionType) and other.key == self.key:
            return types.FunctionType(self.signature)
        return super().unify(typingctx, other)


    def get_call_type(self, context, args, kws):
        # A call of a thunk converts its arguments as a call of a C function
        # does in Numba (ctypes/cffi functions, @cfunc): any implicit
        # conversion Numba knows, unsafe ones included (int64 -> int32,
        # int64 -> float64); and a contiguous array of dtype T where the
        # thunk takes T * passes its data pointer (lower_cast below). Numba's
        # own FunctionType admits safe conversions only.
        if kws or len(args) != self.nargs:
            return super().get_call_type(context, args, kws)
        sig = self.signature
        for i, (atype, want) in enumerate(zip(args, sig.args)):
            atype = types.unliteral(atype)
            if _array_to_pointer(atype, want):
                continue
            if context.context.can_convert(fromty=atype, toty=want) is None:
                raise errors.TypingError(f"argument {i + 1}: cannot pass {atype} as {want}"
                                 + (" (an array must be C- or F-contiguous and of the "
                                    "pointer's dtype)" if isinstance(atype, types.Array)
                                    else ""))
        return sig


def _array_to_pointer(atype, want):
    return (isinstance(atype, types.Array) and isinstance(want, (types.CPointer,))
            and atype.dtype == want.dtype and atype.layout in ("C", "F"))


register_model(ThunkFunctionType)(FunctionModel)


@lower_cast(types.Array, types.CPointer)
def _array_data_pointer(context, builder, fromty, toty, val):
    # reached only from a thunk call (_array_to_pointer): Numba itself
    # has no Array -> CPointer conversion
    ary = context.make_array(fromty)(context, builder, value=val)
    return builder.bitcast(ary.data, context.get_value_type(toty))


@lower_cast(ThunkFunctionType, types.FunctionType)
def _thunk_to_function_type(context, builder, fromty, toty, val):
    return val        # same data model


@unbox(ThunkFunctionType)
def _unbox_thunk(typ, obj, c):
    builder = c.builder
    voidptr = c.context.get_value_type(types.voidptr)
    sfunc = cgutils.create_struct_proxy(typ)(c.context, builder)
    # Thunk._wrapper_address_ is the C address getter; Function's is a
    # property (its call thunk's address when it has fixed parameters).
    addr_obj = c.pyapi.object_getattr_string(obj, "_wrapper_address_")
    is_error = cgutils.is_null(builder, addr_obj)
    slot = cgutils.alloca_once_value(builder, ir.Constant(voidptr, None))
    with builder.if_then(builder.not_(is_error), likely=True):
        builder.store(c.pyapi.long_as_voidptr(addr_obj), slot)
        c.pyapi.decref(addr_obj)
    # The caller holds the object for the duration of the call.
    if "c_addr" in c.context.data_model_manager[typ]._fields:
        sfunc.c_addr = builder.load(slot)
        sfunc.py_addr = builder.bitcast(obj, voidptr)
        sfunc.jit_addr = ir.Constant(voidptr, None)
    else:       # Numba 0.59's model: (addr, pyaddr)
        sfunc.addr = builder.load(slot)
        sfunc.pyaddr = builder.bitcast(obj, voidptr)
    return NativeValue(sfunc._getvalue(), is_error=is_error)

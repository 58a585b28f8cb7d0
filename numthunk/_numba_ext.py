"""Numba extension: a thunk (or Function) as a Numba value that holds it.

``ThunkType`` is numthunk's own Numba type of a C function value of one
signature. Its data model is the call address, the Python object and an
NRT meminfo that owns a reference to that object, made at unboxing by
``NRT_meminfo_new_from_pyobject`` (the meminfo's destructor drops the
reference under the GIL), as Numba holds a NumPy Generator. So wherever
Numba keeps a value (``typed.List``, ``typed.Dict``, tuples, jitclass and
structref fields, a value returned from ``@njit``), Numba's reference
counting keeps the thunk alive, and boxing gives back the same object.

Calls of a ``ThunkType`` are direct calls through the address (no check,
no indirection). Where a ``numba.types.FunctionType`` of the same
signature is wanted (a thunk and a ``@cfunc`` in one ``if``/``else``, an
explicit signature), a thunk converts to it; that value, like every Numba
function value, holds nothing.

A thunk over a Numba ``@cfunc`` has an ``InlineThunkType`` instead (one
per target and binding layout; same data model): its calls are calls of
the target's own compiled function, linked into the caller so that LLVM
can inline it, with the bound values loaded from the thunk's published
context at each call (``Thunk._inline_layout()`` says where). It converts
to the ``ThunkType`` of its signature wherever Numba unifies or casts
types; other conversions between thunk types are refused. An item of a
tuple of thunks over several targets picked at run time (``fns[k]``) has
a ``ChoiceThunkType``: its call is a switch over the index, each case the
item's own call. A ``u.ctypes`` argument of a thunk call is compiled as the
array ``u`` where that passes the same pointer (``_CtypesArgumentAsArray``).

A thunk compiled in as a constant (a global or closure variable) is held
for ever (the machine code holding its address is never freed) and is
recorded against the code library being compiled, so numthunk can tell
which thunks a ``@cfunc``'s code uses (:func:`captured_by`).

Imported by ``numthunk._numba.register()`` only (and by pickle, when a
cached ``@njit(cache=True)`` consumer is loaded): it imports Numba.
"""

import operator
import threading

import numba.experimental.function_type  # noqa: F401  (FunctionType's model, for the cast)
from llvmlite import ir
from numba import literal_unroll
from numba.core import cgutils, errors, types, typing
from numba.core import ir as nir
from numba.core.imputils import impl_ret_borrowed, lower_builtin, lower_cast, lower_constant
from numba.core.rewrites import Rewrite, register_rewrite
from numba.core.typeconv import Conversion
from numba.core.typing.templates import AbstractTemplate, infer, infer_global
from numba.extending import NativeValue, box, models, register_model, unbox


class ThunkType(types.Callable):
    """A C function at a fixed address with a known signature, held by
    reference: a numthunk Thunk or Function in nopython code. One type per
    C signature, so new thunks do not recompile their consumers.

    ``fnptrs``: the parameters that are C function pointers, as ``(index,
    what a function passed there must be)``, that being the ``function``
    text of a ThunkType: Numba sees these parameters as ``voidptr``; a call
    passes a thunk or Function of that type there (its address)."""

    fnptrs = ()         # also for a type unpickled from an older cache index

    def __init__(self, signature, fnptrs=()):
        self.signature = signature
        self.nargs = len(signature.args)
        self.fnptrs = tuple(fnptrs)
        super().__init__(name=f"numthunk.Thunk[{self.function}]")

    @property
    def function(self):
        """The signature as Numba sees it, with what each function-pointer
        parameter takes: two function values of the same text are
        interchangeable in a C call."""
        return str(self.signature) + "".join(f"; {i + 1}: [{f}]" for i, f in self.fnptrs)

    @property
    def opaque(self):
        """The uniform type of this signature: calls through the address."""
        return self

    def get_call_type(self, context, args, kws):
        # A call of a thunk converts its arguments as a call of a C function
        # does in Numba (ctypes/cffi functions, @cfunc): any implicit
        # conversion Numba knows, unsafe ones included (int64 -> int32,
        # int64 -> float64); a contiguous array of dtype T where the thunk
        # takes T * passes its data pointer (lower_cast below); a thunk or
        # Function where it takes a C function pointer passes its address.
        if kws:
            raise errors.TypingError(
                f"{self}: a C function takes no keyword arguments: pass "
                f"{', '.join(kws)} by position, f({', '.join(['...'] * (self.nargs))})")
        sig = self.signature
        if len(args) != self.nargs:
            raise errors.TypingError(f"{self} takes {self.nargs} argument(s), "
                                     f"got {len(args)}")
        fnptrs = dict(self.fnptrs)
        formal = list(sig.args)
        for i, (atype, want) in enumerate(zip(args, sig.args)):
            atype = types.unliteral(atype)
            if i in fnptrs:
                # the function value itself: lowering passes its address
                _check_function_pointer(i, atype, fnptrs[i])
                formal[i] = atype
                continue
            if _array_to_pointer(atype, want):
                continue
            if context.can_convert(fromty=atype, toty=want) is None:
                raise errors.TypingError(
                    f"argument {i + 1}: cannot pass {atype} as {want}"
                    + (" (an array must be C- or F-contiguous and of the pointer's dtype)"
                       if isinstance(atype, types.Array) else ""))
        # the receiver: lowering gets the thunk's value first (_call below)
        return typing.Signature(sig.return_type, tuple(formal), recvr=self)

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
        # @cfunc, another protocol object, an @njit function that compiles
        # for it) meet as Numba's FunctionType, as Numba's own function
        # values do; thunks of one signature over different targets as the
        # uniform type.
        if isinstance(other, ThunkType):
            return self.opaque if other.opaque == self.opaque else None
        if type(other) is types.FunctionType:
            return other if other.signature == self.signature else None
        if isinstance(other, types.Dispatcher) and _compiles_for(other, self.signature):
            return types.FunctionType(self.signature)
        return None


def _compiles_for(dispatcher_type, sig):
    """Whether an @njit function compiles for ``sig`` with exactly its
    return type (Numba's cast to FunctionType calls its C entry as
    ``sig``; Numba itself does not compare the return type)."""
    try:
        cres = dispatcher_type.dispatcher.get_compile_result(sig)
    except errors.NumbaError:
        return False
    return cres.signature.return_type == sig.return_type


def _check_function_pointer(i, atype, want):
    if isinstance(atype, ThunkType):
        if atype.function == want:
            return
        raise errors.TypingError(f"argument {i + 1}: expected a function {want}, got a "
                                 f"thunk or Function {atype.function}")
    raise errors.TypingError(f"argument {i + 1} is a C function pointer {want}: pass a "
                             f"numthunk thunk or Function of that signature, not {atype}")


class _RefinedThunkType(ThunkType):
    """A thunk type that knows more than its signature (its target, or the
    targets it picks from): a value of the uniform type ``opaque`` of its
    signature wherever Numba wants the type of any value that may be
    stored (a typed.List's or typed.Dict's items, a returned value), so
    that thunks over other targets fit too, and it converts to it."""

    def _refine(self, opaque, name):
        self._opaque = opaque
        self.signature = opaque.signature
        self.nargs = opaque.nargs
        self.fnptrs = opaque.fnptrs
        types.Callable.__init__(self, name=f"numthunk.Thunk[{opaque.function}; {name}]")

    @property
    def opaque(self):
        return self._opaque

    def __unliteral__(self):
        # what it knows is compile-time knowledge about a value, as a
        # literal's value is
        return self._opaque

    def can_convert_to(self, typingctx, other):
        if other == self._opaque:
            return Conversion.safe
        return super().can_convert_to(typingctx, other)


class InlineThunkType(_RefinedThunkType):
    """A thunk whose target is Numba-compiled (a ``@cfunc``): a call is a
    direct call of the target's own code, which LLVM may inline, with the
    bound values loaded from the thunk's current context at each call.

    One type per target and binding pattern (which parameters are bound,
    their kinds and where their values are), never per bound value: other
    thunks over the same target with the same pattern share the consumer's
    compiled code. ``fingerprint`` names the target by a hash of its
    compiled code (the same in every process that compiles the same code),
    so a cached consumer is found again by a fresh process and never
    reused for other code. The target's library, which the consumer
    links, is this process's own (``_target``, left out of pickles)."""

    def __init__(self, opaque, fingerprint, name, target_sig, layout):
        self.fingerprint = fingerprint
        self.target_sig = target_sig
        self.layout = layout
        pattern = ",".join(f"{k}@{w}" if src == "bound" else "ARG"
                           for src, k, w in layout[2])
        self._refine(opaque, f"inline {name}#{fingerprint[:12]}({pattern})")

    @property
    def key(self):
        return (self._opaque.key, self.fingerprint, self.target_sig, self.layout)

    def __hash__(self):
        # Numba hashes an argument's type on every call that passes it:
        # the key's hash is computed once per process
        h = self.__dict__.get("_hash")
        if h is None:
            h = self._hash = hash(self.key)
        return h

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_target", None)          # this process's library
        state.pop("_hash", None)            # str hashes differ between processes
        return state


class ChoiceThunkType(_RefinedThunkType):
    """An item of a tuple of thunks over several targets of one signature,
    picked by an index known at run time only (``fns[k]``): the tuple and
    the index. A call is a switch over the index, each case the call of
    one item as its own type (a thunk over a ``@cfunc`` inlined, with its
    released check and live loads), so a loop calling the item can be
    unswitched by LLVM into one loop per target. Where the uniform type is
    wanted (stored, returned, unified with other thunks) it converts to
    the picked item's value."""

    def __init__(self, items):
        self.items = tuple(items)
        self._refine(items[0].opaque, f"choice of {', '.join(str(t) for t in self.items)}")

    @property
    def key(self):
        return (self._opaque.key, self.items)


class ThunkFunctionType(types.FunctionType):
    """The type numthunk gave thunks before ``ThunkType`` (a non-owning
    FunctionType). Kept so that an index of Numba's cache written then
    still unpickles: its entries match no value now and are recompiled."""


# ---------------------------------------------------------------- tuples


def _common_function_type(context, tup):
    """The one type the items of a heterogeneous tuple holding a thunk unify
    to (the uniform thunk type, or Numba's FunctionType where a @cfunc or
    @njit function is among them), or None. Numba builds a UniTuple itself
    when the first item is a function value of its own; a tuple whose
    first item is a thunk needs this."""
    if not isinstance(tup, types.Tuple) or not tup.types \
            or not any(isinstance(t, ThunkType) for t in tup.types):
        return None
    common = context.unify_types(*tup.types)
    if isinstance(common, ThunkType) or type(common) is types.FunctionType:
        return common
    raise errors.TypingError(
        f"{tup} mixes thunks with values they do not unify with (functions of other "
        "signatures): loop over it with numba.literal_unroll(...) or index it with "
        "constants; a tuple of functions of one signature is iterated and indexed at "
        "run time as a tuple of one type")


@infer
class _TupleOfThunksIter(AbstractTemplate):
    # for f in (t1, t2): the tuple as a UniTuple of the common type (the
    # lowering casts it item by item)
    key = "getiter"

    def generic(self, args, kws):
        [tup] = args
        common = _common_function_type(self.context, tup)
        if common is not None:
            uni = types.UniTuple(common, len(tup))
            return typing.signature(uni.iterator_type, uni)
        return None


@infer_global(operator.getitem)
class _TupleOfThunksGetItem(AbstractTemplate):
    # fns[k], k known at run time only (a constant index is a
    # static_getitem, which keeps each item's own type: inlined). A
    # UniTuple of thunks over one target keeps its items' own type: Numba
    # tries its templates with unliteral arguments first, which would make
    # them the uniform type (InlineThunkType.__unliteral__), so this one is
    # the CPU target's own (tried before Numba's generic ones) and takes
    # the arguments as they are.
    metadata = {"target": "cpu"}
    prefer_literal = True

    def generic(self, args, kws):
        tup, idx = args
        if not isinstance(idx, types.Integer):
            return None
        index = types.intp if idx.signed else types.uintp
        if isinstance(tup, types.UniTuple) and isinstance(tup.dtype, InlineThunkType):
            return typing.signature(tup.dtype, tup, index)
        if isinstance(idx, types.Literal):
            return None
        common = _common_function_type(self.context, tup)
        if common is None:
            return None
        if isinstance(common, ThunkType) and isinstance(tup, types.Tuple) \
                and all(isinstance(t, ThunkType) for t in tup.types) \
                and any(isinstance(t, InlineThunkType) for t in tup.types):
            # thunks over several targets, one at least inlined: a switch
            return typing.signature(ChoiceThunkType(tup.types), tup, index)
        return typing.signature(common, types.UniTuple(common, len(tup)), index)


@infer
class _TupleOfThunksGetItemRefused(AbstractTemplate):
    # fns[k] over functions of several signatures, k known at run time:
    # _TupleOfThunksGetItem refuses it, but Numba reports a failure of
    # operator.getitem as "No implementation of function ... found",
    # with ours among the 24 candidates' reasons. Numba tries the
    # templates registered by key (this one) only after every other
    # getitem failed, and lets their error through as it is: the first
    # line then says what to write. Numba applies a template to literal
    # arguments, then to the same unliteral: a constant index (here only
    # when nothing else typed it) is left to Numba's own error.
    key = operator.getitem
    _literal_call = None

    def generic(self, args, kws):
        if len(args) != 2:
            return None
        tup, idx = args
        if isinstance(idx, types.Literal):
            self._literal_call = (tup, types.unliteral(idx))
            return None
        was_literal, self._literal_call = self._literal_call == (tup, idx), None
        if not was_literal and isinstance(idx, types.Integer):
            _common_function_type(self.context, tup)     # raises, saying what to write
        return None


def _holds_choice(ty):
    if isinstance(ty, ChoiceThunkType):
        return True
    return isinstance(ty, types.BaseTuple) and any(_holds_choice(t) for t in ty.types)


@infer_global(literal_unroll)
class _LiteralUnrollOfChoices(AbstractTemplate):
    # literal_unroll((fns[k], t)): Numba types literal_unroll's result as
    # its unliteral argument, where a choice is the uniform type, and then
    # indexes that value with each item's own type, taking both to have
    # one data model; a choice (the index and the tuple it picks from) has
    # another. Given a tuple holding a choice, the result is the tuple as
    # it is (the CPU target's template, tried before Numba's own).
    metadata = {"target": "cpu"}
    prefer_literal = True

    def generic(self, args, kws):
        if len(args) == 1 and not kws and _holds_choice(args[0]):
            return typing.signature(args[0], args[0])
        return None


@lower_builtin(literal_unroll, types.BaseTuple)
def _literal_unroll_of_choices(context, builder, sig, args):
    return impl_ret_borrowed(context, builder, sig.return_type, args[0])


def _array_to_pointer(atype, want):
    return (isinstance(atype, types.Array) and isinstance(want, types.CPointer)
            and atype.dtype == want.dtype and atype.layout in ("C", "F"))


@register_rewrite("after-inference")
class _CtypesArgumentAsArray(Rewrite):
    """``f(t, u.ctypes, k.ctypes)`` with ``f`` a thunk is compiled as
    ``f(t, u, k)`` where ``u.ctypes`` is taken in the same block as the
    call and the array is one a pointer parameter takes as it is (C- or
    F-contiguous, its dtype): the same data pointer is passed. A
    ``.ctypes`` value holds a reference to its array, and before an
    inlined call (whose released-thunk check is a branch) Numba's
    refcount pruning leaves that incref/decref pair in the loop; the
    array itself is borrowed for the call, with no reference taken."""

    def match(self, func_ir, block, typemap, calltypes):
        self.block = block
        self.swaps = {}
        defs = {}                   # name -> (array var, position) in this block
        for pos, inst in enumerate(block.body):
            if not isinstance(inst, nir.Assign):
                continue
            value = inst.value
            if isinstance(value, nir.Expr) and value.op == "getattr" \
                    and value.attr == "ctypes" and isinstance(value.value, nir.Var):
                defs[inst.target.name] = (value.value, pos)
            elif isinstance(value, nir.Expr) and value.op == "call" and not value.kws \
                    and value.vararg is None \
                    and isinstance(typemap.get(value.func.name), ThunkType):
                want = typemap[value.func.name].signature.args
                for i, arg in enumerate(value.args):
                    found = defs.get(arg.name)
                    if found is None or i >= len(want):
                        continue
                    array, at = found
                    if not _array_to_pointer(typemap.get(array.name), want[i]) \
                            or _assigned(block.body[at + 1:pos], array.name):
                        continue
                    self.swaps.setdefault(inst, {})[i] = array
            if defs.get(inst.target.name, (None, pos))[1] != pos:
                del defs[inst.target.name]          # the name is given another value
        self.calltypes = calltypes
        return bool(self.swaps)

    def apply(self):
        new_block = nir.Block(self.block.scope, self.block.loc)
        for inst in self.block.body:
            swaps = self.swaps.get(inst)
            if swaps:
                call = inst.value
                args = [swaps.get(i, a) for i, a in enumerate(call.args)]
                new_call = nir.Expr.call(call.func, args, call.kws, call.loc)
                self.calltypes[new_call] = self.calltypes.pop(call)
                inst = nir.Assign(new_call, inst.target, inst.loc)
            new_block.append(inst)
        return new_block


def _assigned(body, name):
    return any(isinstance(inst, nir.Assign) and inst.target.name == name for inst in body)


@register_model(ChoiceThunkType)
class ChoiceThunkModel(models.StructModel):
    """(the index, normalised to 0 <= index < n, the tuple)."""

    def __init__(self, dmm, fe_type):
        members = [("index", types.intp), ("items", types.Tuple(fe_type.items))]
        super().__init__(dmm, fe_type, members)


@register_model(InlineThunkType)
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
    res = builder.call(fptr, _arguments(context, builder, sig, args), arg_attrs=ext or None)
    if nbsig.return_type == types.void:
        return context.get_dummy_value()
    return res


def _arguments(context, builder, sig, args):
    """The thunk's arguments as its C signature takes them: a thunk or
    Function passed for a C function pointer becomes its address (the
    caller's value holds it for the call)."""
    out = []
    for t, v in zip(sig.args[1:], args[1:]):
        if isinstance(t, ThunkType):
            v = cgutils.create_struct_proxy(t)(context, builder, value=v).addr
        out.append(v)
    return out


def _extension(t):
    if isinstance(t, types.Boolean):
        return "zeroext"
    if isinstance(t, types.Integer) and t.bitwidth < 32:
        return "signext" if t.signed else "zeroext"
    return None


@lower_builtin(InlineThunkType, InlineThunkType, types.VarArg(types.Any))
def _inline_call(context, builder, sig, args):
    # A direct call of the target's compiled function, linked into the
    # caller's code so that LLVM may inline it. The bound values come from the
    # thunk's context as published now: one load of the pointer in the
    # thunk object's cell (NULL once released: checked before any value is
    # read), then a load per bound value at its offset, so a rebind() made
    # between calls is seen.
    fnty = sig.args[0]
    target = getattr(fnty, "_target", None)
    if target is None:
        raise errors.NumbaRuntimeError(
            f"{fnty}: no target compiled in this process for this type (a type read "
            "from a cache index is only compared, never compiled)")
    library, wrapper = target
    cell_offset, values_offset, slots = fnty.layout
    value = cgutils.create_struct_proxy(fnty)(context, builder, value=args[0])
    i8p = ir.IntType(8).as_pointer()
    obj = builder.bitcast(value.parent, i8p)
    cell = builder.bitcast(builder.gep(obj, [_i64(cell_offset)], inbounds=True),
                           i8p.as_pointer())
    # Relaxed, not acquire: the value loads take their addresses from
    # the pointer, and an address dependency orders them after it on every
    # machine numthunk runs on (x86-64, AArch64), as the writer publishes
    # with a release store (commit() in src/life/commit.c). An acquire load would
    # stop LLVM from keeping the caller's values in registers across the
    # call (RK4 in bench/bench_inline.py: 1.39x instead of 1.08x).
    ctx = builder.load_atomic(cell, "monotonic", 8)
    with builder.if_then(cgutils.is_null(builder, ctx), likely=False):
        context.call_conv.return_user_exc(
            builder, ValueError,
            (f"{fnty.opaque}: the thunk has been released (see docs/lifetime.md)",))
    tsig = fnty.target_sig
    forwarded = _arguments(context, builder, sig, args)
    cargs = []
    for i, (src, _kind, where) in enumerate(slots):
        if src == "arg":
            cargs.append(forwarded[where])
            continue
        ty = tsig.args[i]
        ptr = builder.gep(ctx, [_i64(values_offset + where)], inbounds=True)
        ptr = builder.bitcast(ptr, context.get_data_type(ty).as_pointer())
        cargs.append(context.unpack_value(builder, ty, ptr, align=8))
    # The target's own function (its C entry calls it, never inlined) in
    # Numba's calling convention; an exception it raises is handled as its
    # C entry handles it (printed as unraisable, the call returns 0), so
    # that inlining changes no result.
    fn = cgutils.get_or_insert_function(
        builder.module, context.call_conv.get_function_type(tsig.return_type, tsig.args),
        _function_name(wrapper))
    context.add_linking_libs([library])
    status, res = context.call_conv.call_function(builder, fn, tsig.return_type, tsig.args,
                                                  cargs)
    with builder.if_then(status.is_error, likely=False):
        pyapi = context.get_python_api(builder)
        gil = pyapi.gil_ensure()
        context.call_conv.raise_error(builder, pyapi, status)
        where = pyapi.string_from_string(context.insert_const_string(
            builder.module, f"numthunk inlined target of {fnty.opaque}"))
        pyapi.err_write_unraisable(where)
        pyapi.decref(where)
        pyapi.gil_release(gil)
    if tsig.return_type == types.void:
        return context.get_dummy_value()
    return res


@lower_builtin(operator.getitem, types.Tuple, types.intp)
@lower_builtin(operator.getitem, types.Tuple, types.uintp)
def _choose(context, builder, sig, args):
    # fns[k] over several targets (typed by _TupleOfThunksGetItem only):
    # the tuple and the index, checked as a tuple's index is
    tupty, idxty = sig.args
    if not isinstance(sig.return_type, ChoiceThunkType):
        raise errors.NumbaRuntimeError(f"no lowering of {sig}")
    tup, idx = args
    n = ir.Constant(idx.type, len(tupty))
    if idxty.signed:
        idx = builder.select(builder.icmp_signed("<", idx, idx.type(0)),
                             builder.add(idx, n), idx)
    with builder.if_then(builder.icmp_unsigned(">=", idx, n), likely=False):
        context.call_conv.return_user_exc(builder, IndexError, ("tuple index out of range",))
    choice = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    choice.index = idx
    choice.items = tup
    return impl_ret_borrowed(context, builder, sig.return_type, choice._getvalue())


def _switch(context, builder, choicety, value, case):
    """Emit ``case(i, item type, item value)`` for the picked item of a
    choice, under a switch over its index; the results as one value (None
    where ``case`` returns None)."""
    choice = cgutils.create_struct_proxy(choicety)(context, builder, value=value)
    index, items = choice.index, choice.items
    end = builder.append_basic_block("thunk_choice.end")
    default = builder.append_basic_block("thunk_choice.none")
    with builder.goto_block(default):
        builder.unreachable()           # the index was checked by _choose
    switch = builder.switch(index, default)
    results = []
    for i, ty in enumerate(choicety.items):
        block = builder.append_basic_block(f"thunk_choice.{i}")
        switch.add_case(ir.Constant(index.type, i), block)
        builder.position_at_end(block)
        res = case(i, ty, builder.extract_value(items, i))
        results.append((res, builder.block))
        builder.branch(end)
    builder.position_at_end(end)
    if results[0][0] is None:
        return None
    phi = builder.phi(results[0][0].type)
    for res, block in results:
        phi.add_incoming(res, block)
    return phi


@lower_builtin(ChoiceThunkType, ChoiceThunkType, types.VarArg(types.Any))
def _choice_call(context, builder, sig, args):
    # a switch over the index, each case a call of one item as its own type
    def case(i, ty, item):
        isig = typing.Signature(sig.return_type, (ty,) + tuple(sig.args[1:]), recvr=ty)
        res = _call_impl(ty)(context, builder, isig, [item] + list(args[1:]))
        return None if sig.return_type == types.void else res

    res = _switch(context, builder, sig.args[0], args[0], case)
    return context.get_dummy_value() if res is None else res


def _call_impl(ty):
    """The lowering of a call of a value of thunk type ``ty`` (an item of
    a choice may itself be a choice: ``(fns[k], t)[m]``)."""
    if isinstance(ty, ChoiceThunkType):
        return _choice_call
    return _inline_call if isinstance(ty, InlineThunkType) else _call


@lower_cast(ChoiceThunkType, ThunkType)
def _choice_to_opaque(context, builder, fromty, toty, val):
    # the picked item's value (one data model for all thunk types)
    if toty != fromty.opaque:
        raise errors.NumbaTypeError(f"cannot convert {fromty} to {toty}")
    return _switch(context, builder, fromty, val,
                   lambda i, ty, item: context.cast(builder, item, ty, toty))


@lower_cast(ChoiceThunkType, types.FunctionType)
def _choice_to_function_type(context, builder, fromty, toty, val):
    val = _choice_to_opaque(context, builder, fromty, fromty.opaque, val)
    return _to_function_type(context, builder, fromty.opaque, toty, val)


def _function_name(wrapper):
    # Numba names a @cfunc's C entry "cfunc." + its function's symbol
    # (FunctionDescriptor.llvm_cfunc_wrapper_name)
    prefix = "cfunc."
    if not wrapper.startswith(prefix):
        raise errors.NumbaRuntimeError(f"unexpected @cfunc entry symbol {wrapper!r}")
    return wrapper[len(prefix):]


def _i64(n):
    return ir.Constant(ir.IntType(64), n)


@lower_cast(ThunkType, ThunkType)
def _to_opaque(context, builder, fromty, toty, val):
    # An inlining thunk where the uniform type of its signature is wanted:
    # the same value (one data model). Numba's typed containers lower a
    # cast they were only warned about ("unsafe cast"), so every other
    # pair is refused here: a thunk over another target must never be
    # called as this one.
    if toty.opaque != fromty.opaque:
        raise errors.NumbaTypeError(
            f"cannot convert {fromty} to {toty}: the signatures differ (a container "
            "of thunks takes thunks of its one signature; loop over functions of "
            "several with numba.literal_unroll)")
    if toty != fromty and toty != fromty.opaque:
        raise errors.NumbaTypeError(
            f"cannot convert {fromty} to {toty}: thunks over different targets have "
            "different Numba types; give the container the uniform type of the "
            "signature (numthunk.Signature(...).numba_type()) or pass t.opaque()")
    return val


@lower_cast(types.Array, types.CPointer)
def _array_data_pointer(context, builder, fromty, toty, val):
    # reached only from a thunk call (_array_to_pointer): Numba itself
    # has no Array -> CPointer conversion
    ary = context.make_array(fromty)(context, builder, value=val)
    return builder.bitcast(ary.data, context.get_value_type(toty))


@lower_cast(ThunkType, types.FunctionType)
def _to_function_type(context, builder, fromty, toty, val):
    if toty.signature != fromty.signature:          # see _to_opaque
        raise errors.NumbaTypeError(f"cannot convert {fromty} to {toty}: the signatures "
                                    "differ")
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


@unbox(ChoiceThunkType)
def _unbox_choice(typ, obj, c):
    # An @njit function given ``fns[k]`` (helper(fns[k], x)) is compiled
    # for the choice, so that its calls stay a switch over inlined targets;
    # Numba also builds its Python entry, which unboxes each argument. No
    # Python value has this type (typeof gives a thunk its own type), so
    # that entry is never reached with one: it refuses whatever it gets.
    c.pyapi.err_set_string("PyExc_TypeError",
                           f"{typ} is a choice made in compiled code: pass a thunk itself")
    return NativeValue(c.context.get_constant_undef(typ), is_error=cgutils.true_bit)


@box(ChoiceThunkType)
def _box_choice(typ, val, c):
    # as the picked item (the cast keeps the value's references)
    item = _choice_to_opaque(c.context, c.builder, typ, typ.opaque, val)
    c.context.nrt.incref(c.builder, typ.opaque, item)
    c.context.nrt.decref(c.builder, typ, val)
    return _box(typ.opaque, item, c)


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


@lower_constant(InlineThunkType)
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

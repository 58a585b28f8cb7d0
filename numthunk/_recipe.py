"""Recipes: how a thunk travels to another process.

A thunk is a function pointer into this process: its address means nothing
anywhere else. What travels is its recipe: the target, named so that
another process can find it again, and the bound values, as values.

Targets are named by
- ``("symbol", library, symbol)``: a symbol of a shared library, for
  ``Function.from_library``, ctypes functions of a ``CDLL`` and cffi
  ABI-mode functions. ``library`` is what the loader is asked for in the
  other process: a name it resolves (``"libm.so.6"``) stays a name, a path
  is the absolute path of the file as loaded here, ``None`` is the process
  itself (``CDLL(None)``);
- ``("cffi", module, name)``: a function of a cffi API-mode module;
- ``("cython", module, name, options)``: a ``numthunk.cython`` call;
- ``("cfunc", module, qualname)``: a Numba ``@cfunc`` at the top level of an
  importable module (the other process imports it: Numba compiles the
  function again or loads it from its cache);
- ``("thunk", thunk)``: another thunk, itself pickled by its recipe.

Anything else is a raw address (``Function(int, sig)``, ``address(n)``,
capsules, ctypes callbacks, pointers): pickling refuses it and says what to
use instead.

Bound values go into the same pickle as the target, in one tuple: an array
bound as a pointer and a ``size()`` of it unpickle as one array, so the new
thunk's pointer and size agree. Each process binds its own copy: live
binding holds within a process, never across processes.
"""

import copy
import copyreg
import ctypes
import importlib
import os
import pickle
import sys
import threading
import weakref

import numpy as np

from . import _api, _cffi, _cython, _loader
from ._api import (
    ARG,
    Address,
    Function,
    Ref,
    Strided,
    Thunk,
    _is_numba_cfunc,
    _numpy_ctypes_array,
    _with_fixed,
    as_function,
    bind,
    is_function_object,
    ref,
    shape,
    size,
    stride,
    strided,
)
from ._signature import Signature, param_label

__all__ = ["cython", "reduce_function", "reduce_thunk", "copy_thunk", "deepcopy_thunk"]


# ---------------------------------------------------------------- naming targets


_RAW_ADVICE = ("name the function instead: Function.from_library(library, symbol, "
               "signature) for a C library function, a ctypes function of a CDLL, "
               "numthunk.cython(module, name) for Cython, or a Numba @cfunc defined at the "
               "top level of an importable module")


class PicklingRefused(pickle.PicklingError):
    """This object is bound to this process (a raw address, a callback, a
    function without a name another process can find)."""


def _refuse(what, why):
    raise PicklingRefused(f"{what}: {why}")


def _fn_label(fn):
    return f"the function {fn.name or f'at {fn.address:#x}'} '{fn._signature}'"


def locate(fn):
    """The recipe naming ``fn``'s code in another process (cached on fn)."""
    rec = getattr(fn, "_recipe", None)
    if rec is not None:
        return rec
    owner = fn.owner
    what = _fn_label(fn)
    if owner is None:
        _refuse(what, "it is a raw address (Function(address, signature)), which means "
                f"nothing in another process; {_RAW_ADVICE}")
    if isinstance(owner, Thunk):
        rec = ("thunk", owner)
    elif isinstance(owner, ctypes._CFuncPtr):
        rec = _locate_ctypes(fn, owner, what)
    elif _is_numba_cfunc(owner):
        rec = _locate_cfunc(owner, what)
    elif type(owner).__module__ == "_cffi_backend":
        rec = _locate_cffi(fn, what)
    elif isinstance(owner, ctypes.CDLL) \
            and (symbol := _symbol_of(owner, fn.address, fn.name)) is not None:
        rec = ("symbol", _loader.spec_of(owner), symbol)
    elif _cffi_api_function(owner) is not None:
        rec = ("cffi", _cffi_api_function(owner), owner.__name__)
    elif isinstance(owner, tuple) and len(owner) == 2 and isinstance(owner[0], Function):
        _refuse(what, "it was bound with keep=, which holds memory the target reads "
                "through pointers set up in this process; another process would need the "
                "same set-up: make the thunk there")
    elif type(owner).__name__ == "PyCapsule":
        _refuse(what, "a capsule holds a raw address; for a Cython function use "
                "numthunk.cython(module, name), which another process can repeat; "
                f"otherwise {_RAW_ADVICE}")
    else:
        _refuse(what, f"numthunk does not know how to name a function owned by a "
                f"{type(owner).__name__!r} object in another process; {_RAW_ADVICE}")
    fn._recipe = rec
    return rec


def _symbol_of(lib, address, name):
    """The name under which the CDLL lib exports address: name if lib gives
    it this address, else the symbol the loader finds there (an unnamed or
    renamed function); None if neither."""
    def exported(n):
        return isinstance(n, str) and _loader.symbol_address(lib, n) == address

    if exported(name):
        return name
    found = _loader.dladdr(address)             # asked only when the name does not do
    sname = found[1] if found is not None else None
    return sname if exported(sname) else None


def _locate_ctypes(fn, cf, what):
    objects = getattr(cf, "_objects", None)
    keep = objects.get("0") if isinstance(objects, dict) else None
    if type(keep).__name__ == "CThunkObject":
        _refuse(what, "it is a ctypes callback (CFUNCTYPE(...)(python_function)): it runs "
                "Python code of this process; use a Numba @cfunc defined at the top level "
                "of an importable module instead, or Function.from_library for C code")
    if isinstance(keep, ctypes.CDLL):
        # lib.f (named by CDLL.__getattr__), proto(("f", lib)) or one renamed
        name = _symbol_of(keep, fn.address, getattr(cf, "__name__", None))
        if name is not None:
            return ("symbol", _loader.spec_of(keep), name)
    _refuse(what, "it is a ctypes function pointer made from an address, not a function "
            f"of a CDLL (lib.name); {_RAW_ADVICE}")


def _lookup(modname, qualname):
    obj = importlib.import_module(modname)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _locate_cfunc(cf, what):
    py = getattr(cf, "_pyfunc", None)
    modname = getattr(py, "__module__", None)
    qualname = getattr(py, "__qualname__", None)
    advice = "define it at the top level of an importable module"
    if not qualname:
        _refuse(what, f"the @cfunc {cf!r} has no __qualname__, so another process cannot "
                f"find it by name; {advice}")
    if not modname:
        _refuse(what, f"the @cfunc {qualname} is in no module (its __module__ is "
                f"{modname!r}), so another process cannot find it by name; {advice}")
    if "<locals>" in qualname:
        _refuse(what, f"the @cfunc {qualname} is defined inside a function, so another "
                f"process cannot find it by name; {advice}")
    try:
        found = _lookup(modname, qualname)
    except Exception as exc:
        _refuse(what, f"the @cfunc cannot be found as {modname}.{qualname} ({exc}); {advice}")
    if found is not cf:
        _refuse(what, f"{modname}.{qualname} is not this @cfunc (it was redefined or "
                "made by a factory); another process would get the other one")
    return ("cfunc", modname, qualname)


def _cffi_modules():
    """{realpath of the extension file: module} for imported cffi API-mode modules."""
    out = {}
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if path and hasattr(mod, "ffi") and hasattr(mod, "lib") \
                and type(mod.ffi).__module__ == "_cffi_backend":
            out[os.path.realpath(path)] = name
    return out


def _cffi_api_function(obj):
    """The module name of a cffi API-mode ``module.lib.f``, else None."""
    if not _cffi.is_api_function(obj):
        return None
    lib = obj.__self__
    for name, mod in list(sys.modules.items()):
        if getattr(mod, "lib", None) is lib:
            return name
    return None


def _locate_cffi(fn, what):
    found = _loader.dladdr(fn.address)
    if found is None:
        _refuse(what, "this cffi function is in no loaded library (a cffi callback "
                f"runs Python code of this process); {_RAW_ADVICE}")
    fname, sname, _saddr = found
    fname = os.path.abspath(fname)
    modname = _cffi_modules().get(os.path.realpath(fname))
    if modname is not None:
        mod = sys.modules[modname]
        names = ([sname] if sname else []) + [n for n in dir(mod.lib) if n != sname]
        for name in names:
            if _cffi_api_address(mod, name) == fn.address:
                return ("cffi", modname, name)
        _refuse(what, f"the function is in the cffi module {modname}, but no name of "
                f"{modname}.lib has its address")
    if sname is not None and _loader.symbol_address(_loader.load(fname), sname) == fn.address:
        return ("symbol", fname, sname)
    _refuse(what, f"the function is in {fname} but not under an exported name there; "
            "use Function.from_library(library, symbol, ffi.typeof(f))")


def _cffi_api_address(mod, name):
    try:
        ptr = mod.ffi.addressof(mod.lib, name)
    except Exception:
        return None
    if not _cffi.is_function(ptr):
        return None
    return int(mod.ffi.cast("uintptr_t", ptr))


# ------------------------------------------------------------- resolving names


def _resolve_symbol(rec):
    _kind, spec, symbol = rec
    try:
        lib = _loader.load(spec)
    except OSError as exc:
        raise OSError(f"cannot load library {spec!r} for symbol {symbol!r} in this "
                      f"process: {exc}") from None
    address = _loader.symbol_address(lib, symbol)
    if not address:
        raise OSError(f"symbol {symbol!r} not found in library {spec!r} (loaded from "
                      f"{_loader.loaded_path(lib)}) in this process")
    problem = _loader.code_symbol_problem(address)
    if problem is not None:
        raise TypeError(f"symbol {symbol!r} of library {spec!r} in this process: {problem}")
    return address, lib, None


def _resolve_cffi(rec):
    _kind, modname, name = rec
    mod = importlib.import_module(modname)
    address = _cffi_api_address(mod, name)
    if address is None:
        raise AttributeError(f"the cffi module {modname} has no function {name!r} in "
                             "this process")
    # the module declares the function's type: compared with the pickled one
    return address, mod, Signature(mod.ffi.addressof(mod.lib, name))


def _resolve_cfunc(rec):
    _kind, modname, qualname = rec
    try:
        cf = _lookup(modname, qualname)
    except Exception as exc:
        raise AttributeError(f"cannot find the @cfunc {modname}.{qualname} in this process "
                             f"({type(exc).__name__}: {exc}); a @cfunc travels by name, so "
                             "its module must be importable here (on sys.path; not "
                             "__main__ unless this process runs the same script)") from None
    if not _is_numba_cfunc(cf):
        raise TypeError(f"{modname}.{qualname} is a {type(cf).__name__}, not a Numba "
                        "@cfunc, in this process")
    return cf.address, cf, as_function(cf)._signature


def _resolve_thunk(rec):
    t = rec[1]
    return t.address, t, t.csig


def _resolve_cython(rec):
    _kind, modname, name, options = rec
    fn = cython(modname, name, _options_from(options))
    return fn.address, fn.owner, fn._signature


_RESOLVE = {"symbol": _resolve_symbol, "cffi": _resolve_cffi, "cfunc": _resolve_cfunc,
            "thunk": _resolve_thunk, "cython": _resolve_cython}

_functions = weakref.WeakValueDictionary()


def _function_from_recipe(rec, sigtext, nogil, name, memoryviews, fixed, structs=None):
    """Unpickle a Function: find its code by name, give it back its signature
    (and the struct layouts it declares)."""
    key, fn = None, None
    if rec[0] != "thunk":
        key = (rec, sigtext, nogil, name, memoryviews, fixed, structs)
        try:
            fn = _functions.get(key)
        except TypeError:       # an unhashable fixed value
            key = None
    if fn is not None:
        return fn
    resolve = _RESOLVE.get(rec[0])
    if resolve is None:
        raise pickle.UnpicklingError(f"unknown numthunk target recipe {rec[0]!r}")
    address, owner, found = resolve(rec)
    sig = Signature(sigtext)
    if found is not None and found != sig:
        raise TypeError(f"the target {name or rec[1:]} has the signature '{found}' in this "
                        f"process; the pickled thunk was made for '{sig}'")
    fn = Function(address, sig, nogil=nogil, owner=owner, name=name,
                  memoryviews=dict(memoryviews) if memoryviews else None,
                  fixed=dict(fixed) if fixed else None,
                  structs=dict(structs) if structs else None)
    fn._recipe = rec
    if key is not None:
        _functions[key] = fn
    return fn


_sig_texts = {}


def _sig_text(sig):
    """C text of a signature with its parameter names (rebind by name works
    after the trip)."""
    text = str(sig)
    names = sig.names
    key = (text, names)
    cached = _sig_texts.get(key)
    if cached is not None:
        return cached
    if any(names):
        parts = []
        for t, n in zip(sig.argtypes, names):
            if not n:
                parts.append(t)
            elif "(*" in t:     # a function pointer: the name goes before its first ')'
                i = t.index(")", t.index("(*"))                  # (*) or (*const)
                parts.append(f"{t[:i]} {n}{t[i:]}")
            else:
                parts.append(f"{t} {n}")
        named = f"{sig.restype} ({', '.join(parts)})"
        try:
            again = Signature(named)
        except (ValueError, TypeError):
            again = None
        if again == sig and again.names == names:    # (None is no Signature)
            text = named
    if len(_sig_texts) < 1024:
        _sig_texts[key] = text
    return text


def _frozen(d):
    return tuple(sorted(d.items())) if d else None


def reduce_function(fn):
    """``Function.__reduce__``."""
    try:
        rec = locate(fn)
    except PicklingRefused as exc:
        raise PicklingRefused(f"cannot pickle {exc}") from None
    return (_function_from_recipe,
            (rec, _sig_text(fn._signature), fn.nogil, fn.name,
             _frozen(fn.memoryviews), _frozen(fn.fixed), _frozen(fn.structs)))


def cython(module, name, options):
    """``numthunk.cython(module, name, **options)``: the Function, with the
    call recorded on it (another process repeats it)."""
    return _remember_cython(Function(**_cython.cython_target(module, name, **options)),
                            module, name, options)


def _remember_cython(fn, module, name, options):
    modname = module if isinstance(module, str) else getattr(module, "__name__", None)
    if not isinstance(modname, str):
        return fn
    frozen = []
    for k, v in sorted(options.items()):
        if isinstance(v, dict):
            v = ("dict", tuple(sorted(v.items(), key=lambda kv: repr(kv[0]))))
        frozen.append((k, v))
    fn._recipe = ("cython", modname, name, tuple(frozen))
    return fn


def _options_from(frozen):
    out = {}
    for k, v in frozen:
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "dict":
            v = dict(v[1])
        out[k] = v
    return out


# ---------------------------------------------------------------- bound values


def _param_label(t, i):
    # "argument 1 (x: double *)": the core's label of target parameter i
    return param_label(t.target_signature, i)


def _is_pointer_object(v):
    return (isinstance(v, (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p))
            or type(v).__module__ == "_cffi_backend")


def _function_behind(v):
    """The function object an ``address()`` stands for, when bind() made it
    from one for a function-pointer parameter; else None."""
    owner = v.owner
    if not is_function_object(owner):
        return None
    if isinstance(owner, Thunk):
        return owner if owner.address == v.value else None
    fn = as_function(owner)
    if v.value == fn.address or (fn.fixed and v.value == fn._thunk().address):
        return owner
    return None


def _travelling(t, i, v):
    """What goes into the pickle for the bound value ``v`` of parameter i
    (ARG, None, arrays, scalars and markers: v itself, at the end)."""
    arr = _numpy_ctypes_array(v)
    if arr is not None:
        return arr
    if isinstance(v, memoryview) or (type(v).__module__ == "mmap"):
        raise PicklingRefused(
            f"cannot pickle the thunk: {_param_label(t, i)} is bound to a "
            f"{type(v).__name__}, which pickle cannot carry; bind a NumPy array (of the "
            "memory it views, np.asarray(m), or a copy), which travels as a copy")
    if isinstance(v, Address):
        behind = _function_behind(v)
        if behind is None and _is_pointer_object(v.owner):
            v = v.owner
        elif behind is None:
            raise PicklingRefused(
                f"cannot pickle the thunk: {_param_label(t, i)} is bound to a raw "
                f"address({v.value:#x}), which means nothing in another process; bind the "
                "array itself (it travels as a copy), or a function by name "
                "(Function.from_library, a @cfunc in an importable module)")
        else:
            v = behind
    if isinstance(v, Thunk):
        return v
    if is_function_object(v):
        fn = as_function(v)
        try:
            locate(fn)
        except PicklingRefused as exc:
            raise PicklingRefused(f"cannot pickle the thunk: {_param_label(t, i)} is bound "
                                  f"to {exc}") from None
        return fn
    if _is_pointer_object(v):
        raise PicklingRefused(f"cannot pickle the thunk: {_param_label(t, i)} is bound to a "
                              f"{type(v).__name__} pointer, an address in this process; bind "
                              "a NumPy array instead (it travels as a copy)")
    return v


def _engine_of(t):
    # A thunk on libffi stays on libffi; a native one takes the other
    # process's default (the engine it can run there).
    return "ffi" if t.engine == "libffi" else None


# pickle follows a composed thunk's target and bound thunks recursively:
# about 5 levels of Python's recursion limit per thunk in the chain
_PICKLE_FRAMES_PER_LEVEL = 5


def _stack_depth():
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def _check_depth(t):
    """A clear refusal where pickle would run out of recursion following a
    deeply composed thunk (a bare RecursionError otherwise)."""
    limit = sys.getrecursionlimit()
    need = (t.chain + 1) * _PICKLE_FRAMES_PER_LEVEL
    if need > limit // 4 and need + _stack_depth() + 50 > limit:
        raise PicklingRefused(
            f"cannot pickle the thunk: it is composed {t.chain + 1} thunks deep (each "
            f"calling the next), and pickle follows each level recursively: that needs "
            f"a recursion limit of about {need + _stack_depth() + 50}, not {limit} "
            "(sys.setrecursionlimit)")


class TooDeeplyComposed(RecursionError):
    pass


def reduce_thunk(t):
    """``Thunk.__reduce__``: the target's recipe and the bound values, in one
    tuple (the pickle memo keeps an array and the markers made from it one
    object); a subclass's class and ``__dict__`` go with them."""
    if t.released:
        raise PicklingRefused("cannot pickle a released thunk (see docs/lifetime.md)")
    _check_depth(t)
    fn = t.target
    if not isinstance(fn, Function):
        raise PicklingRefused(f"cannot pickle the thunk: its target is a {type(fn).__name__}, "
                       "not a numthunk.Function")
    try:
        locate(fn)
    except PicklingRefused as exc:
        raise PicklingRefused(f"cannot pickle the thunk: {exc}") from None
    values = tuple(_travelling(t, i, v) for i, v in enumerate(t.bindings))
    if type(t) is Thunk:
        return (_thunk_from_recipe, (fn, values, _engine_of(t)))
    return (_thunk_from_recipe, (fn, values, _engine_of(t), type(t)),
            getattr(t, "__dict__", None) or None)


# The copy made of each unpickled array that needed one, by the identity of
# the unpickled array, for as long as it lives: the thunks of one pickle
# that share an array (the pickle memo gives them one object, alive until
# the load ends) share its copy too.
# Its check-then-delete runs under _copies_lock: without a GIL, a load in
# another thread may replace the entry between the two.
_copies = {}
_copies_lock = threading.RLock()   # gone() may run inside, from the collector


def _owned_copy(a):
    key = id(a)
    hit = _copies.get(key)
    if hit is not None and hit[0]() is a:
        return hit[1]
    c = np.array(a, order="K")

    def gone(ref, key=key):
        with _copies_lock:
            if _copies.get(key, (None,))[0] is ref:
                del _copies[key]

    with _copies_lock:
        _copies[key] = (weakref.ref(a, gone), c)
    return c


def _own_arrays(values):
    """The unpickled arrays, each aligned and writeable: protocol 5 buffers
    (in band, or out of band as Dask sends them) come back as read-only
    views of a received frame at any alignment, which bind() would refuse
    for a non-const parameter or a typed pointer. Such an array is copied
    once per pickle, and every marker made from it, in any of the pickle's
    thunks, follows the copy."""

    def own(a):
        if not isinstance(a, np.ndarray) or (a.flags.aligned and a.flags.writeable):
            return a
        return _owned_copy(a)

    out = list(values)
    changed = False
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray):
            out[i] = own(v)
        elif type(v) in _DERIVED_TYPES:
            obj = own(v.obj)
            if obj is not v.obj:
                maker, args = _reduce_derived(v)
                out[i] = maker(obj, *args[1:])
        elif type(v) is Strided:
            obj = own(v.obj)
            if obj is not v.obj:
                out[i] = strided(obj)
        changed |= out[i] is not v
    return out if changed else values


def _bind_values(fn, values, engine, cls=None):
    if fn.fixed:
        values = [values[i] for i in fn._user_params]
    if cls is None or cls is Thunk:
        return bind(fn, *values, engine=engine)
    # a subclass of Thunk: made by its own constructor, as bind() makes a Thunk
    if not (isinstance(cls, type) and issubclass(cls, Thunk)):
        raise pickle.UnpicklingError(f"{cls!r} is not a subclass of numthunk.Thunk")
    if fn.fixed:
        values = _with_fixed(fn, values)
    return cls(fn._signature, fn.address, tuple(values), fn, fn.nogil, fn.memoryviews,
               engine, fn.depends)


def _thunk_from_recipe(fn, values, engine, cls=None):
    return _bind_values(fn, _own_arrays(values), engine, cls)


def copy_thunk(t):
    """``copy.copy``: a new thunk, same target, the same bound objects (the
    same arrays, live: a read-only or unaligned array bound to a parameter
    that takes it is not copied either); a subclass's ``__dict__`` copied."""
    if t.released:
        raise ValueError("cannot copy a released thunk (see docs/lifetime.md)")
    new = _bind_values(t.target, t.bindings, _engine_of(t), type(t))
    state = getattr(t, "__dict__", None)
    if state:
        new.__dict__.update(state)
    return new


def deepcopy_thunk(t, memo):
    """``copy.deepcopy``: a new thunk, same target, copies of the bound
    arrays, markers and ref cells (one copy per array, as in a pickle);
    functions, thunks' targets and raw addresses are shared as they are; a
    subclass's ``__dict__`` deep-copied."""
    if t.released:
        raise ValueError("cannot copy a released thunk (see docs/lifetime.md)")
    try:
        return _deepcopy_thunk(t, memo)
    except TooDeeplyComposed:
        raise
    except RecursionError:
        raise TooDeeplyComposed(
            "copy.deepcopy of a composed thunk: the thunks bound into one another nest "
            "deeper than copy can follow within Python's recursion limit "
            f"({sys.getrecursionlimit()}); raise it with sys.setrecursionlimit()") from None


def _deepcopy_thunk(t, memo):
    values = []
    for v in t.bindings:
        if isinstance(v, Address):
            behind = _function_behind(v)
            # a bound thunk is copied with its arrays; anything else an
            # address stands for is shared
            values.append(copy.deepcopy(behind, memo) if isinstance(behind, Thunk) else v)
        elif v is ARG or (is_function_object(v) and not isinstance(v, Thunk)) \
                or _is_pointer_object(v):
            values.append(v)
        else:
            arr = _numpy_ctypes_array(v)
            values.append(copy.deepcopy(arr if arr is not None else v, memo))
    new = _thunk_from_recipe(t.target, tuple(values), _engine_of(t), type(t))
    state = getattr(t, "__dict__", None)
    if state:
        new.__dict__.update(copy.deepcopy(state, memo))
    return new


# ---------------------------------------------------------------- markers
#
# Registered with copyreg so that pickle, cloudpickle and copy.deepcopy all
# rebuild a marker through its public constructor from its public fields.


def _reduce_derived(d):
    if d.kind == "size":
        return (size, (d.obj,))
    if d.kind == "shape":
        return (shape, (d.obj, d.axis))
    return (stride, (d.obj, d.axis, d.elements))


def _reduce_strided(s):
    return (strided, (s.obj,))


def _reduce_ref(r):
    return (ref, (r.value, r.ctype))


class _LocalOwner:
    """An address's owner inside a reduction: copy.deepcopy shares it (an
    address stays valid in this process), pickle refuses it."""

    __slots__ = ("address",)

    def __init__(self, address):
        self.address = address

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise PicklingRefused(f"cannot pickle {self.address!r}: a raw address means nothing in "
                       "another process; bind the array itself (it travels as a copy)")


def _address_again(value, holder):
    return Address(value, holder.address.owner, nogil=holder.address.nogil)


def _reduce_address(a):
    return (_address_again, (a.value, _LocalOwner(a)))


_probe = np.zeros(1)
_DERIVED_TYPES = frozenset({type(size(_probe)), type(shape(_probe, 0)),
                            type(stride(_probe, 0))})
del _probe


def _forwarded():
    return ARG


def _reduce_arg(_arg):
    # by a function of this module: a reduction to the name "ARG" alone
    # makes pickle search every module for it when the type has no
    # __module__ of its own (a C type's instances have none)
    return (_forwarded, ())


def _register():
    _api._set_recipes(sys.modules[__name__])
    copyreg.pickle(type(ARG), _reduce_arg)
    for t in _DERIVED_TYPES:
        copyreg.pickle(t, _reduce_derived)
    copyreg.pickle(Strided, _reduce_strided)
    copyreg.pickle(Ref, _reduce_ref)
    copyreg.pickle(Address, _reduce_address)


_register()


"""The public API: targets, binding markers, bind() and the Thunk type.

The C core does the checking and the code; this layer turns the objects
users already have (ctypes and cffi functions and pointers, Numba cfuncs,
capsules, ``arr.ctypes``) into what the core takes, importing each of those
libraries only when an object of theirs shows up.
"""

import ctypes
import functools
import operator
import weakref

import numpy as np

from . import _cffi, _core, _ctypes, _foreign, _loader, _numba, _numba_sig
from ._cython import parse_memview
from ._signature import Signature, ctypes_prototype, param_label, scipy_text

__all__ = [
    "ARG", "Function", "Thunk", "bind", "size", "shape", "stride", "strided",
    "ref", "address", "Ref", "Address", "unpack",
]

# Pickling and copying by recipe are numthunk._recipe's, which sits above
# this module: it hands itself over once, when the package is imported
# (numthunk/__init__.py imports it), so that no import here goes upward.
_recipes = None


def _set_recipes(module):
    global _recipes
    _recipes = module


# ---------------------------------------------------------------- markers

# The markers are types of the C core: converting a bound value never calls
# back into this package.
ARG = _core.ARG
"""Forward this parameter: the thunk takes it from its own caller, in order."""

_Derived = _core.Derived
Strided = _core.Strided
Address = _core.Address
_new_thunk = _core._new_thunk
address = Address


def _unwrap_array(obj):
    if type(obj) is np.ndarray:
        return obj
    if isinstance(obj, Strided):
        return obj.obj
    arr = _numpy_ctypes_array(obj)
    return obj if arr is None else arr


def _index(value, what):
    """An integer argument: int or __index__, never a float truncated."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} "
                        f"{value!r}") from None


def _flag(value, what):
    """A yes/no argument: a bool (or 0/1), never a truthy string ("no")."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{what} must be True or False, got {type(value).__name__} {value!r}")


def _param_index(key, sig, what):
    """A 0-based parameter index given as a dict key (fixed=, memoryviews=):
    an int in range, never a float truncated or a bool."""
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
        raise TypeError(f"{what}: keys are 0-based parameter indexes (int), got "
                        f"{type(key).__name__} {key!r}")
    key = int(key)
    if not 0 <= key < sig.nargs:
        raise ValueError(f"{what}: parameter index {key} out of range (the signature "
                         f"'{sig}' has {sig.nargs} parameter{'' if sig.nargs == 1 else 's'}"
                         f"{f': 0 to {sig.nargs - 1}' if sig.nargs else ''})")
    return key


def _struct_sizes(structs):
    """{name: size in bytes} from Function(structs=...)."""
    if not structs:
        return None
    out = {}
    for name, layout in _mapping(structs, "structs=").items():
        if not isinstance(name, str) or not name or "\0" in name:
            raise TypeError(f"structs=: keys are struct names as the signature writes them "
                            f"('pair_t', or 'pt' for struct pt), got {name!r}")
        key = name[7:] if name.startswith("struct ") else \
            name[6:] if name.startswith("union ") else name
        out[key.strip()] = _foreign.struct_size(layout, f"structs={{{name!r}: ...}}")
    return out


class _Declared:
    """The owner of a Function's call thunk when the Function declares
    structs: what keeps the code alive, and the declarations (not the
    Function itself, which holds the call thunk)."""

    __slots__ = ("owner", "structs")

    def __init__(self, owner, structs):
        self.owner = owner
        self.structs = structs


def _structs_of(owner):
    """The struct declarations a thunk's target carries."""
    if isinstance(owner, (Function, _Declared)):
        return owner.structs
    return None


def _mapping(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict {{parameter index: ...}}, got "
                        f"{type(value).__name__}")
    return value


def _pointer_value(value, what):
    value = _index(value, what)
    if value < 0 or value >= 1 << (8 * ctypes.sizeof(ctypes.c_void_p)):
        raise OverflowError(f"{what} {value:#x} is not a valid pointer value (0 to "
                            f"2**{8 * ctypes.sizeof(ctypes.c_void_p)} - 1)")
    return value


def size(arr):
    """The number of elements of ``arr``, for an integer parameter. The
    value is read from the array bound elsewhere in the same call, and
    follows it when that parameter is rebound.

    >>> memset = nt.Function.from_library("libc.so.6", "memset",
    ...                                   "void *(void *s, int c, size_t n)")
    >>> buf = np.zeros(4, dtype=np.uint8)
    >>> _ = nt.bind(memset, buf, 7, nt.size(buf))()
    >>> buf
    array([7, 7, 7, 7], dtype=uint8)
    """
    return _Derived("size", arr if type(arr) is np.ndarray else _unwrap_array(arr))


def shape(arr, axis):
    """``arr.shape[axis]``, for an integer parameter (checked: the axis
    exists and the value fits the parameter's type).

    >>> memset = nt.Function.from_library("libc.so.6", "memset",
    ...                                   "void *(void *s, int c, size_t n)")
    >>> grid = np.zeros((2, 3), dtype=np.uint8)
    >>> _ = nt.bind(memset, grid, 1, nt.shape(grid, 1))()    # the first row only
    >>> grid
    array([[1, 1, 1],
           [0, 0, 0]], dtype=uint8)
    """
    return _Derived("shape", _unwrap_array(arr), axis)


def stride(arr, axis, elements=False):
    """``arr.strides[axis]`` in bytes (in elements with ``elements=True``),
    for an integer parameter: kernels that take a leading dimension or an
    increment.

    >>> memset = nt.Function.from_library("libc.so.6", "memset",
    ...                                   "void *(void *s, int c, size_t n)")
    >>> grid = np.zeros((2, 3), dtype=np.uint8)
    >>> _ = nt.bind(memset, grid, 5, nt.stride(grid, 0))()    # one row's bytes
    >>> grid
    array([[5, 5, 5],
           [0, 0, 0]], dtype=uint8)
    >>> nt.stride(grid, 0, elements=True)
    stride(array[uint8, 2x3], 0, elements=True)
    """
    return _Derived("stride", _unwrap_array(arr), axis, _flag(elements, "stride(elements=)"))


def strided(obj):
    """``strided(arr)``: bind a non-contiguous buffer's data pointer, for
    targets that also take its strides (a plain ``T *`` parameter refuses
    a non-contiguous array).

    >>> frexp = nt.Function.from_library("libm.so.6", "frexp", "double (double, int *)")
    >>> every_other = np.zeros(4, dtype=np.intc)[::2]
    >>> nt.bind(frexp, nt.ARG, nt.strided(every_other))(8.0)
    0.5
    >>> every_other
    array([4, 0], dtype=int32)
    """
    return Strided(_unwrap_array(obj))


class Ref:
    """``ref(value, ctype)``: a scalar the binding owns, passed by pointer
    (Fortran/BLAS-style ``int *n``). ``.value`` reads it back after a call
    (LAPACK's ``info``); assigning it changes the next call's input. Every
    call of the thunk shares this one cell. ``value`` is checked against
    ``ctype`` as a bound scalar is.

    >>> frexp = nt.Function.from_library("libm.so.6", "frexp", "double (double, int *)")
    >>> exponent = nt.ref(0, "int")
    >>> nt.bind(frexp, 24.0, exponent)()
    0.75
    >>> exponent.value
    5
    """

    __slots__ = ("ctype", "cell")

    def __init__(self, value, ctype):
        if not isinstance(ctype, str):
            raise TypeError(f"ref(): ctype must be C type text such as 'int' or 'double', "
                            f"got {type(ctype).__name__} {ctype!r}")
        if "\0" in ctype:
            raise ValueError(f"ref(): ctype {ctype!r} has a NUL byte")
        kind, checked = _numba_sig.type_call(_core._scalar, ctype, value)
        dtype = _KIND_DTYPE.get(kind)
        if dtype is None:
            raise TypeError(f"ref(): C type {ctype!r} cannot be held by reference")
        self.ctype = str(ctype)
        self.cell = np.array([checked], dtype=dtype)

    @property
    def value(self):
        return self.cell[0].item()

    @value.setter
    def value(self, v):
        _kind, checked = _numba_sig.type_call(_core._scalar, self.ctype, v)
        self.cell[0] = checked

    def __repr__(self):
        return f"ref({self.value!r}, {self.ctype!r})"


ref = Ref

_KIND_DTYPE = {k.name: np.dtype(k.dtype) for k in _core.kinds.values()}


def unpack(arr, *, strides=False, elements=False):
    """One array for a kernel that takes it as a pointer followed by its dims
    (the ``T* ptr, Py_ssize_t dim0, Py_ssize_t dim1`` wrapper pattern):
    ``bind(k, *unpack(x), ...)`` is ``bind(k, x, shape(x, 0), shape(x, 1), ...)``.
    ``strides=True`` appends each axis's stride (in bytes; in elements with
    ``elements=True``) and admits a non-contiguous array.

    >>> a = np.zeros((2, 3))
    >>> nt.unpack(a)[1:]
    (shape(array[float64, 2x3], 0), shape(array[float64, 2x3], 1))
    >>> len(nt.unpack(a[:, ::2], strides=True, elements=True))
    5
    """
    base = _unwrap_array(arr)
    ndim = getattr(base, "ndim", None)
    if ndim is None:
        try:
            ndim = memoryview(base).ndim
        except TypeError:
            raise TypeError(f"unpack(): expected an array (an ndarray or another buffer), "
                            f"got {type(base).__name__}") from None
    out = [Strided(base) if strides else arr]
    out += [shape(base, k) for k in range(ndim)]
    if strides:
        out += [stride(base, k, elements=elements) for k in range(ndim)]
    return tuple(out)


def _short(obj):
    if isinstance(obj, np.ndarray):
        return f"array[{obj.dtype}, {'x'.join(map(str, obj.shape)) or 'scalar'}]"
    return type(obj).__name__


# ---------------------------------------------------------------- targets


def _lowlevelcallable(address, csig, owner, signature, user_data, whose):
    """A ``scipy.LowLevelCallable`` of the function at ``address`` with C
    signature ``csig``, keeping ``owner`` alive (Thunk.lowlevelcallable and
    Function.lowlevelcallable)."""
    global _LowLevelCallable
    if _LowLevelCallable is None:
        from scipy import LowLevelCallable as _LowLevelCallable
    if signature is None:
        text = scipy_text(csig)
    else:
        # C text keeps its names (SciPy compares them) in the canonical
        # layout; Numba text, a Numba, ctypes or cffi signature becomes C
        # text first.
        text = str(Signature(signature))
        if Signature(text) != csig:
            raise ValueError(f"signature {text!r} does not match {whose} {csig}")
    if user_data is not None:
        return _LowLevelCallable(_core._capsule(address, text, owner), user_data)
    # SciPy's constructor without its search through the ctypes and cffi
    # forms (most of its cost): the tuple (a capsule of the same pointer and
    # name, the capsule, None). Its consumers read the first item's name,
    # pointer and context, the context as the callback's user data: NULL
    # here, where SciPy's constructor would take the capsule's context,
    # numthunk's holder of the owner.
    return _core._lowlevelcallable(_LowLevelCallable, address, text, owner)


_LowLevelCallable = None


class Function(_core.Function):
    """A C function at ``address`` with a known signature: a target for
    :func:`bind`, and callable from Python as it is.

    >>> import ctypes
    >>> libm = ctypes.CDLL("libm.so.6")
    >>> address = ctypes.cast(libm.sqrt, ctypes.c_void_p).value
    >>> sqrt = nt.Function(address, "double (double x)", owner=libm, name="sqrt")
    >>> sqrt(16.0)
    4.0
    >>> nt.bind(sqrt, 2.25)()
    1.5

    ``nogil``: whether the function may run without the GIL (shared-library
    and Numba functions may; Cython functions that build Python objects may
    not). ``owner`` is kept alive as long as this object and every thunk
    made from it. ``memoryviews`` declares ``__Pyx_memviewslice`` parameters
    ({index: 'double[:, ::1]'}); ``fixed`` binds parameters for good
    ({index: value}), hiding them from bind(). ``depends``: the thunks the
    function's code calls by their addresses (a Numba ``@cfunc`` that
    captured thunks as globals or closure variables: :func:`as_function`
    finds them); a thunk bound over this function depends on them: it holds
    them, counts them in its chain depth and takes their GIL need.
    ``structs`` declares the layout of the structs the function takes by
    pointer ({'pair_t': dtype}, a NumPy dtype, a ctypes Structure, a cffi
    type or a size in bytes): a ``pair_t *`` parameter then takes a NumPy
    structured array of that item size."""

    # address, _signature, nogil, memoryviews, fixed, depends and _carried
    # are fields of the core's Function (src/python/function.c), which
    # bind() reads as a C struct
    __slots__ = ("owner", "name", "structs", "_user_params", "_call_thunk", "_protocol_sig",
                 "_nbtype", "_recipe", "__weakref__")

    def __init__(self, address, signature, *, nogil=True, owner=None, name=None,
                 memoryviews=None, fixed=None, depends=(), structs=None):
        if isinstance(address, bool) or not isinstance(address, (int, np.integer)):
            raise TypeError(f"Function address must be an int, got {type(address).__name__}")
        address = _pointer_value(address, "Function address")
        if address == 0:
            raise ValueError("Function address is 0 (NULL)")
        sig = signature if isinstance(signature, Signature) else Signature(signature)
        self.address = address
        self._signature = sig
        self._protocol_sig = None
        self.nogil = _flag(nogil, "Function(nogil=)")
        self.owner = owner
        # the thunk this function is, when its owner is (or spells) the
        # thunk at this address: the core takes it rather than finding
        # whichever thunk holds the address when the function is bound
        self._carried = _carried_thunk(owner)
        self.name = name
        self.memoryviews = {}
        if memoryviews:
            kinds = sig._describe()[1]
            for k, v in _mapping(memoryviews, "memoryviews=").items():
                i = _param_index(k, sig, "memoryviews=")
                if kinds[i][0] != "memoryview slice":
                    raise ValueError(f"memoryviews=: parameter {i} ({sig.argtypes[i]}) is not "
                                     "a typed memoryview (__Pyx_memviewslice)")
                try:
                    self.memoryviews[i] = parse_memview(v)
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"memoryviews={{{i}: ...}}: {exc}") from None
        self.fixed = {_param_index(k, sig, "fixed="): v
                      for k, v in _mapping(fixed, "fixed=").items()}
        self.depends = (() if type(depends) is tuple and not depends
                        else _thunk_tuple(depends, "Function depends="))
        self.structs = _struct_sizes(structs)
        self._user_params = [i for i in range(sig.nargs) if i not in self.fixed]
        self._call_thunk = None
        self._nbtype = None
        self._recipe = None

    @classmethod
    def from_library(cls, library, symbol, signature, *, nogil=True, structs=None):
        """The function ``symbol`` of a shared library: ``library`` is a path,
        a name the dynamic loader resolves (``"libm.so.6"``, or ``"m"``
        through ``ctypes.util.find_library``) or a loaded ``ctypes.CDLL``.
        The library stays loaded while the Function or a thunk uses it. A
        missing library or symbol raises OSError naming both. Such a
        Function, and every thunk made from it, can be pickled: another
        process loads the library and finds the symbol again.

        Warning: unpickling one opens the library the pickle names, which
        runs its constructors, and calls the symbol with the signature the
        pickle gives. Unpickle only what comes from a source you trust
        (docs/travel.md).

        >>> import pickle
        >>> hypot = nt.Function.from_library("libm.so.6", "hypot", "double (double, double)")
        >>> pickle.loads(pickle.dumps(nt.bind(hypot, 3.0, nt.ARG)))(4.0)
        5.0
        """
        where = _loader.check_symbol(library, symbol)
        sig = signature if isinstance(signature, Signature) else Signature(signature)
        address, lib, spec = _loader.find(library, symbol, where)
        fn = Function(address, sig, nogil=nogil, owner=lib, name=symbol, structs=structs)
        fn._recipe = ("symbol", spec, symbol)
        return fn

    # Pickling by recipe (numthunk._recipe): the code is found again by
    # name in the other process. A Function names code, so copying one
    # gives the same object, as copying a Python function does.
    def __reduce__(self):
        return _recipes.reduce_function(self)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    @property
    def signature(self):
        """The target's C signature. Called, ``signature()`` is the Numba
        signature of this function as a Numba function value (see
        :meth:`Thunk.signature`)."""
        if self._protocol_sig is None:
            self._protocol_sig = _ProtocolSignature(self._signature, self)
        return self._protocol_sig

    @property
    def csig(self):
        """The signature callers see (without fixed parameters)."""
        if not self.fixed:
            return self._signature
        return self._thunk().csig

    def lowlevelcallable(self, signature=None, user_data=None):
        """A ``scipy.LowLevelCallable`` for this function, as
        :meth:`Thunk.lowlevelcallable` makes one (through its call thunk when
        parameters are fixed or memoryviews); it keeps this function alive.

        >>> from scipy import integrate
        >>> sqrt = nt.Function.from_library("libm.so.6", "sqrt", "double (double)")
        >>> round(integrate.quad(sqrt.lowlevelcallable(), 0.0, 1.0)[0], 12)
        0.666666666667
        """
        if self.fixed or self.memoryviews:
            thunk = self._thunk()
            return _lowlevelcallable(thunk.address, thunk.csig, thunk, signature, user_data,
                                     "the function's")
        _core._identify(self.address, self._signature, self._carried)
        return _lowlevelcallable(self.address, self._signature, self, signature, user_data,
                                 "the function's")

    # Numba's Wrapper Address Protocol (see Thunk). A Function with fixed
    # parameters or memoryviews is called through its call thunk.
    def __wrapper_address__(self):
        if self.fixed or self.memoryviews:
            return self._thunk()._wrapper_address_
        # a thunk's address (t.opaque(), owner=t, or a bare int): refused
        # as bind() and a call refuse it (released, using a released
        # thunk, collected, of another signature)
        _core._identify(self.address, self._signature, self._carried)
        return self.address

    _wrapper_address_ = property(__wrapper_address__)

    @property
    def _numba_type_(self):
        # read twice per call by Numba's dispatcher: cached on the Function
        t = self._nbtype
        if t is None:
            t = self._nbtype = _numba_type_of(self)
        return t

    def _thunk(self):
        # The call thunk keeps alive what keeps the code alive (owner), not
        # this Function: no reference cycle per Function.
        if self._call_thunk is None:
            args = (ARG,) * len(self._user_params)
            if self.fixed:
                args = _with_fixed(self, args)
            owner = self.owner if not self.structs else _Declared(self.owner, self.structs)
            self._call_thunk = Thunk(self._signature, self.address, args, owner,
                                     self.nogil, self.memoryviews, None, self.depends,
                                     self._carried)
        return self._call_thunk

    def __call__(self, *args):
        return self._thunk()(*args)

    def __repr__(self):
        name = f"{self.name} " if self.name else ""
        return f"<numthunk.Function {name}{self._signature} at {self.address:#x}>"


def _carried_thunk(obj):
    """The thunk that a function object (or a target's owner) stands for,
    or None: a thunk; a Function, capsule, ``t.ctypes``, ``t.cffi(ffi)`` or
    ``t.lowlevelcallable()`` made from one; an owner that is one of these.
    The core takes this thunk when its address is the one bound, released
    or not, and never looks the address up again (a released thunk's
    address may serve a new thunk once the quarantine let it go)."""
    for _ in range(32):         # owners of owners, bounded
        if isinstance(obj, _core.Thunk):
            return obj
        if isinstance(obj, Function):
            return obj._carried
        if isinstance(obj, _Declared):
            obj = obj.owner
        elif type(obj) is tuple and obj:        # bind(keep=): (function, keep)
            obj = obj[0]
        elif isinstance(obj, ctypes._CFuncPtr):
            obj = getattr(obj, "_numthunk_owner", None)
        elif type(obj).__name__ == "PyCapsule":
            obj = _core._capsule_owner(obj)
        elif _is_lowlevelcallable(obj):
            obj = tuple.__getitem__(obj, 0)     # its capsule
        elif _cffi.is_cdata(obj):
            obj = _cffi.owner_of(obj)
        else:
            return None
    return None


def _thunk_tuple(objs, what):
    if isinstance(objs, _core.Thunk):
        objs = (objs,)
    try:
        objs = tuple(objs)
    except TypeError:
        raise TypeError(f"{what} takes a tuple of thunks, got "
                        f"{type(objs).__name__}") from None
    for d in objs:
        if not isinstance(d, _core.Thunk):
            raise TypeError(f"{what} takes thunks, got a {type(d).__name__}")
    return objs


# The names DLPack gives the capsule an array's __dlpack__() returns, and
# the names a consumer renames it to once it has taken the tensor.
_DLPACK_CAPSULES = frozenset({"dltensor", "dltensor_versioned", "used_dltensor",
                              "used_dltensor_versioned"})


def _tensor_capsule(obj):
    """"a DLPack tensor capsule (...)" for a refusal where a function is
    wanted; None for any other object. A function's capsule is named by its
    C signature: read as one, a tensor's name is an unknown type."""
    if type(obj).__name__ != "PyCapsule":
        return None
    try:
        name = _core._capsule_pointer(obj)[1]
    except ValueError:
        return None                 # a name that is no text: refused as a target is
    if name not in _DLPACK_CAPSULES:
        return None
    return f"a DLPack tensor capsule ('{name}', what an array's __dlpack__() returns)"


# what to do instead, after "it holds an array, not a function; "
_TENSOR_NOT_FUNCTION = ("a function's capsule is named by its C signature "
                        "(t.lowlevelcallable().function is one), and an array goes to a "
                        "'const DLTensor *' parameter (docs/dlpack.md)")


def _capsule_target(capsule, nogil):
    tensor = _tensor_capsule(capsule)
    if tensor is not None:
        raise TypeError(f"cannot use {tensor} as a target: it holds an array, not a "
                        f"function; {_TENSOR_NOT_FUNCTION}")
    addr, name = _core._capsule_pointer(capsule)
    if not name:
        raise TypeError("the capsule has no name: a target capsule's name is its C "
                        "signature (pass numthunk.Function(address, signature) instead)")
    return Function(addr, Signature(name), nogil=False if nogil is None else nogil,
                    owner=capsule)


def _is_lowlevelcallable(obj):
    # without importing SciPy: a LowLevelCallable is a tuple subclass
    # (capsule, function, user_data)
    cls = type(obj)
    return (cls.__name__ == "LowLevelCallable" and cls.__module__.startswith("scipy.")
            and isinstance(obj, tuple))


def _lowlevelcallable_target(llc, signature, nogil):
    """The Function of a ``scipy.LowLevelCallable``: its capsule's function,
    named by its signature, with its ``user_data`` (the capsule's context,
    as SciPy's callers read it) fixed as the trailing ``void *`` where the
    signature ends with one. The Function holds the LowLevelCallable, which
    holds whatever the user data came from."""
    capsule = tuple.__getitem__(llc, 0)
    addr, name = _core._capsule_pointer(capsule)
    if signature is None and not name:
        raise TypeError("the LowLevelCallable's capsule has no name: pass signature=")
    sig = Signature(signature if signature is not None else name)
    nogil = False if nogil is None else nogil      # as a capsule: nothing says
    params = sig._describe()[1]
    last = len(params) - 1
    if last >= 0 and params[last][:3] == ("pointer", "void", 1):
        user_data = _core._capsule_context(capsule)
        return Function(addr, sig, nogil=nogil, owner=llc, name="LowLevelCallable",
                        fixed={last: _core.Address(user_data)})
    return Function(addr, sig, nogil=nogil, owner=llc, name="LowLevelCallable")


def _is_numba_cfunc(obj):
    return (type(obj).__module__.startswith("numba.")
            and hasattr(obj, "address") and hasattr(obj, "_sig"))


_cfunc_signatures = {}      # Numba signature -> numthunk Signature


def _cfunc_signature(cfunc):
    """The numthunk Signature of a Numba @cfunc object."""
    nbsig = cfunc._sig
    sig = _cfunc_signatures.get(nbsig)
    if sig is None:
        sig = _cfunc_signatures.setdefault(nbsig, Signature(_numba.signature_to_c(nbsig)))
    return sig


def _numba_target(thunk):
    """The Numba @cfunc a thunk calls, if its target is that @cfunc as it
    is (bind(cf, ...), with keep= or not; its own signature), else None."""
    fn = thunk.target
    owner = getattr(fn, "owner", None)
    if type(owner) is tuple and len(owner) == 2 and type(owner[0]) is Function:
        fn, owner = owner[0], owner[0].owner          # keep=: (fn, keep)
    if not _is_numba_cfunc(owner):
        return None
    if getattr(owner, "_numthunk_function", None) is fn:
        return owner                 # the @cfunc's own Function (as_function)
    if not fn.fixed and not fn.memoryviews and thunk.target_signature == _cfunc_signature(owner):
        return owner
    return None


def _cfunc_depends(cfunc):
    """The thunks a @cfunc's code calls: those it (or an @njit function it
    calls) compiled in as globals or closure variables. A Function stands
    for its call thunk, or for the thunk it was made from."""
    out = {}
    for obj in _numba.captured(cfunc):
        if isinstance(obj, Function):
            obj = obj._call_thunk if obj._call_thunk is not None else obj.owner
        if isinstance(obj, Thunk):
            out[id(obj)] = obj
    return tuple(out.values())


def as_function(target, signature=None, nogil=None):
    """The :class:`Function` behind any supported target."""
    if signature is None and nogil is None:
        # fast paths: a Function, or a target that already resolved (cfunc)
        if type(target) is Function:
            return target
        cached = getattr(target, "_numthunk_function", None)
        if cached is not None:
            return cached
    if isinstance(target, Function):
        if signature is not None or nogil is not None:
            raise TypeError("signature= and nogil= are for targets that do not carry "
                            "their own; this Function already has them")
        return target
    if isinstance(target, Thunk):
        return Function(target.address, target.csig,
                        nogil=target.nogil if nogil is None else nogil, owner=target,
                        structs=_structs_of(target.target))
    if isinstance(target, bool):
        raise TypeError("target must be a function, not bool")
    if isinstance(target, (int, np.integer)):
        if signature is None:
            raise TypeError("a bare address needs its C signature: "
                            "bind(numthunk.Function(address, 'double (double *, int)'), ...) "
                            "or bind(address, ..., signature=...)")
        return Function(target, signature, nogil=True if nogil is None else nogil)
    if _ctypes.is_function(target):
        sig = Signature(signature if signature is not None else target)
        return Function(_ctypes.address_of(target), sig,
                        nogil=True if nogil is None else nogil, owner=target,
                        name=getattr(target, "__name__", None),
                        structs=_foreign.declared_structs(target))
    if _is_lowlevelcallable(target):
        return _lowlevelcallable_target(target, signature, nogil)
    if type(target).__name__ == "PyCapsule":
        fn = _capsule_target(target, nogil)
        if signature is not None:
            fn = Function(fn.address, signature, nogil=fn.nogil, owner=target)
        return fn
    if _is_numba_cfunc(target):
        return _cfunc_function(target, signature, nogil)
    fn = _cffi_function(target, signature, nogil)
    if fn is not None:
        return fn
    if type(target).__module__.startswith("numba.") and hasattr(target, "py_func"):
        raise TypeError(f"cannot use the @njit function {target.py_func.__qualname__!r} as a "
                        "target: it has no C entry. Compile it as a @cfunc for the signature "
                        "the thunk calls (numba.cfunc('float64(float64)')(f.py_func), or "
                        "decorate it with @cfunc); @njit code calling a thunk over a @cfunc "
                        "inlines it")
    raise TypeError(f"cannot use a {type(target).__name__!r} object as a target: expected a "
                    "numthunk.Function, an int address with signature=, a ctypes or cffi "
                    "function pointer (or lib.f of a compiled cffi module), a capsule named "
                    "by its signature, a scipy.LowLevelCallable, a Numba @cfunc or a thunk")


def _cfunc_function(target, signature, nogil):
    """The Function of a Numba @cfunc (kept on it when the cfunc's own
    signature and GIL policy apply)."""
    sig = Signature(signature) if signature is not None else _cfunc_signature(target)
    fn = Function(target.address, sig, nogil=True if nogil is None else nogil,
                  owner=target, name=getattr(target, "__name__", None),
                  depends=_cfunc_depends(target))
    if signature is None and nogil is None:
        # Resolving a cfunc's signature costs more than making a thunk:
        # keep the Function on the cfunc (a cycle the GC collects).
        try:
            target._numthunk_function = fn
        except AttributeError:
            pass
    return fn


def _cffi_function(target, signature, nogil):
    """The Function of a cffi function (pointer) or of ``lib.f`` of a
    compiled cffi module; None for anything else."""
    if _cffi.is_cdata(target):
        addr = _cffi.function_address(target)
        sig = Signature(signature if signature is not None else target)
        return Function(addr, sig, nogil=True if nogil is None else nogil, owner=target,
                        structs=_foreign.declared_structs(target))
    api = _cffi.api_pointer(target)
    if api is None:
        return None
    # lib.f of a compiled cffi module: its module's ffi.addressof gives the
    # pointer and the declared type
    fn = as_function(api, signature, nogil)
    return Function(fn.address, fn._signature, nogil=fn.nogil, owner=target,
                    name=target.__name__, structs=fn.structs)


# ---------------------------------------------------------------- binding


def bind(target, *args, **options):
    """Bind ``args`` (one per target parameter; :data:`ARG` forwards) to
    ``target`` and return a :class:`Thunk` whose ``.address`` is a C
    function pointer with the forwarded parameters.

    ``signature``: for targets that do not carry one (a bare address).
    ``nogil``: override the target's GIL policy. ``engine``: 'native',
    'ffi' (or 'libffi') or 'auto' (default: NUMTHUNK_ENGINE, else native
    where the platform and the signature allow, else libffi). ``keep``: any object
    (or tuple of objects) the thunk holds as long as it lives, for memory
    the target reads that no bound argument owns.

    >>> hypot = nt.Function.from_library("libm.so.6", "hypot", "double (double, double)")
    >>> t = nt.bind(hypot, 3.0, nt.ARG)           # x bound, y forwarded
    >>> t.csig
    Signature('double (double)')
    >>> t(4.0)                                    # or call t.address from C
    5.0
    >>> nt.bind(hypot, 3.0, "4")
    Traceback (most recent call last):
    ...
    TypeError: argument 2 (double): expected a real number, got str
    """
    # The common case first, with nothing else before the core: a Function
    # and no keywords (keyword-only defaults alone would cost a tenth of a
    # bind). _new_thunk is Thunk(...) by position without the argument tuple.
    # numthunk.bind makes this case in C (the _Binder at the end of this
    # module) and calls this function for the others.
    if not options and type(target) is Function and not target.fixed:
        return _new_thunk(Thunk, target._signature, target.address, args, target,
                          target.nogil, target.memoryviews, None, target.depends,
                          target._carried)
    for k in options:
        if k not in _BIND_OPTIONS:
            raise TypeError(f"bind() got an unexpected keyword argument {k!r}")
    return _bind(target, *args, **options)


_BIND_OPTIONS = ("signature", "nogil", "engine", "keep")


def _bind(target, *args, signature=None, nogil=None, engine=None, keep=None):
    # bind() beyond its common case
    if type(target) is Function and signature is None and nogil is None:
        fn = target
    else:
        fn = as_function(target, signature, nogil)
    if engine is not None and type(engine) is not str:
        raise TypeError("bind(): engine= must be a str ('native', 'ffi', 'libffi' or 'auto') "
                        f"or None, not {type(engine).__name__}")
    if fn.fixed:
        args = _with_fixed(fn, args)
    if keep is not None:
        # the thunk holds its target object, and this one holds keep
        fn = Function(fn.address, fn._signature, nogil=fn.nogil, owner=(fn, keep),
                      name=fn.name, memoryviews=fn.memoryviews or None,
                      depends=fn.depends, structs=fn.structs)
    # Positional: keyword parsing would be a fifth of the creation cost.
    # Values the core does not convert itself go through
    # Thunk._resolve_values first. The core finds a target that is a thunk
    # by its address; fn.depends names the thunks the target's code uses.
    # _new_thunk is Thunk(...) by position without the argument tuple.
    return _new_thunk(Thunk, fn._signature, fn.address, args, fn, fn.nogil, fn.memoryviews,
                      engine, fn.depends, fn._carried)


# inspect.signature (and the docs) follow __wrapped__: the keywords bind() takes.
bind.__wrapped__ = _bind


def _with_fixed(fn, args):
    if len(args) != len(fn._user_params):
        raise TypeError(f"the target '{fn.csig}' takes {len(fn._user_params)} "
                        f"argument(s), got {len(args)}")
    full = [None] * fn._signature.nargs
    for i, v in fn.fixed.items():
        full[i] = v
    for i, v in zip(fn._user_params, args):
        full[i] = v
    return tuple(full)


class Thunk(_core.Thunk):
    """A C function pointer with some arguments bound, made by :func:`bind`.

    ``.address``: the C address (it does not keep the thunk alive: keep
    the thunk for as long as C code may call it); ``.csig``: its own
    signature; ``.ctypes``: a ctypes function pointer that keeps it alive;
    ``thunk(*forwarded)``: call it from Python; ``rebind(i, value)``,
    ``reclaim()``, ``release()``; a context manager that releases it.
    ``.dependencies``: the thunks it uses (and holds). SciPy routines
    (``quad``, ``ndimage``) take ``t.lowlevelcallable()``: given the thunk
    itself, they call it through Python at every point.

    >>> frexp = nt.Function.from_library("libm.so.6", "frexp", "double (double, int *e)")
    >>> e = np.zeros(1, dtype=np.intc)
    >>> with nt.bind(frexp, nt.ARG, e) as t:
    ...     t(8.0), int(e[0])
    (0.5, 4)
    >>> t.released
    True
    """

    __slots__ = ()

    @property
    def ctypes(self):
        """A ctypes function pointer to the thunk, of its signature; it keeps
        the thunk alive.

        >>> hypot = nt.Function.from_library("libm.so.6", "hypot", "double (double, double)")
        >>> nt.bind(hypot, 3.0, nt.ARG).ctypes(4.0)
        5.0
        """
        return _ctypes.thunk_pointer(ctypes_prototype(self.csig), self)

    def cffi(self, ffi):
        """A cffi function pointer (``ffi``'s cdata) to this thunk, which
        keeps the thunk alive as long as the cdata lives: pass it where a
        cffi function takes a function pointer (``lib.f(t.cffi(ffi))``)."""
        return _foreign.cffi_pointer(self, ffi)

    # Numba's Wrapper Address Protocol: a thunk is a function value in
    # nopython code (argument, global, closure variable, tuple item).
    # numthunk._numba registers the class with Numba when a thunk first
    # meets it; the type is cached per signature.
    def __wrapper_address__(self):
        return self._wrapper_address_

    @property
    def signature(self):
        """The thunk's C signature, like ``csig``. Called, ``signature()``
        is its Numba signature: Numba's Wrapper Address Protocol calls
        ``obj.signature()``."""
        return _ProtocolSignature(self.csig, self)

    # _numba_type_ is a C getter on the base type: Numba reads it twice per
    # argument on every call, and the C getter caches the type on the thunk
    # (the hook below makes it the first time).

    # What Numba's unboxing reads is _core.Thunk._wrapper_address_, a C
    # getter: the address, refused (ValueError) once the thunk or one it
    # uses is released, as a call through thunk(...) is.

    # Pickling by recipe: the target by name, the bound values as values
    # (numthunk._recipe). copy.copy: a new thunk on the same target and the
    # same bound objects; copy.deepcopy: on copies of them.
    def __reduce__(self):
        return _recipes.reduce_thunk(self)

    def __copy__(self):
        return _recipes.copy_thunk(self)

    def __deepcopy__(self, memo):
        return _recipes.deepcopy_thunk(self, memo)

    def lowlevelcallable(self, signature=None, user_data=None):
        """A ``scipy.LowLevelCallable`` for this thunk. Its signature string
        is the thunk's C signature, spelled as SciPy's routines compare it,
        unless given (it must then equal the thunk's).

        >>> from scipy import integrate
        >>> hypot = nt.Function.from_library("libm.so.6", "hypot", "double (double, double)")
        >>> f = nt.bind(hypot, 0.0, nt.ARG)                  # |y|
        >>> round(integrate.quad(f.lowlevelcallable(), -1.0, 1.0)[0], 12)
        1.0
        """
        return _lowlevelcallable(self.address, self.csig, self, signature, user_data,
                                 "the thunk's")

    def rebind(self, key, value):
        """Replace a bound value (by parameter index or name); ``.address``
        does not change. Values derived from the array the parameter held
        (``size(arr)`` and the like) follow the new array. The values
        replaced stay until :meth:`reclaim` or release (a call in flight
        may read them).

        >>> memset = nt.Function.from_library("libc.so.6", "memset",
        ...                                   "void *(void *s, int c, size_t n)")
        >>> a, b = np.zeros(2, dtype=np.uint8), np.zeros(3, dtype=np.uint8)
        >>> t = nt.bind(memset, a, 9, nt.size(a))
        >>> t.rebind("s", b)                          # size(a) now reads b: 3
        >>> _ = t()
        >>> a, b
        (array([0, 0], dtype=uint8), array([9, 9, 9], dtype=uint8))
        >>> t.reclaim()
        """
        i = self._needs_resolve(key, value)
        if i is not None:
            value = _resolve(self.target_signature, (value,), (0,), index=i,
                             structs=_structs_of(self.target))[0]
        return _core.Thunk.rebind(self, key, value)

    @classmethod
    def _resolve_values(cls, sig, values, owner=None):
        # called by the core before a thunk is made, when some values are
        # foreign (see _resolve); owner: the target's owner, whose struct
        # declarations apply
        return _resolve(sig, values, range(len(values)), structs=_structs_of(owner))

    def _resolve_call(self, args):
        # called by the core, before the call starts, for forwarded values
        # it does not know
        sig = self.target_signature
        fwd = [i for i, v in enumerate(self.bindings) if v is ARG]
        out = list(args)
        structs = _structs_of(self.target)
        for k, i in enumerate(fwd[:len(out)]):
            out[k] = _resolve(sig, (out[k],), (0,), index=i, structs=structs)[0]
        return tuple(out)

    def _make_numba_type(self):
        # Made once per thunk (the core caches it): a thunk over a Numba
        # @cfunc gets a type that inlines its target (one per target and
        # binding pattern), any other the uniform type of its signature.
        opaque = _numba_type_of(self)
        cf = _numba_target(self)
        if cf is None:
            return opaque
        try:
            return _numba.inline_type(self, cf, opaque) or opaque
        except ValueError:
            if not self.released:
                raise
            # No context left to inline from. With the uniform type, Numba's
            # unboxing asks the address, which says the thunk has been
            # released, as for a thunk over C code; an error here would be
            # Numba's "non-precise type pyobject" instead.
            return opaque

    def opaque(self):
        """This thunk as a function value of the uniform Numba type of its
        signature (``self.csig.numba_type()``), which calls through the
        address: for a tuple that mixes thunks over different @cfuncs and
        is indexed at run time. A :class:`Function` at ``self.address``
        that holds the thunk.

        >>> from numba import cfunc, njit, types
        >>> @cfunc(types.float64(types.float64, types.float64))
        ... def scale(k, x):
        ...     return k * x
        >>> @cfunc(types.float64(types.float64, types.float64))
        ... def shift(k, x):
        ...     return k + x
        >>> @njit
        ... def pick(fns, i, x):
        ...     return fns[i](x)
        >>> fns = (nt.bind(scale, 2.0, nt.ARG).opaque(), nt.bind(shift, 2.0, nt.ARG).opaque())
        >>> pick(fns, 0, 5.0), pick(fns, 1, 5.0)
        (10.0, 7.0)
        """
        return Function(self.address, self.csig, nogil=self.nogil, owner=self)

    def __repr__(self):
        if self.released:
            return "<numthunk.Thunk (released)>"
        parts = []
        for v in self.bindings:
            parts.append("ARG" if v is ARG else _bound_repr(v))
        name = getattr(self.target, "name", None) or f"{self.target_address:#x}"
        return (f"<numthunk.Thunk {self.csig} -> {name}({', '.join(parts)}) "
                f"at {self.address:#x} [{self.engine}]>")


class _ProtocolSignature(Signature):
    """``fn.signature``: a C Signature that, called, gives the Numba
    signature of ``fn`` as a function value."""

    __slots__ = ("_of",)

    def __new__(cls, sig, of):
        self = super().__new__(cls, sig)
        self._of = weakref.ref(of)
        return self

    def __call__(self):
        of = self._of()
        if of is None:
            raise ReferenceError("the function this signature belongs to no longer exists")
        return _numba.function_type(of.csig).signature


def _bound_repr(v):
    if isinstance(v, np.ndarray):
        return _short(v)
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


# ---------------------------------------------------------------- adapters


def _numpy_ctypes_array(obj):
    """``arr.ctypes`` has no buffer protocol of its own; its array does."""
    if type(obj).__name__ == "_ctypes" and type(obj).__module__.startswith("numpy"):
        return getattr(obj, "_arr", None)
    return None


def _resolve(sig, values, indices, index=None, structs=None):
    """Foreign objects for pointer parameters, as values the core takes:
    ``ref()`` cells, ``arr.ctypes``, ctypes and cffi pointers and BitGenerators
    (numthunk._foreign), and functions (thunks,
    Functions, ctypes/cffi functions, capsules, @cfuncs) for function
    pointers. Anything else is left for the core to refuse with its
    message. ``index``: the parameter of a single value (rebind, calls);
    ``structs``: the target's struct declarations."""
    values = list(values)
    descs = sig._describe()[1]
    for k in indices:
        i = k if index is None else index
        values[k] = _resolve_one(values[k], sig, i, descs[i], structs)
    return tuple(values)


def is_function_object(v):
    """Whether v is a function (what ``as_function`` takes, an address
    aside): a thunk, a Function, a ctypes function pointer, a Numba @cfunc,
    a capsule, a cffi function (pointer) or ``lib.f`` of a compiled cffi
    module."""
    return (isinstance(v, (Thunk, Function, ctypes._CFuncPtr)) or _is_numba_cfunc(v)
            or type(v).__name__ == "PyCapsule"
            or _cffi.is_function(v) or _cffi.is_api_function(v))


def _resolve_one(obj, sig, i, desc, structs=None):
    if isinstance(obj, Ref):
        return obj.cell
    arr = _numpy_ctypes_array(obj)
    if arr is not None:
        obj = arr
    if not _foreign.is_foreign(obj):
        if desc[0] == "pointer" and desc[2] == 1:
            _foreign.refuse_objects(obj, sig, i)    # a ctypes value's Python objects
        # a buffer for a struct S * (resolve_struct leaves any other alone)
        obj = _foreign.resolve_struct(obj, sig, i, structs)
    if arr is not None:
        return obj
    fnsig = desc[5] if desc[0] == "function pointer" else None
    if fnsig is not None:
        if _cffi.is_cdata(obj) and not _cffi.is_function(obj):
            raise TypeError(f"{param_label(sig, i)}: a cffi data pointer or value cannot be "
                            f"bound to a function pointer (got cffi '{_cffi.cname(obj)}')")
        if is_function_object(obj):
            tensor = _tensor_capsule(obj)
            if tensor is not None:
                raise TypeError(f"{param_label(sig, i)}: {tensor} holds an array, not a "
                                f"function; {_TENSOR_NOT_FUNCTION}")
            fn = as_function(obj)
            # owner: the thunk the value stands for, when it is one (the
            # core takes that thunk, not the registry's at the address);
            # a Function's call thunk is found by its address
            carried = fn._carried
            if fn.fixed:
                fn, carried = as_function(fn._thunk()), None
            if fn._signature != fnsig:
                raise TypeError(f"{param_label(sig, i)}: expected a function '{fnsig}', "
                                f"got '{fn._signature}'")
            return Address(fn.address, owner=obj if carried is None else carried,
                           nogil=fn.nogil)
        return obj
    if _foreign.is_foreign(obj):
        # ctypes and cffi pointers, BitGenerators: one rule (pointee
        # checked, the pointer's value bound, the object held)
        r = _foreign.resolve(obj, sig, i)
        if r is not None:
            return r
    return obj


_NUMBA_TYPES = _numba.function_types


def _numba_type_of(obj):
    """What ``_numba_type_`` returns for a Function or Thunk. Numba's
    dispatcher probes that attribute with hasattr (C PyObject_HasAttr)
    before it reads it, and from CPython 3.13 an exception other than
    AttributeError inside the probe is printed as "Exception ignored" and
    dropped: a signature with no Numba equivalent answers AttributeError
    here (numthunk._numba.NoNumbaType), and Numba's typeof
    (numthunk._numba._typeof_numthunk) then raises the TypeError that says
    why."""
    csig = obj.csig
    t = _NUMBA_TYPES.get(csig)
    if t is None:
        try:
            t = _numba.function_type(csig)
        except TypeError as exc:
            raise _numba.NoNumbaType(f"no Numba type: {exc}") from exc
    return t


_numba.set_classes(Thunk, Function)


def _resolve_rebind(thunk, i, value):
    # called by the core's rebind (Thunk.rebind, the C API's numthunk_rebind)
    # for a value of parameter i it does not convert itself
    return _resolve(thunk.target_signature, (value,), (0,), index=i,
                    structs=_structs_of(thunk.target))[0]


# bind()'s common case (a Function without fixed parameters, no keywords)
# made in C: numthunk.bind is a core _Binder that makes that thunk itself,
# as bind() above would, and hands every other call to bind() unchanged.
# It carries bind()'s name, docstring and signature (__wrapped__).
bind = functools.update_wrapper(_core._Binder(bind, Function, Thunk), bind)

# What the core calls, handed over once: C never looks the package's classes
# or hooks up by name (docs/architecture.md, "The C/Python boundary").
_core._register(thunk_class=Thunk, resolve_values=Thunk._resolve_values,
                resolve_call=Thunk._resolve_call, resolve_rebind=_resolve_rebind,
                numba_type=Thunk._make_numba_type)

"""Bad input is refused at bind time with an exception that names the
parameter. One test per row; none may crash the interpreter (the whole
table also runs in a subprocess, so a crash is a failure, not an abort)."""

import ctypes
import re
import subprocess
import sys
import traceback

import numpy as np
import pytest

import numthunk as nt

from conftest import ENGINES

SUM = "double (const double *x, int n)"
WRITE = "void (double *x, double v, int n)"


def _misaligned():
    raw = np.zeros(8 * 5 + 1, dtype=np.uint8)
    return raw[1:].view(np.float64)


def _swapped():
    return np.arange(4.0).astype(">f8")


# (id, target function, signature, args, exception, text that must appear)
ROWS = [
    ("wrong-dtype", "f_d_pi", SUM, lambda: (np.arange(4, dtype=np.float32), 4), TypeError,
     "argument 1 (x: const double *): expected a buffer of float64"),
    ("wrong-dtype-int-width", "f_i_pii", "int (const int *a, int n)",
     lambda: (np.arange(4, dtype=np.int64), 4), TypeError, "argument 1 (a: const int *)"),
    ("wrong-signedness", "f_l_plz", "int64_t (const int64_t *p, int64_t k, size_t n)",
     lambda: (np.arange(4, dtype=np.uint64), 1, 4), TypeError, "argument 1 (p: const int64_t *)"),
    ("wrong-ndim", "f_d_pi", SUM, lambda: (np.zeros(3), nt.shape(np.zeros(3), 1)), ValueError,
     "argument 2 (n: int): shape(arr, 1) asks for axis 1 but the array has 1 dimension"),
    ("non-contiguous", "f_d_pi", SUM, lambda: (np.arange(8.0)[::2], 4), ValueError,
     "argument 1 (x: const double *): the buffer is not C-contiguous"),
    ("fortran-order", "f_d_pi", SUM, lambda: (np.asfortranarray(np.ones((3, 2))), 6), ValueError,
     "not C-contiguous"),
    ("read-only-to-non-const", "f_v_pdi", WRITE,
     lambda: (np.frombuffer(b"\0" * 32, dtype=np.float64), 1.0, 4), ValueError,
     "argument 1 (x: double *): the buffer is read-only"),
    ("byte-swapped", "f_d_pi", SUM, lambda: (_swapped(), 4), TypeError,
     "argument 1 (x: const double *): the buffer is in non-native byte order"),
    ("misaligned", "f_d_pi", SUM, lambda: (_misaligned(), 5), ValueError,
     "argument 1 (x: const double *): the buffer's data is not aligned to 8 bytes"),
    ("int8-overflow", "f_c_c", "int8_t (int8_t a)", lambda: (128,), OverflowError,
     "argument 1 (a: int8_t): 128 does not fit in a 8-bit C int8_t"),
    ("int16-overflow", "f_s_s", "int16_t (int16_t a)", lambda: (-32769,), OverflowError,
     "argument 1 (a: int16_t): -32769 does not fit in a 16-bit C int16_t"),
    ("int32-overflow", "f_d_pi", SUM, lambda: (np.zeros(2), 3000000000), OverflowError,
     "argument 2 (n: int): 3000000000 does not fit in a 32-bit C int"),
    ("uint32-overflow", "f_I_I", "unsigned int (unsigned int a)", lambda: (2**32,), OverflowError,
     "argument 1 (a: unsigned int): 4294967296 does not fit in a 32-bit unsigned C unsigned int"),
    ("int64-overflow", "f_l_l", "int64_t (int64_t a)", lambda: (2**63,), OverflowError,
     "argument 1 (a: int64_t): 9223372036854775808 does not fit in a 64-bit C int64_t"),
    ("numpy-scalar-overflow", "f_c_c", "int8_t (int8_t a)", lambda: (np.int32(1000),),
     OverflowError, "argument 1 (a: int8_t): 1000 does not fit"),
    ("negative-to-unsigned", "f_L_L", "uint64_t (uint64_t a)", lambda: (-1,), OverflowError,
     "argument 1 (a: uint64_t): -1 is negative but C uint64_t is unsigned"),
    ("bool-out-of-range", "f_B_B", "bool (bool b)", lambda: (2,), OverflowError,
     "argument 1 (b: bool): 2 is not a valid C bool"),
    ("float-to-int", "f_d_pi", SUM, lambda: (np.zeros(2), 2.0), TypeError,
     "argument 2 (n: int): expected an integer, got float 2.0"),
    ("numpy-float-to-int", "f_i_i", "int (int a)", lambda: (np.float32(1.5),), TypeError,
     "argument 1 (a: int): expected an integer, got numpy.float32"),
    ("float-beyond-flt-max", "f_f_f", "float (float a)", lambda: (1e39,), OverflowError,
     "argument 1 (a: float): 1e+39 is beyond the range of a C float"),
    ("huge-int-to-double", "f_d_d", "double (double a)", lambda: (10**400,), OverflowError,
     "argument 1 (a: double): "),
    ("str-to-double", "f_d_d", "double (double a)", lambda: ("1.5",), TypeError,
     "argument 1 (a: double): expected a real number, got str"),
    ("complex-to-double", "f_d_d", "double (double a)", lambda: (1j,), TypeError,
     "argument 1 (a: double): expected a real number, got complex"),
    ("str-to-int", "f_i_i", "int (int a)", lambda: ("3",), TypeError,
     "argument 1 (a: int): expected an integer, got str"),
    ("bare-int-to-pointer", "f_d_pi", SUM, lambda: (12345, 2), TypeError,
     "argument 1 (x: const double *): a bare int is not accepted as a pointer; wrap it "
     "explicitly: numthunk.address(12345)"),
    ("list-to-pointer", "f_d_pi", SUM, lambda: ([1.0, 2.0], 2), TypeError,
     "argument 1 (x: const double *): cannot bind a list object"),
    ("size-to-pointer", "f_d_pi", SUM, lambda: (nt.size(np.zeros(2)), 2), TypeError,
     "argument 1 (x: const double *): size(), shape() and stride() bind integer parameters only"),
    ("size-to-double", "f_d_d", "double (double a)", lambda: (nt.size(np.zeros(2)),), TypeError,
     "argument 1 (a: double): size(), shape() and stride() bind integer parameters only"),
    ("too-few-arguments", "f_d_pi", SUM, lambda: (np.zeros(2),), TypeError,
     "takes 2 arguments, got 1"),
    ("too-many-arguments", "f_d_pi", SUM, lambda: (np.zeros(2), 2, 3), TypeError,
     "takes 2 arguments, got 3"),
    ("buffer-to-double-pointer", "f_p_p", "void *(double **p)", lambda: (np.zeros(2),), TypeError,
     "argument 1 (p: double **): a buffer can be bound to a single-level pointer"),
    ("objects-to-void-pointer", "f_p_p", "void *(void *p)",
     lambda: (np.array([1, "a"], dtype=object),), TypeError,
     "argument 1 (p: void *): a buffer of Python objects (format 'O', as a NumPy array of "
     "dtype object exports): C code cannot read or write them; bind an array of plain data"),
    ("object-field-to-void-pointer", "f_p_p", "void *(void *p)",
     lambda: (np.zeros(2, dtype=[("x", "f8"), ("o", "O")]),), TypeError,
     "argument 1 (p: void *): the struct's field 'o' holds Python objects (format "
     "'T{d:x:O:o:}'): C code cannot read or write them; bind an array of plain data"),
]


class _Str(str):
    pass


class _Bytes(bytes):
    pass


@pytest.mark.parametrize("ctype, expected", [("float", "a real number"),
                                             ("double", "a real number"),
                                             ("float _Complex", "a complex number"),
                                             ("double _Complex", "a complex number")])
def test_text_and_none_are_no_number_bound_forwarded_or_rebound(cfn, ctype, expected):
    """None, str, bytes and bytearray (and their subclasses) are refused for
    every floating and complex parameter by one message, whether bound,
    rebound or passed to a forwarded one, though float() would read some
    of them (float("1.5"), float(b"2")). Nothing is called: the refusals
    come first."""
    fn = cfn("f_d_d", f"double ({ctype} z)")
    t = nt.bind(fn, 0.5)
    fwd = nt.bind(fn, nt.ARG)
    for bad in (None, "1.5", b"2", bytearray(b"2"), _Str("1"), _Bytes(b"1")):
        text = (f"argument 1 (z: {ctype}): expected {expected}, got "
                f"{type(bad).__name__}")
        for how in (lambda v: nt.bind(fn, v), lambda v: t.rebind("z", v), fwd):
            with pytest.raises(TypeError) as info:
                how(bad)
            assert str(info.value) == text, (how, bad)
    assert t.bindings[0] == 0.5


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input(cfn, row):
    _id, name, sig, args, exc, text = row
    fn = cfn(name, sig)
    with pytest.raises(exc) as info:
        nt.bind(fn, *args())
    assert text in str(info.value)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, memoryviews", [
    ("double", None), ("float", None), ("double complex", None), ("bool", None),
    ("const double *", None), ("void *", None), ("double **", None), ("double (*p)(double)", None),
    ("DLTensor *", None), ("const struct pt *", None), ("__Pyx_memviewslice", {0: "double[:]"})])
def test_derived_values_bind_integer_parameters_only(cfn, engine, ctype, memoryviews):
    # size(), shape() and stride() are refused by one message for every
    # parameter that is no integer, bound, forwarded and rebound
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    param = ctype if "(*p)" in ctype else f"{ctype} p"
    fn = nt.Function(addr, f"double ({param}, int n)", memoryviews=memoryviews)
    a = np.ones((2, 3))
    want = f"argument 1 (p: {fn.signature.argtypes[0]}): size(), shape() and stride() bind " \
        "integer parameters only"
    fwd = nt.bind(fn, nt.ARG, 6, engine=engine)
    for marker in (nt.size(a), nt.shape(a, 1), nt.stride(a, 0)):
        for make in (lambda m: nt.bind(fn, m, 6, engine=engine), fwd,
                     lambda m: nt._core.Thunk(fn._signature, addr, (m, 6), engine=engine,
                                              memviews={0: ("double", 1, None, False)}
                                              if memoryviews else None)):
            with pytest.raises(TypeError) as info:
                make(marker)
            assert str(info.value) == want
    # the integer parameter beside takes one
    assert nt.bind(fn, nt.ARG, nt.size(a), engine=engine).bindings[1].obj is a


LONE = "T\ud800"     # a lone surrogate: a str with no UTF-8 form

SURROGATE_ENTRIES = {
    "signature text": lambda f: nt.Signature(f"void ({LONE})"),
    "core signature text": lambda f: nt._core.Signature(f"void ({LONE})"),
    "typedef name": lambda f: nt.Signature("void (T)", {LONE: "int"}),
    "typedef type": lambda f: nt.Signature("void (T)", {"T": LONE}),
    "core typedef name": lambda f: nt._core.Signature("void (T)", {"T": "int", LONE: "int"}),
    "core typedef type": lambda f: nt._core.Signature("void (T)", {"T": "int", "U": LONE}),
    "Function signature": lambda f: nt.Function(f.address, LONE),
    "engine=": lambda f: nt.bind(f, 1, engine=LONE),
    "rebind by name": lambda f: nt.bind(f, 1).rebind(LONE, 2),
    "ref type": lambda f: nt.ref(1, LONE),
    "LowLevelCallable name": lambda f: nt._core._lowlevelcallable(tuple, f.address, LONE, None),
    "memoryview dtype": lambda f: nt.Thunk(nt.Signature("double (__Pyx_memviewslice, int)"),
                                           f.address, (np.zeros(3), 0), None, True,
                                           {0: (LONE, 1, None, False)}),
}


@pytest.mark.parametrize("entry", sorted(SURROGATE_ENTRIES))
def test_text_with_no_utf8_form_is_refused_where_the_core_reads_it(cfn, entry):
    # each str the core reads as C text: a lone surrogate raises
    # UnicodeEncodeError naming the character, and nothing is made
    fn = cfn("f_i_i", "int (int a)")
    with pytest.raises(UnicodeEncodeError, match=r"can't encode character '\\ud800' in "
                                                 r"position \d+: surrogates not allowed"):
        SURROGATE_ENTRIES[entry](fn)


def test_text_with_no_utf8_form_is_refused_in_a_declaration(cfn):
    # a memoryview's contiguity or declaration with a lone surrogate is no
    # spelling of one: refused by the declaration's own message
    addr = cfn("f_d_pi", "double (const double *x, int n)").address
    with pytest.raises(ValueError, match=r"^memoryview 0: contig must be 'C', 'F' or None, "
                                         r"got str 'T\\ud800'$"):
        nt.Thunk(nt.Signature("double (__Pyx_memviewslice, int)"), addr, (np.zeros(3), 0),
                 None, True, {0: ("double", 1, LONE, False)})
    with pytest.raises(ValueError, match=r"memoryview declaration 'T\\ud800': expected"):
        nt.Function(addr, "double (__Pyx_memviewslice, int)", memoryviews={0: LONE})


def test_unparsable_signature(cfn):
    with pytest.raises(ValueError, match="unknown type name 'dubble'"):
        cfn("f_d_d", "dubble (double)")


def test_varargs_signature():
    with pytest.raises(ValueError, match="variadic"):
        nt.Function(0x1000, "int (const char *, ...)")


def test_null_address():
    with pytest.raises(ValueError, match="NULL"):
        nt.Function(0, "double (double)")
    with pytest.raises(ValueError, match="NULL"):
        nt.bind(0, 1.0, signature="double (double)")


def test_int_target_without_signature():
    with pytest.raises(TypeError, match="needs its C signature"):
        nt.bind(0x1000, 1.0)


def test_unsupported_target():
    with pytest.raises(TypeError, match="cannot use a 'str' object as a target"):
        nt.bind("f_d_d", 1.0)


def test_lookalikes_of_supported_targets_are_refused_by_name():
    """A Numba @cfunc is known by its module and both of its attributes
    (address, _sig), not by any one of them: objects with some are refused
    with the message that lists what a target may be."""
    def lookalike(name, module, **attrs):
        return type(name, (), {"__module__": module, **attrs})()

    for obj in (lookalike("HasAddress", __name__, address=0x1000),
                lookalike("HasSig", __name__, _sig=None),
                lookalike("HasBoth", __name__, address=0x1000, _sig=None),
                lookalike("Dispatcher", "numba.core.registry"),
                lookalike("Addressed", "numba.core.ccallback", address=0x1000)):
        with pytest.raises(TypeError, match=rf"^cannot use a '{type(obj).__name__}' object as "
                                            rf"a target: expected a numthunk.Function"):
            nt.bind(obj, 1.0)


def test_ctypes_function_without_argtypes(lib):
    f = ctypes.CDLL(None).abs
    with pytest.raises(TypeError, match=r"^the ctypes function has no argtypes: set fn\.argtypes "
                                        r"and fn\.restype so its C signature is known$"):
        nt.bind(f, 1)
    f.argtypes = []                 # known: no parameters (not the right ones, never called)
    assert str(nt.bind(f).csig) == "int (void)"
    f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
    assert nt.bind(f, -3)() == 3


def test_forwarded_values_are_checked_on_call(cfn):
    t = nt.bind(cfn("f_d_pi", SUM), nt.ARG, nt.ARG)
    with pytest.raises(OverflowError, match="argument 2 \\(n: int\\)"):
        t(np.zeros(2), 2**40)
    with pytest.raises(TypeError, match="argument 1"):
        t(np.zeros(2, dtype=np.int32), 2)
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        t(np.zeros(2))


def test_whole_table_in_a_subprocess_does_not_crash(fixture_path):
    """If any row crashed the interpreter the in-process tests would abort
    the run; here a crash is a clean failure with the row in its output."""
    code = f"""
import ctypes, numpy as np, numthunk as nt, sys
sys.path.insert(0, {str(__file__.rsplit('/', 1)[0])!r})
import test_refusals as T
lib = ctypes.CDLL({fixture_path!r})
for _id, name, sig, args, exc, text in T.ROWS:
    fn = nt.Function(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value, sig, owner=lib)
    try:
        nt.bind(fn, *args())
    except exc:
        pass
    else:
        raise SystemExit('no error for ' + _id)
print('ok', len(T.ROWS))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"ok {len(ROWS)}"


# ------------------------------------------- exceptions raised while converting
#
# What a value's own __index__/__float__/__complex__ raises is a conversion
# failure (a TypeError naming the parameter, the original as __cause__)
# unless it says nothing about the value: KeyboardInterrupt, SystemExit and
# the rest of what is no Exception, MemoryError, RecursionError. Those pass
# unchanged, in bind, rebind and calls from Python, on both engines.

PASSING = [KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError, RecursionError]
# (fixture, signature, a good value, what the fixture returns for it)
SCALARS = [("f_i_i", "int (int a)", 7, 7), ("f_d_d", "double (double a)", 2.5, 2.5),
           ("f_d_D", "double (double complex a)", 1 + 2j, 21.0)]


class Raising:
    """A number whose every conversion raises ``exc``."""

    def __init__(self, exc):
        self.exc = exc

    def __index__(self):
        raise self.exc

    def __float__(self):
        raise self.exc

    def __complex__(self):
        raise self.exc


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("exc", PASSING, ids=lambda e: e.__name__)
@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: s[1])
def test_interrupts_and_resource_errors_pass_unchanged(cfn, engine, exc, scalar):
    name, sig, good, result = scalar
    fn = cfn(name, sig)
    with pytest.raises(exc) as info:
        nt.bind(fn, Raising(exc("from the value")), engine=engine)
    assert type(info.value) is exc and str(info.value) == "from the value"
    t = nt.bind(fn, good, engine=engine)
    with pytest.raises(exc) as info:
        t.rebind(0, Raising(exc("rebind")))
    assert type(info.value) is exc
    assert t() == result                       # the old value is still bound
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    with pytest.raises(exc) as info:
        fwd(Raising(exc("call")))
    assert type(info.value) is exc
    assert fwd(good) == result


@pytest.mark.parametrize("engine", ENGINES)
def test_ctrl_c_during_a_slow_conversion_is_a_keyboard_interrupt(cfn, engine):
    import signal

    class Slow:
        def __index__(self):
            signal.raise_signal(signal.SIGINT)   # Ctrl-C arrives while converting
            for _ in range(1000):
                pass
            return 3

    # Python's own handler, as in an interactive session (a run started in
    # the background, by nohup or by some CI runners, inherits SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        fn = cfn("f_i_i", "int (int a)")
        with pytest.raises(KeyboardInterrupt):
            nt.bind(fn, Slow(), engine=engine)
        with pytest.raises(KeyboardInterrupt):
            nt.bind(fn, nt.ARG, engine=engine)(Slow())
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: s[1])
def test_conversion_failures_name_the_parameter_with_the_cause(cfn, scalar):
    name, sig, _good, _result = scalar
    with pytest.raises(TypeError, match=r"argument 1 \(a: .*\): expected .*raised"
                                        r": ZeroDivisionError: inside$") as info:
        nt.bind(cfn(name, sig), Raising(ZeroDivisionError("inside")))
    cause = info.value.__cause__
    assert isinstance(cause, ZeroDivisionError)
    # the cause keeps its traceback, down to the frame that raised it
    frames = traceback.extract_tb(cause.__traceback__)
    assert frames and frames[-1].name in ("__index__", "__float__", "__complex__")
    # a cause with no text is named by its type alone
    with pytest.raises(TypeError, match=r"raised: ZeroDivisionError$"):
        nt.bind(cfn(name, sig), Raising(ZeroDivisionError()))

    class Unprintable(ZeroDivisionError):
        def __str__(self):
            raise RuntimeError("no text")

    # one whose str() raises: the message ends at "raised", the cause chained
    with pytest.raises(TypeError, match=r"^argument 1 \(a: .*\): expected .*\(\) raised$") as info:
        nt.bind(cfn(name, sig), Raising(Unprintable()))
    cause = info.value.__cause__
    assert type(cause) is Unprintable and info.value.__context__ is cause


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: s[1])
def test_a_cause_raised_in_c_without_a_traceback_is_chained_alone(cfn, engine, scalar):
    """A conversion slot that is a builtin (len here) raises from C, with no
    traceback: the cause is chained as it is, and nothing else is raised on
    the way (its context is the cause), in bind, rebind and a call."""
    class FromC:
        __index__ = __float__ = __complex__ = len

    name, sig, good, result = scalar
    fn = cfn(name, sig)
    t = nt.bind(fn, good, engine=engine)
    fwd = nt.bind(fn, nt.ARG, engine=engine)
    for attempt in (lambda: nt.bind(fn, FromC(), engine=engine),
                    lambda: t.rebind(0, FromC()), lambda: fwd(FromC())):
        with pytest.raises(TypeError) as info:
            attempt()
        cause = info.value.__cause__
        assert type(cause) is TypeError and cause.__traceback__ is None
        assert info.value.__context__ is cause and info.value.__suppress_context__
        assert str(info.value).startswith("argument 1 (a: ")
        slot = {"int": "index", "double": "float"}.get(sig.split()[0], "complex")
        if "complex" in sig:
            slot = "complex"
        assert str(info.value).endswith(f"FromC.__{slot}__() raised: TypeError: {cause}")
    assert t() == result and fwd(good) == result


# ------------------------------------------- values beyond a floating type


def test_values_that_convert_to_inf_are_refused_as_too_large(cfn):
    from decimal import Decimal
    from fractions import Fraction

    double = cfn("f_d_d", "double (double a)")
    for v in (Decimal("1e400"), Decimal("-1e400"), Fraction(10 ** 400, 3)):
        with pytest.raises(OverflowError, match=r"argument 1 \(a: double\): .* is too large "
                                                r"for a C double"):
            nt.bind(double, v)
    with pytest.raises(OverflowError) as info:      # the parameter's type, not double
        nt.bind(cfn("f_f_f", "float (float a)"), Decimal("1e400"))
    assert str(info.value) == ("argument 1 (a: float): Decimal('1E+400') is too large for a C "
                               "float (it converts to inf)")
    # infinite values are infinite, whatever their type
    assert nt.bind(double, Decimal("-Infinity"))() == float("-inf")
    assert nt.bind(double, float("inf"))() == float("inf")
    assert nt.bind(double, Decimal("1e300"))() == 1e300

    # a float, NumPy floating or complex value that is infinite is so by its
    # own value, not by comparing equal to inf (its == may say anything)
    class Apart:
        def __eq__(self, other):
            return False

        __hash__ = None

    class F(Apart, float):
        pass

    class F64(Apart, np.float64):
        pass

    class C(Apart, complex):
        pass

    class F32(Apart, np.float32):               # no float subclass
        pass

    class C64(Apart, np.complex64):             # no complex subclass
        pass

    float_ = cfn("f_f_f", "float (float a)")
    for v in (F("inf"), F("-inf"), F64("inf"), F32("-inf"), np.float16("inf")):
        assert nt.bind(double, v)() == float(v) and nt.bind(float_, v)() == float(v)
        assert nt.bind(double, nt.ARG)(v) == float(v)
    zz = cfn("f_d_D", "double (double complex a)")      # re z + 10 im z
    for v in (C(float("inf"), 1.0), C64(complex(float("inf"), 1.0))):
        assert nt.bind(zz, v)() == float("inf")


def test_complex_values_that_do_not_fit_say_so(cfn):
    from decimal import Decimal

    fn = cfn("f_d_D", "double (double complex a)")
    for v in (10 ** 400, -(10 ** 400), Decimal("1e400")):
        with pytest.raises(OverflowError, match=r"argument 1 \(a: double complex\): .* (does "
                                                r"not fit in|is too large for) a C double "
                                                "complex"):
            nt.bind(fn, v)
    with pytest.raises(TypeError) as info:
        nt.bind(fn, [1.0])
    assert str(info.value) == ("argument 1 (a: double complex): expected a complex number, got "
                               "a list of 1 item, which is not a scalar")
    assert nt.bind(fn, 3)() == 3.0 and nt.bind(fn, 2 + 1j)() == 12.0


# ------------------------------------------- ints, strs and dicts from the user


def test_target_addresses_out_of_range_name_the_range(cfn):
    sig = cfn("f_d_d", "double (double a)")._signature
    for bad in (-8, 2 ** 64 + 5, -(2 ** 70)):
        with pytest.raises(OverflowError, match=r"target address -?0x[0-9a-f]+ is not a valid "
                                                r"pointer value \(0 to 2\*\*64 - 1\)"):
            nt.Thunk(sig, bad, (1.0,))
    with pytest.raises(TypeError, match="target address must be an integer, got float"):
        nt.Thunk(sig, 4096.0, (1.0,))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rebind_key_that_names_no_parameter_says_which_do(cfn, engine):
    """A name that is no parameter's: the names there are, with their
    indexes, or that there are none (a Numba @cfunc names none), and the
    index form, which then works."""
    from numba import cfunc, types

    @cfunc(types.float64(types.float64, types.float64))
    def scale(k, x):
        return k * x

    t = nt.bind(scale, 2.0, nt.ARG, engine=engine)
    with pytest.raises(KeyError) as info:
        t.rebind("k", 3.0)                  # the Python name: not in the C signature
    assert info.value.args[0] == (
        "the target has no parameter named 'k': its signature names none of its parameters (a "
        "Numba @cfunc's never does); name one by its index, rebind(0, ...) to rebind(1, ...)")
    t.rebind(0, 3.0)
    assert t(2.0) == 6.0
    for sig, names in [("double (const double *x, int n)", "parameters are 'x' (0), 'n' (1)"),
                       ("double (const double *, int n)", "parameter is 'n' (1)")]:
        t = nt.bind(cfn("f_d_pi", sig), np.zeros(2), 2, engine=engine)
        with pytest.raises(KeyError) as info:
            t.rebind("c", 1)
        assert info.value.args[0] == (
            f"the target has no parameter named 'c'; its named {names}, and any parameter may "
            "be named by its index, rebind(0, ...) to rebind(1, ...)")
    with pytest.raises(KeyError) as info:
        nt.bind(cfn("f_d_d", "double (double)"), 1.0, engine=engine).rebind("x", 1.0)
    assert info.value.args[0] == (
        "the target has no parameter named 'x': its signature names none of its parameters (a "
        "Numba @cfunc's never does); name one by its index, rebind(0, ...)")


def test_rebind_keys_name_the_parameter_range(cfn):
    t = nt.bind(cfn("f_d_pi", SUM), np.zeros(2), 2)
    for bad in (2 ** 70, -(2 ** 70), 2, -1):
        with pytest.raises(IndexError, match=r"parameter index -?\d+ out of range \(the target "
                                             r"has 2 parameters: 0 to 1\)"):
            t.rebind(bad, 3)
    with pytest.raises(KeyError, match=r"no parameter named 'n\\+x00'"):
        t.rebind("n\0", 3)                      # not 'n', cut at the NUL
    for bad in (1.0, True, None):
        with pytest.raises(TypeError, match="by its index .int. or its name .str."):
            t.rebind(bad, 3)
    t.rebind("n", 1)
    assert t() == 0.0


def test_rebind_keeps_bound_parameters_bound_and_forwarded_ones_forwarded(cfn):
    t = nt.bind(cfn("f_d_pi", SUM), nt.ARG, 2)
    with pytest.raises(ValueError) as info:
        t.rebind(1, nt.ARG)
    assert str(info.value) == "rebind cannot turn a bound parameter into a forwarded one"
    with pytest.raises(ValueError) as info:
        t.rebind(0, np.ones(2))
    assert str(info.value) == ("parameter 0 is forwarded (numthunk.ARG), not bound; it cannot "
                               "be rebound")
    t.rebind(1, 1)                              # the bound one takes a value
    assert t(np.array([2.0, 5.0])) == 2.0


def test_derived_kind_is_one_of_three_names():
    a = np.zeros((2, 3))
    for kind in ("size", "shape", "stride"):
        assert nt._core.Derived(kind, a).kind == kind
    for kind in ("sizes", "siz", "Size", "", "length"):
        with pytest.raises(ValueError) as info:
            nt._core.Derived(kind, a)
        assert str(info.value) == f"Derived kind must be 'size', 'shape' or 'stride', not '{kind}'"


def test_a_size_marker_takes_no_axis():
    # size() is the whole array's: the core's Derived refuses an axis or
    # elements= for it (every size() pairs with the others by axis 0), and
    # takes them for shape and stride
    a = np.zeros((2, 3))
    for extra in ((1,), (0,), (None,), (0, True), (0, False)):
        with pytest.raises(TypeError) as info:
            nt._core.Derived("size", a, *extra)
        assert str(info.value) == "size() takes no axis and no elements="
    with pytest.raises(TypeError, match=r"^size\(\) takes no axis and no elements=$"):
        nt._core.Derived("size", a, elements=True)
    assert repr(nt._core.Derived("size", a, elements=False)) == "size(array[float64, 2x3])"
    assert repr(nt._core.Derived("size", a)) == "size(array[float64, 2x3])"
    assert nt._core.Derived("shape", a, 1).axis == nt._core.Derived("stride", a, 1, True).axis == 1


def test_marker_axes_out_of_range_name_the_range():
    a = np.zeros((2, 3))
    for make in (nt.shape, nt.stride):
        with pytest.raises(ValueError, match=r"axis 1180591620717411303424 is out of range "
                                             r"\(an array has at most 64 dimensions"):
            make(a, 2 ** 70)
    with pytest.raises(TypeError, match="stride\\(elements=\\) must be True or False"):
        nt.stride(a, 0, elements="no")


def test_fixed_and_memoryviews_keys_are_checked(cfn):
    addr = cfn("f_d_pi", SUM).address
    for bad, exc, text in [({"n": 1}, TypeError, "keys are 0-based parameter indexes"),
                           ({1.0: 1}, TypeError, "got float 1.0"),
                           ({True: 1}, TypeError, "got bool"),
                           ({2: 1}, ValueError, r"index 2 out of range .* 0 to 1"),
                           ({-1: 1}, ValueError, "index -1 out of range"),
                           ([1], TypeError, r"fixed= must be a dict")]:
        with pytest.raises(exc, match=text):
            nt.Function(addr, SUM, fixed=bad)
    mv = "void (__Pyx_memviewslice, int)"
    for bad, exc, text in [({0.0: "double[:]"}, TypeError, "got float"),
                           ({1: "double[:]"}, ValueError, r"parameter 1 \(int\) is not a typed "
                                                          "memoryview"),
                           ({5: "double[:]"}, ValueError, "out of range"),
                           ({0: 5}, TypeError, "expected text such as 'double"),
                           ({0: "double[:]\0"}, ValueError, "NUL")]:
        with pytest.raises(exc, match=text):
            nt.Function(addr, mv, memoryviews=bad)


def test_memoryview_declarations_through_the_core_are_checked(cfn):
    addr = cfn("f_d_pi", SUM).address
    sig = nt.Signature("void (__Pyx_memviewslice)")
    for bad, exc, text in [({0: "bad"}, TypeError, r"\(dtype, ndim, contig, const\), got str"),
                           ({"0": ("double", 1, None, False)}, TypeError, "keyed by 0-based"),
                           ({2 ** 70: ("double", 1, None, False)}, ValueError, "out of range"),
                           ({0: ("double", 1)}, TypeError, None)]:
        with pytest.raises(exc, match=text):
            nt.Thunk(sig, addr, (np.zeros(2),), None, True, bad)


def test_memoryview_declarations_through_the_core_are_a_dict(cfn):
    addr = cfn("f_d_pi", SUM).address
    spec = ("double", 1, None, False)
    for sig, values, goods in [(nt.Signature("void (__Pyx_memviewslice)"), (np.zeros(2),),
                                ({0: spec},)),
                               (nt.Signature("void (int n)"), (2,), ({}, None))]:
        for bad in ([spec], (spec,), "0", 0):
            with pytest.raises(TypeError) as info:
                nt.Thunk(sig, addr, values, None, True, bad)
            assert str(info.value) == "memviews must be a dict {index: spec}"
        for ok in goods:
            nt.Thunk(sig, addr, values, None, True, ok).release()


def test_a_target_returning_a_memoryview_slice_is_refused(cfn):
    addr = cfn("f_d_pi", SUM).address
    fn = nt.Function(addr, "__Pyx_memviewslice (int n)")
    for make in (lambda: nt.bind(fn, 1), lambda: nt.bind(fn, nt.ARG),
                 lambda: nt.Thunk(fn._signature, addr, (1,))):
        with pytest.raises(TypeError) as info:
            make()
        assert str(info.value) == "targets returning a memoryview slice are not supported"
    # the slice as a parameter, and a pointer result, are accepted (never called)
    nt.bind(nt.Function(addr, "void (__Pyx_memviewslice a)", memoryviews={0: "double[:]"}),
            nt.ARG).release()
    nt.bind(nt.Function(addr, "void *(int n)"), 1).release()


def test_memoryview_declarations_through_the_core_find_every_memoryview_parameter(cfn):
    # the core looks for memoryview parameters in every position, the last
    # one too; a signature without any takes no declaration at all
    addr = cfn("f_d_pi", SUM).address
    spec = ("double", 1, None, False)
    last = nt.Signature("void (int n, __Pyx_memviewslice a)")
    for values in [(nt.ARG, nt.ARG), (3, np.zeros(2))]:
        nt.Thunk(last, addr, values, None, True, {1: spec}).release()
    with pytest.raises(ValueError, match="memoryview declaration for parameter 0, which is "
                                         "not a __Pyx_memviewslice parameter"):
        nt.Thunk(last, addr, (3, np.zeros(2)), None, True, {0: spec})
    for sig, values in [(nt.Signature(SUM), (np.zeros(2), 2)), (nt.Signature("void (int n)"),
                        (2,)), (nt.Signature("void (void)"), ())]:
        nt.Thunk(sig, addr, values, None, True, {}).release()
        with pytest.raises(ValueError, match="memoryview declarations given, but the signature "
                                             "has no __Pyx_memviewslice parameter"):
            nt.Thunk(sig, addr, values, None, True, {0: spec})


def test_core_thunk_by_position_refuses_what_is_no_signature_or_tuple(cfn):
    # by position, from the fewest arguments (3) to all of them (8): one
    # message saying what each of the first three must be
    addr = cfn("f_d_d", "double (double a)").address
    sig = nt.Signature("double (double a)")
    rest = (None, True, None, None, None)
    for first in [("double (double)", addr, (1.0,)), (sig, addr, [1.0]), (sig, addr, None)]:
        for n in range(3, 9):
            with pytest.raises(TypeError, match=r"^Thunk\(signature, address, args: tuple, "
                                                r"\.\.\.\)$"):
                nt._core.Thunk(*(first + rest)[:n])
    for n in range(3, 9):
        nt._core.Thunk(*((sig, addr, (1.0,)) + rest)[:n]).release()
    # nogil (the fifth) is read by its truth, any object's, or refused with
    # what its __bool__ raised
    class Unsure:
        def __bool__(self):
            raise ZeroDivisionError("no truth")

    for flag, want in ((True, True), (False, False), (0, False), (2, True), ("", False),
                       (np.bool_(False), False), (np.bool_(True), True), ([0], True)):
        for t in (nt._core.Thunk(sig, addr, (1.0,), None, flag),
                  nt._core._new_thunk(nt.Thunk, sig, addr, (1.0,), None, flag, None, None,
                                      None, None)):
            assert t.nogil is want and t() == 1.0
            t.release()
    with pytest.raises(ZeroDivisionError, match="no truth"):
        nt._core.Thunk(sig, addr, (1.0,), None, Unsure())
    with pytest.raises(ZeroDivisionError, match="no truth"):
        nt._core._new_thunk(nt.Thunk, sig, addr, (1.0,), None, Unsure(), None, None, None,
                            None)
    # bind()'s fast path reads a Function's nogil slot the same way (it is
    # assignable: a flag set after the Function was made)
    fn = cfn("f_d_d", "double (double a)")
    for flag, want in ((1, True), (0, False), ("", False), (np.bool_(True), True)):
        fn.nogil = flag
        t = nt.bind(fn, 1.0)
        assert t.nogil is want and t() == 1.0
    fn.nogil = Unsure()
    with pytest.raises(ZeroDivisionError, match="no truth"):
        nt.bind(fn, 1.0)


def test_ctypes_pointer_objects_reaching_the_core_are_refused_as_pointers(cfn):
    # a ctypes pointer exports the bytes of the pointer itself ('&<d', '<P',
    # '<z'): the core, given one without the package's resolution, says it
    # is a pointer, whatever parameter it meets
    addr = cfn("f_d_d", "double (double a)").address
    x = ctypes.c_double(1.0)
    value = "a ctypes pointer object is bound through its value"
    for sig, make, text in [
            ("double (const double *x)", lambda: ctypes.pointer(x), value),
            ("double (const double *x)", lambda: ctypes.c_void_p(8), value),
            ("double (const char *x)", lambda: ctypes.c_char_p(b"abc"), value),
            ("double (void *x)", lambda: ctypes.pointer(ctypes.c_int64(3)), value),
            ("double (const DLTensor *x)", lambda: ctypes.pointer(x), value),
            ("double (double (*x)(double))", lambda: ctypes.pointer(x),
             "a ctypes data pointer cannot be bound to a function pointer"),
            ("double (double (*x)(double))", lambda: ctypes.c_void_p(addr),
             "a ctypes data pointer cannot be bound to a function pointer")]:
        with pytest.raises(TypeError, match=rf"^argument 1 \(x: .*\): {text}"):
            nt._core.Thunk(nt.Signature(sig), addr, (make(),))


def test_ref_refuses_types_that_are_no_scalar_by_name():
    # a cell by reference holds a scalar: pointers, function pointers (by
    # their C text or Numba's), memoryviews and void are refused as such
    for ctype in ("double (*)(double)", "int (*)(void)", "FunctionType[float64(float64)]",
                  "double *", "void *", "__Pyx_memviewslice", "void"):
        for value in (0, None, nt.address(8)):
            with pytest.raises(TypeError, match=rf"^'{re.escape(ctype)}' is not a scalar C type$"):
                nt.ref(value, ctype)
    assert nt.ref(3, "int").value == 3


def test_flags_take_booleans_not_truthy_strings(cfn):
    addr = cfn("f_d_d", "double (double a)").address
    with pytest.raises(TypeError, match=r"nogil=\) must be True or False, got str 'no'"):
        nt.Function(addr, "double (double)", nogil="no")
    with pytest.raises(TypeError, match="must be True or False"):
        nt.bind(addr, 1.0, signature="double (double)", nogil="false")
    assert nt.Function(addr, "double (double)", nogil=0).nogil is False


def test_flags_given_as_numpy_booleans_are_kept_as_python_booleans(cfn):
    addr = cfn("f_d_d", "double (double a)").address
    for given, want in [(np.True_, True), (np.False_, False), (np.int64(1), True), (0, False)]:
        fn = nt.Function(addr, "double (double)", nogil=given)
        assert fn.nogil is want
        assert nt.bind(fn, 1.0).nogil is want
        assert nt.stride(np.zeros((2, 3)), 1, elements=given).elements is want


def test_ref_and_unpack_name_what_they_take():
    for bad in (None, 5, nt.Signature("int (int)")):
        with pytest.raises(TypeError, match="ref\\(\\): ctype must be C type text"):
            nt.ref(1, bad)
    with pytest.raises(ValueError, match="NUL"):
        nt.ref(1, "int\0junk")
    for bad in ([1.0, 2.0], 3, None):
        with pytest.raises(TypeError, match="unpack\\(\\): expected an array"):
            nt.unpack(bad)


@pytest.mark.parametrize("nargs", [0, 1, 2, 3])
def test_fixed_index_out_of_range_names_the_parameters_in_words(nargs):
    """The refusal counts the signature's parameters in words: 'has 0
    parameters', 'has 1 parameter: 0 to 0', 'has 2 parameters: 0 to 1'."""
    sig = nt.Signature(f"void ({', '.join(['int'] * nargs) or 'void'})")
    plural = "" if nargs == 1 else "s"
    span = f": 0 to {nargs - 1}" if nargs else ""
    for key in (nargs, -1):
        with pytest.raises(ValueError, match=re.escape(
                f"fixed=: parameter index {key} out of range (the signature '{sig}' has "
                f"{nargs} parameter{plural}{span})")):
            nt.Function(0x1000, sig, fixed={key: 1})


def test_function_address_must_be_an_int(cfn):
    addr = cfn("f_d_d", "double (double a)").address
    for bad, name in [(float(addr), "float"), (str(addr), "str"), (True, "bool"),
                      (False, "bool"), (None, "NoneType"), (ctypes.c_void_p(addr), "c_void_p")]:
        with pytest.raises(TypeError, match=rf"^Function address must be an int, got {name}$"):
            nt.Function(bad, "double (double a)")
    for good in (addr, np.uint64(addr), np.int64(addr)):
        assert nt.Function(good, "double (double a)")(2.5) == 2.5


def test_a_bool_is_no_target_even_with_a_signature(cfn):
    addr = cfn("f_d_d", "double (double a)").address
    for bad in (True, False):
        with pytest.raises(TypeError, match=r"^target must be a function, not bool$"):
            nt.bind(bad, 1.0, signature="double (double a)")
    assert nt.bind(addr, 1.5, signature="double (double a)")() == 1.5
    assert nt.bind(np.uint64(addr), 1.5, signature="double (double a)")() == 1.5


def test_a_function_takes_no_signature_or_nogil_from_bind(cfn):
    fn = cfn("f_d_d", "double (double a)")
    for kw in ({"nogil": False}, {"nogil": True}, {"signature": "double (double a)"}):
        with pytest.raises(TypeError, match=r"^signature= and nogil= are for targets that do "
                                            r"not carry their own; this Function already has "
                                            r"them$"):
            nt.bind(fn, 1.0, **kw)
    assert nt.bind(fn, 1.0, engine="ffi")() == 1.0
    # a thunk carries no GIL policy of its own to keep: nogil= applies
    t = nt.bind(nt.bind(fn, nt.ARG), 2.0, nogil=False)
    assert t.nogil is False and t() == 2.0


def test_a_capsule_without_a_name_is_no_target(cfn):
    new = ctypes.pythonapi["PyCapsule_New"]  # a private function object: its argtypes are ours
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    addr = cfn("f_d_d", "double (double a)").address
    unnamed = new(addr, None, None)
    with pytest.raises(TypeError, match=r"^the capsule has no name: a target capsule's name is "
                                        r"its C signature \(pass numthunk.Function\(address, "
                                        r"signature\) instead\)$"):
        nt.bind(unnamed, 1.0)
    name = b"double (double)"
    named = new(addr, name, None)
    assert nt.bind(named, 3.0)() == 3.0


def test_strided_of_what_is_no_array_is_refused_at_bind(cfn):
    fn = cfn("f_d_pzzzz", "double (const double *x, ptrdiff_t n0, ptrdiff_t n1, "
                          "ptrdiff_t s0, ptrdiff_t s1)")
    for inner in (5, 2.5, "abc", None):
        with pytest.raises(TypeError) as info:
            nt.bind(fn, nt.strided(inner), 1, 1, 8, 8)
        assert str(info.value) == ("argument 1 (x: const double *): strided() takes an array, "
                                   f"got {type(inner).__name__}")
    a = np.arange(4.0)
    assert nt.bind(fn, nt.strided(a[::2]), 1, 2, 0, 16)() == 2.0

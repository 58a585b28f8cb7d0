"""Text cut to fit a fixed buffer says that it was cut: parameter labels
(convert/value.c nt_param_label: names past 64 bytes, types past 159), a
marker's description of an array with more axes than its repr shows
(convert/markers.c short_repr), the description of a released thunk (life/released.c
plan_text, NT_WHAT_MAX = 224 bytes with its NUL), and the types and
signatures refusals name (convert/value.c, life/commit.c check_values), each at its
edge and one byte either side. On both engines where a thunk is made."""

import numpy as np
import pytest

import numthunk as nt

from thunks import bind

pytestmark = pytest.mark.guards

NAME_MAX = 64          # convert/value.c LABEL_NAME_MAX
TYPE_MAX = 159         # convert/value.c nt_param_label: char type[160]
WHAT_MAX = 223         # numthunk.h NT_WHAT_MAX - 1: the text of a released thunk
DIMS_SHOWN = 53        # convert/markers.c short_repr: axes of length 1 that fit dims[128]


# ---- parameter names ----

@pytest.mark.parametrize("length", [1, NAME_MAX - 1, NAME_MAX, NAME_MAX + 1, NAME_MAX + 2, 300,
                                    5000])
def test_a_parameter_name_is_shown_whole_up_to_64_bytes_then_cut_with_dots(cfn, engine,
                                                                           length):
    name = ("n" + "_abcdefghij" * 500)[:length]
    f = cfn("f_d_pi", f"double (const double *x, int {name})")
    shown = name if length <= NAME_MAX else name[:NAME_MAX] + "..."
    for bad, tail in [(2 ** 31, "2147483648 does not fit in a 32-bit C int"),
                      (-2 ** 31 - 1, "-2147483649 does not fit in a 32-bit C int")]:
        with pytest.raises(OverflowError) as info:
            bind(engine, f, np.zeros(2), bad)
        assert str(info.value).startswith(f"argument 2 ({shown}: int): {tail}"), str(info.value)
    t = bind(engine, f, np.zeros(2), 2 ** 31 - 1)    # the edge itself binds
    with pytest.raises(OverflowError) as info:
        t.rebind(1, 2 ** 31)
    assert str(info.value).startswith(f"argument 2 ({shown}: int): 2147483648 does not fit")
    t.release()


# ---- parameter types ----

def _fp_of_length(length):
    """'double (*)(double, ..., int, ...)' of exactly `length` characters:
    10 + 8 a + 5 b for a doubles and b ints."""
    for b in range(8):
        a, rest = divmod(length - 10 - 5 * b, 8)
        if rest == 0 and a >= 0 and a + b > 0:
            text = "double (*)(" + ", ".join(["double"] * a + ["int"] * b) + ")"
            assert len(text) == length
            return text
    raise AssertionError(length)


@pytest.mark.parametrize("length", [TYPE_MAX - 1, TYPE_MAX, TYPE_MAX + 1, TYPE_MAX + 2, 400])
def test_a_parameter_type_is_shown_whole_up_to_159_bytes_then_cut_with_dots(cfn, engine,
                                                                           length):
    fp = _fp_of_length(length)
    declared = fp.replace("(*)", "(*f)")
    f = cfn("f_d_Fddi", f"double ({declared}, double a, double b, int n)")
    assert f.signature.argtypes[0] == fp
    shown = fp if length <= TYPE_MAX else fp[:TYPE_MAX - 3] + "..."
    with pytest.raises(TypeError) as info:
        bind(engine, f, 5, 0.0, 1.0, 3)               # a bare int for a function pointer
    assert str(info.value).startswith(f"argument 1 (f: {shown}): a bare int is not accepted"), \
        str(info.value)
    assert len(f"argument 1 (f: {shown})") < 256


def test_a_label_with_the_longest_name_and_type_is_whole_to_its_parenthesis(cfn, engine):
    name = "p" * 5000
    fp = _fp_of_length(400)
    f = cfn("f_d_Fddi", f"double ({fp.replace('(*)', f'(*{name})')}, double a, double b, "
                        "int n)")
    with pytest.raises(TypeError) as info:
        bind(engine, f, 5, 0.0, 1.0, 3)
    label = f"argument 1 ({name[:NAME_MAX]}...: {fp[:TYPE_MAX - 3]}...): "
    assert str(info.value).startswith(label), str(info.value)


# ---- a marker's array ----

@pytest.mark.parametrize("axes", [1, DIMS_SHOWN - 1, DIMS_SHOWN, DIMS_SHOWN + 1,
                                  DIMS_SHOWN + 2, 64])
def test_a_marker_repr_shows_its_array_s_axes_and_says_when_some_are_left_out(axes):
    if axes > 32 and np.lib.NumpyVersion(np.__version__) < "2.0.0":
        pytest.skip("NumPy 1.x arrays have at most 32 axes")
    a = np.zeros((1,) * axes)
    shown = "x".join(["1"] * min(axes, DIMS_SHOWN)) + ("x..." if axes > DIMS_SHOWN else "")
    assert repr(nt.size(a)) == f"size(array[float64, {shown}])"
    assert repr(nt.shape(a, axes - 1)).startswith(f"shape(array[float64, {shown}], ")
    assert repr(nt.stride(a, 0)).startswith(f"stride(array[float64, {shown}], ")
    assert repr(nt.strided(a)) == f"strided(array[float64, {shown}])"


def test_a_marker_repr_of_long_axes_is_cut_after_the_axis_that_crosses_the_edge():
    if np.lib.NumpyVersion(np.__version__) < "2.0.0":
        pytest.skip("NumPy 1.x arrays have at most 32 axes")
    big = 10 ** 17                                    # 18 digits
    for ones in (40, 41, 42, 43, 44, 45):
        a = np.broadcast_to(np.zeros(()), (big,) + (1,) * ones)
        shown_ones = []
        text = str(big)
        for _ in range(ones):
            if len(text) >= 104:                      # convert/markers.c: used < sizeof(dims) - 24
                break
            text += "x1"
            shown_ones.append(1)
        cut = len(shown_ones) < ones
        want = text + ("x..." if cut else "")
        assert repr(nt.size(a)) == f"size(array[float64, {want}])", ones
    assert repr(nt.size(np.zeros(()))) == "size(array[float64, scalar])"


# ---- a released thunk's description ----

def _sig_of_length(length):
    """'double (double, ..., int, ...)' of exactly `length` characters:
    7 + 8 a + 5 b, a + b > 0."""
    for b in range(8):
        a, rest = divmod(length - 7 - 5 * b, 8)
        if rest == 0 and a >= 0 and a + b > 0:
            text = "double (" + ", ".join(["double"] * a + ["int"] * b) + ")"
            assert len(text) == length
            return text
    raise AssertionError(length)


def _released_description(cfn, engine, sig, extra=0):
    """The description a released thunk over sig is refused with when its
    address is bound to a function pointer. Its first parameters are
    forwarded; `extra` ints appended to sig are bound (to 0)."""
    target_sig = sig[:-1] + ", int" * extra + ")"
    target = cfn("f_d_d", target_sig)                 # never called
    nargs = len(target.signature.argtypes)
    t = bind(engine, target, *[nt.ARG] * (nargs - extra), *[0] * extra)
    assert str(t.csig) == sig and str(target.signature) == target_sig
    address = t.address
    fp = sig.replace(" (", " (*f)(", 1)
    outer = cfn("f_d_Fddi", f"double ({fp}, int n)")
    t.release()
    with pytest.raises(ValueError) as info:
        bind(engine, outer, nt.address(address), 1)
    text = str(info.value)
    head = "is a released thunk ("
    start = text.index(head) + len(head)
    end = text.index(f", target at 0x{target.address:x})")
    return text[start:end], f"{sig} over {target_sig}"


@pytest.mark.parametrize("total", [WHAT_MAX - 2, WHAT_MAX - 1, WHAT_MAX, WHAT_MAX + 1,
                                   WHAT_MAX + 2, WHAT_MAX + 3, 2 * WHAT_MAX])
def test_a_released_thunk_is_described_whole_up_to_223_bytes_then_cut_with_dots(cfn, engine,
                                                                               total):
    """The text is "OWN over TARGET": 2 L + 6 bytes when all is forwarded
    (the even totals), 2 L + 11 with one int bound (the odd ones)."""
    extra = total % 2
    own, _ = divmod(total - 6 - 5 * extra, 2)
    got, full = _released_description(cfn, engine, _sig_of_length(own), extra)
    assert len(full) == total
    assert got == (full if total <= WHAT_MAX else full[:WHAT_MAX - 3] + "...")


@pytest.mark.parametrize("own", [216, 217, 218, 220, 221, 223, 224, 225, 300])
def test_a_released_thunk_whose_own_signature_leaves_no_room_for_its_target(cfn, engine, own):
    """When " over " does not fit after the thunk's own signature, the
    target is left out and the text ends in dots all the same."""
    sig = _sig_of_length(own)
    got, full = _released_description(cfn, engine, sig)
    if own + 6 <= WHAT_MAX:                           # life/released.c: room for " over "
        assert got == full[:WHAT_MAX - 3] + "..."
    elif own + 3 <= WHAT_MAX:
        assert got == sig + "..."
    else:
        assert got == sig[:WHAT_MAX - 3] + "..."
    assert len(got) <= WHAT_MAX


# ---- types and signatures named in refusals ----

@pytest.mark.parametrize("length", [1, 140, 149, 150, 151, 200, 248])
def test_a_pointer_type_named_in_a_refusal_is_whole_up_to_159_bytes_then_cut_with_dots(cfn,
                                                                                    engine,
                                                                                    length):
    """convert/value.c refuse_target and convert_pointer name the declared type
    in 160 bytes: 'struct NAME **' with a struct name of `length`."""
    name = ("S" + "abcdefghij" * 30)[:length]
    for depth, value, head in [(2, np.zeros(2), "a buffer can be bound to a single-level "
                                                 "pointer (T *) only, not to "),
                               (1, [1.0], "cannot bind a list object to ")]:
        ctype = f"struct {name} {'*' * depth}"
        f = cfn("f_d_pi", f"double ({ctype}p, int n)")
        assert f.signature.argtypes[0] == ctype
        shown = ctype if len(ctype) <= TYPE_MAX else ctype[:TYPE_MAX - 3] + "..."
        with pytest.raises(TypeError) as info:
            bind(engine, f, value, 1)
        assert head + shown + (";" if depth == 2 else " (expected") in str(info.value), \
            str(info.value)


@pytest.mark.parametrize("length", [509, 510, 511, 512, 513, 2000])
def test_a_target_named_for_a_wrong_count_is_whole_up_to_511_bytes_then_cut_with_dots(cfn,
                                                                                      length):
    """life/commit.c check_values names the target's signature in 512 bytes."""
    sig = _sig_of_length(length)
    f = cfn("f_d_d", sig)                             # never called
    shown = sig if length <= 511 else sig[:508] + "..."
    with pytest.raises(TypeError) as info:
        nt.bind(f, 1.0)
    assert str(info.value).startswith(f"the target '{shown}' takes "), str(info.value)[:80]


def test_signature_label_takes_indexes_0_to_nargs_minus_1_in_every_form():
    """python/signature.c signature_label: 0 <= i < nargs."""

    class Index:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    sig = nt.Signature("double (const double *x, int n)")
    for i, want in ((0, "argument 1 (x: const double *)"), (1, "argument 2 (n: int)")):
        for form in (i, np.int8(i), np.uint64(i), Index(i)):
            assert sig._label(form) == want
    for i in (-1, 2, -2 ** 31 - 1, 2 ** 31):
        for form in (i, np.int64(i), Index(i)):
            with pytest.raises(IndexError, match=rf"^parameter index {i} out of range$"):
                sig._label(form)
    for i in (2 ** 63, -2 ** 63 - 1):
        with pytest.raises(OverflowError):
            sig._label(i)
    with pytest.raises(TypeError):
        sig._label(1.0)
    with pytest.raises(IndexError, match=r"^parameter index 0 out of range$"):
        nt.Signature("void (void)")._label(0)


@pytest.mark.parametrize("engine", ["native", "ffi"])
@pytest.mark.parametrize("extra", [22, 23, 24, 40])
def test_the_trap_of_a_long_thunk_prints_its_cut_description(fixture_path, engine, extra):
    """The trap itself (engine/choose.c nt_trap_released_at) writes the text
    test_a_released_thunk_... reads from the refusals: a thunk double
    (double) over a target of 1 + `extra` doubles (the text passes 223
    bytes from 24 on) called after it is gone."""
    from thunks import run_py
    target = "double (" + ", ".join(["double"] * (1 + extra)) + ")"
    full = f"double (double) over {target}"
    shown = full if len(full) <= WHAT_MAX else full[:WHAT_MAX - 3] + "..."
    code = f"""
import ctypes, numthunk as nt
lib = ctypes.CDLL({fixture_path!r})
fn = nt.Function(ctypes.cast(lib.f_d_d, ctypes.c_void_p).value, {target!r})
solver = lib.f_d_Fddi
solver.restype = ctypes.c_double
solver.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
print(hex(fn.address), flush=True)
solver(nt.bind(fn, nt.ARG, *[1.0] * {extra}, engine={engine!r}).address, 0.0, 1.0, 10)
print("survived")
"""
    out = run_py(code)
    assert out.returncode == -6, (out.returncode, out.stderr)    # SIGABRT
    address = out.stdout.split()[0]
    assert out.stderr.splitlines()[0] == (f"numthunk: called a released thunk: {shown}, "
                                          f"target at {address}"), out.stderr


def test_a_marker_repr_names_what_is_no_array_by_its_type():
    """A marker over another buffer names its type; over a 0-d array, scalar."""
    m = memoryview(bytearray(8)).cast("d")
    assert repr(nt.strided(m)) == "strided(memoryview)"
    assert repr(nt.size(m)) == "size(memoryview)"
    assert repr(nt.strided(np.ones(()))) == "strided(array[float64, scalar])"

"""Narrow integers reach a callee that trusts its caller, on both engines,
whichever compilers are installed.

The callees (fixtures/trust_x86_64.S) are assembly that returns the
register or stack slot it was given, all 64 bits. The thunk's own caller is
ctypes with uint64_t parameters, so it puts garbage above the narrow value,
as Numba does (it does not extend i8/i16). The property: for bool, (u)int8
and (u)int16 the callee sees the value extended to 32 bits (what GCC and
Clang assume of a register argument); for (u)int32 the low 32 bits are the
value (the psABI leaves the upper half undefined, and no compiler reads
it). A narrow value in a stack slot is read with its own width by both
compilers (`movsx eax, word ptr [rsp + 8]`), so there only the type's own
bits are checked: libffi writes just those bytes of the slot. Bound narrow
values are checked the same way."""

import ctypes
import platform
import sys

import pytest

import numthunk as nt

import ntbuild

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
    reason="the trusting callees are x86-64 System V assembly")

NATIVE = nt.backend_info()["native_available"]
ENGINES = ["native", "ffi"]

# C type, bits, signed, values at and near both edges
NARROW = [
    ("bool", 1, False, [False, True]),
    ("uint8_t", 8, False, [0, 1, 127, 128, 255]),
    ("int8_t", 8, True, [-128, -1, 0, 1, 127]),
    ("uint16_t", 16, False, [0, 1, 0x7FFF, 0x8000, 0xFFFF]),
    ("int16_t", 16, True, [-32768, -1, 0, 1, 32767]),
    ("uint32_t", 32, False, [0, 1, 2**31, 2**32 - 1]),
    ("int32_t", 32, True, [-2**31, -1, 0, 2**31 - 1]),
]
GARBAGE = [0xDEADBEEFCAFEF00D, 0xFFFFFFFFFFFFFFFF, 0x8000000000000000, 0x0123456789ABCDEF]
MASK32 = 0xFFFFFFFF


@pytest.fixture(scope="module")
def tlib():
    return ntbuild.load("trust_x86_64.S", "trust")


def fn(tlib, name, sig):
    return nt.Function(ntbuild.address(tlib, name), sig, owner=tlib, name=name)


def raw(v, bits, garbage):
    """v in the low `bits` bits, garbage above."""
    width = 8 if bits == 1 else bits
    mask = (1 << width) - 1
    return (garbage & ~mask & 0xFFFFFFFFFFFFFFFF) | (int(v) & mask)


def extended32(v):
    """What a trusting callee reads in the low 32 bits."""
    return int(v) & MASK32


def check(got, v, ctype, bits=32):
    mask = MASK32 if bits == 32 else (1 << (8 if bits == 1 else bits)) - 1
    assert got & mask == extended32(v) & mask, (
        f"{ctype} {v!r}: callee saw {got:#018x}, its low bits should be "
        f"{extended32(v) & mask:#010x} (mask {mask:#x})")


def engine_or_skip(engine):
    if engine == "native" and not NATIVE:
        pytest.fail("the native engine is missing on x86-64 Linux")


# Target layouts: where the narrow parameter sits, which callee returns it,
# and the target signature around it. "moved": bound values before it, so
# the handler moves the thunk's argument to another register or slot.
def layouts(ctype):
    six = ", ".join(["int64_t"] * 6)
    seven = ", ".join(["int64_t"] * 7)
    return [
        # id, callee, signature, values bound before the narrow one (None: forwarded)
        ("in-place-rdi", "trust_rdi", f"uint64_t ({ctype})", []),
        ("rdi-to-rsi", "trust_rsi", f"uint64_t (int64_t, {ctype})", [7]),
        ("rdi-to-r9", "trust_r9", f"uint64_t ({', '.join(['int64_t'] * 5)}, {ctype})",
         [1, 2, 3, 4, 5]),
        ("in-place-stack", "trust_stack0", f"uint64_t ({six}, {ctype})", [None] * 6),
        ("rdi-to-stack", "trust_stack0", f"uint64_t ({six}, {ctype})", [1, 2, 3, 4, 5, 6]),
        ("rsi-to-stack1", "trust_stack1", f"uint64_t ({seven}, {ctype})",
         [None] + [2, 3, 4, 5, 6, 7]),
        ("stack-to-stack1", "trust_stack1", f"uint64_t ({seven}, {ctype})",
         [1] + [None] * 6),
    ]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, bits, signed, values", NARROW, ids=[r[0] for r in NARROW])
def test_forwarded_narrow_arrives_extended(tlib, engine, ctype, bits, signed, values):
    engine_or_skip(engine)
    for lid, callee, sig, before in layouts(ctype):
        f = fn(tlib, callee, sig)
        args = [nt.ARG if b is None else b for b in before] + [nt.ARG]
        t = nt.bind(f, *args, engine=engine)
        assert t.backend == ("libffi" if engine == "ffi" else "native-x86_64-sysv"), lid
        nfwd = sum(a is nt.ARG for a in args)
        call = ctypes.CFUNCTYPE(ctypes.c_uint64, *[ctypes.c_uint64] * nfwd)(t.address)
        for v in values:
            for g in GARBAGE:
                # the other forwarded int64 values carry garbage too: they must
                # arrive whole (they are not narrow)
                others = [(g ^ (0x1111 * (k + 1))) & 0xFFFFFFFFFFFFFFFF for k in range(nfwd - 1)]
                got = call(*others, raw(v, bits, g))
                check(got, v, f"{lid}: {ctype}", bits if "stack" in callee else 32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ctype, bits, signed, values", NARROW, ids=[r[0] for r in NARROW])
def test_bound_narrow_arrives_extended(tlib, engine, ctype, bits, signed, values):
    engine_or_skip(engine)
    for lid, callee, sig, before in layouts(ctype):
        f = fn(tlib, callee, sig)
        for v in values:
            args = [nt.ARG if b is None else b for b in before] + [v]
            t = nt.bind(f, *args, engine=engine)
            nfwd = sum(a is nt.ARG for a in args)
            call = ctypes.CFUNCTYPE(ctypes.c_uint64, *[ctypes.c_uint64] * nfwd)(t.address)
            got = call(*[0xFEDCBA9876543210] * nfwd)
            check(got, v, f"bound {lid}: {ctype}", bits if "stack" in callee else 32)


@pytest.mark.parametrize("engine", ENGINES)
def test_forwarded_int64_neighbours_arrive_whole(tlib, engine):
    """The extension touches the narrow parameter only."""
    engine_or_skip(engine)
    f = fn(tlib, "trust_rsi", "uint64_t (int16_t, int64_t)")
    t = nt.bind(f, nt.ARG, nt.ARG, engine=engine)
    call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)(t.address)
    for g in GARBAGE:
        assert call(raw(-1, 16, g), g) == g


def test_shapes_that_differ_only_by_extension_get_their_own(tlib):
    """int16 and uint16 forwarded the same way have the same moves but not
    the same extension: each thunk must extend as its own type says,
    whichever was made first."""
    for order in (["int16_t", "uint16_t", "int8_t", "uint8_t", "bool"],
                  ["bool", "uint8_t", "int8_t", "uint16_t", "int16_t"]):
        for ctype in order:
            bits, v = {"int16_t": (16, -2), "uint16_t": (16, 0xFFFE), "int8_t": (8, -2),
                       "uint8_t": (8, 0xFE), "bool": (1, True)}[ctype]
            for engine in (["native"] if NATIVE else []) + ["ffi"]:
                f = fn(tlib, "trust_rsi", f"uint64_t (int64_t, {ctype})")
                t = nt.bind(f, 3, nt.ARG, engine=engine)
                got = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(t.address)(
                    raw(v, bits, GARBAGE[0]))
                check(got, v, f"{engine} {ctype}")

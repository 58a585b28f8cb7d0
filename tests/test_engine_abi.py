"""Differential test of the engines: 2,000 random (seeded) signatures of up
to 16 parameters over every scalar type, random choices of bound and
forwarded parameters, against generated C fixtures that record what they
received. The fixtures are compiled with gcc and with clang (clang callees
rely on the caller's 32-bit extension of narrow integers, gcc's do not).

For every signature and both engines: what the callee received equals what
was bound or forwarded, and the return value equals a direct call's. The
caller passes narrow forwarded integers as 64-bit values with garbage above
the type, as Numba does; ctypes and libffi always extend, so a plain ctypes
call would hide a missing re-extension.
"""

import ctypes
import os
import random
import struct

import pytest

import numthunk as nt

from conftest import ENGINES, compiler_command
from ntbuild import BUILD, compile_shared

pytestmark = pytest.mark.differential

SEED = 20261129
COUNT = 2000

# code: (C type, bits, signed, ctypes type for a direct call)
KINDS = {
    "B": ("bool", 8, False, ctypes.c_bool),
    "c": ("int8_t", 8, True, ctypes.c_int8),
    "C": ("uint8_t", 8, False, ctypes.c_uint8),
    "s": ("int16_t", 16, True, ctypes.c_int16),
    "S": ("uint16_t", 16, False, ctypes.c_uint16),
    "i": ("int32_t", 32, True, ctypes.c_int32),
    "I": ("uint32_t", 32, False, ctypes.c_uint32),
    "l": ("int64_t", 64, True, ctypes.c_int64),
    "L": ("uint64_t", 64, False, ctypes.c_uint64),
    "f": ("float", 32, None, ctypes.c_float),
    "d": ("double", 64, None, ctypes.c_double),
    "p": ("void *", 64, None, ctypes.c_void_p),
}
RETS = list(KINDS) + ["v"]


def signatures():
    rng = random.Random(SEED)
    out = []
    for _ in range(COUNT):
        n = rng.randint(0, 16)
        out.append((rng.choice(RETS), "".join(rng.choice(list(KINDS)) for _ in range(n))))
    return out


def c_source(sigs):
    lines = ["#include <stdbool.h>", "#include <stdint.h>", "#include <string.h>",
             "__attribute__((visibility(\"default\"))) uint64_t rec[16];"]
    for k, (ret, params) in enumerate(sigs):
        rtype = "void" if ret == "v" else KINDS[ret][0]
        decl = ", ".join(f"{KINDS[p][0]} a{i}" for i, p in enumerate(params)) or "void"
        body = []
        for i, p in enumerate(params):
            if p == "f":
                body.append(f"{{ uint32_t u; memcpy(&u, &a{i}, 4); rec[{i}] = u; }}")
            elif p == "d":
                body.append(f"memcpy(&rec[{i}], &a{i}, 8);")
            elif p == "p":
                body.append(f"rec[{i}] = (uint64_t)(uintptr_t)a{i};")
            else:
                body.append(f"rec[{i}] = (uint64_t)(int64_t)a{i};")
        # a return value that depends on every argument
        terms = " + ".join(f"(double)(a{i} != 0) * {i + 1}" if params[i] in "Bp"
                           else f"(double)a{i} * {i + 1}" for i in range(len(params))) or "0"
        if ret == "v":
            ret_stmt = ""
        elif ret == "p":
            ret_stmt = f"return (void *)(uintptr_t)(uint64_t)({len(params)} * 4096 + 8);"
        elif ret == "B":
            ret_stmt = f"return ({terms}) > 0;"
        elif ret in "fd":
            ret_stmt = f"return ({rtype})({terms});"
        else:
            ret_stmt = (f"{{ double t = {terms}; if (!(t > -1e15 && t < 1e15)) t = 7;"
                        f" return ({rtype})(int64_t)t; }}")
        lines.append(f"__attribute__((visibility(\"default\"))) {rtype} f{k}({decl})"
                     f" {{ {' '.join(body)} {ret_stmt} }}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module", params=["gcc", "clang"])
def fixtures(request):
    cc = request.param
    command = compiler_command(cc)      # fails, never skips, when the compiler is missing
    sigs = signatures()
    os.makedirs(BUILD, exist_ok=True)
    src = os.path.join(BUILD, f"diff_{SEED}_{COUNT}.c")
    text = c_source(sigs)
    if not os.path.exists(src) or open(src).read() != text:
        with open(src, "w") as fh:
            fh.write(text)
    path = compile_shared(src, f"diff_{SEED}_{COUNT}", compiler=command, label=cc,
                          extra=["-O1", "-Wno-unused-parameter"])
    return sigs, ctypes.CDLL(path)


def value_for(rng, p):
    _ctype, bits, signed, _ = KINDS[p]
    if p == "B":
        return rng.random() < 0.5
    if p == "f":
        return struct.unpack("f", struct.pack("f", rng.uniform(-1e6, 1e6)))[0]
    if p == "d":
        return rng.uniform(-1e12, 1e12)
    if p == "p":
        return rng.getrandbits(47) & ~7
    if signed:
        return rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return rng.randint(0, (1 << bits) - 1)


def image(p, v):
    """What the recorder stores for a received value."""
    if p == "f":
        return struct.unpack("I", struct.pack("f", v))[0]
    if p == "d":
        return struct.unpack("Q", struct.pack("d", v))[0]
    if p == "B":
        return int(bool(v))
    return int(v) & (2**64 - 1)


def wide_ctype(p):
    """The thunk is called as if narrow integers were 64-bit: the caller
    controls the whole register or stack slot."""
    if p in "BcCsSiI":
        return ctypes.c_uint64
    return KINDS[p][3]


def with_garbage(rng, p, v):
    if p in "BcCsSiI":
        bits = KINDS[p][1]
        low = int(v) & ((1 << bits) - 1)
        return low | (rng.getrandbits(64 - bits) << bits)
    return v


@pytest.mark.parametrize("engine", ENGINES)
def test_random_signatures_agree(fixtures, engine):
    if engine == "native" and not nt.engine_info()["native_available"]:
        pytest.skip("no native engine on this platform")
    sigs, lib = fixtures
    rec = (ctypes.c_uint64 * 16).in_dll(lib, "rec")
    rng = random.Random(SEED + (engine == "ffi"))
    stack_cases = 0
    for k, (ret, params) in enumerate(sigs):
        rtype = "void" if ret == "v" else KINDS[ret][0]
        csig = f"{rtype} ({', '.join(KINDS[p][0] for p in params) or 'void'})"
        addr = ctypes.cast(getattr(lib, f"f{k}"), ctypes.c_void_p).value
        fn = nt.Function(addr, csig)
        values = [value_for(rng, p) for p in params]
        mask = [rng.random() < 0.5 for _ in params]
        args = [nt.ARG if m else (nt.address(v) if p == "p" else v)
                for m, p, v in zip(mask, params, values)]
        t = nt.bind(fn, *args, engine=engine)
        assert t.engine == ("libffi" if engine == "ffi" else "native-x86_64-sysv"), csig
        fwd = [(p, v) for m, p, v in zip(mask, params, values) if m]
        stack_cases += sum(p not in "fd" for p in params) > 6 or sum(p in "fd" for p in params) > 8
        rctype = None if ret == "v" else KINDS[ret][3]
        proto = ctypes.CFUNCTYPE(rctype, *[wide_ctype(p) for p, _ in fwd])
        for slot in range(16):
            rec[slot] = 0xDEADBEEF
        got = proto(t.address)(*[with_garbage(rng, p, v) for p, v in fwd])
        received = [rec[i] for i in range(len(params))]
        expected = [image(p, v) for p, v in zip(params, values)]
        assert received == expected, (k, csig, mask)
        direct = ctypes.CFUNCTYPE(rctype, *[KINDS[p][3] for p in params])(addr)(*values)
        if ret == "f" or ret == "d":
            assert struct.pack("d", got) == struct.pack("d", direct), (k, csig)
        else:
            assert got == direct, (k, csig, mask)
        t.release()
    assert stack_cases > COUNT // 5          # the sample does reach stack arguments

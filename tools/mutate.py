#!/usr/bin/env python3
"""Mutation testing for numthunk: does the suite catch realistic one-line bugs?

Each mutant below is a small, plausible bug (an off-by-one range, a dropped
extension, a missing reference, a writable code mapping, a wrong table row),
found by PATTERN, never by line number, so the list survives refactors. A
pattern must match exactly once; when it no longer matches (the code moved
on), the mutant is reported as "stale": refresh its `find` text.

For every mutant, one at a time, in a scratch copy of the repository (the
working tree is never touched):
  plant it -> rebuild the extension (C files only) -> run the test files
  that should kill it (or the whole suite with --full) under a timeout ->
  restore the file.
A test selection names files, node ids, or markers (marked("guards"),
pytest's `-m guards`: every test with the marker, wherever its file is).
A failing, crashing or hanging run kills the mutant ("timeout" is reported
as such); a passing run means it survived. With --tests-from an older ref
whose tests/ lacks all of a mutant's files, FALLBACK (the core test files)
runs instead, marked "[fallback set]".

    python tools/mutate.py                # every mutant, its own tests
    python tools/mutate.py --list         # the mutants and their tests
    python tools/mutate.py --check        # every pattern matches once? (no build)
    python tools/mutate.py --only plan-c128-cell x86-i16-ext
    python tools/mutate.py --full         # the whole suite for each mutant
    python tools/mutate.py --tests-from main   # tests/ as on another ref

Results: killed, survived, timeout (a hang: counted as killed), stale,
build-error (the mutant does not compile: fix the replacement).

Operator mode generates the mutants instead, from the sources as they are
(tools/mutate_ops.py: relational flips, off-by-one constants in
comparisons, dropped branches of && / || / and / or, && <-> ||, dropped !
/ not, dropped casts, dropped keyword arguments, dropped new references),
across every C file of src/ and Python file of numthunk/:

    python tools/mutate.py --operators --sample 60 --seed 1
    python tools/mutate.py --operators --sample 60 --engine ffi
    python tools/mutate.py --operators --list --files 'src/convert/value.c'
    python tools/mutate.py --operators --only src/plan/plan.c:61:16:rel:12   # one again

Patch mode runs a set of hand-written bugs instead: each DIR/*.patch (a
unified diff of one file, as `git diff` writes it) is one mutant, built,
compared and tested as an operator mutant is, with the same selections:

    python tools/mutate.py --patches DIR [--engine ffi] [--json F]

Each test selection first runs once on the unmutated tree (it must pass;
its time sets the timeout). A C mutant recompiles only the translation
unit it is in; one whose object code equals the unmutated one is reported
"equivalent" (so is a Python mutant with the same bytecode), one that does
not compile "build-error": neither counts in the score, killed / (killed +
survived). --engine ffi runs the tests with NUMTHUNK_ENGINE=ffi. Mutants
run in scratch copies, --jobs of them at once (default: the core count).
"""

import argparse
import concurrent.futures
import fnmatch
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutate_ops  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------
# The mutants. id, file, description, find (exact text, or a regex when
# regex=True), replacement, tests (files or node ids that should kill it).
# Keep `find` short but unique in its file.

T_CONV = "tests/test_conversion.py"
T_TYPES = "tests/test_types.py"
T_REFUSALS = "tests/test_refusals.py"
T_BIND = "tests/test_bind.py"
T_SIG = "tests/test_signature.py"
T_ENGINE = "tests/test_engine.py"
T_ABI = "tests/test_engine_abi.py"
T_LIFE = "tests/test_lifetime.py"
T_LIFE_GUARDS = "tests/test_lifetime_guards.py"
T_CYTHON = "tests/test_cython.py"
# Numba's files but test_numba_function_type.py and test_numba_idioms.py
# (what the former test_numba.py held): a mutant naming them runs them all
T_NUMBA = ["tests/test_numba.py", "tests/test_numba_signatures.py",
           "tests/test_numba_holding.py", "tests/test_numba_inline.py",
           "tests/test_numba_processes.py"]
T_CORE_C = "tests/test_core_c.py"
T_REBIND = "tests/test_rebind.py"
T_THREADS = "tests/test_threads.py"
T_DLPACK = "tests/test_dlpack.py"
T_CAPI = "tests/test_capi.py"
T_NUMBA_SYNTAX = "tests/test_numba_syntax.py"

# When none of a mutant's test files exist (an older tests/ with
# --tests-from), these run instead: the core of the suite, without the
# slow Cython/Numba/example files.
FALLBACK = [T_BIND, T_REFUSALS, T_CONV, T_ABI, T_ENGINE, T_CORE_C, T_LIFE]


def M(id, file, desc, find, repl, tests, regex=False):
    return dict(id=id, file=file, desc=desc, find=find, repl=repl, tests=tests, regex=regex)


MUTANTS = [
    # ---- Python type tables (no rebuild needed)
    M("py-ctypes-ulong", "numthunk/_ctypes.py", "ctypes c_ulong mapped as signed",
      "*((ct, _int_text(ct)) for ct in (ctypes.c_int, ctypes.c_uint, ctypes.c_long,",
      "*((ct, _int_text(ctypes.c_long if ct is ctypes.c_ulong else ct)) for ct in "
      "(ctypes.c_int, ctypes.c_uint, ctypes.c_long,", [T_TYPES, T_BIND]),
    M("py-ctypes-ushort", "numthunk/_ctypes.py", "ctypes c_ushort mapped as signed",
      '(ctypes.c_ushort, "unsigned short"),', '(ctypes.c_ushort, "short"),', [T_TYPES, T_BIND]),
    # The ctypes, cffi and Numba maps derive from the core's kind table
    # (_core.kinds, src/kinds.c): a wrong column in the derivation.
    M("py-ctypes-of-kind", "numthunk/_ctypes.py", "ctypes map keyed by C text, not kind",
      '_CTYPES_OF_KIND = {k.name: getattr(ctypes, k.ctypes)',
      '_CTYPES_OF_KIND = {k.c: getattr(ctypes, k.ctypes)', [T_BIND, T_TYPES]),
    M("py-numba-kind-c64", "numthunk/_numba.py", "complex64 value passed to Numba (ABI differs)",
      '_KIND_NUMBA = {k.name: k.numba for k in _core.kinds.values() if k.name != "complex64"}',
      '_KIND_NUMBA = {k.name: k.numba for k in _core.kinds.values()}', [T_TYPES, *T_NUMBA]),
    M("py-numba-sig-cpointer", "numthunk/_numba_sig.py", "CPointer(T) read as T",
      'return t + [("*", close.start)]', "return t", [T_NUMBA_SYNTAX, T_SIG]),
    M("py-numba-sig-fn-const", "numthunk/_numba_sig.py",
      "a const after FunctionType[...] left out of its declarator",
      't.inner.append(("const", c.start))', "pass", [T_NUMBA_SYNTAX]),
    M("py-numba-sig-short-first", "numthunk/_numba_sig.py",
      "Numba's short names shadow a caller's typedef",
      "if user is None or name not in user:", "if True:", [T_NUMBA_SYNTAX, T_CYTHON]),
    M("py-cffi-inverse", "numthunk/_cffi.py", "cffi's names read back as themselves",
      "_C_OF_CFFI = {cffi_name: c for c, cffi_name in CFFI_OF_C.items()}",
      "_C_OF_CFFI = {}", [T_TYPES]),
    M("py-cython-float_t", "numthunk/_cython.py", "NumPy's Cython float_t resolved to float",
      '"float_t": "double",', '"float_t": "float",', [T_TYPES, T_CYTHON]),
    M("py-cython-uintp_t", "numthunk/_cython.py", "NumPy's Cython uintp_t resolved as signed",
      '"intp_t": "npy_intp", "uintp_t": "npy_uintp",',
      '"intp_t": "npy_intp", "uintp_t": "npy_intp",',
      [T_TYPES, T_CYTHON]),
    M("py-cython-ulonglong_t", "numthunk/_cython.py", "ulonglong_t resolved as signed",
      '"ulonglong_t": "unsigned long long",', '"ulonglong_t": "long long",', [T_TYPES, T_CYTHON]),

    # ---- kinds.c: the kind table, one row per kind (names, ranges, codes,
    # cells, widening, libffi types), that C and the Python maps read
    M("py-ctypes-of-u16", "src/kinds.c", "uint16 -> ctypes c_int16 in the kind table",
      'FFI_T(uint16), "uint16", "c_uint16"),',
      'FFI_T(uint16), "uint16", "c_int16"),', [T_BIND, T_TYPES]),
    M("py-numba-u16-c", "src/kinds.c", "uint16's C text int16_t (kind table)",
      '[NT_U16] = INT_ROW("uint16", "uint16_t", uint16_t,',
      '[NT_U16] = INT_ROW("uint16", "int16_t", uint16_t,', [T_TYPES, *T_NUMBA]),
    M("py-numba-u8-kind", "src/kinds.c", "C uint8 given to Numba as int8 (kind table)",
      'FFI_T(uint8), "uint8", "c_uint8"),',
      'FFI_T(uint8), "int8", "c_uint8"),', [T_TYPES, *T_NUMBA]),
    M("kinds-f32-align", "src/kinds.c", "float alignment taken as 1",
      ".size = sizeof(float), .align = _Alignof(float)", ".size = sizeof(float), .align = 1",
      [T_CONV, T_REFUSALS, T_TYPES]),
    M("kinds-l-unsigned", "src/kinds.c", "native 'L' decoded as signed",
      "| IF(sizeof(long) == (n), F_l)", "| IF(sizeof(long) == (n), F_l | F_L)",
      [T_CONV, T_BIND, T_TYPES]),
    M("kinds-std-h", "src/kinds.c", "standard-size 'h' ('<h', ctypes arrays) decoded unsigned",
      "| IF((n) == 2, F_h)", "| IF((n) == 2, F_H)", [T_CONV, T_BIND, T_TYPES]),

    # ---- parse/spellings.c: the C spelling table
    M("types-ulong", "src/parse/spellings.c", "unsigned long spelled signed",
      '{ "unsigned long", U(long) },', '{ "unsigned long", S(long) },',
      [T_TYPES, T_SIG]),
    M("types-short", "src/parse/spellings.c", "short spelled unsigned",
      '{ "short", S(short) },', '{ "short", U(short) },', [T_TYPES, T_SIG]),
    M("types-ssize_t", "src/parse/spellings.c", "ssize_t spelled unsigned",
      '{ "ssize_t", S(size_t) },', '{ "ssize_t", U(size_t) },', [T_TYPES, T_SIG]),

    # ---- parse/declarator.c: the parser
    M("sig-const-base", "src/parse/declarator.c", "const on a scalar base forgotten",
      "NT_FNPTR ? NT_CONST_SELF : NT_CONST_BASE;", "NT_FNPTR ? NT_CONST_SELF : 0;",
      [T_SIG, T_REFUSALS, T_CONV]),
    M("sig-equal-cflags", "src/parse/declarator.c", "type equality ignores const",
      "if (a->kind != b->kind || a->cflags != b->cflags)", "if (a->kind != b->kind)",
      [T_SIG, *T_NUMBA, T_CYTHON]),
    M("sig-depth", "src/parse/declarator.c", "one '*' too many on pointers to pointers",
      "    t->depth++;\n    return 0;", "    t->depth += 2;\n    return 0;", [T_SIG, T_REFUSALS]),

    # ---- convert/buffer.c: buffer descriptors
    M("descr-stride-align", "src/convert/buffer.c", "alignment check ignores strides",
      "if (view->shape[d] > 1 && view->strides[d] % (Py_ssize_t)align != 0)",
      "if (0 && view->shape[d] > 1 && view->strides[d] % (Py_ssize_t)align != 0)",
      [T_CONV, T_REFUSALS]),
    M("descr-swapped", "src/convert/buffer.c", "byte-swapped buffers accepted",
      "if (swapped && view->itemsize > 1", "if (0 && swapped && view->itemsize > 1",
      [T_REFUSALS, T_CONV]),

    # ---- convert/value.c (and the ranges and float limits it reads in kinds.c):
    # range, float, dtype, const, alignment checks
    M("conv-i16-max", "src/kinds.c", "int16 upper bound one too high",
      "INT16_MIN, INT16_MAX,", "INT16_MIN, INT16_MAX + 1,", [T_CONV]),
    M("conv-i8-min", "src/kinds.c", "int8 lower bound one too low",
      "INT8_MIN, INT8_MAX,", "INT8_MIN - 1, INT8_MAX,", [T_CONV]),
    M("conv-u8-max", "src/kinds.c", "uint8 upper bound one too high",
      "0, UINT8_MAX,", "0, UINT8_MAX + 1,", [T_CONV]),
    M("conv-u32-max", "src/kinds.c", "uint32 upper bound one too high",
      "0, UINT32_MAX,", "0, UINT32_MAX + 1ull,", [T_CONV]),
    M("conv-i32-min", "src/kinds.c", "int32 lower bound one too low",
      "INT32_MIN, INT32_MAX,", "INT32_MIN - 1ll, INT32_MAX,", [T_CONV]),
    M("conv-float-edge", "src/convert/value.c", "FLT_MAX + half an ulp accepted (rounds to inf)",
      "fabs(d) >= r->fover", "fabs(d) > r->fover", [T_CONV]),
    M("conv-float-max", "src/kinds.c", "FLT_MAX itself refused",
      "which is 2^128 */\n                 .fmax = FLT_MAX, .fover = 0x1.ffffffp+127,",
      "which is 2^128 */\n                 .fmax = FLT_MAX, .fover = 0x1.fffffep+127,", [T_CONV]),
    M("conv-numpy-unsigned", "src/convert/value.c", "unsigned NumPy arrays read as signed",
      "case 'u':\n        value = NT_VALUE_INT;\n        is_signed = 0;\n",
      "case 'u':\n        value = NT_VALUE_INT;\n", [T_CONV, T_BIND, T_TYPES]),
    M("conv-ret-negative", "src/convert/value.c",
      "a negative narrow int returned to Python as unsigned",
      "return PyLong_FromLongLong(-(long long)(~u << shift >> shift) - 1);",
      "return PyLong_FromUnsignedLongLong(u);", [T_BIND, T_CONV, T_ABI]),
    M("conv-c64-imag", "src/convert/value.c", "float complex imaginary part not range-checked",
      "|| to_float(c.imag, &parts[1], value, what) < 0)",
      "|| (parts[1] = (float)c.imag, 0))", [T_CONV]),
    M("conv-readonly", "src/convert/value.c", "read-only buffer bound to a non-const pointer",
      "if (v->readonly && !is_const) {", "if (0 && v->readonly && !is_const) {",
      [T_REFUSALS, T_CONV, T_CYTHON]),
    M("conv-char-any-byte", "src/convert/value.c",
      "any 1-byte buffer accepted for int8_t*/uint8_t*",
      "return spelled_char && (kind == NT_I8 || kind == NT_U8);",
      "return kind == NT_I8 || kind == NT_U8;", [T_CONV]),

    # ---- kinds.c: value cells (plan/plan.c lays them out)
    M("plan-c128-cell", "src/kinds.c", "double complex cell sized 8 (overlaps the next)",
      ".cell = 16, .part = NT_F64,", ".cell = 8, .part = NT_F64,", [T_CONV]),
    M("plan-memview-cell", "src/kinds.c", "memoryview cell sized 8",
      ".cell = sizeof(nt_memviewslice),", ".cell = 8,", [T_CYTHON]),

    # ---- python/thunk.c, life/commit.c, python/module.c, plan/plan.c: references,
    # lifecycle and plan cache
    M("thunk-incref-bound", "src/life/commit.c", "bound value stored without Py_INCREF",
      "b->value = Py_NewRef(v);", "b->value = v;", [T_LIFE]),
    M("thunk-incref-owner", "src/life/commit.c", "owner stored without Py_INCREF",
      "self->owner = Py_NewRef(owner != NULL ? owner : Py_None);",
      "self->owner = owner != NULL ? owner : Py_None;", [T_LIFE]),
    M("thunk-rebind-ref", "src/life/commit.c", "rebound value stored without a new reference",
      "retire(self, i, Py_NewRef(value), key);", "retire(self, i, value, key);",
      [T_REBIND, T_LIFE]),
    M("thunk-inflight", "src/python/thunk.c", "call not counted in flight (release frees under it)",
      "    t->inflight = inflight(t) + 1;\n", "", [T_LIFE, T_THREADS]),
    M("thunk-pin-deps", "src/python/thunk.c",
      "a call pins only the thunk called, not what it reaches",
      "    for (; k < f->npins; k++) {", "    for (k = f->npins; k < f->npins; k++) {",
      [T_LIFE, T_THREADS]),
    M("identify-carried", "src/life/commit.c", "a spelling's own thunk looked up again by address",
      "        && ((ThunkObject *)carried)->address == p) {", "        && 0) {", [T_LIFE]),
    M("identify-signature", "src/life/commit.c", "a thunk's address taken under another signature",
      "if (d != NULL && !d->released) {", "if (0) {", [T_LIFE]),
    M("identify-dying", "src/life/commit.c", "a thunk at a reference count of 0 handed out",
      "if (d != NULL && Py_REFCNT(d) == 0) {", "if (0) {", [T_LIFE]),
    M("registry-no-grave", "src/life/registry.c", "a collected thunk's address forgotten at once",
      "    if (!nt_quarantine_holds(stamp)) {", "    if (1) {",
      [T_LIFE, T_LIFE_GUARDS]),
    M("thunk-rebind-gen", "src/life/commit.c", "rebind ignores a rebind completed meanwhile",
      "if (self->gen == gen && !self->released)", "if (!self->released)",
      [T_REBIND, T_THREADS]),
    M("module-capsule-owner", "src/python/module.c", "capsule does not keep its owner alive",
      "c->owner = Py_NewRef(owner);", "c->owner = owner;", [T_LIFE]),
    M("plan-cache-pattern", "src/plan/plan.c", "plan cache ignores the bound/forwarded pattern",
      "if (slot->wanted == wanted && (n == 0 || memcmp(slot->pattern, pattern, n) == 0)) {",
      "if (slot->wanted == wanted) {", [T_BIND]),
    M("signature-eq-ne", "src/python/signature.c", "Signature != answers like ==",
      "return PyBool_FromLong(op == Py_EQ ? eq : !eq);", "return PyBool_FromLong(eq);",
      [T_SIG, T_BIND]),

    # ---- python/function.c, python/binder.c: the Function's fields, bind's fast path
    M("function-traverse-depends", "src/python/function.c",
      "a cycle through Function.depends is never collected",
      "Py_VISIT(self->depends);", "(void)self->depends;", [T_BIND]),
    M("binder-fixed-ignored", "src/python/binder.c",
      "bind's fast path drops a Function's fixed values",
      "&& PyDict_GET_SIZE(f[F_FIXED]) == 0", "", [T_BIND]),

    # ---- convert/markers.c, python/errors.c, convert/dlpack.c, python/capi.c
    M("markers-derived-ref", "src/convert/markers.c",
      "size()/shape() marker does not own its array",
      "self->obj = Py_NewRef(obj);\n    self->axis = axis;",
      "self->obj = obj;\n    self->axis = axis;", [T_LIFE, T_REBIND]),
    M("markers-address-owner", "src/convert/markers.c", "address(n, owner) does not keep its owner",
      "self->owner = Py_NewRef(owner);\n    self->needs_gil = !nogil;",
      "self->owner = owner;\n    self->needs_gil = !nogil;", [T_LIFE]),
    M("errors-caret", "src/python/errors.c", "parse error caret one column right (1-based)",
      "int col = err->column;", "int col = err->column + 1;", [T_SIG, T_REFUSALS]),
    M("dlpack-unsigned-code", "src/kinds.c", "unsigned ints described to DLPack as signed",
      ".dl_code = SIGNED ? kDLInt : kDLUInt,", ".dl_code = kDLInt,", [T_DLPACK]),
    M("dlpack-device", "src/convert/dlpack.c", "a consumed non-CPU tensor accepted",
      "if (src->device.device_type != kDLCPU)\n        return refuse_device(",
      "if (0)\n        return refuse_device(", [T_DLPACK]),
    M("capi-null-arg", "src/python/capi.c", "NULL value in numthunk_create bound as None, not ARG",
      "Py_NewRef(values[i] != NULL ? values[i] : NT_ARG)",
      "Py_NewRef(values[i] != NULL ? values[i] : Py_None)", [T_CAPI]),
    M("capi-needs-gil", "src/python/capi.c", "NUMTHUNK_NEEDS_GIL ignored",
      "!(flags & NUMTHUNK_NEEDS_GIL), NULL, wanted, NULL, NULL);",
      "1, NULL, wanted, NULL, NULL);",
      [T_CAPI]),
    # engine/arch/aarch64.c has no mutant here: its tests (tests/c/aarch64.sh,
    # cross-compiled, run under qemu-user) take minutes per run; the
    # planner's mutants below reach it as well as x86-64.

    # ---- engine/choose.c and engine/native.c: configuration, policy choice
    M("engine-quarantine", "src/engine/choose.c",
      "released addresses reused at once (no quarantine)",
      "c->quarantine = QUARANTINE;", "c->quarantine = 0;", [T_ENGINE]),
    M("native-policy-env", "src/engine/native.c", "NUMTHUNK_EXECMEM ignored",
      "&& strncmp(p->name, want, strlen(want)) != 0)", "&& 0)", [T_ENGINE]),

    # ---- engine/route.c: the native engines' planner (both architectures),
    # and the widening it reads from kinds.c
    M("plan-i16-ext", "src/kinds.c", "forwarded int16 not sign-extended",
      "INT16_MAX, NT_EXT_SX16,", "INT16_MAX, NT_EXT_NONE,", [T_ENGINE]),
    M("plan-bool-ext", "src/kinds.c", "forwarded bool not zero-extended",
      ".ext = NT_EXT_ZX8, .min = 0, .max = 1,", ".ext = NT_EXT_NONE, .min = 0, .max = 1,",
      [T_ENGINE]),
    M("plan-i8-zx", "src/kinds.c", "forwarded int8 zero- instead of sign-extended",
      "INT8_MAX, NT_EXT_SX8,", "INT8_MAX, NT_EXT_ZX8,", [T_ENGINE]),
    M("plan-c-caller-ext", "src/engine/route.c", "the C caller's widening not read (ext NULL)",
      "abi->ext[s->kind] : nt_kinds[s->kind].ext;", "abi->ext[s->kind] : NT_EXT_NONE;",
      [T_ENGINE]),
    M("plan-inplace-ext", "src/engine/route.c", "narrow int already in place not extended",
      "if (ext != NT_EXT_NONE)\n                add_step(",
      "if (0)\n                add_step(", [T_ENGINE]),
    M("plan-shape-key-ext", "src/engine/route.c", "handler cache key ignores the extension",
      "(uint8_t)(a->cls | (a->ext << 1) | (a->bound << 4)",
      "(uint8_t)(a->cls | (a->bound << 4)", [T_ENGINE]),
    M("plan-frame-align", "src/engine/route.c", "frame leaves sp misaligned at the call",
      "abi->stack_align) - above;", "abi->stack_align) - above + abi->stack_slot;", [T_ENGINE]),
    M("plan-parallel-moves", "src/engine/route.c", "moves emitted without ordering",
      "blocked = j != i && !m[j].done && loc_overlaps(m[i].dst, m[j].src);", "blocked = 0;",
      [T_BIND, T_ABI]),
    M("plan-park-ext", "src/engine/route.c", "a narrow int parked in a cycle loses its extension",
      "add_step(hp, NT_STEP_MOVE, m[i].cls, m[i].ext, park,",
      "add_step(hp, NT_STEP_MOVE, m[i].cls, NT_EXT_NONE, park,", [T_CORE_C]),
    M("plan-frame-record", "src/engine/route.c", "incoming stack arguments misplaced in a frame",
      "(hp->tail ? 0 : abi->frame_record + hp->frame)", "(hp->tail ? 0 : hp->frame)",
      [T_CORE_C]),
    M("plan-fp-in-gpr", "src/engine/route.c", "floats never overflow into integer registers",
      "== abi->n_arg_regs[c] && abi->fp_in_gpr)", "== abi->n_arg_regs[c] && 0)", [T_CORE_C]),
    M("plan-packed-size", "src/engine/route.c", "packed stack arguments laid out in 8-byte slots",
      "int size = param[i]->size;", "int size = 8;", [T_CORE_C]),
    M("plan-packed-meet", "src/engine/route.c",
      "packed stack arguments rewritten in place where they meet apart",
      "hp->tail = !packed_moves_meet(shape, nargs, tloc, floc);", "hp->tail = 1;", [T_CORE_C]),
    M("plan-packed-key", "src/engine/route.c", "handler cache key ignores the packed size",
      "| (a->size != 0 ? size_code(a->size) << 5 : 0)", "| 0", [T_CORE_C]),
    M("plan-shared-slots", "src/engine/route.c",
      "Microsoft x64's registers counted per class, not taken by position",
      "if (abi->slots_shared) /* one count", "if (0) /* one count", [T_CORE_C]),
    M("plan-shadow-frame", "src/engine/route.c",
      "the frame form reserves no shadow space for the target",
      "int32_t need = abi->shadow + target_stack", "int32_t need = target_stack",
      [T_CORE_C]),
    M("win64-shadow", "src/engine/arch/x86_64.c", "Microsoft x64 described without shadow space",
      ".shadow = 32,", ".shadow = 0,", [T_CORE_C]),
    M("win64-cycle-xmm", "src/engine/arch/x86_64.c",
      "Microsoft x64 parks SSE values in xmm0, an argument register",
      "{ NT_LOC_FPR, CYCLE_XMM_WIN64, 0, 0 } }", "{ NT_LOC_FPR, 0, 0, 0 } }", [T_CORE_C]),

    # ---- kinds.c: the libffi types engine/ffi.c reads
    M("ffi-i16-type", "src/kinds.c", "int16 given to libffi as uint16",
      'FFI_T(sint16), "int16", "c_int16"),', 'FFI_T(uint16), "int16", "c_int16"),',
      [T_ENGINE]),
    M("ffi-u8-type", "src/kinds.c", "uint8 given to libffi as sint8",
      'FFI_T(uint8), "uint8", "c_uint8"),', 'FFI_T(sint8), "uint8", "c_uint8"),',
      [T_ENGINE]),

    # ---- executable memory: W^X
    M("memfd-chunk-wx", "src/engine/memory/memfd.c", "second code chunk mapped writable+executable",
      "p = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, mfd,",
      "p = mmap(NULL, size, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED, mfd,", [T_ENGINE]),
    M("memfd-block-wx", "src/engine/memory/memfd.c", "stub block mapped writable+executable",
      "if (mmap(res, n, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_FIXED, mfd,",
      "if (mmap(res, n, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED | MAP_FIXED, mfd,",
      [T_ENGINE]),
    M("mprotect-wx", "src/engine/memory/mprotect.c", "sealed pages left writable+executable",
      "if (mprotect(p, code_size, PROT_READ | PROT_EXEC) != 0) {",
      "if (mprotect(p, code_size, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {",
      [T_ENGINE]),
]

# ---------------------------------------------------------------------------


def plant(text, m):
    """(new text, None) or (None, reason)."""
    if m["regex"]:
        hits = list(re.finditer(m["find"], text, flags=re.M))
        if len(hits) != 1:
            return None, f"pattern matches {len(hits)} times"
        h = hits[0]
        return text[:h.start()] + h.expand(m["repl"]) + text[h.end():], None
    n = text.count(m["find"])
    if n != 1:
        return None, f"pattern matches {n} times"
    return text.replace(m["find"], m["repl"]), None


def repo_files(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z", "-co", "--exclude-standard"],
                         check=True, capture_output=True).stdout
    return [f for f in out.decode().split("\0") if f]


def make_scratch(repo, tests_from=None):
    dst = tempfile.mkdtemp(prefix="numthunk-mutate-")
    for f in repo_files(repo):
        src = os.path.join(repo, f)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dst, f)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, f))
    if tests_from:
        shutil.rmtree(os.path.join(dst, "tests"))
        arch = subprocess.run(["git", "-C", repo, "archive", tests_from, "tests"],
                              check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", dst], input=arch, check=True)
    return dst


def build(scratch, timeout):
    env = {**os.environ}
    env.pop("NUMTHUNK_WERROR", None)     # a mutant may warn; it must still build
    try:
        r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace",
                            "--force"], cwd=scratch, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return False, "build timed out"
    return r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


_NODE_RE = re.compile(r"(tests/[\w/.-]+\.py::[^\s]+)")


def test_env(engine=None):
    """The environment of a mutant's test run: NUMTHUNK_ENGINE=ffi for
    --engine ffi; unset (the native engine where there is one) otherwise."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMTHUNK_ENGINE", None)
    env.pop("NUMTHUNK_BACKEND", None)  # its old name, still read
    if engine == "ffi":
        env["NUMTHUNK_ENGINE"] = "ffi"
    return env


def marked(name):
    """A test selection's entry for every test of the suite marked ``name``
    (pytest -m; the markers are pyproject.toml's), wherever its file is."""
    return f"-m {name}"


def is_marker(test):
    return test.startswith("-m ")


def present(root, tests):
    """The entries of a selection that exist under root: the test files and
    node ids found there, and every marker."""
    return [t for t in tests
            if is_marker(t) or os.path.exists(os.path.join(root, t.split("::")[0]))]


def pytest_runs(tests):
    """A selection as pytest's arguments: when it names markers, first the
    tests of the suite with any of them (the guards: seconds, and the first
    to fail at an edge), less the files and node ids it names; then those,
    in one run."""
    named = [t for t in tests if not is_marker(t)]
    marks = [t[3:] for t in tests if is_marker(t)]
    runs = []
    if marks:
        runs.append(["tests", "-m", " or ".join(marks),
                     *(f"--deselect={t}" if "::" in t else f"--ignore={t}" for t in named)])
    if named:
        runs.append(named)
    return runs


def run_tests(scratch, tests, timeout, engine=None):
    """('passed'|'failed'|'timeout'|'crash', killing test or '', seconds):
    the first pytest run of the selection that does not pass says which."""
    status, test, spent = "passed", "", 0.0
    for args in pytest_runs(tests):
        status, test, dt = _run_pytest(scratch, args, max(1.0, timeout - spent), engine,
                                       by_marker=args[:1] == ["tests"])
        spent += dt
        if status != "passed":
            break
    return status, test, spent


def _run_pytest(scratch, args, timeout, engine, by_marker):
    # Ctrl-C as in a terminal: a run started in the background (nohup, &)
    # inherits SIGINT ignored, and the tests that raise it would fail.
    cmd = [sys.executable, "-c", "import runpy, signal, sys; "
           "signal.signal(signal.SIGINT, signal.default_int_handler); "
           "sys.argv[0] = 'pytest'; runpy.run_module('pytest', run_name='__main__')",
           "-x", "-v", "-p", "no:cacheprovider", "-rfE", "--tb=line", *args]
    env = test_env(engine)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        nodes = _NODE_RE.findall(out)
        return "timeout", nodes[-1] if nodes else "", time.monotonic() - t0
    dt = time.monotonic() - t0
    # a marker no test has (an older tests/, --tests-from) selects nothing
    if proc.returncode == 0 or (by_marker and proc.returncode == 5):
        return "passed", "", dt
    m = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", out, flags=re.M)
    if m:
        return "failed", m.group(1), dt
    nodes = _NODE_RE.findall(out)
    last = nodes[-1] if nodes else ""
    if proc.returncode < 0 or proc.returncode > 5 or "Fatal Python error" in out:
        return "crash", f"{last} (crash, rc {proc.returncode})", dt
    tail = out.strip().splitlines()[-1:] or [""]
    return "failed", last or f"rc {proc.returncode}: {tail[0][:80]}", dt


class Worker:
    """One scratch copy; mutants run in it one after another."""

    def __init__(self, repo, tests_from, build_timeout, fallback=FALLBACK):
        self.fallback = fallback
        self.dir = make_scratch(repo, tests_from)
        self.build_timeout = build_timeout
        self.built_clean = False

    def ensure_clean_build(self):
        if not self.built_clean:
            ok, log = build(self.dir, self.build_timeout)
            if not ok:
                raise RuntimeError("the unmutated tree does not build:\n" + log)
            self.built_clean = True

    def run(self, m, full, timeout, engine=None):
        path = os.path.join(self.dir, m["file"])
        with open(path) as fh:
            orig = fh.read()
        text, why = plant(orig, m)
        if text is None:
            return dict(result="stale", test=why, secs=0.0)
        is_c = m["file"].endswith((".c", ".h"))
        if not is_c:
            self.ensure_clean_build()
        t0 = time.monotonic()
        try:
            with open(path, "w") as fh:
                fh.write(text)
            if is_c:
                self.built_clean = False
                ok, log = build(self.dir, self.build_timeout)
                if not ok:
                    last = [ln for ln in log.splitlines() if "error" in ln][:1]
                    return dict(result="build-error", test=(last or [""])[0][:100],
                                secs=time.monotonic() - t0)
            tests = ["tests"] if full else m["tests"]
            exists = present(self.dir, tests)
            note = ""
            if not [t for t in exists if not is_marker(t)]:
                exists = [t for t in self.fallback if os.path.exists(os.path.join(self.dir, t))]
                note = "[fallback set] "
            status, test, _ = run_tests(self.dir, exists, timeout, engine)
            test = note + test
        finally:
            with open(path, "w") as fh:
                fh.write(orig)
        result = {"passed": "survived", "failed": "killed", "crash": "killed",
                  "timeout": "timeout"}[status]
        return dict(result=result, test=test, secs=time.monotonic() - t0)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def missing_tests(tests, repo):
    """The entries of a selection that name nothing: a test file that does
    not exist, a marker that pyproject.toml does not register or that no
    test file of tests/ uses."""
    with open(os.path.join(repo, "pyproject.toml"), encoding="utf-8") as fh:
        registered = set(re.findall(r'^\s*"(\w+):', fh.read(), flags=re.M))
    used = ""
    for f in sorted(os.listdir(os.path.join(repo, "tests"))):
        if f.startswith("test_") and f.endswith(".py"):
            with open(os.path.join(repo, "tests", f), encoding="utf-8") as fh:
                used += fh.read()

    def names_nothing(t):
        if is_marker(t):
            return t[3:] not in registered or f"pytest.mark.{t[3:]}" not in used
        return not os.path.exists(os.path.join(repo, t.split("::")[0]))

    return [t for t in tests if names_nothing(t)]


def check(mutants, repo):
    """Every pattern matches exactly once, every test file and marker a
    mutant or an operator mode's selection names exists: 0, else 1."""
    bad = []
    for m in mutants:
        try:
            with open(os.path.join(repo, m["file"])) as fh:
                _, why = plant(fh.read(), m)
        except OSError as e:
            why = f"cannot read {m['file']}: {e.strerror}"
        missing = missing_tests(m["tests"], repo)
        if why is None and missing:
            why = "test file(s) missing: " + " ".join(missing)
        if why is not None:
            bad.append(m["id"])
            print(f"STALE {m['id']:24} {m['file']:26} {why}")
    for src, sel in [("OP_CORE", OP_CORE), *OP_TESTS.items(), ("FALLBACK", FALLBACK)]:
        missing = missing_tests(sel, repo)
        if missing:
            bad.append(src)
            print(f"STALE selection of {src}: " + " ".join(missing))
    ids = [m["id"] for m in mutants]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        bad += dup
        print("duplicate id(s): " + ", ".join(dup))
    print(f"{len(mutants) - len(bad)}/{len(mutants)} mutants match exactly once"
          + (f"; stale: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


# ---------------------------------------------------------------------------
# Operator mode (--operators): mutants generated from the current sources by
# tools/mutate_ops.py, sampled with a seed, each built incrementally (only
# the translation unit it is in) and compared with the unmutated object
# code first: a mutant that compiles to the same code is equivalent (and a
# file this platform does not build, engine/arch/aarch64.c on x86-64, compiles
# to nothing new); one that does not compile is reported as such.

# travel's files but test_travel_parallel.py (what the former
# test_travel.py held)
T_TRAVEL = ["tests/test_travel.py", "tests/test_travel_library.py",
            "tests/test_travel_refusals.py", "tests/test_travel_copy.py",
            "tests/test_travel_generated.py"]
T_INTEROP = "tests/test_interop.py"
T_SCIPY = "tests/test_scipy.py"
T_MAIN = "tests/test_main.py"
T_COMP = "tests/test_composition.py"
T_NOMEM = "tests/test_nomemory.py"
T_LEAKS = "tests/test_leaks.py"
T_MODULE = "tests/test_module.py"
T_STRUCTURE = "tests/test_structure.py"
# the boundary tests of the core's guards, wherever their feature's file is
# (test_<feature>_guards.py; a few seconds in all)
T_GUARDS = marked("guards")

# What every C mutant runs: the core of the suite (a few minutes), and the
# feature files that take seconds (the module's own functions, SciPy,
# Cython, ctypes/cffi, pickling); not Numba's (a minute), nor the
# documentation's.
OP_CORE = [T_BIND, T_REFUSALS, T_CONV, T_SIG, T_TYPES, T_ABI, T_LIFE, T_COMP, T_REBIND,
           T_THREADS, T_ENGINE, T_CORE_C, T_DLPACK, T_CAPI, T_NOMEM, T_LEAKS, T_GUARDS,
           T_MODULE, T_STRUCTURE, T_SCIPY, T_CYTHON, T_INTEROP, *T_TRAVEL]

# Files whose behaviour other test files reach first (they run before the
# core, so that a kill comes early); a file not named here gets OP_CORE.
OP_TESTS = {
    "src/convert/dlpack.c": [T_DLPACK, T_CAPI],
    # struct pointers (their layouts and byte order) are tested in test_interop
    "src/convert/buffer.c": [T_CONV, T_INTEROP],
    "src/convert/value.c": [T_BIND, T_CONV, T_INTEROP],
    "src/python/capi.c": [T_CAPI],
    "src/python/module.c": [T_MODULE, T_SCIPY],
    "src/python/signature.c": [T_SIG, T_TYPES],
    "src/python/function.c": [T_BIND],
    "src/python/binder.c": [T_BIND],
    "src/parse/declarator.c": [T_SIG, T_CORE_C, T_TYPES, T_REFUSALS],
    "src/parse/spellings.c": [T_TYPES, T_SIG],
    "src/engine/route.c": [T_CORE_C, T_ENGINE, T_ABI],
    "src/engine/arch/x86_64.c": [T_CORE_C, T_ENGINE, T_ABI],
    "src/engine/arch/aarch64.c": [T_CORE_C],
    "src/engine/memory/memfd.c": [T_ENGINE],
    "src/engine/memory/mprotect.c": [T_ENGINE],
    # built for Windows only: tests/c/win64.sh, through T_CORE_C
    "src/engine/memory/filemap.c": [T_CORE_C],
    "src/engine/memory/virtualprotect.c": [T_CORE_C],
    "src/engine/native.c": [T_ENGINE, T_CORE_C],
    "src/life/quarantine.c": [T_CORE_C, T_ENGINE],
    "numthunk/_cython.py": [T_CYTHON, T_TYPES, T_INTEROP],
    "numthunk/_numba.py": [*T_NUMBA, T_TYPES],
    "numthunk/_numba_sig.py": [T_NUMBA_SYNTAX, T_SIG, *T_NUMBA],
    "numthunk/_numba_ext.py": [*T_NUMBA, T_INTEROP],
    "numthunk/_recipe.py": [*T_TRAVEL, T_DLPACK],
    "numthunk/_foreign.py": [T_INTEROP, T_BIND, T_REFUSALS],
    "numthunk/_signature.py": [T_SIG, T_TYPES, T_BIND, T_INTEROP, T_SCIPY],
    "numthunk/_ctypes.py": [T_SIG, T_TYPES, T_BIND, T_INTEROP],
    "numthunk/_cffi.py": [T_SIG, T_TYPES, T_INTEROP],
    "numthunk/_loader.py": [*T_TRAVEL, T_BIND],
    "numthunk/_api.py": [T_BIND, T_REFUSALS, *T_TRAVEL, T_INTEROP, *T_NUMBA] + OP_CORE,
    "numthunk/__main__.py": [T_MAIN],
    "numthunk/__init__.py": [T_BIND],
}
# Python files: their own tests only (the C core is not theirs).
OP_PY_ONLY = True
# seconds for the whole suite (--confirm), about 6 minutes on one core alone
CONFIRM_TIMEOUT = 2400


def op_tests(rel):
    own = OP_TESTS.get(rel, [])
    if rel.endswith(".py") and own and OP_PY_ONLY:
        picked = own
    else:
        picked = own + OP_CORE
    return list(dict.fromkeys(picked))


def _code_key(code):
    """A code object without its positions: two sources that differ only in
    layout (parentheses, spacing) compile to equal keys."""
    consts = tuple(_code_key(c) if hasattr(c, "co_code") else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_flags, code.co_argcount, code.co_kwonlyargcount,
            code.co_posonlyargcount)


def _py_equivalent(orig, new, path):
    try:
        return _code_key(compile(orig, path, "exec")) == _code_key(compile(new, path, "exec"))
    except SyntaxError:
        return False


_COMPILE_RE = re.compile(r"^\S*(?:gcc|cc|clang)\S*\s.*\s-c\s+(src/\S+\.c)\s+-o\s+(\S+\.o)")
_COPY_RE = re.compile(r"^copying (\S+\.so) -> (\S+)$")


class OpWorker(Worker):
    """A scratch copy built once verbosely: the commands that compile each
    translation unit and link the extension are kept, so that a mutant
    recompiles only what includes its file."""

    def __init__(self, repo, build_timeout):
        super().__init__(repo, None, build_timeout)
        env = {**os.environ}
        env.pop("NUMTHUNK_WERROR", None)
        r = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "--force"],
                           cwd=self.dir, capture_output=True, text=True, env=env,
                           timeout=build_timeout)
        if r.returncode != 0:
            raise RuntimeError("the unmutated tree does not build:\n" + r.stdout[-3000:]
                               + r.stderr[-3000:])
        self.compile = {}            # "src/x.c" -> (argv, object)
        self.link = None
        self.copy = None
        for line in (r.stdout + "\n" + r.stderr).splitlines():
            m = _COMPILE_RE.match(line)
            if m:
                argv = shlex.split(line) + ["-g0"]     # no debug info: code only
                self.compile[m.group(1)] = (argv, m.group(2))
            elif " -shared " in line and "_core" in line:
                self.link = shlex.split(line)
            else:
                c = _COPY_RE.match(line.strip())
                if c:
                    self.copy = (c.group(1), c.group(2))
        if not self.compile or self.link is None:
            raise RuntimeError("could not read the build commands from setup.py's output")
        for src, (argv, _obj) in self.compile.items():
            self._run(argv, "compile " + src)
        self._relink()
        self.clean = {}
        for src, (_argv, obj) in self.compile.items():
            with open(os.path.join(self.dir, obj), "rb") as f:
                self.clean[src] = f.read()
        self.built_clean = True

    def _run(self, argv, what):
        r = subprocess.run(argv, cwd=self.dir, capture_output=True, text=True,
                           timeout=self.build_timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{what} failed:\n{r.stderr[-2000:]}")

    def _relink(self):
        self._run(self.link, "link")
        if self.copy is not None:
            src, dst = self.copy
            dst = os.path.join(self.dir, dst)
            if os.path.isdir(dst):
                dst = os.path.join(dst, os.path.basename(src))
            shutil.copy2(os.path.join(self.dir, src), dst)

    def units_of(self, rel):
        """The translation units a C file is compiled in: itself, or those
        that #include it (directly or through a header)."""
        if rel in self.compile:
            return [rel]
        name = os.path.basename(rel)
        out = []
        for src in self.compile:
            with open(os.path.join(self.dir, src), encoding="utf-8") as f:
                text = f.read()
            if f'#include "{name}"' in text or (rel.endswith(".h") and _includes(
                    self.dir, src, name)):
                out.append(src)
        return out

    def run_op(self, m, timeout, engine, tests):
        path = os.path.join(self.dir, m["file"])
        with open(path, encoding="utf-8") as fh:
            orig = fh.read()
        new, why = (plant_patch(self.dir, m, orig) if "patch" in m
                    else mutate_ops.plant(orig, m))
        if new is None:
            return dict(result="stale", test=why, secs=0.0)
        t0 = time.monotonic()
        is_c = m["file"].endswith((".c", ".h"))
        if not is_c and _py_equivalent(orig, new, m["file"]):
            return dict(result="equivalent", test="same bytecode", secs=0.0)
        units = self.units_of(m["file"]) if is_c else []
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(new)
            if is_c:
                changed = False
                for src in units:
                    argv, obj = self.compile[src]
                    r = subprocess.run(argv, cwd=self.dir, capture_output=True, text=True,
                                       timeout=self.build_timeout)
                    if r.returncode != 0:
                        err = [ln for ln in r.stderr.splitlines() if "error" in ln][:1]
                        return dict(result="build-error", test=(err or [""])[0][:120],
                                    secs=time.monotonic() - t0)
                    with open(os.path.join(self.dir, obj), "rb") as f:
                        changed |= f.read() != self.clean[src]
                if not changed:
                    return dict(result="equivalent",
                                test="same object code" if units else "not built here",
                                secs=time.monotonic() - t0)
                self._relink()
            exists = present(self.dir, tests)
            status, test, _ = run_tests(self.dir, exists, timeout, engine)
        finally:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(orig)
            if is_c:
                for src in units:
                    with open(os.path.join(self.dir, self.compile[src][1]), "wb") as f:
                        f.write(self.clean[src])
                self._relink()
        result = {"passed": "survived", "failed": "killed", "crash": "killed",
                  "timeout": "timeout"}[status]
        return dict(result=result, test=test, secs=time.monotonic() - t0)


def _includes(root, src, header, seen=None):
    """Whether src includes header, directly or through other headers of src/."""
    seen = set() if seen is None else seen
    if src in seen:
        return False
    seen.add(src)
    try:
        with open(os.path.join(root, src), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    for inc in re.findall(r'#include "([^"]+)"', text):
        if os.path.basename(inc) == header:
            return True
        if _includes(root, os.path.join(os.path.dirname(src), inc), header, seen):
            return True
    return False


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", re.M)


def patch_mutants(directory):
    """One mutant per DIR/*.patch, in the operator mutants' form: its file,
    the first changed line, its removed and added lines."""
    out = []
    for name in sorted(f for f in os.listdir(directory) if f.endswith(".patch")):
        path = os.path.join(os.path.abspath(directory), name)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        files = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)))
        removed = [ln[1:].strip() for ln in text.splitlines()
                   if ln.startswith("-") and not ln.startswith("---")]
        added = [ln[1:].strip() for ln in text.splitlines()
                 if ln.startswith("+") and not ln.startswith("+++")]
        line = 0
        hunk = _HUNK_RE.search(text)
        if hunk:
            # the hunk's first line, then its context up to the first change
            body = text[hunk.end():].split("\n")[1:]
            line = int(hunk.group(1))
            for ln in body:
                if ln.startswith(("-", "+")):
                    break
                line += 1
        out.append(dict(id=name, patch=path, file=files[0] if len(files) == 1 else "?",
                        files=files, line=line, start=0, func=name[:-len(".patch")],
                        desc="hand-written", old_line=" / ".join(removed),
                        new_line=" / ".join(added), op="patch"))
    return out


def plant_patch(scratch, m, orig):
    """(the patched text of m's file, None), or (None, why): the patch is
    applied in the scratch copy, read, and the file written back."""
    if len(m["files"]) != 1:
        return None, f"a patch must change one file, this one changes {len(m['files'])}"
    with open(m["patch"], "rb") as fh:
        r = subprocess.run(["git", "apply", "--unsafe-paths", "-"], cwd=scratch, input=fh.read(),
                           capture_output=True)
    if r.returncode != 0:
        return None, "does not apply: " + r.stderr.decode(errors="replace").strip()[:120]
    path = os.path.join(scratch, m["file"])
    with open(path, encoding="utf-8") as fh:
        new = fh.read()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(orig)
    return new, None


def operator_mode(args):
    mutants = patch_mutants(args.patches) if args.patches else mutate_ops.generate(args.repo)
    if args.ops:
        mutants = [m for m in mutants if m["op"] in args.ops]
    if args.files:
        mutants = [m for m in mutants if any(fnmatch.fnmatch(m["file"], g) for g in args.files)]
    if args.only:
        known = {m["id"] for m in mutants}
        unknown = [i for i in args.only if i not in known]
        if unknown:
            print(f"unknown operator mutant id(s): {', '.join(unknown)}")
            return 2
        mutants = [m for m in mutants if m["id"] in args.only]
    total = len(mutants)
    if args.sample and args.sample < len(mutants):
        mutants = random.Random(args.seed).sample(mutants, args.sample)
        mutants.sort(key=lambda m: (m["file"], m["start"]))
    what = (f"patches from {args.patches}" if args.patches
            else f"operator mutants (seed {args.seed})")
    if args.tests:
        tests_of = lambda m: list(args.tests)   # noqa: E731
    elif args.full:
        tests_of = lambda m: ["tests"]          # noqa: E731
    else:
        tests_of = lambda m: op_tests(m["file"])  # noqa: E731
    if args.list:
        for m in mutants:
            print(f"{m['id']:40} {m['func']:28} {m['desc']}\n{'':40} - {m['old_line'][:110]}"
                  f"\n{'':40} + {m['new_line'][:110]}")
        print(f"{len(mutants)} of {total} {what}")
        return 0
    print(f"{len(mutants)} of {total} {what}, engine "
          f"{args.engine or 'native'}, {args.jobs} job(s)", flush=True)
    # Python mutants first: they need no build.
    order = sorted(mutants, key=lambda m: (m["file"].endswith((".c", ".h")), m["file"],
                                           m["start"]))
    t_start = time.monotonic()
    jobs = max(1, min(args.jobs, len(order) or 1))
    workers = []
    results = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            workers = list(ex.map(lambda _: OpWorker(args.repo, args.build_timeout),
                                  range(jobs)))
        free = list(workers)
        # Each test selection once on the unmutated tree: it must pass (else
        # every mutant would look killed), and its time sets the timeout.
        # Selections of the same files in another order (each mutant's own
        # file first) share one clean run.
        budget = {}
        selections = {tuple(sorted(tests_of(m))): tuple(tests_of(m)) for m in order}
        if args.confirm:
            # the whole suite too, run as a survivor's is (-x -v): a test that
            # fails there unmutated would call every survivor killed
            selections[("tests",)] = ("tests",)

        def clean(sel):
            w = free.pop()
            try:
                exists = present(w.dir, sel)
                return sel, run_tests(w.dir, exists, max(1800, args.timeout), args.engine)
            finally:
                free.append(w)

        if not args.no_baseline:
            with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
                for sel, (status, test, secs) in ex.map(clean, sorted(selections.values())):
                    if status != "passed":
                        print(f"the unmutated tree fails its tests ({status}: {test}); "
                              f"selection: {' '.join(sel)}")
                        return 2
                    budget[tuple(sorted(sel))] = max(args.timeout, 3 * secs + 30)
                    print(f"  clean run {secs:6.1f}s (timeout {budget[tuple(sorted(sel))]:.0f}s): "
                          f"{' '.join(os.path.basename(t) for t in sel)}", flush=True)

        def one(m):
            w = free.pop()
            try:
                sel = tuple(tests_of(m))
                r = w.run_op(m, budget.get(tuple(sorted(sel)), args.timeout), args.engine,
                             list(sel))
                if r["result"] == "survived" and args.confirm and sel != ("tests",):
                    # the selection is a shortcut: a survivor of it meets the
                    # whole suite before it counts
                    again = w.run_op(m, max(args.timeout, CONFIRM_TIMEOUT), args.engine,
                                     ["tests"])
                    if again["result"] != "survived":
                        again["test"] = f"{again['test']} (whole suite)"
                    again["secs"] += r["secs"]
                    r = again
                return m, r
            finally:
                free.append(w)

        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            for m, r in ex.map(one, order):
                results[m["id"]] = r
                print(f"  {r['result']:12} {r['secs']:6.1f}s  {m['id']}  {r['test']}",
                      flush=True)
    finally:
        for w in workers:
            w.close()
    return op_report(mutants, results, time.monotonic() - t_start, args)


def op_report(mutants, results, seconds, args):
    counts = {}
    for r in results.values():
        counts[r["result"]] = counts.get(r["result"], 0) + 1
    live = [m for m in mutants if results[m["id"]]["result"] in ("killed", "timeout",
                                                                 "survived")]
    killed = [m for m in live if results[m["id"]]["result"] != "survived"]
    print()
    print(f"score: {len(killed)}/{len(live)} killed"
          + (f" ({100.0 * len(killed) / len(live):.0f}%)" if live else "")
          + f" on engine {args.engine or 'native'}; "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; {seconds:.0f} s")
    for title, which in (("survivors", ("survived",)),
                         ("equivalent (same code: not counted)", ("equivalent",)),
                         ("not compiling (not counted)", ("build-error",)),
                         ("stale", ("stale",))):
        rows = [m for m in mutants if results[m["id"]]["result"] in which]
        if not rows:
            continue
        print(f"\n{title}:")
        for m in rows:
            print(f"  {m['file']}:{m['line']} in {m['func']} ({m['desc']})\n"
                  f"      - {m['old_line'][:150]}\n      + {m['new_line'][:150]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(m, **results[m["id"]]) for m in mutants], f, indent=1)
    return 1 if any(results[m["id"]]["result"] == "survived" for m in mutants) else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true",
                    help="only check that every pattern matches exactly once in the tree "
                         "(and that every test file named exists); exit 1 listing the stale")
    ap.add_argument("--only", nargs="+", metavar="ID",
                    help="run only these mutants (with --operators: ids as --list and --json "
                         "give them, e.g. src/plan/plan.c:61:16:rel:12)")
    ap.add_argument("--full", action="store_true", help="run the whole suite per mutant")
    ap.add_argument("--tests", nargs="+", metavar="TEST",
                    help="run these test files or node ids (tests/x.py::name) for every "
                         "mutant instead of its own selection: to check that a new test "
                         "kills a mutant (with --only) without its whole selection")
    ap.add_argument("--jobs", type=int, default=None,
                    help="parallel scratch copies (default 1; with --operators, the core count)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds for one mutant's tests; a hang counts as killed (timeout). "
                         "Default 300; with --operators, 60 at least, else 3x the test "
                         "selection's clean run + 30 s")
    ap.add_argument("--build-timeout", type=float, default=300)
    ap.add_argument("--tests-from", metavar="REF",
                    help="take tests/ from this git ref (e.g. main) instead of the work tree")
    ap.add_argument("--fallback", nargs="+", metavar="FILE", default=FALLBACK,
                    help="test files to run when none of a mutant's own exist")
    ap.add_argument("--repo", default=ROOT, help="repository to copy (default: this one)")
    ap.add_argument("--engine", choices=["native", "ffi"], default=None,
                    help="run the tests on this engine (ffi: NUMTHUNK_ENGINE=ffi)")
    op = ap.add_argument_group("operator mode")
    op.add_argument("--operators", action="store_true",
                    help="mutants generated by operator from every C file of src/ and "
                         "Python file of numthunk/ (tools/mutate_ops.py), not the list above")
    op.add_argument("--sample", type=int, default=0, metavar="N",
                    help="a random sample of N of them (default: all)")
    op.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    op.add_argument("--ops", nargs="+", metavar="OP",
                    choices=["rel", "const", "cond", "swap", "not", "cast", "kwarg", "ref"],
                    help="only these operators")
    op.add_argument("--files", nargs="+", metavar="GLOB", help="only files matching these")
    op.add_argument("--json", metavar="FILE", help="write every mutant and its result here")
    op.add_argument("--patches", metavar="DIR",
                    help="hand-written mutants: each DIR/*.patch (a git diff of one file), "
                         "run as operator mutants are")
    op.add_argument("--no-baseline", action="store_true",
                    help="skip the run of each test selection on the unmutated tree (its "
                         "time sets the mutants' timeout: 3x + 30 s, at least --timeout)")
    op.add_argument("--confirm", action="store_true",
                    help="run each survivor of its test selection again against the whole "
                         "suite (tests/): the selection is a shortcut, the suite's verdict "
                         "is the one that counts")
    args = ap.parse_args(argv)
    if args.operators or args.patches:
        args.jobs = args.jobs or os.cpu_count() or 1
        args.timeout = args.timeout or 60
        return operator_mode(args)
    args.jobs = args.jobs or 1
    args.timeout = args.timeout or 300

    mutants = MUTANTS
    if args.tests:
        mutants = [{**m, "tests": list(args.tests)} for m in MUTANTS]
    if args.only:
        known = {m["id"] for m in MUTANTS}
        unknown = [i for i in args.only if i not in known]
        if unknown:
            ap.error(f"unknown mutant id(s): {', '.join(unknown)}")
        mutants = [m for m in mutants if m["id"] in args.only]
    if args.list:
        for m in mutants:
            print(f"{m['id']:24} {m['file']:26} {m['desc']}\n{'':24} tests: {' '.join(m['tests'])}")
        return 0

    if args.check:
        return check(mutants, args.repo)

    # Python-file mutants first: they share one clean build.
    mutants = sorted(mutants, key=lambda m: m["file"].endswith((".c", ".h")))
    # Stale patterns are found before anything is built.
    results = {}
    for m in mutants:
        with open(os.path.join(args.repo, m["file"])) as fh:
            new, why = plant(fh.read(), m)
        if new is None:
            results[m["id"]] = dict(result="stale", test=why, secs=0.0)
    todo = [m for m in mutants if m["id"] not in results]

    t_start = time.monotonic()
    jobs = max(1, min(args.jobs, len(todo) or 1))
    workers = [Worker(args.repo, args.tests_from, args.build_timeout, args.fallback)
               for _ in range(jobs)]
    try:
        free = list(workers)

        def one(m):
            w = free.pop()
            try:
                return m, w.run(m, args.full, args.timeout, args.engine)
            finally:
                free.append(w)

        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            for m, r in ex.map(one, todo):
                results[m["id"]] = r
                print(f"  {m['id']:24} {r['result']:12} {r['secs']:6.1f}s  {r['test']}",
                      flush=True)
    finally:
        for w in workers:
            w.close()

    print()
    print(f"{'id':24} {'file':26} {'result':12} {'description':50} killing test")
    for m in MUTANTS:
        if m["id"] not in results:
            continue
        r = results[m["id"]]
        print(f"{m['id']:24} {m['file']:26} {r['result']:12} {m['desc'][:50]:50} {r['test']}")
    counts = {}
    for r in results.values():
        counts[r["result"]] = counts.get(r["result"], 0) + 1
    live = [i for i, r in results.items() if r["result"] in ("killed", "timeout", "survived")]
    killed = sum(results[i]["result"] in ("killed", "timeout") for i in live)
    print()
    print(f"score: {killed}/{len(live)} killed"
          + (f" ({100.0 * killed / len(live):.0f}%)" if live else "")
          + "; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; {time.monotonic() - t_start:.0f} s")
    survivors = [i for i in live if results[i]["result"] == "survived"]
    if survivors:
        print("survivors: " + ", ".join(survivors))
    stale = [i for i, r in results.items() if r["result"] in ("stale", "build-error")]
    if stale:
        print("STALE or not building (refresh their patterns): " + ", ".join(stale))
    return 1 if survivors or stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""The C-level harnesses, built with the system compilers and run here so
the one test command covers them:

- tests/c/test_sig.c: parser and formatter round trips, error columns
  (built with ASan and UBSan);
- tests/c/fuzz_sig.c: the parser fuzz target driven by its standalone
  random driver (ASan and UBSan);
- tests/c/test_route.c: the native engines' handler planner run on
  a machine model, for several ABI descriptions (ASan and UBSan);
- tests/c/test_quarantine.c: the quarantine's schedule (which item leaves
  during which release) against a model of its contract (ASan and UBSan);
- tests/c/test_native.c: the native engine's differential test over
  thousands of random signatures, with fixtures compiled by gcc and by
  clang, plus W^X, release trap, fork, threads and quarantine; again over
  the Microsoft x64 description, in-process (ms_abi callees and callers);
- tests/c/win64.sh: the engine built for Windows by mingw-w64 and run
  under Wine, on the Windows memory policies.
"""

import os
import platform
import shlex
import subprocess
import sys

import pytest

import numthunk as nt

from conftest import compiler_command
from ntbuild import BUILD, compiler_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")
# an existing directory whose parent holds numthunk/include (the installed
# package's directory): "-I" it and "../numthunk/include/..." resolves
PKG_DIR = os.path.dirname(os.path.abspath(nt.__file__))
WARN = ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"]
SAN = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
       "-fno-omit-frame-pointer"]


def build(name, sources, flags, libs=()):
    os.makedirs(BUILD, exist_ok=True)
    out = os.path.join(BUILD, name)
    # PKG_DIR: src/ includes numthunk's headers as "../numthunk/include/...",
    # found from the source tree, or outside it through the installed package
    cmd = ["gcc", *WARN, *flags, f"-I{SRC}", f"-I{PKG_DIR}", *sources, "-o", out, *libs]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=compiler_env())
    assert proc.returncode == 0, proc.stderr
    return out


def run(exe, *args, env=None, timeout=900):
    # The harnesses link their own sanitizer runtime where they use one, and
    # test_native.c runs the compiler for its fixtures: no preload.
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                          env=compiler_env({**os.environ, **(env or {}),
                                            "ASAN_OPTIONS": "detect_leaks=1",
                                            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}),
                          cwd=BUILD)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


PARSE_SOURCES = [f"{SRC}/kinds.c", f"{SRC}/parse/spellings.c", f"{SRC}/parse/declarator.c"]


def test_signature_parser_c_tests():
    exe = build("test_sig", PARSE_SOURCES + [f"{HERE}/c/test_sig.c"], SAN, ["-lffi"])
    run(exe)


def test_signature_parser_fuzz_standalone():
    exe = build("fuzz_sig", PARSE_SOURCES + [f"{HERE}/c/fuzz_sig.c"],
                SAN + ["-DNT_FUZZ_STANDALONE"], ["-lffi"])
    run(exe, "200000", "20261129")


def test_handler_planner_c_tests():
    # the planner against a machine model, for the x86-64 and AArch64 arch
    # files' ABI descriptions (compiled on any host) and made-up ones
    exe = build("test_route",
                [f"{SRC}/engine/route.c", f"{SRC}/kinds.c", f"{SRC}/engine/arch/x86_64.c",
                 f"{SRC}/engine/arch/aarch64.c", f"{HERE}/c/test_route.c"], SAN, ["-lffi"])
    out = run(exe, "8000", "20261129")
    assert "all handler planner tests passed" in out
    assert "riscv64-lp64d  8000 plans" in out and "x86_64-sysv    8000 plans" in out
    assert "x86_64-win64   8000 plans" in out and "tiny-win       8000 plans" in out


def test_quarantine_c_tests():
    exe = build("test_quarantine", [f"{SRC}/life/quarantine.c", f"{SRC}/life/fork.c",
                                     f"{HERE}/c/test_quarantine.c"], SAN, ["-lpthread"])
    assert "78 items left as the contract says (quarantine 8)" in run(exe)
    assert "0 items left as the contract says (no reuse)" in run(exe, "noreuse")


# engine/choose.c includes the arch file and the engine/memory/ files on its platform
NATIVE_SOURCES = ["engine/choose.c", "engine/native.c", "engine/route.c", "engine/ffi.c",
                  "life/quarantine.c", "life/fork.c", "life/released.c", "kinds.c",
                  "parse/spellings.c", "parse/declarator.c", "plan/plan.c"]


@pytest.mark.differential
@pytest.mark.skipif(not nt.engine_info()["native_available"],
                    reason="the native engine exists on x86-64 Linux only")
@pytest.mark.parametrize("fixture_cc", ["gcc", "clang"])
def test_native_engine_harness(fixture_cc):
    command = compiler_command(fixture_cc)   # fails, never skips, when it is missing
    # the engine's allocations through the harness, which fails each in turn
    wrap = ["-DNT_TEST_WRAP_ALLOC", "-Wl," + ",".join(
        f"--wrap={f}" for f in ("malloc", "calloc", "realloc", "aligned_alloc", "strdup"))]
    exe = build("test_native", [f"{SRC}/{s}" for s in NATIVE_SOURCES] + [f"{HERE}/c/test_native.c"],
                ["-O2", *wrap], ["-lffi", "-ldl", "-lpthread"])
    out = run(exe, env={"NT_FIXTURE_CC": shlex.join(command)})   # run by system()
    assert "all native engine tests passed" in out
    assert "no memory: each of" in out


X86_64_LINUX = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")


@pytest.mark.skipif(not X86_64_LINUX, reason="not x86-64 Linux")
@pytest.mark.parametrize("fixture_cc", ["gcc", "clang"])
def test_native_engine_harness_microsoft_x64(fixture_cc):
    # The Microsoft x64 description in-process: engine/choose.c takes it
    # under -DNT_TEST_ABI_WIN64, thunks are called through ms_abi function
    # pointers and the fixtures are ms_abi functions the compiler made
    command = compiler_command(fixture_cc)
    exe = build("test_native_win64",
                [f"{SRC}/{s}" for s in NATIVE_SOURCES] + [f"{HERE}/c/test_native.c"],
                ["-O2", "-DNT_TEST_ABI_WIN64"], ["-lffi", "-ldl", "-lpthread"])
    out = run(exe, "1000", env={"NT_FIXTURE_CC": shlex.join(command)})
    assert "all native engine tests passed" in out


@pytest.mark.skipif(not X86_64_LINUX, reason="not x86-64 Linux")
def test_native_engine_on_windows_under_wine():
    # tests/c/win64.sh: the engine built by mingw-w64 for Windows, on the
    # Windows memory policies, calling mingw-built callees, run by Wine
    # (the script installs wine64 and gcc-mingw-w64-x86-64 when root and
    # missing, and fails otherwise)
    # (no sanitizer preload; the package's directory for its public headers)
    proc = subprocess.run(["bash", os.path.join(HERE, "c", "win64.sh")], capture_output=True,
                          text=True, timeout=900,
                          env=compiler_env({**os.environ, "NT_PACKAGE_DIR": PKG_DIR}))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "win64: all passed" in proc.stdout

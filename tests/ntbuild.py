"""The tests' one way to compile C: shared libraries (compile_shared, and
build() for a file of tests/fixtures/) and Python extension modules
(compile_extension, and build_extension() for a cached one), into
tests/_build, with the system C compiler; and what every test that runs a
compiler or expects a crash shares with them.

Runs side by side (pytest-xdist's workers, `pytest -n 2`) never write one
file together: what is built under a fixed name (a fixture library, a C
harness, a cffi module) goes to BUILD, which is the worker's own directory
(tests/_build/gw0, ...; tests/_build itself outside xdist); what is cached
by a key of its inputs (build_extension's, tests/cython's and tests/capi's
builds, zig's cache) is shared under SHARED, each entry built aside and
renamed into place whole.

Under the sanitizer run (.ci/run preloads libasan into the interpreter with
LD_PRELOAD), a compiler must not inherit the preload: gcc, cc1, ld and zig
would run instrumented, slowly, and report their own leaks as failures.
The tests' own compiler calls take compiler_env(); builds that start
compilers by name themselves find the shims of install_compiler_shims()
first on PATH. Python subprocesses that import numthunk keep the preload
(the sanitized extension needs the runtime loaded first)."""

import contextlib
import ctypes
import os
import shlex
import shutil
import subprocess
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "_build")
# PYTEST_XDIST_WORKER is set in each worker, and so in the processes it starts
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
BUILD = os.path.join(SHARED, _WORKER) if _WORKER else SHARED


def own_compiler_caches():
    """zig's clang (the test extras' ``python -m ziglang cc``) keeps one
    global cache, ~/.cache/zig, which two runs side by side would share:
    each tree's run gets its own, under its tests/_build, unless the caller
    chose one (the workers of one run share it: zig locks its entries).
    Set in os.environ, so every compiler the run starts, in this process
    or in a subprocess, takes it."""
    os.environ.setdefault("ZIG_GLOBAL_CACHE_DIR", os.path.join(SHARED, "zig-cache"))
    os.environ.setdefault("ZIG_LOCAL_CACHE_DIR", os.path.join(SHARED, "zig-cache"))


# Compilers a build may start by name: the shims below stand first on PATH.
SHIMMED = ("cc", "c++", "gcc", "g++", "cpp", "clang", "clang++", "ld", "as",
           "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++", "aarch64-linux-gnu-gcc")


def install_compiler_shims():
    """Under the sanitizer run (LD_PRELOAD set): a directory of shims first
    on this process's PATH, each running the compiler of its name found on
    the PATH as it was, without LD_PRELOAD. Builds that start compilers
    themselves (a docs page's shell block, setuptools, meson, cffi) then do
    not hand the preload on, wherever they run. Returns the directory, or
    None when nothing is preloaded."""
    if not os.environ.get("LD_PRELOAD"):
        return None
    shims = os.path.join(BUILD, "preload-free-compilers")
    os.makedirs(shims, exist_ok=True)
    path = os.environ.get("PATH", "")
    rest = os.pathsep.join(p for p in path.split(os.pathsep) if os.path.abspath(p) != shims)
    for name in SHIMMED:
        real = shutil.which(name, path=rest)
        if real is None:
            continue
        shim = os.path.join(shims, name)
        with open(shim + ".tmp", "w") as f:
            f.write(f"#!/bin/sh\nunset LD_PRELOAD\nexec '{real}' \"$@\"\n")
        os.chmod(shim + ".tmp", 0o755)
        os.replace(shim + ".tmp", shim)
    os.environ["PATH"] = os.pathsep.join([shims, rest])
    return shims


def compiler_env(env=None):
    """``env`` (default os.environ) for a compiler or a program that runs one:
    without LD_PRELOAD."""
    return {k: v for k, v in (os.environ if env is None else env).items()
            if k != "LD_PRELOAD"}


@contextlib.contextmanager
def no_preload():
    """For builds run in this process that spawn compilers with os.environ
    (cffi's ffi.compile): LD_PRELOAD is out of os.environ meanwhile."""
    saved = os.environ.pop("LD_PRELOAD", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["LD_PRELOAD"] = saved


def crashed(proc):
    """Whether a child process died of a crash: a signal, or under
    AddressSanitizer (its SEGV handler reports and exits with status 1) the
    sanitizer's report."""
    return proc.returncode < 0 or (proc.returncode != 0 and
                                   "AddressSanitizer" in (proc.stderr or ""))


def c_compiler():
    """The system C compiler's command line as a list: $CC, else the one
    Python was built with; fails when it is missing."""
    cmd = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cmd[0]) is None:
        raise RuntimeError(f"C compiler {cmd[0]!r} not found: the tests need one (the "
                           "compiler is the oracle)")
    return cmd


def compiler():
    """The system C compiler, its program alone."""
    return c_compiler()[0]


def compile_shared(source, name, compiler=None, extra=(), label=None):
    """Compile a C (or .S) file into a shared library under tests/_build and
    return its path. compiler: a command (string or list), the system one
    by default; label names the output (the compiler's name by default)."""
    if compiler is None:
        cmd_cc = c_compiler()
    else:
        cmd_cc = shlex.split(compiler) if isinstance(compiler, str) else list(compiler)
    if shutil.which(cmd_cc[0]) is None:
        raise RuntimeError(f"C compiler {cmd_cc[0]!r} not found: the tests need one (the "
                           "compiler is the oracle)")
    os.makedirs(BUILD, exist_ok=True)
    label = label or os.path.basename(cmd_cc[0])
    out = os.path.join(BUILD, f"{name}-{label}{sysconfig.get_config_var('SHLIB_SUFFIX') or '.so'}")
    std = [] if source.endswith(".S") else ["-std=c11", "-Wall", "-Wextra", "-Werror"]
    cmd = [*cmd_cc, "-O2", "-shared", "-fPIC", *std, *extra, "-o", out, source]
    subprocess.run(cmd, check=True, env=compiler_env())
    return out


def build(source, name, extra=()):
    """Compile fixtures/<source> (C or .S) into a shared library; its path."""
    return compile_shared(os.path.join(HERE, "fixtures", source), name, extra=extra)


def load(source, name):
    return ctypes.CDLL(build(source, name))


def address(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def extension_toolchain():
    """(compiler command, extension suffix, link flags) for a Python
    extension module built with the system C compiler ($CC, else the one
    Python was built with)."""
    import sys

    cc = c_compiler()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    link = ["-shared"] + (["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else [])
    return cc, suffix, link


def compile_extension(sources, out, include_dirs=(), strict=True, cwd=None):
    """Compile C sources into the Python extension module file ``out``
    (-Wall -Wextra -Werror when strict, else -w: generated code such as
    Cython's); raises with the compiler's output when it fails."""
    cc, _, link = extension_toolchain()
    inc = [f for d in [sysconfig.get_paths()["include"], *include_dirs] for f in ("-I", d)]
    warn = ["-std=c11", "-Wall", "-Wextra", "-Werror"] if strict else ["-w"]
    cmd = [*cc, "-O2", "-fPIC", *inc, *warn, *sources, "-o", out, *link]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=compiler_env())
    if proc.returncode != 0:
        raise RuntimeError(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")


def build_extension(source, name, include_dirs=(), depends=()):
    """Compile one C file into the Python extension module ``name`` (with
    the system C compiler, -Wall -Wextra -Werror) under tests/_build/ext,
    keyed on the source, the files it depends on and the interpreter: a
    session reuses a finished build, never a stale one. Returns the
    directory to put on sys.path."""
    import hashlib
    import sys
    import tempfile

    h = hashlib.sha256(f"{sys.version} {sys.platform}".encode())
    for path in [source, *depends]:
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    root = os.path.join(SHARED, "ext")
    target = os.path.join(root, f"{name}-{h.hexdigest()[:16]}")
    if os.path.exists(os.path.join(target, ".done")):
        return target
    os.makedirs(root, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tmp-", dir=root)
    try:
        suffix = extension_toolchain()[1]
        compile_extension([source], os.path.join(work, name + suffix), include_dirs)
        open(os.path.join(work, ".done"), "w").close()
        try:
            os.rename(work, target)
        except OSError:
            if not os.path.exists(os.path.join(target, ".done")):
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)

"""Build of numthunk._core: CPython + NumPy C API + libffi.

NUMTHUNK_WERROR=1    compile with -Werror (CI does)
NUMTHUNK_SANITIZE=1  build with AddressSanitizer and UndefinedBehaviorSanitizer
NUMTHUNK_SANITIZE=thread  build with ThreadSanitizer (tools/tsan.sh runs it
                     on a free-threaded CPython, libtsan preloaded)
"""

import glob
import os
import shutil
import subprocess
import sys

import numpy
from setuptools import Extension, setup

LIBFFI_HELP = ("numthunk needs libffi's development files to build: install libffi-dev "
               "(Debian/Ubuntu: apt-get install libffi-dev), libffi-devel (Fedora/RHEL) "
               "or libffi (Homebrew/conda)")


def _pkg_config(*args):
    if shutil.which("pkg-config") is None:
        return None
    try:
        out = subprocess.run(["pkg-config", *args, "libffi"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.split()


def libffi_flags():
    cflags = _pkg_config("--cflags")
    libs = _pkg_config("--libs")
    include_dirs = [f[2:] for f in cflags or [] if f.startswith("-I")]
    library_dirs = [f[2:] for f in libs or [] if f.startswith("-L")]
    if cflags is None:
        multiarch = getattr(sys.implementation, "_multiarch", "")
        candidates = ["/usr/include", f"/usr/include/{multiarch}", "/usr/local/include",
                      "/opt/homebrew/opt/libffi/include", "/usr/local/opt/libffi/include",
                      os.path.join(sys.prefix, "include")]
        found = [d for d in candidates if os.path.exists(os.path.join(d, "ffi.h"))]
        if not found:
            sys.exit(LIBFFI_HELP)
        include_dirs = found[:1]
    elif not any(os.path.exists(os.path.join(d, "ffi.h"))
                 for d in include_dirs + [
                     "/usr/include",
                     f"/usr/include/{getattr(sys.implementation, '_multiarch', '')}"]):
        sys.exit(LIBFFI_HELP)
    return include_dirs, library_dirs


def compile_args():
    args = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden",
            "-D_GNU_SOURCE"]
    link = []
    if os.environ.get("NUMTHUNK_WERROR") == "1":
        args.append("-Werror")
    if os.environ.get("NUMTHUNK_SANITIZE") == "1":
        san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
               "-fno-sanitize-recover=undefined"]
        args += san + ["-O1", "-g"]
        link += san
    elif os.environ.get("NUMTHUNK_SANITIZE") == "thread":
        san = ["-fsanitize=thread", "-fno-omit-frame-pointer"]
        args += san + ["-O1", "-g"]
        link += san
    elif os.environ.get("NUMTHUNK_SANITIZE"):
        sys.exit("NUMTHUNK_SANITIZE is 1 (ASan and UBSan) or thread (TSan), "
                 f"not {os.environ['NUMTHUNK_SANITIZE']!r}")
    return args, link


# The core is src/ by stage (docs/architecture.md, "The layout"). The
# platform files (src/engine/arch/*.c, src/engine/memory/*.c) are included
# by src/engine/choose.c's one #if chain, not compiled on their own.
INCLUDED = sorted(glob.glob("src/engine/arch/*.c") + glob.glob("src/engine/memory/*.c"))
SOURCES = sorted(p for p in glob.glob("src/**/*.c", recursive=True) if p not in INCLUDED)

ffi_inc, ffi_lib = libffi_flags()
cargs, largs = compile_args()

setup(
    ext_modules=[
        Extension(
            "numthunk._core",
            sources=SOURCES,
            depends=glob.glob("src/**/*.h", recursive=True) + INCLUDED,
            include_dirs=["src", numpy.get_include(), *ffi_inc],
            library_dirs=ffi_lib,
            libraries=["ffi"],
            extra_compile_args=cargs,
            extra_link_args=largs,
        )
    ],
)

"""Build of numthunk._core: CPython + NumPy C API + libffi.

NUMTHUNK_WERROR=1    compile with -Werror (CI does), /WX with MSVC
NUMTHUNK_SANITIZE=1  build with AddressSanitizer and UndefinedBehaviorSanitizer
NUMTHUNK_SANITIZE=thread  build with ThreadSanitizer (tools/tsan.sh runs it
                     on a free-threaded CPython, libtsan preloaded)
NUMTHUNK_LIBFFI=DIR  libffi's prefix (DIR/include/ffi.h, the library in
                     DIR/lib), taken before any other (find_libffi)
"""

import glob
import os
import shutil
import subprocess
import sys

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# How to get libffi where the finder below looks, per platform (its error).
LIBFFI_HELP = """numthunk needs libffi's development files (ffi.h and the library) to build.
{searched}
Get libffi:
  Debian/Ubuntu:  apt-get install libffi-dev
  Fedora/RHEL:    dnf install libffi-devel
  macOS:          brew install libffi (found by `brew --prefix libffi`)
  Windows:        vcpkg install libffi:x64-windows (found under VCPKG_ROOT or
                  VCPKG_INSTALLATION_ROOT), or conda below
  conda, any:     conda install -c conda-forge libffi, in the active environment
                  (CONDA_PREFIX)
  elsewhere:      make pkg-config find it (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig),
                  or name its prefix: NUMTHUNK_LIBFFI=<prefix>"""


def _pkg_config(*args):
    if shutil.which("pkg-config") is None:
        return None
    try:
        out = subprocess.run(["pkg-config", *args, "libffi"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.split()


def _brew_prefix():
    """`brew --prefix libffi`: Homebrew's libffi wherever its prefix is."""
    if shutil.which("brew") is None:
        return None
    try:
        out = subprocess.run(["brew", "--prefix", "libffi"], check=True,
                             capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def _library(lib_dir, platform):
    """The name the linker is given for libffi in lib_dir, or None when it
    holds none: ffi for libffi.{so,dylib,a}; on Windows, ffi for ffi.lib
    (vcpkg's port, conda-forge) and libffi for libffi.lib (vcpkg's older
    port)."""
    if platform == "win32":
        names = [("ffi.lib", "ffi"), ("libffi.lib", "libffi")]
    else:
        names = [(f"libffi{ext}", "ffi") for ext in (".so", ".dylib", ".a")]
    for file, name in names:
        if os.path.isfile(os.path.join(lib_dir, file)):
            return name
    return None


def _prefixes(environ, platform):
    """The (include, lib) directories each platform keeps libffi in, in the
    order tried; lib None where the compiler's own search finds the library.
    On Linux the system's directories come first, as they always did, and
    conda's environment after them."""
    multiarch = getattr(sys.implementation, "_multiarch", "")
    conda = environ.get("CONDA_PREFIX")
    found = []
    if platform == "win32":
        if conda:
            found.append((os.path.join(conda, "Library", "include"),
                          os.path.join(conda, "Library", "lib")))
        triplets = [environ.get("VCPKG_DEFAULT_TRIPLET"), "x64-windows"]
        for var in ("VCPKG_ROOT", "VCPKG_INSTALLATION_ROOT"):
            root = environ.get(var)
            for triplet in filter(None, dict.fromkeys(triplets)):
                if root:
                    base = os.path.join(root, "installed", triplet)
                    found.append((os.path.join(base, "include"), os.path.join(base, "lib")))
        return found
    if platform == "darwin":
        brew = [_brew_prefix(), "/opt/homebrew/opt/libffi", "/usr/local/opt/libffi"]
        if conda:
            found.append((os.path.join(conda, "include"), os.path.join(conda, "lib")))
        found += [(os.path.join(p, "include"), os.path.join(p, "lib"))
                  for p in dict.fromkeys(filter(None, brew))]
    found += [(d, None) for d in [
        "/usr/include", f"/usr/include/{multiarch}", "/usr/local/include",
        "/opt/homebrew/opt/libffi/include", "/usr/local/opt/libffi/include",
        os.path.join(sys.prefix, "include")]]
    if conda and platform != "darwin":
        found.append((os.path.join(conda, "include"), os.path.join(conda, "lib")))
    return found


def find_libffi(environ=None, platform=None):
    """libffi for the extension: (include_dirs, library_dirs, libraries).

    The prefix NUMTHUNK_LIBFFI names, when set; else pkg-config's answer
    when it knows libffi; else the first of the places the platform keeps
    it (_prefixes) whose include directory holds ffi.h and whose library
    directory, where one is named, holds the library. None found:
    SystemExit with LIBFFI_HELP, naming where it looked."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    multiarch = getattr(sys.implementation, "_multiarch", "")
    prefix = environ.get("NUMTHUNK_LIBFFI")
    if prefix:
        include, lib = os.path.join(prefix, "include"), os.path.join(prefix, "lib")
        name = _library(lib, platform)
        if os.path.exists(os.path.join(include, "ffi.h")) and name is not None:
            return [include], [lib], [name]
        sys.exit(LIBFFI_HELP.format(
            searched=f"NUMTHUNK_LIBFFI={prefix}: no ffi.h in {include} with the library in {lib}."))
    cflags = _pkg_config("--cflags")
    libs = _pkg_config("--libs")
    if cflags is not None:
        include_dirs = [f[2:] for f in cflags if f.startswith("-I")]
        library_dirs = [f[2:] for f in libs or [] if f.startswith("-L")]
        libraries = [f[2:] for f in libs or [] if f.startswith("-l")] or ["ffi"]
        searched = include_dirs + ["/usr/include", f"/usr/include/{multiarch}"]
        if any(os.path.exists(os.path.join(d, "ffi.h")) for d in searched):
            return include_dirs, library_dirs, libraries
        sys.exit(LIBFFI_HELP.format(
            searched=f"pkg-config names libffi, but no ffi.h is in {', '.join(searched)}."))
    tried = []
    for include, lib in _prefixes(environ, platform):
        tried.append(include if lib is None else f"{include} (with {lib})")
        if not os.path.exists(os.path.join(include, "ffi.h")):
            continue
        if lib is None:
            return [include], [], ["ffi"]
        name = _library(lib, platform)
        if name is not None:
            return [include], [lib], [name]
    if not tried:
        searched = ("pkg-config does not know libffi, and none of CONDA_PREFIX, VCPKG_ROOT "
                    "and VCPKG_INSTALLATION_ROOT is set.")
    else:
        searched = ("pkg-config does not know libffi, and none of these holds ffi.h (and the "
                    f"library): {', '.join(tried)}.")
    sys.exit(LIBFFI_HELP.format(searched=searched))


def compile_args():
    """gcc's and clang's flags (Linux, macOS, mingw-w64)."""
    args = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]
    if sys.platform != "win32":
        args.append("-D_GNU_SOURCE")
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


def msvc_compile_args():
    """MSVC's flags: C11 (no GNU extension reaches it: src/portable.h),
    its own warning level, and the C library's POSIX names and plain
    string functions without deprecation warnings (strerror, getenv)."""
    args = ["/std:c11", "/O2", "/W3", "/D_CRT_SECURE_NO_WARNINGS",
            "/D_CRT_NONSTDC_NO_DEPRECATE"]
    if os.environ.get("NUMTHUNK_WERROR") == "1":
        args.append("/WX")
    if os.environ.get("NUMTHUNK_SANITIZE"):
        sys.exit("NUMTHUNK_SANITIZE builds with gcc or clang, not MSVC")
    return args


class BuildExt(build_ext):
    """The compile flags of the compiler setuptools picked: MSVC (on
    Windows, unless told otherwise) takes its own; gcc and clang take
    compile_args()."""

    def build_extensions(self):
        if self.compiler.compiler_type == "msvc":
            for ext in self.extensions:
                ext.extra_compile_args = msvc_compile_args()
                ext.extra_link_args = []
        super().build_extensions()


# The core is src/ by stage (docs/architecture.md, "The layout"). The
# platform files (src/engine/arch/*.c, src/engine/memory/*.c) are included
# by src/engine/choose.c's one #if chain, not compiled on their own.
INCLUDED = sorted(glob.glob("src/engine/arch/*.c") + glob.glob("src/engine/memory/*.c"))
SOURCES = sorted(p for p in glob.glob("src/**/*.c", recursive=True) if p not in INCLUDED)

ffi_inc, ffi_lib, ffi_libraries = find_libffi()
cargs, largs = compile_args()

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "numthunk._core",
            sources=SOURCES,
            depends=glob.glob("src/**/*.h", recursive=True) + INCLUDED,
            include_dirs=["src", numpy.get_include(), *ffi_inc],
            library_dirs=ffi_lib,
            libraries=ffi_libraries,
            extra_compile_args=cargs,
            extra_link_args=largs,
        )
    ],
)

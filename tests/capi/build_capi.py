"""Build the C API test modules in this directory against
numthunk.get_include(): ntcapi_ext.c (a plain C extension, the system C
compiler) and ntcapi_cy.pyx (Cython, cimporting numthunk.capi and
numthunk.dlpack).

The build goes to tests/_build/capi/<key>/, the key hashing the sources,
numthunk's public headers and .pxd files, and the Cython and Python
versions: a session reuses a finished build, never a stale one.

    python tests/capi/build_capi.py     # build (or reuse) and print the path
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_ROOT = os.path.join(os.path.dirname(HERE), "_build", "capi")
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))     # tests/, for ntbuild
from ntbuild import compile_extension, compiler_env, extension_toolchain  # noqa: E402

SOURCES = ["ntcapi_ext.c", "ntcapi_cy.pyx"]


def _numthunk_files():
    import numthunk
    pkg = os.path.dirname(os.path.abspath(numthunk.__file__))
    inc = numthunk.get_include()
    files = [os.path.join(pkg, f) for f in ("capi.pxd", "dlpack.pxd")]
    files += [os.path.join(inc, "numthunk", f) for f in ("capi.h", "dlpack.h")]
    return os.path.dirname(pkg), inc, files


def _key(files):
    import Cython
    h = hashlib.sha256()
    h.update(f"{Cython.__version__} {sys.version} {sys.platform}".encode())
    for path in [os.path.join(HERE, s) for s in SOURCES] + files:
        h.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read() + b"\0")
    return h.hexdigest()[:16]


def _run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=compiler_env())
    if p.returncode != 0:
        raise RuntimeError(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}")


def build():
    """Build if needed; return the directory to put on sys.path."""
    pkg_parent, inc, files = _numthunk_files()
    target = os.path.join(BUILD_ROOT, _key(files))
    if os.path.exists(os.path.join(target, ".done")):
        return target
    os.makedirs(BUILD_ROOT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tmp-", dir=BUILD_ROOT)
    try:
        for s in SOURCES:
            shutil.copy2(os.path.join(HERE, s), os.path.join(work, s))
        suffix = extension_toolchain()[1]
        # Cython finds numthunk/*.pxd through -I (the directory holding the
        # package), the C compiler numthunk/*.h through get_include().
        _run([sys.executable, "-m", "cython", "-3", "--fast-fail", "-I", pkg_parent,
              "ntcapi_cy.pyx"], work)
        compile_extension(["ntcapi_ext.c"], "ntcapi_ext" + suffix, [inc], cwd=work)
        compile_extension(["ntcapi_cy.c"], "ntcapi_cy" + suffix, [inc], strict=False, cwd=work)
        open(os.path.join(work, ".done"), "w").close()
        try:
            os.rename(work, target)
        except OSError:
            if not os.path.exists(os.path.join(target, ".done")):
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    print(build())

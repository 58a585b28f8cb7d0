"""Compile the Cython test kernels in this directory (Cython from PyPI and
the system C compiler; setuptools is not needed).

The build goes to tests/_build/cython/<key>/, where the key hashes the kernel
sources and the Cython, NumPy and Python versions: a session reuses a
finished build and never a stale one. The kernels are copied there with
their .pxd files, so the compiled modules sit next to their sources as
installed Cython packages do (numthunk.cython reads ctypedefs from them).

    python tests/cython/build_kernels.py     # build (or reuse) and print the path
"""

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_ROOT = os.path.join(os.path.dirname(HERE), "_build", "cython")
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))     # tests/, for ntbuild
from ntbuild import compiler_env, extension_toolchain  # noqa: E402

SOURCE_EXT = (".pyx", ".pxd", ".py")


def _run_all(commands, cwd):
    """Run the commands in parallel; raise with the output of any failure."""
    procs = [(cmd, subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True,
                                    env=compiler_env()))
             for cmd in commands]
    failed = []
    for cmd, p in procs:
        out = p.communicate()[0]
        if p.returncode != 0:
            failed.append(f"$ {' '.join(cmd)}\n{out}")
    if failed:
        raise RuntimeError("compiling the Cython test kernels failed:\n" + "\n".join(failed))


def _compile(work, pyx_files):
    """.pyx -> .c with Cython's compiler, then .c -> extension module with the
    C compiler, in parallel (no setuptools needed)."""
    import numpy

    # One Cython process for all: the .pxd files (NumPy's is large) are
    # parsed once.
    _run_all([[sys.executable, "-m", "cython", "-3", "--fast-fail", "-I", work,
               *pyx_files]], work)
    cc, suffix, link = extension_toolchain()
    flags = ["-O0", "-w", "-fPIC", "-I", sysconfig.get_paths()["include"],
             "-I", numpy.get_include(), "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION"]
    _run_all([[*cc, *flags, rel[:-4] + ".c", "-o", rel[:-4] + suffix, *link]
              for rel in pyx_files], work)


def _sources():
    found = []
    for root, dirs, files in os.walk(HERE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(SOURCE_EXT) and f != os.path.basename(__file__):
                found.append(os.path.relpath(os.path.join(root, f), HERE))
    return found


def _key(sources):
    import Cython
    import numpy

    h = hashlib.sha256()
    h.update(f"{Cython.__version__} {numpy.__version__} {sys.version} {sys.platform}".encode())
    for rel in sources + [os.path.basename(__file__)]:
        h.update(rel.encode() + b"\0")
        with open(os.path.join(HERE, rel), "rb") as f:
            h.update(f.read() + b"\0")
    return h.hexdigest()[:16]


def build():
    """Build the kernels if needed; return (directory to put on sys.path,
    seconds spent compiling, 0.0 when reused)."""
    sources = _sources()
    target = os.path.join(BUILD_ROOT, _key(sources))
    if os.path.exists(os.path.join(target, ".done")):
        return target, 0.0
    os.makedirs(BUILD_ROOT, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tmp-", dir=BUILD_ROOT)
    try:
        for rel in sources:
            os.makedirs(os.path.join(work, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(HERE, rel), os.path.join(work, rel))
        start = time.perf_counter()
        _compile(work, [rel for rel in sources if rel.endswith(".pyx")])
        elapsed = time.perf_counter() - start
        with open(os.path.join(work, ".done"), "w") as f:
            f.write(f"{elapsed:.2f}\n")
        try:
            os.rename(work, target)
        except OSError:
            # Another session finished the same build first: use theirs.
            if not os.path.exists(os.path.join(target, ".done")):
                raise
        return target, elapsed
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    path, seconds = build()
    print(path, f"{seconds:.1f}s")

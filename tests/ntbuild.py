"""Builds the extra fixture libraries (C and x86-64 assembly) of the tests
that own them, into tests/_build, with the system C compiler."""

import ctypes
import os
import shutil
import subprocess
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "_build")


def compiler():
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        raise RuntimeError(f"C compiler {cc!r} not found: the tests need one")
    return cc


def build(source, name, extra=()):
    """Compile fixtures/<source> (C or .S) into a shared library; its path."""
    cc = compiler()
    os.makedirs(BUILD, exist_ok=True)
    out = os.path.join(BUILD, f"{name}-{os.path.basename(cc)}.so")
    src = os.path.join(HERE, "fixtures", source)
    std = [] if source.endswith(".S") else ["-std=c11", "-Wall", "-Wextra", "-Werror"]
    subprocess.run([cc, "-O2", "-shared", "-fPIC", *std, *extra, "-o", out, src], check=True)
    return out


def load(source, name):
    return ctypes.CDLL(build(source, name))


def address(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
